//! The fixtures of managed runtimes (issue 14, item 6): `go version`,
//! `java -version` and `node -e`, recorded with format version 2. They
//! hold the calls the model is gaining, each with its arguments, and the
//! replay reports those as not modelled, by name.

use std::collections::BTreeMap;

use mm::IndexKind;
use vmtrace::format::{Event, Hex, Ret};
use vmtrace::{Limits, Trace};

fn load(name: &str) -> Trace {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let trace = Trace::load(&path).unwrap();
    assert_eq!(trace.version, 2, "{name}");
    assert_eq!(trace.status, "exit 0", "{name}");
    trace
}

/// The replay's count of unmodelled calls, by name, checked against the
/// trace's events, and its number of differences. Every name must be one
/// of `allowed` (the calls the model is gaining; as it gains them, they
/// leave the count).
fn unmodelled(trace: &Trace, index: IndexKind, allowed: &[&str]) -> usize {
    let outcome = vmtrace::replay(trace, index, &Limits::default()).unwrap();
    let mut expected = BTreeMap::new();
    for e in &trace.events {
        if let Some((name, _)) = e.unmodelled() {
            *expected.entry(name).or_insert(0) += 1;
        }
    }
    assert_eq!(outcome.not_modelled, expected);
    assert_eq!(outcome.finals, outcome.spaces);
    for name in outcome.not_modelled.keys() {
        assert!(allowed.contains(&name.as_str()), "{name} is not modelled");
    }
    outcome.diffs.len()
}

fn madvices(trace: &Trace) -> Vec<u64> {
    trace
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Madvise {
                advice: Hex(a),
                ret: Ret(0),
                ..
            } => Some(*a),
            _ => None,
        })
        .collect()
}

/// Go's runtime marks its heap arenas `MADV_NOHUGEPAGE` (which splits a
/// VMA in the kernel: the difference this fixture replays with until the
/// model has `madvise`) and names its metadata mappings, which this
/// kernel (built without `CONFIG_ANON_VMA_NAME`) refuses with `EINVAL`.
#[test]
fn go_names_its_mappings_and_refuses_huge_pages() {
    let trace = load("go-version.json");
    assert_eq!(madvices(&trace), [15, 15]);
    let names: Vec<_> = trace
        .events
        .iter()
        .filter_map(|e| match e {
            Event::SetVmaAnonName { name, ret, .. } => Some((name.clone(), *ret)),
            _ => None,
        })
        .collect();
    assert_eq!(names, [(Some(" Go: immortal metadata".into()), Ret(-22))]);
    for index in [IndexKind::Maple, IndexKind::Legacy] {
        unmodelled(&trace, index, &["madvise", "prctl(PR_SET_VMA_ANON_NAME)"]);
    }
}

/// The JVM frees memory with `MADV_DONTNEED`; nothing else it does
/// escapes the model, and the replay has no difference.
#[test]
fn java_replays_with_no_difference() {
    let trace = load("java-version.json");
    assert!(madvices(&trace).iter().all(|&a| a == 4));
    for index in [IndexKind::Maple, IndexKind::Legacy] {
        assert_eq!(unmodelled(&trace, index, &["madvise"]), 0);
    }
}

/// V8 keeps memory from its forks (`MADV_DONTFORK`), frees pages
/// (`MADV_DONTNEED`) and asks for a protection key, which this CPU has
/// none of (`EINVAL`).
#[test]
fn node_forks_nothing_and_asks_for_a_key() {
    let trace = load("node-e.json");
    let advices = madvices(&trace);
    assert!(advices.contains(&10) && advices.contains(&4), "{advices:?}");
    assert!(trace
        .events
        .iter()
        .any(|e| matches!(e, Event::PkeyAlloc { ret: Ret(-22), .. })));
    for index in [IndexKind::Maple, IndexKind::Legacy] {
        assert_eq!(unmodelled(&trace, index, &["madvise", "pkey_alloc"]), 0);
    }
}

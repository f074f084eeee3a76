//! A hostile trace cannot make a replay build without bound: each limit
//! stops it with a one-line error that names the option raising it, and a
//! trace within the limits replays as before.

use mm::IndexKind;
use serde_json::{json, Value};
use vmtrace::{Limits, Trace};

const LS: &str = include_str!("fixtures/ls.json");

/// `ls.json` with `forks` appended: `(parent, child)` space numbers.
fn with_forks(forks: impl IntoIterator<Item = (u64, u64)>) -> Trace {
    let mut trace: Value = serde_json::from_str(LS).unwrap();
    let events = trace["events"].as_array_mut().unwrap();
    for (k, (parent, space)) in forks.into_iter().enumerate() {
        events.push(json!({"ev": "fork", "parent": parent, "space": space, "pid": 5000 + k}));
    }
    Trace::parse(&trace.to_string()).unwrap()
}

/// The address space that exec'd `ls` (the fixture's last exec).
fn ls_space() -> u64 {
    let trace = Trace::parse(LS).unwrap();
    trace
        .events
        .iter()
        .rev()
        .find_map(|e| match e {
            vmtrace::format::Event::Exec { space, .. } => Some(*space as u64),
            _ => None,
        })
        .unwrap()
}

fn refused(trace: &Trace, limits: &Limits, option: &str) {
    let e = vmtrace::replay(trace, IndexKind::Maple, limits).unwrap_err();
    assert!(e.0.contains(option) && !e.0.contains('\n'), "{e}");
}

#[test]
fn a_fork_chain_deeper_than_the_limit_is_refused() {
    let root = ls_space();
    let chain =
        |n: u64| with_forks((0..n).map(|k| (if k == 0 { root } else { 1000 + k - 1 }, 1000 + k)));
    let limits = Limits {
        max_fork_depth: 8,
        ..Limits::default()
    };
    refused(&chain(9), &limits, "--max-fork-depth");
    let outcome = vmtrace::replay(&chain(8), IndexKind::Maple, &limits).unwrap();
    // Forked spaces have no final map of their own; that is replay's
    // verdict to give, not a limit.
    assert_eq!(outcome.unfinished.len(), 8);
}

#[test]
fn more_address_spaces_than_the_limit_are_refused() {
    let root = ls_space();
    let fan = |n: u64| with_forks((0..n).map(|k| (root, 1000 + k)));
    let built = vmtrace::replay(&fan(0), IndexKind::Maple, &Limits::default())
        .unwrap()
        .spaces;
    let limits = Limits {
        max_spaces: built + 5,
        ..Limits::default()
    };
    refused(&fan(6), &limits, "--max-spaces");
    assert_eq!(
        vmtrace::replay(&fan(5), IndexKind::Legacy, &limits)
            .unwrap()
            .spaces,
        built + 5
    );
}

#[test]
fn more_vmas_than_the_limit_are_refused_before_the_fork_copies_them() {
    let root = ls_space();
    // VMAs of every address space, and of the one the fork will copy.
    let plain = vmtrace::replay(&with_forks([]), IndexKind::Maple, &Limits::default()).unwrap();
    let count = |(_, maps): &(usize, String)| maps.lines().count();
    let vmas: usize = plain.model_maps.iter().map(count).sum();
    let ls_vmas = plain
        .model_maps
        .iter()
        .find(|(s, _)| *s as u64 == root)
        .map(count)
        .unwrap();
    // The fork would double the VMAs of the ls address space: one VMA
    // short of room for it is refused, exactly room for it is not.
    let forked = with_forks([(root, 1000)]);
    let limits = Limits {
        max_vmas: vmas + ls_vmas - 1,
        ..Limits::default()
    };
    refused(&forked, &limits, "--max-vmas");
    let limits = Limits {
        max_vmas: vmas + ls_vmas,
        ..Limits::default()
    };
    vmtrace::replay(&forked, IndexKind::Maple, &limits).unwrap();
}

#[test]
fn the_fixture_replays_within_the_default_limits() {
    let outcome = vmtrace::replay(
        &Trace::parse(LS).unwrap(),
        IndexKind::Maple,
        &Limits::default(),
    )
    .unwrap();
    assert!(outcome.diffs.is_empty(), "{:?}", outcome.diffs);
    assert!(outcome.unfinished.is_empty() && outcome.finals > 0);
}

/// A trace's names reach the report escaped: a hostile trace cannot send
/// terminal escape sequences through `vmbench replay`.
#[test]
fn control_characters_in_a_trace_are_escaped_in_the_report() {
    let mut trace: Value = serde_json::from_str(LS).unwrap();
    let root = ls_space();
    trace["events"].as_array_mut().unwrap().push(json!({
        "ev": "other", "space": root, "pid": 1, "name": "evil\u{1b}[2J\u{7}", "args": [], "ret": "0x0"
    }));
    let trace = Trace::parse(&trace.to_string()).unwrap();
    let outcome = vmtrace::replay(&trace, IndexKind::Maple, &Limits::default()).unwrap();
    let note = outcome.notes.iter().find(|n| n.contains("evil")).unwrap();
    assert!(!note.chars().any(char::is_control), "{note:?}");
    assert!(note.contains("evil\\u{1b}[2J\\u{7}"), "{note}");
}

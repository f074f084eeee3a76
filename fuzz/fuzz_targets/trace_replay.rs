//! `trace_replay`: traces are untrusted input (people replay traces others
//! recorded), so parsing and replaying any byte string must end in a result
//! or a one-line error, within bounded time and memory.
//!
//! An input is read one of two ways, chosen by its first byte:
//!
//! * **raw**: the rest is the trace's text, as `vmbench replay` would read
//!   it from a file. This finds what a hand-edited or truncated file does
//!   to the parser.
//! * **structure-aware**: the rest chooses one of the committed fixture
//!   traces (real programs, `crates/vmtrace/tests/fixtures`) and a list of
//!   edits to its JSON: events deleted, duplicated, moved or cut off,
//!   fields set to boundary values, fork chains and fork fans appended,
//!   sysctls and file sizes changed, map lines replaced. Random bytes almost
//!   never parse as a trace, so this is what reaches the replay itself with
//!   traces that are nearly right: the hostile ones that matter.
//!
//! Checked: every error is one line; a fixture with no edit still replays
//! with no difference and a final map for every address space; a trace that
//! asks for more than the replay's [`vmtrace::Limits`] stops with a
//! `LimitExceeded` instead of allocating. Memory and time are bounded by
//! libFuzzer's `-rss_limit_mb` and `-timeout`:
//!
//! ```text
//! ASAN_OPTIONS=quarantine_size_mb=64 \
//! cargo +nightly fuzz run trace_replay fuzz/corpus/trace_replay -- \
//!     -rss_limit_mb=512 -timeout=10 -max_total_time=600
//! ```
//!
//! The limits used here are the CLI's defaults scaled down (the defaults
//! admit up to about 700 MB of model), so that what one input may build
//! is a few megabytes. AddressSanitizer's quarantine of freed memory is
//! cut to 64 MB: at its default 256 MB, with ASan's per-size caches, the
//! process passes 512 MB while its live heap is about 30 MB.

#![no_main]

use std::sync::OnceLock;

use arbitrary::{Arbitrary, Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use mm::IndexKind;
use serde_json::{json, Value};
use vmtrace::{Limits, Trace};

const FIXTURES: [&str; 8] = [
    include_str!("../../crates/vmtrace/tests/fixtures/ls.json"),
    include_str!("../../crates/vmtrace/tests/fixtures/sh-pipeline.json"),
    include_str!("../../crates/vmtrace/tests/fixtures/perl-threads.json"),
    include_str!("../../crates/vmtrace/tests/fixtures/anon-vma.json"),
    include_str!("../../crates/vmtrace/tests/fixtures/edge-cases.json"),
    // Runtimes: JVM threads, madvise, pkey_alloc, PR_SET_VMA_ANON_NAME.
    include_str!("../../crates/vmtrace/tests/fixtures/java-version.json"),
    include_str!("../../crates/vmtrace/tests/fixtures/node-e.json"),
    include_str!("../../crates/vmtrace/tests/fixtures/go-version.json"),
];

const LIMITS: Limits = Limits {
    max_spaces: 256,
    max_vmas: 1 << 13,
    max_fork_depth: 32,
};

/// The fixtures as JSON values, parsed once.
fn fixtures() -> &'static [Value] {
    static PARSED: OnceLock<Vec<Value>> = OnceLock::new();
    PARSED.get_or_init(|| {
        FIXTURES
            .iter()
            .map(|t| serde_json::from_str(t).expect("the fixtures are JSON"))
            .collect()
    })
}

/// A value worth trying in a numeric field: the boundaries where
/// arithmetic on addresses and lengths overflows, page edges, and the
/// sizes a hostile trace would ask for.
#[derive(Debug, Arbitrary)]
enum Number {
    Any(u64),
    Small(u8),
    Page(u16),
    Edge(u8),
}

impl Number {
    fn value(&self) -> u64 {
        const EDGES: [u64; 12] = [
            0,
            1,
            0xfff,
            0x1000,
            0x7fff_ffff_f000,
            0x8000_0000_0000,
            1 << 40,
            u64::MAX,
            u64::MAX - 0xfff,
            i64::MAX as u64,
            i64::MIN as u64,
            u32::MAX as u64,
        ];
        match *self {
            Number::Any(v) => v,
            Number::Small(v) => u64::from(v),
            Number::Page(p) => u64::from(p) << 12,
            Number::Edge(i) => EDGES[usize::from(i) % EDGES.len()],
        }
    }
}

/// What a field is set to.
#[derive(Debug, Arbitrary)]
enum NewValue {
    Hex(Number),
    Int(Number),
    Negative(i64),
    Bool(bool),
    Errno(u16),
    Text(String),
    Null,
    EmptyList,
}

impl NewValue {
    fn json(&self) -> Value {
        match self {
            NewValue::Hex(n) => json!(format!("{:#x}", n.value())),
            NewValue::Int(n) => json!(n.value()),
            NewValue::Negative(v) => json!(v),
            NewValue::Bool(b) => json!(b),
            NewValue::Errno(e) => json!(format!("-{e}")),
            NewValue::Text(t) => json!(t),
            NewValue::Null => Value::Null,
            NewValue::EmptyList => json!([]),
        }
    }
}

/// One edit of a fixture. Indexes are taken modulo the list they index.
#[derive(Debug, Arbitrary)]
enum Edit {
    Delete(u16),
    Duplicate {
        from: u16,
        to: u16,
    },
    Swap(u16, u16),
    Truncate(u16),
    SetField {
        event: u16,
        field: u8,
        value: NewValue,
    },
    SetTop {
        field: u8,
        value: NewValue,
    },
    SetFile {
        file: u16,
        field: u8,
        value: NewValue,
    },
    ReplaceMapLine {
        event: u16,
        line: u16,
        text: String,
    },
    /// `count` forks, each the child of the one before.
    ForkChain {
        parent: u8,
        count: u16,
    },
    /// `count` forks of the same parent.
    ForkFan {
        parent: u8,
        count: u16,
    },
    /// The same call, many times (a program in a loop).
    Repeat {
        event: u16,
        count: u16,
    },
}

fn pick(len: usize, i: u16) -> Option<usize> {
    (len > 0).then(|| usize::from(i) % len)
}

fn set_key(object: &mut Value, field: u8, value: &NewValue) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let keys: Vec<String> = map.keys().cloned().collect();
    if let Some(k) = pick(keys.len(), u16::from(field)) {
        map.insert(keys[k].clone(), value.json());
    }
}

/// The highest space number in use, so appended forks make new ones.
fn next_space(events: &[Value]) -> u64 {
    events
        .iter()
        .filter_map(|e| e.get("space").and_then(Value::as_u64))
        .max()
        .map_or(0, |s| s.saturating_add(1))
}

/// Events the edits of one input may append together: enough to pass
/// every limit above, few enough that the harness's own JSON stays small
/// (an exec event of a fixture is up to 30 KB).
const MAX_APPENDED: usize = 1024;

fn apply(trace: &mut Value, edit: &Edit, appended: &mut usize) {
    match edit {
        Edit::SetTop { field, value } => {
            if field % 2 == 0 {
                if let Some(sysctl) = trace.get_mut("sysctl") {
                    set_key(sysctl, field / 2, value);
                }
            } else {
                set_key(trace, field / 2, value);
            }
            return;
        }
        Edit::SetFile { file, field, value } => {
            if let Some(files) = trace.get_mut("files").and_then(Value::as_array_mut) {
                if let Some(f) = pick(files.len(), *file) {
                    set_key(&mut files[f], *field, value);
                }
            }
            return;
        }
        _ => {}
    }
    let Some(events) = trace.get_mut("events").and_then(Value::as_array_mut) else {
        return;
    };
    let len = events.len();
    match edit {
        Edit::Delete(i) => {
            if let Some(i) = pick(len, *i) {
                events.remove(i);
            }
        }
        Edit::Duplicate { from, to } => {
            if let (Some(from), Some(to)) = (pick(len, *from), pick(len + 1, *to)) {
                let e = events[from].clone();
                events.insert(to, e);
            }
        }
        Edit::Swap(a, b) => {
            if let (Some(a), Some(b)) = (pick(len, *a), pick(len, *b)) {
                events.swap(a, b);
            }
        }
        Edit::Truncate(n) => events.truncate(usize::from(*n) % (len + 1)),
        Edit::SetField {
            event,
            field,
            value,
        } => {
            if let Some(i) = pick(len, *event) {
                set_key(&mut events[i], *field, value);
            }
        }
        Edit::ReplaceMapLine { event, line, text } => {
            if let Some(i) = pick(len, *event) {
                let key = if events[i].get("smaps").is_some() {
                    "smaps"
                } else {
                    "maps"
                };
                let lines = events[i].get_mut(key).and_then(Value::as_array_mut);
                if let Some(lines) = lines {
                    if let Some(l) = pick(lines.len(), *line) {
                        match &mut lines[l] {
                            Value::Object(o) => {
                                o.insert("map".into(), json!(text));
                            }
                            other => *other = json!(text),
                        }
                    }
                }
            }
        }
        Edit::ForkChain { parent, count } | Edit::ForkFan { parent, count } => {
            let chain = matches!(edit, Edit::ForkChain { .. });
            let first = next_space(events);
            let mut parent = u64::from(*parent);
            let count = usize::from(*count).min(MAX_APPENDED - *appended);
            *appended += count;
            for k in 0..count as u64 {
                let space = first + k;
                events
                    .push(json!({"ev": "fork", "parent": parent, "space": space, "pid": 1000 + k}));
                if chain {
                    parent = space;
                }
            }
        }
        Edit::Repeat { event, count } => {
            if let Some(i) = pick(len, *event) {
                // Repeating an exec copies its whole map: counted by lines.
                let lines = events[i]
                    .get("smaps")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let count = usize::from(*count).min((MAX_APPENDED - *appended) / (1 + lines));
                *appended += count * (1 + lines);
                let e = events[i].clone();
                for _ in 0..count {
                    events.push(e.clone());
                }
            }
        }
        Edit::SetTop { .. } | Edit::SetFile { .. } => unreachable!("handled above"),
    }
}

fn one_line(what: &str, e: &str) {
    assert!(
        !e.is_empty() && !e.contains('\n'),
        "{what} error is not one line: {e:?}"
    );
}

fn replay_text(text: &str, index: IndexKind) -> Option<vmtrace::Outcome> {
    let trace = match Trace::parse(text) {
        Ok(t) => t,
        Err(e) => {
            one_line("parse", &e);
            return None;
        }
    };
    match vmtrace::replay(&trace, index, &LIMITS) {
        Ok(outcome) => Some(outcome),
        Err(e) => {
            one_line("limit", &e.0);
            None
        }
    }
}

fn structured(u: &mut Unstructured) -> Result<()> {
    let fixture = usize::from(u.arbitrary::<u8>()?) % FIXTURES.len();
    let index = if u.arbitrary::<bool>()? {
        IndexKind::Maple
    } else {
        IndexKind::Legacy
    };
    let edits: Vec<Edit> = u.arbitrary_iter()?.take(16).collect::<Result<_>>()?;
    let mut trace = fixtures()[fixture].clone();
    let mut appended = 0;
    for e in &edits {
        apply(&mut trace, e, &mut appended);
    }
    let text = serde_json::to_string(&trace).expect("a JSON value serialises");
    let outcome = replay_text(&text, index);
    if edits.is_empty() {
        // The fixtures replay cleanly (tests/trace.rs says so too); the
        // round trip through serde_json must not change that.
        let o = outcome.expect("an unedited fixture replays");
        assert!(
            o.diffs.is_empty(),
            "unedited fixture {fixture}: {:?}",
            o.diffs
        );
        assert!(o.finals > 0 && o.unfinished.is_empty());
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let text = String::from_utf8_lossy(rest);
        replay_text(&text, IndexKind::Maple);
    } else {
        let _ = structured(&mut Unstructured::new(rest));
    }
});

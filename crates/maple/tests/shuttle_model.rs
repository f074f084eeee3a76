//! Model test of the reader/writer protocol with shuttle, which explores
//! thread interleavings at every atomic operation of the real tree code.
//!
//! Run with `RUSTFLAGS="--cfg vmscale_shuttle" cargo test -p vmscale-maple --test
//! shuttle_model --release` (`.ci/run` does). In that configuration the
//! tree's atomics and writer lock are shuttle's, and replaced nodes are
//! never freed, so what is checked is the protocol itself: copy, publish
//! with one store, mark the old node dead, readers restart.
//!
//! Properties checked in every explored schedule:
//! * a reader only ever sees, at an index, a value that the writer stored
//!   there at some point (never a torn or foreign value);
//! * freshness: once a reader has seen the effect of write k, later walks
//!   from the root on that thread never show the state from before write
//!   k; a cursor continuing from its cached leaf may still show it while
//!   write k is in flight (the writer publishes first and marks the
//!   replaced leaf dead when the write finishes, as the kernel does), but
//!   never once write k has finished;
//! * iteration moves strictly forward: each entry ends after the previous
//!   one (entries read at different moments of a concurrent write may
//!   overlap, as with the kernel's RCU walks; each was current when read);
//! * after the writer finishes, the tree validates and holds exactly the
//!   final state.
//!
//! A second model (`in_place_*`) drives each in-place write of a shared
//! writer (`write.rs`, "In-place writes"): a slot store, a pivot move, an
//! append into the leaf's tail, an insert in the middle and an erase that
//! merges absent ranges, all in one published leaf. Readers there check
//! that every entry they see, with its whole range, is the entry at that
//! index in one of the states the writer passed through, and never one
//! older than what they saw before.
//!
//! The first model's writer also splits a leaf by inserting and merges
//! and evens out leaves by erasing (`write.rs`, `replace_leaves`: two
//! leaves and their parent copied, one publication); readers check that
//! entries beside those changes are always there, whole.
//!
//! The mutation checks (`.ci/run` runs each and expects the failure):
//! with `--cfg vmscale_mutant="unsequenced"` the shared in-place writes
//! skip the leaf's sequence count, and the `in_place_*` tests must fail;
//! with `--cfg vmscale_mutant="siblings_in_place"` a shared writer
//! rebuilds sibling leaves and their parent in place, as only an
//! exclusive one may, and the `publish_dead_*` tests must fail.
#![cfg(vmscale_shuttle)]

use maple::{Entry, MapleTree};
use shuttle::sync::atomic::{AtomicU64, Ordering};
use shuttle::thread;
use std::sync::Arc;

/// An entry as `(first, last, value)`, the shape the checks compare.
fn parts<R>(e: Entry<R>) -> (u64, u64, R) {
    (e.first(), e.last(), e.value())
}

/// Entries `i` cover `[10i, 10i + 4]`, value `i`; enough of them for a
/// two-level tree, so writes split, merge and publish into parents.
const N: u64 = 24;

/// The writer's script. Each step's effect on index `probe` is what a
/// reader may observe; `(version, expected value at probe)`.
/// `finished` counts the steps that have returned (so their replaced nodes
/// are marked dead).
fn writer(tree: &MapleTree<u64>, finished: &AtomicU64) {
    let mut w = tree.write();
    // Step 1: overwrite entry 3 over its exact range (a slot store).
    w.store_range(30..=34, 1003).unwrap();
    finished.store(1, Ordering::Release);
    // Step 2: a store spanning several leaves (parents rebuilt).
    w.store_range(52..=171, 2000).unwrap();
    // Step 3: erase entry 3 again (absent ranges merge).
    w.erase(32);
    // Step 4: fill many slots of one leaf to force a split.
    for k in 0..6 {
        w.store_range(200 + k * 2..=200 + k * 2, 3000 + k).unwrap();
    }
    // Step 5: inserts into the holes between entries 0..4 until their
    // leaf splits under its parent (the insert path's own split, which a
    // shared writer makes by copying the two leaves and the parent).
    for k in 0..4 {
        w.insert_range(10 * k + 6..=10 * k + 7, 5000 + k).unwrap();
    }
    // Step 6: erases that leave a leaf below its minimum, so it merges
    // with or evens out against its sibling (the erase path's own).
    // (Entry 0 stays: readers start from it.)
    for k in 1..3 {
        assert_eq!(w.erase(10 * k), Some(10 * k..=10 * k + 4));
        assert_eq!(w.erase(10 * k + 6), Some(10 * k + 6..=10 * k + 7));
    }
}

fn model() {
    let tree = Arc::new(MapleTree::<u64>::new());
    {
        let mut w = tree.write();
        for i in 0..N {
            w.store_range(10 * i..=10 * i + 4, i).unwrap();
        }
    }
    let finished = Arc::new(AtomicU64::new(0));
    let (t, f) = (Arc::clone(&tree), Arc::clone(&finished));
    let wr = thread::spawn(move || writer(&t, &f));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let tree = Arc::clone(&tree);
            let finished = Arc::clone(&finished);
            thread::spawn(move || {
                let guard = maple::pin();
                // A cursor caches its leaf. Once a write has finished (its
                // replaced leaf marked dead), continuing from the cached
                // leaf must not show the state from before it: the dead
                // mark forces a fresh walk.
                let mut cursor = tree.cursor(0, &guard);
                assert_eq!(cursor.next().map(parts), Some((0, 4, &0)));
                let seen_before = tree.load(32, &guard).copied();
                let step1_done = finished.load(Ordering::Acquire) >= 1;
                loop {
                    let (first, last, v) = cursor.next().map(parts).expect("entries remain");
                    if last < 30 {
                        continue;
                    }
                    match (seen_before, first, *v) {
                        (Some(3), 30, 3 | 1003) | (Some(1003), 30, 1003) => {}
                        // Step 1 published but not finished: the cached
                        // leaf is not marked dead yet.
                        (Some(1003), 30, 3) if !step1_done => {}
                        (Some(3) | Some(1003) | None, f, _) if f > 34 => {}
                        other => panic!("cursor stale after seeing {seen_before:?}: {other:?}"),
                    }
                    break;
                }
                // Index 32: 3 -> 1003 -> absent. Never back once moved on.
                let mut stage = 0;
                for _ in 0..3 {
                    let seen = tree.load(32, &guard).copied();
                    let now = match seen {
                        Some(3) => 0,
                        Some(1003) => 1,
                        None => 2,
                        other => panic!("reader saw {other:?} at 32"),
                    };
                    assert!(now >= stage, "stale read at 32: stage {now} after {stage}");
                    stage = now;
                    // Index 100 lies inside the spanning store.
                    match tree.load(100 + r, &guard).copied() {
                        Some(10) | Some(2000) => {}
                        other => panic!("reader saw {other:?} at 100"),
                    }
                    // Entries no step touches, in the leaves that steps 5
                    // and 6 split and merge: always there, whole.
                    for (index, value) in [(42, 4), (182, 18)] {
                        let e = tree.load_entry(index, &guard).map(parts);
                        let want = (index - 2, index + 2, &value);
                        assert_eq!(e, Some(want), "reader lost a stable entry");
                    }
                    let mut prev_last: Option<u64> = None;
                    for (first, last, _) in tree.iter(&guard).map(parts) {
                        assert!(first <= last);
                        assert!(
                            prev_last.is_none_or(|p| last > p),
                            "iteration went backwards"
                        );
                        prev_last = Some(last);
                    }
                }
            })
        })
        .collect();
    wr.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    tree.validate().unwrap();
    let guard = maple::pin();
    assert_eq!(tree.load(32, &guard), None);
    assert_eq!(tree.load(100, &guard), Some(&2000));
    assert_eq!(tree.load(204, &guard), Some(&3002));
    for k in 1..3 {
        assert_eq!(tree.load(10 * k, &guard), None);
        assert_eq!(tree.load(10 * k + 6, &guard), None);
    }
    assert_eq!(tree.load(6, &guard), Some(&5000));
    assert_eq!(tree.load(36, &guard), Some(&5003));
}

#[test]
fn publish_dead_restart_random() {
    shuttle::check_random(model, 3000);
}

#[test]
fn publish_dead_restart_pct() {
    shuttle::check_pct(model, 3000, 3);
}

/// One write of the in-place model's script.
#[derive(Clone, Copy, Debug)]
enum Op {
    Store(u64, u64, u64),
    EraseRange(u64, u64),
    Erase(u64),
}

/// The in-place model's script; each step is a different in-place path
/// on the tree's single leaf (entries `[10i, 10i + 4] = i`, `i < 6`).
const SCRIPT: [Op; 5] = [
    Op::Store(20, 24, 102), // slot store: same range, new value
    Op::EraseRange(33, 34), // pivot move: entry 3 shrinks to [30, 32]
    Op::Store(56, 58, 300), // append into the tail's absent range
    Op::Store(42, 43, 400), // insert in the middle: slots shift
    Op::Erase(12),          // erase entry 1: three ranges become one
];

/// The reference: entries `(first, last, value)` in order.
type State = Vec<(u64, u64, u64)>;

fn initial() -> State {
    (0..6).map(|i| (10 * i, 10 * i + 4, i)).collect()
}

/// Makes `[lo, hi]` absent in the reference, trimming what sticks out.
fn cut(state: &mut State, lo: u64, hi: u64) {
    let mut out = Vec::new();
    for &(a, b, v) in state.iter() {
        if b < lo || a > hi {
            out.push((a, b, v));
            continue;
        }
        if a < lo {
            out.push((a, lo - 1, v));
        }
        if b > hi {
            out.push((hi + 1, b, v));
        }
    }
    *state = out;
}

fn apply(state: &mut State, op: Op) {
    match op {
        Op::Store(a, b, v) => {
            cut(state, a, b);
            state.push((a, b, v));
            state.sort_unstable();
        }
        Op::EraseRange(a, b) => cut(state, a, b),
        Op::Erase(i) => state.retain(|&(a, b, _)| i < a || i > b),
    }
}

/// Every state the writer passes through, the initial one first.
fn states() -> Vec<State> {
    let mut all = vec![initial()];
    for op in SCRIPT {
        let mut next = all.last().expect("at least the initial state").clone();
        apply(&mut next, op);
        all.push(next);
    }
    all
}

fn entry_at(state: &State, index: u64) -> Option<(u64, u64, u64)> {
    state
        .iter()
        .copied()
        .find(|&(a, b, _)| a <= index && index <= b)
}

fn in_place_model() {
    let states = Arc::new(states());
    let tree = Arc::new(MapleTree::<u64>::new());
    {
        let mut w = tree.write();
        for (a, b, v) in initial() {
            w.store_range(a..=b, v).unwrap();
        }
    }
    let t = Arc::clone(&tree);
    let wr = thread::spawn(move || {
        for op in SCRIPT {
            let mut w = t.write();
            match op {
                Op::Store(a, b, v) => w.store_range(a..=b, v).unwrap(),
                Op::EraseRange(a, b) => w.erase_range(a..=b).unwrap(),
                Op::Erase(i) => {
                    w.erase(i).expect("the entry exists");
                }
            }
        }
    });
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let tree = Arc::clone(&tree);
            let states = Arc::clone(&states);
            thread::spawn(move || {
                let guard = maple::pin();
                let probes: [u64; 5] = [12, 22, 33, 43, 57];
                // Per probe, the earliest state the reader may still be in.
                let mut floor = [0usize; 5];
                for round in 0..2 {
                    for (k, &x) in probes.iter().enumerate() {
                        let x = x + (r + round) % 2;
                        let seen = tree
                            .load_entry(x, &guard)
                            .map(parts)
                            .map(|(a, b, v)| (a, b, *v));
                        let at = (floor[k]..states.len())
                            .find(|&s| entry_at(&states[s], x) == seen)
                            .unwrap_or_else(|| {
                                panic!("index {x}: saw {seen:?}, in no state from {}", floor[k])
                            });
                        floor[k] = at;
                    }
                    for (a, b, v) in tree.iter(&guard).map(parts) {
                        let e = (a, b, *v);
                        assert!(
                            states.iter().any(|s| s.contains(&e)),
                            "iteration saw {e:?}, an entry of no state"
                        );
                    }
                }
            })
        })
        .collect();
    wr.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    tree.validate().unwrap();
    let guard = maple::pin();
    let now: State = tree
        .iter(&guard)
        .map(parts)
        .map(|(a, b, v)| (a, b, *v))
        .collect();
    assert_eq!(&now, states.last().unwrap());
}

#[test]
fn in_place_random() {
    shuttle::check_random(in_place_model, 2000);
}

#[test]
fn in_place_pct() {
    shuttle::check_pct(in_place_model, 2000, 3);
}

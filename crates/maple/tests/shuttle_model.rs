//! Model test of the reader/writer protocol with shuttle, which explores
//! thread interleavings at every atomic operation of the real tree code.
//!
//! Run with `RUSTFLAGS="--cfg vmscale_shuttle" cargo test -p maple --test
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
#![cfg(vmscale_shuttle)]

use maple::MapleTree;
use shuttle::sync::atomic::{AtomicU64, Ordering};
use shuttle::thread;
use std::sync::Arc;

/// Entries `i` cover `[10i, 10i + 4]`, value `i`; enough of them for a
/// two-level tree, so writes split, merge and publish into parents.
const N: u64 = 24;

/// The writer's script. Each step's effect on index `probe` is what a
/// reader may observe; `(version, expected value at probe)`.
/// `finished` counts the steps that have returned (so their replaced nodes
/// are marked dead).
fn writer(tree: &MapleTree<u64>, finished: &AtomicU64) {
    let mut w = tree.write();
    // Step 1: overwrite entry 3 in place-sized copy (leaf replaced by one leaf).
    w.store_range(30, 34, 1003).unwrap();
    finished.store(1, Ordering::Release);
    // Step 2: a store spanning several leaves (parents rebuilt).
    w.store_range(52, 171, 2000).unwrap();
    // Step 3: erase entry 3 again (absent ranges merge).
    w.erase(32);
    // Step 4: fill many slots of one leaf to force a split.
    for k in 0..6 {
        w.store_range(200 + k * 2, 200 + k * 2, 3000 + k).unwrap();
    }
}

fn model() {
    let tree = Arc::new(MapleTree::<u64>::new());
    {
        let mut w = tree.write();
        for i in 0..N {
            w.store_range(10 * i, 10 * i + 4, i).unwrap();
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
                assert_eq!(cursor.next(), Some((0, 4, &0)));
                let seen_before = tree.load(32, &guard).copied();
                let step1_done = finished.load(Ordering::Acquire) >= 1;
                loop {
                    let (first, last, v) = cursor.next().expect("entries remain");
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
                    let mut prev_last: Option<u64> = None;
                    for (first, last, _) in tree.iter(&guard) {
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
}

#[test]
fn publish_dead_restart_random() {
    shuttle::check_random(model, 3000);
}

#[test]
fn publish_dead_restart_pct() {
    shuttle::check_pct(model, 3000, 3);
}

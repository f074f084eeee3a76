//! Every node a write replaces is freed: node memory stays flat over
//! rounds of building, emptying and dropping trees, for the exclusive
//! writer (which frees at once) and the shared one (which frees after a
//! grace period).
//!
//! The slab recycles blocks and never returns them, so
//! `node_memory_reserved` is the high-water mark of node memory: a write
//! that forgets to free or retire a node it replaced (a leaf after a split
//! or merge, a parent after a copy) makes it climb by that node in every
//! round, while correct writes reuse the same blocks round after round.
//! This test has its own process, so no other test's trees move the mark.
#![cfg(not(vmscale_shuttle))]

use maple::{node_memory_reserved, Direct, MapleTree};
use std::num::NonZeroU64;

const N: u64 = if cfg!(miri) { 200 } else { 2000 };

/// A permutation of `0..n` (a linear congruential shuffle: the test needs
/// a fixed, scattered order, not a good generator).
fn shuffled(n: u64, mut x: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    for i in (1..v.len()).rev() {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.swap(i, ((x >> 33) % (i as u64 + 1)) as usize);
    }
    v
}

/// Builds a tree of `N` separated entries in random order, erases them
/// in another, and drops it; with `shared`, through the shared writer,
/// then lets grace periods pass so deferred frees run.
fn round(shared: bool, seed: u64) {
    let range = |i: u64| i * 10..=i * 10 + 6;
    let value = |i: u64| NonZeroU64::new(i + 1).expect("non-zero");
    let mut t: MapleTree<NonZeroU64, Direct> = MapleTree::with_ownership(Direct);
    for i in shuffled(N, seed) {
        if shared {
            t.write().insert_range(range(i), value(i)).unwrap();
        } else {
            t.insert_range(range(i), value(i)).unwrap();
        }
    }
    t.validate().unwrap();
    for i in shuffled(N, seed ^ 0x5555) {
        let erased = if shared {
            t.write().erase(i * 10)
        } else {
            t.erase(i * 10)
        };
        assert_eq!(erased, Some(range(i)));
    }
    t.validate().unwrap();
    assert!(t.is_empty());
    drop(t);
    for _ in 0..256 {
        maple::pin().flush();
    }
}

#[test]
fn node_memory_stays_flat_over_rounds_of_writes() {
    let rounds = if cfg!(miri) { 4 } else { 40 };
    for shared in [false, true] {
        // The first rounds fill the slab's lists and the collector's bags.
        for seed in 0..3 {
            round(shared, seed);
        }
        let before = node_memory_reserved();
        for seed in 3..3 + rounds {
            round(shared, seed);
        }
        let after = node_memory_reserved();
        // One round allocates about N / 4 nodes; a node forgotten per
        // split or merge would add about that much per round. Slack for
        // garbage a grace period has not yet freed: a few rounds' worth.
        let per_round = N as usize / 4 * maple::NODE_SIZE;
        assert!(
            after <= before + 4 * per_round,
            "node memory grew from {before} to {after} bytes over {rounds} rounds \
             (shared writer: {shared})"
        );
    }
}

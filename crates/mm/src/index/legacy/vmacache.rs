//! The per-thread VMA cache (`vmacache`, Linux 3.15 to 5.x).
//!
//! Each thread remembers the last four VMAs its lookups found, one slot
//! per `(addr >> PAGE_SHIFT) & 3`, because faults and `find_vma` calls
//! cluster: the next lookup usually hits a VMA looked up a moment ago,
//! and four slots catch the usual interleaving of code, heap and stack.
//!
//! A slot names a node of one index's arena, not a VMA, so a hit costs no
//! reference-count traffic until the caller clones the result, and a slot
//! keeps nothing alive. It is trusted only while the index it came from
//! (by identity) is at the sequence number the slot recorded: every
//! change bumps the index's number, which invalidates every thread's
//! slots at once without visiting them, as `vmacache_invalidate` did. The
//! identity is a process-wide counter, not an address, so a dropped index
//! whose memory is reused cannot inherit its slots.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use super::rbtree::VmaTree;
use crate::flags::PAGE_SHIFT;

/// Slots per thread (`VMACACHE_SIZE`).
const SLOTS: usize = 4;

/// One cached lookup result.
#[derive(Clone, Copy)]
struct Slot {
    /// Identity of the index the node belongs to; 0 means empty.
    id: u64,
    /// The index's sequence number when the slot was filled.
    seq: u64,
    /// Arena index of the node found.
    node: u32,
}

const EMPTY: Slot = Slot {
    id: 0,
    seq: 0,
    node: 0,
};

thread_local! {
    // Const-initialised and `Copy`: no lazy-init check and no destructor
    // to register, so a lookup costs one TLS address computation.
    static CACHE: [Cell<Slot>; SLOTS] = const { [const { Cell::new(EMPTY) }; SLOTS] };
}

#[cfg(test)]
thread_local! {
    /// (hits, misses) on this thread, for tests that the cache is used
    /// and invalidated.
    static STATS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// A fresh index identity, never 0 and never reused.
pub(super) fn new_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[inline]
fn hash(addr: u64) -> usize {
    (addr >> PAGE_SHIFT) as usize & (SLOTS - 1)
}

/// The node of index `(id, seq)` that this thread cached and that
/// contains `addr`. Checks all four slots, starting at `addr`'s own, as
/// `vmacache_find` did: a VMA cached under one page is still the answer
/// for its other pages.
#[inline]
pub(super) fn lookup(id: u64, seq: u64, tree: &VmaTree, addr: u64) -> Option<u32> {
    let found = CACHE.with(|slots| {
        let h = hash(addr);
        (0..SLOTS).find_map(|k| {
            let s = slots[(h + k) & (SLOTS - 1)].get();
            (s.id == id && s.seq == seq && tree.contains(s.node, addr)).then_some(s.node)
        })
    });
    #[cfg(test)]
    STATS.with(|c| {
        let (h, m) = c.get();
        c.set(if found.is_some() {
            (h + 1, m)
        } else {
            (h, m + 1)
        });
    });
    found
}

/// Remember that a lookup of `addr` in index `(id, seq)` found `node`.
#[inline]
pub(super) fn update(id: u64, seq: u64, addr: u64, node: u32) {
    CACHE.with(|slots| slots[hash(addr)].set(Slot { id, seq, node }));
}

/// This thread's slots that are valid for index `(id, seq)`, for
/// validation: each must name a node that is still live.
pub(super) fn valid_nodes(id: u64, seq: u64) -> Vec<u32> {
    CACHE.with(|slots| {
        slots
            .iter()
            .map(Cell::get)
            .filter(|s| s.id == id && s.seq == seq)
            .map(|s| s.node)
            .collect()
    })
}

/// This thread's (hits, misses) so far.
#[cfg(test)]
pub(super) fn stats() -> (u64, u64) {
    STATS.with(Cell::get)
}

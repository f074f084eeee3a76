//! Adapters that put each implementation behind the same small interface,
//! so one generic measurement routine drives them all with identical
//! operation sequences.
//!
//! Every batch method loops internally and returns a checksum, so the
//! timed code is a monomorphised loop over the real structure (no dynamic
//! dispatch per operation) and the checksum both defeats dead-code
//! elimination and lets the caller verify the answers.

use std::collections::btree_map::Entry as MapEntry;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::{PoisonError, RwLock};

use std::num::NonZeroU64;

use maple::{Direct, MapleTree};

use super::workload::{first, index_of, last};
use super::Impl;

/// Loads between re-pins for readers that run next to a writer: long
/// enough to amortise pinning, short enough to let the writer's garbage be
/// reclaimed.
pub const REPIN_EVERY: usize = 1024;

/// An implementation measured on one thread.
///
/// Entries are identified by index `i`; the adapter maps it to the
/// workload's range `first(i)..=last(i)` with value `i`.
pub trait Subject {
    /// Which implementation this adapter measures.
    const IMPL: Impl;
    /// An empty structure.
    fn empty() -> Self;
    /// Inserts entry `i` into a free range; false if the structure refused.
    fn insert(&mut self, i: u64) -> bool;
    /// Erases entry `i`; false if it was not there.
    fn erase(&mut self, i: u64) -> bool;
    /// Number of entries stored.
    fn entries(&self) -> usize;
    /// Looks up every address; returns the sum of `value + 1` over hits.
    fn load_sum(&self, addrs: &[u64]) -> u64;
    /// Like [`Subject::load_sum`] but paying any per-read setup (pinning a
    /// guard) on every lookup. Structures without such setup have nothing
    /// extra to pay, hence the default.
    fn load_pin_sum(&self, addrs: &[u64]) -> u64 {
        self.load_sum(addrs)
    }
    /// Bytes of the structure's own nodes if it can report them.
    fn node_bytes(&self) -> Option<usize> {
        None
    }
}

/// A [`Subject`] that can also walk its entries in order and search the
/// holes between them. Structures that cannot do this efficiently (a
/// one-directional concurrent index) implement only [`Subject`], and the
/// ordered operations are never measured on them.
pub trait Scan: Subject {
    /// Visits every entry; returns the sum of `first + last + value`.
    fn iter_sum(&self) -> u64;
    /// For each address, the start of the highest free area of `size`
    /// bytes at or below it; returns the sum of the starts.
    fn gap_rev_sum(&self, addrs: &[u64], size: u64) -> u64;
    /// For each address, the start of the lowest free area of `size` bytes
    /// at or above it; returns the sum of the starts.
    fn gap_fwd_sum(&self, addrs: &[u64], size: u64) -> u64;
}

/// An implementation shared between a reader thread and a writer thread.
pub trait SharedSubject: Sync {
    /// Which implementation this adapter measures.
    const IMPL: Impl;
    /// The structure holding entries `0..n`.
    fn build_ascending(n: usize) -> Self;
    /// Looks up every address the way a concurrent reader must, checking
    /// each answer against the layout.
    fn checked_loads(&self, addrs: &[u64]) -> Tally;
    /// Erases entry `i` and stores it again, each step through the shared
    /// writer path as its own operation; false if a step failed.
    fn churn(&self, i: u64) -> bool;
}

/// Outcome counts of a batch of checked loads.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Loads that found the right entry.
    pub hits: u64,
    /// Loads that found nothing (the writer had the entry erased).
    pub misses: u64,
    /// Loads that returned another entry's value: always a bug.
    pub wrong: u64,
}

impl Tally {
    /// Adds one load's answer for address `addr`.
    pub(super) fn record(&mut self, addr: u64, found: Option<u64>) {
        match found {
            Some(v) if v == index_of(addr) => self.hits += 1,
            Some(_) => self.wrong += 1,
            None => self.misses += 1,
        }
    }

    /// Combines two tallies.
    pub fn merge(self, other: Tally) -> Tally {
        Tally {
            hits: self.hits + other.hits,
            misses: self.misses + other.misses,
            wrong: self.wrong + other.wrong,
        }
    }
}

// ---------------------------------------------------------------- maple --

/// The maple trees' value: entry `i` stored as `i + 1` in the slot itself
/// ([`Direct`]), as the kernel's tree stores a pointer and `BTreeMap` its
/// value inline; no allocation per entry.
type MapleU64 = MapleTree<NonZeroU64, Direct>;

/// Entry `i`'s value as the maple trees store it.
fn slot_value(i: u64) -> NonZeroU64 {
    NonZeroU64::MIN.saturating_add(i)
}

/// The entry index a maple slot value stands for (inverse of [`slot_value`]).
fn slot_index(v: NonZeroU64) -> u64 {
    v.get() - 1
}

/// The maple tree written through `&mut self` (no writer lock, frees at once).
pub struct Maple(MapleU64);

/// The maple tree written through `write()`: the shared-writer path with
/// its lock, copy-on-write and deferred frees. A fresh `WriteGuard` per
/// operation, as an mmap-style caller would take one per syscall.
pub struct MapleShared(MapleU64);

fn maple_load_sum(tree: &MapleU64, addrs: &[u64]) -> u64 {
    let guard = maple::pin();
    addrs
        .iter()
        .fold(0u64, |sum, &a| match tree.load(black_box(a), &guard) {
            Some(v) => sum.wrapping_add(black_box(v.get())),
            None => sum,
        })
}

fn maple_load_pin_sum(tree: &MapleU64, addrs: &[u64]) -> u64 {
    addrs.iter().fold(0u64, |sum, &a| {
        let guard = maple::pin();
        match tree.load(black_box(a), &guard) {
            Some(v) => sum.wrapping_add(black_box(v.get())),
            None => sum,
        }
    })
}

fn maple_iter_sum(tree: &MapleU64) -> u64 {
    let guard = maple::pin();
    tree.iter(&guard).fold(0u64, |sum, e| {
        sum.wrapping_add(e.first())
            .wrapping_add(e.last())
            .wrapping_add(black_box(slot_index(e.value())))
    })
}

fn maple_gap_rev_sum(tree: &MapleU64, addrs: &[u64], size: u64) -> u64 {
    let guard = maple::pin();
    // An error (no gap) contributes 0, which no correct answer here equals.
    addrs.iter().fold(0u64, |sum, &a| {
        sum.wrapping_add(black_box(
            tree.empty_area_rev(0, black_box(a), size, &guard)
                .unwrap_or(0),
        ))
    })
}

fn maple_gap_fwd_sum(tree: &MapleU64, addrs: &[u64], size: u64) -> u64 {
    let guard = maple::pin();
    addrs.iter().fold(0u64, |sum, &a| {
        sum.wrapping_add(black_box(
            tree.empty_area(black_box(a), u64::MAX, size, &guard)
                .unwrap_or(0),
        ))
    })
}

/// Implements the read half of [`Subject`] for a newtype around a
/// `MapleU64`; both maple adapters read identically.
macro_rules! maple_reads {
    () => {
        fn entries(&self) -> usize {
            self.0.len()
        }
        fn load_sum(&self, addrs: &[u64]) -> u64 {
            maple_load_sum(&self.0, addrs)
        }
        fn load_pin_sum(&self, addrs: &[u64]) -> u64 {
            maple_load_pin_sum(&self.0, addrs)
        }
        fn node_bytes(&self) -> Option<usize> {
            Some(self.0.mem_stats().bytes)
        }
    };
}

/// Implements [`Scan`] for a newtype around a `MapleU64`.
macro_rules! maple_scan {
    ($subject:ty) => {
        impl Scan for $subject {
            fn iter_sum(&self) -> u64 {
                maple_iter_sum(&self.0)
            }
            fn gap_rev_sum(&self, addrs: &[u64], size: u64) -> u64 {
                maple_gap_rev_sum(&self.0, addrs, size)
            }
            fn gap_fwd_sum(&self, addrs: &[u64], size: u64) -> u64 {
                maple_gap_fwd_sum(&self.0, addrs, size)
            }
        }
    };
}

maple_scan!(Maple);
maple_scan!(MapleShared);

impl Subject for Maple {
    const IMPL: Impl = Impl::Maple;
    fn empty() -> Self {
        Maple(MapleTree::with_ownership(Direct))
    }
    fn insert(&mut self, i: u64) -> bool {
        self.0
            .insert_range(first(i)..=last(i), slot_value(i))
            .is_ok()
    }
    fn erase(&mut self, i: u64) -> bool {
        self.0.erase(first(i)) == Some(first(i)..=last(i))
    }
    maple_reads!();
}

impl Subject for MapleShared {
    const IMPL: Impl = Impl::MapleShared;
    fn empty() -> Self {
        MapleShared(MapleTree::with_ownership(Direct))
    }
    fn insert(&mut self, i: u64) -> bool {
        self.0
            .write()
            .insert_range(first(i)..=last(i), slot_value(i))
            .is_ok()
    }
    fn erase(&mut self, i: u64) -> bool {
        self.0.write().erase(first(i)) == Some(first(i)..=last(i))
    }
    maple_reads!();
}

impl SharedSubject for MapleShared {
    const IMPL: Impl = Impl::MapleShared;
    fn build_ascending(n: usize) -> Self {
        let mut tree = <MapleShared as Subject>::empty();
        for i in 0..n as u64 {
            Subject::insert(&mut tree, i);
        }
        tree
    }
    fn checked_loads(&self, addrs: &[u64]) -> Tally {
        let mut tally = Tally::default();
        for chunk in addrs.chunks(REPIN_EVERY) {
            // Re-pin per chunk: a reader pinned forever would stop the
            // writer's retired nodes from ever being freed.
            let guard = maple::pin();
            for &a in chunk {
                tally.record(a, self.0.load(black_box(a), &guard).map(slot_index));
            }
        }
        tally
    }
    fn churn(&self, i: u64) -> bool {
        let erased = self.0.write().erase(first(i)) == Some(first(i)..=last(i));
        let stored = self
            .0
            .write()
            .store_range(first(i)..=last(i), slot_value(i))
            .is_ok();
        erased && stored
    }
}

// ------------------------------------------------------------- btreemap --

/// `BTreeMap<start, (last, value)>`, the obvious std baseline.
///
/// `insert` does not check the new range for overlap with its neighbours
/// (maple's `insert_range` does): this favours the baseline slightly.
pub struct BTree(BTreeMap<u64, (u64, u64)>);

/// `Arc<RwLock<BTreeMap>>`-style baseline for concurrent reads (the `Arc`
/// is unnecessary here because the threads are scoped).
pub struct RwBTree(RwLock<BTreeMap<u64, (u64, u64)>>);

/// The value of the entry containing `addr`.
fn btree_load(map: &BTreeMap<u64, (u64, u64)>, addr: u64) -> Option<u64> {
    let (_, &(last, value)) = map.range(..=addr).next_back()?;
    (last >= addr).then_some(value)
}

/// Highest start `a` with `[a, a + size - 1]` free and `<= max` (`size > 0`):
/// walks entries downward from `max`, checking the hole above each.
fn btree_gap_rev(map: &BTreeMap<u64, (u64, u64)>, max: u64, size: u64) -> Option<u64> {
    // `hi` is the highest address that may still be free.
    let mut hi = max;
    for (&start, &(last, _)) in map.range(..=max).rev() {
        if last < hi && hi - last >= size {
            return Some(hi - size + 1);
        }
        hi = start.checked_sub(1)?;
    }
    (hi >= size - 1).then(|| hi - (size - 1))
}

/// Lowest start `a >= min` with `[a, a + size - 1]` free (`size > 0`):
/// skips the entry containing `min`, then walks entries upward checking the
/// hole below each.
fn btree_gap_fwd(map: &BTreeMap<u64, (u64, u64)>, min: u64, size: u64) -> Option<u64> {
    // `lo` is the lowest address that may still be free.
    let mut lo = min;
    if let Some((_, &(last, _))) = map.range(..=min).next_back() {
        if last >= min {
            lo = last.checked_add(1)?;
        }
    }
    for (&start, &(last, _)) in map.range(lo..) {
        if start - lo >= size {
            return Some(lo);
        }
        lo = last.checked_add(1)?;
    }
    (u64::MAX - lo >= size - 1).then_some(lo)
}

impl Subject for BTree {
    const IMPL: Impl = Impl::BTreeMap;
    fn empty() -> Self {
        BTree(BTreeMap::new())
    }
    fn insert(&mut self, i: u64) -> bool {
        match self.0.entry(first(i)) {
            MapEntry::Vacant(slot) => {
                slot.insert((last(i), i));
                true
            }
            MapEntry::Occupied(_) => false,
        }
    }
    fn erase(&mut self, i: u64) -> bool {
        self.0.remove(&first(i)).is_some()
    }
    fn entries(&self) -> usize {
        self.0.len()
    }
    fn load_sum(&self, addrs: &[u64]) -> u64 {
        addrs
            .iter()
            .fold(0u64, |sum, &a| match btree_load(&self.0, black_box(a)) {
                Some(v) => sum.wrapping_add(black_box(v) + 1),
                None => sum,
            })
    }
}

impl Scan for BTree {
    fn iter_sum(&self) -> u64 {
        self.0.iter().fold(0u64, |sum, (&f, &(l, v))| {
            sum.wrapping_add(f)
                .wrapping_add(l)
                .wrapping_add(black_box(v))
        })
    }
    fn gap_rev_sum(&self, addrs: &[u64], size: u64) -> u64 {
        addrs.iter().fold(0u64, |sum, &a| {
            sum.wrapping_add(black_box(
                btree_gap_rev(&self.0, black_box(a), size).unwrap_or(0),
            ))
        })
    }
    fn gap_fwd_sum(&self, addrs: &[u64], size: u64) -> u64 {
        addrs.iter().fold(0u64, |sum, &a| {
            sum.wrapping_add(black_box(
                btree_gap_fwd(&self.0, black_box(a), size).unwrap_or(0),
            ))
        })
    }
}

impl SharedSubject for RwBTree {
    const IMPL: Impl = Impl::RwLockBTreeMap;
    fn build_ascending(n: usize) -> Self {
        RwBTree(RwLock::new(
            (0..n as u64).map(|i| (first(i), (last(i), i))).collect(),
        ))
    }
    fn checked_loads(&self, addrs: &[u64]) -> Tally {
        let mut tally = Tally::default();
        for &a in addrs {
            // Lock per load: holding the read lock across a batch would
            // starve the writer and measure nothing interesting. A poisoned
            // lock only means the writer panicked; the map is still usable.
            let found = btree_load(
                &self.0.read().unwrap_or_else(PoisonError::into_inner),
                black_box(a),
            );
            tally.record(a, found);
        }
        tally
    }
    fn churn(&self, i: u64) -> bool {
        let erased = self
            .0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&first(i))
            .is_some();
        let stored = self
            .0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(first(i), (last(i), i))
            .is_none();
        erased && stored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(ranges: &[(u64, u64)]) -> BTreeMap<u64, (u64, u64)> {
        ranges.iter().map(|&(f, l)| (f, (l, 0))).collect()
    }

    #[test]
    fn btree_gaps_on_small_maps() {
        let m = map(&[(10, 19), (22, 29), (40, 49)]);
        assert_eq!(btree_gap_rev(&m, 25, 2), Some(20));
        assert_eq!(btree_gap_rev(&m, 25, 3), Some(7));
        assert_eq!(btree_gap_rev(&m, 25, 11), None);
        assert_eq!(btree_gap_rev(&m, 35, 3), Some(33));
        assert_eq!(btree_gap_fwd(&m, 12, 2), Some(20));
        assert_eq!(btree_gap_fwd(&m, 12, 3), Some(30));
        assert_eq!(btree_gap_fwd(&m, 45, 3), Some(50));
        assert_eq!(btree_gap_fwd(&map(&[(5, u64::MAX)]), 7, 1), None);
        assert_eq!(btree_gap_rev(&map(&[(0, 9)]), 5, 1), None);
    }

    #[test]
    fn btree_load_respects_holes() {
        let m = map(&[(10, 19)]);
        assert_eq!(btree_load(&m, 15), Some(0));
        assert_eq!(btree_load(&m, 20), None);
        assert_eq!(btree_load(&m, 9), None);
    }

    #[test]
    fn tally_classifies_answers() {
        let mut t = Tally::default();
        let a = first(3) + 5;
        t.record(a, Some(3));
        t.record(a, Some(4));
        t.record(a, None);
        assert_eq!(
            t,
            Tally {
                hits: 1,
                misses: 1,
                wrong: 1
            }
        );
    }
}

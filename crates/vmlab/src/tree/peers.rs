//! Adapters for the range maps a Rust user would weigh against the maple
//! tree besides `BTreeMap`: `rangemap`'s `RangeInclusiveMap` on one thread,
//! and two concurrent ordered maps, `scc::TreeIndex` and
//! `crossbeam_skiplist::SkipMap`, for shared readers and writers.
//!
//! Each adapter uses only the crate's public API, the way its users would,
//! and implements only the operations the crate can genuinely do: the
//! concurrent maps have no gap search or memory report here, so they
//! implement [`Subject`] and [`SharedSubject`] but not [`Scan`].

use std::hint::black_box;
use std::ops::Bound;

use crossbeam_skiplist::SkipMap;
use rangemap::RangeInclusiveMap;
use scc::tree_index::Proximity;
use scc::{Guard, TreeIndex};

use super::subjects::{Scan, SharedSubject, Subject, Tally, REPIN_EVERY};
use super::workload::{first, last};
use super::Impl;

// ------------------------------------------------------------- rangemap --

/// `rangemap::RangeInclusiveMap<u64, u64>`: range `first(i)..=last(i)`
/// maps to value `i`.
///
/// The map merges touching ranges that hold equal values and silently
/// overwrites overlapped ones, so `insert` and `erase` compare the entry
/// count before and after: a write that did not add (remove) exactly one
/// entry reports failure, and the run stops. That catches a merge, but
/// not an insert that trims a neighbour and adds itself; the checksums of
/// the timed batches (lookups, iteration, gaps) catch any such damage.
/// (The workload's one-page holes and distinct values mean a correct map
/// never merges.)
pub struct RangeMap(RangeInclusiveMap<u64, u64>);

/// How many request sizes the first window of [`rangemap_gap_rev`] spans.
const FIRST_WINDOW: u64 = 64;

/// Lowest start `a >= min` with `[a, a + size - 1]` free (`size > 0`): the
/// first gap of `min..=u64::MAX` that is long enough.
fn rangemap_gap_fwd(map: &RangeInclusiveMap<u64, u64>, min: u64, size: u64) -> Option<u64> {
    map.gaps(&(min..=u64::MAX))
        .find(|gap| gap.end() - gap.start() >= size - 1)
        .map(|gap| *gap.start())
}

/// Highest start `a` with `[a, a + size - 1]` free and inside `0..=max`
/// (`size > 0`).
///
/// `gaps` only runs upward, so this searches windows `lo..=max` below
/// `max`, doubling the window until it holds a long enough gap or reaches
/// 0. The highest fitting gap in a window is the answer: a gap cut short
/// by the window's bottom is the window's lowest, and if it is too short
/// the answer, if any, lies lower, which the next window covers.
fn rangemap_gap_rev(map: &RangeInclusiveMap<u64, u64>, max: u64, size: u64) -> Option<u64> {
    let mut span = size.saturating_mul(FIRST_WINDOW);
    loop {
        let lo = max.saturating_sub(span);
        let highest = map
            .gaps(&(lo..=max))
            .filter(|gap| gap.end() - gap.start() >= size - 1)
            .last();
        if let Some(gap) = highest {
            return Some(gap.end() - (size - 1));
        }
        if lo == 0 {
            return None;
        }
        span = span.saturating_mul(2);
    }
}

impl Subject for RangeMap {
    const IMPL: Impl = Impl::RangeMap;
    fn empty() -> Self {
        RangeMap(RangeInclusiveMap::new())
    }
    fn insert(&mut self, i: u64) -> bool {
        let before = self.0.len();
        self.0.insert(first(i)..=last(i), i);
        self.0.len() == before + 1
    }
    fn erase(&mut self, i: u64) -> bool {
        let before = self.0.len();
        self.0.remove(first(i)..=last(i));
        self.0.len() + 1 == before
    }
    fn entries(&self) -> usize {
        self.0.len()
    }
    fn load_sum(&self, addrs: &[u64]) -> u64 {
        addrs
            .iter()
            .fold(0u64, |sum, &a| match self.0.get(&black_box(a)) {
                Some(&v) => sum.wrapping_add(black_box(v) + 1),
                None => sum,
            })
    }
}

impl Scan for RangeMap {
    fn iter_sum(&self) -> u64 {
        self.0.iter().fold(0u64, |sum, (range, &v)| {
            sum.wrapping_add(*range.start())
                .wrapping_add(*range.end())
                .wrapping_add(black_box(v))
        })
    }
    fn gap_rev_sum(&self, addrs: &[u64], size: u64) -> u64 {
        addrs.iter().fold(0u64, |sum, &a| {
            sum.wrapping_add(black_box(
                rangemap_gap_rev(&self.0, black_box(a), size).unwrap_or(0),
            ))
        })
    }
    fn gap_fwd_sum(&self, addrs: &[u64], size: u64) -> u64 {
        addrs.iter().fold(0u64, |sum, &a| {
            sum.wrapping_add(black_box(
                rangemap_gap_fwd(&self.0, black_box(a), size).unwrap_or(0),
            ))
        })
    }
}

// ------------------------------------------------------- scc::TreeIndex --

/// `scc::TreeIndex<start, (last, value)>`, written through its shared
/// (`&self`) API.
///
/// A lookup is `TreeIndex::locate`, which descends to the greatest start
/// `<= a`. (scc 2's `range`, the only ordered query it had, scanned from
/// the leftmost leaf, so a lookup cost time linear in the entry count:
/// 11 ms at 10^6 entries. scc 3 descends.) Lookup batches are still
/// capped by time like gap searches ([`super::Scale::gap_budget`]), so a
/// slow peer cannot stall a run.
pub struct SccTree(TreeIndex<u64, (u64, u64)>);

/// The value of the entry containing `addr`, read under `guard`.
fn scc_load(map: &TreeIndex<u64, (u64, u64)>, addr: u64, guard: &Guard) -> Option<u64> {
    let below = match map.locate(&addr, guard) {
        Proximity::Exact(at) | Proximity::Between(at) => at.get(),
        Proximity::Smaller(at) => at.get_back(),
        Proximity::Larger(_) | Proximity::Empty => None,
    };
    let (_, &(last, value)) = below?;
    (last >= addr).then_some(value)
}

impl SccTree {
    fn store(&self, i: u64) -> bool {
        self.0.insert_sync(first(i), (last(i), i)).is_ok()
    }
    fn remove(&self, i: u64) -> bool {
        self.0.remove_sync(&first(i))
    }
}

impl Subject for SccTree {
    const IMPL: Impl = Impl::SccTreeIndex;
    fn empty() -> Self {
        SccTree(TreeIndex::new())
    }
    fn insert(&mut self, i: u64) -> bool {
        self.store(i)
    }
    fn erase(&mut self, i: u64) -> bool {
        self.remove(i)
    }
    /// `TreeIndex::len` counts by iterating; only the checks call this.
    fn entries(&self) -> usize {
        self.0.len()
    }
    fn load_sum(&self, addrs: &[u64]) -> u64 {
        let guard = Guard::new();
        addrs.iter().fold(0u64, |sum, &a| {
            match scc_load(&self.0, black_box(a), &guard) {
                Some(v) => sum.wrapping_add(black_box(v) + 1),
                None => sum,
            }
        })
    }
}

impl SharedSubject for SccTree {
    const IMPL: Impl = Impl::SccTreeIndex;
    fn build_ascending(n: usize) -> Self {
        let tree = <SccTree as Subject>::empty();
        for i in 0..n as u64 {
            tree.store(i);
        }
        tree
    }
    fn checked_loads(&self, addrs: &[u64]) -> Tally {
        let mut tally = Tally::default();
        for chunk in addrs.chunks(REPIN_EVERY) {
            // A fresh guard per chunk, as for maple: one held for the whole
            // batch would keep the writer's garbage from being reclaimed.
            let guard = Guard::new();
            for &a in chunk {
                tally.record(a, scc_load(&self.0, black_box(a), &guard));
            }
        }
        tally
    }
    fn churn(&self, i: u64) -> bool {
        let erased = self.remove(i);
        let stored = self.store(i);
        erased && stored
    }
}

// ------------------------------------------- crossbeam_skiplist::SkipMap --

/// `crossbeam_skiplist::SkipMap<start, (last, value)>`, written through its
/// shared (`&self`) API. `SkipMap` takes no guard from the caller: every
/// call pins the epoch itself and returns a reference-counted entry.
pub struct SkipList(SkipMap<u64, (u64, u64)>);

/// The value of the entry containing `addr`: the greatest start `<= addr`.
fn skip_load(map: &SkipMap<u64, (u64, u64)>, addr: u64) -> Option<u64> {
    let entry = map.upper_bound(Bound::Included(&addr))?;
    let &(last, value) = entry.value();
    (last >= addr).then_some(value)
}

impl SkipList {
    /// Inserts entry `i` unless its start is taken (`SkipMap::insert`
    /// would replace the old entry); true if it was inserted.
    fn store(&self, i: u64) -> bool {
        let mut fresh = false;
        self.0.get_or_insert_with(first(i), || {
            fresh = true;
            (last(i), i)
        });
        fresh
    }
    fn remove(&self, i: u64) -> bool {
        self.0.remove(&first(i)).is_some()
    }
}

impl Subject for SkipList {
    const IMPL: Impl = Impl::SkipMap;
    fn empty() -> Self {
        SkipList(SkipMap::new())
    }
    fn insert(&mut self, i: u64) -> bool {
        self.store(i)
    }
    fn erase(&mut self, i: u64) -> bool {
        self.remove(i)
    }
    fn entries(&self) -> usize {
        self.0.len()
    }
    fn load_sum(&self, addrs: &[u64]) -> u64 {
        addrs
            .iter()
            .fold(0u64, |sum, &a| match skip_load(&self.0, black_box(a)) {
                Some(v) => sum.wrapping_add(black_box(v) + 1),
                None => sum,
            })
    }
}

impl SharedSubject for SkipList {
    const IMPL: Impl = Impl::SkipMap;
    fn build_ascending(n: usize) -> Self {
        let list = <SkipList as Subject>::empty();
        for i in 0..n as u64 {
            list.store(i);
        }
        list
    }
    fn checked_loads(&self, addrs: &[u64]) -> Tally {
        let mut tally = Tally::default();
        for &a in addrs {
            tally.record(a, skip_load(&self.0, black_box(a)));
        }
        tally
    }
    fn churn(&self, i: u64) -> bool {
        let erased = self.remove(i);
        let stored = self.store(i);
        erased && stored
    }
}

#[cfg(test)]
mod tests {
    use super::super::workload::{self, Layout, PAGE};
    use super::*;

    fn ranges(list: &[(u64, u64)]) -> RangeInclusiveMap<u64, u64> {
        // Distinct values, so touching ranges stay separate.
        list.iter()
            .enumerate()
            .map(|(v, &(f, l))| (f..=l, v as u64))
            .collect()
    }

    #[test]
    fn rangemap_gaps_on_small_maps() {
        // The same cases as the BTreeMap searches' test.
        let m = ranges(&[(10, 19), (22, 29), (40, 49)]);
        assert_eq!(rangemap_gap_rev(&m, 25, 2), Some(20));
        assert_eq!(rangemap_gap_rev(&m, 25, 3), Some(7));
        assert_eq!(rangemap_gap_rev(&m, 25, 11), None);
        assert_eq!(rangemap_gap_rev(&m, 35, 3), Some(33));
        assert_eq!(rangemap_gap_fwd(&m, 12, 2), Some(20));
        assert_eq!(rangemap_gap_fwd(&m, 12, 3), Some(30));
        assert_eq!(rangemap_gap_fwd(&m, 45, 3), Some(50));
        assert_eq!(rangemap_gap_fwd(&ranges(&[(5, u64::MAX)]), 7, 1), None);
        assert_eq!(rangemap_gap_rev(&ranges(&[(0, 9)]), 5, 1), None);
    }

    #[test]
    fn rangemap_gap_rev_widens_its_window() {
        // Two-unit entries with one-unit holes from 1000 up: the only
        // 2-unit hole below 100_000 is under 1000, many windows down.
        let m = ranges(
            &(0..33_000)
                .map(|k| (1000 + 3 * k, 1001 + 3 * k))
                .collect::<Vec<_>>(),
        );
        assert_eq!(m.len(), 33_000);
        assert_eq!(rangemap_gap_rev(&m, 99_000, 2), Some(998));
        assert_eq!(rangemap_gap_rev(&m, 99_000, 1), Some(99_000));
        assert_eq!(rangemap_gap_rev(&m, 99_001, 1), Some(99_000));
        assert_eq!(rangemap_gap_rev(&m, 1, 3), None);
        assert_eq!(rangemap_gap_rev(&m, 2, 3), Some(0));
    }

    /// Every answer the benchmark checks, on a 100-entry layout.
    fn assert_answers_layout<S: Subject>(tree: &S, w: &Layout) {
        assert_eq!(tree.entries(), w.n);
        assert_eq!(
            tree.load_sum(&w.addrs),
            workload::expected_load_sum(&w.addrs)
        );
        // The holes between entries and around the layout hold nothing.
        let holes: Vec<u64> = (0..w.n as u64)
            .flat_map(|i| [last(i) + 1, first(i) - 1])
            .collect();
        assert_eq!(tree.load_sum(&holes), 0);
    }

    fn assert_scans_layout<S: Scan>(tree: &S, w: &Layout) {
        assert_eq!(tree.iter_sum(), workload::expected_iter_sum(w.n));
        let a = &w.addrs;
        assert_eq!(tree.gap_rev_sum(a, PAGE), workload::expected_gap_rev_sum(a));
        assert_eq!(tree.gap_fwd_sum(a, PAGE), workload::expected_gap_fwd_sum(a));
        assert_eq!(
            tree.gap_rev_sum(a, 2 * PAGE),
            workload::expected_gap_rev_far_sum(a)
        );
        assert_eq!(
            tree.gap_fwd_sum(a, 2 * PAGE),
            workload::expected_gap_fwd_far_sum(a, w.n)
        );
    }

    fn filled<S: Subject>(order: &[u64]) -> S {
        let mut tree = S::empty();
        for &i in order {
            assert!(tree.insert(i), "{} refused entry {i}", S::IMPL.name());
        }
        tree
    }

    fn assert_writes<S: Subject>(w: &Layout) {
        let mut tree = filled::<S>(&w.perm);
        assert_answers_layout(&tree, w);
        assert!(!tree.insert(w.perm[0]), "a taken start was accepted");
        for &i in &w.perm {
            assert!(tree.erase(i));
        }
        assert!(!tree.erase(0));
        assert_eq!(tree.entries(), 0);
    }

    #[test]
    fn rangemap_stores_the_layout_exactly() {
        let w = Layout::generate(100, 2000, 3);
        let tree = filled::<RangeMap>(&w.ascending());
        // One stored range per entry, none merged with a neighbour.
        let stored: Vec<_> = tree.0.iter().map(|(r, &v)| (r.clone(), v)).collect();
        let want: Vec<_> = (0..100).map(|i| (first(i)..=last(i), i)).collect();
        assert_eq!(stored, want);
        assert_answers_layout(&tree, &w);
        assert_scans_layout(&tree, &w);
        assert_writes::<RangeMap>(&w);
    }

    #[test]
    fn rangemap_writes_that_merge_or_split_fail() {
        let mut tree = filled::<RangeMap>(&[0]);
        // The hole after entry 0 holding entry 1's value makes entry 1
        // merge with it on insertion: the count check catches that.
        tree.0.insert(last(0) + 1..=first(1) - 1, 1);
        assert!(!tree.insert(1));
        assert_eq!(tree.entries(), 2);
        // Erasing part of the merged range splits it, which is no erasure.
        let mut tree = filled::<RangeMap>(&[0]);
        tree.0.insert(last(0) + 1..=last(1), 1);
        assert!(!tree.erase(1));
    }

    #[test]
    fn concurrent_peers_answer_loads() {
        let w = Layout::generate(100, 2000, 4);
        assert_answers_layout(&filled::<SccTree>(&w.ascending()), &w);
        assert_answers_layout(&filled::<SkipList>(&w.ascending()), &w);
        assert_writes::<SccTree>(&w);
        assert_writes::<SkipList>(&w);
    }

    fn assert_shared<S: SharedSubject>(w: &Layout) {
        let tree = S::build_ascending(w.n);
        let all = Tally {
            hits: w.addrs.len() as u64,
            misses: 0,
            wrong: 0,
        };
        assert_eq!(tree.checked_loads(&w.addrs), all);
        assert!(tree.churn(7));
        assert_eq!(tree.checked_loads(&w.addrs), all);
    }

    #[test]
    fn concurrent_peers_share_checked_loads() {
        let w = Layout::generate(100, 3000, 5);
        assert_shared::<SccTree>(&w);
        assert_shared::<SkipList>(&w);
    }

    #[test]
    fn concurrent_peers_report_wrong_values_and_failed_churn() {
        let addr = [first(3) + 5];
        let scc = SccTree::build_ascending(10);
        assert!(scc.0.remove_sync(&first(3)));
        scc.0.insert_sync(first(3), (last(3), 4)).unwrap();
        assert_eq!(scc.checked_loads(&addr).wrong, 1);
        assert!(scc.remove(3));
        assert!(!scc.churn(3), "erasing a missing entry must fail");

        let skip = SkipList::build_ascending(10);
        skip.0.insert(first(3), (last(3), 4));
        assert_eq!(skip.checked_loads(&addr).wrong, 1);
        assert!(skip.remove(3));
        assert!(!skip.churn(3), "erasing a missing entry must fail");
    }
}

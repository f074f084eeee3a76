//! Tests of the legacy index: unit cases, the VMA cache, and a randomised
//! cross-check against the maple index and a sorted-`Vec` oracle.
//!
//! The cross-check lives here rather than in `tests/` because `Vma`s can
//! only be built inside the crate.

use std::sync::{Arc, RwLock};

use proptest::prelude::*;

use super::{vmacache, LegacyIndex};
use crate::flags::{VmFlags, PAGE_SIZE};
use crate::index::{MapleIndex, VmaIndex};
use crate::vma::Vma;
use crate::Errno;

const P: u64 = PAGE_SIZE;

fn vma(start: u64, end: u64) -> Arc<Vma> {
    Arc::new(Vma::new(start, end, VmFlags::READ, start >> 12, None, None))
}

fn ranges(index: &dyn VmaIndex) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    index.for_each(&mut |v| out.push((v.start(), v.end())));
    out
}

fn range(v: Option<Arc<Vma>>) -> Option<(u64, u64)> {
    v.map(|v| (v.start(), v.end()))
}

/// A maple index holding `r`.
fn maple_with(r: &[(u64, u64)]) -> Box<dyn VmaIndex> {
    let mut ix = MapleIndex::new();
    for &(s, e) in r {
        ix.replace(&[], &[vma(s, e)]).unwrap();
    }
    Box::new(ix)
}

/// An index holding `r`, inserted one replace at a time.
fn legacy_with(r: &[(u64, u64)]) -> LegacyIndex {
    let mut ix = LegacyIndex::new();
    for &(s, e) in r {
        ix.replace(&[], &[vma(s, e)]).unwrap();
        ix.validate().unwrap();
    }
    ix
}

// ---- unit cases ---------------------------------------------------------

#[test]
fn empty_index() {
    let ix = LegacyIndex::new();
    assert_eq!(ix.len(), 0);
    assert!(ix.find(0).is_none());
    assert!(ix.find_next(0).is_none());
    assert!(ix.find_prev(u64::MAX).is_none());
    let mut out = Vec::new();
    ix.overlapping(0, u64::MAX, &mut out);
    assert!(out.is_empty());
    assert_eq!(ix.gap_lowest(0, u64::MAX, 1), Some(0));
    assert_eq!(ix.gap_highest(0, u64::MAX, 1), Some(u64::MAX));
    assert_eq!(ix.gap_highest(0, u64::MAX, u64::MAX), Some(u64::MAX));
    assert_eq!(ix.gap_lowest(5, 5, 0), None);
    assert_eq!(ix.gap_lowest(5, 10, 0), None);
    assert_eq!(ix.gap_lowest(5, 10, 6), None);
    assert_eq!(ix.gap_highest(5, 10, 5), Some(10));
    ix.validate().unwrap();
}

#[test]
fn lookups_and_neighbours() {
    let ix = legacy_with(&[(4 * P, 6 * P), (P, 2 * P), (8 * P, 9 * P)]);
    assert_eq!(ranges(&ix), [(P, 2 * P), (4 * P, 6 * P), (8 * P, 9 * P)]);
    assert_eq!(range(ix.find(5 * P + 7)), Some((4 * P, 6 * P)));
    assert_eq!(range(ix.find(6 * P)), None);
    assert_eq!(range(ix.find_next(6 * P)), Some((8 * P, 9 * P)));
    assert_eq!(range(ix.find_next(9 * P)), None);
    assert_eq!(range(ix.find_prev(4 * P)), Some((P, 2 * P)));
    assert_eq!(range(ix.find_prev(4 * P + 1)), Some((4 * P, 6 * P)));
    assert_eq!(range(ix.find_prev(u64::MAX)), Some((8 * P, 9 * P)));
    assert_eq!(range(ix.find_prev(P)), None);
    let mut out = Vec::new();
    ix.overlapping(2 * P - 1, 8 * P + 1, &mut out);
    let got: Vec<_> = out.iter().map(|v| (v.start(), v.end())).collect();
    assert_eq!(got, [(P, 2 * P), (4 * P, 6 * P), (8 * P, 9 * P)]);
    out.clear();
    ix.overlapping(2 * P, 4 * P, &mut out);
    assert!(out.is_empty());
}

#[test]
fn gaps_below_first_between_and_above_last() {
    // Free: [0, P), [2P, 4P), [6P, 8P), [9P, MAX).
    let ix = legacy_with(&[(P, 2 * P), (4 * P, 6 * P), (8 * P, 9 * P)]);
    assert_eq!(ix.gap_lowest(0, u64::MAX, P), Some(0));
    assert_eq!(ix.gap_lowest(1, u64::MAX, P), Some(2 * P));
    assert_eq!(ix.gap_lowest(0, u64::MAX, 3 * P), Some(9 * P));
    assert_eq!(ix.gap_lowest(3 * P, 8 * P, 2 * P), Some(6 * P));
    assert_eq!(ix.gap_lowest(3 * P, 8 * P - 1, 2 * P), None);
    assert_eq!(ix.gap_highest(0, u64::MAX, 2 * P), Some(u64::MAX));
    assert_eq!(ix.gap_highest(0, 9 * P, 2 * P), Some(8 * P));
    assert_eq!(ix.gap_highest(0, 7 * P, P), Some(7 * P));
    assert_eq!(ix.gap_highest(0, 6 * P, 2 * P), Some(4 * P));
    assert_eq!(ix.gap_highest(2 * P + 1, 6 * P, 2 * P), None);
    assert_eq!(ix.gap_highest(0, 2 * P, P), Some(P));
    assert_eq!(ix.gap_highest(0, 2 * P, 2 * P), None);
}

#[test]
fn vma_ending_at_the_top_of_the_address_space() {
    let top = u64::MAX - 3 * P;
    let ix = legacy_with(&[(top, u64::MAX)]);
    assert_eq!(range(ix.find(u64::MAX - 1)), Some((top, u64::MAX)));
    assert!(ix.find(u64::MAX).is_none());
    assert_eq!(ix.gap_highest(0, u64::MAX, P), Some(top));
    assert_eq!(ix.gap_lowest(top - P + 1, u64::MAX, P), None);
}

#[test]
fn replace_splits_and_merges() {
    let mut ix = LegacyIndex::new();
    let whole = vma(0x10000, 0x20000);
    ix.replace(&[], std::slice::from_ref(&whole)).unwrap();
    let parts = [
        vma(0x10000, 0x14000),
        vma(0x14000, 0x15000),
        vma(0x15000, 0x20000),
    ];
    ix.replace(&[whole], &parts).unwrap();
    ix.validate().unwrap();
    assert_eq!(ix.len(), 3);
    assert!(Arc::ptr_eq(&ix.find(0x14800).unwrap(), &parts[1]));
    let merged = vma(0x10000, 0x20000);
    ix.replace(&parts, std::slice::from_ref(&merged)).unwrap();
    ix.validate().unwrap();
    assert_eq!(ix.len(), 1);
    assert!(Arc::ptr_eq(&ix.find(0x14800).unwrap(), &merged));
}

#[test]
fn replace_of_a_missing_vma_is_refused() {
    for mut ix in [
        Box::new(legacy_with(&[(P, 3 * P)])) as Box<dyn VmaIndex>,
        maple_with(&[(P, 3 * P)]),
    ] {
        assert_eq!(ix.replace(&[vma(P, 2 * P)], &[]), Err(Errno::EINVAL));
        assert_eq!(ix.len(), 1);
        ix.validate().unwrap();
    }
}

#[test]
fn insert_over_a_live_vma_is_refused() {
    for mut ix in [
        Box::new(legacy_with(&[(P, 3 * P)])) as Box<dyn VmaIndex>,
        maple_with(&[(P, 3 * P)]),
    ] {
        assert_eq!(ix.replace(&[], &[vma(2 * P, 4 * P)]), Err(Errno::EINVAL));
        let two = [vma(4 * P, 6 * P), vma(5 * P, 7 * P)];
        assert_eq!(
            ix.replace(&[], &two),
            Err(Errno::EINVAL),
            "overlapping new VMAs"
        );
        assert_eq!(ix.len(), 1);
        ix.validate().unwrap();
    }
}

/// Slots are reused LIFO, so a freed node's slot comes back.
#[test]
fn arena_reuses_freed_slots() {
    let mut ix = LegacyIndex::new();
    let vs: Vec<_> = (0..100).map(|k| vma(k * 2 * P, k * 2 * P + P)).collect();
    ix.replace(&[], &vs).unwrap();
    ix.replace(&vs, &[]).unwrap();
    ix.validate().unwrap();
    ix.replace(&[], &vs).unwrap();
    ix.validate().unwrap();
    assert_eq!(ix.len(), 100);
}

// ---- the VMA cache ------------------------------------------------------

#[test]
fn cache_hits_on_repeat_and_on_other_pages_of_the_vma() {
    let ix = legacy_with(&[(0x10 * P, 0x20 * P)]);
    let (h0, m0) = vmacache::stats();
    ix.find(0x10 * P).unwrap();
    ix.find(0x10 * P + 5).unwrap();
    // A different hash slot; vmacache_find scans all four.
    ix.find(0x11 * P).unwrap();
    let (h1, m1) = vmacache::stats();
    assert_eq!((h1 - h0, m1 - m0), (2, 1));
}

#[test]
fn cache_invalidated_by_replace_on_another_thread() {
    let a = vma(0x10 * P, 0x20 * P);
    let ix = Arc::new(RwLock::new(LegacyIndex::new()));
    ix.write()
        .unwrap()
        .replace(&[], std::slice::from_ref(&a))
        .unwrap();

    let addr = 0x18 * P;
    assert!(Arc::ptr_eq(&ix.read().unwrap().find(addr).unwrap(), &a));
    let (h0, m0) = vmacache::stats();
    assert!(Arc::ptr_eq(&ix.read().unwrap().find(addr).unwrap(), &a));
    assert_eq!(vmacache::stats(), (h0 + 1, m0), "second lookup hits");

    // Another thread changes it in place (say, `mprotect` of the whole
    // VMA): the replacement takes the freed arena slot that this thread's
    // cache names, and covers `addr`, so only the sequence number tells
    // the slot is stale.
    let a2 = vma(0x10 * P, 0x20 * P);
    std::thread::scope(|s| {
        s.spawn(|| {
            ix.write()
                .unwrap()
                .replace(std::slice::from_ref(&a), std::slice::from_ref(&a2))
                .unwrap()
        });
    });

    let guard = ix.read().unwrap();
    guard.validate().unwrap();
    assert!(Arc::ptr_eq(&guard.find(addr).unwrap(), &a2));
    assert_eq!(vmacache::stats(), (h0 + 1, m0 + 1), "stale slot must miss");
    assert!(Arc::ptr_eq(&guard.find(addr).unwrap(), &a2));
    assert_eq!(vmacache::stats(), (h0 + 2, m0 + 1), "refilled slot hits");
    drop(guard);

    // And an unmap on the other thread leaves nothing to find.
    std::thread::scope(|s| {
        s.spawn(|| {
            ix.write()
                .unwrap()
                .replace(std::slice::from_ref(&a2), &[])
                .unwrap()
        });
    });
    assert!(ix.read().unwrap().find(addr).is_none());
    ix.read().unwrap().validate().unwrap();
}

#[test]
fn two_indexes_do_not_share_cache_entries() {
    // The same arena slot (1) and sequence number (1) in both indexes.
    let x = legacy_with(&[(0x10 * P, 0x20 * P)]);
    let y = legacy_with(&[(0x10 * P, 0x20 * P)]);
    let vx = x.find(0x10 * P).unwrap();
    let (h0, m0) = vmacache::stats();
    let vy = y.find(0x10 * P).unwrap();
    assert_eq!(vmacache::stats(), (h0, m0 + 1), "y must not hit x's slot");
    assert!(!Arc::ptr_eq(&vx, &vy));
    assert!(Arc::ptr_eq(&x.find(0x10 * P).unwrap(), &vx));

    // y's slot 1 freed, x's still live at the same (slot, seq).
    let mut y = legacy_with(&[(0x10 * P, 0x20 * P), (0x40 * P, 0x50 * P)]);
    let mut x = legacy_with(&[(0x10 * P, 0x20 * P), (0x40 * P, 0x50 * P)]);
    let old = y.find(0x10 * P).unwrap();
    y.replace(&[old], &[]).unwrap();
    x.replace(&[], &[]).unwrap();
    assert!(x.find(0x10 * P).is_some());
    assert!(y.find(0x10 * P).is_none());
    y.validate().unwrap();
}

#[test]
fn dropped_index_identity_is_not_reused() {
    let x = legacy_with(&[(0x10 * P, 0x20 * P)]);
    x.find(0x10 * P).unwrap();
    let id = x.id;
    drop(x);
    let y = legacy_with(&[(0x10 * P, 0x20 * P)]);
    assert_ne!(y.id, id);
}

// ---- randomised cross-check ---------------------------------------------

/// The obvious implementation: a sorted `Vec`.
#[derive(Default)]
struct Oracle {
    vmas: Vec<Arc<Vma>>,
}

impl Oracle {
    fn overlapping(&self, start: u64, end: u64) -> Vec<Arc<Vma>> {
        self.vmas
            .iter()
            .filter(|v| v.start() < end && start < v.end())
            .cloned()
            .collect()
    }

    fn replace(&mut self, old: &[Arc<Vma>], new: &[Arc<Vma>]) {
        self.vmas.retain(|v| !old.iter().any(|o| Arc::ptr_eq(o, v)));
        self.vmas.extend(new.iter().cloned());
        self.vmas.sort_by_key(|v| v.start());
    }

    fn find(&self, addr: u64) -> Option<Arc<Vma>> {
        self.vmas
            .iter()
            .find(|v| v.start() <= addr && addr < v.end())
            .cloned()
    }

    fn find_next(&self, addr: u64) -> Option<Arc<Vma>> {
        self.vmas.iter().find(|v| v.end() > addr).cloned()
    }

    fn find_prev(&self, addr: u64) -> Option<Arc<Vma>> {
        self.vmas.iter().rev().find(|v| v.start() < addr).cloned()
    }

    /// Free intervals `[start, end)` in address order, ending at u64::MAX.
    fn holes(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = 0;
        for v in &self.vmas {
            if v.start() > at {
                out.push((at, v.start()));
            }
            at = v.end();
        }
        if at < u64::MAX {
            out.push((at, u64::MAX));
        }
        out
    }

    fn gap_lowest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        if len == 0 {
            return None;
        }
        self.holes().into_iter().find_map(|(s, e)| {
            let (a, b) = (s.max(low), e.min(high));
            (b > a && b - a >= len).then_some(a)
        })
    }

    fn gap_highest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        if len == 0 {
            return None;
        }
        self.holes().into_iter().rev().find_map(|(s, e)| {
            let (a, b) = (s.max(low), e.min(high));
            (b > a && b - a >= len).then_some(b)
        })
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// `mmap(MAP_FIXED)`: replace what `[start, start + len)` overlaps by
    /// the remnants and one new VMA.
    Map(u64, u64),
    /// `munmap`: replace what it overlaps by the remnants.
    Unmap(u64, u64),
    Find(u64),
    FindNext(u64),
    FindPrev(u64),
    Overlapping(u64, u64),
    GapHighest(u64, u64, u64),
    GapLowest(u64, u64, u64),
}

/// The three indexes under test, driven in lock step.
struct Trio {
    legacy: LegacyIndex,
    maple: MapleIndex,
    oracle: Oracle,
}

fn same(a: &Option<Arc<Vma>>, b: &Option<Arc<Vma>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

impl Trio {
    fn new() -> Trio {
        Trio {
            legacy: LegacyIndex::new(),
            maple: MapleIndex::new(),
            oracle: Oracle::default(),
        }
    }

    /// Map (`keep`) or unmap `[start, end)`, clipped to the address space.
    fn change(&mut self, start: u64, len: u64, map: bool) {
        let end = start.saturating_add(len);
        if end <= start {
            return;
        }
        let old = self.oracle.overlapping(start, end);
        let mut new = Vec::new();
        if let Some(first) = old.first().filter(|v| v.start() < start) {
            new.push(Arc::new(first.resized(first.start(), start)));
        }
        if map {
            new.push(vma(start, end));
        }
        if let Some(last) = old.last().filter(|v| v.end() > end) {
            new.push(Arc::new(last.resized(end, last.end())));
        }
        self.legacy.replace(&old, &new).unwrap();
        self.maple.replace(&old, &new).unwrap();
        self.oracle.replace(&old, &new);
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        let check = |what: &str, l: Option<Arc<Vma>>, m: Option<Arc<Vma>>, o: Option<Arc<Vma>>| {
            if same(&l, &o) && same(&m, &o) {
                Ok(())
            } else {
                Err(format!(
                    "{what}: legacy {:x?}, maple {:x?}, oracle {:x?}",
                    range(l),
                    range(m),
                    range(o)
                ))
            }
        };
        match *op {
            Op::Map(s, l) => self.change(s, l, true),
            Op::Unmap(s, l) => self.change(s, l, false),
            Op::Find(a) => check(
                &format!("find({a:#x})"),
                self.legacy.find(a),
                self.maple.find(a),
                self.oracle.find(a),
            )?,
            Op::FindNext(a) => check(
                &format!("find_next({a:#x})"),
                self.legacy.find_next(a),
                self.maple.find_next(a),
                self.oracle.find_next(a),
            )?,
            Op::FindPrev(a) => check(
                &format!("find_prev({a:#x})"),
                self.legacy.find_prev(a),
                self.maple.find_prev(a),
                self.oracle.find_prev(a),
            )?,
            Op::Overlapping(s, e) => {
                let (mut l, mut m) = (Vec::new(), Vec::new());
                self.legacy.overlapping(s, e, &mut l);
                self.maple.overlapping(s, e, &mut m);
                let o = if s < e {
                    self.oracle.overlapping(s, e)
                } else {
                    Vec::new()
                };
                let eq = |x: &[Arc<Vma>]| {
                    x.len() == o.len() && x.iter().zip(&o).all(|(a, b)| Arc::ptr_eq(a, b))
                };
                if !eq(&l) || !eq(&m) {
                    return Err(format!(
                        "overlapping({s:#x}, {e:#x}): legacy {} VMAs, maple {}, oracle {}",
                        l.len(),
                        m.len(),
                        o.len()
                    ));
                }
            }
            Op::GapHighest(lo, hi, len) => {
                let r = (
                    self.legacy.gap_highest(lo, hi, len),
                    self.maple.gap_highest(lo, hi, len),
                    self.oracle.gap_highest(lo, hi, len),
                );
                if r.0 != r.2 || r.1 != r.2 {
                    return Err(format!(
                        "gap_highest({lo:#x}, {hi:#x}, {len:#x}): legacy, maple, oracle = {r:x?}"
                    ));
                }
            }
            Op::GapLowest(lo, hi, len) => {
                let r = (
                    self.legacy.gap_lowest(lo, hi, len),
                    self.maple.gap_lowest(lo, hi, len),
                    self.oracle.gap_lowest(lo, hi, len),
                );
                if r.0 != r.2 || r.1 != r.2 {
                    return Err(format!(
                        "gap_lowest({lo:#x}, {hi:#x}, {len:#x}): legacy, maple, oracle = {r:x?}"
                    ));
                }
            }
        }
        self.check_all()
    }

    fn check_all(&self) -> Result<(), String> {
        self.legacy.validate().map_err(|e| format!("legacy: {e}"))?;
        self.maple.validate().map_err(|e| format!("maple: {e}"))?;
        let n = self.oracle.vmas.len();
        if self.legacy.len() != n || self.maple.len() != n {
            return Err(format!(
                "len: legacy {}, maple {}, oracle {n}",
                self.legacy.len(),
                self.maple.len()
            ));
        }
        let mut l = Vec::new();
        self.legacy.for_each(&mut |v| l.push(v.clone()));
        if l.len() != n
            || !l
                .iter()
                .zip(&self.oracle.vmas)
                .all(|(a, b)| Arc::ptr_eq(a, b))
        {
            return Err("legacy for_each differs from the oracle".into());
        }
        Ok(())
    }
}

/// 2^64 minus 64 pages: VMAs up here can end at u64::MAX (clipped).
const TOP: u64 = 0u64.wrapping_sub(64 * P);

fn addr() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => (0u64..96).prop_map(|p| p * P),
        2 => 0u64..96 * P,
        2 => (0u64..64).prop_map(|p| TOP + p * P),
        1 => TOP..=u64::MAX,
        1 => any::<u64>(),
    ]
}

fn length() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => (1u64..8).prop_map(|p| p * P),
        2 => 0u64..8 * P,
        1 => (8u64..96).prop_map(|p| p * P),
        1 => any::<u64>(),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (addr(), length()).prop_map(|(s, l)| Op::Map(s, l)),
        2 => (addr(), length()).prop_map(|(s, l)| Op::Unmap(s, l)),
        2 => addr().prop_map(Op::Find),
        1 => addr().prop_map(Op::FindNext),
        1 => addr().prop_map(Op::FindPrev),
        1 => (addr(), addr()).prop_map(|(s, e)| Op::Overlapping(s, e)),
        3 => (addr(), addr(), length()).prop_map(|(l, h, n)| Op::GapHighest(l, h, n)),
        3 => (addr(), addr(), length()).prop_map(|(l, h, n)| Op::GapLowest(l, h, n)),
    ]
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Random call sequences give the same answers from the legacy index,
    /// the maple index and the oracle, with both indexes valid throughout.
    #[test]
    fn matches_maple_and_oracle(ops in prop::collection::vec(op(), 1..120)) {
        let mut t = Trio::new();
        for op in &ops {
            if let Err(e) = t.step(op) {
                return Err(TestCaseError::fail(format!("after {op:x?}: {e}")));
            }
        }
    }
}

/// A deterministic long run with hundreds of VMAs, for tree shapes deeper
/// than the short random sequences reach; every query is checked after
/// every change.
#[test]
fn long_run_with_many_vmas() {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut t = Trio::new();
    for step in 0..4000 {
        let s = next(3000) * P;
        // Mostly small maps so hundreds accumulate; an occasional large
        // unmap empties a region.
        let op = match next(10) {
            0..=5 => Op::Map(s, (1 + next(4)) * P),
            6..=8 => Op::Unmap(s, (1 + next(3)) * P),
            _ => Op::Unmap(s, next(200) * P),
        };
        t.step(&op)
            .unwrap_or_else(|e| panic!("step {step} {op:x?}: {e}"));
        for _ in 0..4 {
            let a = next(3100 * P);
            let (lo, hi) = (next(3100) * P, next(3100) * P);
            let len = (1 + next(6)) * P;
            for q in [
                Op::Find(a),
                Op::FindNext(a),
                Op::FindPrev(a),
                Op::Overlapping(a, a + next(20 * P)),
                Op::GapHighest(lo, hi, len),
                Op::GapLowest(lo, hi, len),
            ] {
                t.step(&q)
                    .unwrap_or_else(|e| panic!("step {step} {q:x?}: {e}"));
            }
        }
    }
}

/// Insertions in ascending and descending order and removals from the
/// middle exercise every rebalancing case.
#[test]
fn ordered_inserts_and_removals() {
    let vs: Vec<_> = (0..512u64)
        .map(|k| vma(k * 3 * P, k * 3 * P + (1 + k % 2) * P))
        .collect();
    for order in [false, true] {
        let mut ix = LegacyIndex::new();
        let mut ins = vs.clone();
        if order {
            ins.reverse();
        }
        for v in &ins {
            ix.replace(&[], std::slice::from_ref(v)).unwrap();
            ix.validate().unwrap();
        }
        // Remove every third, then the rest from the middle outwards.
        let mut left: Vec<_> = vs.clone();
        let thirds: Vec<_> = left.iter().step_by(3).cloned().collect();
        for v in &thirds {
            ix.replace(std::slice::from_ref(v), &[]).unwrap();
            ix.validate().unwrap();
        }
        left.retain(|v| !thirds.iter().any(|t| Arc::ptr_eq(t, v)));
        while !left.is_empty() {
            let v = left.remove(left.len() / 2);
            ix.replace(&[v], &[]).unwrap();
            ix.validate().unwrap();
            let o = Oracle { vmas: left.clone() };
            assert_eq!(
                ix.gap_highest(0, 4000 * P, 2 * P),
                o.gap_highest(0, 4000 * P, 2 * P)
            );
            assert_eq!(
                ix.gap_lowest(P, 4000 * P, 3 * P),
                o.gap_lowest(P, 4000 * P, 3 * P)
            );
        }
        assert!(ix.is_empty());
    }
}

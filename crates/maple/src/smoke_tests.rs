//! Fast randomized checks of the write algorithm against a per-index
//! oracle, with `validate` after every step. The thorough model-based and
//! concurrent suites live in `tests/`.

use crate::{Entry, Error, MapleTree};
use std::collections::BTreeMap;

/// splitmix64: deterministic, dependency-free randomness.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Oracle: start -> (last, value).
type Oracle = BTreeMap<u64, (u64, u32)>;

fn oracle_store(o: &mut Oracle, first: u64, last: u64, v: Option<u32>) {
    let overlapping: Vec<(u64, (u64, u32))> = o
        .range(..=last)
        .rev()
        .take_while(|(_, &(l, _))| l >= first)
        .map(|(&s, &e)| (s, e))
        .collect();
    for (s, (l, val)) in overlapping {
        o.remove(&s);
        if s < first {
            o.insert(s, (first - 1, val));
        }
        if l > last {
            o.insert(last + 1, (l, val));
        }
    }
    if let Some(v) = v {
        o.insert(first, (last, v));
    }
}

fn check_same(tree: &MapleTree<u32>, o: &Oracle) {
    tree.validate().unwrap();
    let g = crate::pin();
    let got: Vec<(u64, u64, u32)> = tree
        .iter(&g)
        .map(Entry::parts)
        .map(|(a, b, v)| (a, b, *v))
        .collect();
    let want: Vec<(u64, u64, u32)> = o.iter().map(|(&a, &(b, v))| (a, b, v)).collect();
    assert_eq!(got, want);
    let back: Vec<(u64, u64, u32)> = tree
        .iter(&g)
        .rev()
        .map(Entry::parts)
        .map(|(a, b, v)| (a, b, *v))
        .collect();
    assert_eq!(back.into_iter().rev().collect::<Vec<_>>(), want);
}

fn run(seed: u64, steps: usize, domain: u64, shared: bool) {
    let mut rng = Rng(seed);
    let tree: MapleTree<u32> = MapleTree::new();
    let mut tree = tree;
    let mut o = Oracle::new();
    for step in 0..steps {
        let a = rng.below(domain);
        let len = if rng.below(4) == 0 {
            rng.below(domain / 4 + 1)
        } else {
            rng.below(8)
        };
        let b = (a + len).min(domain);
        let v = step as u32;
        match rng.below(10) {
            0..=5 => {
                if shared {
                    tree.write().store_range(a..=b, v).unwrap();
                } else {
                    tree.store_range(a..=b, v).unwrap();
                }
                oracle_store(&mut o, a, b, Some(v));
            }
            6 | 7 => {
                if shared {
                    tree.write().erase_range(a..=b).unwrap();
                } else {
                    tree.erase_range(a..=b).unwrap();
                }
                oracle_store(&mut o, a, b, None);
            }
            8 => {
                let got = if shared {
                    tree.write().erase(a)
                } else {
                    tree.erase(a)
                };
                let want = o
                    .range(..=a)
                    .next_back()
                    .filter(|(_, &(l, _))| l >= a)
                    .map(|(&s, &(l, _))| (s, l));
                assert_eq!(got, want.map(|(s, l)| s..=l));
                if let Some((s, l)) = want {
                    oracle_store(&mut o, s, l, None);
                }
            }
            _ => {
                let free = o.range(..=b).next_back().is_none_or(|(_, &(l, _))| l < a);
                let r = tree.insert_range(a..=b, v);
                if free {
                    r.unwrap();
                    oracle_store(&mut o, a, b, Some(v));
                } else {
                    assert_eq!(r, Err(Error::Exists));
                }
            }
        }
        check_same(&tree, &o);
    }
}

/// Miri runs every test here, so sizes shrink under it.
const SCALE: usize = if cfg!(miri) { 1 } else { 10 };

#[test]
fn random_small_domain() {
    for seed in 0..2 * SCALE as u64 {
        run(seed, 40 * SCALE, 300, seed % 2 == 1);
    }
}

#[test]
fn random_large_domain_builds_height() {
    for seed in 0..SCALE.div_ceil(3) as u64 {
        run(seed, 150 * SCALE, 20_000, seed % 2 == 1);
    }
}

/// Inserts of separated entries in random order, then erases of them all
/// in another, through each writer: these take the writes of one entry
/// their own paths (`write.rs`, "Writes of one entry") — in a leaf, and
/// the splits, merges and evening-out of sibling leaves — and every step
/// is checked against the oracle. Under Miri this checks those paths'
/// unsafe node edits and frees.
#[test]
fn entry_writes_split_and_merge_leaves() {
    let n: u64 = if cfg!(miri) { 110 } else { 1500 };
    // Under Miri the whole-tree checks dominate: every few steps there.
    let every = if cfg!(miri) { 8 } else { 1 };
    for shared in [false, true] {
        let mut rng = Rng(7 + u64::from(shared));
        let mut order: Vec<u64> = (0..n).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut tree: MapleTree<u32> = MapleTree::new();
        let mut o = Oracle::new();
        let range = |i: u64| i * 10..=i * 10 + 6;
        for (step, &i) in order.iter().enumerate() {
            if shared {
                tree.write().insert_range(range(i), i as u32).unwrap();
            } else {
                tree.insert_range(range(i), i as u32).unwrap();
            }
            oracle_store(&mut o, i * 10, i * 10 + 6, Some(i as u32));
            if step % every == 0 {
                tree.validate().unwrap();
            }
            if step % (16 * every) == 0 {
                check_same(&tree, &o);
            }
        }
        check_same(&tree, &o);
        assert!(tree.mem_stats().height >= 3, "too small to split parents");
        order.reverse();
        let third = order.len() / 3;
        order.rotate_left(third);
        for (step, &i) in order.iter().enumerate() {
            let erased = if shared {
                tree.write().erase(i * 10 + 3)
            } else {
                tree.erase(i * 10 + 3)
            };
            assert_eq!(erased, Some(range(i)));
            oracle_store(&mut o, i * 10, i * 10 + 6, None);
            if step % every == 0 {
                tree.validate().unwrap();
            }
            if step % (16 * every) == 0 {
                check_same(&tree, &o);
            }
        }
        assert!(tree.is_empty());
        assert_eq!(tree.mem_stats().nodes, 0);
    }
}

/// A shared writer beside lock-free readers: under Miri this checks the
/// publication protocol for data races and use-after-free.
#[test]
fn shared_writer_with_readers() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let n: u64 = if cfg!(miri) { 40 } else { 2000 };
    let tree = Arc::new(MapleTree::new());
    for i in 0..n {
        tree.write().store_range(i * 10..=i * 10 + 4, i).unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (tree, done) = (Arc::clone(&tree), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut rng = Rng(r);
                while !done.load(Ordering::Acquire) {
                    let guard = crate::pin();
                    let i = rng.below(n);
                    // Entry i holds i, or i + n after the writer's rewrite.
                    if let Some(&v) = tree.load(i * 10 + 2, &guard) {
                        assert!(v == i || v == i + n, "index {i}: foreign value {v}");
                    }
                    let mut prev = None;
                    for last in tree.range(i * 10..i * 10 + 60, &guard).map(|e| e.last()) {
                        assert!(prev.is_none_or(|p| last > p));
                        prev = Some(last);
                    }
                    let _ = tree.empty_area(0, u64::MAX, 5, &guard);
                }
            })
        })
        .collect();
    let mut rng = Rng(99);
    for _ in 0..n * 2 {
        let i = rng.below(n);
        let mut w = tree.write();
        w.erase(i * 10);
        w.store_range(i * 10..=i * 10 + 4, i + n).unwrap();
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
    tree.validate().unwrap();
}

#[test]
fn ascending_then_erase_all() {
    let mut tree = MapleTree::new();
    let n = if cfg!(miri) { 200 } else { 5000u64 };
    for i in 0..n {
        tree.store_range(i * 5..=i * 5 + 3, i).unwrap();
    }
    tree.validate().unwrap();
    for i in (0..n).rev().step_by(3) {
        assert_eq!(tree.erase(i * 5 + 1), Some(i * 5..=i * 5 + 3));
    }
    tree.validate().unwrap();
    for i in 0..n {
        tree.erase(i * 5);
    }
    tree.validate().unwrap();
    assert!(tree.is_empty());
    assert_eq!(tree.mem_stats().nodes, 0);
}

/// The writer's kept path (`Scratch::kept` in `write.rs`) belongs to its
/// tree: a tree dropped right after an in-place write hands its scratch
/// space to the thread's next tree, which must walk its own nodes. The
/// next tree is built whole (`from_sorted`, and `clone`), so its first
/// write is not an empty tree's, which would walk anyway.
#[test]
fn a_kept_path_is_forgotten_with_its_tree() {
    for clone in [false, true] {
        let mut old = MapleTree::new();
        old.store_range(0..=9, 0u32).unwrap();
        // In place: the write leaves its path kept.
        old.store_range(100..=109, 1).unwrap();
        let source = MapleTree::from_sorted((0..40u64).map(|i| (i * 20..=i * 20 + 9, 7))).unwrap();
        // The scratch space the new tree's first write takes is `old`'s.
        drop(old);
        let mut new = if clone { source.clone() } else { source };
        // Inside the dropped tree's leaf too (it covered everything).
        new.store_range(105..=108, 9).unwrap();
        new.validate().unwrap();
        let g = crate::pin();
        assert_eq!(new.load(106, &g), Some(&9));
        assert_eq!(new.load(100, &g), Some(&7));
        assert_eq!(new.len(), 42);
    }
}

/// Writes near each other reuse the kept path, and writes that restructure
/// the tree between them make the next write walk: the tree is checked
/// after every step, against the oracle, for exclusive and shared writes
/// in turn.
#[test]
fn kept_paths_follow_local_writes() {
    let mut tree = MapleTree::new();
    let mut o = Oracle::new();
    let n = if cfg!(miri) { 300 } else { 3000 };
    let mut rng = Rng(11);
    let mut at = 1_000u64;
    for i in 0..n {
        // Mostly a step to a neighbour; now and then a jump elsewhere.
        at = if rng.below(8) == 0 {
            rng.below(20_000)
        } else {
            (at + rng.below(40)).saturating_sub(20)
        };
        let last = at + rng.below(12);
        let v = (rng.below(3) != 0).then_some(i as u32);
        if i % 2 == 0 {
            match v {
                Some(v) => tree.store_range(at..=last, v).unwrap(),
                None => tree.erase_range(at..=last).unwrap(),
            }
        } else {
            let mut w = tree.write();
            match v {
                Some(v) => w.store_range(at..=last, v).unwrap(),
                None => w.erase_range(at..=last).unwrap(),
            }
        }
        oracle_store(&mut o, at, last, v);
        tree.validate().unwrap();
        let g = crate::pin();
        for p in [at.saturating_sub(1), at, last, last + 1] {
            let want = o
                .range(..=p)
                .next_back()
                .filter(|(_, &(l, _))| l >= p)
                .map(|(_, (_, v))| v);
            assert_eq!(tree.load(p, &g), want, "step {i}: index {p}");
        }
    }
}

/// An empty range is refused by every write, and the tree is unchanged:
/// first above last, and a `RangeInclusive` iterated to its end (whose
/// bounds still read `3..=3`).
#[test]
#[allow(clippy::reversed_empty_ranges)] // the empty range is the point
fn empty_ranges_are_refused() {
    let mut tree = MapleTree::new();
    tree.store_range(0..=9, 1u32).unwrap();
    let mut spent = 3..=3;
    assert_eq!(spent.next(), Some(3));
    for r in [5..=4, spent] {
        let (first, last) = (*r.start(), *r.end());
        let refused = Error::InvalidRange { first, last };
        assert!(!refused.to_string().is_empty());
        let err = Err(refused);
        assert_eq!(tree.store_range(r.clone(), 2), err);
        assert_eq!(tree.insert_range(r.clone(), 2), err);
        assert_eq!(tree.erase_range(r.clone()), err);
        assert_eq!(tree.write().store_range(r.clone(), 2), err);
        assert_eq!(tree.write().erase_range(r.clone()), err);
        assert_eq!(
            MapleTree::from_sorted([(r.clone(), 2u32)]).err(),
            Some(Error::InvalidRange { first, last })
        );
    }
    let g = crate::pin();
    let all: Vec<_> = tree.iter(&g).map(Entry::parts).collect();
    assert_eq!(all, [(0, 9, &1)]);
}

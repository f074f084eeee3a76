//! Shared helpers for the maple integration tests: a brute-force range-map
//! oracle with exactly the contract's semantics, a tiny deterministic RNG and
//! a drop-counting value type.
//!
//! Every test binary includes this module with `mod common;`; not every binary
//! uses every helper.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ops::{Bound, RangeInclusive};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

use maple::{Entry, Error};

pub const MAX: u64 = u64::MAX;

/// Reads a `usize` from the environment, falling back to `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------------------
// Oracle
// ---------------------------------------------------------------------------

/// Brute-force model of the maple tree: non-overlapping inclusive ranges
/// `first -> (last, value id)`.  Split pieces keep the value id of the entry
/// they came from; `pieces` counts how many entries currently refer to each
/// value id, so the model knows when the last piece of a value disappears
/// (that is when the tree must drop the value).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Oracle {
    map: BTreeMap<u64, (u64, u32)>,
    pieces: BTreeMap<u32, usize>,
}

impl Oracle {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Is value id `v` still referenced by at least one entry?
    pub fn is_live(&self, v: u32) -> bool {
        self.pieces.contains_key(&v)
    }

    /// The value ids still referenced by the map.
    pub fn live_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.pieces.keys().copied()
    }

    /// Number of distinct value ids still referenced by the map.
    pub fn live_values(&self) -> usize {
        self.pieces.len()
    }

    fn add_piece(&mut self, first: u64, last: u64, v: u32) {
        debug_assert!(first <= last);
        self.map.insert(first, (last, v));
        *self.pieces.entry(v).or_insert(0) += 1;
    }

    /// Removes the entry starting at `first`; returns `Some(v)` if that was
    /// the last piece referring to value `v`.
    fn remove_piece(&mut self, first: u64) -> (u64, u32, Option<u32>) {
        let (last, v) = self.map.remove(&first).expect("piece exists");
        let c = self.pieces.get_mut(&v).expect("piece count");
        *c -= 1;
        let dead = if *c == 0 {
            self.pieces.remove(&v);
            Some(v)
        } else {
            None
        };
        (last, v, dead)
    }

    /// Entries intersecting `[first, last]` (requires first <= last).
    fn intersecting_keys(&self, first: u64, last: u64) -> Vec<u64> {
        let mut keys = Vec::new();
        if let Some((&f, &(l, _))) = self.map.range(..first).next_back() {
            if l >= first {
                keys.push(f);
            }
        }
        keys.extend(self.map.range(first..=last).map(|(&f, _)| f));
        keys
    }

    /// Makes `[first, last]` absent, trimming/splitting entries.  Returns the
    /// value ids whose last piece disappeared.  Pieces that survive keep their
    /// value id, so a value is never counted dead while a piece remains.
    fn cut(&mut self, first: u64, last: u64) -> Vec<u32> {
        let keys = self.intersecting_keys(first, last);
        let mut touched = Vec::new();
        for k in keys {
            let (l, v) = self.map.remove(&k).expect("piece exists");
            *self.pieces.get_mut(&v).expect("piece count") -= 1;
            if k < first {
                self.add_piece(k, first - 1, v);
            }
            if l > last {
                self.add_piece(last + 1, l, v);
            }
            touched.push(v);
        }
        let mut dead = Vec::new();
        for v in touched {
            if self.pieces.get(&v) == Some(&0) {
                self.pieces.remove(&v);
                dead.push(v);
            }
        }
        dead
    }

    /// `store_range` semantics. Ok(dead value ids).
    pub fn store_range(&mut self, r: RangeInclusive<u64>, v: u32) -> Result<Vec<u32>, Error> {
        let (first, last) = (*r.start(), *r.end());
        if first > last {
            return Err(Error::InvalidRange { first, last });
        }
        let dead = self.cut(first, last);
        self.add_piece(first, last, v);
        Ok(dead)
    }

    /// `insert_range` semantics.
    pub fn insert_range(&mut self, r: RangeInclusive<u64>, v: u32) -> Result<(), Error> {
        let (first, last) = (*r.start(), *r.end());
        if first > last {
            return Err(Error::InvalidRange { first, last });
        }
        if !self.intersecting_keys(first, last).is_empty() {
            return Err(Error::Exists);
        }
        self.add_piece(first, last, v);
        Ok(())
    }

    /// `erase` semantics: (range erased, dead value id).
    pub fn erase(&mut self, index: u64) -> (Option<RangeInclusive<u64>>, Option<u32>) {
        match self.load_entry(index) {
            None => (None, None),
            Some((f, l, _)) => {
                let (_, _, dead) = self.remove_piece(f);
                (Some(f..=l), dead)
            }
        }
    }

    /// `erase_range` semantics. Ok(dead value ids).
    pub fn erase_range(&mut self, r: RangeInclusive<u64>) -> Result<Vec<u32>, Error> {
        let (first, last) = (*r.start(), *r.end());
        if first > last {
            return Err(Error::InvalidRange { first, last });
        }
        Ok(self.cut(first, last))
    }

    pub fn load_entry(&self, index: u64) -> Option<(u64, u64, u32)> {
        let (&f, &(l, v)) = self.map.range(..=index).next_back()?;
        (l >= index).then_some((f, l, v))
    }

    pub fn load(&self, index: u64) -> Option<u32> {
        self.load_entry(index).map(|e| e.2)
    }

    /// All entries intersecting `[lo, hi]` in ascending order (empty if lo > hi).
    pub fn range_incl(&self, lo: u64, hi: u64) -> Vec<(u64, u64, u32)> {
        if lo > hi {
            return Vec::new();
        }
        self.intersecting_keys(lo, hi)
            .into_iter()
            .map(|f| {
                let (l, v) = self.map[&f];
                (f, l, v)
            })
            .collect()
    }

    /// All entries intersecting the given bounds (see [`bounds_to_incl`]).
    pub fn range_bounds(&self, b: (Bound<u64>, Bound<u64>)) -> Vec<(u64, u64, u32)> {
        match bounds_to_incl(b) {
            None => Vec::new(),
            Some((lo, hi)) => self.range_incl(lo, hi),
        }
    }

    /// The `k`-th entry in ascending order.
    pub fn nth(&self, k: usize) -> (u64, u64, u32) {
        let (&f, &(l, v)) = self.map.iter().nth(k).expect("nth entry");
        (f, l, v)
    }

    pub fn entries(&self) -> Vec<(u64, u64, u32)> {
        self.map.iter().map(|(&f, &(l, v))| (f, l, v)).collect()
    }

    /// First entry intersecting `[index, max]`.
    pub fn find(&self, index: u64, max: u64) -> Option<(u64, u64, u32)> {
        if index > max {
            return None;
        }
        if let Some(e) = self.load_entry(index) {
            return Some(e);
        }
        let (&f, &(l, v)) = self.map.range(index..=max).next()?;
        Some((f, l, v))
    }

    /// Last entry intersecting `[min, index]`.
    pub fn find_rev(&self, index: u64, min: u64) -> Option<(u64, u64, u32)> {
        if min > index {
            return None;
        }
        let (&f, &(l, v)) = self.map.range(..=index).next_back()?;
        (l >= min).then_some((f, l, v))
    }

    /// Maximal absent intervals clipped to `[min, max]`, ascending.
    pub fn gaps(&self, min: u64, max: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if min > max {
            return out;
        }
        let mut cur: u128 = min as u128;
        for (f, l, _) in self.range_incl(min, max) {
            if (f as u128) > cur {
                out.push((cur as u64, f - 1));
            }
            cur = l as u128 + 1;
        }
        if cur <= max as u128 {
            out.push((cur as u64, max));
        }
        out
    }

    /// Lowest start `a` with `[a, a+size-1]` inside `[min, max]` and absent.
    pub fn empty_area(&self, min: u64, max: u64, size: u64) -> Result<u64, Error> {
        if size == 0 || min > max {
            return Err(Error::InvalidArgument(""));
        }
        for (gs, ge) in self.gaps(min, max) {
            if (ge - gs) as u128 + 1 >= size as u128 {
                return Ok(gs);
            }
        }
        Err(Error::NoSpace)
    }

    /// Highest such start.
    pub fn empty_area_rev(&self, min: u64, max: u64, size: u64) -> Result<u64, Error> {
        if size == 0 || min > max {
            return Err(Error::InvalidArgument(""));
        }
        for (gs, ge) in self.gaps(min, max).into_iter().rev() {
            if (ge - gs) as u128 + 1 >= size as u128 {
                return Ok(ge - (size - 1));
            }
        }
        Err(Error::NoSpace)
    }

    /// Interesting indices: entry boundaries and their neighbours.
    pub fn boundary_points(&self) -> Vec<u64> {
        let mut v = vec![0, 1, MAX - 1, MAX];
        for (f, l, _) in self.entries() {
            v.push(f);
            v.push(l);
            v.push(f.wrapping_sub(1));
            v.push(l.wrapping_add(1));
        }
        v
    }
}

/// Converts a pair of bounds into an inclusive `[lo, hi]`, or `None` when the
/// range is empty.
pub fn bounds_to_incl(b: (Bound<u64>, Bound<u64>)) -> Option<(u64, u64)> {
    let lo = match b.0 {
        Bound::Included(x) => x,
        Bound::Excluded(x) => x.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let hi = match b.1 {
        Bound::Included(x) => x,
        Bound::Excluded(x) => x.checked_sub(1)?,
        Bound::Unbounded => MAX,
    };
    (lo <= hi).then_some((lo, hi))
}

/// Compares error kinds, ignoring the message of `InvalidArgument`.
pub fn same_err(a: &Error, b: &Error) -> bool {
    match (a, b) {
        (Error::InvalidArgument(_), Error::InvalidArgument(_)) => true,
        _ => a == b,
    }
}

pub fn same_result<T: PartialEq>(a: &Result<T, Error>, b: &Result<T, Error>) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x == y,
        (Err(x), Err(y)) => same_err(x, y),
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// RNG
// ---------------------------------------------------------------------------

/// SplitMix64: small, fast, deterministic.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, n)`; `n` must be > 0.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform in `[lo, hi]`.
    pub fn range_incl(&mut self, lo: u64, hi: u64) -> u64 {
        if lo == 0 && hi == MAX {
            return self.next_u64();
        }
        lo + self.below(hi - lo + 1)
    }
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
    pub fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

// ---------------------------------------------------------------------------
// Drop counting
// ---------------------------------------------------------------------------

/// Per-test table of drop counts, indexed by value id.
pub struct DropTable {
    counts: Vec<AtomicU32>,
    total: AtomicUsize,
}

impl DropTable {
    pub fn new(n: usize) -> Arc<Self> {
        Arc::new(DropTable {
            counts: (0..n).map(|_| AtomicU32::new(0)).collect(),
            total: AtomicUsize::new(0),
        })
    }
    pub fn count(&self, id: u32) -> u32 {
        self.counts[id as usize].load(Ordering::SeqCst)
    }
    pub fn total(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }
    pub fn capacity(&self) -> usize {
        self.counts.len()
    }
}

/// A value that records its drop in a [`DropTable`].
pub struct Tracked {
    pub id: u32,
    table: Arc<DropTable>,
}

impl Tracked {
    pub fn new(id: u32, table: &Arc<DropTable>) -> Self {
        assert!((id as usize) < table.capacity(), "drop table too small");
        Tracked {
            id,
            table: Arc::clone(table),
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.table.counts[self.id as usize].fetch_add(1, Ordering::SeqCst);
        self.table.total.fetch_add(1, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Tracked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tracked({})", self.id)
    }
}

/// An entry read from a tree as the oracle's `(first, last, value)`.
pub fn parts<R>(e: Entry<R>) -> (u64, u64, R) {
    (e.first(), e.last(), e.value())
}

/// What the tests compare a read's result as: `Option<(first, last, value)>`.
pub trait Parts<R> {
    fn parts(self) -> Option<(u64, u64, R)>;
}

impl<R> Parts<R> for Option<Entry<R>> {
    fn parts(self) -> Option<(u64, u64, R)> {
        self.map(parts)
    }
}

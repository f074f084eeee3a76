//! Sequential access: a cursor and a double-ended range iterator.
//!
//! Both keep the path to the current leaf, so a scan steps from leaf to leaf
//! instead of walking from the root for each entry. If the writer changes
//! the cached leaf in place or replaces it, the next step notices that the
//! leaf's stamp (its sequence count and dead mark, see `node.rs`) moved and
//! walks afresh from the index it had reached. A replaced leaf is marked
//! dead when the write finishes (after its new nodes are published, as in
//! the kernel): a step taken while a write is in flight may still read the
//! leaf it replaces; an in-place change is never seen half made.
//!
//! # Under concurrent shared writes
//!
//! A walk is not a snapshot; it behaves like the kernel's RCU walks of the
//! maple tree. Each entry returned was present when it was read, and each
//! step searches strictly past the previous one: going forward, every entry
//! ends after the previous one ended (going back, starts before it started),
//! so no entry is returned twice and the walk always finishes. But an entry
//! written after the previous step may start inside the range already
//! passed, so two consecutive entries can overlap. Without concurrent
//! writers, entries are disjoint and in order.

use crate::node::value;
use crate::path::Path;
use crate::sync::{Guard, Pinned};
use crate::{Boxed, Entry, MapleTree, Ownership};
use std::ops::{Bound, RangeBounds};

/// A position in a tree for sequential work: step to the next or previous
/// entry without starting from the root each time.
///
/// ```
/// let mut tree = maple::MapleTree::new();
/// for i in 0..5u64 {
///     tree.store_range(i * 10..=i * 10 + 5, i).unwrap();
/// }
/// let guard = maple::pin();
/// let mut c = tree.cursor(22, &guard);
/// assert_eq!(c.next().map(|e| e.range()), Some(20..=25));
/// assert_eq!(c.next().map(|e| e.value()), Some(&3));
/// assert_eq!(c.prev().map(|e| (e.first(), e.value())), Some((20, &2)));
/// ```
pub struct Cursor<'g, T, O: Ownership<T> = Boxed> {
    tree: &'g MapleTree<T, O>,
    /// The guard the cursor reads under: its path's nodes live for `'g`.
    pinned: Pinned<'g>,
    path: Option<Path<'g>>,
    /// Where `next` searches from (`None`: past the end).
    next_from: Option<u64>,
    /// `prev` returns the last entry ending below this index.
    prev_below: u64,
}

impl<'g, T, O: Ownership<T>> Cursor<'g, T, O> {
    pub(crate) fn new(tree: &'g MapleTree<T, O>, index: u64, pinned: Pinned<'g>) -> Self {
        let mut c = Cursor {
            tree,
            pinned,
            path: None,
            next_from: None,
            prev_below: 0,
        };
        c.seek(index);
        c
    }

    /// Repositions the cursor at `index`: `next` then returns the first
    /// entry intersecting `[index, u64::MAX]` (the one containing `index`,
    /// if any), and `prev` the last entry that ends below `index`.
    pub fn seek(&mut self, index: u64) {
        self.next_from = Some(index);
        self.prev_below = index;
    }

    fn land(&mut self, found: Option<(u64, u64, *mut u8)>) -> Option<Entry<O::Ref<'g>>> {
        let (first, last, p) = found?;
        self.next_from = last.checked_add(1);
        self.prev_below = first;
        // SAFETY: `p` is a value of `tree`, read under the guard the cursor
        // borrows for 'g (see `MapleTree::load`).
        Some(Entry::new(first, last, unsafe { value::get::<T, O>(p) }))
    }

    /// Moves to the entry after the current one and returns it.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Entry<O::Ref<'g>>> {
        let from = self.next_from?;
        let found = self
            .tree
            .seek_fwd(&mut self.path, from, u64::MAX, self.pinned);
        self.land(found)
    }

    /// Moves to the entry before the current one and returns it.
    pub fn prev(&mut self) -> Option<Entry<O::Ref<'g>>> {
        let mut from = self.prev_below.checked_sub(1)?;
        loop {
            let found = self.tree.seek_rev(&mut self.path, from, 0, self.pinned);
            match found {
                // After a seek into the middle of an entry, that entry is
                // "current": step over it.
                Some((first, last, _)) if last >= self.prev_below => from = first.checked_sub(1)?,
                _ => return self.land(found),
            }
        }
    }
}

/// Iterator over the entries intersecting a range, in ascending order from
/// the front and descending from the back. Yields an [`Entry`] with each
/// entry's whole range, even where it sticks out of the bounds.
///
/// ```
/// let mut tree = maple::MapleTree::new();
/// for i in 0..4u64 {
///     tree.store_range(i * 10..=i * 10 + 5, i).unwrap();
/// }
/// let g = maple::pin();
/// let firsts: Vec<u64> = tree.range(3..=25, &g).map(|e| e.first()).collect();
/// assert_eq!(firsts, [0, 10, 20]);
/// let last = tree.iter(&g).next_back().unwrap();
/// assert_eq!((last.range(), last.value()), (30..=35, &3));
/// ```
pub struct Iter<'g, T, O: Ownership<T> = Boxed> {
    tree: &'g MapleTree<T, O>,
    /// The guard the iterator reads under: its paths' nodes live for `'g`.
    pinned: Pinned<'g>,
    front: Option<Path<'g>>,
    back: Option<Path<'g>>,
    /// Remaining bounds; `None` once exhausted.
    bounds: Option<(u64, u64)>,
}

impl<'g, T, O: Ownership<T>> Iter<'g, T, O> {
    pub(crate) fn new<R: RangeBounds<u64>>(
        tree: &'g MapleTree<T, O>,
        range: R,
        pinned: Pinned<'g>,
    ) -> Self {
        let lo = match range.start_bound() {
            Bound::Included(&a) => Some(a),
            Bound::Excluded(&a) => a.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let hi = match range.end_bound() {
            Bound::Included(&b) => Some(b),
            Bound::Excluded(&b) => b.checked_sub(1),
            Bound::Unbounded => Some(u64::MAX),
        };
        let bounds = match (lo, hi) {
            (Some(lo), Some(hi)) if lo <= hi => Some((lo, hi)),
            _ => None,
        };
        Iter {
            tree,
            pinned,
            front: None,
            back: None,
            bounds,
        }
    }

    fn take(
        &mut self,
        found: Option<(u64, u64, *mut u8)>,
        front: bool,
    ) -> Option<Entry<O::Ref<'g>>> {
        let Some((first, last, p)) = found else {
            self.bounds = None;
            return None;
        };
        let (lo, hi) = self.bounds?;
        self.bounds = if front {
            last.checked_add(1).filter(|&n| n <= hi).map(|n| (n, hi))
        } else {
            first.checked_sub(1).filter(|&n| n >= lo).map(|n| (lo, n))
        };
        // SAFETY: as in `Cursor::land`.
        Some(Entry::new(first, last, unsafe { value::get::<T, O>(p) }))
    }
}

impl<'g, T, O: Ownership<T>> Iterator for Iter<'g, T, O> {
    type Item = Entry<O::Ref<'g>>;

    fn next(&mut self) -> Option<Self::Item> {
        let (lo, hi) = self.bounds?;
        let found = self.tree.seek_fwd(&mut self.front, lo, hi, self.pinned);
        self.take(found, true)
    }
}

impl<'g, T, O: Ownership<T>> DoubleEndedIterator for Iter<'g, T, O> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let (lo, hi) = self.bounds?;
        let found = self.tree.seek_rev(&mut self.back, hi, lo, self.pinned);
        self.take(found, false)
    }
}

impl<'g, T, O: Ownership<T>> std::iter::FusedIterator for Iter<'g, T, O> {}

impl<T, O: Ownership<T>> MapleTree<T, O> {
    /// A cursor positioned at `index` (see [`Cursor::seek`]).
    pub fn cursor<'g>(&'g self, index: u64, guard: &'g Guard) -> Cursor<'g, T, O> {
        Cursor::new(self, index, Pinned::of(guard))
    }

    /// Iterates over the entries intersecting `range`.
    pub fn range<'g, R: RangeBounds<u64>>(&'g self, range: R, guard: &'g Guard) -> Iter<'g, T, O> {
        Iter::new(self, range, Pinned::of(guard))
    }

    /// Iterates over all entries in ascending order.
    pub fn iter<'g>(&'g self, guard: &'g Guard) -> Iter<'g, T, O> {
        Iter::new(self, .., Pinned::of(guard))
    }
}

//! The tree type and its read side: lookups, searches and statistics.

use crate::entry::Entry;
use crate::error::{Error, Invalid};
use crate::node::{
    gap_size, value, Item, NodePtr, NodeRef, INTERNAL_MIN, LEAF_MIN, LEAF_SLOTS, NODE_SIZE,
};
use crate::ownership::{Boxed, Ownership};
use crate::path::Path;
use crate::sync::{AtomicPtr, AtomicUsize, Guard, Mutex, Ordering, Pinned};
use crossbeam_utils::CachePadded;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::RangeInclusive;
use std::ptr;

/// A range map from `u64` indices to values, shaped like the Linux kernel's
/// maple tree: a B-tree of non-overlapping inclusive ranges with 256-byte
/// nodes, lock-free readers and `O(log n)` search for free gaps.
///
/// * Each entry covers an inclusive range `[first, last]`; ranges never
///   overlap, and an index outside every range is absent.
/// * Readers (`load`, `find`, iteration, gap search) take `&self` and a
///   [`Guard`] from [`pin`](crate::pin): no lock, no shared write.
/// * Writes through `&mut self` change nodes in place where they can.
/// * Writes through [`write`](MapleTree::write) may run while readers are
///   active: a change inside one leaf is made in place under the leaf's
///   sequence count, other changes copy the nodes they change and publish
///   the copy with one release store, and what they replace is freed after
///   a grace period.
/// * A value whose `Drop` panics takes no other value with it. Where the
///   value is dropped by the caller's own write (`&mut self`,
///   [`write_unshared`](MapleTree::write_unshared)) or by dropping the
///   tree, every other value of the batch is still dropped and the panic
///   then reaches the caller, with the tree whole. Where it is dropped
///   after a grace period (a [`write`](MapleTree::write)), it runs inside
///   some later `pin` on any thread: there the panic hook reports it and
///   the panic goes no further.
///
/// ```
/// use maple::MapleTree;
///
/// let mut tree = MapleTree::new();
/// tree.store_range(0x1000..=0x1fff, "text").unwrap();
/// tree.store_range(0x3000..=0x3fff, "data").unwrap();
///
/// let guard = maple::pin();
/// assert_eq!(tree.load(0x1800, &guard), Some(&"text"));
/// assert_eq!(tree.load(0x2000, &guard), None);
/// // The lowest free area of 0x1000 indices at or above 0x1000:
/// assert_eq!(tree.empty_area(0x1000, u64::MAX, 0x1000, &guard), Ok(0x2000));
/// ```
// Aligned to two cache lines: the counters and writer lock change on every
// write, and two trees allocated side by side (one per address space of two
// threads) must not slow each other down by sharing a line.
#[repr(align(128))]
pub struct MapleTree<T, O: Ownership<T> = Boxed> {
    /// Tagged root node, or null for an empty tree, padded to cache
    /// lines of its own. Every walk starts by loading it, and it changes
    /// only when the root node is replaced; the lock and counters below
    /// change on every write, an in-place one included. Sharing their
    /// line, the root would cost each reader's next walk a transfer from
    /// the writer's core after every write, which the kernel's tree does
    /// not pay (its lock is the external `mmap_lock`; it keeps no
    /// counters).
    pub(crate) root: CachePadded<AtomicPtr<u8>>,
    /// Number of entries.
    pub(crate) entries: AtomicUsize,
    /// Nodes reachable from the root; `validate` checks it against a walk,
    /// which is how a leaked (unreachable, never retired) node shows up.
    pub(crate) nodes: AtomicUsize,
    /// Serialises the writers that may run beside other threads
    /// ([`MapleTree::write`]). `&mut` writers and unshared writers
    /// ([`MapleTree::write_unshared`]) exclude every other thread by
    /// contract and do not take it.
    pub(crate) lock: Mutex<()>,
    /// The writer's scratch space (allocated on the first write). Only
    /// the tree's one writer touches it: the holder of `lock`, of `&mut
    /// self`, or of an unshared guard, whose contract rules out any other
    /// writer.
    pub(crate) scratch: UnsafeCell<Option<Box<crate::write::Scratch>>>,
    /// The tree owns `T`s through slot words, as its ownership
    /// strategy `O` makes them (see the `ownership` module).
    pub(crate) _values: PhantomData<(T, fn() -> O)>,
}

// SAFETY: what `UnsafeCell` takes away: the scratch space is only reached
// by the tree's one writer (see the field), so sharing the tree between
// threads shares nothing else unsynchronised; the values are owned as
// `Arc<T>`s would be (a value may be read, shared and dropped by any
// thread), hence the same bounds as `Arc<T>`.
unsafe impl<T: Send + Sync, O: Ownership<T>> Sync for MapleTree<T, O> {}
// SAFETY: as for `Sync`. Between writes the scratch space holds no
// pointer (its lists are empty; the write's paths live on its stack), so it
// may move to another thread with the tree.
unsafe impl<T: Send + Sync, O: Ownership<T>> Send for MapleTree<T, O> {}

/// Memory used by a tree's nodes, as reported by [`MapleTree::mem_stats`].
///
/// Values are not counted here (with [`Boxed`](crate::Boxed) each lives in
/// an allocation of its own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemStats {
    /// All nodes.
    pub nodes: usize,
    /// Leaf nodes.
    pub leaves: usize,
    /// Internal nodes.
    pub internal: usize,
    /// Levels, counting the leaves (0 for an empty tree).
    pub height: usize,
    /// Bytes of node memory (`nodes * 256`).
    pub bytes: usize,
    /// Entries stored.
    pub entries: usize,
}

impl<T, O: Ownership<T>> Default for MapleTree<T, O> {
    fn default() -> Self {
        MapleTree {
            root: CachePadded::new(AtomicPtr::new(ptr::null_mut())),
            entries: AtomicUsize::new(0),
            nodes: AtomicUsize::new(0),
            lock: Mutex::new(()),
            scratch: UnsafeCell::new(None),
            _values: PhantomData,
        }
    }
}

impl<T> MapleTree<T> {
    /// Creates an empty tree that keeps each value in an allocation of its
    /// own ([`Boxed`](crate::Boxed));
    /// [`with_ownership(Direct)`](MapleTree::with_ownership) makes one for
    /// values that are a word already (see [`Direct`](crate::Direct)).
    ///
    /// ```
    /// let tree: maple::MapleTree<u32> = maple::MapleTree::new();
    /// assert!(tree.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a tree from entries sorted by index: see
    /// [`from_sorted_with`](MapleTree::from_sorted_with), which this calls
    /// with [`Boxed`].
    ///
    /// ```
    /// let tree = maple::MapleTree::from_sorted([(0..=9, "a"), (20..=29, "b")]).unwrap();
    /// assert_eq!(tree.load(25, &maple::pin()), Some(&"b"));
    /// ```
    pub fn from_sorted<I: IntoIterator<Item = (RangeInclusive<u64>, T)>>(
        entries: I,
    ) -> Result<Self, Error> {
        Self::from_sorted_with(Boxed, entries)
    }
}

impl<T, O: Ownership<T>> MapleTree<T, O> {
    /// Creates an empty tree that holds its values as `ownership` says.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let mut tree = maple::MapleTree::with_ownership(maple::Direct);
    /// tree.store_range(0..=9, Arc::new(5)).unwrap();
    /// assert_eq!(*tree.load(4, &maple::pin()).unwrap(), 5);
    /// ```
    pub fn with_ownership(_ownership: O) -> Self {
        Self::default()
    }

    /// The root, for a reader: alive for `'g` because the guard was
    /// pinned before the root was read, and a node is freed only a grace
    /// period after it is unlinked (shared writes) or by a write through
    /// `&mut self`, which the `'g` borrow of `self` excludes. Every node a
    /// reader reaches comes from here through [`NodeRef::child`].
    #[inline]
    pub(crate) fn root<'g>(&'g self, _pinned: Pinned<'g>) -> Option<NodeRef<'g>> {
        let root = NodePtr::from_raw(self.root.load(Ordering::Acquire))?;
        // SAFETY: as above: `_pinned` proves a guard pinned for 'g, and
        // the node was reachable (not retired) when read, after the pin.
        Some(unsafe { root.get() })
    }

    /// The root, for the tree's writer, valid while it borrows the tree.
    ///
    /// # Safety
    /// The caller is the tree's one writer (it holds `&mut` to the tree,
    /// its writer lock, or an unshared write guard) for as long as it uses
    /// the result or any node reached from it, and uses no node after it
    /// has freed it (an exclusive write frees what it unlinked when it
    /// finishes; a shared write only defers the free past a grace period
    /// that its own pin holds back).
    #[inline]
    pub(crate) unsafe fn writer_root(&self) -> Option<NodeRef<'_>> {
        let root = NodePtr::from_raw(self.root.load(Ordering::Acquire))?;
        // SAFETY: only the tree's writer frees nodes, and per the contract
        // the caller is that writer and stops using nodes before freeing.
        Some(unsafe { root.get() })
    }

    /// Number of entries (ranges) in the tree.
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(1..=10, ()).unwrap();
    /// tree.store_range(5..=5, ()).unwrap(); // splits [1,10] in three
    /// assert_eq!(tree.len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    /// Whether the tree has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value whose range contains `index`.
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(100..=199, 'a').unwrap();
    /// let guard = maple::pin();
    /// assert_eq!(tree.load(150, &guard), Some(&'a'));
    /// assert_eq!(tree.load(200, &guard), None);
    /// ```
    ///
    /// What a read returns borrows its guard, so it cannot be used once
    /// the guard is gone (when what it points to may be freed):
    ///
    /// ```compile_fail,E0505
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(100..=199, 'a').unwrap();
    /// let guard = maple::pin();
    /// let v = tree.load(150, &guard);
    /// drop(guard);
    /// assert_eq!(v, Some(&'a'));
    /// ```
    #[inline]
    pub fn load<'g>(&'g self, index: u64, guard: &'g Guard) -> Option<O::Ref<'g>> {
        loop {
            let mut node = self.root(Pinned::of(guard))?;
            while !node.is_leaf() {
                node = node.child(node.find_slot(index));
            }
            let stamp = node.stamp();
            let p = node.slot(node.find_slot(index));
            if !node.still(stamp) {
                // The writer changed this leaf in place, or replaced it,
                // while we read it: what we read may be torn or stale.
                // Start again from the (new) root.
                crate::sync::retry_pause();
                continue;
            }
            // SAFETY: `p` is a value of this tree read from a leaf that was
            // live after the read; its release is deferred past `_guard`
            // (shared writes) or needs `&mut self` (exclusive writes), which
            // the `'g` borrow of `self` excludes.
            return (!p.is_null()).then(|| unsafe { value::get::<T, O>(p) });
        }
    }

    /// The entry containing `index`.
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(100..=199, 'a').unwrap();
    /// let guard = maple::pin();
    /// let e = tree.load_entry(150, &guard).unwrap();
    /// assert_eq!((e.range(), e.value()), (100..=199, &'a'));
    /// ```
    pub fn load_entry<'g>(&'g self, index: u64, guard: &'g Guard) -> Option<Entry<O::Ref<'g>>> {
        self.find(index, index, guard)
    }

    /// The first entry intersecting `[index, max]`, with its whole range.
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(10..=19, 1).unwrap();
    /// tree.store_range(30..=39, 2).unwrap();
    /// let guard = maple::pin();
    /// let e = tree.find(15, 100, &guard).unwrap();
    /// assert_eq!((e.range(), e.value()), (10..=19, &1));
    /// assert_eq!(tree.find(20, 100, &guard).map(|e| e.range()), Some(30..=39));
    /// assert!(tree.find(20, 29, &guard).is_none());
    /// ```
    pub fn find<'g>(&'g self, index: u64, max: u64, guard: &'g Guard) -> Option<Entry<O::Ref<'g>>> {
        if index > max {
            return None;
        }
        let pinned = Pinned::of(guard);
        let (first, last, p) = match self.seek_in_leaf(index, max, false, pinned) {
            LeafSeek::Found(first, last, p) => (first, last, p),
            LeafSeek::Absent => return None,
            LeafSeek::Beyond => self.seek_fwd(&mut None, index, max, pinned)?,
        };
        // SAFETY: as in `load`.
        Some(Entry::new(first, last, unsafe { value::get::<T, O>(p) }))
    }

    /// The last entry intersecting `[min, index]`, with its whole range.
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(10..=19, 1).unwrap();
    /// tree.store_range(30..=39, 2).unwrap();
    /// let guard = maple::pin();
    /// assert_eq!(tree.find_rev(29, 0, &guard).map(|e| e.range()), Some(10..=19));
    /// assert!(tree.find_rev(29, 20, &guard).is_none());
    /// ```
    pub fn find_rev<'g>(
        &'g self,
        index: u64,
        min: u64,
        guard: &'g Guard,
    ) -> Option<Entry<O::Ref<'g>>> {
        if index < min {
            return None;
        }
        let pinned = Pinned::of(guard);
        let (first, last, p) = match self.seek_in_leaf(index, min, true, pinned) {
            LeafSeek::Found(first, last, p) => (first, last, p),
            LeafSeek::Absent => return None,
            LeafSeek::Beyond => self.seek_rev(&mut None, index, min, pinned)?,
        };
        // SAFETY: as in `load`.
        Some(Entry::new(first, last, unsafe { value::get::<T, O>(p) }))
    }

    /// The one-shot `find` and `find_rev`: a walk like `load`'s, with no
    /// path kept, then a scan of the leaf holding `index` towards `bound`
    /// (up when `!rev`, down when `rev`). Most searches end in that leaf;
    /// the rest ([`LeafSeek::Beyond`]) continue on the general path, which
    /// keeps a path to step between leaves.
    #[inline]
    fn seek_in_leaf<'g>(
        &'g self,
        index: u64,
        bound: u64,
        rev: bool,
        pinned: Pinned<'g>,
    ) -> LeafSeek {
        loop {
            let Some(mut node) = self.root(pinned) else {
                return LeafSeek::Absent;
            };
            let (mut min, mut max) = (0, u64::MAX);
            while !node.is_leaf() {
                let s = node.find_slot(index);
                if s > 0 {
                    min = node.pivot(s - 1).wrapping_add(1);
                }
                max = node.end(s, max);
                node = node.child(s);
            }
            let stamp = node.stamp();
            let len = node.len();
            let start = |s: usize| {
                if s == 0 {
                    min
                } else {
                    node.pivot(s - 1).wrapping_add(1)
                }
            };
            let mut s = node.find_slot(index);
            let mut answer = if rev && min > bound || !rev && max < bound {
                LeafSeek::Beyond
            } else {
                LeafSeek::Absent
            };
            while s < len {
                let (first, last) = (start(s), node.end(s, max));
                if !rev && first > bound || rev && last < bound {
                    break;
                }
                let p = node.slot(s);
                if !p.is_null() {
                    answer = LeafSeek::Found(first, last, p);
                    break;
                }
                // Wraps below slot 0 to end the loop going down.
                s = if rev { s.wrapping_sub(1) } else { s + 1 };
            }
            if node.still(stamp) {
                return answer;
            }
            // Changed or replaced under the scan: look again.
            crate::sync::retry_pause();
        }
    }

    /// Points `cache` at the leaf slot holding `index`: from the cached
    /// leaf when it covers `index` and is still live, else by a fresh walk
    /// that reuses the path's storage. `None` for an empty tree.
    #[inline]
    fn position<'g, 'c>(
        &'g self,
        cache: &'c mut Option<Path<'g>>,
        index: u64,
        pinned: Pinned<'g>,
    ) -> Option<&'c mut Path<'g>> {
        // A cached leaf is reused only while its stamp holds: a leaf
        // changed in place or replaced since the last call is walked to
        // afresh, so a finished write is never hidden by the cache.
        let reusable = cache
            .as_ref()
            .is_some_and(|p| p.leaf().min <= index && index <= p.leaf().max && p.leaf().still());
        let root = self.root(pinned)?;
        let Some(path) = cache else {
            return Some(cache.insert(Path::walk(root, index)));
        };
        if reusable {
            let leaf = path.leaf_mut();
            // A sequential scan asks for the index just past the slot it
            // returned last: no pivot search needed then.
            let next = leaf.slot + 1;
            let follows = next < leaf.node.len()
                && leaf.node.end(leaf.slot, leaf.max).wrapping_add(1) == index;
            leaf.slot = if follows {
                next
            } else {
                leaf.node.find_slot(index)
            };
        } else if path.leaf().max.wrapping_add(1) == index
            && path.leaf().still()
            && path.next_leaf()
        {
            // A forward scan leaving its leaf: step to the next leaf through
            // the cached ancestors instead of walking from the root. A stale
            // ancestor leads to a consistent older subtree; the new leaf's
            // stamp is checked before anything found there is returned.
        } else {
            path.rewalk(root, index);
        }
        Some(path)
    }

    /// Forward search used by `find`, cursors and iterators: the first
    /// present entry intersecting `[index, max]`. `cache` keeps the path
    /// between calls, so a sequential scan walks from the root once per
    /// leaf at most, not once per entry.
    pub(crate) fn seek_fwd<'g>(
        &'g self,
        cache: &mut Option<Path<'g>>,
        index: u64,
        max: u64,
        pinned: Pinned<'g>,
    ) -> Option<(u64, u64, *mut u8)> {
        if index > max {
            return None;
        }
        'restart: loop {
            let path = self.position(cache, index, pinned)?;
            loop {
                let leaf = *path.leaf();
                for slot in leaf.slot..leaf.node.len() {
                    let l = crate::path::Level { slot, ..leaf };
                    let (first, last) = (l.slot_start(), l.slot_end());
                    if first > max {
                        break;
                    }
                    let p = leaf.node.slot(slot);
                    if !p.is_null() {
                        if !leaf.still() {
                            *cache = None;
                            crate::sync::retry_pause();
                            continue 'restart;
                        }
                        path.leaf_mut().slot = slot;
                        return Some((first, last, p));
                    }
                }
                // Nothing here: trust that only if the leaf did not change
                // under the scan (an entry moved by an in-place write could
                // otherwise be skipped although present before and after).
                if !leaf.still() {
                    *cache = None;
                    crate::sync::retry_pause();
                    continue 'restart;
                }
                if leaf.max >= max || !path.next_leaf() {
                    return None;
                }
            }
        }
    }

    /// Backward search: the last present entry intersecting `[min, index]`.
    pub(crate) fn seek_rev<'g>(
        &'g self,
        cache: &mut Option<Path<'g>>,
        index: u64,
        min: u64,
        pinned: Pinned<'g>,
    ) -> Option<(u64, u64, *mut u8)> {
        if index < min {
            return None;
        }
        'restart: loop {
            let path = self.position(cache, index, pinned)?;
            loop {
                let leaf = *path.leaf();
                for slot in (0..=leaf.slot).rev() {
                    let l = crate::path::Level { slot, ..leaf };
                    let (first, last) = (l.slot_start(), l.slot_end());
                    if last < min {
                        break;
                    }
                    let p = leaf.node.slot(slot);
                    if !p.is_null() {
                        if !leaf.still() {
                            *cache = None;
                            crate::sync::retry_pause();
                            continue 'restart;
                        }
                        path.leaf_mut().slot = slot;
                        return Some((first, last, p));
                    }
                }
                if !leaf.still() {
                    *cache = None;
                    crate::sync::retry_pause();
                    continue 'restart;
                }
                if leaf.min <= min || !path.prev_leaf() {
                    return None;
                }
            }
        }
    }

    /// The lowest `a` such that `[a, a + size - 1]` lies within `[min, max]`
    /// and holds no entry. `O(log n)`: subtrees whose recorded largest gap
    /// is smaller than `size` are skipped.
    ///
    /// Errors: [`Error::InvalidArgument`] if `size` is 0 or `min > max`;
    /// [`Error::NoSpace`] if no such area exists.
    ///
    /// Under concurrent shared writes the answer was free in a leaf that was
    /// live when it was read; gap records are hints that the search verifies.
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(0..=99, ()).unwrap();
    /// tree.store_range(110..=199, ()).unwrap();
    /// let g = maple::pin();
    /// assert_eq!(tree.empty_area(0, 1000, 10, &g), Ok(100));
    /// assert_eq!(tree.empty_area(0, 1000, 11, &g), Ok(200));
    /// assert_eq!(tree.empty_area(0, 150, 11, &g), Err(maple::Error::NoSpace));
    /// ```
    pub fn empty_area(&self, min: u64, max: u64, size: u64, guard: &Guard) -> Result<u64, Error> {
        self.gap_search(min, max, size, false, Pinned::of(guard))
    }

    /// The highest `a` such that `[a, a + size - 1]` lies within `[min,
    /// max]` and holds no entry (top-down allocation, as for `mmap`).
    /// Errors as for [`empty_area`](Self::empty_area).
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(900..=999, ()).unwrap();
    /// let g = maple::pin();
    /// assert_eq!(tree.empty_area_rev(0, 999, 100, &g), Ok(800));
    /// ```
    pub fn empty_area_rev(
        &self,
        min: u64,
        max: u64,
        size: u64,
        guard: &Guard,
    ) -> Result<u64, Error> {
        self.gap_search(min, max, size, true, Pinned::of(guard))
    }

    fn gap_search<'g>(
        &'g self,
        min: u64,
        max: u64,
        size: u64,
        rev: bool,
        pinned: Pinned<'g>,
    ) -> Result<u64, Error> {
        if size == 0 {
            return Err(Error::InvalidArgument("gap size must be at least 1"));
        }
        if min > max {
            return Err(Error::InvalidArgument("min must not exceed max"));
        }
        if size - 1 > max - min {
            return Err(Error::NoSpace);
        }
        loop {
            let Some(root) = self.root(pinned) else {
                return Ok(if rev { max - (size - 1) } else { min });
            };
            let want = GapQuery {
                min,
                max,
                size,
                rev,
            };
            match want.search(root, 0, u64::MAX) {
                Search::Found(a) => return Ok(a),
                Search::NotFound => return Err(Error::NoSpace),
                Search::Stale => crate::sync::retry_pause(),
            }
        }
    }

    /// Levels of the tree, counting the leaves (0 when empty), found by
    /// walking one path down (`O(height)`): every leaf sits at one depth.
    /// The same figure as [`mem_stats`](Self::mem_stats)'s `height`,
    /// without its walk of every node.
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// assert_eq!(tree.height(), 0);
    /// for i in 0..1000u64 {
    ///     tree.store_range(i * 10..=i * 10 + 4, i).unwrap();
    /// }
    /// assert_eq!(tree.height(), tree.mem_stats().height);
    /// assert!(tree.height() >= 3);
    /// ```
    pub fn height(&self) -> usize {
        let guard = crate::pin();
        let mut levels = 0;
        let mut node = self.root(Pinned::of(&guard));
        while let Some(n) = node {
            levels += 1;
            node = (!n.is_leaf()).then(|| n.child(0));
        }
        levels
    }

    /// Node memory and shape. Walks the whole tree (`O(n)`).
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// for i in 0..100u64 {
    ///     tree.store_range(i * 10..=i * 10 + 4, i).unwrap();
    /// }
    /// let s = tree.mem_stats();
    /// assert_eq!(s.entries, 100);
    /// assert_eq!(s.bytes, s.nodes * 256);
    /// assert!(s.height >= 2);
    /// ```
    pub fn mem_stats(&self) -> MemStats {
        fn walk(node: NodeRef<'_>, depth: usize, s: &mut MemStats) {
            s.nodes += 1;
            s.height = s.height.max(depth);
            if node.is_leaf() {
                s.leaves += 1;
            } else {
                s.internal += 1;
                for i in 0..node.len() {
                    walk(node.child(i), depth + 1, s);
                }
            }
        }
        let guard = crate::pin();
        let mut s = MemStats {
            entries: self.len(),
            ..MemStats::default()
        };
        if let Some(root) = self.root(Pinned::of(&guard)) {
            walk(root, 1, &mut s);
        }
        s.bytes = s.nodes * NODE_SIZE;
        s
    }

    /// Checks every structural invariant of the tree and returns the first
    /// violation found. Exact only while no writer is active.
    ///
    /// Checked: pivots strictly ascending inside each node's bounds and
    /// `u64::MAX` past `len`; unused slots null; every leaf at one depth;
    /// recorded gaps equal to the real largest gap of each child; fill rules
    /// (root internal node: at least 2 children; other nodes at least half
    /// full minus one, except the rightmost node of each level); no sequence
    /// count on internal nodes (they are never changed in place);
    /// no dead node reachable; no two adjacent absent ranges anywhere (so a
    /// gap never straddles a leaf boundary); entry and node counters.
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(1..=2, ()).unwrap();
    /// assert_eq!(tree.validate(), Ok(()));
    /// ```
    pub fn validate(&self) -> Result<(), Invalid> {
        self.check_invariants().map_err(Invalid)
    }

    /// The walk behind [`validate`](MapleTree::validate).
    fn check_invariants(&self) -> Result<(), String> {
        let guard = crate::pin();
        let Some(root) = self.root(Pinned::of(&guard)) else {
            return match self.len() {
                0 => Ok(()),
                n => Err(format!("empty tree claims {n} entries")),
            };
        };
        let mut v = Validator::default();
        v.node(root, 0, u64::MAX, 1, true)?;
        if root.is_leaf() && root.len() == 1 && root.slot(0).is_null() {
            return Err("root is a leaf holding only absence; should be empty".into());
        }
        if !root.is_leaf() && root.len() < 2 {
            return Err("internal root with one child".into());
        }
        if v.entries != self.len() {
            return Err(format!(
                "len() is {} but {} entries found",
                self.len(),
                v.entries
            ));
        }
        let counted = self.nodes.load(Ordering::Relaxed);
        if v.nodes != counted {
            return Err(format!(
                "{} nodes reachable but {counted} allocated and not retired",
                v.nodes
            ));
        }
        Ok(())
    }
}

/// What one leaf says about a one-shot search (see
/// `MapleTree::seek_in_leaf`).
enum LeafSeek {
    /// The entry, as `(first, last, value pointer)`.
    Found(u64, u64, *mut u8),
    /// No entry up to the bound.
    Absent,
    /// Nothing in this leaf, and the bound lies beyond it.
    Beyond,
}

enum Search {
    Found(u64),
    NotFound,
    /// Met a leaf changed or replaced under the search: the answer may be
    /// torn or stale, search again.
    Stale,
}

/// A gap search in progress.
struct GapQuery {
    min: u64,
    max: u64,
    size: u64,
    rev: bool,
}

impl GapQuery {
    fn search(&self, node: NodeRef<'_>, nmin: u64, nmax: u64) -> Search {
        let stamp = node.stamp();
        let len = node.len();
        if node.is_leaf() {
            // Scan towards the search's direction and stop at the first
            // fit: from the top down for `rev` (mmap's top-down search).
            // Present ranges are skipped before their bounds are read: the
            // bounds only move away from the query in the scan's direction,
            // so the next absent range makes the same stop decision.
            let mut found = None;
            for k in 0..len {
                let i = if self.rev { len - 1 - k } else { k };
                if !node.slot(i).is_null() {
                    continue;
                }
                let start = if i == 0 {
                    nmin
                } else {
                    node.pivot(i - 1).wrapping_add(1)
                };
                let end = node.end(i, nmax);
                if self.rev && end < self.min || !self.rev && start > self.max {
                    break;
                }
                // `start <= end` fails only for a torn read, which the
                // stamp check below discards.
                if end >= self.min && start <= self.max && start <= end {
                    let (a, b) = (start.max(self.min), end.min(self.max));
                    if gap_size(a, b) >= self.size {
                        found = Some(if self.rev { b - (self.size - 1) } else { a });
                        break;
                    }
                }
            }
            return match found {
                _ if !node.still(stamp) => Search::Stale,
                Some(a) => Search::Found(a),
                None => Search::NotFound,
            };
        }
        for k in 0..len {
            let i = if self.rev { len - 1 - k } else { k };
            // The recorded gap first: one load, and most children fail it.
            if node.gap(i) < self.size {
                continue;
            }
            let cmin = if i == 0 {
                nmin
            } else {
                node.pivot(i - 1).wrapping_add(1)
            };
            let cmax = node.end(i, nmax);
            if self.rev && cmax < self.min || !self.rev && cmin > self.max {
                break; // every child further on lies outside the query too
            }
            if cmax < self.min || cmin > self.max {
                continue;
            }
            match self.search(node.child(i), cmin, cmax) {
                Search::NotFound => {}
                other => return other,
            }
        }
        Search::NotFound
    }
}

/// State of one `validate` walk.
#[derive(Default)]
struct Validator {
    entries: usize,
    nodes: usize,
    leaf_depth: Option<usize>,
    /// Whether the range just before the current position was absent
    /// (`None` before the first range).
    prev_absent: Option<bool>,
}

impl Validator {
    /// Checks `node` covering `[min, max]` and everything below it;
    /// returns its largest gap.
    fn node(
        &mut self,
        node: NodeRef<'_>,
        min: u64,
        max: u64,
        depth: usize,
        is_root: bool,
    ) -> Result<u64, String> {
        self.nodes += 1;
        let at =
            |msg: String| format!("node at depth {depth} covering [{min:#x}, {max:#x}]: {msg}");
        if node.is_dead() {
            return Err(at("dead node reachable".into()));
        }
        if node.meta_says_leaf() != node.is_leaf() {
            return Err(at("metadata type disagrees with pointer tag".into()));
        }
        let len = node.len();
        let cap = if node.is_leaf() {
            LEAF_SLOTS
        } else {
            crate::node::INTERNAL_SLOTS
        };
        let least = if node.is_leaf() {
            LEAF_MIN
        } else {
            INTERNAL_MIN
        };
        if !is_root && max != u64::MAX && len < least {
            return Err(at(format!("{len} slots, below the minimum {least}")));
        }
        let mut start = min;
        for i in 0..cap - 1 {
            let p = node.pivot(i);
            if i + 1 < len {
                if p < start || p >= max {
                    return Err(at(format!("pivot {i} = {p:#x} out of order or bounds")));
                }
                start = p + 1;
            } else if p != u64::MAX {
                return Err(at(format!("unused pivot {i} = {p:#x}, expected u64::MAX")));
            }
        }
        for i in len..cap {
            if !node.slot(i).is_null() {
                return Err(at(format!("unused slot {i} is not null")));
            }
        }
        if node.is_leaf() {
            match self.leaf_depth {
                None => self.leaf_depth = Some(depth),
                Some(d) if d != depth => {
                    return Err(at(format!("leaf at depth {depth}, others at {d}")))
                }
                Some(_) => {}
            }
            for i in 0..len {
                let absent = node.slot(i).is_null();
                if absent && self.prev_absent == Some(true) {
                    return Err(at(format!(
                        "slot {i} is absent and so is the range before it"
                    )));
                }
                self.prev_absent = Some(absent);
                self.entries += usize::from(!absent);
            }
            return Ok(node.leaf_gap(min, max));
        }
        let mut best = 0;
        let mut cmin = min;
        for i in 0..len {
            let child = node.child(i);
            let cmax = node.end(i, max);
            if child.raw().is_null() {
                return Err(at(format!("child {i} is null")));
            }
            if child.stamp() & !0xff != 0 && !child.is_leaf() {
                return Err(at(format!("internal child {i} has a sequence count")));
            }
            let gap = self.node(child, cmin, cmax, depth + 1, false)?;
            if node.gap(i) != gap {
                return Err(at(format!(
                    "gap {i} records {} but the child's largest gap is {gap}",
                    node.gap(i)
                )));
            }
            best = best.max(gap);
            cmin = cmax.wrapping_add(1);
        }
        for i in len..cap {
            if node.gap(i) != 0 {
                return Err(at(format!("unused gap {i} is not 0")));
            }
        }
        Ok(best)
    }
}

impl<T, O: Ownership<T>> Drop for MapleTree<T, O> {
    fn drop(&mut self) {
        // Nodes first (freeing one cannot panic), gathering the values;
        // then the values, all of them even if one's `Drop` panics.
        let mut values = Vec::with_capacity(*self.entries.get_mut());
        if let Some(root) =
            NodePtr::from_raw(std::mem::replace(self.root.get_mut(), ptr::null_mut()))
        {
            let mut nodes = vec![root];
            while let Some(node) = nodes.pop() {
                // SAFETY: `&mut self`: no reader or writer exists, and the
                // node is freed below, after its last use.
                let node = unsafe { node.get() };
                for i in 0..node.len() {
                    if !node.is_leaf() {
                        nodes.push(node.child(i).ptr());
                    } else if !node.slot(i).is_null() {
                        values.push(node.slot(i));
                    }
                }
                // SAFETY: `&mut self`: nothing can reach the node any more,
                // and what it held is gathered above.
                unsafe { node.ptr().free() };
            }
        }
        // SAFETY: we own the tree; each slot held one reference of its value.
        unsafe { value::release_all::<T, O, _>(values.into_iter()) };
        if let Some(scratch) = self.scratch.get_mut().take() {
            crate::write::Scratch::recycle(scratch);
        }
    }
}

impl<T, O: Ownership<T>> Clone for MapleTree<T, O> {
    /// Duplicates the tree node by node, the way `fork` copies an address
    /// space: same shape, values shared (each `T` is reference-counted, not
    /// cloned). Takes the writer lock, so it sees no half-made shared write.
    fn clone(&self) -> Self {
        fn copy<T, O: Ownership<T>>(node: NodeRef<'_>, max: u64, nodes: &mut usize) -> NodePtr {
            *nodes += 1;
            let len = node.len();
            let mut items = [Item {
                end: 0,
                ptr: ptr::null_mut(),
                gap: 0,
            }; LEAF_SLOTS];
            for (i, item) in items.iter_mut().enumerate().take(len) {
                *item = node.item(i, max);
                if !node.is_leaf() {
                    // Children first: the copy is built whole, then linked.
                    item.ptr = copy::<T, O>(node.child(i), item.end, nodes).raw();
                } else if !item.ptr.is_null() {
                    // SAFETY: the value is alive (we hold the writer lock,
                    // so it cannot be released) and gains a second owner.
                    unsafe { value::share::<T, O>(item.ptr) };
                }
            }
            NodePtr::new(node.is_leaf(), &items[..len])
        }
        let _lock = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let guard = crate::pin();
        let tree = MapleTree::default();
        let mut nodes = 0;
        if let Some(root) = self.root(Pinned::of(&guard)) {
            let new = copy::<T, O>(root, u64::MAX, &mut nodes);
            tree.root.store(new.raw(), Ordering::Release);
        }
        tree.nodes.store(nodes, Ordering::Relaxed);
        tree.entries.store(self.len(), Ordering::Relaxed);
        tree
    }
}

impl<T, O: Ownership<T>> std::fmt::Debug for MapleTree<T, O>
where
    for<'g> O::Ref<'g>: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let guard = crate::pin();
        f.debug_map()
            .entries(self.iter(&guard).map(<(RangeInclusive<u64>, _)>::from))
            .finish()
    }
}

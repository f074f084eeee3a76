//! Node layout and the raw, unsafe core of the tree.
//!
//! # Node types
//!
//! Every node is 256 bytes, aligned to 256 bytes, and starts with one
//! metadata word. Two node types exist:
//!
//! | type       | slots | pivots | gaps | bytes used |
//! |------------|-------|--------|------|------------|
//! | `Leaf`     | 16    | 15     | –    | 8 + 120 + 128 = 256 |
//! | `Internal` | 10    | 9      | 10   | 8 + 72 + 80 + 80 = 240 |
//!
//! A node covering `[min, max]` with `len` slots in use gives slot `i` the
//! range `[pivot[i-1] + 1, pivot[i]]`, where `pivot[-1] + 1` is `min` and the
//! last used slot ends at `max` (its pivot is not stored). `min` and `max` are
//! never stored: they come from the parent's pivots on the way down, and the
//! root covers the whole key space `[0, u64::MAX]`. "The number of stored
//! pivots below `index`" is the slot that holds `index`. Unused pivots hold
//! `u64::MAX`, so a scan over the whole array gives the same answer; the
//! search scans only the `len - 1` stored ones, which is fewer loads, but
//! the invariant still matters to a shared writer: a pivot written past the
//! length is visible to any reader whose length read is torn (see
//! "In-place writes" in `write.rs`).
//!
//! A leaf slot holds a value pointer (null: the range is absent). An internal
//! slot holds a child pointer, and `gaps[i]` holds the size of the largest
//! absent range in that child's subtree (saturated at `u64::MAX`).
//!
//! # The metadata word
//!
//! `sequence (bits 8..64) | leaf bit (bit 5) | dead bit (bit 4) | len - 1 (bits 0..4)`.
//!
//! The sequence count is what lets a shared writer change a leaf in place
//! (see "In-place writes" in `write.rs`): it is odd while the writer is
//! changing the leaf, and moves on by two for every change. A reader takes
//! the whole word as a *stamp* when it enters a leaf ([`NodeRef::stamp`]),
//! reads what it needs, and keeps the result only if the word is unchanged
//! afterwards ([`NodeRef::still`]); that one comparison covers both an
//! in-place change and the node's replacement (the dead bit). Internal
//! nodes are never changed in place (only their child pointers and gaps,
//! which are single atomic words), so their sequence stays 0.
//!
//! The kernel's nodes record their parent here instead; this tree never
//! climbs by parent pointer (writers keep the path they walked down), so
//! the word holds the sequence count.
//!
//! # Safety model
//!
//! A node stays allocated while it is reachable from its tree, and after
//! it is unlinked until a grace period has passed (a shared writer defers
//! its free) or, for a tree written through `&mut` (or an unshared
//! guard), until that writer frees it at the end of the write that
//! unlinked it. A reader that reached a node under a pinned
//! [`Guard`](crate::Guard) therefore may use it for as long as the guard
//! lives: the node was not yet retired when the guard was pinned (by
//! induction down the walk: a child read from a node was reachable
//! through it, so it was retired no earlier than that node).
//!
//! The compiler keeps this rule, not a comment:
//!
//! * A [`NodePtr`] is a tagged raw pointer with only raw operations (tag,
//!   address, allocation, [`free`](NodePtr::free)). It reads no field.
//! * A [`NodeRef<'g>`](NodeRef) is the same pointer bound to a lifetime
//!   for which the node is alive, and carries every accessor. Readers get
//!   the root only as a `NodeRef<'g>` from `&'g self` and `&'g Guard`
//!   (`MapleTree::root`), and [`NodeRef::child`] hands out children with
//!   the same `'g`, so nothing a reader reads can outlive its guard.
//! * The one way from a `NodePtr` to a `NodeRef` is the unsafe
//!   [`NodePtr::get`], each call with a `// SAFETY:` comment. The tree's
//!   writer uses it at a few places: its root for the duration of a write
//!   (`MapleTree::writer_root`), which holds as long as it does not touch
//!   a node after it frees it at the end of the write; nodes it listed for
//!   retirement (to mark them dead before the grace period starts); and
//!   the tree's `Drop`.
//!
//! Every field of a node is an atomic word, because a published leaf may be
//! changed in place by a shared writer while readers look at it (under the
//! sequence count above). Internal nodes change after publication only in
//! their child pointers (a child replaced by its copy), their gaps and
//! their metadata word (the dead bit).

use crate::slab;
use crate::sync::Guard;
use crate::sync::{AtomicPtr, AtomicU64, Ordering};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

/// Slots in a leaf.
pub(crate) const LEAF_SLOTS: usize = 16;
/// Slots in an internal node.
pub(crate) const INTERNAL_SLOTS: usize = 10;
/// Least slots a leaf may hold unless it is the root or the rightmost leaf.
pub(crate) const LEAF_MIN: usize = LEAF_SLOTS / 2 - 1;
/// Least children an internal node may hold unless it is the root or the
/// rightmost node of its level.
pub(crate) const INTERNAL_MIN: usize = INTERNAL_SLOTS / 2 - 1;
/// Size of every node in bytes.
pub const NODE_SIZE: usize = 256;
/// Deepest tree the walkers support. Non-rightmost internal nodes hold at
/// least four children, so a tree this tall would need more than 4^20 leaves
/// on a single level; memory runs out long before.
pub(crate) const MAX_HEIGHT: usize = 24;

const LEN_MASK: u64 = 0xf;
const DEAD: u64 = 1 << 4;
const LEAF: u64 = 1 << 5;
/// One step of the sequence count (bits 8..64).
const SEQ_ONE: u64 = 1 << 8;

#[repr(C, align(256))]
struct Leaf {
    meta: AtomicU64,
    pivots: [AtomicU64; LEAF_SLOTS - 1],
    slots: [AtomicPtr<u8>; LEAF_SLOTS],
}

#[repr(C, align(256))]
struct Internal {
    meta: AtomicU64,
    pivots: [AtomicU64; INTERNAL_SLOTS - 1],
    slots: [AtomicPtr<u8>; INTERNAL_SLOTS],
    gaps: [AtomicU64; INTERNAL_SLOTS],
}

// Shuttle's atomics are larger than std's, so the layout is only asserted
// for real builds.
#[cfg(not(vmscale_shuttle))]
const _: () = {
    assert!(std::mem::size_of::<Leaf>() == NODE_SIZE);
    assert!(std::mem::align_of::<Leaf>() == NODE_SIZE);
    assert!(std::mem::size_of::<Internal>() == NODE_SIZE);
    assert!(std::mem::align_of::<Internal>() == NODE_SIZE);
    // The metadata word plus the pivots of an internal node fit in the
    // first 80 bytes; a leaf's in the first two cache lines.
    assert!(std::mem::offset_of!(Leaf, slots) == 128);
};

/// Bytes of the slab block that holds one node: the node size, except
/// under shuttle, whose atomics are larger.
#[cfg(not(vmscale_shuttle))]
pub(crate) const BLOCK_BYTES: usize = NODE_SIZE;
#[cfg(vmscale_shuttle)]
pub(crate) const BLOCK_BYTES: usize = {
    let (a, b) = (std::mem::size_of::<Leaf>(), std::mem::size_of::<Internal>());
    (if a > b { a } else { b }).div_ceil(NODE_SIZE) * NODE_SIZE
};

/// One slot's worth of content while the writer assembles a new node:
/// the last index the slot covers, its pointer, and (internal) its gap.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Item {
    pub end: u64,
    pub ptr: *mut u8,
    pub gap: u64,
}

/// A tagged pointer to a live node (see the module's safety model).
/// Never null, so `Option<NodePtr>` is one word.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) struct NodePtr(NonNull<u8>);

// SAFETY: a NodePtr is an address; which thread may dereference it is
// governed by the tree's protocol, not by the pointer.
unsafe impl Send for NodePtr {}

impl NodePtr {
    /// Reads a slot or root pointer; null means "no node".
    #[inline]
    pub(crate) fn from_raw(p: *mut u8) -> Option<NodePtr> {
        NonNull::new(p).map(NodePtr)
    }

    /// The tagged pointer as stored in a parent slot or the root.
    #[inline]
    pub(crate) fn raw(self) -> *mut u8 {
        self.0.as_ptr()
    }

    #[inline]
    pub(crate) fn is_leaf(self) -> bool {
        self.0.as_ptr().addr() & 1 != 0
    }

    /// The node as a [`NodeRef`] valid for `'a`: the one way from a raw
    /// node pointer to its fields.
    ///
    /// # Safety
    /// The node outlives `'a`: it is reachable from a tree that the
    /// caller borrows for `'a` and that no one else frees from (the tree's
    /// one writer, which frees only what it unlinked, after its last use),
    /// or it was not yet retired when a [`Guard`] that lives for `'a` was
    /// pinned (see the module's safety model).
    #[inline]
    pub(crate) unsafe fn get<'a>(self) -> NodeRef<'a> {
        NodeRef {
            ptr: self,
            _guard: PhantomData,
        }
    }

    /// Allocates a node holding `items` (at least one; the last item's end
    /// is the node's max and is not stored).
    pub(crate) fn new(leaf: bool, items: &[Item]) -> NodePtr {
        let len = items.len();
        let meta = ((len - 1) as u64 & LEN_MASK) | if leaf { LEAF } else { 0 };
        if leaf {
            assert!((1..=LEAF_SLOTS).contains(&len));
            let node = Leaf {
                meta: AtomicU64::new(meta),
                pivots: std::array::from_fn(|i| {
                    AtomicU64::new(if i + 1 < len { items[i].end } else { u64::MAX })
                }),
                slots: std::array::from_fn(|i| {
                    AtomicPtr::new(items.get(i).map_or(ptr::null_mut(), |it| it.ptr))
                }),
            };
            NodePtr(place(node).map_addr(|a| a | 1))
        } else {
            assert!((1..=INTERNAL_SLOTS).contains(&len));
            let node = Internal {
                meta: AtomicU64::new(meta),
                pivots: std::array::from_fn(|i| {
                    AtomicU64::new(if i + 1 < len { items[i].end } else { u64::MAX })
                }),
                slots: std::array::from_fn(|i| {
                    AtomicPtr::new(items.get(i).map_or(ptr::null_mut(), |it| it.ptr))
                }),
                gaps: std::array::from_fn(|i| AtomicU64::new(items.get(i).map_or(0, |it| it.gap))),
            };
            NodePtr(place(node))
        }
    }

    /// Frees the node's memory (not its children or values).
    ///
    /// # Safety
    /// The node is unreachable and no reader can still hold it: either the
    /// caller has exclusive access, or a grace period has passed since it
    /// was unlinked.
    pub(crate) unsafe fn free(self) {
        // Node fields need no drop (atomics and integers): the block is
        // just returned.
        let block = NonNull::new(self.0.as_ptr().map_addr(|a| a & !1))
            .expect("node addresses are non-zero");
        // SAFETY: per the contract; the block came from `slab::alloc`.
        unsafe { slab::free(block.cast()) };
    }

    /// The pointer as [`sync::defer`](crate::sync) carries it, tag and
    /// all, for [`free_raw`](Self::free_raw).
    pub(crate) fn into_raw(self) -> *mut u8 {
        self.0.as_ptr()
    }

    /// [`free`](Self::free) of a pointer from [`into_raw`](Self::into_raw).
    ///
    /// # Safety
    /// As for `free`; `p` came from `into_raw`.
    pub(crate) unsafe fn free_raw(p: *mut u8) {
        if let Some(n) = NodePtr::from_raw(p) {
            // SAFETY: the caller's contract.
            unsafe { n.free() }
        }
    }
}

/// A node that stays allocated for `'g`, the lifetime of the [`Guard`] it
/// was read under (or of the writer's exclusive hold on the tree): the
/// only way to its fields, as crossbeam's `Shared<'g, T>` is to its
/// value. Readers get the root as one from `&'g self` and `&'g Guard`
/// ([`MapleTree::root`](crate::MapleTree)), and every node below it from
/// [`NodeRef::child`], so the compiler keeps them inside their grace
/// period; a raw [`NodePtr`] becomes one only through the unsafe
/// [`NodePtr::get`]. A pointer and nothing more (`repr(transparent)`).
///
/// Like [`NodePtr`] it may move between threads (the guard's pin protects
/// every thread's reads) but is not `Sync`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(transparent)]
pub(crate) struct NodeRef<'g> {
    ptr: NodePtr,
    /// Covariant in `'g`, and `Send` like the pointer (a `&Guard` is not).
    _guard: PhantomData<fn() -> &'g Guard>,
}

impl<'g> NodeRef<'g> {
    /// The raw pointer, for lists that outlive the borrow (retire lists)
    /// and for storing in a slot or the root.
    #[inline]
    pub(crate) fn ptr(self) -> NodePtr {
        self.ptr
    }

    /// The tagged pointer as stored in a parent slot or the root.
    #[inline]
    pub(crate) fn raw(self) -> *mut u8 {
        self.ptr.raw()
    }

    #[inline]
    pub(crate) fn is_leaf(self) -> bool {
        self.ptr.is_leaf()
    }

    #[inline]
    fn leaf(self) -> &'g Leaf {
        debug_assert!(self.is_leaf());
        // SAFETY: a NodeRef's node is alive for 'g (see `NodePtr::get`),
        // and the tag says it is a leaf.
        unsafe { &*self.raw().map_addr(|a| a & !1).cast::<Leaf>() }
    }

    #[inline]
    fn internal(self) -> &'g Internal {
        debug_assert!(!self.is_leaf());
        // SAFETY: as in `leaf`; the tag says it is an internal node.
        unsafe { &*self.raw().cast::<Internal>() }
    }

    #[inline]
    fn meta(self) -> &'g AtomicU64 {
        // SAFETY: both node types start with the metadata word (repr(C)),
        // and the node is alive for 'g.
        unsafe { &*self.raw().map_addr(|a| a & !1).cast::<AtomicU64>() }
    }

    /// Number of slots in use (1..=16 for leaves, 1..=10 for internal nodes).
    #[inline]
    pub(crate) fn len(self) -> usize {
        (self.meta().load(Ordering::Relaxed) & LEN_MASK) as usize + 1
    }

    /// Whether the writer has replaced this node. Readers check it after
    /// reading a leaf: a value read from a node that was still live
    /// afterwards was current at that moment.
    #[inline]
    pub(crate) fn is_dead(self) -> bool {
        self.meta().load(Ordering::Acquire) & DEAD != 0
    }

    pub(crate) fn mark_dead(self) {
        let m = self.meta();
        m.store(m.load(Ordering::Relaxed) | DEAD, Ordering::Release);
    }

    /// The metadata word as a reader's stamp, taken when it enters the
    /// node and before it reads anything else there.
    #[inline]
    pub(crate) fn stamp(self) -> u64 {
        self.meta().load(Ordering::Acquire)
    }

    /// Whether everything read from the node since `stamp` was taken is
    /// one consistent, current state: no in-place change was in progress
    /// then or has happened since, and the node has not been replaced.
    ///
    /// The acquire fence orders the reads being validated before the
    /// second load of the word (the reader half of a sequence lock): if a
    /// writer's change to any of them was seen, so is its increment of the
    /// count, which the writer made before the change.
    #[inline]
    pub(crate) fn still(self, stamp: u64) -> bool {
        crate::sync::fence(Ordering::Acquire);
        stamp & (SEQ_ONE | DEAD) == 0 && self.meta().load(Ordering::Relaxed) == stamp
    }

    pub(crate) fn meta_says_leaf(self) -> bool {
        self.meta().load(Ordering::Relaxed) & LEAF != 0
    }

    /// Pivot `i` (only meaningful for `i < len - 1`; `u64::MAX` beyond,
    /// also past the array).
    #[inline]
    pub(crate) fn pivot(self, i: usize) -> u64 {
        // Past the array reads as unused: a reader whose length and slot
        // came from two moments of an in-place change may ask for pivot 15
        // of a leaf; its stamp check throws the answer away.
        let p = if self.is_leaf() {
            self.leaf().pivots.get(i)
        } else {
            self.internal().pivots.get(i)
        };
        p.map_or(u64::MAX, |p| p.load(Ordering::Relaxed))
    }

    /// Last index covered by slot `i` of a node whose range ends at `max`.
    #[inline]
    pub(crate) fn end(self, i: usize, max: u64) -> u64 {
        if i + 1 == self.len() {
            max
        } else {
            self.pivot(i)
        }
    }

    /// The slot whose range contains `index` (which must lie in the node's
    /// range): the first stored pivot at or above `index`, found by a scan
    /// that stops there, as the kernel's walk does.
    ///
    /// Why a scan with an early exit and not a branch-free count of the
    /// pivots below `index` (which this was until 2026-11-26): a VMA
    /// lookup is local (a fault lands in the VMA the last fault did, an
    /// `mmap` next to the last one), so the exit is predicted and the scan
    /// reads only the pivots up to the slot, where the count read every
    /// stored pivot of every level. Measured on one build of each
    /// (docs/RESULTS.md, "The walk's pivot scan"): `page_fault3` at one
    /// worker 1.32x legacy against 0.86x; random lookups in `vmbench
    /// tree`, whose exits are not predictable, pay for it (`load` at 1e3
    /// 37–50 ns against 23–31 ns).
    #[inline]
    pub(crate) fn find_slot(self, index: u64) -> usize {
        #[inline(always)]
        fn below(pivots: &[AtomicU64], index: u64) -> usize {
            pivots
                .iter()
                .position(|p| p.load(Ordering::Relaxed) >= index)
                .unwrap_or(pivots.len())
        }
        // A torn length (a reader overlapping an in-place change) still
        // bounds the scan inside the array; the stamp check discards it.
        let stored = self.len() - 1;
        if self.is_leaf() {
            below(&self.leaf().pivots[..stored.min(LEAF_SLOTS - 1)], index)
        } else {
            below(
                &self.internal().pivots[..stored.min(INTERNAL_SLOTS - 1)],
                index,
            )
        }
    }

    /// [`find_slot`](NodeRef::find_slot) in a node covering `[min, max]`,
    /// with the bounds of the slot found: `(slot, first, last)`. The scan
    /// has just read both pivots around the slot, so a walk that records
    /// every level's bounds (a [`Path`](crate::path::Path)) takes them
    /// from it instead of loading them again (atomic loads are not merged).
    /// A reader may meet torn pivots here (hence the wrapping add); its
    /// stamp check throws the answer away. (`find_slot`, the lookups'
    /// scan, stays separate: written as this one with the bounds dropped,
    /// `load` measured no faster and possibly slower at 1e5.)
    #[inline]
    pub(crate) fn find_slot_in(self, index: u64, min: u64, max: u64) -> (usize, u64, u64) {
        #[inline(always)]
        fn scan(pivots: &[AtomicU64], index: u64, min: u64, max: u64) -> (usize, u64, u64) {
            let mut first = min;
            for (i, p) in pivots.iter().enumerate() {
                let p = p.load(Ordering::Relaxed);
                if p >= index {
                    return (i, first, p);
                }
                first = p.wrapping_add(1);
            }
            (pivots.len(), first, max)
        }
        let stored = self.len() - 1;
        if self.is_leaf() {
            scan(
                &self.leaf().pivots[..stored.min(LEAF_SLOTS - 1)],
                index,
                min,
                max,
            )
        } else {
            scan(
                &self.internal().pivots[..stored.min(INTERNAL_SLOTS - 1)],
                index,
                min,
                max,
            )
        }
    }

    /// [`find_slot`](NodeRef::find_slot) for an `index` known to lie at
    /// or after slot `from` of a leaf: the scan starts there. A writer
    /// finds the right end of its range so, from the left end's slot; most
    /// writes end in the slot they start in, found by one comparison.
    #[inline]
    pub(crate) fn find_slot_from(self, from: usize, index: u64) -> usize {
        let stored = (self.len() - 1).min(LEAF_SLOTS - 1);
        let pivots = &self.leaf().pivots[..stored];
        pivots
            .iter()
            .skip(from)
            .position(|p| p.load(Ordering::Relaxed) >= index)
            .map_or(stored, |k| from + k)
    }

    /// Slot pointer `i`: a value (leaf) or a tagged child (internal).
    #[inline]
    pub(crate) fn slot(self, i: usize) -> *mut u8 {
        if self.is_leaf() {
            self.leaf().slots[i].load(Ordering::Acquire)
        } else {
            self.internal().slots[i].load(Ordering::Acquire)
        }
    }

    /// Child `i` of an internal node.
    #[inline]
    pub(crate) fn child(self, i: usize) -> NodeRef<'g> {
        let p = self.internal().slots[i].load(Ordering::Acquire);
        // SAFETY: used slots of an internal node always hold a child
        // (non-null), and a child read from a node alive for 'g is alive
        // for 'g: it was reachable through that node when read, so it was
        // not retired before the node was (see the module's safety model).
        unsafe { NodePtr(NonNull::new_unchecked(p)).get() }
    }

    /// Publishes `child` in slot `i` of a live internal node with one
    /// release store: readers see either the old child or the complete new
    /// one, never a partly built node.
    pub(crate) fn publish_child(self, i: usize, child: NodePtr) {
        self.internal().slots[i].store(child.raw(), Ordering::Release);
    }

    #[inline]
    pub(crate) fn gap(self, i: usize) -> u64 {
        self.internal().gaps[i].load(Ordering::Relaxed)
    }

    pub(crate) fn set_gap(self, i: usize, gap: u64) {
        self.internal().gaps[i].store(gap, Ordering::Relaxed);
    }

    /// Largest gap recorded in an internal node.
    pub(crate) fn max_child_gap(self) -> u64 {
        (0..self.len()).map(|i| self.gap(i)).max().unwrap_or(0)
    }

    /// Largest absent range in a leaf covering `[min, max]`.
    pub(crate) fn leaf_gap(self, min: u64, max: u64) -> u64 {
        let leaf = self.leaf();
        // The length is read once: the last slot ends at `max`, every other
        // at its stored pivot.
        let last = self.len() - 1;
        let mut best = 0;
        let mut start = min;
        for (slot, pivot) in leaf.slots[..last].iter().zip(&leaf.pivots) {
            let end = pivot.load(Ordering::Relaxed);
            if slot.load(Ordering::Relaxed).is_null() {
                best = best.max(gap_size(start, end));
            }
            start = end.wrapping_add(1);
        }
        if leaf.slots[last].load(Ordering::Relaxed).is_null() {
            best = best.max(gap_size(start, max));
        }
        best
    }

    /// Slots `range` of a leaf covering up to `max`, as [`Item`]s, into
    /// `out` (as many as both hold). One length read for the run, and each
    /// item built in place: an `Item` returned per slot goes through
    /// memory, and reading it back as a whole stalls on the store of each
    /// half.
    #[inline]
    pub(crate) fn leaf_items(self, max: u64, range: std::ops::Range<usize>, out: &mut [Item]) {
        let leaf = self.leaf();
        let last = self.len() - 1;
        for (item, i) in out.iter_mut().zip(range) {
            *item = Item {
                end: if i < last {
                    leaf.pivots[i].load(Ordering::Relaxed)
                } else {
                    max
                },
                ptr: leaf.slots[i].load(Ordering::Relaxed),
                gap: 0,
            };
        }
    }

    /// The slot `i` as an [`Item`], for a node covering up to `max`.
    pub(crate) fn item(self, i: usize, max: u64) -> Item {
        Item {
            end: self.end(i, max),
            ptr: self.slot(i),
            gap: if self.is_leaf() { 0 } else { self.gap(i) },
        }
    }

    /// Rewrites the node to hold `items`, exactly as [`NodePtr::new`] would
    /// lay them out, keeping its type and sequence count. This is how a
    /// writer with exclusive access reuses a node that a split, merge or
    /// rebalance would otherwise replace by a copy: a classic B-tree's
    /// in-place node update, with no allocation and no free.
    ///
    /// # Safety
    /// The caller has exclusive access to the tree, so no reader can be
    /// looking at this node.
    pub(crate) unsafe fn overwrite(self, items: &[Item]) {
        fn fill(pivots: &[AtomicU64], slots: &[AtomicPtr<u8>], items: &[Item]) {
            let len = items.len();
            for (i, pivot) in pivots.iter().enumerate() {
                let end = if i + 1 < len { items[i].end } else { u64::MAX };
                pivot.store(end, Ordering::Relaxed);
            }
            for (i, slot) in slots.iter().enumerate() {
                let p = items.get(i).map_or(ptr::null_mut(), |it| it.ptr);
                slot.store(p, Ordering::Relaxed);
            }
        }
        let len = items.len();
        if self.is_leaf() {
            assert!((1..=LEAF_SLOTS).contains(&len));
            let leaf = self.leaf();
            fill(&leaf.pivots, &leaf.slots, items);
        } else {
            assert!((1..=INTERNAL_SLOTS).contains(&len));
            let node = self.internal();
            fill(&node.pivots, &node.slots, items);
            for (i, gap) in node.gaps.iter().enumerate() {
                gap.store(items.get(i).map_or(0, |it| it.gap), Ordering::Relaxed);
            }
        }
        let meta = self.meta();
        let m = meta.load(Ordering::Relaxed);
        debug_assert!(m & DEAD == 0, "overwriting a replaced node");
        meta.store((m & !LEN_MASK) | (len - 1) as u64, Ordering::Relaxed);
    }

    /// Adds `right` as a child after slot `s` of an internal node with
    /// room: the child in slot `s` keeps the range up to `left_end`, and
    /// `right` takes the rest of its old range. Records both children's
    /// largest gaps. This is how a writer with exclusive access splits a
    /// leaf under a parent that has room (a textbook B-tree's split),
    /// touching only the parent's slots from `s` on.
    ///
    /// # Safety
    /// The caller has exclusive access to the tree, so no reader can be
    /// looking at this node.
    pub(crate) unsafe fn insert_child(
        self,
        s: usize,
        left_end: u64,
        left_gap: u64,
        right: NodePtr,
        right_gap: u64,
    ) {
        let node = self.internal();
        let len = self.len();
        assert!(s < len && len < INTERNAL_SLOTS, "no room for a child");
        let moved = |a: &[AtomicU64], i: usize| {
            a[i + 1].store(a[i].load(Ordering::Relaxed), Ordering::Relaxed)
        };
        for i in (s + 1..len).rev() {
            let p = node.slots[i].load(Ordering::Relaxed);
            node.slots[i + 1].store(p, Ordering::Relaxed);
            moved(&node.gaps, i);
        }
        // The stored pivots from `s` on move up with their slots; the one
        // at `s` becomes the split point. (The last slot's pivot is not
        // stored, before or after.)
        for i in (s..len - 1).rev() {
            moved(&node.pivots, i);
        }
        node.pivots[s].store(left_end, Ordering::Relaxed);
        node.slots[s + 1].store(right.raw(), Ordering::Relaxed);
        node.gaps[s].store(left_gap, Ordering::Relaxed);
        node.gaps[s + 1].store(right_gap, Ordering::Relaxed);
        let m = node.meta.load(Ordering::Relaxed);
        node.meta
            .store((m & !LEN_MASK) | len as u64, Ordering::Relaxed);
    }

    /// Removes child `r` (not the first) of an internal node whose left
    /// neighbour, child `r - 1`, has taken over its range, and records the
    /// left one's largest gap as `left_gap`: how a writer with exclusive
    /// access merges two sibling leaves. The caller frees the removed
    /// child.
    ///
    /// # Safety
    /// The caller has exclusive access to the tree, so no reader can be
    /// looking at this node.
    pub(crate) unsafe fn remove_child(self, r: usize, left_gap: u64) {
        let node = self.internal();
        let len = self.len();
        assert!(0 < r && r < len && len > 1, "no child to remove");
        let moved = |a: &[AtomicU64], i: usize| {
            a[i].store(a[i + 1].load(Ordering::Relaxed), Ordering::Relaxed)
        };
        for i in r..len - 1 {
            let p = node.slots[i + 1].load(Ordering::Relaxed);
            node.slots[i].store(p, Ordering::Relaxed);
            moved(&node.gaps, i);
        }
        // The left child now ends where the removed one did: the pivot
        // between them goes, and those after it move down.
        for i in r - 1..len - 2 {
            moved(&node.pivots, i);
        }
        // The layout invariant: unused pivots `u64::MAX`, slots null.
        node.pivots[len - 2].store(u64::MAX, Ordering::Relaxed);
        node.slots[len - 1].store(ptr::null_mut(), Ordering::Relaxed);
        node.gaps[len - 1].store(0, Ordering::Relaxed);
        node.gaps[r - 1].store(left_gap, Ordering::Relaxed);
        let m = node.meta.load(Ordering::Relaxed);
        node.meta
            .store((m & !LEN_MASK) | (len - 2) as u64, Ordering::Relaxed);
    }

    /// Moves the boundary between children `s` and `s + 1` of an internal
    /// node to `left_end` and records both children's largest gaps: how a
    /// writer with exclusive access evens out two sibling leaves.
    ///
    /// # Safety
    /// The caller has exclusive access to the tree, so no reader can be
    /// looking at this node.
    pub(crate) unsafe fn move_boundary(
        self,
        s: usize,
        left_end: u64,
        left_gap: u64,
        right_gap: u64,
    ) {
        let node = self.internal();
        assert!(s + 1 < self.len(), "no boundary after the last child");
        node.pivots[s].store(left_end, Ordering::Relaxed);
        node.gaps[s].store(left_gap, Ordering::Relaxed);
        node.gaps[s + 1].store(right_gap, Ordering::Relaxed);
    }

    /// Replaces slots `l..=r` of a leaf with `mid` (one to three items; the
    /// end of an item that becomes the last slot is the leaf's max and is
    /// not stored), moving the slots after `r` up or down, for a writer
    /// with exclusive access. This is the kernel's in-node store: only
    /// the slots from `l` on are touched, and nothing is assembled first.
    ///
    /// # Safety
    /// The caller has exclusive access to the tree, so no reader can be
    /// looking at this node.
    pub(crate) unsafe fn splice_leaf(self, l: usize, r: usize, mid: &[Item]) {
        self.splice(l, r, mid);
    }

    /// [`splice_leaf`](NodeRef::splice_leaf) on a published leaf that
    /// readers may be looking at: the sequence count is made odd first and
    /// moved on when the leaf is whole again, so a reader whose reads
    /// overlap the change sees its stamp fail ([`still`](NodeRef::still))
    /// and reads again.
    ///
    /// Only the tree's single writer calls this.
    pub(crate) fn splice_leaf_shared(self, l: usize, r: usize, mid: &[Item]) {
        let meta = self.meta();
        let m = meta.load(Ordering::Relaxed);
        debug_assert!(m & SEQ_ONE == 0, "a leaf change is already in progress");
        meta.store(m.wrapping_add(SEQ_ONE), Ordering::Relaxed);
        // The odd count must be visible before any changed field: a reader
        // that sees a new pivot or slot must also see the count move.
        crate::sync::fence(Ordering::Release);
        self.splice(l, r, mid);
        // `splice` left the count odd with the new length; make it even.
        let m = meta.load(Ordering::Relaxed);
        meta.store(m.wrapping_add(SEQ_ONE), Ordering::Release);
    }

    fn splice(self, l: usize, r: usize, mid: &[Item]) {
        let leaf = self.leaf();
        let len = self.len();
        debug_assert!(l <= r && r < len && (1..=3).contains(&mid.len()));
        let new_len = len - (r - l + 1) + mid.len();
        assert!(new_len <= LEAF_SLOTS, "splice overflows the leaf");
        // The tail `r + 1..len` moves to start at `to`. Its last slot ends
        // at the leaf's max in both layouts, so its (unstored) pivot
        // does not move; every other pivot moves with its slot.
        let (from, to) = (r + 1, l + mid.len());
        let moved = len - from;
        let shift = |k: usize| {
            let p = leaf.slots[from + k].load(Ordering::Relaxed);
            leaf.slots[to + k].store(p, Ordering::Relaxed);
        };
        let shift_pivot = |k: usize| {
            let e = leaf.pivots[from + k].load(Ordering::Relaxed);
            leaf.pivots[to + k].store(e, Ordering::Relaxed);
        };
        // Moving up, start from the top so nothing is overwritten before
        // it is moved; moving down, from the bottom. The moved run's last
        // pivot is not stored, so one pivot fewer than slots moves.
        if to > from {
            (0..moved).rev().for_each(shift);
            (0..moved.saturating_sub(1)).rev().for_each(shift_pivot);
        } else if to < from {
            (0..moved).for_each(shift);
            (0..moved.saturating_sub(1)).for_each(shift_pivot);
        }
        for (k, it) in mid.iter().enumerate() {
            leaf.slots[l + k].store(it.ptr, Ordering::Relaxed);
            if l + k + 1 < new_len {
                leaf.pivots[l + k].store(it.end, Ordering::Relaxed);
            }
        }
        // Keep the layout invariant: pivots from `new_len - 1` on are
        // unused (`u64::MAX`) and slots from `new_len` on are null. Only
        // a shrinking leaf, or one whose last slot moved to where a stored
        // pivot was, has any to clear.
        for pivot in &leaf.pivots[(new_len - 1).min(LEAF_SLOTS - 1)..(len.max(new_len) - 1)] {
            pivot.store(u64::MAX, Ordering::Relaxed);
        }
        for slot in &leaf.slots[new_len..len.max(new_len)] {
            slot.store(ptr::null_mut(), Ordering::Relaxed);
        }
        let m = leaf.meta.load(Ordering::Relaxed);
        leaf.meta
            .store((m & !LEN_MASK) | (new_len - 1) as u64, Ordering::Relaxed);
    }

    /// Replaces the value pointer in slot `i` of a published leaf with one
    /// release store (the slot-store fast path in `write.rs`): a reader
    /// reads the old pointer or the new one, and the new value was built
    /// before this store.
    pub(crate) fn store_slot(self, i: usize, p: *mut u8) {
        self.leaf().slots[i].store(p, Ordering::Release);
    }
}

/// Moves a freshly built node into a slab block.
fn place<N>(node: N) -> NonNull<u8> {
    const {
        assert!(std::mem::size_of::<N>() <= slab::BLOCK && std::mem::align_of::<N>() <= slab::ALIGN)
    };
    let block = slab::alloc();
    // SAFETY: the block is BLOCK bytes, BLOCK-aligned, unused, and `N`
    // fits in it (checked above).
    unsafe { block.cast::<N>().write(node) };
    block
}

/// Size of the inclusive range `[start, end]`, saturated at `u64::MAX`
/// (the whole key space has 2^64 indices).
#[inline]
pub(crate) fn gap_size(start: u64, end: u64) -> u64 {
    (end - start).saturating_add(1)
}

/// The tree's side of value ownership: slot words are `*mut u8` (null: an
/// absent range), and these turn them into calls on the tree's
/// [`Ownership`](crate::Ownership) strategy `O`. Readers never change a
/// value's ownership; only the writer does, when it splits or drops a range.
pub(crate) mod value {
    use crate::Ownership;
    use std::ptr::NonNull;

    pub(crate) fn into_raw<T, O: Ownership<T>>(value: T) -> *mut u8 {
        O::into_word(value).as_ptr()
    }

    /// # Safety
    /// `p` is a non-null slot word of a tree with strategy `O`, kept alive
    /// for `'a` (by the tree borrow, or by a guard that defers its release).
    pub(crate) unsafe fn get<'a, T: 'a, O: Ownership<T>>(p: *mut u8) -> O::Ref<'a> {
        debug_assert!(!p.is_null());
        // SAFETY: per the contract; slot words are never null when read
        // as values.
        unsafe { O::borrow(NonNull::new_unchecked(p)) }
    }

    /// Adds an owner for a second piece of a split range.
    ///
    /// # Safety
    /// `p` is a non-null slot word of a tree with strategy `O`, still owned.
    pub(crate) unsafe fn share<T, O: Ownership<T>>(p: *mut u8) {
        // SAFETY: per the contract.
        unsafe { O::share(NonNull::new_unchecked(p)) }
    }

    /// Drops one owner; the last one drops the `T`.
    ///
    /// # Safety
    /// `p` is a non-null slot word of a tree with strategy `O`, and this
    /// owner is no longer reachable by any reader.
    pub(crate) unsafe fn release<T, O: Ownership<T>>(p: *mut u8) {
        if O::RELEASES {
            // SAFETY: per the contract this owner is the caller's.
            unsafe { O::release(NonNull::new_unchecked(p)) }
        }
    }

    /// Releases every owner `refs` yields, all of them even if a `T`'s
    /// `Drop` panics: the rest are released while the first panic unwinds
    /// (a second panic then aborts, as for any panic during unwinding), as
    /// std's collections drop their elements.
    ///
    /// # Safety
    /// As [`release`], for each word.
    pub(crate) unsafe fn release_all<T, O: Ownership<T>, I: Iterator<Item = *mut u8>>(refs: I) {
        /// Releases what is left of the iterator when dropped: on unwind.
        struct Rest<T, O: Ownership<T>, I: Iterator<Item = *mut u8>>(
            I,
            std::marker::PhantomData<(T, O)>,
        );
        impl<T, O: Ownership<T>, I: Iterator<Item = *mut u8>> Drop for Rest<T, O, I> {
            fn drop(&mut self) {
                for p in &mut self.0 {
                    // SAFETY: the caller's contract for every word.
                    unsafe { release::<T, O>(p) };
                }
            }
        }
        if !O::RELEASES {
            return;
        }
        let mut rest = Rest::<T, O, I>(refs, std::marker::PhantomData);
        for p in rest.0.by_ref() {
            // SAFETY: the caller's contract; a panic leaves the rest to
            // `Rest::drop`.
            unsafe { release::<T, O>(p) };
        }
    }

    /// Releases one owner on behalf of the grace-period collector, which
    /// runs it on whichever thread passes the grace period, inside an
    /// unrelated `pin`. A panic in `T`'s `Drop` there has no caller to
    /// return to: it is reported by the panic hook when it happens and
    /// contained here, so that it neither cuts short the collector's other
    /// deferred frees nor surfaces in someone else's `pin`.
    ///
    /// # Safety
    /// As [`release`].
    pub(crate) unsafe fn release_deferred<T, O: Ownership<T>>(p: *mut u8) {
        let release = std::panic::AssertUnwindSafe(|| {
            // SAFETY: the caller's contract.
            unsafe { release::<T, O>(p) }
        });
        let _ = std::panic::catch_unwind(release);
    }
}

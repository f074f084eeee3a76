//! The augmented red-black tree and the sorted VMA list, sharing one arena.
//!
//! A user of the crate's red-black core (`crate::rbtree`, whose header
//! states the node layout, the sentinel, the free slots and the red-black
//! invariants). Each node's item is a [`Slot`] for one VMA; the list is
//! threaded through the items, so one arena index names a VMA in both.
//!
//! ## Invariants (checked by `validate`, with the core's)
//!
//! 1. Order: an in-order walk yields VMAs by ascending `start`, non-empty
//!    and disjoint, each slot's `start` and `end` copying its VMA's.
//! 2. List: from `head` through `next` runs the in-order sequence, with
//!    `prev` the way back and `tail` its last node; `head == tail == NIL`
//!    when empty.
//! 3. Augmentation: a node's summary (`aug`) is the kernel's
//!    `rb_subtree_gap`: the largest own gap `start - prev.end` (with
//!    `prev.end` taken as 0 for the first VMA) over the node's subtree.
//!    The own gap reads the list predecessor, so linking or unlinking a
//!    VMA also changes its list successor's gap: `insert` and `remove`
//!    propagate from there before the core balances. The gap above the
//!    last VMA is not in any node; the searches handle it from the list's
//!    tail, as Linux did with `highest_vm_end`.

use std::sync::Arc;

pub(super) use crate::rbtree::NIL;
use crate::rbtree::{Augment, Tree};
use crate::vma::Vma;

/// A node's payload: one VMA and its list links.
#[derive(Debug, Default)]
struct Slot {
    /// Copy of `vma.start()`, the search key, next to the links so that a
    /// search touches only the arena, not every `Vma` it passes.
    start: u64,
    /// Copy of `vma.end()`; 0 in a vacant slot, so that one contains no
    /// address.
    end: u64,
    /// List predecessor (`vm_prev`), or `NIL`.
    prev: u32,
    /// List successor (`vm_next`), or `NIL`.
    next: u32,
    /// `None` exactly in the sentinel and free slots.
    vma: Option<Arc<Vma>>,
}

/// Invariant 3.
impl Augment for Slot {
    type Value = u64;
    const NONE: u64 = 0;

    #[inline]
    fn compute(tree: &Tree<Self>, i: u32) -> u64 {
        let n = tree.node(i);
        own_gap(tree, i)
            .max(tree.node(n.left()).aug)
            .max(tree.node(n.right()).aug)
    }

    fn is_vacant(&self) -> bool {
        self.vma.is_none() && self.end == 0
    }
}

/// End of the list predecessor of `i` (0 for the first VMA): the bottom
/// of the free gap below `i`. The sentinel's vacant slot ends at 0 too,
/// but the branch, nearly always taken one way, measured a little faster
/// than reading it.
#[inline]
fn prev_end(tree: &Tree<Slot>, i: u32) -> u64 {
    match tree.node(i).item.prev {
        NIL => 0,
        p => tree.node(p).item.end,
    }
}

/// The free gap directly below `i` (`vma_compute_gap` without guard).
#[inline]
fn own_gap(tree: &Tree<Slot>, i: u32) -> u64 {
    tree.node(i).item.start - prev_end(tree, i)
}

/// VMAs in an augmented red-black tree keyed by address, threaded on a
/// sorted doubly linked list.
#[derive(Debug, Default)]
pub(super) struct VmaTree {
    tree: Tree<Slot>,
    /// Lowest VMA (`mm->mmap`).
    head: u32,
    /// Highest VMA; its end is the kernel's `highest_vm_end`.
    tail: u32,
}

impl VmaTree {
    /// An empty tree.
    pub(super) fn new() -> VmaTree {
        VmaTree::default()
    }

    /// Number of VMAs.
    pub(super) fn len(&self) -> usize {
        self.tree.len()
    }

    /// The lowest VMA's node, or `NIL`.
    pub(super) fn head(&self) -> u32 {
        self.head
    }

    /// The list successor of `i`, or `NIL`.
    pub(super) fn next(&self, i: u32) -> u32 {
        self.s(i).next
    }

    /// The list predecessor of `i`; the last VMA for `NIL`, so that "the
    /// one before the first VMA above `addr`" works when there is none
    /// above.
    pub(super) fn prev(&self, i: u32) -> u32 {
        if i == NIL {
            self.tail
        } else {
            self.s(i).prev
        }
    }

    /// The VMA stored at live node `i`.
    pub(super) fn vma(&self, i: u32) -> &Arc<Vma> {
        self.s(i).vma.as_ref().expect("a live node holds a VMA")
    }

    /// First address of live node `i`'s VMA.
    pub(super) fn start(&self, i: u32) -> u64 {
        self.s(i).start
    }

    /// Whether slot `i` exists and holds a VMA containing `addr`. Total
    /// (false for the sentinel, free slots and out-of-range indices), so
    /// a cache entry can be checked with it even if it were stale.
    pub(super) fn contains(&self, i: u32, addr: u64) -> bool {
        self.tree
            .get(i)
            .is_some_and(|n| n.item.start <= addr && addr < n.item.end)
    }

    /// Whether slot `i` holds a VMA (is neither the sentinel nor free).
    pub(super) fn is_live(&self, i: u32) -> bool {
        self.tree.get(i).is_some_and(|n| n.item.vma.is_some())
    }

    #[inline]
    fn s(&self, i: u32) -> &Slot {
        &self.tree.node(i).item
    }

    #[inline]
    fn own_gap(&self, i: u32) -> u64 {
        own_gap(&self.tree, i)
    }

    #[inline]
    fn prev_end(&self, i: u32) -> u64 {
        prev_end(&self.tree, i)
    }

    /// End of the highest VMA, 0 if none: the bottom of the top gap.
    fn highest_end(&self) -> u64 {
        self.s(self.tail).end
    }

    // ---- lookups --------------------------------------------------------

    /// The first node whose VMA ends above `addr` (`find_vma`), or `NIL`.
    pub(super) fn find_next(&self, addr: u64) -> u32 {
        let mut i = self.tree.root();
        let mut best = NIL;
        let on = crate::profile::counting();
        while i != NIL {
            self.tree.seen(on, i);
            let n = self.tree.node(i);
            if n.item.end > addr {
                best = i;
                if n.item.start <= addr {
                    break;
                }
                i = n.left();
            } else {
                i = n.right();
            }
        }
        best
    }

    /// The node whose VMA starts exactly at `start`, or `NIL`.
    pub(super) fn lookup_start(&self, start: u64) -> u32 {
        let mut i = self.tree.root();
        let on = crate::profile::counting();
        while i != NIL {
            self.tree.seen(on, i);
            let n = self.tree.node(i);
            i = match start.cmp(&n.item.start) {
                std::cmp::Ordering::Less => n.left(),
                std::cmp::Ordering::Greater => n.right(),
                std::cmp::Ordering::Equal => return i,
            };
        }
        NIL
    }

    // ---- changes --------------------------------------------------------

    /// Insert `vma`, which must overlap no VMA in the tree; returns its
    /// node.
    pub(super) fn insert(&mut self, vma: Arc<Vma>) -> u32 {
        let (start, end) = (vma.start(), vma.end());
        assert!(start < end, "empty VMA [{start:#x}, {end:#x})");
        // Descend to the leaf position; the last node we went right at is
        // the list predecessor, the last we went left at the successor.
        let (mut parent, mut right, mut prev, mut next) = (NIL, false, NIL, NIL);
        let mut i = self.tree.root();
        let on = crate::profile::counting();
        while i != NIL {
            self.tree.seen(on, i);
            let n = self.tree.node(i);
            parent = i;
            right = start >= n.item.start;
            if right {
                prev = i;
                i = n.right();
            } else {
                next = i;
                i = n.left();
            }
        }
        assert!(
            self.s(prev).end <= start && (next == NIL || end <= self.s(next).start),
            "VMA [{start:#x}, {end:#x}) overlaps one in the index"
        );
        let slot = Slot {
            start,
            end,
            prev,
            next,
            vma: Some(vma),
        };
        let z = self
            .tree
            .link(parent, right, slot)
            .expect("more than 2^32 VMAs");
        self.join(prev, z);
        self.join(z, next);
        // Invariant 3 before balancing: the parent gained a child, and the
        // successor's own gap shrank to start at the new VMA's end.
        self.tree.propagate(parent);
        self.tree.propagate(next);
        self.tree.rebalance_insert(z);
        z
    }

    /// Links `b` after `a` in the list; `NIL` for `a` makes `b` the head,
    /// for `b` makes `a` the tail.
    fn join(&mut self, a: u32, b: u32) {
        match a {
            NIL => self.head = b,
            a => self.tree.item_mut(a).next = b,
        }
        match b {
            NIL => self.tail = a,
            b => self.tree.item_mut(b).prev = a,
        }
    }

    /// Remove live node `z` and return its VMA.
    pub(super) fn remove(&mut self, z: u32) -> Arc<Vma> {
        let (prev, next) = (self.s(z).prev, self.s(z).next);
        self.join(prev, next);
        let (slot, unlinked) = self.tree.unlink(z);
        // Invariant 3 before balancing: the successor's own gap now
        // reaches down to the predecessor's end.
        self.tree.propagate(next);
        self.tree.rebalance_erase(unlinked);
        slot.vma.expect("removing a live node")
    }

    // ---- gap searches ---------------------------------------------------

    /// The lowest node in `i`'s subtree whose own gap is at least `len`
    /// and ends (at the node's start) at or above `min_end`, or `NIL`.
    ///
    /// `O(log n)`: the nodes with `start >= min_end` form a suffix of the
    /// in-order sequence, so the search follows one boundary path; every
    /// subtree hanging off it is wholly inside or outside the suffix, and
    /// a wholly-inside subtree is either rejected by its gap record at
    /// once or holds a fit that the descent reaches without backtracking.
    fn first_fit(&self, i: u32, len: u64, min_end: u64) -> u32 {
        self.tree.seen(crate::profile::counting(), i);
        let n = self.tree.node(i);
        if i == NIL || n.aug < len {
            return NIL;
        }
        if n.item.start >= min_end {
            let found = self.first_fit(n.left(), len, min_end);
            if found != NIL {
                return found;
            }
            if self.own_gap(i) >= len {
                return i;
            }
        }
        // Below min_end the left subtree and i itself are out of range.
        self.first_fit(n.right(), len, min_end)
    }

    /// The highest node in `i`'s subtree whose own gap is at least `len`
    /// and starts (at the predecessor's end) at or below `max_start`, or
    /// `NIL`. The mirror of [`first_fit`](Self::first_fit), bounded by
    /// gap start instead of gap end: a right descendant's gap starts at or
    /// above `i`'s end, a left descendant's at or below `i`'s gap start.
    fn last_fit(&self, i: u32, len: u64, max_start: u64) -> u32 {
        self.tree.seen(crate::profile::counting(), i);
        let n = self.tree.node(i);
        if i == NIL || n.aug < len {
            return NIL;
        }
        if n.item.end <= max_start {
            let found = self.last_fit(n.right(), len, max_start);
            if found != NIL {
                return found;
            }
            if self.own_gap(i) >= len {
                return i;
            }
        } else if self.prev_end(i) <= max_start && self.own_gap(i) >= len {
            // The right subtree's gaps all start above max_start.
            return i;
        }
        self.last_fit(n.left(), len, max_start)
    }

    /// See [`VmaIndex::gap_lowest`](crate::index::VmaIndex::gap_lowest).
    ///
    /// The answer is in the lowest gap at least `len` long that ends at or
    /// above `low + len`: any lower gap cannot hold `len` bytes above
    /// `low`, and in this one the area starting at `max(gap start, low)`
    /// fits. If that area crosses `high`, so does every later one.
    pub(super) fn gap_lowest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        if len == 0 || high <= low {
            return None;
        }
        let min_end = low.checked_add(len).filter(|&e| e <= high)?;
        let i = self.first_fit(self.tree.root(), len, min_end);
        let gap_start = if i != NIL {
            self.prev_end(i)
        } else {
            // The top gap, [highest end, u64::MAX).
            let top = self.highest_end();
            if u64::MAX - top < len {
                return None;
            }
            top
        };
        let a = gap_start.max(low);
        (a <= high - len).then_some(a)
    }

    /// See [`VmaIndex::gap_highest`](crate::index::VmaIndex::gap_highest).
    ///
    /// The answer is in the highest gap at least `len` long that starts
    /// at or below `high - len`, with the area ending at `min(gap end,
    /// high)`; if that area dips below `low`, so does every earlier one.
    pub(super) fn gap_highest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        if len == 0 || high <= low || high - low < len {
            return None;
        }
        let max_start = high - len;
        // The top gap first, as `unmapped_area_topdown` checks
        // `highest_vm_end` before walking the tree. It reaches past
        // `high`, so its area ends at `high`, and `low <= high - len`.
        if self.highest_end() <= max_start {
            return Some(high);
        }
        let i = self.last_fit(self.tree.root(), len, max_start);
        if i == NIL {
            return None;
        }
        let e = self.start(i).min(high);
        (e - len >= low).then_some(e)
    }

    // ---- checking -------------------------------------------------------

    /// Check every invariant of the tree and the list; see
    /// [`LegacyIndex::validate`](super::LegacyIndex).
    pub(super) fn validate(&self) -> Result<(), String> {
        // `back` is the in-order predecessor, which the list must agree
        // with; `prev_end` its end.
        let (mut back, mut prev_end) = (NIL, 0u64);
        self.tree.validate(|i, s| {
            let Some(vma) = &s.vma else {
                return Err(format!("node {i} in the tree holds no VMA"));
            };
            if (s.start, s.end) != (vma.start(), vma.end()) {
                return Err(format!(
                    "node {i} keyed [{:#x}, {:#x}) holds VMA [{:#x}, {:#x})",
                    s.start,
                    s.end,
                    vma.start(),
                    vma.end()
                ));
            }
            if s.start >= s.end {
                return Err(format!("node {i} holds an empty range at {:#x}", s.start));
            }
            if back != NIL && s.start < prev_end {
                return Err(format!(
                    "VMA [{:#x}, {:#x}) overlaps or precedes its in-order predecessor ending {prev_end:#x}",
                    s.start, s.end
                ));
            }
            let linked = if back == NIL { self.head } else { self.s(back).next };
            if linked != i || s.prev != back {
                return Err(format!(
                    "list: node {back} is followed by {linked} and node {i} preceded by {}, in-order says {back} then {i}",
                    s.prev
                ));
            }
            (back, prev_end) = (i, s.end);
            Ok(())
        })?;
        if self.tail != back
            || (back != NIL && self.s(back).next != NIL)
            || (back == NIL && self.head != NIL)
        {
            return Err(format!(
                "list: head {}, tail {}, but the in-order sequence ends at {back}",
                self.head, self.tail
            ));
        }
        Ok(())
    }
}

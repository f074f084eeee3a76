//! The augmented red-black tree and the sorted VMA list, sharing one arena.
//!
//! Nodes live in a `Vec` and refer to each other by `u32` index, so the
//! tree needs no `unsafe` and no per-node allocation; freed slots are
//! chained on a free list and reused. Index 0 is a sentinel (the classic
//! CLRS "nil" leaf): black, subtree gap 0, never holding a VMA. Having a
//! real node there lets the erase fix-up record a parent for an empty
//! child without special cases.
//!
//! Each node keeps a copy of its VMA's `start` and `end` next to the links
//! so that a search touches only the arena, not every `Vma` it passes.
//!
//! The augmentation is the kernel's `rb_subtree_gap`: for every node, the
//! largest of the gaps `vma.start - prev.end` (with `prev.end` taken as 0
//! for the first VMA) over the node's subtree. The gap above the last VMA
//! is not in any node; the searches handle it from the list's tail, as
//! Linux did with `highest_vm_end`.

use std::sync::Arc;

use crate::vma::Vma;

/// The "no node" index, and the sentinel's slot.
pub(super) const NIL: u32 = 0;

/// One arena slot: a tree node and a list element for one VMA.
#[derive(Debug)]
struct Node {
    /// Copy of `vma.start()`; the search key. 0 once the slot is freed.
    start: u64,
    /// Copy of `vma.end()`. 0 once the slot is freed, so a freed slot
    /// contains no address.
    end: u64,
    /// Largest `start - prev_end` over this subtree (`rb_subtree_gap`).
    gap: u64,
    left: u32,
    right: u32,
    parent: u32,
    /// List predecessor (`vm_prev`).
    prev: u32,
    /// List successor (`vm_next`); in a freed slot, the next free slot.
    next: u32,
    red: bool,
    /// `None` exactly for the sentinel and for free slots.
    vma: Option<Arc<Vma>>,
}

impl Node {
    const fn empty() -> Node {
        Node {
            start: 0,
            end: 0,
            gap: 0,
            left: NIL,
            right: NIL,
            parent: NIL,
            prev: NIL,
            next: NIL,
            red: false,
            vma: None,
        }
    }
}

/// VMAs in an augmented red-black tree keyed by address, threaded on a
/// sorted doubly linked list.
#[derive(Debug)]
pub(super) struct VmaTree {
    nodes: Vec<Node>,
    /// Head of the free-slot chain (through `next`), or `NIL`.
    free: u32,
    root: u32,
    /// Lowest VMA (`mm->mmap`).
    head: u32,
    /// Highest VMA; its end is the kernel's `highest_vm_end`.
    tail: u32,
    len: usize,
}

impl Default for VmaTree {
    fn default() -> Self {
        VmaTree::new()
    }
}

impl VmaTree {
    /// An empty tree: just the sentinel.
    pub(super) fn new() -> VmaTree {
        VmaTree {
            nodes: vec![Node::empty()],
            free: NIL,
            root: NIL,
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    /// Number of VMAs.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The lowest VMA's node, or `NIL`.
    pub(super) fn head(&self) -> u32 {
        self.head
    }

    /// The list successor of `i`, or `NIL`.
    pub(super) fn next(&self, i: u32) -> u32 {
        self.n(i).next
    }

    /// The list predecessor of `i`; the last VMA for `NIL`, so that "the
    /// one before the first VMA above `addr`" works when there is none
    /// above.
    pub(super) fn prev(&self, i: u32) -> u32 {
        if i == NIL {
            self.tail
        } else {
            self.n(i).prev
        }
    }

    /// The VMA stored at live node `i`.
    pub(super) fn vma(&self, i: u32) -> &Arc<Vma> {
        self.n(i).vma.as_ref().expect("a live node holds a VMA")
    }

    /// First address of live node `i`'s VMA.
    pub(super) fn start(&self, i: u32) -> u64 {
        self.n(i).start
    }

    /// Whether slot `i` exists and holds a VMA containing `addr`. Total
    /// (false for the sentinel, free slots and out-of-range indices), so
    /// a cache entry can be checked with it even if it were stale.
    pub(super) fn contains(&self, i: u32, addr: u64) -> bool {
        self.nodes
            .get(i as usize)
            .is_some_and(|n| n.start <= addr && addr < n.end)
    }

    /// Whether slot `i` holds a VMA (is neither the sentinel nor free).
    pub(super) fn is_live(&self, i: u32) -> bool {
        self.nodes.get(i as usize).is_some_and(|n| n.vma.is_some())
    }

    #[inline]
    fn n(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    #[inline]
    fn nm(&mut self, i: u32) -> &mut Node {
        &mut self.nodes[i as usize]
    }

    /// End of the list predecessor of `i` (0 for the first VMA): the
    /// bottom of the free gap below `i`.
    #[inline]
    fn prev_end(&self, i: u32) -> u64 {
        let p = self.n(i).prev;
        if p == NIL {
            0
        } else {
            self.n(p).end
        }
    }

    /// The free gap directly below `i` (`vma_compute_gap` without guard).
    #[inline]
    fn own_gap(&self, i: u32) -> u64 {
        self.n(i).start - self.prev_end(i)
    }

    /// End of the highest VMA, 0 if none: the bottom of the top gap.
    fn highest_end(&self) -> u64 {
        if self.tail == NIL {
            0
        } else {
            self.n(self.tail).end
        }
    }

    // ---- lookups --------------------------------------------------------

    /// The first node whose VMA ends above `addr` (`find_vma`), or `NIL`.
    pub(super) fn find_next(&self, addr: u64) -> u32 {
        let mut i = self.root;
        let mut best = NIL;
        while i != NIL {
            let n = self.n(i);
            if n.end > addr {
                best = i;
                if n.start <= addr {
                    break;
                }
                i = n.left;
            } else {
                i = n.right;
            }
        }
        best
    }

    /// The node whose VMA starts exactly at `start`, or `NIL`.
    pub(super) fn lookup_start(&self, start: u64) -> u32 {
        let mut i = self.root;
        while i != NIL {
            let n = self.n(i);
            i = match start.cmp(&n.start) {
                std::cmp::Ordering::Less => n.left,
                std::cmp::Ordering::Greater => n.right,
                std::cmp::Ordering::Equal => return i,
            };
        }
        NIL
    }

    // ---- augmentation ---------------------------------------------------

    /// Recompute `i`'s subtree gap from its own gap and its children's
    /// records; returns whether the record changed.
    #[inline]
    fn recompute(&mut self, i: u32) -> bool {
        let n = self.n(i);
        let g = self
            .own_gap(i)
            .max(self.n(n.left).gap)
            .max(self.n(n.right).gap);
        let old = std::mem::replace(&mut self.nm(i).gap, g);
        old != g
    }

    /// Recompute from `i` up to the root. With `early`, stop at the first
    /// node whose record does not change: valid only when nothing but
    /// `i`'s own inputs changed, since then an unchanged node leaves
    /// every ancestor's inputs as they were.
    fn propagate(&mut self, mut i: u32, early: bool) {
        while i != NIL {
            if !self.recompute(i) && early {
                return;
            }
            i = self.n(i).parent;
        }
    }

    // ---- structure ------------------------------------------------------

    /// Put `new` where `old` hangs below `parent` (or at the root).
    fn relink(&mut self, parent: u32, old: u32, new: u32) {
        if parent == NIL {
            self.root = new;
        } else if self.n(parent).left == old {
            self.nm(parent).left = new;
        } else {
            self.nm(parent).right = new;
        }
    }

    /// Rotate `x` down to the left; its right child takes its place.
    /// The risen node covers the same VMAs `x` did, so it inherits `x`'s
    /// (correct) gap record; only `x` needs recomputing. This is why every
    /// gap must be exact before a rebalance starts.
    fn rotate_left(&mut self, x: u32) {
        let y = self.n(x).right;
        let yl = self.n(y).left;
        self.nm(x).right = yl;
        if yl != NIL {
            self.nm(yl).parent = x;
        }
        let xp = self.n(x).parent;
        self.nm(y).parent = xp;
        self.relink(xp, x, y);
        self.nm(y).left = x;
        self.nm(x).parent = y;
        self.nm(y).gap = self.n(x).gap;
        self.recompute(x);
    }

    /// Mirror image of [`rotate_left`](Self::rotate_left).
    fn rotate_right(&mut self, x: u32) {
        let y = self.n(x).left;
        let yr = self.n(y).right;
        self.nm(x).left = yr;
        if yr != NIL {
            self.nm(yr).parent = x;
        }
        let xp = self.n(x).parent;
        self.nm(y).parent = xp;
        self.relink(xp, x, y);
        self.nm(y).right = x;
        self.nm(x).parent = y;
        self.nm(y).gap = self.n(x).gap;
        self.recompute(x);
    }

    fn alloc(&mut self, vma: Arc<Vma>) -> u32 {
        let node = Node {
            start: vma.start(),
            end: vma.end(),
            red: true,
            vma: Some(vma),
            ..Node::empty()
        };
        if self.free != NIL {
            let i = self.free;
            self.free = self.n(i).next;
            *self.nm(i) = node;
            i
        } else {
            let i = u32::try_from(self.nodes.len()).expect("more than 2^32 VMAs");
            assert_ne!(i, u32::MAX, "more than 2^32 VMAs");
            self.nodes.push(node);
            i
        }
    }

    /// Insert `vma`, which must overlap no VMA in the tree; returns its
    /// node.
    pub(super) fn insert(&mut self, vma: Arc<Vma>) -> u32 {
        let (start, end) = (vma.start(), vma.end());
        assert!(start < end, "empty VMA [{start:#x}, {end:#x})");
        // Descend to the leaf position; the last node we went right at is
        // the list predecessor, the last we went left at the successor.
        let (mut parent, mut prev, mut next) = (NIL, NIL, NIL);
        let mut i = self.root;
        while i != NIL {
            parent = i;
            if start < self.n(i).start {
                next = i;
                i = self.n(i).left;
            } else {
                prev = i;
                i = self.n(i).right;
            }
        }
        assert!(
            (prev == NIL || self.n(prev).end <= start)
                && (next == NIL || end <= self.n(next).start),
            "VMA [{start:#x}, {end:#x}) overlaps one in the index"
        );
        let z = self.alloc(vma);
        {
            let n = self.nm(z);
            n.parent = parent;
            n.prev = prev;
            n.next = next;
        }
        if parent == NIL {
            self.root = z;
        } else if start < self.n(parent).start {
            self.nm(parent).left = z;
        } else {
            self.nm(parent).right = z;
        }
        if prev == NIL {
            self.head = z;
        } else {
            self.nm(prev).next = z;
        }
        if next == NIL {
            self.tail = z;
        } else {
            self.nm(next).prev = z;
        }
        self.len += 1;
        // Gaps first, so the rotations below start from exact records:
        // the new leaf's own gap, then its successor's, which shrank.
        self.nm(z).gap = self.own_gap(z);
        self.propagate(parent, true);
        if next != NIL {
            self.propagate(next, true);
        }
        self.insert_fixup(z);
        z
    }

    fn insert_fixup(&mut self, mut z: u32) {
        while self.n(self.n(z).parent).red {
            let p = self.n(z).parent;
            let g = self.n(p).parent;
            if p == self.n(g).left {
                let u = self.n(g).right;
                if self.n(u).red {
                    self.nm(p).red = false;
                    self.nm(u).red = false;
                    self.nm(g).red = true;
                    z = g;
                } else {
                    if z == self.n(p).right {
                        z = p;
                        self.rotate_left(z);
                    }
                    let p = self.n(z).parent;
                    let g = self.n(p).parent;
                    self.nm(p).red = false;
                    self.nm(g).red = true;
                    self.rotate_right(g);
                }
            } else {
                let u = self.n(g).left;
                if self.n(u).red {
                    self.nm(p).red = false;
                    self.nm(u).red = false;
                    self.nm(g).red = true;
                    z = g;
                } else {
                    if z == self.n(p).left {
                        z = p;
                        self.rotate_right(z);
                    }
                    let p = self.n(z).parent;
                    let g = self.n(p).parent;
                    self.nm(p).red = false;
                    self.nm(g).red = true;
                    self.rotate_left(g);
                }
            }
        }
        let r = self.root;
        self.nm(r).red = false;
    }

    /// Replace the subtree at `u` by the one at `v` (`v` may be `NIL`,
    /// whose parent field then records where the hole is).
    fn transplant(&mut self, u: u32, v: u32) {
        let up = self.n(u).parent;
        self.relink(up, u, v);
        self.nm(v).parent = up;
    }

    /// Remove live node `z` and return its VMA.
    pub(super) fn remove(&mut self, z: u32) -> Arc<Vma> {
        // Unlink from the list first: the successor's own gap now reaches
        // down to the predecessor.
        let (prev, next) = (self.n(z).prev, self.n(z).next);
        if prev == NIL {
            self.head = next;
        } else {
            self.nm(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nm(next).prev = prev;
        }

        let (zl, zr) = (self.n(z).left, self.n(z).right);
        let removed_red;
        let x;
        // The lowest node whose set of descendants changed.
        let fix_from;
        if zl == NIL {
            removed_red = self.n(z).red;
            x = zr;
            fix_from = self.n(z).parent;
            self.transplant(z, zr);
        } else if zr == NIL {
            removed_red = self.n(z).red;
            x = zl;
            fix_from = self.n(z).parent;
            self.transplant(z, zl);
        } else {
            // Two children: the in-order successor, which is the list
            // successor, moves into z's place.
            let y = next;
            removed_red = self.n(y).red;
            x = self.n(y).right;
            if self.n(y).parent == z {
                self.nm(x).parent = y;
                fix_from = y;
            } else {
                fix_from = self.n(y).parent;
                self.transplant(y, x);
                self.nm(y).right = zr;
                self.nm(zr).parent = y;
            }
            self.transplant(z, y);
            self.nm(y).left = zl;
            self.nm(zl).parent = y;
            let zred = self.n(z).red;
            self.nm(y).red = zred;
        }
        self.len -= 1;
        // Every node whose subtree changed is on the path from `fix_from`
        // up, so recompute all of it; then the successor's own gap, which
        // is a plain value change and may stop early.
        self.propagate(fix_from, false);
        if next != NIL {
            self.propagate(next, true);
        }
        if !removed_red {
            self.erase_fixup(x);
        }
        // Restore the sentinel (the fix-up may have given it a parent).
        self.nodes[NIL as usize].parent = NIL;
        self.free_slot(z)
    }

    fn free_slot(&mut self, z: u32) -> Arc<Vma> {
        let free = self.free;
        let n = self.nm(z);
        let vma = n.vma.take().expect("removing a live node");
        *n = Node {
            next: free,
            ..Node::empty()
        };
        self.free = z;
        vma
    }

    fn erase_fixup(&mut self, mut x: u32) {
        while x != self.root && !self.n(x).red {
            let p = self.n(x).parent;
            if x == self.n(p).left {
                let mut w = self.n(p).right;
                if self.n(w).red {
                    self.nm(w).red = false;
                    self.nm(p).red = true;
                    self.rotate_left(p);
                    w = self.n(p).right;
                }
                if !self.n(self.n(w).left).red && !self.n(self.n(w).right).red {
                    self.nm(w).red = true;
                    x = p;
                } else {
                    if !self.n(self.n(w).right).red {
                        let wl = self.n(w).left;
                        self.nm(wl).red = false;
                        self.nm(w).red = true;
                        self.rotate_right(w);
                        w = self.n(p).right;
                    }
                    let pred = self.n(p).red;
                    self.nm(w).red = pred;
                    self.nm(p).red = false;
                    let wr = self.n(w).right;
                    self.nm(wr).red = false;
                    self.rotate_left(p);
                    x = self.root;
                }
            } else {
                let mut w = self.n(p).left;
                if self.n(w).red {
                    self.nm(w).red = false;
                    self.nm(p).red = true;
                    self.rotate_right(p);
                    w = self.n(p).left;
                }
                if !self.n(self.n(w).left).red && !self.n(self.n(w).right).red {
                    self.nm(w).red = true;
                    x = p;
                } else {
                    if !self.n(self.n(w).left).red {
                        let wr = self.n(w).right;
                        self.nm(wr).red = false;
                        self.nm(w).red = true;
                        self.rotate_left(w);
                        w = self.n(p).left;
                    }
                    let pred = self.n(p).red;
                    self.nm(w).red = pred;
                    self.nm(p).red = false;
                    let wl = self.n(w).left;
                    self.nm(wl).red = false;
                    self.rotate_right(p);
                    x = self.root;
                }
            }
        }
        self.nm(x).red = false;
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
        if i == NIL || self.n(i).gap < len {
            return NIL;
        }
        let n = self.n(i);
        if n.start >= min_end {
            let found = self.first_fit(n.left, len, min_end);
            if found != NIL {
                return found;
            }
            if self.own_gap(i) >= len {
                return i;
            }
        }
        // Below min_end the left subtree and i itself are out of range.
        self.first_fit(n.right, len, min_end)
    }

    /// The highest node in `i`'s subtree whose own gap is at least `len`
    /// and starts (at the predecessor's end) at or below `max_start`, or
    /// `NIL`. The mirror of [`first_fit`](Self::first_fit), bounded by
    /// gap start instead of gap end: a right descendant's gap starts at or
    /// above `i`'s end, a left descendant's at or below `i`'s gap start.
    fn last_fit(&self, i: u32, len: u64, max_start: u64) -> u32 {
        if i == NIL || self.n(i).gap < len {
            return NIL;
        }
        let n = self.n(i);
        if n.end <= max_start {
            let found = self.last_fit(n.right, len, max_start);
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
        self.last_fit(n.left, len, max_start)
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
        let i = self.first_fit(self.root, len, min_end);
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
        let i = self.last_fit(self.root, len, max_start);
        if i == NIL {
            return None;
        }
        let e = self.n(i).start.min(high);
        (e - len >= low).then_some(e)
    }

    // ---- checking -------------------------------------------------------

    /// Check every invariant of the tree and the list; see
    /// [`LegacyIndex::validate`](super::LegacyIndex).
    pub(super) fn validate(&self) -> Result<(), String> {
        let sentinel = self.n(NIL);
        if sentinel.red || sentinel.gap != 0 || sentinel.vma.is_some() {
            return Err("sentinel is red, has a gap or holds a VMA".into());
        }
        if sentinel.left != NIL || sentinel.right != NIL || sentinel.parent != NIL {
            return Err("sentinel has links".into());
        }
        if self.root != NIL {
            if self.n(self.root).parent != NIL {
                return Err("root has a parent".into());
            }
            if self.n(self.root).red {
                return Err("root is red".into());
            }
        }

        // In-order walk with an explicit stack; bounded so that a cycle
        // is reported, not looped on.
        let limit = self.nodes.len();
        let mut order = Vec::with_capacity(self.len);
        let mut stack = Vec::new();
        let mut i = self.root;
        while i != NIL || !stack.is_empty() {
            while i != NIL {
                if stack.len() > limit {
                    return Err("tree links form a cycle".into());
                }
                stack.push(i);
                i = self.n(i).left;
            }
            let top = stack.pop().expect("stack is non-empty");
            order.push(top);
            if order.len() > limit {
                return Err("tree links form a cycle".into());
            }
            i = self.n(top).right;
        }
        if order.len() != self.len {
            return Err(format!(
                "tree holds {} nodes, len says {}",
                order.len(),
                self.len
            ));
        }

        let mut prev_end = 0u64;
        for (k, &i) in order.iter().enumerate() {
            let n = self.n(i);
            let Some(vma) = &n.vma else {
                return Err(format!("node {i} in the tree holds no VMA"));
            };
            if (n.start, n.end) != (vma.start(), vma.end()) {
                return Err(format!(
                    "node {i} keyed [{:#x}, {:#x}) holds VMA [{:#x}, {:#x})",
                    n.start,
                    n.end,
                    vma.start(),
                    vma.end()
                ));
            }
            if n.start >= n.end {
                return Err(format!("node {i} holds an empty range at {:#x}", n.start));
            }
            if k > 0 && n.start < prev_end {
                return Err(format!(
                    "VMA [{:#x}, {:#x}) overlaps or precedes its in-order predecessor ending {prev_end:#x}",
                    n.start, n.end
                ));
            }
            // Parent links.
            for c in [n.left, n.right] {
                if c != NIL && self.n(c).parent != i {
                    return Err(format!("node {c}'s parent is not {i}"));
                }
            }
            // Red nodes have black children.
            if n.red && (self.n(n.left).red || self.n(n.right).red) {
                return Err(format!("red node {i} has a red child"));
            }
            // Gap record, with the own gap taken from the in-order
            // predecessor rather than the list, so the list is not trusted.
            let own = n.start - if k == 0 { 0 } else { prev_end };
            let want = own.max(self.n(n.left).gap).max(self.n(n.right).gap);
            if n.gap != want {
                return Err(format!(
                    "node {i} [{:#x}, {:#x}) records subtree gap {:#x}, actual {want:#x}",
                    n.start, n.end, n.gap
                ));
            }
            prev_end = n.end;
        }
        // Black height: every path from the root to a leaf passes the same
        // number of black nodes.
        self.black_height(self.root)?;

        // The list is the in-order sequence, with consistent back links.
        let mut j = self.head;
        let mut back = NIL;
        for (k, &i) in order.iter().enumerate() {
            if j != i {
                return Err(format!("list position {k} is node {j}, in-order says {i}"));
            }
            if self.n(j).prev != back {
                return Err(format!(
                    "node {j}'s prev is {}, expected {back}",
                    self.n(j).prev
                ));
            }
            back = j;
            j = self.n(j).next;
        }
        if j != NIL {
            return Err("list runs past the last tree node".into());
        }
        if self.tail != back {
            return Err(format!("tail is {}, last node is {back}", self.tail));
        }

        // Every slot is either in the tree or on the free list.
        let mut free = 0usize;
        let mut f = self.free;
        while f != NIL {
            free += 1;
            if free > limit {
                return Err("free list forms a cycle".into());
            }
            let n = self.n(f);
            if n.vma.is_some() || n.end != 0 {
                return Err(format!("free slot {f} still holds a VMA"));
            }
            f = n.next;
        }
        if 1 + self.len + free != self.nodes.len() {
            return Err(format!(
                "{} slots: 1 sentinel + {} live + {free} free do not add up",
                self.nodes.len(),
                self.len
            ));
        }
        Ok(())
    }

    fn black_height(&self, i: u32) -> Result<usize, String> {
        if i == NIL {
            return Ok(1);
        }
        let n = self.n(i);
        let l = self.black_height(n.left)?;
        let r = self.black_height(n.right)?;
        if l != r {
            return Err(format!(
                "node {i}: black height {l} on the left, {r} on the right"
            ));
        }
        Ok(l + usize::from(!n.red))
    }
}

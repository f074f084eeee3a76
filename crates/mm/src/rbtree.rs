//! The augmented red-black tree both of the crate's red-black users build
//! on: the legacy VMA index (`index/legacy/rbtree.rs`, augmented with the
//! largest free gap) and the interval tree of
//! [`ItreeKind::Rb`](crate::itree::ItreeKind::Rb) (`itree/rb.rs`,
//! augmented with the largest interval end).
//!
//! The split follows the kernel's `lib/rbtree.c`: this module owns the
//! shape (links, colours, rotations, the insert and erase balancing) and
//! the slot bookkeeping; a user owns its item type, its key order and its
//! augmented value. The tree never compares items: a user descends by its
//! own order and tells [`Tree::link`] where the new leaf hangs. The
//! augmented value is described by the [`Augment`] callbacks, and the tree
//! keeps it through every rotation and erase.
//!
//! ## Slots
//!
//! Nodes live in the `Vec` `nodes` and refer to each other by `u32` index,
//! so there is no `unsafe` and no allocation per node. Slot [`NIL`] (0) is
//! a sentinel standing for every missing child: black, with the augmented
//! value of an empty subtree ([`Augment::NONE`]) and a vacant item, so the
//! balancing and a user's recomputation read a missing child's colour and
//! value without a branch. Nothing writes the sentinel but `red = false`,
//! which it already is; the erase balancing tracks the parent of a hole
//! itself instead of parking it in the sentinel. A removed node's slot is
//! chained on the free list from `free` through its right link, holds a
//! vacant item, and is reused by the next [`Tree::link`]; a slot keeps its
//! index while live, so a user may remember it (the legacy index's VMA
//! cache does).
//!
//! ## Node fields
//!
//! - `item`: the user's data: its key and whatever else it keeps per
//!   entry (the legacy index threads its sorted list through it).
//! - `aug`: the augmented value, a summary of the subtree's items.
//! - `child`: the left (`child[0]`) and right (`child[1]`) children, or
//!   [`NIL`].
//! - `parent`: the parent, or [`NIL`] at the root.
//! - `red`: the colour.
//!
//! ## Invariants (checked by [`Tree::validate`])
//!
//! 1. Links: every live node is reached from `root` exactly once; each
//!    child names its parent in `parent`; the root's parent is [`NIL`];
//!    `root == NIL` exactly when `len == 0`. Kept by [`Tree::link`] and the
//!    private `rotate`, `replace_child` and `unlink` step.
//! 2. Red-black: the root is black, a red node has no red child, and every
//!    path from a node down to a missing child crosses the same number of
//!    black nodes; so the height is at most `2 log2(len + 1)`. Kept by
//!    [`Tree::rebalance_insert`] and [`Tree::rebalance_erase`].
//! 3. Augmentation: every live node's `aug` equals [`Augment::compute`]
//!    for it. A rotation keeps it itself (the risen node takes over the
//!    summary of the same set, the sunk one is recomputed), and so does
//!    [`Tree::unlink`] for the nodes whose subtree it changes; a user that
//!    changes a value `compute` reads (a new leaf's neighbours, a key)
//!    calls [`Tree::propagate`] from there before balancing, since a
//!    rotation trusts the values it moves.
//! 4. Slots: live nodes hold items that are not vacant and number `len`;
//!    every other slot but the sentinel is on the free list exactly once
//!    and holds a vacant item.
//!
//! Each user's header states its own key order and augmented value.

use std::fmt::Debug;

use crate::Errno;

/// The "no node" index, and the sentinel's slot.
pub(crate) const NIL: u32 = 0;

/// The callbacks that define a tree's augmented value, implemented by the
/// item type (the kernel's `rb_augment_callbacks`, reduced to the one a
/// user must write: the tree derives the propagate and rotate cases, and
/// the erase's recomputation, from it).
pub(crate) trait Augment: Default + Sized {
    /// The per-subtree summary, such as a largest gap or a largest end.
    type Value: Copy + Eq + Debug;

    /// The summary of an empty subtree, the sentinel's value. `compute`
    /// must treat it as "nothing here": combining with it changes nothing.
    const NONE: Self::Value;

    /// Node `i`'s summary from its own item and its children's recorded
    /// values (`tree.node(child).aug`; [`NIL`]'s is [`NONE`](Self::NONE)).
    /// It may read other nodes' items too, as long as every user change
    /// to what it reads is followed by a [`Tree::propagate`] from `i`.
    fn compute(tree: &Tree<Self>, i: u32) -> Self::Value;

    /// Whether this is the vacant item ([`Default::default`]) that the
    /// sentinel and free slots hold; only [`Tree::validate`] asks.
    fn is_vacant(&self) -> bool;
}

/// An arena slot: the user's item, its subtree's summary and the links.
/// Handed out only by shared reference, so the fields can be read where
/// the user's searches need them but changed only by the tree.
#[derive(Debug, Clone)]
pub(crate) struct Node<T: Augment> {
    /// The user's data; vacant in the sentinel and free slots.
    pub(crate) item: T,
    /// The summary of this node's subtree (invariant 3).
    pub(crate) aug: T::Value,
    /// Left and right child, or [`NIL`]; a free slot's right link chains
    /// the free list. An array, so a side chosen at run time picks a child
    /// without a branch.
    child: [u32; 2],
    /// Parent, or [`NIL`] at the root.
    parent: u32,
    red: bool,
}

impl<T: Augment> Node<T> {
    /// A black node holding the vacant item: the sentinel, and a freed
    /// slot before its free-list link is set.
    fn vacant() -> Node<T> {
        Node {
            item: T::default(),
            aug: T::NONE,
            child: [NIL; 2],
            parent: NIL,
            red: false,
        }
    }

    /// The left child, or [`NIL`].
    #[inline]
    pub(crate) fn left(&self) -> u32 {
        self.child[0]
    }

    /// The right child, or [`NIL`].
    #[inline]
    pub(crate) fn right(&self) -> u32 {
        self.child[1]
    }

    /// The parent, or [`NIL`] at the root.
    #[inline]
    pub(crate) fn parent(&self) -> u32 {
        self.parent
    }
}

/// What [`Tree::unlink`] leaves for [`Tree::rebalance_erase`]: the node
/// (or hole) that took the removed position, and its parent.
#[derive(Debug, Clone, Copy)]
#[must_use = "the tree is unbalanced until rebalance_erase runs"]
pub(crate) struct Unlinked {
    /// The node now in the position that lost a node; [`NIL`] for a hole.
    x: u32,
    /// `x`'s parent, kept apart since a hole has no slot to record it.
    xp: u32,
    /// Whether the lost position was black, so `x`'s paths are one black
    /// node short until rebalanced.
    black: bool,
}

/// An augmented red-black tree over items `T`; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct Tree<T: Augment> {
    nodes: Vec<Node<T>>,
    /// Head of the free-slot chain (through right links), or [`NIL`].
    free: u32,
    root: u32,
    len: usize,
}

impl<T: Augment> Default for Tree<T> {
    fn default() -> Self {
        Tree::new()
    }
}

impl<T: Augment> Tree<T> {
    /// An empty tree: just the sentinel.
    pub(crate) fn new() -> Tree<T> {
        Tree {
            nodes: vec![Node::vacant()],
            free: NIL,
            root: NIL,
            len: 0,
        }
    }

    /// Drops every item and the arena.
    pub(crate) fn clear(&mut self) {
        *self = Tree::new();
    }

    /// Number of live nodes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The root, or [`NIL`] when empty.
    #[inline]
    pub(crate) fn root(&self) -> u32 {
        self.root
    }

    /// Arena slots, the sentinel and free ones included.
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.nodes.len()
    }

    /// Tell the profile recorder (`crate::profile`) that node `i` was
    /// written. The counting rule of this tree: every node whose item,
    /// links, colour or summary is stored to is written; a summary's
    /// recomputation reads the node's children; the users' descents and
    /// walks report the nodes they read ([`seen`](Self::seen)); each node
    /// counted once per critical section by the lines it spans. Reads of
    /// the rebalancing loops are not counted apart: the nodes they read
    /// they nearly all write. The sentinel is never written and read-only
    /// shared by every tree, so it is not counted.
    #[inline(always)]
    fn profile(&self, i: u32, write: bool) {
        if crate::profile::counting() {
            self.touch(i, write);
        }
    }

    #[cold]
    fn touch(&self, i: u32, write: bool) {
        if i != NIL {
            if let Some(n) = self.nodes.get(i as usize) {
                crate::profile::touch(n, write);
            }
        }
    }

    /// A descent or a walk read node `i`; `on` is what
    /// `crate::profile::counting()` said when it began (one check per
    /// descent, not per node: these loops are the trees' hottest).
    #[inline(always)]
    pub(crate) fn seen(&self, on: bool, i: u32) {
        if on {
            self.touch(i, false);
        }
    }

    /// Slot `i`: the sentinel for [`NIL`], a free slot's vacant node, or a
    /// live node. Panics outside the arena, as only indices the tree handed
    /// out are meant to come back.
    #[inline]
    pub(crate) fn node(&self, i: u32) -> &Node<T> {
        &self.nodes[i as usize]
    }

    /// Slot `i` if the arena has it: a total version of
    /// [`node`](Self::node) for indices that may be stale.
    #[inline]
    pub(crate) fn get(&self, i: u32) -> Option<&Node<T>> {
        self.nodes.get(i as usize)
    }

    // Only the legacy VMA index changes an item in place.
    #[cfg_attr(not(feature = "legacy-index"), allow(dead_code))]
    /// The item of live node `i`, for changes that `compute` does not read
    /// (or that the caller follows with [`propagate`](Self::propagate)).
    #[inline]
    pub(crate) fn item_mut(&mut self, i: u32) -> &mut T {
        self.profile(i, true);
        &mut self.nodes[i as usize].item
    }

    /// Overwrites live node `i`'s summary. For a user whose summary only
    /// grows on insert and who can update the path more cheaply than
    /// [`propagate`](Self::propagate); the caller keeps invariant 3.
    #[inline]
    pub(crate) fn set_aug(&mut self, i: u32, aug: T::Value) {
        self.profile(i, true);
        self.nodes[i as usize].aug = aug;
    }

    /// Recomputes `i`'s summary; returns whether it changed.
    #[inline]
    fn recompute(&mut self, i: u32) -> bool {
        let aug = T::compute(self, i);
        if crate::profile::counting() {
            let n = &self.nodes[i as usize];
            self.touch(i, true);
            self.touch(n.child[0], false);
            self.touch(n.child[1], false);
        }
        std::mem::replace(&mut self.nodes[i as usize].aug, aug) != aug
    }

    // Only the legacy VMA index changes an item in place.
    #[cfg_attr(not(feature = "legacy-index"), allow(dead_code))]
    /// Recomputes summaries from `i` towards the root, stopping at the
    /// first node whose summary does not change (or at [`NIL`]): from there
    /// up, every node's inputs are what they were. Call it on each node
    /// whose own inputs changed.
    pub(crate) fn propagate(&mut self, mut i: u32) {
        while i != NIL && self.recompute(i) {
            i = self.nodes[i as usize].parent;
        }
    }

    /// Recomputes every summary from `i` up to the root, for a path whose
    /// nodes all lost a descendant. Stopping at an unchanged summary would
    /// be correct too, but a walk that always ends at the root is one the
    /// branch predictor learns: it measured faster in the legacy index.
    fn propagate_to_root(&mut self, mut i: u32) {
        while i != NIL {
            self.recompute(i);
            i = self.nodes[i as usize].parent;
        }
    }

    /// Points `parent`'s link to `old` (or the root, for [`NIL`]) at `new`.
    ///
    /// A branch, not a side index computed from the comparison: with the
    /// index, the store's address waits on the load of `child`, and the
    /// reads of this node that follow at once (the propagation) wait
    /// behind it; the branch measured a little faster in the legacy index.
    #[inline]
    fn replace_child(&mut self, parent: u32, old: u32, new: u32) {
        self.profile(parent, true);
        if parent == NIL {
            self.root = new;
        } else if self.nodes[parent as usize].child[0] == old {
            self.nodes[parent as usize].child[0] = new;
        } else {
            self.nodes[parent as usize].child[1] = new;
        }
    }

    /// Records `parent` in `i`, unless `i` is the sentinel.
    #[inline]
    fn set_parent(&mut self, i: u32, parent: u32) {
        self.profile(i, true);
        if i != NIL {
            self.nodes[i as usize].parent = parent;
        }
    }

    #[inline]
    fn kid(&self, i: u32, right: bool) -> u32 {
        self.nodes[i as usize].child[usize::from(right)]
    }

    #[inline]
    fn set_kid(&mut self, i: u32, right: bool, child: u32) {
        self.profile(i, true);
        self.nodes[i as usize].child[usize::from(right)] = child;
    }

    #[inline]
    fn is_red(&self, i: u32) -> bool {
        self.nodes[i as usize].red
    }

    /// Colours `i`; only ever called with `red` for a real node, so the
    /// sentinel stays black.
    #[inline]
    fn paint(&mut self, i: u32, red: bool) {
        self.profile(i, true);
        self.nodes[i as usize].red = red;
    }

    /// Lifts `x`'s child on the `right` side (a left rotation) or the left
    /// side (a right rotation) into `x`'s place. Only those two nodes'
    /// subtrees change: the risen one now spans exactly what `x` spanned,
    /// so it takes over `x`'s summary, and `x` is recomputed. That is why
    /// every summary must be exact before balancing starts.
    fn rotate(&mut self, x: u32, right: bool) {
        let y = self.kid(x, right);
        let inner = self.kid(y, !right);
        let xp = self.nodes[x as usize].parent;
        self.set_kid(x, right, inner);
        self.set_parent(inner, x);
        self.profile(y, true);
        self.nodes[y as usize].parent = xp;
        self.replace_child(xp, x, y);
        self.set_kid(y, !right, x);
        self.nodes[x as usize].parent = y;
        self.nodes[y as usize].aug = self.nodes[x as usize].aug;
        self.recompute(x);
    }

    /// Takes a free slot (or a new one) for `item` and hangs it as a red
    /// leaf on the `right` or left side of `parent` ([`NIL`]: as the root;
    /// that side must be empty), with its summary computed. The tree is
    /// not yet balanced: the caller propagates what changed (at least from
    /// `parent`) and then calls [`rebalance_insert`](Self::rebalance_insert).
    ///
    /// Errors with [`Errno::ENOMEM`], the tree unchanged, once the arena
    /// has used every `u32` index.
    ///
    /// Inlined, and a reused slot filled field by field: building the node
    /// apart and copying it in made the copy's wide loads wait on the
    /// caller's narrow stores of the item (a failed store forwarding), a
    /// measurable share of a legacy-index insert.
    #[inline]
    pub(crate) fn link(&mut self, parent: u32, right: bool, item: T) -> Result<u32, Errno> {
        let z = if self.free != NIL {
            let z = self.free;
            let n = &mut self.nodes[z as usize];
            self.free = n.child[1];
            n.item = item;
            n.child = [NIL; 2];
            n.parent = parent;
            n.red = true;
            z
        } else {
            let z = u32::try_from(self.nodes.len()).map_err(|_| Errno::ENOMEM)?;
            self.nodes.push(Node {
                item,
                aug: T::NONE,
                child: [NIL; 2],
                parent,
                red: true,
            });
            z
        };
        self.profile(z, true);
        if parent == NIL {
            self.root = z;
        } else {
            self.set_kid(parent, right, z);
        }
        self.len += 1;
        self.recompute(z);
        Ok(z)
    }

    /// Restores the red-black rules after [`link`](Self::link) hung the red
    /// leaf `z`; every summary must be exact by now (invariant 3).
    pub(crate) fn rebalance_insert(&mut self, mut z: u32) {
        loop {
            let p = self.nodes[z as usize].parent;
            if !self.is_red(p) {
                break;
            }
            // A red parent is not the root, so the grandparent exists.
            let g = self.nodes[p as usize].parent;
            // The uncle hangs on the side away from the parent.
            let p_left = p == self.kid(g, false);
            let uncle = self.kid(g, p_left);
            if self.is_red(uncle) {
                self.paint(p, false);
                self.paint(uncle, false);
                self.paint(g, true);
                z = g;
            } else {
                // z on the inner side: rotate it to the outer side first.
                let p = if z == self.kid(p, p_left) {
                    self.rotate(p, p_left);
                    z
                } else {
                    p
                };
                self.paint(p, false);
                self.paint(g, true);
                self.rotate(g, !p_left);
                break;
            }
        }
        let root = self.root;
        self.paint(root, false);
    }

    /// Takes live node `z` out of the tree, frees its slot and returns its
    /// item, with every summary exact again; the red-black rules wait for
    /// [`rebalance_erase`](Self::rebalance_erase), so that a user can first
    /// propagate a change of its own that the removal caused.
    ///
    /// With two children, `z`'s in-order successor moves (links, not item:
    /// slot indices stay put) into `z`'s position and colour.
    #[inline]
    pub(crate) fn unlink(&mut self, z: u32) -> (T, Unlinked) {
        self.profile(z, true);
        let Node {
            child: [zl, zr],
            parent: zp,
            red: z_red,
            ..
        } = self.nodes[z as usize];
        let unlinked = if zl == NIL || zr == NIL {
            let x = if zl == NIL { zr } else { zl };
            self.replace_child(zp, z, x);
            self.set_parent(x, zp);
            self.propagate_to_root(zp);
            Unlinked {
                x,
                xp: zp,
                black: !z_red,
            }
        } else {
            let mut y = zr;
            while self.kid(y, false) != NIL {
                y = self.kid(y, false);
            }
            let Node {
                child: [_, x],
                parent: yp,
                red: y_red,
                ..
            } = self.nodes[y as usize];
            let xp = if yp == z {
                y
            } else {
                self.replace_child(yp, y, x);
                self.set_parent(x, yp);
                self.set_kid(y, true, zr);
                self.profile(zr, true);
                self.nodes[zr as usize].parent = y;
                yp
            };
            self.replace_child(zp, z, y);
            self.profile(y, true);
            self.profile(zl, true);
            let n = &mut self.nodes[y as usize];
            n.parent = zp;
            n.child[0] = zl;
            n.red = z_red;
            self.nodes[zl as usize].parent = y;
            // Every subtree that changed (lost y below, or z, or gained y
            // in z's place) is on the path from y's old parent up, and y
            // is on it.
            self.propagate_to_root(xp);
            Unlinked {
                x,
                xp,
                black: !y_red,
            }
        };
        self.len -= 1;
        let mut freed = Node::vacant();
        freed.child[1] = self.free;
        self.free = z;
        let old = std::mem::replace(&mut self.nodes[z as usize], freed);
        (old.item, unlinked)
    }

    /// Restores the red-black rules after [`unlink`](Self::unlink); every
    /// summary must be exact by now (invariant 3).
    pub(crate) fn rebalance_erase(&mut self, u: Unlinked) {
        if !u.black {
            return;
        }
        let Unlinked { mut x, mut xp, .. } = u;
        // x carries an extra black until it reaches a red node (painted
        // black) or the root.
        while x != self.root && !self.is_red(x) {
            // x's side is one black short, so its sibling w has a black
            // node below it: w exists.
            let x_left = x == self.kid(xp, false);
            let mut w = self.kid(xp, x_left);
            if self.is_red(w) {
                self.paint(w, false);
                self.paint(xp, true);
                self.rotate(xp, x_left);
                w = self.kid(xp, x_left);
            }
            // w's children: `near` on x's side, `far` away from it.
            let (near, far) = (self.kid(w, !x_left), self.kid(w, x_left));
            if !self.is_red(near) && !self.is_red(far) {
                self.paint(w, true);
                x = xp;
                xp = self.nodes[x as usize].parent;
            } else {
                if !self.is_red(far) {
                    self.paint(near, false);
                    self.paint(w, true);
                    self.rotate(w, !x_left);
                    w = self.kid(xp, x_left);
                }
                let xp_red = self.is_red(xp);
                self.paint(w, xp_red);
                self.paint(xp, false);
                let far = self.kid(w, x_left);
                self.paint(far, false);
                self.rotate(xp, x_left);
                x = self.root;
            }
        }
        self.paint(x, false);
    }

    /// [`unlink`](Self::unlink) and [`rebalance_erase`](Self::rebalance_erase)
    /// together, for a user with nothing to propagate in between.
    pub(crate) fn erase(&mut self, z: u32) -> T {
        let (item, u) = self.unlink(z);
        self.rebalance_erase(u);
        item
    }

    /// Nodes on the longest path from the root down (0 when empty).
    pub(crate) fn height(&self) -> usize {
        self.depth(self.root)
    }

    /// Recursion depth is the height, bounded by invariant 2.
    fn depth(&self, i: u32) -> usize {
        if i == NIL {
            return 0;
        }
        let n = self.node(i);
        1 + self.depth(n.left()).max(self.depth(n.right()))
    }

    /// Checks invariants 1–4, handing each live node to `visit` in order
    /// so that the user can check its key order and item against the
    /// previous one.
    pub(crate) fn validate(
        &self,
        mut visit: impl FnMut(u32, &T) -> Result<(), String>,
    ) -> Result<(), String> {
        let sentinel = self.node(NIL);
        if sentinel.red || sentinel.aug != T::NONE || !sentinel.item.is_vacant() {
            return Err("sentinel is red, has a summary or holds an item".into());
        }
        if sentinel.child != [NIL; 2] || sentinel.parent != NIL {
            return Err("sentinel has links".into());
        }
        if (self.root == NIL) != (self.len == 0) {
            return Err(format!("root {} but len {}", self.root, self.len));
        }
        // Slot states, so that a node reached twice (a cycle or a shared
        // child) or found both live and free is reported.
        let mut seen = vec![false; self.nodes.len()];
        seen[NIL as usize] = true;
        if self.root != NIL {
            let r = self.slot(self.root)?;
            if r.parent != NIL {
                return Err("root has a parent".into());
            }
            if r.red {
                return Err("root is red".into());
            }
            self.check(self.root, &mut seen, &mut visit)?;
        }
        let live = seen.iter().filter(|&&s| s).count() - 1;
        if live != self.len {
            return Err(format!("{live} nodes reachable, len {}", self.len));
        }
        let mut free = 0usize;
        let mut f = self.free;
        while f != NIL {
            let slot = self.slot(f)?;
            if std::mem::replace(&mut seen[f as usize], true) {
                return Err(format!("free slot {f} is live or listed twice"));
            }
            if !slot.item.is_vacant() {
                return Err(format!("free slot {f} holds an item"));
            }
            free += 1;
            f = slot.child[1];
        }
        if 1 + live + free != self.nodes.len() {
            return Err(format!(
                "{} slots: 1 sentinel + {live} live + {free} free do not add up",
                self.nodes.len()
            ));
        }
        Ok(())
    }

    /// Slot `i`, or an error naming an index outside the arena.
    fn slot(&self, i: u32) -> Result<&Node<T>, String> {
        self.get(i)
            .ok_or_else(|| format!("index {i} outside the arena"))
    }

    /// Checks invariants 1–3 below live node `i`, visiting in order, and
    /// returns its black height. The summary check runs after both
    /// children's, so together they compare with a recomputation from
    /// scratch. Recursion depth is the height, bounded by invariant 2 or,
    /// on a broken tree, by `seen`.
    fn check(
        &self,
        i: u32,
        seen: &mut [bool],
        visit: &mut impl FnMut(u32, &T) -> Result<(), String>,
    ) -> Result<usize, String> {
        if i == NIL {
            return Ok(1);
        }
        let n = self.slot(i)?;
        if std::mem::replace(&mut seen[i as usize], true) {
            return Err(format!("node {i} reached twice"));
        }
        if n.item.is_vacant() {
            return Err(format!("node {i} in the tree holds no item"));
        }
        for c in n.child {
            if c != NIL {
                let child = self.slot(c)?;
                if child.parent != i {
                    return Err(format!("node {c}'s parent is {}, not {i}", child.parent));
                }
                if n.red && child.red {
                    return Err(format!("red node {i} has red child {c}"));
                }
            }
        }
        let left = self.check(n.left(), seen, visit)?;
        visit(i, &n.item)?;
        let right = self.check(n.right(), seen, visit)?;
        if left != right {
            return Err(format!("node {i}: black heights {left} and {right}"));
        }
        let want = T::compute(self, i);
        if n.aug != want {
            return Err(format!(
                "node {i}: summary {:?} but its subtree gives {want:?}",
                n.aug
            ));
        }
        Ok(left + usize::from(!n.red))
    }
}

#[cfg(test)]
mod tests;

//! The augmented red-black interval tree ([`ItreeKind::Rb`](super::ItreeKind::Rb)).
//!
//! ## Node
//!
//! One [`Node`] per entry, in the arena `nodes`, linked by `u32` indices
//! (`left`, `right`, `parent`; [`NIL`] for none). A slot whose entry was
//! removed has `value == None` and its index on the `free` list, and is
//! reused by the next insert; its links are stale and never followed.
//!
//! ## Invariants (kept by `insert`, `remove` and the rotations; checked by
//! `validate`)
//!
//! 1. Search order: an in-order walk yields keys in strictly ascending
//!    `(first, last, id)` order.
//! 2. Links agree: a node's children name it as their parent; the root's
//!    parent is `NIL`; `root == NIL` exactly when `len == 0`.
//! 3. Red-black: the root is black, a red node has no red child, and every
//!    path from a node down to a missing child crosses the same number of
//!    black nodes. Together these bound the height by `2 log2(n + 1)`.
//! 4. Augmentation: `max_last` is the largest `last` of the node's subtree.
//!    A rotation changes the subtree of exactly two nodes and recomputes
//!    them; insert and remove refresh the path from the changed spot to the
//!    root.
//! 5. Accounting: live nodes (`value.is_some()`, reachable from the root)
//!    number `len`; every other slot is on `free` exactly once.

use std::cmp::Ordering;
use std::ops::ControlFlow;

use super::{next_index, Entry, Key, NIL};
use crate::Errno;

/// An arena slot: one entry and its links.
#[derive(Debug, Clone)]
struct Node<V> {
    key: Key,
    /// Largest `key.last` in this node's subtree (invariant 4): a query for
    /// offsets above it skips the whole subtree.
    max_last: u64,
    left: u32,
    right: u32,
    parent: u32,
    red: bool,
    /// `None` only while the slot is on the free list.
    value: Option<V>,
}

/// The tree: an arena of nodes, its free list, and the root index.
#[derive(Debug, Clone)]
pub(crate) struct RbTree<V> {
    nodes: Vec<Node<V>>,
    free: Vec<u32>,
    root: u32,
    len: usize,
}

impl<V> RbTree<V> {
    pub(crate) fn new() -> Self {
        RbTree {
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn clear(&mut self) {
        *self = RbTree::new();
    }

    #[inline]
    fn node(&self, i: u32) -> &Node<V> {
        &self.nodes[i as usize]
    }

    #[inline]
    fn node_mut(&mut self, i: u32) -> &mut Node<V> {
        &mut self.nodes[i as usize]
    }

    #[inline]
    fn is_red(&self, i: u32) -> bool {
        i != NIL && self.node(i).red
    }

    /// Colours `i` black; a missing child already counts as black.
    #[inline]
    fn set_black(&mut self, i: u32) {
        if i != NIL {
            self.node_mut(i).red = false;
        }
    }

    #[inline]
    fn max_of(&self, i: u32) -> u64 {
        if i == NIL {
            0
        } else {
            self.node(i).max_last
        }
    }

    /// Recomputes `i`'s `max_last` from itself and its children.
    #[inline]
    fn refresh(&mut self, i: u32) {
        let n = self.node(i);
        let m = n
            .key
            .last
            .max(self.max_of(n.left))
            .max(self.max_of(n.right));
        self.node_mut(i).max_last = m;
    }

    /// Slot index holding `key`, or `NIL`.
    fn find(&self, key: &Key) -> u32 {
        let mut cur = self.root;
        while cur != NIL {
            let n = self.node(cur);
            cur = match key.cmp(&n.key) {
                Ordering::Less => n.left,
                Ordering::Greater => n.right,
                Ordering::Equal => return cur,
            };
        }
        NIL
    }

    pub(crate) fn get(&self, key: &Key) -> Option<&V> {
        match self.find(key) {
            NIL => None,
            i => self.node(i).value.as_ref(),
        }
    }

    pub(crate) fn insert(&mut self, key: Key, value: V) -> Result<(), Errno> {
        // Find the attachment point first, so a duplicate or a full arena
        // leaves the tree untouched.
        let mut parent = NIL;
        let mut cur = self.root;
        let mut go_left = false;
        while cur != NIL {
            let n = self.node(cur);
            parent = cur;
            match key.cmp(&n.key) {
                Ordering::Less => {
                    go_left = true;
                    cur = n.left;
                }
                Ordering::Greater => {
                    go_left = false;
                    cur = n.right;
                }
                Ordering::Equal => return Err(Errno::EEXIST),
            }
        }
        let node = Node {
            key,
            max_last: key.last,
            left: NIL,
            right: NIL,
            parent,
            red: true,
            value: Some(value),
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                let i = next_index(self.nodes.len())?;
                self.nodes.push(node);
                i
            }
        };
        if parent == NIL {
            self.root = i;
        } else if go_left {
            self.node_mut(parent).left = i;
        } else {
            self.node_mut(parent).right = i;
        }
        // Invariant 4 on the path: ancestors only gain `key.last`, and once
        // one already covers it, all above it do too.
        let mut up = parent;
        while up != NIL && self.node(up).max_last < key.last {
            self.node_mut(up).max_last = key.last;
            up = self.node(up).parent;
        }
        self.insert_fixup(i);
        self.len += 1;
        Ok(())
    }

    /// Points `old`'s parent (or the root) at `new` instead.
    fn replace_child(&mut self, parent: u32, old: u32, new: u32) {
        if parent == NIL {
            self.root = new;
        } else if self.node(parent).left == old {
            self.node_mut(parent).left = new;
        } else {
            self.node_mut(parent).right = new;
        }
    }

    /// `n`'s right child if `right`, else its left one. The balancing
    /// cases come in mirror-image pairs; each pair is written once, with
    /// the side as a parameter.
    fn kid(&self, n: u32, right: bool) -> u32 {
        let n = self.node(n);
        if right {
            n.right
        } else {
            n.left
        }
    }

    fn set_kid(&mut self, n: u32, right: bool, child: u32) {
        let n = self.node_mut(n);
        if right {
            n.right = child;
        } else {
            n.left = child;
        }
    }

    /// Lifts `x`'s child on the `right` side (a left rotation) or on the
    /// left side (a right rotation) above it. Only `x` and that child
    /// change subtrees, so only their `max_last` is recomputed
    /// (invariant 4).
    fn rotate(&mut self, x: u32, right: bool) {
        let y = self.kid(x, right);
        let inner = self.kid(y, !right);
        let xp = self.node(x).parent;
        self.set_kid(x, right, inner);
        if inner != NIL {
            self.node_mut(inner).parent = x;
        }
        self.node_mut(y).parent = xp;
        self.replace_child(xp, x, y);
        self.set_kid(y, !right, x);
        self.node_mut(x).parent = y;
        // y now spans exactly the set x spanned.
        self.node_mut(y).max_last = self.node(x).max_last;
        self.refresh(x);
    }

    /// Restores invariant 3 after linking the red node `z`.
    fn insert_fixup(&mut self, mut z: u32) {
        while self.is_red(self.node(z).parent) {
            let p = self.node(z).parent;
            // A red parent is never the root, so the grandparent exists.
            let g = self.node(p).parent;
            // The uncle hangs on the side opposite the parent.
            let p_left = p == self.node(g).left;
            let uncle = self.kid(g, p_left);
            if self.is_red(uncle) {
                self.node_mut(p).red = false;
                self.node_mut(uncle).red = false;
                self.node_mut(g).red = true;
                z = g;
            } else {
                // z on the inner side: rotate it to the outer side first.
                if z == self.kid(p, p_left) {
                    z = p;
                    self.rotate(z, p_left);
                }
                let p = self.node(z).parent;
                let g = self.node(p).parent;
                self.node_mut(p).red = false;
                self.node_mut(g).red = true;
                self.rotate(g, !p_left);
            }
        }
        let root = self.root;
        self.set_black(root);
    }

    /// Puts the subtree `v` where `u` hangs (parent link included).
    fn transplant(&mut self, u: u32, v: u32) {
        let up = self.node(u).parent;
        self.replace_child(up, u, v);
        if v != NIL {
            self.node_mut(v).parent = up;
        }
    }

    pub(crate) fn remove(&mut self, key: &Key) -> Option<V> {
        let z = self.find(key);
        if z == NIL {
            return None;
        }
        let (zl, zr, zp) = {
            let n = self.node(z);
            (n.left, n.right, n.parent)
        };
        // `x` takes the place of the node that leaves its position; `xp`
        // is x's parent afterwards (x may be NIL, so it is tracked apart).
        let (x, xp, removed_black);
        if zl == NIL || zr == NIL {
            x = if zl == NIL { zr } else { zl };
            xp = zp;
            removed_black = !self.node(z).red;
            self.transplant(z, x);
        } else {
            // Two children: z's successor y (leftmost of the right subtree)
            // takes z's place and colour; y's old spot loses a node.
            let mut y = zr;
            while self.node(y).left != NIL {
                y = self.node(y).left;
            }
            removed_black = !self.node(y).red;
            x = self.node(y).right;
            if self.node(y).parent == z {
                xp = y;
            } else {
                xp = self.node(y).parent;
                self.transplant(y, x);
                self.node_mut(y).right = zr;
                self.node_mut(zr).parent = y;
            }
            self.transplant(z, y);
            self.node_mut(y).left = zl;
            self.node_mut(zl).parent = y;
            let z_red = self.node(z).red;
            self.node_mut(y).red = z_red;
        }
        // Invariant 4: every subtree that lost z (and, in the two-child
        // case, gained y higher up) lies on the path from xp to the root;
        // y, if moved, sits on that path.
        let mut up = xp;
        while up != NIL {
            self.refresh(up);
            up = self.node(up).parent;
        }
        if removed_black {
            self.remove_fixup(x, xp);
        }
        self.len -= 1;
        self.free.push(z);
        self.node_mut(z).value.take()
    }

    /// Restores invariant 3 after a black node left the path through `x`
    /// (child of `xp`; `x` may be `NIL`): `x` carries an extra black.
    fn remove_fixup(&mut self, mut x: u32, mut xp: u32) {
        while x != self.root && !self.is_red(x) {
            // x's side is one black short, so its sibling w (on the other
            // side) has at least one black node below: w exists.
            let x_left = x == self.node(xp).left;
            let mut w = self.kid(xp, x_left);
            if self.is_red(w) {
                self.node_mut(w).red = false;
                self.node_mut(xp).red = true;
                self.rotate(xp, x_left);
                w = self.kid(xp, x_left);
            }
            // w's children: `near` on x's side, `far` away from it.
            let (near, far) = (self.kid(w, !x_left), self.kid(w, x_left));
            if !self.is_red(near) && !self.is_red(far) {
                self.node_mut(w).red = true;
                x = xp;
                xp = self.node(x).parent;
            } else {
                if !self.is_red(far) {
                    self.set_black(near);
                    self.node_mut(w).red = true;
                    self.rotate(w, !x_left);
                    w = self.kid(xp, x_left);
                }
                let xp_red = self.node(xp).red;
                self.node_mut(w).red = xp_red;
                self.node_mut(xp).red = false;
                let far = self.kid(w, x_left);
                self.set_black(far);
                self.rotate(xp, x_left);
                x = self.root;
                break;
            }
        }
        self.set_black(x);
    }

    pub(crate) fn visit_overlap<'a>(
        &'a self,
        first: u64,
        last: u64,
        f: &mut impl FnMut(Entry<'a, V>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        self.visit(self.root, first, last, f)
    }

    /// In-order walk of `i`'s subtree, pruned by invariants 1 and 4.
    /// Recursion depth is the height, at most `2 log2(n + 1)`.
    fn visit<'a>(
        &'a self,
        i: u32,
        first: u64,
        last: u64,
        f: &mut impl FnMut(Entry<'a, V>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if i == NIL {
            return ControlFlow::Continue(());
        }
        let n = self.node(i);
        if n.max_last < first {
            // Nothing below reaches the query.
            return ControlFlow::Continue(());
        }
        self.visit(n.left, first, last, f)?;
        if n.key.first > last {
            // This node and its right subtree all start past the query.
            return ControlFlow::Continue(());
        }
        if n.key.last >= first {
            if let Some(value) = &n.value {
                f(n.key.entry(value))?;
            }
        }
        self.visit(n.right, first, last, f)
    }

    pub(crate) fn height(&self) -> usize {
        self.depth(self.root)
    }

    fn depth(&self, i: u32) -> usize {
        if i == NIL {
            return 0;
        }
        let n = self.node(i);
        1 + self.depth(n.left).max(self.depth(n.right))
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if (self.root == NIL) != (self.len == 0) {
            return Err(format!("root {} but len {}", self.root, self.len));
        }
        let mut live = vec![false; self.nodes.len()];
        let mut prev: Option<Key> = None;
        if self.root != NIL {
            let r = self.slot(self.root)?;
            if r.parent != NIL {
                return Err("root has a parent".into());
            }
            if r.red {
                return Err("root is red".into());
            }
            self.check(self.root, &mut live, &mut prev)?;
        }
        let count = live.iter().filter(|&&l| l).count();
        if count != self.len {
            return Err(format!("{count} nodes reachable, len {}", self.len));
        }
        let mut freed = vec![false; self.nodes.len()];
        for &i in &self.free {
            let slot = self.slot(i)?;
            if live[i as usize] || freed[i as usize] || slot.value.is_some() {
                return Err(format!(
                    "free slot {i} is live, listed twice or holds a value"
                ));
            }
            freed[i as usize] = true;
        }
        if count + self.free.len() != self.nodes.len() {
            return Err(format!(
                "{count} live + {} free != {} slots",
                self.free.len(),
                self.nodes.len()
            ));
        }
        Ok(())
    }

    fn slot(&self, i: u32) -> Result<&Node<V>, String> {
        self.nodes
            .get(i as usize)
            .ok_or_else(|| format!("index {i} outside the arena"))
    }

    /// Checks invariants 1–4 below `i` (marking nodes in `live`, which also
    /// catches cycles) and returns the black height.
    fn check(&self, i: u32, live: &mut [bool], prev: &mut Option<Key>) -> Result<usize, String> {
        if i == NIL {
            return Ok(1);
        }
        let n = self.slot(i)?;
        if std::mem::replace(&mut live[i as usize], true) {
            return Err(format!("node {i} reached twice"));
        }
        if n.value.is_none() {
            return Err(format!("node {i} in the tree has no value"));
        }
        if n.key.first > n.key.last {
            return Err(format!("node {i} has first > last: {:?}", n.key));
        }
        for child in [n.left, n.right] {
            if child != NIL {
                let c = self.slot(child)?;
                if c.parent != i {
                    return Err(format!("node {child}'s parent is {}, not {i}", c.parent));
                }
                if n.red && c.red {
                    return Err(format!("red node {i} has red child {child}"));
                }
            }
        }
        let left_bh = self.check(n.left, live, prev)?;
        if let Some(p) = prev {
            if *p >= n.key {
                return Err(format!("keys out of order: {p:?} then {:?}", n.key));
            }
        }
        *prev = Some(n.key);
        let right_bh = self.check(n.right, live, prev)?;
        if left_bh != right_bh {
            return Err(format!("node {i}: black heights {left_bh} and {right_bh}"));
        }
        let want = n
            .key
            .last
            .max(self.max_of(n.left))
            .max(self.max_of(n.right));
        if n.max_last != want {
            return Err(format!(
                "node {i}: max_last {} but subtree max {want}",
                n.max_last
            ));
        }
        Ok(left_bh + usize::from(!n.red))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(t: &RbTree<u32>) -> Vec<(u64, u64, u64)> {
        let mut out = Vec::new();
        let _ = t.visit_overlap(0, u64::MAX, &mut |e| {
            out.push((e.first, e.last, e.id));
            ControlFlow::Continue(())
        });
        out
    }

    #[test]
    fn ascending_and_descending_stay_balanced() {
        let mut t = RbTree::new();
        for i in 0..512u64 {
            t.insert(Key::new(i, i + 3, 0), i as u32).unwrap();
            t.insert(Key::new(10_000 - i, 10_000 - i, 0), 0).unwrap();
        }
        t.validate().unwrap();
        assert!(t.height() <= 2 * 11, "height {}", t.height());
        for i in (0..512u64).step_by(2) {
            assert_eq!(t.remove(&Key::new(i, i + 3, 0)), Some(i as u32));
        }
        t.validate().unwrap();
        assert_eq!(t.len(), 768);
    }

    #[test]
    fn extreme_bounds() {
        let mut t = RbTree::new();
        t.insert(Key::new(u64::MAX, u64::MAX, u64::MAX), 1).unwrap();
        t.insert(Key::new(0, 0, 0), 2).unwrap();
        t.insert(Key::new(0, u64::MAX, 5), 3).unwrap();
        t.validate().unwrap();
        let mut hits = Vec::new();
        let _ = t.visit_overlap(u64::MAX, u64::MAX, &mut |e| {
            hits.push(*e.value);
            ControlFlow::Continue(())
        });
        assert_eq!(hits, [3, 1]);
        assert_eq!(keys(&t).len(), 3);
    }

    #[test]
    fn slots_are_reused_after_remove() {
        let mut t = RbTree::new();
        for i in 0..10u64 {
            t.insert(Key::new(i, i, 0), 0u32).unwrap();
        }
        for i in 0..10u64 {
            t.remove(&Key::new(i, i, 0)).unwrap();
            t.validate().unwrap();
        }
        assert_eq!(t.root, NIL);
        for i in 0..10u64 {
            t.insert(Key::new(i, i, 1), 0u32).unwrap();
        }
        assert_eq!(t.nodes.len(), 10, "freed slots were not reused");
        t.validate().unwrap();
    }

    #[test]
    fn validate_catches_broken_augmentation() {
        let mut t = RbTree::new();
        for i in 0..8u64 {
            t.insert(Key::new(i, i, 0), 0u32).unwrap();
        }
        let root = t.root;
        t.node_mut(root).max_last = 3;
        assert!(t.validate().unwrap_err().contains("max_last"));
    }
}

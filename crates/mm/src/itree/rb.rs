//! The augmented red-black interval tree ([`ItreeKind::Rb`](super::ItreeKind::Rb)).
//!
//! A user of the crate's red-black core (`crate::rbtree`, whose header
//! states the node layout, the slots and the red-black invariants). Each
//! entry is one node whose item is an [`Item`]: its key and its value
//! (`None` only in the sentinel and free slots).
//!
//! ## Invariants (checked by `validate`, with the core's)
//!
//! 1. Search order: an in-order walk yields keys in strictly ascending
//!    `(first, last, id)` order. Kept by `insert`, which descends by key
//!    to the leaf position it links.
//! 2. Augmentation: a node's summary (`aug`) is the largest `key.last` in
//!    its subtree, so a query for offsets above it skips the subtree.
//!    `insert` raises the path above the new leaf itself, as ancestors can
//!    only gain its `last`; the core keeps it through rotations and
//!    erases.

use std::cmp::Ordering;
use std::ops::ControlFlow;

use super::{Entry, Key};
use crate::rbtree::{Augment, Tree, NIL};
use crate::Errno;

/// A node's payload: one entry.
#[derive(Debug, Clone)]
struct Item<V> {
    key: Key,
    /// `None` only in the sentinel and free slots.
    value: Option<V>,
}

// Manual impl: deriving would demand `V: Default`.
impl<V> Default for Item<V> {
    fn default() -> Self {
        Item {
            key: Key::default(),
            value: None,
        }
    }
}

/// Invariant 2: the largest `last` below; 0 for an empty subtree, which
/// every `max` absorbs.
impl<V> Augment for Item<V> {
    type Value = u64;
    const NONE: u64 = 0;

    #[inline]
    fn compute(tree: &Tree<Self>, i: u32) -> u64 {
        let n = tree.node(i);
        n.item
            .key
            .last
            .max(tree.node(n.left()).aug)
            .max(tree.node(n.right()).aug)
    }

    fn is_vacant(&self) -> bool {
        self.value.is_none()
    }
}

/// The interval tree: the core tree over [`Item`]s.
#[derive(Debug, Clone)]
pub(crate) struct RbTree<V> {
    tree: Tree<Item<V>>,
}

impl<V> RbTree<V> {
    /// An empty tree.
    pub(crate) fn new() -> Self {
        RbTree { tree: Tree::new() }
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.tree.len()
    }

    /// Drops every entry.
    pub(crate) fn clear(&mut self) {
        self.tree.clear();
    }

    /// Slot index holding `key`, or `NIL`.
    fn find(&self, key: &Key) -> u32 {
        let mut cur = self.tree.root();
        let on = crate::profile::counting();
        while cur != NIL {
            self.tree.seen(on, cur);
            let n = self.tree.node(cur);
            cur = match key.cmp(&n.item.key) {
                Ordering::Less => n.left(),
                Ordering::Greater => n.right(),
                Ordering::Equal => return cur,
            };
        }
        NIL
    }

    /// The value under `key`.
    pub(crate) fn get(&self, key: &Key) -> Option<&V> {
        match self.find(key) {
            NIL => None,
            i => self.tree.node(i).item.value.as_ref(),
        }
    }

    /// Adds `value` under `key`; [`Errno::EEXIST`] for a present key,
    /// [`Errno::ENOMEM`] for a full arena, either with the tree unchanged.
    pub(crate) fn insert(&mut self, key: Key, value: V) -> Result<(), Errno> {
        // Find the attachment point first, so a duplicate or a full arena
        // leaves the tree untouched.
        let mut parent = NIL;
        let mut cur = self.tree.root();
        let mut right = false;
        let on = crate::profile::counting();
        while cur != NIL {
            self.tree.seen(on, cur);
            let n = self.tree.node(cur);
            parent = cur;
            right = match key.cmp(&n.item.key) {
                Ordering::Less => false,
                Ordering::Greater => true,
                Ordering::Equal => return Err(Errno::EEXIST),
            };
            cur = if right { n.right() } else { n.left() };
        }
        let item = Item {
            key,
            value: Some(value),
        };
        let z = self.tree.link(parent, right, item)?;
        // Invariant 2 on the path: ancestors only gain `key.last`, and once
        // one already covers it, all above it do too. Cheaper than the
        // core's recomputing propagate, which reads both children.
        let mut up = parent;
        while up != NIL && self.tree.node(up).aug < key.last {
            self.tree.set_aug(up, key.last);
            up = self.tree.node(up).parent();
        }
        self.tree.rebalance_insert(z);
        Ok(())
    }

    /// Takes out the entry under `key`.
    pub(crate) fn remove(&mut self, key: &Key) -> Option<V> {
        match self.find(key) {
            NIL => None,
            z => self.tree.erase(z).value,
        }
    }

    /// Hands `f` every entry overlapping `[first, last]`, in key order,
    /// until it breaks.
    pub(crate) fn visit_overlap<'a, F>(
        &'a self,
        first: u64,
        last: u64,
        f: &mut F,
    ) -> ControlFlow<()>
    where
        F: FnMut(Entry<'a, V>) -> ControlFlow<()>,
    {
        self.visit(self.tree.root(), first, last, f, crate::profile::counting())
    }

    /// In-order walk of `i`'s subtree, pruned by invariants 1 and 2.
    /// Recursion depth is the height, at most `2 log2(n + 1)`.
    fn visit<'a>(
        &'a self,
        i: u32,
        first: u64,
        last: u64,
        f: &mut impl FnMut(Entry<'a, V>) -> ControlFlow<()>,
        on: bool,
    ) -> ControlFlow<()> {
        if i == NIL {
            return ControlFlow::Continue(());
        }
        self.tree.seen(on, i);
        let n = self.tree.node(i);
        if n.aug < first {
            // Nothing below reaches the query.
            return ControlFlow::Continue(());
        }
        self.visit(n.left(), first, last, f, on)?;
        let key = n.item.key;
        if key.first > last {
            // This node and its right subtree all start past the query.
            return ControlFlow::Continue(());
        }
        if key.last >= first {
            if let Some(value) = &n.item.value {
                f(key.entry(value))?;
            }
        }
        self.visit(n.right(), first, last, f, on)
    }

    /// Nodes on the longest root-to-leaf path.
    pub(crate) fn height(&self) -> usize {
        self.tree.height()
    }

    /// The core's checks, plus invariant 1 and non-empty ranges.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let mut prev: Option<Key> = None;
        self.tree.validate(|i, item| {
            let key = item.key;
            if key.first > key.last {
                return Err(format!("node {i} has first > last: {key:?}"));
            }
            if let Some(p) = prev.replace(key) {
                if p >= key {
                    return Err(format!("keys out of order: {p:?} then {key:?}"));
                }
            }
            Ok(())
        })
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
        assert_eq!(t.tree.root(), NIL);
        for i in 0..10u64 {
            t.insert(Key::new(i, i, 1), 0u32).unwrap();
        }
        assert_eq!(t.tree.slots(), 11, "freed slots were not reused");
        t.validate().unwrap();
    }

    #[test]
    fn validate_catches_broken_augmentation() {
        let mut t = RbTree::new();
        for i in 0..8u64 {
            t.insert(Key::new(i, i, 0), 0u32).unwrap();
        }
        let root = t.tree.root();
        t.tree.set_aug(root, 3);
        assert!(t.validate().unwrap_err().contains("summary"));
    }
}

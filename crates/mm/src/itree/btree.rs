//! The augmented B+ tree interval tree ([`ItreeKind::BTree`](super::ItreeKind::BTree)).
//!
//! ## Nodes
//!
//! Entries live only in leaves; internal nodes route. Both kinds hold up
//! to [`CAP`] slots in fixed arrays, so a node is a few contiguous cache
//! lines and a query scans keys instead of chasing one pointer per entry.
//!
//! - [`Leaf`]: `len` entries, keys in `keys[..len]`, values in
//!   `vals[..len]`.
//! - [`Internal`]: `len` children (`child[..len]`, indices into the arena
//!   of the level below), and for each child slot the smallest key
//!   (`min_key`) and the largest `last` (`max_last`) in that child's
//!   subtree: the augmentation.
//!
//! Leaves and internal nodes have separate arenas with separate free
//! lists. Whether an index names a leaf or an internal node follows from
//! its level: the root is at level `height`, leaves at level 1.
//!
//! ## Invariants (kept by `insert` and `remove`; checked by `validate`)
//!
//! 1. Order: reading the leaves left to right yields keys in strictly
//!    ascending `(first, last, id)` order; a child's keys all precede the
//!    next child's.
//! 2. Shape: every leaf is at level 1 (all root-to-leaf paths have
//!    `height` nodes); `root == NIL` exactly when `height == 0` and
//!    `len == 0`.
//! 3. Fill: every node holds at most `CAP` slots; every non-root node at
//!    least [`MIN`]; a root leaf at least one entry; a root internal node
//!    at least two children. Splits make two nodes of at least `MIN`;
//!    removal refills a short node from a sibling that can spare a slot,
//!    and merges the two only when it cannot.
//! 4. Augmentation: `min_key[i]` and `max_last[i]` equal the smallest key
//!    and largest `last` of `child[i]`'s subtree. Every change refreshes
//!    the slots on its path, from the leaf up.
//! 5. Values: `vals[j].is_some()` exactly for `j < len`.
//! 6. Accounting: every arena slot is either reachable from the root
//!    exactly once or on its free list exactly once; reachable leaves hold
//!    `len` entries in total.

use std::ops::ControlFlow;

use super::{Entry, Key, NIL};
use crate::Errno;

/// Slots per node. 16 keys of 24 bytes are six cache lines: wide enough to
/// keep the tree three levels deep at 6000 entries, small enough that
/// shifting a node's arrays on insert stays cheap.
const CAP: usize = 16;
/// Fewest slots of a non-root node (invariant 3).
const MIN: usize = CAP / 2;

/// A leaf: up to `CAP` entries in key order.
#[derive(Debug, Clone)]
struct Leaf<V> {
    len: usize,
    keys: [Key; CAP],
    vals: [Option<V>; CAP],
}

// The counting rule of this tree for the profile recorder
// (`crate::profile`): a search reads the used keys of each node on its
// path (the scan reads them all) and, in a leaf, the value it hands out; a
// walk reads the used slots of every node it enters; an edit writes the
// slots it shifts or sets, from the first changed one to the end of the
// used part, and a split, a merge or a loan writes the used part of both
// nodes and their parent's slots. Each counted once per critical section
// by the lines it spans.
impl<V> Leaf<V> {
    /// Tell the recorder that keys `[from, to)` were read or written.
    #[inline(always)]
    fn profile_keys(&self, from: usize, to: usize, write: bool) {
        if crate::profile::counting() {
            crate::profile::touch(&self.len, write);
            crate::profile::touch_slice(&self.keys[from.min(CAP)..to.min(CAP)], write);
        }
    }

    /// Tell the recorder that values `[from, to)` were read or written.
    #[inline(always)]
    fn profile_vals(&self, from: usize, to: usize, write: bool) {
        if crate::profile::counting() {
            crate::profile::touch_slice(&self.vals[from.min(CAP)..to.min(CAP)], write);
        }
    }

    /// Keys and values `[from, len)` were written.
    #[inline(always)]
    fn profile_edit(&self, from: usize) {
        self.profile_keys(from, self.len.max(from + 1), true);
        self.profile_vals(from, self.len.max(from + 1), true);
    }

    fn new() -> Self {
        Leaf {
            len: 0,
            keys: [Key::default(); CAP],
            vals: std::array::from_fn(|_| None),
        }
    }

    /// Smallest key and largest `last` of this leaf (invariant 4).
    fn summary(&self) -> (Key, u64) {
        let keys = &self.keys[..self.len];
        let max = keys.iter().map(|k| k.last).max().unwrap_or(0);
        (keys.first().copied().unwrap_or_default(), max)
    }

    fn insert_at(&mut self, pos: usize, key: Key, value: V) {
        self.keys.copy_within(pos..self.len, pos + 1);
        // vals[len] is None (invariant 5); rotating brings it to `pos`.
        self.vals[pos..=self.len].rotate_right(1);
        self.keys[pos] = key;
        self.vals[pos] = Some(value);
        self.len += 1;
    }

    fn remove_at(&mut self, pos: usize) -> Option<V> {
        let value = self.vals[pos].take();
        self.keys.copy_within(pos + 1..self.len, pos);
        self.vals[pos..self.len].rotate_left(1);
        self.len -= 1;
        value
    }

    /// Moves entries `from..len` to the end of `dst`.
    fn move_tail(&mut self, from: usize, dst: &mut Leaf<V>) {
        for j in from..self.len {
            dst.keys[dst.len] = self.keys[j];
            dst.vals[dst.len] = self.vals[j].take();
            dst.len += 1;
        }
        self.len = from;
    }
}

/// An internal node: up to `CAP` children with their subtree summaries.
#[derive(Debug, Clone)]
struct Internal {
    len: usize,
    min_key: [Key; CAP],
    max_last: [u64; CAP],
    child: [u32; CAP],
}

impl Internal {
    /// Tell the recorder that slots `[from, to)` were read or written.
    #[inline(always)]
    fn profile(&self, from: usize, to: usize, write: bool) {
        if crate::profile::counting() {
            let (from, to) = (from.min(CAP), to.min(CAP));
            crate::profile::touch(&self.len, write);
            crate::profile::touch_slice(&self.min_key[from..to], write);
            crate::profile::touch_slice(&self.max_last[from..to], write);
            crate::profile::touch_slice(&self.child[from..to], write);
        }
    }

    fn new() -> Self {
        Internal {
            len: 0,
            min_key: [Key::default(); CAP],
            max_last: [0; CAP],
            child: [NIL; CAP],
        }
    }

    fn summary(&self) -> (Key, u64) {
        let max = self.max_last[..self.len].iter().copied().max().unwrap_or(0);
        (self.min_key[0], max)
    }

    /// The child whose key range would hold `key`: the last one whose
    /// smallest key is at most `key` (the first if none is).
    #[inline]
    fn route(&self, key: &Key) -> usize {
        count_le(&self.min_key[..self.len], key).saturating_sub(1)
    }

    fn insert_at(&mut self, pos: usize, child: u32, (min, max): (Key, u64)) {
        self.min_key.copy_within(pos..self.len, pos + 1);
        self.max_last.copy_within(pos..self.len, pos + 1);
        self.child.copy_within(pos..self.len, pos + 1);
        self.min_key[pos] = min;
        self.max_last[pos] = max;
        self.child[pos] = child;
        self.len += 1;
    }

    fn remove_at(&mut self, pos: usize) -> u32 {
        let child = self.child[pos];
        self.min_key.copy_within(pos + 1..self.len, pos);
        self.max_last.copy_within(pos + 1..self.len, pos);
        self.child.copy_within(pos + 1..self.len, pos);
        self.len -= 1;
        child
    }

    fn set_summary(&mut self, pos: usize, (min, max): (Key, u64)) {
        self.min_key[pos] = min;
        self.max_last[pos] = max;
    }

    /// Sets slot `pos`'s summary if it differs, and says whether it did.
    /// A summary that stays as it was is not stored again: the node's
    /// line then stays clean in every cache that holds it, so another
    /// CPU's next walk through it reads its own copy instead of fetching
    /// the line from this one (the kernel's augmented rbtree stops
    /// propagating where a subtree's value does not change, for the same
    /// reason).
    fn refresh_summary(&mut self, pos: usize, summary: (Key, u64)) -> bool {
        if (self.min_key[pos], self.max_last[pos]) == summary {
            return false;
        }
        self.set_summary(pos, summary);
        true
    }

    fn move_tail(&mut self, from: usize, dst: &mut Internal) {
        let n = self.len - from;
        let d = dst.len;
        dst.min_key[d..d + n].copy_from_slice(&self.min_key[from..self.len]);
        dst.max_last[d..d + n].copy_from_slice(&self.max_last[from..self.len]);
        dst.child[d..d + n].copy_from_slice(&self.child[from..self.len]);
        dst.len += n;
        self.len = from;
    }
}

/// How many of the sorted `keys` are at most `key`: its insertion point.
///
/// A scan that stops at the first greater key. Measured against a
/// branch-free count of all the keys and a branch-free binary search
/// (docs/RESULTS.md, "The interval tree's node search"): stopping early
/// reads half a node on average for the price of one mispredicted branch,
/// and beat both, by 15–25 % on `vmbench itree`'s churn and 9 % on one
/// `execl` worker, whose keys often differ only in the id.
#[inline]
fn count_le(keys: &[Key], key: &Key) -> usize {
    keys.iter().position(|k| k > key).unwrap_or(keys.len())
}

/// Where `key` is among the sorted `keys`: `Ok(index)` if present, else
/// `Err(insertion point)`, as `binary_search` would answer.
#[inline]
fn search(keys: &[Key], key: &Key) -> Result<usize, usize> {
    let le = count_le(keys, key);
    match le.checked_sub(1) {
        Some(i) if keys[i] == *key => Ok(i),
        _ => Err(le),
    }
}

/// Mutable references to two distinct elements of `v`.
fn two_mut<T>(v: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    debug_assert!(a < b);
    let (lo, hi) = v.split_at_mut(b);
    (&mut lo[a], &mut hi[0])
}

/// The tree: two arenas with free lists, the root and its level.
#[derive(Debug, Clone)]
pub(crate) struct BTree<V> {
    leaves: Vec<Leaf<V>>,
    free_leaves: Vec<u32>,
    internals: Vec<Internal>,
    free_internals: Vec<u32>,
    /// A leaf if `height == 1`, an internal node if above, `NIL` if 0.
    root: u32,
    height: usize,
    len: usize,
}

impl<V> BTree<V> {
    pub(crate) fn new() -> Self {
        BTree {
            leaves: Vec::new(),
            free_leaves: Vec::new(),
            internals: Vec::new(),
            free_internals: Vec::new(),
            root: NIL,
            height: 0,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn height(&self) -> usize {
        self.height
    }

    pub(crate) fn clear(&mut self) {
        *self = BTree::new();
    }

    /// Summary of node `i` at `level`, as its parent slot should hold it.
    fn summary(&self, i: u32, level: usize) -> (Key, u64) {
        if level == 1 {
            self.leaves[i as usize].summary()
        } else {
            self.internals[i as usize].summary()
        }
    }

    /// The largest `last` of node `i` at `level`, given that none exceeds
    /// `bound` (the node's largest before an entry left it). The scan
    /// stops at the first slot that reaches `bound`: where many entries
    /// share one range, as a library's i_mmap does, that is almost always
    /// one of the first.
    fn largest_last_up_to(&self, i: u32, level: usize, bound: u64) -> u64 {
        fn largest(lasts: impl Iterator<Item = u64>, bound: u64) -> u64 {
            let mut max = 0;
            for last in lasts {
                if last >= bound {
                    return last;
                }
                max = max.max(last);
            }
            max
        }
        if level == 1 {
            let leaf = &self.leaves[i as usize];
            largest(leaf.keys[..leaf.len].iter().map(|k| k.last), bound)
        } else {
            let node = &self.internals[i as usize];
            largest(node.max_last[..node.len].iter().copied(), bound)
        }
    }

    fn node_len(&self, i: u32, level: usize) -> usize {
        if level == 1 {
            self.leaves[i as usize].len
        } else {
            self.internals[i as usize].len
        }
    }

    // Allocation cannot fail: `insert` checks for room before changing
    // anything, so an index always fits below NIL.
    fn alloc_leaf(&mut self, leaf: Leaf<V>) -> u32 {
        if let Some(i) = self.free_leaves.pop() {
            self.leaves[i as usize] = leaf;
            return i;
        }
        self.leaves.push(leaf);
        u32::try_from(self.leaves.len() - 1).unwrap_or(NIL)
    }

    fn alloc_internal(&mut self, node: Internal) -> u32 {
        if let Some(i) = self.free_internals.pop() {
            self.internals[i as usize] = node;
            return i;
        }
        self.internals.push(node);
        u32::try_from(self.internals.len() - 1).unwrap_or(NIL)
    }

    fn free_leaf(&mut self, i: u32) {
        self.leaves[i as usize].len = 0;
        self.free_leaves.push(i);
    }

    fn free_internal(&mut self, i: u32) {
        self.internals[i as usize].len = 0;
        self.free_internals.push(i);
    }

    pub(crate) fn get(&self, key: &Key) -> Option<&V> {
        if self.root == NIL {
            return None;
        }
        let mut i = self.root;
        for _ in 1..self.height {
            let node = &self.internals[i as usize];
            node.profile(0, node.len, false);
            if *key < node.min_key[0] {
                return None;
            }
            i = node.child[node.route(key)];
        }
        let leaf = &self.leaves[i as usize];
        leaf.profile_keys(0, leaf.len, false);
        let pos = search(&leaf.keys[..leaf.len], key).ok()?;
        leaf.profile_vals(pos, pos + 1, false);
        leaf.vals[pos].as_ref()
    }

    pub(crate) fn insert(&mut self, key: Key, value: V) -> Result<(), Errno> {
        // Room for one new leaf and one new internal node per level (a
        // split all the way up plus a new root), checked up front so that
        // nothing changes when it is lacking.
        let limit = NIL as usize;
        let leaves_needed = 1usize.saturating_sub(self.free_leaves.len());
        let internals_needed = (self.height + 1).saturating_sub(self.free_internals.len());
        if self.leaves.len() + leaves_needed > limit
            || self.internals.len() + internals_needed > limit
        {
            return Err(Errno::ENOMEM);
        }
        if self.root == NIL {
            self.root = self.alloc_leaf(Leaf::new());
            self.height = 1;
        }
        let result = self.insert_rec(self.root, self.height, key, value);
        let split = match result {
            Ok(split) => split,
            Err(e) => {
                if self.len == 0 {
                    // Undo the empty root made above; cannot happen for
                    // EEXIST, kept so the tree is unchanged on any error.
                    self.clear();
                }
                return Err(e);
            }
        };
        if let Some(right) = split {
            let old = self.root;
            let mut root = Internal::new();
            root.insert_at(0, old, self.summary(old, self.height));
            root.insert_at(1, right, self.summary(right, self.height));
            self.root = self.alloc_internal(root);
            self.internals[self.root as usize].profile(0, 2, true);
            self.height += 1;
        }
        self.len += 1;
        Ok(())
    }

    /// Inserts below node `i` at `level`. Nothing changes before the leaf
    /// has accepted the key, so `EEXIST` leaves the tree as it was. Returns
    /// the new right sibling of `i` if `i` split.
    fn insert_rec(
        &mut self,
        i: u32,
        level: usize,
        key: Key,
        value: V,
    ) -> Result<Option<u32>, Errno> {
        if level == 1 {
            let leaf = &mut self.leaves[i as usize];
            leaf.profile_keys(0, leaf.len, false);
            let pos = match search(&leaf.keys[..leaf.len], &key) {
                Ok(_) => return Err(Errno::EEXIST),
                Err(pos) => pos,
            };
            if leaf.len < CAP {
                leaf.insert_at(pos, key, value);
                leaf.profile_edit(pos);
                return Ok(None);
            }
            let mut right = Leaf::new();
            leaf.move_tail(MIN, &mut right);
            if pos <= MIN {
                leaf.insert_at(pos, key, value);
            } else {
                right.insert_at(pos - MIN, key, value);
            }
            leaf.profile_edit(0);
            let right = self.alloc_leaf(right);
            self.leaves[right as usize].profile_edit(0);
            return Ok(Some(right));
        }
        let node = &self.internals[i as usize];
        node.profile(0, node.len, false);
        let slot = self.internals[i as usize].route(&key);
        let child = self.internals[i as usize].child[slot];
        let split = self.insert_rec(child, level - 1, key, value)?;
        let Some(new_child) = split else {
            let node = &mut self.internals[i as usize];
            let summary = (
                node.min_key[slot].min(key),
                node.max_last[slot].max(key.last),
            );
            if node.refresh_summary(slot, summary) {
                node.profile(slot, slot + 1, true);
            }
            return Ok(None);
        };
        let left_summary = self.summary(child, level - 1);
        let right_summary = self.summary(new_child, level - 1);
        let node = &mut self.internals[i as usize];
        node.set_summary(slot, left_summary);
        if node.len < CAP {
            node.insert_at(slot + 1, new_child, right_summary);
            node.profile(slot, node.len, true);
            return Ok(None);
        }
        let mut right = Internal::new();
        node.move_tail(MIN, &mut right);
        if slot < MIN {
            node.insert_at(slot + 1, new_child, right_summary);
        } else {
            right.insert_at(slot + 1 - MIN, new_child, right_summary);
        }
        node.profile(0, node.len, true);
        let right = self.alloc_internal(right);
        let r = &self.internals[right as usize];
        r.profile(0, r.len, true);
        Ok(Some(right))
    }

    pub(crate) fn remove(&mut self, key: &Key) -> Option<V> {
        if self.root == NIL {
            return None;
        }
        let value = self.remove_rec(self.root, self.height, key)?;
        self.len -= 1;
        // Invariant 3 for the root: collapse a one-child root, drop an
        // empty root leaf.
        if self.height > 1 && self.internals[self.root as usize].len == 1 {
            let old = self.root;
            self.root = self.internals[old as usize].child[0];
            self.free_internal(old);
            self.height -= 1;
        } else if self.height == 1 && self.leaves[self.root as usize].len == 0 {
            self.clear();
        }
        Some(value)
    }

    /// Removes `key` below node `i` at `level`, leaving `i` possibly one
    /// short of `MIN` for its parent to fix. Nothing changes if `key` is
    /// absent.
    fn remove_rec(&mut self, i: u32, level: usize, key: &Key) -> Option<V> {
        if level == 1 {
            let leaf = &mut self.leaves[i as usize];
            leaf.profile_keys(0, leaf.len, false);
            let pos = search(&leaf.keys[..leaf.len], key).ok()?;
            leaf.profile_edit(pos);
            return leaf.remove_at(pos);
        }
        let node = &self.internals[i as usize];
        node.profile(0, node.len, false);
        if *key < node.min_key[0] {
            return None;
        }
        let slot = node.route(key);
        let child = node.child[slot];
        let value = self.remove_rec(child, level - 1, key)?;
        if self.node_len(child, level - 1) < MIN {
            self.rebalance(i, slot, level - 1);
        } else {
            // Invariant 4: the child's smallest key is O(1) to read; its
            // largest `last` needs a scan only if the removed entry may
            // have been the one that set it.
            let stored_max = self.internals[i as usize].max_last[slot];
            let max = if key.last == stored_max {
                self.largest_last_up_to(child, level - 1, stored_max)
            } else {
                stored_max
            };
            let min = if level - 1 == 1 {
                self.leaves[child as usize].keys[0]
            } else {
                self.internals[child as usize].min_key[0]
            };
            let node = &mut self.internals[i as usize];
            if node.refresh_summary(slot, (min, max)) {
                node.profile(slot, slot + 1, true);
            }
        }
        Some(value)
    }

    /// Fixes invariant 3 for the short child at `slot` of internal node
    /// `p` (whose children are at `level`): moves one slot over from a
    /// sibling that can spare one, else merges the two.
    /// Refreshes the summaries of the slots it touches.
    fn rebalance(&mut self, p: u32, slot: usize, level: usize) {
        let parent = &self.internals[p as usize];
        // A non-root internal node has at least MIN >= 2 children and the
        // root at least 2, so a sibling exists.
        let left = if slot + 1 < parent.len {
            slot
        } else {
            slot - 1
        };
        let (l, r) = (parent.child[left], parent.child[left + 1]);
        let total = self.node_len(l, level) + self.node_len(r, level);
        let short_is_left = left == slot;
        // Merge only when the sibling has no slot to spare (it holds MIN,
        // the short child MIN - 1). Merging whenever the two fit in one
        // node would refill a node that just split to within one slot of
        // splitting again, and a tree whose inserts and removals meet in
        // one place (every exec's libc VMAs enter i_mmap at the end of
        // the same run of equal offsets) would split and merge that node,
        // rewriting both halves and their parent, on every other call.
        let merge = total < 2 * MIN;
        if level == 1 {
            let (a, b) = if l < r {
                two_mut(&mut self.leaves, l as usize, r as usize)
            } else {
                let (b, a) = two_mut(&mut self.leaves, r as usize, l as usize);
                (a, b)
            };
            if merge {
                b.move_tail(0, a);
            } else if short_is_left {
                // Right sibling lends its first entry.
                let k = b.keys[0];
                if let Some(v) = b.remove_at(0) {
                    a.insert_at(a.len, k, v);
                }
            } else {
                let last = a.len - 1;
                let k = a.keys[last];
                if let Some(v) = a.remove_at(last) {
                    b.insert_at(0, k, v);
                }
            }
        } else {
            let (a, b) = if l < r {
                two_mut(&mut self.internals, l as usize, r as usize)
            } else {
                let (b, a) = two_mut(&mut self.internals, r as usize, l as usize);
                (a, b)
            };
            if merge {
                b.move_tail(0, a);
            } else if short_is_left {
                let s = (b.min_key[0], b.max_last[0]);
                let c = b.remove_at(0);
                a.insert_at(a.len, c, s);
            } else {
                let last = a.len - 1;
                let s = (a.min_key[last], a.max_last[last]);
                let c = a.remove_at(last);
                b.insert_at(0, c, s);
            }
        }
        if crate::profile::counting() {
            if level == 1 {
                self.leaves[l as usize].profile_edit(0);
                self.leaves[r as usize].profile_edit(0);
            } else {
                let (a, b) = (&self.internals[l as usize], &self.internals[r as usize]);
                a.profile(0, a.len.max(1), true);
                b.profile(0, b.len.max(1), true);
            }
            let parent = &self.internals[p as usize];
            parent.profile(left, parent.len, true);
        }
        let left_summary = self.summary(l, level);
        if merge {
            if level == 1 {
                self.free_leaf(r);
            } else {
                self.free_internal(r);
            }
            let parent = &mut self.internals[p as usize];
            parent.remove_at(left + 1);
            parent.set_summary(left, left_summary);
        } else {
            let right_summary = self.summary(r, level);
            let parent = &mut self.internals[p as usize];
            parent.set_summary(left, left_summary);
            parent.set_summary(left + 1, right_summary);
        }
    }

    pub(crate) fn visit_overlap<'a>(
        &'a self,
        first: u64,
        last: u64,
        f: &mut impl FnMut(Entry<'a, V>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if self.root == NIL {
            return ControlFlow::Continue(());
        }
        self.visit(self.root, self.height, first, last, f)
    }

    /// Walks node `i` at `level` in key order, pruned by invariants 1
    /// and 4. Recursion depth is the height.
    fn visit<'a>(
        &'a self,
        i: u32,
        level: usize,
        first: u64,
        last: u64,
        f: &mut impl FnMut(Entry<'a, V>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if level == 1 {
            let leaf = &self.leaves[i as usize];
            leaf.profile_keys(0, leaf.len, false);
            leaf.profile_vals(0, leaf.len, false);
            for (key, value) in leaf.keys[..leaf.len].iter().zip(&leaf.vals) {
                if key.first > last {
                    // Every later entry starts later still.
                    break;
                }
                if key.last >= first {
                    if let Some(value) = value {
                        f(key.entry(value))?;
                    }
                }
            }
            return ControlFlow::Continue(());
        }
        let node = &self.internals[i as usize];
        node.profile(0, node.len, false);
        for j in 0..node.len {
            if node.min_key[j].first > last {
                break;
            }
            if node.max_last[j] >= first {
                self.visit(node.child[j], level - 1, first, last, f)?;
            }
        }
        ControlFlow::Continue(())
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if (self.root == NIL) != (self.height == 0) || (self.height == 0) != (self.len == 0) {
            return Err(format!(
                "root {}, height {}, len {} disagree",
                self.root, self.height, self.len
            ));
        }
        let mut seen = Seen {
            leaves: vec![false; self.leaves.len()],
            internals: vec![false; self.internals.len()],
            prev: None,
            count: 0,
        };
        if self.root != NIL {
            self.check(self.root, self.height, true, &mut seen)?;
        }
        if seen.count != self.len {
            return Err(format!(
                "{} entries in leaves, len {}",
                seen.count, self.len
            ));
        }
        check_free(&self.free_leaves, &mut seen.leaves, "leaf")?;
        check_free(&self.free_internals, &mut seen.internals, "internal")?;
        for &i in &self.free_leaves {
            if self.leaves[i as usize].vals.iter().any(Option::is_some) {
                return Err(format!("free leaf {i} holds a value"));
            }
        }
        Ok(())
    }

    /// Checks invariants 1, 3, 4 and 5 below node `i` at `level` and
    /// returns its summary.
    fn check(
        &self,
        i: u32,
        level: usize,
        is_root: bool,
        seen: &mut Seen,
    ) -> Result<(Key, u64), String> {
        let marks = if level == 1 {
            &mut seen.leaves
        } else {
            &mut seen.internals
        };
        let mark = marks
            .get_mut(i as usize)
            .ok_or_else(|| format!("level {level} index {i} outside the arena"))?;
        if std::mem::replace(mark, true) {
            return Err(format!("level {level} node {i} reached twice"));
        }
        let len = self.node_len(i, level);
        let min_len = match (is_root, level) {
            (false, _) => MIN,
            (true, 1) => 1,
            (true, _) => 2,
        };
        if len < min_len || len > CAP {
            return Err(format!("level {level} node {i} has {len} slots"));
        }
        if level == 1 {
            let leaf = &self.leaves[i as usize];
            for (j, value) in leaf.vals.iter().enumerate() {
                if value.is_some() != (j < len) {
                    return Err(format!(
                        "leaf {i} slot {j}: value presence wrong (len {len})"
                    ));
                }
            }
            for key in &leaf.keys[..len] {
                if key.first > key.last {
                    return Err(format!("leaf {i} has first > last: {key:?}"));
                }
                if let Some(prev) = seen.prev {
                    if prev >= *key {
                        return Err(format!("keys out of order: {prev:?} then {key:?}"));
                    }
                }
                seen.prev = Some(*key);
            }
            seen.count += len;
            return Ok(leaf.summary());
        }
        let node = &self.internals[i as usize];
        for j in 0..len {
            let got = self.check(node.child[j], level - 1, false, seen)?;
            let stored = (node.min_key[j], node.max_last[j]);
            if got != stored {
                return Err(format!(
                    "internal {i} slot {j}: stored summary {stored:?}, subtree has {got:?}"
                ));
            }
        }
        Ok(node.summary())
    }
}

/// What `validate` has met so far.
struct Seen {
    leaves: Vec<bool>,
    internals: Vec<bool>,
    prev: Option<Key>,
    count: usize,
}

/// Invariant 6 for one arena: free slots are unreachable and listed once,
/// and together with the reachable ones cover the arena.
fn check_free(free: &[u32], seen: &mut [bool], what: &str) -> Result<(), String> {
    for &i in free {
        let mark = seen
            .get_mut(i as usize)
            .ok_or_else(|| format!("free {what} {i} outside the arena"))?;
        if std::mem::replace(mark, true) {
            return Err(format!("free {what} {i} is reachable or listed twice"));
        }
    }
    match seen.iter().position(|&s| !s) {
        Some(i) => Err(format!("{what} {i} is neither reachable nor free")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(first: u64, last: u64, id: u64) -> Key {
        Key::new(first, last, id)
    }

    fn live_leaves<V>(t: &BTree<V>) -> usize {
        t.leaves.len() - t.free_leaves.len()
    }

    /// A node that just split does not merge back on the next removal:
    /// a short node borrows from a sibling that can spare an entry. (With
    /// inserts and removals meeting in one place, as every exec's libc
    /// VMAs do at the end of one run of equal ranges in i_mmap, merging
    /// back would rebuild a full node and split it again on every other
    /// call.)
    #[test]
    fn removals_where_a_node_just_split_borrow_instead_of_merging() {
        let mut t = BTree::new();
        // One more than a leaf holds: the root leaf splits into MIN and
        // MIN + 1 entries.
        for id in 0..=CAP as u64 {
            t.insert(k(40, 407, id), id).unwrap();
        }
        assert_eq!((t.height(), live_leaves(&t)), (2, 2));
        // The left leaf falls short; its sibling spares one.
        assert_eq!(t.remove(&k(40, 407, 0)), Some(0));
        t.validate().unwrap();
        assert_eq!(
            (t.height(), live_leaves(&t)),
            (2, 2),
            "the short leaf borrowed"
        );
        // Churn at the end of the run splits and merges nothing.
        for id in CAP as u64 + 1..CAP as u64 + 40 {
            t.insert(k(40, 407, id), id).unwrap();
            t.validate().unwrap();
            assert_eq!(t.remove(&k(40, 407, id)), Some(id));
            t.validate().unwrap();
            assert_eq!((t.height(), live_leaves(&t)), (2, 2), "at id {id}");
        }
        // With no entry to spare the two merge.
        assert_eq!(t.remove(&k(40, 407, 1)), Some(1));
        t.validate().unwrap();
        assert_eq!((t.height(), live_leaves(&t)), (1, 1), "merged");
    }

    #[test]
    fn grows_and_shrinks_through_every_height() {
        let mut t = BTree::new();
        let n = 5000u64;
        for i in 0..n {
            // Interleave the ends so splits happen on both sides.
            let x = if i % 2 == 0 { i } else { 2 * n - i };
            t.insert(k(x, x + 10, 0), x).unwrap();
        }
        t.validate().unwrap();
        assert_eq!(t.len(), n as usize);
        assert!(t.height() >= 3, "height {}", t.height());
        let mut removed = 0;
        for i in 0..n {
            let x = if i % 2 == 0 { i } else { 2 * n - i };
            assert_eq!(t.remove(&k(x, x + 10, 0)), Some(x));
            removed += 1;
            if removed % 97 == 0 {
                t.validate().unwrap();
            }
        }
        t.validate().unwrap();
        assert_eq!((t.len(), t.height(), t.root), (0, 0, NIL));
    }

    #[test]
    fn absent_keys_change_nothing() {
        let mut t = BTree::new();
        for i in 0..100u64 {
            t.insert(k(i, i, 1), ()).unwrap();
        }
        assert_eq!(t.remove(&k(0, 0, 0)), None); // below every key
        assert_eq!(t.remove(&k(50, 50, 2)), None);
        assert_eq!(t.insert(k(7, 7, 1), ()), Err(Errno::EEXIST));
        assert_eq!(t.len(), 100);
        t.validate().unwrap();
    }

    #[test]
    fn extreme_bounds_and_equal_ranges() {
        let mut t = BTree::new();
        for id in 0..40u64 {
            t.insert(k(0, u64::MAX, id), id).unwrap();
            t.insert(k(u64::MAX, u64::MAX, id), id).unwrap();
        }
        t.validate().unwrap();
        let mut n = 0;
        let _ = t.visit_overlap(u64::MAX, u64::MAX, &mut |_| {
            n += 1;
            ControlFlow::Continue(())
        });
        assert_eq!(n, 80);
        let mut ids = Vec::new();
        let _ = t.visit_overlap(0, 0, &mut |e| {
            ids.push(e.id);
            ControlFlow::Continue(())
        });
        assert_eq!(ids, (0..40).collect::<Vec<_>>());
    }

    #[test]
    fn validate_catches_broken_summary() {
        let mut t = BTree::new();
        for i in 0..100u64 {
            t.insert(k(i, i, 0), ()).unwrap();
        }
        let root = t.root as usize;
        t.internals[root].max_last[0] += 1;
        assert!(t.validate().unwrap_err().contains("summary"));
    }
}

//! The VMA index Linux used before the maple tree (up to 6.0).
//!
//! Three structures, each for the job it did in the old kernel:
//!
//! * an augmented red-black tree ([`rbtree`]) keyed by address, whose
//!   nodes record the largest free gap in their subtree
//!   (`rb_subtree_gap`), so lookups and free-area searches are `O(log n)`;
//! * a sorted doubly linked list through the same nodes (`vm_next`,
//!   `vm_prev`), so walks and neighbour lookups cost `O(1)` a step;
//! * a per-thread 4-entry cache of recent lookups ([`vmacache`]),
//!   invalidated wholesale by a per-index sequence number.
//!
//! None of it is safe to read during a change, which is why the old
//! kernel's page faults took `mmap_lock` for read: [`LegacyIndex`] offers
//! no lockless readers.

use std::sync::Arc;

use super::{Trusted, VmaIndex};
use crate::vma::Vma;

mod rbtree;
mod vmacache;

#[cfg(test)]
mod tests;

use rbtree::{VmaTree, NIL};

/// Augmented rbtree + sorted list + per-thread VMA cache: the VMA index
/// of Linux before 6.1. Its readers need `mmap_lock`: it offers no
/// [`fault_handle`](VmaIndex::fault_handle).
#[derive(Debug)]
pub struct LegacyIndex {
    tree: VmaTree,
    /// Identity for the VMA cache: unique per index for the process's
    /// life, so one index never serves another's cached nodes.
    id: u64,
    /// Bumped by every change (`mm->vmacache_seqnum`); a cache slot is
    /// valid only at the number it was filled at. Writers have `&mut
    /// self`, so readers never see it move under them.
    seq: u64,
}

impl LegacyIndex {
    /// An empty index.
    pub fn new() -> LegacyIndex {
        LegacyIndex {
            tree: VmaTree::new(),
            id: vmacache::new_id(),
            seq: 0,
        }
    }

    /// `find_vma`: the node of the first VMA ending above `addr`, or
    /// `NIL`. Tries this thread's cache first, then walks the tree and
    /// caches what it found, like the kernel (which cached the VMA above
    /// a hole too; a slot only hits for addresses inside its VMA).
    fn find_vma(&self, addr: u64) -> u32 {
        if let Some(i) = vmacache::lookup(self.id, self.seq, &self.tree, addr) {
            return i;
        }
        let i = self.tree.find_next(addr);
        if i != NIL {
            vmacache::update(self.id, self.seq, addr, i);
        }
        i
    }

    fn vma_at(&self, i: u32) -> Option<Arc<Vma>> {
        (i != NIL).then(|| Arc::clone(self.tree.vma(i)))
    }
}

impl Default for LegacyIndex {
    fn default() -> Self {
        LegacyIndex::new()
    }
}

impl VmaIndex for LegacyIndex {
    fn len(&self) -> usize {
        self.tree.len()
    }

    fn find(&self, addr: u64) -> Option<Arc<Vma>> {
        let i = self.find_vma(addr);
        if i == NIL || self.tree.start(i) > addr {
            return None;
        }
        self.vma_at(i)
    }

    fn find_next(&self, addr: u64) -> Option<Arc<Vma>> {
        self.vma_at(self.find_vma(addr))
    }

    /// `find_vma_prev`, then a step back on the list unless the VMA found
    /// contains `addr`: every VMA before the first one ending above
    /// `addr` starts below it.
    fn find_prev(&self, addr: u64) -> Option<Arc<Vma>> {
        let i = self.find_vma(addr);
        if i != NIL && self.tree.start(i) < addr {
            return self.vma_at(i);
        }
        self.vma_at(self.tree.prev(i))
    }

    fn overlapping(&self, start: u64, end: u64, out: &mut Vec<Arc<Vma>>) {
        if start >= end {
            return;
        }
        let mut i = self.find_vma(start);
        while i != NIL && self.tree.start(i) < end {
            out.push(Arc::clone(self.tree.vma(i)));
            i = self.tree.next(i);
        }
    }

    fn replace_trusted(&mut self, old: &[Arc<Vma>], new: &[Arc<Vma>], _: Trusted) {
        // Bump first: no slot filled before this change may survive it.
        self.seq += 1;
        for v in old {
            let i = self.tree.lookup_start(v.start());
            assert!(
                i != NIL && self.tree.vma(i).end() == v.end(),
                "replace: VMA [{:#x}, {:#x}) is not in the index",
                v.start(),
                v.end()
            );
            self.tree.remove(i);
        }
        for v in new {
            self.tree.insert(Arc::clone(v));
        }
    }

    fn gap_highest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        self.tree.gap_highest(low, high, len)
    }

    fn gap_lowest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        self.tree.gap_lowest(low, high, len)
    }

    fn for_each(&self, f: &mut dyn FnMut(&Arc<Vma>)) {
        let mut i = self.tree.head();
        while i != NIL {
            f(self.tree.vma(i));
            i = self.tree.next(i);
        }
    }

    /// Checks: red-black rules (black root and sentinel, no red node with
    /// a red child, equal black height on every path); parent links; BST
    /// order with the VMAs disjoint and each keyed by its own range; every
    /// node's subtree gap equal to the largest gap below a VMA in its
    /// subtree; the list equal to the in-order sequence, with consistent
    /// back links, head and tail; the length, and every arena slot either
    /// live or on the free list; and this thread's valid cache slots
    /// naming live nodes.
    fn validate(&self) -> Result<(), String> {
        self.tree.validate()?;
        for i in vmacache::valid_nodes(self.id, self.seq) {
            if !self.tree.is_live(i) {
                return Err(format!("VMA cache names node {i}, which is not live"));
            }
        }
        Ok(())
    }
}

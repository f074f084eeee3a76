//! The maple tree as a VMA index.

use std::sync::Arc;

use maple::MapleTree;

use super::{uncovered, Trusted, VmaIndex};
use crate::vma::Vma;

/// VMAs in a [`MapleTree`], written in RCU mode (copy-on-write, one
/// release store per change) so that faults may search it with no lock.
///
/// ```
/// use mm::index::{MapleIndex, VmaIndex};
/// let index = MapleIndex::new();
/// assert!(index.is_empty());
/// assert!(index.lockless().is_some());
/// ```
pub struct MapleIndex {
    tree: Arc<MapleTree<Arc<Vma>>>,
}

impl MapleIndex {
    /// An empty index.
    pub fn new() -> MapleIndex {
        MapleIndex {
            tree: Arc::new(MapleTree::new()),
        }
    }
}

impl Default for MapleIndex {
    fn default() -> Self {
        MapleIndex::new()
    }
}

impl VmaIndex for MapleIndex {
    fn name(&self) -> &'static str {
        "maple"
    }

    fn len(&self) -> usize {
        self.tree.len()
    }

    fn find(&self, addr: u64) -> Option<Arc<Vma>> {
        let guard = maple::pin();
        self.tree.load(addr, &guard).cloned()
    }

    fn find_next(&self, addr: u64) -> Option<Arc<Vma>> {
        let guard = maple::pin();
        self.tree
            .find(addr, u64::MAX, &guard)
            .map(|(_, _, v)| Arc::clone(v))
    }

    fn find_prev(&self, addr: u64) -> Option<Arc<Vma>> {
        let guard = maple::pin();
        self.tree
            .find_rev(addr.checked_sub(1)?, 0, &guard)
            .map(|(_, _, v)| Arc::clone(v))
    }

    fn overlapping(&self, start: u64, end: u64, out: &mut Vec<Arc<Vma>>) {
        if start >= end {
            return;
        }
        let guard = maple::pin();
        out.extend(
            self.tree
                .range(start..end, &guard)
                .map(|(_, _, v)| Arc::clone(v)),
        );
    }

    fn replace_trusted(&mut self, old: &[Arc<Vma>], new: &[Arc<Vma>], _: Trusted) {
        let mut w = self.tree.write();
        for v in new {
            w.store_range(v.start(), v.end() - 1, Arc::clone(v))
                .expect("the caller keeps replace's conditions");
        }
        for (s, e) in uncovered(old, new) {
            w.erase_range(s, e - 1)
                .expect("the caller keeps replace's conditions");
        }
    }

    fn gap_highest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        if len == 0 || high <= low {
            return None;
        }
        let guard = maple::pin();
        let a = self.tree.empty_area_rev(low, high - 1, len, &guard).ok()?;
        Some(a + len)
    }

    fn gap_lowest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        if len == 0 || high <= low {
            return None;
        }
        let guard = maple::pin();
        self.tree.empty_area(low, high - 1, len, &guard).ok()
    }

    fn for_each(&self, f: &mut dyn FnMut(&Arc<Vma>)) {
        let guard = maple::pin();
        for (_, _, v) in self.tree.iter(&guard) {
            f(v)
        }
    }

    fn lockless(&self) -> Option<Arc<MapleTree<Arc<Vma>>>> {
        Some(Arc::clone(&self.tree))
    }

    fn validate(&self) -> Result<(), String> {
        self.tree.validate()?;
        let guard = maple::pin();
        for (first, last, v) in self.tree.iter(&guard) {
            if first != v.start() || last + 1 != v.end() {
                return Err(format!(
                    "slot [{first:#x}, {last:#x}] holds VMA [{:#x}, {:#x})",
                    v.start(),
                    v.end()
                ));
            }
        }
        Ok(())
    }
}

//! The maple tree as a VMA index.

use std::sync::Arc;

use maple::{ArcRef, Direct, MapleTree};

use super::sharing::Sharing;
use super::{uncovered, FaultHandle, MapleVmas, Trusted, VmaIndex};
use crate::vma::Vma;

/// VMAs in a [`MapleTree`], which faults may search with no lock.
///
/// Writes are in place with no grace period while no other thread can be
/// searching it without the lock, and RCU writes from then on (see the
/// `sharing` module's docs: the kernel's two modes of the maple tree).
pub(crate) struct MapleIndex {
    tree: Arc<MapleVmas>,
    sharing: Arc<Sharing>,
}

impl MapleIndex {
    /// An empty index.
    pub fn new() -> MapleIndex {
        MapleIndex {
            tree: Arc::new(MapleTree::with_ownership(Direct)),
            sharing: Arc::new(Sharing::default()),
        }
    }

    /// `old` replaced by `new` in the tree: `new`'s ranges stored, then,
    /// with `clear`, what they leave of `old`'s erased. Without it, those
    /// parts keep their old entries for the caller's next write to store
    /// over (see [`VmaIndex::replace_before_overwrite`]).
    fn write(&mut self, old: &[Arc<Vma>], new: &[Arc<Vma>], clear: bool) {
        if old.is_empty() && self.tree.is_empty() {
            // A new address space (fork, or one built from a list): build
            // the tree in one pass, as the kernel duplicates a whole tree
            // at fork, when nothing else holds it yet.
            if let Some(tree) = Arc::get_mut(&mut self.tree) {
                let entries = new.iter().map(|v| (v.start()..=v.end() - 1, Arc::clone(v)));
                *tree = MapleTree::from_sorted_with(Direct, entries)
                    .expect("the caller keeps replace's conditions");
                profile(tree, 0, 0, true);
                return;
            }
        }
        let mut w = if self.sharing.writer_alone() {
            // SAFETY: `&mut self` means the caller holds `mmap_lock` for
            // write, and `writer_alone` says no other thread has been
            // admitted as a lockless reader (admission takes `mmap_lock`,
            // so none can be admitted during this write). No other thread
            // writes either: the tree is written only here, under `&mut
            // self`. This thread is
            // writing, not reading, and the index's own reads hand out
            // clones, never references into the tree.
            unsafe { self.tree.write_unshared() }
        } else {
            self.tree.write()
        };
        profile(&self.tree, 0, new.len() as u32, false);
        for v in new {
            w.store_range(v.start()..=v.end() - 1, Arc::clone(v))
                .expect("the caller keeps replace's conditions");
        }
        if !clear {
            // What `new` leaves of `old` keeps its entries, write-locked
            // VMAs that a lockless fault backs off from, until the
            // caller's next write stores over them.
            return;
        }
        if new.is_empty() && old.len() == self.tree.len() {
            // Everything goes (exit, exec): one write over the whole span
            // unlinks every subtree at once, as the kernel destroys the
            // tree at exit instead of erasing entry by entry.
            if let (Some(first), Some(last)) = (old.first(), old.last()) {
                profile(&self.tree, 0, 1, false);
                w.erase_range(first.start()..=last.end() - 1)
                    .expect("the caller keeps replace's conditions");
            }
            return;
        }
        uncovered(old, new, |s, e| {
            profile(&self.tree, 0, 1, false);
            w.erase_range(s..=e - 1)
                .expect("the caller keeps replace's conditions");
        });
    }

    /// The guard for a read through `&self`. Every write of the tree goes
    /// through `&mut self`, which the caller's `&self` borrow excludes for
    /// as long as the read's results live (they are cloned out before the
    /// borrow ends); the fault path's handle only reads. So reads under
    /// `mmap_lock` pin no grace period and pay no fence, as the kernel's
    /// reads under the lock take no `rcu_read_lock`.
    fn guard(&self) -> &maple::Guard {
        // SAFETY: as above: while the returned reference (tied to `&self`)
        // is in use, no write of the tree can run, so nothing it reads is
        // retired or freed.
        unsafe { maple::unprotected() }
    }
}

/// The counting rule of this index for the profile recorder
/// (`crate::profile`). The maple crate is not instrumented, so the count
/// comes from the tree's shape: its height (one path down) and its node
/// size, in lines. A search (`find`, one per VMA of an overlap, a gap
/// search) reads one node per level; a store or an erase reads the same
/// path and writes the leaf (a new copy in RCU mode) and the slot of its
/// parent that points at it, two nodes (one in a one-level tree); a
/// whole tree built at fork writes every node. Nodes are counted whole,
/// which overstates a search that reads only the pivots it compares.
/// Each node a search or a store reads is found through its parent's
/// slot, so it is one line reached through a pointer; the nodes a build
/// writes are new, allocated by the writer, and none is.
/// Computed only while a thread records, inside the recorder's own time
/// (`profile::counted`): a build's count walks the whole tree.
#[inline(always)]
fn profile(tree: &MapleVmas, searches: u32, stores: u32, built: bool) {
    crate::profile::counted(|| count(tree, searches, stores, built));
}

#[cold]
fn count(tree: &MapleVmas, searches: u32, stores: u32, built: bool) -> (u32, u32, u32) {
    let height = tree.height() as u32;
    let per_node = maple::NODE_SIZE.div_ceil(crate::profile::LINE) as u32;
    let read = (searches + stores) * height * per_node;
    let mut written = stores * height.min(2) * per_node;
    if built {
        written += tree.mem_stats().nodes as u32 * per_node;
    }
    (read, written, (searches + stores) * height)
}

impl Default for MapleIndex {
    fn default() -> Self {
        MapleIndex::new()
    }
}

impl VmaIndex for MapleIndex {
    fn len(&self) -> usize {
        self.tree.len()
    }

    fn find(&self, addr: u64) -> Option<Arc<Vma>> {
        let guard = self.guard();
        profile(&self.tree, 1, 0, false);
        self.tree.load(addr, guard).map(ArcRef::to_arc)
    }

    fn find_next(&self, addr: u64) -> Option<Arc<Vma>> {
        let guard = self.guard();
        profile(&self.tree, 1, 0, false);
        self.tree
            .find(addr, u64::MAX, guard)
            .map(|e| e.value().to_arc())
    }

    fn find_prev(&self, addr: u64) -> Option<Arc<Vma>> {
        let guard = self.guard();
        profile(&self.tree, 1, 0, false);
        self.tree
            .find_rev(addr.checked_sub(1)?, 0, guard)
            .map(|e| e.value().to_arc())
    }

    fn overlapping(&self, start: u64, end: u64, out: &mut Vec<Arc<Vma>>) {
        if start >= end {
            return;
        }
        // One `find` per VMA: the overlap is one or two VMAs nearly every
        // time, and a one-shot find keeps no path (an iterator would set
        // up two).
        let guard = self.guard();
        let mut from = start;
        profile(&self.tree, 1, 0, false);
        while let Some(e) = self.tree.find(from, end - 1, guard) {
            profile(&self.tree, 1, 0, false);
            out.push(e.value().to_arc());
            match e.last().checked_add(1) {
                Some(next) if next < end => from = next,
                _ => break,
            }
        }
    }

    fn replace_trusted(&mut self, old: &[Arc<Vma>], new: &[Arc<Vma>], _: Trusted) {
        self.write(old, new, true);
    }

    fn replace_before_overwrite(&mut self, old: &[Arc<Vma>], new: &[Arc<Vma>], _: Trusted) {
        self.write(old, new, false);
    }

    fn gap_highest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        if len == 0 || high <= low {
            return None;
        }
        let guard = self.guard();
        profile(&self.tree, 1, 0, false);
        let a = self.tree.empty_area_rev(low, high - 1, len, guard).ok()?;
        Some(a + len)
    }

    fn gap_lowest(&self, low: u64, high: u64, len: u64) -> Option<u64> {
        if len == 0 || high <= low {
            return None;
        }
        let guard = self.guard();
        profile(&self.tree, 1, 0, false);
        self.tree.empty_area(low, high - 1, len, guard).ok()
    }

    fn for_each(&self, f: &mut dyn FnMut(&Arc<Vma>)) {
        let guard = self.guard();
        for e in self.tree.iter(guard) {
            e.value().with_arc(&mut *f)
        }
    }

    fn fault_handle(&self, _: Trusted) -> Option<FaultHandle> {
        Some(FaultHandle {
            tree: Arc::clone(&self.tree),
            sharing: Arc::clone(&self.sharing),
        })
    }

    fn validate(&self) -> Result<(), String> {
        self.tree.validate().map_err(|e| e.to_string())?;
        let guard = maple::pin();
        for e in self.tree.iter(&guard) {
            let (first, last, v) = (e.first(), e.last(), e.value());
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

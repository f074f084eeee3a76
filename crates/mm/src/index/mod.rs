//! Where an address space keeps its VMAs: one trait, two structures.
//!
//! * [`MapleIndex`] — the maple tree (the default), which readers search
//!   without a lock, so the fault path can skip `mmap_lock`.
//! * `LegacyIndex` (with the `legacy-index` feature) — what the maple tree
//!   replaced in Linux 6.1: an augmented red-black tree that tracks the
//!   largest free gap per subtree, a sorted doubly linked list of the VMAs,
//!   and a per-thread 4-entry VMA cache invalidated by a sequence number.
//!   Its readers need `mmap_lock`.
//!
//! Every workload runs on either; [`IndexKind`] picks one at run time.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use maple::{Direct, MapleTree};

use crate::vma::Vma;
use crate::Errno;

#[cfg(feature = "legacy-index")]
mod legacy;
mod maple_index;
mod sharing;

pub(crate) use sharing::Reader;

#[cfg(feature = "legacy-index")]
pub(crate) use legacy::LegacyIndex;
pub(crate) use maple_index::MapleIndex;

/// An ordered set of non-overlapping VMAs, keyed by address range.
///
/// Writers (`&mut self`) are serialised by the address space's
/// `mmap_lock`; readers (`&self`) hold it for read. The fault path of an
/// index with a [`fault_handle`](VmaIndex::fault_handle) reads with no
/// `mmap_lock` at all.
pub trait VmaIndex: Send + Sync {
    /// Number of VMAs.
    fn len(&self) -> usize;

    /// Whether there are no VMAs.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The VMA containing `addr`.
    fn find(&self, addr: u64) -> Option<Arc<Vma>>;

    /// The first VMA that ends above `addr` (Linux's `find_vma`): the one
    /// containing `addr`, or else the next one up.
    fn find_next(&self, addr: u64) -> Option<Arc<Vma>>;

    /// The last VMA that starts below `addr`: the VMA containing `addr - 1`
    /// if there is one (so, unlike the kernel's `find_vma_prev`, the VMA
    /// containing `addr` itself when `addr` is not its start). Callers that
    /// want the neighbour ending at `addr` check `end() == addr`.
    fn find_prev(&self, addr: u64) -> Option<Arc<Vma>>;

    /// Append to `out` every VMA intersecting `[start, end)`, in address
    /// order.
    fn overlapping(&self, start: u64, end: u64, out: &mut Vec<Arc<Vma>>);

    /// Remove the VMAs `old` (each present, with exactly its range) and
    /// insert the VMAs `new` (non-overlapping, and overlapping nothing but
    /// ranges in `old`). Both slices are in address order. One call per
    /// change keeps lockless readers from seeing a range the change keeps
    /// mapped go missing.
    ///
    /// `EINVAL`, with the index unchanged, if a VMA of `old` is not in the
    /// index with exactly its range, or `new` is unordered, overlaps itself
    /// or overlaps a VMA that stays.
    fn replace(&mut self, old: &[Arc<Vma>], new: &[Arc<Vma>]) -> Result<(), Errno> {
        check_replace(&*self, old, new)?;
        self.replace_trusted(old, new, Trusted(()));
        Ok(())
    }

    /// [`replace`](VmaIndex::replace) without the argument check, for
    /// callers that keep its conditions themselves. Only this crate can
    /// make the [`Trusted`] token, so only `Mm` (whose edits keep the
    /// conditions by construction) skips the check; an implementation
    /// must still do the whole change.
    fn replace_trusted(&mut self, old: &[Arc<Vma>], new: &[Arc<Vma>], token: Trusted);

    /// [`replace_trusted`](VmaIndex::replace_trusted) as the first half of
    /// a mapping made over existing VMAs (`mmap_region`): the caller's
    /// next replace, under the same hold of `mmap_lock`, stores VMAs over
    /// every part of `old` that `new` leaves uncovered. An index may leave
    /// those parts' entries in place for that store to overwrite instead
    /// of clearing them first, as the maple tree's own conversion of the
    /// kernel did ("mmap: change zeroing of maple tree in
    /// `__vma_adjust()`", then `mmap_region` in Linux 6.12, "mm: avoid
    /// zeroing vma tree in mmap_region()"): one write instead of two, and
    /// a lockless reader never sees the range unmapped in between. Until
    /// that next replace the index may still return VMAs of `old` there
    /// (write-locked: a lockless fault that finds one backs off to
    /// `mmap_lock`), so the caller looks nothing up inside those parts in
    /// between, and `len` may count them. The default clears at once, as
    /// the kernel's `mmap_region` did with the red-black tree (a whole
    /// `do_munmap` before the new VMA was linked).
    #[doc(hidden)]
    fn replace_before_overwrite(&mut self, old: &[Arc<Vma>], new: &[Arc<Vma>], token: Trusted) {
        self.replace_trusted(old, new, token);
    }

    /// The end of the highest free area of at least `len` bytes within
    /// `[low, high)`: the highest `e` such that `[e - len, e)` is free and
    /// `low <= e - len`, `e <= high`. Guard gaps are the caller's business.
    /// `None` if there is none, and for `len == 0` or `high <= low`.
    fn gap_highest(&self, low: u64, high: u64, len: u64) -> Option<u64>;

    /// The start of the lowest free area of at least `len` bytes within
    /// `[low, high)`; `None` as for [`gap_highest`](VmaIndex::gap_highest).
    fn gap_lowest(&self, low: u64, high: u64, len: u64) -> Option<u64>;

    /// Call `f` on every VMA in address order.
    fn for_each(&self, f: &mut dyn FnMut(&Arc<Vma>));

    /// The address space's own lockless handle for its fault path, which
    /// keeps single-user writes in place until a second thread faults
    /// (crate only: the [`Trusted`] token).
    #[doc(hidden)]
    fn fault_handle(&self, _token: Trusted) -> Option<FaultHandle> {
        None
    }

    /// Check every internal invariant; the message names the first broken
    /// one.
    fn validate(&self) -> Result<(), String>;
}

/// The maple tree of an address space: each slot holds the VMA's own
/// `Arc` (no second allocation), so a lookup reaches the VMA through one
/// pointer and counts no reference.
pub type MapleVmas = MapleTree<Arc<Vma>, Direct>;

/// Proof that the caller of [`VmaIndex::replace_trusted`] is this crate.
#[derive(Debug)]
pub struct Trusted(pub(crate) ());

/// The fault path's lockless handle: the tree, and which threads read it
/// without `mmap_lock` (see [`VmaIndex::fault_handle`]).
#[doc(hidden)]
pub struct FaultHandle {
    pub(crate) tree: Arc<MapleVmas>,
    pub(crate) sharing: Arc<sharing::Sharing>,
}

/// Which structure keeps an address space's VMAs.
///
/// ```
/// use mm::IndexKind;
/// assert_eq!("maple".parse::<IndexKind>(), Ok(IndexKind::Maple));
/// assert_eq!(IndexKind::default(), IndexKind::Maple);
/// assert!("btree".parse::<IndexKind>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IndexKind {
    /// The maple tree (lockless readers).
    #[default]
    Maple,
    /// Augmented rbtree + linked list + per-thread VMA cache (the
    /// `legacy-index` feature).
    #[cfg(feature = "legacy-index")]
    Legacy,
}

impl IndexKind {
    /// Every kind built in.
    #[cfg(feature = "legacy-index")]
    pub const ALL: [IndexKind; 2] = [IndexKind::Maple, IndexKind::Legacy];
    /// Every kind built in (`Legacy` needs the `legacy-index` feature).
    #[cfg(not(feature = "legacy-index"))]
    pub const ALL: [IndexKind; 1] = [IndexKind::Maple];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Maple => "maple",
            #[cfg(feature = "legacy-index")]
            IndexKind::Legacy => "legacy",
        }
    }

    /// A new empty index of this kind.
    pub(crate) fn build(self) -> Box<dyn VmaIndex> {
        match self {
            IndexKind::Maple => Box::new(MapleIndex::new()),
            #[cfg(feature = "legacy-index")]
            IndexKind::Legacy => Box::new(LegacyIndex::new()),
        }
    }
}

impl fmt::Display for IndexKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IndexKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "maple" => Ok(IndexKind::Maple),
            #[cfg(feature = "legacy-index")]
            "legacy" => Ok(IndexKind::Legacy),
            #[cfg(not(feature = "legacy-index"))]
            "legacy" => Err(
                "the legacy VMA index is not built in: enable mm's `legacy-index` feature"
                    .to_string(),
            ),
            _ => Err(format!(
                "unknown VMA index {s:?} (expected maple or legacy)"
            )),
        }
    }
}

/// Calls `erase` with each part of `old`'s ranges that no range of `new`
/// covers, in address order, each as long as it can be (touching parts
/// are one range, so an index erases them with one write). Both slices are
/// in address order. A callback, not a list: this runs on every address
/// space change, and a list would cost an allocation each time.
pub(crate) fn uncovered(old: &[Arc<Vma>], new: &[Arc<Vma>], mut erase: impl FnMut(u64, u64)) {
    let mut pending: Option<(u64, u64)> = None;
    let mut push = |s: u64, e: u64| match &mut pending {
        Some((_, end)) if *end == s => *end = e,
        _ => {
            if let Some((ps, pe)) = pending.replace((s, e)) {
                erase(ps, pe);
            }
        }
    };
    for o in old {
        let mut pos = o.start();
        for n in new {
            if n.end() <= pos || n.start() >= o.end() {
                continue;
            }
            if n.start() > pos {
                push(pos, n.start());
            }
            pos = pos.max(n.end());
        }
        if pos < o.end() {
            push(pos, o.end());
        }
    }
    if let Some((s, e)) = pending {
        erase(s, e);
    }
}

/// The argument check every [`VmaIndex::replace`] runs before it changes
/// anything: `old` is present range for range, `new` is ordered and
/// disjoint and overlaps nothing outside `old`.
pub(crate) fn check_replace<I: VmaIndex + ?Sized>(
    index: &I,
    old: &[Arc<Vma>],
    new: &[Arc<Vma>],
) -> Result<(), Errno> {
    let ordered = |v: &[Arc<Vma>]| v.windows(2).all(|w| w[0].end() <= w[1].start());
    if !ordered(old) || !ordered(new) {
        return Err(Errno::EINVAL);
    }
    for v in old {
        match index.find(v.start()) {
            Some(x) if x.start() == v.start() && x.end() == v.end() => {}
            _ => return Err(Errno::EINVAL),
        }
    }
    let mut hit = Vec::new();
    for v in new {
        hit.clear();
        index.overlapping(v.start(), v.end(), &mut hit);
        let replaced = |x: &Arc<Vma>| {
            old.iter()
                .any(|o| o.start() == x.start() && o.end() == x.end())
        };
        if !hit.iter().all(replaced) {
            return Err(Errno::EINVAL);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::uncovered;
    use crate::flags::VmFlags;
    use crate::vma::Vma;
    use std::sync::Arc;

    fn vmas(ranges: &[(u64, u64)]) -> Vec<Arc<Vma>> {
        ranges
            .iter()
            .map(|&(s, e)| Arc::new(Vma::new(s, e, VmFlags::READ, s >> 12, None, None)))
            .collect()
    }

    fn parts(old: &[(u64, u64)], new: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        uncovered(&vmas(old), &vmas(new), |s, e| out.push((s, e)));
        out
    }

    #[test]
    fn uncovered_parts_are_maximal_and_in_order() {
        // Everything goes: touching VMAs are one range, apart ones two.
        assert_eq!(
            parts(&[(0x1000, 0x3000), (0x3000, 0x5000), (0x8000, 0x9000)], &[]),
            [(0x1000, 0x5000), (0x8000, 0x9000)]
        );
        // A new VMA in the middle leaves both ends.
        assert_eq!(
            parts(&[(0x1000, 0x9000)], &[(0x3000, 0x4000)]),
            [(0x1000, 0x3000), (0x4000, 0x9000)]
        );
        // The uncovered tail of one VMA joins the head of the next.
        assert_eq!(
            parts(
                &[(0x1000, 0x4000), (0x4000, 0x8000)],
                &[(0x1000, 0x2000), (0x6000, 0x8000)]
            ),
            [(0x2000, 0x6000)]
        );
        // Fully covered: nothing to erase.
        assert_eq!(parts(&[(0x1000, 0x4000)], &[(0x1000, 0x4000)]), []);
    }
}

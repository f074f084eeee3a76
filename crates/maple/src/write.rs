//! The write path: one algorithm for every store, insert and erase.
//!
//! A write of `[lo, hi] = p` (null `p`: make absent) replaces the run of
//! ranges that intersect `[lo, hi]` with at most three: the uncovered left
//! part of the first one, the new range, the uncovered right part of the
//! last one. The tree keeps one canonical form — every range is exactly one
//! slot, and no two absent ranges are adjacent — so an erase first widens
//! `[lo, hi]` over absent neighbours, even across leaves. That canonical
//! form is what lets gap search trust each leaf in isolation.
//!
//! Structurally, the leaves holding `lo` and `hi` (and any between them)
//! are replaced by 1–3 new leaves; that changes their parents, which are
//! replaced in turn, and so on up until a level where a single node is
//! replaced by a single node. Only there is anything published: one
//! release store of the new node into its (unchanged) parent's slot, or
//! into the root. Everything below it was built privately. Nodes that fall
//! below their fill minimum absorb a neighbour on the same level first, and
//! nodes that overflow are split; the rightmost node of each level is
//! exempt from the minimum so that ascending inserts fill nodes completely.
//!
//! # In-place writes
//!
//! The common case — a write whose ends lie in one leaf, which neither
//! overflows nor falls below its minimum — is done in place, with no
//! allocation and no buffer, by every writer: the slots the write covers
//! are replaced by at most three (the uncovered remnants and the new
//! range), and only the slots after them move (`Rebuild::splice_in_place`,
//! `NodePtr::splice_leaf`), as the kernel's node store and append do.
//! With `&mut` access (or [`MapleTree::write_unshared`]) no reader exists,
//! so the stores are plain and what the write replaced is freed at once;
//! such a writer also makes splits, merges and rebalancing in place, as a
//! textbook B-tree does: each node the rebuild would replace is rewritten
//! where it is (`NodePtr::overwrite`), so a split allocates only the node
//! it adds and a merge frees only the node it empties. A
//! shared writer (readers may be walking the leaf) uses one of two
//! protocols, chosen by what changes; copy-on-write remains for everything
//! that splits, merges or rebalances nodes, which changes a parent. For
//! each of the kernel's RCU-mode fast paths, why a concurrent reader sees
//! the old range or the new one and never a torn one:
//!
//! 1. **Slot store** — exactly one slot's pointer changes, no pivot and no
//!    length (a VMA replaced by one with the same bounds; an erase that
//!    leaves a range absent between two present ones). One release store
//!    of the pointer. Ranges are unchanged, and a pointer is one atomic
//!    word, so any reader reads the old value or the new one over the same
//!    range; the release pairs with the reader's acquire load of the slot,
//!    so the new value is fully built when seen.
//! 2. **Pivot move** — one pivot moves and the slots on both sides keep
//!    their pointers (a VMA growing or shrinking into the gap beside it:
//!    `brk`, `mremap` in place). A single pivot store is *not* enough here:
//!    a reader finds its slot with one read of the pivot and computes the
//!    entry's range with a second, and from the old slot and the new bound
//!    it would report an entry that does not contain the index it searched
//!    for. So the move is made under the leaf's sequence count (below).
//! 3. **Append** — new ranges written into the leaf's unused tail (an mmap
//!    above the last VMA of a leaf). Publishing the new length last is not
//!    enough: the old last slot's end becomes a stored pivot, so one pivot
//!    and the length change together, and a reader that reads the old
//!    length with the new pivot (or the reverse) reports a range that is
//!    in neither state. The append, too, is made under the sequence count.
//!
//! **The sequence count** (the metadata word of each leaf, see `node.rs`)
//! is what makes 2, 3 and every other leaf-local change safe: the writer
//! makes the count odd, then (after a release fence) stores the pivots,
//! slots and length, then makes the count even with a release store. A
//! reader takes the word as a stamp when it enters the leaf, before any
//! other read there, and keeps what it read only if, after an acquire
//! fence, the word is still the stamp and the stamp was even and not dead.
//! If any read saw a store of the change, the fences guarantee the second
//! load sees at least the odd count, so the reader walks again; if none
//! did, everything it read is the old leaf, whole. Readers therefore see
//! the whole old leaf or the whole new one, and otherwise retry; they still
//! write nothing shared. The same check replaces the dead-mark check for
//! copied leaves: marking a node dead also changes the word.
//!
//! The mutation check for this protocol: built with `--cfg
//! vmscale_mutant="unsequenced"`, shared in-place writes skip the sequence
//! count, and the shuttle model (`tests/shuttle_model.rs`) must fail.
//!
//! # Writes of one entry
//!
//! Most writes store one new range into the gap that holds it (an insert,
//! an mmap into free space), store over one entry's exact range, or make
//! one entry's exact range absent (an erase, an munmap of a whole VMA).
//! Each has a path of its own, tried before the general one, which
//! changes nothing when it declines:
//!
//! * **Into a gap** (`MapleTree::insert_in_leaf`): the gap's slot becomes
//!   the new range with what is left of the gap on each side: no right
//!   end to find, no value to release, no fill minimum to check, and the
//!   only gap taken out is that slot's, so the leaf's record changes only
//!   if it was that one.
//! * **An entry's value replaced** (`MapleTree::replace_in_leaf`): a
//!   store over exactly one entry's range (a VMA replaced by one with the
//!   same bounds, a new mapping stored over the entries an unmap left for
//!   it) changes the slot's pointer alone, fast path 1 above.
//! * **An entry made absent** (`MapleTree::erase_in_leaf`): the entry's
//!   slot and the absent ones beside it become one absent slot, whose gap
//!   contains all those it replaces.
//! * **Past the leaf** (`MapleTree::replace_leaves`): an insert that
//!   overflows its leaf, or an erase that leaves it below its minimum or
//!   joins a gap in the next leaf, rebuilds the leaf and (for an erase) a
//!   sibling under the same parent into one or two leaves, split as the
//!   general path splits. An exclusive writer does it in place as a
//!   textbook B-tree does: the old leaves are rewritten, only the leaf
//!   that appears or goes is allocated or freed, and the parent is edited
//!   where it is (`NodeRef::insert_child`, `remove_child`,
//!   `move_boundary`). A shared writer builds new leaves and a copy of the
//!   parent and publishes the copy with one release store, as the general
//!   path would; the mutation check `siblings_in_place` (the shared
//!   writer rebuilding in place) must fail the shuttle model.
//!
//! The general path makes the same writes, generally: it copies the
//! leaves' content into buffers, climbs both paths and keeps lists of
//! what it replaced (docs/RESULTS.md, "Issue 11: writes of one entry",
//! gives what that cost).
//!
//! # The kept path
//!
//! A write that changed one leaf in place leaves its walk behind
//! (`Scratch::kept`): the next write whose first index that leaf covers
//! starts there, with one pivot scan instead of a walk from the root, as
//! the kernel's writers reuse the state of their last walk. Runs of writes
//! in one neighbourhood are the usual case for an address space (mmap
//! next to the last mapping, brk, a VMA split and its neighbour) and for
//! ascending inserts. Every write clears it as it starts and only an
//! in-place change sets it again, so after a write that splits, merges,
//! rebalances or copies (a node on the path may be gone or rewritten) the
//! next write walks; so does the first write after the scratch space moves
//! to another tree (a dropped tree's goes to the thread's next one).
//!
//! Shared writers that copy mark replaced nodes dead after publishing and
//! hand them to the grace-period collector, one deferred call per node or
//! value (a one-pointer closure, which crossbeam stores without
//! allocating); a write that replaces nothing defers nothing.

use crate::error::Error;
use crate::node::{
    gap_size, value, Item, NodePtr, NodeRef, INTERNAL_MIN, INTERNAL_SLOTS, LEAF_MIN, LEAF_SLOTS,
    MAX_HEIGHT,
};
use crate::path::{Level, Path, PathStore};
use crate::sync::{defer, Guard, MutexGuard, Ordering};
use crate::{Boxed, MapleTree, Ownership};
use std::ops::RangeInclusive;
use std::ptr;

/// A writer's working memory, kept with the tree behind its writer lock
/// and reused by every write: two paths, two level buffers and the retire
/// lists, several kilobytes that would otherwise be initialised per write.
/// The paths are handed to each write emptied, for that write's nodes
/// alone (see [`PathStore`] and [`Scratch::work`]).
pub(crate) struct Scratch {
    pl: PathStore,
    pr: PathStore,
    bufs: [Buf; 2],
    retired: Retired,
    /// `pl` is still a path of the tree's current shape, to the leaf the
    /// last write changed, so the next write near it need not walk from
    /// the root (`Path::seek`).
    ///
    /// Invariant: set only by a write that changed nothing but one leaf's
    /// slots and pivots, in place (`Rebuild::splice_in_place`), and the
    /// gaps recorded above it; cleared at the start of every write, so a
    /// write that frees, replaces or rewrites a node (or stops half way,
    /// by panic) leaves it clear, and when the scratch space moves to
    /// another tree. Writers are serialised (`&mut`, the writer lock, or
    /// `write_unshared`'s contract), and only writers free nodes, so
    /// while it is set every node on `pl` is alive and in place.
    kept: bool,
}

impl Scratch {
    /// A scratch space for a tree's first write: the one a dropped tree
    /// left on this thread if there is one (an address space is made and
    /// dropped per exec; a fresh scratch is several kilobytes to allocate
    /// and initialise, and its lists grow again from nothing), else a new
    /// one.
    pub(crate) fn new() -> Box<Self> {
        #[cfg(not(vmscale_shuttle))]
        if let Some(spare) = SPARE.try_with(|s| s.take()).ok().flatten() {
            return spare;
        }
        Box::new(Scratch {
            pl: PathStore::new(),
            pr: PathStore::new(),
            bufs: [Buf::new(), Buf::new()],
            retired: Retired::default(),
            kept: false,
        })
    }

    /// The scratch space for one write over nodes alive for `'w`: `pr`
    /// empty, `pl` the kept path if there is one (`Work::kept`), else
    /// empty.
    fn work<'w>(&mut self) -> Work<'_, 'w> {
        let kept = std::mem::replace(&mut self.kept, false);
        let pl = if kept {
            // SAFETY: `kept` was set, so `pl` is a path of the tree's
            // current shape whose nodes are all alive (the invariant at
            // `Scratch::kept`); they stay so for `'w`, the write about to
            // run, which is the tree's one writer and frees nodes only at
            // its end.
            unsafe { self.pl.kept() }
        } else {
            self.pl.path()
        };
        Work {
            pl,
            pr: self.pr.path(),
            bufs: &mut self.bufs,
            retired: &mut self.retired,
            kept,
            keep: &mut self.kept,
        }
    }

    /// Keeps a dropped tree's scratch space for this thread's next tree.
    /// Between writes it holds no pointer that matters (see `Send`): its
    /// kept path belonged to the dropped tree and is forgotten.
    pub(crate) fn recycle(mut scratch: Box<Self>) {
        scratch.kept = false;
        #[cfg(not(vmscale_shuttle))]
        let _ = SPARE.try_with(|s| s.set(Some(scratch)));
        #[cfg(vmscale_shuttle)]
        drop(scratch);
    }
}

/// One write's view of the scratch space (see [`Scratch::work`]).
struct Work<'s, 'w> {
    pl: &'s mut Path<'w>,
    pr: &'s mut Path<'w>,
    bufs: &'s mut [Buf; 2],
    retired: &'s mut Retired,
    /// `pl` is the kept path of the last write (see `Scratch::kept`).
    kept: bool,
    /// Where to say that `pl` may be kept for the next write.
    keep: &'s mut bool,
}

#[cfg(not(vmscale_shuttle))]
thread_local! {
    /// One spare scratch space per thread (see [`Scratch::new`]).
    static SPARE: std::cell::Cell<Option<Box<Scratch>>> = const { std::cell::Cell::new(None) };
}

/// How a write may treat nodes that readers could be looking at.
#[derive(Clone, Copy)]
enum Access<'a> {
    /// `&mut` access: no reader exists; modify in place, free at once.
    Exclusive,
    /// Readers may be active: copy on write, free after a grace period.
    Shared(&'a Guard),
}

/// Largest content a level can hold while being rebuilt: a leaf's worth of
/// slots before the write, three new ranges, a leaf's worth after, or an
/// underfull node plus a neighbour.
const BUF: usize = 2 * LEAF_SLOTS + 8;

/// Slots of a run of nodes being rebuilt.
struct Buf {
    items: [Item; BUF],
    len: usize,
}

impl Buf {
    fn new() -> Self {
        Buf {
            items: [Item {
                end: 0,
                ptr: ptr::null_mut(),
                gap: 0,
            }; BUF],
            len: 0,
        }
    }

    fn push(&mut self, item: Item) {
        self.items[self.len] = item;
        self.len += 1;
    }

    fn as_slice(&self) -> &[Item] {
        &self.items[..self.len]
    }

    /// Appends every slot of `level.node`, or only `range` of them.
    #[inline]
    fn extend_from(&mut self, level: &Level<'_>, range: std::ops::Range<usize>) {
        let node = level.node;
        let (len, leaf) = (node.len(), node.is_leaf());
        // One bounds check for the run, and the length stored once: pushed
        // one by one, each item's place waits on the last one's length.
        let start = self.len;
        let to = &mut self.items[start..start + range.len()];
        for (item, i) in to.iter_mut().zip(range) {
            *item = Item {
                end: if i + 1 == len {
                    level.max
                } else {
                    node.pivot(i)
                },
                ptr: node.slot(i),
                gap: if leaf { 0 } else { node.gap(i) },
            };
        }
        self.len += to.len();
    }
}

/// Nodes and values a write unlinks. Kept in the tree's scratch space and
/// cleared after each write, so steady-state writes allocate nothing here.
#[derive(Default)]
struct Retired {
    /// Replaced nodes on the write's paths, each once (a write's paths
    /// hold a few nodes, so a linear check on entry is cheapest).
    run: Vec<NodePtr>,
    /// Nodes of whole subtrees the write covered.
    subtrees: Vec<NodePtr>,
    values: Vec<*mut u8>,
    /// Entries removed with the subtrees (for the entry count).
    entries: usize,
    /// Nodes of the write's paths that an exclusive write rewrote in place
    /// instead of replacing: listed in `run` like every node of the paths,
    /// but kept.
    kept: Vec<NodePtr>,
}

impl Retired {
    fn node(&mut self, node: NodePtr) {
        if !self.run.contains(&node) {
            self.run.push(node);
        }
    }

    /// Unlinks a node that may have been rewritten in place earlier in
    /// the same write (a child the root hands the tree to, found empty):
    /// it is no longer kept.
    fn dropped(&mut self, node: NodePtr) {
        self.kept.retain(|&k| k != node);
        self.node(node);
    }

    /// Unlinks a whole subtree: all its nodes and values.
    fn subtree(&mut self, node: NodeRef<'_>) {
        self.subtrees.push(node.ptr());
        for i in 0..node.len() {
            if node.is_leaf() {
                let p = node.slot(i);
                if !p.is_null() {
                    self.values.push(p);
                    self.entries += 1;
                }
            } else {
                self.subtree(node.child(i));
            }
        }
    }

    /// Takes the kept nodes off the run list; returns how many nodes are
    /// unlinked.
    fn settle(&mut self) -> usize {
        if !self.kept.is_empty() {
            let kept = &self.kept;
            self.run.retain(|n| !kept.contains(n));
            self.kept.clear();
        }
        self.run.len() + self.subtrees.len()
    }

    /// Frees every node and releases every value.
    ///
    /// # Safety
    /// Everything listed is unlinked and no reader can still reach it.
    /// The lists are left empty even if a value's `Drop` panics: the
    /// scratch space outlives the write, and a stale entry would be freed
    /// again by the next one.
    unsafe fn free<T, O: Ownership<T>>(&mut self) {
        for n in self.run.drain(..).chain(self.subtrees.drain(..)) {
            // SAFETY: per the contract.
            unsafe { n.free() };
        }
        // SAFETY: each entry is one unlinked reference; all are released
        // even if one's `Drop` panics.
        unsafe { value::release_all::<T, O, _>(self.values.drain(..)) };
    }
}

/// Sizes of the nodes `count` slots are split into. The rightmost node of
/// a level fills its left part completely (ascending inserts then leave
/// full nodes behind); elsewhere the split is even.
///
/// An overflowing node is split, never evened out with a sibling first
/// (as the kernel's `mas_push_data` does when the sibling has room). The
/// tree did that until 2026-11-26: it left nodes nearly full, so the next
/// insert into either overflowed again, and 48 % of the inserts of a
/// random 1000-entry build took the general path (18 % with a plain
/// split). Random inserts at 1e3 cost a third less for a fifth more node
/// memory (docs/RESULTS.md, "Splits without sharing").
fn split_sizes(count: usize, cap: usize, rightmost: bool) -> ([usize; 4], usize) {
    let k = count.div_ceil(cap);
    let mut sizes = [0; 4];
    if rightmost {
        sizes[..k].fill(cap);
        sizes[k - 1] = count - cap * (k - 1);
    } else {
        for (i, s) in sizes.iter_mut().enumerate().take(k) {
            *s = count / k + usize::from(i < count % k);
        }
    }
    (sizes, k)
}

/// A node's largest gap after a change, from its largest before
/// (`recorded`), the largest gap the change put in (`added`) and the
/// largest it took out (`removed`). The recorded one still stands unless
/// the change added a larger one or took it out; only then, when nothing
/// added matches it, is the node scanned (`scan`).
fn largest_gap_after(recorded: u64, added: u64, removed: u64, scan: impl FnOnce() -> u64) -> u64 {
    if added >= recorded {
        added
    } else if removed < recorded {
        recorded
    } else {
        scan()
    }
}

/// Replaces slots `l..=r` of `leaf` with `mid`, as `access` allows: in
/// place with plain stores for an exclusive writer; for a shared one, a
/// single pointer store when exactly one slot's pointer changes (fast path
/// 1), else under the leaf's sequence count (fast paths 2 and 3 and every
/// other leaf-local change).
#[inline(always)]
fn splice_leaf(access: Access<'_>, leaf: NodeRef<'_>, l: usize, r: usize, mid: &[Item]) {
    match access {
        // SAFETY: `Access::Exclusive` is only used where no reader can
        // exist (`&mut self`, or `write_unshared`'s contract).
        Access::Exclusive => unsafe { leaf.splice_leaf(l, r, mid) },
        Access::Shared(_) if l == r && mid.len() == 1 => leaf.store_slot(l, mid[0].ptr),
        #[cfg(not(vmscale_mutant = "unsequenced"))]
        Access::Shared(_) => leaf.splice_leaf_shared(l, r, mid),
        // The mutation the shuttle model must catch: the same stores with
        // no sequence step, so readers cannot tell a torn leaf from a
        // whole one.
        #[cfg(vmscale_mutant = "unsequenced")]
        // SAFETY: none: deliberately broken, never built but by the
        // mutation check (see `tests/shuttle_model.rs`).
        Access::Shared(_) => unsafe { leaf.splice_leaf(l, r, mid) },
    }
}

/// Releases the tree's reference `q` that a write unlinked: at once for
/// an exclusive writer, after a grace period for a shared one (a value
/// with nothing to release, inline or `'static`, defers nothing).
///
/// # Safety
/// `q` is a non-null reference of a tree with strategy `O` that the
/// write has made unreachable from the tree; for a shared writer, `T` is
/// `Send + Sync + 'static` (required by `MapleTree::write`).
unsafe fn release_unlinked<T, O: Ownership<T>>(access: Access<'_>, q: *mut u8) {
    match access {
        // SAFETY: per the contract; no reader exists.
        Access::Exclusive => unsafe { value::release::<T, O>(q) },
        Access::Shared(guard) if O::RELEASES => {
            // SAFETY: per the contract; released after the grace period
            // that `guard`, pinned by this write, holds back.
            unsafe { defer(guard, value::release_deferred::<T, O>, q) }
        }
        Access::Shared(_) => {}
    }
}

/// Records `gap` as the largest gap of the node at depth `d` in its
/// parent, and so on upwards while the recorded maximum changes.
fn fix_gaps(path: &Path<'_>, d: usize, mut gap: u64) {
    for e in (0..d).rev() {
        let level = *path.level(e);
        let old = level.node.gap(level.slot);
        if old == gap {
            break; // unchanged here, so unchanged above
        }
        level.node.set_gap(level.slot, gap);
        if e == 0 {
            break; // the root: nothing records its gap
        }
        // The node's largest gap before this change is what its
        // parent records for it (levels above the write are as the
        // last write left them), so it need not be scanned for.
        let parent = *path.level(e - 1);
        let before = parent.node.gap(parent.slot);
        let after = largest_gap_after(before, gap, old, || level.node.max_child_gap());
        if before == after {
            break;
        }
        gap = after;
    }
}

/// Largest gap of a node about to be built from `items` over `[min, ..]`.
fn items_gap(leaf: bool, items: &[Item], min: u64) -> u64 {
    if !leaf {
        return items.iter().map(|it| it.gap).max().unwrap_or(0);
    }
    let mut start = min;
    let mut best = 0;
    for it in items {
        if it.ptr.is_null() {
            best = best.max(gap_size(start, it.end));
        }
        start = it.end.wrapping_add(1);
    }
    best
}

/// The bounds of a write's range; an empty one (`first > last`, or a
/// range already iterated to its end) is refused, changing nothing.
fn bounds(range: &RangeInclusive<u64>) -> Result<(u64, u64), Error> {
    let (first, last) = (*range.start(), *range.end());
    if range.is_empty() {
        Err(Error::InvalidRange { first, last })
    } else {
        Ok((first, last))
    }
}

impl<T, O: Ownership<T>> MapleTree<T, O> {
    /// Runs an exclusive write with the tree's scratch space (no locking:
    /// `&mut self` already excludes every other access).
    fn exclusive<R>(&mut self, write: impl FnOnce(&Self, &mut Scratch) -> R) -> R {
        let mut scratch = self.scratch.get_mut().take().unwrap_or_else(Scratch::new);
        let result = write(self, &mut scratch);
        *self.scratch.get_mut() = Some(scratch);
        result
    }

    /// Every public write: checks the range, boxes the value, writes, and
    /// on refusal releases the box so nothing changes.
    fn apply(
        &self,
        scratch: &mut Scratch,
        range: RangeInclusive<u64>,
        value: Option<T>,
        access: Access<'_>,
        insert: bool,
    ) -> Result<(), Error> {
        // Refused before `value` is boxed: it is dropped here, unchanged.
        let (first, last) = bounds(&range)?;
        let p = value.map_or(ptr::null_mut(), value::into_raw::<T, O>);
        let result = self.write_range(scratch.work(), first, last, p, access, insert, false);
        if result.is_err() && !p.is_null() {
            // SAFETY: `p` was made above and never linked into the tree.
            unsafe { value::release::<T, O>(p) };
        }
        result
    }

    /// Erases the whole entry containing `index`.
    fn erase_entry(
        &self,
        scratch: &mut Scratch,
        index: u64,
        access: Access<'_>,
    ) -> Option<RangeInclusive<u64>> {
        // Find the entry with the write's left path, which the write then
        // starts from: the slot holding `index` holds the entry's first
        // index too.
        // SAFETY: every caller of `erase_entry` is the tree's one writer
        // (`&mut self`, the writer lock, or an unshared guard), and the
        // write uses no node after `Rebuild::finish` frees it.
        let root = unsafe { self.writer_root() }?;
        let work = scratch.work();
        work.pl.seek(root, index, work.kept);
        let leaf = work.pl.leaf();
        let (first, last) = (leaf.slot_start(), leaf.slot_end());
        if leaf.node.slot(leaf.slot).is_null() {
            return None;
        }
        // The own paths of an entry's erase (see "Writes of one entry"),
        // before the general path's setup.
        if let Some(kept) = self.erase_in_leaf(work.pl, access) {
            *work.keep = kept;
            return Some(first..=last);
        }
        if self.erase_with_sibling(work.pl, access).is_some() {
            return Some(first..=last);
        }
        // Cannot fail: an erase of a valid range is never refused.
        self.write_range(work, first, last, ptr::null_mut(), access, false, true)
            .ok()?;
        Some(first..=last)
    }

    /// The erase of the entry in `pl`'s leaf slot, made in that leaf when
    /// the absent ranges it joins lie there too and the leaf keeps its
    /// fill minimum; returns whether `pl` stays a path of the tree (see
    /// `Scratch::kept`), or `None`, having changed nothing, for the general
    /// path (which steps to a neighbouring leaf, or rebalances).
    ///
    /// See "Writes of one entry" in the module documentation.
    #[inline]
    fn erase_in_leaf(&self, pl: &Path<'_>, access: Access<'_>) -> Option<bool> {
        let l = *pl.leaf();
        let (s, len, depth) = (l.slot, l.node.len(), pl.depth());
        // The slots the new absent range covers: the entry's, and the
        // absent one on each side if there is one. At the leaf's edge
        // with a neighbouring leaf beyond, that leaf's slot may be absent
        // too: the general path looks.
        let first = if s > 0 {
            s - usize::from(l.node.slot(s - 1).is_null())
        } else if l.min == 0 {
            s
        } else {
            return None;
        };
        let last = if s + 1 < len {
            s + usize::from(l.node.slot(s + 1).is_null())
        } else if l.max == u64::MAX {
            s
        } else {
            return None;
        };
        let new_len = len - (last - first);
        let fits = if depth == 1 {
            // The root leaf emptied: the general path drops the root.
            new_len > 1
        } else {
            new_len >= LEAF_MIN || l.max == u64::MAX
        };
        if !fits {
            return None;
        }
        let lo = Level { slot: first, ..l }.slot_start();
        let hi = Level { slot: last, ..l }.slot_end();
        let q = l.node.slot(s);
        let absent = Item {
            end: hi,
            ptr: ptr::null_mut(),
            gap: 0,
        };
        splice_leaf(access, l.node, first, last, &[absent]);
        if depth > 1 {
            // The new gap contains every gap it replaces, so the leaf's
            // largest is the larger of it and the recorded one.
            let parent = *pl.level(depth - 2);
            let gap = gap_size(lo, hi);
            if gap > parent.node.gap(parent.slot) {
                fix_gaps(pl, depth - 1, gap);
            }
        }
        self.entries.store(self.len() - 1, Ordering::Relaxed);
        // SAFETY: `q` was the tree's reference in the slot just made
        // absent; no reader can reach it through the tree any more (an
        // exclusive writer has none; a shared one defers the release past
        // the grace period its guard holds back).
        unsafe { release_unlinked::<T, O>(access, q) };
        Some(true)
    }

    /// The erase of the entry in `pl`'s leaf slot when
    /// [`erase_in_leaf`](Self::erase_in_leaf) could not make it in the
    /// leaf alone: the leaf and a sibling under the same parent are
    /// rebuilt together ([`replace_leaves`](Self::replace_leaves)), into
    /// one leaf if their content fits, else evened out over two. The
    /// sibling is the leaf whose edge slot the new absent range may join,
    /// else the left one (as the general path's `Rebuild::absorb`
    /// prefers). `None`, having changed nothing, for any other shape (no
    /// such sibling, an absent range reaching past the pair, a parent that
    /// would fall below its minimum), which the general path then
    /// rebuilds.
    fn erase_with_sibling(&self, pl: &Path<'_>, access: Access<'_>) -> Option<()> {
        let depth = pl.depth();
        if depth < 2 {
            return None;
        }
        let l = *pl.leaf();
        let parent = *pl.level(depth - 2);
        let (s, len, plen) = (l.slot, l.node.len(), parent.node.len());
        let with_left = if s == 0 && l.min > 0 {
            true
        } else if s + 1 == len && l.max < u64::MAX {
            false
        } else {
            parent.slot > 0
        };
        if (with_left && parent.slot == 0) || (!with_left && parent.slot + 1 == plen) {
            return None;
        }
        let ls = parent.slot - usize::from(with_left);
        let (a, b) = (
            Level { slot: ls, ..parent },
            Level {
                slot: ls + 1,
                ..parent
            },
        );
        let (left, right) = (a.node.child(ls), b.node.child(ls + 1));
        let (min, mid, max) = (a.slot_start(), a.slot_end(), b.slot_end());
        let mut items = [Item {
            end: 0,
            ptr: ptr::null_mut(),
            gap: 0,
        }; 2 * LEAF_SLOTS];
        let llen = left.len();
        let count = llen + right.len();
        left.leaf_items(mid, 0..llen, &mut items);
        right.leaf_items(max, 0..count - llen, &mut items[llen..]);
        let idx = s + if with_left { llen } else { 0 };
        // An absent range beyond the pair may border the entry: the
        // general path looks there.
        if (idx == 0 && min > 0) || (idx + 1 == count && max < u64::MAX) {
            return None;
        }
        let q = items[idx].ptr;
        let first = idx - usize::from(idx > 0 && items[idx - 1].ptr.is_null());
        let last = idx + usize::from(idx + 1 < count && items[idx + 1].ptr.is_null());
        items[first] = Item {
            end: items[last].end,
            ptr: ptr::null_mut(),
            gap: 0,
        };
        items.copy_within(last + 1..count, first + 1);
        let count = count - (last - first);
        self.replace_leaves(pl, ls, 2, &items[..count], (min, max), access)?;
        self.entries.store(self.len() - 1, Ordering::Relaxed);
        // SAFETY: `q` was the tree's reference in the erased slot, now
        // unreachable from the tree.
        unsafe { release_unlinked::<T, O>(access, q) };
        Some(())
    }

    /// Puts `items`, the new content of the `old` leaves (one or two) in
    /// slots `ls..` of the parent of `pl`'s leaf, covering `[min, max]`,
    /// in place of them as one leaf or two (`split_sizes`, as the general
    /// path splits): a leaf split, merge or evening-out under one parent,
    /// the common structural changes of inserts and erases. An exclusive
    /// writer rewrites the old leaves in place, allocates or frees the one
    /// leaf that appears or goes, and edits the parent in place
    /// (`NodeRef::insert_child`, `remove_child`, `move_boundary`), as a
    /// textbook B-tree does. A shared writer builds new leaves and a copy
    /// of the parent, publishes the copy with one release store in the
    /// grandparent (or the root), and retires what it replaced, as the
    /// general path does for such a write. `None`, having changed
    /// nothing, when the parent would overflow or fall below its minimum,
    /// or a single leaf would fall below its own.
    fn replace_leaves(
        &self,
        pl: &Path<'_>,
        ls: usize,
        old: usize,
        items: &[Item],
        (min, max): (u64, u64),
        access: Access<'_>,
    ) -> Option<()> {
        let depth = pl.depth();
        let parent = *pl.level(depth - 2);
        let plen = parent.node.len();
        let rightmost = max == u64::MAX;
        let (sizes, k) = split_sizes(items.len(), LEAF_SLOTS, rightmost);
        debug_assert!(k <= 2 && old <= 2, "at most two leaves' content");
        let new_plen = plen - old + k;
        let parent_fits = new_plen <= INTERNAL_SLOTS
            && (new_plen >= plen
                || (new_plen >= 2
                    && (depth == 2 || new_plen >= INTERNAL_MIN || parent.max == u64::MAX)));
        // (One leaf for one is an in-leaf write, not this one's.)
        if !parent_fits || (k == 1 && (old == 1 || (items.len() < LEAF_MIN && !rightmost))) {
            return None;
        }
        let olds = [parent.node.child(ls), parent.node.child(ls + old - 1)];
        let mut up = [Item {
            end: 0,
            ptr: ptr::null_mut(),
            gap: 0,
        }; 2];
        let (mut start, mut first) = (0, min);
        for (j, &size) in sizes[..k].iter().enumerate() {
            let piece = &items[start..start + size];
            let end = piece[size - 1].end;
            up[j] = Item {
                end,
                ptr: ptr::null_mut(),
                gap: items_gap(true, piece, first),
            };
            first = end.wrapping_add(1);
            start += size;
        }
        let (a, b) = items.split_at(sizes[0]);
        // The mutation the shuttle model must catch: a shared writer that
        // rebuilds the leaves and the parent in place, as only an
        // exclusive one may (see `tests/shuttle_model.rs`).
        #[cfg(vmscale_mutant = "siblings_in_place")]
        let access = Access::Exclusive;
        let gap = match access {
            Access::Exclusive => {
                // `Access::Exclusive` is only used where no reader can
                // exist (`&mut self`, or `write_unshared`'s contract), and
                // `items` was copied out of the old leaves before they are
                // rewritten.
                match (old, k) {
                    (1, 2) => {
                        let new = NodePtr::new(true, b);
                        // SAFETY: exclusive (above); the parent has room
                        // (`parent_fits`).
                        unsafe {
                            olds[0].overwrite(a);
                            parent
                                .node
                                .insert_child(ls, up[0].end, up[0].gap, new, up[1].gap);
                        }
                    }
                    // SAFETY: exclusive (above); the right leaf is unlinked
                    // (`remove_child`) before it is freed, after its last
                    // use (its items were copied).
                    (2, 1) => unsafe {
                        olds[0].overwrite(a);
                        parent.node.remove_child(ls + 1, up[0].gap);
                        olds[1].ptr().free();
                    },
                    // SAFETY: exclusive (above); both leaves stay linked
                    // (and there are two: `(1, 1)` returned above).
                    _ => unsafe {
                        olds[0].overwrite(a);
                        olds[1].overwrite(b);
                        parent
                            .node
                            .move_boundary(ls, up[0].end, up[0].gap, up[1].gap);
                    },
                }
                (depth > 2).then(|| parent.node.max_child_gap())
            }
            Access::Shared(guard) => {
                up[0].ptr = NodePtr::new(true, a).raw();
                if k == 2 {
                    up[1].ptr = NodePtr::new(true, b).raw();
                }
                let mut content = Buf::new();
                content.extend_from(&parent, 0..ls);
                up[..k].iter().for_each(|&it| content.push(it));
                content.extend_from(&parent, ls + old..plen);
                let content = content.as_slice();
                let copy = NodePtr::new(false, content);
                if depth == 2 {
                    self.root.store(copy.raw(), Ordering::Release);
                } else {
                    let g = *pl.level(depth - 3);
                    g.node.publish_child(g.slot, copy);
                }
                // Marked after publishing, before the grace period
                // starts: a reader that reaches a replaced node from now
                // on restarts.
                // (With one old leaf, `olds` holds it twice.)
                let replaced = [olds[0].ptr(), olds[1].ptr(), parent.node.ptr()];
                let replaced = &replaced[2 - old..];
                for &n in replaced {
                    // SAFETY: a node this write unlinked: not yet freed,
                    // and freed only after the grace period that `guard`,
                    // pinned by this write, holds back.
                    unsafe { n.get() }.mark_dead();
                    // SAFETY: unlinked and marked dead: freed after a
                    // grace period, when no reader holds it.
                    unsafe { defer(guard, NodePtr::free_raw, n.into_raw()) };
                }
                (depth > 2).then(|| content.iter().map(|it| it.gap).max().unwrap_or(0))
            }
        };
        let nodes = self.nodes.load(Ordering::Relaxed) + k - old;
        self.nodes.store(nodes, Ordering::Relaxed);
        if let Some(gap) = gap {
            fix_gaps(pl, depth - 2, gap);
        }
        Some(())
    }

    /// A store of `[first, last] = p` (present) into the absent range that
    /// `pl`'s leaf slot holds (the caller checked that it covers the whole
    /// range), made in that leaf if it has room, else by splitting the
    /// leaf in two under its parent (`split_leaf_for`).
    /// Returns whether `pl` stays a path of the tree for the next write
    /// (see `Scratch::kept`), or `None`, having changed nothing, for the
    /// general path.
    ///
    /// See "Writes of one entry" in the module documentation.
    #[inline]
    fn insert_in_leaf(
        &self,
        pl: &Path<'_>,
        first: u64,
        last: u64,
        p: *mut u8,
        access: Access<'_>,
    ) -> Option<bool> {
        let l = *pl.leaf();
        let (start, end) = (l.slot_start(), l.slot_end());
        let (left, right) = (start < first, end > last);
        let added = usize::from(left) + usize::from(right);
        let absent = |end| Item {
            end,
            ptr: ptr::null_mut(),
            gap: 0,
        };
        let new = Item {
            end: last,
            ptr: p,
            gap: 0,
        };
        let items = if left {
            [absent(first - 1), new, absent(end)]
        } else {
            [new, absent(end), absent(end)]
        };
        let mid = &items[..1 + added];
        let len = l.node.len();
        let depth = pl.depth();
        if len + added > LEAF_SLOTS {
            self.split_leaf_for(pl, mid, access)?;
            self.entries.store(self.len() + 1, Ordering::Relaxed);
            return Some(false);
        }
        splice_leaf(access, l.node, l.slot, l.slot, mid);
        if depth > 1 {
            // The covered gap is the only one taken out: unless it was the
            // leaf's largest, the leaf's record stands (what the insert
            // leaves of it is smaller still).
            let parent = *pl.level(depth - 2);
            let recorded = parent.node.gap(parent.slot);
            let removed = gap_size(start, end);
            if removed >= recorded {
                let kept_left = if left { gap_size(start, first - 1) } else { 0 };
                let kept_right = if right { gap_size(last + 1, end) } else { 0 };
                let gap = largest_gap_after(recorded, kept_left.max(kept_right), removed, || {
                    l.node.leaf_gap(l.min, l.max)
                });
                fix_gaps(pl, depth - 1, gap);
            }
        }
        self.entries.store(self.len() + 1, Ordering::Relaxed);
        // Only `pl`'s leaf changed, in its slots and pivots.
        Some(true)
    }

    /// A store of `p` (present) over exactly the range of the entry in
    /// `pl`'s leaf slot: only the slot's pointer changes (fast path 1),
    /// so no pivot, length or gap moves, and `pl` stays a path of the tree.
    ///
    /// See "Writes of one entry" in the module documentation.
    #[inline]
    fn replace_in_leaf(&self, pl: &Path<'_>, p: *mut u8, access: Access<'_>) {
        let l = *pl.leaf();
        let q = l.node.slot(l.slot);
        let new = Item {
            end: l.slot_end(),
            ptr: p,
            gap: 0,
        };
        splice_leaf(access, l.node, l.slot, l.slot, &[new]);
        // SAFETY: `q` was the tree's reference in the slot just stored
        // over; no reader can reach it through the tree any more (an
        // exclusive writer has none; a shared one defers the release past
        // the grace period its guard holds back).
        unsafe { release_unlinked::<T, O>(access, q) };
    }

    /// Replaces `pl`'s leaf slot by `mid` when the leaf has no room for
    /// them: the leaf is split in two under its parent
    /// ([`replace_leaves`](Self::replace_leaves)). `None`, having changed
    /// nothing, for a root leaf or a full parent, which the general path
    /// then rebuilds.
    fn split_leaf_for(&self, pl: &Path<'_>, mid: &[Item], access: Access<'_>) -> Option<()> {
        if pl.depth() < 2 {
            return None;
        }
        let l = *pl.leaf();
        let len = l.node.len();
        let mut items = [Item {
            end: 0,
            ptr: ptr::null_mut(),
            gap: 0,
        }; LEAF_SLOTS + 2];
        let count = len - 1 + mid.len();
        l.node.leaf_items(l.max, 0..l.slot, &mut items);
        items[l.slot..l.slot + mid.len()].copy_from_slice(mid);
        l.node
            .leaf_items(l.max, l.slot + 1..len, &mut items[l.slot + mid.len()..]);
        let ls = pl.level(pl.depth() - 2).slot;
        self.replace_leaves(pl, ls, 1, &items[..count], (l.min, l.max), access)
    }

    /// Writes `[first, last] = p` (null: absent). The caller is the tree's
    /// one writer, has checked `first <= last` and, for
    /// `Access::Exclusive`, holds `&mut self` (or an unshared guard);
    /// `walked`: the left path already leads to `first` in the current
    /// tree (else it is walked here), and the caller has tried the own
    /// paths of an entry's erase (`erase_entry`).
    #[allow(clippy::too_many_arguments)]
    fn write_range<'w>(
        &'w self,
        work: Work<'_, 'w>,
        first: u64,
        last: u64,
        p: *mut u8,
        access: Access<'_>,
        insert: bool,
        walked: bool,
    ) -> Result<(), Error> {
        // SAFETY: the caller is the tree's one writer (see above), and the
        // write uses no node after `Rebuild::finish` frees it.
        let Some(root) = (unsafe { self.writer_root() }) else {
            if p.is_null() {
                return Ok(()); // erasing from an empty tree
            }
            let mut buf = Buf::new();
            if first > 0 {
                buf.push(Item {
                    end: first - 1,
                    ptr: ptr::null_mut(),
                    gap: 0,
                });
            }
            buf.push(Item {
                end: last,
                ptr: p,
                gap: 0,
            });
            if last < u64::MAX {
                buf.push(Item {
                    end: u64::MAX,
                    ptr: ptr::null_mut(),
                    gap: 0,
                });
            }
            let leaf = NodePtr::new(true, buf.as_slice());
            self.root.store(leaf.raw(), Ordering::Release);
            self.nodes.store(1, Ordering::Relaxed);
            self.entries.store(1, Ordering::Relaxed);
            return Ok(());
        };
        let Work {
            pl,
            pr,
            bufs,
            retired,
            kept,
            keep,
        } = work;
        if !walked {
            pl.seek(root, first, kept);
        }
        // The writes of one entry — a new range stored into the gap that
        // holds it or over one entry's exact range, an entry's exact range
        // made absent — are most writes, and have paths of their own;
        // what they cannot make falls through to the general path,
        // unchanged.
        let l = *pl.leaf();
        let q = l.node.slot(l.slot);
        if q.is_null() && l.slot_end() >= last {
            if !p.is_null() {
                if let Some(kept) = self.insert_in_leaf(pl, first, last, p, access) {
                    *keep = kept;
                    return Ok(());
                }
            }
        } else if insert {
            return Err(Error::Exists);
        } else if l.slot_start() == first && l.slot_end() == last {
            // Exactly one entry's range, and a present one: an absent
            // slot reaching to `last` took the first branch.
            if !p.is_null() {
                self.replace_in_leaf(pl, p, access);
                *keep = true;
                return Ok(());
            }
            if !walked {
                if let Some(kept) = self.erase_in_leaf(pl, access) {
                    *keep = kept;
                    return Ok(());
                }
                if self.erase_with_sibling(pl, access).is_some() {
                    return Ok(());
                }
            }
        }
        // Both ends in one leaf (the common case): share the walk. A store
        // there needs only `pr`'s leaf unless it leaves the in-place path,
        // so the levels above it, which are `pl`'s, are copied only then;
        // an erase may step `pr` to the next leaf, which takes them all.
        let right_leaf_only = last <= pl.leaf().max && !p.is_null();
        if right_leaf_only {
            let mut leaf = *pl.leaf();
            leaf.slot = leaf.node.find_slot_from(leaf.slot, last);
            pr.leaf_only(leaf);
        } else if last <= pl.leaf().max {
            pr.copy_from(pl);
            let leaf = pr.leaf_mut();
            leaf.slot = leaf.node.find_slot_from(leaf.slot, last);
        } else {
            pr.rewalk(root, last);
        }
        let (mut lo, mut hi) = (first, last);
        if p.is_null() {
            // Widen over absent neighbours to keep absent ranges maximal;
            // a neighbour is the adjacent slot, or one step to the
            // adjacent leaf, never a walk from the root.
            let l = *pl.leaf();
            if l.node.slot(l.slot).is_null() {
                if l.slot_end() >= last {
                    return Ok(()); // already absent: nothing to do
                }
                lo = l.slot_start();
            } else if l.slot_start() == first && first > 0 {
                if l.slot > 0 {
                    if l.node.slot(l.slot - 1).is_null() {
                        pl.leaf_mut().slot -= 1;
                        lo = pl.leaf().slot_start();
                    }
                } else if pl.prev_leaf() {
                    // Step back over the leaf boundary, and return (to slot
                    // 0 of this leaf) if the range there is present.
                    if pl.leaf().node.slot(pl.leaf().slot).is_null() {
                        lo = pl.leaf().slot_start();
                    } else {
                        pl.next_leaf();
                    }
                }
            }
            let r = *pr.leaf();
            if r.node.slot(r.slot).is_null() {
                hi = r.slot_end();
            } else if r.slot_end() == last && last < u64::MAX {
                if r.slot + 1 < r.node.len() {
                    if r.node.slot(r.slot + 1).is_null() {
                        pr.leaf_mut().slot += 1;
                        hi = pr.leaf().slot_end();
                    }
                } else if pr.next_leaf() {
                    // As on the left: over the boundary, back if present
                    // (to the last slot of this leaf, where `pr` was).
                    if pr.leaf().node.slot(pr.leaf().slot).is_null() {
                        hi = pr.leaf().slot_end();
                    } else {
                        pr.prev_leaf();
                    }
                }
            }
        }
        let mut w = Rebuild {
            pl,
            pr,
            retired,
            created: 0,
            access,
        };
        let depth = w.pl.depth();
        if let Some((added, removed)) = w.splice_in_place::<T, O>(lo, hi, p) {
            let entries = self.len() + added - removed;
            self.entries.store(entries, Ordering::Relaxed);
            w.finish(self);
            // Only `pl`'s leaf changed, in its slots and pivots: the path
            // stays valid for the next write.
            *keep = true;
            return Ok(());
        }
        if right_leaf_only {
            // `pl` has not moved (only an erase moves it), so its levels
            // above the leaf are `pr`'s.
            let leaf = *w.pr.leaf();
            w.pr.copy_from(w.pl);
            *w.pr.leaf_mut() = leaf;
        }
        w.unlink_between();
        bufs[0].len = 0;
        let (added, removed) = w.leaf_content::<T, O>(&mut bufs[0], lo, hi, p);
        let mut orig = [(root.ptr(), root.ptr()); MAX_HEIGHT];
        for (d, o) in orig.iter_mut().enumerate().take(depth) {
            *o = (w.pl.level(d).node.ptr(), w.pr.level(d).node.ptr());
        }
        let top = w.climb(self, bufs);
        // Nodes of the original paths below the level that was published
        // were all replaced.
        for &(l, r) in &orig[top + 1..depth] {
            w.retired.node(l);
            w.retired.node(r);
        }
        let entries = self.len() + added - removed - w.retired.entries;
        self.entries.store(entries, Ordering::Relaxed);
        w.finish(self);
        Ok(())
    }
}

/// What a write puts in place of the slots it covers (see
/// `Rebuild::middle`).
struct Middle {
    items: [Item; 3],
    len: usize,
    /// The first covered slot keeps its part left of the write.
    left_keep: bool,
    /// The last covered slot keeps its part right of the write.
    right_keep: bool,
}

impl Middle {
    #[inline]
    fn items(&self) -> &[Item] {
        &self.items[..self.len]
    }
}

/// One write's rebuild: the paths to both ends and what it unlinks.
struct Rebuild<'a, 's, 'w> {
    pl: &'s mut Path<'w>,
    pr: &'s mut Path<'w>,
    retired: &'s mut Retired,
    created: usize,
    access: Access<'a>,
}

impl<'w> Rebuild<'_, '_, 'w> {
    /// Unlinks the subtrees strictly between the two paths: every range in
    /// them lies inside the write.
    fn unlink_between(&mut self) {
        for d in 0..self.pl.depth() - 1 {
            let (l, r) = (*self.pl.level(d), *self.pr.level(d));
            if l.node == r.node {
                for s in l.slot + 1..r.slot {
                    self.retired.subtree(l.node.child(s));
                }
            } else {
                for s in l.slot + 1..l.node.len() {
                    self.retired.subtree(l.node.child(s));
                }
                for s in 0..r.slot {
                    self.retired.subtree(r.node.child(s));
                }
            }
        }
    }

    /// The at most three ranges that replace the covered ones: the
    /// uncovered left part of `pl`'s slot, `[lo, hi] = p`, the uncovered
    /// right part of `pr`'s slot.
    #[inline(always)]
    fn middle(&self, lo: u64, hi: u64, p: *mut u8) -> Middle {
        let l = self.pl.leaf();
        let r = self.pr.leaf();
        let left_keep = l.slot_start() < lo;
        let right_end = r.slot_end();
        let right_keep = right_end > hi;
        let item = |end, ptr| Item { end, ptr, gap: 0 };
        let new = item(hi, p);
        let right = item(right_end, r.node.slot(r.slot));
        // Built whole rather than pushed item by item: the slots' places
        // are known from the two flags, and a length stored and read back
        // between pushes is a chain of dependent memory operations.
        let items = if left_keep {
            [item(lo - 1, l.node.slot(l.slot)), new, right]
        } else {
            [new, right, right]
        };
        Middle {
            items,
            len: 1 + usize::from(left_keep) + usize::from(right_keep),
            left_keep,
            right_keep,
        }
    }

    /// Writes the new content of the leaves from `lo`'s to `hi`'s into
    /// `buf`; returns the entry count change (added, removed) within them.
    fn leaf_content<T, O: Ownership<T>>(
        &mut self,
        buf: &mut Buf,
        lo: u64,
        hi: u64,
        p: *mut u8,
    ) -> (usize, usize) {
        let (l, r) = (*self.pl.leaf(), *self.pr.leaf());
        let m = self.middle(lo, hi, p);
        buf.extend_from(&l, 0..l.slot);
        m.items().iter().for_each(|&it| buf.push(it));
        buf.extend_from(&r, r.slot + 1..r.node.len());
        self.cover::<T, O>(&m, p)
    }

    /// The value bookkeeping of a write whose leaves are `pl.leaf()` to
    /// `pr.leaf()`: each range it covers loses its slot, and a kept
    /// remnant (`m.left_keep`, `m.right_keep`) needs one reference, so a
    /// range split in two gains one. Returns the entry count change (added,
    /// removed).
    #[inline(always)]
    fn cover<T, O: Ownership<T>>(&mut self, m: &Middle, p: *mut u8) -> (usize, usize) {
        let (left_keep, right_keep) = (m.left_keep, m.right_keep);
        let l = *self.pl.leaf();
        let r = *self.pr.leaf();
        let mut removed = 0;
        let mut cover = |node: NodeRef<'w>, s: usize| {
            let q = node.slot(s);
            if q.is_null() {
                return;
            }
            removed += 1;
            let keeps = usize::from(node == l.node && s == l.slot && left_keep)
                + usize::from(node == r.node && s == r.slot && right_keep);
            match keeps {
                0 => self.retired.values.push(q),
                1 => {}
                // SAFETY: `q` is a live value of this tree; the writer is
                // the only one who changes reference counts.
                _ => unsafe { value::share::<T, O>(q) },
            }
        };
        if l.node == r.node {
            (l.slot..=r.slot).for_each(|s| cover(l.node, s));
        } else {
            (l.slot..l.node.len()).for_each(|s| cover(l.node, s));
            (0..=r.slot).for_each(|s| cover(r.node, s));
        }
        let added = usize::from(left_keep && !l.node.slot(l.slot).is_null())
            + usize::from(right_keep && !r.node.slot(r.slot).is_null())
            + usize::from(!p.is_null());
        (added, removed)
    }

    /// The write `[lo, hi] = p` made inside the one leaf that holds both
    /// ends, if it fits there (no overflow, no fall below the minimum, not
    /// the tree's last range going): the slots it covers are replaced by
    /// at most three and the rest of the leaf moves, in place, with no
    /// buffer and no copy (the kernel's node store and append). Returns
    /// the entry count change, or `None` for the general path.
    fn splice_in_place<T, O: Ownership<T>>(
        &mut self,
        lo: u64,
        hi: u64,
        p: *mut u8,
    ) -> Option<(usize, usize)> {
        let l = *self.pl.leaf();
        let r = *self.pr.leaf();
        let depth = self.pl.depth();
        if l.node != r.node {
            return None;
        }
        let m = self.middle(lo, hi, p);
        let new_len = l.node.len() - (r.slot - l.slot + 1) + m.len;
        let fits = new_len <= LEAF_SLOTS
            && (depth == 1 || new_len >= LEAF_MIN || l.max == u64::MAX)
            // The root leaf emptied: the general path drops the root.
            && !(depth == 1 && new_len == 1 && p.is_null());
        if !fits {
            return None;
        }
        // Count before the slots change: `cover` reads them.
        let counts = self.cover::<T, O>(&m, p);
        let mid = m.items();
        // Likewise the largest absent range among the covered slots and
        // among their replacements, to update the leaf's recorded gap
        // without scanning the leaf afterwards (a root leaf has no record).
        let gaps = (depth > 1).then(|| {
            let removed = (l.slot..=r.slot)
                .filter(|&s| l.node.slot(s).is_null())
                .map(|s| {
                    let level = Level { slot: s, ..l };
                    gap_size(level.slot_start(), level.slot_end())
                })
                .max()
                .unwrap_or(0);
            (removed, items_gap(true, mid, l.slot_start()))
        });
        splice_leaf(self.access, l.node, l.slot, r.slot, mid);
        // A write that neither covered nor left an absent range (a value
        // replaced over the same bounds, a range moved between two present
        // neighbours) left every gap as it was: the parent's record (a
        // cache line the walk did not read) is not even looked at.
        if let Some((removed, added)) = gaps.filter(|&(removed, added)| (removed | added) != 0) {
            // The leaf's largest gap before the write is what its parent
            // records.
            let parent = *self.pl.level(depth - 2);
            let recorded = parent.node.gap(parent.slot);
            let gap = largest_gap_after(recorded, added, removed, || l.node.leaf_gap(l.min, l.max));
            fix_gaps(self.pl, depth - 1, gap);
        }
        Some(counts)
    }

    fn new_node(&mut self, leaf: bool, items: &[Item]) -> NodePtr {
        self.created += 1;
        NodePtr::new(leaf, items)
    }

    /// A node holding `items` in place of `old`: with exclusive access,
    /// `old` itself, rewritten in place and kept (no reader can see it
    /// change, so the copy that readers need is not made, and nothing is
    /// allocated or freed); otherwise a new node.
    fn rebuild_node(&mut self, leaf: bool, items: &[Item], old: Option<NodeRef<'w>>) -> NodePtr {
        match (self.access, old) {
            (Access::Exclusive, Some(old)) => {
                // SAFETY: `Access::Exclusive` is only used where no reader
                // can exist (`&mut self`, or `write_unshared`'s contract);
                // the node is one of the write's own, at this level, so of
                // this type, and its content was copied into `items`' buffer
                // before any node of the level was rewritten.
                unsafe { old.overwrite(items) };
                self.retired.kept.push(old.ptr());
                old.ptr()
            }
            _ => self.new_node(leaf, items),
        }
    }

    /// Rebuilds level by level from the leaves up and publishes the result.
    /// `buf` holds the new content of the run `pl.leaf() ..= pr.leaf()`.
    /// Returns the depth at which the new subtree was published.
    fn climb<T, O: Ownership<T>>(&mut self, tree: &MapleTree<T, O>, bufs: &mut [Buf; 2]) -> usize {
        // Two buffers, alternating: each level's content is built into the
        // other one, so no buffer is copied as a whole.
        let mut cur = 0;
        let depth = self.pl.depth();
        let mut d = depth - 1;
        let mut left = *self.pl.level(d);
        let mut right = *self.pr.level(d);
        loop {
            let leaf = d == depth - 1;
            let (cap, least) = if leaf {
                (LEAF_SLOTS, LEAF_MIN)
            } else {
                (INTERNAL_SLOTS, INTERNAL_MIN)
            };
            if d > 0 && bufs[cur].len < least && right.max != u64::MAX {
                // Underfull: absorb the neighbour on this level (it exists:
                // only the rightmost node lacks a right neighbour).
                let forward = !self.pl.step_level(d, false);
                if forward {
                    let stepped = self.pr.step_level(d, true);
                    debug_assert!(stepped, "a non-rightmost node has a right neighbour");
                }
                cur = self.absorb(bufs, cur, d, forward, &mut left, &mut right);
            }
            self.retired.node(left.node.ptr());
            self.retired.node(right.node.ptr());
            let rightmost = right.max == u64::MAX;
            let buf = &bufs[cur];
            if left.node == right.node
                && buf.len <= cap
                && (d == 0 || buf.len >= least || rightmost)
            {
                self.publish(tree, d, leaf, &left, buf);
                return d;
            }
            let buf_len = buf.len;
            let (sizes, k) = split_sizes(buf_len, cap, rightmost);
            let mut up = [Item {
                end: 0,
                ptr: ptr::null_mut(),
                gap: 0,
            }; 4];
            let mut start = 0;
            let mut min = left.min;
            for (j, &size) in sizes[..k].iter().enumerate() {
                let items = &bufs[cur].as_slice()[start..start + size];
                // The first piece may take the place of the run's left
                // node, the second of its right one.
                let reuse = match j {
                    0 => Some(left.node),
                    1 if right.node != left.node => Some(right.node),
                    _ => None,
                };
                let node = self.rebuild_node(leaf, items, reuse);
                let end = items[size - 1].end;
                up[j] = Item {
                    end,
                    ptr: node.raw(),
                    gap: items_gap(leaf, items, min),
                };
                min = end.wrapping_add(1);
                start += size;
            }
            let up = &up[..k];
            if d == 0 {
                // The root split: the tree grows a level.
                assert!(depth < MAX_HEIGHT, "maple tree deeper than MAX_HEIGHT");
                let root = self.new_node(false, up);
                tree.root.store(root.raw(), Ordering::Release);
                return 0;
            }
            let (pleft, pright) = (*self.pl.level(d - 1), *self.pr.level(d - 1));
            cur = 1 - cur;
            let next = &mut bufs[cur];
            next.len = 0;
            next.extend_from(&pleft, 0..pleft.slot);
            for it in up {
                next.push(*it);
            }
            next.extend_from(&pright, pright.slot + 1..pright.node.len());
            left = pleft;
            right = pright;
            d -= 1;
        }
    }

    /// Adds the neighbour that the caller just stepped `pl` (`forward`:
    /// `pr`) to on level `d` to the run's content, on that side. Returns
    /// the buffer now holding the content.
    fn absorb(
        &mut self,
        bufs: &mut [Buf; 2],
        cur: usize,
        d: usize,
        forward: bool,
        left: &mut Level<'w>,
        right: &mut Level<'w>,
    ) -> usize {
        if forward {
            *right = *self.pr.level(d);
            bufs[cur].extend_from(right, 0..right.node.len());
            return cur;
        }
        *left = *self.pl.level(d);
        let (a, b) = bufs.split_at_mut(1);
        let (from, into) = if cur == 0 {
            (&a[0], &mut b[0])
        } else {
            (&b[0], &mut a[0])
        };
        into.len = 0;
        into.extend_from(left, 0..left.node.len());
        for it in from.as_slice() {
            into.push(*it);
        }
        1 - cur
    }

    /// Replaces the single node `old` (at depth `d`) by one built from
    /// `buf`, publishing it with one release store (an exclusive write
    /// rewrites `old` in place instead), then fixes the gaps recorded
    /// above it.
    fn publish<T, O: Ownership<T>>(
        &mut self,
        tree: &MapleTree<T, O>,
        d: usize,
        leaf: bool,
        old: &Level<'w>,
        buf: &Buf,
    ) {
        let items = buf.as_slice();
        if d == 0 {
            let new_root = if leaf && items.len() == 1 && items[0].ptr.is_null() {
                None // nothing left
            } else if !leaf && items.len() == 1 {
                // A root with one child hands the tree to the child.
                let child = NodePtr::from_raw(items[0].ptr).expect("child");
                // SAFETY: the root's one child is a node of this write (one
                // it built, or kept from the old root's level), and nothing
                // frees it before `finish`, after its last use here.
                let mut child = unsafe { child.get::<'w>() };
                while !child.is_leaf() && child.len() == 1 {
                    self.retired.dropped(child.ptr());
                    child = child.child(0);
                }
                if child.is_leaf() && child.len() == 1 && child.slot(0).is_null() {
                    // Everything was erased.
                    self.retired.dropped(child.ptr());
                    None
                } else {
                    Some(child.ptr())
                }
            } else {
                Some(self.rebuild_node(leaf, items, Some(old.node)))
            };
            let raw = new_root.map_or(ptr::null_mut(), |n| n.raw());
            tree.root.store(raw, Ordering::Release);
            return;
        }
        let parent = *self.pl.level(d - 1);
        let node = self.rebuild_node(leaf, items, Some(old.node));
        if node != old.node.ptr() {
            parent.node.publish_child(parent.slot, node);
        }
        // Fix the recorded gaps upwards while they change.
        fix_gaps(self.pl, d, items_gap(leaf, items, old.min));
    }

    /// Frees (exclusive) or retires (shared) what the write unlinked, and
    /// leaves the retire lists empty for the next write.
    fn finish<T, O: Ownership<T>>(&mut self, tree: &MapleTree<T, O>) {
        let unlinked = self.retired.settle();
        let live = tree.nodes.load(Ordering::Relaxed) + self.created - unlinked;
        tree.nodes.store(live, Ordering::Relaxed);
        self.retired.entries = 0;
        match self.access {
            Access::Exclusive => {
                // SAFETY: `&mut` access: no reader exists. A value whose
                // `Drop` panics unwinds out of the write after the tree is
                // whole and every other value is released.
                unsafe { self.retired.free::<T, O>() };
            }
            Access::Shared(guard) => {
                // Mark after publishing, before the grace period starts: a
                // reader that reaches a replaced node from now on restarts.
                for n in self.retired.run.iter().chain(&self.retired.subtrees) {
                    // SAFETY: a node this write unlinked: not yet freed, and
                    // freed only after the grace period that `guard`, pinned
                    // by this write, holds back.
                    unsafe { n.get() }.mark_dead();
                }
                // One deferred call per node or value, each a closure of
                // one pointer, which the collector stores without
                // allocating; the lists keep their capacity for the next
                // write. A write that unlinks nothing (the in-place fast
                // paths) defers nothing at all.
                for n in self
                    .retired
                    .run
                    .drain(..)
                    .chain(self.retired.subtrees.drain(..))
                {
                    // SAFETY: the node is unlinked and marked dead; it is
                    // freed after a grace period, when no reader holds it.
                    unsafe { defer(guard, NodePtr::free_raw, n.into_raw()) };
                }
                // Values with nothing to release (inline, `'static`)
                // defer nothing; exclusive writes skip them in
                // `value::release_all`.
                let values = self.retired.values.drain(..).filter(|_| O::RELEASES);
                for v in values {
                    // SAFETY: this reference is unlinked; it is released
                    // after a grace period, and values are `T: Send + Sync +
                    // 'static` (required by `MapleTree::write`).
                    unsafe { defer(guard, value::release_deferred::<T, O>, v) };
                }
            }
        }
    }
}

impl<T, O: Ownership<T>> MapleTree<T, O> {
    /// Stores `value` over `range` (`first..=last`), overwriting whatever
    /// was there. An entry only partly covered keeps its uncovered part(s);
    /// when the write lands inside an entry, both remaining pieces share
    /// its value.
    ///
    /// Errors: [`Error::InvalidRange`] for an empty range (`first > last`),
    /// dropping `value` and changing nothing.
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(0..=99, 'a').unwrap();
    /// tree.store_range(40..=59, 'b').unwrap();
    /// let g = maple::pin();
    /// let all: Vec<_> = tree.iter(&g).map(|e| (e.range(), *e.value())).collect();
    /// assert_eq!(all, [(0..=39, 'a'), (40..=59, 'b'), (60..=99, 'a')]);
    /// assert_eq!(
    ///     tree.store_range(5..=4, 'x'),
    ///     Err(maple::Error::InvalidRange { first: 5, last: 4 })
    /// );
    /// ```
    pub fn store_range(&mut self, range: RangeInclusive<u64>, value: T) -> Result<(), Error> {
        self.exclusive(|t, s| t.apply(s, range, Some(value), Access::Exclusive, false))
    }

    /// Stores `value` over `range` only if every index there is absent;
    /// otherwise returns [`Error::Exists`] and changes nothing
    /// ([`Error::InvalidRange`] for an empty range).
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.insert_range(10..=19, 1).unwrap();
    /// assert_eq!(tree.insert_range(19..=30, 2), Err(maple::Error::Exists));
    /// ```
    pub fn insert_range(&mut self, range: RangeInclusive<u64>, value: T) -> Result<(), Error> {
        self.exclusive(|t, s| t.apply(s, range, Some(value), Access::Exclusive, true))
    }

    /// Removes the whole entry containing `index` and returns its range.
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(10..=19, ()).unwrap();
    /// assert_eq!(tree.erase(15), Some(10..=19));
    /// assert_eq!(tree.erase(15), None);
    /// ```
    pub fn erase(&mut self, index: u64) -> Option<RangeInclusive<u64>> {
        self.exclusive(|t, s| t.erase_entry(s, index, Access::Exclusive))
    }

    /// Makes `range` absent, trimming or splitting entries that stick out
    /// of it ([`Error::InvalidRange`] for an empty range).
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(0..=99, 'a').unwrap();
    /// tree.erase_range(10..=89).unwrap();
    /// let g = maple::pin();
    /// let left: Vec<_> = tree.iter(&g).map(|e| e.range()).collect();
    /// assert_eq!(left, [0..=9, 90..=99]);
    /// ```
    pub fn erase_range(&mut self, range: RangeInclusive<u64>) -> Result<(), Error> {
        self.exclusive(|t, s| t.apply(s, range, None, Access::Exclusive, false))
    }

    /// Builds a tree from entries sorted by index, packing nodes full:
    /// faster and denser than inserting one by one.
    ///
    /// Errors: [`Error::InvalidRange`] for an entry with an empty range,
    /// [`Error::Unsorted`] if an entry does not start after the previous
    /// one's end.
    ///
    /// ```
    /// let tree = maple::MapleTree::from_sorted((0..1000u64).map(|i| (i * 10..=i * 10 + 7, i))).unwrap();
    /// assert_eq!(tree.len(), 1000);
    /// let bad = maple::MapleTree::from_sorted([(5..=9, ()), (9..=12, ())]);
    /// assert_eq!(bad.err(), Some(maple::Error::Unsorted));
    ///
    /// // The same for a tree with another ownership strategy:
    /// let ids = maple::MapleTree::from_sorted_with(maple::Direct, [(0..=9, 1u32)]).unwrap();
    /// assert_eq!(ids.load(3, &maple::pin()), Some(1));
    /// ```
    pub fn from_sorted_with<I: IntoIterator<Item = (RangeInclusive<u64>, T)>>(
        _ownership: O,
        entries: I,
    ) -> Result<Self, Error> {
        /// Releases the values gathered so far if the input is refused.
        struct Pending<T, O: Ownership<T>> {
            items: Vec<Item>,
            _t: std::marker::PhantomData<(T, O)>,
        }
        impl<T, O: Ownership<T>> Drop for Pending<T, O> {
            fn drop(&mut self) {
                let values = self.items.iter().map(|it| it.ptr).filter(|p| !p.is_null());
                // SAFETY: each value was made by `into_raw` and is
                // referenced only here.
                unsafe { value::release_all::<T, O, _>(values) };
            }
        }
        let mut pending = Pending::<T, O> {
            items: Vec::new(),
            _t: std::marker::PhantomData,
        };
        let mut next = Some(0u64); // first index not yet covered
        let mut count = 0;
        for (range, v) in entries {
            let (first, last) = bounds(&range)?;
            let start = next.filter(|&n| first >= n).ok_or(Error::Unsorted)?;
            if first > start {
                pending.items.push(Item {
                    end: first - 1,
                    ptr: ptr::null_mut(),
                    gap: 0,
                });
            }
            pending.items.push(Item {
                end: last,
                ptr: value::into_raw::<T, O>(v),
                gap: 0,
            });
            next = last.checked_add(1);
            count += 1;
        }
        if next.is_some() {
            pending.items.push(Item {
                end: u64::MAX,
                ptr: ptr::null_mut(),
                gap: 0,
            });
        }
        let tree = MapleTree::default();
        if count == 0 {
            return Ok(tree);
        }
        let mut level = std::mem::take(&mut pending.items);
        let mut leaf = true;
        let mut nodes = 0;
        loop {
            let cap = if leaf { LEAF_SLOTS } else { INTERNAL_SLOTS };
            let least = if leaf { LEAF_MIN } else { INTERNAL_MIN };
            let mut up = Vec::with_capacity(level.len() / cap + 1);
            let mut min = 0u64;
            let mut rest = &level[..];
            while !rest.is_empty() {
                // Full nodes, but never leave a non-rightmost remainder
                // below the minimum: the last two share what is left.
                let take = if rest.len() <= cap {
                    rest.len()
                } else if rest.len() < cap + least {
                    rest.len() - least
                } else {
                    cap
                };
                let items = &rest[..take];
                let node = NodePtr::new(leaf, items);
                nodes += 1;
                let end = items[take - 1].end;
                up.push(Item {
                    end,
                    ptr: node.raw(),
                    gap: items_gap(leaf, items, min),
                });
                min = end.wrapping_add(1);
                rest = &rest[take..];
            }
            if up.len() == 1 {
                tree.root.store(up[0].ptr, Ordering::Release);
                break;
            }
            level = up;
            leaf = false;
        }
        tree.nodes.store(nodes, Ordering::Relaxed);
        tree.entries.store(count, Ordering::Relaxed);
        Ok(tree)
    }
}

/// Stores each `(range, value)` in turn, as
/// [`store_range`](MapleTree::store_range) does: a later entry overwrites
/// what it covers of an earlier one, and an empty range (`5..=3`) stores
/// nothing (its value is dropped). A non-empty range cannot be refused, so
/// nothing else is lost.
///
/// ```
/// let mut tree = maple::MapleTree::new();
/// tree.extend([(0..=99, 'a'), (40..=59, 'b'), (9..=1, 'x')]);
/// let g = maple::pin();
/// let all: Vec<_> = tree.iter(&g).map(|e| (e.range(), *e.value())).collect();
/// assert_eq!(all, [(0..=39, 'a'), (40..=59, 'b'), (60..=99, 'a')]);
/// ```
impl<T, O: Ownership<T>> Extend<(RangeInclusive<u64>, T)> for MapleTree<T, O> {
    fn extend<I: IntoIterator<Item = (RangeInclusive<u64>, T)>>(&mut self, entries: I) {
        for (range, value) in entries {
            // Cannot fail but for an empty range, which `Extend` skips
            // (dropping its value) rather than report.
            let _ = self.store_range(range, value);
        }
    }
}

/// A tree of the given entries, stored in turn as by [`Extend`].
///
/// ```
/// use maple::{Direct, MapleTree};
/// let ids: MapleTree<u32, Direct> = (0..10u32).map(|i| (i as u64 * 10..=i as u64 * 10 + 4, i)).collect();
/// assert_eq!(ids.len(), 10);
/// assert_eq!(ids.load(93, &maple::pin()), Some(9));
/// ```
impl<T, O: Ownership<T>> FromIterator<(RangeInclusive<u64>, T)> for MapleTree<T, O> {
    fn from_iter<I: IntoIterator<Item = (RangeInclusive<u64>, T)>>(entries: I) -> Self {
        let mut tree = MapleTree::default();
        tree.extend(entries);
        tree
    }
}

impl<T: Send + Sync + 'static, O: Ownership<T> + 'static> MapleTree<T, O> {
    /// Takes the tree's writer lock and returns a handle for writes that
    /// may run while readers on other threads are active. Writes through
    /// it copy the nodes they change and publish each with one release
    /// store; replaced nodes and values are freed after a grace period.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let tree = Arc::new(maple::MapleTree::new());
    /// let writer = {
    ///     let tree = Arc::clone(&tree);
    ///     std::thread::spawn(move || {
    ///         for i in 0..100u64 {
    ///             tree.write().store_range(i * 10..=i * 10 + 9, i).unwrap();
    ///         }
    ///     })
    /// };
    /// let g = maple::pin();
    /// if let Some(v) = tree.load(55, &g) {
    ///     assert_eq!(*v, 5);
    /// }
    /// writer.join().unwrap();
    /// assert_eq!(tree.len(), 100);
    /// ```
    pub fn write(&self) -> WriteGuard<'_, T, O> {
        WriteGuard {
            tree: self,
            lock: Some(self.lock.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }

    /// A writer for writes that no other thread can observe, the tree's
    /// non-RCU mode: writes through the guard change nodes in place and
    /// free what they replace at once, as writes through `&mut self` do,
    /// with no grace period, and the writer lock is not taken.
    ///
    /// This is for a tree behind an `Arc` that only one thread uses for
    /// now (an address space with one user): it pays for the RCU protocol,
    /// and for the lock that serialises writers on several threads, only
    /// once a second thread may read, by switching to
    /// [`write`](MapleTree::write) then.
    ///
    /// # Safety
    /// Until the guard is dropped, no other thread reads or writes the
    /// tree and no other guard of the tree is used (on any thread), and no
    /// reference read from the tree before a write through the guard is
    /// used after that write (what it points to may be freed).
    ///
    /// ```
    /// let tree = std::sync::Arc::new(maple::MapleTree::new());
    /// // SAFETY: this thread is the tree's only user and holds no reference
    /// // read from it.
    /// let mut w = unsafe { tree.write_unshared() };
    /// w.store_range(0..=9, 'a').unwrap();
    /// w.store_range(5..=9, 'b').unwrap();
    /// drop(w);
    /// let g = maple::pin();
    /// assert_eq!(tree.load(7, &g), Some(&'b'));
    /// ```
    pub unsafe fn write_unshared(&self) -> WriteGuard<'_, T, O> {
        WriteGuard {
            tree: self,
            lock: None,
        }
    }
}

/// Exclusive right to write a [`MapleTree`] that readers may be using; see
/// [`MapleTree::write`]. Dropping it releases the writer lock.
pub struct WriteGuard<'t, T, O: Ownership<T> = Boxed> {
    tree: &'t MapleTree<T, O>,
    /// The writer lock, for a guard from [`MapleTree::write`]; `None` for
    /// one from [`MapleTree::write_unshared`], which writes as with `&mut`.
    lock: Option<MutexGuard<'t, ()>>,
}

impl<T: Send + Sync + 'static, O: Ownership<T> + 'static> WriteGuard<'_, T, O> {
    /// Runs a shared write with the scratch space the lock protects.
    fn shared<R>(
        &mut self,
        write: impl FnOnce(&MapleTree<T, O>, &mut Scratch, Access<'_>) -> R,
    ) -> R {
        // SAFETY: this guard is the tree's one writer: it holds the writer
        // lock, or `write_unshared`'s contract rules out every other
        // writer; and `&mut self` keeps this the only borrow through it.
        let scratch = unsafe { &mut *self.tree.scratch.get() };
        let scratch = scratch.get_or_insert_with(Scratch::new);
        if self.lock.is_none() {
            // `write_unshared`'s contract: no reader can exist.
            return write(self.tree, scratch, Access::Exclusive);
        }
        let unpinned = crate::sync::unpinned();
        let guard = crate::pin();
        let done = write(self.tree, scratch, Access::Shared(&guard));
        drop(guard);
        if unpinned {
            // Nobody's section around this write: free what came back.
            crate::sync::free_ready();
        }
        done
    }

    /// As [`MapleTree::store_range`], visible to concurrent readers.
    pub fn store_range(&mut self, range: RangeInclusive<u64>, value: T) -> Result<(), Error> {
        self.shared(|t, s, a| t.apply(s, range, Some(value), a, false))
    }

    /// As [`MapleTree::insert_range`], visible to concurrent readers.
    pub fn insert_range(&mut self, range: RangeInclusive<u64>, value: T) -> Result<(), Error> {
        self.shared(|t, s, a| t.apply(s, range, Some(value), a, true))
    }

    /// As [`MapleTree::erase`], visible to concurrent readers.
    pub fn erase(&mut self, index: u64) -> Option<RangeInclusive<u64>> {
        self.shared(|t, s, a| t.erase_entry(s, index, a))
    }

    /// As [`MapleTree::erase_range`], visible to concurrent readers.
    pub fn erase_range(&mut self, range: RangeInclusive<u64>) -> Result<(), Error> {
        self.shared(|t, s, a| t.apply(s, range, None, a, false))
    }
}

/// The writes of a tree, the same through `&mut MapleTree` (exclusive:
/// in place, frees at once) and through a [`WriteGuard`] (beside
/// readers), for code that works with either. Each method is the
/// inherent one of the same name.
///
/// ```
/// use maple::{MapleTree, Writer};
///
/// fn map_two<W: Writer<&'static str>>(w: &mut W) {
///     w.insert_range(0..=9, "text").unwrap();
///     w.store_range(20..=29, "data").unwrap();
/// }
///
/// let mut alone = MapleTree::new();
/// map_two(&mut alone);
/// let shared = MapleTree::new();
/// map_two(&mut shared.write());
/// let g = maple::pin();
/// assert!(alone.iter(&g).eq(shared.iter(&g)));
/// ```
pub trait Writer<T> {
    /// See [`MapleTree::store_range`].
    fn store_range(&mut self, range: RangeInclusive<u64>, value: T) -> Result<(), Error>;
    /// See [`MapleTree::insert_range`].
    fn insert_range(&mut self, range: RangeInclusive<u64>, value: T) -> Result<(), Error>;
    /// See [`MapleTree::erase`].
    fn erase(&mut self, index: u64) -> Option<RangeInclusive<u64>>;
    /// See [`MapleTree::erase_range`].
    fn erase_range(&mut self, range: RangeInclusive<u64>) -> Result<(), Error>;
}

impl<T, O: Ownership<T>> Writer<T> for MapleTree<T, O> {
    fn store_range(&mut self, range: RangeInclusive<u64>, value: T) -> Result<(), Error> {
        MapleTree::store_range(self, range, value)
    }
    fn insert_range(&mut self, range: RangeInclusive<u64>, value: T) -> Result<(), Error> {
        MapleTree::insert_range(self, range, value)
    }
    fn erase(&mut self, index: u64) -> Option<RangeInclusive<u64>> {
        MapleTree::erase(self, index)
    }
    fn erase_range(&mut self, range: RangeInclusive<u64>) -> Result<(), Error> {
        MapleTree::erase_range(self, range)
    }
}

impl<T: Send + Sync + 'static, O: Ownership<T> + 'static> Writer<T> for WriteGuard<'_, T, O> {
    fn store_range(&mut self, range: RangeInclusive<u64>, value: T) -> Result<(), Error> {
        WriteGuard::store_range(self, range, value)
    }
    fn insert_range(&mut self, range: RangeInclusive<u64>, value: T) -> Result<(), Error> {
        WriteGuard::insert_range(self, range, value)
    }
    fn erase(&mut self, index: u64) -> Option<RangeInclusive<u64>> {
        WriteGuard::erase(self, index)
    }
    fn erase_range(&mut self, range: RangeInclusive<u64>) -> Result<(), Error> {
        WriteGuard::erase_range(self, range)
    }
}

//! A root-to-leaf path: the walk every operation starts with.
//!
//! Readers use a path to step from leaf to leaf without returning to the
//! root; the writer uses two (one to each end of the range it rewrites) and
//! climbs them to rebuild parents. A path records each node's `[min, max]`,
//! since nodes do not store their own bounds.

use crate::node::{NodeRef, MAX_HEIGHT};
use std::mem::MaybeUninit;

/// One node on a path: its bounds, the slot the path continues through
/// (for the leaf: the slot holding the index that was searched for), and
/// the node's stamp taken before anything else was read from it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Level<'g> {
    pub node: NodeRef<'g>,
    pub min: u64,
    pub max: u64,
    pub slot: usize,
    /// The node's metadata word when the path entered it; a reader keeps
    /// what it read from the node only while [`Level::still`] holds.
    pub stamp: u64,
}

impl<'g> Level<'g> {
    /// First index covered by this level's current slot.
    #[inline]
    pub(crate) fn slot_start(&self) -> u64 {
        if self.slot == 0 {
            self.min
        } else {
            // Wrapping: a reader may meet a torn pivot here, which its
            // stamp check then throws away.
            self.node.pivot(self.slot - 1).wrapping_add(1)
        }
    }

    /// Last index covered by this level's current slot.
    #[inline]
    pub(crate) fn slot_end(&self) -> u64 {
        self.node.end(self.slot, self.max)
    }

    /// Whether everything read from this level's node since the path
    /// entered it is one consistent, current state (see
    /// [`NodeRef::still`]).
    #[inline]
    pub(crate) fn still(&self) -> bool {
        self.node.still(self.stamp)
    }

    /// The level below: the child in the current slot, entered at its
    /// last slot (`last`) or its first. (A walk to an index descends in
    /// [`Path::rewalk`], which takes the bounds from its scan.)
    #[inline]
    fn descend(&self, last: bool) -> Level<'g> {
        let node = self.node.child(self.slot);
        let (min, max) = (self.slot_start(), self.slot_end());
        let stamp = node.stamp();
        let slot = if last { node.len() - 1 } else { 0 };
        Level {
            node,
            min,
            max,
            slot,
            stamp,
        }
    }
}

/// Path from the root (level 0) to a leaf (level `depth - 1`), over nodes
/// alive for `'g`. Only the levels in use are initialised, and only they
/// can be read: levels left over from a deeper walk, or from an earlier
/// use of the storage (see [`PathStore`]), are never handed out.
#[derive(Clone)]
pub(crate) struct Path<'g> {
    /// Invariant: `depth <= MAX_HEIGHT`, and `levels[..depth]` are
    /// initialised.
    levels: [MaybeUninit<Level<'g>>; MAX_HEIGHT],
    depth: usize,
}

impl<'g> Path<'g> {
    /// Walks from `root` to the leaf slot holding `index`.
    #[inline]
    pub(crate) fn walk(root: NodeRef<'g>, index: u64) -> Path<'g> {
        let mut path = Path::empty();
        path.rewalk(root, index);
        path
    }

    /// A path with no levels yet, to be filled by [`Path::rewalk`].
    #[inline]
    pub(crate) fn empty() -> Path<'g> {
        Path {
            levels: [const { MaybeUninit::uninit() }; MAX_HEIGHT],
            depth: 0,
        }
    }

    /// Number of levels, the leaf's included.
    #[inline]
    pub(crate) fn depth(&self) -> usize {
        self.depth
    }

    /// Level `d` (0: the root), which must be in use.
    #[inline]
    pub(crate) fn level(&self, d: usize) -> &Level<'g> {
        assert!(d < self.depth, "path level {d} not in use");
        // SAFETY: levels below `depth` are initialised (the invariant),
        // and `depth <= MAX_HEIGHT` (`push`), so `d` is in bounds.
        unsafe { self.levels.get_unchecked(d).assume_init_ref() }
    }

    /// Level `d`, which must be in use, to change.
    #[inline]
    pub(crate) fn level_mut(&mut self, d: usize) -> &mut Level<'g> {
        assert!(d < self.depth, "path level {d} not in use");
        // SAFETY: as in `level`.
        unsafe { self.levels.get_unchecked_mut(d).assume_init_mut() }
    }

    /// Makes this path a copy of `other`, copying only the levels in use.
    #[inline]
    pub(crate) fn copy_from(&mut self, other: &Path<'g>) {
        // Level by level rather than one `copy_from_slice`: a path is two
        // to four levels, for which a `memmove` call costs more than the
        // copy (the writer copies its left path on every write).
        for (to, from) in self.levels.iter_mut().zip(&other.levels[..other.depth]) {
            *to = *from;
        }
        self.depth = other.depth;
    }

    /// Makes this path the one level `leaf`, for a writer that needs only
    /// the leaf until it climbs (the levels above must be set, with
    /// [`Path::copy_from`], before anything reads them as a path's).
    #[inline]
    pub(crate) fn leaf_only(&mut self, leaf: Level<'g>) {
        self.levels[0] = MaybeUninit::new(leaf);
        self.depth = 1;
    }

    /// Walks again from `root`, reusing this path's storage (a path is a
    /// few hundred bytes: iterators keep theirs).
    #[inline]
    pub(crate) fn rewalk(&mut self, root: NodeRef<'g>, index: u64) {
        let stamp = root.stamp();
        let (slot, mut first, mut last) = root.find_slot_in(index, 0, u64::MAX);
        let mut level = Level {
            node: root,
            min: 0,
            max: u64::MAX,
            slot,
            stamp,
        };
        // The level being entered and the depth stay in registers; the
        // path's storage is only written. (Read back through `self`, each
        // level waited on the store of the one before: the node loads are
        // atomic, and the compiler keeps memory in order around them.)
        // Each level's bounds come from its parent's scan.
        let mut depth = 0;
        loop {
            // A taller tree is impossible in memory (see MAX_HEIGHT);
            // stopping here keeps a corrupted tree from writing out of
            // bounds.
            assert!(depth < MAX_HEIGHT, "maple tree deeper than MAX_HEIGHT");
            self.levels[depth] = MaybeUninit::new(level);
            depth += 1;
            if level.node.is_leaf() {
                break;
            }
            let node = level.node.child(level.slot);
            let stamp = node.stamp();
            let (min, max) = (first, last);
            let slot;
            (slot, first, last) = node.find_slot_in(index, min, max);
            level = Level {
                node,
                min,
                max,
                slot,
                stamp,
            };
        }
        self.depth = depth;
    }

    /// Leads the path to the leaf slot holding `index`: within the leaf it
    /// already ends in when that leaf covers `index` (`kept`: the path is
    /// one of the current tree, as [`PathStore::kept`] hands it out), else
    /// by a walk from `root`. The kernel's writers reuse their walk state
    /// the same way; a run of writes to one neighbourhood (an address
    /// space's mmaps, ascending inserts) walks once per leaf, not per write.
    #[inline]
    pub(crate) fn seek(&mut self, root: NodeRef<'g>, index: u64, kept: bool) {
        if kept && self.depth > 0 {
            let leaf = self.leaf_mut();
            if leaf.min <= index && index <= leaf.max {
                leaf.slot = leaf.node.find_slot(index);
                return;
            }
        }
        self.rewalk(root, index);
    }

    #[inline]
    fn push(&mut self, level: Level<'g>) {
        // A taller tree is impossible in memory (see MAX_HEIGHT); stopping
        // here keeps a corrupted tree from writing out of bounds.
        assert!(self.depth < MAX_HEIGHT, "maple tree deeper than MAX_HEIGHT");
        self.levels[self.depth] = MaybeUninit::new(level);
        self.depth += 1;
    }

    #[inline]
    pub(crate) fn leaf(&self) -> &Level<'g> {
        self.level(self.depth.wrapping_sub(1))
    }

    #[inline]
    pub(crate) fn leaf_mut(&mut self) -> &mut Level<'g> {
        self.level_mut(self.depth.wrapping_sub(1))
    }

    /// Moves to the first slot of the next leaf; false at the last leaf.
    pub(crate) fn next_leaf(&mut self) -> bool {
        self.step_leaf(true)
    }

    /// Moves to the last slot of the previous leaf; false at the first leaf.
    pub(crate) fn prev_leaf(&mut self) -> bool {
        self.step_leaf(false)
    }

    fn step_leaf(&mut self, forward: bool) -> bool {
        let leaf_depth = self.depth;
        // Climb to the nearest ancestor that has a sibling slot that way.
        let mut d = leaf_depth - 1;
        loop {
            if d == 0 {
                return false;
            }
            d -= 1;
            let l = self.level(d);
            if forward && l.slot + 1 < l.node.len() || !forward && l.slot > 0 {
                break;
            }
        }
        if forward {
            self.level_mut(d).slot += 1;
        } else {
            self.level_mut(d).slot -= 1;
        }
        self.depth = d + 1;
        while self.depth < leaf_depth {
            let next = self.leaf().descend(!forward);
            self.push(next);
        }
        true
    }

    /// Moves the path's level `d` to the node just left (or right) of it on
    /// the same level, rewriting the levels above as needed. Returns false
    /// (and changes nothing) when the node is the first (last) on its level.
    ///
    /// The writer uses this to find a neighbour to merge an underfull node
    /// with; the path stays a valid root-to-level-`d` path, and levels
    /// deeper than `d` become meaningless.
    pub(crate) fn step_level(&mut self, d: usize, forward: bool) -> bool {
        assert!(d < self.depth, "path level {d} not in use");
        let mut e = d;
        loop {
            if e == 0 {
                return false;
            }
            let p = self.level(e - 1);
            if forward && p.slot + 1 < p.node.len() || !forward && p.slot > 0 {
                break;
            }
            e -= 1;
        }
        if forward {
            self.level_mut(e - 1).slot += 1;
        } else {
            self.level_mut(e - 1).slot -= 1;
        }
        for f in e..=d {
            let next = self.level(f - 1).descend(!forward);
            *self.level_mut(f) = next;
        }
        true
    }
}

/// A path's storage kept between uses (the writer's scratch space keeps
/// two): a path is a few hundred bytes, which would otherwise be set up on
/// every write. Between uses it names no node: [`PathStore::path`] hands
/// it out emptied, for any lifetime.
pub(crate) struct PathStore(Path<'static>);

impl PathStore {
    pub(crate) fn new() -> Self {
        PathStore(Path::empty())
    }

    /// The stored path, emptied, for nodes alive for `'w`.
    #[inline]
    pub(crate) fn path<'w>(&mut self) -> &mut Path<'w> {
        self.0.depth = 0;
        // SAFETY: emptied, the path names no node (see `retype`).
        unsafe { self.retype() }
    }

    /// The stored path as the last use left it, for nodes alive for `'w`:
    /// the writer's kept path (see `Scratch` in `write.rs`).
    ///
    /// # Safety
    /// Every node on the path is alive for `'w`, and the path is still a
    /// root-to-leaf path of the tree: no node on it was freed, replaced or
    /// rewritten other than in its leaf's slots and pivots, and no gap
    /// recorded on it counts for the path.
    #[inline]
    pub(crate) unsafe fn kept<'w>(&mut self) -> &mut Path<'w> {
        // SAFETY: the caller's contract covers the nodes the path names.
        unsafe { self.retype() }
    }

    /// # Safety
    /// Every node the path names is alive for `'w` (an empty path names
    /// none).
    #[inline]
    unsafe fn retype<'w>(&mut self) -> &mut Path<'w> {
        // SAFETY: `Path<'static>` and `Path<'w>` differ only in a lifetime,
        // so in nothing of their layout. What `&mut` invariance guards
        // against is a `Path<'w>`'s nodes read later as `'static`: the
        // field is private, and the path is only reached through `path`,
        // which empties it first (no level is read past `depth`), and
        // `kept`, whose caller vouches for the nodes it names.
        unsafe { &mut *(&raw mut self.0).cast::<Path<'w>>() }
    }
}

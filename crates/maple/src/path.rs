//! A root-to-leaf path: the walk every operation starts with.
//!
//! Readers use a path to step from leaf to leaf without returning to the
//! root; the writer uses two (one to each end of the range it rewrites) and
//! climbs them to rebuild parents. A path records each node's `[min, max]`,
//! since nodes do not store their own bounds.

use crate::node::{NodePtr, MAX_HEIGHT};

/// One node on a path: its bounds, the slot the path continues through
/// (for the leaf: the slot holding the index that was searched for), and
/// the node's stamp taken before anything else was read from it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Level {
    pub node: NodePtr,
    pub min: u64,
    pub max: u64,
    pub slot: usize,
    /// The node's metadata word when the path entered it; a reader keeps
    /// what it read from the node only while [`Level::still`] holds.
    pub stamp: u64,
}

impl Level {
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
    /// [`NodePtr::still`]).
    #[inline]
    pub(crate) fn still(&self) -> bool {
        self.node.still(self.stamp)
    }

    /// The level below: the child in the current slot, entered at `slot`
    /// (`None`: the slot holding `index`).
    #[inline]
    fn descend(&self, index: Option<u64>, last: bool) -> Level {
        let node = self.node.child(self.slot);
        let (min, max) = (self.slot_start(), self.slot_end());
        let stamp = node.stamp();
        let slot = match index {
            Some(i) => node.find_slot(i),
            None if last => node.len() - 1,
            None => 0,
        };
        Level {
            node,
            min,
            max,
            slot,
            stamp,
        }
    }
}

/// Path from the root (`levels[0]`) to a leaf (`levels[depth - 1]`).
#[derive(Clone)]
pub(crate) struct Path {
    pub levels: [Level; MAX_HEIGHT],
    pub depth: usize,
}

impl Path {
    /// Walks from `root` to the leaf slot holding `index`.
    #[inline]
    pub(crate) fn walk(root: NodePtr, index: u64) -> Path {
        let top = Level {
            node: root,
            min: 0,
            max: u64::MAX,
            slot: 0,
            stamp: 0,
        };
        let mut path = Path {
            levels: [top; MAX_HEIGHT],
            depth: 0,
        };
        path.rewalk(root, index);
        path
    }

    /// A path with no levels yet, to be filled by [`Path::rewalk`].
    pub(crate) fn empty() -> Path {
        let nowhere = Level {
            node: NodePtr::dangling(),
            min: 0,
            max: 0,
            slot: 0,
            stamp: 0,
        };
        Path {
            levels: [nowhere; MAX_HEIGHT],
            depth: 0,
        }
    }

    /// Makes this path a copy of `other`, copying only the levels in use.
    pub(crate) fn copy_from(&mut self, other: &Path) {
        self.levels[..other.depth].copy_from_slice(&other.levels[..other.depth]);
        self.depth = other.depth;
    }

    /// Walks again from `root`, reusing this path's storage (a path is a
    /// few hundred bytes: iterators and the writer keep theirs).
    #[inline]
    pub(crate) fn rewalk(&mut self, root: NodePtr, index: u64) {
        let stamp = root.stamp();
        self.levels[0] = Level {
            node: root,
            min: 0,
            max: u64::MAX,
            slot: root.find_slot(index),
            stamp,
        };
        self.depth = 1;
        while !self.leaf().node.is_leaf() {
            let next = self.leaf().descend(Some(index), false);
            self.push(next);
        }
    }

    #[inline]
    fn push(&mut self, level: Level) {
        // A taller tree is impossible in memory (see MAX_HEIGHT); stopping
        // here keeps a corrupted tree from writing out of bounds.
        assert!(self.depth < MAX_HEIGHT, "maple tree deeper than MAX_HEIGHT");
        self.levels[self.depth] = level;
        self.depth += 1;
    }

    #[inline]
    pub(crate) fn leaf(&self) -> &Level {
        &self.levels[self.depth - 1]
    }

    #[inline]
    pub(crate) fn leaf_mut(&mut self) -> &mut Level {
        &mut self.levels[self.depth - 1]
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
            let l = &self.levels[d];
            if forward && l.slot + 1 < l.node.len() || !forward && l.slot > 0 {
                break;
            }
        }
        if forward {
            self.levels[d].slot += 1;
        } else {
            self.levels[d].slot -= 1;
        }
        self.depth = d + 1;
        while self.depth < leaf_depth {
            let next = self.leaf().descend(None, !forward);
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
        let mut e = d;
        loop {
            if e == 0 {
                return false;
            }
            let p = &self.levels[e - 1];
            if forward && p.slot + 1 < p.node.len() || !forward && p.slot > 0 {
                break;
            }
            e -= 1;
        }
        if forward {
            self.levels[e - 1].slot += 1;
        } else {
            self.levels[e - 1].slot -= 1;
        }
        for f in e..=d {
            self.levels[f] = self.levels[f - 1].descend(None, !forward);
        }
        true
    }
}

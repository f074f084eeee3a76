//! The four fixed designs: `single`, `split`, `split-locked` and
//! `distributed`. Each has the same two operations, a change (unlink some
//! VMAs, link others) and a walk, and differs only in which trees hold the
//! VMAs and which locks a change and a walk take.

use std::ops::ControlFlow;
use std::sync::Arc;

use super::{sem, tree_insert, tree_remove, tree_visit, Groups, Tree};
use crate::itree::Itree;
use crate::lock::{RwSem, WriteGuard};
use crate::policy::Policy;
use crate::vma::Vma;
use crossbeam_utils::CachePadded;
use smallvec::SmallVec;

/// A walk's visitor.
pub(super) type Visit<'a> = &'a mut dyn FnMut(&Arc<Vma>) -> ControlFlow<()>;

/// A tree visitor for checkers: the group a tree belongs to (`None` for
/// `adaptive`'s central tree, whose VMAs each carry their own group) and
/// the tree.
pub(super) type EachTree<'a> = &'a mut dyn FnMut(Option<usize>, &Tree);

/// A change, with every VMA already given its group.
pub(super) struct Change<'a> {
    pub(super) removed: &'a [(usize, &'a Arc<Vma>)],
    pub(super) placed: &'a [(usize, &'a Arc<Vma>)],
}

impl Change<'_> {
    /// The distinct groups the change touches, ascending: the order in
    /// which per-group locks are taken, so two changes never wait on each
    /// other in a cycle.
    pub(super) fn touched(&self) -> SmallVec<[usize; 4]> {
        let mut gs: SmallVec<[usize; 4]> = self
            .removed
            .iter()
            .chain(self.placed)
            .map(|&(g, _)| g)
            .collect();
        gs.sort_unstable();
        gs.dedup();
        gs
    }

    /// Apply the change to `trees`, which must hold (exclusively) the tree
    /// of every group touched, or a single tree with group `None` that
    /// stands for all of them. Unlinks first, then links, keeping each
    /// VMA's group record and the per-group counters in step with the
    /// trees.
    pub(super) fn apply(&self, groups: &Groups, trees: &mut [(Option<usize>, &mut Tree)]) {
        for &(g, vma) in self.removed {
            let removed = tree_remove(tree_of(trees, g), vma);
            debug_assert!(removed, "unlinking a VMA that is not in group {g}");
            if removed {
                groups.removed(g);
                vma.set_imap_group(None);
            }
        }
        for &(g, vma) in self.placed {
            tree_insert(tree_of(trees, g), vma);
            groups.added(g);
            vma.set_imap_group(Some(g));
        }
    }
}

/// The part of a change's list in group `g`.
fn mine<'a>(list: &[(usize, &'a Arc<Vma>)], g: usize) -> Vec<(usize, &'a Arc<Vma>)> {
    list.iter().copied().filter(|&(h, _)| h == g).collect()
}

fn tree_of<'t>(trees: &'t mut [(Option<usize>, &mut Tree)], g: usize) -> &'t mut Tree {
    let at = trees
        .iter()
        .position(|(t, _)| t.is_none() || *t == Some(g))
        .unwrap_or(0);
    &mut *trees[at].1
}

pub(super) fn new_tree(config: &Policy) -> Tree {
    Itree::new(config.itree)
}

/// One tree behind its own lock, per group.
pub(super) type GroupLocks = Box<[CachePadded<RwSem<Tree>>]>;

pub(super) fn group_locks(config: &Policy, nr: usize) -> GroupLocks {
    (0..nr)
        .map(|_| {
            let mut lock = sem(config, new_tree(config));
            lock.mark_group();
            CachePadded::new(lock)
        })
        .collect()
}

/// Write-lock the groups `change` touches, in ascending order, and apply
/// it. With `probe`, each lock is tried first and the result says whether
/// any was held by someone else (what `adaptive` watches to convert back).
pub(super) fn apply_locked(
    groups: &Groups,
    locks: &GroupLocks,
    change: &Change<'_>,
    probe: bool,
) -> bool {
    let mut contended = false;
    let mut guards: SmallVec<[(usize, WriteGuard<'_, Tree>); 4]> = change
        .touched()
        .into_iter()
        .filter(|&g| g < locks.len())
        .map(|g| {
            let lock = &locks[g];
            let guard = match probe.then(|| lock.try_write()).flatten() {
                Some(guard) => guard,
                None => {
                    contended |= probe;
                    lock.write()
                }
            };
            (g, guard)
        })
        .collect();
    if crate::profile::counting() {
        // The same change a group at a time (the groups' trees are
        // independent), so that the recorder gives each group's lock the
        // lines of its own tree.
        for (g, t) in guards.iter_mut() {
            let g = *g;
            let (removed, placed) = (mine(change.removed, g), mine(change.placed, g));
            let part = Change {
                removed: &removed,
                placed: &placed,
            };
            part.apply(groups, &mut [(Some(g), &mut **t)]);
            crate::profile::lines_belong_to(locks[g].key());
        }
        return contended;
    }
    let mut trees: SmallVec<[(Option<usize>, &mut Tree); 4]> = guards
        .iter_mut()
        .map(|(g, t)| (Some(*g), &mut **t))
        .collect();
    change.apply(groups, &mut trees);
    contended
}

/// `single`: one tree under one rwsem, the kernel's `i_mmap` and
/// `i_mmap_rwsem`.
pub(super) struct Single {
    tree: RwSem<Tree>,
}

impl Single {
    pub(super) fn new(config: &Policy) -> Single {
        Single {
            tree: sem(config, new_tree(config)),
        }
    }

    pub(super) fn update(&self, groups: &Groups, change: &Change<'_>) {
        let mut t = self.tree.write();
        change.apply(groups, &mut [(None, &mut *t)]);
    }

    pub(super) fn walk(&self, first: u64, last: u64, f: Visit<'_>) -> ControlFlow<()> {
        tree_visit(&self.tree.read(), first, last, f)
    }

    pub(super) fn each_tree(&self, f: EachTree<'_>) {
        f(Some(0), &self.tree.read())
    }
}

/// `split`: a tree per group, all under one rwsem. Changes still
/// serialise on the lock, but each edits a smaller tree.
pub(super) struct Split {
    trees: RwSem<Box<[Tree]>>,
}

impl Split {
    pub(super) fn new(config: &Policy, nr: usize) -> Split {
        Split {
            trees: sem(config, (0..nr).map(|_| new_tree(config)).collect()),
        }
    }

    pub(super) fn update(&self, groups: &Groups, change: &Change<'_>) {
        let touched = change.touched();
        let mut all = self.trees.write();
        let mut trees: SmallVec<[(Option<usize>, &mut Tree); 4]> = all
            .iter_mut()
            .enumerate()
            .filter(|(g, _)| touched.contains(g))
            .map(|(g, t)| (Some(g), t))
            .collect();
        change.apply(groups, &mut trees);
    }

    pub(super) fn walk(&self, first: u64, last: u64, f: Visit<'_>) -> ControlFlow<()> {
        let trees = self.trees.read();
        for t in trees.iter() {
            tree_visit(t, first, last, f)?;
        }
        ControlFlow::Continue(())
    }

    pub(super) fn each_tree(&self, f: EachTree<'_>) {
        for (g, t) in self.trees.read().iter().enumerate() {
            f(Some(g), t)
        }
    }
}

/// `split-locked`: a tree and an rwsem per group. Changes in different
/// groups run in parallel; a walk read-locks every group, in index order
/// (the order changes take them too), and so holds as many locks as there
/// are groups.
pub(super) struct SplitLocked {
    groups: GroupLocks,
}

impl SplitLocked {
    pub(super) fn new(config: &Policy, nr: usize) -> SplitLocked {
        SplitLocked {
            groups: group_locks(config, nr),
        }
    }

    pub(super) fn update(&self, groups: &Groups, change: &Change<'_>) {
        apply_locked(groups, &self.groups, change, false);
    }

    pub(super) fn walk(&self, first: u64, last: u64, f: Visit<'_>) -> ControlFlow<()> {
        // Every lock first, then the visit: the walk sees one consistent
        // set, as a walk under the kernel's single lock does.
        let guards: Vec<_> = self.groups.iter().map(|l| l.read()).collect();
        for (t, l) in guards.iter().zip(self.groups.iter()) {
            let walked = tree_visit(t, first, last, f);
            // Each group's tree is its own lock's data.
            crate::profile::lines_belong_to(l.key());
            walked?;
        }
        ControlFlow::Continue(())
    }

    pub(super) fn each_tree(&self, f: EachTree<'_>) {
        let guards: Vec<_> = self.groups.iter().map(|l| l.read()).collect();
        for (g, t) in guards.iter().enumerate() {
            f(Some(g), t)
        }
    }
}

/// `distributed`: a tree and a lock per group under a top-level rwsem.
/// A change takes the top lock shared and then its groups' locks; a walk
/// takes the top lock exclusive, which excludes every change, and then
/// reads the trees without their locks: one lock, however many groups.
pub(super) struct Distributed {
    top: RwSem<GroupLocks>,
}

impl Distributed {
    pub(super) fn new(config: &Policy, nr: usize) -> Distributed {
        Distributed {
            top: sem(config, group_locks(config, nr)),
        }
    }

    pub(super) fn update(&self, groups: &Groups, change: &Change<'_>) {
        let top = self.top.read();
        apply_locked(groups, &top, change, false);
    }

    pub(super) fn walk(&self, first: u64, last: u64, f: Visit<'_>) -> ControlFlow<()> {
        let mut top = self.top.write();
        // Exclusive on the top lock, no change holds or waits for a group
        // lock, so the trees are reached through `&mut` without locking.
        for l in top.iter_mut() {
            tree_visit(l.get_mut(), first, last, f)?;
        }
        ControlFlow::Continue(())
    }

    pub(super) fn each_tree(&self, f: EachTree<'_>) {
        let mut top = self.top.write();
        for (g, l) in top.iter_mut().enumerate() {
            f(Some(g), l.get_mut())
        }
    }
}

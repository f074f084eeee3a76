//! A file's reverse map (`i_mmap`): every VMA that maps the file, keyed by
//! the page-offset interval it maps, behind one accessor whatever design
//! keeps it.
//!
//! When hundreds of CPUs exec the same dynamically linked programs, every
//! exec links and unlinks VMAs of `libc.so` and `ld.so`, and those files'
//! single tree and single reader-writer lock become the bottleneck. The
//! designs here are the remedies proposed for that, chosen at run time
//! by the [`Policy`]'s [`ImapDesign`]:
//!
//! | design | trees | locks | insert / remove | whole-file walk |
//! |---|---|---|---|---|
//! | `single` | 1 | 1 rwsem | write lock | read lock |
//! | `split` | one per group | 1 rwsem | write lock, one group's tree | read lock, every tree |
//! | `split-locked` | one per group | one rwsem per group | that group's write lock | every group's read lock, in index order |
//! | `distributed` | one per group | one per group + a top rwsem | top shared, then the group's write lock | top exclusive only |
//! | `adaptive` | 1, later one per group | as `single`, later as `distributed` | try-lock; after [`AdaptiveConfig::convert_after`](crate::policy::AdaptiveConfig::convert_after) failures converts | as the mode in force |
//!
//! A *group* is a NUMA node, or a set of CPUs on a machine with one node
//! ([`GroupBy`]); groups come from a [`Topology`], real or emulated. A VMA
//! is placed in a group when it is linked ([`Placement`]) and stays there
//! until it is unlinked; a VMA that replaces another of the same file (a
//! split, a merge, a move) and the VMA that `fork` makes go into the group
//! of the VMA they come from.
//!
//! Callers see neither trees nor locks: [`IMap::visit_overlap`],
//! [`IMap::visit_all`], [`IMap::count`], [`IMap::is_mapped`]. Only the
//! address space links and unlinks VMAs (crate-private `update`), so the
//! reverse map cannot disagree with the address spaces' maps; the
//! invariant checker ([`IMap::entries`]) verifies exactly that.
//!
//! ```
//! use std::sync::Arc;
//! use mm::policy::{ImapDesign, Policy};
//! use mm::{MapFlags, Prot};
//!
//! let policy = Arc::new(Policy { imap: ImapDesign::Distributed, ..Policy::default() });
//! let libc = policy.file("libc.so.6", 1 << 20);
//! let mm = policy.mm();
//! mm.mmap(0, 8192, Prot::READ, MapFlags::PRIVATE, Some(&libc), 0).unwrap();
//! assert_eq!(libc.imap().count(), 1);
//! let mut hits = 0;
//! libc.imap().visit_overlap(1, 1, |_vma| { hits += 1; std::ops::ControlFlow::Continue(()) });
//! assert_eq!(hits, 1);
//! drop(mm); // an address space that goes away unlinks its VMAs
//! assert!(!libc.imap().is_mapped());
//! ```

use std::fmt;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use smallvec::SmallVec;

use crate::itree::Itree;
use crate::lock::RwSem;
use crate::lockstat::LockClass;
use crate::policy::{GroupBy, ImapDesign, Placement, Policy, Topology};
use crate::topology;
use crate::vma::Vma;

mod adaptive;
mod designs;

use adaptive::Adaptive;
use designs::{Change, Distributed, Single, Split, SplitLocked};

/// One tree of VMAs keyed by `(pgoff first, pgoff last, VMA address)`.
/// The address is the VMA's identity: unique while the tree holds the
/// VMA's `Arc`, which keeps it alive.
pub(crate) type Tree = Itree<Arc<Vma>>;

/// The interval a VMA maps, in pages of its file.
pub(crate) fn key(vma: &Arc<Vma>) -> (u64, u64, u64) {
    let (first, last) = vma.pages();
    (first, last, Arc::as_ptr(vma) as usize as u64)
}

pub(crate) fn tree_insert(tree: &mut Tree, vma: &Arc<Vma>) {
    let (first, last, id) = key(vma);
    // The address space links a VMA once, with pgoff + pages in range
    // (mmap refuses offsets that would wrap), so the insert cannot fail.
    let linked = tree.insert(first, last, id, Arc::clone(vma));
    debug_assert!(linked.is_ok(), "i_mmap insert failed: {linked:?}");
}

pub(crate) fn tree_remove(tree: &mut Tree, vma: &Arc<Vma>) -> bool {
    let (first, last, id) = key(vma);
    tree.remove(first, last, id).is_some()
}

/// Visit every VMA of `tree` whose interval meets `[first, last]`.
pub(crate) fn tree_visit(
    tree: &Tree,
    first: u64,
    last: u64,
    f: &mut dyn FnMut(&Arc<Vma>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    tree.visit_overlap(first, last, |e| f(e.value))
}

/// A link or unlink request: the VMA and, for a link, the group of the VMA
/// it comes from.
pub(crate) struct Link<'a> {
    pub(crate) vma: &'a Arc<Vma>,
    pub(crate) hint: Option<u32>,
}

/// How groups are numbered: the group of a CPU, and how many there are.
#[derive(Debug)]
pub(crate) struct Groups {
    nr: usize,
    by_node: bool,
    cpus_per_group: usize,
    placement: Placement,
    topology: Arc<Topology>,
    /// VMAs per group, for [`Placement::LeastPopulated`] and
    /// [`IMap::count`]; each count changes only under its group's lock (or
    /// the one lock that covers every group).
    population: Box<[CachePadded<AtomicUsize>]>,
}

impl Groups {
    fn new(config: &Policy, single: bool) -> Groups {
        let topology = config.topology();
        let by_node = match config.group_by {
            GroupBy::Node => true,
            GroupBy::Auto => topology.nr_nodes() > 1,
            GroupBy::Cpus(_) => false,
        };
        let cpus_per_group = match config.group_by {
            GroupBy::Cpus(n) => n.max(1),
            _ => 1,
        };
        let nr = if single {
            1
        } else if by_node {
            topology.nr_nodes().max(1)
        } else {
            topology.nr_cpus().div_ceil(cpus_per_group).max(1)
        };
        Groups {
            nr,
            by_node,
            cpus_per_group,
            placement: config.placement,
            topology,
            population: (0..nr)
                .map(|_| CachePadded::new(AtomicUsize::new(0)))
                .collect(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.nr
    }

    /// The group a VMA goes to: its parent's, else by placement.
    pub(crate) fn choose(&self, hint: Option<u32>) -> usize {
        if let Some(h) = hint {
            if (h as usize) < self.nr {
                return h as usize;
            }
        }
        if self.nr == 1 {
            return 0;
        }
        match self.placement {
            Placement::Local => {
                let cpu = topology::current_cpu();
                let g = if self.by_node {
                    self.topology.node_of(cpu)
                } else {
                    cpu / self.cpus_per_group
                };
                g % self.nr
            }
            Placement::LeastPopulated => (0..self.nr)
                .min_by_key(|&g| self.population[g].load(Ordering::Relaxed))
                .unwrap_or(0),
        }
    }

    pub(crate) fn added(&self, group: usize) {
        self.population[group].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn removed(&self, group: usize) {
        self.population[group].fetch_sub(1, Ordering::Relaxed);
    }

    fn total(&self) -> usize {
        self.population
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .sum()
    }

    fn population(&self, group: usize) -> usize {
        self.population[group].load(Ordering::Relaxed)
    }
}

/// Build a lock of the configured kind in the `i_mmap` class.
pub(crate) fn sem<T>(config: &Policy, value: T) -> RwSem<T> {
    RwSem::new(config.lock, LockClass::IMmap, value)
}

enum Design {
    Single(Single),
    Split(Split),
    SplitLocked(SplitLocked),
    Distributed(Distributed),
    Adaptive(Adaptive),
}

/// A file's reverse map: the set of VMAs that map the file, in one of the
/// [`ImapDesign`]s. See the [module documentation](self).
pub struct IMap {
    policy: Arc<Policy>,
    groups: Groups,
    design: Design,
}

/// A VMA as the reverse map holds it, for checkers: the group it is in and
/// the page interval it is keyed by.
#[derive(Debug, Clone)]
pub struct MapEntry {
    /// The group holding it.
    pub group: usize,
    /// First page offset.
    pub first: u64,
    /// Last page offset (inclusive).
    pub last: u64,
    /// The VMA.
    pub vma: Arc<Vma>,
}

impl IMap {
    /// An empty reverse map, kept as `policy` says.
    pub(crate) fn new(policy: &Arc<Policy>) -> IMap {
        let config = &**policy;
        let single = config.imap == ImapDesign::Single;
        let groups = Groups::new(config, single);
        let design = match config.imap {
            ImapDesign::Single => Design::Single(Single::new(config)),
            ImapDesign::Split => Design::Split(Split::new(config, groups.len())),
            ImapDesign::SplitLocked => Design::SplitLocked(SplitLocked::new(config, groups.len())),
            ImapDesign::Distributed => Design::Distributed(Distributed::new(config, groups.len())),
            ImapDesign::Adaptive => Design::Adaptive(Adaptive::new(config, groups.len())),
        };
        IMap {
            policy: Arc::clone(policy),
            groups,
            design,
        }
    }

    /// The policy the map is kept by (its file's).
    pub(crate) fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// The design in force now: the configured one, except that an
    /// `adaptive` map reports `distributed` once it has converted.
    pub fn mode(&self) -> ImapDesign {
        match &self.design {
            Design::Adaptive(a) if a.is_distributed() => ImapDesign::Distributed,
            _ => self.policy.imap,
        }
    }

    /// How many times an `adaptive` map has converted (to `distributed`,
    /// and back); 0 for the other designs.
    pub fn conversions(&self) -> u64 {
        match &self.design {
            Design::Adaptive(a) => a.conversions(),
            _ => 0,
        }
    }

    /// Failed try-locks an `adaptive` map has counted towards converting.
    #[cfg(test)]
    pub(crate) fn adaptive_failures(&self) -> u32 {
        match &self.design {
            Design::Adaptive(a) => a.failures(),
            _ => 0,
        }
    }

    /// Number of groups (1 for `single`).
    pub fn nr_groups(&self) -> usize {
        self.groups.len()
    }

    /// VMAs in group `group` (0 for a group that does not exist).
    pub fn group_population(&self, group: usize) -> usize {
        if group < self.groups.len() {
            self.groups.population(group)
        } else {
            0
        }
    }

    /// Number of VMAs mapping the file. Reads counters only: takes no
    /// lock, so it may be stale by the changes in flight.
    pub fn count(&self) -> usize {
        self.groups.total()
    }

    /// Whether any VMA maps the file (the kernel's `mapping_mapped`);
    /// lock-free like [`count`](Self::count).
    pub fn is_mapped(&self) -> bool {
        self.count() > 0
    }

    /// Call `f` on every VMA that maps a page in `[first, last]` (page
    /// offsets, inclusive), under the locks the design takes for a
    /// whole-file walk; `f` may stop the walk with `Break`. `f` must not
    /// map or unmap this file (the walk holds its locks). A range with
    /// `first > last` visits nothing.
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// let file = mm::File::new("data", 1 << 20);
    /// let mut n = 0;
    /// file.imap().visit_overlap(0, u64::MAX, |_| { n += 1; ControlFlow::Continue(()) });
    /// assert_eq!(n, 0);
    /// ```
    pub fn visit_overlap(
        &self,
        first: u64,
        last: u64,
        mut f: impl FnMut(&Arc<Vma>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if first > last {
            return ControlFlow::Continue(());
        }
        self.walk(first, last, &mut f)
    }

    /// Call `f` on every VMA that maps the file; as
    /// [`visit_overlap`](Self::visit_overlap) over every page.
    pub fn visit_all(&self, mut f: impl FnMut(&Arc<Vma>) -> ControlFlow<()>) -> ControlFlow<()> {
        self.walk(0, u64::MAX, &mut f)
    }

    fn walk(
        &self,
        first: u64,
        last: u64,
        f: &mut dyn FnMut(&Arc<Vma>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        match &self.design {
            Design::Single(d) => d.walk(first, last, f),
            Design::Split(d) => d.walk(first, last, f),
            Design::SplitLocked(d) => d.walk(first, last, f),
            Design::Distributed(d) => d.walk(first, last, f),
            Design::Adaptive(d) => d.walk(first, last, f),
        }
    }

    /// Unlink `remove` and link `insert` as one change: the lock a design
    /// takes for a change is taken once per group touched, as the kernel
    /// takes `i_mmap_rwsem` once per VMA adjustment. Every VMA of
    /// `remove` must be linked here and every VMA of `insert` not; the
    /// address space's edits keep that.
    pub(crate) fn update(&self, remove: &[&Arc<Vma>], insert: &[Link<'_>]) {
        if remove.is_empty() && insert.is_empty() {
            return;
        }
        let groups = &self.groups;
        // On the stack, as in `relink_files`; filled where they lie, since
        // moving a collected one out copies all its inline slots, and
        // `fork` makes this call once per file VMA.
        let mut placed: SmallVec<[(usize, &Arc<Vma>); 8]> = SmallVec::new();
        placed.extend(insert.iter().map(|l| (groups.choose(l.hint), l.vma)));
        let mut removed: SmallVec<[(usize, &Arc<Vma>); 8]> = SmallVec::new();
        removed.extend(remove.iter().map(|v| (v.imap_group().unwrap_or(0), *v)));
        let change = Change {
            removed: &removed,
            placed: &placed,
        };
        match &self.design {
            Design::Single(d) => d.update(groups, &change),
            Design::Split(d) => d.update(groups, &change),
            Design::SplitLocked(d) => d.update(groups, &change),
            Design::Distributed(d) => d.update(groups, &change),
            Design::Adaptive(d) => d.update(groups, &change),
        }
    }

    /// Every VMA the map holds, with its group and key, taken under the
    /// locks of a whole-file walk: what invariant checkers compare with
    /// the address spaces' maps.
    pub fn entries(&self) -> Vec<MapEntry> {
        let mut out = Vec::new();
        let mut push = |group: Option<usize>, tree: &Tree| {
            let _ = tree.visit_all(|e| {
                out.push(MapEntry {
                    group: group.or(e.value.imap_group()).unwrap_or(usize::MAX),
                    first: e.first,
                    last: e.last,
                    vma: Arc::clone(e.value),
                });
                ControlFlow::Continue(())
            });
        };
        match &self.design {
            Design::Single(d) => d.each_tree(&mut push),
            Design::Split(d) => d.each_tree(&mut push),
            Design::SplitLocked(d) => d.each_tree(&mut push),
            Design::Distributed(d) => d.each_tree(&mut push),
            Design::Adaptive(d) => d.each_tree(&mut push),
        }
        out
    }

    /// Check every tree's invariants, that each VMA is keyed by its own
    /// interval and recorded in the group it is in, and that the per-group
    /// counters match the trees.
    pub fn validate(&self) -> Result<(), String> {
        let mut err: Option<String> = None;
        let mut per_group = vec![0usize; self.groups.len()];
        let mut check = |tree_group: Option<usize>, tree: &Tree| {
            if err.is_some() {
                return;
            }
            if let Err(e) = tree.validate() {
                err = Some(format!("group {tree_group:?}: {e}"));
                return;
            }
            let _ = tree.visit_all(|e| {
                let (first, last, id) = key(e.value);
                if (e.first, e.last, e.id) != (first, last, id) {
                    err = Some(format!("group {tree_group:?}: VMA keyed by a stale interval"));
                    return ControlFlow::Break(());
                }
                let recorded = e.value.imap_group();
                let group = match (tree_group, recorded) {
                    (Some(g), Some(r)) if g == r => g,
                    (None, Some(r)) => r,
                    _ => {
                        err = Some(format!(
                            "tree of group {tree_group:?} holds a VMA that says it is in group {recorded:?}"
                        ));
                        return ControlFlow::Break(());
                    }
                };
                match per_group.get_mut(group) {
                    Some(n) => *n += 1,
                    None => {
                        err = Some(format!("VMA in group {group}, beyond the {} groups", per_group.len()));
                        return ControlFlow::Break(());
                    }
                }
                ControlFlow::Continue(())
            });
        };
        match &self.design {
            Design::Single(d) => d.each_tree(&mut check),
            Design::Split(d) => d.each_tree(&mut check),
            Design::SplitLocked(d) => d.each_tree(&mut check),
            Design::Distributed(d) => d.each_tree(&mut check),
            Design::Adaptive(d) => d.each_tree(&mut check),
        }
        if let Some(e) = err {
            return Err(e);
        }
        for (g, n) in per_group.iter().enumerate() {
            if *n != self.groups.population(g) {
                return Err(format!(
                    "group {g}: {} VMAs but its counter says {}",
                    n,
                    self.groups.population(g)
                ));
            }
        }
        Ok(())
    }
}

impl fmt::Debug for IMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IMap")
            .field("design", &self.policy.imap)
            .field("mode", &self.mode())
            .field("groups", &self.groups.len())
            .field("count", &self.count())
            .finish()
    }
}

#[cfg(test)]
mod tests;

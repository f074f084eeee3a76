//! anon_vma: the reverse map of anonymous pages. It ties a VMA's
//! anonymous pages to every VMA that may map them: after `fork`, the
//! parent's and its children's.
//!
//! # Objects
//!
//! - [`AnonVma`]: made by a VMA's first write fault (or shared with a
//!   compatible neighbour's), and one per VMA per `fork` in the child. A
//!   forked child's anon_vma has the parent's as `parent` and the
//!   family's first anon_vma as `root`.
//! - A chain entry (the kernel's `anon_vma_chain`), one per VMA: the VMA
//!   is linked into the tree of every anon_vma on its chain (its own and,
//!   after `fork`, every ancestor's), so a page of an ancestor's anon_vma
//!   finds every VMA that may map it.
//! - The lock: one reader-writer lock per family, on the root (as the
//!   kernel locks `anon_vma->root->rwsem`). It guards every tree of the
//!   family, which is why forked tasks of one parent all contend on it.
//!
//! # The end-only rule
//!
//! A chain entry is keyed by the first page offset of its VMA and stores
//! the last one beside the key. An adjustment that only moves a VMA's end
//! (the common `brk` growth and shrink) then changes no key: with the rule
//! on ([`Policy::anon_rule`](crate::policy::Policy::anon_rule)) it updates the stored end without the lock.
//! The lock is taken when an entry is inserted (a new VMA, a split piece,
//! a fork), removed (unmap, or a merge that imports a neighbour's pages),
//! or rekeyed (the start moves). With the rule off every adjustment of a
//! VMA with an anon_vma takes it, as today's kernel does.
//!
//! Counting the acquisitions, with the `lockstat` feature:
//!
//! ```
//! use mm::lockstat::{self, LockClass};
//! use mm::{Access, MapFlags, Mm, Prot};
//!
//! let mm = Mm::default(); // the rule is on by default
//! let rw = Prot::READ | Prot::WRITE;
//! let a = mm.mmap(0, 8192, rw, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0).unwrap();
//! mm.fault(a, Access::Write).unwrap(); // anon_vma_prepare: takes the lock
//! let anon = mm.find_vma(a).unwrap().anon().unwrap().anon_vma.clone();
//! assert_eq!(anon.entries(), vec![(a >> 12, (a >> 12) + 1)]);
//! let before = lockstat::snapshot();
//! mm.munmap(a + 4096, 4096).unwrap(); // only the end moves
//! let used = lockstat::snapshot().since(&before);
//! assert_eq!(used.class(LockClass::AnonVma).acquisitions, 0);
//! assert_eq!(anon.entries(), vec![(a >> 12, a >> 12)]);
//! ```

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::itree::{Itree, ItreeKind};
use crate::lock::{LockKind, RwSem};
use crate::lockstat::LockClass;

/// One VMA's chain entry: its page-offset range, as the trees of its
/// chain's anon_vmas hold it. The end is outside the key so that it can
/// move without the lock (see the module docs).
#[derive(Debug)]
pub(crate) struct Avc {
    first: u64,
    last: AtomicU64,
}

impl Avc {
    fn new(first: u64, last: u64) -> Arc<Avc> {
        Arc::new(Avc {
            first,
            last: AtomicU64::new(last),
        })
    }

    fn key(self: &Arc<Avc>) -> (u64, u64, u64) {
        (self.first, self.first, Arc::as_ptr(self) as usize as u64)
    }
}

/// Every tree of one family (keyed by anon_vma id), under the root's lock.
#[derive(Debug, Default)]
struct Family {
    trees: HashMap<u64, Itree<Arc<Avc>>>,
}

/// An anon_vma. See the [module documentation](self).
#[derive(Debug)]
pub struct AnonVma {
    id: u64,
    parent: Option<Arc<AnonVma>>,
    /// The family's root; `None` when this is the root.
    root: Option<Arc<AnonVma>>,
    /// The family's lock and trees: made with the root, shared by every
    /// member (the kernel reaches it through `anon_vma->root`).
    family: Arc<RwSem<Family>>,
}

static NEXT_ANON_ID: AtomicU64 = AtomicU64::new(1);

/// A new anon_vma id, unique in the process. Each thread takes ids from
/// the shared counter in blocks, so that workers making anon_vmas in their
/// own address spaces do not bounce one cache line between CPUs per fault
/// (the kernel's anon_vmas have no global id at all).
fn next_anon_id() -> u64 {
    const BLOCK: u64 = 1024;
    thread_local! {
        static IDS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
    }
    IDS.with(|ids| {
        let (mut next, mut end) = ids.get();
        if next == end {
            next = NEXT_ANON_ID.fetch_add(BLOCK, Ordering::Relaxed);
            end = next + BLOCK;
        }
        ids.set((next + 1, end));
        next
    })
}

impl AnonVma {
    /// A new family's root.
    pub(crate) fn new_root(lock: LockKind) -> Arc<AnonVma> {
        Arc::new(AnonVma {
            id: next_anon_id(),
            parent: None,
            root: None,
            family: Arc::new(RwSem::new(lock, LockClass::AnonVma, Family::default())),
        })
    }

    /// A child of `parent` in its family.
    fn new_child(parent: &Arc<AnonVma>) -> Arc<AnonVma> {
        Arc::new(AnonVma {
            id: next_anon_id(),
            parent: Some(Arc::clone(parent)),
            root: Some(Arc::clone(parent.root())),
            family: Arc::clone(&parent.family),
        })
    }

    /// A number unique to this anon_vma.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The anon_vma this one was forked from, if any.
    pub fn parent(&self) -> Option<&Arc<AnonVma>> {
        self.parent.as_ref()
    }

    /// The family's root (itself for a root).
    pub fn root(self: &Arc<AnonVma>) -> &Arc<AnonVma> {
        self.root.as_ref().unwrap_or(self)
    }

    /// The page ranges `(first, last)` of the VMAs linked to this
    /// anon_vma, in key order, read under the family lock (shared): what
    /// an rmap walk of one of its pages would search.
    pub fn entries(self: &Arc<AnonVma>) -> Vec<(u64, u64)> {
        let family = self.family.read();
        let mut out = Vec::new();
        if let Some(tree) = family.trees.get(&self.id) {
            let _ = tree.visit_all(|e| {
                out.push((e.value.first, e.value.last.load(Ordering::Acquire)));
                ControlFlow::Continue(())
            });
        }
        out
    }
}

/// A VMA's link to its anon_vma: the kernel's `vma->anon_vma` and its
/// `anon_vma_chain`.
#[derive(Debug, Clone)]
pub struct AnonLink {
    /// The VMA's own anon_vma.
    pub anon_vma: Arc<AnonVma>,
    /// Its own anon_vma first, then every ancestor's it is linked to.
    chain: Arc<[Arc<AnonVma>]>,
    avc: Arc<Avc>,
}

/// The page range of a VMA, `(first, last)`.
pub(crate) type Pages = (u64, u64);

impl AnonLink {
    /// The anon_vmas whose trees hold this VMA: its own first, then its
    /// ancestors'.
    pub fn chain(&self) -> &[Arc<AnonVma>] {
        &self.chain
    }

    /// The chain holds ancestors' anon_vmas too (the VMA was forked): the
    /// kernel's `!list_is_singular(&vma->anon_vma_chain)`, which stops the
    /// VMA sharing its anon_vma with a new neighbour.
    pub fn inherited(&self) -> bool {
        self.chain.len() > 1
    }

    /// Whether two links name the same anon_vma.
    pub(crate) fn same(a: Option<&AnonLink>, b: Option<&AnonLink>) -> bool {
        match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(&a.anon_vma, &b.anon_vma),
            _ => false,
        }
    }

    /// `anon_vma_prepare`, first half: a link for a VMA covering `pages`
    /// to `anon_vma` (a neighbour's) or to a new family's root, not yet
    /// linked into any tree. [`install`](AnonLink::install) gives it to
    /// the VMA.
    pub(crate) fn prepare(
        anon_vma: Option<Arc<AnonVma>>,
        lock: LockKind,
        pages: Pages,
    ) -> AnonLink {
        let anon_vma = anon_vma.unwrap_or_else(|| AnonVma::new_root(lock));
        AnonLink {
            chain: Arc::from([Arc::clone(&anon_vma)]),
            anon_vma,
            avc: Avc::new(pages.0, pages.1),
        }
    }

    /// `anon_vma_prepare`, second half: makes this prepared link `cell`'s
    /// (a VMA's) unless a racing fault's link got there first, and returns
    /// the link in force.
    ///
    /// As in the kernel, racing faults of one VMA each prepare a link, and
    /// the first to store it wins; the others discard theirs, which no
    /// tree holds yet. None of them sleeps waiting for another's
    /// preparation: the kernel's check-and-store is a few instructions
    /// under `mm->page_table_lock`, a spinlock. (With the cell's own
    /// `get_or_init` running the whole preparation, the second of two
    /// threads faulting one VMA slept on a futex until the first was done:
    /// at 2 threads that made malloc1, whose two threads' mappings merge
    /// into one VMA, sleep at every operation.) The winner links its entry
    /// while it holds the family's lock, so anyone who takes that lock
    /// finds the VMA linked once its link is visible.
    pub(crate) fn install(self, cell: &OnceLock<AnonLink>) -> &AnonLink {
        let family = Arc::clone(&self.anon_vma.family);
        let mut family = family.write();
        let mine = Arc::clone(&self.avc);
        // The closure only moves the prepared link in: the cell is busy
        // for a store's length, not for a preparation's.
        let link = cell.get_or_init(|| self);
        if Arc::ptr_eq(&link.avc, &mine) {
            link.link_all(&mut family);
        }
        link
    }

    /// `anon_vma_fork`: the child VMA's link, covering `pages`: a new
    /// anon_vma under this one, and the parent's chain behind it.
    pub(crate) fn fork(&self, pages: Pages) -> AnonLink {
        let own = AnonVma::new_child(&self.anon_vma);
        let chain: Vec<Arc<AnonVma>> = std::iter::once(Arc::clone(&own))
            .chain(self.chain.iter().cloned())
            .collect();
        let link = AnonLink {
            anon_vma: own,
            chain: chain.into(),
            avc: Avc::new(pages.0, pages.1),
        };
        link.link_all(&mut link.anon_vma.family.write());
        link
    }

    fn link_all(&self, family: &mut Family) {
        let (first, last, id) = self.avc.key();
        for a in self.chain.iter() {
            let tree = family
                .trees
                .entry(a.id)
                .or_insert_with(|| Itree::new(ItreeKind::default()));
            let linked = tree.insert(first, last, id, Arc::clone(&self.avc));
            debug_assert!(linked.is_ok(), "anon_vma chain entry linked twice");
        }
    }

    fn unlink_all(&self, family: &mut Family) {
        let (first, last, id) = self.avc.key();
        for a in self.chain.iter() {
            if let Some(tree) = family.trees.get_mut(&a.id) {
                let removed = tree.remove(first, last, id);
                debug_assert!(removed.is_some(), "anon_vma chain entry not linked");
                if tree.is_empty() {
                    family.trees.remove(&a.id);
                }
            }
        }
    }
}

/// What an edit does to one VMA's chain entry.
enum Step<'a> {
    /// A new VMA (or piece) gets an entry of its own.
    Insert(&'a AnonLink),
    /// A VMA that is gone loses its entry.
    Remove(&'a AnonLink),
    /// A VMA whose start stayed put moves its end to `last`.
    MoveEnd(&'a AnonLink, u64),
}

impl Step<'_> {
    fn root(&self) -> &Arc<AnonVma> {
        match self {
            Step::Insert(l) | Step::Remove(l) | Step::MoveEnd(l, _) => l.anon_vma.root(),
        }
    }
}

/// Keep the anon_vma trees in step with an edit that replaces the VMAs
/// covering `old` (each its link and page range) by new ones (each its
/// link, to be finalised here, and page range).
///
/// A new VMA keeps the chain entry of the old VMA it continues (same
/// anon_vma entry, same first page), once; every other new VMA with a link
/// gets an entry of its own, and the entries of old VMAs nobody continues
/// are removed. Each family's lock is taken once, and only if an entry is
/// inserted or removed, or (with the rule off) an end moves.
pub(crate) fn relink(old: &[(&AnonLink, Pages)], new: &mut [(&mut AnonLink, Pages)], rule: bool) {
    let mut kept = vec![false; old.len()];
    let mut fresh = vec![false; new.len()];
    for (n, (link, pages)) in new.iter_mut().enumerate() {
        let continues = old.iter().enumerate().position(|(o, (ol, op))| {
            !kept[o] && Arc::ptr_eq(&ol.avc, &link.avc) && op.0 == pages.0
        });
        match continues {
            Some(o) => kept[o] = true,
            None => {
                link.avc = Avc::new(pages.0, pages.1);
                fresh[n] = true;
            }
        }
    }
    let mut steps: Vec<Step<'_>> = Vec::new();
    for (o, (link, _)) in old.iter().enumerate() {
        if !kept[o] {
            steps.push(Step::Remove(link));
        }
    }
    for (n, (link, pages)) in new.iter().enumerate() {
        if fresh[n] {
            steps.push(Step::Insert(link));
        } else if link.avc.last.load(Ordering::Relaxed) != pages.1 {
            steps.push(Step::MoveEnd(link, pages.1));
        }
    }
    // One family at a time, never two locks held at once.
    while let Some(first) = steps.first() {
        let root = Arc::clone(first.root());
        let (mine, rest): (Vec<_>, Vec<_>) = steps
            .into_iter()
            .partition(|s| Arc::ptr_eq(s.root(), &root));
        steps = rest;
        let needs_lock = !rule || mine.iter().any(|s| !matches!(s, Step::MoveEnd(..)));
        let mut guard = needs_lock.then(|| root.family.write());
        for s in &mine {
            match (s, guard.as_deref_mut()) {
                (Step::Remove(l), Some(family)) => l.unlink_all(family),
                (Step::Insert(l), Some(family)) => l.link_all(family),
                (Step::MoveEnd(l, last), _) => l.avc.last.store(*last, Ordering::Release),
                // Inserts and removes always hold the lock.
                (_, None) => {}
            }
        }
    }
}

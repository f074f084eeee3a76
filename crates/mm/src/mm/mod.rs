//! The address space: [`Mm`], its `mmap_lock`, and the edits every system
//! call is built from.
//!
//! Each system call lives in its own file (`mmap.rs`, `mprotect.rs`,
//! `mremap.rs`, `brk.rs`, `fault.rs`, `lifecycle.rs`, `madvise.rs`,
//! `mlock.rs`, `mseal.rs`, `vma_name.rs`, `pkey.rs`, `uffd.rs`); free-area
//! search is in `area.rs` and the merge rules in `merge.rs`. All of them edit the
//! VMA index through [`State::commit`], which write-locks the VMAs being
//! replaced before publishing their replacements.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::anon::{self, AnonLink};
use crate::file::File;
use crate::flags::VmFlags;
use crate::imap::Link;
use crate::index::{FaultHandle, IndexKind, Trusted, VmaIndex};
use crate::layout::Layout;
use crate::lock::{LockKind, ReadGuard, RwSem, WriteGuard};
use crate::lockstat::LockClass;
use crate::policy::Policy;
use crate::procmaps::{MapsEntry, SmapsEntry};
use crate::vma::Vma;
use crate::Errno;

mod area;
mod brk;
mod fault;
mod lifecycle;
mod madvise;
mod merge;
pub mod mlock;
mod mmap;
mod mprotect;
mod mremap;
mod mseal;
mod pkey;
#[cfg(test)]
mod tests;
mod uffd;
mod vma_name;

pub use fault::{Access, FaultError, FaultPath};
pub use lifecycle::{Image, Segment};
pub use madvise::Advice;
pub(crate) use vma_name::ANON_NAME_MAX;

/// An address space: VMAs in an index, an `mmap_lock`, and the heap and
/// stack bookkeeping `brk` and `/proc/<pid>/maps` need.
///
/// Every method takes `&self`: share an `Mm` between threads with an
/// `Arc` (threads mode) or give each worker its own (processes mode).
/// Its VMA index, the lock of its anon_vmas and the reverse map of the
/// shmem files it makes come from the [`Policy`] it was made under
/// ([`Policy::mm`]; [`Mm::default`] uses the default policy).
/// Calls that change the map take `mmap_lock` for write; page faults on a
/// maple-tree index take no `mmap_lock` at all on their fast path.
///
/// ```
/// use mm::{Access, MapFlags, Mm, Prot};
/// use std::sync::Arc;
///
/// let mm = Arc::new(Mm::default());
/// let a = mm.mmap(0, 1 << 20, Prot::READ | Prot::WRITE,
///                 MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0).unwrap();
/// let worker = {
///     let mm = Arc::clone(&mm);
///     std::thread::spawn(move || mm.fault(a + 4096, Access::Write).unwrap())
/// };
/// worker.join().unwrap();
/// assert_eq!(mm.fault(a - 4096, Access::Read), Err(mm::FaultError::Segv));
/// ```
pub struct Mm {
    layout: Layout,
    /// Also in `State`, for the edits that only see the locked state; set
    /// once, never replaced.
    policy: Arc<Policy>,
    /// The index's lockless handle, searched by the fault fast path.
    lockless: Option<FaultHandle>,
    state: MmapLock<State>,
}

/// What `mmap_lock` protects.
pub(crate) struct State {
    pub(crate) index: Box<dyn VmaIndex>,
    pub(crate) start_brk: u64,
    pub(crate) brk: u64,
    pub(crate) start_stack: u64,
    pub(crate) max_map_count: usize,
    /// The design choices: the anon_vma lock and rule, the policy of the
    /// shmem files `mmap` makes, what `fork` and `exec` inherit.
    pub(crate) policy: Arc<Policy>,
    /// The protection keys handed out (`mm->context.pkey_allocation_map`,
    /// see `pkey.rs`).
    pub(crate) pkey_map: u16,
    /// The execute-only protection key (`mm->context.execute_only_pkey`):
    /// -1 until allocated; 0 on a CPU without protection keys, as x86
    /// leaves it.
    pub(crate) exec_only_pkey: i32,
    /// `mm->def_flags` as far as `mlockall(MCL_FUTURE)` sets it
    /// (`VM_LOCKED`, `VM_LOCKONFAULT`): added to every later mapping.
    pub(crate) def_flags: VmFlags,
    /// The pages holding `MADV_GUARD_INSTALL` markers.
    pub(crate) guards: madvise::Guards,
    /// `mm->locked_vm`: pages of the `VM_LOCKED` VMAs. Kept by
    /// [`State::commit`], the one way VMAs enter or leave the index (a
    /// VMA's flags and bounds never change in place), so that the
    /// `RLIMIT_MEMLOCK` checks cost nothing however many VMAs there are;
    /// [`Mm::validate`] recounts it.
    pub(crate) locked_vm: u64,
}

impl Mm {
    /// An empty address space under `policy`, laid out as `layout` says
    /// ([`Policy::mm`] is the short way with the default layout).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use mm::policy::{IndexKind, Policy};
    /// use mm::{Layout, Mm};
    /// let policy = Arc::new(Policy { index: IndexKind::Maple, ..Policy::default() });
    /// let layout = Layout { max_map_count: 1000, ..Layout::default() };
    /// let mm = Mm::new(&policy, layout);
    /// assert_eq!(mm.index_kind(), IndexKind::Maple);
    /// assert_eq!(mm.layout().max_map_count, 1000);
    /// ```
    pub fn new(policy: &Arc<Policy>, layout: Layout) -> Mm {
        let (pkey_map, exec_only_pkey) = pkey::initial(&layout);
        Mm::with_state(
            policy,
            layout,
            |index| State {
                index,
                start_brk: 0,
                brk: 0,
                start_stack: 0,
                max_map_count: 0,
                policy: Arc::clone(policy),
                pkey_map,
                exec_only_pkey,
                def_flags: VmFlags::empty(),
                guards: madvise::Guards::default(),
                // Counted by `with_state` from the VMAs.
                locked_vm: 0,
            },
            &[],
            &[],
        )
    }

    fn with_state(
        policy: &Arc<Policy>,
        layout: Layout,
        state: impl FnOnce(Box<dyn VmaIndex>) -> State,
        vmas: &[Arc<Vma>],
        hints: &[Option<u32>],
    ) -> Mm {
        let mut index = policy.index.build();
        index
            .replace(&[], vmas)
            .expect("the VMAs of a new address space are ordered and disjoint");
        let lockless = index.fault_handle(Trusted(()));
        for (i, vma) in vmas.iter().enumerate() {
            if let Some(file) = vma.file() {
                let hint = hints.get(i).copied().flatten();
                file.imap().update(&[], &[Link { vma, hint }]);
            }
        }
        let mut state = state(index);
        state.max_map_count = layout.max_map_count;
        state.locked_vm = locked_pages(vmas);
        Mm {
            layout,
            policy: Arc::clone(policy),
            lockless,
            state: MmapLock::new(state),
        }
    }

    /// An address space holding the mappings of a real process, read from
    /// its `/proc/<pid>/smaps` (so that hidden flags such as `VM_ACCOUNT`
    /// and whether a VMA has an anon_vma are known; a VMA with anonymous
    /// pages shares the anon_vma of the VMA before it where the kernel's
    /// first fault would have reused it). `start_brk` and `brk`
    /// are the process's heap bounds; `start_stack` an address in its
    /// stack. Files are looked up by name in `files`; other paths get a
    /// file of their own whose size covers the mapping.
    ///
    /// Mappings above `task_size` (`[vsyscall]`) are not VMAs and are
    /// skipped. Fails with `EINVAL` if the mappings overlap or are not
    /// page-aligned.
    pub fn from_smaps(
        policy: &Arc<Policy>,
        layout: Layout,
        entries: &[SmapsEntry],
        start_brk: u64,
        brk: u64,
        start_stack: u64,
        files: &[Arc<File>],
    ) -> Result<Mm, Errno> {
        let mut by_name: Vec<Arc<File>> = files.to_vec();
        let mut vmas: Vec<Arc<Vma>> = Vec::new();
        for e in entries {
            let m = &e.maps;
            if m.start >= layout.task_size {
                continue;
            }
            if m.start >= m.end
                || !crate::flags::is_page_aligned(m.start | m.end)
                || vmas.last().is_some_and(|v| v.end() > m.start)
            {
                return Err(Errno::EINVAL);
            }
            let mut flags = e.flags - VmFlags::ACCESS;
            flags |= VmFlags::from_prot(m.prot);
            if e.flags.is_empty() {
                flags |= VmFlags::MAYREAD | VmFlags::MAYWRITE | VmFlags::MAYEXEC;
                if m.shared {
                    flags |= VmFlags::MAYSHARE | VmFlags::SHARED;
                }
            }
            // A named anonymous VMA shows `[anon:NAME]`; named shared
            // anonymous memory `[anon_shmem:NAME]` (a shmem file).
            let named = |prefix: &str| {
                m.name
                    .as_deref()
                    .and_then(|n| n.strip_prefix(prefix))
                    .and_then(|n| n.strip_suffix(']'))
                    .map(Arc::<str>::from)
            };
            let shmem_name = named("[anon_shmem:");
            let anon_name = named("[anon:").or_else(|| shmem_name.clone());
            let path = if shmem_name.is_some() {
                Some(crate::file::SHMEM_ZERO)
            } else if anon_name.is_some() {
                None
            } else {
                m.name.as_deref()
            };
            let special = matches!(path, Some(n) if n.starts_with('[')
                && n != "[heap]" && n != "[stack]");
            let file = match path {
                Some(n) if !n.starts_with('[') || special => {
                    let found = by_name.iter().find(|f| f.name() == n).cloned();
                    Some(found.unwrap_or_else(|| {
                        let f = policy.file(n, m.offset + (m.end - m.start));
                        by_name.push(Arc::clone(&f));
                        f
                    }))
                }
                _ => None,
            };
            if special {
                flags |= VmFlags::DONTEXPAND;
            }
            let pgoff = if file.is_some() {
                m.offset >> crate::PAGE_SHIFT
            } else {
                m.start >> crate::PAGE_SHIFT
            };
            let pages = (
                pgoff,
                pgoff.wrapping_add(((m.end - m.start) >> crate::PAGE_SHIFT) - 1),
            );
            let vma = Vma::new(m.start, m.end, flags, pgoff, file, None).named(anon_name);
            // The anon_vma is the previous VMA's where the kernel's first
            // fault here would have found it (`find_mergeable_anon_vma`):
            // the bss page after a program's data and the heap after it,
            // say, which `brk` never joins into one VMA but which share
            // one anon_vma, and so merge once a call changes both alike.
            if e.has_anon_pages {
                let shared = vmas
                    .last()
                    .filter(|prev| merge::anon_vma_compatible(prev, &vma))
                    .and_then(|prev| merge::reusable_anon_vma(prev));
                vma.set_anon_with(|| AnonLink::prepare(shared, policy.lock, pages));
            }
            vmas.push(Arc::new(vma));
        }
        let (pkey_map, exec_only_pkey) = pkey::initial(&layout);
        Ok(Mm::with_state(
            policy,
            layout,
            |index| State {
                index,
                start_brk,
                brk,
                start_stack,
                max_map_count: 0,
                policy: Arc::clone(policy),
                pkey_map,
                exec_only_pkey,
                def_flags: VmFlags::empty(),
                guards: madvise::Guards::default(),
                // Counted by `with_state` from the VMAs.
                locked_vm: 0,
            },
            &vmas,
            &[],
        ))
    }

    /// The layout this address space was built with.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Which VMA index it uses.
    pub fn index_kind(&self) -> IndexKind {
        self.policy().index
    }

    /// The policy it was made under.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Number of VMAs (`mm->map_count`).
    pub fn map_count(&self) -> usize {
        self.state.read().index.len()
    }

    /// The VMA containing `addr`, or else the next one above it (Linux's
    /// `find_vma`).
    pub fn find_vma(&self, addr: u64) -> Option<Arc<Vma>> {
        self.state.read().index.find_next(addr)
    }

    /// Every VMA, in address order.
    pub fn vmas(&self) -> Vec<Arc<Vma>> {
        self.state.read().vmas()
    }

    /// Current program break.
    pub fn brk_value(&self) -> u64 {
        self.state.read().brk
    }

    /// The map as `/proc/<pid>/maps` would print it: file mappings show
    /// their path and byte offset, the heap `[heap]`, the stack `[stack]`,
    /// shared anonymous memory `/dev/zero (deleted)`.
    pub fn maps(&self) -> Vec<MapsEntry> {
        let st = self.state.read();
        st.vmas().iter().map(|v| st.maps_entry(v)).collect()
    }

    /// [`maps`](Self::maps) as text, one line per VMA.
    pub fn proc_maps(&self) -> String {
        self.maps().iter().map(|e| format!("{e}\n")).collect()
    }

    /// Check the index's invariants and that VMAs are ordered, disjoint,
    /// page-aligned and inside the address space, that each file VMA
    /// is linked in its file's reverse map (and no other VMA is), and that
    /// the locked-page count matches the `VM_LOCKED` VMAs.
    pub fn validate(&self) -> Result<(), String> {
        let st = self.state.read();
        st.index.validate()?;
        let mut last_end = 0;
        let mut count = 0;
        let mut locked = 0;
        let mut err = None;
        st.index.for_each(&mut |v| {
            count += 1;
            locked += locked_pages(std::slice::from_ref(v));
            if err.is_none()
                && (v.start() < last_end
                    || v.start() >= v.end()
                    || !crate::flags::is_page_aligned(v.start() | v.end())
                    || v.end() > self.layout.task_size)
            {
                err = Some(format!("bad VMA [{:#x}, {:#x})", v.start(), v.end()));
            }
            if err.is_none() && v.file().is_some() != v.imap_group().is_some() {
                err = Some(format!(
                    "VMA [{:#x}, {:#x}) file {} but i_mmap group {:?}",
                    v.start(),
                    v.end(),
                    v.file().is_some(),
                    v.imap_group()
                ));
            }
            if v.lock().is_write_locked() && err.is_none() {
                err = Some(format!(
                    "retired VMA [{:#x}, {:#x}) still indexed",
                    v.start(),
                    v.end()
                ));
            }
            last_end = v.end();
        });
        if let Some(e) = err {
            return Err(e);
        }
        if count != st.index.len() {
            return Err(format!("index len {} but {count} VMAs", st.index.len()));
        }
        if st.locked_vm != locked {
            return Err(format!(
                "locked_vm {} but the VM_LOCKED VMAs hold {locked} pages",
                st.locked_vm
            ));
        }
        Ok(())
    }
}

/// Pages of the `VM_LOCKED` VMAs among `vmas`.
fn locked_pages(vmas: &[Arc<Vma>]) -> u64 {
    vmas.iter()
        .filter(|v| v.flags().contains(VmFlags::LOCKED))
        .map(|v| v.len() >> crate::PAGE_SHIFT)
        .sum()
}

impl Drop for Mm {
    /// An address space that goes away unlinks its file VMAs from their
    /// files' reverse maps, as `exit_mmap` does: a file must not keep a
    /// dead process's VMAs (nor, through them, itself) alive.
    fn drop(&mut self) {
        let st = self.state.get_mut();
        let all = st.vmas();
        relink_files(&all, &[]);
        relink_anon(&all, &mut [], st.policy.anon_rule);
    }
}

impl Default for Mm {
    /// An empty address space under the default [`Policy`] and layout.
    fn default() -> Mm {
        Mm::new(Policy::shared_default(), Layout::default())
    }
}

impl std::fmt::Debug for Mm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mm")
            .field("index", &self.policy.index)
            .field("map_count", &self.map_count())
            .finish()
    }
}

impl State {
    pub(crate) fn vmas(&self) -> Vec<Arc<Vma>> {
        let mut out = Vec::with_capacity(self.index.len());
        self.index.for_each(&mut |v| out.push(Arc::clone(v)));
        out
    }

    /// VMAs intersecting `[start, end)`.
    pub(crate) fn overlapping(&self, start: u64, end: u64) -> Vec<Arc<Vma>> {
        let mut out = Vec::new();
        self.index.overlapping(start, end, &mut out);
        out
    }

    /// The VMA that ends exactly at `addr`.
    pub(crate) fn ending_at(&self, addr: u64) -> Option<Arc<Vma>> {
        self.index.find_prev(addr).filter(|v| v.end() == addr)
    }

    /// The VMA that starts exactly at `addr`.
    pub(crate) fn starting_at(&self, addr: u64) -> Option<Arc<Vma>> {
        self.index.find(addr).filter(|v| v.start() == addr)
    }

    /// Replace `old` by `new` in the index: claim each old VMA's lock (so
    /// a fault holding it finishes and later faults fall back to
    /// `mmap_lock`), then publish.
    pub(crate) fn commit(&mut self, old: &[Arc<Vma>], new: Vec<Vma>) -> Vec<Arc<Vma>> {
        self.commit_with(old, new, false)
    }

    /// [`commit`](State::commit); with `overwritten`, the parts of `old`
    /// that `new` leaves are stored over by the caller's next commit (see
    /// [`VmaIndex::replace_before_overwrite`]).
    fn commit_with(
        &mut self,
        old: &[Arc<Vma>],
        mut new: Vec<Vma>,
        overwritten: bool,
    ) -> Vec<Arc<Vma>> {
        for v in old {
            v.lock().write_lock();
        }
        relink_anon(old, &mut new, self.policy.anon_rule);
        let new: Vec<Arc<Vma>> = new.into_iter().map(Arc::new).collect();
        // Every VMA in `old` is indexed, so counted: the subtraction is
        // exact (saturating only so that a broken caller shows up in
        // `validate`, not as a wrapped count).
        self.locked_vm = self
            .locked_vm
            .saturating_sub(locked_pages(old))
            .saturating_add(locked_pages(&new));
        // Every edit replaces VMAs it just read from the index by disjoint
        // pieces of the same ranges or of free space: replace's conditions
        // hold by construction, so its O(k log n) check is skipped.
        if overwritten {
            self.index.replace_before_overwrite(old, &new, Trusted(()));
        } else {
            self.index.replace_trusted(old, &new, Trusted(()));
        }
        relink_files(old, &new);
        new
    }

    /// Unmap `[start, end)` (both page-aligned), splitting the VMAs at
    /// either end. `ENOMEM` when a split in the middle of one VMA would
    /// exceed `max_map_count`; nothing changes then.
    pub(crate) fn unmap(&mut self, layout: &Layout, start: u64, end: u64) -> Result<(), Errno> {
        self.unmap_with(layout, start, end, false)
    }

    /// [`unmap`](State::unmap) for a mapping about to be made over
    /// `[start, end)` (`mmap_region`): the caller's next commit stores its
    /// VMA over the whole range, so the index may leave the unmapped VMAs'
    /// entries there for that store to overwrite, and the caller looks
    /// nothing up inside the range until then.
    pub(crate) fn unmap_for_mapping(
        &mut self,
        layout: &Layout,
        start: u64,
        end: u64,
    ) -> Result<(), Errno> {
        self.unmap_with(layout, start, end, true)
    }

    fn unmap_with(
        &mut self,
        layout: &Layout,
        start: u64,
        end: u64,
        overwritten: bool,
    ) -> Result<(), Errno> {
        let old = self.overlapping(start, end);
        let (Some(first), Some(last)) = (old.first(), old.last()) else {
            return Ok(());
        };
        if first.start() < start && end < first.end() && self.index.len() >= layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        self.unmap_check_sealed(&old, start)?;
        self.guards.remove(start, end);
        let mut keep = Vec::new();
        if first.start() < start {
            keep.push(first.resized(first.start(), start));
        }
        if last.end() > end {
            keep.push(last.resized(end, last.end()));
        }
        self.commit_with(&old, keep, overwritten);
        Ok(())
    }

    /// How `/proc/<pid>/maps` shows `v`.
    pub(crate) fn maps_entry(&self, v: &Vma) -> MapsEntry {
        let (offset, dev, inode, name) = match v.file() {
            Some(f) if f.name().starts_with('[') => {
                (0, "00:00".to_string(), 0, Some(f.name().to_string()))
            }
            Some(f) => (
                v.pgoff() << crate::PAGE_SHIFT,
                "00:00".to_string(),
                f.id(),
                // A named shared anonymous mapping shows its name.
                Some(match v.anon_name() {
                    Some(n) if f.is_shmem_zero() => format!("[anon_shmem:{n}]"),
                    _ => f.name().to_string(),
                }),
            ),
            None => {
                // vma_is_initial_heap / vma_is_initial_stack: the heap is
                // what strictly overlaps [start_brk, brk).
                let name = if v.start() < self.brk && v.end() > self.start_brk {
                    Some("[heap]".to_string())
                } else if v.start() <= self.start_stack && v.end() >= self.start_stack {
                    Some("[stack]".to_string())
                } else {
                    v.anon_name().map(|n| format!("[anon:{n}]"))
                };
                (0, "00:00".to_string(), 0, name)
            }
        };
        MapsEntry {
            start: v.start(),
            end: v.end(),
            prot: v.prot(),
            shared: v.is_shared(),
            offset,
            dev,
            inode,
            name,
        }
    }
}

/// Keep the anon_vma chains in step with an edit that replaces `old` by
/// `new` (see [`anon::relink`] for which edits take the lock).
pub(crate) fn relink_anon(old: &[Arc<Vma>], new: &mut [Vma], rule: bool) {
    let olds: Vec<(&AnonLink, anon::Pages)> = old
        .iter()
        .filter_map(|v| v.anon().map(|l| (l, v.pages())))
        .collect();
    let mut news: Vec<(&mut AnonLink, anon::Pages)> = new
        .iter_mut()
        .filter_map(|v| {
            let pages = v.pages();
            v.anon_mut().map(|l| (l, pages))
        })
        .collect();
    if !olds.is_empty() || !news.is_empty() {
        anon::relink(&olds, &mut news, rule);
    }
}

/// Keep the files' reverse maps in step with an edit that replaced `old`
/// by `new`: per file, one [`IMap`](crate::imap::IMap) change that
/// unlinks its old VMAs and links its new ones, as the kernel takes
/// `i_mmap_rwsem` once around a VMA adjustment. A new VMA goes into the
/// group of an old VMA of the same file, so a split, merge or move keeps
/// its group; a VMA with no predecessor is placed by the map's policy.
/// Files are changed in the order they first appear in `old`, then `new`.
pub(crate) fn relink_files(old: &[Arc<Vma>], new: &[Arc<Vma>]) {
    // The VMAs are grouped by file with one sort, not one scan of the
    // edit per file: an exec or exit removes every VMA of a process at
    // once (a kernbench compile job holds 300, 250 of them of 50 files),
    // and a scan per file made that quadratic, 15 % of a job's time. On the
    // stack: most changes touch a file or two and a few VMAs of each, and
    // `execl` makes one every few hundred nanoseconds. Each list is
    // filled where it lies: moving a collected one out copies all its
    // inline slots.
    //
    // (the file's address, the VMA's position in `old` then `new`, the
    // file).
    type Keyed<'a> = (usize, usize, &'a Arc<File>);
    let mut keyed: SmallVec<[Keyed<'_>; 8]> = SmallVec::new();
    keyed.extend(
        old.iter()
            .chain(new)
            .enumerate()
            .filter_map(|(i, v)| v.file().map(|f| (Arc::as_ptr(f) as usize, i, f))),
    );
    // Positions are distinct, so the order is total and the sort needs no
    // stability: each file's run lists its old VMAs, then its new ones.
    keyed.sort_unstable_by_key(|&(file, i, _)| (file, i));
    let mut runs: SmallVec<[&[Keyed<'_>]; 4]> = SmallVec::new();
    runs.extend(keyed.chunk_by(|a, b| a.0 == b.0));
    runs.sort_unstable_by_key(|run| run.first().map(|&(_, i, _)| i));
    let vma = |i: usize| old.get(i).or_else(|| new.get(i - old.len()));
    let mut removes: SmallVec<[&Arc<Vma>; 8]> = SmallVec::new();
    let mut links: SmallVec<[Link<'_>; 8]> = SmallVec::new();
    for run in runs {
        let Some(&(_, _, file)) = run.first() else {
            continue;
        };
        let split = run.partition_point(|&(_, i, _)| i < old.len());
        removes.clear();
        removes.extend(run[..split].iter().filter_map(|&(_, i, _)| vma(i)));
        let hint = removes
            .iter()
            .find_map(|v| v.imap_group())
            .and_then(|g| u32::try_from(g).ok());
        links.clear();
        links.extend(
            run[split..]
                .iter()
                .filter_map(|&(_, i, _)| vma(i).map(|vma| Link { vma, hint })),
        );
        file.imap().update(&removes, &links);
    }
}

/// `mmap_lock`: the model's kernel-style rwsem (kind `rwsem`), counted in
/// the `mmap_lock` lock class.
///
/// The kernel's `mmap_lock` is an rwsem, and threads contending for it
/// behave like one: measured on this project's 2-CPU VM against its own
/// kernel, two threads' `mmap1` ran at 0.47x one thread's, and the model
/// gives 0.38–0.45x on this lock against 0.66–0.72x on std's `RwLock`,
/// which lets the releasing thread take it straight back
/// (docs/RESULTS.md, "The rwsem's wake-up rule"). Its primitives come
/// from `crate::sync`, so the shuttle models see it.
///
/// Aligned to two cache lines (as the kernel aligns `mmap_lock` in
/// `mm_struct`): two address spaces allocated side by side, one per
/// process-mode worker, must not share the line their locks and state
/// live on, or independent workers slow each other down. And since the
/// lock starts the line, its state word has that line to itself and the
/// wait queue (`lock::rwsem::RawRwSem`): a thread spinning on it takes
/// nothing from the holder but the word.
#[repr(align(128))]
pub(crate) struct MmapLock<T> {
    inner: RwSem<T>,
}

impl<T> MmapLock<T> {
    fn new(value: T) -> Self {
        MmapLock {
            inner: RwSem::new(LockKind::Rwsem, LockClass::MmapLock, value),
        }
    }

    fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }

    pub(crate) fn read(&self) -> ReadGuard<'_, T> {
        self.inner.read()
    }

    pub(crate) fn write(&self) -> WriteGuard<'_, T> {
        self.inner.write()
    }
}

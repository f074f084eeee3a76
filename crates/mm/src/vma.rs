//! The VMA: one mapped range of an address space, and its lock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use crate::anon::AnonLink;
use crate::file::File;
use crate::flags::{Prot, VmFlags, PAGE_SHIFT};
use crate::vma_lock::VmaLock;

/// A virtual memory area: `[start, end)` with one protection, one set of
/// flags and one backing object.
///
/// A `Vma` is immutable once published in an index, except for its
/// anon_vma link, which the first write fault sets, and the record of the
/// i_mmap group holding it, which its file's reverse map keeps. An operation that
/// changes a VMA (split, merge, `mprotect`) write-locks it and publishes
/// new `Vma`s in its place; the old one stays write-locked for good, so a
/// fault that still holds a pointer to it fails its try-lock and looks
/// again under `mmap_lock`. This is the kernel's protocol (`vma_start_write`
/// until `mmap_write_unlock`) with replacement instead of in-place edits,
/// which lets readers hold references without a lock.
///
/// ```
/// use mm::{MapFlags, Mm, Prot};
/// let mm = Mm::default();
/// let a = mm.mmap(0, 8192, Prot::READ, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0).unwrap();
/// let vma = mm.find_vma(a).unwrap();
/// assert_eq!((vma.start(), vma.end()), (a, a + 8192));
/// assert_eq!(vma.prot(), Prot::READ);
/// assert!(vma.file().is_none());
/// ```
#[derive(Debug)]
pub struct Vma {
    start: u64,
    end: u64,
    flags: VmFlags,
    pgoff: u64,
    file: Option<Arc<File>>,
    anon: OnceLock<AnonLink>,
    lock: VmaLock,
    /// The i_mmap group of its file holding it, `UNLINKED` while it is in
    /// none. Written only under the lock(s) the file's reverse map takes
    /// for a change; read by checkers and by later changes to find it.
    imap_group: AtomicU32,
    /// The name `prctl(PR_SET_VMA_ANON_NAME)` gave it (`anon_vma_name`),
    /// shown as `[anon:NAME]`; VMAs merge only with equal names.
    name: Option<Arc<str>>,
}

const UNLINKED: u32 = u32::MAX;

impl Vma {
    pub(crate) fn new(
        start: u64,
        end: u64,
        flags: VmFlags,
        pgoff: u64,
        file: Option<Arc<File>>,
        anon: Option<AnonLink>,
    ) -> Vma {
        debug_assert!(start < end);
        let cell = OnceLock::new();
        if let Some(a) = anon {
            let _ = cell.set(a);
        }
        Vma {
            start,
            end,
            flags,
            pgoff,
            file,
            anon: cell,
            lock: VmaLock::new(),
            imap_group: AtomicU32::new(UNLINKED),
            name: None,
        }
    }

    /// This VMA (not yet published) with the anonymous name `name`.
    pub(crate) fn named(mut self, name: Option<Arc<str>>) -> Vma {
        self.name = name;
        self
    }

    /// A copy of this VMA narrowed or widened to `[start, end)`, keeping
    /// the page offset of each address (`pgoff` follows `start`).
    pub(crate) fn resized(&self, start: u64, end: u64) -> Vma {
        Vma::new(
            start,
            end,
            self.flags,
            self.pgoff_at(start),
            self.file.clone(),
            self.anon().cloned(),
        )
        .named(self.name.clone())
    }

    /// A copy of this VMA with other flags.
    pub(crate) fn with_flags(&self, flags: VmFlags) -> Vma {
        Vma::new(
            self.start,
            self.end,
            flags,
            self.pgoff,
            self.file.clone(),
            self.anon().cloned(),
        )
        .named(self.name.clone())
    }

    /// A copy of this VMA with another anon_vma link.
    pub(crate) fn with_anon(&self, anon: Option<AnonLink>) -> Vma {
        Vma::new(
            self.start,
            self.end,
            self.flags,
            self.pgoff,
            self.file.clone(),
            anon,
        )
        .named(self.name.clone())
    }

    /// First address.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// One past the last address.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The group of its file's reverse map ([`crate::imap`]) that holds
    /// it, or `None` when it is not linked there (anonymous VMAs, and file
    /// VMAs not, or no longer, in an address space).
    pub fn imap_group(&self) -> Option<usize> {
        match self.imap_group.load(Ordering::Relaxed) {
            UNLINKED => None,
            g => Some(g as usize),
        }
    }

    pub(crate) fn set_imap_group(&self, group: Option<usize>) {
        let g = group.map_or(UNLINKED, |g| u32::try_from(g).unwrap_or(UNLINKED - 1));
        self.imap_group.store(g, Ordering::Relaxed)
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Always false: a VMA covers at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The `vm_flags`.
    pub fn flags(&self) -> VmFlags {
        self.flags
    }

    /// The access bits.
    pub fn prot(&self) -> Prot {
        self.flags.prot()
    }

    /// Page offset of `start` in the file; for private anonymous memory,
    /// the page number of the address it was first mapped at (which is
    /// what lets a later neighbour merge with it).
    pub fn pgoff(&self) -> u64 {
        self.pgoff
    }

    /// The page offset of `addr`, which must lie in the VMA.
    pub(crate) fn pgoff_at(&self, addr: u64) -> u64 {
        self.pgoff
            .wrapping_add((addr.wrapping_sub(self.start)) >> PAGE_SHIFT)
    }

    /// The mapped file; shared anonymous memory maps a `/dev/zero (deleted)`
    /// file of its own.
    pub fn file(&self) -> Option<&Arc<File>> {
        self.file.as_ref()
    }

    /// The name given by `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME)`, if
    /// any: `/proc/<pid>/maps` shows it as `[anon:NAME]` (or
    /// `[anon_shmem:NAME]` for shared anonymous memory), and it keeps the
    /// VMA from merging with differently named neighbours.
    ///
    /// ```
    /// use mm::{Layout, MapFlags, Mm, Prot};
    /// use std::sync::Arc;
    /// let layout = Layout { anon_vma_name: true, ..Layout::default() };
    /// let mm = Mm::new(mm::Policy::shared_default(), layout);
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 8192, Prot::READ, anon, None, 0).unwrap();
    /// mm.set_vma_anon_name(a, 4096, Some(b"buf")).unwrap();
    /// assert_eq!(mm.find_vma(a).unwrap().anon_name(), Some("buf"));
    /// assert_eq!(mm.find_vma(a + 4096).unwrap().anon_name(), None);
    /// ```
    pub fn anon_name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The name as shared by the VMAs split from one another.
    pub(crate) fn name_arc(&self) -> Option<Arc<str>> {
        self.name.clone()
    }

    /// The anon_vma link, set by the first write fault of a private
    /// mapping.
    pub fn anon(&self) -> Option<&AnonLink> {
        self.anon.get()
    }

    /// Sets the anon_vma link, prepared by `make`, unless one is set;
    /// returns the link in force. Racing faults may each prepare one; only
    /// the first installed is linked (see [`AnonLink::install`]).
    pub(crate) fn set_anon_with(&self, make: impl FnOnce() -> AnonLink) -> &AnonLink {
        match self.anon.get() {
            Some(link) => link,
            None => make().install(&self.anon),
        }
    }

    /// The link of a VMA not yet published, to finalise it.
    pub(crate) fn anon_mut(&mut self) -> Option<&mut AnonLink> {
        self.anon.get_mut()
    }

    /// The page offsets it maps, `(first, last)` inclusive.
    pub(crate) fn pages(&self) -> (u64, u64) {
        let n = (self.end - self.start) >> PAGE_SHIFT;
        (self.pgoff, self.pgoff.wrapping_add(n.saturating_sub(1)))
    }

    /// Mapped shared (`VM_MAYSHARE`).
    pub fn is_shared(&self) -> bool {
        self.flags.contains(VmFlags::MAYSHARE)
    }

    /// Private anonymous memory (no file).
    pub fn is_anonymous(&self) -> bool {
        self.file.is_none()
    }

    /// The lowest address a free-area search may hand out below this VMA
    /// (`vm_start_gap`): a grows-down VMA keeps `guard` bytes free below it.
    pub(crate) fn start_gap(&self, guard: u64) -> u64 {
        if self.flags.contains(VmFlags::GROWSDOWN) {
            self.start.saturating_sub(guard)
        } else {
            self.start
        }
    }

    /// The per-VMA lock.
    pub(crate) fn lock(&self) -> &VmaLock {
        &self.lock
    }
}

//! `mlock`, `mlock2`, `munlock`, `mlockall` and `munlockall`: the
//! `VM_LOCKED` and `VM_LOCKONFAULT` flags, the `MCL_FUTURE` default
//! flags, and the `RLIMIT_MEMLOCK` checks.
//!
//! The count of locked pages (`mm->locked_vm`) is taken from the VMAs:
//! the pages of every `VM_LOCKED` VMA. The kernel keeps a counter that
//! equals that sum, but for one case the model does not follow: an
//! `MREMAP_DONTUNMAP` move of a locked VMA clears the old VMA's lock
//! without uncharging it.

use crate::flags::{VmFlags, PAGE_SHIFT, PAGE_SIZE};
use crate::layout::Layout;
use crate::Errno;

use super::mprotect::Holes;
use super::{Mm, State};

/// `MLOCK_ONFAULT`: lock pages as they fault in, not now.
pub const MLOCK_ONFAULT: u32 = 1;
/// `MCL_CURRENT`: lock every current mapping.
pub const MCL_CURRENT: u32 = 1;
/// `MCL_FUTURE`: lock every later mapping.
pub const MCL_FUTURE: u32 = 2;
/// `MCL_ONFAULT`: with the others, lock on fault.
pub const MCL_ONFAULT: u32 = 4;

impl Layout {
    /// `can_do_mlock`: a non-zero `RLIMIT_MEMLOCK` or `CAP_IPC_LOCK`.
    pub(crate) fn can_do_mlock(&self) -> bool {
        self.memlock_rlimit != 0 || self.cap_ipc_lock
    }

    /// `mlock_future_ok`: whether `bytes` more of memory with `flags` may
    /// be locked beside the `locked` pages already locked.
    pub(crate) fn mlock_future_ok(&self, flags: VmFlags, locked: u64, bytes: u64) -> bool {
        if !flags.contains(VmFlags::LOCKED) || self.cap_ipc_lock {
            return true;
        }
        let pages = (bytes >> PAGE_SHIFT).saturating_add(locked);
        pages <= self.memlock_rlimit >> PAGE_SHIFT
    }
}

impl Mm {
    /// `mlock(addr, len)`: lock the pages of `[addr, addr + len)` (the
    /// address rounded down, the end up) and fault them in.
    ///
    /// `EPERM` when locking is impossible (`RLIMIT_MEMLOCK` 0 without
    /// `CAP_IPC_LOCK`); `ENOMEM` when the newly locked pages would pass
    /// the limit, then `EINVAL` when the range wraps; `ENOMEM` when
    /// `addr` is in no VMA (nothing changes) or a hole follows (the VMAs
    /// before it are locked, as in the kernel). Faulting in runs after
    /// the flags changed and stops at the first VMA it cannot fault (no
    /// access, a page past the end of its file, a guard marker): the call
    /// then fails with `ENOMEM` with the flags kept. A split past
    /// `max_map_count` is `ENOMEM`. Special mappings are left unlocked.
    ///
    /// ```
    /// use mm::{MapFlags, Mm, Prot, VmFlags};
    /// let mm = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 4 * 4096, Prot::READ | Prot::WRITE, anon, None, 0).unwrap();
    /// mm.mlock(a + 4096 + 100, 10).unwrap(); // locks page 1: a split in three
    /// assert_eq!(mm.map_count(), 3);
    /// let v = mm.find_vma(a + 4096).unwrap();
    /// assert!(v.flags().contains(VmFlags::LOCKED));
    /// assert!(v.anon().is_some()); // faulted in for write
    /// mm.munlock(a, 4 * 4096).unwrap();
    /// assert_eq!(mm.map_count(), 1);
    /// ```
    pub fn mlock(&self, addr: u64, len: u64) -> Result<(), Errno> {
        self.do_mlock(addr, len, VmFlags::LOCKED)
    }

    /// `mlock2(addr, len, flags)`: `mlock`, or with [`MLOCK_ONFAULT`]
    /// lock only what is faulted in later (`VM_LOCKONFAULT`, and nothing
    /// is faulted in now). Other bits are `EINVAL`.
    ///
    /// ```
    /// use mm::{Errno, MapFlags, Mm, Prot, VmFlags};
    /// let mm = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 4096, Prot::READ | Prot::WRITE, anon, None, 0).unwrap();
    /// assert_eq!(mm.mlock2(a, 4096, 2), Err(Errno::EINVAL));
    /// mm.mlock2(a, 4096, mm::mlock::MLOCK_ONFAULT).unwrap();
    /// let v = mm.find_vma(a).unwrap();
    /// assert!(v.flags().contains(VmFlags::LOCKED | VmFlags::LOCKONFAULT));
    /// assert!(v.anon().is_none());
    /// ```
    pub fn mlock2(&self, addr: u64, len: u64, flags: u32) -> Result<(), Errno> {
        if flags & !MLOCK_ONFAULT != 0 {
            return Err(Errno::EINVAL);
        }
        let mut vm = VmFlags::LOCKED;
        if flags & MLOCK_ONFAULT != 0 {
            vm |= VmFlags::LOCKONFAULT;
        }
        self.do_mlock(addr, len, vm)
    }

    fn do_mlock(&self, addr: u64, len: u64, flags: VmFlags) -> Result<(), Errno> {
        let layout = &self.layout;
        if !layout.can_do_mlock() {
            return Err(Errno::EPERM);
        }
        let (start, len) = lock_range(addr, len);
        let mut st = self.state.write();
        let mut locked = (len >> PAGE_SHIFT).saturating_add(st.locked_vm());
        let limit = layout.memlock_rlimit >> PAGE_SHIFT;
        if locked > limit && !layout.cap_ipc_lock {
            // Pages in the range that are locked already do not count.
            locked = locked.saturating_sub(st.locked_in(start, start.saturating_add(len)));
        }
        if locked > limit && !layout.cap_ipc_lock {
            return Err(Errno::ENOMEM);
        }
        st.apply_lock_flags(start, len, flags)?;
        let end = start + len;
        st.mm_populate(start, end, false).map_err(|e| match e {
            Errno::EFAULT => Errno::ENOMEM,
            Errno::ENOMEM => Errno::EAGAIN,
            e => e,
        })
    }

    /// `munlock(addr, len)`: unlock the range (rounded as `mlock` rounds
    /// it). `EINVAL` when it wraps, `ENOMEM` when `addr` is in no VMA
    /// (nothing changes) or a hole follows (what precedes it is
    /// unlocked).
    ///
    /// ```
    /// use mm::{Errno, Mm};
    /// let mm = Mm::default();
    /// assert_eq!(mm.munlock(0x10000, 4096), Err(Errno::ENOMEM));
    /// assert_eq!(mm.munlock(0x10000, 0), Ok(()));
    /// ```
    pub fn munlock(&self, addr: u64, len: u64) -> Result<(), Errno> {
        let (start, len) = lock_range(addr, len);
        self.state
            .write()
            .apply_lock_flags(start, len, VmFlags::empty())
    }

    /// `mlockall(flags)`: [`MCL_CURRENT`] locks every VMA now (and faults
    /// them in, ignoring failures), [`MCL_FUTURE`] every later mapping
    /// and heap growth (`mm->def_flags`), [`MCL_ONFAULT`] makes either
    /// lock on fault.
    ///
    /// `EINVAL` for no flag, an unknown bit or `MCL_ONFAULT` alone;
    /// `EPERM` when locking is impossible; `ENOMEM` with `MCL_CURRENT`
    /// when the whole address space is larger than `RLIMIT_MEMLOCK`
    /// (without `CAP_IPC_LOCK`). Nothing changes on failure.
    ///
    /// ```
    /// use mm::mlock::{MCL_CURRENT, MCL_FUTURE};
    /// use mm::{MapFlags, Mm, Prot, VmFlags};
    /// let mm = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// mm.mlockall(MCL_FUTURE).unwrap();
    /// let a = mm.mmap(0, 4096, Prot::READ, anon, None, 0).unwrap();
    /// assert!(mm.find_vma(a).unwrap().flags().contains(VmFlags::LOCKED));
    /// mm.munlockall().unwrap();
    /// assert!(!mm.find_vma(a).unwrap().flags().contains(VmFlags::LOCKED));
    /// mm.mlockall(MCL_CURRENT).unwrap();
    /// assert!(mm.find_vma(a).unwrap().flags().contains(VmFlags::LOCKED));
    /// ```
    pub fn mlockall(&self, flags: u32) -> Result<(), Errno> {
        let known = MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT;
        if flags == 0 || flags & !known != 0 || flags == MCL_ONFAULT {
            return Err(Errno::EINVAL);
        }
        let layout = &self.layout;
        if !layout.can_do_mlock() {
            return Err(Errno::EPERM);
        }
        let mut st = self.state.write();
        let limit = layout.memlock_rlimit >> PAGE_SHIFT;
        if flags & MCL_CURRENT != 0 && st.total_vm() > limit && !layout.cap_ipc_lock {
            return Err(Errno::ENOMEM);
        }
        st.apply_mlockall_flags(flags);
        if flags & MCL_CURRENT != 0 {
            let _ = st.mm_populate(0, layout.task_size, true);
        }
        Ok(())
    }

    /// `munlockall()`: unlock every VMA and clear the `MCL_FUTURE`
    /// default. Never fails.
    ///
    /// ```
    /// let mm = mm::Mm::default();
    /// assert_eq!(mm.munlockall(), Ok(()));
    /// ```
    pub fn munlockall(&self) -> Result<(), Errno> {
        self.state.write().apply_mlockall_flags(0);
        Ok(())
    }
}

/// `mlock`'s rounding: the start down to its page, the length (plus the
/// start's offset in its page) up to whole pages, wrapping as in C.
fn lock_range(addr: u64, len: u64) -> (u64, u64) {
    let offset = addr % PAGE_SIZE;
    let len = len.wrapping_add(offset).wrapping_add(PAGE_SIZE - 1) & !(PAGE_SIZE - 1);
    (addr - offset, len)
}

impl State {
    /// `mm->locked_vm`: pages of `VM_LOCKED` VMAs ([`State::locked_vm`]'s
    /// counter).
    pub(crate) fn locked_vm(&self) -> u64 {
        self.locked_vm
    }

    /// `mm->total_vm`: pages of every VMA.
    fn total_vm(&self) -> u64 {
        let mut pages = 0;
        self.index.for_each(&mut |v| pages += v.len() >> PAGE_SHIFT);
        pages
    }

    /// `count_mm_mlocked_page_nr`: locked pages inside `[start, end)`.
    fn locked_in(&self, start: u64, end: u64) -> u64 {
        self.overlapping(start, end)
            .iter()
            .filter(|v| v.flags().contains(VmFlags::LOCKED))
            .map(|v| (v.end().min(end) - v.start().max(start)) >> PAGE_SHIFT)
            .sum()
    }

    /// `apply_vma_lock_flags`: give `[start, start + len)` the lock bits
    /// `flags` (empty to unlock), VMA by VMA in address order.
    fn apply_lock_flags(&mut self, start: u64, len: u64, flags: VmFlags) -> Result<(), Errno> {
        let end = start.checked_add(len).ok_or(Errno::EINVAL)?;
        if end == start {
            return Ok(());
        }
        self.walk_vmas(start, end, Holes::Fail, |st, v, prev, s, e| {
            let newflags = (v.flags() - VmFlags::LOCKED_MASK) | flags;
            st.mlock_fixup(&v, prev, s, e, newflags)
        })?;
        Ok(())
    }

    /// `mlock_fixup`: special mappings keep their flags.
    fn mlock_fixup(
        &mut self,
        vma: &std::sync::Arc<crate::Vma>,
        prev: Option<&std::sync::Arc<crate::Vma>>,
        start: u64,
        end: u64,
        newflags: VmFlags,
    ) -> Result<std::sync::Arc<crate::Vma>, Errno> {
        let old = vma.flags();
        if newflags == old || old.contains(VmFlags::DONTEXPAND) {
            return Ok(std::sync::Arc::clone(vma));
        }
        self.modify(vma, prev, start, end, newflags)
    }

    /// `apply_mlockall_flags`.
    fn apply_mlockall_flags(&mut self, flags: u32) {
        self.def_flags -= VmFlags::LOCKED_MASK;
        if flags & MCL_FUTURE != 0 {
            self.def_flags |= VmFlags::LOCKED;
            if flags & MCL_ONFAULT != 0 {
                self.def_flags |= VmFlags::LOCKONFAULT;
            }
            if flags & MCL_CURRENT == 0 {
                return;
            }
        }
        let mut add = VmFlags::empty();
        if flags & MCL_CURRENT != 0 {
            add |= VmFlags::LOCKED;
            if flags & MCL_ONFAULT != 0 {
                add |= VmFlags::LOCKONFAULT;
            }
        }
        let mut prev: Option<std::sync::Arc<crate::Vma>> = None;
        let mut next = self.index.find_next(0);
        while let Some(v) = next {
            let newflags = (v.flags() - VmFlags::LOCKED_MASK) | add;
            let done = self
                .mlock_fixup(&v, prev.as_ref(), v.start(), v.end(), newflags)
                .unwrap_or_else(|_| std::sync::Arc::clone(&v));
            next = self.index.find_next(done.end());
            prev = Some(done);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Access, MapFlags, Policy, Prot};

    const P: u64 = PAGE_SIZE;
    const BASE: u64 = 0x1000_0000_0000;

    fn fixed() -> MapFlags {
        MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED
    }

    fn limited(bytes: u64, cap: bool) -> Mm {
        let layout = Layout {
            memlock_rlimit: bytes,
            cap_ipc_lock: cap,
            ..Layout::default()
        };
        Mm::new(Policy::shared_default(), layout)
    }

    #[test]
    fn rlimit_memlock_without_the_capability() {
        let rw = Prot::READ | Prot::WRITE;
        let mm = limited(4 * P, false);
        mm.mmap(BASE, 8 * P, rw, fixed(), None, 0).unwrap();
        let before = mm.maps();
        assert_eq!(mm.mlock(BASE, 5 * P), Err(Errno::ENOMEM));
        assert_eq!(mm.maps(), before);
        mm.mlock(BASE, 4 * P).unwrap();
        // Relocking what is locked costs nothing more.
        mm.mlock(BASE, 4 * P).unwrap();
        assert_eq!(mm.mlock(BASE + 4 * P, P), Err(Errno::ENOMEM));
        // MAP_LOCKED past the limit is EAGAIN; mlockall(MCL_CURRENT) of a
        // space larger than the limit is ENOMEM.
        let locked = fixed() | MapFlags::LOCKED;
        assert_eq!(
            mm.mmap(BASE + 16 * P, P, rw, locked, None, 0),
            Err(Errno::EAGAIN)
        );
        assert_eq!(mm.mlockall(MCL_CURRENT), Err(Errno::ENOMEM));
        mm.munlockall().unwrap();
        // With MCL_FUTURE, growth past the limit is refused too.
        mm.mlockall(MCL_FUTURE).unwrap();
        assert_eq!(
            mm.mmap(BASE + 16 * P, 5 * P, rw, fixed(), None, 0),
            Err(Errno::EAGAIN)
        );
        mm.mmap(BASE + 16 * P, 4 * P, rw, fixed(), None, 0).unwrap();
        // With the capability the limit does not apply.
        let root = limited(4 * P, true);
        root.mmap(BASE, 8 * P, rw, fixed(), None, 0).unwrap();
        root.mlock(BASE, 8 * P).unwrap();
        root.mlockall(MCL_CURRENT).unwrap();
        // A zero limit without the capability forbids locking at all.
        let none = limited(0, false);
        assert_eq!(none.mlock(BASE, P), Err(Errno::EPERM));
        assert_eq!(none.mlockall(MCL_FUTURE), Err(Errno::EPERM));
        assert_eq!(
            none.mmap(BASE, P, rw, fixed() | MapFlags::LOCKED, None, 0),
            Err(Errno::EPERM)
        );
    }

    /// The answers of a C probe run on Linux 6.18 without CAP_IPC_LOCK
    /// and a 4-page RLIMIT_MEMLOCK, call for call.
    #[test]
    fn the_kernel_probe_without_cap_ipc_lock() {
        let rw = Prot::READ | Prot::WRITE;
        let mm = limited(4 * P, false);
        mm.set_brk_base(0x5555_5555_8000);
        let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        let a = mm.mmap(0, 8 * P, rw, anon, None, 0).unwrap();
        assert_eq!(mm.mlock(a, 5 * P), Err(Errno::ENOMEM));
        assert_eq!(mm.mlock(a, 4 * P), Ok(()));
        assert_eq!(mm.mlock(a, 4 * P), Ok(()));
        assert_eq!(mm.mlock(a + 4 * P, P), Err(Errno::ENOMEM));
        // The limit is checked before the range wraps.
        assert_eq!(mm.mlock(u64::MAX - P + 1, 2 * P), Err(Errno::ENOMEM));
        let locked = anon | MapFlags::LOCKED;
        assert_eq!(mm.mmap(0, P, rw, locked, None, 0), Err(Errno::EAGAIN));
        assert_eq!(mm.mlockall(MCL_CURRENT), Err(Errno::ENOMEM));
        assert_eq!(mm.munlockall(), Ok(()));
        assert_eq!(mm.mlockall(MCL_FUTURE), Ok(()));
        assert_eq!(mm.mmap(0, 5 * P, rw, anon, None, 0), Err(Errno::EAGAIN));
        let b = mm.mmap(0, 4 * P, rw, anon, None, 0).unwrap();
        let grow = crate::MremapFlags::MAYMOVE;
        assert_eq!(mm.mremap(b, 4 * P, 5 * P, grow, 0), Err(Errno::EAGAIN));
        let brk = mm.brk(0);
        assert_eq!(mm.brk(brk + P), brk, "brk growth refused");
        mm.munlockall().unwrap();
        let none = limited(0, false);
        none.mmap(a, P, rw, fixed(), None, 0).unwrap();
        assert_eq!(none.mlock(a, P), Err(Errno::EPERM));
        assert_eq!(none.mlockall(MCL_FUTURE), Err(Errno::EPERM));
        assert_eq!(none.mmap(0, P, rw, locked, None, 0), Err(Errno::EPERM));
    }

    #[test]
    fn lock_errors_in_the_kernel_order() {
        let mm = Mm::default();
        let rw = Prot::READ | Prot::WRITE;
        mm.mmap(BASE, 4 * P, rw, fixed(), None, 0).unwrap();
        mm.munmap(BASE + 2 * P, P).unwrap();
        // The start in a hole: nothing changes.
        assert_eq!(mm.mlock(BASE + 2 * P, 2 * P), Err(Errno::ENOMEM));
        assert!(!mm
            .find_vma(BASE + 3 * P)
            .unwrap()
            .flags()
            .contains(VmFlags::LOCKED));
        // A hole after the start: the part before it is locked.
        assert_eq!(mm.mlock(BASE, 4 * P), Err(Errno::ENOMEM));
        assert!(mm.find_vma(BASE).unwrap().flags().contains(VmFlags::LOCKED));
        assert!(!mm
            .find_vma(BASE + 3 * P)
            .unwrap()
            .flags()
            .contains(VmFlags::LOCKED));
        // A wrapping range; a whole-space length rounds to nothing.
        assert_eq!(mm.mlock(u64::MAX - P + 1, 2 * P), Err(Errno::EINVAL));
        assert_eq!(mm.mlock(BASE, u64::MAX), Ok(()));
        assert_eq!(mm.mlockall(0), Err(Errno::EINVAL));
        assert_eq!(mm.mlockall(MCL_ONFAULT), Err(Errno::EINVAL));
        assert_eq!(mm.mlockall(8), Err(Errno::EINVAL));
        // PROT_NONE cannot be faulted in: locked, but ENOMEM.
        mm.mmap(BASE + 8 * P, P, Prot::NONE, fixed(), None, 0)
            .unwrap();
        assert_eq!(mm.mlock(BASE + 8 * P, P), Err(Errno::ENOMEM));
        assert!(mm
            .find_vma(BASE + 8 * P)
            .unwrap()
            .flags()
            .contains(VmFlags::LOCKED));
        mm.validate().unwrap();
    }

    /// The differential test's mismatch of 2026-11-26 (seed
    /// `0x18eb9e76959c0b11`): a program whose bss spills into a page of
    /// its own has that page and the heap as two VMAs (`brk` never joins
    /// the heap to what lies below `start_brk`), but they share one
    /// anon_vma, so `mlockall` merges them. Imported from `smaps`, the
    /// heap takes the bss page's anon_vma as the kernel's first fault
    /// there did.
    #[test]
    fn imported_bss_and_heap_share_an_anon_vma_and_merge_when_locked() {
        let text = "555555657000-555555658000 rw-p 00100000 fe:00 5311032    /bin/prog\n\
                    Anonymous:             4 kB\n\
                    VmFlags: rd wr mr mw me ac\n\
                    555555658000-555555659000 rw-p 00000000 00:00 0\n\
                    Anonymous:             4 kB\n\
                    VmFlags: rd wr mr mw me ac\n\
                    555555659000-55555567a000 rw-p 00000000 00:00 0    [heap]\n\
                    Anonymous:             8 kB\n\
                    VmFlags: rd wr mr mw me ac\n";
        let smaps = crate::procmaps::parse_smaps(text).unwrap();
        let (start_brk, brk) = (0x5555_5565_9000, 0x5555_5567_a000);
        let policy = crate::Policy::shared_default();
        let mm = Mm::from_smaps(
            policy,
            crate::Layout::default(),
            &smaps,
            start_brk,
            brk,
            0,
            &[],
        )
        .unwrap();
        let bss = mm.find_vma(0x5555_5565_8000).unwrap();
        let heap = mm.find_vma(start_brk).unwrap();
        let file = mm.find_vma(0x5555_5565_7000).unwrap();
        assert!(crate::anon::AnonLink::same(bss.anon(), heap.anon()));
        assert!(bss.anon().is_some());
        // The file's private copy is another mapping: its own anon_vma.
        assert!(!crate::anon::AnonLink::same(file.anon(), bss.anon()));
        assert_eq!(mm.map_count(), 3);
        mm.mlockall(MCL_CURRENT | MCL_ONFAULT).unwrap();
        assert_eq!(mm.map_count(), 2);
        let merged = mm.find_vma(start_brk).unwrap();
        assert_eq!((merged.start(), merged.end()), (0x5555_5565_8000, brk));
        // The merged heap starts below `start_brk` and is still the heap:
        // `brk` grows it (seed `0x18eba1d4d426cd33`, case 164). The bss
        // page alone, ending at `start_brk`, never was.
        mm.mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT).unwrap();
        assert_eq!(mm.brk(brk + P), brk + P);
        assert_eq!(mm.map_count(), 2);
        let grown = mm.find_vma(brk).unwrap();
        assert_eq!((grown.start(), grown.end()), (0x5555_5565_8000, brk + P));
        mm.validate().unwrap();
    }

    #[test]
    fn mcl_future_locks_mmap_and_brk_and_fork_forgets() {
        let mm = Mm::default();
        let rw = Prot::READ | Prot::WRITE;
        mm.set_brk_base(0x5555_5555_8000);
        mm.mlockall(MCL_FUTURE | MCL_ONFAULT).unwrap();
        mm.mmap(BASE, P, rw, fixed(), None, 0).unwrap();
        let v = mm.find_vma(BASE).unwrap();
        assert!(v.flags().contains(VmFlags::LOCKED | VmFlags::LOCKONFAULT));
        assert!(v.anon().is_none(), "on-fault locking faults nothing in");
        mm.mlockall(MCL_FUTURE).unwrap();
        mm.mmap(BASE + 4 * P, P, rw, fixed(), None, 0).unwrap();
        assert!(mm.find_vma(BASE + 4 * P).unwrap().anon().is_some());
        let heap = mm.brk(0);
        mm.brk(heap + P);
        let h = mm.find_vma(heap).unwrap();
        assert!(h.flags().contains(VmFlags::LOCKED) && h.anon().is_some());
        let child = mm.fork();
        assert!(child
            .vmas()
            .iter()
            .all(|v| !v.flags().intersects(VmFlags::LOCKED_MASK)));
        child.mmap(BASE + 8 * P, P, rw, fixed(), None, 0).unwrap();
        assert!(!child
            .find_vma(BASE + 8 * P)
            .unwrap()
            .flags()
            .contains(VmFlags::LOCKED));
        // A locked read-only VMA made writable is faulted in for write.
        let ro = mm
            .mmap(BASE + 12 * P, P, Prot::READ, fixed(), None, 0)
            .unwrap();
        assert!(mm.find_vma(ro).unwrap().anon().is_none());
        mm.mprotect(ro, P, rw).unwrap();
        assert!(mm.find_vma(ro).unwrap().anon().is_some());
        assert!(mm.fault(ro, Access::Write).is_ok());
    }

    /// `locked_vm` is a counter kept by every change of the address
    /// space: after each call of a seeded random mix of locking, unlocking,
    /// mapping (locked or not), unmapping, moving and protecting parts of
    /// a small window, on both indexes, `validate` recounts it from the
    /// VMAs and the `RLIMIT_MEMLOCK` check sees the same figure.
    #[test]
    fn locked_vm_follows_every_change() {
        use crate::policy::IndexKind;
        use crate::MremapFlags;
        let rw = Prot::READ | Prot::WRITE;
        let steps = if cfg!(miri) { 60 } else { 3000 };
        for index in [IndexKind::Maple, IndexKind::Legacy] {
            let policy = std::sync::Arc::new(Policy {
                index,
                ..Policy::default()
            });
            let layout = Layout {
                memlock_rlimit: 24 * P,
                ..Layout::default()
            };
            let mut mm = Mm::new(&policy, layout);
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut next = |n: u64| {
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                (z ^ (z >> 31)) % n
            };
            for step in 0..steps {
                let at = BASE + next(32) * P;
                let len = (1 + next(6)) * P;
                // Errors are part of the mix (limits, holes): whatever a
                // call answers, the count must match the VMAs after it.
                let _ = match next(12) {
                    0 => mm.mlock(at, len),
                    1 => mm.munlock(at, len),
                    2 => mm
                        .mmap(at, len, rw, fixed() | MapFlags::LOCKED, None, 0)
                        .map(drop),
                    3 | 4 => mm.mmap(at, len, rw, fixed(), None, 0).map(drop),
                    5 => mm.munmap(at, len),
                    6 => mm
                        .mremap(at, len, len + P, MremapFlags::MAYMOVE, 0)
                        .map(drop),
                    7 => mm.mremap(at, len, P, MremapFlags::empty(), 0).map(drop),
                    8 => mm.mprotect(at, len, Prot::READ),
                    9 => mm.mlockall(if next(2) == 0 {
                        MCL_CURRENT
                    } else {
                        MCL_FUTURE
                    }),
                    10 => mm.munlockall(),
                    _ => {
                        if next(8) == 0 {
                            mm = mm.fork();
                        }
                        Ok(())
                    }
                };
                if let Err(e) = mm.validate() {
                    panic!("{index:?}, step {step}: {e}");
                }
            }
        }
    }
}

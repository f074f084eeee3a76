//! `mmap` and `munmap`.

use std::sync::Arc;

use crate::anon::AnonLink;
use crate::file::{File, FileMode, SHMEM_ZERO};
use crate::flags::{page_align, MapFlags, Prot, VmFlags, PAGE_SHIFT, PAGE_SIZE};
use crate::vma::Vma;
use crate::Errno;

use super::merge::Proposal;
use super::{Mm, State};

impl Mm {
    /// `mmap(addr, len, prot, flags, fd, offset)`. `file` stands for the
    /// file descriptor and is ignored with `MAP_ANONYMOUS`; without it and
    /// without `MAP_ANONYMOUS` the call fails with `EBADF`.
    ///
    /// Returns the address of the mapping. Checks run in Linux's order, so
    /// a call with several faults reports the errno Linux would: `EINVAL`
    /// for an unaligned offset, a zero length, a bad mapping type or a
    /// grows-down file mapping; `ENOMEM` when the length overflows or no
    /// room is left; `EOVERFLOW` when the file offset would wrap; `EEXIST`
    /// for `MAP_FIXED_NOREPLACE` over a mapping; `EACCES`/`EPERM` when the
    /// file's open mode or mount forbids the protection. A refused call
    /// changes nothing.
    ///
    /// ```
    /// use mm::{Errno, MapFlags, Mm, Prot};
    /// let mm = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 4096, Prot::READ, anon, None, 0).unwrap();
    /// // Top-down from mmap_base:
    /// assert_eq!(a, mm.layout().mmap_base - 4096);
    /// let noreplace = anon | MapFlags::FIXED_NOREPLACE;
    /// assert_eq!(mm.mmap(a, 4096, Prot::READ, noreplace, None, 0), Err(Errno::EEXIST));
    /// assert_eq!(mm.mmap(0, 0, Prot::READ, anon, None, 0), Err(Errno::EINVAL));
    /// ```
    pub fn mmap(
        &self,
        addr: u64,
        len: u64,
        prot: Prot,
        flags: MapFlags,
        file: Option<&Arc<File>>,
        offset: u64,
    ) -> Result<u64, Errno> {
        if offset % PAGE_SIZE != 0 {
            return Err(Errno::EINVAL);
        }
        let file = if flags.contains(MapFlags::ANONYMOUS) {
            None
        } else {
            Some(file.ok_or(Errno::EBADF)?)
        };
        if flags.contains(MapFlags::HUGETLB) {
            // hugetlbfs is not modelled; Linux refuses MAP_HUGETLB on an
            // ordinary file with EINVAL too.
            return Err(Errno::EINVAL);
        }
        let mut st = self.state.write();
        let addr = st.do_mmap(self, addr, len, prot, flags, file, offset >> PAGE_SHIFT)?;
        // A locked mapping (MAP_LOCKED, or mlockall(MCL_FUTURE)) is
        // faulted in as MAP_POPULATE is.
        let locked = (flags.contains(MapFlags::LOCKED) || st.def_flags.contains(VmFlags::LOCKED))
            && !flags.contains(MapFlags::HUGETLB);
        if locked || (flags.contains(MapFlags::POPULATE) && !flags.contains(MapFlags::NONBLOCK)) {
            st.populate(addr, page_align(len).unwrap_or(len));
        }
        Ok(addr)
    }

    /// `munmap(addr, len)`: `EINVAL` for an unaligned address, a zero
    /// length or a range outside the address space; unmapping nothing is
    /// not an error.
    ///
    /// ```
    /// use mm::{MapFlags, Mm, Prot};
    /// let mm = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 3 * 4096, Prot::READ, anon, None, 0).unwrap();
    /// mm.munmap(a + 4096, 4096).unwrap(); // punches a hole: two VMAs
    /// assert_eq!(mm.map_count(), 2);
    /// assert_eq!(mm.munmap(a + 1, 4096), Err(mm::Errno::EINVAL));
    /// ```
    pub fn munmap(&self, addr: u64, len: u64) -> Result<(), Errno> {
        let task_size = self.layout.task_size;
        if addr % PAGE_SIZE != 0 || addr > task_size || len > task_size - addr {
            return Err(Errno::EINVAL);
        }
        let end = addr + page_align(len).ok_or(Errno::EINVAL)?;
        if end == addr {
            return Err(Errno::EINVAL);
        }
        self.state.write().unmap(&self.layout, addr, end)
    }
}

impl State {
    /// `do_mmap` with `pgoff` in pages; the caller holds `mmap_lock`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn do_mmap(
        &mut self,
        mm: &Mm,
        mut addr: u64,
        len: u64,
        prot: Prot,
        mut flags: MapFlags,
        file: Option<&Arc<File>>,
        mut pgoff: u64,
    ) -> Result<u64, Errno> {
        let layout = &mm.layout;
        if len == 0 {
            return Err(Errno::EINVAL);
        }
        if flags.contains(MapFlags::FIXED_NOREPLACE) {
            flags |= MapFlags::FIXED;
        }
        if !flags.contains(MapFlags::FIXED) {
            // round_hint_to_min
            addr &= !(PAGE_SIZE - 1);
            if addr != 0 && addr < layout.mmap_min_addr {
                addr = layout.mmap_min_addr.next_multiple_of(PAGE_SIZE);
            }
        }
        // PAGE_ALIGN wraps to 0 for lengths within a page of 2^64.
        let len = len.wrapping_add(PAGE_SIZE - 1) & !(PAGE_SIZE - 1);
        if len == 0 {
            return Err(Errno::ENOMEM);
        }
        if pgoff.checked_add(len >> PAGE_SHIFT).is_none() {
            return Err(Errno::EOVERFLOW);
        }
        if self.index.len() > layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        // An exactly-PROT_EXEC mapping gets the execute-only key.
        let mut pkey = 0;
        if prot.bits() == Prot::EXEC.bits() {
            pkey = self.execute_only_pkey(layout).unwrap_or(0);
        }
        // calc_vm_prot_bits | calc_vm_flag_bits | VM_MAY*.
        let mut vm = VmFlags::from_prot(prot)
            | VmFlags::from_pkey(pkey)
            | self.def_flags
            | VmFlags::MAYREAD
            | VmFlags::MAYWRITE
            | VmFlags::MAYEXEC;
        if flags.contains(MapFlags::GROWSDOWN) {
            vm |= VmFlags::GROWSDOWN;
        }
        if flags.contains(MapFlags::LOCKED) {
            vm |= VmFlags::LOCKED;
        }
        if flags.contains(MapFlags::SYNC) {
            vm |= VmFlags::SYNC;
        }
        if flags.contains(MapFlags::STACK) {
            vm |= VmFlags::NOHUGEPAGE;
        }
        // Anonymous memory is placed as if at offset 0.
        let area_pgoff = if file.is_some() { pgoff } else { 0 };
        let addr =
            self.get_unmapped_area(layout, file.map(|f| &**f), addr, len, area_pgoff, flags)?;
        if flags.contains(MapFlags::FIXED_NOREPLACE)
            && !self.overlapping(addr, addr + len).is_empty()
        {
            return Err(Errno::EEXIST);
        }
        if flags.contains(MapFlags::LOCKED) && !layout.can_do_mlock() {
            return Err(Errno::EPERM);
        }
        if !layout.mlock_future_ok(vm, self.locked_vm(), len) {
            return Err(Errno::EAGAIN);
        }
        let map_type = flags.bits() & MapFlags::TYPE;
        let shared = MapFlags::SHARED.bits();
        let validate = MapFlags::SHARED_VALIDATE.bits();
        let private = MapFlags::PRIVATE.bits();
        let shmem;
        let file = match file {
            Some(f) => {
                // file_mmap_ok: the last page offset must fit a loff_t.
                let max_pages = (i64::MAX as u64 - len) >> PAGE_SHIFT;
                if pgoff > max_pages {
                    return Err(Errno::EOVERFLOW);
                }
                let mode: FileMode = f.mode();
                if map_type == shared || map_type == validate {
                    // Plain MAP_SHARED silently drops non-legacy flags;
                    // MAP_SHARED_VALIDATE refuses them.
                    let checked = if map_type == shared {
                        flags.bits() & MapFlags::LEGACY_MASK
                    } else {
                        flags.bits()
                    };
                    if checked & !MapFlags::LEGACY_MASK != 0 {
                        return Err(Errno::EOPNOTSUPP);
                    }
                    if prot.contains(Prot::WRITE) && !mode.write {
                        return Err(Errno::EACCES);
                    }
                    vm |= VmFlags::SHARED | VmFlags::MAYSHARE;
                    if !mode.write {
                        vm -= VmFlags::MAYWRITE | VmFlags::SHARED;
                    }
                } else if map_type != private {
                    return Err(Errno::EINVAL);
                }
                if !mode.read {
                    return Err(Errno::EACCES);
                }
                if mode.noexec {
                    if vm.contains(VmFlags::EXEC) {
                        return Err(Errno::EPERM);
                    }
                    vm -= VmFlags::MAYEXEC;
                }
                if vm.contains(VmFlags::GROWSDOWN) {
                    return Err(Errno::EINVAL);
                }
                Some(Arc::clone(f))
            }
            None if map_type == shared => {
                if vm.contains(VmFlags::GROWSDOWN) {
                    return Err(Errno::EINVAL);
                }
                pgoff = 0;
                vm |= VmFlags::SHARED | VmFlags::MAYSHARE;
                // Shared anonymous memory is a shmem file of its own.
                shmem = File::open(
                    &self.policy,
                    SHMEM_ZERO,
                    len,
                    FileMode {
                        huge_align: false,
                        ..FileMode::default()
                    },
                );
                Some(shmem)
            }
            None if map_type == private => {
                pgoff = addr >> PAGE_SHIFT;
                None
            }
            None => return Err(Errno::EINVAL),
        };
        if flags.contains(MapFlags::NORESERVE) && !layout.overcommit_never {
            vm |= VmFlags::NORESERVE;
        }
        self.mmap_region(layout, addr, len, vm, file, pgoff)
    }

    /// `mmap_region`: replace whatever is in `[addr, addr + len)` by a new
    /// mapping, merging it with its neighbours when the rules allow.
    pub(crate) fn mmap_region(
        &mut self,
        layout: &crate::Layout,
        addr: u64,
        len: u64,
        mut vm: VmFlags,
        file: Option<Arc<File>>,
        pgoff: u64,
    ) -> Result<u64, Errno> {
        let end = addr + len;
        // The new VMA is stored over what this unmaps: the maple tree
        // overwrites it instead of clearing the range first (see
        // `VmaIndex::replace_before_overwrite`). Until then nothing looks
        // inside `[addr, end)`: the merge below looks at the VMAs ending
        // at `addr` and starting at `end`.
        self.unmap_for_mapping(layout, addr, end)?;
        if (vm & (VmFlags::NORESERVE | VmFlags::SHARED | VmFlags::WRITE)) == VmFlags::WRITE {
            vm |= VmFlags::ACCOUNT;
        }
        // A new shmem file is never merged (and the kernel tries before it
        // creates one, with no file to match).
        let mergeable_file = file.as_ref().filter(|f| !f.is_shmem_zero());
        if file.is_none() || mergeable_file.is_some() {
            let p = Proposal {
                start: addr,
                end,
                flags: vm,
                file: mergeable_file,
                pgoff,
                anon: None,
            };
            if self.merge_new(&p, false).is_some() {
                return Ok(addr);
            }
        }
        self.commit(&[], vec![Vma::new(addr, end, vm, pgoff, file, None)]);
        Ok(addr)
    }

    /// What `MAP_POPULATE` does to the VMA bookkeeping: write-faulting a
    /// private writable mapping gives it an anon_vma (`mm_populate`, which
    /// ignores failures and skips `VM_LOCKONFAULT`).
    pub(crate) fn populate(&mut self, addr: u64, len: u64) {
        let _ = self.mm_populate(addr, addr.saturating_add(len), true);
    }

    /// `anon_vma_prepare`: give `vma` an anon_vma, sharing a compatible
    /// neighbour's if there is one.
    pub(crate) fn anon_prepare(&self, vma: &Vma) {
        if vma.anon().is_some() {
            return;
        }
        vma.set_anon_with(|| {
            let shared = self.mergeable_anon_vma(vma);
            AnonLink::prepare(shared, self.policy.lock, vma.pages())
        });
    }
}

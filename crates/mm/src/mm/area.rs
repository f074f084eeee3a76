//! Free-area search: where `mmap` puts a mapping it was not told where to
//! put (the x86-64 `arch_get_unmapped_area_topdown`, its bottom-up
//! fallback, and the 2 MiB alignment of large anonymous mappings).

use crate::file::File;
use crate::flags::{MapFlags, PAGE_SIZE, PMD_SIZE};
use crate::layout::Layout;
use crate::Errno;

use super::State;

impl State {
    /// `__get_unmapped_area`: a page-aligned address for `len` bytes,
    /// honouring a hint or `MAP_FIXED`, or `ENOMEM`. `pgoff` is the file
    /// page offset (ignored for anonymous memory).
    pub(crate) fn get_unmapped_area(
        &self,
        layout: &Layout,
        file: Option<&File>,
        addr: u64,
        len: u64,
        pgoff: u64,
        flags: MapFlags,
    ) -> Result<u64, Errno> {
        if len > layout.task_size {
            return Err(Errno::ENOMEM);
        }
        let addr = match file {
            // Regular files on ext4/xfs/btrfs go through
            // thp_get_unmapped_area; shmem (huge pages off) does not.
            Some(f) if f.mode().huge_align && !f.is_shmem_zero() && layout.thp_align => {
                let off = pgoff.wrapping_shl(crate::PAGE_SHIFT);
                match self.thp_area(layout, addr, len, off, flags) {
                    Some(a) => a,
                    None => self.arch_area(layout, addr, len, flags)?,
                }
            }
            Some(_) => self.arch_area(layout, addr, len, flags)?,
            // `flags & MAP_SHARED` is a bit test: MAP_SHARED_VALIDATE
            // takes shmem's path too (and fails later).
            None if flags.bits() & MapFlags::SHARED.bits() != 0 => {
                self.arch_area(layout, addr, len, flags)?
            }
            // Large anonymous mappings are THP-aligned, but only when
            // the caller gave no hint and the length is a PMD multiple.
            None if layout.thp_align && addr == 0 && len % PMD_SIZE == 0 => {
                match self.thp_area(layout, addr, len, 0, flags) {
                    Some(a) => a,
                    None => self.arch_area(layout, addr, len, flags)?,
                }
            }
            None => self.arch_area(layout, addr, len, flags)?,
        };
        if addr > layout.task_size - len {
            return Err(Errno::ENOMEM);
        }
        if addr % PAGE_SIZE != 0 {
            return Err(Errno::EINVAL);
        }
        // cap_mmap_addr: only CAP_SYS_RAWIO may map below mmap_min_addr.
        if addr < layout.dac_mmap_min_addr && !layout.cap_sys_rawio {
            return Err(Errno::EPERM);
        }
        Ok(addr)
    }

    /// `__thp_get_unmapped_area`: search for `len` plus one huge page,
    /// then place the mapping so that its file offset `off` and its
    /// address agree modulo the huge page size (at the top of the padded
    /// area when the search result already agrees). `None` where Linux
    /// returns 0 and the caller retries without padding.
    fn thp_area(
        &self,
        layout: &Layout,
        addr: u64,
        len: u64,
        off: u64,
        flags: MapFlags,
    ) -> Option<u64> {
        let size = PMD_SIZE;
        // loff_t arithmetic: offsets are signed 64-bit in the kernel.
        let off_end = (off as i64).checked_add(len as i64)?;
        let off_align = ((off as i64).checked_add(size as i64 - 1)?) & !(size as i64 - 1);
        if off_end <= off_align || off_end - off_align < size as i64 {
            return None;
        }
        let pad = len.checked_add(size)?;
        (off as i64).checked_add(pad as i64)?;
        let ret = self.arch_area(layout, addr, pad, flags).ok()?;
        if ret == addr {
            return Some(addr);
        }
        let off_sub = off.wrapping_sub(ret) & (size - 1);
        if !layout.bottom_up && off_sub == 0 {
            return Some(ret + size);
        }
        Some(ret + off_sub)
    }

    /// The architecture's choice: `MAP_FIXED` as given, a hint if it fits,
    /// else top-down from `mmap_base`, falling back to bottom-up.
    fn arch_area(
        &self,
        layout: &Layout,
        addr: u64,
        len: u64,
        flags: MapFlags,
    ) -> Result<u64, Errno> {
        if len > layout.task_size {
            return Err(Errno::ENOMEM);
        }
        if flags.contains(MapFlags::FIXED) {
            return Ok(addr);
        }
        if flags.contains(MapFlags::MAP_32BIT) {
            // x86-64 places MAP_32BIT mappings bottom-up in [1 GiB, 2 GiB)
            // (find_start_end), skipping the top-down search and its hint
            // check for arch_get_unmapped_area's.
            const BEGIN: u64 = 0x4000_0000;
            const END: u64 = 0x8000_0000;
            if len > END {
                return Err(Errno::ENOMEM);
            }
            if addr != 0 {
                let hint = addr.next_multiple_of(PAGE_SIZE);
                let next = self.index.find_next(hint);
                if END - len >= hint
                    && next.is_none_or(|v| hint + len <= v.start_gap(layout.stack_guard_gap))
                {
                    return Ok(hint);
                }
            }
            return self
                .area_bottomup(layout, BEGIN, END, len)
                .ok_or(Errno::ENOMEM);
        }
        if addr != 0 {
            let hint = addr & !(PAGE_SIZE - 1);
            if layout.task_size - len >= hint {
                let next = self.index.find_next(hint);
                if next.is_none_or(|v| hint + len <= v.start_gap(layout.stack_guard_gap)) {
                    return Ok(hint);
                }
            }
        }
        if !layout.bottom_up {
            let low = PAGE_SIZE.max(layout.mmap_min_addr);
            if let Some(a) = self.area_topdown(layout, low, layout.mmap_base, len) {
                return Ok(a);
            }
        }
        self.area_bottomup(layout, layout.unmapped_base(), layout.task_size, len)
            .ok_or(Errno::ENOMEM)
    }

    /// `unmapped_area_topdown`: the highest free `[a, a + len)` within
    /// `[low, high)` that keeps the guard gap below a grows-down VMA.
    fn area_topdown(&self, layout: &Layout, low: u64, mut high: u64, len: u64) -> Option<u64> {
        let low = low.max(layout.mmap_min_addr);
        loop {
            let gap_end = self.index.gap_highest(low, high, len)?;
            let gap = gap_end - len;
            if let Some(next) = self.index.find_next(gap_end - 1) {
                let start_gap = next.start_gap(layout.stack_guard_gap);
                if start_gap != next.start() && start_gap < gap_end {
                    high = start_gap;
                    continue;
                }
            }
            return Some(gap);
        }
    }

    /// `unmapped_area`: the lowest such area.
    fn area_bottomup(&self, layout: &Layout, low: u64, high: u64, len: u64) -> Option<u64> {
        let mut low = low.max(layout.mmap_min_addr);
        loop {
            let gap = self.index.gap_lowest(low, high, len)?;
            if let Some(next) = self.index.find_next(gap) {
                let start_gap = next.start_gap(layout.stack_guard_gap);
                if start_gap != next.start() && start_gap < gap + len {
                    low = next.end();
                    continue;
                }
            }
            return Some(gap);
        }
    }
}

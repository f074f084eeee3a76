//! Free-area search: where `mmap` puts a mapping it was not told where to
//! put (the x86-64 `arch_get_unmapped_area_topdown`, its bottom-up
//! fallback, and the 2 MiB alignment of large anonymous mappings).

use crate::file::File;
use crate::flags::{MapFlags, PAGE_SIZE, PMD_SIZE};
use crate::layout::Layout;
use crate::Errno;

use super::State;

impl State {
    /// `get_unmapped_area`: a page-aligned address for `len` bytes, honouring
    /// a hint or `MAP_FIXED`, or `ENOMEM`.
    pub(crate) fn get_unmapped_area(
        &self,
        layout: &Layout,
        file: Option<&File>,
        addr: u64,
        len: u64,
        flags: MapFlags,
    ) -> Result<u64, Errno> {
        if len > layout.task_size {
            return Err(Errno::ENOMEM);
        }
        let shared_anon = file.is_none() && flags.bits() & MapFlags::TYPE == MapFlags::SHARED.bits();
        let addr = if file.is_none()
            && !shared_anon
            && addr == 0
            && layout.thp_align
            && len % PMD_SIZE == 0
        {
            match self.thp_area(layout, len, flags) {
                Some(a) => a,
                None => self.arch_area(layout, addr, len, flags)?,
            }
        } else {
            self.arch_area(layout, addr, len, flags)?
        };
        if addr > layout.task_size - len {
            return Err(Errno::ENOMEM);
        }
        if addr % PAGE_SIZE != 0 {
            return Err(Errno::EINVAL);
        }
        if addr < layout.mmap_min_addr {
            return Err(Errno::EPERM);
        }
        Ok(addr)
    }

    /// `__thp_get_unmapped_area` for anonymous memory: search for `len` plus
    /// one huge page, then place the mapping on a huge-page boundary inside
    /// that (at the top of it when the search result is already aligned).
    fn thp_area(&self, layout: &Layout, len: u64, flags: MapFlags) -> Option<u64> {
        let pad = len.checked_add(PMD_SIZE)?;
        let ret = self.arch_area(layout, 0, pad, flags).ok()?;
        let off_sub = 0u64.wrapping_sub(ret) & (PMD_SIZE - 1);
        if !layout.bottom_up && off_sub == 0 {
            return Some(ret + PMD_SIZE);
        }
        Some(ret + off_sub)
    }

    /// The architecture's choice: `MAP_FIXED` as given, a hint if it fits,
    /// else top-down from `mmap_base`, falling back to bottom-up.
    fn arch_area(&self, layout: &Layout, addr: u64, len: u64, flags: MapFlags) -> Result<u64, Errno> {
        if len > layout.task_size {
            return Err(Errno::ENOMEM);
        }
        if flags.contains(MapFlags::FIXED) {
            return Ok(addr);
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

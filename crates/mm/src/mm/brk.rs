//! `brk`: the heap.

use crate::flags::{page_align, VmFlags, PAGE_SHIFT, PAGE_SIZE};
use crate::vma::Vma;

use super::merge::Proposal;
use super::Mm;

impl Mm {
    /// `brk(addr)`: move the program break to `addr` and return the new
    /// break; on failure (or for an address below the heap's start, such
    /// as 0) return the current one, as the system call does.
    ///
    /// Growth extends the heap VMA when it can, and is refused if it would
    /// come within a page (plus the guard gap of a stack) of the next
    /// mapping; shrinking unmaps the pages above the new break.
    ///
    /// ```
    /// use mm::Mm;
    /// let mm = Mm::default();
    /// mm.set_brk_base(0x555555558000);
    /// let start = mm.brk(0);
    /// assert_eq!(mm.brk(start + 10_000), start + 10_000);
    /// assert_eq!(mm.map_count(), 1); // [heap]
    /// assert_eq!(mm.brk(start), start);
    /// assert_eq!(mm.map_count(), 0);
    /// ```
    pub fn brk(&self, addr: u64) -> u64 {
        let layout = &self.layout;
        let mut st = self.state.write();
        let orig = st.brk;
        if addr < st.start_brk || addr > layout.task_size {
            return orig;
        }
        let (Some(newbrk), Some(oldbrk)) = (page_align(addr), page_align(st.brk)) else {
            return orig;
        };
        if oldbrk == newbrk {
            st.brk = addr;
            return addr;
        }
        if addr <= st.brk {
            // Shrink: only if a VMA is there to shrink.
            let heap = st.overlapping(newbrk, oldbrk);
            if heap.first().is_none_or(|v| v.start() >= oldbrk) {
                return orig;
            }
            if st.unmap(layout, newbrk, oldbrk).is_err() {
                return orig;
            }
            st.brk = addr;
            return addr;
        }
        let limit = newbrk
            .saturating_add(PAGE_SIZE)
            .saturating_add(layout.stack_guard_gap);
        if let Some(next) = st.overlapping(oldbrk, limit).first() {
            if newbrk + PAGE_SIZE > next.start_gap(layout.stack_guard_gap) {
                return orig;
            }
        }
        if st.index.len() > layout.max_map_count {
            return orig;
        }
        // check_brk_limits: mlockall(MCL_FUTURE) locks the growth too.
        if !layout.mlock_future_ok(st.def_flags, st.locked_vm(), newbrk - oldbrk) {
            return orig;
        }
        // `vma_prev_limit(vmi, start_brk)`: the VMA before the break if it
        // reaches above `start_brk`. One that ends exactly there (a bss
        // page below the heap) is not the heap and is never extended;
        // one that starts below it, after a merge took that page into
        // the heap (`mlockall`, `mprotect`), is the heap, and grows.
        let brkvma = st
            .index
            .find_prev(oldbrk)
            .filter(|v| v.end() > st.start_brk);
        let flags = VmFlags::BRK | st.def_flags;
        let p = Proposal {
            start: oldbrk,
            end: newbrk,
            flags,
            file: None,
            pgoff: oldbrk >> PAGE_SHIFT,
            anon: None,
        };
        let expanded =
            brkvma.is_some_and(|v| v.end() == oldbrk) && st.merge_new(&p, true).is_some();
        if !expanded {
            st.commit(
                &[],
                vec![Vma::new(
                    oldbrk,
                    newbrk,
                    flags,
                    oldbrk >> PAGE_SHIFT,
                    None,
                    None,
                )],
            );
        }
        st.brk = addr;
        if st.def_flags.contains(VmFlags::LOCKED) {
            st.populate(oldbrk, newbrk - oldbrk);
        }
        addr
    }

    /// Set the start of the heap (and the break) of an address space that
    /// has no heap yet, as `exec` does at the end of the program image.
    pub fn set_brk_base(&self, addr: u64) {
        let mut st = self.state.write();
        st.start_brk = addr;
        st.brk = addr;
    }
}

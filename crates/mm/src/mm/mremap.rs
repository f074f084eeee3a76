//! `mremap`: shrink, grow in place, or move.

use std::sync::Arc;

use crate::flags::{MapFlags, MremapFlags, VmFlags, PAGE_SHIFT, PAGE_SIZE};
use crate::vma::Vma;
use crate::Errno;

use super::merge::Proposal;
use super::{Mm, State};

impl Mm {
    /// `mremap(old_addr, old_len, new_len, flags, new_addr)`.
    ///
    /// Shrinking unmaps the tail. Growing extends the VMA in place when
    /// the range after it is free, else moves it if `MREMAP_MAYMOVE` allows
    /// (to a new top-down area, or to exactly `new_addr` with
    /// `MREMAP_FIXED`, replacing what is there). `MREMAP_DONTUNMAP` moves
    /// the pages but leaves the old range mapped. As in Linux 6.17 and
    /// later, `MREMAP_FIXED` with equal lengths moves every VMA of the
    /// range, keeping the gaps between them. Errors, in Linux's order:
    /// `EINVAL` for bad flags, unaligned addresses, a zero or oversized new
    /// length, overlapping old and new ranges, or duplicating a private
    /// mapping (`old_len` 0); `EFAULT` when `old_addr` is unmapped or the
    /// range to move runs past its VMA; `EPERM` when that VMA is sealed
    /// ([`mseal`](Mm::mseal)) or an unmap on the way meets a sealed one;
    /// `ENOMEM` when growth has nowhere to go. A moved VMA keeps its name
    /// and loses its userfaultfd registration.
    ///
    /// ```
    /// use mm::{MapFlags, Mm, MremapFlags, Prot};
    /// let mm = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 4096, Prot::READ, anon, None, 0).unwrap();
    /// // A second mapping goes right below the first, so the lower one
    /// // cannot grow in place and must move:
    /// let b = mm.mmap(0, 4096, Prot::READ | Prot::WRITE, anon, None, 0).unwrap();
    /// assert_eq!(b, a - 4096);
    /// assert_eq!(mm.mremap(b, 4096, 8192, MremapFlags::empty(), 0), Err(mm::Errno::ENOMEM));
    /// let c = mm.mremap(b, 4096, 8192, MremapFlags::MAYMOVE, 0).unwrap();
    /// assert_ne!(b, c);
    /// ```
    pub fn mremap(
        &self,
        addr: u64,
        old_len: u64,
        new_len: u64,
        flags: MremapFlags,
        new_addr: u64,
    ) -> Result<u64, Errno> {
        let task_size = self.layout.task_size;
        // PAGE_ALIGN, wrapping as in C.
        let old_len = old_len.wrapping_add(PAGE_SIZE - 1) & !(PAGE_SIZE - 1);
        let new_len = new_len.wrapping_add(PAGE_SIZE - 1) & !(PAGE_SIZE - 1);
        let r = Remap {
            addr,
            old_len,
            new_len,
            flags,
            new_addr,
        };
        // check_mremap_params
        let known = MremapFlags::MAYMOVE | MremapFlags::FIXED | MremapFlags::DONTUNMAP;
        if !(flags - known).is_empty() || addr % PAGE_SIZE != 0 {
            return Err(Errno::EINVAL);
        }
        if new_len == 0 || new_len > task_size {
            return Err(Errno::EINVAL);
        }
        if r.implies_new_addr()
            && (new_addr > task_size - new_len
                || new_addr % PAGE_SIZE != 0
                || !flags.contains(MremapFlags::MAYMOVE)
                || (flags.contains(MremapFlags::DONTUNMAP) && old_len != new_len)
                || r.overlaps())
        {
            return Err(Errno::EINVAL);
        }
        let mut st = self.state.write();
        // Room for the worst case of the early unmaps and the move.
        if st.index.len() + 4 > self.layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        if flags.contains(MremapFlags::FIXED) && old_len == new_len {
            return st.remap_move(self, r);
        }
        let vma = st.index.find(addr);
        let vma = st.check_prep_vma(&self.layout, vma, &r)?;
        let locked = vma.flags().contains(VmFlags::LOCKED);
        let got = if r.implies_new_addr() {
            st.mremap_to(self, vma, r)
        } else {
            st.mremap_at(self, vma, r)
        }?;
        // A locked mapping's growth is faulted in.
        if locked && new_len > old_len {
            st.populate(got + old_len, new_len - old_len);
        }
        Ok(got)
    }
}

/// The arguments of one `mremap` (the kernel's `vma_remap_struct`), with
/// lengths page-aligned.
#[derive(Debug, Clone, Copy)]
struct Remap {
    addr: u64,
    old_len: u64,
    new_len: u64,
    flags: MremapFlags,
    new_addr: u64,
}

impl Remap {
    /// `MREMAP_FIXED` or `MREMAP_DONTUNMAP`: a new address is certain.
    fn implies_new_addr(&self) -> bool {
        self.flags
            .intersects(MremapFlags::FIXED | MremapFlags::DONTUNMAP)
    }

    /// Whether the old and new ranges intersect (with C's wrapping sums).
    fn overlaps(&self) -> bool {
        let end_old = self.addr.wrapping_add(self.old_len);
        let end_new = self.new_addr.wrapping_add(self.new_len);
        end_old > self.new_addr && end_new > self.addr
    }

    /// Expanding, or bound for a new address: either maps new space.
    fn will_map_new(&self) -> bool {
        self.new_len > self.old_len || self.implies_new_addr()
    }
}

/// `get_unmapped_area` flags for moving `vma`: shared mappings say so.
fn area_flags(vma: &Vma, fixed: bool) -> MapFlags {
    let mut f = MapFlags::empty();
    if fixed {
        f |= MapFlags::FIXED;
    }
    if vma.is_shared() {
        f |= MapFlags::SHARED;
    }
    f
}

impl State {
    /// `check_prep_vma`: the checks that need the VMA at `addr`.
    fn check_prep_vma(
        &self,
        layout: &crate::Layout,
        vma: Option<Arc<Vma>>,
        r: &Remap,
    ) -> Result<Arc<Vma>, Errno> {
        let vma = vma.ok_or(Errno::EFAULT)?;
        if vma.flags().contains(VmFlags::SEALED) {
            return Err(Errno::EPERM);
        }
        if !r.will_map_new() {
            return Ok(vma);
        }
        let flags = vma.flags();
        // Duplicating a private mapping with old_len 0 is refused.
        if r.old_len == 0 && !flags.intersects(VmFlags::SHARED | VmFlags::MAYSHARE) {
            return Err(Errno::EINVAL);
        }
        if r.flags.contains(MremapFlags::DONTUNMAP) && flags.contains(VmFlags::DONTEXPAND) {
            return Err(Errno::EINVAL);
        }
        // A shrink may unmap across VMA ends; only what stays must fit.
        let old_len = r.old_len.min(r.new_len);
        if old_len > vma.end() - r.addr {
            return Err(Errno::EFAULT);
        }
        if r.new_len == old_len {
            return Ok(vma);
        }
        let pgoff = vma.pgoff_at(r.addr);
        if pgoff.checked_add(r.new_len >> PAGE_SHIFT).is_none() {
            return Err(Errno::EINVAL);
        }
        if flags.contains(VmFlags::DONTEXPAND) {
            return Err(Errno::EFAULT);
        }
        if !layout.mlock_future_ok(flags, self.locked_vm(), r.new_len.abs_diff(r.old_len)) {
            return Err(Errno::EAGAIN);
        }
        Ok(vma)
    }

    /// `do_munmap` as mremap uses it: the range checks of `munmap`, then
    /// the unmap.
    fn munmap_range(&mut self, layout: &crate::Layout, start: u64, len: u64) -> Result<(), Errno> {
        if start % PAGE_SIZE != 0 || start > layout.task_size || len > layout.task_size - start {
            return Err(Errno::EINVAL);
        }
        let end = start + (len.wrapping_add(PAGE_SIZE - 1) & !(PAGE_SIZE - 1));
        if end == start {
            return Err(Errno::EINVAL);
        }
        self.unmap(layout, start, end)
    }

    /// `mremap_at`: resize without a required new address.
    fn mremap_at(&mut self, mm: &Mm, vma: Arc<Vma>, r: Remap) -> Result<u64, Errno> {
        if r.new_len == r.old_len {
            return Ok(r.addr);
        }
        if r.new_len < r.old_len {
            self.munmap_range(&mm.layout, r.addr + r.new_len, r.old_len - r.new_len)?;
            return Ok(r.addr);
        }
        // expand_vma: in place if the range reaches the VMA's end and the
        // space after it is free, else move.
        let delta = r.new_len - r.old_len;
        if vma.end() - r.addr == r.old_len && self.expandable(mm, &vma, delta) {
            let p = Proposal {
                start: vma.end(),
                end: vma.end() + delta,
                flags: vma.flags(),
                file: vma.file(),
                pgoff: vma.pgoff_at(vma.end()),
                anon: vma.anon().cloned(),
            };
            let name = vma.name_arc();
            self.merge_new_named(&p, name.as_ref(), false)
                .ok_or(Errno::ENOMEM)?;
            return Ok(r.addr);
        }
        if !r.flags.contains(MremapFlags::MAYMOVE) {
            return Err(Errno::ENOMEM);
        }
        let target = self.get_unmapped_area(
            &mm.layout,
            vma.file().map(|f| &**f),
            0,
            r.new_len,
            vma.pgoff_at(r.addr),
            area_flags(&vma, false),
        )?;
        self.move_vma(mm, &vma, r, target)
    }

    /// `vma_expandable`: the `delta` bytes after `vma` are free and inside
    /// the address space.
    fn expandable(&self, mm: &Mm, vma: &Vma, delta: u64) -> bool {
        let Some(end) = vma.end().checked_add(delta) else {
            return false;
        };
        if !self.overlapping(vma.end(), end).is_empty() {
            return false;
        }
        end <= mm.layout.task_size
    }

    /// `remap_move`: `MREMAP_FIXED` with equal lengths moves every VMA in
    /// `[addr, addr + old_len)` (Linux 6.17 and later), keeping the gaps
    /// between them. The range must start in a VMA; a failure part-way
    /// leaves the VMAs moved so far where they went.
    fn remap_move(&mut self, mm: &Mm, r: Remap) -> Result<u64, Errno> {
        let start = r.addr;
        let end = r.addr.wrapping_add(r.old_len);
        let mut target = r.new_addr;
        let mut res = Err(Errno::EFAULT);
        let mut last_end = 0;
        let mut seen = false;
        let mut pos = start;
        loop {
            let Some(vma) = self.index.find_next(pos).filter(|v| v.start() < end) else {
                break;
            };
            if !seen && start < vma.start() {
                return Err(Errno::EFAULT);
            }
            let a = vma.start().max(start);
            let len = end.min(vma.end()) - a;
            let offset = if seen { vma.start() - last_end } else { 0 };
            last_end = vma.end();
            pos = last_end;
            let sub = Remap {
                addr: a,
                old_len: len,
                new_len: len,
                flags: r.flags,
                new_addr: target + offset,
            };
            // vma_multi_allowed: a VMA registered with userfaultfd moves
            // only alone.
            if vma.flags().intersects(VmFlags::UFFD_MASK) && (seen || vma.end() < end) {
                return Err(Errno::EFAULT);
            }
            let vma = self.check_prep_vma(&mm.layout, Some(vma), &sub)?;
            let got = self.mremap_to(mm, vma, sub)?;
            if !seen {
                res = Ok(got);
            }
            seen = true;
            target = got + len;
            // The walk resumes after the VMA just handled (as it was before
            // the move): if that reached the end of the range, it is over,
            // even if the move merged something new into the range.
            if pos >= end {
                break;
            }
        }
        res
    }

    /// `mremap_to`: the `MREMAP_FIXED` / `MREMAP_DONTUNMAP` path.
    fn mremap_to(&mut self, mm: &Mm, vma: Arc<Vma>, mut r: Remap) -> Result<u64, Errno> {
        let layout = &mm.layout;
        let mut vma = vma;
        if r.flags.contains(MremapFlags::FIXED) {
            self.munmap_range(layout, r.new_addr, r.new_len)?;
            vma = self.index.find(r.addr).ok_or(Errno::EFAULT)?;
        }
        if r.old_len > r.new_len {
            self.munmap_range(layout, r.addr + r.new_len, r.old_len - r.new_len)?;
            vma = self.index.find(r.addr).ok_or(Errno::EFAULT)?;
            r.old_len = r.new_len;
        }
        let fixed = r.flags.contains(MremapFlags::FIXED);
        let target = self.get_unmapped_area(
            layout,
            vma.file().map(|f| &**f),
            r.new_addr,
            r.new_len,
            vma.pgoff_at(r.addr),
            area_flags(&vma, fixed),
        )?;
        self.move_vma(mm, &vma, r, target)
    }

    /// `move_vma`: copy `[addr, addr + old_len)` of `vma` to `new_addr`
    /// (merging there if it can), then unmap the old range unless
    /// `MREMAP_DONTUNMAP`.
    fn move_vma(&mut self, mm: &Mm, vma: &Arc<Vma>, r: Remap, new_addr: u64) -> Result<u64, Errno> {
        let layout = &mm.layout;
        if self.index.len() + 2 > layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        // copy_vma: unfaulted anonymous memory takes the page offset of
        // its new home, as a fresh mapping there would.
        let mut pgoff = vma.pgoff_at(r.addr);
        if vma.is_anonymous() && vma.anon().is_none() {
            pgoff = new_addr >> PAGE_SHIFT;
        }
        let p = Proposal {
            start: new_addr,
            end: new_addr + r.new_len,
            flags: vma.flags(),
            file: vma.file(),
            pgoff,
            anon: vma.anon().cloned(),
        };
        // The page tables move, and their guard markers with them.
        self.guards
            .shift(r.addr, r.addr + r.old_len.min(r.new_len), new_addr);
        let name = vma.name_arc();
        if self.merge_new_named(&p, name.as_ref(), false).is_none() {
            let v = Vma::new(
                new_addr,
                new_addr + r.new_len,
                vma.flags(),
                pgoff,
                vma.file().cloned(),
                vma.anon().cloned(),
            )
            .named(name);
            self.commit(&[], vec![v]);
        }
        self.uffd_drop_moved(new_addr);
        if r.flags.contains(MremapFlags::DONTUNMAP) {
            // dontunmap_complete: the old VMA (all of it) loses VM_LOCKED;
            // if it was moved whole it also forgets its anon_vma.
            if let Some(old) = self.index.find(r.addr) {
                let whole = old.start() == r.addr && old.end() == r.addr + r.old_len;
                let flags = old.flags() - VmFlags::LOCKED_MASK;
                let anon = if whole { None } else { old.anon().cloned() };
                if flags != old.flags() || anon.is_none() != old.anon().is_none() {
                    let v = old.with_flags(flags).with_anon(anon);
                    self.commit(&[old], vec![v]);
                }
            }
            return Ok(new_addr);
        }
        if r.old_len > 0 {
            // Unmapping the source cannot fail for lack of map slots: the
            // check above left room for the splits.
            let _ = self.unmap(layout, r.addr, r.addr + r.old_len);
        }
        Ok(new_addr)
    }
}

//! `mremap`: shrink, grow in place, or move.

use std::sync::Arc;

use crate::flags::{page_align, MapFlags, MremapFlags, VmFlags, PAGE_SHIFT, PAGE_SIZE};
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
    /// the pages but leaves the old range mapped. Errors: `EINVAL` for bad
    /// flags, unaligned addresses, a zero new length, overlapping old and
    /// new ranges; `EFAULT` when `old_addr` is unmapped or the old range
    /// runs past its VMA; `ENOMEM` when growth has nowhere to go.
    ///
    /// ```
    /// use mm::{MapFlags, Mm, MmConfig, MremapFlags, Prot};
    /// let mm = Mm::new(MmConfig::default());
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 4096, Prot::READ, anon, None, 0).unwrap();
    /// // The area above is taken by nothing, but top-down allocation put
    /// // `a` right under mmap_base, so growth must move:
    /// assert_eq!(mm.mremap(a, 4096, 8192, MremapFlags::empty(), 0), Err(mm::Errno::ENOMEM));
    /// let b = mm.mremap(a, 4096, 8192, MremapFlags::MAYMOVE, 0).unwrap();
    /// assert_ne!(a, b);
    /// ```
    pub fn mremap(
        &self,
        addr: u64,
        old_len: u64,
        new_len: u64,
        flags: MremapFlags,
        new_addr: u64,
    ) -> Result<u64, Errno> {
        let known = MremapFlags::MAYMOVE | MremapFlags::FIXED | MremapFlags::DONTUNMAP;
        if !(flags - known).is_empty() {
            return Err(Errno::EINVAL);
        }
        if flags.contains(MremapFlags::FIXED) && !flags.contains(MremapFlags::MAYMOVE) {
            return Err(Errno::EINVAL);
        }
        if flags.contains(MremapFlags::DONTUNMAP)
            && (!flags.contains(MremapFlags::MAYMOVE) || old_len != new_len)
        {
            return Err(Errno::EINVAL);
        }
        if addr % PAGE_SIZE != 0 {
            return Err(Errno::EINVAL);
        }
        let old_len = page_align(old_len).ok_or(Errno::EINVAL)?;
        let new_len = page_align(new_len).ok_or(Errno::EINVAL)?;
        if new_len == 0 {
            return Err(Errno::EINVAL);
        }
        let mut st = self.state.write();
        let vma = st.index.find(addr).ok_or(Errno::EFAULT)?;
        if flags.intersects(MremapFlags::FIXED | MremapFlags::DONTUNMAP) {
            return st.mremap_to(self, vma, addr, old_len, new_len, flags, new_addr);
        }
        if old_len >= new_len {
            let end = addr.checked_add(old_len).ok_or(Errno::EINVAL)?;
            if old_len > new_len {
                if end > self.layout.task_size {
                    return Err(Errno::EINVAL);
                }
                st.unmap(&self.layout, addr + new_len, end)?;
            }
            return Ok(addr);
        }
        let vma = st.vma_to_resize(addr, old_len, new_len, flags)?;
        if old_len == vma.end() - addr && st.expandable(self, &vma, new_len - old_len) {
            let p = Proposal {
                start: vma.end(),
                end: vma.end() + (new_len - old_len),
                flags: vma.flags(),
                file: vma.file(),
                pgoff: vma.pgoff_at(vma.end()),
                anon: vma.anon().cloned(),
            };
            st.merge_new(&p, false).ok_or(Errno::ENOMEM)?;
            return Ok(addr);
        }
        if !flags.contains(MremapFlags::MAYMOVE) {
            return Err(Errno::ENOMEM);
        }
        let map_flags = if vma.is_shared() {
            MapFlags::SHARED
        } else {
            MapFlags::empty()
        };
        let target = st.get_unmapped_area(
            &self.layout,
            vma.file().map(|f| &**f),
            0,
            new_len,
            map_flags | area_kind(&vma),
        )?;
        st.move_vma(self, &vma, addr, old_len, new_len, target, flags)
    }
}

/// `get_unmapped_area` treats anonymous private memory (the only kind that
/// gets 2 MiB alignment) by its flags; a moved VMA passes its own kind.
fn area_kind(vma: &Vma) -> MapFlags {
    if vma.file().is_none() && !vma.is_shared() {
        MapFlags::PRIVATE
    } else {
        MapFlags::empty()
    }
}

impl State {
    /// `vma_to_resize`: the VMA at `addr`, if the old range lies within it
    /// and may grow to `new_len`.
    fn vma_to_resize(
        &self,
        addr: u64,
        old_len: u64,
        new_len: u64,
        flags: MremapFlags,
    ) -> Result<Arc<Vma>, Errno> {
        let vma = self.index.find(addr).ok_or(Errno::EFAULT)?;
        if old_len == 0 && !vma.flags().intersects(VmFlags::SHARED | VmFlags::MAYSHARE) {
            return Err(Errno::EINVAL);
        }
        if flags.contains(MremapFlags::DONTUNMAP) && vma.flags().contains(VmFlags::DONTEXPAND) {
            return Err(Errno::EINVAL);
        }
        if old_len > vma.end() - addr {
            return Err(Errno::EFAULT);
        }
        if new_len == old_len {
            return Ok(vma);
        }
        let pgoff = vma.pgoff_at(addr);
        if pgoff.checked_add(new_len >> PAGE_SHIFT).is_none() {
            return Err(Errno::EINVAL);
        }
        if vma.flags().contains(VmFlags::DONTEXPAND) {
            return Err(Errno::EFAULT);
        }
        Ok(vma)
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

    /// `mremap_to`: the `MREMAP_FIXED` / `MREMAP_DONTUNMAP` path.
    #[allow(clippy::too_many_arguments)]
    fn mremap_to(
        &mut self,
        mm: &Mm,
        _vma: Arc<Vma>,
        addr: u64,
        mut old_len: u64,
        new_len: u64,
        flags: MremapFlags,
        new_addr: u64,
    ) -> Result<u64, Errno> {
        let layout = &mm.layout;
        if new_addr % PAGE_SIZE != 0 {
            return Err(Errno::EINVAL);
        }
        if new_len > layout.task_size || new_addr > layout.task_size - new_len {
            return Err(Errno::EINVAL);
        }
        if addr.saturating_add(old_len) > new_addr && new_addr + new_len > addr {
            return Err(Errno::EINVAL);
        }
        if self.index.len() + 2 >= layout.max_map_count.saturating_sub(3) {
            return Err(Errno::ENOMEM);
        }
        if flags.contains(MremapFlags::FIXED) {
            self.unmap(layout, new_addr, new_addr + new_len)?;
        }
        if old_len > new_len {
            let end = addr.checked_add(old_len).ok_or(Errno::EINVAL)?;
            self.unmap(layout, addr + new_len, end)?;
            old_len = new_len;
        }
        let vma = self.vma_to_resize(addr, old_len, new_len, flags)?;
        let mut map_flags = area_kind(&vma);
        if flags.contains(MremapFlags::FIXED) {
            map_flags |= MapFlags::FIXED;
        }
        if vma.is_shared() {
            map_flags |= MapFlags::SHARED;
        }
        let got = self.get_unmapped_area(layout, vma.file().map(|f| &**f), new_addr, new_len, map_flags)?;
        let target = if flags.contains(MremapFlags::FIXED) {
            new_addr
        } else {
            got
        };
        self.move_vma(mm, &vma, addr, old_len, new_len, target, flags)
    }

    /// `move_vma`: copy the VMA's `[addr, addr + old_len)` to `new_addr`
    /// (merging there if it can), then unmap the old range unless
    /// `MREMAP_DONTUNMAP`.
    #[allow(clippy::too_many_arguments)]
    fn move_vma(
        &mut self,
        mm: &Mm,
        vma: &Arc<Vma>,
        addr: u64,
        old_len: u64,
        new_len: u64,
        new_addr: u64,
        flags: MremapFlags,
    ) -> Result<u64, Errno> {
        let layout = &mm.layout;
        if self.index.len() >= layout.max_map_count.saturating_sub(3) {
            return Err(Errno::ENOMEM);
        }
        let mut pgoff = vma.pgoff_at(addr);
        if vma.is_anonymous() && vma.anon().is_none() {
            // Unfaulted anonymous memory takes the page offset of its new
            // home, to merge there as a fresh mapping would.
            pgoff = new_addr >> PAGE_SHIFT;
        }
        let p = Proposal {
            start: new_addr,
            end: new_addr + new_len,
            flags: vma.flags(),
            file: vma.file(),
            pgoff,
            anon: vma.anon().cloned(),
        };
        if self.merge_new(&p, false).is_none() {
            let v = Vma::new(
                new_addr,
                new_addr + new_len,
                vma.flags(),
                pgoff,
                vma.file().cloned(),
                vma.anon().cloned(),
            );
            self.commit(&[], vec![v]);
        }
        if flags.contains(MremapFlags::DONTUNMAP) {
            // The old range stays mapped, unlocked, and without its pages:
            // a VMA moved whole forgets its anon_vma.
            if let Some(old) = self.index.find(addr) {
                let whole = old.start() == addr && old.end() == addr + old_len;
                let flags = old.flags() - VmFlags::LOCKED;
                if whole && old.anon().is_some() {
                    let v = old.with_flags(flags).with_anon(None);
                    self.commit(&[old], vec![v]);
                } else if flags != old.flags() {
                    let v = old.with_flags(flags);
                    self.commit(&[old], vec![v]);
                }
            }
            return Ok(new_addr);
        }
        if old_len > 0 {
            // Unmapping the source cannot fail for lack of map slots: the
            // check above left room for the splits.
            let _ = self.unmap(layout, addr, addr + old_len);
        }
        Ok(new_addr)
    }
}

//! `mprotect`.

use std::sync::Arc;

use crate::flags::{page_align, Prot, VmFlags, PAGE_SIZE};
use crate::vma::Vma;
use crate::Errno;

use super::{Mm, State};

impl Mm {
    /// `mprotect(addr, len, prot)`.
    ///
    /// `EINVAL` for an unaligned address, unknown protection bits or both
    /// `PROT_GROWSDOWN` and `PROT_GROWSUP`; `ENOMEM` when the range is not
    /// fully mapped; `EACCES` when a VMA may not get the protection (a
    /// shared mapping of a file opened read-only made writable); `EPERM`
    /// for a VMA sealed by [`mseal`](Mm::mseal), even when its protection
    /// would not change. As in Linux, VMAs are changed in address order
    /// and a hole or a refused VMA stops the walk: the VMAs before it keep
    /// their new protection.
    ///
    /// ```
    /// use mm::{Errno, MapFlags, Mm, Prot};
    /// let mm = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 2 * 4096, Prot::READ, anon, None, 0).unwrap();
    /// mm.mprotect(a, 4096, Prot::READ | Prot::WRITE).unwrap();
    /// assert_eq!(mm.map_count(), 2);
    /// assert_eq!(mm.mprotect(a + 2 * 4096, 4096, Prot::READ), Err(Errno::ENOMEM));
    /// ```
    pub fn mprotect(&self, addr: u64, len: u64, prot: Prot) -> Result<(), Errno> {
        self.do_mprotect_pkey(addr, len, prot, -1)
    }

    /// `do_mprotect_pkey`: `mprotect`, and with `pkey` other than -1
    /// `pkey_mprotect`, whose key must be allocated (`EINVAL`, checked
    /// after the arguments and before the range).
    pub(crate) fn do_mprotect_pkey(
        &self,
        addr: u64,
        len: u64,
        prot: Prot,
        pkey: i32,
    ) -> Result<(), Errno> {
        let grows = prot & (Prot::GROWSDOWN | Prot::GROWSUP);
        let prot = prot - (Prot::GROWSDOWN | Prot::GROWSUP);
        if grows == Prot::GROWSDOWN | Prot::GROWSUP {
            return Err(Errno::EINVAL);
        }
        if addr % PAGE_SIZE != 0 {
            return Err(Errno::EINVAL);
        }
        if len == 0 {
            return Ok(());
        }
        let len = page_align(len).ok_or(Errno::ENOMEM)?;
        let end = addr.checked_add(len).ok_or(Errno::ENOMEM)?;
        // x86 accepts PROT_SEM (8) and nothing else beyond rwx.
        if prot.bits() & !0xf != 0 {
            return Err(Errno::EINVAL);
        }
        let mut st = self.state.write();
        if pkey != -1 && !st.pkey_is_allocated(&self.layout, pkey) {
            return Err(Errno::EINVAL);
        }
        st.mprotect(&self.layout, addr, end, prot, grows, pkey)
    }
}

/// What [`State::walk_vmas`] does at a hole in its range.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Holes {
    /// Stop with `ENOMEM` (`mprotect`, `mlock`).
    Fail,
    /// Skip it, and say at the end that there was one (`madvise`).
    Skip,
}

impl State {
    fn mprotect(
        &mut self,
        layout: &crate::Layout,
        mut start: u64,
        end: u64,
        prot: Prot,
        grows: Prot,
        req_pkey: i32,
    ) -> Result<(), Errno> {
        let Some(first) = self.index.find_next(start).filter(|v| v.start() < end) else {
            return Err(Errno::ENOMEM);
        };
        if grows.contains(Prot::GROWSDOWN) {
            start = first.start();
            if !first.flags().contains(VmFlags::GROWSDOWN) {
                return Err(Errno::EINVAL);
            }
        } else {
            if first.start() > start {
                return Err(Errno::ENOMEM);
            }
            if grows.contains(Prot::GROWSUP) {
                // No VMA grows up on x86-64.
                return Err(Errno::EINVAL);
            }
        }
        self.walk_vmas(start, end, Holes::Fail, |st, v, prev, s, e| {
            // arch_override_mprotect_pkey: without protection keys every
            // VMA gets key 0; a key asked for is taken as it is; else
            // PROT_EXEC alone takes the execute-only key and leaving
            // exec-only drops back to key 0.
            let old = v.flags();
            let pkey = if !layout.exec_only_pkey {
                0
            } else if req_pkey != -1 {
                req_pkey as u8
            } else if prot.bits() == Prot::EXEC.bits() {
                match st.execute_only_pkey(layout) {
                    Some(k) if k > 0 => k,
                    _ => old.pkey(),
                }
            } else if (old & VmFlags::ACCESS) == VmFlags::EXEC
                && st.exec_only_pkey == i32::from(old.pkey())
            {
                0
            } else {
                old.pkey()
            };
            let mut newflags = VmFlags::from_prot(prot)
                | VmFlags::from_pkey(pkey)
                | (old - VmFlags::ACCESS - VmFlags::PKEY_MASK);
            // Each access bit needs its VM_MAY* bit.
            let may = VmFlags::from_bits_truncate(newflags.bits() >> 4);
            if !(newflags & VmFlags::ACCESS).difference(may).is_empty() {
                return Err(Errno::EACCES);
            }
            st.mprotect_fixup(&v, prev, s, e, &mut newflags)
        })?;
        Ok(())
    }

    /// `mprotect_fixup`: give `[start, end)` of `vma` the flags `newflags`,
    /// merging or splitting as needed. Returns the VMA covering the range.
    fn mprotect_fixup(
        &mut self,
        vma: &Arc<Vma>,
        prev: Option<&Arc<Vma>>,
        start: u64,
        end: u64,
        newflags: &mut VmFlags,
    ) -> Result<Arc<Vma>, Errno> {
        let old = vma.flags();
        // Sealed VMAs refuse before the no-change shortcut.
        if old.contains(VmFlags::SEALED) {
            return Err(Errno::EPERM);
        }
        if *newflags == old {
            return Ok(Arc::clone(vma));
        }
        if newflags.contains(VmFlags::WRITE) {
            if !old.intersects(
                VmFlags::ACCOUNT | VmFlags::WRITE | VmFlags::SHARED | VmFlags::NORESERVE,
            ) {
                *newflags |= VmFlags::ACCOUNT;
            }
        } else if old.contains(VmFlags::ACCOUNT) && vma.is_anonymous() && vma.anon().is_none() {
            *newflags -= VmFlags::ACCOUNT;
        }
        let done = self.modify(vma, prev, start, end, *newflags)?;
        // A private locked VMA that becomes writable is write-faulted in
        // (populate_vma_page_range), which gives it an anon_vma.
        let private_locked =
            (old & (VmFlags::WRITE | VmFlags::SHARED | VmFlags::LOCKED)) == VmFlags::LOCKED;
        if private_locked
            && newflags.contains(VmFlags::WRITE)
            && !newflags.contains(VmFlags::LOCKONFAULT)
        {
            let _ = self.populate_vma(&done, start, end, true);
        }
        Ok(done)
    }

    /// The walk the flag-changing calls share (the kernel's
    /// `madvise_walk_vmas`, `mprotect`'s and `apply_vma_lock_flags`'s
    /// loops, and their likes in mseal, userfaultfd and naming):
    /// `f(state, vma, prev, start, end)` on each VMA's part of
    /// `[start, end)` in address order, `prev` being the VMA before the
    /// part (for merges); `f` returns the VMA that covers the part
    /// afterwards, the next part's `prev`. At a hole the walk either
    /// stops with `ENOMEM` ([`Holes::Fail`], as `mprotect` and `mlock`
    /// do) or skips it and says at the end that it met one
    /// ([`Holes::Skip`]: the madvise-like calls then fail with `ENOMEM`).
    /// An error from `f` stops the walk, what it changed before staying
    /// changed, as in the kernel.
    pub(crate) fn walk_vmas(
        &mut self,
        start: u64,
        end: u64,
        holes: Holes,
        mut f: impl FnMut(&mut State, Arc<Vma>, Option<&Arc<Vma>>, u64, u64) -> Result<Arc<Vma>, Errno>,
    ) -> Result<bool, Errno> {
        let mut pos = start;
        let mut hole = false;
        let mut prev: Option<Arc<Vma>> = None;
        let mut first = true;
        while pos < end {
            let Some(v) = self.index.find_next(pos).filter(|v| v.start() < end) else {
                return match holes {
                    Holes::Fail => Err(Errno::ENOMEM),
                    Holes::Skip => Ok(true),
                };
            };
            if first {
                prev = if v.start() < pos {
                    Some(Arc::clone(&v))
                } else {
                    self.ending_at(v.start())
                };
                first = false;
            }
            if pos < v.start() {
                if holes == Holes::Fail {
                    return Err(Errno::ENOMEM);
                }
                hole = true;
                pos = v.start();
            }
            let seg_end = v.end().min(end);
            let done = f(self, v, prev.as_ref(), pos, seg_end)?;
            pos = seg_end.max(done.end());
            prev = Some(done);
        }
        Ok(hole)
    }

    /// `vma_modify`: merge if the rules allow, else split off the parts of
    /// `vma` outside `[start, end)` and change the rest. `ENOMEM` when a
    /// split would exceed `max_map_count`.
    pub(crate) fn modify(
        &mut self,
        vma: &Arc<Vma>,
        prev: Option<&Arc<Vma>>,
        start: u64,
        end: u64,
        flags: VmFlags,
    ) -> Result<Arc<Vma>, Errno> {
        let name = vma.name_arc();
        self.modify_named(vma, prev, start, end, flags, name)
    }

    /// [`modify`](Self::modify) that also gives the range the anonymous
    /// name `name` (`vma_modify_name`).
    pub(crate) fn modify_named(
        &mut self,
        vma: &Arc<Vma>,
        prev: Option<&Arc<Vma>>,
        start: u64,
        end: u64,
        flags: VmFlags,
        name: Option<Arc<str>>,
    ) -> Result<Arc<Vma>, Errno> {
        if let Some(merged) = self.merge_existing_named(vma, prev, start, end, flags, name.as_ref())
        {
            return Ok(merged);
        }
        let mut cur = Arc::clone(vma);
        if cur.start() < start {
            cur = self.split(&cur, start, false)?;
        }
        if cur.end() > end {
            cur = self.split(&cur, end, true)?;
        }
        Ok(self
            .commit(&[Arc::clone(&cur)], vec![cur.with_flags(flags).named(name)])
            .remove(0))
    }

    /// `split_vma`: cut `vma` at `at`; returns the lower part if `keep_low`,
    /// else the upper part. `ENOMEM` at `max_map_count`.
    pub(crate) fn split(
        &mut self,
        vma: &Arc<Vma>,
        at: u64,
        keep_low: bool,
    ) -> Result<Arc<Vma>, Errno> {
        if self.index.len() >= self.max_map_count {
            return Err(Errno::ENOMEM);
        }
        let parts = vec![vma.resized(vma.start(), at), vma.resized(at, vma.end())];
        let mut parts = self.commit(&[Arc::clone(vma)], parts);
        Ok(if keep_low {
            parts.remove(0)
        } else {
            parts.remove(1)
        })
    }
}

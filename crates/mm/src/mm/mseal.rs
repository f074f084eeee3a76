//! `mseal`, and the checks the other calls make against sealed VMAs.
//!
//! A sealed VMA (`VM_SEALED`) can no longer be unmapped, moved, resized,
//! re-protected or replaced by `MAP_FIXED`; those calls fail with `EPERM`.
//! Where each call looks, as in Linux 6.18 (all probed on it):
//!
//! * `munmap`, and every unmap inside another call (`mmap` with
//!   `MAP_FIXED`, `mremap`'s target and shrink, `brk` shrinking): the
//!   whole range is checked before anything is unmapped, but a range that
//!   starts inside an unsealed VMA has split it there first; the split
//!   stays ([`State::unmap_check_sealed`]).
//! * `mprotect`: per VMA during the walk, before the "nothing changes"
//!   shortcut, so VMAs before the sealed one keep their new protection.
//! * `mremap`: the VMA at the old address, right after the `EFAULT`
//!   check; a multi-VMA `MREMAP_FIXED` move stops at the first sealed VMA,
//!   the ones before it already moved.
//! * `madvise`: the discarding advices, per VMA in the walk, on sealed
//!   read-only private anonymous memory
//!   ([`State::sealed_refuses_discard`]).
//!
//! Naming a VMA, registering it with userfaultfd and the protection-key
//! calls other than `pkey_mprotect` are not refused.

use std::sync::Arc;

use crate::flags::{rounded_range, VmFlags};
use crate::vma::Vma;
use crate::Errno;

use super::mprotect::Holes;
use super::{Mm, State};

impl Mm {
    /// `mseal(addr, len, flags)`: seal every VMA in `[addr, addr + len)`
    /// (`len` rounded up to a page), splitting the VMAs at either end and
    /// merging with sealed neighbours as any flag change does.
    ///
    /// Errors, in the kernel's order: `EINVAL` for any flag, an unaligned
    /// address, or a length that wraps (rounding or the end); a zero length
    /// then succeeds; `ENOMEM` when any part of the range is unmapped,
    /// checked before anything is sealed; `ENOMEM` when a split would pass
    /// `max_map_count` (the VMAs before it stay sealed, as in the kernel).
    /// Sealing a sealed VMA again succeeds.
    ///
    /// ```
    /// use mm::{Errno, MapFlags, Mm, Prot, VmFlags};
    /// let mm = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 3 * 4096, Prot::READ, anon, None, 0).unwrap();
    /// mm.mseal(a + 4096, 4096, 0).unwrap();
    /// assert_eq!(mm.map_count(), 3);
    /// assert!(mm.find_vma(a + 4096).unwrap().flags().contains(VmFlags::SEALED));
    /// assert_eq!(mm.munmap(a, 3 * 4096), Err(Errno::EPERM));
    /// assert_eq!(mm.mprotect(a + 4096, 4096, Prot::READ), Err(Errno::EPERM));
    /// assert_eq!(mm.mseal(a, 4096, 1), Err(Errno::EINVAL));
    /// ```
    pub fn mseal(&self, addr: u64, len: u64, flags: u64) -> Result<(), Errno> {
        if flags != 0 {
            return Err(Errno::EINVAL);
        }
        let Some(end) = rounded_range(addr, len)? else {
            return Ok(());
        };
        let mut st = self.state.write();
        if st.has_gap(addr, end) {
            return Err(Errno::ENOMEM);
        }
        st.seal(addr, end)
    }
}

impl State {
    /// Whether some part of `[start, end)` is not mapped.
    fn has_gap(&self, start: u64, end: u64) -> bool {
        let mut pos = start;
        for v in self.overlapping(start, end) {
            if v.start() > pos {
                return true;
            }
            pos = v.end();
        }
        pos < end
    }

    /// `mseal_apply`: set `VM_SEALED` on `[start, end)`, which is mapped.
    fn seal(&mut self, start: u64, end: u64) -> Result<(), Errno> {
        self.walk_vmas(start, end, Holes::Skip, |st, v, prev, s, e| {
            if v.flags().contains(VmFlags::SEALED) {
                return Ok(v);
            }
            let flags = v.flags() | VmFlags::SEALED;
            st.modify(&v, prev, s, e, flags)
        })?;
        Ok(())
    }

    /// Whether a discarding `madvise` advice must fail with `EPERM` on
    /// `vma` (`can_madvise_modify` of Linux 6.18): it is sealed, private
    /// anonymous memory (no file; shared anonymous memory is shmem and
    /// allowed, as are file mappings), and not writable (a writable one
    /// could be zeroed by the process anyway). Linux 6.18 asks this per
    /// VMA as the madvise walk reaches it, for the advices that discard
    /// or change what a later fault reads ([`Advice::discards`]), so VMAs
    /// before a refused one keep the advice (as the running kernel shows
    /// for `MADV_WIPEONFORK` over an unsealed VMA and then a sealed one).
    ///
    /// [`Advice::discards`]: crate::Advice::discards
    pub(crate) fn sealed_refuses_discard(vma: &Vma) -> bool {
        let f = vma.flags();
        f.contains(VmFlags::SEALED) && vma.is_anonymous() && !f.contains(VmFlags::WRITE)
    }

    /// The sealing check of an unmap of `[start, ..)` over `old` (the VMAs
    /// it meets, in order): `EPERM` if one is sealed. As the kernel gathers
    /// the VMAs to unmap, it first splits an unsealed first VMA that the
    /// range starts inside, then meets the sealed one and gives up without
    /// undoing the split.
    pub(crate) fn unmap_check_sealed(&mut self, old: &[Arc<Vma>], start: u64) -> Result<(), Errno> {
        if !old.iter().any(|v| v.flags().contains(VmFlags::SEALED)) {
            return Ok(());
        }
        if let Some(first) = old.first() {
            if first.start() < start && !first.flags().contains(VmFlags::SEALED) {
                let parts = vec![
                    first.resized(first.start(), start),
                    first.resized(start, first.end()),
                ];
                self.commit(&[Arc::clone(first)], parts);
            }
        }
        Err(Errno::EPERM)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Errno, Layout, MapFlags, Mm, MremapFlags, Policy, Prot, VmFlags};

    const P: u64 = 4096;
    const ANON: MapFlags = MapFlags::PRIVATE.union(MapFlags::ANONYMOUS);

    fn spans(mm: &Mm) -> Vec<(u64, u64, bool)> {
        mm.vmas()
            .iter()
            .map(|v| (v.start(), v.end(), v.flags().contains(VmFlags::SEALED)))
            .collect()
    }

    /// `[b, b+4)` read-write unsealed, `[b+4, b+8)` read-only sealed: the
    /// running kernel's set-up for the probes these tests repeat.
    fn setup() -> (Mm, u64) {
        let mm = Mm::default();
        let rw = Prot::READ | Prot::WRITE;
        let b = mm.mmap(0, 8 * P, rw, ANON, None, 0).unwrap();
        mm.mprotect(b + 4 * P, 4 * P, Prot::READ).unwrap();
        mm.mseal(b + 4 * P, 4 * P, 0).unwrap();
        (mm, b)
    }

    #[test]
    fn argument_errors_in_order() {
        let (mm, b) = setup();
        let before = spans(&mm);
        assert_eq!(mm.mseal(b, 0, 1), Err(Errno::EINVAL));
        assert_eq!(mm.mseal(b + 1, 0, 0), Err(Errno::EINVAL));
        assert_eq!(mm.mseal(b, 0, 0), Ok(()));
        assert_eq!(mm.mseal(b, u64::MAX, 0), Err(Errno::EINVAL));
        assert_eq!(mm.mseal(b, 0u64.wrapping_sub(P), 0), Err(Errno::EINVAL));
        assert_eq!(mm.mseal(0u64.wrapping_sub(P), P, 0), Err(Errno::EINVAL));
        assert_eq!(mm.mseal(b + 7 * P, 2 * P, 0), Err(Errno::ENOMEM));
        assert_eq!(mm.mseal(0x7fff_ffff_f000, P, 0), Err(Errno::ENOMEM));
        assert_eq!(spans(&mm), before);
    }

    #[test]
    fn sealing_splits_and_merges() {
        let (mm, b) = setup();
        mm.mprotect(b, 4 * P, Prot::READ).unwrap();
        // Sealing the page before the sealed VMA joins it.
        mm.mseal(b + 3 * P, P + 1, 0).unwrap();
        assert_eq!(
            spans(&mm),
            vec![(b, b + 3 * P, false), (b + 3 * P, b + 8 * P, true)]
        );
        // Sealing again is no change.
        mm.mseal(b + 3 * P, 5 * P, 0).unwrap();
        assert_eq!(mm.map_count(), 2);
    }

    #[test]
    fn sealed_vmas_refuse_changes() {
        let (mm, b) = setup();
        // mprotect changes the unsealed VMA, then stops at the sealed one.
        assert_eq!(mm.mprotect(b, 8 * P, Prot::NONE), Err(Errno::EPERM));
        assert_eq!(mm.find_vma(b).unwrap().prot(), Prot::NONE);
        assert_eq!(mm.find_vma(b + 4 * P).unwrap().prot(), Prot::READ);
        // Unmapping checks the whole range first.
        assert_eq!(mm.munmap(b, 8 * P), Err(Errno::EPERM));
        assert_eq!(mm.map_count(), 2);
        // ... but a range starting inside an unsealed VMA splits it.
        let fixed = ANON | MapFlags::FIXED;
        assert_eq!(
            mm.mmap(b + 2 * P, 4 * P, Prot::READ, fixed, None, 0),
            Err(Errno::EPERM)
        );
        assert_eq!(
            spans(&mm),
            vec![
                (b, b + 2 * P, false),
                (b + 2 * P, b + 4 * P, false),
                (b + 4 * P, b + 8 * P, true)
            ]
        );
        // MAP_FIXED_NOREPLACE reports EEXIST first.
        let noreplace = ANON | MapFlags::FIXED_NOREPLACE;
        assert_eq!(
            mm.mmap(b + 4 * P, P, Prot::READ, noreplace, None, 0),
            Err(Errno::EEXIST)
        );
        let mm_flags = MremapFlags::MAYMOVE;
        let fixed_move = MremapFlags::MAYMOVE | MremapFlags::FIXED;
        // mremap: EFAULT, argument errors before EPERM.
        assert_eq!(mm.mremap(b + 30 * P, P, P, mm_flags, 0), Err(Errno::EFAULT));
        assert_eq!(mm.mremap(b + 4 * P, P, 0, mm_flags, 0), Err(Errno::EINVAL));
        assert_eq!(
            mm.mremap(b + 4 * P, P, P, MremapFlags::empty(), 0),
            Err(Errno::EPERM)
        );
        assert_eq!(
            mm.mremap(b + 4 * P, P, 2 * P, mm_flags, 0),
            Err(Errno::EPERM)
        );
        let dontunmap = MremapFlags::MAYMOVE | MremapFlags::DONTUNMAP;
        assert_eq!(mm.mremap(b + 4 * P, P, P, dontunmap, 0), Err(Errno::EPERM));
        // A target over a sealed VMA.
        assert_eq!(mm.mremap(b, P, P, fixed_move, b + 5 * P), Err(Errno::EPERM));
        // A multi-VMA move stops at the sealed VMA, the first one moved.
        let before = mm.map_count();
        assert_eq!(
            mm.mremap(b + 2 * P, 6 * P, 6 * P, fixed_move, b + 40 * P),
            Err(Errno::EPERM)
        );
        assert_eq!(mm.map_count(), before);
        assert!(mm
            .find_vma(b + 40 * P)
            .is_some_and(|v| v.start() == b + 40 * P));
        assert!(mm
            .find_vma(b + 2 * P)
            .is_some_and(|v| v.start() == b + 4 * P));
    }

    #[test]
    fn brk_cannot_shrink_over_a_sealed_heap() {
        let mm = Mm::new(Policy::shared_default(), Layout::default());
        mm.set_brk_base(0x5555_5555_8000);
        let top = 0x5555_5555_8000 + 3 * P;
        assert_eq!(mm.brk(top), top);
        mm.mseal(0x5555_5555_8000, P, 0).unwrap();
        // Shrinking over the unsealed part works; over the seal it does not.
        assert_eq!(mm.brk(top - P), top - P);
        assert_eq!(mm.brk(0x5555_5555_8000), top - P);
        assert_eq!(mm.map_count(), 2);
    }

    #[test]
    fn discard_rule_for_madvise() {
        let (mm, b) = setup();
        let st = mm.state.read();
        let sealed_ro = st.index.find(b + 4 * P).unwrap();
        assert!(super::State::sealed_refuses_discard(&sealed_ro));
        let open = st.index.find(b).unwrap();
        assert!(!super::State::sealed_refuses_discard(&open));
    }
}

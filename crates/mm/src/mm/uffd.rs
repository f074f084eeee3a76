//! userfaultfd registration: `UFFDIO_REGISTER` and `UFFDIO_UNREGISTER`.
//!
//! The model has one userfaultfd context per address space, implied: a
//! VMA is registered exactly when it carries one of the `VM_UFFD_*` bits,
//! and every registration belongs to that one context. So `EBUSY` (a VMA
//! registered with another userfaultfd) cannot arise, and the context is
//! taken to have been opened with no event features (`UFFD_API` with
//! features 0, or only `UFFD_FEATURE_SIGBUS`): a `fork` child's VMAs and
//! a VMA moved by `mremap` lose their registration, as the kernel drops
//! them without `UFFD_FEATURE_EVENT_FORK` / `EVENT_REMAP`. Faults on
//! registered ranges are not modelled (the model does not know which
//! pages are present, which decides whether a fault reaches the
//! userfaultfd).
//!
//! Which VMAs can be registered, as Linux 6.18 decides it (probed as
//! root): private anonymous memory and shmem (the model's shmem is shared
//! anonymous memory: ordinary files, which are ext4-like, cannot be
//! registered; tmpfs files are not modelled as shmem); `MINOR` only on
//! shmem; VMAs without `VM_MAYWRITE` (a shared mapping of a tmpfs file
//! opened read-only, probed) refuse with `EPERM`, which the model's shmem
//! (shared anonymous memory, always `VM_MAYWRITE`) never meets.

use crate::flags::{VmFlags, PAGE_SIZE};
use crate::vma::Vma;
use crate::Errno;

use super::mprotect::Holes;
use super::{Mm, State};

/// `UFFDIO_REGISTER_MODE_MISSING`.
pub(crate) const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;
/// `UFFDIO_REGISTER_MODE_WP`.
pub(crate) const UFFDIO_REGISTER_MODE_WP: u64 = 2;
/// `UFFDIO_REGISTER_MODE_MINOR`.
pub(crate) const UFFDIO_REGISTER_MODE_MINOR: u64 = 4;

impl Mm {
    /// `ioctl(uffd, UFFDIO_REGISTER, {start, len, mode})` on the address
    /// space's userfaultfd: give every VMA part in `[start, start + len)`
    /// the `VM_UFFD_*` bits of `mode`, replacing the bits it had, with the
    /// splits and merges of any flag change. Holes in the range are
    /// skipped; a VMA already registered with at least `mode` is left as
    /// it is.
    ///
    /// Errors, in the kernel's order: `EINVAL` for an empty or unknown
    /// mode; `EINVAL` for an unaligned start or length, a zero length or
    /// a range past the address space (6.18 no longer refuses a start
    /// below `mmap_min_addr`: root may map and register there);
    /// `EINVAL` when no VMA meets the range, or one that does cannot be
    /// registered in this mode (a file mapping; `MINOR` on anything but
    /// shmem); `EPERM` for a VMA without `VM_MAYWRITE`. All VMAs are
    /// checked before any changes; only `ENOMEM` from `max_map_count`
    /// can stop the change part-way.
    ///
    /// ```
    /// use mm::{Errno, MapFlags, Mm, Prot, VmFlags};
    /// let mm = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 3 * 4096, Prot::READ, anon, None, 0).unwrap();
    /// mm.uffd_register(a + 4096, 4096, 1).unwrap(); // MODE_MISSING
    /// assert_eq!(mm.map_count(), 3);
    /// assert!(mm.find_vma(a + 4096).unwrap().flags().contains(VmFlags::UFFD_MISSING));
    /// assert_eq!(mm.uffd_register(a, 4096, 4), Err(Errno::EINVAL)); // MINOR
    /// mm.uffd_unregister(a, 3 * 4096).unwrap();
    /// assert_eq!(mm.map_count(), 1);
    /// ```
    pub fn uffd_register(&self, start: u64, len: u64, mode: u64) -> Result<(), Errno> {
        let known =
            UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP | UFFDIO_REGISTER_MODE_MINOR;
        if mode == 0 || mode & !known != 0 {
            return Err(Errno::EINVAL);
        }
        let mut want = VmFlags::empty();
        if mode & UFFDIO_REGISTER_MODE_MISSING != 0 {
            want |= VmFlags::UFFD_MISSING;
        }
        if mode & UFFDIO_REGISTER_MODE_WP != 0 {
            want |= VmFlags::UFFD_WP;
        }
        if mode & UFFDIO_REGISTER_MODE_MINOR != 0 {
            want |= VmFlags::UFFD_MINOR;
        }
        let end = self.uffd_range(start, len)?;
        let mut st = self.state.write();
        let vmas = st.overlapping(start, end);
        if vmas.is_empty() {
            return Err(Errno::EINVAL);
        }
        for v in &vmas {
            if !can_userfault(v, want) {
                return Err(Errno::EINVAL);
            }
            if !v.flags().contains(VmFlags::MAYWRITE) {
                return Err(Errno::EPERM);
            }
        }
        st.uffd_change(start, end, |f| {
            (!f.contains(want)).then(|| (f - VmFlags::UFFD_MASK) | want)
        })
    }

    /// `ioctl(uffd, UFFDIO_UNREGISTER, {start, len})`: clear the
    /// `VM_UFFD_*` bits of every VMA part in the range, merging what
    /// becomes mergeable. Errors: those of the range as for
    /// [`uffd_register`](Mm::uffd_register), `EINVAL` when no VMA meets
    /// the range or one that does could never be registered (a file
    /// mapping), checked before any change.
    ///
    /// ```
    /// use mm::{Errno, MapFlags, Mm, Prot};
    /// let mm = Mm::default();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 4096, Prot::READ, anon, None, 0).unwrap();
    /// assert_eq!(mm.uffd_unregister(a, 4096), Ok(()));
    /// assert_eq!(mm.uffd_unregister(a + 4096, 4096), Err(Errno::EINVAL));
    /// ```
    pub fn uffd_unregister(&self, start: u64, len: u64) -> Result<(), Errno> {
        let end = self.uffd_range(start, len)?;
        let mut st = self.state.write();
        let vmas = st.overlapping(start, end);
        if vmas.is_empty() {
            return Err(Errno::EINVAL);
        }
        if vmas.iter().any(|v| !can_userfault(v, v.flags())) {
            return Err(Errno::EINVAL);
        }
        st.uffd_change(start, end, |f| {
            f.intersects(VmFlags::UFFD_MASK)
                .then(|| f - VmFlags::UFFD_MASK)
        })
    }

    /// `validate_range`: the end of `[start, start + len)`, or `EINVAL`.
    fn uffd_range(&self, start: u64, len: u64) -> Result<u64, Errno> {
        let task_size = self.layout.task_size;
        if start % PAGE_SIZE != 0
            || len % PAGE_SIZE != 0
            || len == 0
            || start >= task_size
            || len > task_size - start
        {
            return Err(Errno::EINVAL);
        }
        Ok(start + len)
    }
}

/// `vma_can_userfault` for the bits `want` (only its `VM_UFFD_*` count):
/// anonymous memory or shmem, and `MINOR` only on shmem.
fn can_userfault(vma: &Vma, want: VmFlags) -> bool {
    let shmem = vma.file().is_some_and(|f| f.is_shmem_zero());
    if want.contains(VmFlags::UFFD_MINOR) && !shmem {
        return false;
    }
    vma.is_anonymous() || shmem
}

impl State {
    /// Walk the VMAs in `[start, end)` and give each part the flags
    /// `change` returns for its flags (`None`: leave it), as
    /// `userfaultfd_register_range` and `userfaultfd_clear_vma` do.
    fn uffd_change(
        &mut self,
        start: u64,
        end: u64,
        change: impl Fn(VmFlags) -> Option<VmFlags>,
    ) -> Result<(), Errno> {
        self.walk_vmas(start, end, Holes::Skip, |st, v, prev, s, e| {
            match change(v.flags()) {
                Some(flags) => st.modify(&v, prev, s, e, flags),
                None => Ok(v),
            }
        })?;
        Ok(())
    }

    /// What a move does to a registered VMA without `EVENT_REMAP`
    /// (`mremap_userfaultfd_prep`): the VMA now covering `addr` loses its
    /// registration in place, with no merge.
    pub(crate) fn uffd_drop_moved(&mut self, addr: u64) {
        if let Some(v) = self.index.find(addr) {
            if v.flags().intersects(VmFlags::UFFD_MASK) {
                let cleared = v.with_flags(v.flags() - VmFlags::UFFD_MASK);
                self.commit(&[v], vec![cleared]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Errno, File, MapFlags, Mm, MremapFlags, Prot, VmFlags};

    const P: u64 = 4096;
    const ANON: MapFlags = MapFlags::PRIVATE.union(MapFlags::ANONYMOUS);

    fn uffd_bits(mm: &Mm) -> Vec<(u64, u64, VmFlags)> {
        mm.vmas()
            .iter()
            .map(|v| (v.start(), v.end(), v.flags() & VmFlags::UFFD_MASK))
            .collect()
    }

    #[test]
    fn modes_replace_and_merge_as_the_kernel() {
        let mm = Mm::default();
        let rw = Prot::READ | Prot::WRITE;
        let b = mm.mmap(0, 8 * P, rw, ANON, None, 0).unwrap();
        mm.uffd_register(b + P, 2 * P, 1).unwrap();
        mm.uffd_register(b + 2 * P, 2 * P, 2).unwrap();
        let (m, w) = (VmFlags::UFFD_MISSING, VmFlags::UFFD_WP);
        let none = VmFlags::empty();
        assert_eq!(
            uffd_bits(&mm),
            vec![
                (b, b + P, none),
                (b + P, b + 2 * P, m),
                (b + 2 * P, b + 4 * P, w),
                (b + 4 * P, b + 8 * P, none)
            ]
        );
        // MISSING over both replaces WP and merges.
        mm.uffd_register(b + P, 3 * P, 1).unwrap();
        assert_eq!(mm.map_count(), 3);
        // A hole in the range is skipped.
        mm.munmap(b + 5 * P, P).unwrap();
        mm.uffd_register(b + 4 * P, 10 * P, 1).unwrap();
        mm.uffd_unregister(b, 100 * P).unwrap();
        assert_eq!(uffd_bits(&mm).iter().filter(|v| !v.2.is_empty()).count(), 0);
        assert_eq!(mm.map_count(), 2);
    }

    #[test]
    fn errors_change_nothing() {
        let mm = Mm::default();
        let b = mm.mmap(0, 4 * P, Prot::READ, ANON, None, 0).unwrap();
        let file = File::new("/data", 4 * P);
        let f = mm
            .mmap(
                b + 4 * P,
                P,
                Prot::READ,
                MapFlags::SHARED | MapFlags::FIXED,
                Some(&file),
                0,
            )
            .unwrap();
        let before = uffd_bits(&mm);
        assert_eq!(mm.uffd_register(b, P, 0), Err(Errno::EINVAL));
        assert_eq!(mm.uffd_register(b, P, 8), Err(Errno::EINVAL));
        assert_eq!(mm.uffd_register(b + 1, P, 1), Err(Errno::EINVAL));
        assert_eq!(mm.uffd_register(b, P + 1, 1), Err(Errno::EINVAL));
        assert_eq!(mm.uffd_register(b, 0, 1), Err(Errno::EINVAL));
        assert_eq!(mm.uffd_register(b + 50 * P, P, 1), Err(Errno::EINVAL));
        // Nothing mapped there (a start below mmap_min_addr is no error
        // of its own).
        assert_eq!(mm.uffd_register(0x1000, P, 1), Err(Errno::EINVAL));
        assert_eq!(
            mm.uffd_register(0x7fff_ffff_f000, 2 * P, 1),
            Err(Errno::EINVAL)
        );
        assert_eq!(mm.uffd_register(b, 5 * P, 1), Err(Errno::EINVAL));
        assert_eq!(mm.uffd_register(f, P, 1), Err(Errno::EINVAL));
        assert_eq!(mm.uffd_register(b, P, 4), Err(Errno::EINVAL));
        assert_eq!(mm.uffd_unregister(f, P), Err(Errno::EINVAL));
        assert_eq!(mm.uffd_unregister(b + 50 * P, P), Err(Errno::EINVAL));
        assert_eq!(uffd_bits(&mm), before);
        // Shared anonymous memory is shmem: every mode, MINOR included.
        let shared = MapFlags::SHARED | MapFlags::ANONYMOUS;
        let s = mm.mmap(0, 2 * P, Prot::READ, shared, None, 0).unwrap();
        mm.uffd_register(s, P, 4).unwrap();
        mm.uffd_register(s + P, P, 7).unwrap();
        assert_eq!(mm.map_count(), 4);
        // A read-only shared file mapping lacks VM_MAYWRITE: EPERM would
        // need a shmem file; an anonymous VMA always has it.
    }

    #[test]
    fn root_registers_below_mmap_min_addr() {
        let layout = crate::Layout {
            cap_sys_rawio: true,
            ..crate::Layout::default()
        };
        let mm = Mm::new(crate::Policy::shared_default(), layout);
        let low = mm
            .mmap(0x2000, P, Prot::READ, ANON | MapFlags::FIXED, None, 0)
            .unwrap();
        assert_eq!(mm.uffd_register(low, P, 1), Ok(()));
        assert_eq!(mm.uffd_unregister(low, P), Ok(()));
    }

    #[test]
    fn fork_and_mremap_drop_registration() {
        let mm = Mm::default();
        let rw = Prot::READ | Prot::WRITE;
        let b = mm.mmap(0, 4 * P, rw, ANON, None, 0).unwrap();
        mm.uffd_register(b, 2 * P, 1).unwrap();
        let child = mm.fork();
        assert!(child
            .vmas()
            .iter()
            .all(|v| !v.flags().intersects(VmFlags::UFFD_MASK)));
        assert_eq!(child.map_count(), 2);
        let fixed = MremapFlags::MAYMOVE | MremapFlags::FIXED;
        let to = mm.mremap(b, 2 * P, 2 * P, fixed, b + 20 * P).unwrap();
        assert!(!mm
            .find_vma(to)
            .unwrap()
            .flags()
            .intersects(VmFlags::UFFD_MASK));
    }
}

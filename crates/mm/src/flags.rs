//! The flag words of the system calls (with Linux's x86-64 values, so a
//! traced call maps onto the model bit for bit) and of a VMA.

use bitflags::bitflags;

/// Bytes per page. The model, like x86-64 Linux, uses 4 KiB pages.
pub const PAGE_SIZE: u64 = 4096;
/// `log2(PAGE_SIZE)`.
pub const PAGE_SHIFT: u32 = 12;
/// Bytes a PMD entry maps (2 MiB): the alignment Linux gives large
/// anonymous mappings so they can use transparent huge pages.
pub const PMD_SIZE: u64 = 2 << 20;

/// Round `x` up to a page boundary; `None` on overflow.
pub(crate) fn page_align(x: u64) -> Option<u64> {
    x.checked_add(PAGE_SIZE - 1).map(|v| v & !(PAGE_SIZE - 1))
}

/// The end of `[addr, addr + len)` for the calls that take any length and
/// round it up to whole pages (`madvise`, `mseal`, naming): `EINVAL` for
/// an unaligned start or a range that wraps, `None` for an empty range
/// (which those calls accept and leave alone).
pub(crate) fn rounded_range(addr: u64, len: u64) -> Result<Option<u64>, crate::Errno> {
    if addr % PAGE_SIZE != 0 {
        return Err(crate::Errno::EINVAL);
    }
    let len = page_align(len).ok_or(crate::Errno::EINVAL)?;
    let end = addr.checked_add(len).ok_or(crate::Errno::EINVAL)?;
    Ok((end > addr).then_some(end))
}

/// Whether `x` is page-aligned.
pub(crate) fn is_page_aligned(x: u64) -> bool {
    x & (PAGE_SIZE - 1) == 0
}

bitflags! {
    /// `PROT_*` access bits of `mmap` and `mprotect`.
    ///
    /// ```
    /// use mm::Prot;
    /// let rw = Prot::READ | Prot::WRITE;
    /// assert_eq!(rw.bits(), 3);
    /// assert!(Prot::NONE.is_empty());
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Prot: u32 {
        /// Pages may be read.
        const READ = 0x1;
        /// Pages may be written.
        const WRITE = 0x2;
        /// Pages may be executed.
        const EXEC = 0x4;
        /// `PROT_GROWSDOWN`: extend an `mprotect` down to the start of a
        /// grows-down mapping.
        const GROWSDOWN = 0x0100_0000;
        /// `PROT_GROWSUP` (not on x86-64: always refused).
        const GROWSUP = 0x0200_0000;
    }
}

impl Prot {
    /// No access.
    pub const NONE: Prot = Prot::empty();
}

bitflags! {
    /// `MAP_*` flags of `mmap`.
    ///
    /// ```
    /// use mm::MapFlags;
    /// let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// assert_eq!(f.bits(), 0x22);
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct MapFlags: u32 {
        /// Share changes with every mapping of the object.
        const SHARED = 0x01;
        /// Copy-on-write private mapping.
        const PRIVATE = 0x02;
        /// `MAP_SHARED_VALIDATE`: shared, and refuse unknown flags.
        const SHARED_VALIDATE = 0x03;
        /// Place exactly at the address, replacing what is there.
        const FIXED = 0x10;
        /// Not backed by a file.
        const ANONYMOUS = 0x20;
        /// Map below 2 GiB (x86-64).
        const MAP_32BIT = 0x40;
        /// A stack that grows down into the guard gap below it.
        const GROWSDOWN = 0x0100;
        /// Ignored by Linux.
        const DENYWRITE = 0x0800;
        /// Ignored by Linux.
        const EXECUTABLE = 0x1000;
        /// Lock the pages.
        const LOCKED = 0x2000;
        /// Do not reserve swap space (`VM_NORESERVE`).
        const NORESERVE = 0x4000;
        /// Pre-fault the pages.
        const POPULATE = 0x8000;
        /// Do not block on I/O.
        const NONBLOCK = 0x1_0000;
        /// A thread stack: since Linux 6.7 this sets `VM_NOHUGEPAGE`.
        const STACK = 0x2_0000;
        /// Huge pages from hugetlbfs (not modelled: refused with EINVAL).
        const HUGETLB = 0x4_0000;
        /// Synchronous page faults for DAX (`MAP_SHARED_VALIDATE` only).
        const SYNC = 0x8_0000;
        /// Like `FIXED`, but fail with `EEXIST` instead of replacing.
        const FIXED_NOREPLACE = 0x10_0000;
        /// Every other bit, kept so that a traced call round-trips.
        const _ = !0;
    }
}

impl MapFlags {
    /// `MAP_TYPE`: the bits that choose shared, private or shared-validate.
    pub const TYPE: u32 = 0x0f;
    /// `LEGACY_MAP_MASK`: the flags plain `MAP_SHARED` accepts silently.
    pub(crate) const LEGACY_MASK: u32 = 0x01
        | 0x02
        | 0x10
        | 0x20
        | 0x0100
        | 0x0800
        | 0x1000
        | 0x2000
        | 0x4000
        | 0x8000
        | 0x1_0000
        | 0x2_0000
        | 0x4_0000
        | 0x40
        // MAP_ABOVE4G
        | 0x80
        // MAP_UNINITIALIZED, MAP_HUGE_2MB and MAP_HUGE_1GB
        | 0x7c00_0000;
}

bitflags! {
    /// `MREMAP_*` flags of `mremap`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct MremapFlags: u32 {
        /// The mapping may move if it cannot grow in place.
        const MAYMOVE = 1;
        /// Move to exactly `new_addr`, replacing what is there.
        const FIXED = 2;
        /// Move the pages but leave the old range mapped (and empty).
        const DONTUNMAP = 4;
        /// Every other bit, kept so that a traced call round-trips.
        const _ = !0;
    }
}

bitflags! {
    /// A VMA's `vm_flags`, with the kernel's bit values. Two neighbouring
    /// VMAs merge only when these are equal (ignoring `SOFTDIRTY`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct VmFlags: u64 {
        /// Readable.
        const READ = 0x1;
        /// Writable.
        const WRITE = 0x2;
        /// Executable.
        const EXEC = 0x4;
        /// Writes reach the shared object.
        const SHARED = 0x8;
        /// `mprotect` may add read.
        const MAYREAD = 0x10;
        /// `mprotect` may add write.
        const MAYWRITE = 0x20;
        /// `mprotect` may add exec.
        const MAYEXEC = 0x40;
        /// Mapped shared (shown as `s` in `/proc/<pid>/maps`).
        const MAYSHARE = 0x80;
        /// Grows down on a fault just below it (stacks).
        const GROWSDOWN = 0x100;
        /// Pages are locked in memory.
        const LOCKED = 0x2000;
        /// Not copied into a forked child.
        const DONTCOPY = 0x2_0000;
        /// Cannot be expanded by `mremap`.
        const DONTEXPAND = 0x4_0000;
        /// Charged against the commit limit.
        const ACCOUNT = 0x10_0000;
        /// Not charged (`MAP_NORESERVE`).
        const NORESERVE = 0x20_0000;
        /// `MAP_SYNC` was given (`VM_SYNC`).
        const SYNC = 0x80_0000;
        /// Soft-dirty tracking bit; ignored when merging.
        const SOFTDIRTY = 0x800_0000;
        /// Transparent huge pages refused (`MAP_STACK`).
        const NOHUGEPAGE = 0x4000_0000;
        // --- madvise / mlock (issue 14) ---
        /// `VM_MAYBE_GUARD`: `MADV_GUARD_INSTALL` put guard markers in the
        /// VMA's page tables (6.18 stable). Sticky: it never blocks a
        /// merge, and a merged VMA keeps it if either part had it.
        const MAYBE_GUARD = 0x800;
        /// `MADV_SEQUENTIAL` (`VM_SEQ_READ`).
        const SEQ_READ = 0x8000;
        /// `MADV_RANDOM` (`VM_RAND_READ`).
        const RAND_READ = 0x1_0000;
        /// `mlock2(MLOCK_ONFAULT)` or `MCL_ONFAULT`: lock pages only as
        /// they are faulted in (with `LOCKED`).
        const LOCKONFAULT = 0x8_0000;
        /// `MADV_WIPEONFORK`: the child gets the range empty.
        const WIPEONFORK = 0x200_0000;
        /// `MADV_DONTDUMP` (`VM_DONTDUMP`).
        const DONTDUMP = 0x400_0000;
        /// `MADV_HUGEPAGE`: transparent huge pages wanted.
        const HUGEPAGE = 0x2000_0000;
        /// `MADV_MERGEABLE`: KSM may merge its pages.
        const MERGEABLE = 0x8000_0000;
        // --- end madvise / mlock ---
        /// Protection key, bit 0 (x86 `VM_PKEY_BIT0`).
        const PKEY_BIT0 = 1 << 32;
        /// Protection key, bit 1.
        const PKEY_BIT1 = 1 << 33;
        /// Protection key, bit 2.
        const PKEY_BIT2 = 1 << 34;
        /// Protection key, bit 3.
        const PKEY_BIT3 = 1 << 35;

        // Sealing and userfaultfd (issue 14 item 3): bit values of Linux
        // 6.18's include/linux/mm.h.
        /// Missing-page faults go to the userfaultfd (`VM_UFFD_MISSING`,
        /// `UFFDIO_REGISTER_MODE_MISSING`).
        const UFFD_MISSING = 0x200;
        /// Write-protect faults go to the userfaultfd (`VM_UFFD_WP`).
        const UFFD_WP = 0x1000;
        /// Minor faults go to the userfaultfd (`VM_UFFD_MINOR`, bit 41).
        const UFFD_MINOR = 1 << 41;
        /// Sealed by `mseal`: no unmap, move, resize, re-protect or
        /// discard (`VM_SEALED`, bit 42).
        const SEALED = 1 << 42;
    }
}

impl VmFlags {
    /// The userfaultfd bits (`__VM_UFFD_FLAGS`): set while a range is
    /// registered with the address space's userfaultfd.
    pub const UFFD_MASK: VmFlags = VmFlags::UFFD_MISSING
        .union(VmFlags::UFFD_WP)
        .union(VmFlags::UFFD_MINOR);

    /// The protection-key bits.
    pub const PKEY_MASK: VmFlags = VmFlags::PKEY_BIT0
        .union(VmFlags::PKEY_BIT1)
        .union(VmFlags::PKEY_BIT2)
        .union(VmFlags::PKEY_BIT3);

    /// The flag bits of protection key `pkey` (0..=15).
    pub fn from_pkey(pkey: u8) -> VmFlags {
        VmFlags::from_bits_truncate(u64::from(pkey & 0xf) << 32)
    }

    /// The protection key these flags carry.
    pub fn pkey(self) -> u8 {
        ((self & VmFlags::PKEY_MASK).bits() >> 32) as u8
    }

    /// The three access bits.
    pub const ACCESS: VmFlags = VmFlags::READ.union(VmFlags::WRITE).union(VmFlags::EXEC);
    /// What a new stack VMA gets (`VM_STACK_FLAGS` plus accounting).
    pub const STACK: VmFlags = VmFlags::READ
        .union(VmFlags::WRITE)
        .union(VmFlags::MAYREAD)
        .union(VmFlags::MAYWRITE)
        .union(VmFlags::MAYEXEC)
        .union(VmFlags::GROWSDOWN)
        .union(VmFlags::ACCOUNT);
    /// What `brk` gives the heap (`VM_DATA_DEFAULT_FLAGS | VM_ACCOUNT`).
    pub const BRK: VmFlags = VmFlags::READ
        .union(VmFlags::WRITE)
        .union(VmFlags::MAYREAD)
        .union(VmFlags::MAYWRITE)
        .union(VmFlags::MAYEXEC)
        .union(VmFlags::ACCOUNT);

    /// The access bits of a protection.
    pub fn from_prot(prot: Prot) -> VmFlags {
        VmFlags::from_bits_truncate(u64::from(prot.bits() & 0x7))
    }

    /// The access bits as a protection.
    pub fn prot(self) -> Prot {
        Prot::from_bits_truncate((self & VmFlags::ACCESS).bits() as u32)
    }

    /// The flags that must match for two VMAs to merge.
    pub(crate) fn merge_key(self) -> VmFlags {
        self - VmFlags::SOFTDIRTY - VmFlags::STICKY
    }

    /// `VM_STICKY`: flags that do not block a merge and that the merged
    /// VMA takes from either side.
    pub const STICKY: VmFlags = VmFlags::MAYBE_GUARD;
    /// `VM_LOCKED_MASK`: what `mlock` and `munlock` set and clear.
    pub const LOCKED_MASK: VmFlags = VmFlags::LOCKED.union(VmFlags::LOCKONFAULT);

    /// The flags of a `/proc/<pid>/smaps` `VmFlags:` line: every bit the
    /// kernel named, kept whether or not the model has a constant for it
    /// (a model built from a real map keeps e.g. `[vvar]`'s `pf io dd`).
    /// A name the table in [`procmaps`](crate::procmaps) lacks (a newer
    /// kernel's) is skipped, so reading a map never fails on it; the
    /// strict reader is [`procmaps::vm_flags_from_mnemonics`](crate::procmaps::vm_flags_from_mnemonics).
    ///
    /// ```
    /// use mm::VmFlags;
    /// let f = VmFlags::from_smaps_names("rd wr mr mw me ac zz".split(' '));
    /// assert_eq!(f, VmFlags::READ | VmFlags::WRITE | VmFlags::MAYREAD
    ///     | VmFlags::MAYWRITE | VmFlags::MAYEXEC | VmFlags::ACCOUNT);
    /// ```
    pub fn from_smaps_names<'a>(names: impl IntoIterator<Item = &'a str>) -> VmFlags {
        let bits = names
            .into_iter()
            .filter_map(|n| crate::procmaps::vm_flags_from_mnemonics([n]).ok())
            .fold(0, |a, b| a | b);
        VmFlags::from_bits_retain(bits)
    }
}

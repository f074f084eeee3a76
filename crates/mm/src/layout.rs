//! The shape of an address space: its size, where top-down allocation
//! starts, and the limits Linux applies (all sysctls and rlimits the model
//! reads, in one place).

use crate::flags::{PAGE_SIZE, PMD_SIZE};

/// `TASK_SIZE` of an x86-64 process with 4-level page tables.
pub const TASK_SIZE_X86_64: u64 = 0x7fff_ffff_f000;

/// Address-space geometry and limits.
///
/// The default is a 64-bit x86 Linux process with address-space
/// randomisation off (`setarch -R`), an 8 MiB stack rlimit and the
/// default sysctls, so that a model started from a real process's map
/// places mappings where that process's kernel would.
///
/// ```
/// use mm::Layout;
/// let l = Layout::default();
/// assert_eq!(l.task_size, 0x7fff_ffff_f000);
/// // 128 MiB below the top: the smallest gap Linux leaves for the stack.
/// assert_eq!(l.mmap_base, 0x7fff_f7ff_f000);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// One past the highest user address (`TASK_SIZE`).
    pub task_size: u64,
    /// Where top-down free-area search starts (`mm->mmap_base`).
    pub mmap_base: u64,
    /// Allocate bottom-up from `task_size / 3` instead
    /// (`vm.legacy_va_layout`).
    pub bottom_up: bool,
    /// Lowest address the kernel hands out or rounds a hint up to (the
    /// kernel's `mmap_min_addr`: the larger of `vm.mmap_min_addr` and
    /// `CONFIG_LSM_MMAP_MIN_ADDR`, so it can exceed the sysctl).
    pub mmap_min_addr: u64,
    /// `vm.mmap_min_addr` itself (`dac_mmap_min_addr`): mapping below it
    /// needs `CAP_SYS_RAWIO`, else `EPERM`.
    pub dac_mmap_min_addr: u64,
    /// Bytes kept free below a grows-down VMA (`stack_guard_gap`, 256
    /// pages).
    pub stack_guard_gap: u64,
    /// Most VMAs an address space may hold (`vm.max_map_count`).
    pub max_map_count: usize,
    /// `RLIMIT_STACK`: how far a stack may grow.
    pub stack_rlimit: u64,
    /// Align anonymous mappings whose length is a multiple of 2 MiB to a
    /// 2 MiB boundary (Linux 6.7 and later with transparent huge pages).
    pub thp_align: bool,
    /// `vm.overcommit_memory == 2`: `MAP_NORESERVE` is ignored.
    pub overcommit_never: bool,
    /// Top of the stack that [`Mm::exec`](crate::Mm::exec) sets up.
    pub stack_top: u64,
    /// The process holds `CAP_SYS_RAWIO` (e.g. runs as root): it may map
    /// below `mmap_min_addr`, which otherwise fails with `EPERM`.
    pub cap_sys_rawio: bool,
    /// The CPU has protection keys enabled (x86 `OSPKE`): a `PROT_EXEC`
    /// mapping gets the address space's execute-only key, which changes
    /// its flags (and so what it merges with).
    pub exec_only_pkey: bool,
    /// `RLIMIT_MEMLOCK` in bytes: how much `mlock`, `mlockall`,
    /// `MAP_LOCKED` and `MCL_FUTURE` may lock (8 MiB by default, the
    /// kernel's `MLOCK_LIMIT`).
    pub memlock_rlimit: u64,
    /// The process holds `CAP_IPC_LOCK` (e.g. runs as root): it may lock
    /// past `memlock_rlimit`.
    pub cap_ipc_lock: bool,
    /// The kernel was built with `CONFIG_ANON_VMA_NAME`: without it
    /// `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME)` always fails with
    /// `EINVAL` (as on this project's machine; probe it with a zero-length
    /// call, which succeeds where names exist).
    pub anon_vma_name: bool,
}

impl Layout {
    /// The x86-64 layout for a stack rlimit, with randomisation off.
    pub fn x86_64(stack_rlimit: u64) -> Layout {
        let task_size = TASK_SIZE_X86_64;
        let stack_guard_gap = 256 * PAGE_SIZE;
        Layout {
            task_size,
            mmap_base: mmap_base(task_size, stack_rlimit, stack_guard_gap),
            bottom_up: false,
            mmap_min_addr: 65536,
            dac_mmap_min_addr: 65536,
            stack_guard_gap,
            max_map_count: 65530,
            stack_rlimit,
            thp_align: true,
            overcommit_never: false,
            stack_top: task_size,
            cap_sys_rawio: false,
            exec_only_pkey: false,
            memlock_rlimit: 8 << 20,
            cap_ipc_lock: false,
            anon_vma_name: true,
        }
    }

    /// Where bottom-up allocation starts (`TASK_UNMAPPED_BASE`).
    pub fn unmapped_base(&self) -> u64 {
        (self.task_size / 3).next_multiple_of(PAGE_SIZE)
    }

    /// Bytes per huge page used for alignment.
    pub fn huge_page_size(&self) -> u64 {
        PMD_SIZE
    }
}

impl Default for Layout {
    fn default() -> Self {
        Layout::x86_64(8 << 20)
    }
}

/// Linux's `mmap_base()` without randomisation: leave room for the stack
/// rlimit plus its guard gap, at least 128 MiB and at most 5/6 of the
/// address space.
pub fn mmap_base(task_size: u64, stack_rlimit: u64, stack_guard_gap: u64) -> u64 {
    let mut gap = stack_rlimit;
    if let Some(g) = gap.checked_add(stack_guard_gap) {
        gap = g;
    }
    let gap = gap.clamp(128 << 20, task_size / 6 * 5);
    (task_size - gap) & !(PAGE_SIZE - 1)
}

//! Differential test: random sequences of mmap/munmap/mprotect/mremap/brk,
//! write faults and (about 30 % of calls) madvise, the mlock family,
//! mseal, VMA names, protection keys and userfaultfd registration, with
//! forks among them and sometimes an exec at the end, run both in the model and for real in a child process, compared
//! step by step: return value and errno, `/proc/<pid>/maps` against the
//! model's line by line (start, end, permissions, shared/private, offset
//! and file), and, line by line, the `VmFlags:` of `/proc/<pid>/smaps`
//! against the model's VMA flags.
//!
//! The child is this same executable re-run with `VMSCALE_DIFF_CHILD` set,
//! address-space randomisation off and an 8 MiB stack rlimit, so its
//! layout is deterministic. The parent builds each model from the child's
//! initial `/proc/<pid>/smaps` with the machine's real sysctls, once on the
//! maple-tree index and once on the legacy index; both must agree with the
//! kernel.
//!
//! Forks and execs:
//! * about 2 % of steps are a `fork()` (two cases in three of 50 calls
//!   fork at least once): the new process carries on serving the calls
//!   (the old one waits for it), the models are replaced by their
//!   [`Mm::fork`](mm::Mm::fork), and the comparison goes on in the new
//!   process;
//! * 30 % of cases end with an `execve` of a tiny static x86-64 program
//!   the test writes itself (text, data with a bss, `PT_GNU_STACK`), the
//!   models running [`Mm::exec`](mm::Mm::exec) of its `Image`. Compared
//!   after it: every mapping but the vDSO's (`[vvar]`, `[vvar_vclock]`,
//!   `[vdso]`, which `Mm::exec` does not model) and `[vsyscall]`: the
//!   program's segments, its bss, the new `[stack]`; and the heap start
//!   (`start_brk` of `/proc/<pid>/stat`). The program serves no calls, so
//!   nothing follows an exec.
//!
//! `VmFlags` are compared as raw `vm_flags` bits
//! ([`mm::procmaps::parse_smaps_vmflags`],
//! [`mm::procmaps::vm_flags_mnemonics`]), every bit `smaps` prints, but:
//! * `sd` (`VM_SOFTDIRTY`): a soft-dirty kernel sets it on every new VMA
//!   and `clear_refs` clears it; the model does not track soft-dirty (it
//!   ignores the bit when merging, as the kernel does). This machine's
//!   kernel has no `CONFIG_MEM_SOFT_DIRTY` and never prints it.
//! * the protection-key bits, which `smaps` shows as `ProtectionKey:`, not
//!   in `VmFlags:` (so neither side shows them there).
//!
//! Lines not compared at all (so neither are their flags): the child's
//! own `[stack]` while it serves calls (the kernel grows it) and
//! `[vsyscall]` (not a VMA).
//!
//! Environment:
//! * `VMSCALE_DIFF_SEED` — the seed (default: time-based, printed);
//! * `VMSCALE_DIFF_CASES` — number of cases (default 300);
//! * `VMSCALE_DIFF_CALLS` — calls per case (default 50; forks and the
//!   exec come on top);
//! * `VMSCALE_DIFF_CASE` — run only this case number of the seed;
//! * `VMSCALE_DIFF_THREADS` — parallel children (default: CPUs, at most 4);
//! * `VMSCALE_DIFF_STATS` — print results per call and errno, and how
//!   often each `VmFlags` mnemonic was compared.
//!
//! On a mismatch the case is shrunk (steps, forks and exec included,
//! deleted one at a time while the mismatch persists, each attempt in a
//! fresh child) and printed, and the test exits non-zero.

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[path = "differential/child.rs"]
mod child;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[path = "differential/gen.rs"]
mod gen;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[path = "differential/parent.rs"]
mod parent;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn main() {
    if std::env::var_os("VMSCALE_DIFF_CHILD").is_some() {
        child::main();
    }
    std::process::exit(parent::main());
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn main() {
    println!("differential: skipped: the real-kernel comparison needs x86-64 Linux");
}

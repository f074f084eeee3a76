//! Differential test: random sequences of mmap/munmap/mprotect/mremap/brk
//! and write faults, run both in the model and for real in a child
//! process, compared call by call (return value and errno) and map by map
//! (`/proc/<pid>/maps` against the model's, line by line: start, end,
//! permissions, shared/private, offset and file).
//!
//! The child is this same executable re-run with `VMSCALE_DIFF_CHILD` set,
//! address-space randomisation off and an 8 MiB stack rlimit, so its
//! layout is deterministic. The parent builds each model from the child's
//! initial `/proc/<pid>/smaps` with the machine's real sysctls, once on the
//! maple-tree index and once on the legacy index; both must agree with the
//! kernel.
//!
//! Environment:
//! * `VMSCALE_DIFF_SEED` — the seed (default: time-based, printed);
//! * `VMSCALE_DIFF_CASES` — number of cases (default 300);
//! * `VMSCALE_DIFF_CALLS` — calls per case (default 50);
//! * `VMSCALE_DIFF_CASE` — run only this case number of the seed;
//! * `VMSCALE_DIFF_THREADS` — parallel children (default: CPUs, at most 4).
//!
//! On a mismatch the case is shrunk (calls deleted one at a time while the
//! mismatch persists, each attempt in a fresh child) and printed, and the
//! test exits non-zero.

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

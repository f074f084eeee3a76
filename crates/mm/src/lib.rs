//! # mm — the Linux address-space model
//!
//! An address space ([`Mm`]) is a set of non-overlapping virtual memory
//! areas ([`Vma`]). `mmap`, `munmap`, `mprotect`, `mremap`, `brk`, `fork`,
//! `exec` and page faults follow the running Linux kernel: the same
//! addresses, the same merges and splits, the same errno values, checked
//! against the kernel by the differential test in `tests/differential.rs`.
//! A [`Call`] is one of those system calls as data, for tools that drive
//! the model from a trace.
//!
//! That test runs random call sequences in a child process with
//! address-space randomisation off and compares every return value, errno
//! and `/proc/<pid>/maps` line with the model (on both VMA indexes); it
//! takes `VMSCALE_DIFF_SEED`, `VMSCALE_DIFF_CASES` (default 300) and
//! `VMSCALE_DIFF_CALLS` (default 50) and prints a shrunk reproducer on a
//! mismatch: `cargo test -p mm --release --test differential`. Machine
//! facts the model cannot know are [`Layout`] fields the test fills in
//! from the real system: the effective and the sysctl `mmap_min_addr`,
//! `CAP_SYS_RAWIO`, x86 protection keys, and whether the filesystem
//! aligns large file mappings ([`FileMode::huge_align`]).
//!
//! Every design the kernel has tried more than one way is chosen by one
//! [`Policy`] ([`policy`]): the VMA index (the maple tree, whose readers
//! take no lock, or with the `legacy-index` feature the augmented
//! red-black tree, list and VMA cache it replaced), the design of each
//! file's reverse map ([`imap`], five of them), the kind of every
//! reverse-map lock, the anon_vma end-only rule ([`anon`]) and the NUMA
//! topology the split designs group by. Every address-space edit keeps
//! both reverse maps in step (docs/rmap.md).
//!
//! ## Features
//!
//! The default build is the address-space library alone. The benchmark
//! lab turns on what it measures with:
//!
//! - `legacy-index`: the pre-6.1 VMA index, [`IndexKind`]`::Legacy`;
//! - `lockstat`: lock statistics per lock class (`mm::lockstat`), counted
//!   on every acquisition; without it the counting compiles away;
//! - `lab`: the model's parts as libraries of their own for benchmarks —
//!   the interval trees (`mm::itree`), the reader-writer locks
//!   (`mm::lock`), and binding threads to (possibly emulated) CPUs, with
//!   optional pinning (`mm::topology`);
//! - `profile`: a per-thread recorder of lock holds and of the cache
//!   lines each critical section touches (`mm::profile`), off until a
//!   thread starts it; without the feature every hook compiles away.
//!
//! ```
//! use mm::{MapFlags, Mm, Prot};
//!
//! let mm = Mm::default();
//! let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
//! let a = mm.mmap(0, 3 << 12, Prot::READ | Prot::WRITE, anon, None, 0).unwrap();
//! // Changing the middle page splits the mapping in three.
//! mm.mprotect(a + 4096, 4096, Prot::READ).unwrap();
//! assert_eq!(mm.map_count(), 3);
//! // Changing it back merges them again.
//! mm.mprotect(a + 4096, 4096, Prot::READ | Prot::WRITE).unwrap();
//! assert_eq!(mm.map_count(), 1);
//! ```

#![deny(missing_docs)]

pub mod anon;
pub mod call;
mod errno;
mod file;
mod flags;
pub mod imap;
mod index;
pub mod layout;
mod mm;
pub mod policy;
pub mod procmaps;
mod rbtree;
mod sync;
mod vma;
mod vma_lock;

// Public with the `lab` feature, the model's own otherwise: one source,
// two visibilities, so the lab measures exactly the code the model runs.
// (What the model itself does not call is the lab's API: no dead code.)
#[cfg(feature = "lab")]
pub mod itree;
#[cfg(not(feature = "lab"))]
#[allow(dead_code)]
mod itree;
#[cfg(feature = "lab")]
pub mod lock;
#[cfg(not(feature = "lab"))]
#[allow(dead_code)]
mod lock;
#[cfg(feature = "lockstat")]
pub mod lockstat;
#[cfg(not(feature = "lockstat"))]
#[allow(dead_code)]
mod lockstat;
#[cfg(feature = "profile")]
pub mod profile;
#[cfg(not(feature = "profile"))]
#[allow(dead_code)]
mod profile;
#[cfg(feature = "lab")]
pub mod topology;
#[cfg(not(feature = "lab"))]
#[allow(dead_code)]
mod topology;

pub use call::Call;
pub use errno::Errno;
pub use file::{File, FileMode};
pub use flags::{MapFlags, MremapFlags, Prot, VmFlags, PAGE_SHIFT, PAGE_SIZE, PMD_SIZE};
pub use layout::Layout;
pub use mm::{mlock, Advice};
pub use mm::{Access, FaultError, FaultPath, Image, Mm, Segment};
pub use policy::{IndexKind, Policy};
pub use vma::Vma;

//! # mm — the Linux address-space model
//!
//! An address space ([`Mm`]) is a set of non-overlapping virtual memory
//! areas ([`Vma`]) kept in a pluggable [`index`]: the maple tree (the
//! default) or the augmented red-black tree, list and VMA cache it
//! replaced. `mmap`, `munmap`, `mprotect`, `mremap`, `brk`, `fork`, `exec`
//! and page faults follow the running Linux kernel: the same addresses,
//! the same merges and splits, the same errno values, checked against the
//! kernel by the differential test in `tests/differential.rs`.
//!
//! That test runs random call sequences in a child process with
//! address-space randomisation off and compares every return value, errno
//! and `/proc/<pid>/maps` line with the model (on both indexes); it takes
//! `VMSCALE_DIFF_SEED`, `VMSCALE_DIFF_CASES` (default 300) and
//! `VMSCALE_DIFF_CALLS` (default 50) and prints a shrunk reproducer on a
//! mismatch: `cargo test -p mm --release --test differential`. Machine
//! facts the model cannot know are [`Layout`] fields the test fills in
//! from the real system: the effective and the sysctl `mmap_min_addr`,
//! `CAP_SYS_RAWIO`, x86 protection keys, and whether the filesystem
//! aligns large file mappings ([`file::FileMode::huge_align`]).
//!
//! Every file keeps a reverse map of the VMAs that map it ([`imap`], in
//! one of five designs, over the interval trees of [`itree`]), and
//! anonymous memory has its anon_vma chains ([`anon`], whose end-only
//! rule lets an adjustment that only moves a VMA's end skip the anon_vma
//! lock); their locks are [`lock`]'s kernel-style rwsems,
//! grouped by a real or emulated NUMA [`topology`]. Every address-space
//! edit keeps both reverse maps in step (docs/rmap.md).
//!
//! ```
//! use mm::{MapFlags, Mm, MmConfig, Prot};
//!
//! let mm = Mm::new(MmConfig::default());
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
mod errno;
pub mod file;
mod flags;
pub mod imap;
pub mod index;
pub mod itree;
pub mod layout;
pub mod lock;
pub mod lockstat;
mod mm;
pub mod procmaps;
mod rbtree;
mod sync;
pub mod topology;
mod vma;
mod vma_lock;

pub use errno::Errno;
pub use file::File;
pub use flags::{MapFlags, MremapFlags, Prot, VmFlags, PAGE_SHIFT, PAGE_SIZE, PMD_SIZE};
pub use index::IndexKind;
pub use layout::Layout;
pub use mm::{Access, FaultError, FaultPath, Image, Mm, MmConfig, Segment};
pub use vma::Vma;

//! # mm — the Linux address-space model
//!
//! This crate will hold the VM model built on [`maple`]: `Mm` and `Vma` with
//! Linux `mmap`/`munmap`/`mprotect`/`mremap`/`brk`/`fork`/`exec` semantics and
//! errno values, the per-VMA-lock fault path, files with their i_mmap
//! reverse maps, and anon_vma. That work is tracked as issues 3 and 4 of
//! the project; the crate has no API yet, so that the workspace already has
//! the three layers of the design (tree library, VM model, lab).

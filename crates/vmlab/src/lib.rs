//! `vmlab`: the vmscale lab as a library. It measures the maple tree and
//! the address-space model the way the `vmbench` command does, for anyone
//! who wants the same figures from their own harness.
//!
//! - [`tree`]: the maple tree against `BTreeMap` (plain and behind a lock),
//!   `rangemap`, `scc::TreeIndex` and `crossbeam-skiplist` on an mmap-like
//!   layout: lookups, writes, iteration, gap search, a
//!   reader beside a writer, memory per entry. Every batch's answers are
//!   checked.
//! - [`itree`]: the two interval trees of the reverse map.
//! - [`run`]: will-it-scale's `brk1`, `mmap1`, `malloc1`, `mmap2` and
//!   `page_fault3`, UnixBench's `execl`, AIM7's `brk` and a kernbench
//!   process churn, on the model, with every design choice (VMA index,
//!   i_mmap design, lock, anon_vma rule, topology) as a setting.
//! - [`suite`]: all of them across the designs each compares, repeated,
//!   into a results directory (`vmresults`' format, tables, plots, page).
//! - [`topology`]: the machine a run is on, and how an emulated topology
//!   lands on it.
//!
//! Data flows one way: the caller's settings, then this crate, then `mm`
//! (the model) and `maple` (the tree). The crate installs no global
//! allocator; [`alloc_count::CountingAlloc`] is there for a binary that
//! wants the `bytes_*` figures.
//!
//! ```
//! use vmlab::tree::{Impl, Op, Scale, TreeConfig};
//! let config = TreeConfig {
//!     sizes: vec![200],
//!     repeat: 1,
//!     ops: vec![Op::Load],
//!     impls: vec![Impl::Maple, Impl::BTreeMap],
//!     scale: Scale::QUICK,
//!     seed: 1,
//! };
//! config.validate().unwrap();
//! let mut figures = Vec::new();
//! vmlab::tree::run(&config, &mut |f| figures.push(f)).unwrap();
//! assert_eq!(figures.len(), 2);
//! assert!(figures.iter().all(|f| f.value > 0.0 && f.unit == "ns/op"));
//! ```
//!
//! Dependencies: `thiserror` for the error type, `serde`/`serde_json` for
//! JSON lines, `comfy-table` for text tables, `indicatif` for the suite's
//! progress bar, `libc` for CPU time and affinity, `signal-hook` to stop
//! between points on Ctrl-C ([`stop`]), and the tree's peers `rangemap`,
//! `scc` and `crossbeam-skiplist` (see [`tree`]).

#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod alloc_count;
mod error;
pub mod figure;
pub mod itree;
pub mod placement;
pub mod profile;
pub mod project;
pub mod rng;
pub mod run;
pub mod stop;
pub mod suite;
pub mod timing;
pub mod topology;
pub mod tree;

pub use error::LabError;

/// The unit tests measure memory too, so their binary counts allocations
/// as `vmbench` does.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: alloc_count::CountingAlloc = alloc_count::CountingAlloc;

//! # maple — a range B-tree with lock-free readers
//!
//! A userspace Rust implementation of the design of the Linux kernel's
//! maple tree: a B-tree of non-overlapping inclusive `u64` ranges, built
//! for cache efficiency and for readers that never block.
//!
//! * **Nodes** are 256 bytes and 256-byte aligned: leaves hold 16 slots and
//!   15 pivots; internal nodes 10 children, 9 pivots and, per child, the
//!   size of the largest free gap below it. See the `node` module source
//!   for the layout and every invariant.
//! * **Readers** ([`MapleTree::load`], [`find`](MapleTree::find),
//!   [`iter`](MapleTree::iter), [`Cursor`], the gap searches) take a
//!   grace-period [`Guard`] from [`pin`], no lock, and write no shared
//!   memory. The references they return live as long as the guard.
//! * **Writers** serialise. With `&mut MapleTree` they change nodes in
//!   place. Through [`MapleTree::write`] they may run beside readers: each
//!   changed node is copied, the copy published with one release store, the
//!   old node marked dead (a reader that meets it restarts from the root)
//!   and freed after a grace period, as are overwritten values.
//! * **Free-area search** ([`empty_area`](MapleTree::empty_area),
//!   [`empty_area_rev`](MapleTree::empty_area_rev)) is `O(log n)`, the
//!   operation `mmap` needs to place a mapping.
//!
//! ```
//! use maple::MapleTree;
//!
//! let mut vmas = MapleTree::new();
//! vmas.insert_range(0x400000, 0x400fff, "text").unwrap();
//! vmas.insert_range(0x600000, 0x600fff, "data").unwrap();
//!
//! let guard = maple::pin();
//! assert_eq!(vmas.load(0x400123, &guard), Some(&"text"));
//! // Highest 4 KiB hole below 0x600000:
//! assert_eq!(vmas.empty_area_rev(0, 0x5fffff, 0x1000, &guard), Ok(0x5ff000));
//! ```
//!
//! Grace periods come from [crossbeam-epoch](https://docs.rs/crossbeam-epoch):
//! pinning costs a few nanoseconds and touches only the pinning thread's own
//! state, which the `vmbench tree` benchmark measures (`load` vs `load_pin`).

#![warn(missing_docs)]

mod error;
mod iter;
mod node;
mod path;
pub(crate) mod slab;
mod sync;
mod tree;
mod write;

pub use error::Error;
pub use iter::{Cursor, Iter};
pub use node::NODE_SIZE;
pub use slab::node_memory_reserved;
pub use sync::{pin, unprotected, Guard};
pub use tree::{MapleTree, MemStats};
pub use write::WriteGuard;

#[cfg(test)]
mod smoke_tests;

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
//!   memory. The references they return live as long as the guard; a read
//!   of a whole entry returns an [`Entry`] (its range and value).
//! * **Ranges** are inclusive `u64` ranges everywhere: writes take a
//!   `RangeInclusive<u64>` (`first..=last`; an empty one is refused with
//!   [`Error::InvalidRange`]), [`range`](MapleTree::range) any
//!   `RangeBounds<u64>`.
//! * **Writers** serialise. With `&mut MapleTree` (or
//!   [`MapleTree::write_unshared`], for a tree no other thread uses yet)
//!   they change nodes in place, splits and merges included, and free at
//!   once. Through
//!   [`MapleTree::write`] they may run beside readers: a change that stays
//!   inside one leaf is made in place, under the leaf's sequence count (or,
//!   for a slot keeping its range, by one release store), and readers that
//!   overlap it read again; a change that splits, merges or rebalances
//!   copies the nodes it changes, publishes the copy with one release store
//!   and marks the old node dead (a reader that meets it restarts from the
//!   root). Replaced nodes and values are freed after a grace period.
//! * **Values** are held as one word per slot, as the [`Ownership`]
//!   strategy says: [`Boxed`] (the default, any `T` in an allocation of its
//!   own) or [`Direct`] (an `Arc<U>` the caller already has, a `&'static
//!   U`, or a small `Copy` value kept in the slot itself; no allocation by
//!   the tree, and a reader reaches an `Arc`'s value through one pointer).
//! * **Free-area search** ([`empty_area`](MapleTree::empty_area),
//!   [`empty_area_rev`](MapleTree::empty_area_rev)) is `O(log n)`, the
//!   operation `mmap` needs to place a mapping.
//!
//! ```
//! use maple::MapleTree;
//!
//! let mut vmas = MapleTree::new();
//! vmas.insert_range(0x400000..=0x400fff, "text").unwrap();
//! vmas.insert_range(0x600000..=0x600fff, "data").unwrap();
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
//! What a thread's writes retire, that thread frees once the grace period
//! has passed: right after a write made with no guard held, and otherwise
//! at its next [`Guard::flush`] (or at a write, if it flushes too rarely),
//! as the kernel runs an RCU callback on the CPU that queued it and
//! outside the section that queued it: freeing another thread's memory
//! would take that thread's allocator lines and locks.

#![deny(missing_docs)]

mod entry;
mod error;
mod iter;
mod node;
mod ownership;
mod path;
pub(crate) mod slab;
mod sync;
mod tree;
mod write;

pub use entry::Entry;
pub use error::{Error, Invalid};
pub use iter::{Cursor, Iter};
pub use node::NODE_SIZE;
pub use ownership::{ArcRef, Boxed, Direct, Ownership};
pub use slab::node_memory_reserved;
pub use sync::{pin, unprotected, Guard};
pub use tree::{MapleTree, MemStats};
pub use write::{WriteGuard, Writer};

#[cfg(all(test, not(vmscale_shuttle)))]
mod drop_tests;
#[cfg(all(test, not(vmscale_shuttle)))]
mod ownership_tests;
#[cfg(test)]
mod smoke_tests;

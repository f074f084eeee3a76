//! Node memory: 256-byte, 256-byte-aligned blocks from a slab pool.
//!
//! A tree allocates a node on most splits and on every shared write, and
//! the system allocator serves aligned requests through a slow path. Like
//! the kernel's `kmem_cache` for maple nodes, a [`vmslab::Pool`] carves
//! aligned blocks out of 16 KiB chunks and recycles freed ones through
//! per-thread free lists; deferred frees run on whichever thread passes
//! the grace period, and their blocks land in that thread's list. Under
//! Miri and shuttle every block is a separate allocation, so Miri sees
//! each use after free and each leak exactly.

use std::cell::RefCell;
use std::ptr::NonNull;

/// Size of every block: one node.
pub(crate) const BLOCK: usize = crate::node::BLOCK_BYTES;
/// Alignment of every block.
pub(crate) const ALIGN: usize = crate::node::NODE_SIZE;

/// Node blocks: 64 to a chunk (16 KiB), one allocation each under Miri and
/// shuttle (see `vmslab::Pool::new`).
static POOL: vmslab::Pool = vmslab::Pool::new(BLOCK, ALIGN, 64);

thread_local! {
    static CACHE: RefCell<vmslab::Cache> = const { RefCell::new(vmslab::Cache::new(&POOL)) };
}

/// Bytes of node memory the process holds from the system allocator: nodes
/// in use by any tree plus freed nodes kept for reuse. The slab never
/// returns memory, so this is the high-water mark of node memory. (Under
/// Miri and shuttle, where every node is an allocation of its own, it
/// counts the nodes in use.)
///
/// ```
/// let mut tree = maple::MapleTree::new();
/// tree.store_range(1..=2, ()).unwrap();
/// assert!(maple::node_memory_reserved() >= tree.mem_stats().bytes);
/// ```
pub fn node_memory_reserved() -> usize {
    POOL.reserved()
}

/// A node block: uninitialised, `BLOCK` bytes aligned to `ALIGN`.
pub(crate) fn alloc() -> NonNull<u8> {
    POOL.alloc(&CACHE)
}

/// # Safety
/// `p` came from [`alloc`] and is not used again.
pub(crate) unsafe fn free(p: NonNull<u8>) {
    // SAFETY: the caller's contract is the pool's.
    unsafe { POOL.free(&CACHE, p) }
}

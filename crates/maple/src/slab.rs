//! Node memory: a slab of 256-byte, 256-byte-aligned blocks.
//!
//! The system allocator serves aligned requests through a slow path (glibc's
//! `posix_memalign` walks and splits free chunks), and a tree allocates a
//! node on most splits and on every shared write. Like the kernel's
//! `kmem_cache` for maple nodes, this carves aligned blocks out of 16 KiB
//! chunks and recycles freed blocks: each thread keeps a small free list,
//! and spills to (or refills from) a global one in batches, so the global
//! lock is taken about once per 32 operations. Deferred frees run on
//! whichever thread passes the grace period; they simply land in that
//! thread's list.
//!
//! Blocks are recycled, never returned to the system: a process keeps the
//! most node memory it ever had in use, as with a slab cache.
//!
//! Under Miri and shuttle every block is a separate allocation, so Miri
//! sees each use-after-free and leak exactly.

use std::alloc::Layout;
use std::ptr::NonNull;

/// Size of every block: one node.
pub(crate) const BLOCK: usize = crate::node::BLOCK_BYTES;
/// Alignment of every block.
pub(crate) const ALIGN: usize = crate::node::NODE_SIZE;

/// Bytes the slab has taken from the system allocator so far (blocks in
/// use and free). Under Miri and shuttle, where blocks are individual
/// allocations, it counts live blocks instead.
static RESERVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Bytes of node memory the process holds from the system allocator: nodes
/// in use by any tree plus freed nodes kept for reuse. The slab never
/// returns memory, so this is the high-water mark of node memory.
///
/// ```
/// let mut tree = maple::MapleTree::new();
/// tree.store_range(1..=2, ()).unwrap();
/// assert!(maple::node_memory_reserved() >= tree.mem_stats().bytes);
/// ```
pub fn node_memory_reserved() -> usize {
    RESERVED.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(any(miri, vmscale_shuttle))]
mod imp {
    use super::*;

    pub(crate) fn alloc() -> NonNull<u8> {
        let layout = Layout::from_size_align(BLOCK, ALIGN).expect("valid layout");
        super::RESERVED.fetch_add(BLOCK, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the layout has non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
    }

    /// # Safety
    /// `p` came from [`alloc`] and is not used again.
    pub(crate) unsafe fn free(p: NonNull<u8>) {
        let layout = Layout::from_size_align(BLOCK, ALIGN).expect("valid layout");
        super::RESERVED.fetch_sub(BLOCK, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: allocated by `alloc` with this layout.
        unsafe { std::alloc::dealloc(p.as_ptr(), layout) }
    }
}

#[cfg(not(any(miri, vmscale_shuttle)))]
mod imp {
    use super::*;
    use std::cell::RefCell;
    use std::sync::Mutex;

    /// Blocks per chunk taken from the system.
    const CHUNK_BLOCKS: usize = 64;
    /// Blocks moved between a thread's list and the global one at a time.
    const BATCH: usize = 32;

    /// A free block's address. Blocks are owned by the slab while free, so
    /// sending their addresses between threads is sound.
    struct Free(NonNull<u8>);
    // SAFETY: see above; a free block is plain memory nobody references.
    unsafe impl Send for Free {}

    static GLOBAL: Mutex<Vec<Free>> = Mutex::new(Vec::new());

    /// A thread's free list; gives its blocks back to the global list when
    /// the thread exits.
    struct Local(Vec<Free>);
    impl Drop for Local {
        fn drop(&mut self) {
            global().append(&mut self.0);
        }
    }

    thread_local! {
        static LOCAL: RefCell<Local> = const { RefCell::new(Local(Vec::new())) };
    }

    fn global() -> std::sync::MutexGuard<'static, Vec<Free>> {
        // A panic while holding the lock cannot leave the Vec inconsistent.
        GLOBAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Refills `local` from the global list, or with a new chunk.
    fn refill(local: &mut Vec<Free>) {
        let mut g = global();
        if g.is_empty() {
            drop(g);
            let layout =
                Layout::from_size_align(BLOCK * CHUNK_BLOCKS, ALIGN).expect("valid layout");
            // SAFETY: non-zero size. The chunk is never freed: its blocks
            // are recycled for the life of the process.
            let chunk = unsafe { std::alloc::alloc(layout) };
            let chunk =
                NonNull::new(chunk).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
            super::RESERVED.fetch_add(layout.size(), std::sync::atomic::Ordering::Relaxed);
            // SAFETY: every offset is inside the chunk just allocated.
            local.extend((0..CHUNK_BLOCKS).map(|i| Free(unsafe { chunk.add(i * BLOCK) })));
        } else {
            let keep = g.len().saturating_sub(BATCH);
            local.extend(g.drain(keep..));
        }
    }

    pub(crate) fn alloc() -> NonNull<u8> {
        let from_local = LOCAL.try_with(|l| {
            let list = &mut l.borrow_mut().0;
            if list.is_empty() {
                refill(list);
            }
            list.pop().map(|f| f.0)
        });
        match from_local {
            Ok(Some(p)) => p,
            // Thread-local storage is gone (thread exiting): go global.
            _ => {
                let mut one = Vec::new();
                refill(&mut one);
                let p = one.pop().map(|f| f.0).expect("refill yields blocks");
                global().append(&mut one);
                p
            }
        }
    }

    /// # Safety
    /// `p` came from [`alloc`] and is not used again.
    pub(crate) unsafe fn free(p: NonNull<u8>) {
        let pushed = LOCAL.try_with(|l| {
            let list = &mut l.borrow_mut().0;
            list.push(Free(p));
            if list.len() > 4 * BATCH {
                let keep = list.len() - 2 * BATCH;
                global().extend(list.drain(keep..));
            }
        });
        if pushed.is_err() {
            global().push(Free(p));
        }
    }
}

pub(crate) use imp::{alloc, free};

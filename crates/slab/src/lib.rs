//! Fixed-size, aligned memory blocks, carved from chunks and recycled
//! through per-thread free lists, as a kernel `kmem_cache` serves its
//! objects.
//!
//! The system allocator serves aligned requests through a slow path
//! (glibc's `posix_memalign` walks and splits free chunks and bypasses its
//! thread cache), and the structures this serves (maple tree nodes, lock
//! words on lines of their own) are allocated and freed at the rate of
//! writes. A [`Pool`] takes chunks of `chunk_blocks` blocks from the
//! system and never gives them back: a process keeps the most blocks it
//! ever had in use, as with a slab cache. Each thread keeps a free list
//! (a [`Cache`] in a `thread_local!`), refilling from the pool's global
//! list [`BATCH`] blocks at a time and spilling to it only once it holds
//! more than [`HIGH_WATER`] blocks. A block freed on another thread (say
//! after a grace period, by whichever thread ran the deferred free) lands
//! in that thread's list.
//!
//! The high-water mark is what keeps blocks on the CPU that used them,
//! as the kernel's per-CPU slabs and partial lists do (a few hundred to a
//! thousand objects per CPU for small caches). With a mark of a few
//! batches, a thread that frees and then allocates a few hundred blocks
//! per operation (a `fork` and `exit` of a process with 300 VMAs, one
//! lock line each) sent them through the global list on every operation,
//! and two such threads took each other's blocks back: every first write
//! to one was then a transfer from the other CPU.
//!
//! ```
//! use std::cell::RefCell;
//! use vmslab::{Cache, Pool};
//!
//! static POOL: Pool = Pool::new(128, 128, 64);
//! thread_local! {
//!     static CACHE: RefCell<Cache> = const { RefCell::new(Cache::new(&POOL)) };
//! }
//!
//! let p = POOL.alloc(&CACHE);
//! assert_eq!(p.as_ptr() as usize % 128, 0);
//! assert!(POOL.reserved() >= 128);
//! // SAFETY: `p` came from this pool and is not used again.
//! unsafe { POOL.free(&CACHE, p) };
//! ```

#![deny(missing_docs)]

use std::alloc::Layout;
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::LocalKey;

/// Blocks moved from the global list to a thread's at a time.
pub const BATCH: usize = 32;

/// Blocks a thread's list holds before it gives any back: above this it
/// spills down to half, so a thread keeps at most `HIGH_WATER` idle
/// blocks of each pool it used (128 KiB of 128-byte blocks).
pub const HIGH_WATER: usize = 32 * BATCH;

/// A free block's address. Free blocks belong to the pool and hold
/// nothing anybody references, so moving their addresses between threads
/// is sound.
struct Free(NonNull<u8>);
// SAFETY: see above.
unsafe impl Send for Free {}

/// A source of blocks of one size and alignment. Lives in a `static`.
pub struct Pool {
    block: usize,
    align: usize,
    chunk_blocks: usize,
    /// One system allocation per block instead of carving (see
    /// [`Pool::new`]).
    exact: bool,
    global: Mutex<Vec<Free>>,
    reserved: AtomicUsize,
}

impl Pool {
    /// A pool of `block`-byte blocks aligned to `align` (a power of two),
    /// taken from the system `chunk_blocks` at a time. Under Miri and
    /// under shuttle (`--cfg vmscale_shuttle`) every block is a system
    /// allocation of its own instead, so Miri sees a use after free of a
    /// block exactly, and model threads (which share one OS thread) share
    /// no cached block.
    ///
    /// `block` is rounded up to a multiple of `align`, so that every block
    /// of a chunk is aligned.
    pub const fn new(block: usize, align: usize, chunk_blocks: usize) -> Pool {
        Pool::with_mode(block, align, chunk_blocks, cfg!(any(miri, vmscale_shuttle)))
    }

    /// As [`Pool::new`], but always carving chunks, under Miri too: for
    /// testing the pool itself.
    pub const fn carving(block: usize, align: usize, chunk_blocks: usize) -> Pool {
        Pool::with_mode(block, align, chunk_blocks, false)
    }

    const fn with_mode(block: usize, align: usize, chunk_blocks: usize, exact: bool) -> Pool {
        assert!(align.is_power_of_two(), "alignment is a power of two");
        assert!(
            block > 0 && chunk_blocks > 0,
            "blocks and chunks are not empty"
        );
        // Checked here, in const evaluation, so that a pool in a `static`
        // with a chunk too large for a `Layout` does not compile, rather
        // than panicking at its first allocation.
        let block = block.next_multiple_of(align);
        let chunk = match block.checked_mul(chunk_blocks) {
            Some(bytes) => bytes,
            None => panic!("a chunk's size overflows usize"),
        };
        assert!(
            chunk <= isize::MAX as usize - (align - 1),
            "a chunk is larger than a Layout allows"
        );
        Pool {
            block,
            align,
            chunk_blocks,
            exact,
            global: Mutex::new(Vec::new()),
            reserved: AtomicUsize::new(0),
        }
    }

    /// Bytes this pool has taken from the system allocator so far (blocks
    /// in use and free; in exact mode, the blocks in use).
    pub fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Relaxed)
    }

    /// `blocks` is 1 or `chunk_blocks`, whose layouts `with_mode` checked.
    fn layout(&self, blocks: usize) -> Layout {
        Layout::from_size_align(self.block * blocks, self.align)
            .unwrap_or_else(|_| unreachable!("checked when the pool was made"))
    }

    fn global(&self) -> std::sync::MutexGuard<'_, Vec<Free>> {
        // A panic while holding the lock cannot leave the Vec inconsistent.
        self.global.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Refills `local` from the global list, or with a new chunk.
    fn refill(&self, local: &mut Vec<Free>) {
        let mut g = self.global();
        if g.is_empty() {
            drop(g);
            let layout = self.layout(self.chunk_blocks);
            // SAFETY: the layout has non-zero size. The chunk is never
            // freed: its blocks are recycled for the life of the process.
            let chunk = unsafe { std::alloc::alloc(layout) };
            let chunk =
                NonNull::new(chunk).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
            self.reserved.fetch_add(layout.size(), Ordering::Relaxed);
            // SAFETY: every offset is inside the chunk just allocated.
            local
                .extend((0..self.chunk_blocks).map(|i| Free(unsafe { chunk.add(i * self.block) })));
        } else {
            let keep = g.len().saturating_sub(BATCH);
            local.extend(g.drain(keep..));
        }
    }

    /// A block: uninitialised memory of the pool's size and alignment,
    /// the caller's until it hands it to [`free`](Pool::free). `cache` is
    /// this pool's per-thread cache (another pool's is bypassed, at the
    /// cost of the global lock).
    pub fn alloc(&'static self, cache: &'static LocalKey<RefCell<Cache>>) -> NonNull<u8> {
        if self.exact {
            let layout = self.layout(1);
            self.reserved.fetch_add(layout.size(), Ordering::Relaxed);
            // SAFETY: the layout has non-zero size.
            let p = unsafe { std::alloc::alloc(layout) };
            return NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        }
        let from_local = cache.try_with(|c| {
            let mut c = c.borrow_mut();
            if !std::ptr::eq(c.pool, self) {
                return None; // another pool's cache: bypass it
            }
            if c.list.is_empty() {
                self.refill(&mut c.list);
            }
            c.list.pop().map(|f| f.0)
        });
        match from_local {
            Ok(Some(p)) => p,
            // Thread-local storage is gone (the thread is exiting), or
            // the cache is another pool's.
            _ => {
                let mut one = Vec::new();
                self.refill(&mut one);
                let p = one.pop().map(|f| f.0).expect("a refill yields blocks");
                self.global().append(&mut one);
                p
            }
        }
    }

    /// Give a block back to the pool.
    ///
    /// # Safety
    /// `p` came from [`alloc`](Pool::alloc) of this pool, whatever it held
    /// was dropped, and nothing uses it again.
    pub unsafe fn free(&'static self, cache: &'static LocalKey<RefCell<Cache>>, p: NonNull<u8>) {
        if self.exact {
            self.reserved.fetch_sub(self.block, Ordering::Relaxed);
            // SAFETY: allocated by `alloc` in exact mode with this layout.
            unsafe { std::alloc::dealloc(p.as_ptr(), self.layout(1)) };
            return;
        }
        let pushed = cache.try_with(|c| {
            let mut c = c.borrow_mut();
            if !std::ptr::eq(c.pool, self) {
                return false; // another pool's cache: bypass it
            }
            c.list.push(Free(p));
            if c.list.len() > HIGH_WATER {
                // The list is a stack: give back its bottom, the blocks
                // freed longest ago, and keep those this CPU touched last.
                let spill = c.list.len() - HIGH_WATER / 2;
                self.global().extend(c.list.drain(..spill));
            }
            true
        });
        if pushed != Ok(true) {
            self.global().push(Free(p));
        }
    }
}

/// A thread's free list of one [`Pool`]; put it in a `thread_local!`
/// (see the crate's example). Its blocks go back to the pool's global list
/// when the thread exits.
pub struct Cache {
    list: Vec<Free>,
    pool: &'static Pool,
}

impl Cache {
    /// An empty cache of `pool`.
    pub const fn new(pool: &'static Pool) -> Cache {
        Cache {
            list: Vec::new(),
            pool,
        }
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.pool.global().append(&mut self.list);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static CARVED: Pool = Pool::carving(40, 64, 8);
    thread_local! {
        static CARVED_CACHE: RefCell<Cache> = const { RefCell::new(Cache::new(&CARVED)) };
    }
    static EXACT: Pool = Pool::with_mode(40, 64, 8, true);
    thread_local! {
        static EXACT_CACHE: RefCell<Cache> = const { RefCell::new(Cache::new(&EXACT)) };
    }

    /// Blocks are aligned, disjoint and writable; blocks freed on another
    /// thread (spilled to the global list as it exits) serve this one.
    fn blocks_are_aligned_disjoint_and_recycled(
        pool: &'static Pool,
        cache: &'static LocalKey<RefCell<Cache>>,
    ) {
        let n = if cfg!(miri) { 3 * BATCH } else { 1000 };
        let blocks: Vec<usize> = (0..n)
            .map(|i| {
                let p = pool.alloc(cache);
                // SAFETY: a fresh block of at least 40 bytes.
                unsafe { p.as_ptr().write_bytes(i as u8, 40) };
                p.as_ptr() as usize
            })
            .collect();
        let mut sorted = blocks.clone();
        sorted.sort_unstable();
        assert!(
            sorted.windows(2).all(|w| w[1] - w[0] >= 64),
            "blocks overlap"
        );
        assert!(blocks.iter().all(|b| b % 64 == 0), "a block is misaligned");
        for (i, &b) in blocks.iter().enumerate() {
            // SAFETY: written above, still ours.
            assert_eq!(unsafe { *(b as *const u8).add(39) }, i as u8);
        }
        std::thread::spawn(move || {
            for b in blocks {
                // SAFETY: each block came from `pool` and is used no more.
                unsafe { pool.free(cache, NonNull::new(b as *mut u8).unwrap()) };
            }
        })
        .join()
        .unwrap();
        let reserved = pool.reserved();
        let again: Vec<NonNull<u8>> = (0..n).map(|_| pool.alloc(cache)).collect();
        if !pool.exact {
            assert_eq!(pool.reserved(), reserved, "freed blocks were not reused");
        }
        for p in again {
            // SAFETY: came from `pool`, used no more.
            unsafe { pool.free(cache, p) };
        }
    }

    #[test]
    fn carved_blocks() {
        blocks_are_aligned_disjoint_and_recycled(&CARVED, &CARVED_CACHE);
    }

    /// A pool handed another pool's cache serves and takes back its own
    /// blocks through its global list, leaving that cache alone.
    #[test]
    fn another_pools_cache_is_bypassed() {
        static OTHER: Pool = Pool::carving(256, 256, 4);
        let cached = CARVED_CACHE.with(|c| c.borrow().list.len());
        let p = OTHER.alloc(&CARVED_CACHE);
        assert_eq!(p.as_ptr() as usize % 256, 0);
        assert_eq!(OTHER.reserved(), 4 * 256);
        // SAFETY: `p` came from OTHER and is used no more.
        unsafe { OTHER.free(&CARVED_CACHE, p) };
        assert_eq!(CARVED_CACHE.with(|c| c.borrow().list.len()), cached);
        assert_eq!(OTHER.global().len(), 4, "all four blocks are back");
    }

    /// Up to the high-water mark, the blocks a thread frees stay on its
    /// list: churning a few hundred of them neither sends them through the
    /// global list nor hands them to another thread while it lives.
    #[test]
    fn a_threads_blocks_stay_with_it_below_the_high_water_mark() {
        static HOARD: Pool = Pool::carving(64, 64, 16);
        thread_local! {
            static HOARD_CACHE: RefCell<Cache> = const { RefCell::new(Cache::new(&HOARD)) };
        }
        // A fork and exit of a process with 300 VMAs, one lock line each.
        let n = 300;
        let (churned_tx, churned_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let churner = std::thread::spawn(move || {
            let mut mine: Vec<usize> = Vec::with_capacity(n);
            for _ in 0..3 {
                let blocks: Vec<NonNull<u8>> = (0..n).map(|_| HOARD.alloc(&HOARD_CACHE)).collect();
                mine.extend(blocks.iter().map(|p| p.as_ptr() as usize));
                for p in blocks {
                    // SAFETY: from HOARD, used no more.
                    unsafe { HOARD.free(&HOARD_CACHE, p) };
                }
            }
            mine.sort_unstable();
            mine.dedup();
            churned_tx.send(mine).unwrap();
            // Keep the list alive (it goes back to the pool when the
            // thread exits) until the other thread has allocated.
            done_rx.recv().unwrap();
        });
        let mine = churned_rx.recv().unwrap();
        assert!(mine.len() <= n + 16, "the churner reused its own blocks");
        assert_eq!(HOARD.global().len(), 0, "nothing was spilled");
        let theirs: Vec<NonNull<u8>> = (0..n).map(|_| HOARD.alloc(&HOARD_CACHE)).collect();
        assert!(
            theirs
                .iter()
                .all(|p| mine.binary_search(&(p.as_ptr() as usize)).is_err()),
            "a block the other thread keeps was handed out here"
        );
        for p in theirs {
            // SAFETY: from HOARD, used no more.
            unsafe { HOARD.free(&HOARD_CACHE, p) };
        }
        done_tx.send(()).unwrap();
        churner.join().unwrap();
    }

    /// Past the high-water mark a list spills down to half of it, giving
    /// back the blocks freed longest ago and keeping the last ones.
    #[test]
    fn a_list_past_the_mark_spills_its_oldest_blocks() {
        static SPILL: Pool = Pool::carving(64, 64, 16);
        thread_local! {
            static SPILL_CACHE: RefCell<Cache> = const { RefCell::new(Cache::new(&SPILL)) };
        }
        std::thread::spawn(|| {
            let blocks: Vec<NonNull<u8>> = (0..HIGH_WATER + 1)
                .map(|_| SPILL.alloc(&SPILL_CACHE))
                .collect();
            let (first, last) = (blocks[0], blocks[HIGH_WATER]);
            let before = SPILL_CACHE.with(|c| c.borrow().list.len());
            for p in blocks {
                // SAFETY: from SPILL, used no more.
                unsafe { SPILL.free(&SPILL_CACHE, p) };
            }
            let kept: Vec<usize> = SPILL_CACHE.with(|c| {
                c.borrow()
                    .list
                    .iter()
                    .map(|f| f.0.as_ptr() as usize)
                    .collect()
            });
            // The list spilled once, down to half the mark, then took the
            // frees after that; every block is on one list or the other.
            assert!((HIGH_WATER / 2..HIGH_WATER).contains(&kept.len()));
            assert_eq!(SPILL.global().len() + kept.len(), before + HIGH_WATER + 1);
            assert!(
                kept.contains(&(last.as_ptr() as usize)),
                "the last block freed stays"
            );
            assert!(
                SPILL.global().iter().any(|f| f.0 == first),
                "the first block freed went back"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn exact_blocks() {
        blocks_are_aligned_disjoint_and_recycled(&EXACT, &EXACT_CACHE);
        assert_eq!(EXACT.reserved(), 0, "exact mode counts blocks in use");
    }
}

//! The VMA lock's word, on a cache line of its own.
//!
//! A page fault writes one word of memory shared with other threads: the
//! read count of its VMA's lock. The kernel keeps that count where no
//! other CPU's data is (VMAs come from a slab of cache-line-aligned
//! objects, `SLAB_HWCACHE_ALIGN`, and the count has a line of its own
//! inside the VMA), so two CPUs faulting on two VMAs never write one line.
//! A [`Vma`](crate::vma::Vma) here lives in an `Arc` wherever the system
//! allocator puts it, 16-byte aligned; a VMA freed after a grace period is
//! reused from the cache of whichever thread freed it, so two threads'
//! VMAs end up 128 bytes apart, and each fault steals the line the other
//! thread's faults read (docs/RESULTS.md, "Cache lines of their own"). So
//! the word lives apart, in a line from this slab.
//!
//! Aligned allocation through glibc is slow (`posix_memalign` bypasses
//! its thread cache: aligning the whole `Vma` cost a third of `brk1`), so
//! lines are carved out of 16 KiB chunks and recycled: each thread keeps
//! a small free list and spills to (or refills from) a global one in
//! batches, as the maple tree's node slab does. Lines are never returned
//! to the system: a process keeps as many as it ever had VMAs at once.
//!
//! Under shuttle every line is an allocation of its own, so the model's
//! threads (which share one OS thread) share no thread-local list. Miri
//! runs the slab itself (`.ci/run`): a line's use after free is ruled out
//! by ownership (a [`LockWord`] frees its line once, when dropped), so
//! what Miri has to check here is the carving and recycling.

use std::ops::Deref;
use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

use crate::sync::AtomicU32;

/// One line: the word, padded to the line size (two lines where the
/// adjacent-line prefetcher pairs them, as `CachePadded` decides).
type Line = CachePadded<AtomicU32>;

/// A lock word alone on its cache line, freed back to the slab when
/// dropped.
pub(crate) struct LockWord(NonNull<Line>);

// SAFETY: a `LockWord` owns its line exclusively (made by `alloc`, freed
// once by `Drop`), and the line holds an atomic, which any thread may use.
unsafe impl Send for LockWord {}
// SAFETY: as above; shared access is only through `&AtomicU32`.
unsafe impl Sync for LockWord {}

impl LockWord {
    /// A word holding `value`, on a line of its own.
    pub(crate) fn new(value: u32) -> LockWord {
        let p = imp::alloc();
        // SAFETY: `p` is a free line: valid for writes, aligned for
        // `Line` (the slab's blocks are `Line`-sized and -aligned), and
        // nothing else refers to it.
        unsafe { p.as_ptr().write(CachePadded::new(AtomicU32::new(value))) };
        LockWord(p)
    }
}

impl Deref for LockWord {
    type Target = AtomicU32;

    #[inline]
    fn deref(&self) -> &AtomicU32 {
        // SAFETY: the line was initialised in `new` and stays allocated
        // until `drop`, which `&self` rules out for this borrow's life.
        unsafe { self.0.as_ref() }
    }
}

impl Drop for LockWord {
    fn drop(&mut self) {
        // SAFETY: the line was initialised in `new`, `&mut self` means no
        // borrow of it remains, and it is dropped and freed exactly once
        // (here) before `imp::free` hands it to a later `alloc`.
        unsafe {
            std::ptr::drop_in_place(self.0.as_ptr());
            imp::free(self.0);
        }
    }
}

impl std::fmt::Debug for LockWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LockWord").field(&**self).finish()
    }
}

#[cfg(vmscale_shuttle)]
mod imp {
    use super::Line;
    use std::alloc::Layout;
    use std::ptr::NonNull;

    pub(super) fn alloc() -> NonNull<Line> {
        let layout = Layout::new::<Line>();
        // SAFETY: the layout has non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        NonNull::new(p.cast::<Line>()).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
    }

    /// # Safety
    /// `p` came from [`alloc`], its value was dropped, and it is not used
    /// again.
    pub(super) unsafe fn free(p: NonNull<Line>) {
        // SAFETY: allocated by `alloc` with this layout.
        unsafe { std::alloc::dealloc(p.as_ptr().cast(), Layout::new::<Line>()) }
    }
}

#[cfg(not(vmscale_shuttle))]
mod imp {
    use super::Line;
    use std::alloc::Layout;
    use std::cell::RefCell;
    use std::ptr::NonNull;
    use std::sync::Mutex;

    /// Bytes of one chunk taken from the system allocator.
    const CHUNK_BYTES: usize = 16 << 10;
    /// Lines moved between a thread's list and the global one at a time.
    const BATCH: usize = 32;

    /// A free line's address. Free lines are owned by the slab and hold
    /// nothing anybody references, so moving their addresses between
    /// threads is sound.
    struct Free(NonNull<Line>);
    // SAFETY: see above.
    unsafe impl Send for Free {}

    static GLOBAL: Mutex<Vec<Free>> = Mutex::new(Vec::new());

    /// A thread's free list; its lines go back to the global list when
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
            let lines = CHUNK_BYTES / size_of::<Line>();
            let layout = Layout::array::<Line>(lines).expect("a 16 KiB chunk");
            // SAFETY: non-zero size. The chunk is never freed: its lines
            // are recycled for the life of the process.
            let chunk = unsafe { std::alloc::alloc(layout) }.cast::<Line>();
            let chunk =
                NonNull::new(chunk).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
            // SAFETY: every offset is inside the chunk just allocated.
            local.extend((0..lines).map(|i| Free(unsafe { chunk.add(i) })));
        } else {
            let keep = g.len().saturating_sub(BATCH);
            local.extend(g.drain(keep..));
        }
    }

    pub(super) fn alloc() -> NonNull<Line> {
        let from_local = LOCAL.try_with(|l| {
            let list = &mut l.borrow_mut().0;
            if list.is_empty() {
                refill(list);
            }
            list.pop().map(|f| f.0)
        });
        match from_local {
            Ok(Some(p)) => p,
            // Thread-local storage is gone (the thread is exiting).
            _ => {
                let mut one = Vec::new();
                refill(&mut one);
                let p = one.pop().map(|f| f.0).expect("refill yields lines");
                global().append(&mut one);
                p
            }
        }
    }

    /// # Safety
    /// `p` came from [`alloc`], its value was dropped, and it is not used
    /// again.
    pub(super) unsafe fn free(p: NonNull<Line>) {
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

#[cfg(all(test, not(vmscale_shuttle)))]
mod tests {
    use super::*;
    use crate::sync::Ordering;

    /// Every live word is on a line no other live word shares, and lines
    /// freed on one thread serve another.
    #[test]
    fn words_have_lines_of_their_own() {
        let n = if cfg!(miri) { 40 } else { 1000 };
        let words: Vec<LockWord> = (0..n).map(LockWord::new).collect();
        let mut lines: Vec<usize> = words
            .iter()
            .map(|w| std::ptr::from_ref::<AtomicU32>(w) as usize / align_of::<Line>())
            .collect();
        for (i, w) in words.iter().enumerate() {
            assert_eq!(w.load(Ordering::Relaxed), i as u32);
            assert_eq!(
                std::ptr::from_ref::<AtomicU32>(w) as usize % align_of::<Line>(),
                0
            );
        }
        lines.sort_unstable();
        lines.dedup();
        assert_eq!(lines.len(), words.len(), "two words share a line");
        // Freed on another thread, reused here.
        std::thread::spawn(move || drop(words)).join().unwrap();
        let again: Vec<LockWord> = (0..n).map(|_| LockWord::new(7)).collect();
        assert!(again.iter().all(|w| w.fetch_add(1, Ordering::Relaxed) == 7));
    }
}

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
//! lines come from a [`vmslab::Pool`], as the maple tree's nodes do:
//! carved out of 16 KiB chunks, recycled through per-thread free lists,
//! never returned to the system (a process keeps as many as it ever had
//! VMAs at once). Under Miri and shuttle each line is an allocation of
//! its own (the pool's exact mode).

use std::cell::RefCell;
use std::ops::Deref;
use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

use crate::sync::AtomicU32;

/// One line: the word, padded to the line size (two lines where the
/// adjacent-line prefetcher pairs them, as `CachePadded` decides).
type Line = CachePadded<AtomicU32>;

static LINES: vmslab::Pool = vmslab::Pool::new(
    size_of::<Line>(),
    align_of::<Line>(),
    (16 << 10) / size_of::<Line>(),
);

thread_local! {
    static CACHE: RefCell<vmslab::Cache> = const { RefCell::new(vmslab::Cache::new(&LINES)) };
}

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
        let p = LINES.alloc(&CACHE).cast::<Line>();
        // SAFETY: `p` is a free block: valid for writes, aligned for
        // `Line` (the pool's blocks are `Line`-sized and -aligned), and
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
        // borrow of it remains, and it is dropped and given back exactly
        // once (here), to the pool it came from.
        unsafe {
            std::ptr::drop_in_place(self.0.as_ptr());
            LINES.free(&CACHE, self.0.cast());
        }
    }
}

impl std::fmt::Debug for LockWord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LockWord").field(&**self).finish()
    }
}

#[cfg(all(test, not(vmscale_shuttle)))]
mod tests {
    use super::*;
    use crate::sync::Ordering;

    /// Every live word is on a line no other live word shares, and words
    /// dropped on another thread leave the pool serving good ones here.
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
        // Freed on another thread (into its list, then the global one).
        std::thread::spawn(move || drop(words)).join().unwrap();
        let again: Vec<LockWord> = (0..n).map(|_| LockWord::new(7)).collect();
        assert!(again.iter().all(|w| w.fetch_add(1, Ordering::Relaxed) == 7));
    }
}

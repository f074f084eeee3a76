//! When an address space's maple tree must be written in RCU mode.
//!
//! The kernel's maple tree was designed with two modes: a tree with a
//! single user is written in place with no grace periods, and enters RCU
//! mode only once readers that take no lock may exist. In this model the
//! only such readers are page faults on their lockless fast path, so the
//! mode follows which threads have made one:
//!
//! * **unclaimed** — no lockless fault yet: every write may be in place;
//! * **claimed by thread T** — T alone reads without `mmap_lock`. T's own
//!   writes may still be in place (T cannot read and write at once); any
//!   other thread's write is an RCU write, since T may be reading;
//! * **shared** — two or more threads read without `mmap_lock` (or a caller
//!   took the tree through [`VmaIndex::lockless`](super::VmaIndex::lockless)):
//!   every write is an RCU write, for good.
//!
//! The state only moves forward (unclaimed → claimed → shared). A thread
//! becomes a lockless reader under `mmap_lock` (read), which no writer
//! holds, so no in-place write is in progress while the state changes, and
//! every later writer, taking `mmap_lock` for write, sees the new state. A
//! process-mode worker therefore pays for no grace period, no deferred free
//! and no copy, as a single-threaded process's tree would in the kernel;
//! a threads-mode address space turns shared with its second faulting
//! thread.

use std::sync::atomic::{AtomicU64, Ordering};

const UNCLAIMED: u64 = 0;
const SHARED: u64 = u64::MAX;

/// A number for the calling thread, unique for the life of the process
/// (never `UNCLAIMED` or `SHARED`).
fn me() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN.with(|t| *t)
}

/// Which threads may read an address space's tree without `mmap_lock`.
#[derive(Debug, Default)]
pub(crate) struct Sharing(AtomicU64);

impl Sharing {
    /// For a writer holding `mmap_lock` for write: whether no other thread
    /// can be reading the tree without the lock, so the write may be made
    /// in place and what it replaces freed at once.
    pub(crate) fn writer_alone(&self) -> bool {
        let s = self.0.load(Ordering::Relaxed);
        s == UNCLAIMED || s == me()
    }

    /// For a lockless reader, before it reads: whether the calling thread
    /// is already admitted as one. If not, it must call [`admit`] under
    /// `mmap_lock` first.
    ///
    /// [`admit`]: Sharing::admit
    #[inline]
    pub(crate) fn admitted(&self) -> bool {
        let s = self.0.load(Ordering::Acquire);
        s == SHARED || s == me()
    }

    /// Admits the calling thread as a lockless reader. The caller holds
    /// `mmap_lock` (read is enough: it excludes every writer).
    pub(crate) fn admit(&self) {
        let me = me();
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| match s {
                UNCLAIMED => Some(me),
                s if s == me || s == SHARED => None,
                _ => Some(SHARED),
            });
    }

    /// Every write from now on is an RCU write (for a handle given away to
    /// code that may read from any thread).
    pub(crate) fn share(&self) {
        self.0.store(SHARED, Ordering::Release);
    }

    /// Whether the tree is written in RCU mode for good.
    #[cfg(test)]
    pub(crate) fn is_shared(&self) -> bool {
        self.0.load(Ordering::Acquire) == SHARED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_from_unclaimed_to_claimed_to_shared() {
        let s = Sharing::default();
        assert!(s.writer_alone());
        assert!(!s.admitted());
        s.admit();
        assert!(s.admitted() && s.writer_alone() && !s.is_shared());
        // Another thread's write must not be in place while we may read.
        let other = std::thread::scope(|t| t.spawn(|| s.writer_alone()).join().unwrap());
        assert!(!other);
        // A second lockless reader makes the tree shared for good.
        std::thread::scope(|t| t.spawn(|| s.admit()).join().unwrap());
        assert!(s.is_shared() && s.admitted() && !s.writer_alone());
    }

    #[test]
    fn share_is_final() {
        let s = Sharing::default();
        s.share();
        s.admit();
        assert!(s.is_shared() && !s.writer_alone());
    }
}

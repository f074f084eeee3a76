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

use crate::sync::{AtomicU64, Ordering};

const UNCLAIMED: u64 = 0;
const SHARED: u64 = u64::MAX;

/// A number for the calling thread, unique for the life of the process
/// (never `UNCLAIMED` or `SHARED`).
fn me() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    // Shuttle runs its threads on one OS thread: its own thread-locals.
    #[cfg(vmscale_shuttle)]
    shuttle::thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    #[cfg(not(vmscale_shuttle))]
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    TOKEN.with(|t| *t)
}

/// Which threads may read an address space's tree without `mmap_lock`.
#[derive(Debug)]
pub(crate) struct Sharing(AtomicU64);

impl Default for Sharing {
    fn default() -> Self {
        Sharing(AtomicU64::new(UNCLAIMED))
    }
}

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
    #[cfg(all(test, not(vmscale_shuttle)))]
    pub(crate) fn is_shared(&self) -> bool {
        self.0.load(Ordering::Acquire) == SHARED
    }
}

#[cfg(all(test, not(vmscale_shuttle)))]
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

/// A shuttle model of the mode switch: two threads each write (under the
/// write lock, in place when [`Sharing::writer_alone`] says so) and read
/// without the lock (admitted first, under the read lock), in every
/// interleaving. Checked: no in-place write ever overlaps another thread's
/// lockless read. Run with
/// `RUSTFLAGS="--cfg vmscale_shuttle" cargo test -p mm --lib shuttle`.
#[cfg(all(test, vmscale_shuttle))]
mod shuttle_model {
    use super::Sharing;
    use shuttle::sync::atomic::{AtomicBool, Ordering};
    use shuttle::sync::RwLock;
    use shuttle::thread;
    use std::sync::Arc;

    struct World {
        mmap_lock: RwLock<()>,
        sharing: Sharing,
        /// Which of the two threads is inside a lockless read.
        reading: [AtomicBool; 2],
    }

    fn worker(w: &World, me: usize, reads_first: bool) {
        let write = || {
            let _g = w.mmap_lock.write().unwrap();
            if w.sharing.writer_alone() {
                // An in-place write: nobody else may be reading locklessly.
                thread::yield_now();
                assert!(
                    !w.reading[1 - me].load(Ordering::SeqCst),
                    "an in-place write overlapped another thread's lockless read"
                );
            }
        };
        let read = || {
            if !w.sharing.admitted() {
                let _g = w.mmap_lock.read().unwrap();
                w.sharing.admit();
            }
            w.reading[me].store(true, Ordering::SeqCst);
            thread::yield_now();
            w.reading[me].store(false, Ordering::SeqCst);
        };
        for _ in 0..2 {
            if reads_first {
                read();
                write();
            } else {
                write();
                read();
            }
        }
    }

    fn scenario() {
        let w = Arc::new(World {
            mmap_lock: RwLock::new(()),
            sharing: Sharing::default(),
            reading: [AtomicBool::new(false), AtomicBool::new(false)],
        });
        let other = {
            let w = Arc::clone(&w);
            thread::spawn(move || worker(&w, 1, true))
        };
        worker(&w, 0, false);
        other.join().unwrap();
    }

    #[test]
    fn shuttle_sharing_mode_switch_random() {
        shuttle::check_random(scenario, 3000);
    }

    #[test]
    fn shuttle_sharing_mode_switch_pct() {
        shuttle::check_pct(scenario, 3000, 3);
    }
}

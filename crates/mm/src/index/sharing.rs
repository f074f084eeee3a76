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
//! * **shared** — two or more threads read without `mmap_lock`: every
//!   write is an RCU write, for good.
//!
//! The state only moves forward (unclaimed → claimed → shared). A thread
//! becomes a lockless reader under `mmap_lock` (read), which no writer
//! holds, so no in-place write is in progress while the state changes, and
//! every later writer, taking `mmap_lock` for write, sees the new state.
//!
//! **The claimant reads with no grace period.** While T is the only
//! lockless reader, T's own writes are in place and free at once (T cannot
//! read and write at once), so nothing T reads is ever retired: T needs no
//! epoch pin, which in `crossbeam-epoch` is a third of a fault and touches
//! the collector's global state that every address space shares. Another
//! thread's write, or a second reader, first makes the tree shared, and
//! the thread that does so waits out a read T may have in progress: T marks
//! its read (`reading`) and then checks the state again, the other thread
//! stores the state and then checks the mark, each with a sequentially
//! consistent fence between, so at least one of them sees the other
//! (Dekker's handshake): either T falls back to a pinned read, or the
//! other thread waits until T's read is over. Only then can an RCU write
//! retire anything.
//!
//! A process-mode worker therefore pays for no grace period, no deferred
//! free, no copy and no epoch, as a single-threaded process's tree would in
//! the kernel; a threads-mode address space turns shared with its second
//! faulting thread.

use crate::sync::{fence, yield_now, AtomicBool, AtomicU64, Ordering};

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
pub(crate) struct Sharing {
    state: AtomicU64,
    /// Set by the claimant for the length of a read made with no grace
    /// period (see [`Sharing::begin_read`]).
    reading: AtomicBool,
}

impl Default for Sharing {
    fn default() -> Self {
        Sharing {
            state: AtomicU64::new(UNCLAIMED),
            reading: AtomicBool::new(false),
        }
    }
}

/// How a lockless reader may read the tree now; see
/// [`Sharing::begin_read`].
pub(crate) enum Reader<'a> {
    /// Not admitted yet.
    Unadmitted,
    /// Admitted; pin a grace period.
    Pinned,
    /// The claimant, reading with no grace period until this is dropped.
    Alone(&'a Sharing),
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        if let Reader::Alone(sharing) = self {
            // Release: everything the read did happens before a thread
            // that sees the mark clear goes on to retire what was read.
            sharing.reading.store(false, Ordering::Release);
        }
    }
}

impl Sharing {
    /// For a writer holding `mmap_lock` for write: whether no other thread
    /// can be reading the tree without the lock, so the write may be made
    /// in place and what it replaces freed at once. A writer that is not
    /// the claimant makes the tree shared (and waits out the claimant's
    /// read), since its RCU write may retire what the claimant is reading.
    pub(crate) fn writer_alone(&self) -> bool {
        let s = self.state.load(Ordering::Relaxed);
        if s == UNCLAIMED || s == me() {
            return true;
        }
        if s != SHARED {
            self.make_shared();
        }
        false
    }

    /// For a lockless reader, before it reads: one look at the state says
    /// whether the calling thread must first be admitted
    /// ([`Unadmitted`](Reader::Unadmitted): call [`admit`](Sharing::admit)
    /// under `mmap_lock`, then this again), must pin a grace period
    /// ([`Pinned`](Reader::Pinned)), or is the claimant and reads with none
    /// ([`Alone`](Reader::Alone)): while that guard lives no other thread
    /// writes the tree, so nothing read through it is retired.
    #[inline]
    pub(crate) fn begin_read(&self) -> Reader<'_> {
        let me = me();
        match self.state.load(Ordering::Acquire) {
            SHARED => return Reader::Pinned,
            s if s != me => return Reader::Unadmitted,
            _ => {}
        }
        self.reading.store(true, Ordering::Relaxed);
        // Dekker's handshake with `make_shared`: the mark is visible
        // before the state is read again, so either this read sees the
        // state move (to shared: this thread stays admitted), or the
        // thread that moved it sees the mark and waits.
        fence(Ordering::SeqCst);
        if self.state.load(Ordering::Relaxed) != me {
            self.reading.store(false, Ordering::Relaxed);
            return Reader::Pinned;
        }
        Reader::Alone(self)
    }

    /// Makes the tree shared for good, then waits until a claimant's read
    /// that began before it is over (the other half of the handshake in
    /// [`begin_read`](Sharing::begin_read)).
    fn make_shared(&self) {
        self.state.store(SHARED, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        // A claimant's read is a lookup and a try-lock: it never waits,
        // so this wait is short. (The mutation check of `.ci/run` builds
        // this without the wait; the shuttle model below must fail then.)
        #[cfg(not(vmscale_mutant = "no_handshake"))]
        while self.reading.load(Ordering::Acquire) {
            yield_now();
        }
    }

    /// Whether the calling thread is admitted as a lockless reader. One
    /// that is may read under any grace period it holds (see
    /// `Mm::fault_in`): the claimant's own writes never overlap its reads,
    /// and everyone else's are RCU writes.
    #[inline]
    pub(crate) fn admitted(&self) -> bool {
        // The mutation check of `.ci/run` builds a reader that skips
        // admission; the shuttle model below must fail then.
        if cfg!(vmscale_mutant = "unadmitted") {
            return true;
        }
        let s = self.state.load(Ordering::Acquire);
        s == SHARED || s == me()
    }

    /// Admits the calling thread as a lockless reader. The caller holds
    /// `mmap_lock` (read is enough: it excludes every writer).
    pub(crate) fn admit(&self) {
        let me = me();
        // One atomic step: readers hold `mmap_lock` together, so two may
        // be admitted at once. (A loop of its own rather than
        // `fetch_update`, which nightly renames.)
        let mut s = self.state.load(Ordering::Acquire);
        let before = loop {
            let next = match s {
                UNCLAIMED => me,
                s if s == me || s == SHARED => break None,
                _ => SHARED,
            };
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(prev) => break Some(prev),
                Err(now) => s = now,
            }
        };
        if matches!(before, Some(s) if s != UNCLAIMED) {
            // A second lockless reader took the tree from its claimant,
            // who must pin from now on: wait out the claimant's read.
            self.make_shared();
        }
    }

    /// Whether the tree is written in RCU mode for good.
    #[cfg(all(test, not(vmscale_shuttle)))]
    pub(crate) fn is_shared(&self) -> bool {
        self.state.load(Ordering::Acquire) == SHARED
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
    fn only_the_claimant_reads_with_no_grace_period() {
        let s = Sharing::default();
        assert!(
            matches!(s.begin_read(), Reader::Unadmitted),
            "not admitted yet"
        );
        s.admit();
        assert!(matches!(s.begin_read(), Reader::Alone(_)));
        // Another thread's write makes the tree shared: pin from then on.
        let other = std::thread::scope(|t| t.spawn(|| s.writer_alone()).join().unwrap());
        assert!(!other && s.is_shared());
        assert!(matches!(s.begin_read(), Reader::Pinned));
    }
}

/// A shuttle model of the mode switch: two threads each write (under the
/// write lock, in place when [`Sharing::writer_alone`] says so) and read
/// without the lock (admitted first, under the read lock; with no grace
/// period when [`Sharing::begin_read`] allows), in every interleaving.
/// Half the reads hold a grace period of their own, as `Mm::fault_in`'s
/// do, and skip the handshake. Checked: no in-place write ever overlaps
/// another thread's lockless read, and no write at all (an RCU write
/// retires what it replaces) overlaps another thread's read made with no
/// grace period. Run with
/// `RUSTFLAGS="--cfg vmscale_shuttle" cargo test -p mm --lib shuttle`.
#[cfg(all(test, vmscale_shuttle))]
mod shuttle_model {
    use super::{Reader, Sharing};
    use shuttle::sync::atomic::{AtomicBool, Ordering};
    use shuttle::sync::RwLock;
    use shuttle::thread;
    use std::sync::Arc;

    struct World {
        mmap_lock: RwLock<()>,
        sharing: Sharing,
        /// Which of the two threads is inside a lockless read.
        reading: [AtomicBool; 2],
        /// Which of the two threads is inside one with no grace period.
        unpinned: [AtomicBool; 2],
    }

    fn worker(w: &World, me: usize, reads_first: bool) {
        let write = || {
            let _g = w.mmap_lock.write().unwrap();
            let alone = w.sharing.writer_alone();
            thread::yield_now();
            assert!(
                !w.unpinned[1 - me].load(Ordering::SeqCst),
                "a write overlapped another thread's read made with no grace period"
            );
            if alone {
                // An in-place write: nobody else may be reading locklessly.
                thread::yield_now();
                assert!(
                    !w.reading[1 - me].load(Ordering::SeqCst),
                    "an in-place write overlapped another thread's lockless read"
                );
            }
        };
        let read = |guarded: bool| {
            if guarded {
                // `Mm::fault_in`: the caller holds a grace period, so an
                // admitted thread reads with neither pin nor handshake.
                if !w.sharing.admitted() {
                    let _g = w.mmap_lock.read().unwrap();
                    w.sharing.admit();
                }
                w.reading[me].store(true, Ordering::SeqCst);
                thread::yield_now();
                w.reading[me].store(false, Ordering::SeqCst);
                return;
            }
            let mut reader = w.sharing.begin_read();
            if let Reader::Unadmitted = reader {
                let _g = w.mmap_lock.read().unwrap();
                w.sharing.admit();
                reader = w.sharing.begin_read();
            }
            assert!(!matches!(reader, Reader::Unadmitted), "admitted, then not");
            w.reading[me].store(true, Ordering::SeqCst);
            let alone = matches!(reader, Reader::Alone(_));
            w.unpinned[me].store(alone, Ordering::SeqCst);
            thread::yield_now();
            w.unpinned[me].store(false, Ordering::SeqCst);
            w.reading[me].store(false, Ordering::SeqCst);
            drop(reader);
        };
        // One read of each kind per thread, in opposite orders on the two
        // threads, so every mix of the two kinds meets in some schedule.
        for round in 0..2 {
            let guarded = (round == 0) == reads_first;
            if reads_first {
                read(guarded);
                write();
            } else {
                write();
                read(guarded);
            }
        }
    }

    fn scenario() {
        let w = Arc::new(World {
            mmap_lock: RwLock::new(()),
            sharing: Sharing::default(),
            reading: [AtomicBool::new(false), AtomicBool::new(false)],
            unpinned: [AtomicBool::new(false), AtomicBool::new(false)],
        });
        let other = {
            let w = Arc::clone(&w);
            thread::spawn(move || worker(&w, 1, true))
        };
        worker(&w, 0, false);
        other.join().unwrap();
    }

    // 30 000 schedules each (about half a second): with half the reads
    // guarded, a claimant read meets a write in roughly one random
    // schedule in 2 000, and 3 000 let `.ci/run`'s `no_handshake` mutant
    // survive one run in four.
    #[test]
    fn shuttle_sharing_mode_switch_random() {
        shuttle::check_random(scenario, 30_000);
    }

    #[test]
    fn shuttle_sharing_mode_switch_pct() {
        shuttle::check_pct(scenario, 30_000, 3);
    }
}

//! The kernel-style reader-writer semaphore behind the `rwsem` and `numa`
//! lock kinds.
//!
//! State: one 32-bit word ([`RawRwSem::state`]):
//!
//! | bits  | meaning                                                   |
//! |-------|-----------------------------------------------------------|
//! | 0     | `WRITER`: held exclusive                                  |
//! | 1     | `WAITERS`: the wait queue is not empty                    |
//! | 2     | `HANDOFF`: a writer has waited too long; no stealing      |
//! | 3..32 | reader count                                              |
//!
//! Protocol (the kernel's `kernel/locking/rwsem.c`, without its owner
//! tracking):
//!
//! - Fast paths, one atomic write of the word: a reader adds one reader
//!   and keeps it if neither `WRITER` nor `WAITERS` nor `HANDOFF` was set,
//!   or takes it back out (the kernel's `rwsem_read_trylock`); a writer
//!   swaps 0 for `WRITER`. A reader's add that is taken back out can make
//!   a writer's swap, or a grant, fail while it is counted: the take-back
//!   then serves the waiters as a last reader's release does.
//! - Slow path, step 1, optimistic spinning: while the lock is held and no
//!   writer has asked for a hand-off, spin a bounded number of rounds and
//!   take the lock the moment it is compatible. Stealing past queued
//!   waiters is allowed then, as in the kernel, with one exception that
//!   keeps a reader stream from starving a queued writer: a reader does
//!   not join other readers while anyone is queued. A userspace lock
//!   cannot see whether its holder is on a CPU, so "the owner runs" is
//!   approximated by "the lock is held and the spin budget is not spent";
//!   the budget (`SPIN_ROUNDS`) is long enough that a running holder
//!   does not send spinners to sleep.
//! - Step 2, sleep: enqueue under the queue mutex, set `WAITERS`, then try
//!   to grant the lock right away (it may have been released before
//!   `WAITERS` was visible: the release saw no waiters and will not wake
//!   anyone), and park.
//! - Release: a writer clears `WRITER`, the last reader drops the count to
//!   0; if `WAITERS` was set, the releasing thread serves the waiter(s)
//!   the [`WaitQueue`] policy picks. Readers are granted the lock: the
//!   releaser adds them to the state word itself, so they own it before
//!   they run. A writer is only woken: it takes the queue mutex and tries
//!   the lock as a running thread would, and if someone running took it
//!   first it sleeps again, still at its place in the queue. Waking
//!   instead of granting keeps the lock busy while the writer is being
//!   scheduled; granting it to a sleeping writer leaves the lock idle for
//!   a whole wake-up at every release, which for short critical sections
//!   makes two threads run at a fraction of one's speed.
//!   The `numa` kind grants writers too, and sets `HANDOFF` as soon as
//!   a writer waits at a queue's front, whenever its policy can pick out
//!   of FIFO order (engaged, with waiters of two nodes or more queued):
//!   its point is that the releaser picks the next holder (by node),
//!   which only a grant enforces. Otherwise its pick is FIFO's and it
//!   serves the queue exactly as `rwsem` does; granting a sleeping writer
//!   when there is nothing to choose would leave the lock idle for a
//!   wake-up at every release (on a one-node machine, always).
//! - Hand-off: a woken writer that still fails after waiting
//!   [`WAIT_TIMEOUT`] (the kernel's `RWSEM_WAIT_TIMEOUT`) sets `HANDOFF`:
//!   from then on nobody steals, readers queue behind it, and the next
//!   release grants the lock to the writer the policy picks. Writers
//!   therefore wait a bounded time however busy the lock is.
//!
//! Ordering: every acquisition ends with an `Acquire` read-modify-write of
//! `state` (fast path, steal, or the granter's CAS followed by the slot's
//! `Release`/`Acquire` state), every release is a `Release`
//! read-modify-write of `state`, so each holder happens-after the previous
//! holder's release.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::numa::{WaitQueue, Want};
use crate::lockstat::{self, LockClass};
use crate::sync::{
    current, current_node, park, AtomicBool, AtomicU32, Mutex, MutexGuard, Ordering, Thread,
};

const WRITER: u32 = 1;
const WAITERS: u32 = 1 << 1;
const HANDOFF: u32 = 1 << 2;
const READER: u32 = 1 << 3;
const READERS: u32 = !(READER - 1);
/// At most this many readers at once; a further reader waits. Only leaked
/// guards could get there, and waiting beats wrapping into the flag bits.
/// Below the count's capacity by [`TRANSIENT_READERS`]: the fast path adds
/// its reader before it looks, so the count can pass the limit by one
/// reader per thread in that path until each takes its add back out.
const MAX_READERS: u32 = (READERS >> 3) - TRANSIENT_READERS;

/// Room above [`MAX_READERS`] for fast-path adds that are taken back out:
/// one per thread, and Linux has at most 2^22 (`PID_MAX_LIMIT`).
const TRANSIENT_READERS: u32 = 1 << 22;

/// Optimistic spin rounds before sleeping: about 0.1 ms here
/// ([`RawRwSem::spin_budget_ns`] measures it).
///
/// The kernel's writer spins for as long as the owner is on a CPU. The
/// budget stands in for that, and it must outlast a holder that releases
/// the lock and takes it again within nanoseconds, as a thread making one
/// `mmap`/`munmap` after another does: the spinner rarely sees that
/// release. With 256 rounds (7 µs) the spinner gave up and slept, and
/// from then on it was woken at a release, found the lock taken again,
/// and slept again, a futex wake-up and sleep per try; two threads of
/// malloc1 or mmap1 on one address space then ran at 0.25–0.54x of one
/// thread, below the kernel's 0.39–0.84x on the same machine
/// (docs/RESULTS.md, "The lab's own sleeps"). Small under the model
/// checker and Miri, where every round is a step to explore or interpret.
#[cfg(not(any(vmscale_shuttle, miri)))]
const SPIN_ROUNDS: u32 = 4096;
#[cfg(any(vmscale_shuttle, miri))]
const SPIN_ROUNDS: u32 = 2;

/// How long a queued writer lets running threads take the lock before it
/// asks for a hand-off (the kernel's `RWSEM_WAIT_TIMEOUT`: 4 ms at
/// `HZ=1000`).
pub(crate) const WAIT_TIMEOUT: Duration = Duration::from_millis(4);

/// Whether a writer queued at `since`, failing its `retries`-th woken
/// attempt now, has waited long enough to ask for a hand-off. Under the
/// model checker and Miri time means nothing: the second failure counts
/// as the timeout, so both the woken and the hand-off paths are explored.
fn timed_out(since: Instant, retries: u32) -> bool {
    if cfg!(any(vmscale_shuttle, miri)) {
        retries >= 2
    } else {
        since.elapsed() >= WAIT_TIMEOUT
    }
}

/// A slot's [`Slot::state`] values.
const WAITING: u32 = 0;
/// A writer woken to try the lock itself.
const WOKEN: u32 = 1;
/// The lock was granted: the waiter holds it.
const GRANTED: u32 = 2;

/// Where a sleeping waiter learns what a release did for it.
pub(crate) struct Slot {
    /// `WAITING`, `WOKEN` or `GRANTED`; changed only under the queue
    /// mutex, and `GRANTED` is final.
    state: AtomicU32,
    /// A writer that has waited past [`WAIT_TIMEOUT`]: the lock is handed
    /// to it (read and written under the queue mutex).
    handoff: AtomicBool,
    thread: Thread,
}

impl Slot {
    /// Whether this waiter asks for the lock to be handed to it.
    pub(crate) fn wants_handoff(&self) -> bool {
        self.handoff.load(Ordering::Relaxed)
    }
}

/// The semaphore without its value; see the module docs for the protocol.
///
/// In this order, so that a semaphore that starts a cache line (as
/// `mmap_lock` does, `mm::MmapLock`) has its state word on a line with
/// only the wait queue, which the fast paths never touch: the class and
/// the `numa` flag, which every fast path reads (the flag also holds the
/// [`Raw`](super::Raw) enum's tag), come a line later. Beside the word
/// they sat on the line the spinner polls, and the holder stalled on them
/// and again on the word at every acquisition and release (docs/RESULTS.md,
/// "The rwsem's word on a line of its own"; the kernel's fast paths
/// touch the word's line once). Other locks keep their size and place.
#[repr(C)]
pub(crate) struct RawRwSem {
    state: AtomicU32,
    queue: Mutex<WaitQueue>,
    class: LockClass,
    numa: bool,
}

/// Where `field` is and how long it is, for the layout's test.
#[cfg(test)]
pub(crate) fn span<T>(field: &T) -> (usize, usize) {
    (std::ptr::from_ref(field) as usize, std::mem::size_of::<T>())
}

fn readers(s: u32) -> u32 {
    s >> 3
}

impl RawRwSem {
    pub(crate) fn new(class: LockClass, numa: bool) -> Self {
        RawRwSem {
            state: AtomicU32::new(0),
            class,
            numa,
            queue: Mutex::new(WaitQueue::new(numa)),
        }
    }

    /// Where the state word is, and where the fields the fast paths read
    /// are (address and size), for the layout's test.
    #[cfg(test)]
    pub(crate) fn layout(&self) -> (usize, [(usize, usize); 2]) {
        (
            std::ptr::from_ref(&self.state) as usize,
            [span(&self.class), span(&self.numa)],
        )
    }

    fn queue(&self) -> MutexGuard<'_, WaitQueue> {
        // Nothing panics while the mutex is held, but stay usable anyway.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take the lock shared, counting the acquisition.
    pub(crate) fn read_lock(&self) {
        if self.try_read_lock() {
            lockstat::acquired(self.class);
            return;
        }
        let since = Instant::now();
        let queued = !self.spin(Want::Read);
        if queued {
            self.sleep(Want::Read);
        }
        lockstat::acquired_after_wait(self.class, since, queued);
    }

    /// Take the lock exclusive, counting the acquisition.
    pub(crate) fn write_lock(&self) {
        if self
            .state
            .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            lockstat::acquired(self.class);
            return;
        }
        let since = Instant::now();
        let queued = !self.spin(Want::Write);
        if queued {
            self.sleep(Want::Write);
        }
        lockstat::acquired_after_wait(self.class, since, queued);
    }

    /// One attempt at the lock as the kernel's reader fast path makes it
    /// (`rwsem_read_trylock`): one atomic add of a reader, kept when the
    /// word it returns shows no writer, waiter or hand-off, and taken back
    /// out otherwise. One write of the word where a compare-and-swap loop
    /// reads it first and writes it second: on a word other CPUs' readers
    /// write too, that read is a transfer of its own (and the swap fails
    /// whenever another reader got in between). Not counted.
    pub(crate) fn try_read_lock(&self) -> bool {
        let prev = self.state.fetch_add(READER, Ordering::Acquire);
        if prev & (WRITER | WAITERS | HANDOFF) == 0 && readers(prev) < MAX_READERS {
            return true;
        }
        // Taken back out as a release: while the add was counted, a
        // release may have found the lock busy and left the waiters queued
        // (a grant needs no readers), and a failed `try_read` has no
        // release of its own to come. (The mutation check of `.ci/run`
        // builds this as a bare subtraction; the lock's shuttle model
        // must then deadlock.)
        if cfg!(vmscale_mutant = "silent_take_back") {
            self.state.fetch_sub(READER, Ordering::Relaxed);
        } else {
            self.read_unlock();
        }
        false
    }

    /// One attempt at the lock exclusive. Not counted.
    pub(crate) fn try_write_lock(&self) -> bool {
        self.state
            .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Take the lock if `want` is compatible with state `s` and no writer
    /// waits for a hand-off; `Err` carries the fresh state on failure.
    fn steal(&self, want: Want, s: u32) -> Result<(), u32> {
        let next = match want {
            // Not beside other readers while anyone is queued: a reader
            // stream would otherwise keep a queued writer out until its
            // timeout (the kernel's reader stealing has the same rule).
            Want::Read
                if s & (WRITER | HANDOFF) == 0
                    && (s & WAITERS == 0 || readers(s) == 0)
                    && readers(s) < MAX_READERS =>
            {
                s + READER
            }
            Want::Write if s & (WRITER | READERS | HANDOFF) == 0 => s | WRITER,
            _ => return Err(s),
        };
        self.state
            .compare_exchange(s, next, Ordering::Acquire, Ordering::Relaxed)
            .map(|_| ())
    }

    /// Optimistic spinning: true if it got the lock.
    fn spin(&self, want: Want) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        for _ in 0..SPIN_ROUNDS {
            match self.steal(want, s) {
                Ok(()) => return true,
                Err(now) => s = now,
            }
            // A writer that waited too long is owed the lock: spinning
            // could only succeed by overtaking it, which HANDOFF forbids.
            if s & HANDOFF != 0 {
                return false;
            }
            std::hint::spin_loop();
            s = self.state.load(Ordering::Relaxed);
        }
        false
    }

    /// Queue up and sleep until the lock is ours: granted by a releaser,
    /// or (a writer) taken after a release woke us.
    fn sleep(&self, want: Want) {
        let slot = Arc::new(Slot {
            state: AtomicU32::new(WAITING),
            handoff: AtomicBool::new(false),
            thread: current(),
        });
        let node = if self.numa { current_node() } else { 0 };
        let since = Instant::now();
        let mut woken = Vec::new();
        {
            let mut q = self.queue();
            q.push(want, node, Arc::clone(&slot));
            let owed = self.numa && q.can_reorder() && q.writer_waiting();
            self.state
                .fetch_or(WAITERS | if owed { HANDOFF } else { 0 }, Ordering::Relaxed);
            // The lock may have been released before WAITERS was set,
            // by a holder that therefore woke nobody: serve it now. The
            // fetch_or above and that release are ordered on `state`, so
            // either this sees the release or the release sees WAITERS.
            self.grant(&mut q, &mut woken);
        }
        wake(woken);
        let mut retries = 0;
        loop {
            match slot.state.load(Ordering::Acquire) {
                GRANTED => return,
                WAITING => {
                    park();
                    continue;
                }
                _ => {}
            }
            // Woken (only writers are): try the lock as a running thread
            // would, under the queue mutex as the kernel's woken writer
            // does, so no grant or wake-up for this slot runs meanwhile.
            let mut woken = Vec::new();
            {
                let mut q = self.queue();
                let s = self.state.load(Ordering::Relaxed);
                if self.steal(Want::Write, s).is_ok() {
                    q.remove(&slot);
                    self.sync_flags(&q);
                    return;
                }
                if slot
                    .state
                    .compare_exchange(WOKEN, WAITING, Ordering::Relaxed, Ordering::Acquire)
                    .is_err()
                {
                    // Granted after all (with HANDOFF set, by a release
                    // that got the mutex first).
                    return;
                }
                retries += 1;
                if timed_out(since, retries) {
                    slot.handoff.store(true, Ordering::Relaxed);
                    self.sync_flags(&q);
                }
                // As on the first sleep: the holder that beat us may have
                // left already, having found nobody to wake.
                self.grant(&mut q, &mut woken);
            }
            wake(woken);
        }
    }

    /// Release a shared hold, or take back a failed fast-path add: the
    /// last reader out serves the waiters, unless a writer holds the lock
    /// (only a taken-back add sees one), whose own release serves them.
    pub(crate) fn read_unlock(&self) {
        let prev = self.state.fetch_sub(READER, Ordering::Release);
        if readers(prev) == 1 && prev & WAITERS != 0 && prev & WRITER == 0 {
            self.wake_waiters();
        }
    }

    /// Release the exclusive hold.
    pub(crate) fn write_unlock(&self) {
        if self
            .state
            .compare_exchange(WRITER, 0, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            let prev = self.state.fetch_and(!WRITER, Ordering::Release);
            if prev & WAITERS != 0 {
                self.wake_waiters();
            }
        }
    }

    fn wake_waiters(&self) {
        let mut woken = Vec::new();
        self.grant(&mut self.queue(), &mut woken);
        wake(woken);
    }

    /// Under the queue mutex: serve the waiter(s) the policy picks if the
    /// lock is compatible with them: grant it to readers, or to a writer
    /// owed a hand-off (or picked out of FIFO order by the `numa` kind);
    /// wake any other writer to try it. Collects the
    /// slots to unpark. Keeps the invariant that `WAITERS`/`HANDOFF`
    /// describe the queue whenever the mutex is free.
    fn grant(&self, q: &mut WaitQueue, woken: &mut Vec<Arc<Slot>>) {
        let node = if self.numa { current_node() } else { 0 };
        let Some(choice) = q.choose(node) else {
            return;
        };
        let mut s = self.state.load(Ordering::Relaxed);
        // (The mutation check of `.ci/run` builds this without the
        // hand-off grant; the lock's shuttle model must then deadlock.)
        let owed = q.handoff_waiting() && !cfg!(vmscale_mutant = "no_handoff");
        // The numa kind enforces a pick that may differ from FIFO's.
        let enforce = owed || (self.numa && q.can_reorder());
        if choice.want == Want::Write && !enforce {
            if let Some(slot) = q.front(choice).filter(|_| s & (WRITER | READERS) == 0) {
                if slot
                    .state
                    .compare_exchange(WAITING, WOKEN, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
                {
                    woken.push(Arc::clone(slot));
                }
            }
            return;
        }
        loop {
            let next = match choice.want {
                Want::Write if s & (WRITER | READERS) == 0 => Some(s | WRITER),
                // Checked: more readers than MAX_READERS wait instead.
                Want::Read if s & WRITER == 0 => u32::try_from(choice.count)
                    .ok()
                    .filter(|&n| readers(s).checked_add(n).is_some_and(|r| r <= MAX_READERS))
                    .map(|n| s + n * READER),
                _ => None,
            };
            let Some(next) = next else {
                return;
            };
            // AcqRel: acquire the previous holder's release on behalf of
            // the grantees (passed on through their slot states).
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        let first = woken.len();
        q.take(choice, node, woken);
        for slot in &woken[first..] {
            slot.state.store(GRANTED, Ordering::Release);
        }
        self.sync_flags(q);
    }

    /// Under the queue mutex: make `WAITERS` and `HANDOFF` say whether
    /// anyone is queued and whether a queued writer is owed the lock (for
    /// the `numa` kind, while its policy can reorder, any writer at a
    /// queue's front is).
    fn sync_flags(&self, q: &WaitQueue) {
        let owed = q.handoff_waiting() || (self.numa && q.can_reorder() && q.writer_waiting());
        let want = if q.len() == 0 { 0 } else { WAITERS } | if owed { HANDOFF } else { 0 };
        let clear = (WAITERS | HANDOFF) & !want;
        if clear != 0 {
            self.state.fetch_and(!clear, Ordering::Relaxed);
        }
        if want != 0 {
            self.state.fetch_or(want, Ordering::Relaxed);
        }
    }

    /// Nanoseconds a spinner spends spinning before it goes to sleep on
    /// this machine: the real spin loop, timed on a lock this thread holds
    /// (so every round fails), the median of 31 timings. What a
    /// simulation of this lock (not the kernel's, which spins while the
    /// owner runs) needs.
    #[cfg(feature = "lab")]
    pub(crate) fn spin_budget_ns() -> f64 {
        let sem = RawRwSem::new(LockClass::IMmap, false);
        sem.write_lock();
        let mut times: Vec<f64> = (0..31)
            .map(|_| {
                let t0 = Instant::now();
                let got = sem.spin(Want::Write);
                debug_assert!(!got, "a held lock was taken by its holder");
                t0.elapsed().as_nanos() as f64
            })
            .collect();
        sem.write_unlock();
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    }

    pub(crate) fn queued_waiters(&self) -> usize {
        self.queue().len()
    }

    pub(crate) fn numa_engaged(&self) -> bool {
        self.queue().engaged()
    }

    pub(crate) fn set_local_handoff_limit(&self, limit: u32) {
        self.queue().set_limit(limit)
    }
}

/// Unpark the waiters whose slots a grant or wake-up changed.
fn wake(woken: Vec<Arc<Slot>>) {
    for slot in woken {
        slot.thread.unpark();
    }
}

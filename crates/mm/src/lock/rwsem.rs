//! The kernel-style reader-writer semaphore behind the `rwsem` and `numa`
//! lock kinds.
//!
//! State: one 32-bit word ([`RawRwSem::state`]):
//!
//! | bits  | meaning                                                   |
//! |-------|-----------------------------------------------------------|
//! | 0     | `WRITER`: held exclusive                                  |
//! | 1     | `WAITERS`: the wait queue is not empty                    |
//! | 2     | `HANDOFF`: a writer waits at a queue front; no stealing   |
//! | 3..32 | reader count                                              |
//!
//! Protocol:
//!
//! - Fast paths, one CAS: a reader adds one reader when neither `WRITER`
//!   nor `WAITERS` nor `HANDOFF` is set (retrying only if another reader
//!   moved the count); a writer swaps 0 for `WRITER`.
//! - Slow path, step 1, optimistic spinning: while the lock is held and no
//!   writer waits for a hand-off, spin a bounded number of rounds and take
//!   the lock the moment it is compatible (stealing past queued waiters is
//!   allowed then; that keeps the lock busy instead of idle while a woken
//!   thread is scheduled). A userspace lock cannot see whether its holder
//!   is on a CPU, so "the owner runs" is approximated by "the lock is held
//!   and the spin budget is not spent".
//! - Step 2, sleep: enqueue under the queue mutex, set `WAITERS` (and
//!   `HANDOFF` if a writer is at a front), then try to grant the lock
//!   right away (it may have been released before `WAITERS` was visible:
//!   the release saw no waiters and will not wake anyone), and park until
//!   granted.
//! - Release: a writer clears `WRITER`, the last reader drops the count to
//!   0; if `WAITERS` was set, the releasing thread grants the lock to the
//!   waiter(s) the [`WaitQueue`] policy picks, by adding them to the state
//!   word itself (direct hand-off: the woken thread owns the lock before
//!   it runs, so nobody can overtake it) and then unparking them.
//!
//! Writer hand-off: readers take the fast path only with `WAITERS` clear
//! and may spin-steal only with `HANDOFF` clear; so once a writer queues,
//! newly arriving readers queue behind it, the readers inside drain, and
//! the last one hands the lock to the writer. A continuous reader stream
//! therefore cannot starve writers.
//!
//! Ordering: every acquisition ends with an `Acquire` read-modify-write of
//! `state` (fast path, steal, or the granter's CAS followed by the slot's
//! `Release`/`Acquire` flag), every release is a `Release`
//! read-modify-write of `state`, so each holder happens-after the previous
//! holder's release.

use std::sync::Arc;
use std::time::Instant;

use super::numa::{WaitQueue, Want};
use crate::lockstat::{self, LockClass};
use crate::sync::{current, park, AtomicBool, AtomicU32, Mutex, MutexGuard, Ordering, Thread};
use crate::topology;

const WRITER: u32 = 1;
const WAITERS: u32 = 1 << 1;
const HANDOFF: u32 = 1 << 2;
const READER: u32 = 1 << 3;
const READERS: u32 = !(READER - 1);
/// At most this many readers at once; a further reader waits. Only leaked
/// guards could get there, and waiting beats wrapping into the flag bits.
const MAX_READERS: u32 = READERS >> 3;

/// Optimistic spin rounds before sleeping. Small under the model checker
/// and Miri, where every round is a step to explore or interpret.
#[cfg(not(any(vmscale_shuttle, miri)))]
const SPIN_ROUNDS: u32 = 256;
#[cfg(any(vmscale_shuttle, miri))]
const SPIN_ROUNDS: u32 = 2;

/// Where a sleeping waiter learns it has been granted the lock.
pub(crate) struct Slot {
    granted: AtomicBool,
    thread: Thread,
}

/// The semaphore without its value; see the module docs for the protocol.
pub(crate) struct RawRwSem {
    state: AtomicU32,
    class: LockClass,
    numa: bool,
    queue: Mutex<WaitQueue>,
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

    fn queue(&self) -> MutexGuard<'_, WaitQueue> {
        // Nothing panics while the mutex is held, but stay usable anyway.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take the lock shared, counting the acquisition.
    pub(crate) fn read_lock(&self) {
        // A CAS lost to another reader is no contention: retry at once.
        if self.try_read_lock() {
            lockstat::acquired(self.class);
            return;
        }
        let since = Instant::now();
        if !self.spin(Want::Read) {
            self.sleep(Want::Read);
        }
        lockstat::acquired_after_wait(self.class, since);
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
        if !self.spin(Want::Write) {
            self.sleep(Want::Write);
        }
        lockstat::acquired_after_wait(self.class, since);
    }

    /// One attempt at the lock as the fast path would take it (readers
    /// retry only while other readers move the count). Not counted.
    pub(crate) fn try_read_lock(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        while s & (WRITER | WAITERS | HANDOFF) == 0 && readers(s) < MAX_READERS {
            match self.state.compare_exchange_weak(
                s,
                s + READER,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
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
            Want::Read if s & (WRITER | HANDOFF) == 0 && readers(s) < MAX_READERS => s + READER,
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
            // A queued writer is owed the lock: spinning could only
            // succeed by overtaking it, which HANDOFF forbids.
            if s & HANDOFF != 0 {
                return false;
            }
            std::hint::spin_loop();
            s = self.state.load(Ordering::Relaxed);
        }
        false
    }

    /// Queue up and sleep until granted the lock.
    fn sleep(&self, want: Want) {
        let slot = Arc::new(Slot {
            granted: AtomicBool::new(false),
            thread: current(),
        });
        let node = if self.numa {
            topology::current_node()
        } else {
            0
        };
        let mut woken = Vec::new();
        {
            let mut q = self.queue();
            q.push(want, node, Arc::clone(&slot));
            let bits = WAITERS | if q.writer_waiting() { HANDOFF } else { 0 };
            self.state.fetch_or(bits, Ordering::Relaxed);
            // The lock may have been released before WAITERS was set,
            // by a holder that therefore woke nobody: grant it now. The
            // fetch_or above and that release are ordered on `state`, so
            // either this sees the release or the release sees WAITERS.
            self.grant(&mut q, &mut woken);
        }
        wake(woken);
        while !slot.granted.load(Ordering::Acquire) {
            park();
        }
    }

    /// Release a shared hold.
    pub(crate) fn read_unlock(&self) {
        let prev = self.state.fetch_sub(READER, Ordering::Release);
        if readers(prev) == 1 && prev & WAITERS != 0 {
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

    /// Under the queue mutex: if the lock is compatible with the waiter(s)
    /// the policy picks, make them its holders and collect their slots.
    /// Keeps the invariant that `WAITERS`/`HANDOFF` describe the queue
    /// whenever the mutex is free.
    fn grant(&self, q: &mut WaitQueue, woken: &mut Vec<Arc<Slot>>) {
        let node = if self.numa {
            topology::current_node()
        } else {
            0
        };
        let Some(choice) = q.choose(node) else {
            return;
        };
        let mut s = self.state.load(Ordering::Relaxed);
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
            // the grantees (passed on through their slot flags).
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        q.take(choice, node, woken);
        let want =
            if q.len() == 0 { 0 } else { WAITERS } | if q.writer_waiting() { HANDOFF } else { 0 };
        let clear = (WAITERS | HANDOFF) & !want;
        if clear != 0 {
            self.state.fetch_and(!clear, Ordering::Relaxed);
        }
        if want != 0 {
            self.state.fetch_or(want, Ordering::Relaxed);
        }
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

/// Tell granted waiters they own the lock.
fn wake(woken: Vec<Arc<Slot>>) {
    for slot in woken {
        slot.granted.store(true, Ordering::Release);
        slot.thread.unpark();
    }
}

//! Reader-writer locks for the reverse maps, in three kinds compared by the
//! benchmarks ([`LockKind`]):
//!
//! - `std`: the standard library's `RwLock`, the baseline;
//! - `rwsem`: a kernel-style reader-writer semaphore (`lock/rwsem.rs` has the
//!   protocol): one atomic word, a one-CAS fast path, bounded optimistic
//!   spinning, then a FIFO sleeping queue; a release grants the lock to
//!   the readers at the front in a batch, or wakes the writer there to
//!   compete for it, and a writer that has waited 4 ms is handed it, so
//!   neither readers nor writers starve it;
//! - `numa`: the same semaphore whose waiters queue per NUMA node once the
//!   lock is contended, and which hands the lock (writers included) to a
//!   waiter on the releasing holder's node first, at most
//!   [`MAX_LOCAL_HANDOFFS`] times in a row, whenever waiters of more than
//!   one node are queued ([`numa`] has the policy); with one node's
//!   waiters it serves them as `rwsem` does.
//!
//! Every kind counts its acquisitions, waits and failed try-locks in
//! [`lockstat`] under the lock's class.
//!
//! ```
//! use mm::lock::{LockKind, RwSem};
//! use mm::lockstat::LockClass;
//!
//! for kind in LockKind::ALL {
//!     let sem = RwSem::new(kind, LockClass::IMmap, 0u64);
//!     std::thread::scope(|s| {
//!         for _ in 0..2 {
//!             s.spawn(|| for _ in 0..1000 { *sem.write() += 1 });
//!         }
//!     });
//!     assert_eq!(*sem.read(), 2000);
//! }
//! ```

mod cell;
pub mod numa;
mod rwsem;
#[cfg(all(test, vmscale_shuttle))]
mod shuttle_model;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use crate::lockstat::{self, LockClass};
use crate::profile;
use std::sync::{LockResult, TryLockError, TryLockResult};

use crate::sync::RwLock;

pub use cell::{ReadGuard, WriteGuard};

/// Nanoseconds the lab's rwsem spins before it sleeps, measured on this
/// machine (its fixed spin rounds, timed). A userspace lock cannot see
/// whether its owner runs, so unlike the kernel's rwsem it spins a fixed
/// budget; `vmbench project --validate` simulates that budget to predict
/// the lock the lab runs.
///
/// ```
/// assert!(mm::lock::spin_budget_ns() > 0.0);
/// ```
#[cfg(feature = "lab")]
pub fn spin_budget_ns() -> f64 {
    RawRwSem::spin_budget_ns()
}
#[cfg(feature = "lab")]
pub use numa::MAX_LOCAL_HANDOFFS;
use rwsem::RawRwSem;

/// Which implementation a reader-writer lock of the reverse maps uses.
///
/// ```
/// use mm::lock::LockKind;
/// assert_eq!("numa".parse::<LockKind>(), Ok(LockKind::Numa));
/// assert_eq!(LockKind::default().to_string(), "rwsem");
/// assert!("spin".parse::<LockKind>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LockKind {
    /// `std::sync::RwLock`, the baseline.
    Std,
    /// The kernel-style reader-writer semaphore.
    #[default]
    Rwsem,
    /// The semaphore with NUMA-aware hand-off.
    Numa,
}

impl LockKind {
    /// Every kind, in report order.
    pub const ALL: [LockKind; 3] = [LockKind::Std, LockKind::Rwsem, LockKind::Numa];

    /// The kind's name on command lines and in reports: `"std"`, `"rwsem"`,
    /// `"numa"`.
    ///
    /// ```
    /// assert_eq!(mm::lock::LockKind::Numa.name(), "numa");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Std => "std",
            LockKind::Rwsem => "rwsem",
            LockKind::Numa => "numa",
        }
    }
}

impl FromStr for LockKind {
    type Err = String;

    fn from_str(s: &str) -> Result<LockKind, String> {
        LockKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("lock kind {s:?}: expected one of std, rwsem, numa"))
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The lock proper, without the value.
pub(crate) enum Raw {
    Std(RwLock<()>),
    Sem(RawRwSem),
}

impl Drop for Raw {
    fn drop(&mut self) {
        // The lock's address may serve another lock from now on.
        profile::gone(std::ptr::from_ref(self) as usize as u64);
    }
}

/// A reader-writer lock of a chosen [`LockKind`], counted in
/// [`lockstat`] under its [`LockClass`].
///
/// Like `std::sync::RwLock` it is `Send`/`Sync` when `T` is (`Sync` needs
/// `T: Send + Sync`), but it has no poisoning: a holder that panics just
/// releases the lock.
///
/// ```
/// use mm::lock::{LockKind, RwSem};
/// use mm::lockstat::{self, LockClass};
///
/// let before = lockstat::snapshot();
/// let sem = RwSem::new(LockKind::Rwsem, LockClass::AnonVma, String::from("a"));
/// sem.write().push('b');
/// let r = sem.read();
/// assert!(sem.try_write().is_none()); // a reader is inside
/// assert_eq!(*r, "ab");
/// drop(r);
/// let used = lockstat::snapshot().since(&before).class(LockClass::AnonVma);
/// assert!(used.acquisitions >= 2 && used.contended >= 1);
/// ```
// `raw` first, so that a lock aligned to a line starts its line with the
// state word (see `rwsem::RawRwSem`).
#[repr(C)]
pub struct RwSem<T> {
    raw: Raw,
    kind: LockKind,
    class: LockClass,
    /// One i_mmap group's lock (for the profile recorder, `mm::profile`).
    group: bool,
    /// The profile recorder's name for a lock made while a thread records
    /// (0 otherwise): such a lock may move (an address space is a value),
    /// so its address does not name it. 32 bits, beside the three bytes
    /// above, so that the field takes no room of its own.
    id: u32,
    cell: cell::LockCell<T>,
}

/// The `std` kind's blocking acquisition, counted: a try first tells an
/// acquisition that did not wait from one that did. A poisoned lock is
/// taken all the same (a panicking holder just releases, as with the
/// other kinds).
fn std_acquire<G>(
    class: LockClass,
    try_lock: impl FnOnce() -> TryLockResult<G>,
    lock: impl FnOnce() -> LockResult<G>,
) -> G {
    match try_lock() {
        Ok(g) => {
            lockstat::acquired(class);
            g
        }
        Err(TryLockError::Poisoned(p)) => {
            lockstat::acquired(class);
            p.into_inner()
        }
        Err(TryLockError::WouldBlock) => {
            let since = Instant::now();
            let g = lock().unwrap_or_else(|p| p.into_inner());
            // std does not say whether it slept.
            lockstat::acquired_after_wait(class, since, false);
            g
        }
    }
}

impl<T> RwSem<T> {
    /// A lock of `kind`, counted under `class`, holding `value`.
    ///
    /// ```
    /// use mm::lock::{LockKind, RwSem};
    /// let sem = RwSem::new(LockKind::Std, mm::lockstat::LockClass::IMmap, 7);
    /// assert_eq!(sem.kind(), LockKind::Std);
    /// assert_eq!(sem.into_inner(), 7);
    /// ```
    pub fn new(kind: LockKind, class: LockClass, value: T) -> Self {
        let raw = match kind {
            LockKind::Std => Raw::Std(RwLock::new(())),
            LockKind::Rwsem => Raw::Sem(RawRwSem::new(class, false)),
            LockKind::Numa => Raw::Sem(RawRwSem::new(class, true)),
        };
        RwSem {
            kind,
            class,
            group: false,
            id: profile::new_id(),
            raw,
            cell: cell::LockCell::new(value),
        }
    }

    /// Mark this lock as one i_mmap group's lock, as opposed to a lock of
    /// the whole file: what the profile recorder reports (`mm::profile`).
    pub(crate) fn mark_group(&mut self) {
        self.group = true;
    }

    /// The lock's identity for the profile recorder: the address of the
    /// lock proper (whose drop the recorder hears of).
    #[inline]
    pub(crate) fn addr(&self) -> usize {
        std::ptr::from_ref(&self.raw) as usize
    }

    /// The name the profile recorder knows the lock by.
    #[inline]
    pub(crate) fn key(&self) -> u64 {
        if self.id != 0 {
            profile::named(self.id)
        } else {
            self.addr() as u64
        }
    }

    /// Tell the profile recorder of an acquisition; whether it records,
    /// which the guard keeps so that its release asks nothing again.
    #[inline]
    fn record(&self, write: bool) -> bool {
        profile::acquired(self.class, || self.key(), write, self.group)
    }

    /// The lock's kind.
    ///
    /// ```
    /// use mm::lock::{LockKind, RwSem};
    /// let sem = RwSem::new(LockKind::Numa, mm::lockstat::LockClass::IMmap, ());
    /// assert_eq!(sem.kind(), LockKind::Numa);
    /// ```
    pub fn kind(&self) -> LockKind {
        self.kind
    }

    /// Take the lock shared, waiting as long as needed.
    ///
    /// ```
    /// use mm::lock::{LockKind, RwSem};
    /// let sem = RwSem::new(LockKind::Rwsem, mm::lockstat::LockClass::IMmap, 3);
    /// assert_eq!(*sem.read(), 3);
    /// ```
    pub fn read(&self) -> ReadGuard<'_, T> {
        match &self.raw {
            Raw::Std(l) => {
                let g = std_acquire(self.class, || l.try_read(), || l.read());
                ReadGuard::new(self, Some(g), self.record(false))
            }
            Raw::Sem(s) => {
                s.read_lock();
                ReadGuard::new(self, None, self.record(false))
            }
        }
    }

    /// Take the lock exclusive, waiting as long as needed.
    ///
    /// ```
    /// use mm::lock::{LockKind, RwSem};
    /// let sem = RwSem::new(LockKind::Rwsem, mm::lockstat::LockClass::IMmap, 3);
    /// *sem.write() *= 2;
    /// assert_eq!(*sem.read(), 6);
    /// ```
    pub fn write(&self) -> WriteGuard<'_, T> {
        match &self.raw {
            Raw::Std(l) => {
                let g = std_acquire(self.class, || l.try_write(), || l.write());
                WriteGuard::new(self, Some(g), self.record(true))
            }
            Raw::Sem(s) => {
                s.write_lock();
                WriteGuard::new(self, None, self.record(true))
            }
        }
    }

    /// Take the lock shared if that can be done without waiting.
    ///
    /// ```
    /// use mm::lock::{LockKind, RwSem};
    /// let sem = RwSem::new(LockKind::Numa, mm::lockstat::LockClass::IMmap, 3);
    /// let w = sem.write();
    /// assert!(sem.try_read().is_none());
    /// drop(w);
    /// assert!(sem.try_read().is_some());
    /// ```
    pub fn try_read(&self) -> Option<ReadGuard<'_, T>> {
        let got = match &self.raw {
            Raw::Std(l) => match l.try_read() {
                Ok(g) => Some(Some(g)),
                Err(TryLockError::Poisoned(p)) => Some(Some(p.into_inner())),
                Err(TryLockError::WouldBlock) => None,
            },
            Raw::Sem(s) => s.try_read_lock().then_some(None),
        };
        match got {
            Some(std) => {
                lockstat::acquired(self.class);
                Some(ReadGuard::new(self, std, self.record(false)))
            }
            None => {
                lockstat::try_failed(self.class);
                None
            }
        }
    }

    /// Take the lock exclusive if that can be done without waiting.
    ///
    /// ```
    /// use mm::lock::{LockKind, RwSem};
    /// let sem = RwSem::new(LockKind::Std, mm::lockstat::LockClass::IMmap, 3);
    /// let r = sem.read();
    /// assert!(sem.try_write().is_none());
    /// drop(r);
    /// assert!(sem.try_write().is_some());
    /// ```
    pub fn try_write(&self) -> Option<WriteGuard<'_, T>> {
        let got = match &self.raw {
            Raw::Std(l) => match l.try_write() {
                Ok(g) => Some(Some(g)),
                Err(TryLockError::Poisoned(p)) => Some(Some(p.into_inner())),
                Err(TryLockError::WouldBlock) => None,
            },
            Raw::Sem(s) => s.try_write_lock().then_some(None),
        };
        match got {
            Some(std) => {
                lockstat::acquired(self.class);
                Some(WriteGuard::new(self, std, self.record(true)))
            }
            None => {
                lockstat::try_failed(self.class);
                None
            }
        }
    }

    /// The value, through exclusive access to the lock itself (no locking).
    ///
    /// ```
    /// use mm::lock::{LockKind, RwSem};
    /// let mut sem = RwSem::new(LockKind::Rwsem, mm::lockstat::LockClass::IMmap, 1);
    /// *sem.get_mut() = 5;
    /// assert_eq!(*sem.read(), 5);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.cell.get_mut()
    }

    /// Consume the lock and return the value.
    ///
    /// ```
    /// use mm::lock::{LockKind, RwSem};
    /// let sem = RwSem::new(LockKind::Numa, mm::lockstat::LockClass::IMmap, vec![1]);
    /// assert_eq!(sem.into_inner(), vec![1]);
    /// ```
    pub fn into_inner(self) -> T {
        self.cell.into_inner()
    }

    /// How many threads are queued asleep on the lock (always 0 for the
    /// `std` kind, whose queue is not visible). For tests that must know
    /// a thread has gone to sleep before they go on.
    #[doc(hidden)]
    pub fn queued_waiters(&self) -> usize {
        match &self.raw {
            Raw::Std(_) => 0,
            Raw::Sem(s) => s.queued_waiters(),
        }
    }

    /// Whether the `numa` kind's per-node queueing is engaged now.
    #[doc(hidden)]
    pub fn numa_engaged(&self) -> bool {
        match &self.raw {
            Raw::Std(_) => false,
            Raw::Sem(s) => s.numa_engaged(),
        }
    }

    /// Change this lock's bound on consecutive local hand-offs (default
    /// [`MAX_LOCAL_HANDOFFS`]), so a test can reach it with few threads.
    #[doc(hidden)]
    pub fn set_local_handoff_limit(&self, limit: u32) {
        if let Raw::Sem(s) = &self.raw {
            s.set_local_handoff_limit(limit)
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for RwSem<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwSem");
        d.field("kind", &self.kind).field("class", &self.class);
        // Peek without waiting and without counting: a Debug print must
        // not block on, or show up in the statistics of, the lock it shows.
        let guard = match &self.raw {
            // Not recorded, its release neither.
            Raw::Std(l) => l
                .try_read()
                .ok()
                .map(|g| ReadGuard::new(self, Some(g), false)),
            Raw::Sem(s) => s.try_read_lock().then(|| ReadGuard::new(self, None, false)),
        };
        match guard {
            Some(g) => d.field("data", &&*g),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

//! The lock's storage and its guards: the one place where the locks use
//! `unsafe`.
//!
//! Invariant, kept by `lock/mod.rs`: a [`ReadGuard`] is built only right
//! after its [`RwSem`] was acquired shared, a [`WriteGuard`] only right
//! after it was acquired exclusive, and each guard releases exactly that
//! acquisition when dropped (and nothing else releases it). Every `unsafe`
//! block below relies on this and nothing more.

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};

use super::{Raw, RwSem};
use crate::sync::{RwLockReadGuard, RwLockWriteGuard};

/// The protected value.
pub(super) struct LockCell<T> {
    value: UnsafeCell<T>,
}

// SAFETY: the cell hands out `&T` to several threads at once (readers) and
// `&mut T` to one thread at a time (the writer), so sharing it needs
// `T: Sync` for the former and `T: Send` for the latter, like std's RwLock.
unsafe impl<T: Send + Sync> Sync for LockCell<T> {}

impl<T> LockCell<T> {
    pub(super) fn new(value: T) -> Self {
        LockCell {
            value: UnsafeCell::new(value),
        }
    }

    /// Exclusive access through `&mut self`: the borrow checker proves
    /// there is no guard.
    pub(super) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    pub(super) fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

/// Shared access to the value of a [`RwSem`]; releases the read lock when
/// dropped (also when unwinding: the lock has no poisoning).
///
/// ```
/// use mm::lock::{LockKind, RwSem};
/// use mm::lockstat::LockClass;
/// let sem = RwSem::new(LockKind::Rwsem, LockClass::IMmap, vec![1, 2]);
/// let a = sem.read();
/// let b = sem.read(); // readers share
/// assert_eq!(a.len() + b.len(), 4);
/// ```
pub struct ReadGuard<'a, T> {
    sem: &'a RwSem<T>,
    /// The std lock's guard for the `Std` kind: dropping it releases.
    _std: Option<RwLockReadGuard<'a, ()>>,
    /// Whether the profile recorder recorded the acquisition (and so
    /// wants the release).
    recorded: bool,
}

/// Exclusive access to the value of a [`RwSem`]; releases the write lock
/// when dropped (also when unwinding: the lock has no poisoning).
///
/// ```
/// use mm::lock::{LockKind, RwSem};
/// use mm::lockstat::LockClass;
/// let sem = RwSem::new(LockKind::Numa, LockClass::IMmap, 1);
/// *sem.write() += 1;
/// assert!(sem.try_read().is_some_and(|v| *v == 2));
/// ```
pub struct WriteGuard<'a, T> {
    sem: &'a RwSem<T>,
    _std: Option<RwLockWriteGuard<'a, ()>>,
    recorded: bool,
}

impl<'a, T> ReadGuard<'a, T> {
    /// Only for `RwSem`, right after a shared acquisition (module invariant).
    pub(super) fn new(
        sem: &'a RwSem<T>,
        std: Option<RwLockReadGuard<'a, ()>>,
        recorded: bool,
    ) -> Self {
        ReadGuard {
            sem,
            _std: std,
            recorded,
        }
    }
}

impl<'a, T> WriteGuard<'a, T> {
    /// Only for `RwSem`, right after an exclusive acquisition (module
    /// invariant).
    pub(super) fn new(
        sem: &'a RwSem<T>,
        std: Option<RwLockWriteGuard<'a, ()>>,
        recorded: bool,
    ) -> Self {
        WriteGuard {
            sem,
            _std: std,
            recorded,
        }
    }
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock shared (module invariant) for as
        // long as the returned borrow of `self` lives, so no `&mut T`
        // exists meanwhile: a WriteGuard needs the lock exclusive.
        unsafe { &*self.sem.cell.value.get() }
    }
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock exclusive (module invariant),
        // so the only references to the value come from this guard, and
        // `&self` rules out a live `&mut T` from it.
        unsafe { &*self.sem.cell.value.get() }
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock exclusive (module invariant) and
        // `&mut self` makes this the only borrow through it, so the
        // returned reference is unique for its lifetime.
        unsafe { &mut *self.sem.cell.value.get() }
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        if self.recorded {
            crate::profile::released(self.sem.key());
        }
        // The std kind releases when its own guard (a field) drops.
        if let Raw::Sem(raw) = &self.sem.raw {
            raw.read_unlock();
        }
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        if self.recorded {
            crate::profile::released(self.sem.key());
        }
        if let Raw::Sem(raw) = &self.sem.raw {
            raw.write_unlock();
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for ReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: fmt::Debug> fmt::Debug for WriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

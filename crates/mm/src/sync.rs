//! The synchronisation primitives the lock protocols use: std's, or
//! shuttle's when the crate is built for the concurrency model
//! (`--cfg vmscale_shuttle`), so the model tests explore the real code's
//! interleavings.

#[cfg(vmscale_shuttle)]
pub(crate) use shuttle::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(vmscale_shuttle)]
pub(crate) use shuttle::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(vmscale_shuttle)]
pub(crate) use shuttle::thread::{current, park, Thread};

#[cfg(not(vmscale_shuttle))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(vmscale_shuttle))]
pub(crate) use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(not(vmscale_shuttle))]
pub(crate) use std::thread::{current, park, Thread};

/// Let another thread run while waiting (a model-checker scheduling point
/// under shuttle).
pub(crate) fn yield_now() {
    #[cfg(vmscale_shuttle)]
    shuttle::thread::yield_now();
    #[cfg(not(vmscale_shuttle))]
    std::thread::yield_now();
}

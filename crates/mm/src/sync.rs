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

/// The NUMA node the calling thread runs on, for the `numa` lock kind:
/// [`topology::current_node`](crate::topology::current_node), or under
/// the model a node each model thread sets with `set_node` (default 0),
/// since model threads share one OS thread and its thread-locals.
pub(crate) fn current_node() -> usize {
    #[cfg(vmscale_shuttle)]
    {
        MODEL_NODE.with(|n| n.get())
    }
    #[cfg(not(vmscale_shuttle))]
    {
        crate::topology::current_node()
    }
}

#[cfg(vmscale_shuttle)]
shuttle::thread_local! {
    static MODEL_NODE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Under the model: the node [`current_node`] reports for this model
/// thread from now on.
#[cfg(all(vmscale_shuttle, test))]
pub(crate) fn set_node(node: usize) {
    MODEL_NODE.with(|n| n.set(node));
}

//! The concurrency primitives the tree is built from, in one place.
//!
//! Normal builds use `std` atomics and crossbeam-epoch for grace periods.
//! Under `--cfg vmscale_shuttle` the same names resolve to shuttle's
//! schedule-exploring atomics and lock, and reclamation becomes "never free
//! until the process ends", so the model test explores the publish /
//! dead-node / restart protocol of the real code without an epoch collector
//! that shuttle cannot see.

#[cfg(not(vmscale_shuttle))]
pub(crate) use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(vmscale_shuttle))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(vmscale_shuttle)]
pub(crate) use shuttle::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
#[cfg(vmscale_shuttle)]
pub(crate) use shuttle::sync::{Mutex, MutexGuard};

/// A grace period of the trees' collector, from [`pin`]: while it lives,
/// nothing a reader reached through any tree is freed.
///
/// A guard of some other crossbeam collector would not hold back the
/// trees' frees, so the reads take this type, which only [`pin`] (and the
/// unsafe [`unprotected`]) make: the compiler, not a comment, keeps a read
/// inside a grace period that protects it.
#[cfg(not(vmscale_shuttle))]
#[derive(Debug)]
#[repr(transparent)]
pub struct Guard(crossbeam_epoch::Guard);

#[cfg(not(vmscale_shuttle))]
impl Guard {
    /// Announces a quiescent state: this thread holds nothing it read
    /// under the guard, so grace periods may move past it; the guard stays
    /// pinned (cheaper than dropping it and pinning again).
    ///
    /// ```
    /// let mut tree = maple::MapleTree::new();
    /// tree.store_range(0..=9, 1).unwrap();
    /// let mut guard = maple::pin();
    /// for _ in 0..3 {
    ///     assert_eq!(tree.load(5, &guard), Some(&1));
    ///     guard.repin(); // the reference above is no longer used
    /// }
    /// ```
    pub fn repin(&mut self) {
        self.0.repin()
    }

    /// Moves this thread's deferred frees to the collector and runs those
    /// whose grace period has passed, asking for twice as many as this
    /// thread retired since its last flush, so that a thread that holds a
    /// guard for long lets memory go as fast as its writes retire it.
    ///
    /// ```
    /// let tree = maple::MapleTree::new();
    /// let mut guard = maple::pin();
    /// for i in 0..10_000u64 {
    ///     tree.write().store_range(0..=9, i).unwrap(); // retires the old value
    ///     if i % 1000 == 999 {
    ///         guard.repin();
    ///         guard.flush();
    ///     }
    /// }
    /// ```
    pub fn flush(&self) {
        drain(&self.0);
    }
}

/// How many deferred frees one of the collector's collections runs at
/// most: crossbeam-epoch 0.9 seals deferred calls in bags of 64 and
/// collects at most 8 bags a call (`Global::COLLECT_STEPS`), expired or
/// not. Its own collections come at every 128th pin that is not nested in
/// another, about 4 frees a pin: enough for a thread that pins for each
/// operation (a tree write retires a value and a few nodes). A thread that
/// holds one guard across many writes and flushes now and then gets none
/// of those, and one collection a flush left garbage behind faster than
/// it was freed, without bound: the lab's two `malloc1` threads grew by
/// 150 MB a second that way (docs/RESULTS.md, "Garbage that outran its
/// collector"). The figure only sets how often [`drain`] asks; a wrong
/// one costs speed, never safety.
#[cfg(not(vmscale_shuttle))]
const FREES_PER_COLLECT: usize = 8 * 64;

// This thread's deferred frees since it last drained (see `drain`):
// every thread asks the collector for at least as many frees as it
// retires, so together they free what they retire once grace periods
// pass, whichever thread's bags the collector takes.
#[cfg(not(vmscale_shuttle))]
thread_local! {
    static RETIRED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Flushes `guard`'s thread-local bag to the collector and collects
/// twice for each [`FREES_PER_COLLECT`] this thread retired since it last
/// did, and twice more: every flush seals a bag that is only partly full,
/// so a collection's bags may hold fewer frees than the figure, and
/// asking for just as many left a backlog growing by 60 values a flush in
/// `tests/reclaim_pace.rs`. A collection stops at the first bag whose grace
/// period has not passed, so the extra ones cost an epoch check each.
#[cfg(not(vmscale_shuttle))]
fn drain(guard: &crossbeam_epoch::Guard) {
    let retired = RETIRED.try_with(|r| r.replace(0)).unwrap_or(0);
    for _ in 0..2 * (retired / FREES_PER_COLLECT + 1) {
        guard.flush();
    }
}

/// Pins the current thread for a grace period.
///
/// While the returned [`Guard`] lives, no node or value that a reader could
/// have reached through the tree is freed. References returned by the
/// tree's read methods borrow the guard, so they cannot outlive it.
///
/// ```
/// let mut tree = maple::MapleTree::new();
/// tree.store_range(10..=19, "ten").unwrap();
/// let guard = maple::pin();
/// assert_eq!(tree.load(15, &guard), Some(&"ten"));
/// ```
#[cfg(not(vmscale_shuttle))]
pub fn pin() -> Guard {
    Guard(crossbeam_epoch::pin())
}

/// Called by a reader before it reads again after meeting a leaf in
/// change: a spin hint, or under shuttle a yield, so the model's scheduler
/// lets the writer finish (a reader spinning on a leaf is only fair to
/// the writer if the scheduler knows it is waiting).
#[inline]
pub(crate) fn retry_pause() {
    #[cfg(vmscale_shuttle)]
    shuttle::thread::yield_now();
    #[cfg(not(vmscale_shuttle))]
    std::hint::spin_loop();
}

/// A guard that pins nothing, for readers that exclude every writer of
/// the tree by a lock of their own (as the kernel reads its maple tree
/// under `mmap_lock` without `rcu_read_lock`): no grace period is needed
/// when no write can run, and taking none saves a fence per read.
///
/// # Safety
/// While references read under this guard are in use, no write to the tree
/// runs on any thread (nothing the reads reach may be freed or changed).
///
/// ```
/// let mut tree = maple::MapleTree::new();
/// tree.store_range(1..=9, 'a').unwrap();
/// // SAFETY: `tree` is only written through `&mut`, which this shared
/// // borrow excludes while `v` lives.
/// let v = tree.load(5, unsafe { maple::unprotected() });
/// assert_eq!(v, Some(&'a'));
/// ```
#[cfg(not(vmscale_shuttle))]
pub unsafe fn unprotected() -> &'static Guard {
    // SAFETY: per the contract, nothing is freed while the guard is used;
    // the tree never defers through a reader's guard.
    let inner: &'static crossbeam_epoch::Guard = unsafe { crossbeam_epoch::unprotected() };
    // SAFETY: `Guard` is a `repr(transparent)` wrapper of crossbeam's.
    unsafe { &*(inner as *const crossbeam_epoch::Guard).cast::<Guard>() }
}

/// Runs `f` once no thread can still hold a reference obtained before this
/// call: after a grace period.
///
/// # Safety
/// `f` must only free memory that has already been unlinked from the tree,
/// and must be safe to run on any thread.
#[cfg(not(vmscale_shuttle))]
pub(crate) unsafe fn defer<F: FnOnce()>(guard: &Guard, f: F) {
    // SAFETY: the caller guarantees `f` touches only unlinked memory and is
    // sendable in spirit (it frees nodes and drops `T: Send + Sync + 'static`
    // values); crossbeam runs it after every pinned thread has moved on.
    unsafe { guard.0.defer_unchecked(f) };
    let _ = RETIRED.try_with(|r| r.set(r.get() + 1));
}

/// Shuttle stand-in for a grace-period guard: it does nothing, because in
/// this configuration nothing is ever freed while the process runs.
#[cfg(vmscale_shuttle)]
pub struct Guard(());

#[cfg(vmscale_shuttle)]
impl Guard {
    /// Shuttle stand-in: nothing to announce.
    pub fn repin(&mut self) {}
    /// Shuttle stand-in: nothing to free.
    pub fn flush(&self) {}
}

/// Shuttle stand-in for [`crossbeam_epoch::pin`].
#[cfg(vmscale_shuttle)]
pub fn pin() -> Guard {
    Guard(())
}

/// Shuttle stand-in for [`unprotected`](crate::unprotected).
///
/// # Safety
/// As for the real one.
#[cfg(vmscale_shuttle)]
pub unsafe fn unprotected() -> &'static Guard {
    static NONE: Guard = Guard(());
    &NONE
}

/// Shuttle stand-in: leaks instead of freeing, which is trivially safe.
#[cfg(vmscale_shuttle)]
pub(crate) unsafe fn defer<F: FnOnce()>(_guard: &Guard, f: F) {
    core::mem::forget(f);
}

/// Proof that a [`Guard`] is pinned for `'g`, for readers that keep a walk
/// between calls (cursors, iterators): what `&'g Guard` proves, but `Copy`
/// and as free to move between threads as the references read under it
/// (the pin protects every thread's reads; `&Guard` itself is not `Send`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pinned<'g>(std::marker::PhantomData<fn() -> &'g Guard>);

impl<'g> Pinned<'g> {
    #[inline]
    pub(crate) fn of(_guard: &'g Guard) -> Self {
        Pinned(std::marker::PhantomData)
    }
}

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

    /// Moves this thread's deferred frees to the collector, has it run
    /// the deferred calls whose grace period has passed (twice as many as
    /// this thread handed it since its last flush, so that a thread that
    /// holds a guard for long lets memory go as fast as its writes retire
    /// it), and frees what came back to this thread: memory is freed by
    /// the thread whose write retired it, right after a write made with
    /// no guard held, otherwise at its next flush (or, for a thread that
    /// flushes too rarely, at a write).
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

/// How many deferred calls (here, batches of frees) one of the
/// collector's collections runs at most: crossbeam-epoch 0.9 seals
/// deferred calls in bags of 64 and
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

/// One deferred free: the function that frees, and what it frees.
#[cfg(not(vmscale_shuttle))]
type Free = (unsafe fn(*mut u8), *mut u8);

/// How many frees a thread gathers before it hands them to the collector
/// as one deferred call ([`Batch`]): the call, and crossbeam-epoch's
/// bookkeeping of it, is paid once per this many frees.
#[cfg(not(vmscale_shuttle))]
const BATCH: usize = 64;

/// How many batches may wait for their thread before a write made under
/// a held guard frees them. Such a thread frees its batches at
/// [`Guard::flush`], outside its callers' locks (the lab flushes between
/// operations, as the kernel's RCU callbacks run outside the sections
/// that queued them), where its writes run inside them (a VMA index's
/// writes hold `mmap_lock`); so a write frees only the backlog of a
/// thread that flushes too rarely or never: 16384 frees at most, a few
/// MB of nodes and values. A write made with no guard held frees what
/// came back at once ([`unpinned`]).
#[cfg(not(vmscale_shuttle))]
const BACKLOG: usize = 256;

/// Where the collector brings back a thread's batches once their grace
/// period has passed, so that the thread that retired the memory frees
/// it, as the kernel runs an RCU callback on the CPU that queued it.
/// Frees run wherever crossbeam-epoch collects otherwise, and the lab's
/// two `malloc1` threads spent a fifth of their time freeing each other's
/// VMAs, waiting on each other's allocator arenas (docs/RESULTS.md,
/// "Frees where they were retired").
#[cfg(not(vmscale_shuttle))]
#[derive(Default)]
struct Home {
    /// Batches whose grace period has passed; `closed` once the thread
    /// is gone, when a batch's collector frees it itself.
    ready: Mutex<(Vec<Batch>, bool)>,
    /// How many batches `ready` holds: the owner's one load on its way.
    waiting: AtomicUsize,
}

// SAFETY: a `Free` is an unlinked allocation and the function that frees
// it, which may run on any thread (`defer`'s contract); a `Home` only
// moves them between threads.
#[cfg(not(vmscale_shuttle))]
unsafe impl Send for Home {}
// SAFETY: as above; the mutex orders every access to the batches.
#[cfg(not(vmscale_shuttle))]
unsafe impl Sync for Home {}

#[cfg(not(vmscale_shuttle))]
impl Home {
    /// Called by the collector, on any thread, after the grace period.
    fn deliver(&self, mut batch: Batch) {
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        if ready.1 {
            drop(ready);
            // SAFETY: the batch's grace period has passed and its thread
            // is gone; its frees may run on any thread.
            unsafe { run(&mut batch) };
        } else {
            ready.0.push(batch);
            self.waiting.store(ready.0.len(), Ordering::Release);
        }
    }

    /// The batches delivered so far, and (`close`) no more from now on.
    fn take(&self, close: bool) -> Vec<Batch> {
        if !close && self.waiting.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        ready.1 |= close;
        self.waiting.store(0, Ordering::Relaxed);
        std::mem::take(&mut ready.0)
    }
}

/// Frees gathered by one thread, handed to the collector as one call.
/// Boxed, so that the call (this and the thread's [`Home`]) fits the two
/// words crossbeam-epoch keeps inline, and recycled by its thread: a batch
/// costs no allocation once a thread has a few.
#[cfg(not(vmscale_shuttle))]
type Batch = Box<Vec<Free>>;

/// Emptied batches a thread keeps for its next ones: a batch comes back
/// one or two flushes after it was sealed.
#[cfg(not(vmscale_shuttle))]
const SPARE_BATCHES: usize = 4;

/// Runs the frees of a batch whose grace period has passed, leaving it
/// empty.
///
/// # Safety
/// Every entry came from [`defer`], and its grace period has passed.
#[cfg(not(vmscale_shuttle))]
unsafe fn run(batch: &mut Batch) {
    for (free, p) in batch.drain(..) {
        // SAFETY: per the contract (`defer`'s: unlinked, no reader left).
        unsafe { free(p) };
    }
}

/// A thread's frees not yet handed to the collector, and its [`Home`].
#[cfg(not(vmscale_shuttle))]
struct Retired {
    batch: Batch,
    /// Emptied batches, at most [`SPARE_BATCHES`].
    spare: Vec<Batch>,
    home: std::sync::Arc<Home>,
    /// Batches handed to the collector since the last [`drain`].
    sealed: usize,
}

#[cfg(not(vmscale_shuttle))]
impl Retired {
    /// Hands the gathered frees to the collector as one deferred call.
    fn seal(&mut self, guard: &crossbeam_epoch::Guard) {
        // An unprotected guard (`unprotected().flush()`) runs a deferred
        // call at once, before the grace period of the frees in the batch:
        // they wait for a pinned one.
        if self.batch.is_empty() || guard.collector().is_none() {
            return;
        }
        let next = self
            .spare
            .pop()
            .unwrap_or_else(|| Box::new(Vec::with_capacity(BATCH)));
        let batch = std::mem::replace(&mut self.batch, next);
        let home = self.home.clone();
        // SAFETY: the frees touch only memory unlinked before this call
        // (`defer`'s contract), and crossbeam runs the call after every
        // thread pinned now has moved on.
        unsafe { guard.defer_unchecked(move || home.deliver(batch)) };
        // Crossbeam keeps deferred calls in a bag of 64 of the thread's
        // own until it fills: 64 batches, 4096 frees, held back from
        // every collection, and a shared tree's writes ran 1.5x slower
        // on memory not yet recycled. Handing the bag over at once (and
        // collecting, as a flush does) keeps one batch in flight.
        guard.flush();
        self.sealed += 1;
    }
}

#[cfg(not(vmscale_shuttle))]
impl Drop for Retired {
    /// The thread ends: what it gathered goes to the collector, and what
    /// comes back is freed wherever it is collected.
    fn drop(&mut self) {
        self.seal(&crossbeam_epoch::pin());
        for mut batch in self.home.take(true) {
            // SAFETY: delivered, so its grace period has passed.
            unsafe { run(&mut batch) };
        }
    }
}

#[cfg(not(vmscale_shuttle))]
thread_local! {
    static RETIRED: std::cell::RefCell<Retired> = std::cell::RefCell::new(Retired {
        batch: Box::new(Vec::with_capacity(BATCH)),
        spare: Vec::new(),
        home: std::sync::Arc::default(),
        sealed: 0,
    });
}

/// Frees what the collector brought back to this thread. Nothing of this
/// thread's state is borrowed while they run: a value's drop may write to
/// a tree and retire more.
#[cfg(not(vmscale_shuttle))]
pub(crate) fn free_ready() {
    let ready = RETIRED
        .try_with(|r| {
            r.try_borrow()
                .map(|r| r.home.take(false))
                .unwrap_or_default()
        })
        .unwrap_or_default();
    for mut batch in ready {
        // SAFETY: delivered, so its grace period has passed.
        unsafe { run(&mut batch) };
        // Kept for a later seal, unless this thread's state is in use or
        // gone (then dropped).
        let _ = RETIRED.try_with(|r| {
            if let Ok(mut r) = r.try_borrow_mut() {
                if r.spare.len() < SPARE_BATCHES {
                    r.spare.push(batch);
                }
            }
        });
    }
}

/// Whether this thread holds no guard: a write made so frees what came
/// back to it afterwards, as crossbeam-epoch collects at a pin that is
/// not nested in another. A thread that holds a guard across its writes
/// (a reader in the QSBR style, the lab's workers, whose writes run under
/// `mmap_lock`) frees at its flushes instead, outside its callers' locks.
#[cfg(not(vmscale_shuttle))]
pub(crate) fn unpinned() -> bool {
    !crossbeam_epoch::is_pinned()
}

/// Seals this thread's gathered frees, collects twice for each
/// [`FREES_PER_COLLECT`] batches it sealed since it last did, and twice
/// more (every flush seals a batch that is only partly full, and asking
/// for just as many left a backlog growing by 60 values a flush in
/// `tests/reclaim_pace.rs`; a collection stops at the first bag whose
/// grace period has not passed, so the extra ones cost an epoch check
/// each), then frees what came back.
#[cfg(not(vmscale_shuttle))]
fn drain(guard: &crossbeam_epoch::Guard) {
    let sealed = RETIRED
        .try_with(|r| {
            r.try_borrow_mut()
                .map(|mut r| {
                    r.seal(guard);
                    std::mem::take(&mut r.sealed)
                })
                .unwrap_or(0)
        })
        .unwrap_or(0);
    for _ in 0..2 * (sealed / FREES_PER_COLLECT + 1) {
        guard.flush();
    }
    free_ready();
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

/// Runs `free(p)` once no thread can still hold a reference obtained
/// before this call: after a grace period, on this thread, at a later
/// [`Guard::flush`], after a later write made with no guard held, or at a
/// write once a [`BACKLOG`] waits (once this thread is gone, wherever the
/// collector runs).
///
/// # Safety
/// `free(p)` must only free memory that has already been unlinked from
/// the tree, and must be safe to run on any thread.
#[cfg(not(vmscale_shuttle))]
pub(crate) unsafe fn defer(guard: &Guard, free: unsafe fn(*mut u8), p: *mut u8) {
    let backlog = RETIRED.try_with(|r| match r.try_borrow_mut() {
        Ok(mut r) => {
            r.batch.push((free, p));
            if r.batch.len() < BATCH {
                return Ok(false);
            }
            r.seal(&guard.0);
            Ok(r.home.waiting.load(Ordering::Relaxed) >= BACKLOG)
        }
        Err(_) => Err(()),
    });
    match backlog {
        Ok(Ok(true)) => free_ready(),
        Ok(Ok(false)) => {}
        // This thread's state is gone (its destructors run) or in use:
        // one deferred call of its own, freed wherever it is collected.
        _ => {
            // SAFETY: per the contract; crossbeam runs the call after
            // every thread pinned now has moved on.
            unsafe { guard.0.defer_unchecked(move || free(p)) }
        }
    }
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

/// Shuttle stand-in: nothing is ever freed.
#[cfg(vmscale_shuttle)]
pub(crate) fn free_ready() {}

/// Shuttle stand-in: no write frees anything afterwards.
#[cfg(vmscale_shuttle)]
pub(crate) fn unpinned() -> bool {
    false
}

/// Shuttle stand-in: leaks instead of freeing, which is trivially safe.
#[cfg(vmscale_shuttle)]
pub(crate) unsafe fn defer(_guard: &Guard, _free: unsafe fn(*mut u8), _p: *mut u8) {}

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

/// Flushes the grace-period collector until `done` holds (a shared
/// write's releases run after a grace period, on some later `pin`), for up
/// to 30 s: another test's thread that stays pinned meanwhile holds every
/// grace period back, and under load bounds of 1000 and 10 000 flushes
/// failed the crate's unit tests about 1 run in 20. Under Miri, whose
/// clock runs with the instructions it executes, 10 000 flushes.
#[cfg(all(test, not(vmscale_shuttle)))]
pub(crate) fn settle(done: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut flushes = 0;
    while !done() {
        let out = if cfg!(miri) {
            flushes >= 10_000
        } else {
            std::time::Instant::now() > deadline
        };
        if out {
            return false;
        }
        crate::pin().flush();
        std::thread::yield_now();
        flushes += 1;
    }
    true
}

#[cfg(all(test, not(vmscale_shuttle)))]
mod tests {
    use crate::MapleTree;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A batch's worth of retired values and more waits for the guard
    /// that could still read them, however the thread flushes meanwhile,
    /// through a pinned guard or an unprotected one (which runs a
    /// deferred call at once, so a batch sealed through it would be
    /// freed early); then it is all freed.
    #[test]
    fn retired_values_wait_for_every_guard_that_could_read_them() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let tree = MapleTree::new();
        tree.write()
            .store_range(0..=9, Counted(Arc::clone(&dropped)))
            .unwrap();
        let reader = crate::pin();
        let held = tree.load(5, &reader).unwrap();
        let writes = super::BATCH + 1;
        for _ in 0..writes {
            tree.write()
                .store_range(0..=9, Counted(Arc::clone(&dropped)))
                .unwrap();
            // SAFETY: no reference is read under the unprotected guard.
            unsafe { crate::unprotected() }.flush();
            crate::pin().flush();
        }
        reader.flush();
        // Still readable: under Miri an early free is caught here.
        assert_eq!(held.0.load(Ordering::SeqCst), 0);
        drop(reader);
        super::settle(|| dropped.load(Ordering::SeqCst) == writes);
        assert_eq!(dropped.load(Ordering::SeqCst), writes);
        drop(tree);
    }
}

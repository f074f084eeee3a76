//! Lock statistics in the manner of the kernel's `lock_stat`: per lock
//! class, how many acquisitions, how many had to wait, and for how long.
//!
//! Counters live in per-thread shards, so counting an uncontended
//! acquisition writes only the acquiring thread's own cache line: the
//! fault fast path stays free of shared writes with statistics on.
//! [`snapshot`] sums the shards; a benchmark takes one before and one
//! after and reports [`LockStats::since`].

use std::cell::OnceCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A lock class: every lock of one kind, as `lock_stat` groups them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockClass {
    /// The per-address-space reader-writer lock (`mmap_lock`).
    MmapLock,
    /// The per-VMA lock the fault path takes instead of `mmap_lock`.
    VmaLock,
    /// A file's reverse-map lock (`i_mmap_rwsem`), whichever i_mmap design
    /// holds it: the one lock of `single`, or any group or top-level lock
    /// of the split designs.
    IMmap,
    /// An anon_vma's lock (the root anon_vma's `rwsem`).
    AnonVma,
}

impl LockClass {
    /// Every class, in report order.
    pub const ALL: [LockClass; 4] = [
        LockClass::MmapLock,
        LockClass::VmaLock,
        LockClass::IMmap,
        LockClass::AnonVma,
    ];

    /// The class name used in reports and JSON (`"mmap_lock"`, `"vma_lock"`,
    /// `"i_mmap"`, `"anon_vma"`).
    pub fn name(self) -> &'static str {
        match self {
            LockClass::MmapLock => "mmap_lock",
            LockClass::VmaLock => "vma_lock",
            LockClass::IMmap => "i_mmap",
            LockClass::AnonVma => "anon_vma",
        }
    }
}

const CLASSES: usize = LockClass::ALL.len();

/// Counters of one class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Successful acquisitions (read or write).
    pub acquisitions: u64,
    /// Acquisitions that could not be had at once: the thread waited, or
    /// (for the per-VMA lock's try-lock) gave up and fell back.
    pub contended: u64,
    /// Total time spent waiting, in nanoseconds.
    pub wait_ns: u64,
    /// Longest single wait, in nanoseconds.
    pub max_wait_ns: u64,
    /// Of the contended acquisitions, those that gave up spinning and
    /// went to the lock's wait queue to sleep (the `rwsem` and `numa`
    /// kinds). The `std` kind's waits and the per-VMA lock's count none:
    /// std does not say whether it slept, and the VMA lock never sleeps.
    pub queued: u64,
}

/// Counters of every class.
///
/// ```
/// use mm::lockstat::{self, LockClass};
/// let before = lockstat::snapshot();
/// let mm = mm::Mm::default();
/// mm.mmap(0, 4096, mm::Prot::READ, mm::MapFlags::PRIVATE | mm::MapFlags::ANONYMOUS, None, 0)
///     .unwrap();
/// let used = lockstat::snapshot().since(&before);
/// assert!(used.class(LockClass::MmapLock).acquisitions >= 1);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockStats {
    classes: [ClassStats; CLASSES],
}

impl LockStats {
    /// The counters of one class.
    pub fn class(&self, class: LockClass) -> ClassStats {
        self.classes[class as usize]
    }

    /// What happened between `earlier` and `self` (max wait is the later
    /// snapshot's, as maxima cannot be subtracted).
    pub fn since(&self, earlier: &LockStats) -> LockStats {
        let mut out = *self;
        for (o, e) in out.classes.iter_mut().zip(&earlier.classes) {
            o.acquisitions -= e.acquisitions;
            o.contended -= e.contended;
            o.wait_ns -= e.wait_ns;
            o.queued -= e.queued;
        }
        out
    }

    /// `(class, counters)` for every class.
    pub fn iter(&self) -> impl Iterator<Item = (LockClass, ClassStats)> + '_ {
        LockClass::ALL.iter().map(|&c| (c, self.class(c)))
    }
}

/// One thread's counters, aligned to two cache lines so that two threads'
/// shards never share a line (or an adjacent-line prefetch pair).
#[derive(Default)]
#[repr(align(128))]
struct Shard {
    counters: [[AtomicU64; 5]; CLASSES],
}

static ENABLED: AtomicBool = AtomicBool::new(true);
static SHARDS: Mutex<Vec<Arc<Shard>>> = Mutex::new(Vec::new());

thread_local! {
    static SHARD: OnceCell<Arc<Shard>> = const { OnceCell::new() };
}

/// Turn counting on or off for the whole process (on by default). Off,
/// the lock paths skip even their thread-local increments.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed)
}

/// Whether counting is on. Without the `lockstat` feature (the module is
/// then the crate's own) it is a constant `false`, so every counting path
/// compiles away.
#[inline]
pub fn enabled() -> bool {
    cfg!(feature = "lockstat") && ENABLED.load(Ordering::Relaxed)
}

/// The sum of every thread's counters so far.
pub fn snapshot() -> LockStats {
    let shards = SHARDS.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = LockStats::default();
    for s in shards.iter() {
        for (c, o) in s.counters.iter().zip(out.classes.iter_mut()) {
            o.acquisitions += c[0].load(Ordering::Relaxed);
            o.contended += c[1].load(Ordering::Relaxed);
            o.wait_ns += c[2].load(Ordering::Relaxed);
            o.max_wait_ns = o.max_wait_ns.max(c[3].load(Ordering::Relaxed));
            o.queued += c[4].load(Ordering::Relaxed);
        }
    }
    out
}

/// The calling thread's own counters so far: what a test or a benchmark
/// worker measures without counting other threads' locking.
///
/// ```
/// use mm::lockstat::{self, LockClass};
/// let before = lockstat::thread_snapshot();
/// let mm = mm::Mm::default();
/// assert_eq!(mm.map_count(), 0); // one mmap_lock acquisition, here
/// let used = lockstat::thread_snapshot().since(&before);
/// assert_eq!(used.class(LockClass::MmapLock).acquisitions, 1);
/// ```
pub fn thread_snapshot() -> LockStats {
    let mut out = LockStats::default();
    with_shard(|s| {
        for (c, o) in s.counters.iter().zip(out.classes.iter_mut()) {
            o.acquisitions = c[0].load(Ordering::Relaxed);
            o.contended = c[1].load(Ordering::Relaxed);
            o.wait_ns = c[2].load(Ordering::Relaxed);
            o.max_wait_ns = c[3].load(Ordering::Relaxed);
            o.queued = c[4].load(Ordering::Relaxed);
        }
    });
    out
}

// Inlined into every lock path, with the first call's registration kept
// out of line: counting is one thread-local access and a store.
#[inline]
fn with_shard(f: impl FnOnce(&Shard)) {
    SHARD.with(|cell| f(cell.get_or_init(register_shard)))
}

#[cold]
fn register_shard() -> Arc<Shard> {
    let s = Arc::new(Shard::default());
    SHARDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Arc::clone(&s));
    s
}

// Only the owning thread writes a shard, so a load and a store (not an
// atomic read-modify-write) suffice and cost no more than a plain add.
#[inline]
fn bump(a: &AtomicU64, by: u64) {
    a.store(a.load(Ordering::Relaxed) + by, Ordering::Relaxed)
}

/// Count an acquisition that did not wait.
#[inline]
pub(crate) fn acquired(class: LockClass) {
    if enabled() {
        with_shard(|s| bump(&s.counters[class as usize][0], 1));
    }
}

/// Count an acquisition that waited since `since`, and whether it went
/// to the wait queue (`queued`) rather than only spinning.
pub(crate) fn acquired_after_wait(class: LockClass, since: Instant, queued: bool) {
    if enabled() {
        let ns = since.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        with_shard(|s| {
            let c = &s.counters[class as usize];
            bump(&c[0], 1);
            bump(&c[1], 1);
            bump(&c[2], ns);
            if ns > c[3].load(Ordering::Relaxed) {
                c[3].store(ns, Ordering::Relaxed);
            }
            if queued {
                bump(&c[4], 1);
            }
        });
    }
}

/// Count a try-lock that failed (the caller falls back to another lock).
pub(crate) fn try_failed(class: LockClass) {
    if enabled() {
        with_shard(|s| bump(&s.counters[class as usize][1], 1));
    }
}

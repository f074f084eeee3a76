//! A per-thread recorder of what the model does, for workload profiles:
//! every lock taken and released, and the cache lines of the structures
//! each critical section reads and writes.
//!
//! A thread calls [`start`], runs the operations it wants recorded (with
//! [`mark`] between them, say) and calls [`stop`], which hands back the
//! [`Event`]s in order. Only that thread records; every other thread, and
//! this one before [`start`], pays one relaxed load of a global counter
//! per hook (without the `profile` feature not even that: every hook
//! compiles away).
//!
//! ## Lock instances
//!
//! A lock instance is named by a serial number ([`Event`]s' `lock`), given
//! when the recording thread first sees the lock. A lock made while some
//! thread records carries a name of its own from then on (an address
//! space is a value that moves, its `mmap_lock` with it; a VMA is often
//! freed on another thread, after a grace period, where the recorder does
//! not hear of it); one made before
//! is known by its address, and a lock that is dropped while recording
//! (a VMA's lock when the VMA is replaced) gives its address up, so that
//! a lock allocated later at the same address is a new instance. The
//! serial numbers are only comparable within one recording.
//!
//! ## What a hold is
//!
//! - `RwSem` (`mmap_lock`, every i_mmap lock, the anon_vma lock): from the
//!   acquisition (blocking or a successful try) to the guard's drop.
//! - A VMA's lock taken by a reader (the lockless fault path): from the
//!   successful try to the guard's drop. Taken by a writer it is never
//!   released by itself (the VMA is about to be replaced); as in the
//!   kernel, where `mmap_write_unlock` ends every VMA write lock, the
//!   recorder releases it when the `mmap_lock` held for write is released.
//!
//! ## Counting lines
//!
//! The structures report the memory they touch (`touch`,
//! `touch_slice`) or, where they cannot, a count derived from their
//! shape (`counted`). Touched memory is counted as the distinct 64-byte
//! cache lines it covers, a line written at least once counting as
//! written, the rest as read. Of those, the lines a section reached by
//! following a pointer are counted apart ([`What::Lines`]'s `chain`):
//! `touch` reports an object the structure found through a pointer (a
//! tree node, a tree's header), so its first line is a load that waits
//! for the one before it; `touch_slice` reports part of an object already
//! reached (a node's keys), whose lines the CPU can fetch together. A line
//! another CPU wrote last costs a dependent load several times what it
//! costs a bulk read (`docs/projection.md`, "What the dirty lines cost").
//! The lines touched between two lock events belong to the innermost lock
//! held then (the one taken last and not yet released; a VMA's write
//! lock, a mark rather than a critical section of its own, passes them to
//! the lock below it): a [`Lines`](What::Lines) event for it is recorded
//! at the next lock event. Code that holds several locks of one class at
//! once and works on each one's data in turn (the `split-locked` walk, a
//! `distributed` change over several groups) names the lock with
//! `lines_belong_to` instead. Lines touched with no lock held are not
//! counted: nothing serialises them.
//!
//! The rules of each structure are documented at its hooks:
//! the red-black core (`rbtree.rs`: every node read on a descent or a
//! walk, every node whose links, colour or summary is written), the B+
//! tree (`itree/btree.rs`: the used part of the arrays a search scans, the
//! arrays an edit shifts), and the maple tree VMA index
//! (`index/maple_index.rs`: a count from the tree's height, as the maple
//! crate is not instrumented).
//!
//! ## Time
//!
//! Timestamps are [`Instant`]s (the vDSO `clock_gettime(CLOCK_MONOTONIC)`,
//! about 20 ns, constant-rate on every machine the lab runs on, with no
//! calibration of a cycle counter to trust), taken as the time since
//! [`start`] less the time the recorder itself spent so far: each hook
//! measures its own work and takes it out of every later timestamp, so a
//! profile's run times are the model's, not the recorder's. What a hook
//! costs around its own two clock reads (the call, the thread-local
//! access) [`start`] measures on back-to-back hooks, and each hook is
//! charged that much. Whatever the recorder does for a structure (the
//! maple index's count, say) it does inside a hook, never before one.
//!
//! ```
//! use mm::{MapFlags, Mm, Prot};
//! use mm::profile::{self, What};
//!
//! let mm = Mm::default();
//! profile::start();
//! mm.mmap(0, 4096, Prot::READ, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0).unwrap();
//! let events = profile::stop();
//! assert!(events.iter().any(|e| matches!(e.what, What::Acquire { write: true, .. })));
//! assert!(profile::stop().is_empty()); // nothing recorded while off
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::lockstat::LockClass;

/// The size of the cache line lines are counted in.
pub const LINE: usize = 64;

/// One thing the recording thread did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Event {
    /// Time since [`start`], less the recorder's own time.
    pub at: Duration,
    /// What happened.
    pub what: What,
}

/// What an [`Event`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// A lock was taken.
    Acquire {
        /// Its class.
        class: LockClass,
        /// The instance (see the module docs).
        lock: u64,
        /// Its address, or the name it was given when made while a thread
        /// recorded (bit 63 set).
        key: u64,
        /// Exclusive (`true`) or shared.
        write: bool,
        /// Whether it is one i_mmap group's lock (`split-locked`'s and
        /// `distributed`'s per-group locks), as opposed to a file-wide one.
        group: bool,
    },
    /// A lock taken after [`start`] was released.
    Release {
        /// The instance.
        lock: u64,
    },
    /// Cache lines of the data `lock` protects, touched while it was held.
    Lines {
        /// The instance.
        lock: u64,
        /// Lines read and not written.
        read: u32,
        /// Lines written.
        written: u32,
        /// Of `read + written`, the lines reached through a pointer: the
        /// first line of each object the section found by a dependent load.
        chain: u32,
    },
    /// A caller's mark ([`mark`]): where an operation starts, say.
    Mark(u64),
}

/// One lock held by the recording thread.
struct Held {
    lock: u64,
    class: LockClass,
    write: bool,
}

struct Recorder {
    start: Instant,
    overhead: Duration,
    /// What each hook costs outside the stretch it times itself (the call,
    /// the thread-local access, half of each clock read), measured by
    /// [`start`] and added to `overhead` at every hook: without it, the
    /// hundreds of hooks inside an exec's i_mmap critical sections doubled
    /// their recorded length.
    residual: Duration,
    events: Vec<Event>,
    /// Address of every live lock seen so far, with its instance number.
    live: HashMap<u64, u64>,
    next: u64,
    held: Vec<Held>,
    /// Lines touched since the last lock event: `(line, written,
    /// reached through a pointer)`.
    touched: Vec<(usize, bool, bool)>,
    /// Lines counted (not touched) since the last lock event: read,
    /// written, reached through a pointer.
    counted: (u32, u32, u32),
}

impl Recorder {
    fn push(&mut self, now: Instant, what: What) {
        let at = now
            .saturating_duration_since(self.start)
            .saturating_sub(self.overhead);
        self.events.push(Event { at, what });
    }

    /// Record the pending lines for `lock` (or the innermost lock held).
    fn flush(&mut self, now: Instant, lock: Option<u64>) {
        if self.touched.is_empty() && self.counted == (0, 0, 0) {
            return;
        }
        let (mut read, mut written, mut chain) = self.counted;
        self.counted = (0, 0, 0);
        self.touched.sort_unstable();
        let mut i = 0;
        while i < self.touched.len() {
            let line = self.touched[i].0;
            let (mut w, mut entry) = (false, false);
            while i < self.touched.len() && self.touched[i].0 == line {
                w |= self.touched[i].1;
                entry |= self.touched[i].2;
                i += 1;
            }
            if w {
                written += 1;
            } else {
                read += 1;
            }
            chain += u32::from(entry);
        }
        self.touched.clear();
        // A VMA's write lock marks the VMA as being replaced; what the
        // writer touches meanwhile is the data of the lock it took before
        // (the `mmap_lock`).
        let innermost = || {
            self.held
                .iter()
                .rev()
                .find(|h| !(h.class == LockClass::VmaLock && h.write))
                .map(|h| h.lock)
        };
        if let Some(lock) = lock.or_else(innermost) {
            self.push(
                now,
                What::Lines {
                    lock,
                    read,
                    written,
                    chain: chain.min(read + written),
                },
            );
        }
    }

    fn instance(&mut self, addr: u64) -> u64 {
        let next = &mut self.next;
        *self.live.entry(addr).or_insert_with(|| {
            *next += 1;
            *next
        })
    }

    fn release(&mut self, now: Instant, lock: u64) {
        self.flush(now, None);
        if let Some(at) = self.held.iter().rposition(|h| h.lock == lock) {
            let h = self.held.remove(at);
            if h.class == LockClass::MmapLock && h.write {
                // mmap_write_unlock ends every VMA write lock taken under it.
                while let Some(at) = self
                    .held
                    .iter()
                    .rposition(|h| h.class == LockClass::VmaLock && h.write)
                {
                    let v = self.held.remove(at);
                    self.push(now, What::Release { lock: v.lock });
                }
            }
            self.push(now, What::Release { lock });
        }
    }
}

/// Threads recording now: the one global load a hook pays.
static RECORDERS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// Whether any thread records. Without the `profile` feature a constant
/// `false`, so every hook compiles away.
#[inline(always)]
fn anyone() -> bool {
    cfg!(feature = "profile") && RECORDERS.load(Ordering::Relaxed) != 0
}

/// Run `f` on this thread's recorder, if it records, and take the time it
/// took out of later timestamps.
#[cold]
#[inline(never)]
fn with(f: impl FnOnce(&mut Recorder, Instant)) {
    let now = Instant::now();
    let _ = RECORDER.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            if let Some(rec) = slot.as_mut() {
                f(rec, now);
                rec.overhead += now.elapsed() + rec.residual;
            }
        }
    });
}

/// Start recording on this thread (dropping whatever an unfinished
/// recording held).
pub fn start() {
    let mut fresh = true;
    let _ = RECORDER.try_with(|cell| {
        let mut slot = cell.borrow_mut();
        fresh = slot.is_none();
        *slot = Some(Recorder {
            start: Instant::now(),
            overhead: Duration::ZERO,
            residual: Duration::ZERO,
            events: Vec::with_capacity(1 << 16),
            live: HashMap::new(),
            next: 0,
            held: Vec::new(),
            touched: Vec::new(),
            counted: (0, 0, 0),
        });
    });
    if fresh {
        RECORDERS.fetch_add(1, Ordering::Relaxed);
    }
    calibrate();
}

/// Hooks timed by [`calibrate`].
const CALIBRATION_HOOKS: u32 = 4096;

/// Measures the residual cost of a hook: `CALIBRATION_HOOKS` empty hooks
/// timed from outside, less what they timed themselves; the median of
/// five rounds. Then the recording starts afresh.
fn calibrate() {
    let mut rounds = [Duration::ZERO; 5];
    for round in &mut rounds {
        let before = overhead();
        let t0 = Instant::now();
        for _ in 0..CALIBRATION_HOOKS {
            with(|_, _| {});
        }
        let outside = t0.elapsed();
        let inside = overhead().saturating_sub(before);
        *round = outside.saturating_sub(inside) / CALIBRATION_HOOKS;
    }
    rounds.sort_unstable();
    let _ = RECORDER.try_with(|cell| {
        if let Some(rec) = cell.borrow_mut().as_mut() {
            rec.residual = rounds[rounds.len() / 2];
            rec.overhead = Duration::ZERO;
            rec.start = Instant::now();
        }
    });
}

/// The time this thread's recorder has taken out so far.
fn overhead() -> Duration {
    RECORDER
        .try_with(|cell| cell.borrow().as_ref().map(|r| r.overhead))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Stop recording on this thread and return what was recorded (nothing if
/// it was not recording).
pub fn stop() -> Vec<Event> {
    let rec = RECORDER
        .try_with(|cell| cell.borrow_mut().take())
        .ok()
        .flatten();
    match rec {
        Some(mut rec) => {
            RECORDERS.fetch_sub(1, Ordering::Relaxed);
            let now = Instant::now();
            rec.flush(now, None);
            rec.events
        }
        None => Vec::new(),
    }
}

/// The events recorded so far, leaving the recorder on (and its lock
/// instances as they are, so that later events compare with these).
pub fn take() -> Vec<Event> {
    RECORDER
        .try_with(|cell| {
            cell.borrow_mut()
                .as_mut()
                .map(|r| std::mem::take(&mut r.events))
        })
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Whether this thread records.
pub fn recording() -> bool {
    anyone()
        && RECORDER
            .try_with(|c| c.try_borrow().map(|r| r.is_some()).unwrap_or(false))
            .unwrap_or(false)
}

/// Record a caller's mark, say where an operation starts. The lines
/// pending go to the innermost lock held first.
pub fn mark(tag: u64) {
    if anyone() {
        with(|r, now| {
            r.flush(now, None);
            r.push(now, What::Mark(tag));
        });
    }
}

/// Names made for locks while a thread records (0 is none).
static NAMES: AtomicU32 = AtomicU32::new(1);

/// A name for a lock being made: 0 (know it by its address) unless some
/// thread records.
#[inline(always)]
pub(crate) fn new_id() -> u32 {
    if anyone() {
        next_name()
    } else {
        0
    }
}

#[cold]
#[inline(never)]
fn next_name() -> u32 {
    // Past 2^32 names a name is reused; 0 is skipped.
    NAMES.fetch_add(1, Ordering::Relaxed).max(1)
}

/// The key of a lock named `id` by [`new_id`]: bit 63 set, so that none
/// is a user-space address.
#[inline]
pub(crate) fn named(id: u32) -> u64 {
    (1 << 63) | u64::from(id)
}

/// A lock was taken. Returns whether some thread records, for the caller
/// to pass the release on only then. The lock's key (see
/// [`What::Acquire`]) is worked out only when someone records: the paths
/// a hook sits in (a page fault is 30 ns) pay one check of one global,
/// inlined, and keep their registers and their layout; the work is a call
/// of a cold function out of line.
#[inline(always)]
pub(crate) fn acquired(
    class: LockClass,
    key: impl FnOnce() -> u64,
    write: bool,
    group: bool,
) -> bool {
    let on = anyone();
    if on {
        record_acquired(class, key(), write, group);
    }
    on
}

/// [`acquired`]'s work, out of line.
#[cold]
#[inline(never)]
fn record_acquired(class: LockClass, key: u64, write: bool, group: bool) {
    with(|r, now| {
        r.flush(now, None);
        let lock = r.instance(key);
        r.held.push(Held { lock, class, write });
        r.push(
            now,
            What::Acquire {
                class,
                lock,
                key,
                write,
                group,
            },
        );
    });
}

/// The lock known by `key` is being released.
#[inline(always)]
pub(crate) fn released(key: u64) {
    if anyone() {
        released_slow(key);
    }
}

#[cold]
#[inline(never)]
fn released_slow(key: u64) {
    with(|r, now| {
        if let Some(&lock) = r.live.get(&key) {
            r.release(now, lock);
        }
    });
}

/// The lock at `addr` is being dropped: its address may serve another.
#[inline(always)]
pub(crate) fn gone(addr: u64) {
    if anyone() {
        gone_slow(addr);
    }
}

#[cold]
#[inline(never)]
fn gone_slow(addr: u64) {
    with(|r, _| {
        r.live.remove(&addr);
    });
}

/// The lines touched since the last lock event are the data of the lock
/// known by `key` (held by this thread), not of the innermost lock.
#[inline(always)]
pub(crate) fn lines_belong_to(key: u64) {
    if anyone() {
        lines_belong_to_slow(key);
    }
}

#[cold]
#[inline(never)]
fn lines_belong_to_slow(key: u64) {
    with(|r, now| {
        let lock = r.live.get(&key).copied();
        if lock.is_some() {
            r.flush(now, lock);
        }
    });
}

#[cold]
#[inline(never)]
fn touch_range(addr: usize, bytes: usize, write: bool, reached: bool) {
    if bytes == 0 {
        return;
    }
    with(|r, _| {
        let first = addr / LINE;
        for line in first..=(addr + bytes - 1) / LINE {
            r.touched.push((line, write, reached && line == first));
        }
    });
}

/// The structure read (or wrote) `value`, all of it, having found it
/// through a pointer (a node, a header): its first line is a dependent
/// load.
#[inline(always)]
pub(crate) fn touch<T>(value: &T, write: bool) {
    if anyone() {
        touch_range(
            std::ptr::from_ref(value) as usize,
            std::mem::size_of::<T>(),
            write,
            true,
        );
    }
}

/// The structure read (or wrote) `values`, part of an object it already
/// reached: no line of it waits for another.
#[inline(always)]
pub(crate) fn touch_slice<T>(values: &[T], write: bool) {
    if anyone() {
        touch_range(
            values.as_ptr() as usize,
            std::mem::size_of_val(values),
            write,
            false,
        );
    }
}

/// Lines a structure counted from its shape rather than touched:
/// `count` gives `(read, written, chain)`, `chain` of them reached through
/// a pointer (see the rule at the caller). `count` runs inside the
/// recorder's timed stretch, so that the work of counting (a walk of the
/// tree's shape, say) is taken out of the timestamps as the recorder's
/// own: the maple index's count, made outside it, once walked the whole
/// tree at every search and store, under `mmap_lock`, and made a maple
/// operation's recording two to seven times its length; the
/// calibration's scaling then shrank the stretches between critical
/// sections, which hold no such count, as much.
#[inline(always)]
pub(crate) fn counted(count: impl FnOnce() -> (u32, u32, u32)) {
    if anyone() {
        counted_slow(count);
    }
}

#[cold]
#[inline(never)]
fn counted_slow(count: impl FnOnce() -> (u32, u32, u32)) {
    with(|r, _| {
        let (read, written, chain) = count();
        r.counted.0 += read;
        r.counted.1 += written;
        r.counted.2 += chain;
    });
}

/// Whether a structure should compute a count for [`counted`] at all.
#[inline]
pub(crate) fn counting() -> bool {
    anyone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_nothing_while_off() {
        let x = [0u64; 32];
        record_acquired(LockClass::IMmap, 0x1000, true, false);
        touch(&x, true);
        counted(|| (3, 1, 1));
        released(0x1000);
        mark(1);
        assert!(!recording());
        assert!(stop().is_empty());
        // And a recording started afterwards sees none of it.
        start();
        assert!(recording());
        let events = stop();
        assert!(events.is_empty(), "{events:?}");
    }

    #[test]
    fn the_work_of_a_count_is_the_recorders_not_the_models() {
        // A count that takes 20 ms: none of it may show between the marks
        // around it (the maple index's count once walked the whole tree
        // outside the recorder's own time).
        start();
        mark(1);
        counted(|| {
            std::thread::sleep(Duration::from_millis(20));
            (1, 0, 0)
        });
        mark(2);
        let ev = stop();
        let at = |tag| {
            ev.iter()
                .find(|e| e.what == What::Mark(tag))
                .map(|e| e.at)
                .expect("both marks recorded")
        };
        let between = at(2) - at(1);
        assert!(between < Duration::from_millis(10), "{between:?}");
    }

    /// The model's own locks, end to end: a file mapping under
    /// `split-locked` takes `mmap_lock` and one group's i_mmap lock, and
    /// the group's tree and the VMA index are counted for them.
    #[test]
    fn a_file_mapping_records_its_locks_and_lines() {
        use crate::policy::{ImapDesign, Policy};
        use crate::{MapFlags, Prot};
        use std::sync::Arc;

        let topology = crate::topology::Topology::emulated(2, 2).unwrap();
        let policy = Arc::new(Policy {
            imap: ImapDesign::SplitLocked,
            topology: Some(Arc::new(topology)),
            ..Policy::default()
        });
        let file = policy.file("lib.so", 1 << 20);
        let mm = policy.mm();
        start();
        let a = mm
            .mmap(0, 8192, Prot::READ, MapFlags::PRIVATE, Some(&file), 0)
            .unwrap();
        mm.munmap(a, 8192).unwrap();
        let ev: Vec<What> = stop().into_iter().map(|e| e.what).collect();
        let mut held = Vec::new();
        let mut group_lines = 0;
        let mut mmap_lines = 0;
        let (mut group_chain, mut mmap_chain) = (0, 0);
        let mut group = None;
        let mut mmap_lock = None;
        for w in &ev {
            match *w {
                What::Acquire {
                    class,
                    lock,
                    group: g,
                    ..
                } => {
                    assert!(!held.contains(&lock), "{lock} taken twice");
                    held.push(lock);
                    match class {
                        LockClass::IMmap => {
                            assert!(g, "split-locked's i_mmap locks are group locks");
                            group = Some(lock);
                        }
                        LockClass::MmapLock => mmap_lock = Some(lock),
                        _ => {}
                    }
                }
                What::Release { lock } => {
                    let at = held
                        .iter()
                        .position(|&l| l == lock)
                        .expect("released a held lock");
                    held.remove(at);
                }
                What::Lines {
                    lock,
                    read,
                    written,
                    chain,
                } => {
                    assert!(held.contains(&lock), "lines of a lock not held");
                    assert!(chain <= read + written);
                    if Some(lock) == group {
                        group_lines += read + written;
                        group_chain += chain;
                    } else if Some(lock) == mmap_lock {
                        mmap_lines += read + written;
                        mmap_chain += chain;
                    }
                }
                What::Mark(_) => {}
            }
        }
        assert!(held.is_empty(), "every lock released: {ev:?}");
        assert!(group.is_some() && mmap_lock.is_some(), "{ev:?}");
        assert!(group_lines > 0 && mmap_lines > 0, "{ev:?}");
        // Both trees are reached node by node, through pointers.
        assert!(group_chain > 0 && mmap_chain > 0, "{ev:?}");
    }

    #[test]
    fn lines_go_to_the_innermost_lock_and_count_distinct_lines() {
        // Two lines each, each node starting a line.
        #[repr(align(64))]
        struct Node {
            _bytes: [u8; 128],
        }
        let x = [0u8; 256];
        let nodes = [Node { _bytes: [0; 128] }, Node { _bytes: [0; 128] }];
        start();
        record_acquired(LockClass::MmapLock, 0x100, true, false);
        record_acquired(LockClass::IMmap, 0x200, false, true);
        touch_slice(&x[..64], false);
        touch_slice(&x[..64], false); // the same memory again
        touch_slice(&x[128..129], true);
        released(0x200);
        counted(|| (2, 1, 1));
        // Two nodes of two lines each, found by pointer: the first line of
        // each is a dependent load, however often it is touched.
        touch(&nodes[0], false);
        touch(&nodes[1], true);
        touch(&nodes[1], false);
        released(0x100);
        let ev: Vec<What> = stop().into_iter().map(|e| e.what).collect();
        let lines: Vec<(u64, u32, u32, u32)> = ev
            .iter()
            .filter_map(|w| match *w {
                What::Lines {
                    lock,
                    read,
                    written,
                    chain,
                } => Some((lock, read, written, chain)),
                _ => None,
            })
            .collect();
        // 64 bytes span one or two lines, the written byte one more; no
        // slice is a dependent load.
        let first = x.as_ptr() as usize;
        let spans = (first + 63) / LINE - first / LINE + 1;
        assert_eq!(
            lines,
            vec![(2, spans as u32, 1, 0), (1, 2 + 2, 1 + 2, 1 + 2)]
        );
        assert!(matches!(
            ev[0],
            What::Acquire {
                lock: 1,
                write: true,
                group: false,
                ..
            }
        ));
        assert!(matches!(
            ev[1],
            What::Acquire {
                lock: 2,
                write: false,
                group: true,
                ..
            }
        ));
        assert_eq!(ev.last(), Some(&What::Release { lock: 1 }));
    }

    #[test]
    fn a_dropped_lock_gives_up_its_instance_and_vma_write_locks_end_with_mmap_lock() {
        start();
        record_acquired(LockClass::MmapLock, 0x100, true, false);
        record_acquired(LockClass::VmaLock, 0x300, true, false);
        gone(0x300);
        record_acquired(LockClass::VmaLock, 0x300, true, false);
        released(0x100);
        // Released before start: not recorded.
        released(0x999);
        let ev: Vec<What> = stop().into_iter().map(|e| e.what).collect();
        let releases: Vec<u64> = ev
            .iter()
            .filter_map(|w| match *w {
                What::Release { lock } => Some(lock),
                _ => None,
            })
            .collect();
        assert_eq!(releases, vec![3, 2, 1]);
    }
}

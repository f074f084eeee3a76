//! The per-VMA lock that lets page faults run without `mmap_lock`.

use std::time::Instant;

use crate::lockstat::{self, LockClass};
use crate::profile;
use crate::sync::Ordering;

mod word;

use word::LockWord;

/// The per-VMA lock: a reader count and a writer bit in one word.
///
/// Readers (page faults) only try: a fault that cannot have the lock at
/// once falls back to `mmap_lock`. A writer (holding `mmap_lock` for write)
/// sets the writer bit and waits for the readers inside to leave; the bit
/// is never cleared, because a write-locked VMA is about to be replaced.
#[derive(Debug)]
pub(crate) struct VmaLock {
    /// Apart from the VMA, on a cache line of its own (see [`word`]).
    state: LockWord,
    /// The name the profile recorder knows it by, when it was made while
    /// a thread recorded (`profile::new_id`); 0: by its word's address.
    /// A VMA is often freed on another thread (after a grace period), so
    /// the recording thread does not hear that its word's line is free,
    /// and a later VMA's word on that line would be taken for it.
    id: u32,
}

const WRITER: u32 = 1 << 31;

impl VmaLock {
    pub(crate) fn new() -> VmaLock {
        VmaLock {
            state: LockWord::new(0),
            id: profile::new_id(),
        }
    }

    /// Take a read lock if no writer has claimed the VMA, held until the
    /// guard drops (as `lock_vma_under_rcu` and `vma_end_read` pair up).
    /// The guard is the only way to hold or release a read lock, so every
    /// release matches an acquisition.
    #[inline]
    pub(crate) fn try_read(&self) -> Option<VmaReadGuard<'_>> {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & WRITER != 0 {
                lockstat::try_failed(LockClass::VmaLock);
                // The mutation check of `.ci/run` builds the bug this
                // shape rules out: a guard made for the failed attempt
                // and dropped. The shuttle model below must fail then.
                #[cfg(vmscale_mutant = "eager_guard")]
                drop(VmaReadGuard(self, false));
                return None;
            }
            match self
                .state
                .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => {
                    lockstat::acquired(LockClass::VmaLock);
                    let recorded = self.record(false);
                    // Built only here, after the CAS: a guard made for a
                    // failed attempt (say by an eager `bool::then_some`)
                    // would release a hold nobody took, and let a writer
                    // in beside a reader.
                    return Some(VmaReadGuard(self, recorded));
                }
                Err(now) => s = now,
            }
        }
    }

    /// Claim the VMA for a writer and wait until no reader is inside.
    /// Idempotent: a VMA already claimed returns at once.
    pub(crate) fn write_lock(&self) {
        let prev = self.state.fetch_or(WRITER, Ordering::Acquire);
        if prev & WRITER != 0 {
            return;
        }
        // Recorded as held from here: the wait below is the acquisition's.
        // The recorder ends the hold with `mmap_lock`'s (see `mm::profile`).
        self.record(true);
        if prev == 0 {
            lockstat::acquired(LockClass::VmaLock);
            return;
        }
        let since = Instant::now();
        let mut spins = 0u32;
        while self.state.load(Ordering::Acquire) != WRITER {
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                crate::sync::yield_now();
            }
        }
        lockstat::acquired_after_wait(LockClass::VmaLock, since, false);
    }

    /// Tell the profile recorder of an acquisition; whether it records.
    #[inline]
    fn record(&self, write: bool) -> bool {
        profile::acquired(LockClass::VmaLock, || self.key(), write, false)
    }

    /// The lock's identity for the profile recorder: its name, or the
    /// address of its word.
    #[inline]
    fn key(&self) -> u64 {
        if self.id != 0 {
            return profile::named(self.id);
        }
        // The word is the lock's own until the VMA goes (`Drop` below
        // says so before the line can serve another, when it is dropped
        // on the recording thread).
        std::ptr::from_ref::<crate::sync::AtomicU32>(&self.state) as usize as u64
    }

    /// Whether a writer has claimed the VMA.
    pub(crate) fn is_write_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) & WRITER != 0
    }
}

/// A read hold of a [`VmaLock`], released when dropped: the writer's
/// wait for readers (`write_lock`) cannot be left waiting by a fault path
/// that returns early or unwinds.
#[must_use = "the read lock is released when the guard drops"]
/// The flag says whether the profile recorder recorded the acquisition
/// (and so wants the release).
pub(crate) struct VmaReadGuard<'a>(&'a VmaLock, bool);

impl Drop for VmaLock {
    fn drop(&mut self) {
        // The VMA goes: its lock's address may serve another.
        profile::gone(self.key());
    }
}

impl Drop for VmaReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.1 {
            profile::released(self.0.key());
        }
        // Release: the reader's accesses to the VMA happen before a
        // writer that sees the count drop goes on to replace it.
        self.0.state.fetch_sub(1, Ordering::Release);
    }
}

#[cfg(all(test, not(vmscale_shuttle)))]
mod tests {
    use super::*;

    /// A try-lock that fails against a claimed VMA must leave the count
    /// alone: a release for it would let the writer in beside the reader
    /// still inside (and, once the count went below the writer bit, leave
    /// the writer waiting for good).
    #[test]
    fn failed_try_read_leaves_the_readers_count_alone() {
        let lock = VmaLock::new();
        let held = lock.try_read().expect("unclaimed");
        std::thread::scope(|s| {
            let writer = s.spawn(|| lock.write_lock());
            while !lock.is_write_locked() {
                std::thread::yield_now();
            }
            for _ in 0..3 {
                assert!(lock.try_read().is_none(), "claimed by the writer");
            }
            // The writer still waits for the one reader inside.
            assert_eq!(lock.state.load(Ordering::SeqCst), WRITER | 1);
            assert!(!writer.is_finished());
            drop(held);
            writer.join().unwrap();
        });
        assert_eq!(lock.state.load(Ordering::SeqCst), WRITER);
        assert!(lock.try_read().is_none());
    }

    #[test]
    fn readers_share_and_release() {
        let lock = VmaLock::new();
        let a = lock.try_read().unwrap();
        let b = lock.try_read().unwrap();
        assert_eq!(lock.state.load(Ordering::SeqCst), 2);
        drop((a, b));
        lock.write_lock();
        lock.write_lock(); // idempotent
        assert_eq!(lock.state.load(Ordering::SeqCst), WRITER);
    }
}

/// A shuttle model of the fault fast path against a writer replacing the
/// VMA (the real `VmaLock`, `Vma` and maple tree code, with shuttle's
/// atomics). Run with
/// `RUSTFLAGS="--cfg vmscale_shuttle" cargo test -p mm --lib shuttle`.
#[cfg(all(test, vmscale_shuttle))]
mod shuttle_model {
    use std::sync::Arc;

    use shuttle::sync::atomic::{AtomicBool, Ordering};
    use shuttle::thread;

    use crate::flags::VmFlags;
    use crate::vma::Vma;
    use maple::{Direct, MapleTree};

    const START: u64 = 0x1000;
    const END: u64 = 0x3000;

    fn vma(flags: VmFlags) -> Arc<Vma> {
        Arc::new(Vma::new(START, END, flags, START >> 12, None, None))
    }

    /// One writer replaces the VMA (as `mprotect` would: claim the old
    /// one's lock, then publish the new one) while two faults run the
    /// fast path, falling back when the try-lock fails. Checked: a fault
    /// that holds the read lock never overlaps the publication of the
    /// replacement; a fault that falls back and waits for the writer sees
    /// the new VMA; the writer's wait for readers terminates.
    fn scenario() {
        let rw = VmFlags::READ | VmFlags::WRITE;
        // The tree as the address space keeps it: the VMA's own Arc in the slot.
        let tree = Arc::new(MapleTree::with_ownership(Direct));
        tree.write().store_range(START..=END - 1, vma(rw)).unwrap();
        let published = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));

        let writer = {
            let (tree, published, done) = (tree.clone(), published.clone(), done.clone());
            thread::spawn(move || {
                let g = maple::pin();
                let old = tree.load(START, &g).unwrap().to_arc();
                drop(g);
                old.lock().write_lock();
                published.store(true, Ordering::SeqCst);
                tree.write()
                    .store_range(START..=END - 1, vma(VmFlags::READ))
                    .unwrap();
                done.store(true, Ordering::SeqCst);
            })
        };
        let faults: Vec<_> = (0..2)
            .map(|_| {
                let (tree, published, done) = (tree.clone(), published.clone(), done.clone());
                thread::spawn(move || {
                    let g = maple::pin();
                    let v = tree.load(START + 0x1000, &g).unwrap();
                    let served = match v.lock().try_read() {
                        Some(held) => {
                            let writable = v.flags().contains(VmFlags::WRITE);
                            thread::yield_now();
                            assert!(
                                !(writable && published.load(Ordering::SeqCst)),
                                "a fault holds the old VMA while its replacement is published"
                            );
                            drop(held);
                            true
                        }
                        None => false,
                    };
                    if !served {
                        // The fallback: mmap_lock, i.e. wait for the writer.
                        drop(g);
                        while !done.load(Ordering::SeqCst) {
                            thread::yield_now();
                        }
                        let g = maple::pin();
                        let v = tree.load(START, &g).unwrap();
                        assert!(
                            !v.flags().contains(VmFlags::WRITE),
                            "fallback saw the old VMA"
                        );
                        assert!(
                            v.lock().try_read().is_some(),
                            "the new VMA must be lockable"
                        );
                    }
                })
            })
            .collect();
        writer.join().unwrap();
        for f in faults {
            f.join().unwrap();
        }
    }

    #[test]
    fn shuttle_fault_vs_replace_random() {
        shuttle::check_random(scenario, 3000);
    }

    #[test]
    fn shuttle_fault_vs_replace_pct() {
        shuttle::check_pct(scenario, 3000, 3);
    }
}

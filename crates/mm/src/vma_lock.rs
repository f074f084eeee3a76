//! The per-VMA lock that lets page faults run without `mmap_lock`.

use std::time::Instant;

use crate::lockstat::{self, LockClass};
use crate::sync::{AtomicU32, Ordering};

/// The per-VMA lock: a reader count and a writer bit in one word.
///
/// Readers (page faults) only try: a fault that cannot have the lock at
/// once falls back to `mmap_lock`. A writer (holding `mmap_lock` for write)
/// sets the writer bit and waits for the readers inside to leave; the bit
/// is never cleared, because a write-locked VMA is about to be replaced.
#[derive(Debug)]
pub(crate) struct VmaLock {
    state: AtomicU32,
}

const WRITER: u32 = 1 << 31;

impl VmaLock {
    pub(crate) fn new() -> VmaLock {
        VmaLock {
            state: AtomicU32::new(0),
        }
    }

    /// Take a read lock if no writer has claimed the VMA, held until the
    /// guard drops (as `lock_vma_under_rcu` and `vma_end_read` pair up).
    #[inline]
    pub(crate) fn try_read_guard(&self) -> Option<VmaReadGuard<'_>> {
        self.try_read().then_some(VmaReadGuard(self))
    }

    /// Take a read lock if no writer has claimed the VMA; the caller
    /// releases it with [`read_unlock`](Self::read_unlock).
    #[inline]
    pub(crate) fn try_read(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & WRITER != 0 {
                lockstat::try_failed(LockClass::VmaLock);
                return false;
            }
            match self
                .state
                .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => {
                    lockstat::acquired(LockClass::VmaLock);
                    return true;
                }
                Err(now) => s = now,
            }
        }
    }

    /// Drop a read lock taken by [`try_read`](Self::try_read).
    #[inline]
    pub(crate) fn read_unlock(&self) {
        self.state.fetch_sub(1, Ordering::Release);
    }

    /// Claim the VMA for a writer and wait until no reader is inside.
    /// Idempotent: a VMA already claimed returns at once.
    pub(crate) fn write_lock(&self) {
        let prev = self.state.fetch_or(WRITER, Ordering::Acquire);
        if prev & WRITER != 0 {
            return;
        }
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
        lockstat::acquired_after_wait(LockClass::VmaLock, since);
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
pub(crate) struct VmaReadGuard<'a>(&'a VmaLock);

impl Drop for VmaReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.read_unlock();
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
                    if v.lock().try_read() {
                        let writable = v.flags().contains(VmFlags::WRITE);
                        assert!(
                            !(writable && published.load(Ordering::SeqCst)),
                            "a fault holds the old VMA while its replacement is published"
                        );
                        v.lock().read_unlock();
                    } else {
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
                        assert!(v.lock().try_read(), "the new VMA must be lockable");
                        v.lock().read_unlock();
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

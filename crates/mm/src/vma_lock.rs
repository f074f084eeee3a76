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

    /// Take a read lock if no writer has claimed the VMA.
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

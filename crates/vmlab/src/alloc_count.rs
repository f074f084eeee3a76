//! A global allocator that counts live heap bytes.
//!
//! Memory per entry of `std::collections::BTreeMap` cannot be read from the
//! map itself, and the maple tree's own statistics leave out the values'
//! heap boxes. Measuring the change in live bytes around a build gives one
//! honest number for every implementation. This is the only module in the
//! crate allowed to use `unsafe`, because `GlobalAlloc` is an unsafe trait.
//!
//! The count is the sum of requested `Layout` sizes: it leaves out the
//! system allocator's own headers and rounding, for every implementation
//! alike. Counting is on only inside [`net_allocated`]; elsewhere an
//! allocation pays one read of a flag that never changes, so timed runs
//! (and many threads allocating at once in `vmbench run`) do not contend
//! on a shared counter.

#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Bytes allocated minus bytes freed while counting is on.
static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Whether allocations are being counted (only inside `net_allocated`).
static COUNTING: AtomicBool = AtomicBool::new(false);

fn add(bytes: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE_BYTES.fetch_add(bytes, Ordering::Relaxed);
    }
}

fn sub(bytes: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE_BYTES.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Wrapper around [`System`] that tracks live bytes; install it with
/// `#[global_allocator]`.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc;

/// Run `f` and return its result with the bytes it left allocated (bytes
/// allocated minus bytes freed while it ran, 0 if it freed more). Call it
/// on a quiet process: other threads' allocations in the meantime count
/// too.
pub fn net_allocated<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LIVE_BYTES.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::SeqCst);
    let r = f();
    COUNTING.store(false, Ordering::SeqCst);
    let net = LIVE_BYTES.load(Ordering::Relaxed);
    // A net decrease wraps around; report it as nothing left allocated.
    (r, if net > usize::MAX / 2 { 0 } else { net })
}

// SAFETY: every method forwards to `System` with the caller's own
// arguments, so `System`'s guarantees are this allocator's; the counting
// touches only atomics.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract for
        // `layout`, which is exactly `System::alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            add(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as `alloc`, forwarded unchanged.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            add(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator
        // (hence from `System`) with this `layout`.
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr`/`layout` describe a live block
        // from this allocator and that `new_size` is valid for `layout`'s
        // alignment, which is `System::realloc`'s contract.
        let new_ptr = unsafe { System.realloc(ptr, layout, new_size) };
        if !new_ptr.is_null() {
            // Add before subtracting so the counter never dips below the
            // true value even transiently.
            add(new_size);
            sub(layout.size());
        }
        new_ptr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_a_live_allocation() {
        // Other test threads may allocate concurrently, so only check that a
        // large block is visible while alive (other threads' noise is small).
        let (block, net) = net_allocated(|| vec![0u8; 64 << 20]);
        assert!(net >= 60 << 20, "{net}");
        let ((), net) = net_allocated(|| drop(block));
        assert_eq!(net, 0);
    }
}

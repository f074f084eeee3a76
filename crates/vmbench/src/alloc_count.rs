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
//! alike. Counting costs one relaxed atomic add per allocation, which every
//! timed write path pays equally.

#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes currently allocated through [`CountingAlloc`] and not yet freed.
static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Wrapper around [`System`] that tracks live bytes; install it with
/// `#[global_allocator]`.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc;

/// Bytes allocated and not yet freed, process wide, right now.
///
/// Only differences between two calls on a quiet process are meaningful.
pub fn live_bytes() -> usize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees carry over; the only addition is
// updating an atomic counter, which never allocates or touches the memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract for
        // `layout`, which is exactly `System::alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as `alloc`, forwarded unchanged.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator
        // (hence from `System`) with this `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr`/`layout` describe a live block
        // from this allocator and that `new_size` is valid for `layout`'s
        // alignment, which is `System::realloc`'s contract.
        let new_ptr = unsafe { System.realloc(ptr, layout, new_size) };
        if !new_ptr.is_null() {
            // Add before subtracting so the counter never dips below the
            // true value even transiently.
            LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
            LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
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
        let before = live_bytes();
        let block = vec![0u8; 64 << 20];
        let during = live_bytes();
        assert!(
            during.wrapping_sub(before) >= 60 << 20,
            "{before} -> {during}"
        );
        drop(block);
    }
}

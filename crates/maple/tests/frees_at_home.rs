//! Memory a thread's writes retire is freed by that thread, once the
//! grace period has passed, however many other threads collect
//! meanwhile: as the kernel runs an RCU callback on the CPU that queued
//! it. A process of its own, with this one test: another test's thread
//! pinned meanwhile holds grace periods back, and the writer, having
//! waited its bounded while, leaves with batches still in flight, which
//! are then freed away from home (`garbage_bound.rs` once shared this
//! file, and the pair failed about 1 run in 15).
#![cfg(not(vmscale_shuttle))]

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;

use maple::MapleTree;

thread_local! {
    /// Set on the thread that writes.
    static WRITER: Cell<bool> = const { Cell::new(false) };
}

/// Values dropped on the writing thread, and on any other.
static AT_HOME: AtomicUsize = AtomicUsize::new(0);
static AWAY: AtomicUsize = AtomicUsize::new(0);

/// A value that counts where it is dropped.
struct Located;

impl Drop for Located {
    fn drop(&mut self) {
        let home = WRITER.with(Cell::get);
        if home { &AT_HOME } else { &AWAY }.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn retired_values_are_freed_by_the_thread_that_retired_them() {
    const WRITES: usize = if cfg!(miri) { 300 } else { 5000 };
    let tree = MapleTree::new();
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            WRITER.with(|w| w.set(true));
            for _ in 0..WRITES {
                // Each store retires the value the entry held.
                tree.write().store_range(0..=9, Located).unwrap();
            }
            barrier.wait(); // the other thread collects
            barrier.wait();
            for _ in 0..1000 {
                if AT_HOME.load(Ordering::Relaxed) + AWAY.load(Ordering::Relaxed) >= WRITES - 1 {
                    break;
                }
                maple::pin().flush();
                std::thread::yield_now();
            }
        });
        s.spawn(|| {
            barrier.wait();
            // Collections here find the writer's retired memory past its
            // grace period; before, they freed it on this thread.
            for _ in 0..200 {
                maple::pin().flush();
            }
            barrier.wait();
        });
    });
    // Every value but the one the tree holds is dropped, and on the writer.
    assert_eq!(
        AWAY.load(Ordering::Relaxed),
        0,
        "values freed away from home"
    );
    assert_eq!(AT_HOME.load(Ordering::Relaxed), WRITES - 1);
    drop(tree);
}

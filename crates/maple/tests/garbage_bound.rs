//! A thread that never flushes still frees what its writes retire, at
//! its writes: its garbage stays bounded. A process of its own, so that
//! no other test's thread holds grace periods back (the bounds below are
//! what one thread's own pins allow).
#![cfg(not(vmscale_shuttle))]

use std::sync::atomic::{AtomicUsize, Ordering};

use maple::MapleTree;

/// Values alive now.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// A value that counts itself in [`LIVE`].
struct Counted;

impl Counted {
    fn new() -> Counted {
        LIVE.fetch_add(1, Ordering::Relaxed);
        Counted
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A write made with no guard held frees what came back at once; a
/// thread that holds a guard across its writes frees at its flushes,
/// outside its callers' locks, and if it never flushes, at its writes
/// once 256 batches (16384 frees) wait: either way its garbage stays
/// bounded.
#[test]
#[cfg_attr(miri, ignore = "bounds over 100 000 writes, not memory safety")]
fn garbage_stays_bounded_without_a_flush() {
    let tree = MapleTree::new();
    let mut unpinned = 0;
    for _ in 0..50_000 {
        tree.write().store_range(0..=9, Counted::new()).unwrap();
        unpinned = unpinned.max(LIVE.load(Ordering::Relaxed));
    }
    let mut held = 0;
    let mut guard = maple::pin();
    for i in 0..50_000 {
        tree.write().store_range(0..=9, Counted::new()).unwrap();
        held = held.max(LIVE.load(Ordering::Relaxed));
        if i % 100 == 99 {
            guard.repin();
        }
    }
    drop(guard);
    eprintln!("most alive: {unpinned} with no guard held, {held} with one");
    assert!(unpinned <= 2048, "{unpinned} values alive, no guard held");
    assert!(
        held <= 20_000,
        "{held} values alive, a guard held, no flush"
    );
    // And a flush frees the rest (which also keeps LeakSanitizer quiet:
    // nothing retired is left in the collector at exit).
    for _ in 0..10_000 {
        if LIVE.load(Ordering::Relaxed) == 1 {
            break;
        }
        maple::pin().flush();
        std::thread::yield_now();
    }
    drop(tree);
    assert_eq!(LIVE.load(Ordering::Relaxed), 0);
}

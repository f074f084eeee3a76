//! A thread that holds one grace period across many writes, and flushes
//! now and then, frees what its writes retire as fast as they retire it.
//! This test has its own process: another test's thread pinned meanwhile
//! would hold grace periods back, and this one's garbage would move the
//! node-memory mark that `reclaim.rs` watches.
#![cfg(not(vmscale_shuttle))]

use maple::MapleTree;

/// Values alive now: made less dropped.
static LIVE: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

/// A value that counts itself in [`LIVE`].
struct Counted;

impl Counted {
    fn new() -> Counted {
        LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Counted
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A thread that holds one guard across its writes, as a QSBR reader
/// does, and flushes every `EVERY` writes lets go of what its writes
/// retire as fast as they retire it, however much that is between two
/// flushes: the collector runs at most 512 frees a collection, and a
/// flush used to ask for one collection, so with 1000 retired values a
/// flush the backlog grew by about 500 values a flush (100 000 after
/// this test's 200 flushes).
#[test]
#[cfg_attr(miri, ignore = "a pace over 200 000 writes, not memory safety")]
fn a_long_held_guard_lets_go_as_fast_as_it_retires() {
    const EVERY: u64 = 1000;
    const FLUSHES: u64 = 200;
    let tree = MapleTree::new();
    tree.write().store_range(0..=9, Counted::new()).unwrap();
    let mut guard = maple::pin();
    let mut most = 0;
    for i in 0..EVERY * FLUSHES {
        // Overwrites the one entry: retires the value it held.
        tree.write().store_range(0..=9, Counted::new()).unwrap();
        if i % EVERY == EVERY - 1 {
            guard.repin();
            guard.flush();
            most = most.max(LIVE.load(std::sync::atomic::Ordering::Relaxed));
        }
    }
    // What the last flush's grace period has not yet passed waits: one
    // flush's worth with this thread alone, and slack for two more.
    assert!(
        most <= 3 * EVERY as isize + 1,
        "{most} values alive at a flush, with {EVERY} retired between flushes"
    );
    // And once the guard is gone, everything retired is freed.
    drop(guard);
    drop(tree);
    for _ in 0..64 {
        if LIVE.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            break;
        }
        maple::pin().flush();
    }
    assert_eq!(LIVE.load(std::sync::atomic::Ordering::Relaxed), 0);
}

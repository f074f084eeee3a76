//! A value whose `Drop` panics must not take other values with it: every
//! other value of the batch is still dropped, the tree stays whole, and a
//! panic in a deferred free stays out of unrelated `pin`s. Small enough
//! for Miri, which runs these with the rest of the unit tests.

use crate::MapleTree;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Counts its drops in `dropped`; panics when dropped if `bomb`.
struct Tracked {
    dropped: Arc<AtomicUsize>,
    bomb: bool,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
        if self.bomb {
            panic!("a value's Drop panicked (on purpose)");
        }
    }
}

const N: u64 = if cfg!(miri) { 40 } else { 200 };

/// A tree of `N` values, the one at `bomb` panicking when dropped, and
/// the counter of their drops.
fn tree_with_bomb(bomb: u64) -> (MapleTree<Tracked>, Arc<AtomicUsize>) {
    let dropped = Arc::new(AtomicUsize::new(0));
    let mut tree = MapleTree::new();
    for i in 0..N {
        let v = Tracked {
            dropped: Arc::clone(&dropped),
            bomb: i == bomb,
        };
        tree.store_range(i * 10..=i * 10 + 4, v).unwrap();
    }
    (tree, dropped)
}

#[test]
fn an_exclusive_erase_drops_every_other_value() {
    let (mut tree, dropped) = tree_with_bomb(N / 2);
    let r = catch_unwind(AssertUnwindSafe(|| tree.erase_range(0..=N * 10)));
    assert!(r.is_err(), "the panic reaches the writer");
    assert_eq!(dropped.load(Ordering::SeqCst), N as usize);
    tree.validate().unwrap();
    assert!(tree.is_empty());
    // The writer's scratch space holds nothing stale: more writes work.
    for i in 0..N {
        let v = Tracked {
            dropped: Arc::clone(&dropped),
            bomb: false,
        };
        tree.store_range(i..=i, v).unwrap();
    }
    tree.erase_range(0..=N).unwrap();
    tree.validate().unwrap();
    assert_eq!(dropped.load(Ordering::SeqCst), 2 * N as usize);
}

#[test]
fn an_unshared_writer_drops_every_other_value() {
    let (tree, dropped) = tree_with_bomb(3);
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: this thread is the tree's only user and holds no
        // reference read from it.
        unsafe { tree.write_unshared() }.erase_range(0..=N * 10)
    }));
    assert!(r.is_err());
    assert_eq!(dropped.load(Ordering::SeqCst), N as usize);
    tree.validate().unwrap();
    // The panic left the scratch space empty for the next writer.
    let v = Tracked {
        dropped: Arc::clone(&dropped),
        bomb: false,
    };
    tree.write().store_range(5..=9, v).unwrap();
    tree.validate().unwrap();
    assert_eq!(tree.len(), 1);
}

#[test]
fn dropping_the_tree_drops_every_other_value() {
    let (tree, dropped) = tree_with_bomb(0);
    let r = catch_unwind(AssertUnwindSafe(move || drop(tree)));
    assert!(r.is_err());
    assert_eq!(dropped.load(Ordering::SeqCst), N as usize);
}

#[test]
fn a_deferred_panic_stays_out_of_other_pins() {
    let (tree, dropped) = tree_with_bomb(7);
    tree.write().erase_range(0..=N * 10).unwrap();
    // The frees run inside later pins, on this thread here; none of those
    // pins may panic, and every value is dropped in the end.
    crate::sync::settle(|| dropped.load(Ordering::SeqCst) == N as usize);
    assert_eq!(dropped.load(Ordering::SeqCst), N as usize);
    tree.validate().unwrap();
}

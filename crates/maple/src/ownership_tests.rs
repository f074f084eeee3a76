//! The ownership strategies: every stored `Arc` is released exactly once
//! (the pieces of a split range and a cloned tree share it), inline values
//! come back bit for bit, and `ArcRef` views count nothing. Small enough
//! for Miri, which runs these with the rest of the unit tests.

use crate::{Direct, Entry, MapleTree};
use std::num::NonZeroU64;
use std::sync::Arc;

#[test]
fn direct_arcs_are_shared_by_split_pieces_and_released_once() {
    let a = Arc::new("a".to_string());
    let b = Arc::new("b".to_string());
    let mut tree = MapleTree::with_ownership(Direct);
    tree.store_range(0..=99, Arc::clone(&a)).unwrap();
    // A store inside the range leaves two pieces, both holding `a`.
    tree.store_range(40..=59, Arc::clone(&b)).unwrap();
    assert_eq!(Arc::strong_count(&a), 3);
    let g = crate::pin();
    let pieces: Vec<_> = tree
        .iter(&g)
        .map(|e| (e.first(), e.last(), e.value().get().as_str()))
        .collect();
    assert_eq!(pieces, [(0, 39, "a"), (40, 59, "b"), (60, 99, "a")]);
    // Reads count nothing; `to_arc` counts one, dropped with it.
    let r = tree.load(70, &g).unwrap();
    assert_eq!(Arc::strong_count(&a), 3);
    assert!(std::ptr::eq(r.as_ptr(), Arc::as_ptr(&a)));
    drop(r.to_arc());
    assert_eq!(Arc::strong_count(&a), 3);
    drop(g);
    // A clone of the tree holds its own counts.
    let copy = tree.clone();
    assert_eq!(Arc::strong_count(&a), 5);
    assert_eq!(tree.erase(10), Some(0..=39));
    assert_eq!(Arc::strong_count(&a), 4);
    drop(tree);
    // The copy still holds `a` twice and `b` once.
    assert_eq!((Arc::strong_count(&a), Arc::strong_count(&b)), (3, 2));
    drop(copy);
    assert_eq!((Arc::strong_count(&a), Arc::strong_count(&b)), (1, 1));
}

#[test]
fn direct_arcs_written_beside_readers_are_released_after_the_grace_period() {
    let a = Arc::new(1u64);
    let tree = MapleTree::with_ownership(Direct);
    let n = if cfg!(miri) { 20 } else { 200 };
    for i in 0..n {
        tree.write()
            .store_range(i * 10..=i * 10 + 9, Arc::clone(&a))
            .unwrap();
    }
    let g = crate::pin();
    let held = tree.load(5, &g).unwrap();
    for i in 0..n {
        tree.write().erase(i * 10);
    }
    // The reader's view stays valid inside its grace period.
    assert_eq!(*held, 1);
    drop(g);
    assert!(
        crate::sync::settle(|| Arc::strong_count(&a) == 1),
        "count {}",
        Arc::strong_count(&a)
    );
    assert!(tree.is_empty());
}

#[test]
fn inline_values_round_trip() {
    let g = crate::pin();
    let mut small = MapleTree::with_ownership(Direct);
    for (i, v) in [0u32, 1, u32::MAX, 0x8000_0000].into_iter().enumerate() {
        small
            .store_range(i as u64 * 10..=i as u64 * 10 + 9, v)
            .unwrap();
    }
    small.store_range(12..=13, 7).unwrap(); // splits the second range
    let got: Vec<_> = small.iter(&g).map(Entry::parts).collect();
    assert_eq!(
        got,
        [
            (0, 9, 0),
            (10, 11, 1),
            (12, 13, 7),
            (14, 19, 1),
            (20, 29, u32::MAX),
            (30, 39, 0x8000_0000)
        ]
    );
    small.validate().unwrap();

    let mut signed = MapleTree::with_ownership(Direct);
    signed.store_range(0..=0, i32::MIN).unwrap();
    signed.store_range(1..=1, -1i32).unwrap();
    assert_eq!(
        (signed.load(0, &g), signed.load(1, &g)),
        (Some(i32::MIN), Some(-1))
    );

    let mut chars = MapleTree::with_ownership(Direct);
    chars.store_range(0..=0, char::MAX).unwrap();
    chars.store_range(1..=1, '\0').unwrap();
    assert_eq!(
        (chars.load(0, &g), chars.load(1, &g)),
        (Some(char::MAX), Some('\0'))
    );

    let mut flags = MapleTree::with_ownership(Direct);
    flags.store_range(0..=9, false).unwrap();
    flags.store_range(10..=19, true).unwrap();
    assert_eq!(
        (flags.load(5, &g), flags.load(15, &g)),
        (Some(false), Some(true))
    );

    let words = MapleTree::with_ownership(Direct);
    words
        .write()
        .store_range(0..=u64::MAX, NonZeroU64::MAX)
        .unwrap();
    words.write().store_range(5..=5, NonZeroU64::MIN).unwrap();
    assert_eq!(words.load(4, &g), Some(NonZeroU64::MAX));
    assert_eq!(words.load(5, &g), Some(NonZeroU64::MIN));
    assert_eq!(words.len(), 3);
}

#[test]
fn static_references_are_stored_as_they_are() {
    static NAMES: [&str; 2] = ["text", "data"];
    let mut tree = MapleTree::with_ownership(Direct);
    tree.store_range(0..=9, &NAMES[0]).unwrap();
    tree.store_range(10..=19, &NAMES[1]).unwrap();
    let g = crate::pin();
    let v = tree.load(12, &g).unwrap();
    assert!(std::ptr::eq(v, &NAMES[1]));
}

#[test]
fn single_threaded_values_need_not_be_send() {
    use std::rc::Rc;
    let a = Rc::new(1);
    let mut tree = MapleTree::new();
    tree.store_range(0..=9, Rc::clone(&a)).unwrap();
    tree.store_range(3..=4, Rc::new(2)).unwrap(); // splits: two pieces share `a`'s box
    let g = crate::pin();
    let got: Vec<_> = tree
        .iter(&g)
        .map(Entry::parts)
        .map(|(f, l, v)| (f, l, **v))
        .collect();
    assert_eq!(got, [(0, 2, 1), (3, 4, 2), (5, 9, 1)]);
    assert_eq!(Rc::strong_count(&a), 2);
    drop(g);
    drop(tree);
    assert_eq!(Rc::strong_count(&a), 1);
}

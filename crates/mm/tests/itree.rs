//! Model test of `mm::itree`: random operation sequences run on both kinds
//! and on a brute-force oracle (a `BTreeMap` scanned in full for every
//! overlap query). Every result is compared, every step is followed by
//! `validate()` and a full comparison of the contents, and every refused
//! call must leave the tree exactly as it was.
//!
//! `MM_PROPTEST_CASES` sets the number of sequences (default 64).

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use mm::itree::{Entry, Itree, ItreeKind};
use mm::Errno;
use proptest::prelude::*;

type Key = (u64, u64, u64);
type Oracle = BTreeMap<Key, u32>;

#[derive(Debug, Clone)]
enum Op {
    /// Insert `[first, first + span]` (saturating) under `id`.
    Insert {
        first: u64,
        span: u64,
        id: u64,
    },
    /// Insert a range with `first > last`: must fail with EINVAL.
    InsertBackwards {
        first: u64,
        gap: u64,
        id: u64,
    },
    /// Insert the key of the `pick`-th present entry again: EEXIST.
    InsertExisting {
        pick: usize,
    },
    /// Insert `count` clustered intervals, to build deeper trees.
    Fill {
        base: u64,
        count: u64,
        id: u64,
    },
    /// Remove the `pick`-th present entry.
    RemoveExisting {
        pick: usize,
    },
    /// Remove a key that may or may not be present.
    Remove {
        first: u64,
        span: u64,
        id: u64,
    },
    /// Remove every other present entry, to exercise merges.
    Thin,
    /// Look a key up.
    Get {
        first: u64,
        span: u64,
        id: u64,
    },
    /// Overlap query; `first > last` allowed (empty query).
    Query {
        first: u64,
        last: u64,
    },
    /// Visit all entries but stop after `stop` of them.
    VisitSome {
        stop: usize,
    },
    Clear,
}

fn coord() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0u64..96,
        1 => (u64::MAX - 40)..=u64::MAX,
        1 => any::<u64>(),
    ]
}

fn span() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0u64..8,
        2 => 0u64..200,
        1 => Just(u64::MAX),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (coord(), span(), 0u64..3).prop_map(|(first, span, id)| Op::Insert { first, span, id }),
        2 => (1u64..=u64::MAX, any::<u64>(), any::<u64>())
            .prop_map(|(first, gap, id)| Op::InsertBackwards { first, gap, id }),
        3 => any::<usize>().prop_map(|pick| Op::InsertExisting { pick }),
        2 => (0u64..500, 1u64..400, 0u64..3).prop_map(|(base, count, id)| Op::Fill { base, count, id }),
        10 => any::<usize>().prop_map(|pick| Op::RemoveExisting { pick }),
        4 => (coord(), span(), 0u64..3).prop_map(|(first, span, id)| Op::Remove { first, span, id }),
        1 => Just(Op::Thin),
        4 => (coord(), span(), 0u64..3).prop_map(|(first, span, id)| Op::Get { first, span, id }),
        10 => (coord(), coord()).prop_map(|(first, last)| Op::Query { first, last }),
        2 => (0usize..50).prop_map(|stop| Op::VisitSome { stop }),
        1 => Just(Op::Clear),
    ]
}

fn key(first: u64, span: u64, id: u64) -> Key {
    (first, first.saturating_add(span), id)
}

fn triple(e: &Entry<'_, u32>) -> (Key, u32) {
    ((e.first, e.last, e.id), *e.value)
}

fn contents(tree: &Itree<u32>) -> Vec<(Key, u32)> {
    let mut out = Vec::new();
    let flow = tree.visit_all(|e| {
        out.push(triple(&e));
        ControlFlow::Continue(())
    });
    assert!(flow.is_continue());
    out
}

fn oracle_overlap(oracle: &Oracle, first: u64, last: u64) -> Vec<(Key, u32)> {
    oracle
        .iter()
        .filter(|(&(f, l, _), _)| f <= last && first <= l && first <= last)
        .map(|(&k, &v)| (k, v))
        .collect()
}

fn nth_key(oracle: &Oracle, pick: usize) -> Option<Key> {
    if oracle.is_empty() {
        return None;
    }
    oracle.keys().nth(pick % oracle.len()).copied()
}

/// Applies `op` to `tree` and `oracle` and checks the result; `value` is a
/// fresh value for insertions.
fn step(
    tree: &mut Itree<u32>,
    oracle: &mut Oracle,
    op: &Op,
    value: u32,
) -> Result<(), TestCaseError> {
    let before = (contents(tree), tree.height());
    let mut refused = false;
    match *op {
        Op::Insert { first, span, id } => {
            let k = key(first, span, id);
            let got = tree.insert(k.0, k.1, k.2, value);
            if let std::collections::btree_map::Entry::Vacant(slot) = oracle.entry(k) {
                prop_assert_eq!(got, Ok(()));
                slot.insert(value);
            } else {
                prop_assert_eq!(got, Err(Errno::EEXIST));
                refused = true;
            }
        }
        Op::InsertBackwards { first, gap, id } => {
            let last = first - 1 - gap % first;
            prop_assert_eq!(tree.insert(first, last, id, value), Err(Errno::EINVAL));
            refused = true;
        }
        Op::InsertExisting { pick } => {
            if let Some(k) = nth_key(oracle, pick) {
                prop_assert_eq!(tree.insert(k.0, k.1, k.2, value), Err(Errno::EEXIST));
                refused = true;
            }
        }
        Op::Fill { base, count, id } => {
            for j in 0..count {
                // Libc-like: runs of neighbouring segments, some repeated
                // by other ids.
                let first = base + j * 3 % 97;
                let k = (first, first + j % 5, id);
                let got = tree.insert(k.0, k.1, k.2, value);
                if let std::collections::btree_map::Entry::Vacant(slot) = oracle.entry(k) {
                    prop_assert_eq!(got, Ok(()));
                    slot.insert(value);
                } else {
                    prop_assert_eq!(got, Err(Errno::EEXIST));
                }
            }
        }
        Op::RemoveExisting { pick } => {
            if let Some(k) = nth_key(oracle, pick) {
                prop_assert_eq!(tree.remove(k.0, k.1, k.2), oracle.remove(&k));
            }
        }
        Op::Remove { first, span, id } => {
            let k = key(first, span, id);
            let want = oracle.remove(&k);
            refused = want.is_none();
            prop_assert_eq!(tree.remove(k.0, k.1, k.2), want);
        }
        Op::Thin => {
            let keys: Vec<Key> = oracle.keys().step_by(2).copied().collect();
            for k in keys {
                prop_assert_eq!(tree.remove(k.0, k.1, k.2), oracle.remove(&k));
            }
        }
        Op::Get { first, span, id } => {
            let k = key(first, span, id);
            prop_assert_eq!(tree.get(k.0, k.1, k.2), oracle.get(&k));
            if let Some(k) = nth_key(oracle, first as usize) {
                prop_assert_eq!(tree.get(k.0, k.1, k.2), oracle.get(&k));
            }
            refused = true;
        }
        Op::Query { first, last } => {
            let mut got = Vec::new();
            let flow = tree.visit_overlap(first, last, |e| {
                got.push(triple(&e));
                ControlFlow::Continue(())
            });
            prop_assert!(flow.is_continue());
            prop_assert_eq!(got, oracle_overlap(oracle, first, last));
            refused = true;
        }
        Op::VisitSome { stop } => {
            let mut got = Vec::new();
            let flow = tree.visit_all(|e| {
                got.push(triple(&e));
                if got.len() == stop {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            });
            let all: Vec<(Key, u32)> = oracle.iter().map(|(&k, &v)| (k, v)).collect();
            let stops = stop >= 1 && stop <= all.len();
            prop_assert_eq!(flow.is_break(), stops);
            let seen = if stops { stop } else { all.len() };
            prop_assert_eq!(&got[..], &all[..seen]);
            refused = true;
        }
        Op::Clear => {
            tree.clear();
            oracle.clear();
            prop_assert_eq!(tree.height(), 0);
        }
    }
    if let Err(msg) = tree.validate() {
        return Err(TestCaseError::fail(format!(
            "{} after {op:?}: {msg}",
            tree.kind()
        )));
    }
    prop_assert_eq!(tree.len(), oracle.len());
    prop_assert_eq!(tree.is_empty(), oracle.is_empty());
    let now = contents(tree);
    let want: Vec<(Key, u32)> = oracle.iter().map(|(&k, &v)| (k, v)).collect();
    prop_assert_eq!(&now, &want);
    if refused {
        // A refused or read-only call must leave even the shape alone.
        prop_assert_eq!((now, tree.height()), before);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("MM_PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64),
        ..ProptestConfig::default()
    })]

    #[test]
    fn both_kinds_match_the_oracle(ops in proptest::collection::vec(op(), 1..200)) {
        for kind in ItreeKind::ALL {
            let mut tree = Itree::new(kind);
            let mut oracle = Oracle::new();
            for (i, op) in ops.iter().enumerate() {
                step(&mut tree, &mut oracle, op, i as u32)?;
            }
        }
    }
}

/// Heights stay logarithmic on a large ascending build (the worst order
/// for an unbalanced tree) and on its removal in the same order.
#[test]
fn heights_stay_logarithmic() {
    for kind in ItreeKind::ALL {
        let mut tree = Itree::new(kind);
        let n = 20_000u64;
        for i in 0..n {
            tree.insert(i, i + 16, i % 3, ()).unwrap();
        }
        let bound = match kind {
            ItreeKind::Rb => 2 * 15, // 2 log2(n + 1)
            ItreeKind::BTree => 5,   // ceil(log8(n)) + 1 with half-full nodes
        };
        assert!(tree.height() <= bound, "{kind}: height {}", tree.height());
        tree.validate().unwrap();
        for i in 0..n / 2 {
            assert_eq!(tree.remove(i, i + 16, i % 3), Some(()));
        }
        tree.validate().unwrap();
        assert_eq!(tree.len(), (n / 2) as usize);
    }
}

#[test]
fn empty_tree_answers_nothing() {
    for kind in ItreeKind::ALL {
        let mut tree: Itree<u8> = Itree::new(kind);
        assert!(tree.is_empty());
        assert_eq!((tree.len(), tree.height()), (0, 0));
        assert_eq!(tree.get(0, 0, 0), None);
        assert_eq!(tree.remove(0, u64::MAX, 0), None);
        assert!(tree.visit_all(|_| ControlFlow::Break(())).is_continue());
        assert!(tree
            .visit_overlap(0, u64::MAX, |_| ControlFlow::Break(()))
            .is_continue());
        tree.validate().unwrap();
        assert_eq!(
            format!("{tree:?}"),
            format!("Itree {{ kind: {kind:?}, len: 0, entries: [] }}")
        );
    }
}

#[test]
fn kinds_parse_and_print() {
    for kind in ItreeKind::ALL {
        assert_eq!(kind.name().parse::<ItreeKind>(), Ok(kind));
        assert_eq!(kind.to_string(), kind.name());
        assert_eq!(Itree::<()>::new(kind).kind(), kind);
    }
    let err = "redblack".parse::<ItreeKind>().unwrap_err();
    assert!(err.contains("rb") && err.contains("btree"), "{err}");
}

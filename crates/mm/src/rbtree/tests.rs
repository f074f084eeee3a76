//! Tests of the red-black core with two toy augments: the largest weight
//! in a subtree, whose propagation stops early, and the subtree size,
//! which changes all the way to the root. A randomised run checks after
//! every step the core's own validation, the summaries against a
//! recomputation from scratch, and the items against a `BTreeMap` model.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{Augment, Tree, NIL};

/// A keyed item, summarised by the subtree size if `SIZE`, else by the
/// largest weight. The vacant item is all zeros, so tests use keys from 1.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Toy<const SIZE: bool> {
    key: u64,
    weight: u64,
}

/// Propagation of the largest weight stops early.
type MaxWeight = Toy<false>;
/// The size changes all the way to the root.
type Size = Toy<true>;

impl<const SIZE: bool> Toy<SIZE> {
    /// `i`'s summary from its own item and its children's summaries.
    fn combine(&self, left: u64, right: u64) -> u64 {
        if SIZE {
            1 + left + right
        } else {
            self.weight.max(left).max(right)
        }
    }

    /// The summary of `i`'s subtree from the items alone, ignoring every
    /// recorded summary.
    fn scratch(tree: &Tree<Self>, i: u32) -> u64 {
        if i == NIL {
            return 0;
        }
        let n = tree.node(i);
        n.item.combine(
            Self::scratch(tree, n.left()),
            Self::scratch(tree, n.right()),
        )
    }
}

impl<const SIZE: bool> Augment for Toy<SIZE> {
    type Value = u64;
    const NONE: u64 = 0;

    fn compute(tree: &Tree<Self>, i: u32) -> u64 {
        let n = tree.node(i);
        n.item
            .combine(tree.node(n.left()).aug, tree.node(n.right()).aug)
    }

    fn is_vacant(&self) -> bool {
        *self == Self::default()
    }
}

/// The node keyed `key`, or where a leaf for it would hang: `(node,
/// parent, right side)`.
fn find<const S: bool>(t: &Tree<Toy<S>>, key: u64) -> (u32, u32, bool) {
    let (mut i, mut parent, mut right) = (t.root(), NIL, false);
    while i != NIL {
        let n = t.node(i);
        if n.item.key == key {
            return (i, parent, right);
        }
        parent = i;
        right = key > n.item.key;
        i = if right { n.right() } else { n.left() };
    }
    (NIL, parent, right)
}

/// Inserts unless the key is present; returns whether it inserted.
fn insert<const S: bool>(t: &mut Tree<Toy<S>>, key: u64, weight: u64) -> bool {
    let (i, parent, right) = find(t, key);
    if i != NIL {
        return false;
    }
    let z = t.link(parent, right, Toy { key, weight }).unwrap();
    t.propagate(parent);
    t.rebalance_insert(z);
    true
}

fn remove<const S: bool>(t: &mut Tree<Toy<S>>, key: u64) -> Option<u64> {
    let (i, _, _) = find(t, key);
    (i != NIL).then(|| t.erase(i).weight)
}

/// Everything the tree should agree on with the model.
fn check<const S: bool>(t: &Tree<Toy<S>>, model: &BTreeMap<u64, u64>) -> Result<(), String> {
    let mut seen = Vec::new();
    t.validate(|i, item| {
        let want = Toy::scratch(t, i);
        if t.node(i).aug != want {
            return Err(format!("node {i}: summary differs from scratch {want:?}"));
        }
        seen.push((item.key, item.weight));
        Ok(())
    })?;
    let want: Vec<(u64, u64)> = model.iter().map(|(&k, &w)| (k, w)).collect();
    if seen != want {
        return Err(format!("in order {seen:?}, model {want:?}"));
    }
    if t.len() != model.len() {
        return Err(format!("len {} but model {}", t.len(), model.len()));
    }
    // Invariant 2 bounds the height by 2 log2(n + 1).
    let bound = 2 * (usize::BITS - (t.len() + 1).leading_zeros()) as usize;
    if t.height() > bound {
        return Err(format!("height {} over {bound}", t.height()));
    }
    Ok(())
}

/// Applies `ops` (key, weight, insert?) to a tree and a model, checking
/// after every step.
fn run<const S: bool>(ops: &[(u64, u64, bool)]) -> Result<(), String> {
    let mut t = Tree::<Toy<S>>::new();
    let mut model = BTreeMap::new();
    for &(key, weight, ins) in ops {
        if ins {
            let fresh = !model.contains_key(&key);
            if fresh {
                model.insert(key, weight);
            }
            if insert(&mut t, key, weight) != fresh {
                return Err(format!("insert {key}: tree and model disagree"));
            }
        } else if remove(&mut t, key) != model.remove(&key) {
            return Err(format!("remove {key}: tree and model disagree"));
        }
        check(&t, &model).map_err(|e| format!("after {key}/{weight}/{ins}: {e}"))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Keys from a small range so that removes hit and slots get reused;
    /// weights from a small range so that summaries often stay put and
    /// propagation stops early.
    #[test]
    fn random_ops_match_the_model(
        ops in prop::collection::vec((1u64..64, 0u64..8, prop::bool::weighted(0.6)), 1..200)
    ) {
        run::<false>(&ops).map_err(TestCaseError::fail)?;
        run::<true>(&ops).map_err(TestCaseError::fail)?;
    }
}

#[test]
fn ascending_descending_and_drain() {
    let mut t = Tree::<MaxWeight>::new();
    let mut model = BTreeMap::new();
    for k in 1..=300u64 {
        for key in [k, 10_000 - k] {
            insert(&mut t, key, key % 17);
            model.insert(key, key % 17);
        }
    }
    check(&t, &model).unwrap();
    for k in (1..=300u64).step_by(3).chain((1..=300).rev()) {
        for key in [k, 10_000 - k] {
            assert_eq!(remove(&mut t, key), model.remove(&key));
        }
        check(&t, &model).unwrap();
    }
    assert_eq!((t.len(), t.root()), (0, NIL));
}

#[test]
fn slots_are_reused() {
    let mut t = Tree::<Size>::new();
    for key in 1..=10 {
        insert(&mut t, key, 0);
    }
    for key in 1..=10 {
        remove(&mut t, key);
    }
    for key in 11..=20 {
        insert(&mut t, key, 0);
    }
    assert_eq!(t.slots(), 11, "sentinel and ten slots");
    check(&t, &(11..=20).map(|k| (k, 0)).collect()).unwrap();
}

#[test]
fn validate_catches_corruption() {
    let build = || {
        let mut t = Tree::<MaxWeight>::new();
        for key in 1..=16 {
            insert(&mut t, key, key);
        }
        t
    };
    let ok = |_: u32, _: &MaxWeight| Ok(());

    let mut t = build();
    let root = t.root();
    t.set_aug(root, 3);
    assert!(t.validate(ok).unwrap_err().contains("summary"));

    let mut t = build();
    t.nodes[root as usize].red = true;
    assert!(t.validate(ok).unwrap_err().contains("root is red"));

    let mut t = build();
    let leaf = (1..t.nodes.len() as u32)
        .find(|&i| t.node(i).left() == NIL && t.node(i).right() == NIL)
        .unwrap();
    t.nodes[leaf as usize].parent = NIL;
    assert!(t.validate(ok).unwrap_err().contains("parent"));

    let mut t = build();
    t.len += 1;
    assert!(t.validate(ok).is_err());

    let mut t = build();
    *t.item_mut(root) = MaxWeight::default();
    assert!(t.validate(ok).unwrap_err().contains("no item"));
}

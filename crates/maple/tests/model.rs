//! Model-based tests: every operation is applied to the maple tree (through
//! the exclusive `&mut` API with each ownership strategy, boxed values and
//! caller's `Arc`s stored directly, and, in parallel, through the shared
//! writer `tree.write()` with values stored in the slot) and to a
//! brute-force oracle (`common::Oracle`), and the
//! results, the structure (`validate`, `len`, `mem_stats`) and the reads are
//! compared after every step.
//!
//! Knobs (environment):
//! * `MAPLE_PROPTEST_CASES` — proptest cases per property (default 64 in
//!   release, 8 in debug builds, halved for the two large-tree properties).
//! * `MAPLE_LARGE_N` — entries in the large deterministic tests (default
//!   100_000 in release, 30_000 in debug).
#![cfg(not(vmscale_shuttle))]
// Empty ranges (`5..=4`) are written on purpose: their refusal is tested.
#![allow(clippy::reversed_empty_ranges)]

mod common;

use std::ops::Bound;
use std::sync::Arc;

use common::Rng;
use common::*;
use maple::{ArcRef, Direct, Error, MapleTree, Ownership, Writer};
use proptest::prelude::*;
use proptest::strategy::Union;

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

fn cases() -> u32 {
    let default = if cfg!(debug_assertions) { 8 } else { 64 };
    env_usize("MAPLE_PROPTEST_CASES", default) as u32
}

fn config() -> ProptestConfig {
    config_with(cases())
}

/// The large-tree properties: half the cases in debug builds.
fn config_heavy() -> ProptestConfig {
    let n = cases();
    config_with(if cfg!(debug_assertions) {
        n.div_ceil(2)
    } else {
        n
    })
}

fn config_with(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        max_shrink_time: 120_000,
        ..ProptestConfig::default()
    }
}

fn large_n() -> u64 {
    let default = if cfg!(debug_assertions) {
        30_000
    } else {
        100_000
    };
    env_usize("MAPLE_LARGE_N", default) as u64
}

// ---------------------------------------------------------------------------
// Values: how the checks get the value id back out of a tree value
// ---------------------------------------------------------------------------

trait Id {
    fn id(&self) -> u32;
}
impl Id for u32 {
    fn id(&self) -> u32 {
        *self
    }
}
impl Id for Tracked {
    fn id(&self) -> u32 {
        self.id
    }
}
impl<X: Id + ?Sized> Id for &X {
    fn id(&self) -> u32 {
        (**self).id()
    }
}
impl Id for ArcRef<'_, Tracked> {
    fn id(&self) -> u32 {
        self.get().id
    }
}

type Entry = (u64, u64, u32);

fn ent<R: Id>(e: Option<maple::Entry<R>>) -> Option<Entry> {
    e.map(|e| (e.first(), e.last(), e.value().id()))
}

fn entries_of<T: Send + Sync + 'static, O: Ownership<T>>(t: &MapleTree<T, O>) -> Vec<Entry>
where
    for<'g> O::Ref<'g>: Id,
{
    let g = maple::pin();
    t.iter(&g)
        .map(parts)
        .map(|(f, l, v)| (f, l, v.id()))
        .collect()
}

/// Panics with the first difference between two entry lists.
fn assert_same_entries(what: &str, got: &[Entry], want: &[Entry]) {
    if got == want {
        return;
    }
    let i = got
        .iter()
        .zip(want.iter())
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    panic!(
        "{what}: entry lists differ at position {i}: got {:?}, want {:?} (got len {}, want len {})\n\
         got[{}..]: {:?}\nwant[{}..]: {:?}",
        got.get(i),
        want.get(i),
        got.len(),
        want.len(),
        i.saturating_sub(2),
        &got[i.saturating_sub(2)..(i + 3).min(got.len())],
        i.saturating_sub(2),
        &want[i.saturating_sub(2)..(i + 3).min(want.len())],
    );
}

// ---------------------------------------------------------------------------
// Operations and strategies
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Op {
    Store(u64, u64),
    Insert(u64, u64),
    Erase(u64),
    EraseRange(u64, u64),
}

/// Shape of an operation mix.
#[derive(Clone, Copy, Debug)]
struct Mix {
    /// keys mostly come from `0..domain` (and `MAX-domain..=MAX`)
    domain: u64,
    /// typical range lengths are `0..4` or `0..maxlen`
    maxlen: u64,
    store: u32,
    insert: u32,
    erase: u32,
    erase_range: u32,
    /// weight of the edge ranges `[0, x]` and `[x, MAX]` with x near the edge
    edge: u32,
    /// weight (per mille of the other weights) of `[0, MAX]`-like wipes
    wipe: u32,
    /// weight of first > last (InvalidRange)
    invalid: u32,
}

fn key(domain: u64) -> BoxedStrategy<u64> {
    prop_oneof![
        24 => 0..domain,
        3 => (MAX - domain)..=MAX,
        1 => Just(0u64),
        1 => Just(MAX),
        1 => any::<u64>(),
    ]
    .boxed()
}

fn range_strategy(m: Mix) -> BoxedStrategy<(u64, u64)> {
    let d = m.domain;
    let normal = (key(d), prop_oneof![3 => 0..4u64, 2 => 0..m.maxlen.max(1)])
        .prop_map(|(f, len)| (f, f.saturating_add(len)));
    let mut arms: Vec<(u32, BoxedStrategy<(u64, u64)>)> = vec![(200, normal.boxed())];
    if m.edge > 0 {
        arms.push((m.edge, (0..d.min(64)).prop_map(|x| (0, x)).boxed()));
        arms.push((m.edge, (0..d.min(64)).prop_map(|x| (MAX - x, MAX)).boxed()));
        arms.push((
            m.edge,
            (0..4u64, 0..4u64)
                .prop_map(|(a, b)| (MAX - a - 4, MAX - b))
                .boxed(),
        ));
    }
    if m.wipe > 0 {
        arms.push((
            m.wipe,
            prop_oneof![
                Just((0, MAX)),
                (0..d).prop_map(|x| (x, MAX)),
                (0..d).prop_map(|x| (0, MAX - x)),
                (0..d, 0..d).prop_map(|(a, b)| (a, MAX - b)),
            ]
            .boxed(),
        ));
    }
    if m.invalid > 0 {
        arms.push((
            m.invalid,
            (key(d), 1..1000u64)
                .prop_filter_map("needs room", |(f, k)| f.checked_sub(k).map(|l| (f, l)))
                .boxed(),
        ));
    }
    Union::new_weighted(arms).boxed()
}

fn op_strategy(m: Mix) -> BoxedStrategy<Op> {
    let r = range_strategy(m);
    let mut arms: Vec<(u32, BoxedStrategy<Op>)> = Vec::new();
    if m.store > 0 {
        arms.push((
            m.store,
            r.clone().prop_map(|(f, l)| Op::Store(f, l)).boxed(),
        ));
    }
    if m.insert > 0 {
        arms.push((
            m.insert,
            r.clone().prop_map(|(f, l)| Op::Insert(f, l)).boxed(),
        ));
    }
    if m.erase > 0 {
        arms.push((m.erase, key(m.domain).prop_map(Op::Erase).boxed()));
    }
    if m.erase_range > 0 {
        arms.push((
            m.erase_range,
            r.prop_map(|(f, l)| Op::EraseRange(f, l)).boxed(),
        ));
    }
    Union::new_weighted(arms).boxed()
}

/// Small key domain: many collisions, splits and overwrites.
const DENSE: Mix = Mix {
    domain: 2000,
    maxlen: 24,
    store: 40,
    insert: 30,
    erase: 15,
    erase_range: 12,
    edge: 3,
    wipe: 1,
    invalid: 3,
};

/// Mostly inserts of short ranges over a wide domain: the tree grows to a
/// thousand-plus entries (height 3-4).
const GROWTH: Mix = Mix {
    domain: 400_000,
    maxlen: 8,
    store: 45,
    insert: 45,
    erase: 5,
    erase_range: 5,
    edge: 1,
    wipe: 0,
    invalid: 1,
};

/// Long ranges and many erase_range calls: big merges and rebalances.
const CHURN: Mix = Mix {
    domain: 30_000,
    maxlen: 3000,
    store: 35,
    insert: 25,
    erase: 15,
    erase_range: 25,
    edge: 2,
    wipe: 1,
    invalid: 2,
};

/// Tiny domain, edges heavy.
const EDGES: Mix = Mix {
    domain: 48,
    maxlen: 6,
    store: 30,
    insert: 30,
    erase: 20,
    erase_range: 20,
    edge: 40,
    wipe: 5,
    invalid: 10,
};

// ---------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------

struct Harness {
    /// Boxed values, exclusive writes.
    tree: MapleTree<Tracked>,
    /// The caller's `Arc`s stored directly, exclusive writes; its values
    /// count their drops in `drops_direct`.
    direct: MapleTree<Arc<Tracked>, Direct>,
    /// Values in the slot, shared writes.
    shared: MapleTree<u32, Direct>,
    oracle: Oracle,
    drops: Arc<DropTable>,
    drops_direct: Arc<DropTable>,
    next_id: u32,
    rng: Rng,
    domain: u64,
}

fn check_stats<T: Send + Sync, O: Ownership<T>>(what: &str, t: &MapleTree<T, O>, n: usize) {
    let s = t.mem_stats();
    assert_eq!(s.entries, n, "{what}: mem_stats.entries != len ({s:?})");
    assert_eq!(
        s.nodes,
        s.leaves + s.internal,
        "{what}: nodes != leaves + internal ({s:?})"
    );
    assert_eq!(s.bytes, s.nodes * 256, "{what}: bytes != nodes*256 ({s:?})");
    if n >= 2 {
        assert!(s.height >= 1, "{what}: height 0 with {n} entries ({s:?})");
        assert!(
            s.leaves * 16 >= n,
            "{what}: {} leaves cannot hold {n} entries ({s:?})",
            s.leaves
        );
        // at most 16 * 10^(h-1) slots in a tree of height h
        let cap = 16u128 * 10u128.pow((s.height - 1).min(30) as u32);
        assert!(
            n as u128 <= cap,
            "{what}: height {} cannot hold {n} entries ({s:?})",
            s.height
        );
        if s.height == 1 {
            assert_eq!((s.leaves, s.internal), (1, 0), "{what}: height 1 ({s:?})");
        } else {
            assert!(
                s.internal >= 1,
                "{what}: height > 1 without internal nodes ({s:?})"
            );
        }
    }
}

impl Harness {
    fn new(max_values: usize, seed: u64, domain: u64) -> Self {
        Harness {
            tree: MapleTree::new(),
            direct: MapleTree::with_ownership(Direct),
            shared: MapleTree::with_ownership(Direct),
            oracle: Oracle::new(),
            drops: DropTable::new(max_values),
            drops_direct: DropTable::new(max_values),
            next_id: 0,
            rng: Rng::new(seed),
            domain,
        }
    }

    fn random_point(&mut self) -> u64 {
        match self.rng.below(10) {
            0..=4 => {
                // a boundary of a random entry (or its neighbour)
                if self.oracle.is_empty() {
                    return self.rng.below(self.domain);
                }
                let n = self.oracle.len() as u64;
                let k = self.rng.below(n) as usize;
                let (f, l, _) = self.oracle.nth(k);
                match self.rng.below(5) {
                    0 => f,
                    1 => l,
                    2 => f.wrapping_sub(1),
                    3 => l.wrapping_add(1),
                    _ => f + (l - f) / 2,
                }
            }
            5..=7 => self.rng.below(self.domain),
            8 => MAX - self.rng.below(self.domain),
            _ => self.rng.next_u64(),
        }
    }

    fn spot_check(&self, ctx: &str, p: u64) {
        let g = maple::pin();
        let want = self.oracle.load_entry(p);
        let got = ent(self.tree.load_entry(p, &g));
        assert_eq!(got, want, "{ctx}: load_entry({p}) (exclusive tree)");
        assert_eq!(
            self.tree.load(p, &g).map(|v| v.id),
            want.map(|e| e.2),
            "{ctx}: load({p}) (exclusive tree)"
        );
        let got = ent(self.shared.load_entry(p, &g));
        assert_eq!(got, want, "{ctx}: load_entry({p}) (shared-writer tree)");
        assert_eq!(
            self.shared.load(p, &g),
            want.map(|e| e.2),
            "{ctx}: load({p}) (shared-writer tree)"
        );
        let got = ent(self.direct.load_entry(p, &g));
        assert_eq!(got, want, "{ctx}: load_entry({p}) (direct tree)");
    }

    fn full_compare(&self, ctx: &str) {
        let want = self.oracle.entries();
        assert_same_entries(
            &format!("{ctx}: iter (exclusive tree)"),
            &entries_of(&self.tree),
            &want,
        );
        assert_same_entries(
            &format!("{ctx}: iter (shared-writer tree)"),
            &entries_of(&self.shared),
            &want,
        );
        assert_same_entries(
            &format!("{ctx}: iter (direct tree)"),
            &entries_of(&self.direct),
            &want,
        );
    }

    /// Checks value `id`'s drop count in both trees that count drops.
    fn check_drop(&self, ctx: &str, id: u32, want: u32, why: &str) {
        for (table, tree) in [(&self.drops, "boxed"), (&self.drops_direct, "direct")] {
            let got = table.count(id);
            assert_eq!(
                got, want,
                "{ctx}: value {id} dropped {got} times from the {tree} tree, want {want}: {why}"
            );
        }
    }

    fn step(&mut self, i: usize, op: Op) {
        let ctx = format!("op #{i} {op:?} (len before {})", self.oracle.len());
        let mut points: Vec<u64> = Vec::new();
        let mut failed = false;
        match op {
            Op::Store(f, l) | Op::Insert(f, l) => {
                let store = matches!(op, Op::Store(..));
                let id = self.next_id;
                self.next_id += 1;
                let val = Tracked::new(id, &self.drops);
                let val_direct = Arc::new(Tracked::new(id, &self.drops_direct));
                let (want, dead) = if store {
                    match self.oracle.store_range(f..=l, id) {
                        Ok(d) => (Ok(()), d),
                        Err(e) => (Err(e), vec![]),
                    }
                } else {
                    (self.oracle.insert_range(f..=l, id), vec![])
                };
                let got = put(&mut self.tree, store, f, l, val);
                assert!(
                    same_result(&got, &want),
                    "{ctx}: exclusive result {got:?}, want {want:?}"
                );
                let got_d = put(&mut self.direct, store, f, l, val_direct);
                assert!(
                    same_result(&got_d, &want),
                    "{ctx}: direct result {got_d:?}, want {want:?}"
                );
                let got_s = put(&mut self.shared.write(), store, f, l, id);
                assert!(
                    same_result(&got_s, &want),
                    "{ctx}: shared-writer result {got_s:?}, want {want:?}"
                );
                if want.is_err() {
                    failed = true;
                    self.check_drop(&ctx, id, 1, "value passed to a failing call");
                } else {
                    self.check_drop(&ctx, id, 0, "value just stored");
                }
                for d in dead {
                    self.check_drop(&ctx, d, 1, "last piece overwritten by an exclusive store");
                }
                points.extend([f, l, f.wrapping_sub(1), l.wrapping_add(1), f / 2 + l / 2]);
            }
            Op::Erase(x) => {
                let (want, dead) = self.oracle.erase(x);
                let got = self.tree.erase(x);
                assert_eq!(got, want, "{ctx}: exclusive erase result");
                let got_d = self.direct.erase(x);
                assert_eq!(got_d, want, "{ctx}: direct erase result");
                let got_s = self.shared.write().erase(x);
                assert_eq!(got_s, want, "{ctx}: shared-writer erase result");
                if let Some(d) = dead {
                    self.check_drop(&ctx, d, 1, "last piece erased by exclusive erase");
                }
                points.extend([x, x.wrapping_sub(1), x.wrapping_add(1)]);
                if let Some((f, l)) = want.map(|r| r.into_inner()) {
                    points.extend([f, l, f.wrapping_sub(1), l.wrapping_add(1)]);
                }
            }
            Op::EraseRange(f, l) => {
                let want = self.oracle.erase_range(f..=l);
                let got = self.tree.erase_range(f..=l);
                let want_unit = want.as_ref().map(|_| ()).map_err(|e| *e);
                assert!(
                    same_result(&got, &want_unit),
                    "{ctx}: exclusive result {got:?}, want {want_unit:?}"
                );
                let got_d = self.direct.erase_range(f..=l);
                assert!(
                    same_result(&got_d, &want_unit),
                    "{ctx}: direct result {got_d:?}, want {want_unit:?}"
                );
                let got_s = self.shared.write().erase_range(f..=l);
                assert!(
                    same_result(&got_s, &want_unit),
                    "{ctx}: shared-writer result {got_s:?}, want {want_unit:?}"
                );
                match want {
                    Ok(dead) => {
                        for d in dead {
                            self.check_drop(
                                &ctx,
                                d,
                                1,
                                "last piece removed by exclusive erase_range",
                            );
                        }
                    }
                    Err(_) => failed = true,
                }
                points.extend([f, l, f.wrapping_sub(1), l.wrapping_add(1), f / 2 + l / 2]);
            }
        }

        // Every value ever created is dropped iff no entry refers to it.
        let created = self.next_id as usize;
        assert_eq!(
            self.drops.total(),
            created - self.oracle.live_values(),
            "{ctx}: total drops != values created - values still referenced"
        );
        assert_eq!(
            self.drops_direct.total(),
            created - self.oracle.live_values(),
            "{ctx}: total drops from the direct tree != values created - values still referenced"
        );

        if let Err(e) = self.tree.validate() {
            panic!("{ctx}: validate (exclusive tree): {e}");
        }
        if let Err(e) = self.shared.validate() {
            panic!("{ctx}: validate (shared-writer tree): {e}");
        }
        if let Err(e) = self.direct.validate() {
            panic!("{ctx}: validate (direct tree): {e}");
        }
        let n = self.oracle.len();
        assert_eq!(self.tree.len(), n, "{ctx}: len (exclusive tree)");
        assert_eq!(self.shared.len(), n, "{ctx}: len (shared-writer tree)");
        assert_eq!(self.tree.is_empty(), n == 0, "{ctx}: is_empty");
        check_stats(&format!("{ctx} (exclusive)"), &self.tree, n);
        check_stats(&format!("{ctx} (shared)"), &self.shared, n);
        check_stats(&format!("{ctx} (direct)"), &self.direct, n);

        points.push(self.random_point());
        points.push(self.random_point());
        for p in points {
            self.spot_check(&ctx, p);
        }
        if failed {
            // A failing call must leave the tree exactly as it was.
            self.full_compare(&format!("{ctx} (after a failing call)"));
        }
    }
}

/// A store (`store`) or an insert through any writer: exclusive trees and
/// shared-writer guards are driven by the same code.
fn put<T, W: Writer<T>>(w: &mut W, store: bool, f: u64, l: u64, v: T) -> Result<(), Error> {
    if store {
        w.store_range(f..=l, v)
    } else {
        w.insert_range(f..=l, v)
    }
}

// ---------------------------------------------------------------------------
// Read-side checks against the oracle
// ---------------------------------------------------------------------------

fn random_point(rng: &mut Rng, o: &Oracle, domain: u64) -> u64 {
    match rng.below(10) {
        0..=4 if !o.is_empty() => {
            let k = rng.below(o.len() as u64) as usize;
            let (f, l, _) = o.nth(k);
            match rng.below(5) {
                0 => f,
                1 => l,
                2 => f.wrapping_sub(1),
                3 => l.wrapping_add(1),
                _ => f + (l - f) / 2,
            }
        }
        0..=7 => rng.below(domain),
        8 => MAX - rng.below(domain),
        _ => rng.next_u64(),
    }
}

fn random_bounds(rng: &mut Rng, o: &Oracle, domain: u64) -> (Bound<u64>, Bound<u64>) {
    let mut a = random_point(rng, o, domain);
    let mut b = random_point(rng, o, domain);
    if a > b {
        std::mem::swap(&mut a, &mut b);
    }
    match rng.below(9) {
        0..=2 => (Bound::Included(a), Bound::Included(b)),
        3 => (Bound::Included(a), Bound::Excluded(b)),
        4 if a < b => (Bound::Excluded(a), Bound::Included(b)),
        4 => (Bound::Included(a), Bound::Unbounded),
        5 => (Bound::Unbounded, Bound::Included(b)),
        6 => (Bound::Unbounded, Bound::Excluded(b)),
        7 => (Bound::Excluded(a), Bound::Unbounded),
        _ => (Bound::Unbounded, Bound::Unbounded),
    }
}

/// Double-ended iteration over `range(bounds)`, mixing `next` and
/// `next_back` at random, compared with the model of a double-ended cursor
/// pair over the oracle's list.
fn check_range_de<T: Send + Sync + 'static, O: Ownership<T>>(
    what: &str,
    t: &MapleTree<T, O>,
    o: &Oracle,
    b: (Bound<u64>, Bound<u64>),
    rng: &mut Rng,
) where
    for<'g> O::Ref<'g>: Id,
{
    let want = o.range_bounds(b);
    let g = maple::pin();
    let mut it = t.range(b, &g);
    let (mut front, mut back) = (0usize, want.len());
    let mut steps = 0;
    let mode = rng.below(4); // 0: forward only, 1: backward only, 2/3: mixed
    loop {
        let fwd = match mode {
            0 => true,
            1 => false,
            _ => rng.chance(1, 2),
        };
        let (got, exp) = if fwd {
            let exp = (front < back).then(|| {
                front += 1;
                want[front - 1]
            });
            (ent(it.next()), exp)
        } else {
            let exp = (front < back).then(|| {
                back -= 1;
                want[back]
            });
            (ent(it.next_back()), exp)
        };
        assert_eq!(
            got,
            exp,
            "{what}: range({b:?}) step {steps} ({}) mismatch; full expected list {:?}",
            if fwd { "next" } else { "next_back" },
            if want.len() <= 12 {
                format!("{want:?}")
            } else {
                format!("<{} entries>", want.len())
            }
        );
        steps += 1;
        if got.is_none() {
            break;
        }
    }
    // Exhausted from both ends: nothing is yielded twice.
    assert_eq!(
        ent(it.next()),
        None,
        "{what}: range({b:?}) next after exhaustion"
    );
    assert_eq!(
        ent(it.next_back()),
        None,
        "{what}: range({b:?}) next_back after exhaustion"
    );
}

/// Model of the cursor as documented in `iter.rs`: `seek(i)` makes `next`
/// return the first entry intersecting `[i, MAX]` and `prev` the last entry
/// ending below `i`; after returning an entry, `next`/`prev` return the
/// entries after/before it; a `None` leaves the position unchanged.
struct CursorModel<'a> {
    all: &'a [Entry],
    next_from: Option<u64>,
    prev_from: Option<u64>,
}

impl CursorModel<'_> {
    fn seek(&mut self, i: u64) {
        self.next_from = Some(i);
        self.prev_from = i.checked_sub(1);
    }
    fn land(&mut self, e: Option<Entry>) -> Option<Entry> {
        if let Some((f, l, _)) = e {
            self.next_from = l.checked_add(1);
            self.prev_from = f.checked_sub(1);
        }
        e
    }
    fn next(&mut self) -> Option<Entry> {
        let from = self.next_from?;
        let k = self.all.partition_point(|e| e.1 < from);
        let e = self.all.get(k).copied();
        self.land(e)
    }
    fn prev(&mut self) -> Option<Entry> {
        // last entry ending at or below prev_from
        let to = self.prev_from?;
        let k = self.all.partition_point(|e| e.1 <= to);
        let e = if k == 0 { None } else { Some(self.all[k - 1]) };
        self.land(e)
    }
}

fn check_cursor<T: Send + Sync + 'static, O: Ownership<T>>(
    what: &str,
    t: &MapleTree<T, O>,
    all: &[Entry],
    start: u64,
    rng: &mut Rng,
) where
    for<'g> O::Ref<'g>: Id,
{
    let g = maple::pin();
    let mut c = t.cursor(start, &g);
    let mut m = CursorModel {
        all,
        next_from: None,
        prev_from: None,
    };
    m.seek(start);
    let mut log = format!("cursor({start})");
    for _ in 0..24 {
        match rng.below(10) {
            0..=4 => {
                log.push_str(".next()");
                let got = ent(c.next());
                assert_eq!(got, m.next(), "{what}: {log}");
            }
            5..=8 => {
                log.push_str(".prev()");
                let got = ent(c.prev());
                assert_eq!(got, m.prev(), "{what}: {log}");
            }
            _ => {
                let idx = if rng.chance(1, 2) && !all.is_empty() {
                    let e = all[rng.below(all.len() as u64) as usize];
                    rng.range_incl(e.0, e.1)
                } else {
                    rng.next_u64() >> rng.below(64)
                };
                c.seek(idx);
                m.seek(idx);
                log.push_str(&format!(".seek({idx})"));
            }
        }
    }
}

fn check_empty_area<T: Send + Sync, O: Ownership<T>>(
    what: &str,
    t: &MapleTree<T, O>,
    o: &Oracle,
    rng: &mut Rng,
    domain: u64,
) {
    let mut min = random_point(rng, o, domain);
    let mut max = random_point(rng, o, domain);
    if rng.chance(1, 12) {
        min = 0;
    }
    if rng.chance(1, 12) {
        max = MAX;
    }
    if min > max && !rng.chance(1, 20) {
        std::mem::swap(&mut min, &mut max);
    }
    let gaps = o.gaps(min, max);
    let size = match rng.below(12) {
        0 | 1 => 1,
        2 => 2,
        3 | 4 => 1 + rng.below(40),
        5..=7 if !gaps.is_empty() => {
            // exactly the size of one gap, or one more
            let (gs, ge) = gaps[rng.below(gaps.len() as u64) as usize];
            let len = (ge - gs).saturating_add(1);
            if rng.chance(1, 2) {
                len
            } else {
                len.saturating_add(1)
            }
        }
        8 if min <= max => (max - min).saturating_add(1),
        9 => 0,
        10 => MAX,
        _ => 1 + rng.below(1000),
    };
    let g = maple::pin();
    let want = o.empty_area(min, max, size);
    let got = t.empty_area(min, max, size, &g);
    assert!(
        same_result(&got, &want),
        "{what}: empty_area(min={min}, max={max}, size={size}) = {got:?}, want {want:?}"
    );
    let want = o.empty_area_rev(min, max, size);
    let got = t.empty_area_rev(min, max, size, &g);
    assert!(
        same_result(&got, &want),
        "{what}: empty_area_rev(min={min}, max={max}, size={size}) = {got:?}, want {want:?}"
    );
}

/// The full battery of read checks.
fn check_reads<T: Send + Sync + 'static, O: Ownership<T>>(
    what: &str,
    t: &MapleTree<T, O>,
    o: &Oracle,
    seed: u64,
    domain: u64,
) where
    for<'g> O::Ref<'g>: Id,
{
    let mut rng = Rng::new(seed);
    let all = o.entries();
    assert_same_entries(&format!("{what}: iter"), &entries_of(t), &all);
    {
        let g = maple::pin();
        let rev: Vec<Entry> = t
            .iter(&g)
            .rev()
            .map(parts)
            .map(|(f, l, v)| (f, l, v.id()))
            .collect();
        let mut want = all.clone();
        want.reverse();
        assert_same_entries(&format!("{what}: iter().rev()"), &rev, &want);
    }
    for p in o.boundary_points().into_iter().take(400) {
        let g = maple::pin();
        assert_eq!(
            ent(t.load_entry(p, &g)),
            o.load_entry(p),
            "{what}: load_entry({p})"
        );
    }
    for _ in 0..60 {
        let b = random_bounds(&mut rng, o, domain);
        check_range_de(what, t, o, b, &mut rng);
    }
    for _ in 0..150 {
        let a = random_point(&mut rng, o, domain);
        let b = random_point(&mut rng, o, domain);
        let (lo, hi) = (a.min(b), a.max(b));
        let g = maple::pin();
        assert_eq!(
            ent(t.find(lo, hi, &g)),
            o.find(lo, hi),
            "{what}: find(index={lo}, max={hi})"
        );
        assert_eq!(
            ent(t.find(lo, MAX, &g)),
            o.find(lo, MAX),
            "{what}: find(index={lo}, max=MAX)"
        );
        assert_eq!(
            ent(t.find_rev(hi, lo, &g)),
            o.find_rev(hi, lo),
            "{what}: find_rev(index={hi}, min={lo})"
        );
        assert_eq!(
            ent(t.find_rev(hi, 0, &g)),
            o.find_rev(hi, 0),
            "{what}: find_rev(index={hi}, min=0)"
        );
    }
    for _ in 0..30 {
        let start = random_point(&mut rng, o, domain);
        check_cursor(what, t, &all, start, &mut rng);
    }
    for _ in 0..150 {
        check_empty_area(what, t, o, &mut rng, domain);
    }
}

fn run_case(ops: &[Op], seed: u64, domain: u64) {
    let mut h = Harness::new(ops.len() + 1, seed, domain);
    for (i, &op) in ops.iter().enumerate() {
        h.step(i, op);
        if i % 256 == 255 {
            h.full_compare(&format!("after op #{i}"));
        }
        if i % 700 == 699 {
            check_reads(
                &format!("after op #{i} (exclusive)"),
                &h.tree,
                &h.oracle,
                seed ^ i as u64,
                domain,
            );
        }
    }
    h.full_compare("end of case");
    check_reads(
        "end of case (exclusive tree)",
        &h.tree,
        &h.oracle,
        seed,
        domain,
    );
    check_reads(
        "end of case (shared-writer tree)",
        &h.shared,
        &h.oracle,
        seed,
        domain,
    );
    check_reads(
        "end of case (direct tree)",
        &h.direct,
        &h.oracle,
        seed,
        domain,
    );

    // Dropping the tree drops every value still stored, exactly once.
    let Harness {
        tree,
        direct,
        shared,
        drops,
        drops_direct,
        next_id,
        ..
    } = h;
    drop(tree);
    drop(direct);
    for id in 0..next_id {
        for (table, which) in [(&drops, "boxed"), (&drops_direct, "direct")] {
            assert_eq!(
                table.count(id),
                1,
                "after dropping the {which} tree: value {id} dropped {} times",
                table.count(id)
            );
        }
    }
    drop(shared);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn model_dense(ops in prop::collection::vec(op_strategy(DENSE), 1..2000), seed in any::<u64>()) {
        run_case(&ops, seed, DENSE.domain);
    }

    #[test]
    fn model_churn(ops in prop::collection::vec(op_strategy(CHURN), 1..1500), seed in any::<u64>()) {
        run_case(&ops, seed, CHURN.domain);
    }

    #[test]
    fn model_edges(ops in prop::collection::vec(op_strategy(EDGES), 1..400), seed in any::<u64>()) {
        run_case(&ops, seed, EDGES.domain);
    }

    // ---- from_sorted -------------------------------------------------------

    #[test]
    fn from_sorted_matches_model(ops in prop::collection::vec(op_strategy(DENSE), 0..1500), seed in any::<u64>()) {
        let mut o = Oracle::new();
        for (i, op) in ops.iter().enumerate() {
            apply_oracle(&mut o, *op, i as u32);
        }
        // Pieces of one value share its id in the oracle; give every entry its
        // own value (and id) for from_sorted.
        let entries: Vec<Entry> = o.entries().into_iter().enumerate().map(|(i, (f, l, _))| (f, l, i as u32)).collect();
        let mut o = Oracle::new();
        for &(f, l, v) in &entries {
            o.insert_range(f..=l, v).unwrap();
        }
        let drops = DropTable::new(entries.len() + 1);
        {
            let t = MapleTree::from_sorted(entries.iter().map(|&(f, l, v)| (f..=l, Tracked::new(v, &drops))))
                .expect("from_sorted of a valid sorted list");
            t.validate().map_err(|e| TestCaseError::fail(format!("validate after from_sorted: {e}")))?;
            prop_assert_eq!(t.len(), entries.len());
            check_stats("from_sorted", &t, entries.len());
            check_reads("from_sorted", &t, &o, seed, DENSE.domain);
            // Same content as building it by inserting.
            let mut ins = MapleTree::new();
            for &(f, l, v) in &entries {
                ins.insert_range(f..=l, v).unwrap();
            }
            assert_same_entries("from_sorted vs inserts", &entries_of(&t), &entries_of(&ins));
            prop_assert_eq!(drops.total(), 0);
        }
        for &(_, _, v) in &entries {
            prop_assert_eq!(drops.count(v), 1, "value {} not dropped exactly once with the tree", v);
        }
    }

    #[test]
    fn collect_matches_stores(ops in prop::collection::vec(op_strategy(DENSE), 0..1500), seed in any::<u64>()) {
        // `FromIterator` stores in turn: the oracle's stores (a refused
        // `first > last` is an empty `RangeInclusive`, skipped) must give
        // the same map, with values in the slot.
        let mut o = Oracle::new();
        let mut entries = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            if let Op::Store(f, l) = *op {
                let _ = o.store_range(f..=l, i as u32);
                entries.push((f..=l, i as u32));
            }
        }
        let t: MapleTree<u32, Direct> = entries.into_iter().collect();
        t.validate().map_err(|e| TestCaseError::fail(format!("validate after collect: {e}")))?;
        prop_assert_eq!(t.len(), o.len());
        check_reads("collect", &t, &o, seed, DENSE.domain);
    }

    #[test]
    fn from_sorted_rejects_bad_input(ops in prop::collection::vec(op_strategy(DENSE), 2..600), k in any::<prop::sample::Index>(), how in 0..4u8) {
        let mut o = Oracle::new();
        for (i, op) in ops.iter().enumerate() {
            apply_oracle(&mut o, *op, i as u32);
        }
        let mut entries = o.entries();
        prop_assume!(entries.len() >= 2);
        let i = k.index(entries.len() - 1) + 1; // 1..len
        let want = match how {
            0 => { entries.swap(i - 1, i); Error::Unsorted }
            1 => { entries[i].0 = entries[i - 1].1; Error::Unsorted } // overlap by one index
            2 => { let e = entries[i]; entries.insert(i, e); Error::Unsorted } // duplicate
            _ => {
                // first > last in one entry (needs a multi-index entry)
                let j = match entries.iter().position(|e| e.0 < e.1) { Some(j) => j, None => return Ok(()) };
                let (f, l, v) = entries[j];
                entries[j] = (l, f, v);
                Error::InvalidRange { first: l, last: f }
            }
        };
        let drops = DropTable::new(entries.len() + 1);
        let input: Vec<(std::ops::RangeInclusive<u64>, Tracked)> = entries
            .iter()
            .enumerate()
            .map(|(n, &(f, l, _))| (f..=l, Tracked::new(n as u32, &drops)))
            .collect();
        match MapleTree::from_sorted(input) {
            Ok(_) => prop_assert!(false, "from_sorted accepted bad input (case {how}, at {i})"),
            Err(e) => prop_assert_eq!(e, want),
        }
        for n in 0..entries.len() as u32 {
            prop_assert_eq!(drops.count(n), 1, "value {} of rejected input dropped {} times", n, drops.count(n));
        }
    }

    // ---- Clone -------------------------------------------------------------

    #[test]
    fn clone_is_independent(
        ops in prop::collection::vec(op_strategy(DENSE), 0..1200),
        more in prop::collection::vec(op_strategy(DENSE), 1..600),
        seed in any::<u64>(),
    ) {
        let mut t: MapleTree<u32> = MapleTree::new();
        let mut o = Oracle::new();
        for (i, op) in ops.iter().enumerate() {
            apply_both(&mut t, &mut o, *op, i as u32);
        }
        let snapshot = o.clone();
        let mut c = t.clone();
        c.validate().map_err(|e| TestCaseError::fail(format!("validate clone: {e}")))?;
        assert_same_entries("fresh clone", &entries_of(&c), &snapshot.entries());
        check_stats("fresh clone", &c, snapshot.len());
        // Mutate the original: the clone must not change.
        let base = ops.len() as u32;
        for (i, op) in more.iter().enumerate() {
            apply_both(&mut t, &mut o, *op, base + i as u32);
        }
        t.validate().map_err(|e| TestCaseError::fail(format!("validate original: {e}")))?;
        c.validate().map_err(|e| TestCaseError::fail(format!("validate clone after mutating original: {e}")))?;
        assert_same_entries("original after mutation", &entries_of(&t), &o.entries());
        assert_same_entries("clone after mutating the original", &entries_of(&c), &snapshot.entries());
        check_reads("clone", &c, &snapshot, seed, DENSE.domain);
        // Mutate the clone: the original must not change.
        let mut o2 = snapshot.clone();
        for (i, op) in more.iter().rev().enumerate() {
            apply_both(&mut c, &mut o2, *op, 100_000 + i as u32);
        }
        c.validate().map_err(|e| TestCaseError::fail(format!("validate mutated clone: {e}")))?;
        assert_same_entries("mutated clone", &entries_of(&c), &o2.entries());
        assert_same_entries("original after mutating the clone", &entries_of(&t), &o.entries());
        // A clone of a tree that was written through the shared writer.
        let s = MapleTree::new();
        for (i, &(f, l, _)) in o.entries().iter().enumerate() {
            s.write().store_range(f..=l, i as u32).unwrap();
        }
        let sc = s.clone();
        sc.validate().map_err(|e| TestCaseError::fail(format!("validate clone of shared tree: {e}")))?;
        prop_assert_eq!(entries_of(&sc), entries_of(&s));
    }
}

proptest! {
    #![proptest_config(config_heavy())]

    #[test]
    fn model_growth(ops in prop::collection::vec(op_strategy(GROWTH), 1..2200), seed in any::<u64>()) {
        run_case(&ops, seed, GROWTH.domain);
    }

    /// Grow big first, then shrink with a second mix: the height goes up and
    /// back down within one case.
    #[test]
    fn model_grow_then_shrink(
        grow in prop::collection::vec(op_strategy(GROWTH), 500..1800),
        shrink in prop::collection::vec(op_strategy(Mix { store: 5, insert: 5, erase: 50, erase_range: 40, ..CHURN }), 200..800),
        seed in any::<u64>(),
    ) {
        // Make the shrinking phase hit the grown keys: remap its keys into the
        // growth domain.
        let mut ops = grow;
        ops.extend(shrink.into_iter().map(|op| match op {
            Op::Erase(x) if x < CHURN.domain => Op::Erase(x * (GROWTH.domain / CHURN.domain)),
            Op::EraseRange(f, l) if l < CHURN.domain => {
                Op::EraseRange(f * (GROWTH.domain / CHURN.domain), l * (GROWTH.domain / CHURN.domain))
            }
            op => op,
        }));
        run_case(&ops, seed, GROWTH.domain);
    }

}

fn apply_oracle(o: &mut Oracle, op: Op, id: u32) {
    match op {
        Op::Store(f, l) => {
            let _ = o.store_range(f..=l, id);
        }
        Op::Insert(f, l) => {
            let _ = o.insert_range(f..=l, id);
        }
        Op::Erase(x) => {
            o.erase(x);
        }
        Op::EraseRange(f, l) => {
            let _ = o.erase_range(f..=l);
        }
    }
}

fn apply_both(t: &mut MapleTree<u32>, o: &mut Oracle, op: Op, id: u32) {
    match op {
        Op::Store(f, l) => {
            let w = o.store_range(f..=l, id).map(|_| ());
            let g = t.store_range(f..=l, id);
            assert!(same_result(&g, &w), "{op:?}: {g:?} want {w:?}");
        }
        Op::Insert(f, l) => {
            let w = o.insert_range(f..=l, id);
            let g = t.insert_range(f..=l, id);
            assert!(same_result(&g, &w), "{op:?}: {g:?} want {w:?}");
        }
        Op::Erase(x) => {
            let w = o.erase(x).0;
            assert_eq!(t.erase(x), w, "{op:?}");
        }
        Op::EraseRange(f, l) => {
            let w = o.erase_range(f..=l).map(|_| ());
            let g = t.erase_range(f..=l);
            assert!(same_result(&g, &w), "{op:?}: {g:?} want {w:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// Deterministic tests
// ---------------------------------------------------------------------------

#[test]
fn api_is_send_sync_default() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<MapleTree<u64>>();
    send_sync::<MapleTree<String>>();
    let t: MapleTree<u8> = MapleTree::default();
    assert!(t.is_empty());
    assert_eq!(t.len(), 0);
    t.validate().unwrap();
    let s = t.mem_stats();
    assert_eq!(
        (s.nodes, s.leaves, s.internal, s.entries, s.bytes),
        (0, 0, 0, 0, 0)
    );
    let g = maple::pin();
    assert_eq!(t.load(0, &g), None);
    assert_eq!(t.load(MAX, &g), None);
    assert!(t.iter(&g).next().is_none());
    assert!(t.iter(&g).next_back().is_none());
    assert!(t.find(0, MAX, &g).is_none());
    assert!(t.find_rev(MAX, 0, &g).is_none());
    assert!(t.cursor(0, &g).next().is_none());
}

#[test]
fn errors_and_errno() {
    let mut t = MapleTree::new();
    assert_eq!(
        t.store_range(5..=4, 1u32),
        Err(Error::InvalidRange { first: 5, last: 4 })
    );
    assert_eq!(
        t.insert_range(MAX..=0, 1),
        Err(Error::InvalidRange {
            first: MAX,
            last: 0
        })
    );
    assert_eq!(
        t.erase_range(1..=0),
        Err(Error::InvalidRange { first: 1, last: 0 })
    );
    t.insert_range(10..=20, 1).unwrap();
    assert_eq!(t.insert_range(20..=30, 2), Err(Error::Exists));
    assert_eq!(t.insert_range(0..=10, 2), Err(Error::Exists));
    assert_eq!(t.insert_range(0..=MAX, 2), Err(Error::Exists));
    assert_eq!(t.insert_range(15..=15, 2), Err(Error::Exists));
    t.insert_range(21..=21, 3).unwrap();
    t.insert_range(9..=9, 4).unwrap();
    let g = maple::pin();
    assert!(matches!(
        t.empty_area(0, 10, 0, &g),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        t.empty_area(11, 10, 1, &g),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        t.empty_area_rev(0, 10, 0, &g),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        t.empty_area_rev(11, 10, 1, &g),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(t.empty_area(9, 21, 1, &g), Err(Error::NoSpace));
    assert_eq!(t.empty_area_rev(9, 21, 1, &g), Err(Error::NoSpace));
    assert_eq!(t.empty_area(0, 30, 10, &g), Err(Error::NoSpace));
    assert_eq!(t.empty_area(0, 31, 10, &g), Ok(22));
    assert_eq!(t.empty_area_rev(0, 30, 9, &g), Ok(22));
    assert_eq!(t.empty_area_rev(0, 30, 8, &g), Ok(23));
    assert_eq!(t.empty_area(0, 30, 9, &g), Ok(0));

    let einval = Error::InvalidRange { first: 1, last: 0 }.errno();
    assert_eq!(einval.abs(), 22, "InvalidRange errno");
    assert_eq!(
        Error::InvalidArgument("x").errno().abs(),
        22,
        "InvalidArgument errno"
    );
    assert_eq!(Error::Unsorted.errno().abs(), 22, "Unsorted errno");
    assert_eq!(Error::Exists.errno().abs(), 17, "Exists errno");
    assert_eq!(Error::NoSpace.errno().abs(), 16, "NoSpace errno");
    let signs = [
        einval,
        Error::InvalidArgument("x").errno(),
        Error::Unsorted.errno(),
        Error::Exists.errno(),
        Error::NoSpace.errno(),
    ];
    assert!(
        signs.iter().all(|e| e.signum() == signs[0].signum()),
        "errno signs inconsistent: {signs:?}"
    );
    for e in [
        Error::InvalidRange { first: 1, last: 0 },
        Error::InvalidArgument("x"),
        Error::Exists,
        Error::NoSpace,
        Error::Unsorted,
    ] {
        assert!(!e.to_string().is_empty());
        let _: &dyn std::error::Error = &e;
    }
}

#[test]
fn whole_space_and_edges() {
    let mut t = MapleTree::new();
    t.store_range(0..=MAX, 7u32).unwrap();
    t.validate().unwrap();
    {
        let g = maple::pin();
        assert_eq!(
            t.load_entry(0, &g)
                .map(|e| (e.first(), e.last(), *e.value())),
            Some((0, MAX, 7))
        );
        assert_eq!(
            t.load_entry(MAX, &g)
                .map(|e| (e.first(), e.last(), *e.value())),
            Some((0, MAX, 7))
        );
        assert_eq!(t.empty_area(0, MAX, 1, &g), Err(Error::NoSpace));
        assert_eq!(t.empty_area_rev(0, MAX, 1, &g), Err(Error::NoSpace));
        assert_eq!(
            t.find(MAX, MAX, &g).map(|e| (e.first(), e.last())),
            Some((0, MAX))
        );
        assert_eq!(
            t.find_rev(0, 0, &g).map(|e| (e.first(), e.last())),
            Some((0, MAX))
        );
        assert_eq!(t.range(MAX.., &g).count(), 1);
        assert_eq!(t.range(..=0, &g).count(), 1);
    }
    assert_eq!(t.insert_range(MAX..=MAX, 1), Err(Error::Exists));
    assert_eq!(t.erase(12345), Some(0..=MAX));
    assert!(t.is_empty());
    assert_eq!(t.mem_stats().nodes, 0, "empty tree after erase keeps nodes");
    {
        let g = maple::pin();
        assert_eq!(t.empty_area(0, MAX, MAX, &g), Ok(0));
        assert_eq!(t.empty_area_rev(0, MAX, MAX, &g), Ok(1));
        assert_eq!(t.empty_area(0, MAX, 1, &g), Ok(0));
        assert_eq!(t.empty_area_rev(0, MAX, 1, &g), Ok(MAX));
        assert_eq!(t.empty_area(MAX, MAX, 1, &g), Ok(MAX));
        assert_eq!(t.empty_area(MAX, MAX, 2, &g), Err(Error::NoSpace));
        assert_eq!(t.empty_area(1, MAX, MAX, &g), Ok(1));
        assert_eq!(t.empty_area(2, MAX, MAX, &g), Err(Error::NoSpace));
        assert_eq!(t.empty_area_rev(1, MAX, MAX, &g), Ok(1));
    }
    t.insert_range(MAX..=MAX, 1).unwrap();
    t.insert_range(0..=0, 2).unwrap();
    t.insert_range(MAX - 1..=MAX - 1, 3).unwrap();
    t.validate().unwrap();
    {
        let g = maple::pin();
        assert_eq!(t.empty_area_rev(0, MAX, 1, &g), Ok(MAX - 2));
        assert_eq!(t.empty_area(0, MAX, 1, &g), Ok(1));
        assert_eq!(t.empty_area(0, MAX, MAX - 2, &g), Ok(1));
        assert_eq!(t.empty_area(0, MAX, MAX - 1, &g), Err(Error::NoSpace));
        let all: Vec<_> = t
            .iter(&g)
            .map(|e| (e.first(), e.last(), *e.value()))
            .collect();
        assert_eq!(all, vec![(0, 0, 2), (MAX - 1, MAX - 1, 3), (MAX, MAX, 1)]);
        let rev: Vec<_> = t.iter(&g).rev().map(|e| (e.first(), *e.value())).collect();
        assert_eq!(rev, vec![(MAX, 1), (MAX - 1, 3), (0, 2)]);
        assert_eq!(
            t.range((Bound::Excluded(MAX), Bound::Unbounded), &g)
                .count(),
            0
        );
        assert_eq!(t.range(..0, &g).count(), 0);
        assert_eq!(t.range(5..5, &g).count(), 0);
        assert_eq!(t.range(MAX - 1.., &g).count(), 2);
    }
    t.erase_range(0..=MAX).unwrap();
    assert!(t.is_empty());
    t.validate().unwrap();
    assert_eq!(
        t.mem_stats().nodes,
        0,
        "empty tree after erase_range(0, MAX) keeps nodes"
    );
}

/// `find` / `find_rev` with an empty window (index > max / min > index)
/// find nothing: no entry intersects an empty interval.
#[test]
fn find_with_empty_window() {
    let mut t = MapleTree::new();
    for i in 0..100u64 {
        t.insert_range(i * 10..=i * 10 + 5, i as u32).unwrap();
    }
    let g = maple::pin();
    assert!(t.find(52, 51, &g).is_none(), "find(index > max)");
    assert!(t.find(500, 0, &g).is_none(), "find(index > max)");
    assert!(t.find_rev(51, 52, &g).is_none(), "find_rev(min > index)");
    assert!(t.find_rev(0, 500, &g).is_none(), "find_rev(min > index)");
    // sanity: the windows themselves
    assert_eq!(t.find(52, 52, &g).map(|e| e.first()), Some(50));
    assert_eq!(t.find(56, 59, &g).map(|e| e.first()), None);
    assert_eq!(t.find(56, 60, &g).map(|e| e.first()), Some(60));
    assert_eq!(t.find_rev(59, 56, &g).map(|e| e.first()), None);
    assert_eq!(t.find_rev(59, 55, &g).map(|e| e.first()), Some(50));
}

/// `Cursor::seek` documents that after `seek(i)`, `prev` returns "the last
/// entry that ends below i" — for `i` strictly inside an entry that is the
/// entry before it, not the one containing `i`.
#[test]
fn cursor_prev_after_seek_inside_entry() {
    let mut t = MapleTree::new();
    for i in 0..5u64 {
        t.store_range(i * 10..=i * 10 + 5, i).unwrap();
    }
    let g = maple::pin();
    let mut c = t.cursor(22, &g);
    assert_eq!(c.prev().parts(), Some((10, 15, &1)), "cursor(22).prev()");
    c.seek(20);
    assert_eq!(c.prev().parts(), Some((10, 15, &1)), "seek(20).prev()");
    c.seek(25);
    assert_eq!(c.prev().parts(), Some((10, 15, &1)), "seek(25).prev()");
    c.seek(26);
    assert_eq!(c.prev().parts(), Some((20, 25, &2)), "seek(26).prev()");
    c.seek(0);
    assert_eq!(c.prev(), None, "seek(0).prev()");
    c.seek(3);
    assert_eq!(c.prev(), None, "seek(3).prev()");
    assert_eq!(c.next().parts(), Some((0, 5, &0)), "seek(3).prev().next()");
    c.seek(u64::MAX);
    assert_eq!(c.next(), None);
    assert_eq!(
        c.prev().parts(),
        Some((40, 45, &4)),
        "seek(MAX).next().prev()"
    );
    assert_eq!(c.next(), None, "past the end again");
}

#[test]
fn exclusive_drops_are_immediate() {
    let drops = DropTable::new(16);
    let mut t = MapleTree::new();
    t.store_range(0..=100, Tracked::new(0, &drops)).unwrap();
    t.store_range(50..=50, Tracked::new(1, &drops)).unwrap(); // splits value 0
    assert_eq!(drops.total(), 0);
    assert_eq!(t.len(), 3);
    t.erase_range(0..=49).unwrap(); // one piece of value 0 left
    assert_eq!(drops.count(0), 0, "value 0 dropped while a piece remains");
    t.store_range(40..=60, Tracked::new(2, &drops)).unwrap(); // removes value 1, trims value 0
    assert_eq!(drops.count(1), 1, "value 1 not dropped when overwritten");
    assert_eq!(drops.count(0), 0);
    assert_eq!(t.erase(70), Some(61..=100));
    assert_eq!(
        drops.count(0),
        1,
        "value 0 not dropped when its last piece was erased"
    );
    // failing calls drop the value they were given
    assert_eq!(
        t.insert_range(45..=45, Tracked::new(3, &drops)),
        Err(Error::Exists)
    );
    assert_eq!(drops.count(3), 1);
    assert_eq!(
        t.store_range(9..=8, Tracked::new(4, &drops)),
        Err(Error::InvalidRange { first: 9, last: 8 })
    );
    assert_eq!(drops.count(4), 1);
    // many pieces, one value
    t.store_range(1000..=1999, Tracked::new(5, &drops)).unwrap();
    for i in 0..100u64 {
        t.erase_range(1000 + i * 10..=1000 + i * 10 + 4).unwrap();
    }
    assert_eq!(t.len(), 101);
    t.validate().unwrap();
    assert_eq!(drops.count(5), 0);
    t.erase_range(1500..=1999).unwrap();
    assert_eq!(drops.count(5), 0);
    t.erase_range(1000..=1499).unwrap();
    assert_eq!(
        drops.count(5),
        1,
        "value 5 not dropped after its 100th piece went"
    );
    assert_eq!(drops.count(2), 0);
    drop(t);
    for id in 0..6 {
        assert_eq!(drops.count(id), 1, "value {id}");
    }
    assert_eq!(drops.total(), 6);
}

/// `Clone` shares values between the trees (reference-counted): a value is
/// dropped exactly once, immediately when the last piece in *either* tree
/// goes (exclusive ops), and the trees never see each other's writes.
#[test]
fn clone_shares_values_and_drops_once() {
    for seed in 0..4u64 {
        let mut rng = Rng::new(1000 + seed);
        let n_ops = 1500usize;
        let drops = DropTable::new(4 * n_ops + 8);
        let mut next = 0u32;
        let random_op = |rng: &mut Rng| {
            let f = rng.below(1500);
            let span = if rng.chance(1, 8) { 200 } else { 6 };
            let l = f + rng.below(span);
            match rng.below(4) {
                0 => Op::Store(f, l),
                1 => Op::Insert(f, l),
                2 => Op::Erase(f),
                _ => Op::EraseRange(f, l),
            }
        };
        let apply = |t: &mut MapleTree<Tracked>, o: &mut Oracle, op: Op, next: &mut u32| match op {
            Op::Store(f, l) | Op::Insert(f, l) => {
                let id = *next;
                *next += 1;
                let v = Tracked::new(id, &drops);
                if matches!(op, Op::Store(..)) {
                    o.store_range(f..=l, id).unwrap();
                    t.store_range(f..=l, v).unwrap();
                } else {
                    let w = o.insert_range(f..=l, id);
                    assert_eq!(t.insert_range(f..=l, v), w, "{op:?}");
                }
            }
            Op::Erase(x) => assert_eq!(t.erase(x), o.erase(x).0, "{op:?}"),
            Op::EraseRange(f, l) => {
                o.erase_range(f..=l).unwrap();
                t.erase_range(f..=l).unwrap();
            }
        };
        let live_union = |a: &Oracle, b: &Oracle| {
            let mut ids: Vec<u32> = a.live_ids().chain(b.live_ids()).collect();
            ids.sort_unstable();
            ids.dedup();
            ids.len()
        };
        let mut t = MapleTree::new();
        let mut o1 = Oracle::new();
        for _ in 0..n_ops {
            let op = random_op(&mut rng);
            apply(&mut t, &mut o1, op, &mut next);
        }
        let mut c = t.clone();
        let mut o2 = o1.clone();
        assert_eq!(
            drops.total(),
            next as usize - o1.live_values(),
            "seed {seed}: clone dropped values"
        );
        for i in 0..2 * n_ops {
            let op = random_op(&mut rng);
            if i % 2 == 0 {
                apply(&mut t, &mut o1, op, &mut next);
            } else {
                apply(&mut c, &mut o2, op, &mut next);
            }
            assert_eq!(
                drops.total(),
                next as usize - live_union(&o1, &o2),
                "seed {seed} step {i} {op:?}: drops != values created - values referenced by either tree"
            );
            for id in 0..next {
                if drops.count(id) > 1 {
                    panic!(
                        "seed {seed} step {i}: value {id} dropped {} times",
                        drops.count(id)
                    );
                }
            }
        }
        t.validate().unwrap();
        c.validate().unwrap();
        assert_same_entries("original", &entries_of(&t), &o1.entries());
        assert_same_entries("clone", &entries_of(&c), &o2.entries());
        // A clone of the clone, then drop the trees one by one.
        let cc = c.clone();
        drop(c);
        assert_eq!(
            drops.total(),
            next as usize - live_union(&o1, &o2),
            "seed {seed}: after dropping the clone"
        );
        drop(t);
        assert_eq!(
            drops.total(),
            next as usize - o2.live_values(),
            "seed {seed}: after dropping the original"
        );
        assert_same_entries("clone of clone", &entries_of(&cc), &o2.entries());
        drop(cc);
        for id in 0..next {
            assert_eq!(
                drops.count(id),
                1,
                "seed {seed}: value {id} after dropping every tree"
            );
        }
    }
}

/// Values removed through the shared writer are freed only after a grace
/// period: never while a guard pinned before the removal is alive, and
/// references obtained under that guard stay valid.
#[test]
fn shared_writer_defers_drops_past_guards() {
    let drops = DropTable::new(64);
    let t = MapleTree::new();
    t.write()
        .store_range(
            0..=99,
            (Tracked::new(0, &drops), String::from("zero-zero-zero")),
        )
        .unwrap();
    t.write()
        .store_range(
            100..=199,
            (Tracked::new(1, &drops), String::from("one-one-one")),
        )
        .unwrap();
    let g = maple::pin();
    let r0 = t.load(50, &g).unwrap();
    let r1 = t.load(150, &g).unwrap();
    t.write()
        .store_range(0..=199, (Tracked::new(2, &drops), String::from("two")))
        .unwrap();
    assert_eq!(t.write().erase(5), Some(0..=199));
    for i in 3..40u32 {
        t.write()
            .store_range(
                i as u64 * 10..=i as u64 * 10 + 3,
                (Tracked::new(i, &drops), i.to_string()),
            )
            .unwrap();
        t.write().erase_range(0..=MAX).unwrap();
        let _ = maple::pin(); // nested pins while `g` is alive cannot free anything
    }
    assert_eq!(
        drops.count(0),
        0,
        "value 0 dropped while a guard from before its removal is alive"
    );
    assert_eq!(
        drops.count(1),
        0,
        "value 1 dropped while a guard from before its removal is alive"
    );
    assert_eq!(r0.1, "zero-zero-zero");
    assert_eq!(r1.1, "one-one-one");
    assert_eq!(r0.0.id, 0);
    drop(g);
    assert!(t.is_empty());
    drop(t);
    wait_all_dropped(&drops, 40);
}

/// Spin the epoch collector until every value `0..n` has been dropped; fail
/// if one is dropped twice or they are not all dropped within a few seconds.
fn wait_all_dropped(drops: &DropTable, n: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        for id in 0..n {
            assert!(
                drops.count(id) <= 1,
                "value {id} dropped {} times",
                drops.count(id)
            );
        }
        if (0..n).all(|id| drops.count(id) == 1) {
            return;
        }
        if std::time::Instant::now() > deadline {
            let missing: Vec<u32> = (0..n).filter(|&id| drops.count(id) == 0).collect();
            panic!("values never dropped after a grace period: {missing:?}");
        }
        for _ in 0..64 {
            maple::pin().flush();
        }
        std::thread::yield_now();
    }
}

/// Every value stored through the shared writer is dropped exactly once,
/// eventually (after grace periods), including values with several pieces.
#[test]
fn shared_writer_drops_each_value_once() {
    let n_ops = if cfg!(debug_assertions) { 3000 } else { 20_000 };
    let drops = DropTable::new(n_ops + 1);
    let mut rng = Rng::new(42);
    let mut o = Oracle::new();
    let t = MapleTree::new();
    let mut next = 0u32;
    for i in 0..n_ops {
        let f = rng.below(5000);
        let span = if rng.chance(1, 10) { 300 } else { 8 };
        let l = f + rng.below(span);
        match rng.below(4) {
            0 | 1 => {
                o.store_range(f..=l, next).unwrap();
                t.write()
                    .store_range(f..=l, Tracked::new(next, &drops))
                    .unwrap();
                next += 1;
            }
            2 => {
                let w = o.insert_range(f..=l, next);
                let g = t.write().insert_range(f..=l, Tracked::new(next, &drops));
                assert_eq!(g, w);
                next += 1;
            }
            _ => {
                o.erase_range(f..=l).unwrap();
                t.write().erase_range(f..=l).unwrap();
            }
        }
        if i % 97 == 0 {
            for id in 0..next {
                if o.is_live(id) {
                    assert_eq!(
                        drops.count(id),
                        0,
                        "live value {id} already dropped (op {i})"
                    );
                }
                assert!(drops.count(id) <= 1, "value {id} dropped twice (op {i})");
            }
        }
        if i % 1000 == 0 {
            t.validate().unwrap();
        }
    }
    assert_same_entries("shared writer", &entries_of(&t), &o.entries());
    drop(t);
    wait_all_dropped(&drops, next);
}

#[test]
fn height_grows_with_size() {
    let mut t = MapleTree::new();
    let mut last_h = 0;
    let n = large_n().min(50_000);
    for i in 0..n {
        t.insert_range(i * 2..=i * 2, i as u32).unwrap(); // gaps between entries too
        let len = i as usize + 1;
        if len.is_power_of_two() || len % 5000 == 0 || i == n - 1 {
            t.validate().unwrap();
            let s = t.mem_stats();
            check_stats(&format!("ascending insert, {len} entries"), &t, len);
            assert!(
                s.height >= last_h,
                "height shrank from {last_h} to {} at {len} entries",
                s.height
            );
            if len >= 2 {
                let bound = 2 + (usize::BITS - len.leading_zeros()) as usize;
                assert!(
                    s.height <= bound,
                    "height {} implausibly large for {len} entries ({s:?})",
                    s.height
                );
            }
            last_h = s.height;
        }
    }
    let s = t.mem_stats();
    assert!(s.height >= 4, "{n} entries in height {} ({s:?})", s.height);
    // Shrinking back down lowers the height again.
    t.erase_range(16..=MAX).unwrap();
    t.validate().unwrap();
    let s = t.mem_stats();
    check_stats("after truncating to 8 entries", &t, 8);
    assert!(
        s.height <= 2,
        "8 entries left but height {} ({s:?})",
        s.height
    );
}

fn large_ascending_then_random_erase_impl(shared: bool, n: u64) {
    let mut rng = Rng::new(7 + shared as u64);
    let mut t: MapleTree<u64> = MapleTree::new();
    let check = |t: &MapleTree<u64>, what: &str, i: u64, len: usize| {
        if let Err(e) = t.validate() {
            panic!("{what} step {i}: validate: {e}");
        }
        assert_eq!(t.len(), len, "{what} step {i}: len");
        let s = t.mem_stats();
        assert_eq!(s.entries, len);
        assert_eq!(s.nodes, s.leaves + s.internal);
    };
    for i in 0..n {
        if shared {
            t.write().insert_range(3 * i..=3 * i + 1, i).unwrap();
        } else {
            t.insert_range(3 * i..=3 * i + 1, i).unwrap();
        }
        if i % 1000 == 999 {
            check(&t, "ascending insert", i, i as usize + 1);
            let g = maple::pin();
            let k = rng.below(i + 1);
            assert_eq!(
                t.load_entry(3 * k + 1, &g)
                    .map(|e| (e.first(), e.last(), *e.value())),
                Some((3 * k, 3 * k + 1, k))
            );
            assert_eq!(t.load(3 * k + 2, &g), None);
        }
    }
    check(&t, "after inserts", n, n as usize);
    {
        let g = maple::pin();
        assert_eq!(t.iter(&g).count() as u64, n);
        assert!(t.iter(&g).map(|e| e.first()).eq((0..n).map(|i| 3 * i)));
        assert_eq!(t.empty_area(0, MAX, 2, &g), Ok(3 * n - 1));
        assert_eq!(t.empty_area(0, MAX, 1, &g), Ok(2));
        assert_eq!(t.empty_area_rev(0, 3 * n - 1, 1, &g), Ok(3 * n - 1));
        assert_eq!(t.empty_area_rev(0, 3 * n - 2, 1, &g), Ok(3 * n - 4));
    }
    let mut order: Vec<u64> = (0..n).collect();
    rng.shuffle(&mut order);
    for (j, &k) in order.iter().enumerate() {
        let at = 3 * k + rng.below(2);
        let got = if shared {
            t.write().erase(at)
        } else {
            t.erase(at)
        };
        assert_eq!(got, Some(3 * k..=3 * k + 1), "erase({at}) at step {j}");
        if j % 1000 == 999 {
            check(&t, "random erase", j as u64, (n as usize) - j - 1);
            let g = maple::pin();
            assert_eq!(t.load(3 * k, &g), None);
            let nk = order[(j + 1).min(n as usize - 1)];
            if j + 1 < n as usize {
                assert_eq!(t.load(3 * nk, &g).copied(), Some(nk));
            }
        }
    }
    assert!(t.is_empty());
    check(&t, "after erasing everything", n, 0);
    let s = t.mem_stats();
    assert_eq!(s.nodes, 0, "empty tree still holds nodes: {s:?}");
}

#[test]
fn large_ascending_then_random_erase() {
    large_ascending_then_random_erase_impl(false, large_n());
}

#[test]
fn large_ascending_then_random_erase_shared_writer() {
    large_ascending_then_random_erase_impl(true, large_n() / 4);
}

#[test]
fn from_sorted_large_and_edges() {
    let n = large_n();
    let t = MapleTree::from_sorted((0..n).map(|i| (i * 5..=i * 5 + 2, i))).unwrap();
    t.validate().unwrap();
    assert_eq!(t.len(), n as usize);
    check_stats("from_sorted large", &t, n as usize);
    {
        let g = maple::pin();
        assert_eq!(
            t.load_entry(5 * 777 + 1, &g)
                .map(|e| (e.first(), e.last(), *e.value())),
            Some((3885, 3887, 777))
        );
        assert_eq!(t.empty_area(0, MAX, 2, &g), Ok(3));
        assert_eq!(t.empty_area(0, MAX, 3, &g), Ok(5 * n - 2));
        assert!(t.iter(&g).rev().map(|e| *e.value()).eq((0..n).rev()));
    }
    let e: MapleTree<u8> = MapleTree::from_sorted(Vec::new()).unwrap();
    assert!(e.is_empty());
    assert_eq!(e.mem_stats().nodes, 0);
    e.validate().unwrap();
    let w = MapleTree::from_sorted([(0..=MAX, 1u8)]).unwrap();
    w.validate().unwrap();
    assert_eq!(w.len(), 1);
    let s = MapleTree::from_sorted([(0..=0, 1u8), (1..=1, 2), (MAX..=MAX, 3)]).unwrap();
    s.validate().unwrap();
    assert_eq!(entries_of_u8(&s), vec![(0, 0, 1), (1, 1, 2), (MAX, MAX, 3)]);
    assert_eq!(
        MapleTree::from_sorted([(0..=5, 1u8), (5..=9, 2)]).err(),
        Some(Error::Unsorted)
    );
    assert_eq!(
        MapleTree::from_sorted([(6..=9, 1u8), (0..=5, 2)]).err(),
        Some(Error::Unsorted)
    );
    assert_eq!(
        MapleTree::from_sorted([(0..=MAX, 1u8), (MAX..=MAX, 2)]).err(),
        Some(Error::Unsorted)
    );
    assert_eq!(
        MapleTree::from_sorted([(0..=5, 1u8), (9..=6, 2)]).err(),
        Some(Error::InvalidRange { first: 9, last: 6 })
    );
}

fn entries_of_u8(t: &MapleTree<u8>) -> Vec<(u64, u64, u8)> {
    let g = maple::pin();
    t.iter(&g).map(parts).map(|(f, l, v)| (f, l, *v)).collect()
}

/// The shared writer and the exclusive API can be mixed on one tree.
#[test]
fn mixed_exclusive_and_shared_writes() {
    let mut rng = Rng::new(99);
    let mut t: MapleTree<u32> = MapleTree::new();
    let mut o = Oracle::new();
    for i in 0..4000u32 {
        let f = rng.below(3000);
        let l = f + rng.below(20);
        let op = match rng.below(4) {
            0 => Op::Store(f, l),
            1 => Op::Insert(f, l),
            2 => Op::Erase(f),
            _ => Op::EraseRange(f, l),
        };
        if rng.chance(1, 2) {
            apply_both(&mut t, &mut o, op, i);
        } else {
            let mut w = t.write();
            // Reads are lock-free: the same thread can read while it holds
            // the writer lock, and sees its own completed writes.
            let probe = |t: &MapleTree<u32>, o: &Oracle| {
                let g = maple::pin();
                for p in [f.wrapping_sub(1), f, l, l + 1] {
                    assert_eq!(
                        ent(t.load_entry(p, &g)),
                        o.load_entry(p),
                        "read under the writer lock at {p}"
                    );
                }
            };
            probe(&t, &o);
            match op {
                Op::Store(f, l) => {
                    o.store_range(f..=l, i).unwrap();
                    w.store_range(f..=l, i).unwrap();
                }
                Op::Insert(f, l) => {
                    let want = o.insert_range(f..=l, i);
                    assert_eq!(w.insert_range(f..=l, i), want);
                }
                Op::Erase(x) => assert_eq!(w.erase(x), o.erase(x).0),
                Op::EraseRange(f, l) => {
                    o.erase_range(f..=l).unwrap();
                    w.erase_range(f..=l).unwrap();
                }
            }
            probe(&t, &o);
            // a second write through the same guard
            let (a, b) = (rng.below(3000), rng.below(20));
            o.store_range(a..=a + b, i + 1_000_000).unwrap();
            w.store_range(a..=a + b, i + 1_000_000).unwrap();
            probe(&t, &o);
            drop(w);
        }
        if i % 100 == 0 {
            t.validate().unwrap();
            assert_eq!(t.len(), o.len());
        }
    }
    check_reads("mixed", &t, &o, 5, 3000);
}

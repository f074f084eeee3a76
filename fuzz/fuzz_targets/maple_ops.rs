//! # `maple_ops`: the maple tree against a `BTreeMap` oracle
//!
//! The input is decoded (with `arbitrary`) into up to 200 tree operations,
//! applied both to a `MapleTree` and to a brute-force model, a `BTreeMap`
//! of `first -> (last, value id)`. Indices mix dense small numbers (so
//! ranges collide and nodes split, merge and rebalance), the top of the
//! index space, powers of two, the exact boundaries of entries already
//! stored, and raw `u64`s: the tree's bugs live at range boundaries.
//!
//! Covered, and checked exactly after each operation:
//!
//! * every write, through `&mut` (`store_range`, `insert_range`, `erase`,
//!   `erase_range`), through the shared writer `write()` and through
//!   `write_unshared()`; bulk stores; `from_sorted` on sorted input and on
//!   input with one flaw; `clone` (the fork copy), then a write to one
//!   copy that must not show in the other. A write's result (including
//!   `InvalidRange`, `Exists`, `Unsorted`) must be the model's, and a
//!   refused write must change nothing;
//! * every read under `maple::pin()`: `load`, `load_entry`, `find`,
//!   `find_rev`, `empty_area`, `empty_area_rev`, cursors (`seek`, `next`,
//!   `prev`), `range` and `iter` from both ends, `len`, `is_empty`,
//!   `mem_stats`, `Debug`;
//! * a reader held across a shared write: entries it read before must
//!   keep their values (and not be dropped) until its guard goes, and a
//!   cursor or iterator kept across the write must then step through the
//!   new contents;
//! * after every step: `validate()`, `len()`, and iteration equal to the
//!   model: over the whole tree while it has up to 256 entries, at every
//!   16th step and at the end; otherwise over the span the step wrote,
//!   one index wider on each side;
//! * values' drops: each value records its drop in a per-input table. A
//!   value must be dropped exactly once, as soon as its last piece leaves
//!   the tree under an exclusive writer, after a grace period under the
//!   shared one, never while a piece of it is still stored.
//!
//! Run from the repository root:
//!
//! ```sh
//! cargo +nightly fuzz run maple_ops fuzz/corpus/maple_ops -- -max_total_time=600
//! ```

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use maple::{Error, MapleTree};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Keeps one input well under 10 ms even with ASan and a full comparison
/// after every step.
const MAX_OPS: usize = 200;
/// Bulk operations stop growing the tree past this many entries: enough
/// for a tree of height 3 or 4, small enough for O(n) checks per step.
const MAX_ENTRIES: usize = 1200;
const MAX_BULK: usize = 400;
const MAX_MOVES: usize = 48;

// ---------------------------------------------------------------------------
// Values that report their drop
// ---------------------------------------------------------------------------

/// One table per input, so a deferred drop of an earlier input's value
/// (crossbeam may run it at any later pin) lands in that input's table.
#[derive(Default)]
struct Drops {
    counts: Mutex<Vec<u8>>,
    total: AtomicUsize,
    twice: AtomicBool,
}

struct Val {
    id: u32,
    drops: Arc<Drops>,
}

impl Drop for Val {
    fn drop(&mut self) {
        // No panic here: a panic inside the tree's release path would hide
        // the real report behind an abort. The checker reads the flag.
        let mut c = self.drops.counts.lock().unwrap_or_else(|e| e.into_inner());
        let n = &mut c[self.id as usize];
        *n = n.saturating_add(1);
        if *n > 1 {
            self.drops.twice.store(true, Ordering::SeqCst);
        }
        self.drops.total.fetch_add(1, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Val {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}", self.id)
    }
}

impl Drops {
    fn make(self: &Arc<Self>) -> Val {
        let mut c = self.counts.lock().unwrap();
        c.push(0);
        Val {
            id: (c.len() - 1) as u32,
            drops: Arc::clone(self),
        }
    }
    fn created(&self) -> usize {
        self.counts.lock().unwrap().len()
    }
    fn count(&self, id: u32) -> u8 {
        self.counts.lock().unwrap()[id as usize]
    }
}

// ---------------------------------------------------------------------------
// The input language
// ---------------------------------------------------------------------------

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Idx {
    /// 0..=255: dense, so most ranges touch each other.
    Low(u8),
    /// Multiples of 16 below about 1 M.
    Wide(u16),
    /// `u64::MAX - n`.
    Top(u8),
    /// `2^(k % 64) + d`.
    Pow(u8, i8),
    /// The first (or last) index of the k-th stored entry, plus `d`.
    Edge(u8, bool, i8),
    Raw(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Last {
    Len(u8),
    Long(u16),
    /// Any index, so `first > last` happens too.
    At(Idx),
    Max,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Span {
    first: Idx,
    last: Last,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Size {
    Small(u8),
    Wide(u16),
    Pow(u8),
    Raw(u64),
    Max,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Move {
    Next,
    Prev,
    Seek(Idx),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum End {
    In(Idx),
    Ex(Idx),
    Unbounded,
}

/// A reader kept across a shared write.
#[derive(Arbitrary, Debug, Clone)]
enum Held {
    None,
    Cursor {
        at: Idx,
        before: Vec<Move>,
        after: Vec<Move>,
    },
    /// `true` steps from the front, `false` from the back.
    Iter {
        lo: End,
        hi: End,
        before: Vec<bool>,
        after: Vec<bool>,
    },
}

#[derive(Arbitrary, Debug, Clone)]
enum Via {
    Mut,
    Unshared,
    Shared(Held),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Write {
    Store(Span),
    Insert(Span),
    Erase(Idx),
    EraseRange(Span),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Flaw {
    /// Entry k starts inside (or at the end of) the one before it.
    Overlap(u16),
    /// Entry k has `first > last`.
    Reversed(u16),
}

#[derive(Arbitrary, Debug, Clone)]
enum Op {
    Write(Via, Write),
    /// `count` stores (or inserts) of `[base + i*stride, + len]`.
    Fill {
        via: Via,
        base: Idx,
        count: u8,
        stride: u8,
        len: u8,
        insert: bool,
    },
    /// Replaces the tree by `from_sorted` of entries laid out by cycling
    /// through `(gap, len)` steps from `base`.
    FromSorted {
        base: Idx,
        steps: Vec<(u8, u8)>,
        count: u16,
        flaw: Option<Flaw>,
    },
    /// Clones; writes to the copy (or not); keeps one of the two.
    Clone {
        write: Option<Span>,
        keep_copy: bool,
    },
    Load(Idx),
    LoadEntry(Idx),
    Find(Idx, Idx),
    FindRev(Idx, Idx),
    EmptyArea {
        min: Idx,
        max: Idx,
        size: Size,
        rev: bool,
    },
    Cursor(Idx, Vec<Move>),
    Range {
        lo: End,
        hi: End,
        ends: Vec<bool>,
    },
    Stats,
    /// The tree's `Debug` output.
    Debug,
}

// ---------------------------------------------------------------------------
// The oracle
// ---------------------------------------------------------------------------

type Entry = (u64, u64, u32);

/// Non-overlapping ranges `first -> (last, id)`, and how many pieces of
/// each value are stored (a value dies with its last piece).
#[derive(Clone, Default)]
struct Model {
    map: BTreeMap<u64, (u64, u32)>,
    pieces: HashMap<u32, usize>,
}

impl Model {
    fn len(&self) -> usize {
        self.map.len()
    }

    fn entries(&self) -> Vec<Entry> {
        self.map.iter().map(|(&f, &(l, v))| (f, l, v)).collect()
    }

    fn add(&mut self, f: u64, l: u64, v: u32) {
        self.map.insert(f, (l, v));
        *self.pieces.entry(v).or_default() += 1;
    }

    /// Removes one piece; returns its value id if that was its last piece.
    fn remove(&mut self, f: u64) -> (u64, Option<u32>) {
        let (l, v) = self.map.remove(&f).unwrap();
        let n = self.pieces.get_mut(&v).unwrap();
        *n -= 1;
        if *n == 0 {
            self.pieces.remove(&v);
            return (l, Some(v));
        }
        (l, None)
    }

    /// First indices of the entries intersecting `[lo, hi]`.
    fn touching(&self, lo: u64, hi: u64) -> Vec<u64> {
        let mut out: Vec<u64> = self
            .map
            .range(..lo)
            .next_back()
            .filter(|(_, &(l, _))| l >= lo)
            .map(|(&f, _)| f)
            .into_iter()
            .collect();
        out.extend(self.map.range(lo..=hi).map(|(&f, _)| f));
        out
    }

    /// Makes `[lo, hi]` absent; returns the ids that lost their last piece.
    fn cut(&mut self, lo: u64, hi: u64) -> Vec<u32> {
        let mut dead = Vec::new();
        for f in self.touching(lo, hi) {
            let (l, v) = self.map.remove(&f).unwrap();
            // Remnants first, so a split value never looks dead in between.
            if f < lo {
                self.add(f, lo - 1, v);
            }
            if l > hi {
                self.add(hi + 1, l, v);
            }
            let n = self.pieces.get_mut(&v).unwrap();
            *n -= 1;
            if *n == 0 {
                self.pieces.remove(&v);
                dead.push(v);
            }
        }
        dead
    }

    /// The entry containing `i`.
    fn at(&self, i: u64) -> Option<Entry> {
        let (&f, &(l, v)) = self.map.range(..=i).next_back()?;
        (l >= i).then_some((f, l, v))
    }

    /// First entry intersecting `[lo, hi]`.
    fn find(&self, lo: u64, hi: u64) -> Option<Entry> {
        if lo > hi {
            return None;
        }
        self.at(lo).or_else(|| {
            let (&f, &(l, v)) = self.map.range(lo..=hi).next()?;
            Some((f, l, v))
        })
    }

    /// Last entry intersecting `[lo, hi]`.
    fn find_rev(&self, hi: u64, lo: u64) -> Option<Entry> {
        if lo > hi {
            return None;
        }
        let (&f, &(l, v)) = self.map.range(..=hi).next_back()?;
        (l >= lo).then_some((f, l, v))
    }

    /// The last entry ending below `i`.
    fn before(&self, i: u64) -> Option<Entry> {
        self.map
            .range(..i)
            .rev()
            .map(|(&f, &(l, v))| (f, l, v))
            .find(|&(_, l, _)| l < i)
    }

    /// Lowest (or highest) start of `size` absent indices in `[min, max]`,
    /// by a plain walk over the gaps.
    fn empty_area(&self, min: u64, max: u64, size: u64, rev: bool) -> Result<u64, Error> {
        if size == 0 || min > max {
            return Err(Error::InvalidArgument(""));
        }
        let mut gaps = Vec::new();
        let mut from = Some(min);
        for f in self.touching(min, max) {
            let l = self.map[&f].0;
            if let Some(a) = from {
                if f > a {
                    gaps.push((a, f - 1));
                }
            }
            from = l.checked_add(1);
        }
        if let Some(a) = from {
            if a <= max {
                gaps.push((a, max));
            }
        }
        let fits = |&(a, b): &(u64, u64)| (b - a) as u128 + 1 >= size as u128;
        let hit = if rev {
            gaps.iter()
                .rev()
                .find(|g| fits(g))
                .map(|&(_, b)| b - (size - 1))
        } else {
            gaps.iter().find(|g| fits(g)).map(|&(a, _)| a)
        };
        hit.ok_or(Error::NoSpace)
    }

    /// The k-th entry's first or last index, plus `d`.
    fn edge(&self, k: u8, last: bool, d: i8) -> u64 {
        let base = match self.map.iter().nth(k as usize % self.len().max(1)) {
            Some((&f, &(l, _))) => {
                if last {
                    l
                } else {
                    f
                }
            }
            None => 0,
        };
        base.wrapping_add(d as i64 as u64)
    }
}

fn same(a: &Result<u64, Error>, b: &Result<u64, Error>) -> bool {
    match (a, b) {
        // The message is the tree's business; the kind is the contract.
        (Err(Error::InvalidArgument(_)), Err(Error::InvalidArgument(_))) => true,
        _ => a == b,
    }
}

// ---------------------------------------------------------------------------
// Resolving the input against the current model
// ---------------------------------------------------------------------------

fn idx(m: &Model, i: Idx) -> u64 {
    match i {
        Idx::Low(n) => n as u64,
        Idx::Wide(n) => n as u64 * 16,
        Idx::Top(n) => u64::MAX - n as u64,
        Idx::Pow(k, d) => (1u64 << (k % 64)).wrapping_add(d as i64 as u64),
        Idx::Edge(k, last, d) => m.edge(k, last, d),
        Idx::Raw(x) => x,
    }
}

fn span(m: &Model, s: Span) -> (u64, u64) {
    let first = idx(m, s.first);
    let last = match s.last {
        Last::Len(n) => first.saturating_add(n as u64),
        Last::Long(n) => first.saturating_add(n as u64 * 61),
        Last::At(i) => idx(m, i),
        Last::Max => u64::MAX,
    };
    (first, last)
}

fn size(s: Size) -> u64 {
    match s {
        Size::Small(n) => n as u64,
        Size::Wide(n) => n as u64 * 16,
        Size::Pow(k) => 1u64 << (k % 64),
        Size::Raw(x) => x,
        Size::Max => u64::MAX,
    }
}

fn end(m: &Model, e: End) -> Bound<u64> {
    match e {
        End::In(i) => Bound::Included(idx(m, i)),
        End::Ex(i) => Bound::Excluded(idx(m, i)),
        End::Unbounded => Bound::Unbounded,
    }
}

/// Inclusive bounds of a range, `None` when it is empty.
fn incl(lo: Bound<u64>, hi: Bound<u64>) -> Option<(u64, u64)> {
    let lo = match lo {
        Bound::Included(a) => a,
        Bound::Excluded(a) => a.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let hi = match hi {
        Bound::Included(b) => b,
        Bound::Excluded(b) => b.checked_sub(1)?,
        Bound::Unbounded => u64::MAX,
    };
    (lo <= hi).then_some((lo, hi))
}

/// A resolved write.
#[derive(Debug, Clone, Copy)]
enum W {
    Store(u64, u64),
    Insert(u64, u64),
    Erase(u64),
    EraseRange(u64, u64),
}

/// What a write answers.
#[derive(Debug, PartialEq)]
enum Answer {
    Done(Result<(), Error>),
    Erased(Option<std::ops::RangeInclusive<u64>>),
}

fn resolve(m: &Model, w: Write) -> W {
    match w {
        Write::Store(s) => {
            let (a, b) = span(m, s);
            W::Store(a, b)
        }
        Write::Insert(s) => {
            let (a, b) = span(m, s);
            W::Insert(a, b)
        }
        Write::Erase(i) => W::Erase(idx(m, i)),
        Write::EraseRange(s) => {
            let (a, b) = span(m, s);
            W::EraseRange(a, b)
        }
    }
}

/// The model's answer to `w` storing value `id`, and the ids that died
/// (including `id` itself when the write refuses it).
fn model_write(m: &mut Model, w: W, id: Option<u32>) -> (Answer, Vec<u32>) {
    let bad = |a: u64, b: u64| Error::InvalidRange { first: a, last: b };
    let mut dead = Vec::new();
    let answer = match w {
        W::Store(a, b) if a > b => Answer::Done(Err(bad(a, b))),
        W::Insert(a, b) if a > b => Answer::Done(Err(bad(a, b))),
        W::EraseRange(a, b) if a > b => Answer::Done(Err(bad(a, b))),
        W::Store(a, b) => {
            dead = m.cut(a, b);
            m.add(a, b, id.unwrap());
            Answer::Done(Ok(()))
        }
        W::Insert(a, b) => {
            if m.touching(a, b).is_empty() {
                m.add(a, b, id.unwrap());
                Answer::Done(Ok(()))
            } else {
                Answer::Done(Err(Error::Exists))
            }
        }
        W::EraseRange(a, b) => {
            dead = m.cut(a, b);
            Answer::Done(Ok(()))
        }
        W::Erase(i) => Answer::Erased(m.at(i).map(|(f, l, _)| {
            dead.extend(m.remove(f).1);
            f..=l
        })),
    };
    if let (Some(id), Answer::Done(Err(_))) = (id, &answer) {
        dead.push(id);
    }
    (answer, dead)
}

fn wants_value(w: W) -> bool {
    matches!(w, W::Store(..) | W::Insert(..))
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

fn ent(e: Option<maple::Entry<&Val>>) -> Option<Entry> {
    e.map(|e| (e.first(), e.last(), e.value().id))
}

struct Run {
    tree: MapleTree<Val>,
    model: Model,
    drops: Arc<Drops>,
    step: usize,
    /// What the current step may have changed.
    scope: Scope,
}

#[derive(Clone, Copy)]
enum Scope {
    Nothing,
    Window(u64, u64),
    Full,
}

impl Run {
    fn fail(&self, what: std::fmt::Arguments) -> ! {
        panic!("step {}: {what}", self.step)
    }

    /// The tree's and the model's answers to a write must agree.
    fn agree(&self, w: W, got: &Answer, want: &Answer) {
        if got != want {
            self.fail(format_args!("{w:?}: tree answered {got:?}, model {want:?}"));
        }
    }

    /// Everything the tree holds, its shape, its length and its values'
    /// drops, against the model.
    fn check_all(&self, tree: &MapleTree<Val>, model: &Model, what: &str) {
        self.check(tree, model, what, Scope::Full)
    }

    /// `validate()`, `len()`, and the contents within `scope`.
    fn check(&self, tree: &MapleTree<Val>, model: &Model, what: &str, scope: Scope) {
        if let Err(e) = tree.validate() {
            self.fail(format_args!("{what}: validate: {e}"));
        }
        if tree.len() != model.len() || tree.is_empty() != (model.len() == 0) {
            self.fail(format_args!(
                "{what}: len {} but model has {}",
                tree.len(),
                model.len()
            ));
        }
        let (lo, hi) = match scope {
            Scope::Nothing => return,
            Scope::Window(lo, hi) => (lo, hi),
            Scope::Full => (0, u64::MAX),
        };
        let g = maple::pin();
        let all = tree.iter(&g);
        let mut t = if lo == 0 && hi == u64::MAX {
            all
        } else {
            tree.range(lo..=hi, &g)
        }
        .map(|e| (e.first(), e.last(), e.value().id));
        let mut m = model
            .touching(lo, hi)
            .into_iter()
            .map(|f| (f, model.map[&f].0, model.map[&f].1));
        let equal = loop {
            match (t.next(), m.next()) {
                (None, None) => break true,
                (a, b) if a == b => {}
                _ => break false,
            }
        };
        if !equal {
            let got: Vec<Entry> = tree
                .range(lo..=hi, &g)
                .map(|e| (e.first(), e.last(), e.value().id))
                .collect();
            let want: Vec<Entry> = model
                .entries()
                .into_iter()
                .filter(|e| e.1 >= lo && e.0 <= hi)
                .collect();
            let at = got.iter().zip(&want).position(|(a, b)| a != b);
            self.fail(format_args!(
                "{what}: contents in [{lo:#x}, {hi:#x}] differ (first at {at:?}): tree {} entries, model {}\n tree  {:?}\n model {:?}",
                got.len(),
                want.len(),
                &got[..got.len().min(40)],
                &want[..want.len().min(40)]
            ));
        }
    }

    /// No value dropped twice; every value the model says is dead dropped
    /// (those in `dead` checked by name); no other value dropped.
    fn check_drops(&self, dead: &[u32], live_ids: usize) {
        if self.drops.twice.load(Ordering::SeqCst) {
            self.fail(format_args!("a value was dropped twice"));
        }
        for &id in dead {
            if self.drops.count(id) != 1 {
                self.fail(format_args!(
                    "value {id} has no piece left but was not dropped"
                ));
            }
        }
        let want = self.drops.created() - live_ids;
        let got = self.drops.total.load(Ordering::SeqCst);
        if got != want {
            self.fail(format_args!(
                "{got} values dropped, the model expects {want}"
            ));
        }
    }

    /// Lets deferred frees run: pins and flushes until the drops reach
    /// what the model expects (or clearly never will). A deferred release
    /// of one reference to a value that keeps other pieces drops nothing,
    /// so the count alone cannot tell it ran: flush a few times anyway.
    /// One pinned thread advances the epoch at each flush, and a deferred
    /// function runs two epochs after it was queued.
    fn drain(&self, live_ids: usize) {
        let want = self.drops.created() - live_ids;
        drain_until(&self.drops, want);
    }

    fn value(&self, w: W) -> Option<Val> {
        wants_value(w).then(|| self.drops.make())
    }

    fn exclusive(&mut self, w: W, via_unshared: bool) -> Vec<u32> {
        let val = self.value(w);
        let id = val.as_ref().map(|v| v.id);
        let got = if via_unshared {
            // SAFETY: this thread is the tree's only user, and no reference
            // read from the tree is alive across the write.
            let mut wg = unsafe { self.tree.write_unshared() };
            match w {
                W::Store(a, b) => Answer::Done(wg.store_range(a..=b, val.unwrap())),
                W::Insert(a, b) => Answer::Done(wg.insert_range(a..=b, val.unwrap())),
                W::Erase(i) => Answer::Erased(wg.erase(i)),
                W::EraseRange(a, b) => Answer::Done(wg.erase_range(a..=b)),
            }
        } else {
            let t = &mut self.tree;
            match w {
                W::Store(a, b) => Answer::Done(t.store_range(a..=b, val.unwrap())),
                W::Insert(a, b) => Answer::Done(t.insert_range(a..=b, val.unwrap())),
                W::Erase(i) => Answer::Erased(t.erase(i)),
                W::EraseRange(a, b) => Answer::Done(t.erase_range(a..=b)),
            }
        };
        let (want, dead) = model_write(&mut self.model, w, id);
        self.agree(w, &got, &want);
        dead
    }

    /// A write through `write()` while this thread holds a guard, entries
    /// read before the write, and possibly a cursor or an iterator.
    fn shared(&mut self, w: W, held: &Held) -> Vec<u32> {
        let val = self.value(w);
        let id = val.as_ref().map(|v| v.id);
        let g = maple::pin();
        let tree = &self.tree;
        // Entries the write may replace: read now, checked after.
        let (lo, hi) = match w {
            W::Store(a, b) | W::Insert(a, b) | W::EraseRange(a, b) => (a.min(b), a.max(b)),
            W::Erase(i) => (i, i),
        };
        // The tree equals the model here (checked after the last step).
        let seen: Vec<(u64, &Val, u32)> = tree
            .range(lo..=hi, &g)
            .take(6)
            .map(|e| (e.first(), e.value(), e.value().id))
            .collect();
        let mut cursor = None;
        let mut iter = None;
        match held {
            Held::None => {}
            Held::Cursor {
                at, before: moves, ..
            } => {
                let at = idx(&self.model, *at);
                let mut c = (tree.cursor(at, &g), CursorModel::new(at));
                self.cursor_moves(&mut c, &self.model, moves);
                cursor = Some(c);
            }
            Held::Iter {
                lo,
                hi,
                before: ends,
                ..
            } => {
                let (lo, hi) = (end(&self.model, *lo), end(&self.model, *hi));
                let mut it = (tree.range((lo, hi), &g), IterModel(incl(lo, hi)));
                self.iter_steps(&mut it, &self.model, ends);
                iter = Some(it);
            }
        }
        let got = {
            let mut wg = tree.write();
            match w {
                W::Store(a, b) => Answer::Done(wg.store_range(a..=b, val.unwrap())),
                W::Insert(a, b) => Answer::Done(wg.insert_range(a..=b, val.unwrap())),
                W::Erase(i) => Answer::Erased(wg.erase(i)),
                W::EraseRange(a, b) => Answer::Done(wg.erase_range(a..=b)),
            }
        };
        let (want, dead) = model_write(&mut self.model, w, id);
        self.agree(w, &got, &want);
        for &(f, v, id) in &seen {
            // A replaced value must outlive the guard that read it (ASan
            // reports the read of `v.id` if it does not).
            if v.id != id || self.drops.count(id) != 0 {
                self.fail(format_args!(
                    "{w:?}: value {id} of the entry at {f:#x}, read before the write, changed or was freed under the guard"
                ));
            }
        }
        if let (Some(c), Held::Cursor { after: moves, .. }) = (&mut cursor, held) {
            self.cursor_moves(c, &self.model, moves);
        }
        if let (Some(it), Held::Iter { after: ends, .. }) = (&mut iter, held) {
            self.iter_steps(it, &self.model, ends);
        }
        drop(seen);
        drop(g);
        self.drain(self.model.pieces.len());
        dead
    }

    fn cursor_moves(
        &self,
        (c, cm): &mut (maple::Cursor<'_, Val>, CursorModel),
        m: &Model,
        moves: &[Move],
    ) {
        for (i, mv) in moves.iter().take(MAX_MOVES).enumerate() {
            let (got, want) = match *mv {
                Move::Next => (ent(c.next()), cm.next(m)),
                Move::Prev => (ent(c.prev()), cm.prev(m)),
                Move::Seek(at) => {
                    let at = idx(m, at);
                    c.seek(at);
                    cm.seek(at);
                    continue;
                }
            };
            if got != want {
                self.fail(format_args!(
                    "cursor move {i} ({mv:?}): tree {got:?}, model {want:?}"
                ));
            }
        }
    }

    fn iter_steps(
        &self,
        (it, im): &mut (maple::Iter<'_, Val>, IterModel),
        m: &Model,
        ends: &[bool],
    ) {
        for (i, &front) in ends.iter().take(MAX_MOVES).enumerate() {
            let (got, want) = if front {
                (ent(it.next()), im.next(m))
            } else {
                (ent(it.next_back()), im.next_back(m))
            };
            if got != want {
                self.fail(format_args!(
                    "held iterator step {i} ({}): tree {got:?}, model {want:?}",
                    if front { "front" } else { "back" }
                ));
            }
        }
    }

    fn write(&mut self, via: &Via, w: W) -> Vec<u32> {
        let (a, b) = match w {
            W::Store(a, b) | W::Insert(a, b) | W::EraseRange(a, b) => (a.min(b), a.max(b)),
            W::Erase(i) => self.model.at(i).map_or((i, i), |(f, l, _)| (f, l)),
        };
        // One index wider, to see the neighbours a write may merge with.
        let (a, b) = (a.saturating_sub(1), b.saturating_add(1));
        self.scope = match self.scope {
            Scope::Nothing => Scope::Window(a, b),
            Scope::Window(lo, hi) => Scope::Window(lo.min(a), hi.max(b)),
            Scope::Full => Scope::Full,
        };
        match via {
            Via::Mut => self.exclusive(w, false),
            Via::Unshared => self.exclusive(w, true),
            Via::Shared(held) => self.shared(w, held),
        }
    }

    fn op(&mut self, op: &Op) {
        let mut dead = Vec::new();
        match op {
            Op::Write(via, w) => {
                let w = resolve(&self.model, *w);
                dead = self.write(via, w);
            }
            Op::Fill {
                via,
                base,
                count,
                stride,
                len,
                insert,
            } => {
                let base = idx(&self.model, *base);
                for i in 0..*count as u64 {
                    if self.model.len() >= MAX_ENTRIES {
                        break;
                    }
                    let a = base.wrapping_add(i * *stride as u64);
                    let b = a.saturating_add(*len as u64);
                    let w = if *insert {
                        W::Insert(a, b)
                    } else {
                        W::Store(a, b)
                    };
                    // Held readers are exercised once per Fill, not per store.
                    let via = if i == 0 { via.clone() } else { strip(via) };
                    let d = self.write(&via, w);
                    dead.extend(d);
                }
            }
            Op::FromSorted {
                base,
                steps,
                count,
                flaw,
            } => {
                if self.model.len() >= MAX_ENTRIES {
                    return;
                }
                let input = layout(idx(&self.model, *base), steps, *count as usize, *flaw);
                let vals: Vec<(std::ops::RangeInclusive<u64>, Val)> = input
                    .iter()
                    .map(|&(a, b)| (a..=b, self.drops.make()))
                    .collect();
                let ids: Vec<u32> = vals.iter().map(|(_, v)| v.id).collect();
                let want = sorted_verdict(&input);
                match (MapleTree::from_sorted(vals), want) {
                    (Ok(t), Ok(())) => {
                        let mut m = Model::default();
                        for (&(a, b), &id) in input.iter().zip(&ids) {
                            m.add(a, b, id);
                        }
                        dead = self.model.pieces.keys().copied().collect();
                        self.tree = t;
                        self.model = m;
                        self.scope = Scope::Full;
                    }
                    (Err(e), Err(w)) if e == w => dead = ids,
                    (got, want) => self.fail(format_args!(
                        "from_sorted of {} entries: tree {:?}, model {want:?}",
                        input.len(),
                        got.map(|t| t.len())
                    )),
                }
            }
            Op::Clone { write, keep_copy } => {
                let mut copy = self.tree.clone();
                self.check_all(&copy, &self.model, "fresh clone");
                let mut cm = self.model.clone();
                if let Some(s) = write {
                    let (a, b) = span(&cm, *s);
                    let val = self.drops.make();
                    let id = val.id;
                    let got = Answer::Done(copy.store_range(a..=b, val));
                    let (want, _) = model_write(&mut cm, W::Store(a, b), Some(id));
                    self.agree(W::Store(a, b), &got, &want);
                }
                self.check_all(&copy, &cm, "written clone");
                self.check_all(&self.tree, &self.model, "original beside a written clone");
                let all: Vec<u32> = self
                    .model
                    .pieces
                    .keys()
                    .chain(cm.pieces.keys())
                    .copied()
                    .collect();
                if *keep_copy {
                    self.tree = copy;
                    self.model = cm;
                } else {
                    drop(copy);
                }
                dead = all
                    .into_iter()
                    .filter(|id| !self.model.pieces.contains_key(id))
                    .collect();
            }
            Op::Load(i) => {
                let i = idx(&self.model, *i);
                let g = maple::pin();
                let got = self.tree.load(i, &g).map(|v| v.id);
                let want = self.model.at(i).map(|e| e.2);
                if got != want {
                    self.fail(format_args!("load({i:#x}): tree {got:?}, model {want:?}"));
                }
            }
            Op::LoadEntry(i) => {
                let i = idx(&self.model, *i);
                let g = maple::pin();
                let got = ent(self.tree.load_entry(i, &g));
                let want = self.model.at(i);
                if got != want {
                    self.fail(format_args!(
                        "load_entry({i:#x}): tree {got:?}, model {want:?}"
                    ));
                }
            }
            Op::Find(i, max) => {
                let (i, max) = (idx(&self.model, *i), idx(&self.model, *max));
                let g = maple::pin();
                let got = ent(self.tree.find(i, max, &g));
                let want = self.model.find(i, max);
                if got != want {
                    self.fail(format_args!(
                        "find({i:#x}, {max:#x}): tree {got:?}, model {want:?}"
                    ));
                }
            }
            Op::FindRev(i, min) => {
                let (i, min) = (idx(&self.model, *i), idx(&self.model, *min));
                let g = maple::pin();
                let got = ent(self.tree.find_rev(i, min, &g));
                let want = self.model.find_rev(i, min);
                if got != want {
                    self.fail(format_args!(
                        "find_rev({i:#x}, {min:#x}): tree {got:?}, model {want:?}"
                    ));
                }
            }
            Op::EmptyArea {
                min,
                max,
                size: s,
                rev,
            } => {
                let (min, max, s) = (idx(&self.model, *min), idx(&self.model, *max), size(*s));
                let g = maple::pin();
                let got = if *rev {
                    self.tree.empty_area_rev(min, max, s, &g)
                } else {
                    self.tree.empty_area(min, max, s, &g)
                };
                let want = self.model.empty_area(min, max, s, *rev);
                if !same(&got, &want) {
                    self.fail(format_args!(
                        "empty_area{}({min:#x}, {max:#x}, {s:#x}): tree {got:?}, model {want:?}",
                        if *rev { "_rev" } else { "" }
                    ));
                }
            }
            Op::Cursor(at, moves) => {
                let at = idx(&self.model, *at);
                let g = maple::pin();
                let mut c = (self.tree.cursor(at, &g), CursorModel::new(at));
                self.cursor_moves(&mut c, &self.model, moves);
            }
            Op::Range { lo, hi, ends } => self.range(*lo, *hi, ends),
            Op::Stats => {
                let s = self.tree.mem_stats();
                let n = self.model.len();
                let ok = s.entries == n
                    && s.bytes == s.nodes * maple::NODE_SIZE
                    && s.leaves + s.internal == s.nodes
                    && (n == 0) == (s.nodes == 0)
                    && (s.height == 0) == (s.nodes == 0)
                    && (s.height != 1 || s.nodes == 1)
                    && s.leaves * 16 >= n;
                if !ok {
                    self.fail(format_args!("mem_stats {s:?} with {n} entries"));
                }
            }
            Op::Debug => {
                let body: Vec<String> = self
                    .model
                    .map
                    .iter()
                    .map(|(a, (b, v))| format!("{a}..={b}: v{v}"))
                    .collect();
                let want = format!("{{{}}}", body.join(", "));
                let got = format!("{:?}", self.tree);
                if got != want {
                    self.fail(format_args!("Debug: tree {got}, model {want}"));
                }
            }
        }
        // Comparing everything after every step costs O(n) per step on
        // trees of a thousand entries; the part a write can change is
        // compared after each step, everything on small trees and at
        // every 16th step.
        let scope = if self.model.len() <= 256 || self.step % 16 == 15 {
            Scope::Full
        } else {
            std::mem::replace(&mut self.scope, Scope::Nothing)
        };
        self.scope = Scope::Nothing;
        self.check(&self.tree, &self.model, "after the step", scope);
        self.check_drops(&dead, self.model.pieces.len());
    }

    /// `range` from both ends, checked against the model's list of
    /// intersecting entries consumed from the same ends; the rest is
    /// taken from the front, then the iterator must stay finished.
    fn range(&self, lo: End, hi: End, ends: &[bool]) {
        let (lo, hi) = (end(&self.model, lo), end(&self.model, hi));
        let mut want: VecDeque<Entry> = match incl(lo, hi) {
            Some((a, b)) => self
                .model
                .touching(a, b)
                .into_iter()
                .map(|f| (f, self.model.map[&f].0, self.model.map[&f].1))
                .collect(),
            None => VecDeque::new(),
        };
        let g = maple::pin();
        let mut it = self.tree.range((lo, hi), &g);
        for &front in ends.iter().take(MAX_MOVES) {
            let (got, w) = if front {
                (ent(it.next()), want.pop_front())
            } else {
                (ent(it.next_back()), want.pop_back())
            };
            if got != w {
                self.fail(format_args!(
                    "range({lo:?}, {hi:?}) {}: tree {got:?}, model {w:?}",
                    front
                ));
            }
        }
        let rest: Vec<Entry> = it
            .by_ref()
            .map(|e| (e.first(), e.last(), e.value().id))
            .collect();
        if want != rest || it.next().is_some() || it.next_back().is_some() {
            self.fail(format_args!(
                "range({lo:?}, {hi:?}): rest differs or does not stay finished"
            ));
        }
    }
}

/// The same writer kind without a held reader.
fn strip(via: &Via) -> Via {
    match via {
        Via::Shared(_) => Via::Shared(Held::None),
        v => v.clone(),
    }
}

/// Sorted ranges from `base` by cycling through `(gap, len)` steps, with
/// at most one flaw; stops at the top of the index space.
fn layout(base: u64, steps: &[(u8, u8)], count: usize, flaw: Option<Flaw>) -> Vec<(u64, u64)> {
    let steps = if steps.is_empty() {
        &[(1, 0)][..]
    } else {
        steps
    };
    let mut out = Vec::new();
    let mut next = Some(base);
    for i in 0..count.min(MAX_BULK) {
        let Some(at) = next else { break };
        let (gap, len) = steps[i % steps.len()];
        let Some(a) = at.checked_add(gap as u64) else {
            break;
        };
        let b = a.saturating_add(len as u64);
        out.push((a, b));
        next = b.checked_add(1);
    }
    match flaw {
        Some(Flaw::Overlap(k)) if out.len() >= 2 => {
            let k = 1 + k as usize % (out.len() - 1);
            let prev_last = out[k - 1].1;
            out[k].0 = prev_last.min(out[k].1);
        }
        Some(Flaw::Reversed(k)) if !out.is_empty() => {
            let k = k as usize % out.len();
            let (a, b) = out[k];
            // Reversed even for [0, MAX]: (MAX, 0).
            out[k] = (b.saturating_add(1), a.saturating_sub(1));
        }
        _ => {}
    }
    out
}

/// What `from_sorted` must answer for `input`: its entries are checked in
/// order, each for `first <= last`, then for starting past the previous.
fn sorted_verdict(input: &[(u64, u64)]) -> Result<(), Error> {
    let mut next = Some(0u64);
    for &(a, b) in input {
        if a > b {
            return Err(Error::InvalidRange { first: a, last: b });
        }
        match next {
            Some(n) if a >= n => next = b.checked_add(1),
            _ => return Err(Error::Unsorted),
        }
    }
    Ok(())
}

/// A cursor as documented: `next` gives the first entry intersecting
/// `[next_from, MAX]`, `prev` the last entry ending below `prev_below`;
/// a step that finds something moves both marks to it.
struct CursorModel {
    next_from: Option<u64>,
    prev_below: u64,
}

impl CursorModel {
    fn new(at: u64) -> Self {
        CursorModel {
            next_from: Some(at),
            prev_below: at,
        }
    }
    fn seek(&mut self, at: u64) {
        *self = Self::new(at);
    }
    fn land(&mut self, e: Option<Entry>) -> Option<Entry> {
        if let Some((f, l, _)) = e {
            self.next_from = l.checked_add(1);
            self.prev_below = f;
        }
        e
    }
    fn next(&mut self, m: &Model) -> Option<Entry> {
        let e = m.find(self.next_from?, u64::MAX);
        self.land(e)
    }
    fn prev(&mut self, m: &Model) -> Option<Entry> {
        let e = m.before(self.prev_below);
        self.land(e)
    }
}

/// An iterator's remaining window: each step from the front takes the
/// first entry intersecting it and moves its start past that entry; from
/// the back, symmetrically. Used where the tree changes between steps.
struct IterModel(Option<(u64, u64)>);

impl IterModel {
    fn next(&mut self, m: &Model) -> Option<Entry> {
        let (lo, hi) = self.0?;
        let e = m.find(lo, hi);
        self.0 = e
            .and_then(|(_, l, _)| l.checked_add(1))
            .filter(|&n| n <= hi)
            .map(|n| (n, hi));
        e
    }
    fn next_back(&mut self, m: &Model) -> Option<Entry> {
        let (lo, hi) = self.0?;
        let e = m.find_rev(hi, lo);
        self.0 = e
            .and_then(|(f, _, _)| f.checked_sub(1))
            .filter(|&n| n >= lo)
            .map(|n| (lo, n));
        e
    }
}

fn drain_until(drops: &Drops, want: usize) {
    for i in 0..10_000 {
        if i >= 4 && drops.total.load(Ordering::SeqCst) >= want {
            return;
        }
        maple::pin().flush();
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let drops = Arc::new(Drops::default());
    let mut run = Run {
        tree: MapleTree::new(),
        model: Model::default(),
        drops: Arc::clone(&drops),
        step: 0,
        scope: Scope::Nothing,
    };
    for (i, op) in ops.iter().take(MAX_OPS).enumerate() {
        run.step = i;
        run.op(op);
    }
    run.check_all(&run.tree, &run.model, "at the end");
    // Dropping the tree must drop every value still stored, once.
    let Run { tree, .. } = run;
    drop(tree);
    let created = drops.created();
    drain_until(&drops, created);
    assert!(
        !drops.twice.load(Ordering::SeqCst),
        "a value was dropped twice"
    );
    assert_eq!(
        drops.total.load(Ordering::SeqCst),
        created,
        "values leaked after the tree was dropped"
    );
});

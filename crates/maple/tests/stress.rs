//! Concurrent stress test: one writer mutating through `tree.write()` while
//! reader threads run every read operation under `maple::pin()` guards.
//!
//! Every value is a `u64` id into an append-only table that records the
//! range it was stored over (written *before* the store) and the sequence
//! number at which its last piece disappeared (written by the writer after
//! the removing call returned, then published through a global sequence
//! counter). Readers check that
//!
//! * every entry they see is plausible: its range lies inside the range its
//!   value was stored over, contains the looked-up index, and the value was
//!   not already retired when the read began;
//! * permanent entries (sentinels between the writer's cells, and a static
//!   zone the writer never touches) are always seen, exactly;
//! * the permanent free windows are always free (and `empty_area` respects
//!   them and never returns a range overlapping a permanent entry);
//! * iteration (both directions, mixed) is strictly ordered and
//!   non-overlapping and yields every permanent entry in range exactly once.
//!
//! The writer checks its own reads exactly against an oracle, runs
//! `validate()` every 1000 steps, and at the end the tree is compared with
//! the oracle in full.
//!
//! `MAPLE_STRESS_SECS` (default 3) sets the run time of each test;
//! `MAPLE_STRESS_READERS` (default 2) the number of reader threads;
//! `MAPLE_STRESS_STRICT_WALKS=1` rejects overlapping consecutive entries in
//! a walk that still progressed (see [`overlap_allowed`]); by default they
//! are accepted, as documented for `Iter` and `Cursor`.
#![cfg(not(vmscale_shuttle))]

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::Rng;
use common::{env_usize, parts, Oracle, Parts, MAX};
use maple::{Error, MapleTree};

// ---------------------------------------------------------------------------
// Layout of the key space
// ---------------------------------------------------------------------------

/// Each cell: `[base, base + WRITABLE)` belongs to the writer, then the
/// permanent sentinel A, a permanent free window, sentinel B.
const CELL: u64 = 512;
const WRITABLE: u64 = 480;
const SENT_A: (u64, u64) = (480, 487);
const HOLE: (u64, u64) = (488, 491); // always absent: 4 indices
const SENT_B: (u64, u64) = (492, 511);
const LOW_CELLS: u64 = 40;
const HIGH_CELLS: u64 = 12;

/// Static zone: entries the writer never touches.
const STATIC_BASE: u64 = 1 << 40;
const STATIC_ENTRIES: u64 = 2500;

fn cell_base(c: u64) -> u64 {
    if c < LOW_CELLS {
        c * CELL
    } else {
        // the last high cell ends exactly at u64::MAX
        MAX - (LOW_CELLS + HIGH_CELLS - c) * CELL + 1
    }
}
const CELLS: u64 = LOW_CELLS + HIGH_CELLS;

fn static_entry(i: u64) -> (u64, u64) {
    let f = STATIC_BASE + i * 16 + (i % 3);
    let len = (i * 7) % 9; // gaps of various sizes between entries
    (f, f + len)
}
fn static_end() -> u64 {
    STATIC_BASE + STATIC_ENTRIES * 16 + 64
}

// ---------------------------------------------------------------------------
// The value table
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Slot {
    first: AtomicU64,
    last: AtomicU64,
    /// Sequence number at which the last piece was removed (0: live).
    retired: AtomicU64,
    permanent: AtomicBool,
}

const CHUNK_BITS: u32 = 16;
const CHUNK: usize = 1 << CHUNK_BITS;
const NCHUNKS: usize = 1 << 12;

struct Table {
    chunks: Box<[OnceLock<Box<[Slot]>>]>,
    /// Ids below this have their slot initialised.
    published: AtomicU64,
    /// Global retirement sequence (starts at 1).
    seq: AtomicU64,
}

impl Table {
    fn new() -> Self {
        Table {
            chunks: (0..NCHUNKS).map(|_| OnceLock::new()).collect(),
            published: AtomicU64::new(0),
            seq: AtomicU64::new(1),
        }
    }
    fn capacity(&self) -> u64 {
        (NCHUNKS * CHUNK) as u64
    }
    /// Reader side: the slot of an id that was published.
    fn slot(&self, id: u64) -> Option<&Slot> {
        let c = self.chunks.get((id >> CHUNK_BITS) as usize)?.get()?;
        Some(&c[(id as usize) & (CHUNK - 1)])
    }
    /// Writer side: record `[first, last]` for `id` (the next id) before it
    /// is stored.
    fn push(&self, id: u64, first: u64, last: u64, permanent: bool) {
        assert_eq!(id, self.published.load(Ordering::Relaxed));
        let c = self.chunks[(id >> CHUNK_BITS) as usize]
            .get_or_init(|| (0..CHUNK).map(|_| Slot::default()).collect());
        let s = &c[(id as usize) & (CHUNK - 1)];
        s.first.store(first, Ordering::Relaxed);
        s.last.store(last, Ordering::Relaxed);
        s.permanent.store(permanent, Ordering::Relaxed);
        self.published.store(id + 1, Ordering::Release);
    }
    /// Writer side: mark ids retired after the call that removed their last
    /// piece returned, then publish the new sequence number.
    fn retire(&self, ids: &[u32]) {
        if ids.is_empty() {
            return;
        }
        let s = self.seq.load(Ordering::Relaxed) + 1;
        for &id in ids {
            let slot = self.slot(id as u64).expect("retiring an unpublished id");
            assert!(
                !slot.permanent.load(Ordering::Relaxed),
                "writer removed a permanent entry"
            );
            slot.retired.store(s, Ordering::Release);
        }
        self.seq.store(s, Ordering::Release);
    }
}

// ---------------------------------------------------------------------------
// Shared state and error collection
// ---------------------------------------------------------------------------

struct Shared {
    tree: MapleTree<u64>,
    table: Table,
    /// Permanent entries, for exact checks (ids are their own).
    permanent: Oracle,
    /// Permanent entries plus the writer's regions: its gaps are always free.
    blocked: Oracle,
    /// The writer's regions.
    writable: Oracle,
    stop: AtomicBool,
    /// kind -> (count, first messages)
    errors: Mutex<BTreeMap<&'static str, (usize, Vec<String>)>>,
    error_count: AtomicUsize,
}

impl Shared {
    fn report(&self, msg: String) {
        self.report_kind("check", msg);
    }
    fn report_kind(&self, kind: &'static str, msg: String) {
        if kind == OVERLAP && overlap_allowed() {
            return;
        }
        let n = self.error_count.fetch_add(1, Ordering::Relaxed);
        {
            let mut errs = self.errors.lock().unwrap();
            let e = errs.entry(kind).or_default();
            e.0 += 1;
            if e.1.len() < 8 {
                e.1.push(msg);
            }
        }
        // Stop early: one bug usually causes a flood.
        if n >= 2000 {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

const OVERLAP: &str = "iteration: overlapping ranges (progress made)";
/// The front and back ends of a double-ended walk yielded the same entry
/// or went past each other.
const CROSSED: &str = "iteration: front and back ends crossed / yielded twice";

/// Whether consecutive entries of one walk may overlap while the walk still
/// progressed: an entry written after the previous one was returned, as in
/// the kernel's RCU walks. This is the documented guarantee of `Iter` and
/// `Cursor` (each entry current when read; strictly forward progress), so
/// it is accepted unless `MAPLE_STRESS_STRICT_WALKS=1` asks for snapshot
/// semantics, which the tree does not promise. Every other walk check
/// (progress, no entry twice, ends never crossing) always applies.
fn overlap_allowed() -> bool {
    static ALLOW: OnceLock<bool> = OnceLock::new();
    *ALLOW.get_or_init(|| std::env::var("MAPLE_STRESS_STRICT_WALKS").map_or(true, |v| v != "1"))
}

/// Classifies a step of a forward walk from `p` to `e` that is not strictly
/// past `p`: "overlap" when the walk progressed (`e` ends after `p`) but the
/// two ranges overlap (e.g. `e` was written after `p` was returned),
/// "order" when it went backwards or repeated.
fn fwd_kind(p: (u64, u64, u64), e: (u64, u64, u64)) -> &'static str {
    if e.1 > p.1 {
        OVERLAP
    } else {
        "iteration: out of order / repeated"
    }
}
fn back_kind(p: (u64, u64, u64), e: (u64, u64, u64)) -> &'static str {
    if e.0 < p.0 {
        OVERLAP
    } else {
        "iteration: out of order / repeated"
    }
}

/// Is `[f, l]` (a whole entry) permanent? Then it must match exactly.
fn permanent_at(sh: &Shared, index: u64) -> Option<(u64, u64, u32)> {
    sh.permanent.load_entry(index)
}

/// Checks one entry seen by a reader. `seq_before` is the retirement
/// sequence read before the operation started.
fn check_entry(
    sh: &Shared,
    what: &dyn Fn() -> String,
    e: (u64, u64, u64),
    seq_before: u64,
) -> bool {
    let (f, l, id) = e;
    if f > l {
        sh.report(format!("{}: entry with first > last: {e:?}", what()));
        return false;
    }
    // Permanent entries: exact.
    if let Some(p) = permanent_at(sh, f) {
        if (p.0, p.1, p.2 as u64) != e {
            sh.report(format!(
                "{}: saw {e:?} where the permanent entry {p:?} is",
                what()
            ));
            return false;
        }
        return true;
    }
    if let Some(p) = permanent_at(sh, l) {
        sh.report(format!(
            "{}: saw {e:?} overlapping the permanent entry {p:?}",
            what()
        ));
        return false;
    }
    match sh.writable.load_entry(f) {
        Some((_, wl, _)) if l <= wl => {}
        _ => {
            sh.report(format!(
                "{}: saw {e:?} outside the writer's regions (a permanently absent place)",
                what()
            ));
            return false;
        }
    }
    if id >= sh.table.published.load(Ordering::Acquire) {
        sh.report(format!(
            "{}: saw value id {id} that was never stored (entry {e:?})",
            what()
        ));
        return false;
    }
    let Some(slot) = sh.table.slot(id) else {
        sh.report(format!("{}: value id {id} has no table slot", what()));
        return false;
    };
    if slot.permanent.load(Ordering::Acquire) {
        sh.report(format!(
            "{}: permanent value {id} seen at wrong range {e:?}",
            what()
        ));
        return false;
    }
    let (sf, sl) = (
        slot.first.load(Ordering::Acquire),
        slot.last.load(Ordering::Acquire),
    );
    if f < sf || l > sl {
        sh.report(format!(
            "{}: entry {e:?} is not inside the range [{sf}, {sl}] value {id} was stored over",
            what()
        ));
        return false;
    }
    let r = slot.retired.load(Ordering::Acquire);
    if r != 0 && r <= seq_before {
        sh.report(format!(
            "{}: entry {e:?}: value {id} was retired at seq {r}, before this read began (seq {seq_before})",
            what()
        ));
        return false;
    }
    true
}

/// Permanent entries intersecting `[lo, hi]`, ascending.
fn permanent_in(sh: &Shared, lo: u64, hi: u64) -> Vec<(u64, u64, u64)> {
    sh.permanent
        .range_incl(lo, hi)
        .into_iter()
        .map(|(f, l, v)| (f, l, v as u64))
        .collect()
}

// ---------------------------------------------------------------------------
// Readers
// ---------------------------------------------------------------------------

fn random_index(rng: &mut Rng) -> u64 {
    match rng.below(10) {
        0..=5 => {
            let c = rng.below(CELLS);
            cell_base(c) + rng.below(CELL)
        }
        6..=7 => rng.range_incl(STATIC_BASE - 50, static_end() + 50),
        8 => MAX - rng.below(100),
        _ => rng.next_u64(),
    }
}

/// Two indices a <= b, usually close together.
fn random_window(rng: &mut Rng) -> (u64, u64) {
    let a = random_index(rng);
    let b = match rng.below(4) {
        0 => a.saturating_add(rng.below(64)),
        1 => a.saturating_add(rng.below(4 * CELL)),
        2 => a.saturating_add(rng.below(40 * CELL)),
        _ => random_index(rng),
    };
    (a.min(b), a.max(b))
}

/// Iterates `range(lo..=hi)` with a mix of `next` / `next_back`, checking
/// order, non-overlap, plausibility and that every permanent entry in range
/// is yielded exactly once.
fn check_iteration(
    sh: &Shared,
    rng: &mut Rng,
    g: &maple::Guard,
    lo: u64,
    hi: u64,
    seq_before: u64,
) {
    let b = (Bound::Included(lo), Bound::Included(hi));
    let mode = rng.below(3);
    let mut it = sh.tree.range(b, g);
    let mut front: Vec<(u64, u64, u64)> = Vec::new();
    let mut back: Vec<(u64, u64, u64)> = Vec::new();
    let mut steps = 0u32;
    let limit = if (lo, hi) == (0, MAX) { 100_000 } else { 3000 };
    loop {
        let fwd = match mode {
            0 => true,
            1 => false,
            _ => rng.chance(1, 2),
        };
        let e = if fwd { it.next() } else { it.next_back() };
        let Some((f, l, v)) = e.parts() else { break };
        let e = (f, l, *v);
        let what = || {
            format!(
                "range({lo}..={hi}) mode {mode} step {steps} ({})",
                if fwd { "next" } else { "next_back" }
            )
        };
        if l < lo || f > hi {
            sh.report(format!("{}: yielded {e:?} outside the range", what()));
            return;
        }
        if !check_entry(sh, &what, e, seq_before) {
            return;
        }
        if fwd {
            if let Some(p) = front.last() {
                if p.1 >= f {
                    sh.report_kind(
                        fwd_kind(*p, e),
                        format!(
                            "{}: yielded {e:?} after {p:?} (not ascending / overlapping)",
                            what()
                        ),
                    );
                    return;
                }
            }
            if let Some(q) = back.last() {
                if q.0 <= l {
                    sh.report_kind(
                        if f < q.0 { OVERLAP } else { CROSSED },
                        format!(
                            "{}: front {e:?} met/overlapped back {q:?} (yielded twice?)",
                            what()
                        ),
                    );
                    return;
                }
            }
            front.push(e);
        } else {
            if let Some(p) = back.last() {
                if p.0 <= l {
                    sh.report_kind(
                        back_kind(*p, e),
                        format!(
                            "{}: yielded {e:?} after {p:?} (not descending / overlapping)",
                            what()
                        ),
                    );
                    return;
                }
            }
            if let Some(q) = front.last() {
                if q.1 >= f {
                    sh.report_kind(
                        if l > q.1 { OVERLAP } else { CROSSED },
                        format!(
                            "{}: back {e:?} met/overlapped front {q:?} (yielded twice?)",
                            what()
                        ),
                    );
                    return;
                }
            }
            back.push(e);
        }
        steps += 1;
        if steps >= limit {
            return; // long window: stop early, skip the completeness check
        }
    }
    if it.next().is_some() || it.next_back().is_some() {
        sh.report(format!(
            "range({lo}..={hi}): iterator yielded again after returning None"
        ));
        return;
    }
    // Completeness over permanent entries.
    back.reverse();
    front.extend(back);
    let seen: Vec<_> = front
        .iter()
        .copied()
        .filter(|e| permanent_at(sh, e.0).is_some())
        .collect();
    let want = permanent_in(sh, lo, hi);
    if seen != want {
        let missing: Vec<_> = want.iter().filter(|e| !seen.contains(e)).take(5).collect();
        sh.report(format!(
            "range({lo}..={hi}) mode {mode}: permanent entries seen {} != expected {}; missing e.g. {missing:?}",
            seen.len(),
            want.len()
        ));
    }
}

fn reader(sh: &Shared, seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let mut ops = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        let g = maple::pin();
        let batch = 1 + rng.below(32);
        for _ in 0..batch {
            let seq_before = sh.table.seq.load(Ordering::Acquire);
            reader_op(sh, &mut rng, &g, seq_before);
            ops += 1;
        }
    }
    ops
}

fn reader_op(sh: &Shared, rng: &mut Rng, g: &maple::Guard, seq_before: u64) {
    let t = &sh.tree;
    match rng.below(16) {
        // load / load_entry
        0..=4 => {
            let a = random_index(rng);
            let e = t.load_entry(a, g).map(parts).map(|(f, l, v)| (f, l, *v));
            let v = t.load(a, g).copied();
            let what = || format!("load_entry({a})");
            if let Some(p) = permanent_at(sh, a) {
                let p = (p.0, p.1, p.2 as u64);
                if e != Some(p) || v != Some(p.2) {
                    sh.report(format!(
                        "{}: got {e:?} / load {v:?}, want permanent {p:?}",
                        what()
                    ));
                }
                return;
            }
            if sh.writable.load(a).is_none() && (e.is_some() || v.is_some()) {
                sh.report(format!(
                    "{}: got {e:?} / load {v:?} in a permanently absent place",
                    what()
                ));
                return;
            }
            if let Some(e) = e {
                if !(e.0 <= a && a <= e.1) {
                    sh.report(format!(
                        "{}: entry {e:?} does not contain the index",
                        what()
                    ));
                    return;
                }
                check_entry(sh, &what, e, seq_before);
            }
            if let Some(v) = v {
                // the value from `load` separately (may differ from load_entry's
                // if the writer changed it in between, but must be plausible)
                if let Some(slot) = sh.table.slot(v) {
                    let (sf, sl) = (
                        slot.first.load(Ordering::Acquire),
                        slot.last.load(Ordering::Acquire),
                    );
                    let r = slot.retired.load(Ordering::Acquire);
                    if !(sf <= a && a <= sl)
                        || (r != 0 && r <= seq_before)
                        || v >= sh.table.published.load(Ordering::Acquire)
                    {
                        sh.report(format!("load({a}) = {v}: stored over [{sf}, {sl}], retired {r}, read began at seq {seq_before}"));
                    }
                } else {
                    sh.report(format!("load({a}) = {v}: never stored"));
                }
            }
        }
        // find
        5..=6 => {
            let (a, b) = random_window(rng);
            let e = t.find(a, b, g).map(parts).map(|(f, l, v)| (f, l, *v));
            let what = || format!("find({a}, {b})");
            let first_perm = sh.permanent.find(a, b).map(|p| (p.0, p.1, p.2 as u64));
            match e {
                None => {
                    if let Some(p) = first_perm {
                        sh.report(format!(
                            "{}: None, but permanent {p:?} is in the window",
                            what()
                        ));
                    }
                }
                Some(e) => {
                    if e.1 < a || e.0 > b {
                        sh.report(format!("{}: {e:?} does not intersect the window", what()));
                        return;
                    }
                    if !check_entry(sh, &what, e, seq_before) {
                        return;
                    }
                    if let Some(p) = first_perm {
                        if e.0 > p.0 {
                            sh.report(format!("{}: {e:?} skipped the permanent {p:?}", what()));
                        }
                    }
                }
            }
        }
        // find_rev
        7..=8 => {
            let (a, b) = random_window(rng);
            let e = t.find_rev(b, a, g).map(parts).map(|(f, l, v)| (f, l, *v));
            let what = || format!("find_rev({b}, min {a})");
            let last_perm = sh.permanent.find_rev(b, a).map(|p| (p.0, p.1, p.2 as u64));
            match e {
                None => {
                    if let Some(p) = last_perm {
                        sh.report(format!(
                            "{}: None, but permanent {p:?} is in the window",
                            what()
                        ));
                    }
                }
                Some(e) => {
                    if e.1 < a || e.0 > b {
                        sh.report(format!("{}: {e:?} does not intersect the window", what()));
                        return;
                    }
                    if !check_entry(sh, &what, e, seq_before) {
                        return;
                    }
                    if let Some(p) = last_perm {
                        if e.0 < p.0 {
                            sh.report(format!("{}: {e:?} skipped the permanent {p:?}", what()));
                        }
                    }
                }
            }
        }
        // iteration
        9..=11 => {
            let (lo, hi) = if rng.chance(1, 40) {
                (0, MAX)
            } else {
                random_window(rng)
            };
            check_iteration(sh, rng, g, lo, hi, seq_before);
        }
        // cursor walk
        12 => {
            let a = random_index(rng);
            let mut c = t.cursor(a, g);
            let mut prev: Option<(u64, u64, u64)> = None;
            for step in 0..40 {
                let Some((f, l, v)) = c.next().parts() else {
                    break;
                };
                let e = (f, l, *v);
                let what = || format!("cursor({a}) next #{step}");
                if step == 0 && l < a {
                    sh.report(format!(
                        "{}: first entry {e:?} ends before the start",
                        what()
                    ));
                    return;
                }
                if let Some(p) = prev {
                    if p.1 >= f {
                        sh.report_kind(fwd_kind(p, e), format!("{}: {e:?} after {p:?}", what()));
                        return;
                    }
                    // no permanent entry may be skipped
                    if let Some(q) = sh.permanent.find(p.1 + 1, f - 1) {
                        sh.report(format!(
                            "{}: stepped from {p:?} to {e:?}, skipping permanent {q:?}",
                            what()
                        ));
                        return;
                    }
                }
                if !check_entry(sh, &what, e, seq_before) {
                    return;
                }
                prev = Some(e);
            }
            let mut next_seen = prev;
            for step in 0..40 {
                let Some((f, l, v)) = c.prev().parts() else {
                    break;
                };
                let e = (f, l, *v);
                let what = || format!("cursor({a}) ... prev #{step}");
                if let Some(p) = next_seen {
                    if e.1 >= p.0 {
                        sh.report_kind(
                            back_kind(p, e),
                            format!("{}: {e:?} not before {p:?}", what()),
                        );
                        return;
                    }
                }
                if !check_entry(sh, &what, e, seq_before) {
                    return;
                }
                next_seen = Some(e);
            }
        }
        // empty_area / empty_area_rev
        _ => {
            let exact = rng.chance(1, 3);
            let (min, max, size) = if exact {
                // inside one cell's permanent window: exactly known
                let base = cell_base(rng.below(CELLS));
                (base + SENT_A.0, base + SENT_B.1, 1 + rng.below(5))
            } else if rng.chance(1, 3) {
                let a = rng.range_incl(STATIC_BASE, static_end());
                let b = rng.range_incl(a, static_end());
                (a, b, 1 + rng.below(12))
            } else {
                let (a, b) = random_window(rng);
                let span = if rng.chance(1, 2) { 4 } else { 64 };
                (a, b, 1 + rng.below(span))
            };
            let fwd = t.empty_area(min, max, size, g);
            let rev = t.empty_area_rev(min, max, size, g);
            check_empty_area(sh, min, max, size, fwd, false);
            check_empty_area(sh, min, max, size, rev, true);
        }
    }
}

/// Checks an empty_area result against what is permanently known:
/// `blocked` holds the permanent entries and the writer's regions, so its
/// gaps are free at all times.
fn check_empty_area(
    sh: &Shared,
    min: u64,
    max: u64,
    size: u64,
    got: Result<u64, Error>,
    rev: bool,
) {
    let name = if rev { "empty_area_rev" } else { "empty_area" };
    let what = format!("{name}(min={min}, max={max}, size={size})");
    let perm_free = if rev {
        sh.blocked.empty_area_rev(min, max, size)
    } else {
        sh.blocked.empty_area(min, max, size)
    };
    if sh.writable.find(min, max).is_none() {
        // Nothing in the window ever changes: the answer is exact.
        if got != perm_free {
            sh.report(format!(
                "{what} = {got:?}, want exactly {perm_free:?} (window never written)"
            ));
        }
        return;
    }
    match got {
        Ok(a) => {
            let end = a as u128 + size as u128 - 1;
            if a < min || end > max as u128 {
                sh.report(format!("{what} = {a}: outside the bounds"));
                return;
            }
            if let Some(p) = sh.permanent.find(a, end as u64) {
                sh.report(format!("{what} = {a}: overlaps permanent entry {p:?}"));
                return;
            }
            match perm_free {
                Ok(h) if !rev && a > h => sh.report(format!(
                    "{what} = {a}: but [{h}, +{size}) is always free and lower"
                )),
                Ok(h) if rev && a < h => sh.report(format!(
                    "{what} = {a}: but [{h}, +{size}) is always free and higher"
                )),
                _ => {}
            }
        }
        Err(Error::NoSpace) => {
            if let Ok(h) = perm_free {
                sh.report(format!(
                    "{what} = NoSpace, but [{h}, +{size}) is always free"
                ));
            }
        }
        Err(e) => sh.report(format!("{what} = Err({e:?})")),
    }
}

// ---------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum WOp {
    Store(u64, u64),
    Insert(u64, u64),
    Erase(u64),
    EraseRange(u64, u64),
    /// mmap-like: empty_area in the cell, then insert there
    Alloc(u64, u64, u64),
}

struct WriterOutcome {
    steps: u64,
    log: Vec<WOp>,
}

fn writer(
    sh: &Shared,
    oracle: &mut Oracle,
    next_id: &mut u64,
    secs: f64,
    seed: u64,
    churny: bool,
) -> WriterOutcome {
    let mut rng = Rng::new(seed);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut steps = 0u64;
    let mut log: Vec<WOp> = Vec::new(); // last ops, for the report
    while !sh.stop.load(Ordering::Relaxed) {
        if steps % 64 == 0 && Instant::now() > deadline {
            break;
        }
        if *next_id + 1 >= sh.table.capacity() {
            break;
        }
        let c = if rng.chance(1, 4) {
            rng.below(3)
        } else {
            rng.below(CELLS)
        }; // some hot cells
        let base = cell_base(c);
        let f = base + rng.below(WRITABLE);
        let maxlen = if churny && rng.chance(1, 4) {
            WRITABLE
        } else if rng.chance(1, 8) {
            64
        } else {
            6
        };
        let l = f.saturating_add(rng.below(maxlen)).min(base + WRITABLE - 1);
        let op = match rng.below(if churny { 12 } else { 10 }) {
            0..=2 => WOp::Store(f, l),
            3..=5 => WOp::Insert(f, l),
            6 => WOp::Erase(f),
            7 => WOp::EraseRange(f, l),
            8 | 9 => {
                let span = if rng.chance(1, 3) { 40 } else { 4 };
                WOp::Alloc(base, base + WRITABLE - 1, 1 + rng.below(span))
            }
            10 => WOp::EraseRange(base, base + WRITABLE - 1),
            _ => WOp::Store(base, base + WRITABLE - 1),
        };
        if log.len() >= 64 {
            log.drain(..32);
        }
        log.push(op);
        let step = steps;
        let step_ctx = || format!("writer step {step} {op:?}");
        match op {
            WOp::Store(f, l) | WOp::Insert(f, l) => {
                let id = *next_id;
                *next_id += 1;
                sh.table.push(id, f, l, false);
                let store = matches!(op, WOp::Store(..));
                let (got, dead) = if store {
                    let got = sh.tree.write().store_range(f..=l, id);
                    let dead = oracle.store_range(f..=l, id as u32).expect("valid range");
                    (got, dead)
                } else {
                    let got = sh.tree.write().insert_range(f..=l, id);
                    let want = oracle.insert_range(f..=l, id as u32);
                    assert_eq!(got, want, "{}: insert_range result", step_ctx());
                    (got, Vec::new())
                };
                if store {
                    assert_eq!(got, Ok(()), "{}: store_range result", step_ctx());
                }
                if got.is_err() {
                    // never stored: retire it so nobody may see it
                    sh.table.retire(&[id as u32]);
                }
                sh.table.retire(&dead);
            }
            WOp::Erase(x) => {
                let got = sh.tree.write().erase(x);
                let (want, dead) = oracle.erase(x);
                assert_eq!(got, want, "{}: erase result", step_ctx());
                if let Some(d) = dead {
                    sh.table.retire(&[d]);
                }
            }
            WOp::EraseRange(f, l) => {
                let got = sh.tree.write().erase_range(f..=l);
                assert_eq!(got, Ok(()), "{}: erase_range result", step_ctx());
                let dead = oracle.erase_range(f..=l).unwrap();
                sh.table.retire(&dead);
            }
            WOp::Alloc(min, max, size) => {
                let g = maple::pin();
                let got = sh.tree.empty_area(min, max, size, &g);
                let want = oracle.empty_area(min, max, size);
                assert_eq!(got, want, "{}: empty_area (writer, exact)", step_ctx());
                let got_r = sh.tree.empty_area_rev(min, max, size, &g);
                let want_r = oracle.empty_area_rev(min, max, size);
                assert_eq!(
                    got_r,
                    want_r,
                    "{}: empty_area_rev (writer, exact)",
                    step_ctx()
                );
                drop(g);
                let at = if rng.chance(1, 2) { got } else { got_r };
                if let Ok(a) = at {
                    let id = *next_id;
                    *next_id += 1;
                    sh.table.push(id, a, a + size - 1, false);
                    assert_eq!(
                        sh.tree.write().insert_range(a..=a + size - 1, id),
                        Ok(()),
                        "{}: insert into the area empty_area found",
                        step_ctx()
                    );
                    oracle.insert_range(a..=a + size - 1, id as u32).unwrap();
                }
            }
        }
        // Exact spot checks from the writer thread (the only mutator).
        {
            let g = maple::pin();
            for p in [f, l, f.wrapping_sub(1), l + 1, base + rng.below(CELL)] {
                let got = sh
                    .tree
                    .load_entry(p, &g)
                    .map(parts)
                    .map(|(a, b, v)| (a, b, *v as u32));
                assert_eq!(
                    got,
                    oracle.load_entry(p),
                    "{}: writer's load_entry({p})",
                    step_ctx()
                );
            }
        }
        steps += 1;
        if steps % 1000 == 0 {
            if let Err(e) = sh.tree.validate() {
                panic!("{}: validate: {e}\nrecent ops: {log:?}", step_ctx());
            }
            assert_eq!(sh.tree.len(), oracle.len(), "{}: len", step_ctx());
        }
    }
    WriterOutcome { steps, log }
}

// ---------------------------------------------------------------------------
// The test driver
// ---------------------------------------------------------------------------

/// The stress tests share the two cores: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn run_stress(seed: u64, churny: bool) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let secs = std::env::var("MAPLE_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(3.0);
    let readers = env_usize("MAPLE_STRESS_READERS", 2);

    // The cell layout: writer region, sentinel A, a permanent hole, sentinel B.
    assert_eq!(
        (WRITABLE, SENT_A.1 + 1, HOLE.1 + 1, SENT_B.1 + 1),
        (SENT_A.0, HOLE.0, SENT_B.0, CELL)
    );
    // Build the permanent content: sentinels and the static zone.
    let table = Table::new();
    let mut oracle = Oracle::new();
    let mut next_id = 0u64;
    let mut perm: Vec<(u64, u64, u64)> = Vec::new();
    for c in 0..CELLS {
        let b = cell_base(c);
        perm.push((b + SENT_A.0, b + SENT_A.1, 0));
        perm.push((b + SENT_B.0, b + SENT_B.1, 0));
    }
    for i in 0..STATIC_ENTRIES {
        let (f, l) = static_entry(i);
        perm.push((f, l, 0));
    }
    perm.sort();
    let mut permanent = Oracle::new();
    for e in perm.iter_mut() {
        let id = next_id;
        next_id += 1;
        table.push(id, e.0, e.1, true);
        e.2 = id;
        permanent.insert_range(e.0..=e.1, id as u32).unwrap();
        oracle.insert_range(e.0..=e.1, id as u32).unwrap();
    }
    // Built through the shared writer, like everything after it.
    let tree = MapleTree::new();
    for &(f, l, id) in &perm {
        tree.write().insert_range(f..=l, id).unwrap();
    }
    tree.validate()
        .expect("validate after building the permanent content");

    let mut writable = Oracle::new();
    let mut blocked = permanent.clone();
    for c in 0..CELLS {
        let b = cell_base(c);
        writable.insert_range(b..=b + WRITABLE - 1, 0).unwrap();
        blocked
            .insert_range(b..=b + WRITABLE - 1, u32::MAX)
            .unwrap();
    }
    let sh = Arc::new(Shared {
        tree,
        table,
        permanent,
        blocked,
        writable,
        stop: AtomicBool::new(false),
        errors: Mutex::new(BTreeMap::new()),
        error_count: AtomicUsize::new(0),
    });

    let handles: Vec<_> = (0..readers)
        .map(|r| {
            let sh = Arc::clone(&sh);
            std::thread::spawn(move || reader(&sh, seed ^ (r as u64 + 1).wrapping_mul(0x9E37_79B9)))
        })
        .collect();

    let started = Instant::now();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        writer(&sh, &mut oracle, &mut next_id, secs, seed, churny)
    }));
    sh.stop.store(true, Ordering::Relaxed);
    let mut reader_ops = Vec::new();
    let mut reader_panics = Vec::new();
    for h in handles {
        match h.join() {
            Ok(n) => reader_ops.push(n),
            Err(p) => reader_panics.push(panic_msg(&p)),
        }
    }
    let elapsed = started.elapsed();
    let outcome = match outcome {
        Ok(o) => o,
        Err(p) => panic!(
            "writer panicked: {}\nreader errors: {:?}",
            panic_msg(&p),
            sh.errors.lock().unwrap()
        ),
    };

    let mut report = String::new();
    let _ = writeln!(
        report,
        "stress(seed {seed:#x}, churny {churny}): {:.1}s, writer steps {}, reader ops {:?}, entries {}, height {}",
        elapsed.as_secs_f64(),
        outcome.steps,
        reader_ops,
        sh.tree.len(),
        sh.tree.mem_stats().height
    );
    eprint!("{report}");
    assert!(
        reader_panics.is_empty(),
        "reader panicked: {reader_panics:?}"
    );
    let n_err = sh.error_count.load(Ordering::Relaxed);
    if n_err > 0 {
        let errs = sh.errors.lock().unwrap();
        let mut msg = format!("{n_err} reader check failures, by kind:\n");
        for (kind, (count, first)) in errs.iter() {
            let _ = writeln!(msg, "[{kind}] x{count}:\n    {}", first.join("\n    "));
        }
        panic!(
            "{msg}last writer ops: {:?}",
            &outcome.log[outcome.log.len().saturating_sub(16)..]
        );
    }
    assert!(outcome.steps > 0, "writer made no progress");
    assert!(
        reader_ops.iter().all(|&n| n > 0),
        "a reader made no progress"
    );

    // Final full comparison.
    if let Err(e) = sh.tree.validate() {
        panic!("final validate: {e}");
    }
    assert_eq!(sh.tree.len(), oracle.len(), "final len");
    let g = maple::pin();
    let got: Vec<(u64, u64, u32)> = sh
        .tree
        .iter(&g)
        .map(parts)
        .map(|(f, l, v)| (f, l, *v as u32))
        .collect();
    let want = oracle.entries();
    if got != want {
        let i = got
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        panic!(
            "final content differs from the writer's oracle at position {i}: got {:?} want {:?} (lens {} / {})",
            got.get(i),
            want.get(i),
            got.len(),
            want.len()
        );
    }
    let rev: Vec<(u64, u64, u32)> = sh
        .tree
        .iter(&g)
        .rev()
        .map(parts)
        .map(|(f, l, v)| (f, l, *v as u32))
        .collect();
    assert!(
        rev.iter().rev().eq(want.iter()),
        "final reverse iteration differs"
    );
    let s = sh.tree.mem_stats();
    assert_eq!(s.entries, want.len());
    assert_eq!(s.nodes, s.leaves + s.internal);
}

fn panic_msg(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else {
        "<non-string panic>".into()
    }
}

#[test]
fn stress_readers_vs_shared_writer() {
    run_stress(0x5eed_0001, false);
}

/// Whole-cell stores and erases: large structural changes (merges, height
/// changes of subtrees) under the readers.
#[test]
fn stress_readers_vs_shared_writer_churn() {
    run_stress(0x5eed_0002, true);
}

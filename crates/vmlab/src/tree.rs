//! `vmbench tree`: microbenchmarks of the maple tree against std's
//! `BTreeMap` and three range-map peers on an mmap-like layout (see
//! [`workload`]).
//!
//! Every figure is the median of `repeat` timed batches. Each batch's
//! answers are checked against the closed-form layout, so a fast but wrong
//! implementation fails the run instead of producing a flattering number.
//! An implementation is measured only on the operations it can genuinely
//! do ([`Op::applies_to`]); the others show as `-` in the table.
//!
//! Why each peer's crate is a dependency (see [`peers`]):
//! - `rangemap`: `RangeInclusiveMap`, the ready-made single-threaded range
//!   map, is the peer for every single-threaded op, gap searches included.
//! - `scc`: `TreeIndex`, a lock-free-read concurrent B+ tree, is the peer
//!   for concurrent loads beside a writer and for shared-API writes.
//! - `crossbeam-skiplist`: `SkipMap`, the common concurrent ordered map, is
//!   the same kind of peer built as a lock-free skip list.

pub mod peers;
pub mod subjects;
pub mod workload;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use crate::alloc_count;
use crate::figure::{self, Figure, TableSpec};
use crate::rng::SplitMix64;
use crate::timing::{median_ns_per_op, timed, Batch};
use crate::LabError;
use peers::{RangeMap, SccTree, SkipList};
use subjects::{BTree, Maple, MapleShared, RwBTree, Scan, SharedSubject, Subject, Tally};
use workload::Layout;

/// Largest accepted structure size; beyond it the baselines alone need
/// tens of GiB.
pub const MAX_SIZE: usize = 100_000_000;
/// Seed used unless the caller picks another, so runs are comparable.
pub const DEFAULT_SEED: u64 = 0x5eed;
/// Default structure sizes.
pub const DEFAULT_SIZES: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];
/// Structure sizes with `--quick`.
pub const QUICK_SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// An implementation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Impl {
    /// `maple::MapleTree` written through `&mut self`.
    Maple,
    /// `maple::MapleTree` written through `write()` guards.
    MapleShared,
    /// `std::collections::BTreeMap<start, (last, value)>`.
    BTreeMap,
    /// The same `BTreeMap` behind an `RwLock`, for the concurrent reader.
    RwLockBTreeMap,
    /// `rangemap::RangeInclusiveMap<u64, u64>`, single-threaded.
    RangeMap,
    /// `scc::TreeIndex<start, (last, value)>` through its shared API.
    SccTreeIndex,
    /// `crossbeam_skiplist::SkipMap<start, (last, value)>` through its
    /// shared API.
    SkipMap,
}

impl Impl {
    /// All implementations, in table column order.
    pub const ALL: [Impl; 7] = [
        Impl::Maple,
        Impl::MapleShared,
        Impl::BTreeMap,
        Impl::RwLockBTreeMap,
        Impl::RangeMap,
        Impl::SccTreeIndex,
        Impl::SkipMap,
    ];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Maple => "maple",
            Impl::MapleShared => "maple-shared",
            Impl::BTreeMap => "btreemap",
            Impl::RwLockBTreeMap => "rwlock-btreemap",
            Impl::RangeMap => "rangemap",
            Impl::SccTreeIndex => "scc-treeindex",
            Impl::SkipMap => "crossbeam-skiplist",
        }
    }
}

/// A measured operation (one output row per size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Lookup of a random mapped address, one guard for the whole batch.
    Load,
    /// Lookup pinning a fresh guard each time: the guard's cost.
    LoadPin,
    /// Ascending insertion into an empty structure.
    InsertAsc,
    /// Insertion in random order into an empty structure.
    InsertRand,
    /// Erasure of every entry in random order.
    EraseRand,
    /// Full in-order iteration, per entry.
    Iter,
    /// Highest free page below a random mapped address.
    GapRev,
    /// Lowest free page above a random mapped address.
    GapFwd,
    /// Highest free 2-page area below a random mapped address: the only
    /// one lies below the first entry, so a scan must cross every entry
    /// below the address while the gap-tracking tree skips them.
    GapRevFar,
    /// Lowest free 2-page area above a random mapped address: past the
    /// last entry.
    GapFwdFar,
    /// Checked loads on one thread while another erases and re-stores.
    LoadWithWriter,
    /// The same checked loads with no writer running.
    LoadNoWriter,
    /// Node bytes per entry after an ascending build.
    BytesAsc,
    /// Node bytes per entry after a random-order build.
    BytesRand,
    /// All heap bytes per entry (values included) after an ascending build.
    BytesTotalAsc,
    /// All heap bytes per entry (values included) after a random build.
    BytesTotalRand,
}

impl Op {
    /// All operations, in table row order.
    pub const ALL: [Op; 16] = [
        Op::Load,
        Op::LoadPin,
        Op::InsertAsc,
        Op::InsertRand,
        Op::EraseRand,
        Op::Iter,
        Op::GapRev,
        Op::GapFwd,
        Op::GapRevFar,
        Op::GapFwdFar,
        Op::LoadWithWriter,
        Op::LoadNoWriter,
        Op::BytesAsc,
        Op::BytesRand,
        Op::BytesTotalAsc,
        Op::BytesTotalRand,
    ];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Op::Load => "load",
            Op::LoadPin => "load_pin",
            Op::InsertAsc => "insert_asc",
            Op::InsertRand => "insert_rand",
            Op::EraseRand => "erase_rand",
            Op::Iter => "iter",
            Op::GapRev => "gap_rev",
            Op::GapFwd => "gap_fwd",
            Op::GapRevFar => "gap_rev_far",
            Op::GapFwdFar => "gap_fwd_far",
            Op::LoadWithWriter => "load_with_writer",
            Op::LoadNoWriter => "load_no_writer",
            Op::BytesAsc => "bytes_asc",
            Op::BytesRand => "bytes_rand",
            Op::BytesTotalAsc => "bytes_total_asc",
            Op::BytesTotalRand => "bytes_total_rand",
        }
    }

    /// Unit of the reported value.
    pub fn unit(self) -> &'static str {
        match self {
            Op::Iter => "ns/entry",
            Op::BytesAsc | Op::BytesRand | Op::BytesTotalAsc | Op::BytesTotalRand => "bytes/entry",
            _ => "ns/op",
        }
    }

    /// Threads running while the value is measured.
    pub fn threads(self) -> usize {
        if self == Op::LoadWithWriter {
            2
        } else {
            1
        }
    }

    /// Whether the pair is measured at all: read paths are identical for
    /// both maple adapters so only `maple` reports them, the guard cost only
    /// exists for maple, and the lock-based map only makes sense shared.
    /// The concurrent peers (`scc-treeindex`, `crossbeam-skiplist`) do
    /// loads and shared-API writes but no ordered scans (see
    /// [`subjects::Scan`]) and report no memory.
    pub fn applies_to(self, imp: Impl) -> bool {
        use Impl::*;
        match self {
            Op::Load => matches!(imp, Maple | BTreeMap | RangeMap | SccTreeIndex | SkipMap),
            Op::Iter | Op::GapRev | Op::GapFwd | Op::GapRevFar | Op::GapFwdFar => {
                matches!(imp, Maple | BTreeMap | RangeMap)
            }
            Op::LoadPin => imp == Maple,
            Op::InsertAsc | Op::InsertRand | Op::EraseRand => matches!(
                imp,
                Maple | MapleShared | BTreeMap | RangeMap | SccTreeIndex | SkipMap
            ),
            Op::LoadWithWriter | Op::LoadNoWriter => {
                matches!(imp, MapleShared | RwLockBTreeMap | SccTreeIndex | SkipMap)
            }
            Op::BytesAsc | Op::BytesRand | Op::BytesTotalAsc | Op::BytesTotalRand => {
                matches!(imp, Maple | BTreeMap | RangeMap)
            }
        }
    }
}

/// Operations measured on one ascending build of each structure.
const READ_OPS: [Op; 7] = [
    Op::Load,
    Op::LoadPin,
    Op::Iter,
    Op::GapRev,
    Op::GapFwd,
    Op::GapRevFar,
    Op::GapFwdFar,
];
/// Operations that build or empty structures.
const WRITE_OPS: [Op; 3] = [Op::InsertAsc, Op::InsertRand, Op::EraseRand];

/// Most samples per figure `--repeat` accepts in `tree` and `itree` (as in
/// `run`): the samples are kept in memory, and an unbounded count would be
/// an allocation failure instead of a clear error.
pub const MAX_REPEAT: usize = 1000;

fn fail<T>(msg: String) -> Result<T, LabError> {
    Err(LabError(msg))
}

/// How much work each timed batch does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// Minimum lookups per timed batch: small trees are queried more often
    /// than they have entries, so batches last long enough to time.
    pub min_read_ops: usize,
    /// Minimum writes per sample: small trees are built several times.
    pub min_write_ops: usize,
    /// Rough wall-time cap per gap-search or lookup batch, because a
    /// linear scan could otherwise take minutes on a large tree. (Among the
    /// implementations only the gap scans of the plain maps are slow
    /// enough to be capped.)
    pub gap_budget: Duration,
}

impl Scale {
    /// Settings for publishable numbers.
    pub const FULL: Scale = Scale {
        min_read_ops: 200_000,
        min_write_ops: 200_000,
        gap_budget: Duration::from_millis(1500),
    };
    /// Settings for a fast smoke run (`--quick`).
    pub const QUICK: Scale = Scale {
        min_read_ops: 50_000,
        min_write_ops: 50_000,
        gap_budget: Duration::from_millis(250),
    };

    /// Lookups per batch for a structure of `n` entries.
    pub fn read_batch(&self, n: usize) -> usize {
        n.max(self.min_read_ops)
    }

    /// Fresh builds per write sample for a structure of `n` entries.
    pub fn rounds(&self, n: usize) -> usize {
        self.min_write_ops.div_ceil(n).max(1)
    }

    /// Full iterations per sample for a structure of `n` entries.
    pub fn passes(&self, n: usize) -> usize {
        self.min_read_ops.div_ceil(n).max(1)
    }
}

/// Everything `vmbench tree` needs to run.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeConfig {
    /// Structure sizes (entries).
    pub sizes: Vec<usize>,
    /// Samples per figure; the median is reported.
    pub repeat: usize,
    /// Operations to measure.
    pub ops: Vec<Op>,
    /// Implementations to measure.
    pub impls: Vec<Impl>,
    /// Batch sizes.
    pub scale: Scale,
    /// Seed for the workload's random choices.
    pub seed: u64,
}

impl TreeConfig {
    /// Rejects settings that would make the run meaningless, with a
    /// one-line reason.
    pub fn validate(&self) -> Result<(), LabError> {
        if self.sizes.is_empty() {
            return fail("--sizes: at least one size is required".into());
        }
        if let Some(&bad) = self.sizes.iter().find(|&&n| n == 0 || n > MAX_SIZE) {
            return fail(format!(
                "--sizes: invalid size {bad} (must be between 1 and {MAX_SIZE})"
            ));
        }
        if !(1..=MAX_REPEAT).contains(&self.repeat) {
            return fail(format!(
                "--repeat: {} is not a sample count (1 to {MAX_REPEAT})",
                self.repeat
            ));
        }
        if !self
            .ops
            .iter()
            .any(|&op| self.impls.iter().any(|&imp| op.applies_to(imp)))
        {
            return fail(
                "nothing to measure: none of the selected ops applies to the selected impls".into(),
            );
        }
        Ok(())
    }

    fn wants(&self, op: Op, imp: Impl) -> bool {
        op.applies_to(imp) && self.ops.contains(&op) && self.impls.contains(&imp)
    }
}

/// Runs the benchmark, handing each figure to `sink` as soon as it exists.
/// Progress notes go to stderr.
pub fn run(cfg: &TreeConfig, sink: &mut dyn FnMut(Figure)) -> Result<(), LabError> {
    cfg.validate()?;
    for &n in &cfg.sizes {
        eprintln!("vmbench tree: n={n}: generating workload");
        let w = Layout::generate(n, cfg.scale.read_batch(n), cfg.seed);
        let mut bench = SizeBench {
            cfg,
            w: &w,
            sink: &mut *sink,
        };
        bench.single::<Maple>()?;
        bench.single::<MapleShared>()?;
        bench.single::<BTree>()?;
        bench.single::<RangeMap>()?;
        bench.unordered::<SccTree>()?;
        bench.unordered::<SkipList>()?;
        bench.shared::<MapleShared>()?;
        bench.shared::<RwBTree>()?;
        bench.shared::<SccTree>()?;
        bench.shared::<SkipList>()?;
    }
    Ok(())
}

/// Explains the ratio column under the table.
const RATIO_NOTE: &str = "ratio = maple / btreemap, except load_with_writer and load_no_writer \
(maple-shared / rwlock-btreemap); the peers (rangemap, scc-treeindex, crossbeam-skiplist) are \
not in the ratio, and '-' marks an op an implementation does not do; bytes_asc and bytes_rand \
count maple's nodes only but all of btreemap, so compare bytes_total_* for like with like.";

/// Renders records of this benchmark as a table, with the ratio column
/// comparing maple to its baseline (the locked map for concurrent rows),
/// followed by a note explaining the ratio.
pub fn render_table(records: &[Figure]) -> String {
    let op_order: Vec<&'static str> = Op::ALL.iter().map(|op| op.name()).collect();
    let impl_order: Vec<&'static str> = Impl::ALL.iter().map(|imp| imp.name()).collect();
    figure::render_table(
        records,
        &TableSpec {
            op_order: &op_order,
            impl_order: &impl_order,
            ratio_header: "maple/btreemap",
            ratio_pairs: &[("maple", "btreemap"), ("maple-shared", "rwlock-btreemap")],
        },
    ) + "\n"
        + RATIO_NOTE
}

/// The measurements for one structure size.
struct SizeBench<'a> {
    cfg: &'a TreeConfig,
    w: &'a Layout,
    sink: &'a mut dyn FnMut(Figure),
}

impl SizeBench<'_> {
    fn emit(&mut self, imp: Impl, op: Op, value: f64) {
        (self.sink)(Figure {
            imp: imp.name(),
            op: op.name(),
            n: self.w.n,
            threads: op.threads(),
            value,
            unit: op.unit(),
        });
    }

    /// All single-threaded operations `S` takes part in.
    fn single<S: Scan>(&mut self) -> Result<(), LabError> {
        self.reads::<S>(Self::read_value::<S>)?;
        self.writes::<S>()?;
        self.memory::<S>()
    }

    /// The single-threaded operations of a structure without ordered
    /// scans: point lookups and writes (and memory, where it applies).
    fn unordered<S: Subject>(&mut self) -> Result<(), LabError> {
        self.reads::<S>(Self::point_value::<S>)?;
        self.writes::<S>()?;
        self.memory::<S>()
    }

    /// Names a measurement of `op` on `imp` at this size.
    fn label(&self, imp: Impl, op: Op) -> Label {
        Label {
            imp,
            op,
            n: self.w.n,
        }
    }

    /// Lookup-style operations, all on one ascending build; `value`
    /// measures one of them.
    fn reads<S: Subject>(
        &mut self,
        value: fn(&Self, &S, Op) -> Result<f64, LabError>,
    ) -> Result<(), LabError> {
        let wanted: Vec<Op> = READ_OPS
            .into_iter()
            .filter(|&op| self.cfg.wants(op, S::IMPL))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let tree = build::<S>(&self.w.ascending())?;
        for op in wanted {
            let figure = value(self, &tree, op)?;
            self.emit(S::IMPL, op, figure);
        }
        Ok(())
    }

    /// Median figure of one point lookup operation on `tree`.
    fn point_value<S: Subject>(&self, tree: &S, op: Op) -> Result<f64, LabError> {
        let (label, repeat, addrs) = (self.label(S::IMPL, op), self.cfg.repeat, &self.w.addrs[..]);
        let budget = self.cfg.scale.gap_budget;
        match op {
            Op::Load => capped_lookups(
                label,
                repeat,
                addrs,
                budget,
                workload::expected_load_sum,
                |a| tree.load_sum(a),
            ),
            Op::LoadPin => capped_lookups(
                label,
                repeat,
                addrs,
                budget,
                workload::expected_load_sum,
                |a| tree.load_pin_sum(a),
            ),
            other => fail(format!(
                "{label}: {} needs ordered scans, which {} lacks",
                other.name(),
                S::IMPL.name()
            )),
        }
    }

    /// Median figure of one read operation on `tree`.
    fn read_value<S: Scan>(&self, tree: &S, op: Op) -> Result<f64, LabError> {
        let (label, repeat, addrs) = (self.label(S::IMPL, op), self.cfg.repeat, &self.w.addrs[..]);
        let budget = self.cfg.scale.gap_budget;
        match op {
            Op::Load | Op::LoadPin => self.point_value(tree, op),
            Op::Iter => iteration(label, repeat, self.cfg.scale.passes(self.w.n), tree),
            Op::GapRev => capped_lookups(
                label,
                repeat,
                addrs,
                budget,
                workload::expected_gap_rev_sum,
                |a| tree.gap_rev_sum(a, workload::PAGE),
            ),
            Op::GapFwd => capped_lookups(
                label,
                repeat,
                addrs,
                budget,
                workload::expected_gap_fwd_sum,
                |a| tree.gap_fwd_sum(a, workload::PAGE),
            ),
            Op::GapRevFar => capped_lookups(
                label,
                repeat,
                addrs,
                budget,
                workload::expected_gap_rev_far_sum,
                |a| tree.gap_rev_sum(a, 2 * workload::PAGE),
            ),
            Op::GapFwdFar => {
                let n = self.w.n;
                capped_lookups(
                    label,
                    repeat,
                    addrs,
                    budget,
                    |a| workload::expected_gap_fwd_far_sum(a, n),
                    |a| tree.gap_fwd_sum(a, 2 * workload::PAGE),
                )
            }
            other => fail(format!("{label}: {} is not a read operation", other.name())),
        }
    }

    /// Insertion and erasure, each on fresh structures.
    fn writes<S: Subject>(&mut self) -> Result<(), LabError> {
        let ascending = self.w.ascending();
        let rounds = self.cfg.scale.rounds(self.w.n);
        for op in WRITE_OPS {
            if !self.cfg.wants(op, S::IMPL) {
                continue;
            }
            let label = self.label(S::IMPL, op);
            let value = median_ns_per_op(self.cfg.repeat, || match op {
                Op::InsertAsc => insert_sample::<S>(label, &ascending, rounds),
                Op::InsertRand => insert_sample::<S>(label, &self.w.perm, rounds),
                Op::EraseRand => erase_sample::<S>(label, &ascending, &self.w.perm, rounds),
                other => fail(format!(
                    "{label}: {} is not a write operation",
                    other.name()
                )),
            })?;
            self.emit(S::IMPL, op, value);
        }
        Ok(())
    }

    /// Heap bytes per entry after ascending and random builds. Allocation is
    /// deterministic, so one build per order suffices (no repetitions).
    fn memory<S: Subject>(&mut self) -> Result<(), LabError> {
        let w = self.w;
        let ascending = w.ascending();
        let builds = [
            (Op::BytesAsc, Op::BytesTotalAsc, &ascending[..]),
            (Op::BytesRand, Op::BytesTotalRand, &w.perm[..]),
        ];
        for (node_op, total_op, order) in builds {
            let want_node = self.cfg.wants(node_op, S::IMPL);
            let want_total = self.cfg.wants(total_op, S::IMPL);
            if !(want_node || want_total) {
                continue;
            }
            let bytes = measure_bytes::<S>(order)?;
            if bytes.node.is_some() {
                eprintln!("vmbench tree: {}: {bytes}", self.label(S::IMPL, node_op));
            }
            if want_node {
                self.emit(S::IMPL, node_op, bytes.node.unwrap_or(bytes.total));
            }
            if want_total {
                self.emit(S::IMPL, total_op, bytes.total);
            }
        }
        Ok(())
    }

    /// The concurrent reader, first alone and then next to a writer, on one
    /// ascending build.
    fn shared<S: SharedSubject>(&mut self) -> Result<(), LabError> {
        let alone = self.cfg.wants(Op::LoadNoWriter, S::IMPL);
        let contended = self.cfg.wants(Op::LoadWithWriter, S::IMPL);
        if !(alone || contended) {
            return Ok(());
        }
        let tree = S::build_ascending(self.w.n);
        // Batches capped like other lookups, estimated with no writer.
        let ops = capped_ops(&self.w.addrs, self.cfg.scale.gap_budget, |a| {
            tree.checked_loads(a).hits
        });
        let addrs = &self.w.addrs[..ops];
        if alone {
            let value = self.reader_alone(&tree, addrs)?;
            self.emit(S::IMPL, Op::LoadNoWriter, value);
        }
        if contended {
            let value = self.reader_beside_writer(&tree, addrs)?;
            self.emit(S::IMPL, Op::LoadWithWriter, value);
        }
        Ok(())
    }

    /// `load_no_writer`: with nothing changing the tree, every load must hit.
    fn reader_alone<S: SharedSubject>(&self, tree: &S, addrs: &[u64]) -> Result<f64, LabError> {
        let label = self.label(S::IMPL, Op::LoadNoWriter);
        let (value, tally) = checked_reader(label, self.cfg.repeat, tree, addrs)?;
        if tally.misses > 0 {
            return fail(format!(
                "{label}: {} loads missed with no writer running",
                tally.misses
            ));
        }
        Ok(value)
    }

    /// `load_with_writer`, noting on stderr how often the reader caught an
    /// entry while it was erased and how busy the writer was.
    fn reader_beside_writer<S: SharedSubject>(
        &self,
        tree: &S,
        addrs: &[u64],
    ) -> Result<f64, LabError> {
        let label = self.label(S::IMPL, Op::LoadWithWriter);
        // A different stream from the workload's, so the writer's picks are
        // not correlated with the reader's addresses.
        let seed = self.cfg.seed ^ 0x00ff_00ff_00ff_00ff;
        let (value, tally, writes) = with_writer(label, self.cfg.repeat, tree, addrs, seed)?;
        let loads = tally.hits + tally.misses;
        eprintln!(
            "vmbench tree: {label}: {} of {loads} loads missed ({:.3}%); the writer did {writes} erase+store pairs",
            tally.misses,
            100.0 * tally.misses as f64 / loads.max(1) as f64,
        );
        Ok(value)
    }
}

/// Names a measurement in error messages and notes.
#[derive(Debug, Clone, Copy)]
struct Label {
    imp: Impl,
    op: Op,
    n: usize,
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} n={}", self.imp.name(), self.op.name(), self.n)
    }
}

/// A structure holding the entries in `order`, inserted in that order.
fn build<S: Subject>(order: &[u64]) -> Result<S, LabError> {
    let mut tree = S::empty();
    let failures = insert_all(&mut tree, order);
    check_count::<S>("build", failures, tree.entries(), order.len())?;
    Ok(tree)
}

fn insert_all<S: Subject>(tree: &mut S, order: &[u64]) -> usize {
    order.iter().filter(|&&i| !tree.insert(i)).count()
}

fn erase_all<S: Subject>(tree: &mut S, order: &[u64]) -> usize {
    order.iter().filter(|&&i| !tree.erase(i)).count()
}

fn check_count<S: Subject>(
    what: &str,
    failures: usize,
    entries: usize,
    expected: usize,
) -> Result<(), LabError> {
    if failures > 0 || entries != expected {
        return fail(format!(
            "{} {what}: {failures} operations failed, {entries} entries left (expected {expected})",
            S::IMPL.name()
        ));
    }
    Ok(())
}

/// Median ns per lookup of `run` over `addrs`, verifying each batch's
/// checksum against `expected`.
fn lookups(
    label: Label,
    repeat: usize,
    addrs: &[u64],
    expected: impl Fn(&[u64]) -> u64,
    run: impl Fn(&[u64]) -> u64,
) -> Result<f64, LabError> {
    let want = expected(addrs);
    median_ns_per_op(repeat, || {
        let (elapsed, got) = timed(|| run(addrs));
        if got != want {
            return fail(format!(
                "{label}: wrong results (checksum {got:#x}, expected {want:#x})"
            ));
        }
        Ok(Batch {
            elapsed,
            ops: addrs.len() as u64,
        })
    })
}

/// [`lookups`] over a prefix of `addrs` short enough that one batch takes
/// about `budget`, so slow searches on large trees still finish promptly.
fn capped_lookups(
    label: Label,
    repeat: usize,
    addrs: &[u64],
    budget: Duration,
    expected: impl Fn(&[u64]) -> u64,
    run: impl Fn(&[u64]) -> u64,
) -> Result<f64, LabError> {
    let ops = capped_ops(addrs, budget, &run);
    lookups(label, repeat, &addrs[..ops], expected, run)
}

/// How many of `addrs` one batch of `run` may use to stay within `budget`,
/// estimated from a short probe. At least the probe size.
fn capped_ops(addrs: &[u64], budget: Duration, run: impl Fn(&[u64]) -> u64) -> usize {
    let probe = addrs.len().min(1024);
    let (elapsed, sum) = timed(|| run(&addrs[..probe]));
    std::hint::black_box(sum);
    let per_op = elapsed.as_secs_f64() / probe as f64;
    if per_op <= 0.0 {
        return addrs.len();
    }
    ((budget.as_secs_f64() / per_op) as usize).clamp(probe, addrs.len())
}

/// Median ns per entry of full iterations, `passes` per sample.
fn iteration<S: Scan>(
    label: Label,
    repeat: usize,
    passes: usize,
    tree: &S,
) -> Result<f64, LabError> {
    let want = workload::expected_iter_sum(label.n);
    median_ns_per_op(repeat, || {
        let (elapsed, sums) = timed(|| (0..passes).map(|_| tree.iter_sum()).collect::<Vec<u64>>());
        if let Some(&got) = sums.iter().find(|&&got| got != want) {
            return fail(format!(
                "{label}: wrong results (checksum {got:#x}, expected {want:#x})"
            ));
        }
        Ok(Batch {
            elapsed,
            ops: (passes * label.n) as u64,
        })
    })
}

/// One sample of insertion: `rounds` fresh structures each filled in
/// `order`; only the insertions are timed.
fn insert_sample<S: Subject>(
    label: Label,
    order: &[u64],
    rounds: usize,
) -> Result<Batch, LabError> {
    let mut elapsed = Duration::ZERO;
    for _ in 0..rounds {
        let mut tree = S::empty();
        let (took, failures) = timed(|| insert_all(&mut tree, order));
        elapsed += took;
        check_count::<S>(label.op.name(), failures, tree.entries(), order.len())?;
    }
    Ok(Batch {
        elapsed,
        ops: (rounds * order.len()) as u64,
    })
}

/// One sample of erasure: `rounds` builds in `build_order` (untimed), each
/// emptied in `erase_order`.
fn erase_sample<S: Subject>(
    label: Label,
    build_order: &[u64],
    erase_order: &[u64],
    rounds: usize,
) -> Result<Batch, LabError> {
    let mut elapsed = Duration::ZERO;
    for _ in 0..rounds {
        let mut tree = build::<S>(build_order)?;
        let (took, failures) = timed(|| erase_all(&mut tree, erase_order));
        elapsed += took;
        check_count::<S>(label.op.name(), failures, tree.entries(), 0)?;
    }
    Ok(Batch {
        elapsed,
        ops: (rounds * erase_order.len()) as u64,
    })
}

/// Heap usage of one build, per entry.
#[derive(Debug, Clone, Copy)]
struct Bytes {
    /// Memory per entry, nodes plus values: the heap bytes the build added
    /// (BTreeMap), or nodes in use plus one value box per entry (maple,
    /// whose nodes come from a slab the allocator cannot see per node).
    total: f64,
    /// The structure's own node bytes per entry, if it reports them.
    node: Option<f64>,
    /// Entries built.
    n: usize,
}

impl fmt::Display for Bytes {
    /// Shows the total next to the node bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let node = self.node.unwrap_or(0.0);
        write!(
            f,
            "node {node:.1} B/entry, total {:.1} B/entry (n={})",
            self.total, self.n
        )
    }
}

fn measure_bytes<S: Subject>(order: &[u64]) -> Result<Bytes, LabError> {
    let n = order.len();
    // A throwaway one-entry build first absorbs one-time lazy allocations
    // (e.g. per-thread epoch state) that do not belong to the structure.
    drop(build::<S>(&[0])?);
    let (tree, heap) = alloc_count::net_allocated(|| build::<S>(order));
    let tree = tree?;
    let node = tree.node_bytes();
    // Maple nodes come from a slab that takes memory in chunks and recycles
    // freed nodes, so the heap delta shows chunk growth and free-list
    // bookkeeping, not the nodes this build uses. For maple the total is
    // therefore counted exactly: the nodes in use (found by walking the
    // tree). The values live in the slots themselves (`maple::Direct`),
    // so the nodes are the whole structure.
    let total = node.unwrap_or(heap);
    drop(tree);
    Ok(Bytes {
        total: total as f64 / n as f64,
        node: node.map(|b| b as f64 / n as f64),
        n,
    })
}

/// Median ns per checked load over `repeat` batches, and the summed tally.
/// Wrong values fail the run: they mean a reader saw a torn or stale node.
fn checked_reader<S: SharedSubject>(
    label: Label,
    repeat: usize,
    tree: &S,
    addrs: &[u64],
) -> Result<(f64, Tally), LabError> {
    let mut total = Tally::default();
    let value = median_ns_per_op(repeat, || {
        let (elapsed, tally) = timed(|| tree.checked_loads(addrs));
        if tally.wrong > 0 {
            return fail(format!(
                "{label}: {} loads returned another entry's value",
                tally.wrong
            ));
        }
        total = total.merge(tally);
        Ok(Batch {
            elapsed,
            ops: addrs.len() as u64,
        })
    })?;
    Ok((value, total))
}

/// Sets a flag when dropped, so the writer thread stops even if the reader
/// returns early or panics (otherwise the scope would wait forever).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// [`checked_reader`] while a second thread churns random entries; also
/// returns the writer's erase+store pair count.
fn with_writer<S: SharedSubject>(
    label: Label,
    repeat: usize,
    tree: &S,
    addrs: &[u64],
    seed: u64,
) -> Result<(f64, Tally, u64), LabError> {
    let stop = AtomicBool::new(false);
    let writes = AtomicU64::new(0);
    thread::scope(|scope| {
        let writer = scope.spawn(|| churn_until_stopped(tree, label.n, seed, &stop, &writes));
        let result = {
            let _stop = StopOnDrop(&stop);
            // Start timing only once the writer is really running.
            while writes.load(Ordering::Relaxed) == 0 && !writer.is_finished() {
                thread::yield_now();
            }
            checked_reader(label, repeat, tree, addrs)
        };
        let failed = writer
            .join()
            .map_err(|_| LabError(format!("{label}: writer thread panicked")))?;
        if failed > 0 {
            return fail(format!("{label}: {failed} writer erase/store steps failed"));
        }
        let (value, tally) = result?;
        Ok((value, tally, writes.load(Ordering::Relaxed)))
    })
}

/// Erases and re-stores random entries until `stop`; counts completed pairs
/// in `writes` and returns how many failed.
fn churn_until_stopped<S: SharedSubject>(
    tree: &S,
    n: usize,
    seed: u64,
    stop: &AtomicBool,
    writes: &AtomicU64,
) -> u64 {
    let mut rng = SplitMix64::new(seed);
    let mut failed = 0;
    while !stop.load(Ordering::Relaxed) {
        if !tree.churn(rng.below(n as u64)) {
            failed += 1;
        }
        writes.fetch_add(1, Ordering::Relaxed);
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_applies_somewhere() {
        for op in Op::ALL {
            assert!(Impl::ALL.iter().any(|&imp| op.applies_to(imp)), "{op:?}");
        }
    }

    #[test]
    fn validate_rejects_bad_settings() {
        let ok = TreeConfig {
            sizes: vec![10],
            repeat: 1,
            ops: Op::ALL.to_vec(),
            impls: Impl::ALL.to_vec(),
            scale: Scale::QUICK,
            seed: DEFAULT_SEED,
        };
        assert!(ok.validate().is_ok());
        assert!(TreeConfig {
            sizes: vec![0],
            ..ok.clone()
        }
        .validate()
        .is_err());
        assert!(TreeConfig {
            repeat: 0,
            ..ok.clone()
        }
        .validate()
        .is_err());
        assert!(TreeConfig {
            ops: vec![Op::LoadPin],
            impls: vec![Impl::BTreeMap],
            ..ok
        }
        .validate()
        .is_err());
    }

    #[test]
    fn btreemap_runs_every_op_it_supports() {
        let cfg = TreeConfig {
            sizes: vec![50],
            repeat: 1,
            ops: Op::ALL.to_vec(),
            impls: vec![Impl::BTreeMap, Impl::RwLockBTreeMap],
            scale: Scale {
                min_read_ops: 100,
                min_write_ops: 100,
                gap_budget: Duration::from_millis(10),
            },
            seed: 1,
        };
        let mut records = Vec::new();
        run(&cfg, &mut |r| records.push(r)).unwrap();
        let expected = Op::ALL
            .iter()
            .flat_map(|&op| [Impl::BTreeMap, Impl::RwLockBTreeMap].map(move |imp| (op, imp)))
            .filter(|&(op, imp)| op.applies_to(imp))
            .count();
        assert_eq!(records.len(), expected);
        assert!(records.iter().all(figure_is_positive), "{records:?}");
    }

    /// Whether a figure is positive. Byte counts are exempt: the counting
    /// allocator is process-wide, and tests running in parallel allocate
    /// and free while a build is counted, so a test's count can come out 0.
    fn figure_is_positive(r: &Figure) -> bool {
        r.value > 0.0 || r.unit == "bytes/entry"
    }

    fn tiny_config(impls: Vec<Impl>) -> TreeConfig {
        TreeConfig {
            sizes: vec![60],
            repeat: 1,
            ops: Op::ALL.to_vec(),
            impls,
            scale: Scale {
                min_read_ops: 200,
                min_write_ops: 200,
                gap_budget: Duration::from_millis(10),
            },
            seed: 2,
        }
    }

    #[test]
    fn peers_run_exactly_the_ops_they_support() {
        let peers = vec![Impl::RangeMap, Impl::SccTreeIndex, Impl::SkipMap];
        let mut records = Vec::new();
        run(&tiny_config(peers.clone()), &mut |r| records.push(r)).unwrap();
        let mut got: Vec<(&str, &str)> = records.iter().map(|r| (r.imp, r.op)).collect();
        got.sort_unstable();
        let mut want: Vec<(&str, &str)> = Op::ALL
            .iter()
            .flat_map(|&op| peers.iter().map(move |&imp| (op, imp)))
            .filter(|&(op, imp)| op.applies_to(imp))
            .map(|(op, imp)| (imp.name(), op.name()))
            .collect();
        want.sort_unstable();
        assert_eq!(got, want);
        assert!(records.iter().all(figure_is_positive), "{records:?}");
        // rangemap does every single-threaded op btreemap does.
        for op in Op::ALL {
            assert_eq!(
                op.applies_to(Impl::RangeMap),
                op.applies_to(Impl::BTreeMap),
                "{op:?}"
            );
        }
        for imp in [Impl::SccTreeIndex, Impl::SkipMap] {
            for op in [
                Op::Load,
                Op::LoadWithWriter,
                Op::LoadNoWriter,
                Op::InsertRand,
            ] {
                assert!(op.applies_to(imp), "{imp:?} {op:?}");
            }
            for op in [Op::Iter, Op::GapFwd, Op::GapRev, Op::BytesAsc, Op::LoadPin] {
                assert!(!op.applies_to(imp), "{imp:?} {op:?}");
            }
        }
    }

    #[test]
    fn table_keeps_the_maple_btreemap_ratio_and_shows_the_peers() {
        let mut records = Vec::new();
        let cfg = TreeConfig {
            ops: vec![Op::Load, Op::GapFwd],
            ..tiny_config(Impl::ALL.to_vec())
        };
        run(&cfg, &mut |r| records.push(r)).unwrap();
        let table = render_table(&records);
        for imp in Impl::ALL {
            if imp != Impl::MapleShared && imp != Impl::RwLockBTreeMap {
                assert!(table.contains(imp.name()), "{table}");
            }
        }
        assert!(table.contains("maple/btreemap"), "{table}");
        // The concurrent peers do not search gaps: their gap_fwd cells are
        // '-', not a figure.
        let gap_row = table.lines().find(|l| l.contains("gap_fwd")).unwrap();
        assert_eq!(gap_row.matches(" - ").count(), 2, "{table}");
    }

    /// A structure missing entry `k` of the layout, built through `S`.
    fn missing<S: Subject>(n: u64, k: u64) -> S {
        let order: Vec<u64> = (0..n).filter(|&i| i != k).collect();
        build::<S>(&order).unwrap()
    }

    fn label(imp: Impl, op: Op) -> Label {
        Label { imp, op, n: 60 }
    }

    #[test]
    fn a_wrong_answer_fails_the_run() {
        let w = Layout::generate(60, 600, 9);
        let addrs = &w.addrs[..];
        assert!(addrs.iter().any(|&a| workload::index_of(a) == 30));
        let load = workload::expected_load_sum;

        let ranges = missing::<RangeMap>(60, 30);
        let err = lookups(label(Impl::RangeMap, Op::Load), 1, addrs, load, |a| {
            ranges.load_sum(a)
        })
        .unwrap_err()
        .0;
        assert!(err.contains("rangemap load n=60: wrong results"), "{err}");
        assert!(iteration(label(Impl::RangeMap, Op::Iter), 1, 1, &ranges).is_err());
        // The hole left by entry 30 is the first 2-page one above entries
        // 0 to 29.
        assert!(lookups(
            label(Impl::RangeMap, Op::GapFwdFar),
            1,
            addrs,
            |a| workload::expected_gap_fwd_far_sum(a, 60),
            |a| ranges.gap_fwd_sum(a, 2 * workload::PAGE)
        )
        .is_err());

        let scc = missing::<SccTree>(60, 30);
        assert!(
            lookups(label(Impl::SccTreeIndex, Op::Load), 1, addrs, load, |a| {
                scc.load_sum(a)
            })
            .is_err()
        );
        let skip = missing::<SkipList>(60, 30);
        assert!(
            lookups(label(Impl::SkipMap, Op::Load), 1, addrs, load, |a| {
                skip.load_sum(a)
            })
            .is_err()
        );
        // A correct structure passes the same checks.
        let skip = build::<SkipList>(&w.ascending()).unwrap();
        assert!(
            lookups(label(Impl::SkipMap, Op::Load), 1, addrs, load, |a| {
                skip.load_sum(a)
            })
            .is_ok()
        );
    }

    #[test]
    fn a_concurrent_reader_missing_entries_fails_the_run() {
        let cfg = tiny_config(vec![Impl::SccTreeIndex, Impl::SkipMap]);
        let w = Layout::generate(60, 600, 9);
        let mut sink = |_: Figure| {};
        let bench = SizeBench {
            cfg: &cfg,
            w: &w,
            sink: &mut sink,
        };
        let mut scc = <SccTree as SharedSubject>::build_ascending(60);
        assert!(w.addrs.iter().any(|&a| workload::index_of(a) == 30));
        assert!(bench.reader_alone(&scc, &w.addrs).is_ok());
        assert!(Subject::erase(&mut scc, 30));
        let err = bench.reader_alone(&scc, &w.addrs).unwrap_err().0;
        assert!(err.contains("missed with no writer running"), "{err}");
        let mut skip = <SkipList as SharedSubject>::build_ascending(60);
        assert!(bench.reader_beside_writer(&skip, &w.addrs).is_ok());
        assert!(Subject::erase(&mut skip, 30));
        assert!(bench.reader_alone(&skip, &w.addrs).is_err());
    }
}

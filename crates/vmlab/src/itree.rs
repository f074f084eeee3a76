//! `vmbench itree`: the two interval-tree kinds of `mm::itree` side by side
//! on an i_mmap-like population (see [`Workload`]).
//!
//! Both kinds are measured in the same run on the same entries and
//! queries, and the table's ratio column is `btree / rb` in operations per
//! second (above 1: the B+ tree is faster). Every query batch's results are
//! checked against a brute-force count, and every churned tree is
//! validated, so a fast but wrong tree fails the run.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use mm::itree::{Itree, ItreeKind};

use crate::figure::{self, Figure, TableSpec};
use crate::rng::SplitMix64;
use crate::timing::{median, timed, Batch};
use crate::LabError;

/// Largest accepted tree size: far beyond any real i_mmap, small enough to
/// build in seconds.
pub const MAX_SIZE: usize = 10_000_000;
/// Tree sizes unless `--sizes` is given: a lightly shared file, a busy
/// one, libc on a large machine running exec-heavy work (thousands of
/// processes each mapping libc's segments), and a stress size.
pub const DEFAULT_SIZES: [usize; 4] = [100, 1_000, 6_000, 50_000];
/// Tree sizes with `--quick`.
pub const QUICK_SIZES: [usize; 3] = [100, 1_000, 6_000];

/// A measured operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Remove a random entry and insert a new one (a process exits while
    /// another execs); each insert and each remove counts as one op.
    Churn,
    /// Visit every entry mapping one random page: the rmap walk of a page.
    QueryPage,
    /// Find the first entry mapping one random page and stop: "is this
    /// page mapped anywhere".
    QueryFirst,
}

impl Op {
    /// All operations, in table row order.
    pub const ALL: [Op; 3] = [Op::Churn, Op::QueryPage, Op::QueryFirst];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Op::Churn => "churn",
            Op::QueryPage => "query_page",
            Op::QueryFirst => "query_first",
        }
    }
}

/// How much work each timed sample does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// Remove+insert pairs per churn sample.
    pub churn_pairs: usize,
    /// Entries a query_page sample should visit in total; the number of
    /// queries follows from the expected hits per query.
    pub query_visits: usize,
    /// Queries per query_first sample.
    pub first_queries: usize,
}

impl Scale {
    /// Settings for reported numbers.
    pub const FULL: Scale = Scale {
        churn_pairs: 200_000,
        query_visits: 5_000_000,
        first_queries: 1_000_000,
    };
    /// Settings for a fast smoke run (`--quick`).
    pub const QUICK: Scale = Scale {
        churn_pairs: 20_000,
        query_visits: 500_000,
        first_queries: 100_000,
    };
}

/// Everything `vmbench itree` needs to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ItreeConfig {
    /// Tree sizes (intervals).
    pub sizes: Vec<usize>,
    /// Samples per figure; the median is reported.
    pub repeat: usize,
    /// Operations to measure.
    pub ops: Vec<Op>,
    /// Batch sizes.
    pub scale: Scale,
    /// Seed of the workload's random choices.
    pub seed: u64,
}

impl ItreeConfig {
    /// Rejects settings that would make the run meaningless, with a
    /// one-line reason.
    pub fn validate(&self) -> Result<(), LabError> {
        if self.sizes.is_empty() {
            return Err(LabError("--sizes: at least one size is required".into()));
        }
        if let Some(&bad) = self.sizes.iter().find(|&&n| n == 0 || n > MAX_SIZE) {
            return Err(LabError(format!(
                "--sizes: invalid size {bad} (must be between 1 and {MAX_SIZE})"
            )));
        }
        if !(1..=crate::tree::MAX_REPEAT).contains(&self.repeat) {
            return Err(LabError(format!(
                "--repeat: {} is not a sample count (1 to {})",
                self.repeat,
                crate::tree::MAX_REPEAT
            )));
        }
        if self.ops.is_empty() {
            return Err(LabError("--ops: at least one op is required".into()));
        }
        Ok(())
    }
}

/// Page-offset ranges of the segments a process maps from a shared
/// library shaped like libc (header and read-only data, text, more
/// read-only data, RELRO, writable data), in pages.
const SEGMENTS: [(u64, u64); 5] = [(0, 39), (40, 407), (408, 484), (485, 488), (489, 490)];
/// The whole file span: what exec maps before overlaying the segments
/// with `MAP_FIXED`, so some are always present in a busy i_mmap.
const WHOLE_SPAN: (u64, u64) = (0, 490);
/// One entry in this many is a whole-span mapping.
const WHOLE_SPAN_EVERY: u64 = 20;

/// The i_mmap of a library shared by many processes: every process's
/// segments have the same page ranges, so the tree holds many equal
/// ranges told apart by their ids (VMA addresses), and a page of text is
/// mapped by a fifth or more of all entries.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `(first, last, id)` of every entry, in insertion order.
    pub entries: Vec<(u64, u64, u64)>,
    rng: SplitMix64,
}

impl Workload {
    /// `n` entries drawn from `seed`.
    pub fn generate(n: usize, seed: u64) -> Workload {
        let mut w = Workload {
            entries: Vec::with_capacity(n),
            rng: SplitMix64::new(seed),
        };
        for _ in 0..n {
            let e = w.fresh_entry();
            w.entries.push(e);
        }
        w
    }

    /// A new entry: a segment (or the whole span) and a random
    /// slab-aligned id. Ids are 56 random bits, so a collision with a live
    /// entry is vanishingly rare; if one happens the insert's `EEXIST`
    /// fails the run rather than skewing it.
    fn fresh_entry(&mut self) -> (u64, u64, u64) {
        let (first, last) = if self.rng.below(WHOLE_SPAN_EVERY) == 0 {
            WHOLE_SPAN
        } else {
            SEGMENTS[self.rng.below(SEGMENTS.len() as u64) as usize]
        };
        (first, last, self.rng.next_u64() & !0xff)
    }

    /// `count` random query pages within the file span.
    fn pages(&mut self, count: usize) -> Vec<u64> {
        (0..count)
            .map(|_| self.rng.below(WHOLE_SPAN.1 + 1))
            .collect()
    }

    /// A tree of `kind` holding every entry, built in random order.
    fn build(&mut self, kind: ItreeKind) -> Result<Itree<u64>, LabError> {
        let mut order = self.entries.clone();
        self.rng.shuffle(&mut order);
        let mut tree = Itree::new(kind);
        for &(first, last, id) in &order {
            // A duplicate id would be a generator bug worth knowing about.
            tree.insert(first, last, id, id)
                .map_err(|e| LabError(format!("{kind}: building the tree: {e}")))?;
        }
        check_tree(&tree, self.entries.len(), "build")?;
        Ok(tree)
    }
}

fn check_tree(tree: &Itree<u64>, len: usize, what: &str) -> Result<(), LabError> {
    let kind = tree.kind();
    tree.validate()
        .map_err(|e| LabError(format!("{kind} after {what}: invalid tree: {e}")))?;
    if tree.len() != len {
        return Err(LabError(format!(
            "{kind} after {what}: {} entries, expected {len}",
            tree.len()
        )));
    }
    Ok(())
}

/// Hits and id checksum of a batch of page queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Tally {
    hits: u64,
    ids: u64,
}

/// What a correct tree must report for `pages`, by brute force. Each
/// distinct page is counted once and remembered: the workload's pages lie
/// in a span of a few hundred, so this stays cheap for large batches.
fn expected_tally(entries: &[(u64, u64, u64)], pages: &[u64], first_only: bool) -> Tally {
    let mut memo: BTreeMap<u64, Tally> = BTreeMap::new();
    let mut total = Tally::default();
    for &p in pages {
        let t = *memo
            .entry(p)
            .or_insert_with(|| page_tally(entries, p, first_only));
        total.hits += t.hits;
        total.ids = total.ids.wrapping_add(t.ids);
    }
    total
}

/// Brute-force tally of one page query.
fn page_tally(entries: &[(u64, u64, u64)], page: u64, first_only: bool) -> Tally {
    let mut hits = entries
        .iter()
        .filter(|&&(first, last, _)| first <= page && page <= last);
    let mut t = Tally::default();
    if first_only {
        // The first hit in key order is the smallest key.
        if let Some(&(_, _, id)) = hits.by_ref().min() {
            t.hits = 1;
            t.ids = id;
        }
    } else {
        for &(_, _, id) in hits {
            t.hits += 1;
            t.ids = t.ids.wrapping_add(id);
        }
    }
    t
}

fn query_tally(tree: &Itree<u64>, pages: &[u64], first_only: bool) -> Tally {
    let mut t = Tally::default();
    for &p in pages {
        let _ = tree.visit_overlap(p, p, |e| {
            t.hits += 1;
            t.ids = t.ids.wrapping_add(*e.value);
            if first_only {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
    }
    t
}

/// One kind under measurement: its own copy of the workload (same
/// entries, build order and churn choices as the other kind's), its tree
/// and its samples so far (ns per op).
struct Subject {
    w: Workload,
    tree: Itree<u64>,
    samples: Vec<f64>,
}

/// Runs the benchmark, handing each figure to `sink` as soon as it exists.
/// Progress notes go to stderr.
///
/// The kinds take turns sample by sample, so a slow spell of the machine
/// (other processes, frequency changes) hits both alike and the ratio
/// stays fair.
pub fn run(cfg: &ItreeConfig, sink: &mut dyn FnMut(Figure)) -> Result<(), LabError> {
    cfg.validate()?;
    for &n in &cfg.sizes {
        let base = Workload::generate(n, cfg.seed ^ n as u64);
        for op in Op::ALL.into_iter().filter(|op| cfg.ops.contains(op)) {
            let first_only = op == Op::QueryFirst;
            let pages_wanted = match op {
                Op::Churn => 0,
                // About a fifth of all entries map a random page.
                Op::QueryPage => (cfg.scale.query_visits / (n / 5 + 1)).clamp(50, 200_000),
                Op::QueryFirst => cfg.scale.first_queries,
            };
            let pages = base.clone().pages(pages_wanted);
            let want = expected_tally(&base.entries, &pages, first_only);
            let mut subjects = Vec::new();
            for kind in ItreeKind::ALL {
                let mut w = base.clone();
                let tree = w.build(kind)?;
                subjects.push(Subject {
                    w,
                    tree,
                    samples: Vec::with_capacity(cfg.repeat),
                });
            }
            for _ in 0..cfg.repeat {
                for s in &mut subjects {
                    let sample = match op {
                        Op::Churn => churn_sample(&mut s.w, &mut s.tree, cfg.scale.churn_pairs)?,
                        Op::QueryPage | Op::QueryFirst => {
                            query_sample(&s.tree, &pages, want, first_only)?
                        }
                    };
                    s.samples.push(sample.ns_per_op());
                }
            }
            for s in &mut subjects {
                let kind = s.tree.kind();
                let ops_per_s = ops_per_s(median(&mut s.samples));
                eprintln!(
                    "vmbench itree: n={n} {kind} (height {}) {}: {ops_per_s:.0} ops/s",
                    s.tree.height(),
                    op.name()
                );
                sink(Figure {
                    imp: kind.name(),
                    op: op.name(),
                    n,
                    threads: 1,
                    value: ops_per_s,
                    unit: "ops/s",
                });
            }
        }
    }
    Ok(())
}

fn ops_per_s(ns_per_op: f64) -> f64 {
    if ns_per_op > 0.0 {
        1e9 / ns_per_op
    } else {
        0.0
    }
}

/// One timed batch of `pairs` remove+insert pairs on `tree`, which keeps
/// its size; the tree is validated afterwards (untimed).
fn churn_sample(w: &mut Workload, tree: &mut Itree<u64>, pairs: usize) -> Result<Batch, LabError> {
    let n = w.entries.len();
    let kind = tree.kind();
    // Victims and newcomers are drawn before timing, so the timed loop is
    // tree work only.
    let mut plan = Vec::with_capacity(pairs);
    for _ in 0..pairs {
        let victim = w.rng.below(n as u64) as usize;
        let fresh = w.fresh_entry();
        let old = std::mem::replace(&mut w.entries[victim], fresh);
        plan.push((old, fresh));
    }
    let (elapsed, failures) = timed(|| {
        let mut failures = 0usize;
        for &((of, ol, oid), (nf, nl, nid)) in &plan {
            failures += usize::from(tree.remove(of, ol, oid).is_none());
            failures += usize::from(tree.insert(nf, nl, nid, nid).is_err());
        }
        failures
    });
    if failures > 0 {
        return Err(LabError(format!(
            "{kind} churn: {failures} removes or inserts failed"
        )));
    }
    check_tree(tree, n, "churn")?;
    Ok(Batch {
        elapsed,
        ops: 2 * plan.len() as u64,
    })
}

/// One timed batch of page queries, checked against `want`.
fn query_sample(
    tree: &Itree<u64>,
    pages: &[u64],
    want: Tally,
    first_only: bool,
) -> Result<Batch, LabError> {
    let (elapsed, got) = timed(|| query_tally(tree, pages, first_only));
    if got != want {
        return Err(LabError(format!(
            "{} queries: wrong results ({got:?}, expected {want:?})",
            tree.kind()
        )));
    }
    Ok(Batch {
        elapsed,
        ops: pages.len() as u64,
    })
}

/// Explains the ratio column under the table.
const RATIO_NOTE: &str =
    "ratio = btree / rb in ops/s (above 1: the B+ tree is faster); churn counts each insert and \
each remove as one op.";

/// Renders records of this benchmark as a table with a `btree/rb` column.
pub fn render_table(records: &[Figure]) -> String {
    let op_order: Vec<&'static str> = Op::ALL.iter().map(|op| op.name()).collect();
    let kinds: Vec<&'static str> = ItreeKind::ALL.iter().map(|k| k.name()).collect();
    figure::render_table(
        records,
        &TableSpec {
            op_order: &op_order,
            impl_order: &kinds,
            ratio_header: "btree/rb",
            ratio_pairs: &[("btree", "rb")],
        },
    ) + "\n"
        + RATIO_NOTE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> ItreeConfig {
        ItreeConfig {
            sizes: vec![40, 300],
            repeat: 1,
            ops: Op::ALL.to_vec(),
            scale: Scale {
                churn_pairs: 200,
                query_visits: 2_000,
                first_queries: 100,
            },
            seed: 3,
        }
    }

    #[test]
    fn every_kind_and_op_yields_a_figure() {
        let mut records = Vec::new();
        run(&tiny(), &mut |r| records.push(r)).unwrap();
        assert_eq!(records.len(), 2 * Op::ALL.len() * ItreeKind::ALL.len());
        assert!(records.iter().all(|r| r.value > 0.0), "{records:?}");
        let table = render_table(&records);
        assert!(
            table.contains("btree/rb") && table.contains("query_first"),
            "{table}"
        );
    }

    #[test]
    fn query_check_matches_brute_force() {
        let mut w = Workload::generate(500, 9);
        let pages = w.pages(64);
        for kind in ItreeKind::ALL {
            let tree = w.build(kind).unwrap();
            for first_only in [false, true] {
                let want = expected_tally(&w.entries, &pages, first_only);
                assert!(want.hits > 0);
                assert_eq!(query_tally(&tree, &pages, first_only), want);
            }
        }
    }

    #[test]
    fn a_wrong_answer_fails_the_run() {
        let mut w = Workload::generate(100, 1);
        let pages = w.pages(10);
        let tree = w.build(ItreeKind::Rb).unwrap();
        let mut want = expected_tally(&w.entries, &pages, false);
        want.hits += 1;
        assert!(query_sample(&tree, &pages, want, false).is_err());
    }

    #[test]
    fn validate_rejects_bad_settings() {
        let ok = tiny();
        assert!(ok.validate().is_ok());
        for bad in [
            ItreeConfig {
                sizes: vec![],
                ..ok.clone()
            },
            ItreeConfig {
                sizes: vec![0],
                ..ok.clone()
            },
            ItreeConfig {
                repeat: 0,
                ..ok.clone()
            },
            ItreeConfig {
                ops: vec![],
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}

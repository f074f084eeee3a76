//! `vmbench suite`: every workload across the designs it compares, at 1 to
//! all cores, repeated, then the comparison table, the plots and the HTML
//! page in a results directory (its files: [`vmresults::samples`]).
//!
//! What each workload compares (the first configuration is the baseline
//! of its table: the design the kernel had before the one measured
//! against it):
//!
//! | workload | configurations |
//! |---|---|
//! | `tree` | the maple tree (exclusive and shared writes), `BTreeMap` (plain and behind a lock), `rangemap`, `scc::TreeIndex` and `crossbeam-skiplist`, per operation and size |
//! | `execl` | the five i_mmap designs (`single` first), and `single` with each lock kind |
//! | `aim7-brk` | the anon_vma rule off, then on |
//! | `brk1`, `mmap1`, `malloc1`, `mmap2`, `page_fault3` | legacy index, then maple; processes and threads mode |
//! | `kernbench` | legacy index, then maple |
//!
//! A configuration that cannot be measured (a failed call, a workload
//! refusing a mode) is reported on stderr and left out of the results; the
//! table then shows `-` for it, never a zero.
//!
//! # Points, interruption and resumption
//!
//! A run is a list of [`Point`]s: for the `run` workloads one point is one
//! configuration at one thread count in one repetition (one sample); for
//! `tree` one point is one repetition at one structure size, a pass that
//! measures every kept implementation and operation at that size (a sample
//! per implementation and operation), because the implementations share
//! the generated workload of the pass. Every point's samples are appended
//! to `results.jsonl` as soon as it is measured ([`SampleWriter`]).
//!
//! The first SIGINT or SIGTERM stops the run after the point being
//! measured; the tables, plots, page and summary are still written from
//! what was measured, and the run fails with a line saying how to resume
//! it. A second signal ends the process at once.
//!
//! [`resume`] measures only the points of the recorded plan that have no
//! sample in `results.jsonl`, and appends them. "The same command" is the
//! same resolved plan: every run writes its [`Plan`] (workloads, designs,
//! thread counts, repetitions, durations, sizes, topology, pinning; not
//! the directory) to `plan.json`, and a resumption either takes that plan
//! as it is or, given options, must resolve them to the very same plan,
//! so defaults that depend on the machine (the thread counts) are
//! compared as they were resolved. It also refuses a directory measured
//! on another machine (`machine.json`).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use mm::lock::LockKind;
use mm::policy::ImapDesign;
use mm::topology::Topology;
use mm::IndexKind;

use crate::placement::{self, Gate, Rule};
use crate::run::harness::{self, Design, Mode, Spec, Timing};
use crate::run::resident;
use crate::run::workload::Workload;
use crate::tree::{self, Impl, Op, Scale, TreeConfig};
use crate::LabError;
use serde::{Deserialize, Serialize};
use vmresults::compare;
use vmresults::page::{self, Page};
use vmresults::plot;
use vmresults::samples::{self as results, Machine, Sample, SampleWriter};

mod summary;

pub use summary::summary;

/// One configuration of one workload.
#[derive(Debug, Clone)]
struct Config {
    /// The column name, e.g. `imap=split`.
    label: String,
    /// The design names that `--designs` matches.
    tags: Vec<&'static str>,
    /// How to run it (for the `run` workloads).
    kind: ConfigKind,
}

#[derive(Debug, Clone)]
enum ConfigKind {
    Run {
        mode: Mode,
        design: Design,
    },
    /// A `tree` implementation.
    Tree(Impl),
}

/// A workload of the suite: the tree microbenchmark, or one of `run`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SuiteWorkload {
    /// `vmbench tree`'s operations, per implementation and size.
    Tree,
    /// A workload on the address-space model.
    Run(Workload),
}

impl SuiteWorkload {
    /// The suite's workloads, in run order.
    pub const ALL: [SuiteWorkload; 9] = [
        SuiteWorkload::Tree,
        SuiteWorkload::Run(Workload::Execl),
        SuiteWorkload::Run(Workload::Aim7Brk),
        SuiteWorkload::Run(Workload::Brk1),
        SuiteWorkload::Run(Workload::Mmap1),
        SuiteWorkload::Run(Workload::Malloc1),
        SuiteWorkload::Run(Workload::Mmap2),
        SuiteWorkload::Run(Workload::PageFault3),
        SuiteWorkload::Run(Workload::Kernbench),
    ];

    /// The name on the command line and in `results.jsonl`.
    pub fn name(self) -> &'static str {
        match self {
            SuiteWorkload::Tree => "tree",
            SuiteWorkload::Run(w) => w.name(),
        }
    }

    /// The workload called `name`, if the suite has one.
    pub fn named(name: &str) -> Option<SuiteWorkload> {
        SuiteWorkload::ALL.into_iter().find(|w| w.name() == name)
    }
}

impl std::fmt::Display for SuiteWorkload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The tree operations the suite measures: lookups, writes, iteration,
/// free-area search, reads beside a writer, and memory.
const TREE_OPS: [Op; 7] = [
    Op::Load,
    Op::InsertRand,
    Op::EraseRand,
    Op::Iter,
    Op::GapRev,
    Op::LoadWithWriter,
    Op::BytesTotalRand,
];

fn run_config(
    label: String,
    tags: Vec<&'static str>,
    mode: Mode,
    index: IndexKind,
    imap: ImapDesign,
    lock: LockKind,
    anon_rule: bool,
) -> Config {
    Config {
        label,
        tags,
        kind: ConfigKind::Run {
            mode,
            design: Design {
                index,
                imap,
                lock,
                anon_rule,
            },
        },
    }
}

/// The configurations `workload` compares, baseline first.
/// Every design name `Plan::designs` may hold, over all workloads.
pub fn design_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = SuiteWorkload::ALL
        .into_iter()
        .flat_map(configs)
        .flat_map(|c| c.tags)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

fn configs(workload: SuiteWorkload) -> Vec<Config> {
    let m = IndexKind::Maple;
    let (single, rwsem) = (ImapDesign::Single, LockKind::Rwsem);
    let p = Mode::Processes;
    let SuiteWorkload::Run(workload) = workload else {
        return Impl::ALL
            .iter()
            .map(|&imp| Config {
                label: imp.name().to_string(),
                tags: vec![imp.name()],
                kind: ConfigKind::Tree(imp),
            })
            .collect();
    };
    match workload {
        Workload::Execl => {
            let mut out: Vec<Config> = ImapDesign::ALL
                .iter()
                .map(|&d| {
                    let label = format!("imap={d}");
                    run_config(label, vec![d.name(), "rwsem"], p, m, d, rwsem, true)
                })
                .collect();
            for lock in [LockKind::Std, LockKind::Numa] {
                let label = format!("imap=single lock={lock}");
                out.push(run_config(
                    label,
                    vec!["single", lock.name()],
                    p,
                    m,
                    single,
                    lock,
                    true,
                ));
            }
            out
        }
        Workload::Aim7Brk => [false, true]
            .into_iter()
            .map(|rule| {
                let name = if rule { "rule-on" } else { "rule-off" };
                run_config(
                    name.replace('-', "="),
                    vec![name],
                    p,
                    m,
                    single,
                    rwsem,
                    rule,
                )
            })
            .collect(),
        Workload::Kernbench => IndexKind::ALL
            .iter()
            .rev()
            .map(|&index| {
                let label = index.name().to_string();
                run_config(label, vec![index.name()], p, index, single, rwsem, true)
            })
            .collect(),
        _ => {
            let mut out = Vec::new();
            for mode in Mode::ALL {
                for &index in IndexKind::ALL.iter().rev() {
                    let label = format!("{index} {}", mode.name());
                    let tags = vec![index.name(), mode.name()];
                    out.push(run_config(label, tags, mode, index, single, rwsem, true));
                }
            }
            out
        }
    }
}

/// The configurations the suite compares for a `run` workload, baseline
/// first: each one's label (`imap=split`, `maple threads`), mode and
/// design. `vmbench project --validate` checks the same list.
///
/// ```
/// use vmlab::run::workload::Workload;
/// let execl = vmlab::suite::run_configs(Workload::Execl);
/// assert_eq!(execl[0].0, "imap=single");
/// assert_eq!(execl.len(), 7); // five designs, then two other locks
/// ```
pub fn run_configs(workload: Workload) -> Vec<(String, Mode, Design)> {
    configs(SuiteWorkload::Run(workload))
        .into_iter()
        .filter_map(|c| match c.kind {
            ConfigKind::Run { mode, design } => Some((c.label, mode, design)),
            ConfigKind::Tree(_) => None,
        })
        .collect()
}

/// What a suite run measures and where it writes.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Workloads, in run order.
    pub workloads: Vec<SuiteWorkload>,
    /// Keep only configurations tagged with one of these design names
    /// ([`design_names`]); `None` keeps all.
    pub designs: Option<Vec<String>>,
    /// Worker counts.
    pub threads: Vec<usize>,
    /// Repetitions of every point.
    pub repeat: usize,
    /// Warm-up and timed durations of each run.
    pub timing: Timing,
    /// `execl`: libc VMAs of the idle processes.
    pub resident_vmas: usize,
    /// `tree`: structure sizes.
    pub tree_sizes: Vec<usize>,
    /// `tree`: work per timed batch.
    pub tree_scale: Scale,
    /// The machine, real or emulated.
    pub topology: Arc<Topology>,
    /// Pin workers on the host topology.
    pub pin: bool,
    /// Which placement of the workers' CPUs the runs of several pinned
    /// workers wait for (see [`crate::placement`]).
    pub placement: Rule,
    /// The results directory.
    pub out: PathBuf,
}

/// One unit of measurement of a suite run, and of its resumption: what
/// is measured, and recorded, whole or not at all (see the module
/// documentation).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Point {
    /// A `run` workload: one configuration at one thread count in one
    /// repetition.
    Run {
        /// The workload, e.g. `brk1`.
        workload: String,
        /// The configuration's label, e.g. `maple threads`.
        config: String,
        /// Worker threads.
        threads: usize,
        /// Repetition, from 0.
        rep: usize,
    },
    /// A `tree` pass: every kept implementation and operation at one size
    /// in one repetition.
    Tree {
        /// Structure size (entries).
        size: usize,
        /// Repetition, from 0.
        rep: usize,
    },
}

impl Point {
    /// The point `sample` belongs to; `None` for a `tree` sample whose
    /// metric names no size.
    pub fn of(sample: &Sample) -> Option<Point> {
        if sample.workload == SuiteWorkload::Tree.name() {
            let (_, size) = sample.metric.rsplit_once(" n=")?;
            return Some(Point::Tree {
                size: size.parse().ok()?,
                rep: sample.rep,
            });
        }
        Some(Point::Run {
            workload: sample.workload.clone(),
            config: sample.config.clone(),
            threads: sample.threads,
            rep: sample.rep,
        })
    }
}

impl std::fmt::Display for Point {
    /// `brk1 maple threads x2 (run 1)`, `tree n=1000 (run 2)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Point::Run {
                workload,
                config,
                threads,
                rep,
            } => write!(f, "{workload} {config} x{threads} (run {})", rep + 1),
            Point::Tree { size, rep } => write!(f, "tree n={size} (run {})", rep + 1),
        }
    }
}

impl Plan {
    /// The configurations of `workload` that `--designs` keeps.
    fn configs(&self, workload: SuiteWorkload) -> Vec<Config> {
        configs(workload)
            .into_iter()
            .filter(|c| match &self.designs {
                None => true,
                Some(d) => c.tags.iter().any(|t| d.iter().any(|n| n == t)),
            })
            .collect()
    }

    /// The labels of the configurations of `workload` the plan keeps, in
    /// run order.
    pub fn config_labels(&self, workload: SuiteWorkload) -> Vec<String> {
        self.configs(workload)
            .into_iter()
            .map(|c| c.label)
            .collect()
    }

    /// Every point of the run, in run order: workload by workload; within
    /// one, repetitions are the outer loop, so a disturbance of the
    /// machine spreads over configurations instead of biasing one.
    pub fn points(&self) -> Vec<Point> {
        let mut out = Vec::new();
        for &w in &self.workloads {
            let configs = self.configs(w);
            if configs.is_empty() {
                continue;
            }
            for rep in 0..self.repeat {
                if w == SuiteWorkload::Tree {
                    // One tree pass measures every kept implementation.
                    out.extend(
                        self.tree_sizes
                            .iter()
                            .map(|&size| Point::Tree { size, rep }),
                    );
                    continue;
                }
                for c in &configs {
                    for &threads in &self.threads {
                        out.push(Point::Run {
                            workload: w.to_string(),
                            config: c.label.clone(),
                            threads,
                            rep,
                        });
                    }
                }
            }
        }
        out
    }

    /// How many progress steps the run has: one per [`Point`].
    pub fn steps(&self) -> u64 {
        self.points().len() as u64
    }

    /// What `plan.json` records of the plan: everything but the directory.
    fn record(&self) -> PlanRecord {
        PlanRecord {
            workloads: self
                .workloads
                .iter()
                .map(|w| w.name().to_string())
                .collect(),
            // Sorted: `--designs` in another order is the same plan.
            designs: self.designs.clone().map(|mut d| {
                d.sort_unstable();
                d.dedup();
                d
            }),
            threads: self.threads.clone(),
            repeat: self.repeat,
            duration_ns: nanos(self.timing.duration),
            warmup_ns: nanos(self.timing.warmup),
            resident_vmas: self.resident_vmas,
            tree_sizes: self.tree_sizes.clone(),
            tree_min_read_ops: self.tree_scale.min_read_ops,
            tree_min_write_ops: self.tree_scale.min_write_ops,
            tree_gap_budget_ns: nanos(self.tree_scale.gap_budget),
            topology: self.topology.to_string(),
            pin: self.pin,
            placement: Some(self.placement.to_string()),
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The points of `plan` that no sample of `samples` belongs to, in run
/// order: what a resumption still has to measure.
pub fn missing_points(plan: &Plan, samples: &[Sample]) -> Vec<Point> {
    let done: BTreeSet<Point> = samples.iter().filter_map(Point::of).collect();
    plan.points()
        .into_iter()
        .filter(|p| !done.contains(p))
        .collect()
}

/// A [`Plan`] as `plan.json` holds it: resolved values only, so two
/// command lines that resolve to the same run compare equal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanRecord {
    workloads: Vec<String>,
    designs: Option<Vec<String>>,
    threads: Vec<usize>,
    repeat: usize,
    duration_ns: u64,
    warmup_ns: u64,
    resident_vmas: usize,
    tree_sizes: Vec<usize>,
    tree_min_read_ops: usize,
    tree_min_write_ops: usize,
    tree_gap_budget_ns: u64,
    topology: String,
    pin: bool,
    /// `--placement`; absent from plans written before it existed, whose
    /// runs measured the placement and never waited (`any`).
    #[serde(default)]
    placement: Option<String>,
}

impl PlanRecord {
    /// The plan this record describes, writing into `out`.
    fn plan(&self, out: &Path) -> Result<Plan, LabError> {
        let bad = |what: String| LabError(format!("--resume: {}: {what}", out.display()));
        let mut workloads = Vec::new();
        for name in &self.workloads {
            match SuiteWorkload::named(name) {
                Some(w) => workloads.push(w),
                None => return Err(bad(format!("plan.json names an unknown workload '{name}'"))),
            }
        }
        let known = design_names();
        if let Some(d) = self
            .designs
            .iter()
            .flatten()
            .find(|d| !known.contains(&d.as_str()))
        {
            return Err(bad(format!("plan.json names an unknown design '{d}'")));
        }
        if self.repeat == 0 || self.threads.contains(&0) || self.tree_sizes.contains(&0) {
            return Err(bad("plan.json holds a count of 0".to_string()));
        }
        let topology = if self.topology.starts_with("host") {
            let host = mm::topology::host();
            if host.to_string() != self.topology {
                return Err(bad(format!(
                    "it was measured on the host topology {}, this machine's is {host}",
                    self.topology
                )));
            }
            host
        } else {
            crate::run::parse_topology(Some(&self.topology))
                .map_err(|e| bad(format!("plan.json: {e}")))?
        };
        Ok(Plan {
            workloads,
            // Sorted: `--designs` in another order is the same plan.
            designs: self.designs.clone().map(|mut d| {
                d.sort_unstable();
                d.dedup();
                d
            }),
            threads: self.threads.clone(),
            repeat: self.repeat,
            timing: Timing {
                duration: Duration::from_nanos(self.duration_ns),
                warmup: Duration::from_nanos(self.warmup_ns),
            },
            resident_vmas: self.resident_vmas,
            tree_sizes: self.tree_sizes.clone(),
            tree_scale: Scale {
                min_read_ops: self.tree_min_read_ops,
                min_write_ops: self.tree_min_write_ops,
                gap_budget: Duration::from_nanos(self.tree_gap_budget_ns),
            },
            topology,
            pin: self.pin,
            placement: match &self.placement {
                None => Rule::Any,
                Some(p) => p.parse().map_err(|e| bad(format!("plan.json: {e}")))?,
            },
            out: out.to_path_buf(),
        })
    }

    /// The fields in which `now` differs from this record, as
    /// `name: <recorded> recorded, <now> now`, joined by `; `.
    fn difference(&self, now: &PlanRecord) -> Option<String> {
        let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) =
            (serde_json::to_value(self), serde_json::to_value(now))
        else {
            return (self != now).then(|| "the plans differ".to_string());
        };
        let diffs: Vec<String> = a
            .iter()
            .filter_map(|(k, va)| {
                let vb = b.get(k).unwrap_or(&serde_json::Value::Null);
                (va != vb).then(|| format!("{k}: {va} recorded, {vb} now"))
            })
            .collect();
        (!diffs.is_empty()).then(|| diffs.join("; "))
    }
}

/// The files a suite writes into its results directory, besides a plot
/// (`<workload>.svg`, `<workload>.png`) per workload.
const SUITE_FILES: [&str; 8] = [
    "command.txt",
    "machine.json",
    "plan.json",
    "results.jsonl",
    "table.txt",
    "table.md",
    "summary.txt",
    "index.html",
];

/// Measures everything `plan` asks for and writes the results directory
/// (`results.jsonl`, appended point by point, then tables, plots, page
/// and summary); `command` is recorded in it as the command that produced
/// it. A directory that exists and is not empty is refused unless `force`,
/// which first removes the files an earlier suite wrote there.
///
/// Interrupted by SIGINT or SIGTERM, the run stops after the point being
/// measured, writes the tables, plots and page from what it measured, and
/// fails with a one-line error that says how to [`resume`] it.
pub fn run(plan: &Plan, command: &str, force: bool) -> Result<(), LabError> {
    let points = plan.points();
    if points.is_empty() {
        // Refused before anything is created: no empty results directory.
        return Err(LabError(format!(
            "nothing to measure: --designs {} keeps no configuration of the workloads {}",
            plan.designs.as_deref().unwrap_or_default().join(","),
            plan.workloads
                .iter()
                .map(|w| w.name())
                .collect::<Vec<_>>()
                .join(",")
        )));
    }
    let created = prepare_out(&plan.out, force)?;
    let machine = Machine::detect(&plan.topology);
    let result = record_run(plan, &machine, command)
        .and_then(|()| measure_and_write(plan, &machine, command, Vec::new(), points));
    let jsonl = plan.out.join("results.jsonl");
    if result.is_err() && fs::metadata(&jsonl).map_or(true, |m| m.len() == 0) {
        // Nothing measured: take back what this run wrote, and the
        // directory if this run made it.
        for f in ["command.txt", "machine.json", "plan.json", "results.jsonl"] {
            let _ = fs::remove_file(plan.out.join(f));
        }
        if created {
            let _ = fs::remove_dir(&plan.out);
        }
    }
    result
}

/// Resumes the interrupted run in `dir`: measures the points of its
/// recorded plan that `results.jsonl` lacks, appends them, and writes the
/// tables, plots, page and summary from the whole file. `given` is the
/// plan of the options given with `--resume`, if any: it must be the
/// recorded one (the directory aside). A torn last line of
/// `results.jsonl` is reported and cut off first. `command` is added to
/// `command.txt` as the command that resumed the run.
pub fn resume(dir: &Path, given: Option<&Plan>, command: &str) -> Result<(), LabError> {
    let shown = dir.display();
    let plan_json = dir.join("plan.json");
    let text = match fs::read_to_string(&plan_json) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !dir.is_dir() => {
            return Err(LabError(format!("--resume: {shown} is not a directory")))
        }
        Err(e) => {
            return Err(LabError(format!(
                "--resume: cannot read {}: {e} (only a directory written by vmbench suite can be resumed)",
                plan_json.display()
            )))
        }
    };
    let recorded: PlanRecord = serde_json::from_str(&text).map_err(|e| {
        LabError(format!(
            "--resume: {} is not a suite plan: {}",
            plan_json.display(),
            e.to_string().escape_debug()
        ))
    })?;
    if let Some(given) = given {
        if let Some(diff) = recorded.difference(&given.record()) {
            return Err(LabError(format!(
                "--resume: the options given plan another run than the one recorded in {} ({diff}); \
                 give --resume alone to resume the recorded run",
                plan_json.display()
            )));
        }
    }
    let plan = recorded.plan(dir)?;
    let machine_json = dir.join("machine.json");
    let machine: Machine = fs::read_to_string(&machine_json)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| {
            LabError(format!(
                "--resume: cannot read the machine of {}: {}",
                machine_json.display(),
                e.escape_debug()
            ))
        })?;
    let here = Machine::detect(&plan.topology);
    if here != machine {
        return Err(LabError(format!(
            "--resume: {shown} was measured on another machine ({}, {} CPUs, {} nodes, kernel {}, \
             topology {}); one table cannot mix two machines",
            machine.cpu_model, machine.cpus, machine.nodes, machine.kernel, machine.topology
        )));
    }
    let jsonl = dir.join("results.jsonl");
    let (mut done, torn) =
        results::load_for_append(&jsonl).map_err(|e| LabError(format!("--resume: {e}")))?;
    if torn {
        drop_last_point(&jsonl, &mut done)?;
    }
    let todo = missing_points(&plan, &done);
    let original = fs::read_to_string(dir.join("command.txt")).unwrap_or_default();
    let original = original.lines().next().unwrap_or(command).to_string();
    if todo.is_empty() {
        if done.is_empty() {
            return Err(LabError(format!(
                "--resume: {shown}: its plan has no point to measure"
            )));
        }
        eprintln!("vmbench suite: {shown}: every point was measured; writing the results again");
        return write_results(&plan, &machine, &original, &done, None);
    }
    let mut log = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(dir.join("command.txt"))
        .map_err(|e| LabError(format!("--resume: cannot write to {shown}: {e}")))?;
    std::io::Write::write_all(&mut log, format!("resumed: {command}\n").as_bytes())
        .map_err(|e| LabError(format!("--resume: cannot write to {shown}: {e}")))?;
    eprintln!(
        "vmbench suite: resuming {shown}: {} of {} points left to measure",
        todo.len(),
        plan.points().len()
    );
    measure_and_write(&plan, &machine, &original, done, todo)
}

/// After a torn last line: the write it ended held one whole point (a
/// tree pass is many lines written at once), so the whole lines of the
/// file's last point may be the beginning of that same write. They are
/// dropped, and the file rewritten without them, so the point is measured
/// again instead of being taken as complete; a point that was in fact
/// whole is only measured once more in place of its old samples.
fn drop_last_point(jsonl: &Path, done: &mut Vec<Sample>) -> Result<(), LabError> {
    let Some(last) = done.last().and_then(Point::of) else {
        return Ok(());
    };
    let keep = done
        .iter()
        .rposition(|s| Point::of(s).as_ref() != Some(&last))
        .map_or(0, |i| i + 1);
    done.truncate(keep);
    let mut text = String::new();
    for s in done.iter() {
        let line = serde_json::to_string(s).map_err(|e| LabError(format!("--resume: {e}")))?;
        text.push_str(&line);
        text.push('\n');
    }
    eprintln!(
        "vmbench suite: {}: the last point ({last}) is measured again: its write was cut off",
        jsonl.display()
    );
    vmresults::output::write_file(jsonl, &text).map_err(|e| LabError(format!("--resume: {e}")))
}

/// Makes `out` ready: created if absent (returns true), refused if it is
/// not a directory, or not empty without `force`; with `force`, an earlier
/// suite's files in it are removed and nothing else.
fn prepare_out(out: &Path, force: bool) -> Result<bool, LabError> {
    let shown = out.display();
    match fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_none() {
                return Ok(false);
            }
            if !force {
                return Err(LabError(format!(
                    "--out: {shown} exists and is not empty; name a new directory, or pass \
                     --force to replace an earlier suite's results in it"
                )));
            }
            let plots = SuiteWorkload::ALL
                .iter()
                .flat_map(|w| [format!("{w}.svg"), format!("{w}.png")]);
            for name in SUITE_FILES.iter().map(|f| f.to_string()).chain(plots) {
                let path = out.join(&name);
                match fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(LabError(format!(
                            "--force: cannot remove {}: {e}",
                            path.display()
                        )))
                    }
                }
            }
            Ok(false)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(out)
                .map_err(|e| LabError(format!("--out: cannot create {shown}: {e}")))?;
            Ok(true)
        }
        Err(e) => Err(LabError(format!(
            "--out: {shown} is not a directory that can be read: {e}"
        ))),
    }
}

/// Writes what a run is, before it measures: its command, its machine and
/// its plan.
fn record_run(plan: &Plan, machine: &Machine, command: &str) -> Result<(), LabError> {
    write_file(&plan.out.join("command.txt"), &format!("{command}\n"))?;
    let json = serde_json::to_string_pretty(machine)
        .map_err(|e| LabError(format!("machine.json: {e}")))?;
    write_file(&plan.out.join("machine.json"), &format!("{json}\n"))?;
    let json = serde_json::to_string_pretty(&plan.record())
        .map_err(|e| LabError(format!("plan.json: {e}")))?;
    write_file(&plan.out.join("plan.json"), &format!("{json}\n"))
}

/// Measures `todo`, appending every point's samples to `results.jsonl` as
/// it is measured, then writes the tables, plots, page and summary from
/// `done` and the new samples.
fn measure_and_write(
    plan: &Plan,
    machine: &Machine,
    command: &str,
    done: Vec<Sample>,
    todo: Vec<Point>,
) -> Result<(), LabError> {
    let jsonl = plan.out.join("results.jsonl");
    let mut writer = SampleWriter::append(&jsonl)
        .map_err(|e| LabError(format!("writing {}: {e}", jsonl.display())))?;
    let signals = crate::stop::StopSignals::install()?;
    let bar = ProgressBar::new(todo.len() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} ETA {eta} {msg}",
        )
        .map_err(|e| LabError(format!("progress bar: {e}")))?,
    );
    // A resumed run holds the placement its first recorded run of several
    // workers had.
    let mut gate = placement::first_two_workers(plan.placement, Arc::clone(&plan.topology))
        .holding(done.iter().find_map(|s| s.transfer_ns));
    let mut samples = done;
    let mut failures: Vec<String> = Vec::new();
    let mut failed: BTreeSet<(String, String, usize)> = BTreeSet::new();
    let mut interrupted = false;
    for point in &todo {
        if signals.requested() {
            interrupted = true;
            break;
        }
        bar.set_message(point.to_string());
        let measured = match point {
            // A failed check fails this pass only, as a failed run
            // configuration does: the rest is still measured and written.
            Point::Tree { size, rep } => match measure_tree(plan, *size, *rep, &bar) {
                Ok(samples) => samples,
                Err(e) => {
                    failures.push(format!("tree n={size} (run {}): {e}", rep + 1));
                    Vec::new()
                }
            },
            Point::Run {
                workload,
                config,
                threads,
                rep,
            } => {
                let key = (workload.clone(), config.clone(), *threads);
                if failed.contains(&key) {
                    bar.inc(1);
                    continue;
                }
                match measure_run(plan, &mut gate, workload, config, *threads, *rep) {
                    Ok(s) => vec![s],
                    Err(e) => {
                        failures.push(format!("{workload} {config} x{threads}: {e}"));
                        failed.insert(key);
                        Vec::new()
                    }
                }
            }
        };
        writer
            .write_all(&measured)
            .map_err(|e| LabError(format!("writing {}: {e}", jsonl.display())))?;
        samples.extend(measured);
        bar.inc(1);
    }
    // A signal during the last point counts as an interruption only if
    // that point was not the last one missing.
    interrupted |= signals.requested() && !missing_points(plan, &samples).is_empty();
    drop(signals);
    bar.finish_and_clear();
    for f in &failures {
        eprintln!("vmbench suite: not measured: {f}");
    }
    if samples.is_empty() {
        return Err(LabError(if interrupted {
            "interrupted before any point was measured".to_string()
        } else {
            "nothing was measured: every configuration failed (see above)".to_string()
        }));
    }
    let stop = interrupted.then(|| {
        let left = missing_points(plan, &samples).len();
        let total = plan.points().len();
        format!(
            "interrupted: {} of {total} points measured ({} samples in {}); resume with: \
             vmbench suite --resume {}",
            total - left,
            samples.len(),
            jsonl.display(),
            plan.out.display()
        )
    });
    write_results(plan, machine, command, &samples, stop)
}

/// One point of a `run` workload: its sample, or why it has none. A run
/// of several pinned workers on the real topology goes through `gate`,
/// which measures where the host put the first two workers' CPUs before
/// and after it, and waits for the placement the plan holds.
fn measure_run<M>(
    plan: &Plan,
    gate: &mut Gate<M>,
    workload: &str,
    label: &str,
    threads: usize,
    rep: usize,
) -> Result<Sample, String>
where
    M: FnMut() -> Result<f64, LabError>,
{
    let Some(suite_workload @ SuiteWorkload::Run(w)) = SuiteWorkload::named(workload) else {
        return Err("not a run workload".to_string());
    };
    let Some(ConfigKind::Run { mode, design }) = configs(suite_workload)
        .into_iter()
        .find(|c| c.label == label)
        .map(|c| c.kind)
    else {
        return Err("not a configuration of this workload".to_string());
    };
    let spec = Spec {
        workload: w,
        mode,
        design,
        threads,
        resident: resident::DEFAULT_RESIDENT,
        resident_vmas: plan.resident_vmas,
        topology: Arc::clone(&plan.topology),
        pin: plan.pin,
    };
    let measured = if spec.placed() {
        gate.run(|| harness::measure(&spec, &plan.timing).map_err(|e| LabError(e.to_string())))
            .map(|(m, p)| (m, Some(p)))
    } else {
        harness::measure(&spec, &plan.timing)
            .map(|m| (m, None))
            .map_err(|e| LabError(e.to_string()))
    };
    match measured {
        Ok((m, placement)) if m.ops > 0 => Ok(Sample {
            workload: workload.to_string(),
            metric: "ops/s".to_string(),
            unit: "ops/s".to_string(),
            higher_is_better: true,
            config: label.to_string(),
            threads,
            rep,
            value: m.ops_per_sec(),
            cpu_wait: m.cpu_wait(threads),
            transfer_ns: placement.map(|p| p.before_ns),
            transfer_after_ns: placement.map(|p| p.after_ns),
        }),
        Ok(_) => Err("no operation completed in the timed interval".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// One tree pass at one size: every figure is a sample of its
/// implementation at its operation and size.
fn measure_tree(
    plan: &Plan,
    size: usize,
    rep: usize,
    bar: &ProgressBar,
) -> Result<Vec<Sample>, LabError> {
    let impls: Vec<Impl> = plan
        .configs(SuiteWorkload::Tree)
        .iter()
        .filter_map(|c| match c.kind {
            ConfigKind::Tree(i) => Some(i),
            ConfigKind::Run { .. } => None,
        })
        .collect();
    let cfg = TreeConfig {
        sizes: vec![size],
        repeat: 1,
        ops: TREE_OPS.to_vec(),
        impls,
        scale: plan.tree_scale,
        seed: tree::DEFAULT_SEED.wrapping_add(rep as u64),
    };
    let mut samples = Vec::new();
    // The tree benchmark notes its progress on stderr; the bar is
    // suspended so the two do not interleave.
    bar.suspend(|| {
        tree::run(&cfg, &mut |r| {
            samples.push(Sample {
                workload: "tree".to_string(),
                metric: format!("{} n={}", r.op, r.n),
                unit: r.unit.to_string(),
                higher_is_better: false,
                config: r.imp.to_string(),
                threads: r.threads,
                rep,
                value: r.value,
                cpu_wait: None,
                transfer_ns: None,
                transfer_after_ns: None,
            })
        })
    })?;
    Ok(samples)
}

/// `samples` in the order of the plan's workloads and, within a `run`
/// workload, of its configurations (the baseline first), whatever order a
/// resumed file holds them in; tree samples keep their order.
fn in_plan_order(plan: &Plan, samples: &[Sample]) -> Vec<Sample> {
    let rank = |s: &Sample| {
        let workload = SuiteWorkload::named(&s.workload);
        let w = workload
            .and_then(|w| plan.workloads.iter().position(|&x| x == w))
            .unwrap_or(usize::MAX);
        let c = match workload {
            Some(w @ SuiteWorkload::Run(_)) => configs(w)
                .iter()
                .position(|c| c.label == s.config)
                .unwrap_or(usize::MAX),
            _ => 0,
        };
        (w, c)
    };
    let mut out = samples.to_vec();
    out.sort_by_key(rank);
    out
}

/// Writes the tables, the plots, the page and the summary from `samples`
/// (all of `results.jsonl`); `stop` is the error of an interrupted run,
/// returned once they are written.
fn write_results(
    plan: &Plan,
    machine: &Machine,
    command: &str,
    samples: &[Sample],
    stop: Option<String>,
) -> Result<(), LabError> {
    let dir = &plan.out;
    let samples = in_plan_order(plan, samples);
    let samples = &samples[..];
    let tables = compare::suite_tables(samples);
    let text = compare::render_text(&tables);
    let markdown = compare::render_markdown(&tables);
    write_file(&dir.join("table.txt"), &text)?;
    write_file(&dir.join("table.md"), &markdown)?;
    let summary = summary(samples);
    let mut summary_text = summary.join("\n");
    if !summary_text.is_empty() {
        summary_text.push('\n');
    }
    write_file(&dir.join("summary.txt"), &summary_text)?;
    let mut plots = Vec::new();
    let mut workloads: Vec<&str> = Vec::new();
    for s in samples {
        if !workloads.contains(&s.workload.as_str()) {
            workloads.push(&s.workload);
        }
    }
    for w in workloads {
        // The page shows the SVGs; a PNG that could not be drawn (no
        // system font) is reported, and its SVG still shown.
        let svg = dir.join(format!("{w}.svg"));
        if let Err(e) = plot::plot_workload(samples, w, dir) {
            let what = if svg.exists() { "PNG" } else { "plot" };
            eprintln!("vmbench suite: {w}: {what} not written: {e}");
        }
        if svg.exists() {
            plots.push(svg);
        }
    }
    let page = Page {
        title: "vmbench suite",
        machine,
        command,
        summary: &summary,
        tables: &tables,
        plots: &plots,
    };
    page::write_page(dir, &page).map_err(|e| LabError(format!("writing index.html: {e}")))?;
    println!("{text}");
    for line in &summary {
        println!("{line}");
    }
    eprintln!(
        "vmbench suite: {} samples; results in {} (results.jsonl, table.txt, table.md, summary.txt, plots, index.html)",
        samples.len(),
        dir.display()
    );
    match stop {
        Some(e) => Err(LabError(e)),
        None if plan
            .workloads
            .contains(&SuiteWorkload::Run(Workload::Execl)) =>
        {
            projection_section(plan)
        }
        None => Ok(()),
    }
}

/// The suite's projection section: `execl` carried to the execl report's
/// machine (12 nodes x 32 CPUs) with every i_mmap design and lock kind,
/// written under `projection/` (docs/projection.md says how, and how far
/// off such figures were where they could be measured).
fn projection_section(plan: &Plan) -> Result<(), LabError> {
    let machine = vmproject::Machine::parse("12x32").map_err(|e| LabError(e.to_string()))?;
    let config = crate::project::ProjectConfig {
        workloads: vec![(Workload::Execl, Mode::Processes)],
        indexes: vec![IndexKind::Maple],
        imaps: ImapDesign::ALL.to_vec(),
        locks: vec![LockKind::Rwsem, LockKind::Std, LockKind::Numa],
        cpus: crate::project::report::default_cpus(machine.cpus()),
        machine,
        method: crate::project::Method {
            timing: plan.timing,
            record_ops: crate::project::DEFAULT_RECORD_OPS,
            resident: crate::run::resident::DEFAULT_RESIDENT,
            resident_vmas: plan.resident_vmas,
            ops_per_cpu: None,
            seed: 1,
            spin_budget_ns: None,
        },
    };
    println!("\nProjection (simulated, not measured): execl on the 12-node, 384-CPU machine\n");
    let projection = crate::project::project(&config, &mut |_| {})?;
    let dir = plan.out.join("projection");
    crate::project::report::write_results(&dir, &config.machine, &projection, true)
}

fn write_file(path: &Path, text: &str) -> Result<(), LabError> {
    vmresults::output::write_file(path, text).map_err(|e| LabError(format!("writing {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_has_a_baseline_and_design_names_are_known() {
        for w in SuiteWorkload::ALL {
            let c = configs(w);
            assert!(!c.is_empty(), "{w}");
            let labels: Vec<&str> = c.iter().map(|c| c.label.as_str()).collect();
            let mut unique = labels.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(
                unique.len(),
                labels.len(),
                "{w}: duplicate labels {labels:?}"
            );
        }
        let first = |w| configs(SuiteWorkload::Run(w))[0].label.clone();
        assert_eq!(first(Workload::Execl), "imap=single");
        assert_eq!(first(Workload::Aim7Brk), "rule=off");
        assert_eq!(first(Workload::Brk1), "legacy processes");
    }

    fn plan(workloads: &[&'static str], designs: Option<&[&str]>) -> Plan {
        Plan {
            workloads: workloads
                .iter()
                .map(|w| SuiteWorkload::named(w).expect("a suite workload"))
                .collect(),
            designs: designs.map(|d| d.iter().map(|s| s.to_string()).collect()),
            threads: vec![1, 2],
            repeat: 2,
            timing: Timing {
                duration: Duration::from_millis(30),
                warmup: Duration::from_millis(10),
            },
            resident_vmas: 10,
            tree_sizes: vec![1_000, 10_000],
            tree_scale: Scale::QUICK,
            topology: mm::topology::host(),
            pin: false,
            placement: Rule::Hold,
            out: PathBuf::from("unused"),
        }
    }

    fn sample(workload: &str, metric: &str, config: &str, threads: usize, rep: usize) -> Sample {
        Sample {
            workload: workload.into(),
            metric: metric.into(),
            unit: "ops/s".into(),
            higher_is_better: true,
            config: config.into(),
            threads,
            rep,
            value: 1.0,
            cpu_wait: None,
            transfer_ns: None,
            transfer_after_ns: None,
        }
    }

    #[test]
    fn points_cover_every_repetition_and_samples_name_their_point() {
        let p = plan(&["tree", "aim7-brk"], Some(&["maple", "rule-on"]));
        let points = p.points();
        // tree: 2 sizes x 2 repetitions; aim7-brk: 1 configuration x 2
        // thread counts x 2 repetitions.
        assert_eq!(points.len(), 4 + 4);
        assert_eq!(p.steps(), 8);
        assert_eq!(
            points[0],
            Point::Tree {
                size: 1_000,
                rep: 0
            }
        );
        assert_eq!(
            points[1],
            Point::Tree {
                size: 10_000,
                rep: 0
            }
        );
        assert_eq!(
            points[4],
            Point::Run {
                workload: "aim7-brk".into(),
                config: "rule=on".into(),
                threads: 1,
                rep: 0
            }
        );
        assert_eq!(points[4].to_string(), "aim7-brk rule=on x1 (run 1)");
        let t = sample("tree", "load_with_writer n=10000", "maple-shared", 4, 1);
        assert_eq!(
            Point::of(&t),
            Some(Point::Tree {
                size: 10_000,
                rep: 1
            })
        );
        assert_eq!(Point::of(&sample("tree", "load", "maple", 1, 0)), None);
        let unique: BTreeSet<&Point> = points.iter().collect();
        assert_eq!(unique.len(), points.len());
    }

    #[test]
    fn missing_points_are_the_plan_less_what_was_measured() {
        let p = plan(&["tree", "brk1"], Some(&["maple"]));
        assert_eq!(missing_points(&p, &[]), p.points());
        let measured = vec![
            // A whole tree pass is several samples of one point.
            sample("tree", "load n=1000", "maple", 1, 0),
            sample("tree", "iter n=1000", "maple", 1, 0),
            sample("brk1", "ops/s", "maple processes", 2, 1),
            sample("brk1", "ops/s", "maple threads", 1, 0),
            // Not a point of this plan: ignored.
            sample("brk1", "ops/s", "legacy threads", 1, 0),
        ];
        let missing = missing_points(&p, &measured);
        assert_eq!(missing.len(), p.points().len() - 3);
        for s in &measured[..4] {
            assert!(!missing.contains(&Point::of(s).unwrap()), "{s:?}");
        }
        // Run order is kept.
        let points = p.points();
        let order: Vec<&Point> = points.iter().filter(|x| missing.contains(x)).collect();
        assert_eq!(order, missing.iter().collect::<Vec<_>>());
        // Everything measured: nothing left.
        let all: Vec<Sample> = p
            .points()
            .iter()
            .map(|pt| match pt {
                Point::Tree { size, rep } => {
                    sample("tree", &format!("load n={size}"), "maple", 1, *rep)
                }
                Point::Run {
                    workload,
                    config,
                    threads,
                    rep,
                } => sample(workload, "ops/s", config, *threads, *rep),
            })
            .collect();
        assert!(missing_points(&p, &all).is_empty());
    }

    #[test]
    fn the_recorded_plan_round_trips_and_names_its_first_difference() {
        let p = plan(&["execl", "brk1"], Some(&["single", "maple"]));
        let rec = p.record();
        let json = serde_json::to_string(&rec).unwrap();
        let back: PlanRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, rec);
        let again = back.plan(Path::new("elsewhere")).unwrap();
        assert_eq!(again.record(), rec);
        assert_eq!(again.points(), p.points());
        assert_eq!(again.out, PathBuf::from("elsewhere"));
        assert_eq!(rec.difference(&rec), None);
        let mut other = p.clone();
        other.threads = vec![1];
        let d = rec.difference(&other.record()).unwrap();
        assert_eq!(d, "threads: [1,2] recorded, [1] now");
        other.repeat = 3;
        let d = rec.difference(&other.record()).unwrap();
        assert_eq!(
            d,
            "repeat: 2 recorded, 3 now; threads: [1,2] recorded, [1] now"
        );
        let mut bad = rec.clone();
        bad.workloads.push("brk9".into());
        let e = bad.plan(Path::new("d")).unwrap_err().0;
        assert!(e.contains("unknown workload 'brk9'"), "{e}");
        assert!(serde_json::from_str::<PlanRecord>("{\"workloads\": 1}").is_err());
        // A plan written before `placement` was recorded resumes as its
        // runs were measured: placement recorded, never waited for.
        let mut old = serde_json::to_value(&rec).unwrap();
        old.as_object_mut().unwrap().remove("placement");
        let old: PlanRecord = serde_json::from_value(old).unwrap();
        assert_eq!(old.plan(Path::new("d")).unwrap().placement, Rule::Any);
        let mut near = rec.clone();
        near.placement = Some("33".into());
        assert_eq!(
            near.plan(Path::new("d")).unwrap().placement,
            Rule::Near(33.0)
        );
        near.placement = Some("near".into());
        let e = near.plan(Path::new("d")).unwrap_err().0;
        assert!(e.contains("plan.json: --placement: 'near'"), "{e}");
    }

    #[test]
    fn tables_see_the_baseline_first_whatever_the_file_order() {
        let resumed = vec![
            sample("brk1", "ops/s", "maple processes", 1, 0),
            sample("tree", "load n=1000", "maple", 1, 0),
            sample("brk1", "ops/s", "legacy processes", 1, 0),
        ];
        let order = |p: &Plan| -> Vec<(String, String)> {
            in_plan_order(p, &resumed)
                .into_iter()
                .map(|s| (s.workload, s.config))
                .collect()
        };
        let pair = |w: &str, c: &str| (w.to_string(), c.to_string());
        assert_eq!(
            order(&plan(&["tree", "brk1"], None)),
            [
                pair("tree", "maple"),
                pair("brk1", "legacy processes"),
                pair("brk1", "maple processes")
            ]
        );
        // The plan's order, not the suite's: brk1 asked for first.
        assert_eq!(
            order(&plan(&["brk1", "tree"], None)),
            [
                pair("brk1", "legacy processes"),
                pair("brk1", "maple processes"),
                pair("tree", "maple")
            ]
        );
    }

    #[test]
    fn a_torn_write_takes_the_last_point_with_it() {
        let dir = std::env::temp_dir().join(format!("vmlab-torn-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let jsonl = dir.join("results.jsonl");
        let run = sample("brk1", "ops/s", "maple processes", 1, 0);
        // A tree pass whose write was cut after two of its lines.
        let tree = [
            sample("tree", "load n=1000", "maple", 1, 0),
            sample("tree", "iter n=1000", "maple", 1, 0),
        ];
        let mut text = String::new();
        for s in std::iter::once(&run).chain(&tree) {
            text.push_str(&serde_json::to_string(s).unwrap());
            text.push('\n');
        }
        text.push_str("{\"workload\":\"tree\",\"met");
        fs::write(&jsonl, text).unwrap();
        let (mut done, torn) = results::load_for_append(&jsonl).unwrap();
        assert!(torn);
        assert_eq!(done.len(), 3);
        drop_last_point(&jsonl, &mut done).unwrap();
        assert_eq!(done, std::slice::from_ref(&run));
        // The file says the same, so the tree point is measured again.
        assert_eq!(
            results::load_for_append(&jsonl).unwrap(),
            (vec![run], false)
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}

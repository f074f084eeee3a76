//! `vmbench run`: will-it-scale style workloads, `execl`, `aim7-brk` and `kernbench` on
//! the address-space model (see [`workload`] for what each one does, and
//! [`execl`] for the program `execl` runs).
//!
//! Every configuration (workload × mode × index × worker count) is run on
//! a fresh fixture ([`harness::Fixture`]): address spaces holding a
//! resident population of other VMAs ([`resident`]), for `execl` idle
//! processes keeping libc's reverse map at `--resident-vmas`, for
//! `aim7-brk` the parent the tasks fork from. It is warmed up, then timed
//! for `--duration`; the figure is operations per second summed over the
//! workers, with the statistics of every lock class of the timed interval
//! beside it. With `--repeat N` the median run is reported, and the mean,
//! standard deviation and range over the runs show its spread.
//!
//! The table's "cpu share" is the workers' time on a CPU over their wall
//! time (from the scheduler's own accounting). It falls when workers sleep
//! on a contended lock, which is part of the result, and when other
//! processes take the CPUs, which is not: on a shared machine, a scaling
//! figure is only meaningful where the share stays near 100% for the
//! lock-free workloads.

pub mod execl;
pub mod harness;
pub mod resident;
pub mod workload;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use mm::imap::ImapDesign;
use mm::lock::LockKind;
use mm::lockstat::LockClass;
use mm::topology::{self, Topology};
use mm::IndexKind;
use serde::Serialize;
use std::sync::Arc;

use crate::report::Record;
use crate::tree_bench::{parse_names, BenchError};
use harness::{Measurement, Mode, Spec, Timing};
use workload::Workload;

/// Most workers accepted; more would only oversubscribe the machine.
pub const MAX_THREADS: usize = 1024;

/// Options of `vmbench run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Workloads, comma separated: brk1 (one-page brk grow + shrink),
    /// mmap1 (128 MiB anonymous mmap + munmap), malloc1 (the same plus a
    /// write fault on the first page: glibc's malloc/free of 128 MiB),
    /// mmap2 (128 MiB private file mapping), page_fault3 (shared file
    /// mapping, one op per page write-faulted), execl (exec of a
    /// dynamically linked program into a fresh address space, all workers
    /// sharing the executable, ld.so and libc; one op per exec), aim7-brk
    /// (tasks forked from one parent grow their heap by a page, write it,
    /// shrink it), kernbench (a parallel kernel build's process churn: a
    /// compile job forked from each worker's make execs the compiler, maps
    /// its source, object file and heap arenas, makes ~300 page faults,
    /// unmaps some, moves brk and exits; one op per job). execl, aim7-brk
    /// and kernbench run in processes mode only. [default: all]
    #[arg(long, value_delimiter = ',')]
    pub workloads: Option<Vec<String>>,

    /// Modes, comma separated: processes (an address space per worker),
    /// threads (one shared address space). [default: both]
    #[arg(long, value_delimiter = ',')]
    pub mode: Option<Vec<String>>,

    /// Worker counts, comma separated (e.g. 1,2). [default: 1, the powers
    /// of two below the CPU count, and the CPU count]
    #[arg(long, value_delimiter = ',')]
    pub threads: Option<Vec<String>>,

    /// VMA indexes, comma separated: maple, legacy. [default: both]
    #[arg(long, value_delimiter = ',')]
    pub index: Option<Vec<String>>,

    /// Seconds timed per configuration. [default: 2; 0.05 with --quick]
    #[arg(long)]
    pub duration: Option<f64>,

    /// Seconds of untimed warm-up per configuration. [default: 0.5; 0.01
    /// with --quick]
    #[arg(long)]
    pub warmup: Option<f64>,

    /// Runs per configuration; the run with the median throughput is
    /// reported, which shields the figure from a run that other processes
    /// disturbed, with the mean, standard deviation and range over the
    /// runs beside it. [default: 1]
    #[arg(long)]
    pub repeat: Option<String>,

    /// Much shorter runs, for smoke tests.
    #[arg(long)]
    pub quick: bool,

    /// Other VMAs mapped into each address space before the workload
    /// starts (shared-library segments and their bss), so the index has a
    /// realistic size; for aim7-brk, into the parent the tasks fork from.
    /// execl's address spaces are built by each exec (see
    /// --resident-vmas).
    #[arg(long, default_value_t = resident::DEFAULT_RESIDENT)]
    pub resident: usize,

    /// execl: libc file VMAs (0 to 100000) held by idle processes through
    /// the run, about five per process, so libc's reverse map has this
    /// size. [default: 6000; 500 with --quick]
    #[arg(long)]
    pub resident_vmas: Option<String>,

    /// i_mmap designs of the shared files, comma separated: single (one
    /// tree, one rwsem), split (a tree per group, one rwsem), split-locked
    /// (a tree and an rwsem per group), distributed (per-group locks under
    /// a top-level rwsem), adaptive (single until contended, then
    /// distributed). [default: single]
    #[arg(long, value_delimiter = ',')]
    pub imap: Option<Vec<String>>,

    /// The lock of every i_mmap and anon_vma lock, comma separated: std
    /// (the standard library's RwLock), rwsem (kernel-style), numa
    /// (rwsem with per-node hand-off). [default: rwsem]
    #[arg(long, value_delimiter = ',')]
    pub lock: Option<Vec<String>>,

    /// DESIGN §1.3's anon_vma rule, comma separated: on (an adjustment that
    /// only moves a VMA's end takes no anon_vma lock), off (every
    /// adjustment takes it). [default: on]
    #[arg(long, value_delimiter = ',')]
    pub anon_rule: Option<Vec<String>>,

    /// The machine: host (this one's NUMA nodes and CPUs, workers pinned
    /// one per CPU) or NxM, N emulated nodes of M CPUs mapped onto the
    /// real ones (e.g. 12x32), which sets the i_mmap groups and the CPU
    /// each worker runs as. [default: host]
    #[arg(long)]
    pub topology: Option<String>,

    /// Do not pin workers to CPUs (on the host topology they are pinned
    /// one per CPU by default; workers on an emulated one never are).
    #[arg(long)]
    pub no_pin: bool,

    /// Print one JSON object per configuration on stdout instead of a
    /// table.
    #[arg(long)]
    pub json: bool,
}

/// A validated `vmbench run` configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// Workloads, in run order.
    pub workloads: Vec<Workload>,
    /// Modes, in run order.
    pub modes: Vec<Mode>,
    /// Indexes, in run order.
    pub indexes: Vec<IndexKind>,
    /// Worker counts, in run order.
    pub threads: Vec<usize>,
    /// Warm-up and timed durations.
    pub timing: Timing,
    /// Resident VMAs per address space.
    pub resident: usize,
    /// `execl`: libc VMAs of the idle processes.
    pub resident_vmas: usize,
    /// Runs per configuration (the median is reported).
    pub repeat: usize,
    /// i_mmap designs, in run order.
    pub imaps: Vec<ImapDesign>,
    /// Lock kinds, in run order.
    pub locks: Vec<LockKind>,
    /// anon_vma rule settings, in run order.
    pub anon_rules: Vec<bool>,
    /// The machine, real or emulated.
    pub topology: Arc<Topology>,
    /// Pin workers on the host topology.
    pub pin: bool,
}

impl RunConfig {
    /// Every configuration of `workload` in `mode`, in run order: index,
    /// i_mmap design, lock, anon rule, then worker count innermost.
    pub fn specs(&self, workload: Workload, mode: Mode) -> Vec<Spec> {
        let mut out = Vec::new();
        for &index in &self.indexes {
            for &imap in &self.imaps {
                for &lock in &self.locks {
                    for &anon_rule in &self.anon_rules {
                        for &threads in &self.threads {
                            out.push(Spec {
                                workload,
                                mode,
                                index,
                                threads,
                                resident: self.resident,
                                resident_vmas: self.resident_vmas,
                                imap,
                                lock,
                                anon_rule,
                                topology: Arc::clone(&self.topology),
                                pin: self.pin,
                            });
                        }
                    }
                }
            }
        }
        out
    }
}

impl RunArgs {
    /// Resolves defaults and names into a validated configuration; every
    /// error is one line naming the bad value and the valid ones.
    pub fn to_config(&self) -> Result<RunConfig, BenchError> {
        let workloads = match &self.workloads {
            Some(names) => parse_names(names, &Workload::ALL, Workload::name, "workload")?,
            None => Workload::ALL.to_vec(),
        };
        let modes = match &self.mode {
            Some(names) => parse_names(names, &Mode::ALL, Mode::name, "mode")?,
            None => Mode::ALL.to_vec(),
        };
        // A processes-only workload the user named, with no processes
        // mode to run it in, is a mistake; one that only came with the
        // default list is skipped (with a note) when the runs start.
        if self.workloads.is_some() && !modes.contains(&Mode::Processes) {
            if let Some((w, why)) = workloads
                .iter()
                .find_map(|&w| w.processes_only().map(|why| (w, why)))
            {
                return Err(BenchError(format!(
                    "--mode: {w} runs in processes mode only ({why}); add --mode processes"
                )));
            }
        }
        let indexes = match &self.index {
            Some(names) => parse_names(names, &IndexKind::ALL, IndexKind::name, "index")?,
            None => IndexKind::ALL.to_vec(),
        };
        let threads = match &self.threads {
            Some(counts) => parse_threads(counts)?,
            None => default_threads(),
        };
        let (duration, warmup) = if self.quick { (0.05, 0.01) } else { (2.0, 0.5) };
        let timing = Timing {
            duration: seconds("--duration", self.duration.unwrap_or(duration), false)?,
            warmup: seconds("--warmup", self.warmup.unwrap_or(warmup), true)?,
        };
        let repeat = match self.repeat.as_deref().map(str::trim) {
            None => 1,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=1000).contains(&n) => n,
                _ => {
                    return Err(BenchError(format!(
                        "--repeat: '{text}' is not a run count (1 to 1000)"
                    )))
                }
            },
        };
        let resident_vmas = match self.resident_vmas.as_deref().map(str::trim) {
            None if self.quick => execl::QUICK_RESIDENT_VMAS,
            None => execl::DEFAULT_RESIDENT_VMAS,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if n <= execl::MAX_RESIDENT_VMAS => n,
                _ => {
                    return Err(BenchError(format!(
                        "--resident-vmas: '{text}' is not a VMA count (0 to {})",
                        execl::MAX_RESIDENT_VMAS
                    )))
                }
            },
        };
        let imaps = match &self.imap {
            Some(names) => parse_names(names, &ImapDesign::ALL, ImapDesign::name, "i_mmap design")?,
            None => vec![ImapDesign::default()],
        };
        let locks = match &self.lock {
            Some(names) => parse_names(names, &LockKind::ALL, LockKind::name, "lock")?,
            None => vec![LockKind::default()],
        };
        let anon_rules = match &self.anon_rule {
            Some(names) => parse_names(names, &[true, false], rule_name, "anon rule setting")?,
            None => vec![true],
        };
        let topology = parse_topology(self.topology.as_deref())?;
        Ok(RunConfig {
            workloads,
            modes,
            indexes,
            threads,
            timing,
            resident: self.resident,
            resident_vmas,
            repeat,
            imaps,
            locks,
            anon_rules,
            topology,
            pin: !self.no_pin,
        })
    }
}

/// Parses `--topology`: `host` (or nothing) for this machine, `NxM` for
/// an emulated one.
pub(crate) fn parse_topology(text: Option<&str>) -> Result<Arc<Topology>, BenchError> {
    match text.map(str::trim) {
        None | Some("host") => Ok(topology::host()),
        Some(text) => text
            .parse::<Topology>()
            .map(Arc::new)
            .map_err(|e| BenchError(format!("--topology: {e}"))),
    }
}

/// `--anon-rule`'s names for the rule's two settings.
fn rule_name(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

/// Parses `--threads`: positive counts up to [`MAX_THREADS`].
pub(crate) fn parse_threads(counts: &[String]) -> Result<Vec<usize>, BenchError> {
    let mut out = Vec::new();
    for raw in counts {
        let text = raw.trim();
        match text.parse::<usize>() {
            Ok(n) if (1..=MAX_THREADS).contains(&n) => {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
            _ => {
                return Err(BenchError(format!(
                    "--threads: '{text}' is not a worker count (1 to {MAX_THREADS})"
                )))
            }
        }
    }
    Ok(out)
}

/// 1, the powers of two below the CPU count, and the CPU count: the
/// scaling curve on every core the machine has (1, 2 on two cores).
pub(crate) fn default_threads() -> Vec<usize> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out: Vec<usize> = std::iter::successors(Some(1), |n| Some(n * 2))
        .take_while(|&n| n < cpus)
        .collect();
    out.push(cpus);
    out
}

/// Shortest timed run: below this, starting the workers takes longer
/// than the run, and a run that completes no operation would report a
/// meaningless 0 ops/s.
const MIN_DURATION: f64 = 0.01;

fn seconds(flag: &str, secs: f64, zero_ok: bool) -> Result<Duration, BenchError> {
    let ok =
        secs.is_finite() && (secs >= MIN_DURATION || (zero_ok && secs == 0.0)) && secs <= 3600.0;
    if !ok {
        let min = if zero_ok {
            "0".to_string()
        } else {
            format!("{MIN_DURATION}")
        };
        return Err(BenchError(format!(
            "{flag}: {secs} is not a duration in seconds ({min} to 3600)"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// One JSON line: the fields of `vmbench tree`'s lines (`impl` is the
/// index, `op` the workload, `n` the size of the population it works
/// against, see [`Spec::population`], `value` ops/s), then the mode, the
/// operations counted and the timed seconds, the workers' scheduler times
/// (`null` where unknown), how many runs the median was taken over and
/// their spread, and the lock statistics of the timed interval per class
/// (every class of [`LockClass::ALL`]).
#[derive(Debug, Serialize)]
struct RunLine {
    #[serde(flatten)]
    record: Record,
    mode: &'static str,
    ops: u64,
    seconds: f64,
    cpu: Option<CpuLine>,
    repeat: usize,
    runs: Spread,
    imap: &'static str,
    lock: &'static str,
    anon_rule: &'static str,
    topology: String,
    locks: BTreeMap<&'static str, LockLine>,
}

/// Throughput (ops/s) over the runs of one configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
struct Spread {
    mean: f64,
    /// Sample standard deviation (0 for a single run).
    stddev: f64,
    min: f64,
    max: f64,
}

impl Spread {
    /// The spread of `values`; all zero for none.
    fn of(values: &[f64]) -> Spread {
        let n = values.len() as f64;
        if values.is_empty() {
            return Spread {
                mean: 0.0,
                stddev: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        let mean = values.iter().sum::<f64>() / n;
        let var = if values.len() > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Spread {
            mean,
            stddev: var.sqrt(),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// The workers' scheduler times in the timed interval, summed.
#[derive(Debug, Serialize)]
struct CpuLine {
    /// Nanoseconds on a CPU.
    on_cpu_ns: u64,
    /// Nanoseconds runnable but waiting for a CPU (taken by others).
    run_delay_ns: u64,
    /// `on_cpu_ns` over workers × timed seconds: below ~0.95, other
    /// processes disturbed the run.
    share: f64,
}

/// Lock counters of one class, as in the kernel's `lock_stat`.
#[derive(Debug, Serialize)]
struct LockLine {
    acquisitions: u64,
    contended: u64,
    wait_ns: u64,
    max_wait_ns: u64,
}

/// A finished configuration.
struct Row {
    spec: Spec,
    /// The median run.
    m: Measurement,
    repeat: usize,
    spread: Spread,
}

impl Row {
    fn label(&self) -> String {
        label(&self.spec)
    }

    fn line(&self) -> RunLine {
        let locks = self
            .m
            .locks
            .iter()
            .map(|(class, s)| {
                let line = LockLine {
                    acquisitions: s.acquisitions,
                    contended: s.contended,
                    wait_ns: s.wait_ns,
                    max_wait_ns: s.max_wait_ns,
                };
                (class.name(), line)
            })
            .collect();
        RunLine {
            record: Record {
                imp: self.spec.index.name(),
                op: self.spec.workload.name(),
                n: self.spec.population(),
                threads: self.spec.threads,
                value: self.m.ops_per_sec(),
                unit: "ops/s",
            },
            mode: self.spec.mode.name(),
            ops: self.m.ops,
            seconds: self.m.elapsed.as_secs_f64(),
            cpu: self.m.cpu.map(|c| CpuLine {
                on_cpu_ns: c.on_cpu_ns,
                run_delay_ns: c.run_delay_ns,
                share: self.m.cpu_share(self.spec.threads).unwrap_or(0.0),
            }),
            repeat: self.repeat,
            runs: self.spread,
            imap: self.spec.imap.name(),
            lock: self.spec.lock.name(),
            anon_rule: rule_name(self.spec.anon_rule),
            topology: self.spec.topology.to_string(),
            locks,
        }
    }

    /// Acquisitions of `class` per counted operation.
    fn per_op(&self, class: LockClass) -> f64 {
        let n = self.m.locks.class(class).acquisitions as f64;
        if self.m.ops == 0 {
            0.0
        } else {
            n / self.m.ops as f64
        }
    }
}

/// Runs `vmbench run`: JSON lines as configurations finish, or a table at
/// the end. Progress goes to stderr.
pub fn main(args: &RunArgs) -> Result<(), BenchError> {
    let config = args.to_config()?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let write_err = |e: io::Error| BenchError(format!("writing results: {e}"));
    let mut rows = Vec::new();
    for &workload in &config.workloads {
        for &mode in &config.modes {
            if let (Mode::Threads, Some(why)) = (mode, workload.processes_only()) {
                eprintln!("vmbench run: skipping {workload} in threads mode: {why}");
                continue;
            }
            for spec in config.specs(workload, mode) {
                let (m, spread) = measure_median(&spec, &config)?;
                let row = Row {
                    spec,
                    m,
                    repeat: config.repeat,
                    spread,
                };
                eprintln!(
                    "vmbench run: {}: {:.0} ops/s (cpu share {})",
                    row.label(),
                    row.m.ops_per_sec(),
                    format_share(row.m.cpu_share(row.spec.threads)),
                );
                if args.json {
                    serde_json::to_writer(&mut out, &row.line())
                        .map_err(|e| write_err(e.into()))?;
                    out.write_all(b"\n").map_err(write_err)?;
                    out.flush().map_err(write_err)?;
                }
                rows.push(row);
            }
        }
    }
    if !args.json {
        writeln!(out, "{}", render_table(&rows)).map_err(write_err)?;
    }
    Ok(())
}

/// Runs `spec` `config.repeat` times and keeps the run with the median
/// throughput (the upper middle one for an even count), with the spread
/// of all runs' throughput.
fn measure_median(spec: &Spec, config: &RunConfig) -> Result<(Measurement, Spread), BenchError> {
    let mut runs = Vec::with_capacity(config.repeat);
    for _ in 0..config.repeat {
        let m = harness::measure(spec, &config.timing)
            .map_err(|e| BenchError(format!("{}: {e}", label(spec))))?;
        runs.push(m);
    }
    let rates: Vec<f64> = runs.iter().map(Measurement::ops_per_sec).collect();
    runs.sort_by(|a, b| a.ops_per_sec().total_cmp(&b.ops_per_sec()));
    let median = runs.swap_remove(runs.len() / 2);
    Ok((median, Spread::of(&rates)))
}

/// A configuration in one line, for progress and errors.
fn label(s: &Spec) -> String {
    format!(
        "{} {} {} imap={} lock={} anon-rule={} topology={} x{}",
        s.workload,
        s.mode.name(),
        s.index,
        s.imap,
        s.lock,
        rule_name(s.anon_rule),
        s.topology,
        s.threads
    )
}

fn format_share(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_string(), |s| format!("{:.0}%", s * 100.0))
}

/// One row per configuration, with throughput relative to the same
/// configuration's smallest worker count, the spread over runs, the
/// acquisitions per op of every lock class, and which classes had to wait.
fn render_table(rows: &[Row]) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let mut header: Vec<String> = [
        "workload",
        "mode",
        "index",
        "imap",
        "lock",
        "rule",
        "threads",
        "ops/s",
        "vs fewest threads",
        "runs: mean ± sd",
    ]
    .map(String::from)
    .to_vec();
    header.extend(LockClass::ALL.iter().map(|c| format!("{}/op", c.name())));
    header.push("contended".to_string());
    header.push("cpu share".to_string());
    table.set_header(header);
    for row in rows {
        let s = &row.spec;
        let base = rows
            .iter()
            .filter(|r| {
                let key = |s: &Spec| (s.workload, s.mode, s.index, s.imap, s.lock, s.anon_rule);
                key(&r.spec) == key(s)
            })
            .min_by_key(|r| r.spec.threads)
            .filter(|b| b.spec.threads < s.threads && b.m.ops_per_sec() > 0.0);
        let scaling = base.map_or_else(
            || "-".to_string(),
            |b| format!("{:.2}x", row.m.ops_per_sec() / b.m.ops_per_sec()),
        );
        let spread = if row.repeat > 1 {
            format!("{:.0} ± {:.0}", row.spread.mean, row.spread.stddev)
        } else {
            "-".to_string()
        };
        let mut cells = vec![
            s.workload.name().to_string(),
            s.mode.name().to_string(),
            s.index.name().to_string(),
            s.imap.name().to_string(),
            s.lock.name().to_string(),
            rule_name(s.anon_rule).to_string(),
            s.threads.to_string(),
            format!("{:.0}", row.m.ops_per_sec()),
            scaling,
            spread,
        ];
        cells.extend(LockClass::ALL.iter().map(|&c| format_per_op(row.per_op(c))));
        cells.push(format_contended(&row.m));
        cells.push(format_share(row.m.cpu_share(s.threads)));
        table.add_row(cells);
    }
    for column in table.column_iter_mut().skip(6) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    table.to_string()
}

/// The classes that had to wait, as `class waits/acquisitions`, or `0`.
fn format_contended(m: &Measurement) -> String {
    let parts: Vec<String> = m
        .locks
        .iter()
        .filter(|(_, s)| s.contended > 0)
        .map(|(c, s)| format!("{} {}/{}", c.name(), s.contended, s.acquisitions))
        .collect();
    if parts.is_empty() {
        "0".to_string()
    } else {
        parts.join(", ")
    }
}

/// Small per-op figures (page_fault3's map/unmap share) need more digits
/// than whole ones.
fn format_per_op(x: f64) -> String {
    if x == 0.0 || x >= 0.1 {
        format!("{x:.2}")
    } else {
        format!("{x:.6}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Result<RunConfig, BenchError> {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let mut argv = vec!["run"];
        argv.extend(extra);
        Cli::try_parse_from(argv).unwrap().run.to_config()
    }

    #[test]
    fn defaults_cover_everything() {
        let c = args(&[]).unwrap();
        assert_eq!(c.workloads, Workload::ALL);
        assert_eq!(c.modes, Mode::ALL);
        assert_eq!(c.indexes, IndexKind::ALL);
        assert_eq!(c.threads[0], 1);
        assert_eq!(c.timing.duration, Duration::from_secs(2));
    }

    #[test]
    fn lists_and_bad_values() {
        let c = args(&[
            "--threads",
            "2,1,2",
            "--index",
            "legacy",
            "--mode",
            "threads",
        ])
        .unwrap();
        assert_eq!(c.threads, [2, 1]);
        assert_eq!(c.indexes, [IndexKind::Legacy]);
        assert_eq!(c.modes, [Mode::Threads]);
        assert!(args(&["--threads", "0"]).is_err());
        assert!(args(&["--threads", "x"]).is_err());
        assert!(args(&["--workloads", "page_fault9"]).is_err());
        assert!(args(&["--index", "btree"]).is_err());
        assert!(args(&["--duration", "0"]).is_err());
        // Too short to complete an operation: refused, not a 0 ops/s figure.
        assert!(args(&["--duration", "1e-9"]).is_err());
        assert!(args(&["--duration", "0.01"]).is_ok());
        assert!(args(&["--warmup", "0"]).is_ok());
        assert!(args(&["--repeat", "0"]).is_err());
        assert_eq!(args(&["--repeat", "3"]).unwrap().repeat, 3);
    }

    #[test]
    fn resident_vmas_defaults_and_bounds() {
        assert_eq!(args(&[]).unwrap().resident_vmas, 6000);
        assert_eq!(args(&["--quick"]).unwrap().resident_vmas, 500);
        let c = args(&["--quick", "--resident-vmas", "0"]).unwrap();
        assert_eq!(c.resident_vmas, 0);
        let c = args(&["--resident-vmas", "100000"]).unwrap();
        assert_eq!(c.resident_vmas, 100_000);
        for bad in ["100001", "-1", "many", ""] {
            let flag = format!("--resident-vmas={bad}");
            let e = args(&[&flag]).unwrap_err();
            assert!(e.0.starts_with("--resident-vmas: "), "{bad}: {e}");
        }
    }

    #[test]
    fn processes_only_workloads_need_processes_mode() {
        for w in ["execl", "aim7-brk", "brk1,execl"] {
            let e = args(&["--workloads", w, "--mode", "threads"]).unwrap_err();
            assert!(e.0.contains("processes mode only"), "{w}: {e}");
            assert!(args(&["--workloads", w, "--mode", "threads,processes"]).is_ok());
        }
        // Not named, only defaulted: skipped when the runs start.
        let c = args(&["--mode", "threads"]).unwrap();
        assert!(c.workloads.contains(&Workload::Execl));
    }

    #[test]
    fn spread_of_runs() {
        let s = Spread::of(&[10.0, 20.0, 30.0]);
        assert_eq!((s.mean, s.min, s.max), (20.0, 10.0, 30.0));
        assert!((s.stddev - 10.0).abs() < 1e-9, "{s:?}");
        let one = Spread::of(&[5.0]);
        assert_eq!(
            (one.mean, one.stddev, one.min, one.max),
            (5.0, 0.0, 5.0, 5.0)
        );
        assert_eq!(Spread::of(&[]).mean, 0.0);
    }
}

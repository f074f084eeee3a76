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

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use mm::lock::LockKind;
use mm::lockstat::LockClass;
use mm::policy::ImapDesign;
use mm::topology::{self, Topology};
use mm::IndexKind;
use serde::Serialize;
use std::sync::Arc;

use crate::figure::Figure;
use crate::placement::{self, Gate, Placed, Rule};
use crate::stop::StopSignals;
use crate::LabError;
use harness::{Design, Measurement, Mode, Spec, Timing};
use workload::Workload;

/// Most workers accepted; more would only oversubscribe the machine.
pub const MAX_THREADS: usize = 1024;

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
    /// Which placement of the workers' CPUs the runs of several pinned
    /// workers wait for (see [`crate::placement`]).
    pub placement: Rule,
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
                                design: Design {
                                    index,
                                    imap,
                                    lock,
                                    anon_rule,
                                },
                                threads,
                                resident: self.resident,
                                resident_vmas: self.resident_vmas,
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

/// Shortest timed run: below this, starting the workers takes longer
/// than the run, and a run that completes no operation would report a
/// meaningless 0 ops/s.
pub const MIN_DURATION: f64 = 0.01;

/// One JSON line: the fields of `vmbench tree`'s lines (`impl` is the
/// index, `op` the workload, `n` the size of the population it works
/// against, see [`Spec::population`], `value` ops/s), then the mode, the
/// operations counted and the timed seconds, the workers' scheduler times
/// (`null` where unknown), how many runs the median was taken over and
/// their spread, the design and topology, where the host put the workers'
/// CPUs (runs of several pinned workers), and the lock statistics of the
/// timed interval per class (every class of [`LockClass::ALL`]).
#[derive(Debug, Serialize)]
pub struct RunLine {
    #[serde(flatten)]
    record: Figure,
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
    /// One-way cache-line transfer between the first two workers' CPUs
    /// just before and just after the median run, in nanoseconds (see
    /// [`crate::placement`]); absent for one worker, unpinned or emulated
    /// runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    transfer_ns: Option<f64>,
    /// The same, just after the median run.
    #[serde(skip_serializing_if = "Option::is_none")]
    transfer_after_ns: Option<f64>,
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
    /// The spread of `values`; all zero for none. The arithmetic mean and
    /// standard deviation come from `vmresults`, where every mean of the
    /// lab is computed.
    fn of(values: &[f64]) -> Spread {
        let summary = vmresults::compare::summarize(values, false);
        Spread {
            mean: summary.map_or(0.0, |s| s.mean),
            stddev: summary.map_or(0.0, |s| s.stddev),
            min: values.iter().copied().reduce(f64::min).unwrap_or(0.0),
            max: values.iter().copied().reduce(f64::max).unwrap_or(0.0),
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
    /// Contended acquisitions that went to the wait queue to sleep.
    queued: u64,
}

/// A finished configuration.
pub struct Row {
    /// The configuration.
    pub spec: Spec,
    /// The median run.
    pub m: Measurement,
    /// Where the host put the median run's CPUs, for a run of several
    /// pinned workers.
    pub placed: Option<Placed>,
    /// Runs measured.
    pub repeat: usize,
    spread: Spread,
}

impl Row {
    /// The configuration in one line, e.g. `mmap1 processes maple 2 workers`.
    pub fn label(&self) -> String {
        label(&self.spec)
    }

    /// The row as one JSON line's content.
    pub fn line(&self) -> RunLine {
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
                    queued: s.queued,
                };
                (class.name(), line)
            })
            .collect();
        RunLine {
            record: Figure {
                imp: self.spec.design.index.name(),
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
            imap: self.spec.design.imap.name(),
            lock: self.spec.design.lock.name(),
            anon_rule: rule_name(self.spec.design.anon_rule),
            topology: self.spec.topology.to_string(),
            transfer_ns: self.placed.map(|p| p.before_ns),
            transfer_after_ns: self.placed.map(|p| p.after_ns),
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

/// Runs `spec` `config.repeat` times and keeps the run with the median
/// throughput (the upper middle one for an even count), with its
/// placement and the spread of all runs' throughput. Runs of several
/// pinned workers on the real topology go through `gate`.
fn measure_median<M>(
    spec: &Spec,
    config: &RunConfig,
    gate: &mut Gate<M>,
) -> Result<(Measurement, Option<Placed>, Spread), LabError>
where
    M: FnMut() -> Result<f64, LabError>,
{
    let measure = || {
        harness::measure(spec, &config.timing)
            .map_err(|e| LabError(format!("{}: {e}", label(spec))))
    };
    let mut runs = Vec::with_capacity(config.repeat);
    for _ in 0..config.repeat {
        runs.push(if spec.placed() {
            gate.run(measure).map(|(m, p)| (m, Some(p)))?
        } else {
            (measure()?, None)
        });
    }
    let rates: Vec<f64> = runs.iter().map(|(m, _)| m.ops_per_sec()).collect();
    runs.sort_by(|a, b| a.0.ops_per_sec().total_cmp(&b.0.ops_per_sec()));
    let (median, placement) = runs.swap_remove(runs.len() / 2);
    Ok((median, placement, Spread::of(&rates)))
}

/// A configuration in one line, for progress and errors.
fn label(s: &Spec) -> String {
    format!(
        "{} {} {} topology={} x{}",
        s.workload,
        s.mode.name(),
        s.design,
        s.topology,
        s.threads
    )
}

/// A CPU share as a percentage, `-` where it is unknown.
pub fn format_share(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_string(), |s| format!("{:.0}%", s * 100.0))
}

/// One row per configuration, with throughput relative to the same
/// configuration's smallest worker count, the spread over runs, the
/// acquisitions per op of every lock class, and which classes had to wait.
pub fn render_table(rows: &[Row]) -> String {
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
    header.push("transfer ns".to_string());
    table.set_header(header);
    for row in rows {
        let s = &row.spec;
        let base = rows
            .iter()
            .filter(|r| {
                let key = |s: &Spec| (s.workload, s.mode, s.design);
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
            s.design.index.name().to_string(),
            s.design.imap.name().to_string(),
            s.design.lock.name().to_string(),
            rule_name(s.design.anon_rule).to_string(),
            s.threads.to_string(),
            format!("{:.0}", row.m.ops_per_sec()),
            scaling,
            spread,
        ];
        cells.extend(LockClass::ALL.iter().map(|&c| format_per_op(row.per_op(c))));
        cells.push(format_contended(&row.m));
        cells.push(format_share(row.m.cpu_share(s.threads)));
        cells.push(format_placed(row.placed));
        table.add_row(cells);
    }
    for column in table.column_iter_mut().skip(6) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    table.to_string()
}

/// Where the median run's CPUs were: the one-way transfer before it, and
/// after it too where the host moved them during the run (`33→105`); `-`
/// where it was not measured.
pub fn format_placed(placed: Option<Placed>) -> String {
    match placed {
        None => "-".to_string(),
        Some(p) if p.held() => format!("{:.0}", p.before_ns),
        Some(p) => format!("{:.0}→{:.0}", p.before_ns, p.after_ns),
    }
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

/// Parses `--topology`: `host` (or nothing) for this machine, `NxM` for
/// an emulated one.
pub fn parse_topology(text: Option<&str>) -> Result<Arc<Topology>, LabError> {
    match text.map(str::trim) {
        None | Some("host") => Ok(topology::host()),
        Some(text) => text
            .parse::<Topology>()
            .map(Arc::new)
            .map_err(|e| LabError(format!("--topology: {e}"))),
    }
}

/// Parses `--threads`: positive counts up to [`MAX_THREADS`].
pub fn parse_threads(counts: &[String]) -> Result<Vec<usize>, LabError> {
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
                return Err(LabError(format!(
                    "--threads: '{text}' is not a worker count (1 to {MAX_THREADS})"
                )))
            }
        }
    }
    Ok(out)
}

/// 1, the powers of two below the CPU count, and the CPU count: the
/// scaling curve on every core the machine has (1, 2 on two cores).
pub fn default_threads() -> Vec<usize> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out: Vec<usize> = std::iter::successors(Some(1), |n| Some(n * 2))
        .take_while(|&n| n < cpus)
        .collect();
    out.push(cpus);
    out
}

/// The names of the anon_vma rule's two settings (`--anon-rule`, result lines).
pub fn rule_name(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

/// Runs every configuration of `config` in order, `--repeat` times each,
/// and hands each configuration's median run to `sink` as it finishes.
/// A workload that cannot run in threads mode is skipped there, with a
/// note on stderr. With `stop`, a first SIGINT or SIGTERM ends the run
/// after the configuration being measured; the return value says whether
/// that happened (`Ok(false)`: stopped early).
pub fn run_all(
    config: &RunConfig,
    stop: Option<&StopSignals>,
    sink: &mut dyn FnMut(Row) -> Result<(), LabError>,
) -> Result<bool, LabError> {
    let mut gate = placement::first_two_workers(config.placement, Arc::clone(&config.topology));
    for &workload in &config.workloads {
        for &mode in &config.modes {
            if let (Mode::Threads, Some(why)) = (mode, workload.processes_only()) {
                eprintln!("vmbench run: skipping {workload} in threads mode: {why}");
                continue;
            }
            for spec in config.specs(workload, mode) {
                if stop.is_some_and(StopSignals::requested) {
                    return Ok(false);
                }
                let (m, placed, spread) = measure_median(&spec, config, &mut gate)?;
                sink(Row {
                    spec,
                    m,
                    placed,
                    repeat: config.repeat,
                    spread,
                })?;
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

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

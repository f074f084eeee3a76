//! `vmbench suite`: every workload across the designs it compares, at 1 to
//! all cores, repeated, then the comparison table, the plots and the HTML
//! page in a results directory ([`crate::results`]).
//!
//! What each workload compares (the first configuration is the baseline
//! of its table: the design the kernel had before the one measured
//! against it):
//!
//! | workload | configurations |
//! |---|---|
//! | `tree` | the maple tree and `BTreeMap` (plain and behind a lock), per operation and size |
//! | `execl` | the five i_mmap designs (`single` first), and `single` with each lock kind |
//! | `aim7-brk` | the anon_vma rule off, then on |
//! | `brk1`, `mmap1`, `malloc1`, `mmap2`, `page_fault3` | legacy index, then maple; processes and threads mode |
//! | `kernbench` | legacy index, then maple |
//!
//! A configuration that cannot be measured (a failed call, a workload
//! refusing a mode) is reported on stderr and left out of the results; the
//! table then shows `-` for it, never a zero.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use mm::imap::ImapDesign;
use mm::lock::LockKind;
use mm::topology::Topology;
use mm::IndexKind;

use crate::run::harness::{self, Mode, Spec, Timing};
use crate::run::resident;
use crate::run::workload::Workload;
use crate::tree::{self, Impl, Op, Scale, TreeConfig};
use crate::LabError;
use vmresults::compare;
use vmresults::plot;
use vmresults::samples::{self as results, Machine, Sample};

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
        index: IndexKind,
        imap: ImapDesign,
        lock: LockKind,
        anon_rule: bool,
    },
    /// A `tree` implementation.
    Tree(Impl),
}

/// The suite's workloads, in run order.
pub const WORKLOADS: [&str; 9] = [
    "tree",
    "execl",
    "aim7-brk",
    "brk1",
    "mmap1",
    "malloc1",
    "mmap2",
    "page_fault3",
    "kernbench",
];

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
            index,
            imap,
            lock,
            anon_rule,
        },
    }
}

/// The configurations `workload` compares, baseline first.
/// Every design name `Plan::designs` may hold, over all workloads.
pub fn design_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = WORKLOADS
        .iter()
        .flat_map(|w| configs(w))
        .flat_map(|c| c.tags)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

fn configs(workload: &str) -> Vec<Config> {
    let m = IndexKind::Maple;
    let (single, rwsem) = (ImapDesign::Single, LockKind::Rwsem);
    let p = Mode::Processes;
    match workload {
        "tree" => Impl::ALL
            .iter()
            .map(|&imp| Config {
                label: imp.name().to_string(),
                tags: vec![imp.name()],
                kind: ConfigKind::Tree(imp),
            })
            .collect(),
        "execl" => {
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
        "aim7-brk" => [false, true]
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
        "kernbench" => IndexKind::ALL
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

/// What a suite run measures and where it writes.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Workloads, in run order (names from [`WORKLOADS`]).
    pub workloads: Vec<&'static str>,
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
    /// The results directory.
    pub out: PathBuf,
}

impl Plan {
    /// The configurations of `workload` that `--designs` keeps.
    fn configs(&self, workload: &str) -> Vec<Config> {
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
    pub fn config_labels(&self, workload: &str) -> Vec<String> {
        self.configs(workload)
            .into_iter()
            .map(|c| c.label)
            .collect()
    }

    /// How many progress steps the run has: one per measured point and
    /// repetition (one per repetition for `tree`, which measures every
    /// kept implementation in one pass).
    pub fn steps(&self) -> u64 {
        let mut n = 0;
        for w in &self.workloads {
            let configs = self.configs(w).len();
            let per_config = if *w == "tree" {
                // One tree pass measures every kept implementation.
                usize::from(configs > 0)
            } else {
                configs * self.threads.len()
            };
            n += per_config * self.repeat;
        }
        n as u64
    }
}

/// The files a suite writes into its results directory, besides a plot
/// (`<workload>.svg`, `<workload>.png`) per workload.
const SUITE_FILES: [&str; 6] = [
    "command.txt",
    "machine.json",
    "results.jsonl",
    "table.txt",
    "table.md",
    "index.html",
];

/// Measures everything `plan` asks for and writes the results directory
/// (`results.jsonl`, tables, plots, page); `command` is recorded in it as
/// the command that produced it. A directory that exists and is not empty
/// is refused unless `force`, which first removes the files an earlier
/// suite wrote there.
pub fn run(plan: &Plan, command: &str, force: bool) -> Result<(), LabError> {
    if plan.steps() == 0 {
        // Refused before anything is created: no empty results directory.
        return Err(LabError(format!(
            "nothing to measure: --designs {} keeps no configuration of the workloads {}",
            plan.designs.as_deref().unwrap_or_default().join(","),
            plan.workloads.join(",")
        )));
    }
    let created = prepare_out(&plan.out, force)?;
    let result = measure_and_write(plan, command);
    if result.is_err() && !plan.out.join("results.jsonl").exists() {
        // Nothing measured: take back what this run wrote, and the
        // directory if this run made it.
        for f in ["command.txt", "machine.json"] {
            let _ = fs::remove_file(plan.out.join(f));
        }
        if created {
            let _ = fs::remove_dir(&plan.out);
        }
    }
    result
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
            let plots = WORKLOADS
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

/// The measurement and the results, into a prepared directory.
fn measure_and_write(plan: &Plan, command: &str) -> Result<(), LabError> {
    let machine = Machine::detect(&plan.topology);
    write_file(&plan.out.join("command.txt"), &format!("{command}\n"))?;
    let json = serde_json::to_string_pretty(&machine)
        .map_err(|e| LabError(format!("machine.json: {e}")))?;
    write_file(&plan.out.join("machine.json"), &format!("{json}\n"))?;

    let bar = ProgressBar::new(plan.steps());
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} ETA {eta} {msg}",
        )
        .map_err(|e| LabError(format!("progress bar: {e}")))?,
    );
    let mut samples: Vec<Sample> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for &workload in &plan.workloads {
        let configs = plan.configs(workload);
        if configs.is_empty() {
            continue;
        }
        if workload == "tree" {
            run_tree(plan, &configs, &bar, &mut samples)?;
        } else {
            run_workload(plan, workload, &configs, &bar, &mut samples, &mut failures);
        }
    }
    bar.finish_and_clear();
    for f in &failures {
        eprintln!("vmbench suite: not measured: {f}");
    }
    if samples.is_empty() {
        return Err(LabError(
            "nothing was measured: every configuration failed (see above)".to_string(),
        ));
    }
    write_results(&plan.out, &machine, command, &samples)?;
    Ok(())
}

/// Measure every (configuration, thread count, repetition) of a `run`
/// workload. Repetitions are the outer loop, so a disturbance of the
/// machine spreads over configurations instead of biasing one.
fn run_workload(
    plan: &Plan,
    workload: &str,
    configs: &[Config],
    bar: &ProgressBar,
    samples: &mut Vec<Sample>,
    failures: &mut Vec<String>,
) {
    let Some(w) = Workload::ALL.iter().copied().find(|w| w.name() == workload) else {
        failures.push(format!("{workload}: not a run workload"));
        return;
    };
    let mut failed: Vec<String> = Vec::new();
    for rep in 0..plan.repeat {
        for config in configs {
            let ConfigKind::Run {
                mode,
                index,
                imap,
                lock,
                anon_rule,
            } = config.kind
            else {
                continue;
            };
            for &threads in &plan.threads {
                bar.set_message(format!(
                    "{workload} {} x{threads} (run {}/{})",
                    config.label,
                    rep + 1,
                    plan.repeat
                ));
                bar.inc(1);
                let key = format!("{workload} {} x{threads}", config.label);
                if failed.contains(&key) {
                    continue;
                }
                let spec = Spec {
                    workload: w,
                    mode,
                    index,
                    threads,
                    resident: resident::DEFAULT_RESIDENT,
                    resident_vmas: plan.resident_vmas,
                    imap,
                    lock,
                    anon_rule,
                    topology: Arc::clone(&plan.topology),
                    pin: plan.pin,
                };
                match harness::measure(&spec, &plan.timing) {
                    Ok(m) if m.ops > 0 => samples.push(Sample {
                        workload: workload.to_string(),
                        metric: "ops/s".to_string(),
                        unit: "ops/s".to_string(),
                        higher_is_better: true,
                        config: config.label.clone(),
                        threads,
                        rep,
                        value: m.ops_per_sec(),
                    }),
                    Ok(_) => {
                        failures.push(format!(
                            "{key}: no operation completed in the timed interval"
                        ));
                        failed.push(key);
                    }
                    Err(e) => {
                        failures.push(format!("{key}: {e}"));
                        failed.push(key);
                    }
                }
            }
        }
    }
}

/// The tree microbenchmarks, once per repetition; every figure is a sample
/// of its implementation at its operation and size.
fn run_tree(
    plan: &Plan,
    configs: &[Config],
    bar: &ProgressBar,
    samples: &mut Vec<Sample>,
) -> Result<(), LabError> {
    let impls: Vec<Impl> = configs
        .iter()
        .filter_map(|c| match c.kind {
            ConfigKind::Tree(i) => Some(i),
            ConfigKind::Run { .. } => None,
        })
        .collect();
    for rep in 0..plan.repeat {
        bar.set_message(format!("tree (run {}/{})", rep + 1, plan.repeat));
        bar.inc(1);
        let cfg = TreeConfig {
            sizes: plan.tree_sizes.clone(),
            repeat: 1,
            ops: TREE_OPS.to_vec(),
            impls: impls.clone(),
            scale: plan.tree_scale,
            seed: tree::DEFAULT_SEED.wrapping_add(rep as u64),
        };
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
                })
            })
        })?;
    }
    Ok(())
}

/// Write the samples, the tables, the plots and the page.
fn write_results(
    dir: &Path,
    machine: &Machine,
    command: &str,
    samples: &[Sample],
) -> Result<(), LabError> {
    let io = |what: &Path, e: std::io::Error| LabError(format!("writing {}: {e}", what.display()));
    let jsonl = dir.join("results.jsonl");
    results::write_samples(&jsonl, samples).map_err(|e| io(&jsonl, e))?;
    let tables = compare::suite_tables(samples);
    let text = compare::render_text(&tables);
    let markdown = compare::render_markdown(&tables);
    write_file(&dir.join("table.txt"), &text)?;
    write_file(&dir.join("table.md"), &markdown)?;
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
    let title = "vmbench suite";
    plot::write_html(dir, title, machine, command, &markdown, &plots)
        .map_err(|e| LabError(format!("writing index.html: {e}")))?;
    println!("{text}");
    eprintln!(
        "vmbench suite: {} samples; results in {} (results.jsonl, table.txt, table.md, plots, index.html)",
        samples.len(),
        dir.display()
    );
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<(), LabError> {
    vmresults::output::write_file(path, text).map_err(|e| LabError(format!("writing {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_has_a_baseline_and_design_names_are_known() {
        for w in WORKLOADS {
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
        assert_eq!(configs("execl")[0].label, "imap=single");
        assert_eq!(configs("aim7-brk")[0].label, "rule=off");
        assert_eq!(configs("brk1")[0].label, "legacy processes");
    }
}

//! `vmbench project`: options, the comparison and breakdown tables, JSON
//! lines, plots and page of a projection, and `--validate`'s report.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use mm::lock::LockKind;
use mm::policy::ImapDesign;
use mm::IndexKind;
use vmlab::placement::Rule;
use vmlab::project::report::{default_cpus, validation_markdown, write_results};
use vmlab::project::{self, Evidence, Method, ProjectConfig, ValidateConfig, Validation};
use vmlab::run::harness::{Mode, Timing};
use vmlab::run::workload::Workload;
use vmlab::LabError;
use vmproject::Machine;

/// The workloads projected when `--workloads` is not given.
const DEFAULT_WORKLOADS: [Workload; 5] = [
    Workload::Execl,
    Workload::Aim7Brk,
    Workload::PageFault3,
    Workload::Brk1,
    Workload::Kernbench,
];

/// Options of `vmbench project`.
#[derive(Debug, clap::Args)]
pub struct ProjectArgs {
    /// Workloads, comma separated (see `vmbench run --help`). [default:
    /// execl,aim7-brk,page_fault3,brk1,kernbench; with --validate every
    /// workload of the suite]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&Workload::ALL, Workload::name))]
    pub workloads: Option<Vec<Workload>>,

    /// Modes of the workloads that have both, comma separated. [default:
    /// both]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&Mode::ALL, Mode::name))]
    pub mode: Option<Vec<Mode>>,

    /// i_mmap designs, comma separated. [default: all five]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&ImapDesign::ALL, ImapDesign::name))]
    pub designs: Option<Vec<ImapDesign>>,

    /// Lock kinds of the i_mmap and anon_vma locks, comma separated.
    /// [default: std,rwsem,numa]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&LockKind::ALL, LockKind::name))]
    pub locks: Option<Vec<LockKind>>,

    /// VMA indexes, comma separated. [default: maple; both with
    /// --validate]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&IndexKind::ALL, IndexKind::name))]
    pub index: Option<Vec<IndexKind>>,

    /// The machine: a preset (12x32: the execl report's 12-node 384-CPU
    /// server; 2s64: a 2-socket 64-core server; 1n96: a 1-node 96-core
    /// part), NxM (N nodes of M CPUs with the 12x32 preset's latencies), a
    /// JSON file (as `vmbench topology --measure --out` writes), or host
    /// (this machine, measured now). [default: 12x32; host with
    /// --validate]
    #[arg(long)]
    pub machine: Option<String>,

    /// CPU counts, comma separated. [default: 1, the powers of two below
    /// the machine's CPUs, and its CPUs; with --validate: 2]
    #[arg(long, value_delimiter = ',')]
    pub cpus: Option<Vec<usize>>,

    /// Predict this machine at --cpus workers from each configuration's
    /// one-worker profile, run them, and report predicted against
    /// measured; exits non-zero if any error exceeds --bound.
    #[arg(long)]
    pub validate: bool,

    /// --validate without running anything: predict again, with this
    /// build's simulation, from the profiles, machine descriptions and
    /// measurements an earlier --validate wrote (its directory, or its
    /// evidence.jsonl.gz), perhaps on another machine.
    #[arg(long, value_name = "DIR")]
    pub replay: Option<PathBuf>,

    /// --replay: record every configuration's profile again with this
    /// build's recorder (taking --duration, --warmup, --record-ops,
    /// --resident and --resident-vmas as the evidence was made with)
    /// before predicting, so that a change to the recorder is judged on
    /// the stored measurements. Only on the machine that measured them.
    #[arg(long, requires = "replay")]
    pub rerecord: bool,

    /// --validate: the largest relative error accepted.
    #[arg(long, default_value_t = 0.15)]
    pub bound: f64,

    /// --validate: measured runs per point (the median is compared), taken
    /// in turn with as many one-worker runs (the median is predicted from).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,

    /// Seconds of each calibration run (and, with --validate, each
    /// measured run). [default: 0.3; 0.05 with --quick]
    #[arg(long)]
    pub duration: Option<f64>,

    /// Seconds of untimed warm-up before each. [default: 0.1; 0.01 with
    /// --quick]
    #[arg(long)]
    pub warmup: Option<f64>,

    /// Operations recorded per profile (threads mode also records four
    /// times as many per worker with two workers taking turns).
    #[arg(long, default_value_t = 64)]
    pub record_ops: usize,

    /// Operations each simulated CPU completes. [default: sized to each
    /// profile: 8000 steps' worth, 20 to 200 operations]
    #[arg(long)]
    pub ops_per_cpu: Option<usize>,

    /// The simulation's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// execl: libc VMAs of the idle processes.
    #[arg(long, default_value_t = 6000)]
    pub resident_vmas: usize,

    /// Other VMAs mapped into each address space first.
    #[arg(long, default_value_t = vmlab::run::resident::DEFAULT_RESIDENT)]
    pub resident: usize,

    /// --validate: where the host may put the measured runs' CPUs, as
    /// `vmbench run --placement` (see docs/workloads.md): `hold` (the
    /// first run's placement), NS (CPUs about NS nanoseconds apart), or
    /// `any`. [default: hold; any with --quick]
    #[arg(long, value_parser = super::parse_placement)]
    pub placement: Option<Rule>,

    /// Shorter calibration runs, for smoke tests.
    #[arg(long)]
    pub quick: bool,

    /// Print one JSON object per point (per prediction with --validate)
    /// instead of tables.
    #[arg(long)]
    pub json: bool,

    /// Directory for the results (points.jsonl, table.txt, table.md,
    /// breakdown.md, plots, index.html; with --validate validation.jsonl,
    /// validation.md, machine.json, evidence.jsonl.gz). [default:
    /// vmbench-results/project-MACHINE, vmbench-results/validate with
    /// --validate, vmbench-results/replay with --replay]
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl ProjectArgs {
    fn timing(&self) -> Result<Timing, LabError> {
        let (d, w) = if self.quick { (0.05, 0.01) } else { (0.3, 0.1) };
        let secs = |v: Option<f64>, default: f64, what: &str| {
            let v = v.unwrap_or(default);
            if v.is_finite() && v > 0.0 && v <= 3600.0 {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(LabError(format!(
                    "--{what}: {v} seconds (expected 0 to 3600)"
                )))
            }
        };
        Ok(Timing {
            duration: secs(self.duration, d, "duration")?,
            warmup: secs(self.warmup, w, "warmup")?,
        })
    }

    fn method(&self) -> Result<Method, LabError> {
        if self.record_ops == 0 {
            return Err(LabError(
                "--record-ops: 0 operations (at least 1)".to_string(),
            ));
        }
        if self.ops_per_cpu == Some(0) {
            return Err(LabError(
                "--ops-per-cpu: 0 operations (at least 1)".to_string(),
            ));
        }
        Ok(Method {
            timing: self.timing()?,
            record_ops: self.record_ops,
            resident: self.resident,
            resident_vmas: self.resident_vmas,
            ops_per_cpu: self.ops_per_cpu,
            seed: self.seed,
            // The kernel's rwsem; --validate sets the lab's budget.
            spin_budget_ns: None,
        })
    }

    fn workloads(&self, default: &[Workload]) -> Vec<(Workload, Mode)> {
        let workloads = self
            .workloads
            .as_deref()
            .map(super::dedup)
            .unwrap_or_else(|| default.to_vec());
        let modes = self
            .mode
            .as_deref()
            .map(super::dedup)
            .unwrap_or_else(|| Mode::ALL.to_vec());
        let mut out = Vec::new();
        for w in workloads {
            if w.processes_only().is_some() {
                out.push((w, Mode::Processes));
            } else {
                out.extend(modes.iter().map(|&m| (w, m)));
            }
        }
        out
    }
}

/// The machine named by `--machine`: `host` is measured now.
fn machine(name: &str) -> Result<Machine, LabError> {
    if name == "host" {
        return vmlab::topology::measure_host(&vmlab::topology::MeasureOptions::default());
    }
    name.parse::<Machine>().map_err(|e| LabError(e.to_string()))
}

/// This machine measured again (`--validate` on `--machine host`).
fn measure_again() -> Result<Machine, LabError> {
    vmlab::topology::measure_host(&vmlab::topology::MeasureOptions::default())
}

/// Runs `vmbench project`.
pub fn main(args: &ProjectArgs) -> Result<bool, LabError> {
    if let Some(dir) = &args.replay {
        return replay(args, dir);
    }
    if args.validate {
        return validate(args);
    }
    let machine = machine(args.machine.as_deref().unwrap_or("12x32"))?;
    let config = ProjectConfig {
        workloads: args.workloads(&DEFAULT_WORKLOADS),
        indexes: args
            .index
            .as_deref()
            .map_or_else(|| vec![IndexKind::Maple], super::dedup),
        imaps: args
            .designs
            .as_deref()
            .map_or_else(|| ImapDesign::ALL.to_vec(), super::dedup),
        locks: args.locks.as_deref().map_or_else(
            || vec![LockKind::Rwsem, LockKind::Std, LockKind::Numa],
            super::dedup,
        ),
        cpus: args
            .cpus
            .clone()
            .unwrap_or_else(|| default_cpus(machine.cpus())),
        machine,
        method: args.method()?,
    };
    let out_dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!("vmbench-results/project-{}", config.machine.name))
    });
    let stdout = io::stdout();
    let mut write_error = None;
    let projection = project::project(&config, &mut |p| {
        if args.json {
            let mut line = serde_json::to_string(p).unwrap_or_default();
            line.push('\n');
            if let Err(e) = stdout.lock().write_all(line.as_bytes()) {
                write_error.get_or_insert(e);
            }
        } else {
            eprintln!(
                "vmbench project: {} {} {} imap={} lock={} {} CPUs on {}: {:.0} ops/s",
                p.workload, p.mode, p.index, p.imap, p.lock, p.cpus, p.machine, p.value
            );
        }
    })?;
    if let Some(e) = write_error {
        return Err(LabError(format!("writing results: {e}")));
    }
    write_results(&out_dir, &config.machine, &projection, !args.json)?;
    Ok(true)
}

/// `--validate`: every configuration of the suite for the workloads
/// asked, on the indexes asked, predicted and measured on this machine.
fn validate(args: &ProjectArgs) -> Result<bool, LabError> {
    // Predictions for this machine, described by measurement unless a
    // description of it is given; a measured one is measured again before
    // every run it predicts (see `ValidateConfig::remeasure`).
    let name = args.machine.as_deref().unwrap_or("host");
    let machine = machine(name)?;
    let remeasure = (name == "host").then_some(measure_again as fn() -> Result<Machine, LabError>);
    check_bound(args)?;
    let indexes = args
        .index
        .as_deref()
        .map_or_else(|| IndexKind::ALL.to_vec(), super::dedup);
    let workloads: Vec<Workload> = args
        .workloads
        .as_deref()
        .map_or_else(|| Workload::ALL.to_vec(), super::dedup);
    let modes = args.mode.as_deref().map(super::dedup);
    let mut configs = Vec::new();
    for &w in &workloads {
        let suite = vmlab::suite::run_configs(w);
        // Where the suite compares the indexes itself, its configurations
        // are kept for the indexes asked; where it fixes one, each is run
        // on every index asked, named by it.
        let compares_indexes = suite.iter().any(|(_, _, d)| d.index != suite[0].2.index);
        for &index in &indexes {
            for (label, mode, mut design) in suite.iter().cloned() {
                if modes.as_ref().is_some_and(|m| !m.contains(&mode)) {
                    continue;
                }
                if compares_indexes {
                    if design.index == index {
                        configs.push((label, w, mode, design));
                    }
                    continue;
                }
                design.index = index;
                configs.push((format!("{index} {label}"), w, mode, design));
            }
        }
    }
    let cpus = args.cpus.clone().unwrap_or_else(|| vec![2]);
    let config = ValidateConfig {
        configs,
        cpus,
        machine,
        remeasure,
        placement: args
            .placement
            .unwrap_or(if args.quick { Rule::Any } else { Rule::Hold }),
        repeat: args.repeat,
        // The lab's rwsem spins a fixed budget; predict the lock it runs.
        method: Method {
            spin_budget_ns: Some(mm::lock::spin_budget_ns()),
            ..args.method()?
        },
    };
    let stdout = io::stdout();
    let mut write_error = None;
    let evidence = project::validate(&config, &mut |r| {
        if args.json {
            let mut line = serde_json::to_string(r).unwrap_or_default();
            line.push('\n');
            if let Err(e) = stdout.lock().write_all(line.as_bytes()) {
                write_error.get_or_insert(e);
            }
        } else {
            eprintln!(
                "vmbench project --validate: {} {} x{}: predicted {:.0}, measured {:.0} ops/s ({:+.1} %)",
                r.workload,
                r.config,
                r.cpus,
                r.predicted,
                r.measured,
                r.error * 100.0
            );
        }
    })?;
    if let Some(e) = write_error {
        return Err(LabError(format!("writing results: {e}")));
    }
    let rows: Vec<Validation> = evidence
        .iter()
        .flat_map(|e| e.points.iter().map(|p| p.validation.clone()))
        .collect();
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("vmbench-results/validate"));
    let remeasured = remeasure.is_some();
    report_validation(
        args,
        &dir,
        &rows,
        &config.machine,
        &config.method,
        remeasured,
    )?;
    write_evidence(&dir.join(EVIDENCE), &evidence)?;
    Ok(finish(args, &rows, &dir))
}

/// The file `--validate` writes its evidence to, and `--replay` reads from
/// a directory: gzip-compressed JSON lines, since a profile of `kernbench`
/// alone is megabytes of steps.
const EVIDENCE: &str = "evidence.jsonl.gz";

/// Writes `evidence` to `path` as gzip-compressed JSON lines, replacing
/// the file only once it is complete (as every results file is).
fn write_evidence(path: &Path, evidence: &[Evidence]) -> Result<(), LabError> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    for e in evidence {
        serde_json::to_writer(&mut gz, e).map_err(|e| LabError(e.to_string()))?;
        gz.write_all(b"\n")
            .map_err(|e| LabError(format!("compressing {}: {e}", path.display())))?;
    }
    let bytes = gz
        .finish()
        .map_err(|e| LabError(format!("compressing {}: {e}", path.display())))?;
    let mut out = vmresults::output::OutputFile::create(path)?;
    out.write_all(&bytes)?;
    Ok(out.commit()?)
}

/// Reads evidence from `from`: a directory (its `evidence.jsonl.gz`), a
/// `.gz` file, or plain JSON lines.
fn read_evidence(from: &Path) -> Result<Vec<Evidence>, LabError> {
    let path = if from.is_dir() {
        from.join(EVIDENCE)
    } else {
        from.to_path_buf()
    };
    let failed = |e: std::io::Error| LabError(format!("--replay: reading {}: {e}", path.display()));
    let file = std::fs::File::open(&path).map_err(failed)?;
    let mut text = String::new();
    if path.extension().is_some_and(|x| x == "gz") {
        GzDecoder::new(file).read_to_string(&mut text)
    } else {
        io::BufReader::new(file).read_to_string(&mut text)
    }
    .map_err(failed)?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str::<Evidence>(l)
                .map_err(|e| LabError(format!("--replay: {} line {}: {e}", path.display(), i + 1)))
        })
        .collect()
}

/// `--bound` must be a positive fraction.
fn check_bound(args: &ProjectArgs) -> Result<(), LabError> {
    if args.bound.is_finite() && args.bound > 0.0 {
        Ok(())
    } else {
        Err(LabError(format!(
            "--bound: {} (expected a positive fraction)",
            args.bound
        )))
    }
}

/// `--replay`: an earlier validation's evidence predicted again.
fn replay(args: &ProjectArgs, from: &Path) -> Result<bool, LabError> {
    check_bound(args)?;
    let evidence = read_evidence(from)?;
    let first = evidence
        .first()
        .ok_or_else(|| LabError(format!("--replay: {} holds no evidence", from.display())))?;
    let point = first.points.first().ok_or_else(|| {
        LabError(format!(
            "--replay: {} line 1: no worker counts",
            from.display()
        ))
    })?;
    let machine = point.machines.first().cloned().ok_or_else(|| {
        LabError(format!(
            "--replay: {} line 1: no machine description",
            from.display()
        ))
    })?;
    let method = Method {
        spin_budget_ns: point.sim.spin_budget_ns,
        ..args.method()?
    };
    let evidence = if args.rerecord {
        project::rerecord(&evidence, &method)?
    } else {
        evidence
    };
    let rows = project::replay(&evidence)?;
    if args.json {
        io::stdout()
            .lock()
            .write_all(json_lines(&rows)?.as_bytes())
            .map_err(|e| LabError(format!("writing results: {e}")))?;
    }
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("vmbench-results/replay"));
    if args.rerecord {
        // The new profiles, for a later --replay of them.
        std::fs::create_dir_all(&dir)
            .map_err(|e| LabError(format!("creating {}: {e}", dir.display())))?;
        write_evidence(&dir.join(EVIDENCE), &evidence)?;
    }
    // Whether the runs were predicted with descriptions of their own
    // minutes (`--machine host`), as the report then says.
    let remeasured = evidence
        .iter()
        .flat_map(|e| &e.points)
        .any(|p| p.machines.windows(2).any(|w| w[0] != w[1]));
    report_validation(args, &dir, &rows, &machine, &method, remeasured)?;
    Ok(finish(args, &rows, &dir))
}

/// Writes a validation's report (validation.jsonl, validation.md,
/// machine.json) into `dir`, and prints it unless `--json`.
fn report_validation(
    args: &ProjectArgs,
    dir: &Path,
    rows: &[Validation],
    m: &Machine,
    method: &Method,
    remeasured: bool,
) -> Result<(), LabError> {
    let mut report = format!(
        "{}\nPredicted on {} ({}: {:.1} ns per line transfer in a complex, overlap {:.1}, chain {:.2}, keep {:.2}, futex wake-up {:.0} ns, sleep and wake {:.0} ns, the waker's call {:.0} ns) with the lab's rwsem, which spins {:.0} ns before it sleeps.\n",
        validation_markdown(rows, args.bound),
        m.name,
        m.source,
        m.ccx_ns,
        m.overlap,
        m.chain,
        m.keep,
        m.wake_ns,
        m.sleep_ns,
        m.waker_cost_ns(),
        method.spin_budget_ns.unwrap_or(0.0)
    );
    if remeasured {
        let mut ns: Vec<f64> = rows
            .iter()
            .flat_map(|r| r.transfer_ns.iter().copied())
            .collect();
        ns.sort_by(f64::total_cmp);
        if let (Some(lo), Some(hi)) = (ns.first(), ns.last()) {
            report.push_str(&format!(
                "Measured again before each of the {} runs at more than one worker, each run predicted with its own description: {lo:.1} to {hi:.1} ns per transfer (median {:.1}); the figures above are the first measurement.\n",
                ns.len(),
                ns[ns.len() / 2]
            ));
        }
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| LabError(format!("creating {}: {e}", dir.display())))?;
    let jsonl = json_lines(rows)?;
    let write_file =
        |path: &Path, text: &str| vmresults::output::write_file(path, text).map_err(LabError::from);
    write_file(&dir.join("validation.jsonl"), &jsonl)?;
    write_file(&dir.join("validation.md"), &report)?;
    write_file(
        &dir.join("machine.json"),
        &serde_json::to_string_pretty(m).map_err(|e| LabError(e.to_string()))?,
    )?;
    if !args.json {
        println!("{report}");
    }
    Ok(())
}

/// One JSON object a line.
fn json_lines(rows: &[Validation]) -> Result<String, LabError> {
    let mut out = String::new();
    for r in rows {
        out.push_str(&serde_json::to_string(r).map_err(|e| LabError(e.to_string()))?);
        out.push('\n');
    }
    Ok(out)
}

/// Says how many predictions missed; true when none did.
fn finish(args: &ProjectArgs, rows: &[Validation], dir: &Path) -> bool {
    let over = rows.iter().filter(|r| r.error.abs() > args.bound).count();
    eprintln!(
        "vmbench project --validate: {} predictions, {over} outside ±{:.0} %; results in {}",
        rows.len(),
        args.bound * 100.0,
        dir.display()
    );
    over == 0
}

//! `vmbench run`: options, and the table or JSON lines of the results.

use std::io::{self, Write};
use std::time::Duration;

use mm::lock::LockKind;
use mm::policy::ImapDesign;
use mm::IndexKind;
use vmlab::placement::Rule;
use vmlab::run::harness::Mode;
use vmlab::run::workload::Workload;
use vmlab::run::{self, execl, RunConfig};
use vmlab::stop::StopSignals;
use vmlab::LabError;

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
    #[arg(long, value_delimiter = ',', value_parser = super::named(&Workload::ALL, Workload::name))]
    pub workloads: Option<Vec<Workload>>,

    /// Modes, comma separated: processes (an address space per worker),
    /// threads (one shared address space). [default: both]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&Mode::ALL, Mode::name))]
    pub mode: Option<Vec<Mode>>,

    #[command(flatten)]
    pub machine: super::MachineArgs,

    /// VMA indexes, comma separated: maple, legacy. [default: both]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&IndexKind::ALL, IndexKind::name))]
    pub index: Option<Vec<IndexKind>>,

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
    #[arg(long, default_value_t = run::resident::DEFAULT_RESIDENT)]
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
    #[arg(long, value_delimiter = ',', value_parser = super::named(&ImapDesign::ALL, ImapDesign::name))]
    pub imap: Option<Vec<ImapDesign>>,

    /// The lock of every i_mmap and anon_vma lock, comma separated: std
    /// (the standard library's RwLock), rwsem (kernel-style), numa
    /// (rwsem with per-node hand-off). [default: rwsem]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&LockKind::ALL, LockKind::name))]
    pub lock: Option<Vec<LockKind>>,

    /// The anon_vma end-only rule, comma separated: on (an adjustment that
    /// only moves a VMA's end takes no anon_vma lock), off (every
    /// adjustment takes it). [default: on]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&[true, false], run::rule_name))]
    pub anon_rule: Option<Vec<bool>>,

    /// Print one JSON object per configuration on stdout instead of a
    /// table.
    #[arg(long)]
    pub json: bool,
}

impl RunArgs {
    /// Resolves defaults and names into a validated configuration; every
    /// error is one line naming the bad value and the valid ones.
    pub fn to_config(&self) -> Result<RunConfig, LabError> {
        let workloads = match &self.workloads {
            Some(w) => super::dedup(w),
            None => Workload::ALL.to_vec(),
        };
        let modes = match &self.mode {
            Some(m) => super::dedup(m),
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
                return Err(LabError(format!(
                    "--mode: {w} runs in processes mode only ({why}); add --mode processes"
                )));
            }
        }
        let indexes = match &self.index {
            Some(i) => super::dedup(i),
            None => IndexKind::ALL.to_vec(),
        };
        let threads = match &self.machine.threads {
            Some(counts) => run::parse_threads(counts)?,
            None => run::default_threads(),
        };
        let (duration, warmup) = if self.quick { (0.05, 0.01) } else { (2.0, 0.5) };
        let timing = vmlab::run::harness::Timing {
            duration: seconds("--duration", self.duration.unwrap_or(duration), false)?,
            warmup: seconds("--warmup", self.warmup.unwrap_or(warmup), true)?,
        };
        let repeat = match self.repeat.as_deref().map(str::trim) {
            None => 1,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=1000).contains(&n) => n,
                _ => {
                    return Err(LabError(format!(
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
                    return Err(LabError(format!(
                        "--resident-vmas: '{text}' is not a VMA count (0 to {})",
                        execl::MAX_RESIDENT_VMAS
                    )))
                }
            },
        };
        let imaps = match &self.imap {
            Some(d) => super::dedup(d),
            None => vec![ImapDesign::default()],
        };
        let locks = match &self.lock {
            Some(l) => super::dedup(l),
            None => vec![LockKind::default()],
        };
        let anon_rules = match &self.anon_rule {
            Some(r) => super::dedup(r),
            None => vec![true],
        };
        let topology = run::parse_topology(self.machine.topology.as_deref())?;
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
            pin: !self.machine.no_pin,
            placement: self.machine.placement.unwrap_or(if self.quick {
                Rule::Any
            } else {
                Rule::Hold
            }),
        })
    }
}

/// Runs `vmbench run`: JSON lines as configurations finish, or a table at
/// the end. Progress goes to stderr.
pub fn main(args: &RunArgs) -> Result<(), LabError> {
    let config = args.to_config()?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let write_err = |e: io::Error| LabError(format!("writing results: {e}"));
    let mut rows = Vec::new();
    // Ctrl-C stops after the configuration being measured and still
    // prints what was measured.
    let signals = StopSignals::install()?;
    let finished = run::run_all(&config, Some(&signals), &mut |row| {
        let placed = row.placed.map_or_else(String::new, |p| {
            let mut s = format!(", CPUs {} ns apart", run::format_placed(Some(p)));
            if p.waited.as_secs_f64() >= 0.5 {
                s += &format!(" after waiting {:.1} s for that", p.waited.as_secs_f64());
            }
            if p.attempts > 1 {
                s += &format!(
                    "; {} earlier tr{} taken again as they moved",
                    p.attempts - 1,
                    if p.attempts == 2 { "y" } else { "ies" }
                );
            }
            s
        });
        eprintln!(
            "vmbench run: {}: {:.0} ops/s (cpu share {}{placed})",
            row.label(),
            row.m.ops_per_sec(),
            run::format_share(row.m.cpu_share(row.spec.threads)),
        );
        if args.json {
            serde_json::to_writer(&mut out, &row.line()).map_err(|e| write_err(e.into()))?;
            out.write_all(b"\n").map_err(write_err)?;
            out.flush().map_err(write_err)?;
        }
        rows.push(row);
        Ok(())
    })?;
    drop(signals);
    if !args.json && !rows.is_empty() {
        writeln!(out, "{}", run::render_table(&rows)).map_err(write_err)?;
    }
    match (finished, rows.len()) {
        (true, _) => Ok(()),
        (false, 0) => Err(LabError(
            "interrupted before any configuration was measured".into(),
        )),
        (false, n) => Err(LabError(format!(
            "interrupted: {n} configuration(s) measured, shown above"
        ))),
    }
}

fn seconds(flag: &str, secs: f64, zero_ok: bool) -> Result<Duration, LabError> {
    let ok = secs.is_finite()
        && (secs >= run::MIN_DURATION || (zero_ok && secs == 0.0))
        && secs <= 3600.0;
    if !ok {
        let min = if zero_ok {
            "0".to_string()
        } else {
            run::MIN_DURATION.to_string()
        };
        return Err(LabError(format!(
            "{flag}: {secs} is not a duration in seconds ({min} to 3600)"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmlab::run::harness::Mode;

    /// Parses and resolves `extra`; an error from either step, as text
    /// (clap refuses unknown names itself, `to_config` the rest).
    fn args(extra: &[&str]) -> Result<RunConfig, String> {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let mut argv = vec!["run"];
        argv.extend(extra);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        cli.run.to_config().map_err(|e| e.0)
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
        let e = args(&["--index", "btree"]).unwrap_err();
        assert!(e.contains("possible values: maple, legacy"), "{e}");
        assert_eq!(
            args(&["--index", "maple,maple"]).unwrap().indexes,
            [IndexKind::Maple]
        );
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
            assert!(e.starts_with("--resident-vmas: "), "{bad}: {e}");
        }
    }

    #[test]
    fn processes_only_workloads_need_processes_mode() {
        for w in ["execl", "aim7-brk", "brk1,execl"] {
            let e = args(&["--workloads", w, "--mode", "threads"]).unwrap_err();
            assert!(e.contains("processes mode only"), "{w}: {e}");
            assert!(args(&["--workloads", w, "--mode", "threads,processes"]).is_ok());
        }
        // Not named, only defaulted: skipped when the runs start.
        let c = args(&["--mode", "threads"]).unwrap();
        assert!(c.workloads.contains(&Workload::Execl));
    }
}

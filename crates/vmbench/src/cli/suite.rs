//! `vmbench suite`: options, resolved into a [`suite::Plan`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use vmlab::placement::Rule;
use vmlab::run::execl;
use vmlab::run::harness::Timing;
use vmlab::suite::{self, Plan, SuiteWorkload};
use vmlab::tree::Scale;
use vmlab::LabError;

/// Options of `vmbench suite`.
#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// Shortest settings (seconds, not minutes): one short run per point,
    /// two repetitions, small populations. For smoke tests.
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,

    /// Publication settings: longer runs, five repetitions, larger trees.
    #[arg(long)]
    pub full: bool,

    /// Workloads, comma separated, run in this order. [default: all]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&SuiteWorkload::ALL, SuiteWorkload::name))]
    pub workloads: Option<Vec<SuiteWorkload>>,

    /// Keep only the configurations that name one of these designs, comma
    /// separated: maple, legacy (the VMA index), processes, threads (the
    /// mode), single, split, split-locked, distributed, adaptive (the
    /// i_mmap design), std, rwsem, numa (the lock), rule-on, rule-off (the
    /// anon_vma rule), or a tree implementation (maple-shared, btreemap,
    /// rwlock-btreemap, rangemap, scc-treeindex, crossbeam-skiplist).
    /// [default: all]
    #[arg(long, value_delimiter = ',')]
    pub designs: Option<Vec<String>>,

    #[command(flatten)]
    pub machine: super::MachineArgs,

    /// Repetitions of every point. [default: 3; 2 with --quick, 5 with --full]
    #[arg(long)]
    pub repeat: Option<String>,

    /// The results directory to write. [default: the local date and time
    /// under vmbench-results, e.g. vmbench-results/2026-11-24T09-21-03,
    /// with -2, -3... added if that exists] A directory that exists and is not
    /// empty is refused unless --force.
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Write into an --out directory that is not empty: the files an
    /// earlier suite wrote there (results, tables, plots, page) are removed
    /// first, so none of its plots is left beside the new ones; any other
    /// file is left alone.
    #[arg(long)]
    pub force: bool,

    /// Resume the interrupted suite whose results directory is DIR: measure
    /// only the points its results.jsonl lacks, append them, and write the
    /// tables, plots and page from the whole file. Alone, it resumes the
    /// plan recorded in DIR/plan.json; with other options, they must
    /// resolve to that same plan (same workloads, designs, thread counts,
    /// repetitions, durations, sizes, topology, pinning), or it is refused.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "force"])]
    pub resume: Option<PathBuf>,
}

impl SuiteArgs {
    fn plan(&self) -> Result<Plan, LabError> {
        let workloads = match &self.workloads {
            None => SuiteWorkload::ALL.to_vec(),
            Some(w) => super::dedup(w),
        };
        let designs = match &self.designs {
            None => None,
            Some(names) => {
                let known = suite::design_names();
                let mut out = Vec::new();
                for raw in names {
                    let name = raw.trim();
                    if !known.contains(&name) {
                        return Err(LabError(format!(
                            "--designs: unknown design '{name}' (see vmbench suite --help)"
                        )));
                    }
                    out.push(name.to_string());
                }
                Some(out)
            }
        };
        let threads = match &self.machine.threads {
            None => vmlab::run::default_threads(),
            Some(counts) => vmlab::run::parse_threads(counts)?,
        };
        let default_repeat = if self.quick {
            2
        } else if self.full {
            5
        } else {
            3
        };
        let repeat = match self.repeat.as_deref().map(str::trim) {
            None => default_repeat,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=100).contains(&n) => n,
                _ => {
                    return Err(LabError(format!(
                        "--repeat: '{text}' is not a repetition count (1 to 100)"
                    )))
                }
            },
        };
        let (duration, warmup) = if self.quick {
            (0.03, 0.01)
        } else if self.full {
            (2.0, 0.5)
        } else {
            (0.8, 0.2)
        };
        let timing = Timing {
            duration: Duration::from_secs_f64(duration),
            warmup: Duration::from_secs_f64(warmup),
        };
        let topology = vmlab::run::parse_topology(self.machine.topology.as_deref())?;
        let out = match (&self.resume, &self.out) {
            (Some(dir), _) | (None, Some(dir)) => dir.clone(),
            // The name only: `main` claims it (or the next free `-N`)
            // when the run starts, so that resolving a plan creates nothing.
            (None, None) => Path::new("vmbench-results")
                .join(chrono::Local::now().format("%Y-%m-%dT%H-%M-%S").to_string()),
        };
        let (tree_sizes, tree_scale) = if self.quick {
            (vec![1_000], Scale::QUICK)
        } else if self.full {
            (vec![1_000, 100_000, 1_000_000], Scale::FULL)
        } else {
            (vec![1_000, 100_000], Scale::QUICK)
        };
        Ok(Plan {
            workloads,
            designs,
            threads,
            repeat,
            timing,
            resident_vmas: if self.quick {
                execl::QUICK_RESIDENT_VMAS
            } else {
                execl::DEFAULT_RESIDENT_VMAS
            },
            tree_sizes,
            tree_scale,
            topology,
            pin: !self.machine.no_pin,
            placement: self.machine.placement.unwrap_or(if self.quick {
                Rule::Any
            } else {
                Rule::Hold
            }),
            out,
        })
    }
}

impl SuiteArgs {
    /// Whether an option that shapes the plan was given (all but --out,
    /// --force and --resume).
    fn shapes_the_plan(&self) -> bool {
        self.quick
            || self.full
            || self.workloads.is_some()
            || self.designs.is_some()
            || self.machine.threads.is_some()
            || self.repeat.is_some()
            || self.machine.topology.is_some()
            || self.machine.no_pin
            || self.machine.placement.is_some()
    }
}

/// Creates the directory `dir`, or, if that exists, the first of
/// `dir-2`, `dir-3`... that does not, and returns the one it created.
/// Creating is the claim: two suites started in the same second cannot
/// both take one name, as they could if each only checked that it was
/// free.
fn claim_dir(dir: &Path) -> Result<PathBuf, LabError> {
    let fail = |d: &Path, e: std::io::Error| {
        LabError(format!("--out: cannot create {}: {e}", d.display()))
    };
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| fail(parent, e))?;
    }
    let name = dir.as_os_str();
    for n in 1..=1000 {
        let candidate = if n == 1 {
            dir.to_path_buf()
        } else {
            let mut s = name.to_owned();
            s.push(format!("-{n}"));
            PathBuf::from(s)
        };
        match std::fs::create_dir(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(fail(&candidate, e)),
        }
    }
    Err(LabError(format!(
        "--out: {} and its next 999 numbered names exist; pass --out",
        dir.display()
    )))
}

/// Runs `vmbench suite`.
pub fn main(args: &SuiteArgs) -> Result<(), LabError> {
    let command: Vec<String> = std::env::args().collect();
    let command = command.join(" ");
    match &args.resume {
        Some(dir) => {
            // Alone, --resume takes the recorded plan; options given
            // beside it must resolve to that plan.
            let given = if args.shapes_the_plan() {
                Some(args.plan()?)
            } else {
                None
            };
            suite::resume(dir, given.as_ref(), &command)
        }
        None => {
            let mut plan = args.plan()?;
            let claimed = args.out.is_none();
            if claimed {
                plan.out = claim_dir(&plan.out)?;
            }
            let result = suite::run(&plan, &command, args.force);
            if claimed && result.is_err() {
                // Only if the run left it empty (it measured nothing).
                let _ = std::fs::remove_dir(&plan.out);
            }
            result
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct SuiteArgsParser {
        #[command(flatten)]
        a: SuiteArgs,
    }

    fn args(extra: &[&str]) -> SuiteArgs {
        use clap::Parser;
        let mut argv = vec!["suite"];
        argv.extend_from_slice(extra);
        SuiteArgsParser::try_parse_from(argv).unwrap().a
    }

    #[test]
    fn designs_filter_configurations_and_bad_names_are_errors() {
        let plan = args(&["--designs", "distributed,rule-on,maple"])
            .plan()
            .unwrap();
        let labels = |w| plan.config_labels(SuiteWorkload::named(w).unwrap());
        assert_eq!(labels("execl"), vec!["imap=distributed"]);
        assert_eq!(labels("aim7-brk"), vec!["rule=on"]);
        assert_eq!(labels("brk1"), vec!["maple processes", "maple threads"]);
        assert_eq!(labels("tree"), vec!["maple"]);
        // An unknown workload is clap's to refuse, with the list.
        let mut argv = vec!["suite", "--workloads", "kernbench2"];
        let e = <SuiteArgsParser as clap::Parser>::try_parse_from(argv.drain(..)).err();
        assert!(e.is_some_and(|e| e.to_string().contains("possible values: tree, execl")));
        for bad in [
            &["--designs", "percpu"][..],
            &["--threads", "0"],
            &["--repeat", "0"],
            &["--topology", "0x2"],
        ] {
            let e = args(bad).plan().expect_err("must fail").0;
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn steps_count_every_measurement() {
        let plan = args(&[
            "--workloads",
            "tree,execl",
            "--threads",
            "1,2",
            "--repeat",
            "2",
        ])
        .plan()
        .unwrap();
        // tree: one pass per size (1000 and 100000) and repetition; execl:
        // 7 configurations x 2 thread counts per repetition.
        assert_eq!(plan.steps(), 2 * 2 + 7 * 2 * 2);
    }

    #[test]
    fn the_default_directory_is_named_by_date_and_never_reused() {
        let plan = args(&[]).plan().unwrap();
        let name = plan.out.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(plan.out.parent(), Some(Path::new("vmbench-results")));
        // 2026-11-24T09-21-03, perhaps with a suffix.
        let b = name.as_bytes();
        assert!(
            b.len() >= 19 && b[4] == b'-' && b[10] == b'T' && b[13] == b'-',
            "{name}"
        );
        let base = std::env::temp_dir().join(format!("vmbench-dated-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let stamp = "2026-11-24T09-21-03";
        let dir = base.join(stamp);
        // Each claim creates the directory it returns, so the next one
        // cannot take the same name.
        assert_eq!(claim_dir(&dir).unwrap(), dir);
        assert!(dir.is_dir());
        assert_eq!(claim_dir(&dir).unwrap(), base.join(format!("{stamp}-2")));
        assert_eq!(claim_dir(&dir).unwrap(), base.join(format!("{stamp}-3")));
        assert!(base.join(format!("{stamp}-3")).is_dir());
        std::fs::remove_dir_all(&base).unwrap();
        // --resume names the directory; --out and --force cannot join it.
        let plan = args(&["--resume", "d", "--quick"]).plan().unwrap();
        assert_eq!(plan.out, PathBuf::from("d"));
        assert!(args(&["--resume", "d"]).resume.is_some());
        assert!(!args(&["--resume", "d"]).shapes_the_plan());
        assert!(args(&["--resume", "d", "--threads", "1"]).shapes_the_plan());
    }
}

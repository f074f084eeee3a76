//! The results directory: what `vmbench suite` writes and `vmbench
//! compare` reads.
//!
//! | file | contents |
//! |---|---|
//! | `results.jsonl` | one [`Sample`] per line: one repetition of one figure |
//! | `machine.json` | the [`Machine`] it ran on |
//! | `command.txt` | the exact command line |
//! | `table.txt`, `table.md` | the comparison table |
//! | `<workload>.svg`, `<workload>.png` | throughput vs threads per configuration |
//! | `index.html` | the table and the plots on one page |
//!
//! Samples are raw (every repetition, no averaging), so any summary can
//! be recomputed from the file.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One repetition of one figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The workload: `tree`, `execl`, `aim7-brk`, `brk1`, `mmap1`,
    /// `malloc1`, `mmap2`, `page_fault3`, `kernbench`.
    pub workload: String,
    /// What is measured: `ops/s` for the `run` workloads; for `tree`, the
    /// operation and size (`load n=1000`).
    pub metric: String,
    /// The unit of `value` (`ops/s`, `ns/op`, ...).
    pub unit: String,
    /// Whether a larger value is better: rates are summarised with the
    /// harmonic mean, times with the arithmetic mean.
    pub higher_is_better: bool,
    /// The configuration, e.g. `maple`, `legacy`, `imap=distributed`,
    /// `rule=off`, `lock=numa`. Within a workload the first configuration
    /// measured is the baseline of the comparison table.
    pub config: String,
    /// Worker threads.
    pub threads: usize,
    /// Repetition number, from 0.
    pub rep: usize,
    /// The measured figure, in `unit`.
    pub value: f64,
}

/// Writes `samples` to `path`, one JSON object per line.
pub fn write_samples(path: &Path, samples: &[Sample]) -> io::Result<()> {
    let mut out = io::BufWriter::new(fs::File::create(path)?);
    for s in samples {
        serde_json::to_writer(&mut out, s)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Reads the samples of the results directory `dir`. The error is one line
/// naming the file and, for a bad line, its number.
pub fn read_samples(dir: &Path) -> Result<Vec<Sample>, String> {
    let path = dir.join("results.jsonl");
    let text =
        fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_samples(&text).map_err(|e| format!("{} {e}", path.display()))
}

/// Parses the text of a `results.jsonl`: one [`Sample`] per line, blank
/// lines allowed, at least one sample, every value finite. The error is
/// one line and, for a bad line, starts with its number.
///
/// ```
/// let line = r#"{"workload":"brk1","metric":"ops/s","unit":"ops/s","higher_is_better":true,"config":"maple","threads":1,"rep":0,"value":5.0}"#;
/// assert_eq!(vmresults::samples::parse_samples(line).unwrap()[0].value, 5.0);
/// assert!(vmresults::samples::parse_samples("").unwrap_err().contains("no samples"));
/// ```
pub fn parse_samples(text: &str) -> Result<Vec<Sample>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // serde quotes the offending text: its control characters are
        // escaped so the error stays one line.
        let s: Sample = serde_json::from_str(line)
            .map_err(|e| format!("line {}: {}", i + 1, e.to_string().escape_debug()))?;
        if !s.value.is_finite() {
            return Err(format!("line {}: value is not a finite number", i + 1));
        }
        out.push(s);
    }
    if out.is_empty() {
        return Err("holds no samples".into());
    }
    Ok(out)
}

/// The machine a run measured, recorded beside its samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model from `/proc/cpuinfo` (`unknown` if unreadable).
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// NUMA nodes (from sysfs; 1 when it has none).
    pub nodes: usize,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// The topology the run used: `host(...)` or an emulated `NxM`.
    pub topology: String,
}

impl Machine {
    /// This machine, with the topology a run used.
    pub fn detect(topology: &mm::topology::Topology) -> Machine {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|rest| rest.split_once(':'))
            .map_or_else(|| "unknown".to_string(), |(_, m)| m.trim().to_string());
        let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".to_string(), |k| k.trim().to_string());
        let host = mm::topology::host();
        Machine {
            cpu_model,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            nodes: host.nr_nodes(),
            kernel,
            topology: topology.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(value: f64) -> Sample {
        Sample {
            workload: "brk1".into(),
            metric: "ops/s".into(),
            unit: "ops/s".into(),
            higher_is_better: true,
            config: "maple".into(),
            threads: 2,
            rep: 0,
            value,
        }
    }

    #[test]
    fn samples_round_trip_and_bad_files_are_one_line_errors() {
        let dir = std::env::temp_dir().join(format!("vmbench-results-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let samples = vec![sample(1.5), sample(2.5)];
        write_samples(&dir.join("results.jsonl"), &samples).unwrap();
        assert_eq!(read_samples(&dir).unwrap(), samples);
        fs::write(dir.join("results.jsonl"), "{\"workload\": 1}\n").unwrap();
        let e = read_samples(&dir).unwrap_err();
        assert!(e.contains("line 1") && !e.contains('\n'), "{e}");
        // serde quotes the bad value; its newline is escaped (the defect the
        // trace_replay fuzz target found in trace parsing).
        fs::write(dir.join("results.jsonl"), "{\"value\": \"a\\nb\u{1b}\"}\n").unwrap();
        let e = read_samples(&dir).unwrap_err();
        assert!(!e.chars().any(char::is_control), "{e:?}");
        fs::write(dir.join("results.jsonl"), "").unwrap();
        assert!(read_samples(&dir).unwrap_err().contains("no samples"));
        fs::remove_dir_all(&dir).unwrap();
        assert!(read_samples(&dir).unwrap_err().contains("cannot read"));
    }

    #[test]
    fn the_machine_is_described() {
        let m = Machine::detect(&mm::topology::host());
        assert!(m.cpus >= 1 && m.nodes >= 1);
        assert!(m.topology.starts_with("host"));
    }
}

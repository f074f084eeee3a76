//! The results directory: what `vmbench suite` writes and `vmbench
//! compare` reads.
//!
//! | file | contents |
//! |---|---|
//! | `results.jsonl` | one [`Sample`] per line: one repetition of one figure, appended as measured ([`SampleWriter`]) |
//! | `machine.json` | the [`Machine`] it ran on |
//! | `command.txt` | the exact command line (and any command that resumed it) |
//! | `plan.json` | the resolved plan (workloads, designs, thread counts, repetitions, durations, sizes, topology), which `--resume` checks |
//! | `summary.txt` | three lines: what the run found |
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
    /// The fraction of the workers' timed wall time they were runnable but
    /// waited for a CPU (the scheduler's run delay): near 0 on a quiet
    /// machine; high where something else took the CPUs, and then the
    /// rate measures that, not the code. `None` where it was not measured
    /// (the tree's figures, files written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_wait: Option<f64>,
    /// One-way cache-line transfer between the CPUs of the run's first two
    /// workers, in nanoseconds, measured just before the run (a ping-pong,
    /// about a millisecond). On a virtual machine it shows where the host
    /// put the CPUs for this run, which can change from minute to minute:
    /// two hyperthreads of one core share its execution units, and a
    /// workload that keeps them busy scales less than on two cores. `None`
    /// for one worker, unpinned or emulated runs, and files written before
    /// it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_ns: Option<f64>,
    /// The same transfer measured just after the run: where it is not
    /// alike `transfer_ns` (see `vmlab::placement`), the host moved the
    /// CPUs during the run and its rate mixes two placements. `None` where
    /// `transfer_ns` is, and in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_after_ns: Option<f64>,
}

/// Two one-way transfer times ([`Sample::transfer_ns`]) belong to the
/// same placement of the CPUs when the larger is at most this many times
/// the smaller. The placements of this project's 2-vCPU guest (about 16 ns
/// for hyperthreads of one core, 33 ns for two cores of one complex,
/// 105 ns across complexes) are 2x and 3x apart; the measurements of one
/// placement spread by less than 1.3x.
pub const PLACEMENT_BAND: f64 = 1.5;

/// Whether two transfer times belong to the same placement (see
/// [`PLACEMENT_BAND`]).
///
/// ```
/// use vmresults::samples::alike;
/// assert!(alike(33.0, 35.0));
/// assert!(!alike(33.0, 105.0)); // two core complexes
/// assert!(!alike(16.0, 33.0)); // hyperthreads of one core
/// ```
pub fn alike(a: f64, b: f64) -> bool {
    a > 0.0 && b > 0.0 && a.max(b) <= PLACEMENT_BAND * a.min(b)
}

impl Sample {
    /// Whether the host moved the run's CPUs during it: the transfer
    /// measured after the run is not [`alike`] the one before. `false`
    /// where either was not measured.
    pub fn placement_moved(&self) -> bool {
        matches!((self.transfer_ns, self.transfer_after_ns), (Some(a), Some(b)) if !alike(a, b))
    }
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

/// Appends samples to a `results.jsonl` as they are measured: every
/// [`write`](SampleWriter::write) is one whole line, handed to the
/// operating system before it returns, so a run that is interrupted or
/// crashes keeps every sample it reported.
#[derive(Debug)]
pub struct SampleWriter {
    file: io::LineWriter<fs::File>,
}

impl SampleWriter {
    /// Opens `path` for appending, creating it if absent. A file whose
    /// last line lacks its newline (written by hand, or a sample that was
    /// complete but for its newline) gets one first, so the next sample
    /// starts a line of its own.
    pub fn append(path: &Path) -> io::Result<SampleWriter> {
        let mut file = fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)?;
        let len = file.metadata()?.len();
        if len > 0 {
            use std::io::{Read, Seek, SeekFrom};
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        Ok(SampleWriter {
            file: io::LineWriter::new(file),
        })
    }

    /// Appends `sample` as one JSON line and flushes it.
    pub fn write(&mut self, sample: &Sample) -> io::Result<()> {
        self.write_all(std::slice::from_ref(sample))
    }

    /// Appends `samples`, one JSON line each, in one write, and flushes
    /// them: the samples of one measured point reach the file together.
    pub fn write_all(&mut self, samples: &[Sample]) -> io::Result<()> {
        let mut buf = Vec::new();
        for s in samples {
            serde_json::to_writer(&mut buf, s)?;
            buf.push(b'\n');
        }
        self.file.write_all(&buf)?;
        self.file.flush()
    }
}

/// Reads the samples of the results directory `dir`. The error is one line
/// naming the file and, for a bad line, its number. A torn last line (no
/// newline, not a sample: the run writing it was killed mid-line) is
/// dropped, with one line on stderr saying so.
pub fn read_samples(dir: &Path) -> Result<Vec<Sample>, String> {
    let path = dir.join("results.jsonl");
    let text =
        fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let parsed = parse_lines(&text).map_err(|e| format!("{} {e}", path.display()))?;
    if let Some(torn) = &parsed.torn {
        eprintln!("{}", torn.report(&path));
    }
    if parsed.samples.is_empty() {
        return Err(format!("{} holds no samples", path.display()));
    }
    Ok(parsed.samples)
}

/// A last line that was cut short: no newline, and not a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornLine {
    /// Its line number, from 1.
    pub line: usize,
    /// Where it starts: the length in bytes of the file without it.
    pub offset: u64,
}

impl TornLine {
    /// The one-line report of this torn line in the file `path`.
    pub fn report(&self, path: &Path) -> String {
        format!(
            "warning: {}: the last line ({}) was torn (no newline, not a sample) and was dropped",
            path.display(),
            self.line
        )
    }
}

/// The text of a `results.jsonl`, parsed: its samples, and the torn last
/// line left out of them, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// Every sample, in file order.
    pub samples: Vec<Sample>,
    /// The torn last line, which is not among `samples`.
    pub torn: Option<TornLine>,
}

/// Parses the lines of a `results.jsonl` like [`parse_samples`], but an
/// empty text is no error, and a last line with no newline that is not a
/// valid sample is reported in [`Parsed::torn`] rather than refused. A bad
/// line anywhere else is an error, one line starting with its number.
///
/// ```
/// let line = r#"{"workload":"brk1","metric":"ops/s","unit":"ops/s","higher_is_better":true,"config":"maple","threads":1,"rep":0,"value":5.0}"#;
/// let p = vmresults::samples::parse_lines(&format!("{line}\n{{\"workl")).unwrap();
/// assert_eq!((p.samples.len(), p.torn.unwrap().line), (1, 2));
/// ```
pub fn parse_lines(text: &str) -> Result<Parsed, String> {
    let mut samples = Vec::new();
    let mut offset = 0usize;
    let mut lines = text.split_inclusive('\n').enumerate().peekable();
    while let Some((i, raw)) = lines.next() {
        let start = offset;
        offset += raw.len();
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(s) => samples.push(s),
            Err(e) => {
                if lines.peek().is_none() && !raw.ends_with('\n') {
                    return Ok(Parsed {
                        samples,
                        torn: Some(TornLine {
                            line: i + 1,
                            offset: start as u64,
                        }),
                    });
                }
                return Err(format!("line {}: {e}", i + 1));
            }
        }
    }
    Ok(Parsed {
        samples,
        torn: None,
    })
}

/// One line's sample; the error is one line.
fn parse_line(line: &str) -> Result<Sample, String> {
    // serde quotes the offending text: its control characters are escaped
    // so the error stays one line.
    let s: Sample =
        serde_json::from_str(line).map_err(|e| e.to_string().escape_debug().to_string())?;
    if !s.value.is_finite() {
        return Err("value is not a finite number".into());
    }
    Ok(s)
}

/// Loads the `results.jsonl` at `path` to append to it (a missing file
/// holds no samples): a torn last line is reported on stderr and cut off
/// the file, so the next sample appended starts a clean line, and the
/// returned flag says it was. A bad line elsewhere is an error, one line
/// naming the file and the line.
pub fn load_for_append(path: &Path) -> Result<(Vec<Sample>, bool), String> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let parsed = parse_lines(&text).map_err(|e| format!("{} {e}", path.display()))?;
    if let Some(torn) = &parsed.torn {
        eprintln!("{}", torn.report(path));
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(torn.offset))
            .map_err(|e| format!("cannot cut the torn last line off {}: {e}", path.display()))?;
    }
    Ok((parsed.samples, parsed.torn.is_some()))
}

/// Parses the text of a `results.jsonl`: one [`Sample`] per line, blank
/// lines allowed, at least one sample, every value finite. The error is
/// one line and, for a bad line, starts with its number. A torn last line
/// is an error here; [`parse_lines`] tells it apart.
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
        out.push(parse_line(line).map_err(|e| format!("line {}: {e}", i + 1))?);
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
            cpu_wait: None,
            transfer_ns: None,
            transfer_after_ns: None,
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

    fn temp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("vmbench-samples-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn line(s: &Sample) -> String {
        serde_json::to_string(s).unwrap() + "\n"
    }

    #[test]
    fn the_writer_appends_whole_lines_and_mends_a_missing_newline() {
        let dir = temp("writer");
        let path = dir.join("results.jsonl");
        let mut w = SampleWriter::append(&path).unwrap();
        w.write(&sample(1.0)).unwrap();
        // Flushed at once: visible before the writer is dropped.
        assert_eq!(fs::read_to_string(&path).unwrap(), line(&sample(1.0)));
        w.write_all(&[sample(2.0), sample(3.0)]).unwrap();
        drop(w);
        let mut w = SampleWriter::append(&path).unwrap();
        w.write(&sample(4.0)).unwrap();
        let values: Vec<f64> = read_samples(&dir)
            .unwrap()
            .iter()
            .map(|s| s.value)
            .collect();
        assert_eq!(values, [1.0, 2.0, 3.0, 4.0]);
        // A complete last sample without its newline gets one before the
        // next sample.
        fs::write(&path, line(&sample(5.0)).trim_end()).unwrap();
        SampleWriter::append(&path)
            .unwrap()
            .write(&sample(6.0))
            .unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            line(&sample(5.0)) + &line(&sample(6.0))
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_a_bad_line_elsewhere_is_an_error() {
        let whole = line(&sample(1.0));
        let torn = &whole[..whole.len() / 2];
        let p = parse_lines(&format!("{whole}{torn}")).unwrap();
        assert_eq!(p.samples, [sample(1.0)]);
        assert_eq!(
            p.torn,
            Some(TornLine {
                line: 2,
                offset: whole.len() as u64
            })
        );
        // With its newline the same text is a bad line, not a torn one.
        let e = parse_lines(&format!("{whole}{torn}\n")).unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        let e = parse_lines(&format!("{torn}\n{whole}")).unwrap_err();
        assert!(e.starts_with("line 1:"), "{e}");
        // A whole sample that only lacks its newline is kept.
        let p = parse_lines(whole.trim_end()).unwrap();
        assert_eq!((p.samples.len(), p.torn), (1, None));
        assert_eq!(parse_lines("").unwrap().samples, []);

        let dir = temp("torn");
        let path = dir.join("results.jsonl");
        fs::write(&path, format!("{whole}{torn}")).unwrap();
        assert_eq!(read_samples(&dir).unwrap(), [sample(1.0)]);
        // Only a torn sample: nothing left to read.
        fs::write(&path, torn).unwrap();
        assert!(read_samples(&dir).unwrap_err().contains("no samples"));
        // Loading to append cuts the torn tail off the file.
        fs::write(&path, format!("{whole}{torn}")).unwrap();
        assert_eq!(load_for_append(&path).unwrap(), (vec![sample(1.0)], true));
        assert_eq!(fs::read_to_string(&path).unwrap(), whole);
        SampleWriter::append(&path)
            .unwrap()
            .write(&sample(2.0))
            .unwrap();
        assert_eq!(read_samples(&dir).unwrap(), [sample(1.0), sample(2.0)]);
        fs::write(&path, format!("{torn}\n{whole}")).unwrap();
        let e = load_for_append(&path).unwrap_err();
        assert!(e.contains("line 1") && !e.contains('\n'), "{e}");
        fs::remove_file(&path).unwrap();
        assert_eq!(load_for_append(&path).unwrap(), (vec![], false));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_machine_is_described() {
        let m = Machine::detect(&mm::topology::host());
        assert!(m.cpus >= 1 && m.nodes >= 1);
        assert!(m.topology.starts_with("host"));
    }
}

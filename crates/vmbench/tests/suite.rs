//! `vmbench suite` end to end at its shortest settings: every file of the
//! results directory is written, every JSON line parses, every workload
//! has its plots, and the page shows them; then `vmbench compare` reads two
//! such directories. Bad arguments fail with one line. A run interrupted by
//! SIGINT keeps what it measured and writes its page; `--resume` measures
//! the rest, nothing twice.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn vmbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vmbench"))
        .args(args)
        .output()
        .expect("failed to start vmbench")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vmbench-suite-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs the suite; returns its stderr.
fn suite(out: &Path, extra: &[&str]) -> String {
    let mut args = vec!["suite", "--quick", "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = vmbench(&args);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "suite failed: {stderr}");
    stderr
}

const WORKLOADS: [&str; 9] = [
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

#[test]
fn quick_suite_writes_every_file() {
    let out = temp_dir("all");
    let stderr = suite(&out, &[]);
    for f in [
        "results.jsonl",
        "machine.json",
        "command.txt",
        "table.txt",
        "table.md",
        "index.html",
        // The projection section (execl on the 12-node machine).
        "projection/points.jsonl",
        "projection/breakdown.md",
        "projection/index.html",
    ] {
        let len = std::fs::metadata(out.join(f)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{f} missing or empty");
    }
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let w = v["workload"].as_str().expect("workload").to_string();
        assert!(
            v["value"]
                .as_f64()
                .is_some_and(|x| x.is_finite() && x > 0.0),
            "{line}"
        );
        assert!(v["threads"].as_u64().is_some_and(|t| t >= 1), "{line}");
        assert!(
            v["config"].as_str().is_some_and(|c| !c.is_empty()),
            "{line}"
        );
        seen.insert(w);
    }
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    for w in WORKLOADS {
        assert!(seen.contains(w), "no samples of {w}");
        let size = |ext: &str| {
            std::fs::metadata(out.join(format!("{w}.{ext}")))
                .map(|m| m.len())
                .unwrap_or(0)
        };
        assert!(size("svg") > 0, "{w}.svg missing or empty: {stderr}");
        // A PNG needs a system font; without one the suite must say so.
        let no_png = format!("{w}: PNG not written");
        assert!(
            size("png") > 0 || stderr.contains(&no_png),
            "{w}.png missing: {stderr}"
        );
        assert!(
            html.contains(&format!("{w}.svg")),
            "index.html lacks the {w} plot"
        );
        // Markdown escapes the underscore of page_fault3.
        let heading = format!("### {}", w.replace('_', "\\_"));
        assert!(table.contains(&heading), "table.md lacks {heading}");
    }
    let machine: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("machine.json")).unwrap()).unwrap();
    assert!(machine["cpus"].as_u64().is_some_and(|n| n >= 1));
    let command = std::fs::read_to_string(out.join("command.txt")).unwrap();
    assert!(
        command.contains("suite") && command.contains("--quick"),
        "{command}"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn compare_reads_two_suite_runs() {
    let (a, b) = (temp_dir("a"), temp_dir("b"));
    for d in [&a, &b] {
        suite(d, &["--workloads", "brk1,aim7-brk", "--threads", "1"]);
    }
    let o = vmbench(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains("brk1") && stdout.contains("aim7-brk"),
        "{stdout}"
    );
    assert!(stdout.contains("rows differ significantly"), "{stdout}");
    for d in [&a, &b] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn bad_arguments_fail_with_one_line() {
    let missing = temp_dir("missing");
    for args in [
        &["suite", "--workloads", "kernbench9"][..],
        &["suite", "--designs", "percpu"],
        &["suite", "--threads", "0"],
        &["suite", "--repeat", "none"],
        &["suite", "--resume", missing.to_str().unwrap()],
        &["suite", "--resume", "/proc/self"],
        &["suite", "--resume", missing.to_str().unwrap(), "--force"],
        &[
            "compare",
            missing.to_str().unwrap(),
            missing.to_str().unwrap(),
        ],
    ] {
        let o = vmbench(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8(o.stderr).unwrap();
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    }
}

#[test]
fn a_results_directory_is_never_overwritten_silently() {
    let out = temp_dir("twice");
    let brk1 = [
        "--workloads",
        "brk1",
        "--threads",
        "1",
        "--designs",
        "maple",
    ];
    suite(&out, &brk1);
    let first = std::fs::read(out.join("results.jsonl")).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    // Without --force the second run is refused and changes nothing.
    let mut args = vec!["suite", "--quick", "--out", out.to_str().unwrap()];
    args.extend_from_slice(&brk1);
    let o = vmbench(&args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("not empty") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(out.join("results.jsonl")).unwrap(), first);
    // With --force an earlier run's plots go: a plot of a workload the
    // new run does not measure is not left beside the new ones.
    std::fs::write(out.join("mmap1.svg"), "<svg/>").unwrap();
    suite(&out, &[&brk1[..], &["--force"]].concat());
    assert!(!out.join("mmap1.svg").exists());
    assert!(out.join("brk1.svg").exists());
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_suite_that_measures_nothing_leaves_nothing() {
    let out = temp_dir("nothing");
    let o = vmbench(&[
        "suite",
        "--quick",
        "--designs",
        "btreemap",
        "--workloads",
        "brk1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("keeps no configuration of the workloads brk1"),
        "{stderr}"
    );
    assert!(!out.exists(), "a results directory was left behind");
}

/// The point a result line belongs to: workload, configuration, threads,
/// repetition (for `tree`, the size stands for the configuration).
fn point_of(v: &serde_json::Value) -> (String, String, u64, u64) {
    let w = v["workload"].as_str().unwrap().to_string();
    let config = if w == "tree" {
        let metric = v["metric"].as_str().unwrap();
        metric.rsplit_once(" n=").unwrap().1.to_string()
    } else {
        v["config"].as_str().unwrap().to_string()
    };
    (
        w,
        config,
        v["threads"].as_u64().unwrap(),
        v["rep"].as_u64().unwrap(),
    )
}

/// Every line of `dir/results.jsonl`, parsed: each must be a whole JSON
/// object.
fn result_lines(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "torn last line");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The number before `word` in `text`, e.g. 12 in "(12 samples".
fn number_before(text: &str, word: &str) -> usize {
    let at = text
        .find(word)
        .unwrap_or_else(|| panic!("no '{word}' in {text}"));
    let digits: String = text[..at]
        .trim_end()
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}

#[test]
fn an_interrupted_suite_keeps_its_points_and_resumes_without_measuring_twice() {
    let out = temp_dir("interrupted");
    let dir = out.to_str().unwrap();
    let workloads = ["brk1", "mmap1"];
    // 2 workloads x 4 configurations x 2 thread counts x 8 repetitions:
    // 128 short points, several seconds in all.
    let plan = [
        "--quick",
        "--workloads",
        "brk1,mmap1",
        "--threads",
        "1,2",
        "--repeat",
        "8",
    ];
    let mut args = vec!["suite", "--out", dir];
    args.extend_from_slice(&plan);
    let child = Command::new(env!("CARGO_BIN_EXE_vmbench"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("failed to start vmbench");
    // Interrupt once a few points are in: the signal handlers are set
    // before the first sample is written.
    let start = Instant::now();
    let jsonl = out.join("results.jsonl");
    while std::fs::read_to_string(&jsonl).map_or(0, |t| t.lines().count()) < 3 {
        assert!(start.elapsed() < Duration::from_secs(120), "no results");
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "an interrupted run must fail: {stderr}"
    );
    let last = stderr.trim_end().lines().last().unwrap();
    assert!(
        last.starts_with("error: interrupted: ")
            && last.contains(&format!("vmbench suite --resume {dir}")),
        "{stderr}"
    );
    // Every completed point is in the file, whole, and as many as reported.
    let lines = result_lines(&out);
    assert_eq!(lines.len(), number_before(last, "samples"), "{last}");
    let total = 2 * 4 * 2 * 8;
    assert_eq!(
        number_before(last, &format!("of {total} points")),
        lines.len()
    );
    assert!(lines.len() < total, "the run was not interrupted: {last}");
    let first: BTreeSet<_> = lines.iter().map(point_of).collect();
    assert_eq!(first.len(), lines.len(), "a point was measured twice");
    // The page and the tables are written from what was measured.
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    let measured: BTreeSet<&str> = lines
        .iter()
        .map(|v| v["workload"].as_str().unwrap())
        .collect();
    for w in &measured {
        // The plot and the table of each measured workload (the name alone
        // is on the page anyway, in the command line).
        assert!(
            html.contains(&format!("{w}.svg")),
            "index.html lacks the {w} plot"
        );
        assert!(
            html.contains(&format!(">{w}</h")),
            "index.html lacks the {w} table"
        );
    }
    for f in [
        "table.txt",
        "table.md",
        "summary.txt",
        "plan.json",
        "machine.json",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }

    // A resumption must be the same plan.
    let o = vmbench(&["suite", "--resume", dir, "--quick", "--workloads", "brk1"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(
        e.contains("workloads: [\"brk1\",\"mmap1\"] recorded, [\"brk1\"] now")
            && e.contains("repeat: 8 recorded, 2 now"),
        "{e}"
    );
    assert_eq!(result_lines(&out).len(), lines.len());

    // A torn last line (a run killed mid-write) is reported and cut off.
    let mut text = std::fs::read_to_string(&jsonl).unwrap();
    text.push_str("{\"workload\":\"brk1\",\"met");
    std::fs::write(&jsonl, text).unwrap();

    // The same options given again resolve to the same plan; this resumes.
    let mut args = vec!["suite", "--resume", dir];
    args.extend_from_slice(&plan);
    let o = vmbench(&args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "resume failed: {stderr}");
    assert!(
        stderr.contains("last line") && stderr.contains("torn"),
        "{stderr}"
    );
    let all = result_lines(&out);
    let points: Vec<_> = all.iter().map(point_of).collect();
    let unique: BTreeSet<_> = points.iter().cloned().collect();
    assert_eq!(unique.len(), points.len(), "a point was measured twice");
    assert!(first.is_subset(&unique));
    let mut expected = BTreeSet::new();
    for w in workloads {
        for c in ["legacy", "maple"] {
            for m in ["processes", "threads"] {
                for t in [1, 2] {
                    for rep in 0..8 {
                        expected.insert((w.to_string(), format!("{c} {m}"), t, rep));
                    }
                }
            }
        }
    }
    assert_eq!(unique, expected);
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    for w in workloads {
        assert!(html.contains(&format!("{w}.svg")), "index.html lacks {w}");
    }
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.starts_with("maple tree: "), "{summary}");
    let command = std::fs::read_to_string(out.join("command.txt")).unwrap();
    assert!(command
        .lines()
        .nth(1)
        .is_some_and(|l| l.starts_with("resumed: ")));

    // Nothing is left: resuming again measures nothing.
    let o = vmbench(&["suite", "--resume", dir]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("every point was measured"), "{stderr}");
    assert_eq!(result_lines(&out).len(), all.len());
    std::fs::remove_dir_all(&out).unwrap();
}

//! `vmbench suite` end to end at its shortest settings: every file of the
//! results directory is written, every JSON line parses, every workload
//! has its plots, and the page shows them; then `vmbench compare` reads two
//! such directories. Bad arguments fail with one line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

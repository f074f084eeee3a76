//! End-to-end checks of `vmbench compare`: two result directories written
//! here, the table and the summary line it prints, and one-line errors for
//! directories it cannot use.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn vmbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vmbench"))
        .args(args)
        .output()
        .expect("failed to start vmbench")
}

/// A fresh directory for one test, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("vmbench-compare-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn sub(&self, name: &str) -> PathBuf {
        let p = self.0.join(name);
        fs::create_dir_all(&p).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Noise factors of five repetitions: about ±2%, in an order that `shift`
/// rotates so that two "runs" do not repeat each other exactly.
const NOISE: [f64; 5] = [1.0, 1.02, 0.98, 1.01, 0.99];

/// Writes `results.jsonl` in `dir`: brk1 at 1 and 2 threads for configs
/// maple and legacy, and one tree time; `slow` divides legacy's 2-thread
/// rate by `slow`.
fn write_run(dir: &Path, shift: usize, slow: f64) {
    let mut lines = String::new();
    for (config, base) in [("maple", 1000.0), ("legacy", 600.0)] {
        for threads in [1usize, 2] {
            for rep in 0..NOISE.len() {
                let mut value = base * threads as f64 * NOISE[(rep + shift) % NOISE.len()];
                if config == "legacy" && threads == 2 {
                    value /= slow;
                }
                lines.push_str(&format!(
                    "{{\"workload\":\"brk1\",\"metric\":\"ops/s\",\"unit\":\"ops/s\",\
                     \"higher_is_better\":true,\"config\":\"{config}\",\"threads\":{threads},\
                     \"rep\":{rep},\"value\":{value}}}\n"
                ));
            }
        }
    }
    for rep in 0..NOISE.len() {
        let value = 40.0 * NOISE[(rep + 2 * shift) % NOISE.len()];
        lines.push_str(&format!(
            "{{\"workload\":\"tree\",\"metric\":\"load n=1000\",\"unit\":\"ns/op\",\
             \"higher_is_better\":false,\"config\":\"maple\",\"threads\":1,\
             \"rep\":{rep},\"value\":{value}}}\n"
        ));
    }
    fs::write(dir.join("results.jsonl"), lines).unwrap();
}

fn stdout(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "vmbench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn table_lines<'t>(text: &'t str, needle: &str) -> Vec<&'t str> {
    text.lines().filter(|l| l.contains(needle)).collect()
}

#[test]
fn same_distributions_differ_nowhere() {
    let dir = Dir::new("same");
    let (a, b) = (dir.sub("a"), dir.sub("b"));
    write_run(&a, 0, 1.0);
    write_run(&b, 1, 1.0);
    let text = stdout(&vmbench(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]));
    assert!(
        text.trim_end()
            .ends_with("0 of 5 rows differ significantly (Welch's t-test, p < 0.05)"),
        "{text}"
    );
    assert!(!text.contains("%*"), "{text}");
    assert!(
        text.contains("brk1") && text.contains("load n=1000 (ns/op)"),
        "{text}"
    );
    assert!(text.contains("n = 5 repetitions per cell"), "{text}");
}

#[test]
fn a_configuration_slowed_twofold_is_significant() {
    let dir = Dir::new("slow");
    let (a, b) = (dir.sub("a"), dir.sub("b"));
    write_run(&a, 0, 1.0);
    write_run(&b, 1, 2.0);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let text = stdout(&vmbench(&["compare", a, b]));
    assert!(
        text.trim_end()
            .ends_with("1 of 5 rows differ significantly (Welch's t-test, p < 0.05)"),
        "{text}"
    );
    let marked = table_lines(&text, "%*");
    assert_eq!(marked.len(), 1, "{text}");
    let row = marked[0];
    assert!(row.contains("legacy") && row.contains(" 2 "), "{row}");
    assert!(row.contains("-50.0%* worse"), "{row}");

    let md = stdout(&vmbench(&["compare", "--markdown", a, b]));
    assert!(md.contains("### brk1\n\n| metric | mean | threads | config | A | B | B vs A | p |\n"));
    let marked = table_lines(&md, "%\\*");
    assert_eq!(marked.len(), 1, "{md}");
    assert!(
        marked[0].starts_with("| ops/s | hmean | 2 | legacy |"),
        "{md}"
    );
}

fn assert_one_line_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(needle),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn unusable_directories_are_one_line_errors() {
    let dir = Dir::new("bad");
    let good = dir.sub("good");
    write_run(&good, 0, 1.0);
    let good = good.to_str().unwrap();

    let missing = dir.0.join("missing");
    assert_one_line_error(
        &vmbench(&["compare", good, missing.to_str().unwrap()]),
        "cannot read",
    );

    let broken = dir.sub("broken");
    fs::write(broken.join("results.jsonl"), "{\"workload\": \"brk1\"}\n").unwrap();
    assert_one_line_error(
        &vmbench(&["compare", broken.to_str().unwrap(), good]),
        "line 1",
    );

    let empty = dir.sub("empty");
    fs::write(empty.join("results.jsonl"), "\n").unwrap();
    assert_one_line_error(
        &vmbench(&["compare", good, empty.to_str().unwrap()]),
        "no samples",
    );

    let other = dir.sub("other");
    fs::write(
        other.join("results.jsonl"),
        "{\"workload\":\"mmap1\",\"metric\":\"ops/s\",\"unit\":\"ops/s\",\
         \"higher_is_better\":true,\"config\":\"maple\",\"threads\":1,\"rep\":0,\"value\":5}\n",
    )
    .unwrap();
    assert_one_line_error(
        &vmbench(&["compare", good, other.to_str().unwrap()]),
        "no figure in common",
    );

    // The same figure in both, but rates of 0: the figures match, and
    // what is missing is a mean, which the error must say.
    let zero = |name: &str| {
        let d = dir.sub(name);
        fs::write(
            d.join("results.jsonl"),
            "{\"workload\":\"mmap1\",\"metric\":\"ops/s\",\"unit\":\"ops/s\",\
             \"higher_is_better\":true,\"config\":\"maple\",\"threads\":1,\"rep\":0,\"value\":0}\n",
        )
        .unwrap();
        d
    };
    let (z1, z2) = (zero("zero1"), zero("zero2"));
    assert_one_line_error(
        &vmbench(&["compare", z1.to_str().unwrap(), z2.to_str().unwrap()]),
        "1 figure in common, but none can be compared: no mean exists",
    );
}

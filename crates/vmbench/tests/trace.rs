//! `vmbench record` and `vmbench replay` end to end: the committed traces
//! of real programs replay on both VMA indexes with no difference from
//! the kernel, a live recording of `/bin/true` does too, and bad input is
//! refused with a one-line error.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The committed fixtures and the least number of calls each holds.
const FIXTURES: [(&str, usize); 8] = [
    // env -i /bin/ls -d /          (exec chain env -> ls, shared libraries)
    ("ls.json", 50),
    // env -i /bin/sh -c '/bin/true | /bin/cat; /bin/echo done'   (forks, execs)
    ("sh-pipeline.json", 80),
    // env -i PERL_HASH_SEED=0 ... perl -Mthreads ... (threads, fork, mremap)
    ("perl-threads.json", 600),
    // python3 -c "$(cat anon-vma.py)"  (anon_vmas decide a merge)
    ("anon-vma.json", 80),
    // python3 -c "$(cat edge-cases.py)"  (errno paths, GROWSDOWN, mremap modes)
    ("edge-cases.json", 110),
    // env -i /usr/bin/java -version  (a JVM: threads, reserved heaps, madvise)
    ("java-version.json", 450),
    // env -i /usr/bin/node -e "console.log(1+1)"  (V8: madvise, pkey_alloc)
    ("node-e.json", 190),
    // env -i /usr/local/go/bin/go version  (the Go runtime: MADV_NOHUGEPAGE
    // splits its arena, PR_SET_VMA_ANON_NAME refused by this kernel)
    ("go-version.json", 50),
];

fn fixture(name: &str) -> PathBuf {
    // The traces are vmtrace's; this crate replays them through the CLI.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../vmtrace/tests/fixtures")
        .join(name)
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("vmbench-trace-test-{}-{name}", std::process::id()))
}

fn vmbench() -> Command {
    Command::cargo_bin("vmbench").unwrap()
}

/// Runs `vmbench record --out OUT -- CMD...`.
fn record(out: &Path, cmd: &[&str]) -> std::process::Output {
    vmbench()
        .args(["record", "--out"])
        .arg(out)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap()
}

/// Replays `path` with `index`; returns the number of calls replayed.
fn replay_ok(path: &Path, index: &str) -> usize {
    let out = vmbench()
        .args(["replay", "--index", index])
        .arg(path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(", 0 differences"),
        "replay of {} with {index} differs from the kernel:\n{stdout}\n{stderr}",
        path.display()
    );
    calls_of(&stdout, index)
}

/// The call count of a replay's summary line.
fn calls_of(stdout: &str, index: &str) -> usize {
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("replay "))
        .unwrap_or_else(|| panic!("no summary line in:\n{stdout}"));
    let marker = format!(" index {index}: ");
    summary
        .rsplit_once(&marker)
        .and_then(|(_, rest)| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("cannot read the call count of {summary:?}"))
}

#[test]
fn fixtures_replay_with_both_indexes() {
    for (name, min_calls) in FIXTURES {
        for index in ["maple", "legacy"] {
            let calls = replay_ok(&fixture(name), index);
            assert!(
                calls >= min_calls,
                "{name}: only {calls} calls (expected at least {min_calls})"
            );
        }
    }
}

/// The `sync` events carry what a system-call trace cannot show. In
/// `anon-vma.json` two VMAs get different anon_vmas from write faults
/// before the hole between them is mapped, so the new VMA merges with one
/// neighbour only; without the `sync` events the model merges all three.
#[test]
fn hidden_state_decides_a_merge() {
    let text = std::fs::read_to_string(fixture("anon-vma.json")).unwrap();
    let mut trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = trace["events"].as_array_mut().unwrap();
    let before = events.len();
    events.retain(|e| e["ev"] != "sync");
    assert!(events.len() < before);
    let path = scratch("nosync.json");
    std::fs::write(&path, serde_json::to_string(&trace).unwrap()).unwrap();
    let out = vmbench().arg("replay").arg(&path).output().unwrap();
    let _ = std::fs::remove_file(&path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("final map of space"), "{stdout}");
}

#[test]
fn live_true_records_and_replays() {
    let path = scratch("true.json");
    let out = record(&path, &["/bin/true"]);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        if stderr.contains("ptrace") || stderr.contains("not permitted") {
            eprintln!("skipping live recording: ptrace is not permitted here: {stderr}");
            return;
        }
        panic!("vmbench record /bin/true failed: {stderr}");
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"ev\":\"exec\"") && text.contains("\"ev\":\"final\""));
    for index in ["maple", "legacy"] {
        let calls = replay_ok(&path, index);
        assert!(calls >= 5, "/bin/true made only {calls} calls");
    }
    let out = vmbench()
        .args(["replay", "--maps"])
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("model map of space 0:"), "{stdout}");
    assert!(stdout.contains("[stack]"), "{stdout}");
    let _ = std::fs::remove_file(&path);
}

/// Runs `vmbench replay` on `text` and returns its stderr, checking it
/// failed with a one-line error and no panic.
fn replay_rejects(name: &str, text: &str) -> String {
    let path = scratch(name);
    std::fs::write(&path, text).unwrap();
    let out = vmbench().arg("replay").arg(&path).output().unwrap();
    let _ = std::fs::remove_file(&path);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{name}: accepted");
    assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{name}: {stderr}");
    assert!(stderr.starts_with("error: "), "{name}: {stderr}");
    stderr
}

#[test]
fn bad_traces_are_refused_cleanly() {
    let out = vmbench()
        .args(["replay", "/nonexistent/trace.json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot read trace"), "{stderr}");

    replay_rejects("garbage.json", "this is not json");
    replay_rejects("empty.json", "");
    let good = std::fs::read_to_string(fixture("ls.json")).unwrap();
    replay_rejects("truncated.json", &good[..good.len() / 2]);
    let e = replay_rejects(
        "format.json",
        &good.replacen("vmscale-trace", "other-trace", 1),
    );
    assert!(e.contains("not a vmscale trace"), "{e}");
    let e = replay_rejects(
        "version.json",
        &good.replacen("\"version\": 1", "\"version\": 99", 1),
    );
    assert!(e.contains("version 99"), "{e}");
    let e = replay_rejects(
        "file.json",
        &good.replacen("\"files\":[0,1]", "\"files\":[0,999]", 1),
    );
    assert!(e.contains("file table"), "{e}");
    replay_rejects(
        "ret.json",
        &good.replacen("\"ret\":\"0x", "\"ret\":\"1x", 1),
    );
}

#[test]
fn inconsistent_traces_report_differences_without_panicking() {
    let good = std::fs::read_to_string(fixture("ls.json")).unwrap();
    // Events of an address space that was never built, a stack with an
    // impossible extent, and a result the model will not reproduce.
    let bad = good
        .replacen("\"ev\":\"brk\",\"space\":0", "\"ev\":\"brk\",\"space\":7", 1)
        .replacen(
            "\"ev\":\"munmap\",\"space\":0",
            "\"ev\":\"sync\",\"space\":0,\"pid\":1,\"stacks\":[[\"0x0\",\"0x0\"]]},{\"ev\":\"munmap\",\"space\":0",
            1,
        );
    let path = scratch("inconsistent.json");
    std::fs::write(&path, bad).unwrap();
    let out = vmbench().arg("replay").arg(&path).output().unwrap();
    let _ = std::fs::remove_file(&path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stdout.contains("never built"), "{stdout}");
    assert!(stdout.contains("grows-down"), "{stdout}");
}

#[test]
fn record_refuses_a_missing_command() {
    let path = scratch("missing.json");
    let out = record(&path, &["/nonexistent/program"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(!path.exists());

    let out = vmbench()
        .args([
            "record",
            "--out",
            "/nonexistent/dir/t.json",
            "--",
            "/bin/true",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("/nonexistent/dir/t.json"), "{stderr}");
}

/// `--out` is checked before the program starts: a path that cannot be
/// written fails with one line naming it and status 1, and the program
/// never ran (it would have left a marker file).
#[test]
fn record_checks_out_before_starting_the_program() {
    let marker = scratch("ran-marker");
    let _ = std::fs::remove_file(&marker);
    let script = format!("echo ran > '{}'; exit 5", marker.display());
    let dir = std::env::temp_dir();
    let bad = [
        PathBuf::from("/nonexistent/dir/t.json"),
        // A directory, and a place nothing can be created in, even as root.
        dir.clone(),
        PathBuf::from("/proc/vmbench-test-out.json"),
    ];
    for out_path in &bad {
        let out = record(out_path, &["/bin/sh", "-c", &script]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: {stderr}",
            out_path.display()
        );
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error: record: ")
                && stderr.contains(&out_path.display().to_string()),
            "{stderr}"
        );
        assert!(
            !marker.exists(),
            "the program ran although --out {} cannot be written",
            out_path.display()
        );
    }
    // The marker does appear when --out is fine (where ptrace works), and
    // the program's status comes back.
    if ptrace_works() {
        let path = scratch("marker-trace.json");
        let out = record(&path, &["/bin/sh", "-c", &script]);
        assert_eq!(out.status.code(), Some(5));
        assert!(marker.exists());
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&marker);
    }
}

/// Whether this machine lets `vmbench record` trace (containers may not).
fn ptrace_works() -> bool {
    let path = scratch("probe.json");
    let out = record(&path, &["/bin/true"]);
    let _ = std::fs::remove_file(&path);
    out.status.success()
}

#[test]
fn record_never_destroys_what_is_at_out() {
    // An existing trace survives a command that cannot start.
    let existing = scratch("existing.json");
    let before = std::fs::read(fixture("ls.json")).unwrap();
    std::fs::write(&existing, &before).unwrap();
    let out = record(&existing, &["/nonexistent"]);
    assert!(!out.status.success());
    assert_eq!(
        std::fs::read(&existing).unwrap(),
        before,
        "the existing trace changed"
    );
    // A symbolic link is refused before anything runs: neither the link
    // nor its target changes.
    let link = scratch("link.json");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&existing, &link).unwrap();
    let out = record(&link, &["/bin/true"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&existing).unwrap(), before);
    // A device is refused too (as root, the old code deleted /dev/null).
    let out = vmbench()
        .args(["record", "--out", "/dev/null", "--", "/bin/true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // No temporary file is left beside the destination.
    let dir = existing.parent().unwrap();
    let stray: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.contains("existing.json") && name.ends_with(".tmp")
        })
        .collect();
    assert!(stray.is_empty(), "temporary files left: {stray:?}");
    let _ = std::fs::remove_file(&link);
    let _ = std::fs::remove_file(&existing);
}

#[test]
fn record_exits_with_the_recorded_programs_status() {
    if !ptrace_works() {
        eprintln!("skipping: ptrace is not permitted here");
        return;
    }
    let path = scratch("status.json");
    for (script, code) in [("exit 3", 3), ("kill -9 $$", 137)] {
        let out = record(&path, &["/bin/sh", "-c", script]);
        assert_eq!(out.status.code(), Some(code), "{script}");
        // The trace of a failed program is still written: it is valid data.
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("\"ev\":\"final\""));
    }
    // A nested record names the real reason: ptrace allows one tracer.
    let inner = scratch("inner.json");
    let out = vmbench()
        .args(["record", "--out"])
        .arg(&path)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_vmbench"))
        .args(["record", "--out"])
        .arg(&inner)
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("itself being traced"), "{stderr}");
    assert!(!inner.exists());
    let _ = std::fs::remove_file(&path);
}

/// `ls.json` with its event list rewritten by `keep` (the events as
/// JSON values, in order).
fn edited_ls(keep: impl Fn(Vec<serde_json::Value>) -> Vec<serde_json::Value>) -> String {
    let text = std::fs::read_to_string(fixture("ls.json")).unwrap();
    let mut trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = trace["events"].as_array().unwrap().clone();
    trace["events"] = serde_json::Value::Array(keep(events));
    serde_json::to_string(&trace).unwrap()
}

#[test]
fn replays_that_check_nothing_fail() {
    // No events at all.
    let e = replay_rejects("no-events.json", &edited_ls(|_| Vec::new()));
    assert!(e.contains("nothing checked"), "{e}");
    // Every final map removed: only return values would be compared.
    let e = replay_rejects(
        "no-finals.json",
        &edited_ls(|ev| ev.into_iter().filter(|e| e["ev"] != "final").collect()),
    );
    assert!(e.contains("nothing checked"), "{e}");
    // Cut after the first address space ended: the second never does.
    let e = replay_rejects(
        "half.json",
        &edited_ls(|ev| {
            let n = ev.len();
            ev.into_iter().take(n / 2 + 10).collect()
        }),
    );
    assert!(e.contains("ends early: 1 of 2 address spaces"), "{e}");
    // The whole trace still passes, and says how many maps it compared.
    let out = vmbench()
        .arg("replay")
        .arg(fixture("ls.json"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 final maps"));
}

#[test]
fn an_interrupted_record_leaves_the_old_trace() {
    if !ptrace_works() {
        eprintln!("skipping: ptrace is not permitted here");
        return;
    }
    let existing = scratch("interrupted.json");
    std::fs::write(&existing, "a trace from yesterday").unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vmbench"))
        .args(["record", "--out"])
        .arg(&existing)
        .args(["--", "/bin/sleep", "5"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    // The harshest interruption: SIGKILL, no handler runs.
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        std::fs::read_to_string(&existing).unwrap(),
        "a trace from yesterday"
    );
    let _ = std::fs::remove_file(&existing);
    // Its temporary file (hidden, beside the destination) may remain.
    if let Ok(entries) = std::fs::read_dir(existing.parent().unwrap()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(".vmbench-trace-test-") && name.contains("interrupted.json") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// A trace asking for more than replay's limits is refused with one line
/// naming the option; raising the limit replays it.
#[test]
fn replay_limits_are_options() {
    let pipeline = fixture("sh-pipeline.json");
    for (option, value) in [
        ("--max-spaces", "3"),
        ("--max-fork-depth", "0"),
        ("--max-vmas", "40"),
    ] {
        let out = vmbench()
            .args(["replay", option, value])
            .arg(&pipeline)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{option} {value} was not enforced");
        assert!(
            stderr.contains(option) && stderr.trim_end().lines().count() == 1,
            "{stderr}"
        );
    }
    let out = vmbench()
        .args(["replay", "--max-spaces", "7", "--max-fork-depth", "1"])
        .arg(&pipeline)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

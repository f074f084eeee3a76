//! End-to-end checks of `vmbench run`: every workload, mode and index
//! yields a complete JSON line, the maple fault path takes no
//! `mmap_lock`, `execl`, `aim7-brk` and `kernbench` run in processes mode
//! only and make the calls their models say, repeated runs report their spread, and bad
//! arguments fail with one line. No timing is asserted: the scaling
//! figures are measured by hand (docs/RESULTS.md).

use std::collections::BTreeSet;
use std::process::{Command, Output};

fn vmbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vmbench"))
        .args(args)
        .output()
        .expect("failed to start vmbench")
}

const WORKLOADS: [&str; 5] = ["brk1", "mmap1", "malloc1", "mmap2", "page_fault3"];
/// Workloads without a threads mode.
const PROCESSES_ONLY: [&str; 3] = ["execl", "aim7-brk", "kernbench"];
const LOCK_CLASSES: [&str; 4] = ["mmap_lock", "vma_lock", "i_mmap", "anon_vma"];
const LOCK_FIELDS: [&str; 5] = [
    "acquisitions",
    "contended",
    "wait_ns",
    "max_wait_ns",
    "queued",
];
/// Faults per `page_fault3` region: 128 MiB of 4 KiB pages.
const PAGES: u64 = 32768;

fn json_lines(args: &[&str]) -> Vec<serde_json::Value> {
    let out = vmbench(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "vmbench {args:?} failed: {stderr}");
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

fn acquisitions(v: &serde_json::Value, class: &str) -> u64 {
    v["locks"][class]["acquisitions"]
        .as_u64()
        .unwrap_or_else(|| panic!("no {class} acquisitions: {v}"))
}

#[test]
fn every_configuration_yields_a_complete_line() {
    let lines = json_lines(&["run", "--quick", "--json", "--threads", "1,2"]);
    let mut seen = BTreeSet::new();
    for v in &lines {
        let op = v["op"].as_str().unwrap_or_else(|| panic!("no op: {v}"));
        let imp = v["impl"].as_str().unwrap_or_else(|| panic!("no impl: {v}"));
        let mode = v["mode"].as_str().unwrap_or_else(|| panic!("no mode: {v}"));
        let threads = v["threads"]
            .as_u64()
            .unwrap_or_else(|| panic!("no threads: {v}"));
        assert_eq!(v["unit"], "ops/s", "{v}");
        // n: libc's resident VMAs for execl (500 with --quick), the
        // resident VMAs per address space otherwise.
        let n = if op == "execl" { 500 } else { 300 };
        assert_eq!(v["n"].as_u64(), Some(n), "{v}");
        let value = v["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("no value: {v}"));
        assert!(value > 0.0, "{v}");
        assert!(v["ops"].as_u64().is_some_and(|n| n > 0), "{v}");
        assert_eq!(v["repeat"].as_u64(), Some(1), "{v}");
        // Scheduler times are reported where the kernel has them.
        assert!(v["cpu"].is_null() || v["cpu"]["share"].is_f64(), "{v}");
        assert_complete_locks(v);
        assert!(seen.insert((op.to_string(), imp.to_string(), mode.to_string(), threads)));
    }
    for op in WORKLOADS {
        for imp in ["maple", "legacy"] {
            for mode in ["processes", "threads"] {
                for threads in [1, 2] {
                    let key = (op.to_string(), imp.to_string(), mode.to_string(), threads);
                    assert!(seen.contains(&key), "missing {key:?}");
                }
            }
        }
    }
    for op in PROCESSES_ONLY {
        for imp in ["maple", "legacy"] {
            for threads in [1, 2] {
                let key = (op.to_string(), imp.to_string(), "processes".into(), threads);
                assert!(seen.contains(&key), "missing {key:?}");
            }
        }
    }
    assert_eq!(lines.len(), 40 + 12);
}

/// Every class of `LockClass::ALL` with every counter, and nothing else.
fn assert_complete_locks(v: &serde_json::Value) {
    let locks = v["locks"]
        .as_object()
        .unwrap_or_else(|| panic!("no locks: {v}"));
    assert_eq!(locks.len(), LOCK_CLASSES.len(), "{v}");
    for class in LOCK_CLASSES {
        for field in LOCK_FIELDS {
            assert!(v["locks"][class][field].is_u64(), "no {class}.{field}: {v}");
        }
    }
}

#[test]
fn execl_and_aim7_brk_make_their_calls_in_processes_mode_only() {
    let args = [
        "run",
        "--quick",
        "--json",
        "--workloads",
        "execl,aim7-brk",
        "--threads",
        "1,2",
        "--resident-vmas",
        "23",
    ];
    let out = vmbench(&args);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    for op in ["execl", "aim7-brk"] {
        let note = format!("skipping {op} in threads mode");
        assert_eq!(stderr.matches(&note).count(), 1, "{stderr}");
    }
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 8);
    for v in &lines {
        assert_eq!(v["mode"], "processes", "{v}");
        assert_complete_locks(v);
        let ops = v["ops"].as_u64().unwrap();
        assert!(ops > 0, "{v}");
        let mmap = acquisitions(v, "mmap_lock");
        match v["op"].as_str().unwrap() {
            "execl" => {
                assert_eq!(v["n"].as_u64(), Some(23), "{v}");
                // Each exec takes mmap_lock at least for exec itself, the
                // cache's map and unmap, libc's four mmaps and its bss,
                // three mprotects and two brk calls.
                assert!(mmap >= 13 * ops, "{mmap} for {ops} execs: {v}");
            }
            "aim7-brk" => {
                assert_eq!(v["n"].as_u64(), Some(300), "{v}");
                // Growing and shrinking the break each take it once; the
                // write fault on the new page takes the VMA's lock.
                assert!(mmap >= 2 * ops, "{mmap} for {ops} ops: {v}");
                assert!(acquisitions(v, "vma_lock") + mmap >= 3 * ops, "{v}");
            }
            other => panic!("unexpected op {other}: {v}"),
        }
    }
}

/// Calls that take `mmap_lock` in one `kernbench` compile job, on either
/// index: the fork (1); the exec (14: tearing down the forked copy, the
/// exec itself, the cache's map and unmap, libc's four mmaps and its bss,
/// three mprotects, ld.so's and malloc's brk); the job's own calls (13:
/// the source's and the object file's map and unmap, four arena maps and
/// two unmaps, three brk calls); and the exit (1).
const KERNBENCH_MMAP_LOCK_CALLS: u64 = 29;

#[test]
fn kernbench_makes_its_calls_in_processes_mode_only() {
    let out = vmbench(&[
        "run",
        "--quick",
        "--json",
        "--workloads",
        "kernbench",
        "--index",
        "maple,legacy",
        "--threads",
        "1,2",
    ]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let note = "skipping kernbench in threads mode";
    assert_eq!(stderr.matches(note).count(), 1, "{stderr}");
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    let mut seen = BTreeSet::new();
    for v in &lines {
        assert_eq!(v["op"], "kernbench", "{v}");
        assert_eq!(v["mode"], "processes", "{v}");
        // n: the resident VMAs of the make each job forks from.
        assert_eq!(v["n"].as_u64(), Some(300), "{v}");
        assert_complete_locks(v);
        let ops = v["ops"].as_u64().unwrap();
        assert!(ops > 0, "{v}");
        let mmap = acquisitions(v, "mmap_lock");
        assert!(
            mmap >= KERNBENCH_MMAP_LOCK_CALLS * ops,
            "{mmap} for {ops} jobs: {v}"
        );
        // The fork inserts each of make's 250 resident file VMAs into its
        // file's reverse map, one i_mmap lock each, as dup_mmap does.
        assert!(acquisitions(v, "i_mmap") >= 250 * ops, "{v}");
        // Every job's ~300 faults take a VMA's lock (maple) or mmap_lock
        // (legacy).
        assert!(acquisitions(v, "vma_lock") + mmap >= 300 * ops, "{v}");
        let imp = v["impl"].as_str().unwrap().to_string();
        assert!(seen.insert((imp, v["threads"].as_u64().unwrap())), "{v}");
    }
    assert_eq!(seen.len(), 4);
}

/// The acceptance check of the anon_vma end-only rule: with the rule on, the
/// aim7 tasks' end-only heap growth and shrink take no anon_vma lock at
/// all; with it off, each growth takes it once (and each shrink once), so
/// an op (one grow plus one shrink) takes it exactly twice.
#[test]
fn aim7_brk_takes_anon_vma_locks_only_without_the_rule() {
    let lines = json_lines(&[
        "run",
        "--quick",
        "--json",
        "--workloads",
        "aim7-brk",
        "--index",
        "maple",
        "--threads",
        "1,2",
        "--anon-rule",
        "on,off",
    ]);
    assert_eq!(lines.len(), 4);
    for v in &lines {
        let ops = v["ops"].as_u64().unwrap();
        assert!(ops > 0, "{v}");
        let anon = acquisitions(v, "anon_vma");
        match v["anon_rule"].as_str().unwrap() {
            "on" => assert_eq!(anon, 0, "{v}"),
            "off" => assert_eq!(anon, 2 * ops, "{v}"),
            other => panic!("anon_rule {other}: {v}"),
        }
    }
}

/// Every i_mmap design runs execl on the host's topology and on an
/// emulated 12-node one, and every exec goes through libc's reverse map.
#[test]
fn execl_runs_with_every_imap_design_and_topology() {
    for topology in ["host", "12x32"] {
        let lines = json_lines(&[
            "run",
            "--quick",
            "--json",
            "--workloads",
            "execl",
            "--index",
            "maple",
            "--threads",
            "1,2",
            "--resident-vmas",
            "40",
            "--imap",
            "single,split,split-locked,distributed,adaptive",
            "--lock",
            "numa",
            "--topology",
            topology,
        ]);
        assert_eq!(lines.len(), 10, "{topology}");
        let designs: BTreeSet<&str> = lines.iter().map(|v| v["imap"].as_str().unwrap()).collect();
        assert_eq!(designs.len(), 5, "{topology}");
        for v in &lines {
            let ops = v["ops"].as_u64().unwrap();
            assert!(ops > 0, "{v}");
            assert_eq!(v["lock"], "numa", "{v}");
            if topology != "host" {
                assert_eq!(v["topology"], topology, "{v}");
            }
            // Each exec maps and unmaps ld.so, libc and the executable:
            // more than ten i_mmap changes.
            assert!(acquisitions(v, "i_mmap") >= 10 * ops, "{v}");
        }
    }
}

#[test]
fn repeated_runs_report_their_spread() {
    let lines = json_lines(&[
        "run",
        "--quick",
        "--json",
        "--workloads",
        "aim7-brk,mmap1",
        "--mode",
        "processes",
        "--index",
        "maple",
        "--threads",
        "1",
        "--repeat",
        "3",
    ]);
    assert_eq!(lines.len(), 2);
    for v in &lines {
        assert_eq!(v["repeat"].as_u64(), Some(3), "{v}");
        let field = |f: &str| {
            v["runs"][f]
                .as_f64()
                .unwrap_or_else(|| panic!("no runs.{f}: {v}"))
        };
        let (min, max, mean) = (field("min"), field("max"), field("mean"));
        let value = v["value"].as_f64().unwrap();
        // The reported run is the median one, inside the range.
        assert!(min <= value && value <= max, "{v}");
        assert!(min <= mean && mean <= max, "{v}");
        assert!(field("stddev") >= 0.0, "{v}");
        assert!(field("stddev") <= max - min, "{v}");
    }
}

#[test]
fn runs_of_several_pinned_workers_record_where_their_cpus_were() {
    // The placement needs two CPUs to pin to; a one-CPU machine has none.
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        return;
    }
    let mmap1 = [
        "run",
        "--quick",
        "--json",
        "--workloads",
        "mmap1",
        "--mode",
        "processes",
        "--index",
        "maple",
    ];
    let lines = json_lines(&[&mmap1[..], &["--threads", "1,2", "--placement", "any"]].concat());
    assert_eq!(lines.len(), 2);
    for v in &lines {
        let ns = |f: &str| v[f].as_f64();
        if v["threads"] == 1 {
            assert_eq!(
                (ns("transfer_ns"), ns("transfer_after_ns")),
                (None, None),
                "{v}"
            );
        } else {
            for f in ["transfer_ns", "transfer_after_ns"] {
                assert!(ns(f).is_some_and(|t| t > 0.0 && t < 10_000.0), "{f}: {v}");
            }
        }
    }
    // Unpinned workers have no CPUs of their own: nothing is measured.
    let unpinned = json_lines(&[&mmap1[..], &["--threads", "2", "--no-pin"]].concat());
    assert!(unpinned[0].get("transfer_ns").is_none(), "{}", unpinned[0]);
}

#[test]
fn maple_page_faults_take_no_mmap_lock() {
    let lines = json_lines(&[
        "run",
        "--quick",
        "--json",
        "--workloads",
        "page_fault3",
        "--mode",
        "threads",
        "--index",
        "maple",
        "--threads",
        "1,2",
    ]);
    assert_eq!(lines.len(), 2);
    for v in &lines {
        let ops = v["ops"].as_u64().unwrap();
        let threads = v["threads"].as_u64().unwrap();
        let mmap = acquisitions(v, "mmap_lock");
        // Only map and unmap take mmap_lock: two per region of PAGES
        // faults, plus per worker the regions it was inside when timing
        // started and stopped.
        assert!(
            mmap <= 2 * (ops / PAGES) + 3 * threads,
            "{mmap} for {ops} faults: {v}"
        );
        assert!(mmap < ops / 100, "{v}");
        // Every fault takes its VMA's lock.
        assert!(acquisitions(v, "vma_lock") >= ops, "{v}");
    }
}

#[test]
fn legacy_page_faults_take_mmap_lock() {
    // The contrast that shows the maple check means something: without a
    // lockless index every fault read-locks mmap_lock.
    let lines = json_lines(&[
        "run",
        "--quick",
        "--json",
        "--workloads",
        "page_fault3",
        "--mode",
        "threads",
        "--index",
        "legacy",
        "--threads",
        "1",
    ]);
    let ops = lines[0]["ops"].as_u64().unwrap();
    assert!(acquisitions(&lines[0], "mmap_lock") >= ops, "{}", lines[0]);
}

#[test]
fn table_output_has_a_row_per_configuration() {
    let out = vmbench(&[
        "run",
        "--quick",
        "--workloads",
        "mmap1",
        "--mode",
        "processes",
        "--threads",
        "1,2",
        "--index",
        "maple",
    ]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    for class in LOCK_CLASSES {
        assert!(table.contains(&format!("{class}/op")), "{table}");
    }
    assert_eq!(table.matches("mmap1").count(), 2, "{table}");
}

#[test]
fn bad_arguments_fail_with_one_line() {
    for args in [
        &["run", "--workloads", "page_fault9"][..],
        &["run", "--threads", "0"],
        &["run", "--threads", "two"],
        &["run", "--index", "btree"],
        &["run", "--mode", "fibers"],
        &["run", "--duration", "0"],
        &["run", "--resident-vmas", "100001"],
        &["run", "--resident-vmas", "lots"],
        &["run", "--workloads", "execl", "--mode", "threads"],
        &["run", "--workloads", "aim7-brk", "--mode", "threads"],
        &["run", "--workloads", "kernbench", "--mode", "threads"],
        &["run", "--imap", "percpu"],
        &["run", "--lock", "spin"],
        &["run", "--anon-rule", "maybe"],
        &["run", "--topology", "12x0"],
        &["run", "--topology", "nodes"],
        &["run", "--placement", "near"],
        &["run", "--placement", "-33"],
        &["suite", "--placement", "0"],
    ] {
        let out = vmbench(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(out.stdout.is_empty(), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    }
}

#[test]
fn a_failed_call_stops_the_run_with_one_line() {
    // One VMA past vm.max_map_count's 65530: the resident population still
    // fits, but the worker's own mmap must fail with ENOMEM, and the run
    // must stop and say so instead of counting it.
    let out = vmbench(&[
        "run",
        "--quick",
        "--workloads",
        "mmap1",
        "--mode",
        "threads",
        "--index",
        "maple",
        "--threads",
        "2",
        "--resident",
        "65531",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("mmap of 128 MiB failed: ENOMEM"),
        "{stderr}"
    );
}

#[test]
fn an_interrupted_run_keeps_what_it_measured() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;
    // Eight configurations of 0.3 s each; the signal comes after the first.
    let mut child = Command::new(env!("CARGO_BIN_EXE_vmbench"))
        .args([
            "run",
            "--workloads",
            "brk1,mmap1,malloc1,mmap2",
            "--mode",
            "processes",
            "--index",
            "maple,legacy",
            "--threads",
            "1",
            "--duration",
            "0.3",
            "--warmup",
            "0",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("failed to start vmbench");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = vec![String::new()];
    stdout.read_line(&mut lines[0]).unwrap();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    lines.extend(rest.lines().map(str::to_string));
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "an interrupted run must not report success"
    );
    let last = stderr.trim_end().lines().last().unwrap_or_default();
    let measured = lines.len();
    assert!((1..8).contains(&measured), "{measured} lines: {stderr}");
    assert_eq!(
        last,
        format!("error: interrupted: {measured} configuration(s) measured, shown above"),
        "{stderr}"
    );
    for line in &lines {
        let v: serde_json::Value = serde_json::from_str(line).expect("a whole JSON line");
        assert!(v["value"].as_f64().is_some_and(|x| x > 0.0), "{line}");
    }
}

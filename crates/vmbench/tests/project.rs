//! End-to-end checks of `vmbench project`: the JSON points of a
//! projection onto the execl report's machine, the files it writes, the
//! validation's report and exit status, and one-line errors for bad
//! machine descriptions.

use std::process::{Command, Output};

fn vmbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vmbench"))
        .args(args)
        .output()
        .expect("failed to start vmbench")
}

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn execl_on_the_12_node_machine_gives_every_design_and_lock_at_every_count() {
    let dir = tempfile::tempdir().unwrap();
    let out = vmbench(&[
        "project",
        "--quick",
        "--workloads",
        "execl",
        "--machine",
        "12x32",
        "--cpus",
        "1,2,384",
        "--resident-vmas",
        "600",
        "--json",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let points = json_lines(&out);
    // Five designs x three locks x three counts.
    assert_eq!(points.len(), 45, "{points:?}");
    for p in &points {
        for field in [
            "workload", "imap", "lock", "index", "machine", "cpus", "value", "unit",
        ] {
            assert!(p.get(field).is_some(), "no {field} in {p}");
        }
        assert_eq!(p["workload"], "execl");
        assert_eq!(p["machine"], "12x32");
        assert_eq!(p["unit"], "ops/s");
        assert!(p["value"].as_f64().unwrap() > 0.0, "{p}");
    }
    let mut designs: Vec<&str> = points.iter().map(|p| p["imap"].as_str().unwrap()).collect();
    designs.sort_unstable();
    designs.dedup();
    assert_eq!(
        designs,
        ["adaptive", "distributed", "single", "split", "split-locked"]
    );
    for file in [
        "points.jsonl",
        "results.jsonl",
        "table.txt",
        "table.md",
        "breakdown.md",
        "execl.svg",
        "index.html",
    ] {
        assert!(dir.path().join(file).exists(), "no {file}");
    }
}

#[test]
fn a_bad_machine_description_is_one_line() {
    for (machine, says) in [
        ("0x32", "node"),
        ("12x0", "CPU"),
        ("no-such-machine", "no-such-machine"),
    ] {
        let out = vmbench(&["project", "--quick", "--machine", machine]);
        assert!(!out.status.success(), "{machine} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{machine}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.json");
    let mut m: serde_json::Value = serde_json::from_str(
        r#"{"name":"bad","nodes":2,"cpus_per_node":4,"ccx_cpus":4,"ccx_ns":20.0,
            "node_ns":40.0,"remote_ns":[[0.0,100.0,100.0]],"wake_ns":5000.0,
            "sleep_ns":3000.0,"source":"test"}"#,
    )
    .unwrap();
    std::fs::write(&file, m.to_string()).unwrap();
    let out = vmbench(&["project", "--quick", "--machine", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.trim_end().lines().count() == 1,
        "{err}"
    );
    assert!(err.contains("matrix"), "{err}");
    m["remote_ns"] = serde_json::json!([[0.0, 100.0], [100.0, 0.0]]);
    m["ccx_ns"] = serde_json::json!(-1.0);
    std::fs::write(&file, m.to_string()).unwrap();
    let out = vmbench(&["project", "--quick", "--machine", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.trim_end().lines().count() == 1,
        "{err}"
    );
    assert!(err.contains("ccx_ns"), "{err}");
}

#[test]
fn validation_reports_predicted_measured_and_error_and_its_status_follows_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let args = |bound: &'static str| {
        vec![
            "project".to_string(),
            "--validate".to_string(),
            "--quick".to_string(),
            "--workloads".to_string(),
            "brk1".to_string(),
            "--index".to_string(),
            "maple".to_string(),
            "--repeat".to_string(),
            "1".to_string(),
            "--bound".to_string(),
            bound.to_string(),
            "--json".to_string(),
            "--out".to_string(),
            dir.path().to_str().unwrap().to_string(),
        ]
    };
    let run = |bound| {
        let a = args(bound);
        vmbench(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let out = run("1000");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = json_lines(&out);
    // brk1 in both modes.
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in &rows {
        for field in ["workload", "config", "predicted", "measured", "error"] {
            assert!(r.get(field).is_some(), "no {field} in {r}");
        }
        let (p, m, e) = (
            r["predicted"].as_f64().unwrap(),
            r["measured"].as_f64().unwrap(),
            r["error"].as_f64().unwrap(),
        );
        assert!(p > 0.0 && m > 0.0, "{r}");
        assert!(((p - m) / m - e).abs() < 1e-9, "{r}");
        // On this machine, measured again before its one run: one
        // prediction from one description, which is the one compared.
        let runs = r["predicted_runs"].as_array().unwrap();
        let ns = r["transfer_ns"].as_array().unwrap();
        assert_eq!((runs.len(), ns.len()), (1, 1), "{r}");
        assert_eq!(runs[0].as_f64(), Some(p), "{r}");
        assert!(ns[0].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(dir.path().join("validation.md").exists());
    // No prediction is exact: a bound of zero fails the run.
    assert!(!run("0.0000001").status.success());
}

/// `--validate` writes what each prediction came from; `--replay` predicts
/// again from it without running anything and gets the same figures, and
/// judges a different model (here: profiles whose steps take twice as
/// long, written into the evidence) against the same measurements.
#[test]
fn replay_predicts_again_from_the_evidence_a_validation_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("validate");
    let out = vmbench(&[
        "project",
        "--validate",
        "--quick",
        "--workloads",
        "mmap1",
        "--index",
        "maple",
        "--repeat",
        "1",
        "--bound",
        "1000",
        "--json",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = json_lines(&out);
    let evidence = out_dir.join("evidence.jsonl.gz");
    assert!(evidence.exists());

    // Replays `from` into `out` under `dir`, and its rows.
    let replay = |from: &std::path::Path, out: &str| {
        let o = vmbench(&[
            "project",
            "--replay",
            from.to_str().unwrap(),
            "--bound",
            "1000",
            "--json",
            "--out",
            dir.path().join(out).to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        json_lines(&o)
    };
    let again = replay(&out_dir, "replay");
    assert_eq!(rows.len(), again.len());
    for (a, b) in rows.iter().zip(&again) {
        for field in ["workload", "config", "cpus", "measured", "measured_runs"] {
            assert_eq!(a[field], b[field], "{field}: {a} against {b}");
        }
        let (p, q) = (
            a["predicted"].as_f64().unwrap(),
            b["predicted"].as_f64().unwrap(),
        );
        assert!((p / q - 1.0).abs() < 1e-9, "{a} against {b}");
    }
    assert!(dir.path().join("replay/validation.md").exists());

    // The same evidence with a model of slower CPUs: every run step of
    // every profile takes twice as long. Processes mode shares nothing, so
    // its prediction halves exactly; threads mode's falls too. The
    // measurements stay, and each error is against them.
    let text = {
        use std::io::Read;
        let mut s = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&evidence).unwrap())
            .read_to_string(&mut s)
            .unwrap();
        s
    };
    let mut slow = String::new();
    for line in text.lines() {
        let mut e: serde_json::Value = serde_json::from_str(line).unwrap();
        // Threads mode's two or more CPUs run the interleaved operations.
        let mut profile = Some(&mut e["profile"]);
        while let Some(p) = profile {
            for op in p["ops"].as_array_mut().unwrap() {
                for step in op.as_array_mut().unwrap() {
                    if step["step"] == "run" {
                        step["ns"] = serde_json::json!(step["ns"].as_f64().unwrap() * 2.0);
                    }
                }
            }
            profile = p.get_mut("interleaved");
        }
        slow.push_str(&e.to_string());
        slow.push('\n');
    }
    let slow_file = dir.path().join("slow.jsonl");
    std::fs::write(&slow_file, slow).unwrap();
    for (a, b) in rows.iter().zip(&replay(&slow_file, "slow")) {
        let (p, q, m) = (
            a["predicted"].as_f64().unwrap(),
            b["predicted"].as_f64().unwrap(),
            b["measured"].as_f64().unwrap(),
        );
        match a["mode"].as_str().unwrap() {
            "processes" => assert!((q / p - 0.5).abs() < 0.01, "{a} against {b}"),
            _ => assert!(q < p * 0.9, "{a} against {b}"),
        }
        assert_eq!(a["measured"], b["measured"]);
        assert!(
            ((q - m) / m - b["error"].as_f64().unwrap()).abs() < 1e-9,
            "{b}"
        );
    }

    // `--rerecord` records the slow evidence's profiles again with this
    // build: the doubling is gone, and each profile is calibrated to the
    // one-worker rate stored beside it, so processes mode (which shares
    // nothing) is predicted as the validation predicted it, from the
    // stored measurements. The new profiles are written for a later
    // replay.
    let out = vmbench(&[
        "project",
        "--replay",
        slow_file.to_str().unwrap(),
        "--rerecord",
        "--quick",
        "--bound",
        "1000",
        "--json",
        "--out",
        dir.path().join("rerecorded").to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rerecorded = json_lines(&out);
    assert_eq!(rows.len(), rerecorded.len());
    for (a, b) in rows.iter().zip(&rerecorded) {
        assert_eq!(a["measured"], b["measured"]);
        assert_eq!(a["one_worker"], b["one_worker"]);
        let (p, q) = (
            a["predicted"].as_f64().unwrap(),
            b["predicted"].as_f64().unwrap(),
        );
        if a["mode"] == "processes" {
            assert!((q / p - 1.0).abs() < 0.01, "{a} against {b}");
        }
    }
    assert!(dir.path().join("rerecorded/evidence.jsonl.gz").exists());
    // Evidence from another machine cannot be recorded again here: one
    // line that says so.
    let elsewhere = dir.path().join("elsewhere.jsonl");
    std::fs::write(
        &elsewhere,
        std::fs::read_to_string(&slow_file)
            .unwrap()
            .replace("\"recorded_on\":\"host(", "\"recorded_on\":\"host(9x"),
    )
    .unwrap();
    let out = vmbench(&[
        "project",
        "--replay",
        elsewhere.to_str().unwrap(),
        "--rerecord",
        "--quick",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.trim_end().lines().count() == 1
            && err.contains("only the machine that measured"),
        "{err}"
    );
    // Only with --replay: one line.
    let out = vmbench(&["project", "--rerecord"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--replay"), "{err}");

    // Nothing to replay: one line that names the file.
    let missing = dir.path().join("none");
    let out = vmbench(&["project", "--replay", missing.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.trim_end().lines().count() == 1,
        "{err}"
    );
    assert!(err.contains("none"), "{err}");
}

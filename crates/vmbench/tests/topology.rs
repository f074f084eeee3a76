//! End-to-end checks of `vmbench topology`: the machine's nodes, an
//! emulated topology's map, JSON for scripts, and one-line errors.

use std::process::{Command, Output};

fn vmbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vmbench"))
        .args(args)
        .output()
        .expect("failed to start vmbench")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "vmbench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The node count the text output states.
fn host_nodes(text: &str) -> usize {
    text.lines()
        .find_map(|l| l.strip_prefix("NUMA nodes: "))
        .expect("no node count")
        .parse()
        .unwrap()
}

#[test]
fn the_machine_is_shown_with_every_node() {
    let text = stdout(&vmbench(&["topology"]));
    let nodes = host_nodes(&text);
    assert!(nodes >= 1, "{text}");
    for n in 0..nodes {
        assert!(text.contains(&format!("  node {n}: CPUs ")), "{text}");
    }
    assert!(
        text.contains("CPU model: ") && text.contains("kernel: "),
        "{text}"
    );
    assert!(!text.contains("emulated"), "{text}");
}

#[test]
fn an_emulated_topology_shows_where_its_vcpus_run() {
    let text = stdout(&vmbench(&["topology", "--emulate", "12x32"]));
    assert!(
        text.contains("emulated 12x32: 12 nodes x 32 vCPUs = 384 vCPUs on "),
        "{text}"
    );
    assert!(
        text.contains("  node 0: vCPUs 0-31 -> real CPUs "),
        "{text}"
    );
    assert!(
        text.contains("  node 11: vCPUs 352-383 -> real CPUs "),
        "{text}"
    );
    assert!(!text.contains("node 12:"), "{text}");

    let json = stdout(&vmbench(&["topology", "--emulate", "12x32", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).expect("one JSON object");
    let e = &v["emulated"];
    assert_eq!(e["nodes"], 12);
    assert_eq!(e["vcpus_per_node"], 32);
    assert_eq!(e["real_cpu_of"].as_array().unwrap().len(), 384);
    assert_eq!(e["node_map"].as_array().unwrap().len(), 12);
    assert_eq!(
        v["host_nodes"].as_array().unwrap().len(),
        host_nodes(&stdout(&vmbench(&["topology"])))
    );
    assert!(v["machine"]["cpus"].as_u64().unwrap() >= 1);
}

#[test]
fn bad_emulations_are_one_line_errors() {
    for bad in ["0x4", "4x0", "host", "lots"] {
        let out = vmbench(&["topology", "--emulate", bad]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bad}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{bad}: {stderr}");
        assert!(stderr.starts_with("error: --emulate"), "{bad}: {stderr}");
        assert!(out.stdout.is_empty(), "{bad}");
    }
}

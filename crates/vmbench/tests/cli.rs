//! End-to-end checks of the `vmbench tree` command line: the JSON output is
//! machine-readable and complete, and bad input fails cleanly.

use std::collections::BTreeSet;
use std::process::{Command, Output};

fn vmbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vmbench"))
        .args(args)
        .output()
        .expect("failed to start vmbench")
}

const ALL_OPS: [&str; 16] = [
    "load",
    "load_pin",
    "insert_asc",
    "insert_rand",
    "erase_rand",
    "iter",
    "gap_rev",
    "gap_fwd",
    "gap_rev_far",
    "gap_fwd_far",
    "load_with_writer",
    "load_no_writer",
    "bytes_asc",
    "bytes_rand",
    "bytes_total_asc",
    "bytes_total_rand",
];
const ALL_IMPLS: [&str; 7] = [
    "maple",
    "maple-shared",
    "btreemap",
    "rwlock-btreemap",
    "rangemap",
    "scc-treeindex",
    "crossbeam-skiplist",
];

#[test]
fn tree_json_lines_cover_every_op_and_impl() {
    let out = vmbench(&[
        "tree", "--quick", "--sizes", "1000", "--repeat", "1", "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "vmbench failed: {stderr}");

    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let (mut ops, mut impls) = (BTreeSet::new(), BTreeSet::new());
    for line in stdout.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let imp = v["impl"]
            .as_str()
            .unwrap_or_else(|| panic!("no impl: {line}"));
        let op = v["op"].as_str().unwrap_or_else(|| panic!("no op: {line}"));
        assert_eq!(v["n"].as_u64(), Some(1000), "{line}");
        let threads = v["threads"]
            .as_u64()
            .unwrap_or_else(|| panic!("no threads: {line}"));
        assert_eq!(
            threads,
            if op == "load_with_writer" { 2 } else { 1 },
            "{line}"
        );
        let value = v["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("no value: {line}"));
        assert!(value.is_finite() && value > 0.0, "{line}");
        let unit = v["unit"]
            .as_str()
            .unwrap_or_else(|| panic!("no unit: {line}"));
        assert!(
            ["ns/op", "ns/entry", "bytes/entry"].contains(&unit),
            "{line}"
        );
        ops.insert(op.to_string());
        impls.insert(imp.to_string());
    }
    for op in ALL_OPS {
        assert!(ops.contains(op), "op {op} missing from output:\n{stdout}");
    }
    for imp in ALL_IMPLS {
        assert!(
            impls.contains(imp),
            "impl {imp} missing from output:\n{stdout}"
        );
    }
    assert_eq!(ops.len(), ALL_OPS.len(), "unexpected ops: {ops:?}");
    assert_eq!(impls.len(), ALL_IMPLS.len(), "unexpected impls: {impls:?}");
}

/// Asserts a failed run with exactly one line of error text and no stdout.
fn assert_one_line_error(args: &[&str], needle: &str) {
    let out = vmbench(args);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(out.stdout.is_empty(), "{args:?} printed to stdout");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?} stderr: {stderr}"
    );
    assert!(stderr.contains(needle), "{args:?} stderr: {stderr}");
}

#[test]
fn invalid_values_fail_with_one_line() {
    assert_one_line_error(&["tree", "--sizes", "0"], "size 0");
    assert_one_line_error(&["tree", "--sizes", "1000", "--repeat", "0"], "--repeat");
    // Names are clap's to refuse, with the list of valid ones.
    assert_one_line_error(
        &["tree", "--ops", "load,nope"],
        "invalid value 'nope' for '--ops",
    );
    assert_one_line_error(
        &["tree", "--ops", "load,nope"],
        "[possible values: load, load_pin,",
    );
    assert_one_line_error(
        &["tree", "--impls", "avl"],
        "invalid value 'avl' for '--impls",
    );
}

#[test]
fn counts_and_durations_are_bounded() {
    // Once a panic ("capacity overflow") and an abort on a 32 GiB
    // allocation; now a clear error before anything runs.
    for cmd in ["tree", "itree"] {
        for n in ["18446744073709551615", "4294967296", "1001"] {
            assert_one_line_error(&[cmd, "--repeat", n], "1 to 1000");
        }
    }
    // Too short to complete an operation: refused instead of 0 ops/s.
    assert_one_line_error(&["run", "--duration", "1e-9"], "0.01 to 3600");
}

#[test]
fn itree_json_lines_cover_both_kinds_and_every_op() {
    let out = vmbench(&[
        "itree", "--quick", "--sizes", "200,1e3", "--repeat", "1", "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "vmbench itree failed: {stderr}");
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let mut seen = BTreeSet::new();
    for line in stdout.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let imp = v["impl"]
            .as_str()
            .unwrap_or_else(|| panic!("no impl: {line}"));
        let op = v["op"].as_str().unwrap_or_else(|| panic!("no op: {line}"));
        let n = v["n"].as_u64().unwrap_or_else(|| panic!("no n: {line}"));
        let value = v["value"]
            .as_f64()
            .unwrap_or_else(|| panic!("no value: {line}"));
        assert!(value.is_finite() && value > 0.0, "{line}");
        assert_eq!(v["unit"].as_str(), Some("ops/s"), "{line}");
        assert_eq!(v["threads"].as_u64(), Some(1), "{line}");
        assert!(
            seen.insert((imp.to_string(), op.to_string(), n)),
            "repeated: {line}"
        );
    }
    let mut want = BTreeSet::new();
    for imp in ["rb", "btree"] {
        for op in ["churn", "query_page", "query_first"] {
            for n in [200, 1000] {
                want.insert((imp.to_string(), op.to_string(), n));
            }
        }
    }
    assert_eq!(seen, want, "{stdout}");
}

#[test]
fn itree_table_has_ratio_column_and_bad_input_fails() {
    let out = vmbench(&[
        "itree",
        "--sizes",
        "100",
        "--repeat",
        "1",
        "--ops",
        "query_first",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("btree/rb") && table.contains("query_first"),
        "{table}"
    );
    assert!(!table.contains("│ churn"), "{table}");
    assert_one_line_error(&["itree", "--sizes", "0"], "size 0");
    assert_one_line_error(&["itree", "--repeat", "0"], "--repeat");
    assert_one_line_error(
        &["itree", "--ops", "churn,nope"],
        "invalid value 'nope' for '--ops",
    );
}

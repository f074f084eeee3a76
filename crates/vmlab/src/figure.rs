//! Result records and their two renderings: a comfy-table for people and
//! one JSON object per line for scripts.
//!
//! Records carry plain strings rather than benchmark-specific enums so that
//! every subcommand can share this module.

use std::collections::BTreeMap;
use std::io::{self, Write};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use serde::Serialize;

/// One measured figure: the median over repetitions of one operation on one
/// implementation at one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// Implementation name, e.g. `maple` (serialized as `impl`, a Rust keyword).
    #[serde(rename = "impl")]
    pub imp: &'static str,
    /// Operation name, e.g. `load`.
    pub op: &'static str,
    /// Number of entries in the structure.
    pub n: usize,
    /// Threads running during the measurement (reader plus writers).
    pub threads: usize,
    /// The figure, in `unit`.
    pub value: f64,
    /// `ns/op`, `ns/entry` or `bytes/entry`.
    pub unit: &'static str,
}

/// Writes `record` as a single JSON line and flushes, so a consumer sees
/// results as they are produced even if a long run is interrupted.
pub fn write_json_line(out: &mut impl Write, record: &Figure) -> io::Result<()> {
    serde_json::to_writer(&mut *out, record)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// How to lay out a table: row and column order and the ratio column.
#[derive(Debug, Clone)]
pub struct TableSpec<'a> {
    /// Operations in the order their rows should appear.
    pub op_order: &'a [&'static str],
    /// Implementations in the order their columns should appear.
    pub impl_order: &'a [&'static str],
    /// Header of the ratio column.
    pub ratio_header: &'a str,
    /// Candidate `(numerator, denominator)` implementation pairs; a row's
    /// ratio uses the first pair for which it has both values.
    pub ratio_pairs: &'a [(&'static str, &'static str)],
}

/// Renders `records` as a table with one row per (op, n) and one column per
/// implementation that has at least one value.
pub fn render_table(records: &[Figure], spec: &TableSpec<'_>) -> String {
    let cells = index_cells(records);
    let columns: Vec<&str> = spec
        .impl_order
        .iter()
        .copied()
        .filter(|imp| records.iter().any(|r| r.imp == *imp))
        .collect();

    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec!["op", "n"];
    header.extend(&columns);
    header.push(spec.ratio_header);
    table.set_header(header);

    for (op, n) in row_keys(records, spec.op_order) {
        let mut row = vec![op.to_string(), n.to_string()];
        for imp in &columns {
            row.push(
                cells
                    .get(&(op, n, *imp))
                    .map_or_else(|| "-".to_string(), format_value),
            );
        }
        row.push(ratio_cell(&cells, op, n, spec.ratio_pairs));
        table.add_row(row);
    }
    for column in table.column_iter_mut().skip(1) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    table.to_string()
}

/// Lookup from (op, n, impl) to its record.
type Cells<'r> = BTreeMap<(&'static str, usize, &'static str), &'r Figure>;

fn index_cells(records: &[Figure]) -> Cells<'_> {
    records.iter().map(|r| ((r.op, r.n, r.imp), r)).collect()
}

/// Distinct (op, n) pairs, ordered by `op_order` (unknown ops last, in order
/// of appearance) and then by ascending n.
fn row_keys(records: &[Figure], op_order: &[&'static str]) -> Vec<(&'static str, usize)> {
    let rank = |op: &str| op_order.iter().position(|o| *o == op).unwrap_or(usize::MAX);
    let mut keys: Vec<(&'static str, usize)> = Vec::new();
    for r in records {
        if !keys.contains(&(r.op, r.n)) {
            keys.push((r.op, r.n));
        }
    }
    // Stable sort keeps appearance order among equally ranked unknown ops.
    keys.sort_by_key(|&(op, n)| (rank(op), n));
    keys
}

fn ratio_cell(
    cells: &Cells<'_>,
    op: &'static str,
    n: usize,
    pairs: &[(&'static str, &'static str)],
) -> String {
    pairs
        .iter()
        .find_map(|(num, den)| {
            let a = cells.get(&(op, n, *num))?;
            let b = cells.get(&(op, n, *den))?;
            (b.value > 0.0).then(|| {
                let r = a.value / b.value;
                // Far below 1, two decimals would round to 0.00x: show the
                // inverse instead ("1/675x" = 675 times less).
                if r < 0.05 {
                    format!("1/{:.0}x", 1.0 / r)
                } else {
                    format!("{r:.2}x")
                }
            })
        })
        .unwrap_or_else(|| "-".to_string())
}

/// Human formatting: enough digits to compare, never scientific notation.
fn format_value(r: &&Figure) -> String {
    let digits = if r.value >= 100.0 { 0 } else { 1 };
    format!("{:.*} {}", digits, r.value, r.unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(imp: &'static str, op: &'static str, n: usize, value: f64) -> Figure {
        Figure {
            imp,
            op,
            n,
            threads: 1,
            value,
            unit: "ns/op",
        }
    }

    #[test]
    fn json_line_uses_impl_key() {
        let mut buf = Vec::new();
        write_json_line(&mut buf, &rec("maple", "load", 10, 1.5)).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.ends_with('\n') && text.lines().count() == 1);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["impl"], "maple");
        assert_eq!(v["n"], 10);
        assert_eq!(v["unit"], "ns/op");
    }

    #[test]
    fn table_orders_rows_and_computes_ratio() {
        let records = vec![
            rec("btreemap", "load", 100, 20.0),
            rec("maple", "load", 100, 10.0),
            rec("maple", "iter", 10, 3.0),
            rec("maple", "load", 10, 5.0),
        ];
        let spec = TableSpec {
            op_order: &["load", "iter"],
            impl_order: &["maple", "btreemap", "unused"],
            ratio_header: "maple/btreemap",
            ratio_pairs: &[("maple", "btreemap")],
        };
        let table = render_table(&records, &spec);
        assert!(!table.contains("unused"));
        let load10 = table.find("5.0 ns/op").unwrap();
        let load100 = table.find("10.0 ns/op").unwrap();
        let iter10 = table.find("3.0 ns/op").unwrap();
        assert!(load10 < load100 && load100 < iter10, "{table}");
        assert!(table.contains("0.50x"), "{table}");
    }
}

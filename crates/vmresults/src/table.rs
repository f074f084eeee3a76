//! The comparison table model and its three renderings: text for the
//! terminal ([`render_text`]), GitHub Markdown ([`render_markdown`]) and
//! HTML ([`render_html`], also what the page shows).
//!
//! A [`WorkloadTable`] is built by [`crate::compare`]; every rendering
//! takes each cell's words from [`Cell::text`] and the column alignment
//! from [`WorkloadTable::label_columns`], so the three show the same cells
//! in the same places and differ only in markup. The HTML comes from the
//! template `table.html.j2` (minijinja, HTML auto-escaping), the same one
//! the page includes.
//!
//! ```
//! use vmresults::compare::{Cell, Row, Summary, WorkloadTable};
//! use vmresults::table;
//! let t = WorkloadTable {
//!     workload: "brk1".into(),
//!     header: vec!["metric".into(), "maple".into()],
//!     rows: vec![Row {
//!         labels: vec!["ops/s".into()],
//!         cells: vec![Cell::Mean(Summary { mean: 1000.0, stddev: 10.0, n: 5 })],
//!     }],
//!     legend: vec!["n = 5".into()],
//! };
//! let tables = [t];
//! assert!(table::render_text(&tables).contains("1000 ±1.0%"));
//! assert!(table::render_markdown(&tables).contains("| ops/s | 1000 ±1.0% |"));
//! assert!(table::render_html(&tables).contains("<td class=\"r\">1000 ±1.0%</td>"));
//! ```

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use serde::Serialize;

use crate::compare::{Change, Summary};

/// One cell of a [`WorkloadTable`].
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// No sample on this side: printed `-`, never as 0.
    Missing,
    /// Samples exist but have no mean (a rate of 0 or below): `n/a`.
    Unusable,
    /// A mean and its spread (the baseline column, or A and B).
    Mean(Summary),
    /// A mean and its change against the row's baseline.
    MeanVs(Summary, Change),
    /// Only the change (the `B vs A` column of a comparison).
    Diff(Change),
    /// Only the test's p-value (the significance column of a comparison).
    Test(Change),
}

impl Cell {
    /// The change this cell reports as a difference (not the p-value
    /// column, which repeats its row's change), if any.
    pub fn change(&self) -> Option<&Change> {
        match self {
            Cell::MeanVs(_, c) | Cell::Diff(c) => Some(c),
            _ => None,
        }
    }

    /// The summary the cell shows, if any.
    pub fn summary(&self) -> Option<&Summary> {
        match self {
            Cell::Mean(s) | Cell::MeanVs(s, _) => Some(s),
            _ => None,
        }
    }

    /// The cell's words, the same in every rendering: `-`, `n/a`,
    /// `12345 ±1.2%`, `12345 ±1.2% +5.3%* better`, `p=0.012 *`.
    pub fn text(&self) -> String {
        match self {
            Cell::Missing => "-".to_string(),
            Cell::Unusable => "n/a".to_string(),
            Cell::Mean(s) => mean_text(s),
            Cell::MeanVs(s, c) => format!("{} {}", mean_text(s), change_text(c)),
            Cell::Diff(c) => change_text(c),
            Cell::Test(c) => match c.p {
                None => "no test".to_string(),
                Some(p) => {
                    let mark = if c.significant() { " *" } else { "" };
                    if p < 0.001 {
                        format!("p<0.001{mark}")
                    } else {
                        format!("p={p:.3}{mark}")
                    }
                }
            },
        }
    }
}

/// `+5.3%* better`: the change, the significance mark, the verdict.
fn change_text(c: &Change) -> String {
    let mark = if c.significant() { "*" } else { "" };
    match c.percent {
        Some(p) => format!("{p:+.1}%{mark} {}", c.verdict()),
        None => format!("n/a{mark} (base is 0)"),
    }
}

/// `12345 ±1.2%`: the mean with enough digits to compare and its standard
/// deviation as a percentage of the mean (left out for a single value).
fn mean_text(s: &Summary) -> String {
    let value = format_number(s.mean);
    if s.n >= 2 && s.mean != 0.0 {
        format!("{value} ±{:.1}%", s.stddev / s.mean.abs() * 100.0)
    } else {
        value
    }
}

/// Three significant digits or more, never scientific notation.
fn format_number(v: f64) -> String {
    let a = v.abs();
    let decimals = if a >= 100.0 || a == 0.0 {
        0
    } else {
        // 2 - floor(log10 a) decimals: three significant digits.
        (2 - a.log10().floor() as i32).clamp(1, 12) as usize
    };
    format!("{v:.decimals$}")
}

/// One row of a [`WorkloadTable`].
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The row's key columns: metric, mean kind, threads (and config in a
    /// comparison of two result sets).
    pub labels: Vec<String>,
    /// One cell per value column.
    pub cells: Vec<Cell>,
}

impl Row {
    /// Every column's words: the labels, then each cell's [`Cell::text`].
    pub fn texts(&self) -> Vec<String> {
        self.labels
            .iter()
            .cloned()
            .chain(self.cells.iter().map(Cell::text))
            .collect()
    }
}

/// The comparison table of one workload, with everything needed to render
/// it as text, Markdown or HTML.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadTable {
    /// The workload, e.g. `brk1`.
    pub workload: String,
    /// Column headers: the label columns, then the value columns.
    pub header: Vec<String>,
    /// The rows, in first-seen metric order and ascending threads.
    pub rows: Vec<Row>,
    /// Lines explaining how to read the table.
    pub legend: Vec<String>,
}

impl WorkloadTable {
    /// How many leading columns are labels (left-aligned); the value
    /// columns after them are right-aligned in every rendering.
    pub fn label_columns(&self) -> usize {
        self.rows.first().map_or(0, |r| r.labels.len())
    }
}

/// The tables as text: per workload a heading, a comfy-table and its legend.
pub fn render_text(tables: &[WorkloadTable]) -> String {
    let mut out = String::new();
    for t in tables {
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED);
        table.set_header(t.header.clone());
        for row in &t.rows {
            table.add_row(row.texts());
        }
        for column in table.column_iter_mut().skip(t.label_columns()) {
            column.set_cell_alignment(CellAlignment::Right);
        }
        out.push_str(&format!("{}\n{table}\n", t.workload));
        for line in &t.legend {
            out.push_str(&format!("  {line}\n"));
        }
        out.push('\n');
    }
    out
}

/// Escapes what GitHub Markdown would otherwise read inside a table cell.
fn md_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        if matches!(ch, '|' | '*' | '_' | '\\' | '`') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// The tables as GitHub Markdown: per workload a heading, a table whose
/// value columns are right-aligned, and the legend as a list.
pub fn render_markdown(tables: &[WorkloadTable]) -> String {
    let mut out = String::new();
    for t in tables {
        out.push_str(&format!("### {}\n\n", md_escape(&t.workload)));
        let cells: Vec<String> = t.header.iter().map(|h| md_escape(h)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
        let align: Vec<&str> = (0..t.header.len())
            .map(|i| {
                if i < t.label_columns() {
                    ":---"
                } else {
                    "---:"
                }
            })
            .collect();
        out.push_str(&format!("|{}|\n", align.join("|")));
        for row in &t.rows {
            let cells: Vec<String> = row.texts().iter().map(|c| md_escape(c)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out.push('\n');
        for line in &t.legend {
            out.push_str(&format!("- {}\n", md_escape(line)));
        }
        out.push('\n');
    }
    out
}

/// The tables as HTML: per workload an `<h3>` heading, a `<table>` and the
/// legend as a list. Value columns have class `r` (right-aligned); a cell
/// whose change is significant also has `sig` and its verdict (`better`,
/// `worse`), so a style sheet can colour it. Every text is HTML-escaped.
pub fn render_html(tables: &[WorkloadTable]) -> String {
    let context = minijinja::context! { tables => html_views(tables) };
    // The template is part of the crate and its tests render it; its
    // input is plain strings, which cannot make a render fail.
    crate::page::render_template(crate::page::TABLE_TEMPLATE, context)
        .expect("the table template renders any table")
}

/// A column heading as the HTML template shows it.
#[derive(Debug, Serialize)]
pub(crate) struct HeadView<'a> {
    text: &'a str,
    class: &'static str,
}

/// A cell as the HTML template shows it.
#[derive(Debug, Serialize)]
pub(crate) struct CellView {
    text: String,
    class: String,
}

/// A table as the HTML template shows it: the same words as the text and
/// Markdown renderings, with the classes that align and mark them.
#[derive(Debug, Serialize)]
pub(crate) struct TableView<'a> {
    workload: &'a str,
    header: Vec<HeadView<'a>>,
    rows: Vec<Vec<CellView>>,
    legend: &'a [String],
}

/// The class of column `i` of `t`: `r` for a value column.
fn column_class(t: &WorkloadTable, i: usize) -> &'static str {
    if i < t.label_columns() {
        ""
    } else {
        "r"
    }
}

/// The template's view of `tables`.
pub(crate) fn html_views(tables: &[WorkloadTable]) -> Vec<TableView<'_>> {
    tables
        .iter()
        .map(|t| TableView {
            workload: &t.workload,
            header: t
                .header
                .iter()
                .enumerate()
                .map(|(i, text)| HeadView {
                    text,
                    class: column_class(t, i),
                })
                .collect(),
            rows: t
                .rows
                .iter()
                .map(|row| {
                    let marks = std::iter::repeat_n(None, row.labels.len())
                        .chain(row.cells.iter().map(Cell::change));
                    row.texts()
                        .into_iter()
                        .zip(marks)
                        .enumerate()
                        .map(|(i, (text, change))| {
                            let mut class = column_class(t, i).to_string();
                            if let Some(c) = change.filter(|c| c.significant()) {
                                class.push_str(" sig ");
                                class.push_str(c.verdict());
                            }
                            CellView {
                                text,
                                class: class.trim().to_string(),
                            }
                        })
                        .collect()
                })
                .collect(),
            legend: &t.legend,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(mean: f64) -> Summary {
        Summary {
            mean,
            stddev: mean / 100.0,
            n: 5,
        }
    }

    fn change(percent: f64, p: f64) -> Change {
        Change {
            percent: Some(percent),
            p: Some(p),
            higher_is_better: true,
        }
    }

    /// A table of every kind of cell, with names a page must not trust.
    fn hostile() -> Vec<WorkloadTable> {
        vec![WorkloadTable {
            workload: "brk1 <script>alert(1)</script>".into(),
            header: vec![
                "metric".into(),
                "threads".into(),
                "maple \"base\"".into(),
                "rule|off & <b>".into(),
                "B vs A".into(),
                "p".into(),
            ],
            rows: vec![
                Row {
                    labels: vec!["ops/s".into(), "1".into()],
                    cells: vec![
                        Cell::Mean(summary(1000.0)),
                        Cell::MeanVs(summary(400.0), change(-60.0, 0.001)),
                        Cell::Diff(change(-60.0, 0.001)),
                        Cell::Test(change(-60.0, 0.001)),
                    ],
                },
                Row {
                    labels: vec!["it's_a `metric`".into(), "2".into()],
                    cells: vec![
                        Cell::Missing,
                        Cell::Unusable,
                        Cell::Diff(change(3.0, 0.5)),
                        Cell::Test(Change {
                            p: None,
                            ..change(3.0, 0.5)
                        }),
                    ],
                },
            ],
            legend: vec!["* = significant at p < 0.05 & <i>".into()],
        }]
    }

    /// `text` with the entities minijinja's HTML escaping writes decoded.
    fn unescape_html(text: &str) -> String {
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#x27;", "'")
            .replace("&#x2f;", "/")
            .replace("&amp;", "&")
    }

    /// The contents of every `<tag ...>...</tag>` in `html`, in order.
    fn elements(html: &str, tag: &str) -> Vec<String> {
        let open = format!("<{tag}");
        let close = format!("</{tag}>");
        let mut out = Vec::new();
        let mut rest = html;
        while let Some(i) = rest.find(&open) {
            let after = &rest[i + open.len()..];
            if !after.starts_with(['>', ' ']) {
                // A longer tag with the same start (`<thead>` for `<th`).
                rest = after;
                continue;
            }
            let start = after.find('>').unwrap() + 1;
            let end = after.find(&close).unwrap();
            out.push(after[start..end].to_string());
            rest = &after[end..];
        }
        out
    }

    /// Cells of the Markdown table lines, header first, escapes removed.
    fn markdown_cells(md: &str) -> Vec<Vec<String>> {
        md.lines()
            .filter(|l| l.starts_with("| "))
            .map(|l| {
                let mut cells = vec![String::new()];
                let mut chars = l[2..l.len() - 2].chars();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => cells.last_mut().unwrap().push(chars.next().unwrap()),
                        '|' => {
                            let last = cells.last_mut().unwrap();
                            *last = last.trim().to_string();
                            cells.push(String::new());
                        }
                        c => cells.last_mut().unwrap().push(c),
                    }
                }
                cells.iter().map(|c| c.trim().to_string()).collect()
            })
            .collect()
    }

    /// Cells of the text table's header and data lines.
    fn text_cells(text: &str) -> Vec<Vec<String>> {
        text.lines()
            .filter(|l| l.starts_with('│'))
            .map(|l| {
                l.trim_matches('│')
                    .split('┆')
                    .map(|c| c.trim().to_string())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn html_markdown_and_text_show_the_same_cells() {
        let tables = hostile();
        let html = render_html(&tables);
        let mut from_html: Vec<Vec<String>> = vec![elements(&html, "th")
            .iter()
            .map(|c| unescape_html(c))
            .collect()];
        for tr in elements(&html, "tr").iter().skip(1) {
            from_html.push(
                elements(tr, "td")
                    .iter()
                    .map(|c| unescape_html(c))
                    .collect(),
            );
        }
        let from_md = markdown_cells(&render_markdown(&tables));
        let from_text = text_cells(&render_text(&tables));
        let mut expect = vec![tables[0].header.clone()];
        expect.extend(tables[0].rows.iter().map(Row::texts));
        assert_eq!(from_html, expect, "{html}");
        assert_eq!(from_md, expect);
        assert_eq!(from_text, expect);
        assert_eq!(expect[1][3], "400 ±1.0% -60.0%* worse");
        assert_eq!(expect[1][5], "p=0.001 *");
        assert_eq!(expect[2][..4], ["it's_a `metric`", "2", "-", "n/a"]);
        assert_eq!(expect[2][5], "no test");
    }

    #[test]
    fn html_escapes_every_name() {
        let html = render_html(&hostile());
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<b>") && !html.contains("<i>"), "{html}");
        for needle in [
            "<h3>brk1 &lt;script&gt;alert(1)&lt;&#x2f;script&gt;</h3>",
            "<th class=\"r\">maple &quot;base&quot;</th>",
            "<th class=\"r\">rule|off &amp; &lt;b&gt;</th>",
            "<td>it&#x27;s_a `metric`</td>",
            "<li>* = significant at p &lt; 0.05 &amp; &lt;i&gt;</li>",
        ] {
            assert!(html.contains(needle), "lacks {needle}:\n{html}");
        }
    }

    #[test]
    fn html_aligns_values_and_marks_significant_changes() {
        let html = render_html(&hostile());
        assert!(html.contains("<th>metric</th><th>threads</th><th class=\"r\">"));
        assert!(html.contains("<td>ops&#x2f;s</td><td>1</td><td class=\"r\">1000 ±1.0%</td>"));
        assert!(html.contains("<td class=\"r sig worse\">400 ±1.0% -60.0%* worse</td>"));
        assert!(html.contains("<td class=\"r sig worse\">-60.0%* worse</td>"));
        // The p column repeats the change; only the change is marked.
        assert!(html.contains("<td class=\"r\">p=0.001 *</td>"));
        assert!(html.contains("<td class=\"r\">+3.0% better</td>"));
        assert_eq!(html.matches("<table>").count(), 1);
        assert_eq!(render_html(&[]), "");
    }

    #[test]
    fn numbers_keep_three_significant_digits() {
        assert_eq!(format_number(123456.7), "123457");
        assert_eq!(format_number(12.345), "12.3");
        assert_eq!(format_number(1.2345), "1.23");
        assert_eq!(format_number(0.012345), "0.0123");
        assert_eq!(format_number(0.0), "0");
    }
}

//! A projection's and a validation's reports: the text tables printed,
//! and the results directory (points, profiles, the machine, the suite's
//! tables, the breakdown, plots and page).

use std::fmt::Write as _;
use std::path::Path;

use vmproject::{LockClass, Machine};
use vmresults::compare;
use vmresults::page::{self, Page};
use vmresults::plot;
use vmresults::samples::{self, Sample};

use super::{Contention, ProjectedPoint, Projection, Validation};
use crate::LabError;

/// 1, the powers of two below `max`, and `max`.
pub fn default_cpus(max: usize) -> Vec<usize> {
    let mut out: Vec<usize> = std::iter::successors(Some(1usize), |&c| c.checked_mul(2))
        .take_while(|&c| c < max)
        .collect();
    out.push(max);
    out
}

/// A point's column in the comparison table.
fn label(p: &ProjectedPoint) -> String {
    format!("{} {} imap={} lock={}", p.index, p.mode, p.imap, p.lock)
}

/// The points as the suite's samples: one repetition per point.
fn samples_of(points: &[ProjectedPoint]) -> Vec<Sample> {
    points
        .iter()
        .map(|p| Sample {
            workload: p.workload.clone(),
            metric: "ops/s".to_string(),
            unit: "ops/s".to_string(),
            higher_is_better: true,
            config: label(p),
            threads: p.cpus,
            rep: 0,
            value: p.value,
            cpu_wait: None,
            transfer_ns: None,
            transfer_after_ns: None,
        })
        .collect()
}

/// Where the CPUs' time went, one row per point: shares of CPU time.
pub fn breakdown_markdown(points: &[ProjectedPoint]) -> String {
    let mut s = String::from("| workload | configuration | CPUs | ops/s | outside locks |");
    for c in LockClass::ALL {
        let _ = write!(
            s,
            " {0} held | {0} spinning | {0} asleep | {0} transfers |",
            c.name()
        );
    }
    s.push_str("\n|---|---|---:|---:|---:|");
    for _ in LockClass::ALL {
        s.push_str("---:|---:|---:|---:|");
    }
    s.push('\n');
    let pct = |x: f64| format!("{:.1} %", x * 100.0);
    for p in points {
        let b: &vmproject::sim::Breakdown = &p.breakdown;
        let _ = write!(
            s,
            "| {} | {} | {} | {:.0} | {} |",
            p.workload,
            label(p),
            p.cpus,
            p.value,
            pct(b.outside)
        );
        for c in LockClass::ALL {
            let k = b.class(c);
            let _ = write!(
                s,
                " {} | {} | {} | {} |",
                pct(k.held),
                pct(k.spinning),
                pct(k.sleeping),
                pct(k.transfers)
            );
        }
        s.push('\n');
    }
    s
}

/// The projection as text: per workload, mode and index, one row per
/// design and lock kind, one column per CPU count; each cell the
/// projected ops/s and its % against the first row at that count.
pub fn projection_text(points: &[ProjectedPoint]) -> String {
    let mut groups: Vec<(String, Vec<&ProjectedPoint>)> = Vec::new();
    for p in points {
        let key = format!("{} ({}, {}) on {}", p.workload, p.mode, p.index, p.machine);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(p),
            None => groups.push((key, vec![p])),
        }
    }
    let mut out = String::new();
    for (key, g) in groups {
        let mut cpus: Vec<usize> = g.iter().map(|p| p.cpus).collect();
        cpus.sort_unstable();
        cpus.dedup();
        let mut rows: Vec<String> = Vec::new();
        for p in &g {
            let r = format!("imap={} lock={}", p.imap, p.lock);
            if !rows.contains(&r) {
                rows.push(r);
            }
        }
        let value = |row: &str, c: usize| {
            g.iter()
                .find(|p| p.cpus == c && format!("imap={} lock={}", p.imap, p.lock) == row)
                .map(|p| p.value)
        };
        let mut table: Vec<Vec<String>> = vec![std::iter::once("CPUs".to_string())
            .chain(cpus.iter().map(usize::to_string))
            .collect()];
        for (i, row) in rows.iter().enumerate() {
            let mut line = vec![row.clone()];
            for &c in &cpus {
                let cell = match (value(row, c), value(&rows[0], c)) {
                    (Some(v), Some(base)) if i > 0 && base > 0.0 => {
                        format!("{v:.0} {:+.0}%", (v / base - 1.0) * 100.0)
                    }
                    (Some(v), _) => format!("{v:.0}"),
                    (None, _) => "-".to_string(),
                };
                line.push(cell);
            }
            table.push(line);
        }
        let widths: Vec<usize> = (0..table[0].len())
            .map(|c| table.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        let _ = writeln!(out, "{key}: ops/s, % against the first row");
        for r in &table {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, &w))| {
                    if i == 0 {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            let _ = writeln!(out, "  {}", cells.join("  "));
        }
        out.push('\n');
    }
    out
}

/// Where the CPUs' time went, one line per point, naming only the lock
/// classes that took time.
pub fn breakdown_text(points: &[ProjectedPoint]) -> String {
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let mut out = String::new();
    for p in points {
        let b = &p.breakdown;
        let mut line = format!(
            "  {} {} imap={} lock={} x{}: outside locks {}",
            p.workload,
            p.mode,
            p.imap,
            p.lock,
            p.cpus,
            pct(b.outside)
        );
        for c in LockClass::ALL {
            let k = b.class(c);
            if k.held + k.spinning + k.sleeping > 0.0005 {
                let _ = write!(
                    line,
                    "; {}: held {} (line transfers {}), spinning {}, asleep {}",
                    c.name(),
                    pct(k.held),
                    pct(k.transfers),
                    pct(k.spinning),
                    pct(k.sleeping)
                );
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn write_file(path: &Path, text: &str) -> Result<(), LabError> {
    vmresults::output::write_file(path, text).map_err(LabError::from)
}

/// Writes the points, the profiles (`profiles/WORKLOAD-MODE-INDEX-IMAP.json`),
/// the machine, the tables, the plots and the page under `dir`;
/// prints the comparison table when `print` is set.
pub fn write_results(
    dir: &Path,
    machine: &Machine,
    projection: &Projection,
    print: bool,
) -> Result<(), LabError> {
    let points = &projection.points[..];
    let profiles = dir.join("profiles");
    std::fs::create_dir_all(&profiles)
        .map_err(|e| LabError(format!("creating {}: {e}", profiles.display())))?;
    for p in &projection.profiles {
        let name = format!("{}-{}-{}-{}.json", p.workload, p.mode, p.index, p.imap);
        let text = serde_json::to_string(p).map_err(|e| LabError(e.to_string()))?;
        write_file(&profiles.join(name), &text)?;
    }
    write_file(
        &dir.join("machine.json"),
        &serde_json::to_string_pretty(machine).map_err(|e| LabError(e.to_string()))?,
    )?;
    let mut jsonl = String::new();
    for p in points {
        jsonl.push_str(&serde_json::to_string(p).map_err(|e| LabError(e.to_string()))?);
        jsonl.push('\n');
    }
    write_file(&dir.join("points.jsonl"), &jsonl)?;
    let samples = samples_of(points);
    samples::write_samples(&dir.join("results.jsonl"), &samples)
        .map_err(|e| LabError(format!("writing results.jsonl: {e}")))?;
    let tables = compare::suite_tables(&samples);
    let text = compare::render_text(&tables);
    write_file(&dir.join("table.txt"), &text)?;
    write_file(&dir.join("table.md"), &compare::render_markdown(&tables))?;
    let breakdown = breakdown_markdown(points);
    write_file(&dir.join("breakdown.md"), &breakdown)?;
    let mut plots = Vec::new();
    let mut workloads: Vec<&str> = Vec::new();
    for p in points {
        if !workloads.contains(&p.workload.as_str()) {
            workloads.push(&p.workload);
        }
    }
    for w in workloads {
        let svg = dir.join(format!("{w}.svg"));
        if let Err(e) = plot::plot_workload(&samples, w, dir) {
            let what = if svg.exists() { "PNG" } else { "plot" };
            eprintln!("vmbench project: {w}: {what} not written: {e}");
        }
        if svg.exists() {
            plots.push(svg);
        }
    }
    let host = samples::Machine::detect(&mm::topology::host());
    let projected = samples::Machine {
        topology: format!(
            "projected onto {} ({} nodes x {} CPUs; {}) from profiles recorded on {}",
            machine.name, machine.nodes, machine.cpus_per_node, machine.source, host.cpu_model
        ),
        ..host
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let summary = vec![format!(
        "Simulated, not measured: every figure is a discrete-event simulation of {} from one-worker profiles recorded on this machine (docs/projection.md says how, and how far off it was where it could be checked).",
        machine.name
    )];
    let page = Page {
        title: "vmbench project",
        machine: &projected,
        command: &command,
        summary: &summary,
        tables: &tables,
        plots: &plots,
    };
    page::write_page(dir, &page).map_err(|e| LabError(format!("writing index.html: {e}")))?;
    if print {
        println!("{}", projection_text(points));
        let top = points.iter().map(|p| p.cpus).max().unwrap_or(0);
        println!("Where the CPUs' time goes, at {top} CPUs (every count: breakdown.md):\n");
        let at_top: Vec<ProjectedPoint> =
            points.iter().filter(|p| p.cpus == top).cloned().collect();
        println!("{}", breakdown_text(&at_top));
    }
    eprintln!(
        "vmbench project: {} points; results in {} (points.jsonl, results.jsonl, table.txt, table.md, breakdown.md, plots, index.html)",
        points.len(),
        dir.display()
    );
    Ok(())
}

/// The validation table: one row per prediction, and the error's spread.
pub fn validation_markdown(rows: &[Validation], bound: f64) -> String {
    let mut s = String::from(
        "| workload | configuration | mode | workers | 1 worker (ops/s) | its runs' spread | predicted | measured | its runs' spread | error | contended, predicted / measured |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        let mark = if r.error.abs() > bound {
            " **over**"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.0} | {:.1} % | {:.0} | {:.0} | {:.1} % | {:+.1} %{mark} | {} |",
            r.workload,
            r.config,
            r.mode,
            r.cpus,
            r.one_worker,
            spread(&r.one_worker_runs) * 100.0,
            r.predicted,
            r.measured,
            spread(&r.measured_runs) * 100.0,
            r.error * 100.0,
            contention_cell(&r.contended)
        );
    }
    if !rows.is_empty() {
        let mut abs: Vec<f64> = rows.iter().map(|r| r.error.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let mut spreads: Vec<f64> = rows.iter().map(|r| spread(&r.measured_runs)).collect();
        spreads.sort_by(f64::total_cmp);
        let _ = writeln!(
            s,
            "\n{} predictions: median |error| {:.1} %, largest {:.1} %; {} outside ±{:.0} %. \
             The measured runs of one point spread (largest over smallest, less one) by a \
             median of {:.1} %, at most {:.1} %.",
            rows.len(),
            abs[abs.len() / 2] * 100.0,
            abs[abs.len() - 1] * 100.0,
            abs.iter().filter(|&&e| e > bound).count(),
            bound * 100.0,
            spreads[spreads.len() / 2] * 100.0,
            spreads[spreads.len() - 1] * 100.0,
        );
    }
    s
}

/// The classes whose acquisitions waited at least once in 200 in the
/// simulation or on the machine, with both shares (`-` for none).
fn contention_cell(contended: &[Contention]) -> String {
    let shown: Vec<String> = contended
        .iter()
        .filter(|c| c.predicted.max(c.measured) >= 0.005)
        .map(|c| {
            format!(
                "{} {:.1} / {:.1} %",
                c.class.name(),
                c.predicted * 100.0,
                c.measured * 100.0
            )
        })
        .collect();
    if shown.is_empty() {
        "-".to_string()
    } else {
        shown.join("; ")
    }
}

/// How far ascending `runs` spread: the largest over the smallest, less
/// one (0 for one run).
fn spread(runs: &[f64]) -> f64 {
    match (runs.first(), runs.last()) {
        (Some(&lo), Some(&hi)) if lo > 0.0 => hi / lo - 1.0,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(one: &[f64], measured: &[f64], predicted: f64) -> Validation {
        let median = |v: &[f64]| v[v.len() / 2];
        Validation {
            workload: "brk1".to_string(),
            config: "maple processes".to_string(),
            mode: "processes".to_string(),
            index: "maple".to_string(),
            imap: "single".to_string(),
            lock: "rwsem".to_string(),
            anon_rule: true,
            cpus: 2,
            one_worker: median(one),
            one_worker_runs: one.to_vec(),
            predicted,
            predicted_runs: vec![predicted],
            transfer_ns: vec![30.0],
            measured: median(measured),
            measured_runs: measured.to_vec(),
            error: (predicted - median(measured)) / median(measured),
            unit: "ops/s".to_string(),
            contended: vec![],
            scaled: vec![],
        }
    }

    /// Each row shows how far its runs spread, and the summary counts the
    /// misses and gives the median and largest spread.
    #[test]
    fn the_validation_table_shows_the_runs_spread() {
        let rows = [
            row(&[100.0, 105.0, 110.0], &[190.0, 200.0, 228.0], 210.0),
            row(&[100.0], &[100.0], 150.0),
        ];
        let md = validation_markdown(&rows, 0.15);
        assert!(
            md.contains("| 105 | 10.0 % | 210 | 200 | 20.0 % | +5.0 % | - |"),
            "{md}"
        );
        assert!(
            md.contains("| 100 | 0.0 % | 150 | 100 | 0.0 % | +50.0 % **over** | - |"),
            "{md}"
        );
        assert!(
            md.contains("1 outside ±15 %. The measured runs of one point spread (largest over smallest, less one) by a median of 20.0 %, at most 20.0 %."),
            "{md}"
        );
    }

    /// The contention column names the classes that waited, predicted
    /// then measured, and leaves out those that (nearly) never did.
    #[test]
    fn the_validation_table_compares_how_often_locks_waited() {
        let mut r = row(&[100.0], &[100.0], 100.0);
        r.contended = vec![
            Contention {
                class: LockClass::MmapLock,
                predicted: 0.031,
                measured: 0.052,
            },
            Contention {
                class: LockClass::VmaLock,
                predicted: 0.0,
                measured: 0.001,
            },
        ];
        let md = validation_markdown(&[r], 0.15);
        assert!(md.contains("| +0.0 % | mmap_lock 3.1 / 5.2 % |"), "{md}");
        assert!(!md.contains("vma_lock"), "{md}");
    }
}

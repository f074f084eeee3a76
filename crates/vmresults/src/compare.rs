//! Comparison tables in the form kernel developers read: one run's
//! configurations against its baseline ([`suite_tables`]), or run B
//! against run A ([`compare`]).
//!
//! A cell summarises the repetitions of one figure: its mean (harmonic for
//! rates, because the harmonic mean of ops/s is the rate of the mean time
//! per op; arithmetic for times), its spread, and, against the baseline,
//! the % change and whether that change is significant by Welch's t-test.
//! Welch's test is used rather than Student's because two designs rarely
//! have the same variance, and rather than a bootstrap because a handful of
//! repetitions is too few to resample.
//!
//! The mean, the variance and Student's t distribution come from `statrs`;
//! what is computed here is Welch's statistic and its degrees of freedom,
//! tested against p-values computed independently.
//!
//! The tables are rendered by [`crate::table`]; the model and renderers are
//! re-exported here, where they have always been.

use std::fmt;

use statrs::distribution::{ContinuousCDF, StudentsT};
use statrs::statistics::Statistics;

use crate::group::{self, Metric};
use crate::samples::{alike, Sample};
pub use crate::table::{render_html, render_markdown, render_text, Cell, Row, WorkloadTable};

/// The significance level: a difference is marked when Welch's two-sided
/// p-value is below it.
pub const ALPHA: f64 = 0.05;

/// Summary of one cell: the mean over repetitions (harmonic for rates, i.e.
/// `higher_is_better`, arithmetic for times), sample standard deviation,
/// count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Harmonic mean for rates, arithmetic mean for times.
    pub mean: f64,
    /// Sample standard deviation (n - 1) of the raw values; 0 for a single
    /// value, where no spread can be measured (the cell then shows no `±`).
    pub stddev: f64,
    /// Number of repetitions.
    pub n: usize,
}

/// Summarises `values`. `None` for no values, a non-finite value, or, for a
/// rate, a value of 0 or below (a harmonic mean needs positive values, and
/// a rate of 0 means the run measured nothing).
pub fn summarize(values: &[f64], higher_is_better: bool) -> Option<Summary> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    if higher_is_better && values.iter().any(|&v| v <= 0.0) {
        return None;
    }
    let (arithmetic, variance) = mean_var(values);
    let mean = if higher_is_better {
        values.iter().harmonic_mean()
    } else {
        arithmetic
    };
    Some(Summary {
        mean,
        stddev: variance.map_or(0.0, f64::sqrt),
        n: values.len(),
    })
}

/// The arithmetic mean and the sample variance (n - 1) of `values`, the
/// one place either is computed; the variance is `None` below two values.
fn mean_var(values: &[f64]) -> (f64, Option<f64>) {
    let variance = (values.len() >= 2).then(|| values.iter().variance());
    (values.iter().mean(), variance)
}

/// Welch's t-test, two-sided p-value. `None` where there is no test:
/// either side has fewer than 2 values, neither side varies, a value is
/// not finite, or the statistic overflows.
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.iter().chain(b).any(|v| !v.is_finite()) {
        return None;
    }
    let (mean_a, var_a) = mean_var(a);
    let (mean_b, var_b) = mean_var(b);
    let sa = var_a? / a.len() as f64;
    let sb = var_b? / b.len() as f64;
    let se2 = sa + sb;
    if !(se2 > 0.0 && se2.is_finite()) {
        return None;
    }
    let t = (mean_a - mean_b) / se2.sqrt();
    // Welch–Satterthwaite degrees of freedom.
    let df = se2 * se2 / (sa * sa / (a.len() - 1) as f64 + sb * sb / (b.len() - 1) as f64);
    t_two_sided_p(t, df)
}

/// P(|T| >= |t|) for Student's t with `df` degrees of freedom (`df > 0`,
/// not necessarily an integer); `None` for a `t` or `df` that is not a
/// number the distribution takes.
fn t_two_sided_p(t: f64, df: f64) -> Option<f64> {
    if t.is_nan() {
        return None;
    }
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    // The lower tail at -|t|, doubled: no 1 - x cancellation for large |t|.
    Some((2.0 * dist.cdf(-t.abs())).clamp(0.0, 1.0))
}

/// A change of one mean against another (the baseline, or A).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// (mean - base) / base in percent; `None` when the base mean is 0.
    pub percent: Option<f64>,
    /// Welch's two-sided p-value over the repetitions; `None` where the
    /// test cannot run (fewer than 2 repetitions, or no variance at all).
    pub p: Option<f64>,
    /// Whether a larger value is better, so a sign can be read as better
    /// or worse.
    pub higher_is_better: bool,
}

impl Change {
    /// Compares `new` with `base` (the summaries of `new_values` and
    /// `base_values`). Rates are tested on their reciprocals (time per
    /// operation), the scale on which their harmonic mean is an average.
    fn between(
        base: &Summary,
        base_values: &[f64],
        new: &Summary,
        new_values: &[f64],
        higher_is_better: bool,
    ) -> Change {
        let percent = (base.mean != 0.0).then(|| (new.mean - base.mean) / base.mean * 100.0);
        let p = if higher_is_better {
            let inv = |v: &[f64]| v.iter().map(|x| 1.0 / x).collect::<Vec<_>>();
            welch_p(&inv(base_values), &inv(new_values))
        } else {
            welch_p(base_values, new_values)
        };
        Change {
            percent,
            p,
            higher_is_better,
        }
    }

    /// Whether Welch's p is below [`ALPHA`].
    pub fn significant(&self) -> bool {
        self.p.is_some_and(|p| p < ALPHA)
    }

    /// `better`, `worse` or `same` (a change that rounds to 0.0%).
    pub fn verdict(&self) -> &'static str {
        match self.percent {
            Some(p) if p.abs() >= 0.05 => {
                if (p > 0.0) == self.higher_is_better {
                    "better"
                } else {
                    "worse"
                }
            }
            Some(_) => "same",
            None => "n/a",
        }
    }
}

/// `hmean` for rates, `amean` for times and sizes: the mean a row shows.
fn mean_kind(metric: &Metric<'_>) -> &'static str {
    if metric.higher_is_better {
        "hmean"
    } else {
        "amean"
    }
}

/// Legend lines shared by both kinds of table.
fn common_legend(rows: &[Row]) -> Vec<String> {
    let mut legend = vec![
        "mean: hmean = harmonic mean (rates, higher is better), amean = arithmetic mean \
         (times and sizes, lower is better); ± = sample standard deviation as % of the mean"
            .to_string(),
    ];
    let ns: Vec<usize> = rows
        .iter()
        .flat_map(|r| r.cells.iter().filter_map(Cell::summary).map(|s| s.n))
        .collect();
    if let (Some(lo), Some(hi)) = (ns.iter().min(), ns.iter().max()) {
        legend.push(if lo == hi {
            format!("n = {lo} repetitions per cell")
        } else {
            format!("n = {lo} to {hi} repetitions per cell")
        });
    }
    legend.push(format!(
        "* = significant by Welch's t-test at p < {ALPHA} over the repetitions \
         (rates tested as time per operation); - = not measured; n/a = no mean \
         (a rate of 0 or below)"
    ));
    legend
}

/// A run that waited for a CPU longer than this share of its workers'
/// time is named under its table: its rate measures a busy machine as
/// much as the code. A quiet machine shows well under 1 %.
pub const WAITED_FOR_CPU: f64 = 0.10;

/// The legend line naming `workload`'s runs that waited for a CPU longer
/// than [`WAITED_FOR_CPU`] of their time, if any.
fn waited_legend(samples: &[Sample], workload: &str) -> Option<String> {
    let runs: Vec<String> = samples
        .iter()
        .filter(|s| s.workload == workload)
        .filter_map(|s| {
            let wait = s.cpu_wait.filter(|&w| w > WAITED_FOR_CPU)?;
            let plural = if s.threads == 1 { "" } else { "s" };
            Some(format!(
                "{}, {} thread{plural}, run {} ({:.0}%)",
                s.config,
                s.threads,
                s.rep + 1,
                wait * 100.0
            ))
        })
        .collect();
    (!runs.is_empty()).then(|| {
        format!(
            "waited for a CPU over {:.0}% of their time (the machine was busy; these \
             runs' rates measure that too): {}",
            WAITED_FOR_CPU * 100.0,
            runs.join("; ")
        )
    })
}

/// The legend line giving the range of the CPU-to-CPU transfer times
/// measured before `workload`'s runs (see [`Sample::transfer_ns`]), if
/// any were: two runs of one suite, or two suites, that disagree at
/// several workers may simply have had their CPUs in different places.
fn transfer_legend(samples: &[Sample], workload: &str) -> Option<String> {
    let mut ns: Vec<f64> = samples
        .iter()
        .filter(|s| s.workload == workload)
        .filter_map(|s| s.transfer_ns)
        .collect();
    ns.sort_by(f64::total_cmp);
    let (lo, hi) = (*ns.first()?, *ns.last()?);
    let median = ns[ns.len() / 2];
    let moved: Vec<String> = samples
        .iter()
        .filter(|s| s.workload == workload && s.placement_moved())
        .map(|s| format!("{} x{} run {}", s.config, s.threads, s.rep + 1))
        .collect();
    // Runs placed unlike most: their rates are not comparable with the
    // rest of the row.
    let apart: Vec<String> = samples
        .iter()
        .filter(|s| s.workload == workload)
        .filter_map(|s| Some((s, s.transfer_ns?)))
        .filter(|&(_, ns)| !alike(ns, median))
        .map(|(s, ns)| format!("{} x{} run {} ({ns:.0} ns)", s.config, s.threads, s.rep + 1))
        .collect();
    // `; <count> <what>: <runs>`, or nothing for no run.
    let clause = |what: &str, runs: Vec<String>| {
        if runs.is_empty() {
            String::new()
        } else {
            format!("; {} {what}: {}", runs.len(), runs.join(", "))
        }
    };
    Some(format!(
        "CPU-to-CPU cache-line transfer (one way, the first two workers' CPUs) measured \
         before each run of several workers: {lo:.0}–{hi:.0} ns, median {median:.0} ns \
         (where the machine put the CPUs: see docs/workloads.md){}{}",
        clause(
            "placed unlike the median (not comparable with the rest)",
            apart
        ),
        clause("moved during the run (measured again after it)", moved),
    ))
}

/// Tables of a set of samples: per workload, rows = (metric, threads),
/// columns = configurations in first-seen order; the first column is the
/// baseline; every other cell shows mean and % difference vs the baseline,
/// with a mark (`*`) where Welch's p < [`ALPHA`], and a word that says
/// better/worse given `higher_is_better`.
pub fn suite_tables(samples: &[Sample]) -> Vec<WorkloadTable> {
    group::by_workload(samples)
        .into_iter()
        .map(|g| {
            let rows: Vec<Row> = g
                .rows
                .iter()
                .map(|&(metric, threads)| {
                    let hib = metric.higher_is_better;
                    let cols: Vec<&[f64]> = g
                        .configs
                        .iter()
                        .map(|c| g.values(&metric, c, threads))
                        .collect();
                    let base = summarize(cols[0], hib);
                    let cells = cols
                        .iter()
                        .enumerate()
                        .map(|(i, v)| match (v.is_empty(), summarize(v, hib)) {
                            (true, _) => Cell::Missing,
                            (false, None) => Cell::Unusable,
                            (false, Some(s)) => match (i, &base) {
                                (0, _) | (_, None) => Cell::Mean(s),
                                (_, Some(b)) => {
                                    Cell::MeanVs(s, Change::between(b, cols[0], &s, v, hib))
                                }
                            },
                        })
                        .collect();
                    Row {
                        labels: vec![
                            metric.label(),
                            mean_kind(&metric).to_string(),
                            threads.to_string(),
                        ],
                        cells,
                    }
                })
                .collect();
            let mut header: Vec<String> = ["metric", "mean", "threads"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            header.extend(g.configs.iter().enumerate().map(|(i, c)| {
                if i == 0 {
                    format!("{c} (baseline)")
                } else {
                    c.to_string()
                }
            }));
            let mut legend = common_legend(&rows);
            legend.insert(
                1,
                format!(
                    "% = change of the mean against the baseline column ({}); \
                     better/worse given the row's direction",
                    g.configs[0]
                ),
            );
            legend.extend(waited_legend(samples, g.name));
            legend.extend(transfer_legend(samples, g.name));
            WorkloadTable {
                workload: g.name.to_string(),
                header,
                rows,
                legend,
            }
        })
        .collect()
}

/// The same table from two result sets: per workload, rows = (metric,
/// threads, config), columns A, B, % diff B vs A, significance.
pub fn compare_tables(a: &[Sample], b: &[Sample]) -> Vec<WorkloadTable> {
    // Rows and columns come from both runs together, values from each.
    let both: Vec<Sample> = a.iter().chain(b).cloned().collect();
    let (ga, gb) = (group::by_workload(a), group::by_workload(b));
    let side_of = |groups: &[group::Workload<'_>], name: &str| -> Option<usize> {
        groups.iter().position(|g| g.name == name)
    };
    group::by_workload(&both)
        .into_iter()
        .map(|g| {
            let (ia, ib) = (side_of(&ga, g.name), side_of(&gb, g.name));
            let none: &[f64] = &[];
            let mut rows = Vec::new();
            for &(metric, threads) in &g.rows {
                let hib = metric.higher_is_better;
                for config in &g.configs {
                    let va = ia.map_or(none, |i| ga[i].values(&metric, config, threads));
                    let vb = ib.map_or(none, |i| gb[i].values(&metric, config, threads));
                    if va.is_empty() && vb.is_empty() {
                        continue;
                    }
                    let side = |v: &[f64]| match (v.is_empty(), summarize(v, hib)) {
                        (true, _) => Cell::Missing,
                        (false, None) => Cell::Unusable,
                        (false, Some(s)) => Cell::Mean(s),
                    };
                    let (ca, cb) = (side(va), side(vb));
                    let (diff, test) = match (ca.summary(), cb.summary()) {
                        (Some(sa), Some(sb)) => {
                            let c = Change::between(sa, va, sb, vb, hib);
                            (Cell::Diff(c), Cell::Test(c))
                        }
                        _ => (Cell::Missing, Cell::Missing),
                    };
                    rows.push(Row {
                        labels: vec![
                            metric.label(),
                            mean_kind(&metric).to_string(),
                            threads.to_string(),
                            config.to_string(),
                        ],
                        cells: vec![ca, cb, diff, test],
                    });
                }
            }
            let header = [
                "metric", "mean", "threads", "config", "A", "B", "B vs A", "p",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let mut legend = common_legend(&rows);
            legend.insert(
                1,
                "B vs A = change of B's mean against A's; better/worse given the row's \
                 direction; p = Welch's two-sided p-value (no test: fewer than 2 \
                 repetitions, or no spread on either side)"
                    .to_string(),
            );
            WorkloadTable {
                workload: g.name.to_string(),
                header,
                rows,
                legend,
            }
        })
        .collect()
}

/// How many rows have a significant difference, and how many rows compare
/// anything at all (a row with only the baseline, or with one side
/// missing, has no difference to test and is not counted).
pub fn significant_rows(tables: &[WorkloadTable]) -> (usize, usize) {
    let mut significant = 0;
    let mut total = 0;
    for row in tables.iter().flat_map(|t| &t.rows) {
        let changes: Vec<&Change> = row.cells.iter().filter_map(Cell::change).collect();
        if !changes.is_empty() {
            total += 1;
            if changes.iter().any(|c| c.significant()) {
                significant += 1;
            }
        }
    }
    (significant, total)
}

/// Why two runs cannot be compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incomparable {
    /// No figure is in both runs (same workload, metric, unit, threads and
    /// configuration).
    NoCommonFigure,
    /// This many figures are in both runs, but none has a mean on both
    /// sides: no mean exists where a value is 0 or below.
    NoMean(usize),
}

impl fmt::Display for Incomparable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Incomparable::NoCommonFigure => f.write_str(
                "no figure in common (same workload, metric, unit, threads and configuration)",
            ),
            Incomparable::NoMean(n) => write!(
                f,
                "{n} figure{} in common, but none can be compared: no mean exists where a \
                 value is 0 or below (a rate of 0 means nothing was measured)",
                if *n == 1 { "" } else { "s" }
            ),
        }
    }
}

impl std::error::Error for Incomparable {}

/// Run B's figures against run A's: the tables of [`compare_tables`],
/// refused when no row can be compared.
///
/// ```
/// use vmresults::{compare, Sample};
/// let sample = |config: &str, rep, value| Sample {
///     workload: "brk1".into(),
///     metric: "ops/s".into(),
///     unit: "ops/s".into(),
///     higher_is_better: true,
///     config: config.into(),
///     threads: 1,
///     rep,
///     value,
///     cpu_wait: None,
///     transfer_ns: None,
///     transfer_after_ns: None,
/// };
/// let a = [sample("maple", 0, 100.0), sample("maple", 1, 102.0)];
/// let b = [sample("maple", 0, 150.0), sample("maple", 1, 151.0)];
/// let tables = compare::compare(&a, &b).unwrap();
/// assert_eq!(compare::significant_rows(&tables), (1, 1));
/// let other = [sample("legacy", 0, 1.0)];
/// assert_eq!(compare::compare(&a, &other).unwrap_err(), compare::Incomparable::NoCommonFigure);
/// ```
pub fn compare(a: &[Sample], b: &[Sample]) -> Result<Vec<WorkloadTable>, Incomparable> {
    let tables = compare_tables(a, b);
    let (_, total) = significant_rows(&tables);
    if total > 0 {
        return Ok(tables);
    }
    // Figures both runs have, of which at least one side has no mean.
    let unusable = tables
        .iter()
        .flat_map(|t| &t.rows)
        .filter(|r| {
            let present = |c: &Cell| !matches!(c, Cell::Missing);
            present(&r.cells[0]) && present(&r.cells[1])
        })
        .count();
    Err(if unusable > 0 {
        Incomparable::NoMean(unusable)
    } else {
        Incomparable::NoCommonFigure
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    fn sample(workload: &str, config: &str, threads: usize, rep: usize, value: f64) -> Sample {
        Sample {
            workload: workload.into(),
            metric: "ops/s".into(),
            unit: "ops/s".into(),
            higher_is_better: true,
            config: config.into(),
            threads,
            rep,
            value,
            cpu_wait: None,
            transfer_ns: None,
            transfer_after_ns: None,
        }
    }

    /// Five repetitions of `config` around `centre`, with a fixed ±2%
    /// pattern so that tests are deterministic.
    fn reps(workload: &str, config: &str, threads: usize, centre: f64) -> Vec<Sample> {
        [1.0, 1.02, 0.98, 1.01, 0.99]
            .iter()
            .enumerate()
            .map(|(i, f)| sample(workload, config, threads, i, centre * f))
            .collect()
    }

    #[test]
    fn runs_that_waited_for_a_cpu_are_named_under_their_table() {
        let mut run = reps("brk1", "legacy", 2, 100.0);
        run.extend(reps("mmap1", "legacy", 2, 100.0));
        for s in &mut run {
            s.cpu_wait = Some(0.004);
        }
        // One brk1 run of five lost a third of its CPU time to the machine.
        run[1].cpu_wait = Some(0.34);
        // mmap1's runs are at the threshold, which does not count.
        for s in run.iter_mut().filter(|s| s.workload == "mmap1") {
            s.cpu_wait = Some(WAITED_FOR_CPU);
        }
        let tables = suite_tables(&run);
        let waited = |t: &WorkloadTable| legend_lines(t, "waited for a CPU");
        assert_eq!(
            waited(&tables[0]),
            [
                "waited for a CPU over 10% of their time (the machine was busy; these \
              runs' rates measure that too): legacy, 2 threads, run 2 (34%)"
            ]
        );
        assert!(waited(&tables[1]).is_empty(), "{:?}", tables[1].legend);
        // Samples from before the field existed read as unmeasured.
        let (parsed, written) = sample_from_before_the_fields();
        assert_eq!(parsed.cpu_wait, None);
        assert!(!written.contains("cpu_wait"));
    }

    /// The lines of `t`'s legend that start with `prefix`.
    fn legend_lines(t: &WorkloadTable, prefix: &str) -> Vec<String> {
        t.legend
            .iter()
            .filter(|l| l.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// A sample as files written before `cpu_wait` and `transfer_ns` hold
    /// it, parsed, and written again.
    fn sample_from_before_the_fields() -> (Sample, String) {
        let old = r#"{"workload":"brk1","metric":"ops/s","unit":"ops/s","higher_is_better":true,"config":"legacy","threads":2,"rep":0,"value":1.0}"#;
        let parsed: Sample = serde_json::from_str(old).unwrap();
        let written = serde_json::to_string(&parsed).unwrap();
        (parsed, written)
    }

    #[test]
    fn the_transfer_times_measured_before_runs_are_given_under_their_table() {
        let mut run = reps("brk1", "legacy", 1, 100.0);
        run.extend(reps("brk1", "legacy", 2, 190.0));
        run.extend(reps("mmap1", "legacy", 2, 100.0));
        let two = run
            .iter_mut()
            .filter(|s| s.workload == "brk1" && s.threads == 2);
        for (s, ns) in two.zip([16.2, 29.4, 16.6, 110.0, 17.0]) {
            s.transfer_ns = Some(ns);
        }
        let tables = suite_tables(&run);
        let transfer = |t: &WorkloadTable| legend_lines(t, "CPU-to-CPU");
        assert_eq!(
            transfer(&tables[0]),
            [
                "CPU-to-CPU cache-line transfer (one way, the first two workers' CPUs) \
                 measured before each run of several workers: 16–110 ns, median 17 ns \
                 (where the machine put the CPUs: see docs/workloads.md); 2 placed unlike \
                 the median (not comparable with the rest): legacy x2 run 2 (29 ns), \
                 legacy x2 run 4 (110 ns)"
            ]
        );
        // A run whose CPUs moved while it ran is named.
        let mut moved = run.clone();
        for s in moved.iter_mut().filter(|s| s.transfer_ns.is_some()) {
            s.transfer_after_ns = Some(if s.rep == 3 {
                17.0
            } else {
                s.transfer_ns.unwrap()
            });
        }
        assert!(transfer(&suite_tables(&moved)[0])[0].ends_with(
            "legacy x2 run 4 (110 ns); 1 moved during the run (measured again after it): \
             legacy x2 run 4"
        ));
        // Not measured (mmap1 here, or any file from before the field):
        // no line, and nothing written for it.
        assert!(transfer(&tables[1]).is_empty(), "{:?}", tables[1].legend);
        let (parsed, written) = sample_from_before_the_fields();
        assert_eq!((parsed.transfer_ns, parsed.transfer_after_ns), (None, None));
        assert!(!written.contains("transfer_"));
    }

    #[test]
    fn means_are_harmonic_for_rates_and_arithmetic_for_times() {
        let rate = summarize(&[1.0, 2.0, 4.0], true).unwrap();
        assert!(close(rate.mean, 3.0 / 1.75, 1e-12), "{rate:?}");
        assert_eq!(rate.n, 3);
        let time = summarize(&[1.0, 2.0, 4.0], false).unwrap();
        assert!(close(time.mean, 7.0 / 3.0, 1e-12));
        // Sample standard deviation (n - 1): of 1, 2, 4 it is sqrt(7/3).
        assert!(close(time.stddev, (7.0f64 / 3.0).sqrt(), 1e-12));
        assert_eq!(rate.stddev, time.stddev);
        let one = summarize(&[5.0], false).unwrap();
        assert_eq!((one.mean, one.stddev, one.n), (5.0, 0.0, 1));
        assert_eq!(summarize(&[], false), None);
        assert_eq!(summarize(&[1.0, 0.0], true), None);
        assert_eq!(summarize(&[1.0, -2.0], true), None);
        assert!(summarize(&[1.0, -2.0], false).is_some());
        assert_eq!(summarize(&[f64::NAN], false), None);
    }

    #[test]
    fn t_distribution_matches_known_values() {
        let p = |t, df| t_two_sided_p(t, df).unwrap();
        // Closed forms: df = 1 is Cauchy, df = 2 has p = 1 - t/sqrt(2+t²).
        for t in [0.1, 1.0, 3.0, 20.0] {
            let cauchy = 1.0 - 2.0 / std::f64::consts::PI * f64::atan(t);
            assert!(close(p(t, 1.0), cauchy, 1e-12), "t={t}");
            let df2 = 1.0 - t / (2.0 + t * t).sqrt();
            assert!(close(p(t, 2.0), df2, 1e-12), "t={t}");
        }
        // Tables, and Simpson integration of the density for fractional df.
        assert!(close(p(2.0, 10.0), 0.073_388_034_8, 1e-9));
        assert!(close(p(2.228_138_85, 10.0), 0.05, 1e-8));
        assert!(close(p(3.5, 4.2), 0.022_993_742_5, 1e-9));
        assert!(close(p(0.5, 7.5), 0.631_410_964_6, 1e-9));
        assert!(close(p(5.0, 2.5), 0.023_451_190_0, 1e-9));
        // Large df tends to the normal: |z| = 1.959964 gives 0.05.
        assert!(close(p(1.959_964, 1e7), 0.05, 1e-6));
        assert!(close(p(1.959_964, f64::INFINITY), 0.05, 1e-6));
        assert_eq!(p(0.0, 3.0), 1.0);
        assert_eq!(p(-2.0, 10.0), p(2.0, 10.0));
        // Far tails stay positive rather than cancel to 0.
        assert!(p(60.0, 30.0) > 0.0 && p(60.0, 30.0) < 1e-30);
        for (t, df) in [(f64::NAN, 3.0), (1.0, 0.0), (1.0, -1.0), (1.0, f64::NAN)] {
            assert_eq!(t_two_sided_p(t, df), None, "t={t} df={df}");
        }
    }

    #[test]
    fn welch_p_matches_a_hand_computed_case() {
        // a: mean 2, var 1; b: mean 4, var 4; se² = 1/3 + 4/3 = 5/3,
        // t = -2/sqrt(5/3), df = (5/3)² / ((1/3)²/2 + (4/3)²/2) = 50/17.
        let a = [1.0, 2.0, 3.0];
        let b = [2.0, 4.0, 6.0];
        let p = welch_p(&a, &b).unwrap();
        let expect = t_two_sided_p(2.0 / (5.0f64 / 3.0).sqrt(), 50.0 / 17.0).unwrap();
        assert!(close(p, expect, 1e-12), "{p} vs {expect}");
        assert!(p > 0.1 && p < 0.3, "{p}");
        assert_eq!(welch_p(&b, &a), Some(p));
        assert_eq!(welch_p(&[1.0], &b), None);
        assert_eq!(welch_p(&[], &b), None);
        assert_eq!(welch_p(&[2.0, 2.0], &[3.0, 3.0]), None);
        assert_eq!(welch_p(&[1.0, f64::NAN], &b), None);
        assert_eq!(welch_p(&[1.0, f64::INFINITY], &b), None);
        // Finite values whose variance overflows: no test, not NaN.
        assert_eq!(welch_p(&[-1e300, 1e300], &[0.0, 1e300]), None);
        // One side constant is still a test.
        assert!(welch_p(&[2.0, 2.0, 2.0], &b).is_some());
        assert!(welch_p(&a, &a).unwrap() > 0.999);
    }

    #[test]
    fn welch_p_matches_independently_computed_values() {
        // References: the same statistic in 40-digit arithmetic (mpmath),
        // its p both as the regularised incomplete beta and as the
        // numerically integrated t density, which agree to all digits.
        let cases: [(&[f64], &[f64], f64); 4] = [
            (&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0], 0.220_880_840_494_095_93),
            (
                &[10.1, 10.4, 9.8, 10.0, 10.3],
                &[10.9, 11.2, 10.7, 11.4],
                0.003_237_571_702_819_468_6,
            ),
            // One side constant: t = -sqrt(3), df = 2.
            (&[2.0, 2.0, 2.0], &[2.0, 4.0, 6.0], 0.225_403_330_758_516_62),
            // Wikipedia's first Welch example (published t = -2.46,
            // df = 24.9, p = 0.021).
            (
                &[
                    27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0,
                    21.7, 21.4,
                ],
                &[
                    27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9,
                    20.5, 24.4,
                ],
                0.021_378_001_462_867_06,
            ),
        ];
        for (a, b, expect) in cases {
            let p = welch_p(a, b).unwrap();
            assert!(close(p, expect, 1e-12), "{a:?} {b:?}: {p} vs {expect}");
        }
        let (a, b, _) = cases[3];
        assert!(close(welch_p(a, b).unwrap(), 0.021, 0.0005));
    }

    #[test]
    fn suite_table_has_baseline_first_and_marks_a_clear_slowdown() {
        let mut samples = reps("brk1", "maple", 1, 1000.0);
        samples.extend(reps("brk1", "legacy", 1, 500.0)); // 2x slower rate
        samples.extend(reps("brk1", "same", 1, 1000.0));
        samples.extend(reps("brk1", "maple", 2, 1800.0));
        let tables = suite_tables(&samples);
        assert_eq!(tables.len(), 1);
        let t = &tables[0];
        assert_eq!(t.header[3], "maple (baseline)");
        assert_eq!(&t.header[4..], ["legacy", "same"]);
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[0].labels, ["ops/s", "hmean", "1"]);
        assert!(matches!(t.rows[0].cells[0], Cell::Mean(_)));
        let Cell::MeanVs(_, slow) = t.rows[0].cells[1] else {
            panic!("{:?}", t.rows[0].cells[1]);
        };
        assert!(close(slow.percent.unwrap(), -50.0, 0.5), "{slow:?}");
        assert!(slow.significant());
        assert_eq!(slow.verdict(), "worse");
        let Cell::MeanVs(_, same) = t.rows[0].cells[2] else {
            panic!("{:?}", t.rows[0].cells[2]);
        };
        assert!(!same.significant() && same.verdict() == "same", "{same:?}");
        // Threads 2 was measured for the baseline only.
        assert_eq!(t.rows[1].cells[1], Cell::Missing);
        assert_eq!(significant_rows(&tables), (1, 1));
        let text = render_text(&tables);
        assert!(text.contains("-50.0%* worse"), "{text}");
        assert!(text.contains("+0.0% same"), "{text}");
        assert!(text.contains("n = 5 repetitions per cell"), "{text}");
        assert!(text.contains("Welch's t-test at p < 0.05"), "{text}");
    }

    #[test]
    fn lower_is_better_reads_a_drop_as_better() {
        let time = |config: &str, v: f64| {
            let mut s: Vec<Sample> = reps("tree", config, 1, v);
            for x in &mut s {
                x.metric = "load n=1000".into();
                x.unit = "ns/op".into();
                x.higher_is_better = false;
            }
            s
        };
        let mut samples = time("maple", 100.0);
        samples.extend(time("btreemap", 50.0));
        let tables = suite_tables(&samples);
        assert_eq!(
            tables[0].rows[0].labels[..2],
            ["load n=1000 (ns/op)", "amean"]
        );
        let text = render_text(&tables);
        assert!(text.contains("-50.0%* better"), "{text}");
    }

    #[test]
    fn a_rate_of_zero_is_not_a_mean() {
        let mut samples = reps("mmap1", "a", 1, 10.0);
        samples.push(sample("mmap1", "b", 1, 0, 0.0));
        let tables = suite_tables(&samples);
        assert_eq!(tables[0].rows[0].cells[1], Cell::Unusable);
        assert_eq!(significant_rows(&tables), (0, 0));
        assert!(render_text(&tables).contains("n/a"));
    }

    #[test]
    fn comparison_of_two_sets_marks_only_what_changed() {
        let mut a = reps("brk1", "maple", 1, 1000.0);
        a.extend(reps("brk1", "legacy", 1, 700.0));
        a.extend(reps("execl", "maple", 2, 50.0));
        let mut b = reps("brk1", "maple", 1, 1000.0);
        b.extend(reps("brk1", "legacy", 1, 350.0));
        b.extend(reps("execl", "maple", 4, 50.0)); // not in A
        let tables = compare_tables(&a, &b);
        assert_eq!(tables.len(), 2);
        assert_eq!(
            tables[0].header,
            ["metric", "mean", "threads", "config", "A", "B", "B vs A", "p"]
        );
        let rows = &tables[0].rows;
        assert_eq!(rows[0].labels[3], "maple");
        assert_eq!(rows[1].labels[3], "legacy");
        assert!(!rows[0].cells[2].change().unwrap().significant());
        assert!(rows[1].cells[2].change().unwrap().significant());
        assert!(
            rows[1].cells[3].text().ends_with(" *"),
            "{:?}",
            rows[1].cells[3]
        );
        // execl: threads 2 only in A, threads 4 only in B.
        let execl = &tables[1].rows;
        assert_eq!(execl.len(), 2);
        assert_eq!(execl[0].cells[1], Cell::Missing);
        assert_eq!(execl[1].cells[0], Cell::Missing);
        assert_eq!(execl[1].cells[2].text(), "-");
        assert_eq!(significant_rows(&tables), (1, 2));
        assert_eq!(significant_rows(&compare_tables(&a, &a)), (0, 3));
    }

    #[test]
    fn markdown_is_a_github_table_per_workload() {
        let mut samples = reps("brk1", "maple", 1, 1000.0);
        samples.extend(reps("brk1", "rule|off", 1, 400.0));
        samples.extend(reps("mmap1", "maple", 1, 10.0));
        let md = render_markdown(&suite_tables(&samples));
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines[0], "### brk1");
        assert_eq!(
            lines[2],
            "| metric | mean | threads | maple (baseline) | rule\\|off |"
        );
        assert_eq!(lines[3], "|:---|:---|:---|---:|---:|");
        let row = lines[4];
        assert!(row.starts_with("| ops/s | hmean | 1 | 1000 ±"), "{row}");
        assert!(row.contains("-60.0%\\* worse"), "{row}");
        // Every table line has as many columns as the header.
        let cols = |l: &str| l.matches(" | ").count();
        assert_eq!(cols(lines[4]), cols(lines[2]));
        assert!(lines.iter().any(|l| l.starts_with("- \\* = significant")));
        assert!(md.contains("### mmap1"));
    }
}

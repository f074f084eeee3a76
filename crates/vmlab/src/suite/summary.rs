//! The three lines that end `vmbench suite`: what the run found, from its
//! samples alone. Each line compares two columns of the suite's tables the
//! way the tables do (harmonic means of the repetitions; Welch's test on
//! the time per operation), and a line whose workloads were not measured is
//! left out.

use vmresults::compare::{self, ALPHA};
use vmresults::group;
use vmresults::samples::Sample;

/// The `run` workloads whose scaling with threads the first line reports,
/// in order of preference: page faults first, the rest as measured.
const SCALING: [&str; 5] = ["page_fault3", "malloc1", "mmap2", "brk1", "mmap1"];

/// The `run` workloads that write the VMA tree, in order of preference.
const WRITES: [&str; 3] = ["mmap1", "brk1", "mmap2"];

/// What the run found, in up to three lines: the maple tree against the
/// legacy index (scaling and write throughput), the i_mmap designs against
/// `single` in `execl`, and the anon_vma rule in `aim7-brk`. Only what the
/// samples show is claimed: every ratio is of harmonic means, every
/// difference is called significant or not by Welch's test at
/// [`ALPHA`], and a line whose data was not measured is omitted.
///
/// ```
/// use vmresults::samples::Sample;
/// let s = |config: &str, rep, value| Sample {
///     workload: "aim7-brk".into(), metric: "ops/s".into(), unit: "ops/s".into(),
///     higher_is_better: true, config: config.into(), threads: 1, rep, value,
///     cpu_wait: None,
///     transfer_ns: None,
///     transfer_after_ns: None,
/// };
/// let lines = vmlab::suite::summary(&[s("rule=off", 0, 10.0), s("rule=on", 0, 12.0)]);
/// assert_eq!(lines.len(), 1);
/// assert!(lines[0].starts_with("anon_vma rule: aim7-brk x1.20"), "{}", lines[0]);
/// ```
pub fn summary(samples: &[Sample]) -> Vec<String> {
    let run = Run::new(samples);
    [maple(&run), imap(&run), anon_rule(&run)]
        .into_iter()
        .flatten()
        .collect()
}

/// The run's samples as the tables group them, read through the `ops/s`
/// metric of each workload.
struct Run<'s> {
    samples: &'s [Sample],
    groups: Vec<group::Workload<'s>>,
}

impl<'s> Run<'s> {
    fn new(samples: &'s [Sample]) -> Run<'s> {
        Run {
            samples,
            groups: group::by_workload(samples),
        }
    }

    /// ` (CPUs N ns apart)`: the median transfer time measured before
    /// `workload`'s runs at `threads` workers, which says where the host
    /// put the CPUs (see `crate::placement`); empty where none was
    /// measured.
    fn placement(&self, workload: &str, threads: usize) -> String {
        let mut ns: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.workload == workload && s.threads == threads)
            .filter_map(|s| s.transfer_ns)
            .collect();
        ns.sort_by(f64::total_cmp);
        ns.get(ns.len() / 2)
            .map_or_else(String::new, |m| format!(" (CPUs {m:.0} ns apart)"))
    }

    /// `workload`'s group and its ops/s metric.
    fn ops(&self, workload: &str) -> Option<(&group::Workload<'s>, group::Metric<'s>)> {
        let g = self.groups.iter().find(|g| g.name == workload)?;
        let metric = g
            .metrics
            .iter()
            .copied()
            .find(|m| m.name == "ops/s" && m.higher_is_better)?;
        Some((g, metric))
    }

    /// The ops/s values of one cell.
    fn values(&self, workload: &str, config: &str, threads: usize) -> &[f64] {
        self.ops(workload)
            .map_or(&[][..], |(g, m)| g.values(&m, config, threads))
    }

    /// The thread counts at which `config` of `workload` has ops/s
    /// samples, ascending.
    fn thread_counts(&self, workload: &str, config: &str) -> Vec<usize> {
        self.ops(workload)
            .map_or_else(Vec::new, |(g, m)| g.threads_of(&m, config))
    }

    /// `workload`'s configurations, in first-seen order.
    fn configs(&self, workload: &str) -> Vec<&'s str> {
        self.groups
            .iter()
            .find(|g| g.name == workload)
            .map_or_else(Vec::new, |g| g.configs.clone())
    }
}

/// The thread counts both configurations were measured at, ascending.
fn common_threads(run: &Run<'_>, workload: &str, a: &str, b: &str) -> Vec<usize> {
    let tb = run.thread_counts(workload, b);
    run.thread_counts(workload, a)
        .into_iter()
        .filter(|t| tb.contains(t))
        .collect()
}

/// The harmonic mean of a cell.
fn mean(run: &Run<'_>, workload: &str, config: &str, threads: usize) -> Option<f64> {
    compare::summarize(run.values(workload, config, threads), true).map(|s| s.mean)
}

/// `new` against `base` at `threads`: the ratio of their means and Welch's
/// p on the time per operation, as the tables test rates.
fn ratio(
    run: &Run<'_>,
    workload: &str,
    new: &str,
    base: &str,
    threads: usize,
) -> Option<(f64, Option<f64>)> {
    let a = run.values(workload, base, threads);
    let b = run.values(workload, new, threads);
    let ma = compare::summarize(a, true)?.mean;
    let mb = compare::summarize(b, true)?.mean;
    let inv = |v: &[f64]| v.iter().map(|x| 1.0 / x).collect::<Vec<_>>();
    Some((mb / ma, compare::welch_p(&inv(a), &inv(b))))
}

/// `1 thread`, `2 threads`.
fn threads(n: usize) -> String {
    if n == 1 {
        "1 thread".to_string()
    } else {
        format!("{n} threads")
    }
}

/// `significant, p = 0.003`, `not significant, p = 0.41`, or why untested.
fn significance(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 0.001 => "significant, p < 0.001".to_string(),
        Some(p) if p < ALPHA => format!("significant, p = {p:.3}"),
        Some(p) => format!("not significant, p = {p:.2}"),
        None => "untested: fewer than 2 repetitions or no spread".to_string(),
    }
}

/// The mode whose maple and legacy columns `workload` has, threads mode
/// (one shared address space, where the index's locking shows) first.
fn modes(run: &Run<'_>, workload: &str) -> Vec<(String, String, &'static str)> {
    ["threads", "processes"]
        .into_iter()
        .map(|m| (format!("maple {m}"), format!("legacy {m}"), m))
        .filter(|(maple, legacy, _)| !common_threads(run, workload, maple, legacy).is_empty())
        .collect()
}

/// The maple tree against the legacy index: how a workload scales from
/// the fewest to the most threads on each, and the write throughput of
/// one at the most threads both measured.
fn maple(run: &Run<'_>) -> Option<String> {
    let mut parts = Vec::new();
    'scaling: for w in SCALING {
        for (maple, legacy, mode) in modes(run, w) {
            let t = common_threads(run, w, &maple, &legacy);
            let (Some(&lo), Some(&hi)) = (t.first(), t.last()) else {
                continue;
            };
            if lo == hi {
                continue;
            }
            let scale = |c: &str| Some(mean(run, w, c, hi)? / mean(run, w, c, lo)?);
            if let (Some(m), Some(l)) = (scale(&maple), scale(&legacy)) {
                parts.push(format!(
                    "{w} ({mode}) scales x{m:.2} from {lo} to {hi} threads where the legacy \
                     index reaches x{l:.2}"
                ));
                break 'scaling;
            }
        }
    }
    'writes: for w in WRITES {
        for (maple, legacy, mode) in modes(run, w) {
            let Some(&t) = common_threads(run, w, &maple, &legacy).last() else {
                continue;
            };
            if let Some((r, p)) = ratio(run, w, &maple, &legacy, t) {
                parts.push(format!(
                    "{w} ({mode}, {}) writes at x{r:.2} the legacy throughput ({})",
                    threads(t),
                    significance(p)
                ));
                break 'writes;
            }
        }
    }
    (!parts.is_empty()).then(|| format!("maple tree: {}", parts.join("; ")))
}

/// The i_mmap designs (and lock kinds) against `imap=single` in `execl`, at
/// the most workers the baseline was measured at, grouped by verdict.
fn imap(run: &Run<'_>) -> Option<String> {
    let (w, base) = ("execl", "imap=single");
    let t = *run.thread_counts(w, base).last()?;
    let configs: Vec<&str> = run.configs(w).into_iter().filter(|&c| c != base).collect();
    let (mut faster, mut slower, mut same, mut untested) = (vec![], vec![], vec![], vec![]);
    for c in configs {
        let Some((r, p)) = ratio(run, w, c, base, t) else {
            continue;
        };
        let name = c.strip_prefix("imap=").unwrap_or(c);
        let item = format!("{name} x{r:.2}");
        match p {
            Some(p) if p < ALPHA && r > 1.0 => faster.push(item),
            Some(p) if p < ALPHA => slower.push(item),
            Some(_) => same.push(item),
            None => untested.push(item),
        }
    }
    let mut groups = Vec::new();
    for (what, items) in [
        ("significantly faster", faster),
        ("significantly slower", slower),
        ("no significant difference", same),
        ("untested (fewer than 2 repetitions)", untested),
    ] {
        if !items.is_empty() {
            groups.push(format!("{what}: {}", items.join(", ")));
        }
    }
    (!groups.is_empty()).then(|| {
        format!(
            "i_mmap: execl at {t} workers{} against single (Welch p < {ALPHA}): {}",
            run.placement(w, t),
            groups.join("; ")
        )
    })
}

/// The anon_vma rule on against off in `aim7-brk`, at the most threads
/// both were measured at.
fn anon_rule(run: &Run<'_>) -> Option<String> {
    let w = "aim7-brk";
    let t = *common_threads(run, w, "rule=on", "rule=off").last()?;
    let (r, p) = ratio(run, w, "rule=on", "rule=off", t)?;
    Some(format!(
        "anon_vma rule: aim7-brk x{r:.2} with the rule on against off at {} ({})",
        threads(t),
        significance(p)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(workload: &str, config: &str, threads: usize, values: &[f64]) -> Vec<Sample> {
        values
            .iter()
            .enumerate()
            .map(|(rep, &value)| Sample {
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
            })
            .collect()
    }

    #[test]
    fn the_summary_claims_only_what_was_measured() {
        assert!(summary(&[]).is_empty());
        let mut all = Vec::new();
        all.extend(s("page_fault3", "legacy threads", 1, &[100.0, 101.0, 99.0]));
        all.extend(s("page_fault3", "maple threads", 1, &[100.0, 99.0, 101.0]));
        all.extend(s(
            "page_fault3",
            "legacy threads",
            2,
            &[120.0, 121.0, 119.0],
        ));
        all.extend(s("page_fault3", "maple threads", 2, &[190.0, 191.0, 189.0]));
        let lines = summary(&all);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(
            lines[0],
            "maple tree: page_fault3 (threads) scales x1.90 from 1 to 2 threads where the \
             legacy index reaches x1.20"
        );
        all.extend(s("mmap1", "legacy processes", 1, &[100.0, 102.0, 98.0]));
        all.extend(s("mmap1", "maple processes", 1, &[80.0, 81.0, 79.0]));
        all.extend(s("execl", "imap=single", 2, &[10.0, 10.1, 9.9]));
        all.extend(s("execl", "imap=distributed", 2, &[17.0, 17.1, 16.9]));
        all.extend(s("execl", "imap=split", 2, &[10.0, 9.0, 11.0]));
        all.extend(s("execl", "imap=single lock=std", 2, &[5.0]));
        all.extend(s("aim7-brk", "rule=off", 2, &[10.0, 10.0]));
        all.extend(s("aim7-brk", "rule=on", 2, &[12.0, 12.0]));
        let lines = summary(&all);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[0].ends_with(
                "; mmap1 (processes, 1 thread) writes at x0.80 the legacy throughput \
                 (significant, p < 0.001)"
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with("i_mmap: execl at 2 workers")
                && lines[1].contains("significantly faster: distributed x1.70")
                && lines[1].contains("no significant difference: split x0.99")
                && lines[1].contains("untested (fewer than 2 repetitions): single lock=std x0.50"),
            "{}",
            lines[1]
        );
        // No spread at all: the test cannot run, and the line says so.
        assert_eq!(
            lines[2],
            "anon_vma rule: aim7-brk x1.20 with the rule on against off at 2 threads \
             (untested: fewer than 2 repetitions or no spread)"
        );
        for l in &lines {
            assert!(!l.contains('\n'));
        }
        // Where the CPUs were, once measured: the two designs compared ran
        // with them this far apart.
        for (i, sample) in all.iter_mut().filter(|x| x.workload == "execl").enumerate() {
            // One run across two core complexes; the median is the rest's.
            sample.transfer_ns = Some(if i == 0 { 105.0 } else { 33.0 });
        }
        let lines = summary(&all);
        assert!(
            lines[1].starts_with("i_mmap: execl at 2 workers (CPUs 33 ns apart) against single"),
            "{}",
            lines[1]
        );
    }
}

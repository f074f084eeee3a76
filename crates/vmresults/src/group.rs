//! A run's samples grouped by figure: the one grouping the tables, the
//! plots and the suite's summary all read.
//!
//! A *figure* is a workload's metric at one thread count for one
//! configuration; its repetitions are the values that get summarised.
//! Everything keeps the order in which it first appears in the file
//! (metrics, configurations; the first configuration is the baseline),
//! except thread counts, which ascend.
//!
//! ```
//! use vmresults::{group, samples};
//! let run = samples::parse_samples(concat!(
//!     r#"{"workload":"mmap1","metric":"ops/s","unit":"ops/s","higher_is_better":true,"config":"legacy","threads":1,"rep":0,"value":90.0}"#, "\n",
//!     r#"{"workload":"mmap1","metric":"ops/s","unit":"ops/s","higher_is_better":true,"config":"maple","threads":1,"rep":0,"value":100.0}"#, "\n",
//!     r#"{"workload":"mmap1","metric":"ops/s","unit":"ops/s","higher_is_better":true,"config":"maple","threads":1,"rep":1,"value":104.0}"#,
//! ))
//! .unwrap();
//! let workloads = group::by_workload(&run);
//! let mmap1 = &workloads[0];
//! assert_eq!(mmap1.configs, ["legacy", "maple"]);
//! assert_eq!(mmap1.values(&mmap1.metrics[0], "maple", 1), [100.0, 104.0]);
//! ```

use std::collections::HashMap;

use crate::samples::Sample;

/// What a sample measures: the metric's name, its unit and its direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Metric<'s> {
    /// e.g. `ops/s`, or `load n=1000` for the tree.
    pub name: &'s str,
    /// e.g. `ops/s`, `ns/op`.
    pub unit: &'s str,
    /// Rates are better higher, times and sizes lower.
    pub higher_is_better: bool,
}

impl<'s> Metric<'s> {
    /// The metric `sample` measures.
    pub fn of(sample: &'s Sample) -> Metric<'s> {
        Metric {
            name: &sample.metric,
            unit: &sample.unit,
            higher_is_better: sample.higher_is_better,
        }
    }

    /// `ops/s`, or `load n=1000 (ns/op)` where the name is not its unit.
    pub fn label(&self) -> String {
        if self.name == self.unit {
            self.name.to_string()
        } else {
            format!("{} ({})", self.name, self.unit)
        }
    }
}

/// One workload's samples, by figure.
#[derive(Debug, Clone)]
pub struct Workload<'s> {
    /// The workload's name.
    pub name: &'s str,
    /// Its metrics, in first-seen order.
    pub metrics: Vec<Metric<'s>>,
    /// Its configurations, in first-seen order: the first is the baseline.
    pub configs: Vec<&'s str>,
    /// Every thread count measured, ascending.
    pub threads: Vec<usize>,
    /// The (metric, thread count) pairs measured: metrics in first-seen
    /// order, thread counts ascending within each. A table's rows.
    pub rows: Vec<(Metric<'s>, usize)>,
    /// Values by (metric index, config index, threads), in file order.
    values: HashMap<(usize, usize, usize), Vec<f64>>,
}

impl<'s> Workload<'s> {
    /// The repetitions of one figure, in file order; empty where it was not
    /// measured.
    pub fn values(&self, metric: &Metric<'_>, config: &str, threads: usize) -> &[f64] {
        let m = self.metrics.iter().position(|x| x == metric);
        let c = self.configs.iter().position(|&x| x == config);
        match (m, c) {
            (Some(m), Some(c)) => self
                .values
                .get(&(m, c, threads))
                .map_or(&[][..], Vec::as_slice),
            _ => &[],
        }
    }

    /// The thread counts at which `config` has values for `metric`,
    /// ascending.
    pub fn threads_of(&self, metric: &Metric<'_>, config: &str) -> Vec<usize> {
        self.threads
            .iter()
            .copied()
            .filter(|&t| !self.values(metric, config, t).is_empty())
            .collect()
    }

    /// The metric called `name`, if the workload has one.
    pub fn metric(&self, name: &str) -> Option<Metric<'s>> {
        self.metrics.iter().copied().find(|m| m.name == name)
    }
}

/// Pushes `item` unless present; returns its index.
fn index_of<T: PartialEq>(list: &mut Vec<T>, item: T) -> usize {
    match list.iter().position(|x| *x == item) {
        Some(i) => i,
        None => {
            list.push(item);
            list.len() - 1
        }
    }
}

/// `samples` grouped per workload, workloads in first-seen order.
pub fn by_workload(samples: &[Sample]) -> Vec<Workload<'_>> {
    let mut out: Vec<Workload<'_>> = Vec::new();
    let mut metric_rank: Vec<Vec<(Metric<'_>, usize)>> = Vec::new();
    for s in samples {
        let w = match out.iter().position(|w| w.name == s.workload) {
            Some(i) => i,
            None => {
                out.push(Workload {
                    name: &s.workload,
                    metrics: Vec::new(),
                    configs: Vec::new(),
                    threads: Vec::new(),
                    rows: Vec::new(),
                    values: HashMap::new(),
                });
                metric_rank.push(Vec::new());
                out.len() - 1
            }
        };
        let g = &mut out[w];
        let m = index_of(&mut g.metrics, Metric::of(s));
        let c = index_of(&mut g.configs, s.config.as_str());
        index_of(&mut g.threads, s.threads);
        index_of(&mut metric_rank[w], (Metric::of(s), s.threads));
        g.values.entry((m, c, s.threads)).or_default().push(s.value);
    }
    for (g, keys) in out.iter_mut().zip(metric_rank) {
        g.threads.sort_unstable();
        let metrics = &g.metrics;
        let mut rows = keys;
        rows.sort_by_key(|(m, t)| (metrics.iter().position(|x| x == m), *t));
        g.rows = rows;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(workload: &str, metric: &str, config: &str, threads: usize, value: f64) -> Sample {
        Sample {
            workload: workload.into(),
            metric: metric.into(),
            unit: "ops/s".into(),
            higher_is_better: true,
            config: config.into(),
            threads,
            rep: 0,
            value,
            cpu_wait: None,
            transfer_ns: None,
            transfer_after_ns: None,
        }
    }

    #[test]
    fn groups_keep_first_seen_order_and_ascending_threads() {
        let run = [
            s("b", "ops/s", "new", 2, 1.0),
            s("a", "ops/s", "base", 1, 2.0),
            s("b", "ops/s", "base", 1, 3.0),
            s("b", "faults/s", "base", 1, 4.0),
            s("b", "ops/s", "new", 2, 5.0),
        ];
        let g = by_workload(&run);
        assert_eq!(g.iter().map(|w| w.name).collect::<Vec<_>>(), ["b", "a"]);
        let b = &g[0];
        assert_eq!(b.configs, ["new", "base"]);
        assert_eq!(b.threads, [1, 2]);
        let ops = b.metric("ops/s").unwrap();
        assert_eq!(b.values(&ops, "new", 2), [1.0, 5.0]);
        assert_eq!(b.values(&ops, "new", 1), [] as [f64; 0]);
        assert_eq!(b.values(&ops, "absent", 1), [] as [f64; 0]);
        assert_eq!(b.threads_of(&ops, "base"), [1]);
        let rows: Vec<(&str, usize)> = b.rows.iter().map(|(m, t)| (m.name, *t)).collect();
        assert_eq!(rows, [("ops/s", 1), ("ops/s", 2), ("faults/s", 1)]);
    }
}

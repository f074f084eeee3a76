//! `vmresults`: what a vmscale lab run leaves behind, and how two runs are
//! compared.
//!
//! ```
//! use vmresults::{compare, samples};
//! let a = samples::parse_samples(concat!(
//!     r#"{"workload":"mmap1","metric":"ops/s","unit":"ops/s","higher_is_better":true,"config":"maple","threads":1,"rep":0,"value":100.0}"#, "\n",
//!     r#"{"workload":"mmap1","metric":"ops/s","unit":"ops/s","higher_is_better":true,"config":"maple","threads":1,"rep":1,"value":104.0}"#,
//! ))
//! .unwrap();
//! let b: Vec<_> = a.iter().cloned().map(|mut s| { s.value *= 2.0; s }).collect();
//! let tables = compare::compare(&a, &b).unwrap();
//! print!("{}", compare::render_text(&tables));
//! assert_eq!(compare::significant_rows(&tables), (1, 1));
//! ```
//!
//! [`samples`] is the results format: every repetition of every figure as
//! one JSON line ([`Sample`]), and the machine it ran on; [`group`] sorts
//! a run's samples by figure, once, for every reader below. [`compare`]
//! summarises repetitions (harmonic mean for rates, arithmetic for times)
//! and puts configurations, or two runs, side by side with the % change
//! and Welch's t-test. [`table`] renders those tables as text, Markdown or
//! HTML from one model; [`plot`] draws a chart per workload and [`page`]
//! puts the plots and tables on one HTML page. [`output`] writes files
//! atomically.
//!
//! Files from elsewhere are untrusted input: parsing returns a one-line
//! error and never panics (fuzzed in `fuzz/`).
//!
//! Cargo features: `png` (default) also writes each plot as PNG; without
//! it resvg is not built and plots are SVG only.
//!
//! Dependencies:
//! - `serde`/`serde_json`: the results format (`results.jsonl`, `machine.json`).
//! - `thiserror`: the error types.
//! - `statrs`: mean, variance and Student's t distribution for Welch's test.
//! - `comfy-table`: the text tables.
//! - `minijinja`: the HTML of the tables and the page, auto-escaped.
//! - `plotters` (SVG backend only): the charts.
//! - `resvg` (feature `png`): the PNG, rasterised from the same SVG.
//! - `mm`: the topology a [`Machine`] is detected with.

#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod compare;
pub mod group;
pub mod output;
pub mod page;
pub mod plot;
pub mod samples;
pub mod table;

pub use samples::{Machine, Sample};

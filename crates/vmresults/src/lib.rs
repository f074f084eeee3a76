//! `vmresults`: what a vmscale lab run leaves behind, and how two runs are
//! compared.
//!
//! [`samples`] is the results format: every repetition of every figure as
//! one JSON line ([`Sample`]), and the machine it ran on. [`compare`]
//! summarises repetitions (harmonic mean for rates, arithmetic for times)
//! and puts configurations, or two runs, side by side with the % change
//! and Welch's t-test, rendered as text or Markdown.
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
//! Dependencies: `serde`/`serde_json` for the format, `comfy-table` for
//! text tables. Files from elsewhere are untrusted input: parsing returns
//! a one-line error and never panics (fuzzed in `fuzz/`).

#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod compare;
pub mod output;
pub mod plot;
pub mod samples;

pub use samples::{Machine, Sample};

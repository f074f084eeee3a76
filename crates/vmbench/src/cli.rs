//! The command line of each subcommand: its options, how they become a
//! lab configuration, and how the results are printed.

pub mod itree;
pub mod run;
pub mod suite;
pub mod topology;
pub mod tree;

use clap::builder::{PossibleValuesParser, TypedValueParser};

/// A clap value parser for one of the lab's or the model's named kinds
/// (workloads, modes, indexes, i_mmap designs, locks): the kind's names
/// are the possible values, so `--help` lists them and a wrong one is
/// refused by clap with the list, and the option arrives typed. (clap's
/// `ValueEnum` derive would need clap inside the model and lab crates,
/// which their users do not want.)
pub fn named<T>(all: &'static [T], name: fn(T) -> &'static str) -> impl TypedValueParser<Value = T>
where
    T: Copy + Send + Sync + 'static,
{
    PossibleValuesParser::new(all.iter().map(|&t| name(t))).try_map(move |s: String| {
        all.iter()
            .copied()
            .find(|&t| name(t) == s)
            .ok_or_else(|| format!("unknown value '{s}'"))
    })
}

/// Keeps the first occurrence of each value, in order (`--index maple,maple`).
pub fn dedup<T: PartialEq + Copy>(values: &[T]) -> Vec<T> {
    let mut out = Vec::with_capacity(values.len());
    for &v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

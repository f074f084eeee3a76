//! The command line of each subcommand: its options, how they become a
//! lab configuration, and how the results are printed.

pub mod itree;
pub mod project;
pub mod run;
pub mod suite;
pub mod topology;
pub mod tree;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use vmlab::placement::Rule;

/// Where the workers run: options `run` and `suite` share, flattened into
/// both so they read and behave the same.
#[derive(Debug, Clone, clap::Args)]
pub struct MachineArgs {
    /// Worker counts, comma separated (e.g. 1,2). [default: 1, the powers
    /// of two below the CPU count, and the CPU count]
    #[arg(long, value_delimiter = ',')]
    pub threads: Option<Vec<String>>,

    /// The machine: host (this one's NUMA nodes and CPUs, workers pinned
    /// one per CPU) or NxM, N emulated nodes of M CPUs mapped onto the
    /// real ones (e.g. 12x32), which sets the i_mmap groups and the CPU
    /// each worker runs as. [default: host]
    #[arg(long)]
    pub topology: Option<String>,

    /// Do not pin workers to CPUs (on the host topology they are pinned
    /// one per CPU by default; workers on an emulated one never are).
    #[arg(long)]
    pub no_pin: bool,

    /// Where the host may put the workers' CPUs (see docs/workloads.md):
    /// before each run of several pinned workers the one-way cache-line
    /// transfer between the first two is measured, and `hold` waits (up to
    /// 30 s, then holds where the host kept them) until it is within 1.5x
    /// of the first such run's, NS waits for one within 1.5x of NS
    /// nanoseconds, `any` never waits. A run during which it changed is
    /// taken again, up to three times. [default: hold; any with --quick]
    #[arg(long, value_parser = parse_placement)]
    pub placement: Option<Rule>,
}

/// `--placement`'s parser: the lab's own, so the message names the option.
pub fn parse_placement(s: &str) -> Result<Rule, String> {
    s.parse().map_err(|e: vmlab::LabError| e.to_string())
}

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

/// Runs a figure-producing benchmark (`tree`, `itree`) and prints its
/// figures: one JSON line each as they arrive with `json`, else the table
/// `render` makes of them at the end. `progress` names the command in the
/// line each figure also gets on stderr (`None`: no such lines).
pub fn print_figures(
    json: bool,
    progress: Option<&str>,
    run: impl FnOnce(&mut dyn FnMut(vmlab::figure::Figure)) -> Result<(), vmlab::LabError>,
    render: fn(&[vmlab::figure::Figure]) -> String,
) -> Result<(), vmlab::LabError> {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut figures = Vec::new();
    let mut write_error: Option<std::io::Error> = None;
    run(&mut |f| {
        if let Some(command) = progress {
            eprintln!(
                "vmbench {command}: n={} {} {}: {:.1} {}",
                f.n, f.imp, f.op, f.value, f.unit
            );
        }
        if json && write_error.is_none() {
            write_error = vmlab::figure::write_json_line(&mut out, &f).err();
        }
        figures.push(f);
    })?;
    let written = match write_error {
        Some(e) => Err(e),
        None if json => Ok(()),
        None => writeln!(out, "{}", render(&figures)),
    };
    written.map_err(|e| vmlab::LabError(format!("writing results: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmlab::tree::{Impl, Op};

    /// `--ops` as `tree` declares it: the kinds' names, comma separated.
    #[derive(Debug, clap::Parser)]
    struct Lists {
        #[arg(long, value_delimiter = ',', value_parser = named(&Op::ALL, Op::name))]
        ops: Vec<Op>,
        #[arg(long, value_delimiter = ',', value_parser = named(&Impl::ALL, Impl::name))]
        impls: Vec<Impl>,
    }

    fn parse(args: &[&str]) -> Result<Lists, String> {
        <Lists as clap::Parser>::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn parses_names_and_rejects_unknown() {
        let l = parse(&["--ops", "load,iter,load", "--impls", "btreemap"]).unwrap();
        assert_eq!(dedup(&l.ops), [Op::Load, Op::Iter]);
        assert_eq!(l.impls, [Impl::BTreeMap]);
        let err = parse(&["--ops", "lod"]).unwrap_err();
        assert!(
            err.contains("invalid value 'lod'") && err.contains("gap_fwd"),
            "{err}"
        );
        assert!(parse(&["--impls", "avl"]).is_err());
    }
}

//! `vmbench`: the vmscale lab's benchmark driver.
//!
//! The binary is a thin command-line layer; each subcommand's measurement
//! code lives in its own module (`tree_bench` for `vmbench tree`) on top of
//! shared helpers (`rng`, `timing`, `report`, `alloc_count`) so later
//! subcommands can reuse them.

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod alloc_count;
mod compare;
mod itree_bench;
mod output;
mod plot;
mod report;
mod rng;
mod run_bench;
mod suite;
mod timing;
mod topology_cmd;
mod trace;
mod tree_bench;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use report::Record;
use tree_bench::{BenchError, Impl, Op, Scale, TreeConfig};

/// Counts live heap bytes so `bytes_*` figures can be measured for every
/// implementation, including std's `BTreeMap`.
#[global_allocator]
static ALLOCATOR: alloc_count::CountingAlloc = alloc_count::CountingAlloc;

/// Command line of `vmbench`.
#[derive(Debug, Parser)]
#[command(
    name = "vmbench",
    version,
    about = "Benchmarks for the vmscale maple tree and VMA code"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands; each maps to one benchmark module.
#[derive(Debug, Subcommand)]
enum Command {
    /// The whole lab in one command: every workload across the designs it
    /// compares, at 1 to all cores, repeated; writes a results directory
    /// (raw JSON lines, comparison table, plots, HTML page).
    Suite(suite::SuiteArgs),
    /// Maple tree vs BTreeMap microbenchmarks (load, insert, erase, iterate,
    /// gap search, concurrent reads, memory per entry).
    Tree(TreeArgs),
    /// Workloads on the address-space model: will-it-scale's (brk1, mmap1,
    /// malloc1, mmap2, page_fault3) in processes or threads mode, and
    /// execl (exec of a dynamically linked program against a resident
    /// population in libc's reverse map, --resident-vmas) and aim7-brk
    /// (forked tasks growing and shrinking their heaps) in processes mode;
    /// ops/s, its spread over --repeat runs, and every lock class's
    /// statistics.
    Run(run_bench::RunArgs),
    /// Run a real command with address-space randomisation off and record
    /// its initial map and every mmap/munmap/mprotect/mremap/brk call.
    Record(trace::RecordArgs),
    /// Replay a recorded trace on the model and report every difference.
    Replay(trace::ReplayArgs),
    /// Interval trees for i_mmap: augmented red-black vs augmented B+ tree
    /// (churn and page-query throughput, btree/rb ratio).
    Itree(itree_bench::ItreeArgs),
    /// Compare two results directories (e.g. before and after a change):
    /// per figure the mean of A and B, B's % change and Welch's p-value,
    /// then how many rows differ significantly.
    Compare(compare::CompareArgs),
    /// What this machine has (CPU model, CPUs, NUMA nodes and their CPUs,
    /// kernel) and what an emulated topology (--emulate NxM) maps onto it.
    Topology(topology_cmd::TopologyArgs),
}

/// Options of `vmbench tree`.
#[derive(Debug, Args)]
struct TreeArgs {
    /// Structure sizes in entries, comma separated (e.g. 1000,1e5).
    /// [default: 1e3,1e4,1e5,1e6; 1e3,1e4,1e5 with --quick]
    #[arg(long, value_delimiter = ',', value_parser = parse_count)]
    sizes: Option<Vec<usize>>,

    /// Samples per figure; the median is reported. [default: 5; 3 with --quick]
    #[arg(long)]
    repeat: Option<usize>,

    /// Smaller sizes, fewer repetitions and shorter batches.
    #[arg(long)]
    quick: bool,

    /// Operations to measure, comma separated. [default: all]
    #[arg(long, value_delimiter = ',')]
    ops: Option<Vec<String>>,

    /// Implementations to measure, comma separated. [default: all]
    #[arg(long, value_delimiter = ',')]
    impls: Option<Vec<String>>,

    /// Print one JSON object per figure on stdout instead of a table.
    #[arg(long)]
    json: bool,

    /// Seed of the workload's random choices.
    #[arg(long, default_value_t = tree_bench::DEFAULT_SEED)]
    seed: u64,
}

/// Accepts plain integers (underscores allowed) and `MeK` shorthand such as
/// `1e6`, because sizes are easier to read that way. Range checks happen
/// later so that they can report a friendly one-line error.
fn parse_count(text: &str) -> Result<usize, String> {
    let clean: String = text.trim().chars().filter(|&c| c != '_').collect();
    let bad = || format!("'{text}' is not a count (use e.g. 1000 or 1e3)");
    let Some((mantissa, exponent)) = clean.split_once(['e', 'E']) else {
        return clean.parse().map_err(|_| bad());
    };
    let mantissa: usize = mantissa.parse().map_err(|_| bad())?;
    let exponent: u32 = exponent.parse().map_err(|_| bad())?;
    10usize
        .checked_pow(exponent)
        .and_then(|p| p.checked_mul(mantissa))
        .ok_or_else(bad)
}

impl TreeArgs {
    /// Resolves defaults (which depend on `--quick`) and names into a
    /// validated configuration.
    fn to_config(&self) -> Result<TreeConfig, BenchError> {
        let default_sizes: &[usize] = if self.quick {
            &tree_bench::QUICK_SIZES
        } else {
            &tree_bench::DEFAULT_SIZES
        };
        let config = TreeConfig {
            sizes: self.sizes.clone().unwrap_or_else(|| default_sizes.to_vec()),
            repeat: self.repeat.unwrap_or(if self.quick { 3 } else { 5 }),
            ops: match &self.ops {
                Some(names) => tree_bench::parse_ops(names)?,
                None => Op::ALL.to_vec(),
            },
            impls: match &self.impls {
                Some(names) => tree_bench::parse_impls(names)?,
                None => Impl::ALL.to_vec(),
            },
            scale: if self.quick {
                Scale::QUICK
            } else {
                Scale::FULL
            },
            seed: self.seed,
        };
        config.validate()?;
        Ok(config)
    }
}

/// Runs `vmbench tree`: JSON lines as figures arrive, or a table at the end.
fn run_tree(args: &TreeArgs) -> Result<(), BenchError> {
    let config = args.to_config()?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut records: Vec<Record> = Vec::new();
    let mut write_error: Option<io::Error> = None;
    tree_bench::run(&config, &mut |record| {
        eprintln!(
            "vmbench tree: n={} {} {}: {:.1} {}",
            record.n, record.imp, record.op, record.value, record.unit
        );
        if args.json && write_error.is_none() {
            write_error = report::write_json_line(&mut out, &record).err();
        }
        records.push(record);
    })?;
    if let Some(err) = write_error {
        return Err(BenchError(format!("writing results: {err}")));
    }
    if !args.json {
        writeln!(out, "{}", tree_bench::render_table(&records))
            .map_err(|err| BenchError(format!("writing results: {err}")))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Suite(args) => suite::main(args),
        Command::Tree(args) => run_tree(args),
        Command::Run(args) => run_bench::main(args),
        Command::Record(args) => match trace::record(args) {
            // The recorded program's own status, so scripts can rely on it.
            Ok(code) => return ExitCode::from(code),
            Err(e) => Err(e),
        },
        Command::Replay(args) => trace::replay(args),
        Command::Itree(args) => itree_bench::main(args),
        Command::Compare(args) => compare::main(args),
        Command::Topology(args) => topology_cmd::main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parse_count_accepts_shorthand() {
        assert_eq!(parse_count("1000"), Ok(1000));
        assert_eq!(parse_count("1_000"), Ok(1000));
        assert_eq!(parse_count("1e6"), Ok(1_000_000));
        assert_eq!(parse_count("0"), Ok(0));
        assert!(parse_count("x").is_err());
        assert!(parse_count("1e99").is_err());
    }
}

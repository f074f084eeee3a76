//! `vmbench`: the vmscale lab's command line.
//!
//! Only argument parsing and printing live here (`cli/`, one module per
//! subcommand, plus `compare` and `trace`): each subcommand turns its
//! options into a configuration of the lab libraries and prints what they
//! return. The measurements are `vmlab`'s, the results format, tables,
//! plots and page `vmresults`', recording and replay `vmtrace`'s; the
//! model (`mm`) and the tree (`maple`) sit below them. Errors from the
//! libraries are typed; here they become `anyhow`'s and one line on
//! stderr.

#![deny(unsafe_code)]
#![deny(missing_docs)]

mod cli;
mod compare;
mod trace;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Counts live heap bytes so `bytes_*` figures can be measured for every
/// implementation, including std's `BTreeMap`.
#[global_allocator]
static ALLOCATOR: vmlab::alloc_count::CountingAlloc = vmlab::alloc_count::CountingAlloc;

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
    Suite(cli::suite::SuiteArgs),
    /// Maple tree vs BTreeMap, rangemap, scc and crossbeam-skiplist
    /// microbenchmarks (load, insert, erase, iterate, gap search, concurrent
    /// reads, memory per entry).
    Tree(cli::tree::TreeArgs),
    /// Workloads on the address-space model: will-it-scale's (brk1, mmap1,
    /// malloc1, mmap2, page_fault3) in processes or threads mode, and
    /// execl (exec of a dynamically linked program against a resident
    /// population in libc's reverse map, --resident-vmas) and aim7-brk
    /// (forked tasks growing and shrinking their heaps) in processes mode;
    /// ops/s, its spread over --repeat runs, and every lock class's
    /// statistics.
    Run(cli::run::RunArgs),
    /// Run a real command with address-space randomisation off and record
    /// its initial map and every mmap/munmap/mprotect/mremap/brk call, and
    /// the madvise, mlock, mseal, VMA-name, protection-key and
    /// userfaultfd-registration calls, following its threads and
    /// children; exits with the command's status (128 + N for signal N).
    Record(trace::RecordArgs),
    /// Replay a recorded trace on the model and report every difference.
    Replay(trace::ReplayArgs),
    /// Interval trees for i_mmap: augmented red-black vs augmented B+ tree
    /// (churn and page-query throughput, btree/rb ratio).
    Itree(cli::itree::ItreeArgs),
    /// Project workloads onto machines this one is not (by default the
    /// execl report's 12 nodes x 32 CPUs): record each workload's profile
    /// at one worker here, simulate 1 to all CPUs there with every i_mmap
    /// design and lock kind, and print throughput and where CPU time goes;
    /// --validate checks the method against this machine at 2 workers.
    Project(cli::project::ProjectArgs),
    /// Compare two results directories (e.g. before and after a change):
    /// per figure the mean of A and B, B's % change and Welch's p-value,
    /// then how many rows differ significantly.
    Compare(compare::CompareArgs),
    /// What this machine has (CPU model, CPUs, NUMA nodes and their CPUs,
    /// kernel) and what an emulated topology (--emulate NxM) maps onto it.
    Topology(cli::topology::TopologyArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    match run(&cli) {
        Ok(code) => code,
        Err(err) => {
            // `{:#}`: the whole chain of causes on one line.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the subcommand; the libraries' typed errors become `anyhow`'s
/// here, at the one place that only prints them.
fn run(cli: &Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Command::Suite(args) => cli::suite::main(args)?,
        Command::Tree(args) => cli::tree::main(args)?,
        Command::Run(args) => cli::run::main(args)?,
        // The recorded program's own status, so scripts can rely on it.
        Command::Record(args) => return Ok(ExitCode::from(trace::record(args)?)),
        Command::Replay(args) => trace::replay(args)?,
        Command::Itree(args) => cli::itree::main(args)?,
        Command::Compare(args) => compare::main(args)?,
        // --validate fails when a prediction is off by more than --bound.
        Command::Project(args) => {
            if !cli::project::main(args)? {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Topology(args) => cli::topology::main(args)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints clap's refusal of the command line as one line, like every other
/// error of `vmbench` (scripts read the first line of stderr), and exits
/// with clap's usage status, 2. Help and version requests print as clap
/// formats them.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    {
        let _ = e.print();
        return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
    }
    let text = e.render().to_string();
    let line: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("For more information") && !l.starts_with("Usage:")
        })
        .collect();
    let line = line.join(" ");
    eprintln!(
        "{}",
        if line.starts_with("error:") {
            line
        } else {
            format!("error: {line}")
        }
    );
    ExitCode::from(2)
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
        assert_eq!(cli::tree::parse_count("1000"), Ok(1000));
        assert_eq!(cli::tree::parse_count("1_000"), Ok(1000));
        assert_eq!(cli::tree::parse_count("1e6"), Ok(1_000_000));
        assert_eq!(cli::tree::parse_count("0"), Ok(0));
        assert!(cli::tree::parse_count("x").is_err());
        assert!(cli::tree::parse_count("1e99").is_err());
    }
}

//! `vmbench record` and `vmbench replay`: check the address-space model
//! against real programs, through [`vmtrace`]. This module adds what a
//! command line needs: the output file that is replaced only when
//! complete, the exit status, the report and its verdict.

use std::io::Write as _;
use std::path::PathBuf;

use mm::IndexKind;
use vmtrace::format::Event;
use vmtrace::{Limits, Trace};

use vmlab::LabError as BenchError;
use vmresults::output::OutputFile;

/// Options of `vmbench record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Where to write the trace (JSON): absent, or a regular file, which
    /// is replaced only once the new trace is complete (a failed or
    /// interrupted recording leaves it as it was). Checked before the
    /// command starts: a path that cannot be written fails with status 1
    /// and the command never runs. vmbench exits with the recorded
    /// program's status (128 + N for a signal).
    #[arg(long, short)]
    pub out: PathBuf,

    /// The command to run, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Options of `vmbench replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The trace to replay.
    pub trace: PathBuf,

    /// The model's VMA index: maple or legacy.
    #[arg(long, default_value = "maple")]
    pub index: IndexKind,

    /// Also print each address space's final map in the model.
    #[arg(long)]
    pub maps: bool,

    /// Refuse a trace that builds more address spaces than this (one per
    /// exec, one per fork): traces are untrusted, and each address space
    /// costs memory.
    #[arg(long, default_value_t = Limits::default().max_spaces, value_name = "N")]
    pub max_spaces: usize,

    /// Refuse a trace whose address spaces would hold more VMAs than this
    /// together (each fork copies its parent's VMAs).
    #[arg(long, default_value_t = Limits::default().max_vmas, value_name = "N")]
    pub max_vmas: usize,

    /// Refuse a trace with more forks in a row than this without an exec
    /// between them (each level lengthens every anon_vma chain).
    #[arg(long, default_value_t = Limits::default().max_fork_depth, value_name = "N")]
    pub max_fork_depth: usize,
}

/// Runs `vmbench record`. The trace is written to a temporary file beside
/// `--out` and renamed into place only once complete, so whatever was at
/// `--out` survives a command that cannot start, a failed recording or an
/// interrupt (see [`vmresults::output`]). Returns the recorded program's exit
/// status (128 + N for a program killed by signal N), which `vmbench`
/// exits with, so scripts can rely on it.
pub fn record(args: &RecordArgs) -> Result<u8, BenchError> {
    // Checked and created before the command runs: a bad path fails first.
    let mut out = OutputFile::create(&args.out).map_err(|e| BenchError(format!("record: {e}")))?;
    let trace = vmtrace::record(&args.command).map_err(|e| BenchError(format!("record: {e}")))?;
    let text = trace
        .to_text()
        .map_err(|e| BenchError(format!("record: encoding the trace: {e}")))?;
    out.write_all(text.as_bytes())?;
    out.commit()?;
    let calls = trace.events.iter().filter(|e| e.is_call()).count();
    let unmodelled = trace
        .events
        .iter()
        .filter(|e| e.unmodelled().is_some())
        .count();
    let spaces = trace
        .events
        .iter()
        .filter(|e| matches!(e, Event::Exec { .. } | Event::Fork { .. }))
        .count();
    eprintln!(
        "vmbench record: {} ({}): {calls} calls (and {unmodelled} the model does not replay) in {spaces} address spaces, {} events, written to {}",
        quote(&args.command),
        trace.status,
        trace.events.len(),
        args.out.display()
    );
    Ok(exit_code(&trace.status))
}

/// The shell's exit status for a recorded status (`exit N`, `signal N`).
fn exit_code(status: &str) -> u8 {
    let number = |s: &str| s.trim().parse::<u32>().ok();
    if let Some(code) = status.strip_prefix("exit ").and_then(number) {
        (code & 0xff) as u8
    } else if let Some(sig) = status.strip_prefix("signal ").and_then(number) {
        (128 + sig.min(127)) as u8
    } else {
        1
    }
}

/// Runs `vmbench replay`: prints every difference and a summary; fails
/// when anything differs.
pub fn replay(args: &ReplayArgs) -> Result<(), BenchError> {
    let trace = Trace::load(&args.trace).map_err(|e| BenchError(format!("replay: {e}")))?;
    let limits = Limits {
        max_spaces: args.max_spaces,
        max_vmas: args.max_vmas,
        max_fork_depth: args.max_fork_depth,
    };
    let outcome = vmtrace::replay(&trace, args.index, &limits)
        .map_err(|e| BenchError(format!("replay: {}: {e}", args.trace.display())))?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut text = String::new();
    for d in &outcome.diffs {
        text.push_str(d);
        text.push('\n');
    }
    // Calls the model does not implement explain the differences they
    // cause, so they are always listed.
    for n in &outcome.notes {
        text.push_str(&format!("note: {n}\n"));
    }
    if args.maps {
        for (space, maps) in &outcome.model_maps {
            text.push_str(&format!("model map of space {space}:\n{maps}"));
        }
    }
    let per_call: Vec<String> = outcome
        .calls
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    let unmodelled: Vec<String> = outcome
        .not_modelled
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    let unmodelled = if unmodelled.is_empty() {
        String::new()
    } else {
        format!(" ({})", unmodelled.join(", "))
    };
    text.push_str(&format!(
        "replay {} [{}] index {}: {} calls ({}), {} address spaces, {} final maps, {} not modelled{unmodelled}, {} differences\n",
        args.trace.display(),
        quote(&trace.command),
        args.index,
        outcome.total_calls(),
        per_call.join(", "),
        outcome.spaces,
        outcome.finals,
        outcome.notes.len(),
        outcome.diffs.len()
    ));
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| BenchError(format!("replay: writing the report: {e}")))?;
    if !outcome.diffs.is_empty() {
        return Err(BenchError(format!(
            "replay: {} differences from the kernel",
            outcome.diffs.len()
        )));
    }
    // A replay that compared no final map checked only the calls' return
    // values, and one whose trace stops before an address space's end
    // cannot say the model ends where the kernel did: neither passes.
    if outcome.finals == 0 {
        return Err(BenchError(
            "replay: nothing checked: the trace has no final map (it was cut short or edited)"
                .into(),
        ));
    }
    if !outcome.unfinished.is_empty() {
        return Err(BenchError(format!(
            "replay: the trace ends early: {} of {} address spaces have no final map (spaces {})",
            outcome.unfinished.len(),
            outcome.spaces,
            outcome
                .unfinished
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(())
}

/// A command line on one line: arguments with spaces, quotes or control
/// characters are quoted and escaped.
fn quote(command: &[String]) -> String {
    command
        .iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._-=+,:@%".contains(c));
            if plain {
                a.clone()
            } else {
                format!("{a:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_quote_to_one_line() {
        let cmd = ["sh", "-c", "a b\nc", ""].map(String::from);
        assert_eq!(quote(&cmd), "sh -c \"a b\\nc\" \"\"");
    }

    #[test]
    fn recorded_statuses_become_exit_codes() {
        assert_eq!(exit_code("exit 0"), 0);
        assert_eq!(exit_code("exit 3"), 3);
        assert_eq!(exit_code("exit 256"), 0);
        assert_eq!(exit_code("signal 9"), 137);
        assert_eq!(exit_code("signal 15"), 143);
        assert_eq!(exit_code("unknown"), 1);
    }

    #[test]
    fn index_names_parse() {
        assert_eq!("maple".parse::<IndexKind>(), Ok(IndexKind::Maple));
        assert_eq!("legacy".parse::<IndexKind>(), Ok(IndexKind::Legacy));
    }
}

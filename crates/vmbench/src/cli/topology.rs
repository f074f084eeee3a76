//! `vmbench topology`: options and output.

use std::io::{self, Write};
use std::path::PathBuf;

use clap::Args;
use vmlab::topology::{measure, render_measurement, render_text, report, MeasureOptions};
use vmlab::LabError;

/// Options of `vmbench topology`.
#[derive(Debug, Args)]
pub struct TopologyArgs {
    /// Also show how NxM emulated nodes of M virtual CPUs each (e.g. 12x32)
    /// map onto this machine's CPUs.
    #[arg(long, value_name = "NxM", conflicts_with = "measure")]
    pub emulate: Option<String>,

    /// Measure this machine for the projection instead: cache-line
    /// transfer latency per CPU pair (same core complex, same node, between
    /// nodes) and the cost of a futex sleep and wake-up.
    #[arg(long)]
    pub measure: bool,

    /// With --measure: write the measured machine description as JSON to
    /// FILE, to be given back as `--machine FILE`.
    #[arg(long, value_name = "FILE", requires = "measure")]
    pub out: Option<PathBuf>,

    /// Print one JSON object instead of text (with --measure: the machine
    /// description).
    #[arg(long)]
    pub json: bool,
}

/// Runs `vmbench topology`.
pub fn main(args: &TopologyArgs) -> Result<(), LabError> {
    let text = if args.measure {
        measured(args)?
    } else {
        let r = report(args.emulate.as_deref())?;
        if args.json {
            json_line(serde_json::to_string(&r), "the report")?
        } else {
            render_text(&r)
        }
    };
    io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| LabError(format!("writing the report: {e}")))
}

/// `--measure`: measures, writes `--out`, and returns what to print.
fn measured(args: &TopologyArgs) -> Result<String, LabError> {
    let h = measure(&MeasureOptions::default())?;
    if let Some(path) = &args.out {
        let mut text = serde_json::to_string_pretty(&h.machine)
            .map_err(|e| LabError(format!("encoding the machine: {e}")))?;
        text.push('\n');
        std::fs::write(path, text)
            .map_err(|e| LabError(format!("writing {}: {e}", path.display())))?;
    }
    if args.json {
        json_line(serde_json::to_string(&h.machine), "the machine")
    } else {
        let mut text = render_measurement(&h);
        if let Some(path) = &args.out {
            text.push_str(&format!(
                "written to {} (use it as --machine {})\n",
                path.display(),
                path.display()
            ));
        }
        Ok(text)
    }
}

/// An encoded JSON value as one line, or the encoding error.
fn json_line(encoded: serde_json::Result<String>, what: &str) -> Result<String, LabError> {
    let mut line = encoded.map_err(|e| LabError(format!("encoding {what}: {e}")))?;
    line.push('\n');
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--measure --out FILE` writes a description that `--machine FILE`
    /// reads back as it was measured.
    #[test]
    fn a_measured_machine_is_written_for_machine_to_read() {
        let dir = std::env::temp_dir().join(format!("vmbench-measure-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("host.json");
        let args = TopologyArgs {
            emulate: None,
            measure: true,
            out: Some(path.clone()),
            json: true,
        };
        match measured(&args) {
            Ok(line) => {
                let printed: vmproject::Machine = serde_json::from_str(&line).unwrap();
                let read = vmproject::Machine::parse(path.to_str().unwrap()).unwrap();
                assert_eq!(read, printed);
                assert_eq!(read.name, "host");
            }
            // A process allowed one CPU has nothing to measure between.
            Err(e) => assert!(e.0.contains("may run on 1 CPU"), "{e}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

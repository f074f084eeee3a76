//! `vmbench topology`: options and output.

use std::io::{self, Write};

use clap::Args;
use vmlab::topology::{render_text, report};
use vmlab::LabError;

/// Options of `vmbench topology`.
#[derive(Debug, Args)]
pub struct TopologyArgs {
    /// Also show how NxM emulated nodes of M virtual CPUs each (e.g. 12x32)
    /// map onto this machine's CPUs.
    #[arg(long, value_name = "NxM")]
    pub emulate: Option<String>,

    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `vmbench topology`.
pub fn main(args: &TopologyArgs) -> Result<(), LabError> {
    let r = report(args.emulate.as_deref())?;
    let text = if args.json {
        let mut line =
            serde_json::to_string(&r).map_err(|e| LabError(format!("encoding the report: {e}")))?;
        line.push('\n');
        line
    } else {
        render_text(&r)
    };
    io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| LabError(format!("writing the report: {e}")))
}

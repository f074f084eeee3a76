//! `vmbench compare A B`: run B against run A, from their results
//! directories (the tables and statistics are [`vmresults::compare`]).

use std::io::{self, Write};
use std::path::PathBuf;

use clap::Args;
use vmresults::compare::{self, ALPHA};
use vmresults::samples;

use vmlab::LabError as BenchError;

/// Options of `vmbench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The results directory of the baseline run (A).
    pub a: PathBuf,

    /// The results directory of the run compared against it (B).
    pub b: PathBuf,

    /// Print GitHub Markdown instead of a text table.
    #[arg(long)]
    pub markdown: bool,
}

/// Runs `vmbench compare A B`: the table of B against A and one summary
/// line counting the rows that differ significantly.
pub fn main(args: &CompareArgs) -> Result<(), BenchError> {
    let a = samples::read_samples(&args.a).map_err(BenchError)?;
    let b = samples::read_samples(&args.b).map_err(BenchError)?;
    let tables = compare::compare(&a, &b).map_err(|e| {
        BenchError(format!(
            "{} and {} have {e}",
            args.a.display(),
            args.b.display()
        ))
    })?;
    let (significant, total) = compare::significant_rows(&tables);
    let body = if args.markdown {
        compare::render_markdown(&tables)
    } else {
        compare::render_text(&tables)
    };
    let mut out = io::stdout().lock();
    write!(
        out,
        "A: {}\nB: {}\n\n{body}{significant} of {total} rows differ significantly \
         (Welch's t-test, p < {ALPHA})\n",
        args.a.display(),
        args.b.display()
    )
    .map_err(|e| BenchError(format!("writing the table: {e}")))
}

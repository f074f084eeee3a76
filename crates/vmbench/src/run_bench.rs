//! TRANSIENT wiring: replaced by the will-it-scale workloads.
use crate::tree_bench::BenchError;

/// Options of `vmbench run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {}

/// Runs `vmbench run`.
pub fn main(_args: &RunArgs) -> Result<(), BenchError> {
    Err(BenchError("vmbench run is not implemented yet".into()))
}

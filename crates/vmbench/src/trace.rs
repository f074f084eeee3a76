//! TRANSIENT wiring: replaced by record and replay.
use crate::tree_bench::BenchError;

/// Options of `vmbench record`.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {}

/// Options of `vmbench replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {}

/// Runs `vmbench record`.
pub fn record(_args: &RecordArgs) -> Result<(), BenchError> {
    Err(BenchError("vmbench record is not implemented yet".into()))
}

/// Runs `vmbench replay`.
pub fn replay(_args: &ReplayArgs) -> Result<(), BenchError> {
    Err(BenchError("vmbench replay is not implemented yet".into()))
}

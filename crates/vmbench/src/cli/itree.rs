//! `vmbench itree`: options and output.

use clap::Args;
use vmlab::itree::{self, ItreeConfig, Op, Scale};
use vmlab::LabError;

/// Options of `vmbench itree`.
#[derive(Debug, Args)]
pub struct ItreeArgs {
    /// Tree sizes in intervals, comma separated (e.g. 100,6000,5e4).
    /// [default: 100,1000,6000,50000; 100,1000,6000 with --quick]
    #[arg(long, value_delimiter = ',', value_parser = crate::cli::tree::parse_count)]
    sizes: Option<Vec<usize>>,

    /// Samples per figure; the median is reported. [default: 7; 3 with --quick]
    #[arg(long)]
    repeat: Option<usize>,

    /// Smaller sizes, fewer repetitions and shorter batches.
    #[arg(long)]
    quick: bool,

    /// Operations to measure, comma separated. [default: all]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&Op::ALL, Op::name))]
    ops: Option<Vec<Op>>,

    /// Print one JSON object per figure on stdout instead of a table.
    #[arg(long)]
    json: bool,

    /// Seed of the workload's random choices.
    #[arg(long, default_value_t = 0x17ee)]
    seed: u64,
}

impl ItreeArgs {
    /// Resolves defaults (which depend on `--quick`) into a validated
    /// configuration.
    pub fn to_config(&self) -> Result<ItreeConfig, LabError> {
        let sizes: &[usize] = if self.quick {
            &itree::QUICK_SIZES
        } else {
            &itree::DEFAULT_SIZES
        };
        let config = ItreeConfig {
            sizes: self.sizes.clone().unwrap_or_else(|| sizes.to_vec()),
            repeat: self.repeat.unwrap_or(if self.quick { 3 } else { 7 }),
            ops: match &self.ops {
                Some(ops) => super::dedup(ops),
                None => Op::ALL.to_vec(),
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

/// Runs `vmbench itree`: JSON lines as figures arrive, or a table at the
/// end.
pub fn main(args: &ItreeArgs) -> Result<(), LabError> {
    let config = args.to_config()?;
    super::print_figures(
        args.json,
        None,
        |sink| itree::run(&config, sink),
        itree::render_table,
    )
}

//! `vmbench tree`: options and output.

use clap::Args;
use vmlab::tree::{self, Impl, Op, Scale, TreeConfig};
use vmlab::LabError;

/// Options of `vmbench tree`.
#[derive(Debug, Args)]
pub struct TreeArgs {
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
    #[arg(long, value_delimiter = ',', value_parser = super::named(&Op::ALL, Op::name))]
    ops: Option<Vec<Op>>,

    /// Implementations to measure, comma separated. [default: all]
    #[arg(long, value_delimiter = ',', value_parser = super::named(&Impl::ALL, Impl::name))]
    impls: Option<Vec<Impl>>,

    /// Print one JSON object per figure on stdout instead of a table.
    #[arg(long)]
    json: bool,

    /// Seed of the workload's random choices.
    #[arg(long, default_value_t = tree::DEFAULT_SEED)]
    seed: u64,
}

/// Accepts plain integers (underscores allowed) and `MeK` shorthand such as
/// `1e6`, because sizes are easier to read that way. Range checks happen
/// later so that they can report a friendly one-line error.
pub fn parse_count(text: &str) -> Result<usize, String> {
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
    fn to_config(&self) -> Result<TreeConfig, LabError> {
        let default_sizes: &[usize] = if self.quick {
            &tree::QUICK_SIZES
        } else {
            &tree::DEFAULT_SIZES
        };
        let config = TreeConfig {
            sizes: self.sizes.clone().unwrap_or_else(|| default_sizes.to_vec()),
            repeat: self.repeat.unwrap_or(if self.quick { 3 } else { 5 }),
            ops: match &self.ops {
                Some(ops) => super::dedup(ops),
                None => Op::ALL.to_vec(),
            },
            impls: match &self.impls {
                Some(impls) => super::dedup(impls),
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
pub fn main(args: &TreeArgs) -> Result<(), LabError> {
    let config = args.to_config()?;
    super::print_figures(
        args.json,
        Some("tree"),
        |sink| tree::run(&config, sink),
        tree::render_table,
    )
}

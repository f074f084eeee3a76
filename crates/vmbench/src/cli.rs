//! The command line of each subcommand: its options, how they become a
//! lab configuration, and how the results are printed.

pub mod itree;
pub mod run;
pub mod suite;
pub mod topology;
pub mod tree;

//! `healthpick simulate FILE`: replay a scenario through a configuration.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

pub(crate) const AFTER_HELP: &str = "Not implemented yet.";

#[derive(Debug, Args)]
pub(crate) struct SimulateArgs {
    /// The file to read
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

pub(crate) fn run(args: &SimulateArgs) -> ExitCode {
    let _ = &args.file;
    eprintln!("healthpick: not implemented yet");
    ExitCode::from(2)
}

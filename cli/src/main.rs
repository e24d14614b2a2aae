//! `healthpick`: command-line companion of the healthpick library.
//!
//! - `healthpick check FILE` validates a YARP `ReverseProxy:Clusters` JSON file exactly as the
//!   library reads it (exit 0 valid, 1 invalid, 2 usage error);
//! - `healthpick watch FILE` probes the configured destinations and shows a live health table;
//! - `healthpick simulate FILE` replays a scenario of probe results and request outcomes through a
//!   configuration and prints every decision as JSON lines.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod check;
mod screen;
mod simulate;
mod watch;

const MAIN_AFTER_HELP: &str = "\
Examples:
  healthpick check appsettings.json
  healthpick check --strict --json appsettings.Production.json
  healthpick watch appsettings.json
  healthpick watch --once appsettings.json && echo every cluster has a destination
  healthpick simulate examples/scenarios/active_ejection.json

Run `healthpick <COMMAND> --help` for each command's output formats and exit statuses.";

/// Validate, watch and simulate YARP ReverseProxy:Clusters configurations for healthpick.
#[derive(Debug, Parser)]
#[command(name = "healthpick", version, after_help = MAIN_AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check a configuration file and report every problem (like `nginx -t`)
    #[command(after_help = check::AFTER_HELP)]
    Check(check::CheckArgs),
    /// Probe the destinations of a configuration file and show their health live
    #[command(after_help = watch::AFTER_HELP)]
    Watch(watch::WatchArgs),
    /// Replay a scenario through a configuration and print every decision as JSON lines
    #[command(after_help = simulate::AFTER_HELP)]
    Simulate(simulate::SimulateArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Watch(args) => watch::run(&args),
        Command::Simulate(args) => simulate::run(&args),
    }
}

/// Reads the file as UTF-8 text, without a leading byte-order mark (editors on Windows write one
/// into appsettings.json files).
pub(crate) fn read_text(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "the file is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

/// Writes to stdout, ignoring a closed pipe (`healthpick check f | head -1` must not panic).
pub(crate) fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

pub(crate) fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

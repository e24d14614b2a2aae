//! `healthpick watch FILE`: probe the destinations of a configuration as configured and show their
//! health live ([`healthpick::table`]), with state changes logged below the table, reloading the
//! file whenever it changes ([`healthpick::discovery::ConfigFile`]); `--once` runs one round,
//! prints the table and exits with whether every cluster has an available destination.

use std::collections::HashSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use healthpick::config::{check, Config};
use healthpick::discovery::{ConfigFile, Discovery};
use healthpick::policy::{ActiveHealthPolicy, ActivePolicyContext, ActiveVerdict};
use healthpick::table::{LiveTable, OutputMode, StatusTable};
use healthpick::Reason;
use healthpick::{
    ActiveMonitor, Destination, Engine, EngineStatus, HealthClass, HealthState, PolicyRegistry,
    ProbeResult,
};
use tokio::sync::broadcast::error::RecvError;

use crate::{emit, plural, read_text};

pub(crate) const AFTER_HELP: &str = "\
FILE is a YARP appsettings document, read exactly as `healthpick check` reads it.

What it shows:
  One row per destination: cluster, destination, tier, ACTIVE / PASSIVE / REPORTED
  health, AVAILABLE (`yes (best)`: gets traffic now; `yes`: may get traffic but ranks
  lower, e.g. Degraded or a remote tier; `no`: excluded by its checks; `panic`: every
  destination of the cluster failed and all get traffic anyway), IN FLIGHT and the last
  change with its reason.

  Every cluster with HealthCheck:Active:Enabled is probed as configured (Interval,
  Timeout, Path, Query, threshold, HTTP version, Host). On a terminal the table is
  redrawn in place with the latest state changes below it; otherwise (a pipe, a file,
  CI) every state change is one timestamped line (`[  3.2s] ...`) and the table is
  printed again, each row stamped, whenever it changes (and every 30 s). Stop with
  Ctrl-C.

  FILE is watched: when it changes (saved in place or by an editor's rename, or a
  Kubernetes ConfigMap update), it is reloaded and the table follows, with a line
  saying so. A version that cannot be read or is not a valid configuration is
  rejected with a line naming its problems, and the configuration in force stays
  until the file is good again. Destinations kept by a reload keep their health.

  Clusters without active checks are not probed, as the library would not probe them:
  their ACTIVE column shows `off`, their destinations stay Unknown and count as
  available, since healthpick sends them traffic. No requests flow through `watch`, so
  PASSIVE stays Unknown (or `off`).

--once:
  Runs one probe round for every cluster with active checks, prints the table and one
  verdict line per cluster, and exits. One round decides: a destination whose probe
  fails counts as Unhealthy at once, without the further rounds a failure threshold
  above 1 would wait for. It takes at most the longest probe Timeout of the file.

Exit status:
  0  (--once) every cluster has an available destination
  1  (--once) some cluster has none: every destination failed its probe (the cluster
     would be in panic mode); or FILE cannot be read or is not a valid configuration
     (the problems are printed as `healthpick check` prints them)
  2  usage error
  Without --once, `watch` runs until interrupted.

Examples:
  healthpick watch appsettings.json
  healthpick watch --once appsettings.json && echo every cluster has a destination
  healthpick watch appsettings.json | tee health.log";

#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// The YARP JSON configuration file whose destinations to probe (e.g. appsettings.json)
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Run one probe round, print the table and exit (0: every cluster has an available
    /// destination, 1: some cluster has none)
    #[arg(long)]
    pub once: bool,
}

pub(crate) fn run(args: &WatchArgs) -> ExitCode {
    let name = args.file.display();
    let text = match read_text(&args.file) {
        Ok(text) => text,
        Err(why) => {
            let _ = writeln!(
                io::stderr(),
                "healthpick: error: cannot read `{name}`: {why}"
            );
            return ExitCode::FAILURE;
        }
    };
    let report = check(&text, &PolicyRegistry::default(), false);
    let config = match report.config {
        Some(config) if report.errors.is_empty() => config,
        _ => {
            let mut out = format!(
                "{name}: configuration is INVALID ({})\n",
                plural(report.errors.len().max(1), "error")
            );
            for e in &report.errors {
                out.push_str(&format!("error: {e}\n"));
            }
            for w in &report.warnings {
                out.push_str(&format!("warning: {w}\n"));
            }
            emit(&out);
            return ExitCode::FAILURE;
        }
    };
    for w in &report.warnings {
        let _ = writeln!(io::stderr(), "warning: {w}");
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(io::stderr(), "healthpick: error: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = if args.once {
        runtime.block_on(once(config))
    } else {
        runtime.block_on(live(&args.file))
    };
    match result {
        Ok(code) => code,
        // `healthpick watch f | head` closing the pipe is how a reader says "enough".
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(io::stderr(), "healthpick: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--once`: one round, strictly judged, then the table and a verdict per cluster.
async fn once(config: Config) -> io::Result<ExitCode> {
    let engine = match Engine::builder()
        .active_policy("ConsecutiveFailures", OneRound)
        .build_with(config)
    {
        Ok(engine) => engine,
        Err(e) => return Err(io::Error::other(e.to_string())),
    };
    // Discovered destinations count: the first answers come before the verdict.
    let discovery = Discovery::start(&engine);
    let monitor = ActiveMonitor::start(&engine);
    engine.ready().await;
    monitor.stop().await;
    discovery.stop().await;
    let status = engine.status();
    let mut out = StatusTable::new().render(&status);
    out.push('\n');
    let mut all_ok = true;
    for (cluster, ok, verdict) in verdicts(&status) {
        all_ok &= ok;
        out.push_str(&format!("cluster `{cluster}`: {verdict}\n"));
    }
    let mut stdout = io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Whether each cluster has an available destination, with a line saying why.
fn verdicts(status: &EngineStatus) -> Vec<(&str, bool, String)> {
    status
        .clusters
        .iter()
        .map(|c| {
            let n = c.destinations.len();
            let best = c.destinations.iter().filter(|d| d.in_best_group).count();
            let (ok, verdict) = match c.best_class {
                _ if n == 0 => (false, "NO DESTINATIONS configured".to_string()),
                Some(HealthClass::Unhealthy) | None => (
                    false,
                    format!(
                        "NO AVAILABLE DESTINATION: {} failed {} checks",
                        if n == 1 {
                            "its only destination".to_string()
                        } else {
                            format!("all {n} destinations")
                        },
                        if n == 1 { "its" } else { "their" },
                    ),
                ),
                Some(_) if !c.active_enabled => (
                    true,
                    format!(
                        "not probed (active checks disabled), counts as available: {} in the \
                         best group",
                        plural(best, "destination"),
                    ),
                ),
                Some(class) => (
                    true,
                    format!(
                        "available: {} {class} in the best group",
                        plural(best, "destination"),
                    ),
                ),
            };
            (c.id.as_str(), ok, verdict)
        })
        .collect()
}

/// The `--once` active policy: a single round decides, so a failed probe is Unhealthy at once.
struct OneRound;

impl ActiveHealthPolicy for OneRound {
    fn probing_completed(
        &self,
        _ctx: &ActivePolicyContext<'_>,
        round: &[(&Destination, &ProbeResult)],
    ) -> Vec<ActiveVerdict> {
        round
            .iter()
            .enumerate()
            .map(|(index, (_, result))| ActiveVerdict {
                index,
                health: if result.is_success() {
                    HealthState::Healthy
                } else {
                    HealthState::Unhealthy
                },
                reason: Reason::Custom(format!("probe {} (one round)", result.describe()).into()),
            })
            .collect()
    }
}

/// Without `--once`: probe as configured, follow the file, and keep the table on screen until
/// interrupted.
async fn live(path: &Path) -> io::Result<ExitCode> {
    let file = path.display().to_string();
    let engine = Engine::default();
    // Loaded again here (it was checked above), then reloaded on every change.
    let _watch = ConfigFile::new(path)
        .watch(&engine)
        .map_err(|e| io::Error::other(e.to_string()))?;
    let status = engine.status();
    let mut live = LiveTable::stdout(StatusTable::new())
        .clock(engine.clock().clone())
        .recent_lines(10)
        .reprint_every(Some(Duration::from_secs(30)));
    let header = format!(
        "healthpick watch {file}: {}; reloaded when it changes; Ctrl-C to stop",
        summary(&status)
    );
    match live.mode() {
        OutputMode::Redraw => emit(&format!("{header}\n\n")),
        OutputMode::Lines => live.note(&header)?,
    }
    let mut unprobed = HashSet::new();
    note_unprobed(&mut live, &status, &mut unprobed)?;
    let mut generation = status.config.generation;
    // Subscribe before probing starts, so no change is missed.
    let mut events = engine.subscribe();
    let _monitor = ActiveMonitor::start(&engine);
    // The file's `Discovery` sections publish destinations; the runner follows reloads.
    let _discovery = Discovery::start(&engine);
    live.update(&engine.status())?;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        tokio::select! {
            // Ctrl-C: print the final table and exit 0, as a user stopping a watch expects.
            _ = &mut interrupted => break,
            event = events.recv() => match event {
                // A rejected version is an event (`configuration FILE rejected, ...`).
                Ok(event) => live.event(&event)?,
                Err(RecvError::Lagged(n)) => live.note(&format!("({n} changes not shown)"))?,
                Err(RecvError::Closed) => break,
            },
            _ = tick.tick() => {
                let status = engine.status();
                if status.config.generation != generation {
                    generation = status.config.generation;
                    live.note(&format!("configuration {file} reloaded: {}", summary(&status)))?;
                    note_unprobed(&mut live, &status, &mut unprobed)?;
                }
                live.update(&status)?;
            }
        }
    }
    live.finish(&engine.status())?;
    Ok(ExitCode::SUCCESS)
}

/// `N clusters, M destinations, K probed`.
fn summary(status: &EngineStatus) -> String {
    let destinations: usize = status.clusters.iter().map(|c| c.destinations.len()).sum();
    let probed = status.clusters.iter().filter(|c| c.active_enabled).count();
    format!(
        "{}, {}, {probed} probed",
        plural(status.clusters.len(), "cluster"),
        plural(destinations, "destination"),
    )
}

/// One line per cluster whose destinations are not probed, unless `noted` already has it.
fn note_unprobed<W: Write>(
    live: &mut LiveTable<W>,
    status: &EngineStatus,
    noted: &mut HashSet<String>,
) -> io::Result<()> {
    let now: HashSet<String> = status
        .clusters
        .iter()
        .filter(|c| !c.active_enabled)
        .map(|c| c.id.clone())
        .collect();
    for c in status
        .clusters
        .iter()
        .filter(|c| now.contains(&c.id) && !noted.contains(&c.id))
    {
        live.note(&format!(
            "cluster `{}`: active checks disabled, not probed",
            c.id
        ))?;
    }
    *noted = now;
    Ok(())
}

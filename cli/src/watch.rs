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
use healthpick::table::{describe_event, LiveTable, OutputMode, StatusTable};
use healthpick::Reason;
use healthpick::{
    ActiveMonitor, Clock, Destination, Engine, EngineStatus, HealthClass, HealthEvent,
    HealthEventKind, HealthPart, HealthState, PartValue, PolicyRegistry, ProbeResult,
};
use ratatui::crossterm::event::Event as TerminalEvent;
use tokio::sync::broadcast::error::RecvError;

use crate::screen::{colour_allowed, Screen, View};
use crate::{emit, plural, read_text};

pub(crate) const AFTER_HELP: &str = "\
FILE is a YARP appsettings document, read exactly as `healthpick check` reads it.

What it shows:
  One row per destination: cluster, destination, tier, ACTIVE / PASSIVE / REPORTED
  health, AVAILABLE (`yes (best)`: gets traffic now; `yes`: may get traffic but ranks
  lower, e.g. Degraded or a remote tier; `no`: excluded by its checks; `panic`: every
  destination of the cluster failed and all get traffic anyway), IN FLIGHT and the last
  change with its reason. LATENCY (the latency estimate), UTIL (the utilization a
  server reports, once it counts) and SLOW START (the share of its weight a warming
  destination counts with) show when some destination has a value; a cluster with
  TierSpill Load says where its spill stands (share to the next tier, the preferred
  tier's latency against its unloaded latency). No requests flow through `watch`, so
  latency and utilization stay empty here; the library's status table shows them in a
  live service.

  Every cluster with HealthCheck:Active:Enabled is probed as configured (Interval,
  Timeout, Path, Query, threshold, HTTP version, Host).

  On a terminal the table fills the screen (sized to it, redrawn on resize), problems
  first, with a summary line per cluster (available / total, tier in use, PANIC,
  SPILL, discovery sources and their staleness) and the latest changes below. Keys: s cycles
  the order (unhealthy first, config order, by name), arrows and PgUp/PgDn scroll, q,
  Esc or Ctrl-C quit. States are coloured unless NO_COLOR is set (non-empty).

  Otherwise (a pipe, a file, CI, TERM=dumb) every state change is one timestamped line
  (`[  3.2s] ...`) and the table is printed again, each row stamped, whenever it changes
  (and every 30 s). Ctrl-C or SIGTERM stops it with a final table (on a terminal, on the
  normal screen after leaving the full-screen view).

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
  Without --once, `watch` runs until stopped (q, Ctrl-C, SIGTERM) and exits 0.

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

/// Where the live watch shows things: the interactive screen on a terminal, timestamped lines
/// elsewhere.
enum Output {
    Screen(Box<Screen>),
    Lines(Box<LiveTable<io::Stdout>>),
}

impl Output {
    /// A line worth a timestamp: under the screen's table, or printed at once.
    fn note(&mut self, clock: &dyn Clock, text: &str) -> io::Result<()> {
        match self {
            Output::Screen(screen) => {
                let stamp = format!("[{:5.1}s] ", clock.now().as_secs_f64());
                screen.view.push_recent(format!("{stamp}{text}"));
                screen.draw()
            }
            Output::Lines(live) => live.note(text),
        }
    }

    fn update(&mut self, status: EngineStatus) -> io::Result<()> {
        match self {
            Output::Screen(screen) => {
                screen.view.status = status;
                screen.draw()
            }
            Output::Lines(live) => live.update(&status),
        }
    }

    /// The final table: on the normal screen after leaving the alternate one, or printed.
    fn finish(self, status: &EngineStatus, why: &str) -> io::Result<()> {
        match self {
            Output::Screen(screen) => screen.finish(status, why),
            Output::Lines(mut live) => {
                live.note(&format!("stopped ({why})"))?;
                live.finish(status)
            }
        }
    }
}

/// Without `--once`: probe as configured, follow the file, and keep the table on screen until
/// interrupted (Ctrl-C, SIGTERM, or `q` on the screen).
async fn live(path: &Path) -> io::Result<ExitCode> {
    let file = path.display().to_string();
    let engine = Engine::default();
    let clock = engine.clock().clone();
    // Loaded again here (it was checked above), then reloaded on every change.
    let _watch = ConfigFile::new(path)
        .watch(&engine)
        .map_err(|e| io::Error::other(e.to_string()))?;
    // Signals are set up before the screen takes the terminal, so a failure leaves it alone.
    #[cfg(unix)]
    let mut terminated = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let status = engine.status();
    let mut out = match OutputMode::detect(&io::stdout()) {
        OutputMode::Redraw => {
            let view = View::new(file.clone(), status.clone(), colour_allowed());
            Output::Screen(Box::new(Screen::start(view)?))
        }
        OutputMode::Lines => {
            let live = LiveTable::stdout(StatusTable::new())
                .clock(clock.clone())
                .reprint_every(Some(Duration::from_secs(30)));
            Output::Lines(Box::new(live))
        }
    };
    out.note(
        clock.as_ref(),
        &format!(
            "healthpick watch {file}: {}; reloaded when it changes; Ctrl-C to stop",
            summary(&status)
        ),
    )?;
    let mut unprobed = HashSet::new();
    note_unprobed(&mut out, clock.as_ref(), &status, &mut unprobed)?;
    let mut generation = status.config.generation;
    // Subscribe before probing starts, so no change is missed.
    let mut events = engine.subscribe();
    let _monitor = ActiveMonitor::start(&engine);
    // The file's `Discovery` sections publish destinations; the runner follows reloads.
    let _discovery = Discovery::start(&engine);
    out.update(engine.status())?;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let why = loop {
        let key = async {
            match &mut out {
                Output::Screen(screen) if screen.input_open => screen.input.recv().await,
                _ => std::future::pending().await,
            }
        };
        #[cfg(unix)]
        let term = terminated.recv();
        #[cfg(not(unix))]
        let term = std::future::pending::<Option<()>>();
        tokio::select! {
            // Ctrl-C and SIGTERM: the final table and exit 0, as a user stopping a watch expects.
            _ = &mut interrupted => break "Ctrl-C",
            _ = term => break "SIGTERM",
            input = key => {
                let Output::Screen(screen) = &mut out else { continue };
                match input {
                    Some(TerminalEvent::Key(key)) => {
                        if let Some(why) = screen.view.key(key) {
                            break why;
                        }
                        screen.draw()?;
                    }
                    // A resize clears and redraws the whole screen at the new size.
                    Some(TerminalEvent::Resize(..)) => screen.draw()?,
                    Some(_) => {}
                    // Input is gone (the terminal closed): keep showing until a signal.
                    None => screen.input_open = false,
                }
            }
            event = events.recv() => match event {
                Ok(event) => {
                    // The rest of the same change arrives with it: one batch, echoes dropped.
                    let mut batch = vec![event];
                    while let Ok(more) = events.try_recv() {
                        batch.push(more);
                    }
                    for event in without_echoes(batch) {
                        // A rejected version is an event (`configuration FILE rejected, ...`).
                        out.note(clock.as_ref(), &describe_event(&event))?;
                    }
                }
                Err(RecvError::Lagged(n)) => out.note(clock.as_ref(), &format!("({n} changes not shown)"))?,
                Err(RecvError::Closed) => break "engine stopped",
            },
            _ = tick.tick() => {
                let status = engine.status();
                if status.config.generation != generation {
                    generation = status.config.generation;
                    out.note(clock.as_ref(), &format!("configuration {file} reloaded: {}", summary(&status)))?;
                    note_unprobed(&mut out, clock.as_ref(), &status, &mut unprobed)?;
                }
                out.update(status)?;
            }
        }
    };
    out.finish(&engine.status(), why)?;
    Ok(ExitCode::SUCCESS)
}

/// `batch` (events that arrived together) without the reported part's echo of an active
/// change: a probe that fails clears the reported health (`reported Healthy -> none`) and one
/// that succeeds sets it again (`reported none -> Healthy`), in the same round that the active
/// policy's verdict changes, with the same probe for reason. Beside the active line it says
/// nothing new; alone (a failure below the threshold, or a payload going Degraded) it stays.
fn without_echoes(batch: Vec<HealthEvent>) -> Vec<HealthEvent> {
    let active_changes: Vec<(Duration, String, String)> = batch
        .iter()
        .filter_map(|e| match &e.kind {
            HealthEventKind::HealthChanged {
                destination,
                part: HealthPart::Active,
                ..
            } => Some((e.at, e.cluster.to_string(), destination.to_string())),
            _ => None,
        })
        .collect();
    batch
        .into_iter()
        .filter(|e| match &e.kind {
            HealthEventKind::HealthChanged {
                destination,
                part: HealthPart::Reported,
                from,
                to,
                ..
            } => {
                let set_or_cleared = matches!(
                    (from, to),
                    (PartValue::Reported(None), _) | (_, PartValue::Reported(None))
                );
                !(set_or_cleared
                    && active_changes.iter().any(|(at, cluster, d)| {
                        *at == e.at && **cluster == *e.cluster && **d == **destination
                    }))
            }
            _ => true,
        })
        .collect()
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
fn note_unprobed(
    out: &mut Output,
    clock: &dyn Clock,
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
        out.note(
            clock,
            &format!("cluster `{}`: active checks disabled, not probed", c.id),
        )?;
    }
    *noted = now;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use healthpick::ReportedHealth;

    fn change(
        at: u64,
        destination: &str,
        part: HealthPart,
        from: PartValue,
        to: PartValue,
    ) -> HealthEvent {
        HealthEvent::new(
            Duration::from_secs(at),
            "orders",
            HealthEventKind::HealthChanged {
                destination: destination.into(),
                part,
                from,
                to,
                reason: Reason::Probe {
                    result: "connection refused".to_string(),
                    consecutive_failures: 1,
                },
            },
        )
    }

    fn reported(
        at: u64,
        d: &str,
        from: Option<ReportedHealth>,
        to: Option<ReportedHealth>,
    ) -> HealthEvent {
        change(
            at,
            d,
            HealthPart::Reported,
            PartValue::Reported(from),
            PartValue::Reported(to),
        )
    }

    fn active(at: u64, d: &str, from: HealthState, to: HealthState) -> HealthEvent {
        change(
            at,
            d,
            HealthPart::Active,
            PartValue::State(from),
            PartValue::State(to),
        )
    }

    fn described(batch: Vec<HealthEvent>) -> Vec<String> {
        without_echoes(batch).iter().map(describe_event).collect()
    }

    const HEALTHY: Option<ReportedHealth> = Some(ReportedHealth::Healthy);

    #[test]
    fn the_reported_echo_of_an_active_change_is_dropped() {
        let lines = described(vec![
            reported(4, "local-1", HEALTHY, None),
            active(4, "local-1", HealthState::Healthy, HealthState::Unhealthy),
            reported(4, "local-2", None, HEALTHY),
            active(4, "local-2", HealthState::Unhealthy, HealthState::Healthy),
        ]);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("orders/local-1: active Healthy -> Unhealthy"));
        assert!(lines[1].starts_with("orders/local-2: active Unhealthy -> Healthy"));
    }

    #[test]
    fn a_reported_change_that_says_something_new_stays() {
        let lines = described(vec![
            // Below the failure threshold: the only word that a probe failed.
            reported(4, "local-1", HEALTHY, None),
            // The payload itself changed.
            reported(4, "local-2", HEALTHY, Some(ReportedHealth::Degraded)),
            active(4, "local-2", HealthState::Unknown, HealthState::Healthy),
            // Another destination's active change, or another round's, is no reason to drop it.
            reported(4, "local-3", HEALTHY, None),
            active(4, "local-4", HealthState::Healthy, HealthState::Unhealthy),
            reported(5, "local-4", None, HEALTHY),
        ]);
        assert_eq!(
            lines.iter().filter(|l| l.contains(": reported ")).count(),
            4,
            "{lines:?}"
        );
        assert_eq!(lines.len(), 6, "{lines:?}");
    }
}

//! Running a scenario: the real engine on a manual clock and a seeded random source, driven event
//! by event, with every decision written as one JSON line.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;

use super::scenario::{EventKind, Scenario, ScenarioError, ScenarioProblem, TimedEvent};
use crate::clock::ManualClock;
use crate::config::check::check;
use crate::config::diagnostics::Diagnostic;
use crate::config::model::HealthPolicyOptions;
use crate::engine::fast_path::PickHandle;
use crate::engine::Engine;
use crate::events::{HealthEvent, HealthEventKind, PartValue};
use crate::health::outcome::RequestOutcome;
use crate::health::reason::{OutlierEjection, Reason};
use crate::ids::eq_ignore_case;
use crate::observer::{Evaluated, Evaluation, Observer};
use crate::policy::registry::PolicyRegistry;

/// Replays a [`Scenario`] through the engine and returns its decisions as JSON lines.
///
/// The simulator is the engine itself (same policies, same selection), run on a
/// [`ManualClock`] and a seeded random source: the same scenario and seed give byte-identical
/// output.
#[derive(Debug)]
pub struct Simulation {
    scenario: Scenario,
    registry: PolicyRegistry,
}

impl Simulation {
    /// A simulation of `scenario` with the built-in policies.
    pub fn new(scenario: Scenario) -> Self {
        Simulation {
            scenario,
            registry: PolicyRegistry::default(),
        }
    }

    /// Uses `registry`, so scenarios can name custom policies.
    pub fn registry(mut self, registry: PolicyRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// Runs the scenario and returns the output lines (JSON objects, no trailing newline), in
    /// time order.
    ///
    /// # Errors
    /// An invalid configuration or globals, or an event naming a cluster or destination the
    /// configuration in force does not have, or a probe for a cluster without active checks.
    pub fn run(&self) -> Result<Vec<String>, ScenarioError> {
        let scenario = &self.scenario;
        let mut builder = Engine::builder().registry(self.registry.clone());
        if let Some(globals) = &scenario.globals {
            builder = builder.health_policy_options(read_globals(globals, &self.registry)?);
        }
        let clock = Arc::new(ManualClock::new());
        let out = Arc::new(Lines::default());
        let engine = builder
            .clock(clock.clone())
            .seed(scenario.seed)
            .observer(out.clone())
            .build();
        if let Err(e) = engine.load_json(&scenario.config) {
            return Err(config_problems("config", "", &e.errors));
        }
        let mut held: Vec<PickHandle> = Vec::new();
        for event in &scenario.events {
            fire_timers_until(&engine, &clock, event.at);
            clock.set(event.at);
            apply(&engine, event, &out, &mut held)?;
        }
        if let Some(until) = scenario.until {
            fire_timers_until(&engine, &clock, until);
        }
        drop(held);
        let lines = std::mem::take(&mut *out.lines.lock());
        Ok(lines)
    }
}

/// The globals object read as a config document's `HealthPolicies` section, so it gets the same
/// keys, TimeSpan grammar and error messages.
fn read_globals(
    globals: &str,
    registry: &PolicyRegistry,
) -> Result<HealthPolicyOptions, ScenarioError> {
    let doc = format!("{{\"HealthPolicies\": {globals}, \"Clusters\": {{}}}}");
    let report = check(&doc, registry, false);
    match report.config {
        Some(config) if report.errors.is_empty() => {
            Ok(config.health_policies().copied().unwrap_or_default())
        }
        _ => Err(config_problems("globals", "HealthPolicies", &report.errors)),
    }
}

/// Config diagnostics as scenario problems: `section` (a key path prefix of the diagnostics)
/// is replaced by `prefix`, the scenario key the document sits under.
fn config_problems(prefix: &str, section: &str, errors: &[Diagnostic]) -> ScenarioError {
    ScenarioError {
        problems: errors
            .iter()
            .map(|d| ScenarioProblem {
                event: None,
                path: join_path(prefix, d.path.strip_prefix(section).unwrap_or(&d.path)),
                message: d.message.clone(),
            })
            .collect(),
    }
}

fn join_path(prefix: &str, rest: &str) -> String {
    let rest = rest.trim_start_matches(':');
    if rest.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}.{}", rest.replace(':', "."))
    }
}

/// Fires every reactivation due at or before `limit`, each at its own due time.
fn fire_timers_until(engine: &Engine, clock: &ManualClock, limit: Duration) {
    while let Some(due) = engine.next_timer_due() {
        if due > limit {
            break;
        }
        clock.set(due);
        engine.fire_due_timers();
    }
}

fn apply(
    engine: &Engine,
    event: &TimedEvent,
    out: &Lines,
    held: &mut Vec<PickHandle>,
) -> Result<(), ScenarioError> {
    let index = event.index;
    let fail = |path: &str, message: String| {
        Err(ScenarioError::at_event(
            index,
            format!("events[{index}].{path}"),
            message,
        ))
    };
    match &event.kind {
        EventKind::Probe { cluster, results } => {
            if !engine.has_cluster(cluster) {
                return fail("probe.cluster", unknown_cluster(engine, cluster));
            }
            if engine.probe_targets(cluster).is_none() {
                return fail(
                    "probe.cluster",
                    format!(
                        "cluster `{cluster}` has active health checks disabled: it is never probed"
                    ),
                );
            }
            for r in results {
                if !engine.has_destination(cluster, &r.destination) {
                    return fail(
                        &format!("probe.results.{}", r.destination),
                        format!("cluster `{cluster}` has no destination `{}`", r.destination),
                    );
                }
            }
            // Known cluster: cannot fail.
            let _ = engine.report_probe_round(cluster, results);
        }
        EventKind::Request {
            cluster,
            destination,
            outcome,
        } => {
            if engine
                .report_outcome(cluster, destination, *outcome)
                .is_err()
            {
                return fail("request", missing(engine, cluster, destination));
            }
        }
        EventKind::Pick {
            cluster,
            count,
            hold,
        } => {
            if !engine.has_cluster(cluster) {
                return fail("pick.cluster", unknown_cluster(engine, cluster));
            }
            let at = engine.clock().now();
            for _ in 0..*count {
                match engine.pick_endpoint(cluster) {
                    Ok(handle) => {
                        out.push(&PickLine {
                            at: secs(at),
                            kind: "pick",
                            cluster: handle.destination().cluster_id(),
                            destination: Some(handle.destination().id()),
                            error: None,
                        });
                        if *hold {
                            held.push(handle);
                        }
                    }
                    Err(_) => out.push(&PickLine {
                        at: secs(at),
                        kind: "pick",
                        cluster,
                        destination: None,
                        error: Some("NoAvailableDestinations"),
                    }),
                }
            }
        }
        EventKind::InFlight {
            cluster,
            destination,
            delta,
        } => {
            if !engine.has_destination(cluster, destination) {
                return fail("inflight", missing(engine, cluster, destination));
            }
            // The simulator is the only caller, so the handles it holds are the in-flight count.
            let of_it = |h: &PickHandle| {
                eq_ignore_case(h.destination().cluster_id(), cluster)
                    && eq_ignore_case(h.destination().id(), destination)
            };
            let now = held.iter().filter(|h| of_it(h)).count() as i64;
            let next = now.saturating_add(*delta);
            if next < 0 {
                return fail(
                    "inflight.delta",
                    format!(
                        "{delta} would take `{destination}`'s in-flight count from {now} below 0"
                    ),
                );
            }
            for _ in now..next {
                match engine.hold(cluster, destination) {
                    Ok(handle) => held.push(handle),
                    Err(_) => return fail("inflight", missing(engine, cluster, destination)),
                }
            }
            for _ in next..now {
                if let Some(last) = held.iter().rposition(of_it) {
                    drop(held.remove(last));
                }
            }
        }
        EventKind::Reload { config } => {
            let at = secs(engine.clock().now());
            match engine.load_json(config) {
                Ok(_) => out.push(&ReloadLine {
                    at,
                    kind: "reload",
                    valid: true,
                    errors: Vec::new(),
                }),
                Err(e) => out.push(&ReloadLine {
                    at,
                    kind: "reload",
                    valid: false,
                    errors: e.errors.iter().map(|d| d.to_string()).collect(),
                }),
            }
        }
    }
    Ok(())
}

fn unknown_cluster(engine: &Engine, cluster: &str) -> String {
    format!(
        "no cluster `{cluster}` in the configuration in force (clusters: {})",
        engine.cluster_ids().join(", ")
    )
}

fn missing(engine: &Engine, cluster: &str, destination: &str) -> String {
    if engine.has_cluster(cluster) {
        format!("cluster `{cluster}` has no destination `{destination}`")
    } else {
        unknown_cluster(engine, cluster)
    }
}

fn secs(at: Duration) -> f64 {
    at.as_secs_f64()
}

/// The output, collected synchronously as the engine reports.
#[derive(Default)]
struct Lines {
    lines: Mutex<Vec<String>>,
}

impl Lines {
    fn push<T: Serialize>(&self, line: &T) {
        // These plain structs always serialize; a failure would be a bug, not bad input.
        if let Ok(text) = serde_json::to_string(line) {
            self.lines.lock().push(text);
        }
    }
}

impl Observer for Lines {
    fn evaluated(&self, e: &Evaluation<'_>) {
        let mut line = EvaluationLine {
            at: secs(e.at),
            kind: "evaluation",
            cluster: e.cluster,
            destination: e.destination,
            policy: e.policy,
            probe: None,
            result: None,
            outcome: None,
            counter: None,
            failed: None,
            total: None,
            rate: None,
            limit: None,
            consecutive_5xx: None,
            consecutive_gateway: None,
            ejection: None,
            ejected_for: None,
            ejections: None,
            ejected: None,
            cap: None,
            reason: None,
            state: e.state.to_string(),
        };
        match e.input {
            Evaluated::Probe(result) => {
                line.probe = Some(if result.is_success() {
                    "success"
                } else {
                    "failure"
                });
                line.result = Some(result.describe());
            }
            Evaluated::Outcome(outcome) => {
                line.outcome = Some(outcome_json(outcome));
            }
        }
        match e.reason {
            Reason::Probe {
                consecutive_failures,
                ..
            } => line.counter = Some(*consecutive_failures),
            Reason::FailureRate {
                failed,
                total,
                rate,
                limit,
            } => {
                line.failed = Some(*failed);
                line.total = Some(*total);
                line.rate = Some(*rate);
                line.limit = Some(*limit);
            }
            Reason::Outlier {
                consecutive_5xx,
                consecutive_gateway_failures,
                ejection,
            } => {
                line.consecutive_5xx = Some(*consecutive_5xx);
                line.consecutive_gateway = Some(*consecutive_gateway_failures);
                line.ejection = Some(match ejection {
                    OutlierEjection::Ejected { duration, count } => {
                        line.ejected_for = Some(secs(*duration));
                        line.ejections = Some(*count);
                        "ejected"
                    }
                    OutlierEjection::StillEjected { remaining } => {
                        line.ejected_for = Some(secs(*remaining));
                        "still-ejected"
                    }
                    OutlierEjection::CapReached { ejected, cap } => {
                        line.ejected = Some(*ejected);
                        line.cap = Some(*cap);
                        "cap-reached"
                    }
                    _ => "none",
                });
            }
            other => line.reason = Some(other.to_string()),
        }
        self.push(&line);
    }

    fn event(&self, event: &HealthEvent) {
        match &event.kind {
            HealthEventKind::HealthChanged {
                destination,
                part,
                from,
                to,
                reason,
            } => self.push(&HealthLine {
                at: secs(event.at),
                kind: "health",
                cluster: &event.cluster,
                destination,
                part: part.to_string(),
                from: part_value(*from),
                to: part_value(*to),
                reason: reason.to_string(),
            }),
            HealthEventKind::AvailabilityChanged { available, panic } => {
                self.push(&AvailableLine {
                    at: secs(event.at),
                    kind: "available",
                    cluster: &event.cluster,
                    destinations: available.iter().map(|d| &**d).collect(),
                    panic: *panic,
                })
            }
            // Scenarios have no discovery sources and no config files.
            _ => {}
        }
    }
}

fn part_value(value: PartValue) -> Option<String> {
    match value {
        PartValue::State(s) => Some(s.to_string()),
        PartValue::Reported(r) => r.map(|r| r.to_string()),
        other => Some(other.to_string()),
    }
}

/// An outcome as the scenario spells it: `"success"`, `"transport-failure"`, `"cancelled"` or
/// the status number.
pub(crate) fn outcome_json(outcome: RequestOutcome) -> serde_json::Value {
    match outcome {
        RequestOutcome::Success => "success".into(),
        RequestOutcome::TransportFailure => "transport-failure".into(),
        RequestOutcome::Cancelled => "cancelled".into(),
        RequestOutcome::Status(s) => s.into(),
    }
}

#[derive(Serialize)]
struct HealthLine<'a> {
    at: f64,
    #[serde(rename = "type")]
    kind: &'static str,
    cluster: &'a str,
    destination: &'a str,
    part: String,
    from: Option<String>,
    to: Option<String>,
    reason: String,
}

#[derive(Serialize)]
struct EvaluationLine<'a> {
    at: f64,
    #[serde(rename = "type")]
    kind: &'static str,
    cluster: &'a str,
    destination: &'a str,
    policy: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    probe: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    counter: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<f64>,
    #[serde(rename = "consecutive5xx", skip_serializing_if = "Option::is_none")]
    consecutive_5xx: Option<u32>,
    #[serde(rename = "consecutiveGateway", skip_serializing_if = "Option::is_none")]
    consecutive_gateway: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ejection: Option<&'static str>,
    #[serde(rename = "ejectedFor", skip_serializing_if = "Option::is_none")]
    ejected_for: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ejections: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ejected: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cap: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    state: String,
}

#[derive(Serialize)]
struct AvailableLine<'a> {
    at: f64,
    #[serde(rename = "type")]
    kind: &'static str,
    cluster: &'a str,
    destinations: Vec<&'a str>,
    panic: bool,
}

#[derive(Serialize)]
struct PickLine<'a> {
    at: f64,
    #[serde(rename = "type")]
    kind: &'static str,
    cluster: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    destination: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
}

#[derive(Serialize)]
struct ReloadLine {
    at: f64,
    #[serde(rename = "type")]
    kind: &'static str,
    valid: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<String>,
}

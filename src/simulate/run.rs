//! Running a scenario: the real engine on a manual clock and a seeded random source, driven event
//! by event, with every decision written as one JSON line.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;

use super::scenario::{EventKind, Keys, Scenario, ScenarioError, ScenarioProblem, TimedEvent};
use crate::clock::ManualClock;
use crate::config::check::check;
use crate::config::diagnostics::Diagnostic;
use crate::config::model::{Config, HealthPolicyOptions};
use crate::engine::fast_path::PickHandle;
use crate::engine::Engine;
use crate::error::PickError;
use crate::events::{HealthEvent, HealthEventKind, PartValue};
use crate::health::outcome::RequestOutcome;
use crate::health::reason::{OutlierEjection, Reason};
use crate::ids::{eq_ignore_case, fold_case};
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
    config: Option<Config>,
}

impl Simulation {
    /// A simulation of `scenario` with the built-in policies.
    pub fn new(scenario: Scenario) -> Self {
        Simulation {
            scenario,
            registry: PolicyRegistry::default(),
            config: None,
        }
    }

    /// Uses `registry`, so scenarios can name custom policies.
    pub fn registry(mut self, registry: PolicyRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// Starts from `config`, a configuration built in code, instead of the scenario's
    /// document: settings a document cannot spell, or the same timeline through several
    /// configurations. The scenario's `reload` events still apply their documents.
    ///
    /// ```
    /// use healthpick::config::{ClusterConfig, Config, DestinationConfig};
    /// use healthpick::simulate::{Scenario, Simulation};
    ///
    /// let scenario = Scenario::from_json(r#"{"config": {"Clusters": {}},
    ///     "events": [{"at": 1, "pick": {"cluster": "c", "count": 2}}]}"#)?;
    /// let config = Config::new().cluster(
    ///     ClusterConfig::new("c")
    ///         .load_balancing_policy("RoundRobin")
    ///         .destination(DestinationConfig::new("a", "http://10.0.0.1/"))
    ///         .destination(DestinationConfig::new("b", "http://10.0.0.2/")),
    /// );
    /// let lines = Simulation::new(scenario).config(config).run()?;
    /// assert_eq!(lines[1], r#"{"at":1.0,"type":"pick","cluster":"c","destination":"a"}"#);
    /// assert_eq!(lines[2], r#"{"at":1.0,"type":"pick","cluster":"c","destination":"b"}"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn config(mut self, config: Config) -> Self {
        self.config = Some(config);
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
        let loaded = match &self.config {
            Some(config) => engine.apply_config(config.clone()),
            None => engine.load_json(&scenario.config),
        };
        if let Err(e) = loaded {
            return Err(config_problems("config", "", &e.errors));
        }
        let mut run = Run {
            engine: &engine,
            clock: &clock,
            out: &out,
            held: Vec::new(),
            served: HashMap::new(),
            answers: BinaryHeap::new(),
            series: Vec::new(),
            tallies: Vec::new(),
            seq: 0,
        };
        let result = run.drive(&scenario.events, scenario.until);
        // Requests still held or being served end with the run.
        drop(run);
        result?;
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

/// How a destination answers the requests picks send it, as the scenario's `latency` and
/// `load` events set it.
#[derive(Default)]
struct Serving {
    /// How long a request takes; `None`: requests are not served (the pick's handle is dropped
    /// at once, unreported).
    latency: Option<Duration>,
    /// The `endpoint-load-metrics` value its answers carry.
    load: Option<String>,
}

/// A request being served: its answer is due at `due`.
struct Answer {
    due: Duration,
    seq: u64,
    took: Duration,
    handle: PickHandle,
}

impl PartialEq for Answer {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Answer {}
impl PartialOrd for Answer {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Answer {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

/// The picks of one `pick` event: all at once, or spread at a rate.
struct Series {
    seq: u64,
    /// The event's index, for errors.
    index: usize,
    cluster: String,
    /// The cluster id folded, to find its tally.
    folded: String,
    start: Duration,
    rate: Option<f64>,
    count: u64,
    done: u64,
    keys: Keys,
    hold: bool,
}

impl Series {
    /// When pick number `i` happens.
    fn time_of(&self, i: u64) -> Duration {
        match self.rate {
            Some(rate) => self.start + Duration::from_nanos((i as f64 * 1e9 / rate).round() as u64),
            None => self.start,
        }
    }

    fn next_pick(&self) -> Option<Duration> {
        (self.done < self.count).then(|| self.time_of(self.done))
    }

    /// When the series ends: its last pick's interval is over.
    fn end(&self) -> Duration {
        self.time_of(self.count)
    }
}

/// A cluster's picks counted since `since`, for a `tally` line every `every`.
struct Tally {
    /// The cluster as the scenario names it, and folded.
    cluster: String,
    folded: String,
    every: Duration,
    since: Duration,
    picks: BTreeMap<String, u64>,
    errors: BTreeMap<&'static str, u64>,
}

/// What happens next, in this order at the same instant: tally lines, answers, the engine's
/// timers, the scenario's events, the picks of spread `pick` events.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Tally(usize),
    Answer,
    Timer,
    Event,
    Pick(u64),
}

/// Keeps in `next` whichever comes first of it and `step` at `at`.
fn earliest(next: &mut Option<(Duration, Step)>, at: Duration, step: Step) {
    if next.is_none_or(|n| (at, step) < n) {
        *next = Some((at, step));
    }
}

/// One run of a scenario: the engine, the clock, and what the simulated callers hold.
struct Run<'a> {
    engine: &'a Engine,
    clock: &'a ManualClock,
    out: &'a Lines,
    /// Handles held for the rest of the run (`"hold": true`, `inflight`).
    held: Vec<PickHandle>,
    /// How each destination answers, by folded cluster and destination id.
    served: HashMap<(String, String), Serving>,
    /// Requests being served, the earliest answer first.
    answers: BinaryHeap<Reverse<Answer>>,
    /// Spread `pick` events still picking, in the order they started.
    series: Vec<Series>,
    /// The clusters whose picks are tallied, in the order their tallies began.
    tallies: Vec<Tally>,
    seq: u64,
}

impl Run<'_> {
    /// Runs the timeline: everything scheduled, in time order, up to `until` (without it, until
    /// nothing but the engine's timers and tallies is left).
    fn drive(
        &mut self,
        events: &[TimedEvent],
        until: Option<Duration>,
    ) -> Result<(), ScenarioError> {
        let mut next_event = 0;
        // The end of the last spread `pick` event to finish.
        let mut picked_until = Duration::ZERO;
        loop {
            let mut next: Option<(Duration, Step)> = None;
            for series in &self.series {
                if let Some(at) = series.next_pick() {
                    earliest(&mut next, at, Step::Pick(series.seq));
                }
            }
            if let Some(Reverse(answer)) = self.answers.peek() {
                earliest(&mut next, answer.due, Step::Answer);
            }
            if let Some(event) = events.get(next_event) {
                earliest(&mut next, event.at, Step::Event);
            }
            // Timers fire and tallies are written up to `until`, or as far as something else
            // happens.
            if let Some(horizon) = until.or(next.map(|(at, _)| at)) {
                if let Some(due) = self.engine.next_timer_due().filter(|&due| due <= horizon) {
                    earliest(&mut next, due, Step::Timer);
                }
                for (i, tally) in self.tallies.iter().enumerate() {
                    let due = tally.since + tally.every;
                    if due <= horizon {
                        earliest(&mut next, due, Step::Tally(i));
                    }
                }
            }
            let Some((at, step)) = next else { break };
            if until.is_some_and(|until| at > until) {
                break;
            }
            self.clock.set(at);
            match step {
                Step::Timer => {
                    self.engine.fire_due_timers();
                }
                Step::Answer => {
                    if let Some(Reverse(answer)) = self.answers.pop() {
                        self.answer(answer);
                    }
                }
                Step::Event => {
                    self.apply(&events[next_event])?;
                    next_event += 1;
                }
                Step::Tally(i) => write_tally(self.engine, self.out, &mut self.tallies[i], at),
                Step::Pick(seq) => {
                    if let Some(position) = self.series.iter().position(|s| s.seq == seq) {
                        let mut series = self.series.remove(position);
                        let result = self.pick(&mut series, at);
                        self.series.insert(position, series);
                        result?;
                    }
                }
            }
            self.series.retain(|s| {
                if s.done < s.count {
                    return true;
                }
                picked_until = picked_until.max(s.end());
                false
            });
        }
        // What the tallies counted since their last line, at the end (of the run, or of the
        // last spread `pick` event's interval).
        let end = until.unwrap_or_else(|| self.engine.clock().now().max(picked_until));
        for tally in &mut self.tallies {
            write_tally(self.engine, self.out, tally, end);
        }
        Ok(())
    }

    /// The answer to a request being served: its load report, then its outcome with the time it
    /// took, as the wrapped client reports an attempt.
    fn answer(&mut self, answer: Answer) {
        let handle = answer.handle;
        let key = (
            fold_case(handle.destination().cluster_id()),
            fold_case(handle.destination().id()),
        );
        if let Some(load) = self.served.get(&key).and_then(|s| s.load.as_deref()) {
            handle.report_load(load);
        }
        handle.report_took(RequestOutcome::Success, answer.took);
    }

    /// The series' next pick, at `at`.
    fn pick(&mut self, series: &mut Series, at: Duration) -> Result<(), ScenarioError> {
        let i = series.done;
        series.done += 1;
        let key = series.keys.nth(i);
        let picked = match &key {
            Some(key) => self
                .engine
                .pick_endpoint_for_key(&series.cluster, key.as_bytes()),
            None => self.engine.pick_endpoint(&series.cluster),
        };
        match picked {
            Ok(handle) => {
                let destination = handle.destination();
                match self.tallies.iter_mut().find(|t| t.folded == series.folded) {
                    Some(tally) => {
                        *tally.picks.entry(destination.id().to_string()).or_default() += 1;
                    }
                    None => self.out.push(&PickLine {
                        at: secs(at),
                        kind: "pick",
                        cluster: destination.cluster_id(),
                        key: key.as_deref(),
                        destination: Some(destination.id()),
                        error: None,
                    }),
                }
                if series.hold {
                    self.held.push(handle);
                } else {
                    let key = (
                        fold_case(destination.cluster_id()),
                        fold_case(destination.id()),
                    );
                    if let Some(took) = self.served.get(&key).and_then(|s| s.latency) {
                        self.seq += 1;
                        self.answers.push(Reverse(Answer {
                            due: at + took,
                            seq: self.seq,
                            took,
                            handle,
                        }));
                    }
                }
            }
            Err(PickError::UnknownCluster { .. }) => {
                let index = series.index;
                return Err(ScenarioError::at_event(
                    index,
                    format!("events[{index}].pick.cluster"),
                    unknown_cluster(self.engine, &series.cluster),
                ));
            }
            Err(e) => {
                let error = error_name(&e);
                match self.tallies.iter_mut().find(|t| t.folded == series.folded) {
                    Some(tally) => *tally.errors.entry(error).or_default() += 1,
                    None => self.out.push(&PickLine {
                        at: secs(at),
                        kind: "pick",
                        cluster: &series.cluster,
                        key: key.as_deref(),
                        destination: None,
                        error: Some(error),
                    }),
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, event: &TimedEvent) -> Result<(), ScenarioError> {
        let engine = self.engine;
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
                keys,
                rate,
            } => {
                if !engine.has_cluster(cluster) {
                    return fail("pick.cluster", unknown_cluster(engine, cluster));
                }
                let at = engine.clock().now();
                self.seq += 1;
                let mut series = Series {
                    seq: self.seq,
                    index,
                    cluster: cluster.clone(),
                    folded: fold_case(cluster),
                    start: at,
                    rate: *rate,
                    count: u64::from(*count),
                    done: 0,
                    keys: keys.clone(),
                    hold: *hold,
                };
                if rate.is_some() {
                    // Spread: the picks come as the clock reaches them.
                    self.series.push(series);
                } else {
                    while series.done < series.count {
                        self.pick(&mut series, at)?;
                    }
                }
            }
            EventKind::Tally { cluster, every } => {
                if !engine.has_cluster(cluster) {
                    return fail("tally.cluster", unknown_cluster(engine, cluster));
                }
                let at = engine.clock().now();
                let folded = fold_case(cluster);
                // What the cluster's tally counted so far is written first.
                if let Some(i) = self.tallies.iter().position(|t| t.folded == folded) {
                    let mut before = self.tallies.remove(i);
                    write_tally(engine, self.out, &mut before, at);
                }
                if let Some(every) = every {
                    self.tallies.push(Tally {
                        cluster: cluster.clone(),
                        folded,
                        every: *every,
                        since: at,
                        picks: BTreeMap::new(),
                        errors: BTreeMap::new(),
                    });
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
                // The simulator is the only caller, so the handles it holds are the in-flight
                // count (besides the requests being served).
                let of_it = |h: &PickHandle| {
                    eq_ignore_case(h.destination().cluster_id(), cluster)
                        && eq_ignore_case(h.destination().id(), destination)
                };
                let held = &mut self.held;
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
                    Ok(_) => self.out.push(&ReloadLine {
                        at,
                        kind: "reload",
                        valid: true,
                        errors: Vec::new(),
                    }),
                    Err(e) => self.out.push(&ReloadLine {
                        at,
                        kind: "reload",
                        valid: false,
                        errors: e.errors.iter().map(|d| d.to_string()).collect(),
                    }),
                }
            }
            EventKind::Latency {
                cluster,
                destinations,
            } => {
                for (destination, latency) in destinations {
                    if !engine.has_destination(cluster, destination) {
                        return fail(
                            &format!("latency.destinations.{destination}"),
                            missing(engine, cluster, destination),
                        );
                    }
                    let serving = self
                        .served
                        .entry((fold_case(cluster), fold_case(destination)))
                        .or_default();
                    serving.latency = *latency;
                }
            }
            EventKind::Load {
                cluster,
                destinations,
            } => {
                for (destination, load) in destinations {
                    if !engine.has_destination(cluster, destination) {
                        return fail(
                            &format!("load.destinations.{destination}"),
                            missing(engine, cluster, destination),
                        );
                    }
                    let serving = self
                        .served
                        .entry((fold_case(cluster), fold_case(destination)))
                        .or_default();
                    if load.is_some() && serving.latency.is_none() {
                        return fail(
                            &format!("load.destinations.{destination}"),
                            format!(
                                "`{destination}` serves no requests, so its load would never be reported: give it a `latency` first (a load report rides on each answer)"
                            ),
                        );
                    }
                    serving.load = load.clone();
                }
            }
        }
        Ok(())
    }
}

/// Writes the tally line of the picks counted since the last one, at `at` (nothing when none
/// were), and starts the next interval.
fn write_tally(engine: &Engine, out: &Lines, tally: &mut Tally, at: Duration) {
    if !tally.picks.is_empty() || !tally.errors.is_empty() {
        let status = engine.status();
        let cluster = status.cluster(&tally.cluster);
        out.push(&TallyLine {
            at: secs(at),
            kind: "tally",
            cluster: cluster.map_or(tally.cluster.as_str(), |c| c.id.as_str()),
            since: secs(tally.since),
            picks: &tally.picks,
            errors: &tally.errors,
            spill: cluster
                .and_then(|c| c.spill.as_ref())
                .map(|s| rounded(s.share)),
            warming: cluster
                .map(|c| {
                    c.destinations
                        .iter()
                        .filter_map(|d| d.slow_start.map(|f| (d.id.as_str(), rounded(f))))
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    tally.picks.clear();
    tally.errors.clear();
    tally.since = at;
}

/// Four decimals: enough to follow a share, short enough to read.
fn rounded(value: f64) -> f64 {
    (value * 1e4).round() / 1e4
}

/// A pick error as output lines name it.
fn error_name(error: &PickError) -> &'static str {
    match error {
        PickError::AffinityUnavailable { .. } => "AffinityUnavailable",
        PickError::DiscoveryPending { .. } => "DiscoveryPending",
        PickError::UnknownCluster { .. } => "UnknownCluster",
        PickError::UnknownDestination { .. } => "UnknownDestination",
        PickError::NoAvailableDestinations { .. } => "NoAvailableDestinations",
    }
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
            HealthEventKind::SpillStarted {
                from_tier,
                to_tier,
                share,
            } => self.push(&SpillLine {
                at: secs(event.at),
                kind: "spill",
                cluster: &event.cluster,
                state: "started",
                from_tier: *from_tier,
                to_tier: *to_tier,
                share: Some(rounded(*share)),
            }),
            HealthEventKind::SpillStopped { from_tier, to_tier } => self.push(&SpillLine {
                at: secs(event.at),
                kind: "spill",
                cluster: &event.cluster,
                state: "stopped",
                from_tier: *from_tier,
                to_tier: *to_tier,
                share: None,
            }),
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
    key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    destination: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
}

#[derive(Serialize)]
struct TallyLine<'a> {
    at: f64,
    #[serde(rename = "type")]
    kind: &'static str,
    cluster: &'a str,
    since: f64,
    picks: &'a BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    errors: &'a BTreeMap<&'static str, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spill: Option<f64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    warming: BTreeMap<&'a str, f64>,
}

#[derive(Serialize)]
struct SpillLine<'a> {
    at: f64,
    #[serde(rename = "type")]
    kind: &'static str,
    cluster: &'a str,
    state: &'static str,
    #[serde(rename = "fromTier")]
    from_tier: u32,
    #[serde(rename = "toTier")]
    to_tier: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    share: Option<f64>,
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

//! Reading a scenario document: the config, optional globals and seed, and a timeline of events.
//! Every problem is collected with the JSON path it sits at, so one run reports them all.

use std::fmt;
use std::time::Duration;

use jsonc_parser::ast::{Object, ObjectPropName, Value};
use jsonc_parser::common::Ranged;
use jsonc_parser::CollectOptions;

use crate::config::{eq_ignore_case, parse_options};
use crate::health::{ProbeResult, ReportedHealth, RequestOutcome};

/// A parsed scenario, ready for [`Simulation`](super::Simulation).
#[derive(Debug, Clone)]
pub struct Scenario {
    pub(crate) config: String,
    pub(crate) globals: Option<String>,
    pub(crate) seed: u64,
    pub(crate) until: Option<Duration>,
    pub(crate) events: Vec<TimedEvent>,
}

/// One event of the timeline.
#[derive(Debug, Clone)]
pub(crate) struct TimedEvent {
    /// Position in the `events` array, for errors.
    pub index: usize,
    pub at: Duration,
    pub kind: EventKind,
}

#[derive(Debug, Clone)]
pub(crate) enum EventKind {
    Probe {
        cluster: String,
        results: Vec<ProbeResult>,
    },
    Request {
        cluster: String,
        destination: String,
        outcome: RequestOutcome,
    },
    Pick {
        cluster: String,
        count: u32,
        hold: bool,
    },
    InFlight {
        cluster: String,
        destination: String,
        delta: i64,
    },
    Reload {
        config: String,
    },
}

/// One problem of a scenario: where (a JSON path such as `events[3].probe.cluster`) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioProblem {
    /// The index in `events` the problem belongs to, if it belongs to one.
    pub event: Option<usize>,
    /// JSON path of the offending value.
    pub path: String,
    /// What is wrong, naming the bad value.
    pub message: String,
}

impl fmt::Display for ScenarioProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::config::write_located(f, &self.path, &self.message)
    }
}

/// Why a scenario cannot be run: every problem found, in document order (a problem found while
/// running stops the run and is the only one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ScenarioError {
    /// The problems, at least one.
    pub problems: Vec<ScenarioProblem>,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "invalid scenario ({n} problem{})",
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            write!(f, "\n  {p}")?;
        }
        Ok(())
    }
}

impl ScenarioError {
    pub(crate) fn at_event(index: usize, path: String, message: impl Into<String>) -> Self {
        ScenarioError {
            problems: vec![ScenarioProblem {
                event: Some(index),
                path,
                message: message.into(),
            }],
        }
    }
}

impl Scenario {
    /// Reads a scenario document (JSON with comments and trailing commas allowed).
    ///
    /// # Errors
    /// Every problem of the document at once, each with its JSON path and, for events, the
    /// event's index.
    pub fn from_json(text: &str) -> Result<Scenario, ScenarioError> {
        Reader::default().read(text, None)
    }

    /// Reads a scenario but runs it through `config` (a YARP document) instead of the one it
    /// carries, which may then be missing: how a recorded incident is replayed with other
    /// settings.
    ///
    /// # Errors
    /// As [`from_json`](Self::from_json).
    pub fn from_json_with_config(text: &str, config: &str) -> Result<Scenario, ScenarioError> {
        Reader::default().read(text, Some(config))
    }

    /// The same scenario with another seed for the random source (the load balancers' choices).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Number of events in the timeline.
    pub fn event_count(&self) -> usize {
        self.events.len()
    }
}

#[derive(Default)]
struct Reader {
    problems: Vec<ScenarioProblem>,
    event: Option<usize>,
}

const TOP_KEYS: [&str; 6] = [
    "config",
    "globals",
    "seed",
    "until",
    "events",
    "description",
];
const EVENT_KINDS: [&str; 5] = ["probe", "request", "pick", "inflight", "reload"];

fn kind_of(value: &Value<'_>) -> &'static str {
    match value {
        Value::StringLit(_) => "a string",
        Value::NumberLit(_) => "a number",
        Value::BooleanLit(_) => "a boolean",
        Value::Object(_) => "an object",
        Value::Array(_) => "an array",
        Value::NullKeyword(_) => "null",
    }
}

fn key_of<'a>(name: &'a ObjectPropName<'_>) -> &'a str {
    match name {
        ObjectPropName::String(s) => &s.value,
        ObjectPropName::Word(w) => w.value,
    }
}

fn get<'o, 'a>(object: &'o Object<'a>, key: &str) -> Option<&'o Value<'a>> {
    object
        .properties
        .iter()
        .find(|p| eq_ignore_case(key_of(&p.name), key))
        .map(|p| &p.value)
}

impl Reader {
    fn problem(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(ScenarioProblem {
            event: self.event,
            path: path.into(),
            message: message.into(),
        });
    }

    fn read(
        mut self,
        text: &str,
        config_override: Option<&str>,
    ) -> Result<Scenario, ScenarioError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let options = parse_options();
        let parsed = jsonc_parser::parse_to_ast(text, &CollectOptions::default(), &options)
            .map_err(|e| {
                self.problem(
                    "",
                    format!(
                        "malformed JSON at line {} column {}: {}",
                        e.line_display(),
                        e.column_display(),
                        e.kind()
                    ),
                );
                self.finish_err()
            })?;
        let Some(Value::Object(root)) = &parsed.value else {
            self.problem("", "a scenario must be a JSON object");
            return Err(self.finish_err());
        };
        for p in &root.properties {
            let key = key_of(&p.name);
            if !TOP_KEYS.iter().any(|k| eq_ignore_case(k, key)) {
                self.problem(
                    key,
                    format!(
                        "unknown key `{key}` (expected one of: {})",
                        TOP_KEYS.join(", ")
                    ),
                );
            }
        }

        let config = match (config_override, get(root, "config")) {
            (Some(config), _) => Some(config.to_string()),
            (None, Some(value @ Value::Object(_))) => Some(slice(text, value)),
            (None, Some(other)) => {
                self.problem(
                    "config",
                    format!(
                        "must be a configuration document (an object), found {}",
                        kind_of(other)
                    ),
                );
                None
            }
            (None, None) => {
                self.problem(
                    "config",
                    "missing: the configuration to run the scenario through",
                );
                None
            }
        };
        let globals = match get(root, "globals") {
            None | Some(Value::NullKeyword(_)) => None,
            Some(value @ Value::Object(_)) => Some(slice(text, value)),
            Some(other) => {
                self.problem(
                    "globals",
                    format!("must be an object, found {}", kind_of(other)),
                );
                None
            }
        };
        let seed = match get(root, "seed") {
            None | Some(Value::NullKeyword(_)) => 0,
            Some(value) => self.integer(value, "seed").unwrap_or(0),
        };
        let until = match get(root, "until") {
            None | Some(Value::NullKeyword(_)) => None,
            Some(value) => self.seconds(value, "until"),
        };

        let mut events = Vec::new();
        match get(root, "events") {
            Some(Value::Array(array)) => {
                let mut last = Duration::ZERO;
                for (index, value) in array.elements.iter().enumerate() {
                    self.event = Some(index);
                    if let Some(event) = self.event_at(text, index, value, &mut last) {
                        events.push(event);
                    }
                }
                self.event = None;
            }
            None => self.problem("events", "missing: the timeline (an array of events)"),
            Some(other) => self.problem(
                "events",
                format!("must be an array, found {}", kind_of(other)),
            ),
        }
        if let (Some(until), Some(last)) = (until, events.last()) {
            if until < last.at {
                self.problem(
                    "until",
                    format!(
                        "{} is before the last event ({})",
                        until.as_secs_f64(),
                        last.at.as_secs_f64()
                    ),
                );
            }
        }

        match config {
            Some(config) if self.problems.is_empty() => Ok(Scenario {
                config,
                globals,
                seed,
                until,
                events,
            }),
            _ => Err(self.finish_err()),
        }
    }

    fn finish_err(&mut self) -> ScenarioError {
        ScenarioError {
            problems: std::mem::take(&mut self.problems),
        }
    }

    fn event_at(
        &mut self,
        text: &str,
        index: usize,
        value: &Value<'_>,
        last: &mut Duration,
    ) -> Option<TimedEvent> {
        let base = format!("events[{index}]");
        let Value::Object(object) = value else {
            self.problem(
                base,
                format!("an event must be an object, found {}", kind_of(value)),
            );
            return None;
        };
        let mut kinds = Vec::new();
        for p in &object.properties {
            let key = key_of(&p.name);
            if let Some(kind) = EVENT_KINDS.iter().find(|k| eq_ignore_case(k, key)) {
                kinds.push((*kind, &p.value));
            } else if !eq_ignore_case(key, "at") && !eq_ignore_case(key, "note") {
                self.problem(
                    format!("{base}.{key}"),
                    format!(
                        "unknown key `{key}` (an event has `at` and one of: {})",
                        EVENT_KINDS.join(", ")
                    ),
                );
            }
        }
        let at = match get(object, "at") {
            Some(v) => self.seconds(v, &format!("{base}.at")),
            None => {
                self.problem(format!("{base}.at"), "missing: the event's time in seconds");
                None
            }
        };
        if let Some(at) = at {
            if at < *last {
                self.problem(
                    format!("{base}.at"),
                    format!(
                        "{} is before the previous event ({}): times must not decrease",
                        at.as_secs_f64(),
                        last.as_secs_f64()
                    ),
                );
            } else {
                *last = at;
            }
        }
        let (kind, body) = match kinds.as_slice() {
            [one] => *one,
            [] => {
                self.problem(
                    base,
                    format!("an event needs one of: {}", EVENT_KINDS.join(", ")),
                );
                return None;
            }
            [first, second, ..] => {
                self.problem(
                    base,
                    format!(
                        "an event has exactly one kind, found `{}` and `{}`",
                        first.0, second.0
                    ),
                );
                return None;
            }
        };
        let path = format!("{base}.{kind}");
        let kind = match kind {
            "reload" => match body {
                Value::Object(_) => Some(EventKind::Reload {
                    config: slice(text, body),
                }),
                other => {
                    self.problem(
                        path,
                        format!(
                            "must be a configuration document (an object), found {}",
                            kind_of(other)
                        ),
                    );
                    None
                }
            },
            _ => {
                let Value::Object(body) = body else {
                    self.problem(path, format!("must be an object, found {}", kind_of(body)));
                    return None;
                };
                self.event_body(kind, body, &path)
            }
        };
        Some(TimedEvent {
            index,
            at: at?,
            kind: kind?,
        })
    }

    fn event_body(&mut self, kind: &str, body: &Object<'_>, path: &str) -> Option<EventKind> {
        let allowed: &[&str] = match kind {
            "probe" => &["cluster", "results"],
            "request" => &["cluster", "destination", "outcome"],
            "pick" => &["cluster", "count", "hold"],
            _ => &["cluster", "destination", "delta"],
        };
        for p in &body.properties {
            let key = key_of(&p.name);
            if !allowed.iter().any(|k| eq_ignore_case(k, key)) {
                self.problem(
                    format!("{path}.{key}"),
                    format!("unknown key `{key}` (expected: {})", allowed.join(", ")),
                );
            }
        }
        let cluster = self.required_string(body, path, "cluster");
        match kind {
            "probe" => {
                let results = match get(body, "results") {
                    Some(Value::Object(results)) => {
                        self.probe_results(results, &format!("{path}.results"))
                    }
                    Some(other) => {
                        self.problem(
                            format!("{path}.results"),
                            format!(
                                "must be an object of destination id to result, found {}",
                                kind_of(other)
                            ),
                        );
                        None
                    }
                    None => {
                        self.problem(format!("{path}.results"), "missing: the round's results");
                        None
                    }
                };
                Some(EventKind::Probe {
                    cluster: cluster?,
                    results: results?,
                })
            }
            "request" => {
                let destination = self.required_string(body, path, "destination");
                let outcome = match get(body, "outcome") {
                    Some(v) => self.outcome(v, &format!("{path}.outcome")),
                    None => {
                        self.problem(
                            format!("{path}.outcome"),
                            "missing: success, transport-failure, cancelled or an HTTP status",
                        );
                        None
                    }
                };
                Some(EventKind::Request {
                    cluster: cluster?,
                    destination: destination?,
                    outcome: outcome?,
                })
            }
            "pick" => {
                let count = match get(body, "count") {
                    None => Some(1),
                    Some(v) => {
                        let p = format!("{path}.count");
                        match self.integer(v, &p) {
                            Some(n @ 1..=1_000_000) => Some(n as u32),
                            Some(n) => {
                                self.problem(p, format!("{n} is out of range (1 to 1000000)"));
                                None
                            }
                            None => None,
                        }
                    }
                };
                let hold = match get(body, "hold") {
                    None => Some(false),
                    Some(Value::BooleanLit(b)) => Some(b.value),
                    Some(other) => {
                        self.problem(
                            format!("{path}.hold"),
                            format!("must be true or false, found {}", kind_of(other)),
                        );
                        None
                    }
                };
                Some(EventKind::Pick {
                    cluster: cluster?,
                    count: count?,
                    hold: hold?,
                })
            }
            _ => {
                let destination = self.required_string(body, path, "destination");
                let delta = match get(body, "delta") {
                    Some(Value::NumberLit(n)) => match n.value.parse::<i64>() {
                        Ok(d) => Some(d),
                        Err(_) => {
                            self.problem(
                                format!("{path}.delta"),
                                format!("`{}` is not a whole number", n.value),
                            );
                            None
                        }
                    },
                    Some(other) => {
                        self.problem(
                            format!("{path}.delta"),
                            format!("must be a whole number, found {}", kind_of(other)),
                        );
                        None
                    }
                    None => {
                        self.problem(
                            format!("{path}.delta"),
                            "missing: how much to add to the in-flight count",
                        );
                        None
                    }
                };
                Some(EventKind::InFlight {
                    cluster: cluster?,
                    destination: destination?,
                    delta: delta?,
                })
            }
        }
    }

    fn probe_results(&mut self, results: &Object<'_>, path: &str) -> Option<Vec<ProbeResult>> {
        let mut out = Vec::new();
        let mut ok = true;
        for p in &results.properties {
            let id = key_of(&p.name);
            let here = format!("{path}.{id}");
            match self.probe_result(id, &p.value, &here) {
                Some(r) => out.push(r),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn probe_result(&mut self, id: &str, value: &Value<'_>, path: &str) -> Option<ProbeResult> {
        const EXPECTED: &str = "an HTTP status, \"error\", {\"status\": 200, \"payload\": \"Degraded\"} or {\"error\": \"why\"}";
        match value {
            Value::NumberLit(_) => self.status(value, path).map(|s| ProbeResult::status(id, s)),
            Value::StringLit(s) if eq_ignore_case(&s.value, "error") => {
                Some(ProbeResult::error(id, "probe failed"))
            }
            Value::Object(object) => {
                if let Some(error) = get(object, "error") {
                    return match error {
                        Value::StringLit(s) => Some(ProbeResult::error(id, s.value.to_string())),
                        other => {
                            self.problem(
                                format!("{path}.error"),
                                format!("must be a string, found {}", kind_of(other)),
                            );
                            None
                        }
                    };
                }
                let status = match get(object, "status") {
                    Some(v) => self.status(v, &format!("{path}.status")),
                    None => {
                        self.problem(
                            format!("{path}.status"),
                            format!("missing: expected {EXPECTED}"),
                        );
                        None
                    }
                };
                let payload = match get(object, "payload") {
                    None | Some(Value::NullKeyword(_)) => Some(None),
                    Some(Value::StringLit(s)) => {
                        match ReportedHealth::parse(&s.value) {
                            Some(r) => Some(Some(r)),
                            None => {
                                self.problem(
                                format!("{path}.payload"),
                                format!("`{}` is not a health status (Healthy, Degraded or Unhealthy)", s.value),
                            );
                                None
                            }
                        }
                    }
                    Some(other) => {
                        self.problem(
                            format!("{path}.payload"),
                            format!("must be a string, found {}", kind_of(other)),
                        );
                        None
                    }
                };
                let result = ProbeResult::status(id, status?);
                Some(match payload? {
                    Some(r) => result.with_payload(r),
                    None => result,
                })
            }
            Value::StringLit(s) => {
                self.problem(
                    path,
                    format!("`{}` is not a probe result: expected {EXPECTED}", s.value),
                );
                None
            }
            other => {
                self.problem(
                    path,
                    format!("expected {EXPECTED}, found {}", kind_of(other)),
                );
                None
            }
        }
    }

    fn outcome(&mut self, value: &Value<'_>, path: &str) -> Option<RequestOutcome> {
        match value {
            Value::NumberLit(_) => self.status(value, path).map(RequestOutcome::Status),
            Value::StringLit(s) => {
                let t = s.value.as_ref();
                if eq_ignore_case(t, "success") {
                    Some(RequestOutcome::Success)
                } else if eq_ignore_case(t, "transport-failure") {
                    Some(RequestOutcome::TransportFailure)
                } else if eq_ignore_case(t, "cancelled") {
                    Some(RequestOutcome::Cancelled)
                } else {
                    self.problem(
                        path,
                        format!("`{t}` is not an outcome (success, transport-failure, cancelled or an HTTP status)"),
                    );
                    None
                }
            }
            other => {
                self.problem(
                    path,
                    format!("expected success, transport-failure, cancelled or an HTTP status, found {}", kind_of(other)),
                );
                None
            }
        }
    }

    fn status(&mut self, value: &Value<'_>, path: &str) -> Option<u16> {
        match self.integer(value, path)? {
            n @ 100..=999 => Some(n as u16),
            n => {
                self.problem(path, format!("{n} is not an HTTP status (100 to 999)"));
                None
            }
        }
    }

    fn required_string(&mut self, body: &Object<'_>, path: &str, key: &str) -> Option<String> {
        match get(body, key) {
            Some(Value::StringLit(s)) if !s.value.is_empty() => Some(s.value.to_string()),
            Some(Value::StringLit(_)) => {
                self.problem(format!("{path}.{key}"), "must not be empty");
                None
            }
            Some(other) => {
                self.problem(
                    format!("{path}.{key}"),
                    format!("must be a string, found {}", kind_of(other)),
                );
                None
            }
            None => {
                self.problem(format!("{path}.{key}"), format!("missing: the {key} id"));
                None
            }
        }
    }

    fn integer(&mut self, value: &Value<'_>, path: &str) -> Option<u64> {
        match value {
            Value::NumberLit(n) => match n.value.parse::<u64>() {
                Ok(v) => Some(v),
                Err(_) => {
                    self.problem(
                        path,
                        format!("`{}` is not a non-negative whole number", n.value),
                    );
                    None
                }
            },
            other => {
                self.problem(
                    path,
                    format!(
                        "must be a non-negative whole number, found {}",
                        kind_of(other)
                    ),
                );
                None
            }
        }
    }

    fn seconds(&mut self, value: &Value<'_>, path: &str) -> Option<Duration> {
        let Value::NumberLit(n) = value else {
            self.problem(
                path,
                format!("must be a number of seconds, found {}", kind_of(value)),
            );
            return None;
        };
        match n.value.parse::<f64>() {
            Ok(s) if (0.0..1e12).contains(&s) => Some(Duration::from_secs_f64(s)),
            _ => {
                self.problem(
                    path,
                    format!("`{}` is not a time in seconds (0 or more)", n.value),
                );
                None
            }
        }
    }
}

/// The source text of a value, so a nested configuration reads exactly as a file would.
fn slice(text: &str, value: &Value<'_>) -> String {
    let range = value.range();
    text.get(range.start..range.end)
        .unwrap_or_default()
        .to_string()
}

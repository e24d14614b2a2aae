//! Reading a scenario document: the config, optional globals and seed, and a timeline of events.
//! Every problem is collected with the JSON path it sits at, so one run reports them all.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use crate::config::diagnostics::write_located;
use crate::health::load_report;
use crate::health::outcome::RequestOutcome;
use crate::health::probe_result::ProbeResult;
use crate::health::state::ReportedHealth;
use crate::ids::eq_ignore_case;
use crate::jsonc::{self, Json, JsonKind};

/// An object's members.
type Members = [(String, Json)];

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
        /// The affinity key of each pick.
        keys: Keys,
        /// Picks per second: the picks are spread from `at` on, one every `1 / rate`; `None`:
        /// all at `at`.
        rate: Option<f64>,
    },
    /// From now on, the cluster's picks are counted and written as one `tally` line per
    /// `every` instead of a line each (`None`: a line each again).
    Tally {
        cluster: String,
        every: Option<Duration>,
    },
    /// From now on, requests to these destinations take this long (`None`: they are no longer
    /// served, picks of them are dropped at once).
    Latency {
        cluster: String,
        destinations: Vec<(String, Option<Duration>)>,
    },
    /// From now on, these destinations' answers carry this `endpoint-load-metrics` value
    /// (`None`: none).
    Load {
        cluster: String,
        destinations: Vec<(String, Option<String>)>,
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

/// The affinity keys of a `pick` event's picks.
#[derive(Debug, Clone)]
pub(crate) enum Keys {
    /// Unkeyed picks.
    None,
    /// Every pick with this key.
    One(String),
    /// Pick `i` with the `i`-th key, round and round.
    List(Vec<String>),
    /// Pick `i` with `prefix` and `i` modulo `count`: `user-0`, `user-1`, ...
    Numbered { prefix: String, count: u32 },
}

impl Keys {
    /// The key of the event's pick number `i`.
    pub fn nth(&self, i: u64) -> Option<Cow<'_, str>> {
        match self {
            Keys::None => None,
            Keys::One(key) => Some(Cow::Borrowed(key)),
            Keys::List(keys) => Some(Cow::Borrowed(&keys[(i % keys.len() as u64) as usize])),
            Keys::Numbered { prefix, count } => {
                Some(Cow::Owned(format!("{prefix}{}", i % u64::from(*count))))
            }
        }
    }
}

/// Most picks one `pick` event makes.
const MAX_PICKS: u64 = 1_000_000;

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
        write_located(f, &self.path, &self.message)
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

    /// The configuration document the scenario runs through (its own, or the one given to
    /// [`from_json_with_config`](Self::from_json_with_config)).
    pub fn config(&self) -> &str {
        &self.config
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
const EVENT_KINDS: [&str; 8] = [
    "probe", "request", "pick", "inflight", "reload", "latency", "load", "tally",
];

fn get<'o>(object: &'o Members, key: &str) -> Option<&'o Json> {
    object
        .iter()
        .find(|(k, _)| eq_ignore_case(k, key))
        .map(|(_, v)| v)
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
        let parsed = jsonc::parse(text).map_err(|malformed| {
            self.problem("", malformed);
            self.finish_err()
        })?;
        let Some(Json {
            kind: JsonKind::Object(root),
            ..
        }) = &parsed
        else {
            self.problem("", "a scenario must be a JSON object");
            return Err(self.finish_err());
        };
        for (key, _) in root {
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
            (
                None,
                Some(
                    value @ Json {
                        kind: JsonKind::Object(_),
                        ..
                    },
                ),
            ) => Some(value.text_in(text).to_string()),
            (None, Some(other)) => {
                self.problem(
                    "config",
                    format!(
                        "must be a configuration document (an object), found {}",
                        other.kind_name()
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
            None
            | Some(Json {
                kind: JsonKind::Null,
                ..
            }) => None,
            Some(
                value @ Json {
                    kind: JsonKind::Object(_),
                    ..
                },
            ) => Some(value.text_in(text).to_string()),
            Some(other) => {
                self.problem(
                    "globals",
                    format!("must be an object, found {}", other.kind_name()),
                );
                None
            }
        };
        let seed = match get(root, "seed") {
            None
            | Some(Json {
                kind: JsonKind::Null,
                ..
            }) => 0,
            Some(value) => self.integer(value, "seed").unwrap_or(0),
        };
        let until = match get(root, "until") {
            None
            | Some(Json {
                kind: JsonKind::Null,
                ..
            }) => None,
            Some(value) => self.seconds(value, "until"),
        };

        let mut events = Vec::new();
        match get(root, "events") {
            Some(Json {
                kind: JsonKind::Array(array),
                ..
            }) => {
                let mut last = Duration::ZERO;
                for (index, value) in array.iter().enumerate() {
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
                format!("must be an array, found {}", other.kind_name()),
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
        value: &Json,
        last: &mut Duration,
    ) -> Option<TimedEvent> {
        let base = format!("events[{index}]");
        let Json {
            kind: JsonKind::Object(object),
            ..
        } = value
        else {
            self.problem(
                base,
                format!("an event must be an object, found {}", value.kind_name()),
            );
            return None;
        };
        let mut kinds = Vec::new();
        for (key, value) in object {
            if let Some(kind) = EVENT_KINDS.iter().find(|k| eq_ignore_case(k, key)) {
                kinds.push((*kind, value));
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
                Json {
                    kind: JsonKind::Object(_),
                    ..
                } => Some(EventKind::Reload {
                    config: body.text_in(text).to_string(),
                }),
                other => {
                    self.problem(
                        path,
                        format!(
                            "must be a configuration document (an object), found {}",
                            other.kind_name()
                        ),
                    );
                    None
                }
            },
            _ => {
                let Json {
                    kind: JsonKind::Object(body),
                    ..
                } = body
                else {
                    self.problem(
                        path,
                        format!("must be an object, found {}", body.kind_name()),
                    );
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

    fn event_body(&mut self, kind: &str, body: &Members, path: &str) -> Option<EventKind> {
        let allowed: &[&str] = match kind {
            "probe" => &["cluster", "results"],
            "request" => &["cluster", "destination", "outcome"],
            "pick" => &["cluster", "count", "hold", "key", "keys", "rate", "for"],
            "latency" | "load" => &["cluster", "destinations"],
            "tally" => &["cluster", "every"],
            _ => &["cluster", "destination", "delta"],
        };
        for (key, _) in body {
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
                    Some(Json {
                        kind: JsonKind::Object(results),
                        ..
                    }) => self.probe_results(results, &format!("{path}.results")),
                    Some(other) => {
                        self.problem(
                            format!("{path}.results"),
                            format!(
                                "must be an object of destination id to result, found {}",
                                other.kind_name()
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
            "pick" => self.pick(body, path, cluster),
            "latency" => {
                let destinations = self.destinations(body, path, |reader, value, at| match value {
                    Json {
                        kind: JsonKind::Null,
                        ..
                    } => Some(None),
                    _ => reader.seconds(value, at).map(Some),
                });
                Some(EventKind::Latency {
                    cluster: cluster?,
                    destinations: destinations?,
                })
            }
            "load" => {
                let destinations = self.destinations(body, path, Reader::load_value);
                Some(EventKind::Load {
                    cluster: cluster?,
                    destinations: destinations?,
                })
            }
            "tally" => {
                let at = format!("{path}.every");
                let every = match get(body, "every") {
                    Some(Json {
                        kind: JsonKind::Null,
                        ..
                    }) => Some(None),
                    Some(value) => self
                        .positive(value, &at, "seconds")
                        .map(|every| Some(Duration::from_secs_f64(every))),
                    None => {
                        self.problem(
                            at,
                            "missing: how many seconds each tally line counts (null: a line per pick again)",
                        );
                        None
                    }
                };
                Some(EventKind::Tally {
                    cluster: cluster?,
                    every: every?,
                })
            }
            _ => {
                let destination = self.required_string(body, path, "destination");
                let delta = match get(body, "delta") {
                    Some(Json {
                        kind: JsonKind::Number(n),
                        ..
                    }) => match n.parse::<i64>() {
                        Ok(d) => Some(d),
                        Err(_) => {
                            self.problem(
                                format!("{path}.delta"),
                                format!("`{}` is not a whole number", n),
                            );
                            None
                        }
                    },
                    Some(other) => {
                        self.problem(
                            format!("{path}.delta"),
                            format!("must be a whole number, found {}", other.kind_name()),
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

    /// A `pick` event's body: how many, when, with which keys, shown how.
    fn pick(&mut self, body: &Members, path: &str, cluster: Option<String>) -> Option<EventKind> {
        let rate = get(body, "rate").and_then(|v| {
            let p = format!("{path}.rate");
            let rate = self.positive(v, &p, "picks per second")?;
            if rate > MAX_PICKS as f64 {
                self.problem(p, format!("{rate} picks a second is more than {MAX_PICKS}"));
                return None;
            }
            Some(rate)
        });
        let count = get(body, "count").map(|v| {
            let p = format!("{path}.count");
            match self.integer(v, &p) {
                Some(n @ 1..=MAX_PICKS) => Some(n as u32),
                Some(n) => {
                    self.problem(p, format!("{n} is out of range (1 to {MAX_PICKS})"));
                    None
                }
                None => None,
            }
        });
        let lasting = get(body, "for").map(|v| self.positive(v, &format!("{path}.for"), "seconds"));
        let count = match (count, lasting) {
            (Some(_), Some(_)) => {
                self.problem(
                    format!("{path}.for"),
                    "give `count` or `for`, not both",
                );
                None
            }
            (Some(count), None) => count,
            (None, None) if get(body, "rate").is_some() => {
                self.problem(
                    format!("{path}.rate"),
                    "a `rate` needs `count` (how many picks) or `for` (how long, in seconds)",
                );
                None
            }
            (None, None) => Some(1),
            (None, Some(lasting)) => match (get(body, "rate"), lasting) {
                (None, _) => {
                    self.problem(
                        format!("{path}.for"),
                        "`for` needs a `rate` (picks per second) to spread the picks over",
                    );
                    None
                }
                (Some(_), Some(lasting)) => rate.and_then(|rate| {
                    let n = (rate * lasting).round();
                    if (1.0..=MAX_PICKS as f64).contains(&n) {
                        Some(n as u32)
                    } else {
                        self.problem(
                            format!("{path}.for"),
                            format!(
                                "{rate} picks a second for {lasting} s make {n} picks (1 to {MAX_PICKS})"
                            ),
                        );
                        None
                    }
                }),
                (Some(_), None) => None,
            },
        };
        let hold = match get(body, "hold") {
            None => Some(false),
            Some(Json {
                kind: JsonKind::Bool(b),
                ..
            }) => Some(*b),
            Some(other) => {
                self.problem(
                    format!("{path}.hold"),
                    format!("must be true or false, found {}", other.kind_name()),
                );
                None
            }
        };
        let keys = self.keys(body, path);
        Some(EventKind::Pick {
            cluster: cluster?,
            count: count?,
            hold: hold?,
            keys: keys?,
            rate: match get(body, "rate") {
                Some(_) => Some(rate?),
                None => None,
            },
        })
    }

    /// A `pick` event's `key` (every pick's) or `keys` (a list taken in turn, or
    /// `{"prefix": "user-", "count": 100}`).
    fn keys(&mut self, body: &Members, path: &str) -> Option<Keys> {
        match (get(body, "key"), get(body, "keys")) {
            (None, None) => Some(Keys::None),
            (Some(_), Some(_)) => {
                self.problem(format!("{path}.keys"), "give `key` or `keys`, not both");
                None
            }
            (Some(key), None) => self.key(key, &format!("{path}.key")).map(Keys::One),
            (None, Some(keys)) => {
                let at = format!("{path}.keys");
                match keys {
                    Json {
                        kind: JsonKind::Array(list),
                        ..
                    } if !list.is_empty() => {
                        let mut out = Vec::with_capacity(list.len());
                        for (i, key) in list.iter().enumerate() {
                            out.push(self.key(key, &format!("{at}[{i}]")));
                        }
                        out.into_iter().collect::<Option<Vec<_>>>().map(Keys::List)
                    }
                    Json {
                        kind: JsonKind::Object(pattern),
                        ..
                    } => {
                        for (key, _) in pattern {
                            if !["prefix", "count"].iter().any(|k| eq_ignore_case(k, key)) {
                                self.problem(
                                    format!("{at}.{key}"),
                                    format!("unknown key `{key}` (expected: prefix, count)"),
                                );
                            }
                        }
                        let prefix = match get(pattern, "prefix") {
                            None => Some(String::new()),
                            Some(Json {
                                kind: JsonKind::String(s),
                                ..
                            }) => Some(s.to_string()),
                            Some(other) => {
                                self.problem(
                                    format!("{at}.prefix"),
                                    format!("must be a string, found {}", other.kind_name()),
                                );
                                None
                            }
                        };
                        let count = match get(pattern, "count") {
                            Some(v) => {
                                let p = format!("{at}.count");
                                match self.integer(v, &p) {
                                    Some(n @ 1..=MAX_PICKS) => Some(n as u32),
                                    Some(n) => {
                                        self.problem(
                                            p,
                                            format!("{n} is out of range (1 to {MAX_PICKS})"),
                                        );
                                        None
                                    }
                                    None => None,
                                }
                            }
                            None => {
                                self.problem(
                                    format!("{at}.count"),
                                    "missing: how many keys the pattern makes",
                                );
                                None
                            }
                        };
                        Some(Keys::Numbered {
                            prefix: prefix?,
                            count: count?,
                        })
                    }
                    other => {
                        self.problem(
                            at,
                            format!(
                                "must be a list of keys or {{\"prefix\": \"user-\", \"count\": 100}}, found {}",
                                other.kind_name()
                            ),
                        );
                        None
                    }
                }
            }
        }
    }

    fn key(&mut self, value: &Json, path: &str) -> Option<String> {
        match value {
            Json {
                kind: JsonKind::String(s),
                ..
            } if !s.is_empty() => Some(s.to_string()),
            other => {
                self.problem(
                    path,
                    format!("must be a non-empty string, found {}", other.kind_name()),
                );
                None
            }
        }
    }

    /// A `latency` or `load` event's `destinations`: destination id to a value `read` reads.
    fn destinations<T>(
        &mut self,
        body: &Members,
        path: &str,
        read: impl Fn(&mut Reader, &Json, &str) -> Option<T>,
    ) -> Option<Vec<(String, T)>> {
        let at = format!("{path}.destinations");
        match get(body, "destinations") {
            Some(Json {
                kind: JsonKind::Object(members),
                ..
            }) if !members.is_empty() => {
                let mut out = Vec::with_capacity(members.len());
                let mut ok = true;
                for (id, value) in members {
                    match read(self, value, &format!("{at}.{id}")) {
                        Some(v) => out.push((id.to_string(), v)),
                        None => ok = false,
                    }
                }
                ok.then_some(out)
            }
            Some(other) => {
                self.problem(
                    at,
                    format!(
                        "must be an object of destination id to value, found {}",
                        if matches!(other.kind, JsonKind::Object(_)) {
                            "an empty object"
                        } else {
                            other.kind_name()
                        }
                    ),
                );
                None
            }
            None => {
                self.problem(at, "missing: destination id to value");
                None
            }
        }
    }

    /// A `load` value: a utilization (a number), an `endpoint-load-metrics` header value, or
    /// `null`.
    fn load_value(&mut self, value: &Json, path: &str) -> Option<Option<String>> {
        match value {
            Json {
                kind: JsonKind::Null,
                ..
            } => Some(None),
            Json {
                kind: JsonKind::Number(n),
                ..
            } => match n.parse::<f64>() {
                Ok(u) if u.is_finite() && u >= 0.0 => {
                    Some(Some(format!("TEXT application_utilization={n}")))
                }
                _ => {
                    self.problem(path, format!("`{n}` is not a utilization (0 or more)"));
                    None
                }
            },
            Json {
                kind: JsonKind::String(header),
                ..
            } => match load_report::parse(header) {
                Ok(report) if report.utilization().is_some() => Some(Some(header.to_string())),
                Ok(_) => {
                    self.problem(
                        path,
                        "the report carries no utilization (application_utilization or cpu_utilization)",
                    );
                    None
                }
                Err(e) => {
                    self.problem(path, format!("not an endpoint-load-metrics value: {e}"));
                    None
                }
            },
            other => {
                self.problem(
                    path,
                    format!(
                        "expected a utilization, an endpoint-load-metrics value or null, found {}",
                        other.kind_name()
                    ),
                );
                None
            }
        }
    }

    /// A number of `what` above 0.
    fn positive(&mut self, value: &Json, path: &str, what: &str) -> Option<f64> {
        match value {
            Json {
                kind: JsonKind::Number(n),
                ..
            } => match n.parse::<f64>() {
                Ok(v) if v > 0.0 && v < 1e12 => Some(v),
                _ => {
                    self.problem(path, format!("`{n}` is not a number of {what} above 0"));
                    None
                }
            },
            other => {
                self.problem(
                    path,
                    format!("must be a number of {what}, found {}", other.kind_name()),
                );
                None
            }
        }
    }

    fn probe_results(&mut self, results: &Members, path: &str) -> Option<Vec<ProbeResult>> {
        let mut out = Vec::new();
        let mut ok = true;
        for (id, value) in results {
            let here = format!("{path}.{id}");
            match self.probe_result(id, value, &here) {
                Some(r) => out.push(r),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn probe_result(&mut self, id: &str, value: &Json, path: &str) -> Option<ProbeResult> {
        const EXPECTED: &str = "an HTTP status, \"error\", {\"status\": 200, \"payload\": \"Degraded\"} or {\"error\": \"why\"}";
        match value {
            Json {
                kind: JsonKind::Number(_),
                ..
            } => self.status(value, path).map(|s| ProbeResult::status(id, s)),
            Json {
                kind: JsonKind::String(s),
                ..
            } if eq_ignore_case(s, "error") => Some(ProbeResult::error(id, "probe failed")),
            Json {
                kind: JsonKind::Object(object),
                ..
            } => {
                if let Some(error) = get(object, "error") {
                    return match error {
                        Json {
                            kind: JsonKind::String(s),
                            ..
                        } => Some(ProbeResult::error(id, s.to_string())),
                        other => {
                            self.problem(
                                format!("{path}.error"),
                                format!("must be a string, found {}", other.kind_name()),
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
                    None
                    | Some(Json {
                        kind: JsonKind::Null,
                        ..
                    }) => Some(None),
                    Some(Json {
                        kind: JsonKind::String(s),
                        ..
                    }) => {
                        match ReportedHealth::parse(s) {
                            Some(r) => Some(Some(r)),
                            None => {
                                self.problem(
                                format!("{path}.payload"),
                                format!("`{}` is not a health status (Healthy, Degraded or Unhealthy)", s),
                            );
                                None
                            }
                        }
                    }
                    Some(other) => {
                        self.problem(
                            format!("{path}.payload"),
                            format!("must be a string, found {}", other.kind_name()),
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
            Json {
                kind: JsonKind::String(s),
                ..
            } => {
                self.problem(
                    path,
                    format!("`{}` is not a probe result: expected {EXPECTED}", s),
                );
                None
            }
            other => {
                self.problem(
                    path,
                    format!("expected {EXPECTED}, found {}", other.kind_name()),
                );
                None
            }
        }
    }

    fn outcome(&mut self, value: &Json, path: &str) -> Option<RequestOutcome> {
        match value {
            Json {
                kind: JsonKind::Number(_),
                ..
            } => self.status(value, path).map(RequestOutcome::Status),
            Json {
                kind: JsonKind::String(s),
                ..
            } => {
                let t = s.as_str();
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
                    format!("expected success, transport-failure, cancelled or an HTTP status, found {}", other.kind_name()),
                );
                None
            }
        }
    }

    fn status(&mut self, value: &Json, path: &str) -> Option<u16> {
        match self.integer(value, path)? {
            n @ 100..=999 => Some(n as u16),
            n => {
                self.problem(path, format!("{n} is not an HTTP status (100 to 999)"));
                None
            }
        }
    }

    fn required_string(&mut self, body: &Members, path: &str, key: &str) -> Option<String> {
        match get(body, key) {
            Some(Json {
                kind: JsonKind::String(s),
                ..
            }) if !s.is_empty() => Some(s.to_string()),
            Some(Json {
                kind: JsonKind::String(_),
                ..
            }) => {
                self.problem(format!("{path}.{key}"), "must not be empty");
                None
            }
            Some(other) => {
                self.problem(
                    format!("{path}.{key}"),
                    format!("must be a string, found {}", other.kind_name()),
                );
                None
            }
            None => {
                self.problem(format!("{path}.{key}"), format!("missing: the {key} id"));
                None
            }
        }
    }

    fn integer(&mut self, value: &Json, path: &str) -> Option<u64> {
        match value {
            Json {
                kind: JsonKind::Number(n),
                ..
            } => match n.parse::<u64>() {
                Ok(v) => Some(v),
                Err(_) => {
                    self.problem(path, format!("`{}` is not a non-negative whole number", n));
                    None
                }
            },
            other => {
                self.problem(
                    path,
                    format!(
                        "must be a non-negative whole number, found {}",
                        other.kind_name()
                    ),
                );
                None
            }
        }
    }

    fn seconds(&mut self, value: &Json, path: &str) -> Option<Duration> {
        let Json {
            kind: JsonKind::Number(n),
            ..
        } = value
        else {
            self.problem(
                path,
                format!("must be a number of seconds, found {}", value.kind_name()),
            );
            return None;
        };
        match n.parse::<f64>() {
            Ok(s) if (0.0..1e12).contains(&s) => Some(Duration::from_secs_f64(s)),
            _ => {
                self.problem(
                    path,
                    format!("`{}` is not a time in seconds (0 or more)", n),
                );
                None
            }
        }
    }
}

//! Load reports: what a server says about its own load in the `endpoint-load-metrics` response
//! header (ORCA, Open Request Cost Aggregation, over HTTP), read as Envoy reads it. Services
//! behind Envoy, vLLM and others send it so their clients can weigh their load; healthpick reads
//! the utilization from it.
//!
//! The value starts with its format, then a space:
//!
//! - `TEXT` and a comma-separated list of `key=value` metrics (`key:value` too, as Envoy also
//!   accepts): `TEXT cpu_utilization=0.3, mem_utilization=0.8, named_metrics.queue=12`.
//!   Whitespace around entries, keys and values does not matter, and empty list elements are
//!   skipped (HTTP's list rule).
//! - `JSON` and one JSON object, in protobuf's JSON form of the ORCA report: snake_case or
//!   lowerCamelCase field names, numbers or numeric strings, `null` for "not reported", and the
//!   maps as objects: `JSON {"cpu_utilization": 0.3, "named_metrics": {"queue": 12}}`.
//! - `BIN` and a base64 protobuf: not read (a distinct error, [`LoadReportError::Unsupported`]).
//!
//! The metrics are the ORCA report's: `application_utilization`, `cpu_utilization`,
//! `mem_utilization`, `rps_fractional`, `eps`, and the maps `utilization.<name>`,
//! `request_cost.<name>` and `named_metrics.<name>`. Keys and the format are case-sensitive, as
//! in Envoy. A report is refused whole, with every problem named, when a key is unknown or
//! repeated, a map key has no name, a value is not a finite number, or a value is out of the
//! report's ranges: utilizations, `rps_fractional` and `eps` are never negative,
//! `mem_utilization` and `utilization.<name>` are at most 1, while `cpu_utilization` and
//! `application_utilization` may pass 1 (usage over the server's soft limit). The value comes
//! from another process, so its size is bounded ([`MAX_LEN`]) and error messages quote at most
//! the start of what they name.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The response header a load report comes in.
pub(crate) const HEADER: &str = "endpoint-load-metrics";

/// The longest header value read, in bytes: a report of every standard metric and a few dozen
/// named ones fits many times over.
pub(crate) const MAX_LEN: usize = 4096;

/// Characters of a quoted key, value or entry that an error message shows.
const SHOWN: usize = 48;

/// Problems an error message lists before it only counts the rest.
const LISTED: usize = 10;

/// Whitespace around list elements, keys and values (HTTP's optional whitespace).
const OWS: [char; 2] = [' ', '\t'];

/// One server's report of its own load. A metric it did not send is `None` (or absent from its
/// map); every value present is finite and within the report's ranges.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LoadReport {
    /// The application's own measure of how busy it is, as a fraction of its capacity; may
    /// pass 1.
    pub(crate) application_utilization: Option<f64>,
    /// CPU in use, as a fraction of what is available; may pass 1.
    pub(crate) cpu_utilization: Option<f64>,
    /// Memory in use, as a fraction of what is available, in [0, 1].
    pub(crate) mem_utilization: Option<f64>,
    /// Requests served per second.
    pub(crate) rps_fractional: Option<f64>,
    /// Errors served per second.
    pub(crate) eps: Option<f64>,
    /// Other resources' utilizations, each in [0, 1], in the order sent.
    pub(crate) utilization: Vec<(String, f64)>,
    /// Costs of the request, in the order sent.
    pub(crate) request_cost: Vec<(String, f64)>,
    /// The application's own metrics, in the order sent.
    pub(crate) named_metrics: Vec<(String, f64)>,
}

impl LoadReport {
    /// The server's utilization, as gRPC's and Envoy's weighted round robin take it:
    /// `application_utilization` when it is above 0, else `cpu_utilization`, else an
    /// `application_utilization` of 0; `None` when the report has neither. Never negative or
    /// infinite; may pass 1.
    pub(crate) fn utilization(&self) -> Option<f64> {
        let application = self.application_utilization;
        let chosen = match application {
            Some(u) if u > 0.0 => Some(u),
            _ => self.cpu_utilization.or(application),
        };
        chosen.filter(|u| u.is_finite() && *u >= 0.0)
    }
}

/// Reads the value of an `endpoint-load-metrics` header.
///
/// # Errors
///
/// [`LoadReportError`]: the value is too long, its format is `BIN` or unknown, or it is not a
/// valid report (every problem listed).
pub(crate) fn parse(header_value: &str) -> Result<LoadReport, LoadReportError> {
    if header_value.len() > MAX_LEN {
        return Err(LoadReportError::TooLong {
            len: header_value.len(),
        });
    }
    let value = header_value.trim_start_matches(OWS);
    let (format, body) = match value.find(OWS) {
        Some(at) => value.split_at(at),
        None => (value, ""),
    };
    match format {
        "TEXT" => parse_text(body),
        "JSON" => parse_json(body),
        "BIN" => Err(LoadReportError::Unsupported),
        other => Err(LoadReportError::UnknownFormat {
            prefix: shown(other),
        }),
    }
}

/// Why a load report was not read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum LoadReportError {
    /// The value is longer than [`MAX_LEN`].
    #[error("{HEADER}: the value is {len} bytes long, more than the {MAX_LEN} read")]
    TooLong {
        /// The value's length in bytes.
        len: usize,
    },
    /// The value is in the binary (`BIN`) form, which is not read.
    #[error("{HEADER}: the binary form (`BIN`) is not supported; send `TEXT` or `JSON`")]
    Unsupported,
    /// The value does not start with `TEXT`, `JSON` or `BIN`.
    #[error(
        "{HEADER}: unknown format `{prefix}`: the value must start with `TEXT `, `JSON ` or `BIN `"
    )]
    UnknownFormat {
        /// The value's first word (its start, when long).
        prefix: String,
    },
    /// The value is not a valid report in its format.
    #[error("{HEADER}: {form} report: {}", Listed(problems))]
    Invalid {
        /// The value's format.
        form: Form,
        /// Everything wrong with it, in the order found.
        problems: Vec<Problem>,
    },
}

/// The format of a load report that could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// `TEXT`: `key=value` pairs.
    Text,
    /// `JSON`: one JSON object.
    Json,
}

impl fmt::Display for Form {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Form::Text => "TEXT",
            Form::Json => "JSON",
        })
    }
}

/// One thing wrong with a report. Keys of maps read from JSON are named as in `TEXT`
/// (`named_metrics.queue`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum Problem {
    /// A `TEXT` entry without `=` or `:`.
    #[error("`{entry}` is not `key=value`")]
    NotKeyValue {
        /// The entry.
        entry: String,
    },
    /// A `TEXT` entry with nothing before its `=`.
    #[error("`{entry}` has no key")]
    NoKey {
        /// The entry.
        entry: String,
    },
    /// A `TEXT` entry with nothing after its `=`.
    #[error("`{key}` has no value")]
    NoValue {
        /// The key.
        key: String,
    },
    /// A key that is not one of the report's metrics.
    #[error("unknown metric `{key}`")]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// A map key with no name after its prefix (`named_metrics.`).
    #[error("`{key}` names no metric")]
    NoName {
        /// The key.
        key: String,
    },
    /// A metric given more than once.
    #[error("`{key}` is given more than once")]
    Duplicate {
        /// The key, as it appeared the second time.
        key: String,
    },
    /// A value that is not a number.
    #[error("`{key}`: {value} is not a number")]
    NotANumber {
        /// The key.
        key: String,
        /// The value (quoted), or what kind of JSON value it is.
        value: String,
    },
    /// A value that is NaN or infinite.
    #[error("`{key}`: `{value}` is not a finite number")]
    NotFinite {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// A number outside the metric's range.
    #[error("`{key}`: {value} is out of range ({range})")]
    OutOfRange {
        /// The key.
        key: String,
        /// The value.
        value: f64,
        /// The range the metric takes.
        range: &'static str,
    },
    /// A JSON map field (`named_metrics`) whose value is not an object.
    #[error("`{key}`: {value} is not an object of metrics")]
    NotAnObject {
        /// The field.
        key: String,
        /// What kind of JSON value it is.
        value: String,
    },
    /// A `JSON` value that is valid JSON but not an object.
    #[error("{value} is not a JSON object")]
    NotAJsonObject {
        /// What kind of JSON value it is.
        value: String,
    },
    /// A `JSON` value that is not valid JSON.
    #[error("invalid JSON: {message}")]
    Syntax {
        /// The JSON reader's message, with the line and column.
        message: String,
    },
}

/// Problems joined for an error message: the first few, then how many more.
struct Listed<'a>(&'a [Problem]);

impl fmt::Display for Listed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.0.iter().take(LISTED).enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{problem}")?;
        }
        if self.0.len() > LISTED {
            write!(f, "; and {} more", self.0.len() - LISTED)?;
        }
        Ok(())
    }
}

/// The start of `text` for an error message.
fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// Which metric a key names, and for a map metric the name in its map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Metric {
    Application,
    Cpu,
    Mem,
    Rps,
    Eps,
    Utilization,
    RequestCost,
    Named,
}

impl Metric {
    /// The scalar metrics: `TEXT` key and JSON field name, and the lowerCamelCase name JSON
    /// also takes.
    const SCALARS: [(&'static str, &'static str, Metric); 5] = [
        (
            "application_utilization",
            "applicationUtilization",
            Metric::Application,
        ),
        ("cpu_utilization", "cpuUtilization", Metric::Cpu),
        ("mem_utilization", "memUtilization", Metric::Mem),
        ("rps_fractional", "rpsFractional", Metric::Rps),
        ("eps", "eps", Metric::Eps),
    ];

    /// The map metrics: JSON field name (and `TEXT` key prefix, before its dot), and the
    /// lowerCamelCase name JSON also takes.
    const MAPS: [(&'static str, &'static str, Metric); 3] = [
        ("utilization", "utilization", Metric::Utilization),
        ("request_cost", "requestCost", Metric::RequestCost),
        ("named_metrics", "namedMetrics", Metric::Named),
    ];

    /// The metric of a JSON field name, either spelling.
    fn of_json(name: &str) -> Option<Metric> {
        Metric::SCALARS
            .iter()
            .chain(&Metric::MAPS)
            .find(|(snake, camel, _)| name == *snake || name == *camel)
            .map(|&(_, _, metric)| metric)
    }

    /// The metric of a `TEXT` key, and the name in its map for a map metric.
    fn of_text(key: &str) -> Result<(Metric, &str), Problem> {
        if let Some(&(_, _, metric)) = Metric::SCALARS.iter().find(|(snake, _, _)| key == *snake) {
            return Ok((metric, ""));
        }
        for &(snake, _, metric) in &Metric::MAPS {
            if let Some(name) = key
                .strip_prefix(snake)
                .and_then(|rest| rest.strip_prefix('.'))
            {
                return if name.is_empty() {
                    Err(Problem::NoName { key: shown(key) })
                } else {
                    Ok((metric, name))
                };
            }
        }
        Err(Problem::UnknownKey { key: shown(key) })
    }

    /// For a map metric, its `TEXT` key prefix (`named_metrics`, without the dot).
    fn map_prefix(self) -> Option<&'static str> {
        Metric::MAPS
            .iter()
            .find(|(_, _, m)| *m == self)
            .map(|&(snake, _, _)| snake)
    }

    /// The range this metric's values must be in, if it has one (the ORCA report's rules).
    fn range(self) -> Option<(f64, f64, &'static str)> {
        match self {
            Metric::Mem | Metric::Utilization => Some((0.0, 1.0, "0 to 1")),
            Metric::Application | Metric::Cpu | Metric::Rps | Metric::Eps => {
                Some((0.0, f64::INFINITY, "0 or more"))
            }
            Metric::RequestCost | Metric::Named => None,
        }
    }
}

/// A report being read: the values found so far and the problems.
struct Reading {
    report: LoadReport,
    problems: Vec<Problem>,
}

impl Reading {
    fn new() -> Self {
        Reading {
            report: LoadReport::default(),
            problems: Vec::new(),
        }
    }

    /// Records `value` for `metric` (`name` in its map, for a map metric) if it is in range.
    fn record(&mut self, metric: Metric, key: &str, name: &str, value: f64) {
        if !value.is_finite() {
            self.problems.push(Problem::NotFinite {
                key: shown(key),
                value: value.to_string(),
            });
            return;
        }
        if let Some((low, high, range)) = metric.range() {
            if !(low..=high).contains(&value) {
                self.problems.push(Problem::OutOfRange {
                    key: shown(key),
                    value,
                    range,
                });
                return;
            }
        }
        let report = &mut self.report;
        let scalar = match metric {
            Metric::Application => &mut report.application_utilization,
            Metric::Cpu => &mut report.cpu_utilization,
            Metric::Mem => &mut report.mem_utilization,
            Metric::Rps => &mut report.rps_fractional,
            Metric::Eps => &mut report.eps,
            Metric::Utilization => return report.utilization.push((name.to_owned(), value)),
            Metric::RequestCost => return report.request_cost.push((name.to_owned(), value)),
            Metric::Named => return report.named_metrics.push((name.to_owned(), value)),
        };
        *scalar = Some(value);
    }

    /// Reads `text` as the number for `key`: a Rust float literal without underscores, as
    /// `TEXT` values and JSON's numeric strings are written.
    fn number(&mut self, key: &str, text: &str) -> Option<f64> {
        match text.parse::<f64>() {
            Ok(value) if value.is_finite() => Some(value),
            Ok(_) => {
                self.problems.push(Problem::NotFinite {
                    key: shown(key),
                    value: shown(text),
                });
                None
            }
            Err(_) => {
                let value = format!("`{}`", shown(text));
                self.problems.push(Problem::NotANumber {
                    key: shown(key),
                    value,
                });
                None
            }
        }
    }

    fn finish(self, form: Form) -> Result<LoadReport, LoadReportError> {
        if self.problems.is_empty() {
            Ok(self.report)
        } else {
            Err(LoadReportError::Invalid {
                form,
                problems: self.problems,
            })
        }
    }
}

/// Reads the `TEXT` form: `key=value` (or `key:value`) entries separated by commas.
fn parse_text(body: &str) -> Result<LoadReport, LoadReportError> {
    let mut reading = Reading::new();
    let mut keys = HashSet::new();
    for entry in body.split(',') {
        let entry = entry.trim_matches(OWS);
        if entry.is_empty() {
            continue;
        }
        let Some(at) = entry.find(['=', ':']) else {
            reading.problems.push(Problem::NotKeyValue {
                entry: shown(entry),
            });
            continue;
        };
        let key = entry[..at].trim_matches(OWS);
        let value = entry[at + 1..].trim_matches(OWS);
        if key.is_empty() {
            reading.problems.push(Problem::NoKey {
                entry: shown(entry),
            });
            continue;
        }
        if !keys.insert(key) {
            reading
                .problems
                .push(Problem::Duplicate { key: shown(key) });
            continue;
        }
        let (metric, name) = match Metric::of_text(key) {
            Ok(found) => found,
            Err(problem) => {
                reading.problems.push(problem);
                continue;
            }
        };
        if value.is_empty() {
            reading.problems.push(Problem::NoValue { key: shown(key) });
            continue;
        }
        if let Some(number) = reading.number(key, value) {
            reading.record(metric, key, name, number);
        }
    }
    reading.finish(Form::Text)
}

/// Reads the `JSON` form: one object, in protobuf's JSON mapping of the ORCA report.
fn parse_json(body: &str) -> Result<LoadReport, LoadReportError> {
    let mut reading = Reading::new();
    let entries = match serde_json::from_str::<Node>(body) {
        Ok(Node::Object(entries)) => entries,
        Ok(other) => {
            reading.problems.push(Problem::NotAJsonObject {
                value: other.kind(),
            });
            return reading.finish(Form::Json);
        }
        Err(error) => {
            reading.problems.push(Problem::Syntax {
                message: error.to_string(),
            });
            return reading.finish(Form::Json);
        }
    };
    // The metrics seen so far: a field given under both of its names is given twice.
    let mut fields = HashSet::new();
    for (key, node) in entries {
        if key == "rps" {
            // The deprecated whole-number rate that `rps_fractional` replaces: accepted, unused.
            if !fields.insert(None) {
                reading
                    .problems
                    .push(Problem::Duplicate { key: shown(&key) });
            }
            continue;
        }
        let Some(metric) = Metric::of_json(&key) else {
            reading
                .problems
                .push(Problem::UnknownKey { key: shown(&key) });
            continue;
        };
        if !fields.insert(Some(metric)) {
            reading
                .problems
                .push(Problem::Duplicate { key: shown(&key) });
            continue;
        }
        let Some(prefix) = metric.map_prefix() else {
            if let Some(value) = json_number(&mut reading, &key, node) {
                reading.record(metric, &key, "", value);
            }
            continue;
        };
        match node {
            Node::Object(map) => {
                let mut names = HashSet::new();
                for (name, node) in map {
                    let full = format!("{prefix}.{name}");
                    if name.is_empty() {
                        reading.problems.push(Problem::NoName { key: shown(&full) });
                    } else if !names.insert(name.clone()) {
                        reading
                            .problems
                            .push(Problem::Duplicate { key: shown(&full) });
                    } else if let Some(value) = json_number(&mut reading, &full, node) {
                        reading.record(metric, &full, &name, value);
                    }
                }
            }
            Node::Null => {}
            other => reading.problems.push(Problem::NotAnObject {
                key: shown(&key),
                value: other.kind(),
            }),
        }
    }
    reading.finish(Form::Json)
}

/// The number a JSON value gives `key`: a number or a numeric string; `None` for `null` (not
/// reported) or after recording the problem.
fn json_number(reading: &mut Reading, key: &str, node: Node) -> Option<f64> {
    match node {
        Node::Number(value) => Some(value),
        Node::Text(text) => reading.number(key, text.trim_matches(OWS)),
        Node::Null => None,
        other => {
            reading.problems.push(Problem::NotANumber {
                key: shown(key),
                value: other.kind(),
            });
            None
        }
    }
}

/// A JSON value as a report reads it: objects keep repeated keys (so they can be refused), and
/// what a report never holds is only named.
enum Node {
    Number(f64),
    Text(String),
    Null,
    Object(Vec<(String, Node)>),
    Other(&'static str),
}

impl Node {
    /// What kind of value this is, for an error message.
    fn kind(&self) -> String {
        match self {
            Node::Number(value) => format!("the number {value}"),
            Node::Text(text) => format!("the string `{}`", shown(text)),
            Node::Null => "null".to_owned(),
            Node::Object(_) => "an object".to_owned(),
            Node::Other(kind) => (*kind).to_owned(),
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Other("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Node, E> {
        Ok(Node::Number(value as f64))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Node, E> {
        Ok(Node::Number(value as f64))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Node, E> {
        Ok(Node::Number(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Node, E> {
        Ok(Node::Text(value.to_owned()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Node::Other("an array"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            entries.push((key, map.next_value::<Node>()?));
        }
        Ok(Node::Object(entries))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn problems(value: &str) -> Vec<Problem> {
        match parse(value) {
            Err(LoadReportError::Invalid { problems, .. }) => problems,
            other => panic!("{value:?} read as {other:?}"),
        }
    }

    fn named(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
        pairs
            .iter()
            .map(|&(name, v)| (name.to_owned(), v))
            .collect()
    }

    fn not_key_value(entry: &str) -> Problem {
        Problem::NotKeyValue {
            entry: entry.into(),
        }
    }

    fn no_key(entry: &str) -> Problem {
        Problem::NoKey {
            entry: entry.into(),
        }
    }

    fn no_value(key: &str) -> Problem {
        Problem::NoValue { key: key.into() }
    }

    fn unknown(key: &str) -> Problem {
        Problem::UnknownKey { key: key.into() }
    }

    fn no_name(key: &str) -> Problem {
        Problem::NoName { key: key.into() }
    }

    fn duplicate(key: &str) -> Problem {
        Problem::Duplicate { key: key.into() }
    }

    fn not_a_number(key: &str, value: &str) -> Problem {
        Problem::NotANumber {
            key: key.into(),
            value: value.into(),
        }
    }

    fn not_finite(key: &str, value: &str) -> Problem {
        Problem::NotFinite {
            key: key.into(),
            value: value.into(),
        }
    }

    fn out_of_range(key: &str, value: f64, range: &'static str) -> Problem {
        Problem::OutOfRange {
            key: key.into(),
            value,
            range,
        }
    }

    fn not_an_object(key: &str, value: &str) -> Problem {
        Problem::NotAnObject {
            key: key.into(),
            value: value.into(),
        }
    }

    fn not_a_json_object(value: &str) -> Problem {
        Problem::NotAJsonObject {
            value: value.into(),
        }
    }

    const POSITIVE: &str = "0 or more";
    const FRACTION: &str = "0 to 1";

    #[test]
    fn text_reports() {
        let report = parse(
            "TEXT cpu_utilization=0.3, mem_utilization=0.8, rps_fractional=10.0, eps=1, \
             named_metrics.foo=123",
        );
        let expected = LoadReport {
            cpu_utilization: Some(0.3),
            mem_utilization: Some(0.8),
            rps_fractional: Some(10.0),
            eps: Some(1.0),
            named_metrics: named(&[("foo", 123.0)]),
            ..LoadReport::default()
        };
        assert_eq!(report, Ok(expected));
        // Envoy's own example, with `:` as well as `=`, and the other maps.
        let report = parse(
            "TEXT cpu_utilization:0.7,application_utilization=0.8,mem_utilization:0.9,\
             rps_fractional:1000,eps:2,named_metrics.foo:123,named_metrics.bar=0.2,\
             utilization.total=0.5,request_cost.bytes=3487",
        );
        let expected = LoadReport {
            application_utilization: Some(0.8),
            cpu_utilization: Some(0.7),
            mem_utilization: Some(0.9),
            rps_fractional: Some(1000.0),
            eps: Some(2.0),
            utilization: named(&[("total", 0.5)]),
            request_cost: named(&[("bytes", 3487.0)]),
            named_metrics: named(&[("foo", 123.0), ("bar", 0.2)]),
        };
        assert_eq!(report, Ok(expected));
    }

    #[test]
    fn text_whitespace_and_empty_elements_do_not_matter() {
        let expected = LoadReport {
            cpu_utilization: Some(0.5),
            named_metrics: named(&[("queue", 4.0)]),
            ..LoadReport::default()
        };
        for value in [
            "TEXT cpu_utilization=0.5,named_metrics.queue=4",
            "  TEXT \t cpu_utilization = 0.5 ,\tnamed_metrics.queue\t=\t4  ",
            "TEXT ,cpu_utilization=0.5,, ,named_metrics.queue=4,",
            "TEXT\tcpu_utilization=5e-1,named_metrics.queue=+4.0",
        ] {
            assert_eq!(parse(value), Ok(expected.clone()), "{value:?}");
        }
        // A report of nothing is a report.
        for value in ["TEXT", "TEXT ", "TEXT  , ,", "JSON {}", "JSON  { } "] {
            assert_eq!(parse(value), Ok(LoadReport::default()), "{value:?}");
        }
    }

    #[test]
    fn json_reports() {
        let report = parse(
            r#"JSON {"cpu_utilization": 0.3, "application_utilization": 0.5,
                     "named_metrics": {"foo": 123}}"#,
        );
        let expected = LoadReport {
            application_utilization: Some(0.5),
            cpu_utilization: Some(0.3),
            named_metrics: named(&[("foo", 123.0)]),
            ..LoadReport::default()
        };
        assert_eq!(report, Ok(expected));
        // Protobuf's JSON: lowerCamelCase names, numeric strings, null for "not reported", the
        // deprecated integer `rps` accepted and unused.
        let report = parse(
            r#"JSON {"cpuUtilization": "0.25", "memUtilization": 1, "rpsFractional": 3.5,
                    "eps": null, "rps": 3, "requestCost": {"db": -2},
                    "utilization": {"gpu": 0.75}, "namedMetrics": null}"#,
        );
        let expected = LoadReport {
            cpu_utilization: Some(0.25),
            mem_utilization: Some(1.0),
            rps_fractional: Some(3.5),
            request_cost: named(&[("db", -2.0)]),
            utilization: named(&[("gpu", 0.75)]),
            ..LoadReport::default()
        };
        assert_eq!(report, Ok(expected));
    }

    #[test]
    fn the_binary_form_and_unknown_formats_are_told_apart() {
        assert_eq!(parse("BIN CQAAAAAAAOA/"), Err(LoadReportError::Unsupported));
        assert_eq!(parse("BIN"), Err(LoadReportError::Unsupported));
        for (value, prefix) in [
            ("", ""),
            ("   ", ""),
            ("text cpu_utilization=0.5", "text"),
            ("Json {}", "Json"),
            ("cpu_utilization=0.5", "cpu_utilization=0.5"),
            ("TEXTcpu_utilization=0.5", "TEXTcpu_utilization=0.5"),
            ("{\"cpu_utilization\": 0.5}", "{\"cpu_utilization\":"),
        ] {
            let expected = LoadReportError::UnknownFormat {
                prefix: prefix.to_owned(),
            };
            assert_eq!(parse(value), Err(expected), "{value:?}");
        }
        let long = format!("X{}", "y".repeat(200));
        let Err(LoadReportError::UnknownFormat { prefix }) = parse(&long) else {
            panic!("{long} read");
        };
        assert_eq!(prefix, format!("X{}...", "y".repeat(SHOWN - 1)));
    }

    #[test]
    fn values_longer_than_the_limit_are_refused_unread() {
        let entry = "named_metrics.m=1,";
        let mut value = "TEXT ".to_owned();
        while value.len() + entry.len() <= MAX_LEN {
            value.push_str(entry);
        }
        value.push_str(&" ".repeat(MAX_LEN - value.len()));
        assert_eq!(value.len(), MAX_LEN);
        // At the limit it is read (and its repeated key refused)...
        assert!(matches!(
            parse(&value),
            Err(LoadReportError::Invalid { .. })
        ));
        // ... one byte over, it is not read at all.
        value.push(' ');
        assert_eq!(
            parse(&value),
            Err(LoadReportError::TooLong { len: MAX_LEN + 1 })
        );
        assert_eq!(
            parse(&value).unwrap_err().to_string(),
            "endpoint-load-metrics: the value is 4097 bytes long, more than the 4096 read"
        );
    }

    #[test]
    fn malformed_text_entries() {
        let cases = [
            ("cpu_utilization", not_key_value("cpu_utilization")),
            ("no-key-value-pairs", not_key_value("no-key-value-pairs")),
            ("=0.5", no_key("=0.5")),
            (" : 0.5", no_key(": 0.5")),
            ("cpu_utilization=", no_value("cpu_utilization")),
            ("cpu_utilization= ", no_value("cpu_utilization")),
            ("CPU_UTILIZATION=0.5", unknown("CPU_UTILIZATION")),
            ("cpuUtilization=0.5", unknown("cpuUtilization")),
            ("unsupported_metric=0.8", unknown("unsupported_metric")),
            ("utilization=0.8", unknown("utilization")),
            ("rps=3", unknown("rps")),
            ("named_metrics=1", unknown("named_metrics")),
            ("named_metricsfoo=1", unknown("named_metricsfoo")),
            ("named_metrics.=123", no_name("named_metrics.")),
            ("utilization.=0.9", no_name("utilization.")),
            ("request_cost.=1", no_name("request_cost.")),
            (
                "cpu_utilization=\"0.7\"",
                not_a_number("cpu_utilization", "`\"0.7\"`"),
            ),
            (
                "cpu_utilization=0x10",
                not_a_number("cpu_utilization", "`0x10`"),
            ),
            (
                "cpu_utilization=1_000",
                not_a_number("cpu_utilization", "`1_000`"),
            ),
            (
                "cpu_utilization=0. 5",
                not_a_number("cpu_utilization", "`0. 5`"),
            ),
            (
                "cpu_utilization=0.5=0.6",
                not_a_number("cpu_utilization", "`0.5=0.6`"),
            ),
            ("cpu_utilization=NaN", not_finite("cpu_utilization", "NaN")),
            ("cpu_utilization=inf", not_finite("cpu_utilization", "inf")),
            (
                "named_metrics.x=-infinity",
                not_finite("named_metrics.x", "-infinity"),
            ),
            (
                "named_metrics.x=1e999",
                not_finite("named_metrics.x", "1e999"),
            ),
            (
                "cpu_utilization=-1",
                out_of_range("cpu_utilization", -1.0, POSITIVE),
            ),
            (
                "application_utilization=-0.1",
                out_of_range("application_utilization", -0.1, POSITIVE),
            ),
            ("eps=-2", out_of_range("eps", -2.0, POSITIVE)),
            (
                "rps_fractional=-5",
                out_of_range("rps_fractional", -5.0, POSITIVE),
            ),
            (
                "mem_utilization=1.5",
                out_of_range("mem_utilization", 1.5, FRACTION),
            ),
            (
                "utilization.gpu=2",
                out_of_range("utilization.gpu", 2.0, FRACTION),
            ),
            (
                "cpu_utilization=0.7,cpu_utilization=0.8",
                duplicate("cpu_utilization"),
            ),
            (
                "named_metrics.d=1, named_metrics.d =2",
                duplicate("named_metrics.d"),
            ),
        ];
        for (body, problem) in cases {
            assert_eq!(problems(&format!("TEXT {body}")), [problem], "{body:?}");
        }
        // What the report's ranges allow.
        let report = parse(
            "TEXT cpu_utilization=3.5,application_utilization=1.2,mem_utilization=1,\
             named_metrics.delta=-7",
        )
        .unwrap();
        assert_eq!(report.cpu_utilization, Some(3.5));
        assert_eq!(report.application_utilization, Some(1.2));
        assert_eq!(report.named_metrics, named(&[("delta", -7.0)]));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let error = parse("TEXT cpu_utilization=2, mem_utilization=7, bogus=1, eps, eps=x");
        let expected = LoadReportError::Invalid {
            form: Form::Text,
            problems: vec![
                out_of_range("mem_utilization", 7.0, FRACTION),
                unknown("bogus"),
                not_key_value("eps"),
                not_a_number("eps", "`x`"),
            ],
        };
        assert_eq!(error, Err(expected));
        assert_eq!(
            error.unwrap_err().to_string(),
            "endpoint-load-metrics: TEXT report: `mem_utilization`: 7 is out of range (0 to 1); \
             unknown metric `bogus`; `eps` is not `key=value`; `eps`: `x` is not a number"
        );
        // A flood of problems: the message lists the first ten and counts the rest.
        let flood: String = (0..25).map(|i| format!("bad{i}=1,")).collect();
        let error = parse(&format!("TEXT {flood}")).unwrap_err();
        let LoadReportError::Invalid { problems, .. } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(problems.len(), 25);
        assert!(
            error
                .to_string()
                .ends_with("unknown metric `bad9`; and 15 more"),
            "{error}"
        );
    }

    #[test]
    fn long_hostile_names_are_shortened_in_messages() {
        let key = format!("named_metrics.{}", "é".repeat(100));
        let error = parse(&format!("TEXT {key}=x")).unwrap_err().to_string();
        let shortened = format!("`named_metrics.{}...`", "é".repeat(SHOWN - 14));
        assert!(error.contains(&shortened), "{error}");
        assert!(error.len() < 200, "{error}");
    }

    #[test]
    fn malformed_json() {
        let cases = [
            (r#"[1, 2]"#, not_a_json_object("an array")),
            (r#"0.5"#, not_a_json_object("the number 0.5")),
            (r#""cpu""#, not_a_json_object("the string `cpu`")),
            (r#"null"#, not_a_json_object("null")),
            (
                r#"{"cpu_utilization": 0.7, "unknown_field": 2}"#,
                unknown("unknown_field"),
            ),
            (r#"{"CPU_UTILIZATION": 0.7}"#, unknown("CPU_UTILIZATION")),
            (r#"{"named_metrics.foo": 1}"#, unknown("named_metrics.foo")),
            (r#"{"eps": 1, "eps": 2}"#, duplicate("eps")),
            (
                r#"{"cpu_utilization": 1, "cpuUtilization": 2}"#,
                duplicate("cpuUtilization"),
            ),
            (r#"{"rps": 1, "rps": 2}"#, duplicate("rps")),
            (
                r#"{"named_metrics": {"a": 1, "a": 2}}"#,
                duplicate("named_metrics.a"),
            ),
            (r#"{"named_metrics": {"": 1}}"#, no_name("named_metrics.")),
            (
                r#"{"cpu_utilization": true}"#,
                not_a_number("cpu_utilization", "a boolean"),
            ),
            (
                r#"{"cpu_utilization": [0.5]}"#,
                not_a_number("cpu_utilization", "an array"),
            ),
            (
                r#"{"cpu_utilization": {"x": 1}}"#,
                not_a_number("cpu_utilization", "an object"),
            ),
            (
                r#"{"cpu_utilization": "0.7x"}"#,
                not_a_number("cpu_utilization", "`0.7x`"),
            ),
            (
                r#"{"cpu_utilization": "NaN"}"#,
                not_finite("cpu_utilization", "NaN"),
            ),
            (
                r#"{"cpu_utilization": "Infinity"}"#,
                not_finite("cpu_utilization", "Infinity"),
            ),
            (
                r#"{"cpu_utilization": -1}"#,
                out_of_range("cpu_utilization", -1.0, POSITIVE),
            ),
            (
                r#"{"mem_utilization": 1.01}"#,
                out_of_range("mem_utilization", 1.01, FRACTION),
            ),
            (
                r#"{"utilization": {"gpu": -0.5}}"#,
                out_of_range("utilization.gpu", -0.5, FRACTION),
            ),
            (
                r#"{"named_metrics": 5}"#,
                not_an_object("named_metrics", "the number 5"),
            ),
            (
                r#"{"named_metrics": {"q": "many"}}"#,
                not_a_number("named_metrics.q", "`many`"),
            ),
        ];
        for (body, problem) in cases {
            assert_eq!(problems(&format!("JSON {body}")), [problem], "{body}");
        }
        // Not JSON at all: the reader's own message, with where it stopped.
        for body in [
            "",
            "not-a-valid-json-string",
            r#"{"cpu_utilization": "0.7""#,
            r#"{"cpu_utilization": }"#,
            r#"{"cpu_utilization": 0.5} trailing"#,
            r#"{"cpu_utilization": 1e999}"#,
            r#"{'cpu_utilization': 0.5}"#,
        ] {
            let found = problems(&format!("JSON {body}"));
            let located = matches!(
                found.as_slice(),
                [Problem::Syntax { message }] if message.contains("line 1")
            );
            assert!(located, "{body}: {found:?}");
        }
        // Deep nesting costs no stack: arrays are skipped without recursion, and objects stop
        // at the JSON reader's depth limit.
        let deep = format!(
            "JSON {{\"named_metrics\": {}{}}}",
            "[".repeat(2000),
            "]".repeat(2000)
        );
        assert_eq!(
            problems(&deep),
            [not_an_object("named_metrics", "an array")]
        );
        let nested = "{\"a\":".repeat(600);
        let deep = format!("JSON {{\"named_metrics\": {nested}1{}}}", "}".repeat(600));
        let found = problems(&deep);
        let limited = matches!(
            found.as_slice(),
            [Problem::Syntax { message }] if message.contains("recursion limit")
        );
        assert!(limited, "{found:?}");
    }

    #[test]
    fn utilization_prefers_the_application_then_the_cpu() {
        let report = |application, cpu| LoadReport {
            application_utilization: application,
            cpu_utilization: cpu,
            ..LoadReport::default()
        };
        assert_eq!(report(Some(0.6), Some(0.2)).utilization(), Some(0.6));
        assert_eq!(report(Some(0.0), Some(0.2)).utilization(), Some(0.2));
        assert_eq!(report(None, Some(0.2)).utilization(), Some(0.2));
        assert_eq!(report(None, Some(1.7)).utilization(), Some(1.7));
        assert_eq!(report(Some(0.0), None).utilization(), Some(0.0));
        assert_eq!(report(Some(2.5), None).utilization(), Some(2.5));
        assert_eq!(report(None, None).utilization(), None);
        assert_eq!(report(None, Some(f64::NAN)).utilization(), None);
        assert_eq!(report(Some(-1.0), Some(f64::INFINITY)).utilization(), None);
        let parsed =
            parse("TEXT mem_utilization=0.9, application_utilization=0.4, cpu_utilization=0.1");
        assert_eq!(parsed.unwrap().utilization(), Some(0.4));
        assert_eq!(
            parse("TEXT mem_utilization=0.9").unwrap().utilization(),
            None
        );
    }

    /// A report's metrics as `TEXT` keys and values, scalars first, maps in their order.
    fn entries(report: &LoadReport) -> Vec<(String, f64)> {
        let scalars = [
            ("application_utilization", report.application_utilization),
            ("cpu_utilization", report.cpu_utilization),
            ("mem_utilization", report.mem_utilization),
            ("rps_fractional", report.rps_fractional),
            ("eps", report.eps),
        ];
        let mut out: Vec<(String, f64)> = scalars
            .into_iter()
            .filter_map(|(key, value)| Some((key.to_owned(), value?)))
            .collect();
        for (prefix, map) in [
            ("utilization", &report.utilization),
            ("request_cost", &report.request_cost),
            ("named_metrics", &report.named_metrics),
        ] {
            out.extend(map.iter().map(|(name, v)| (format!("{prefix}.{name}"), *v)));
        }
        out
    }

    /// The same report with its maps in name order: the order metrics come in is not part of
    /// what they say.
    fn sorted(mut report: LoadReport) -> LoadReport {
        for map in [
            &mut report.utilization,
            &mut report.request_cost,
            &mut report.named_metrics,
        ] {
            map.sort_by(|a, b| a.0.cmp(&b.0));
        }
        report
    }

    fn fraction() -> impl Strategy<Value = Option<f64>> {
        prop::option::of(prop_oneof![Just(0.0), Just(1.0), 0.0f64..=1.0])
    }

    fn non_negative() -> impl Strategy<Value = Option<f64>> {
        prop::option::of(prop_oneof![
            Just(0.0),
            0.0f64..=1.0,
            0.0f64..1e6,
            0.0f64..1e300
        ])
    }

    fn metric_map(values: impl Strategy<Value = f64>) -> impl Strategy<Value = Vec<(String, f64)>> {
        prop::collection::btree_map("[a-z][a-z0-9_.-]{0,10}", values, 0..4)
            .prop_map(|map| map.into_iter().collect())
    }

    fn any_report() -> impl Strategy<Value = LoadReport> {
        let scalars = (
            non_negative(),
            non_negative(),
            fraction(),
            non_negative(),
            non_negative(),
        );
        let maps = (
            metric_map(0.0f64..=1.0),
            metric_map(-1e12f64..1e12),
            metric_map(prop_oneof![-1e300f64..1e300, -10.0f64..10.0]),
        );
        (scalars, maps).prop_map(
            |((application, cpu, mem, rps, eps), (utilization, cost, named))| LoadReport {
                application_utilization: application,
                cpu_utilization: cpu,
                mem_utilization: mem,
                rps_fractional: rps,
                eps,
                utilization,
                request_cost: cost,
                named_metrics: named,
            },
        )
    }

    /// A number as a `TEXT` value or a JSON numeric string: plain, `e` or `E` notation, each
    /// the shortest that reads back exactly.
    fn written(value: f64, style: u8) -> String {
        match style % 3 {
            0 => format!("{value}"),
            1 => format!("{value:e}"),
            _ => format!("{value:E}"),
        }
    }

    /// Some whitespace, or none.
    fn space(style: u8) -> &'static str {
        ["", " ", "\t", "  ", " \t "][usize::from(style) % 5]
    }

    /// `report` in `TEXT`, entries rotated by `turn` (and reversed when it is odd), spaced and
    /// separated as `style` says.
    fn text(report: &LoadReport, turn: usize, style: &[u8]) -> String {
        let mut entries = entries(report);
        if !entries.is_empty() {
            let n = entries.len();
            entries.rotate_left(turn % n);
        }
        if turn % 2 == 1 {
            entries.reverse();
        }
        let written: Vec<String> = entries
            .iter()
            .enumerate()
            .map(|(i, (key, value))| {
                let s = &style[(i * 4) % 44..];
                let separator = if s[0].is_multiple_of(2) { "=" } else { ":" };
                let (before, around, after) = (space(s[1]), space(s[2]), space(s[3]));
                let value = written(*value, s[0] / 2);
                format!("{before}{key}{around}{separator}{after}{value}")
            })
            .collect();
        let gap = [" ", "\t", "  "][usize::from(style[47]) % 3];
        format!("TEXT{gap}{}", written.join(","))
    }

    /// `report` in JSON, with either spelling of each name, numbers or numeric strings, spaced
    /// as `style` says, its fields and map entries reversed when `reverse` is set.
    fn json(report: &LoadReport, reverse: bool, style: &[u8]) -> String {
        let number = |value: f64, s: u8| {
            if s % 4 == 3 {
                format!("\"{}\"", written(value, s / 4))
            } else {
                serde_json::to_string(&value).unwrap()
            }
        };
        let mut fields = Vec::new();
        let scalars = [
            (
                "application_utilization",
                "applicationUtilization",
                report.application_utilization,
            ),
            ("cpu_utilization", "cpuUtilization", report.cpu_utilization),
            ("mem_utilization", "memUtilization", report.mem_utilization),
            ("rps_fractional", "rpsFractional", report.rps_fractional),
            ("eps", "eps", report.eps),
        ];
        for (i, (snake, camel, value)) in scalars.into_iter().enumerate() {
            let name = if style[i].is_multiple_of(2) {
                snake
            } else {
                camel
            };
            match value {
                Some(value) => {
                    let (before, after) = (space(style[i + 5]), space(style[i + 10]));
                    let value = number(value, style[i + 15]);
                    fields.push(format!("\"{name}\"{before}:{after}{value}"));
                }
                None if style[i].is_multiple_of(3) => fields.push(format!("\"{name}\": null")),
                None => {}
            }
        }
        let maps = [
            ("utilization", "utilization", &report.utilization),
            ("request_cost", "requestCost", &report.request_cost),
            ("named_metrics", "namedMetrics", &report.named_metrics),
        ];
        for (i, (snake, camel, map)) in maps.into_iter().enumerate() {
            let name = if style[20 + i].is_multiple_of(2) {
                snake
            } else {
                camel
            };
            let mut inner: Vec<String> = map
                .iter()
                .enumerate()
                .map(|(j, (key, value))| {
                    let key = serde_json::to_string(key).unwrap();
                    format!("{key}:{}", number(*value, style[23 + j]))
                })
                .collect();
            if reverse {
                inner.reverse();
            }
            if !map.is_empty() || style[26 + i].is_multiple_of(2) {
                let inner = inner.join(&format!(",{}", space(style[30])));
                fields.push(format!("\"{name}\":{}{{{inner}}}", space(style[29])));
            }
        }
        if reverse {
            fields.reverse();
        }
        format!("JSON {{{}{}}}", space(style[31]), fields.join(" , "))
    }

    proptest! {
        /// No input panics: it reads or it errs.
        #[test]
        fn any_string_reads_or_errs(value in "\\PC{0,200}") {
            let _ = parse(&value);
        }

        /// Near misses of each form reach deep into the readers; none panics, and whatever
        /// reads is finite.
        #[test]
        fn near_misses_read_or_err(
            form in prop::sample::select(vec!["TEXT ", "JSON ", "BIN ", ""]),
            body in "[-a-z_.=:,{}\\[\\]\" \t0-9eE+]{0,120}",
        ) {
            if let Ok(report) = parse(&format!("{form}{body}")) {
                for (_, value) in entries(&report) {
                    prop_assert!(value.is_finite());
                }
            }
        }

        /// A report written in `TEXT`, with any spacing, either separator and any order, reads
        /// back the same.
        #[test]
        fn text_round_trips(
            report in any_report(),
            turn in 0usize..64,
            style in prop::collection::vec(any::<u8>(), 48),
        ) {
            let value = text(&report, turn, &style);
            prop_assert!(value.len() <= MAX_LEN);
            prop_assert_eq!(parse(&value).map(sorted), Ok(sorted(report)), "{}", value);
        }

        /// A report written in JSON, with either spelling of each name, numbers or numeric
        /// strings, any spacing and any order, reads back the same.
        #[test]
        fn json_round_trips(
            report in any_report(),
            reverse in any::<bool>(),
            style in prop::collection::vec(any::<u8>(), 32),
        ) {
            let value = json(&report, reverse, &style);
            prop_assert!(value.len() <= MAX_LEN);
            let read = entries(&sorted(parse(&value).unwrap()));
            let expected = entries(&sorted(report));
            prop_assert_eq!(read.len(), expected.len(), "{}", &value);
            // The JSON reader may round a long number to a neighbouring float.
            for ((key, got), (expected_key, value)) in read.iter().zip(&expected) {
                prop_assert_eq!(key, expected_key);
                let close = (got - value).abs() <= value.abs() * 1e-15;
                prop_assert!(close, "{}: {} read as {}", key, value, got);
            }
        }
    }
}

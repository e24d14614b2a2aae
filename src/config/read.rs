//! Reading a YARP `ReverseProxy:Clusters` JSON document as .NET configuration reads it (SPEC §2):
//! comments and trailing commas, case-insensitive keys, scalars as strings or JSON values, unknown
//! keys ignored, empty values meaning "not set".

use std::time::Duration;

use super::diagnostics::{Diagnostics, Place};
use super::metadata::{parse_number, Metadata};
use super::model::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig, HealthPolicyOptions,
    PassiveHealthCheckConfig,
};
use super::timespan::parse_timespan;
use crate::ids::{eq_ignore_case, fold_case};
use crate::jsonc::{self, Json, JsonKind};

/// A configuration tree as .NET sees it: objects (arrays become objects with keys `0`, `1`, ...)
/// and scalar values kept as text.
#[derive(Debug)]
enum Node {
    Object(Vec<(String, Node)>),
    /// A string, a number (its text as written) or a boolean (`True`/`False`, as .NET writes it).
    Value(String),
    Null,
}

impl Node {
    fn from_json(value: Json) -> Node {
        match value.kind {
            JsonKind::String(s) | JsonKind::Number(s) => Node::Value(s),
            JsonKind::Bool(b) => Node::Value(if b { "True" } else { "False" }.into()),
            JsonKind::Null => Node::Null,
            JsonKind::Object(members) => Node::Object(
                members
                    .into_iter()
                    .map(|(name, v)| (name, Node::from_json(v)))
                    .collect(),
            ),
            JsonKind::Array(items) => Node::Object(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (i.to_string(), Node::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// The first child whose key matches, case-insensitively.
    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Object(entries) => entries
                .iter()
                .find(|(k, _)| eq_ignore_case(k, key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    fn entries(&self) -> &[(String, Node)] {
        match self {
            Node::Object(entries) => entries,
            _ => &[],
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Node::Object(_) => "an object",
            Node::Value(_) => "a value",
            Node::Null => "null",
        }
    }
}

/// Reads a document; problems go to `diags`. `None` when the text is not a JSON object at all.
pub(crate) fn read(text: &str, diags: &mut Diagnostics) -> Option<Config> {
    let root = match jsonc::parse(text) {
        Ok(Some(
            value @ Json {
                kind: JsonKind::Object(_),
                ..
            },
        )) => Node::from_json(value),
        Ok(Some(other)) => {
            let found = match other.kind {
                JsonKind::Array(_) => "an array",
                JsonKind::Null => "null",
                _ => "a value",
            };
            diags.error(
                "",
                format!("the document must be a JSON object, found {found}"),
            );
            return None;
        }
        Ok(None) => {
            diags.error("", "the document is empty");
            return None;
        }
        Err(malformed) => {
            diags.error("", malformed);
            return None;
        }
    };
    check_duplicate_keys(&root, "", diags);

    let mut config = Config::new();
    let clusters = match root.get("ReverseProxy") {
        Some(section @ Node::Object(_)) => {
            check_duplicate_keys(section, "ReverseProxy", diags);
            config.section = "ReverseProxy:Clusters".into();
            section.get("Clusters")
        }
        Some(Node::Null) | None => root.get("Clusters"),
        Some(other) => {
            diags.error(
                "ReverseProxy",
                format!("ReverseProxy must be an object, found {}", other.kind()),
            );
            None
        }
    };
    match clusters {
        Some(node @ Node::Object(_)) => {
            for (id, body) in node.entries() {
                let cluster = read_cluster(id, body, &config.section, diags);
                config.clusters.push(cluster);
            }
        }
        Some(Node::Null) | None => diags.warning(
            config.section.clone(),
            "no Clusters section: the configuration defines no clusters",
        ),
        Some(Node::Value(v)) if v.is_empty() => {}
        Some(other) => diags.error(
            config.section.clone(),
            format!("Clusters must be an object, found {}", other.kind()),
        ),
    }
    if let Some(section) = root.get("HealthPolicies") {
        config.health_policies = Some(read_health_policies(section, diags));
    }
    Some(config)
}

/// .NET configuration rejects a document with two keys that differ only in case.
fn check_duplicate_keys(node: &Node, path: &str, diags: &mut Diagnostics) {
    let entries = node.entries();
    let mut seen: std::collections::HashMap<String, &str> =
        std::collections::HashMap::with_capacity(entries.len());
    for (key, _) in entries {
        if let Some(first) = seen.get(&fold_case(key)) {
            let at = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}:{key}")
            };
            diags.error(
                at,
                format!(
                    "duplicate key `{key}` (keys are case-insensitive; `{first}` is already set)"
                ),
            );
        } else {
            seen.insert(fold_case(key), key);
        }
    }
}

/// Reads one setting of an object and turns its text into a value, reporting problems.
struct Reader<'a, 'd> {
    place: Place<'a>,
    diags: &'d mut Diagnostics,
}

impl Reader<'_, '_> {
    /// The text of `key` under `node` at `prefix`; `None` when absent, null or empty.
    fn text(&mut self, node: &Node, prefix: &str, key: &str) -> Option<String> {
        match node.get(key)? {
            Node::Value(v) if v.is_empty() => None,
            Node::Value(v) => Some(v.clone()),
            Node::Null => None,
            Node::Object(entries) if entries.is_empty() => None,
            Node::Object(_) => {
                self.diags.error(
                    self.place.path(&join(prefix, key)),
                    self.place
                        .message(format!("{key} must be a value, found an object")),
                );
                None
            }
        }
    }

    fn bool(&mut self, node: &Node, prefix: &str, key: &str) -> Option<bool> {
        let text = self.text(node, prefix, key)?;
        match text.trim() {
            t if t.eq_ignore_ascii_case("true") => Some(true),
            t if t.eq_ignore_ascii_case("false") => Some(false),
            _ => {
                self.diags.error(
                    self.place.path(&join(prefix, key)),
                    self.place
                        .message(format!("{key} `{text}` is not a boolean (true or false)")),
                );
                None
            }
        }
    }

    /// A positive TimeSpan. Non-positive values are errors only when `in_force`.
    fn positive_duration(
        &mut self,
        node: &Node,
        prefix: &str,
        key: &str,
        in_force: bool,
    ) -> Option<Duration> {
        let text = self.text(node, prefix, key)?;
        let path = self.place.path(&join(prefix, key));
        match parse_timespan(&text) {
            Ok(span) if span.is_positive() => span.to_duration(),
            Ok(_) => {
                self.diags.problem(
                    in_force,
                    path,
                    self.place
                        .message(format!("{key} `{text}` must be positive")),
                );
                None
            }
            Err(e) => {
                self.diags
                    .error(path, self.place.message(format!("{key} {e}")));
                None
            }
        }
    }

    fn integer(&mut self, node: &Node, prefix: &str, key: &str, what: &str) -> Option<u32> {
        let text = self.text(node, prefix, key)?;
        let trimmed = text.trim();
        let problem = match trimmed.parse::<i128>() {
            Ok(v) if v < 0 => "must not be negative",
            Ok(v) => match u32::try_from(v) {
                Ok(v) => return Some(v),
                Err(_) => "is too large",
            },
            Err(_) => "is not an integer",
        };
        self.diags.error(
            self.place.path(&join(prefix, key)),
            self.place
                .message(format!("{key} `{text}` {problem} (expected {what})")),
        );
        None
    }

    fn metadata(&mut self, node: &Node, prefix: &str) -> Metadata {
        let mut metadata = Metadata::new();
        let Some(section) = node.get("Metadata") else {
            return metadata;
        };
        check_duplicate_keys(
            section,
            &self.place.path(&join(prefix, "Metadata")),
            self.diags,
        );
        for (key, value) in section.entries() {
            match value {
                Node::Value(v) => metadata.insert(key.clone(), v.clone()),
                Node::Null => {}
                Node::Object(_) => self.diags.warning(
                    self.place.path(&join(prefix, &format!("Metadata:{key}"))),
                    self.place
                        .message(format!("metadata `{key}` is an object and is ignored")),
                ),
            }
        }
        metadata
    }

    fn object<'n>(&mut self, node: &'n Node, prefix: &str, key: &str) -> Option<&'n Node> {
        match node.get(key)? {
            section @ Node::Object(_) => {
                check_duplicate_keys(section, &self.place.path(&join(prefix, key)), self.diags);
                Some(section)
            }
            Node::Null => None,
            Node::Value(v) if v.is_empty() => None,
            other => {
                self.diags.error(
                    self.place.path(&join(prefix, key)),
                    self.place
                        .message(format!("{key} must be an object, found {}", other.kind())),
                );
                None
            }
        }
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}:{key}")
    }
}

fn read_cluster(id: &str, body: &Node, section: &str, diags: &mut Diagnostics) -> ClusterConfig {
    let place = Place::cluster(section, id);
    let mut cluster = ClusterConfig::new(id);
    let mut r = Reader { place, diags };
    match body {
        Node::Object(_) => check_duplicate_keys(body, &place.path(""), r.diags),
        Node::Null => return cluster,
        other => {
            r.diags.error(
                place.path(""),
                place.message(format!(
                    "a cluster must be an object, found {}",
                    other.kind()
                )),
            );
            return cluster;
        }
    }
    cluster.load_balancing_policy = r.text(body, "", "LoadBalancingPolicy");
    cluster.metadata = r.metadata(body, "");

    if let Some(hc) = r.object(body, "", "HealthCheck") {
        cluster.health_check.available_destinations_policy =
            r.text(hc, "HealthCheck", "AvailableDestinationsPolicy");
        if let Some(active) = r.object(hc, "HealthCheck", "Active") {
            cluster.health_check.active = read_active(&mut r, active);
        }
        if let Some(passive) = r.object(hc, "HealthCheck", "Passive") {
            cluster.health_check.passive = read_passive(&mut r, passive);
        }
    }
    if let Some(client) = r.object(body, "", "HttpClient") {
        cluster.dangerous_accept_any_server_certificate = r
            .bool(client, "HttpClient", "DangerousAcceptAnyServerCertificate")
            .unwrap_or(false);
        cluster.max_connections_per_server = r.integer(
            client,
            "HttpClient",
            "MaxConnectionsPerServer",
            "a connection count",
        );
    }
    if let Some(request) = r.object(body, "", "HttpRequest") {
        cluster.http_version = r.text(request, "HttpRequest", "Version");
        // Always in force: a client applies it whenever the cluster is called.
        cluster.activity_timeout =
            r.positive_duration(request, "HttpRequest", "ActivityTimeout", true);
    }
    // Duplicate destination ids are reported by validation, which names the cluster.
    let destinations = match body.get("Destinations") {
        Some(node @ Node::Object(_)) => Some(node),
        Some(Node::Null) | None => None,
        Some(Node::Value(v)) if v.is_empty() => None,
        Some(other) => {
            r.diags.error(
                place.path("Destinations"),
                place.message(format!(
                    "Destinations must be an object, found {}",
                    other.kind()
                )),
            );
            None
        }
    };
    if let Some(destinations) = destinations {
        for (dest_id, dest_body) in destinations.entries() {
            let dplace = place.destination(dest_id);
            let mut dr = Reader {
                place: dplace,
                diags: r.diags,
            };
            cluster
                .destinations
                .push(read_destination(&mut dr, dest_id, dest_body));
        }
    }
    cluster
}

fn read_active(r: &mut Reader<'_, '_>, node: &Node) -> ActiveHealthCheckConfig {
    const AT: &str = "HealthCheck:Active";
    let enabled = r.bool(node, AT, "Enabled").unwrap_or(false);
    ActiveHealthCheckConfig {
        enabled,
        interval: r.positive_duration(node, AT, "Interval", enabled),
        timeout: r.positive_duration(node, AT, "Timeout", enabled),
        policy: r.text(node, AT, "Policy"),
        path: r.text(node, AT, "Path"),
        query: r.text(node, AT, "Query"),
    }
}

fn read_passive(r: &mut Reader<'_, '_>, node: &Node) -> PassiveHealthCheckConfig {
    const AT: &str = "HealthCheck:Passive";
    let enabled = r.bool(node, AT, "Enabled").unwrap_or(false);
    PassiveHealthCheckConfig {
        enabled,
        policy: r.text(node, AT, "Policy"),
        reactivation_period: r.positive_duration(node, AT, "ReactivationPeriod", enabled),
    }
}

fn read_destination(r: &mut Reader<'_, '_>, id: &str, body: &Node) -> DestinationConfig {
    let mut dest = DestinationConfig::new(id, "");
    match body {
        Node::Object(_) => check_duplicate_keys(body, &r.place.path(""), r.diags),
        Node::Null => return dest,
        other => {
            r.diags.error(
                r.place.path(""),
                r.place.message(format!(
                    "a destination must be an object, found {}",
                    other.kind()
                )),
            );
            return dest;
        }
    }
    dest.address = r.text(body, "", "Address").unwrap_or_default();
    dest.health = r.text(body, "", "Health");
    dest.host = r.text(body, "", "Host");
    dest.metadata = r.metadata(body, "");
    dest.priority = r
        .integer(body, "", "Priority", "a tier: 0, 1, 2, ...")
        .unwrap_or(0);
    dest
}

fn read_health_policies(node: &Node, diags: &mut Diagnostics) -> HealthPolicyOptions {
    let mut options = HealthPolicyOptions::default();
    let place = Place {
        section: "HealthPolicies",
        cluster: None,
        destination: None,
    };
    if !matches!(node, Node::Object(_)) {
        diags.error(
            "HealthPolicies",
            format!("HealthPolicies must be an object, found {}", node.kind()),
        );
        return options;
    }
    check_duplicate_keys(node, "HealthPolicies", diags);
    let mut r = Reader { place, diags };
    let durations: [(&str, &mut Duration); 4] = [
        ("DetectionWindowSize", &mut options.detection_window_size),
        ("DefaultInterval", &mut options.default_interval),
        ("DefaultTimeout", &mut options.default_timeout),
        (
            "DefaultReactivationPeriod",
            &mut options.default_reactivation_period,
        ),
    ];
    for (key, slot) in durations {
        if let Some(d) = r.positive_duration(node, "", key, true) {
            *slot = d;
        }
    }
    if let Some(n) = r.integer(node, "", "MinimalTotalCountThreshold", "a count") {
        options.minimal_total_count_threshold = u64::from(n);
    }
    let numbers: [(&str, &mut f64); 2] = [
        (
            "DefaultFailureRateLimit",
            &mut options.default_failure_rate_limit,
        ),
        (
            "ConsecutiveFailuresThreshold",
            &mut options.consecutive_failures_threshold,
        ),
    ];
    for (key, slot) in numbers {
        if let Some(text) = r.text(node, "", key) {
            match parse_number(&text) {
                Some(v) => *slot = v,
                None => r.diags.error(
                    r.place.path(key),
                    format!("HealthPolicies {key} `{text}` is not a number"),
                ),
            }
        }
    }
    options
}

//! Reading a YARP `ReverseProxy:Clusters` JSON document as .NET configuration reads it:
//! comments and trailing commas, case-insensitive keys, scalars as strings or JSON values, unknown
//! keys ignored, empty values meaning "not set".

use std::time::Duration;

use super::diagnostics::{Diagnostics, Place};
use super::metadata::parse_number;
use super::model::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig, HealthPolicyOptions,
    PassiveHealthCheckConfig,
};
use super::read_discovery::{read_discovery, read_locality_tiers};
use super::read_traffic::{
    read_load_signals, read_session_affinity, read_slow_start, read_tier_spill,
};
use super::tree::{check_duplicate_keys, did_you_mean, misspelt, Node, Reader};
use crate::jsonc::{self, Json, JsonKind};

// The keys each section knows (YARP's, and healthpick's extensions): a key close to one of them
// is probably misspelt and gets a "did you mean" warning; other unknown keys are ignored.
const ROOT_KEYS: &[&str] = &["ReverseProxy", "Clusters", "HealthPolicies"];
const PROXY_KEYS: &[&str] = &["Clusters", "Routes", "HealthPolicies"];
const CLUSTER_KEYS: &[&str] = &[
    "LoadBalancingPolicy",
    "SessionAffinity",
    "HealthCheck",
    "HttpClient",
    "HttpRequest",
    "Metadata",
    "Destinations",
    "Discovery",
    "LocalityTiers",
    "LoadSignals",
    "TierSpill",
    "SlowStart",
];
const HEALTH_CHECK_KEYS: &[&str] = &["AvailableDestinationsPolicy", "Active", "Passive"];
const ACTIVE_KEYS: &[&str] = &["Enabled", "Interval", "Timeout", "Policy", "Path", "Query"];
const PASSIVE_KEYS: &[&str] = &["Enabled", "Policy", "ReactivationPeriod"];
const HTTP_CLIENT_KEYS: &[&str] = &[
    "SslProtocols",
    "DangerousAcceptAnyServerCertificate",
    "MaxConnectionsPerServer",
    "EnableMultipleHttp2Connections",
    "RequestHeaderEncoding",
    "ResponseHeaderEncoding",
    "WebProxy",
];
const HTTP_REQUEST_KEYS: &[&str] = &[
    "ActivityTimeout",
    "Version",
    "VersionPolicy",
    "AllowResponseBuffering",
];
const DESTINATION_KEYS: &[&str] = &["Address", "Health", "Host", "Metadata", "Priority"];
const HEALTH_POLICIES_KEYS: &[&str] = &[
    "DetectionWindowSize",
    "MinimalTotalCountThreshold",
    "DefaultFailureRateLimit",
    "ConsecutiveFailuresThreshold",
    "DefaultInterval",
    "DefaultTimeout",
    "DefaultReactivationPeriod",
];
/// The cluster metadata keys healthpick's policies read.
const CLUSTER_METADATA_KEYS: &[&str] = &[
    super::metadata::CONSECUTIVE_FAILURES_THRESHOLD_KEY,
    super::metadata::TRANSPORT_FAILURE_RATE_LIMIT_KEY,
    super::metadata::SUSPECT_RANKING_KEY,
    super::metadata::RESET_PASSIVE_ON_RECOVERY_KEY,
    super::metadata::OUTLIER_CONSECUTIVE_5XX_KEY,
    super::metadata::OUTLIER_CONSECUTIVE_GATEWAY_FAILURE_KEY,
    super::metadata::OUTLIER_BASE_EJECTION_TIME_KEY,
    super::metadata::OUTLIER_MAX_EJECTION_TIME_KEY,
    super::metadata::OUTLIER_MAX_EJECTION_PERCENT_KEY,
    super::metadata::OUTLIER_INTERVAL_KEY,
];

/// YARP settings healthpick reads past (they are valid YARP) but does not apply, and why: a
/// file that sets one behaves differently under healthpick than under YARP.
const NOT_APPLIED: &[(&str, &str, &str)] = &[
    (
        "HttpClient",
        "SslProtocols",
        "TLS versions are those of healthpick's TLS backend",
    ),
    (
        "HttpClient",
        "MaxConnectionsPerServer",
        "connections are pooled by reqwest, with no per-server limit",
    ),
    (
        "HttpClient",
        "EnableMultipleHttp2Connections",
        "reqwest decides how many HTTP/2 connections it opens",
    ),
    (
        "HttpClient",
        "RequestHeaderEncoding",
        "headers are encoded as reqwest encodes them",
    ),
    (
        "HttpClient",
        "ResponseHeaderEncoding",
        "headers are decoded as reqwest decodes them",
    ),
    (
        "HttpClient",
        "WebProxy",
        "probes never use a proxy; the wrapped client uses the reqwest::Client it is given",
    ),
    (
        "HttpRequest",
        "VersionPolicy",
        "probes ask for Version over https and for HTTP/1.1 over cleartext http",
    ),
    (
        "HttpRequest",
        "AllowResponseBuffering",
        "it is a proxy's setting; a client reads the responses it asks for",
    ),
];

/// Reads a document; problems go to `diags`. `None` when the text is not a JSON object at all.
pub(crate) fn read(text: &str, diags: &mut Diagnostics) -> Option<Config> {
    read_section(text, None, diags)
}

/// [`read`] of the clusters under `section` (`Proxies`, `Gateway:Internal`) instead of
/// `ReverseProxy` (or a bare `Clusters`); a missing section is an error.
pub(crate) fn read_section(
    text: &str,
    section: Option<&str>,
    diags: &mut Diagnostics,
) -> Option<Config> {
    match jsonc::parse(text) {
        Ok(document) => read_value_section(document, section, diags),
        Err(malformed) => {
            diags.error("", malformed);
            None
        }
    }
}

/// Reads a document already parsed, by the JSON reader or from any serde format (`None`: an
/// empty document); problems go to `diags`. `None` when it is not an object at all.
#[cfg(feature = "serde")]
pub(crate) fn read_value(document: Option<Json>, diags: &mut Diagnostics) -> Option<Config> {
    read_value_section(document, None, diags)
}

/// [`read_value`] of the clusters under `section` (see [`read_section`]).
pub(crate) fn read_value_section(
    document: Option<Json>,
    section: Option<&str>,
    diags: &mut Diagnostics,
) -> Option<Config> {
    let root = match document {
        Some(
            value @ Json {
                kind: JsonKind::Object(_),
                ..
            },
        ) => Node::from_json(value),
        Some(other) => {
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
        None => {
            diags.error("", "the document is empty");
            return None;
        }
    };
    check_duplicate_keys(&root, "", diags);

    let mut config = Config::new();
    let (clusters, proxy) = match section {
        None => default_section(&root, &mut config, diags),
        Some(name) => named_section(&root, name, &mut config, diags),
    };
    match clusters {
        Some(node @ Node::Object(_)) => {
            for (id, body) in node.entries() {
                let cluster = read_cluster(id, body, &config.section, diags);
                config.clusters.push(cluster);
            }
        }
        // A named section that is missing is already an error.
        Some(Node::Null) | None if section.is_some() && proxy.is_none() => {}
        Some(Node::Null) | None => {
            let near = proxy.and_then(|p| {
                p.entries()
                    .iter()
                    .find(|(k, _)| misspelt(k, &["Clusters"]).is_some())
            });
            let hint = match near {
                Some((key, _)) => format!(" (`{key}` is not `Clusters`)"),
                None => String::new(),
            };
            diags.warning(
                config.section.clone(),
                format!("no Clusters section: the configuration defines no clusters{hint}"),
            )
        }
        Some(Node::Value(v)) if v.is_empty() => {}
        Some(other) => diags.error(
            config.section.clone(),
            format!("Clusters must be an object, found {}", other.kind()),
        ),
    }
    // `NAME:HealthPolicies` when a section is named and has one, else the document's own.
    let policies = proxy
        .filter(|_| section.is_some())
        .and_then(|p| p.get("HealthPolicies").map(|n| (n, section_path(&config))))
        .or_else(|| {
            root.get("HealthPolicies")
                .map(|n| (n, "HealthPolicies".to_string()))
        });
    if let Some((node, path)) = policies {
        config.health_policies = Some(read_health_policies_at(node, &path, diags));
    }
    Some(config)
}

/// Where the clusters are without `--section`: `ReverseProxy:Clusters`, else a bare `Clusters`.
fn default_section<'n>(
    root: &'n Node,
    config: &mut Config,
    diags: &mut Diagnostics,
) -> (Option<&'n Node>, Option<&'n Node>) {
    for (key, _) in root.entries() {
        if let Some(meant) = misspelt(key, ROOT_KEYS) {
            diags.warning(key.clone(), did_you_mean(key, meant));
        }
    }
    match root.get("ReverseProxy") {
        Some(section @ Node::Object(_)) => {
            check_duplicate_keys(section, "ReverseProxy", diags);
            proxy_keys(section, "ReverseProxy", diags);
            config.section = "ReverseProxy:Clusters".into();
            (section.get("Clusters"), Some(section))
        }
        Some(Node::Null) | None => (root.get("Clusters"), None),
        Some(other) => {
            diags.error(
                "ReverseProxy",
                format!("ReverseProxy must be an object, found {}", other.kind()),
            );
            (None, None)
        }
    }
}

/// The clusters under a named section (`Proxies`, or nested: `Gateway:Internal`), each
/// segment's key matched case-insensitively.
fn named_section<'n>(
    root: &'n Node,
    name: &str,
    config: &mut Config,
    diags: &mut Diagnostics,
) -> (Option<&'n Node>, Option<&'n Node>) {
    let name = name.trim().trim_matches(':');
    config.section = format!("{name}:Clusters");
    let mut node = root;
    let mut path = String::new();
    for segment in name.split(':') {
        let parent = node;
        let at = if path.is_empty() {
            segment.to_string()
        } else {
            format!("{path}:{segment}")
        };
        match parent.get(segment) {
            Some(found @ Node::Object(_)) => {
                check_duplicate_keys(found, &at, diags);
                node = found;
            }
            Some(Node::Null) | None => {
                let keys: Vec<&str> = parent.entries().iter().map(|(k, _)| k.as_str()).collect();
                let near = keys
                    .iter()
                    .find(|k| misspelt(k, &[segment]).is_some())
                    .map(|k| format!("; did you mean `{k}`?"))
                    .unwrap_or_default();
                let here = if keys.is_empty() {
                    "none".to_string()
                } else {
                    keys.iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let within = if path.is_empty() {
                    "the document".to_string()
                } else {
                    format!("`{path}`")
                };
                diags.error(
                    at.clone(),
                    format!("no section `{segment}` in {within} (its keys: {here}){near}"),
                );
                return (None, None);
            }
            Some(other) => {
                diags.error(
                    at.clone(),
                    format!("{at} must be an object, found {}", other.kind()),
                );
                return (None, None);
            }
        }
        path = at;
    }
    proxy_keys(node, &path, diags);
    (node.get("Clusters"), Some(node))
}

fn proxy_keys(section: &Node, path: &str, diags: &mut Diagnostics) {
    for (key, _) in section.entries() {
        if let Some(meant) = misspelt(key, PROXY_KEYS) {
            diags.warning(format!("{path}:{key}"), did_you_mean(key, meant));
        }
    }
}

/// The path of `HealthPolicies` inside the proxy section: the clusters' section without
/// `:Clusters`, then `:HealthPolicies`.
fn section_path(config: &Config) -> String {
    let base = config
        .section
        .strip_suffix(":Clusters")
        .unwrap_or(&config.section);
    format!("{base}:HealthPolicies")
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
    r.misspelt_keys(body, "", CLUSTER_KEYS);
    cluster.load_balancing_policy = r.text(body, "", "LoadBalancingPolicy");
    cluster.session_affinity = read_session_affinity(&mut r, body);
    cluster.metadata = r.metadata(body, "");
    if let Some(metadata @ Node::Object(_)) = body.get("Metadata") {
        r.misspelt_keys(metadata, "Metadata", CLUSTER_METADATA_KEYS);
    }

    if let Some(hc) = r.object(body, "", "HealthCheck") {
        r.misspelt_keys(hc, "HealthCheck", HEALTH_CHECK_KEYS);
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
        r.misspelt_keys(client, "HttpClient", HTTP_CLIENT_KEYS);
        cluster.dangerous_accept_any_server_certificate = r
            .bool(client, "HttpClient", "DangerousAcceptAnyServerCertificate")
            .unwrap_or(false);
        cluster.max_connections_per_server = max_connections(&mut r, client);
        not_applied(&mut r, client, "HttpClient");
    }
    if let Some(request) = r.object(body, "", "HttpRequest") {
        r.misspelt_keys(request, "HttpRequest", HTTP_REQUEST_KEYS);
        cluster.http_version = r.text(request, "HttpRequest", "Version");
        // Always in force: a client applies it whenever the cluster is called.
        cluster.activity_timeout =
            r.positive_duration(request, "HttpRequest", "ActivityTimeout", true);
        not_applied(&mut r, request, "HttpRequest");
    }
    cluster.discovery = read_discovery(&mut r, body);
    cluster.locality_tiers = read_locality_tiers(&mut r, body);
    cluster.load_signals = read_load_signals(&mut r, body);
    cluster.tier_spill = read_tier_spill(&mut r, body);
    cluster.slow_start = read_slow_start(&mut r, body);
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

/// `HttpClient:MaxConnectionsPerServer`: a positive integer, as YARP's validator requires.
fn max_connections(r: &mut Reader<'_, '_>, client: &Node) -> Option<u32> {
    const KEY: &str = "MaxConnectionsPerServer";
    let text = r.text(client, "HttpClient", KEY)?;
    if text.trim().parse::<i128>().is_ok_and(|n| n <= 0) {
        r.diags.error(
            r.place.path(&format!("HttpClient:{KEY}")),
            r.place.message(format!(
                "{KEY} `{text}` must be positive (a connection count: 1, 2, ...)"
            )),
        );
        return None;
    }
    r.integer(client, "HttpClient", KEY, "a connection count: 1, 2, ...")
}

/// Warns about each YARP setting of `section` that healthpick reads past without applying it
/// (a value that is itself invalid is reported as an error instead, not twice).
fn not_applied(r: &mut Reader<'_, '_>, node: &Node, section: &str) {
    for (at, key, why) in NOT_APPLIED {
        if *at != section {
            continue;
        }
        let set = match node.get(key) {
            Some(Node::Value(v)) => !v.is_empty(),
            Some(Node::Object(entries)) => !entries.is_empty(),
            Some(Node::Null) | None => false,
        };
        let path = r.place.path(&format!("{section}:{key}"));
        if set && !r.diags.errors.iter().any(|e| e.path == path) {
            r.diags.warning(
                path,
                r.place.message(format!(
                    "{key} is a YARP setting that healthpick does not apply: {why}"
                )),
            );
        }
    }
}

fn read_active(r: &mut Reader<'_, '_>, node: &Node) -> ActiveHealthCheckConfig {
    const AT: &str = "HealthCheck:Active";
    r.misspelt_keys(node, AT, ACTIVE_KEYS);
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
    r.misspelt_keys(node, AT, PASSIVE_KEYS);
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
    r.misspelt_keys(body, "", DESTINATION_KEYS);
    dest.address = r.text(body, "", "Address").unwrap_or_default();
    dest.health = r.text(body, "", "Health");
    dest.host = r.text(body, "", "Host");
    dest.metadata = r.metadata(body, "");
    dest.priority = r
        .integer(body, "", "Priority", "a tier: 0, 1, 2, ...")
        .unwrap_or(0);
    dest
}

/// Reads a `HealthPolicies` section; what is not set keeps its default.
#[cfg(feature = "serde")]
pub(crate) fn read_health_policies(node: &Node, diags: &mut Diagnostics) -> HealthPolicyOptions {
    read_health_policies_at(node, "HealthPolicies", diags)
}

/// [`read_health_policies`] of the section at `path` (`HealthPolicies`, `Proxies:HealthPolicies`).
fn read_health_policies_at(
    node: &Node,
    path: &str,
    diags: &mut Diagnostics,
) -> HealthPolicyOptions {
    let mut options = HealthPolicyOptions::default();
    let place = Place {
        section: path,
        cluster: None,
        destination: None,
    };
    if !matches!(node, Node::Object(_)) {
        diags.error(
            path,
            format!("HealthPolicies must be an object, found {}", node.kind()),
        );
        return options;
    }
    check_duplicate_keys(node, path, diags);
    let mut r = Reader { place, diags };
    r.misspelt_keys(node, "", HEALTH_POLICIES_KEYS);
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

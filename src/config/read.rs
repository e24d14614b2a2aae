//! Reading a YARP `ReverseProxy:Clusters` JSON document as .NET configuration reads it (SPEC §2):
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
use super::tree::{check_duplicate_keys, Node, Reader};
use crate::jsonc::{self, Json, JsonKind};

/// Reads a document; problems go to `diags`. `None` when the text is not a JSON object at all.
pub(crate) fn read(text: &str, diags: &mut Diagnostics) -> Option<Config> {
    match jsonc::parse(text) {
        Ok(document) => read_value(document, diags),
        Err(malformed) => {
            diags.error("", malformed);
            None
        }
    }
}

/// Reads a document already parsed, by the JSON reader or from any serde format (`None`: an
/// empty document); problems go to `diags`. `None` when it is not an object at all.
pub(crate) fn read_value(document: Option<Json>, diags: &mut Diagnostics) -> Option<Config> {
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
    cluster.discovery = read_discovery(&mut r, body);
    cluster.locality_tiers = read_locality_tiers(&mut r, body);
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

/// Reads a `HealthPolicies` section; what is not set keeps its default.
pub(crate) fn read_health_policies(node: &Node, diags: &mut Diagnostics) -> HealthPolicyOptions {
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

//! Validation: every problem of a configuration, found at once.
//!
//! Errors name the cluster (and destination), the key path and the bad value. Problems that YARP
//! accepts silently (unparsable metadata numbers, probe settings of a disabled check) are
//! warnings, so every file YARP loads loads here too; strict mode turns them into errors. Policy
//! names are checked where they are resolved, by the policy registry.

use std::collections::HashMap;

use super::diagnostics::{Diagnostic, Diagnostics, Place};
use super::discovery::SourceConfig;
use super::dns_name::dns_name_problem;
use super::http_version::{parse_http_version, HttpVersion};
use super::metadata::{
    parse_bool, parse_count, parse_number, parse_percent, parse_positive_timespan, parse_weight,
    CONSECUTIVE_FAILURES_THRESHOLD_KEY, OUTLIER_BASE_EJECTION_TIME_KEY,
    OUTLIER_CONSECUTIVE_5XX_KEY, OUTLIER_CONSECUTIVE_GATEWAY_FAILURE_KEY, OUTLIER_INTERVAL_KEY,
    OUTLIER_MAX_EJECTION_PERCENT_KEY, OUTLIER_MAX_EJECTION_TIME_KEY, RESET_PASSIVE_ON_RECOVERY_KEY,
    SUSPECT_RANKING_KEY, TRANSPORT_FAILURE_RATE_LIMIT_KEY, WEIGHT_KEY,
};
use super::model::OutlierDetectionOptions;
use super::model::{ClusterConfig, Config, DestinationConfig, HealthPolicyOptions};
use super::validate_traffic::validate_traffic;
use crate::ids::fold_case;
use crate::uri::{parse_base, shown};

/// Checks everything of a configuration but its policy names (which the policy registry
/// resolves, see [`PolicyNames`](super::check::PolicyNames)).
pub(crate) fn validate(config: &Config, diags: &mut Diagnostics) {
    let options = config.health_policies.unwrap_or_default();
    let mut seen = HashMap::with_capacity(config.clusters.len());
    for cluster in &config.clusters {
        let place = Place::cluster(&config.section, &cluster.id);
        if cluster.id.trim().is_empty() {
            diags.error(place.path(""), "cluster id must not be empty");
        }
        if let Some(first) = first_with_same_id(&mut seen, &cluster.id) {
            diags.error(
                place.path(""),
                format!(
                    "Duplicate cluster `{}`: ids are case-insensitive and `{}` is already defined",
                    cluster.id, first
                ),
            );
        }
        validate_cluster(cluster, place, &options, diags);
    }
}

fn validate_cluster(
    cluster: &ClusterConfig,
    place: Place<'_>,
    options: &HealthPolicyOptions,
    diags: &mut Diagnostics,
) {
    let hc = &cluster.health_check;
    let active = &hc.active;
    if active.enabled {
        for (key, value) in [("Interval", active.interval), ("Timeout", active.timeout)] {
            if value.is_some_and(|d| d.is_zero()) {
                diags.error(
                    place.path(&format!("HealthCheck:Active:{key}")),
                    place.message(format!("{key} `00:00:00` must be positive")),
                );
            }
        }
        let (interval, timeout) = (
            cluster.effective_interval(options),
            cluster.effective_timeout(options),
        );
        if !interval.is_zero() && !timeout.is_zero() && timeout >= interval {
            let shown = |d: std::time::Duration, set: bool| {
                let text = humantime::format_duration(d).to_string();
                if set {
                    text
                } else {
                    format!("{text}, the default")
                }
            };
            // `"00:10"` reads as ten minutes: say so when a whole number of minutes may be that.
            let minutes = timeout.as_secs() >= 60 && timeout.as_nanos() % 60_000_000_000 == 0;
            let hint = if minutes && active.timeout.is_some() {
                " (TimeSpans are [d.]hh:mm[:ss]: `00:10` is ten minutes, `00:00:10` ten seconds)"
            } else {
                ""
            };
            diags.warning(
                place.path("HealthCheck:Active:Timeout"),
                place.message(format!(
                    "Timeout ({}) is not shorter than Interval ({}): a probe that hangs is still running when the next one is due, and that one is skipped{hint}",
                    shown(timeout, active.timeout.is_some()),
                    shown(interval, active.interval.is_some()),
                )),
            );
        }
    }
    if let Some(path) = &active.path {
        if !path.is_empty() && !path.starts_with('/') {
            diags.problem(
                active.enabled,
                place.path("HealthCheck:Active:Path"),
                place.message(format!("Path `{path}` must start with `/`")),
            );
        }
    }
    if let Some(query) = &active.query {
        if !query.is_empty() && !query.starts_with('?') {
            diags.problem(
                active.enabled,
                place.path("HealthCheck:Active:Query"),
                place.message(format!("Query `{query}` must start with `?`")),
            );
        }
    }

    if let Some(version) = &cluster.http_version {
        validate_http_version(version, place, diags);
    }
    if cluster.max_connections_per_server == Some(0) {
        diags.error(
            place.path("HttpClient:MaxConnectionsPerServer"),
            place.message(
                "MaxConnectionsPerServer `0` must be positive (a connection count: 1, 2, ...)",
            ),
        );
    }

    if cluster.activity_timeout.is_some_and(|d| d.is_zero()) {
        diags.error(
            place.path("HttpRequest:ActivityTimeout"),
            place.message("ActivityTimeout `00:00:00` must be positive"),
        );
    }

    let passive = &hc.passive;
    if passive.enabled && passive.reactivation_period.is_some_and(|d| d.is_zero()) {
        diags.error(
            place.path("HealthCheck:Passive:ReactivationPeriod"),
            place.message("ReactivationPeriod `00:00:00` must be positive"),
        );
    }

    for key in [
        CONSECUTIVE_FAILURES_THRESHOLD_KEY,
        TRANSPORT_FAILURE_RATE_LIMIT_KEY,
    ] {
        if let Some(value) = cluster.metadata.get(key) {
            if parse_number(value).is_none() {
                diags.warning(
                    place.path(&format!("Metadata:{key}")),
                    place.message(format!(
                        "metadata {key} `{value}` is not a number; the default is used"
                    )),
                );
            }
        }
    }

    validate_discovery(cluster, place, diags);

    for key in [SUSPECT_RANKING_KEY, RESET_PASSIVE_ON_RECOVERY_KEY] {
        if let Some(value) = cluster.metadata.get(key) {
            if parse_bool(value).is_none() {
                diags.warning(
                    place.path(&format!("Metadata:{key}")),
                    place.message(format!(
                        "metadata {key} `{}` is not a boolean (true or false); the default (true) is used",
                        shown(value)
                    )),
                );
            }
        }
    }

    validate_outlier_detection(cluster, place, diags);
    validate_traffic(cluster, place, diags);

    let mut seen = HashMap::with_capacity(cluster.destinations.len());
    for dest in &cluster.destinations {
        let dplace = place.destination(&dest.id);
        if dest.id.trim().is_empty() {
            diags.error(dplace.path(""), "destination id must not be empty");
        }
        if let Some(first) = first_with_same_id(&mut seen, &dest.id) {
            diags.error(
                dplace.path(""),
                dplace.message(format!(
                    "Duplicate destination `{}`: ids are case-insensitive and `{}` is already defined",
                    dest.id, first
                )),
            );
        }
        validate_destination(dest, dplace, diags);
    }
}

/// `HttpRequest:Version`: what YARP's validator accepts, in its words; HTTP/3, which YARP
/// accepts but probes do not speak, is a warning.
fn validate_http_version(version: &str, place: Place<'_>, diags: &mut Diagnostics) {
    let path = place.path("HttpRequest:Version");
    match parse_http_version(version) {
        HttpVersion::Supported(3, _) => diags.warning(
            path,
            place.message(format!(
                "Version `{version}` (HTTP/3) is accepted, but healthpick's probes do not speak HTTP/3 and use HTTP/1.1"
            )),
        ),
        HttpVersion::Supported(..) => {}
        HttpVersion::Unsupported(net) => {
            let read_as = if net == version.trim() {
                String::new()
            } else {
                format!(" (read as {net})")
            };
            diags.error(
                path,
                place.message(format!(
                    "Version `{version}`{read_as} is not any of supported HTTP versions (1.0, 1.1, 2 and 3)"
                )),
            )
        }
        HttpVersion::Malformed => diags.error(
            path,
            place.message(format!(
                "Version `{}` is not a version (supported HTTP versions: 1.0, 1.1, 2 and 3)",
                shown(version)
            )),
        ),
    }
}

/// The cargo features of discovery sources, and whether this build has each.
const COMPILED_SOURCES: &[(&str, bool)] = &[
    ("dns", cfg!(feature = "dns")),
    ("etcd", cfg!(feature = "etcd")),
    ("consul", cfg!(feature = "consul")),
    ("kubernetes", cfg!(feature = "kubernetes")),
];

/// Discovery sources: compiled in, and named uniquely within the cluster.
fn validate_discovery(cluster: &ClusterConfig, place: Place<'_>, diags: &mut Diagnostics) {
    let many = cluster.discovery.len() > 1;
    let mut names: HashMap<String, usize> = HashMap::new();
    for (i, source) in cluster.discovery.iter().enumerate() {
        let at = if many {
            format!("Discovery:{i}")
        } else {
            "Discovery".to_string()
        };
        let feature = source.source().feature();
        let compiled = COMPILED_SOURCES
            .iter()
            .find(|(name, _)| *name == feature)
            .is_none_or(|(_, compiled)| *compiled);
        if !compiled {
            diags.error(
                place.path(&format!("{at}:Type")),
                place.message(format!(
                    "discovery Type `{}` needs healthpick's `{feature}` cargo feature, which this build does not have",
                    source.source().type_name()
                )),
            );
        }
        if let SourceConfig::Dns(dns) = source.source() {
            if let Some(why) = dns_name_problem(dns.dns_name()) {
                diags.error(
                    place.path(&format!("{at}:Name")),
                    place.message(format!(
                        "Name `{}` is not a DNS name: {why}",
                        shown(dns.dns_name())
                    )),
                );
            }
        }
        let name = source.source_name();
        if name == crate::config::discovery::RESERVED_SOURCE {
            diags.error(
                place.path(&format!("{at}:Source")),
                place.message(format!(
                    "`{name}` cannot name a discovery source: it is the configuration's own"
                )),
            );
        }
        if let Some(first) = names.insert(fold_case(&name), i) {
            diags.error(
                place.path(&format!("{at}:Source")),
                place.message(format!(
                    "two discovery sources are called `{name}` (the first is Discovery:{first}): give them different Source names"
                )),
            );
        }
    }
}

/// A metadata key, whether a value is valid for it, what a valid value is, and its default.
type MetadataCheck = (&'static str, fn(&str) -> bool, &'static str, String);

/// OutlierDetection's metadata: checked whether or not a cluster runs the policy (as the other
/// policies' metadata is); a bad value is a warning and the default is used.
fn validate_outlier_detection(cluster: &ClusterConfig, place: Place<'_>, diags: &mut Diagnostics) {
    let d = OutlierDetectionOptions::default();
    let secs = |t: std::time::Duration| humantime::format_duration(t).to_string();
    let checks: [MetadataCheck; 6] = [
        (
            OUTLIER_CONSECUTIVE_5XX_KEY,
            |v| parse_count(v).is_some(),
            "a count (0, 1, 2, ...)",
            d.consecutive_5xx.to_string(),
        ),
        (
            OUTLIER_CONSECUTIVE_GATEWAY_FAILURE_KEY,
            |v| parse_count(v).is_some(),
            "a count (0, 1, 2, ...)",
            d.consecutive_gateway_failure.to_string(),
        ),
        (
            OUTLIER_BASE_EJECTION_TIME_KEY,
            |v| parse_positive_timespan(v).is_some(),
            "a positive TimeSpan",
            secs(d.base_ejection_time),
        ),
        (
            OUTLIER_MAX_EJECTION_TIME_KEY,
            |v| parse_positive_timespan(v).is_some(),
            "a positive TimeSpan",
            secs(d.max_ejection_time),
        ),
        (
            OUTLIER_MAX_EJECTION_PERCENT_KEY,
            |v| parse_percent(v).is_some(),
            "a number from 0 to 100",
            d.max_ejection_percent.to_string(),
        ),
        (
            OUTLIER_INTERVAL_KEY,
            |v| parse_positive_timespan(v).is_some(),
            "a positive TimeSpan",
            secs(d.interval),
        ),
    ];
    for (key, valid, expected, default) in checks {
        if let Some(value) = cluster.metadata.get(key) {
            if !valid(value) {
                diags.warning(
                    place.path(&format!("Metadata:{key}")),
                    place.message(format!(
                        "metadata {key} `{}` is not {expected}; the default ({default}) is used",
                        shown(value)
                    )),
                );
            }
        }
    }
}

fn validate_destination(dest: &DestinationConfig, place: Place<'_>, diags: &mut Diagnostics) {
    if dest.address.trim().is_empty() {
        diags.error(
            place.path("Address"),
            place.message("Address is required (an absolute http(s) URL)"),
        );
    } else if let Err(why) = parse_base(&dest.address) {
        diags.error(
            place.path("Address"),
            place.message(format!("Address `{}` {why}", shown(&dest.address))),
        );
    }
    if let Some(health) = &dest.health {
        if let Err(why) = parse_base(health) {
            diags.error(
                place.path("Health"),
                place.message(format!("Health `{}` {why}", shown(health))),
            );
        }
    }
    if let Some(weight) = dest.metadata.get(WEIGHT_KEY) {
        if parse_weight(weight).is_none() {
            diags.warning(
                place.path(&format!("Metadata:{WEIGHT_KEY}")),
                place.message(format!(
                    "metadata {WEIGHT_KEY} `{weight}` is not a non-negative number; weight 1 is used"
                )),
            );
        }
    }
}

/// Keys of a cluster or destination in the order YARP's documentation lists them.
const KEY_ORDER: &[&str] = &[
    "",
    "LoadBalancingPolicy",
    "SessionAffinity:Enabled",
    "SessionAffinity:Policy",
    "SessionAffinity:FailurePolicy",
    "SessionAffinity:AffinityKeyName",
    "SessionAffinity",
    "HealthCheck:AvailableDestinationsPolicy",
    "HealthCheck:Active:Enabled",
    "HealthCheck:Active:Interval",
    "HealthCheck:Active:Timeout",
    "HealthCheck:Active:Policy",
    "HealthCheck:Active:Path",
    "HealthCheck:Active:Query",
    "HealthCheck:Passive:Enabled",
    "HealthCheck:Passive:Policy",
    "HealthCheck:Passive:ReactivationPeriod",
    "HttpClient",
    "HttpRequest",
    "LoadSignals:DecayTime",
    "LoadSignals:DefaultRtt",
    "LoadSignals",
    "TierSpill:Mode",
    "TierSpill:UpperMark",
    "TierSpill:LowerMark",
    "TierSpill",
    "SlowStart:Window",
    "SlowStart:Aggression",
    "SlowStart",
    "Address",
    "Health",
    "Host",
    "Priority",
    "Metadata",
];

/// Reading and validation find problems in two passes; present them in one order: by cluster,
/// then destination, as the document has them, then by key.
///
/// Each path is matched against the scopes (clusters and destinations) through a tree of their
/// `:`-separated segments, so sorting costs O(total path length + n log n), whatever the number
/// of scopes and problems.
pub(crate) fn sort_in_document_order(config: &Config, list: &mut [Diagnostic]) {
    if list.len() < 2 {
        return;
    }
    let mut scopes = ScopeTree::default();
    for (ci, cluster) in config.clusters.iter().enumerate() {
        let place = Place::cluster(&config.section, &cluster.id);
        scopes.insert(&place.path(""), (ci + 1, 0));
        for (di, dest) in cluster.destinations.iter().enumerate() {
            scopes.insert(&place.destination(&dest.id).path(""), (ci + 1, di + 1));
        }
    }
    let key_of = |path: &str| -> (usize, usize, usize) {
        let Some(((ci, di), end)) = scopes.longest_prefix(path) else {
            return (0, 0, 0);
        };
        let rest = path[end..].trim_start_matches(':');
        let rank = KEY_ORDER
            .iter()
            .position(|k| {
                *k == rest
                    || (!k.is_empty()
                        && rest
                            .strip_prefix(k)
                            .is_some_and(|tail| tail.starts_with(':')))
            })
            .unwrap_or(KEY_ORDER.len());
        (ci, di, rank)
    };
    list.sort_by_cached_key(|d| key_of(&d.path));
}

/// Scopes by the `:`-separated segments of their paths.
#[derive(Default)]
struct ScopeTree {
    children: HashMap<String, ScopeTree>,
    /// (cluster, destination) position of the scope ending here, 1-based (0: none).
    scope: Option<(usize, usize)>,
}

impl ScopeTree {
    /// Adds a scope; a later scope with the same path replaces an earlier one.
    fn insert(&mut self, path: &str, position: (usize, usize)) {
        let mut node = self;
        for segment in path.split(':') {
            node = node.children.entry(segment.to_string()).or_default();
        }
        node.scope = Some(position);
    }

    /// The scope whose path is the longest prefix of `path` ending at a segment boundary, and
    /// the byte offset where that prefix ends.
    fn longest_prefix(&self, path: &str) -> Option<((usize, usize), usize)> {
        let mut node = self;
        let mut found = None;
        let mut end = 0;
        for (i, segment) in path.split(':').enumerate() {
            let Some(child) = node.children.get(segment) else {
                break;
            };
            end += segment.len() + usize::from(i > 0);
            node = child;
            if let Some(position) = node.scope {
                found = Some((position, end));
            }
        }
        found
    }
}

/// Remembers `id`; returns the spelling of an earlier id equal to it case-insensitively.
fn first_with_same_id<'a>(seen: &mut HashMap<String, &'a str>, id: &'a str) -> Option<&'a str> {
    match seen.entry(fold_case(id)) {
        std::collections::hash_map::Entry::Occupied(e) => Some(e.get()),
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(id);
            None
        }
    }
}

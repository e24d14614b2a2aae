//! Validation: every problem of a configuration, found at once (SPEC §2).
//!
//! Errors name the cluster (and destination), the key path and the bad value. Problems that YARP
//! accepts silently (unparsable metadata numbers, probe settings of a disabled check) are
//! warnings, so every file YARP loads loads here too; strict mode turns them into errors. Policy
//! names are checked where they are resolved, by the policy registry.

use std::collections::HashMap;

use super::diagnostics::{Diagnostic, Diagnostics, Place};
use super::metadata::{
    parse_number, parse_weight, CONSECUTIVE_FAILURES_THRESHOLD_KEY,
    TRANSPORT_FAILURE_RATE_LIMIT_KEY, WEIGHT_KEY,
};
use super::model::{ClusterConfig, Config, DestinationConfig};
use crate::ids::fold_case;
use crate::uri::parse_base;

/// Checks everything of a configuration but its policy names (which the policy registry
/// resolves, see [`PolicyNames`](super::check::PolicyNames)).
pub(crate) fn validate(config: &Config, diags: &mut Diagnostics) {
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
        validate_cluster(cluster, place, diags);
    }
}

fn validate_cluster(cluster: &ClusterConfig, place: Place<'_>, diags: &mut Diagnostics) {
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
        let compiled = match feature {
            "dns" => cfg!(feature = "dns"),
            "etcd" => cfg!(feature = "etcd"),
            "consul" => cfg!(feature = "consul"),
            "kubernetes" => cfg!(feature = "kubernetes"),
            _ => true,
        };
        if !compiled {
            diags.error(
                place.path(&format!("{at}:Type")),
                place.message(format!(
                    "discovery Type `{}` needs healthpick's `{feature}` cargo feature, which this build does not have",
                    source.source().type_name()
                )),
            );
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

fn validate_destination(dest: &DestinationConfig, place: Place<'_>, diags: &mut Diagnostics) {
    if dest.address.trim().is_empty() {
        diags.error(
            place.path("Address"),
            place.message("Address is required (an absolute http(s) URL)"),
        );
    } else if let Err(why) = parse_base(&dest.address) {
        diags.error(
            place.path("Address"),
            place.message(format!("Address `{}` {why}", dest.address)),
        );
    }
    if let Some(health) = &dest.health {
        if let Err(why) = parse_base(health) {
            diags.error(
                place.path("Health"),
                place.message(format!("Health `{health}` {why}")),
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
    "Address",
    "Health",
    "Host",
    "Priority",
    "Metadata",
];

/// Reading and validation find problems in two passes; present them in one order: by cluster,
/// then destination, as the document has them, then by key.
pub(crate) fn sort_in_document_order(config: &Config, list: &mut [Diagnostic]) {
    let mut scopes: Vec<(String, usize, usize)> = Vec::new();
    for (ci, cluster) in config.clusters.iter().enumerate() {
        let place = Place::cluster(&config.section, &cluster.id);
        scopes.push((place.path(""), ci + 1, 0));
        for (di, dest) in cluster.destinations.iter().enumerate() {
            scopes.push((place.destination(&dest.id).path(""), ci + 1, di + 1));
        }
    }
    let key_of = |path: &str| -> (usize, usize, usize) {
        let scope = scopes
            .iter()
            .filter(|(prefix, _, _)| {
                path.strip_prefix(prefix.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
            })
            .max_by_key(|(prefix, _, _)| prefix.len());
        let Some((prefix, ci, di)) = scope else {
            return (0, 0, 0);
        };
        let rest = path[prefix.len()..].trim_start_matches(':');
        let rank = KEY_ORDER
            .iter()
            .position(|k| *k == rest || (!k.is_empty() && rest.starts_with(&format!("{k}:"))))
            .unwrap_or(KEY_ORDER.len());
        (*ci, *di, rank)
    };
    list.sort_by_cached_key(|d| key_of(&d.path));
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

//! Validation: every problem of a configuration, found at once (SPEC §2).
//!
//! Errors name the cluster (and destination), the key path and the bad value. Problems that YARP
//! accepts silently (unparsable metadata numbers, probe settings of a disabled check) are
//! warnings, so every file YARP loads loads here too; strict mode turns them into errors.

use std::fmt;

use serde::Serialize;
use url::Url;

use std::collections::HashMap;

use super::{fold_case, ClusterConfig, Config, DestinationConfig};
use crate::registry::PolicyRegistry;
use crate::uri;

/// How bad a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The configuration cannot be used.
    Error,
    /// The configuration loads, with a fallback the user should know about.
    Warning,
}

/// One problem found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    #[serde(skip)]
    pub severity: Severity,
    /// The .NET configuration key path, e.g.
    /// `ReverseProxy:Clusters:payments:Destinations:eu-2:Address`.
    pub path: String,
    /// What is wrong, naming cluster, destination, key and value.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_located(f, &self.path, &self.message)
    }
}

/// `path: message`, or the message alone when there is no path (configuration and scenario
/// problems print alike).
pub(crate) fn write_located(f: &mut fmt::Formatter<'_>, path: &str, message: &str) -> fmt::Result {
    if path.is_empty() {
        f.write_str(message)
    } else {
        write!(f, "{path}: {message}")
    }
}

/// A configuration that cannot be used, with every error (and the warnings) found in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// Every error, cluster by cluster and destination by destination in document order;
    /// within one cluster or destination, keys in the order YARP documents them.
    pub errors: Vec<Diagnostic>,
    /// Warnings found alongside.
    pub warnings: Vec<Diagnostic>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "invalid configuration ({n} error{})",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

/// The result of checking a configuration document, as `healthpick check` reports it.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The configuration read, when the document could be read at all. It may still be invalid.
    pub config: Option<Config>,
    /// Every error.
    pub errors: Vec<Diagnostic>,
    /// Every warning (empty in strict mode, where they count as errors).
    pub warnings: Vec<Diagnostic>,
}

impl CheckReport {
    /// Whether the document is usable.
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty() && self.config.is_some()
    }
}

/// Reads and validates a JSON document against `registry`'s policy names, collecting every
/// problem. Nothing is applied anywhere.
pub fn check(text: &str, registry: &PolicyRegistry, strict: bool) -> CheckReport {
    let mut diags = Diagnostics::default();
    let config = super::json::read(text, &mut diags);
    if let Some(config) = &config {
        validate(config, registry, &mut diags);
        sort_in_document_order(config, &mut diags.errors);
        sort_in_document_order(config, &mut diags.warnings);
    }
    diags.finish(strict);
    CheckReport {
        config,
        errors: diags.errors,
        warnings: diags.warnings,
    }
}

/// A growing list of problems.
#[derive(Debug, Default)]
pub(crate) struct Diagnostics {
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

impl Diagnostics {
    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(Diagnostic {
            severity: Severity::Error,
            path: path.into(),
            message: message.into(),
        });
    }

    pub fn warning(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(Diagnostic {
            severity: Severity::Warning,
            path: path.into(),
            message: message.into(),
        });
    }

    /// Adds an error, or a warning when the setting is not in force (a disabled check).
    pub fn problem(&mut self, in_force: bool, path: String, message: String) {
        if in_force {
            self.error(path, message);
        } else {
            self.warning(
                path,
                format!("{message} (ignored while the check is disabled)"),
            );
        }
    }

    /// In strict mode warnings become errors.
    pub fn finish(&mut self, strict: bool) {
        if strict {
            for mut w in self.warnings.drain(..) {
                w.severity = Severity::Error;
                self.errors.push(w);
            }
        }
    }

    pub fn into_result(self) -> Result<Vec<Diagnostic>, ConfigError> {
        if self.errors.is_empty() {
            Ok(self.warnings)
        } else {
            Err(ConfigError {
                errors: self.errors,
                warnings: self.warnings,
            })
        }
    }
}

/// Where a key sits: builds key paths and message prefixes naming cluster and destination.
#[derive(Clone, Copy)]
pub(crate) struct Place<'a> {
    pub section: &'a str,
    pub cluster: Option<&'a str>,
    pub destination: Option<&'a str>,
}

impl<'a> Place<'a> {
    pub fn cluster(section: &'a str, cluster: &'a str) -> Self {
        Place {
            section,
            cluster: Some(cluster),
            destination: None,
        }
    }

    pub fn destination(self, destination: &'a str) -> Self {
        Place {
            destination: Some(destination),
            ..self
        }
    }

    /// `ReverseProxy:Clusters:c:Destinations:d:` + key
    pub fn path(&self, key: &str) -> String {
        let mut p = self.section.to_string();
        if let Some(c) = self.cluster {
            p.push(':');
            p.push_str(c);
        }
        if let Some(d) = self.destination {
            p.push_str(":Destinations:");
            p.push_str(d);
        }
        if !key.is_empty() {
            p.push(':');
            p.push_str(key);
        }
        p
    }

    /// "cluster `c`: destination `d`: " + text
    pub fn message(&self, text: impl fmt::Display) -> String {
        let mut m = String::new();
        if let Some(c) = self.cluster {
            m.push_str(&format!("cluster `{c}`: "));
        }
        if let Some(d) = self.destination {
            m.push_str(&format!("destination `{d}`: "));
        }
        m.push_str(&text.to_string());
        m
    }
}

/// Checks a configuration against the policy names `registry` knows.
pub(crate) fn validate(config: &Config, registry: &PolicyRegistry, diags: &mut Diagnostics) {
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
        validate_cluster(cluster, place, registry, diags);
    }
}

fn validate_cluster(
    cluster: &ClusterConfig,
    place: Place<'_>,
    registry: &PolicyRegistry,
    diags: &mut Diagnostics,
) {
    let lb = cluster.load_balancing_policy_name();
    if registry.load_balancing(lb).is_none() {
        diags.error(
            place.path("LoadBalancingPolicy"),
            place.message(format!(
                "LoadBalancingPolicy `{lb}` is not a known policy (known: {})",
                registry.load_balancing_names().join(", ")
            )),
        );
    }
    let hc = &cluster.health_check;
    let avail = hc.available_destinations_policy_name();
    if registry.available_destinations(avail).is_none() {
        diags.error(
            place.path("HealthCheck:AvailableDestinationsPolicy"),
            place.message(format!(
                "AvailableDestinationsPolicy `{avail}` is not a known policy (known: {})",
                registry.available_destinations_names().join(", ")
            )),
        );
    }

    let active = &hc.active;
    if active.enabled {
        let name = active.policy_name();
        if registry.active(name).is_none() {
            diags.error(
                place.path("HealthCheck:Active:Policy"),
                place.message(format!(
                    "active health policy `{name}` is not a known policy (known: {})",
                    registry.active_names().join(", ")
                )),
            );
        }
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
    if passive.enabled {
        let name = passive.policy_name();
        if registry.passive(name).is_none() {
            diags.error(
                place.path("HealthCheck:Passive:Policy"),
                place.message(format!(
                    "passive health policy `{name}` is not a known policy (known: {})",
                    registry.passive_names().join(", ")
                )),
            );
        }
        if passive.reactivation_period.is_some_and(|d| d.is_zero()) {
            diags.error(
                place.path("HealthCheck:Passive:ReactivationPeriod"),
                place.message("ReactivationPeriod `00:00:00` must be positive"),
            );
        }
    }

    for key in [
        super::CONSECUTIVE_FAILURES_THRESHOLD_KEY,
        super::TRANSPORT_FAILURE_RATE_LIMIT_KEY,
    ] {
        if let Some(value) = cluster.metadata.get(key) {
            if parse_metadata_number(value).is_none() {
                diags.warning(
                    place.path(&format!("Metadata:{key}")),
                    place.message(format!(
                        "metadata {key} `{value}` is not a number; the default is used"
                    )),
                );
            }
        }
    }

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

fn validate_destination(dest: &DestinationConfig, place: Place<'_>, diags: &mut Diagnostics) {
    if dest.address.trim().is_empty() {
        diags.error(
            place.path("Address"),
            place.message("Address is required (an absolute http(s) URL)"),
        );
    } else if let Err(why) = absolute_http_url(&dest.address) {
        diags.error(
            place.path("Address"),
            place.message(format!("Address `{}` {why}", dest.address)),
        );
    }
    if let Some(health) = &dest.health {
        if let Err(why) = absolute_http_url(health) {
            diags.error(
                place.path("Health"),
                place.message(format!("Health `{health}` {why}")),
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
fn sort_in_document_order(config: &Config, list: &mut [Diagnostic]) {
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

/// Parses an absolute http(s) URL, or says what is wrong with it.
pub(crate) fn absolute_http_url(text: &str) -> Result<Url, &'static str> {
    uri::parse_base(text)
}

/// Reads a metadata number as YARP's `double.TryParse` would (invariant culture).
/// Non-finite values (`inf`, `NaN`, `1e999`) are refused: .NET's invariant parse does not read
/// Rust's `inf` spellings, and an infinite threshold would silently disable the policy.
pub(crate) fn parse_metadata_number(value: &str) -> Option<f64> {
    value.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

//! The configuration in any serde format (feature `serde`): `Serialize` writes the YARP
//! JSON shape, `Deserialize` reads it through the YARP reader and validation.
//!
//! Reading does not derive field by field: a derive could not read keys case-insensitively, take
//! `"true"` or `"15"` as text the way .NET configuration does, read TimeSpans, accept both
//! `ReverseProxy:Clusters` and a bare `Clusters`, or collect every problem at once. Instead the
//! document is deserialized into a plain tree (objects in their order, arrays, scalars) and that
//! tree goes through exactly what [`Config::from_json`] runs: the reader, validation and the
//! built-in policy names. All problems become one error whose message lists each of them, with
//! its key path, cluster and value (a [`ConfigError`]'s text). Any format that can describe a
//! JSON document works: TOML, YAML, JSON itself, a figment or config-rs value.
//!
//! Writing gives back what the model holds, in the shape YARP documents: PascalCase keys,
//! TimeSpans as `[d.]hh:mm:ss[.fffffff]`, policy names in their registered spelling
//! ([`PolicyRegistry::canonical`]), defaults left out where the model has none of its own, and
//! healthpick's own sections (`LoadSignals`, `TierSpill`, `SlowStart`, and `SessionAffinity`'s
//! `BalanceFactor`) only with the keys that differ from their defaults. Reading
//! that document again gives an equal `Config`: `Config::from_json(&serde_json::to_string(&c)?)`
//! is `PolicyRegistry::default().canonical(&c)` for every configuration that was read from a
//! document. (A configuration built in code round-trips too, except for what a document cannot
//! say: durations finer than .NET's 100 ns tick, empty texts, which read as "not set", and
//! non-positive durations of a disabled check, which the reader sets aside.)
//!
//! | type | `Serialize` | `Deserialize` |
//! |---|---|---|
//! | [`Config`] | the whole document | through the reader, validation and policy names |
//! | [`HealthPolicyOptions`] | a `HealthPolicies` section | through the section's reader |
//! | [`TimeSpan`] | .NET's "c" format | [`parse_timespan`] (`"00:00:10"`, `"15s"`) |
//! | [`Metadata`] | a map of texts | a map of scalars, kept as text, keys unique case-insensitively |
//! | [`ClusterConfig`], [`DestinationConfig`], [`HealthCheckConfig`], [`ActiveHealthCheckConfig`], [`PassiveHealthCheckConfig`], [`DiscoveryConfig`], [`LocalityTiers`], [`SessionAffinityConfig`], [`LoadSignalsConfig`], [`LoadReportsConfig`], [`TierSpillConfig`], [`SlowStartConfig`] | their section of the document | — (a cluster's or destination's id is its key in the enclosing section, and ids and policy names are validated across the whole document: deserialize a [`Config`]) |

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{self, Serialize, SerializeMap, SerializeSeq, Serializer};

use super::affinity::SessionAffinityConfig;
use super::check::check_value;
use super::diagnostics::{ConfigError, Diagnostic, Diagnostics, Severity};
use super::discovery::{DiscoveryConfig, DnsRecord, GuardMode, LocalityTiers, SourceConfig};
use super::metadata::Metadata;
use super::model::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig, HealthCheckConfig,
    HealthPolicyOptions, PassiveHealthCheckConfig,
};
use super::read::read_health_policies;
use super::timespan::{parse_timespan, TimeSpan};
use super::traffic::{LoadReportsConfig, LoadSignalsConfig, SlowStartConfig, TierSpillConfig};
use super::tree::Node;
use crate::ids::fold_case;
use crate::jsonc::{Json, JsonKind};
use crate::policy::registry::PolicyRegistry;

// ---------------------------------------------------------------------------------------------
// Reading: any serde format into the JSON tree the YARP reader takes.

/// A document as a JSON tree: objects keep their entries in order (duplicates included, so the
/// reader reports them), numbers keep the text serde_json would write for them.
struct Tree(Json);

fn tree(kind: JsonKind) -> Tree {
    // Spans point into a text; a deserialized document has none (the reader does not use them).
    Tree(Json { kind, span: 0..0 })
}

/// The key under which the `toml` crate hands over a date or time (an unquoted `00:00:10` is a
/// TOML local time): its text is what the reader gets.
const TOML_DATETIME_KEY: &str = "$__toml_private_datetime";

/// Rust's text of a float as serde_json writes it (`1.5`, `1e300`); `NaN` and `inf`, which JSON
/// cannot hold, as Rust writes them (every number reader of the configuration refuses them).
fn float_text(v: f64) -> String {
    serde_json::Number::from_f64(v).map_or_else(|| v.to_string(), |n| n.to_string())
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TreeVisitor)
    }
}

struct TreeVisitor;

impl<'de> Visitor<'de> for TreeVisitor {
    type Value = Tree;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a configuration value (an object, an array, text, a number, a boolean or null)",
        )
    }

    fn visit_bool<E>(self, v: bool) -> Result<Tree, E> {
        Ok(tree(JsonKind::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Tree, E> {
        Ok(tree(JsonKind::Number(v.to_string())))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Tree, E> {
        Ok(tree(JsonKind::Number(v.to_string())))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Tree, E> {
        Ok(tree(JsonKind::Number(v.to_string())))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Tree, E> {
        Ok(tree(JsonKind::Number(v.to_string())))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Tree, E> {
        Ok(tree(JsonKind::Number(float_text(v))))
    }

    fn visit_char<E>(self, v: char) -> Result<Tree, E> {
        Ok(tree(JsonKind::String(v.to_string())))
    }

    fn visit_str<E>(self, v: &str) -> Result<Tree, E> {
        Ok(tree(JsonKind::String(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Tree, E> {
        Ok(tree(JsonKind::String(v)))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Tree, E> {
        match std::str::from_utf8(v) {
            Ok(text) => Ok(tree(JsonKind::String(text.to_owned()))),
            Err(_) => Err(E::invalid_value(de::Unexpected::Bytes(v), &self)),
        }
    }

    fn visit_none<E>(self) -> Result<Tree, E> {
        Ok(tree(JsonKind::Null))
    }

    fn visit_unit<E>(self) -> Result<Tree, E> {
        Ok(tree(JsonKind::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tree, D::Error> {
        Tree::deserialize(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tree, D::Error> {
        Tree::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(Tree(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(tree(JsonKind::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
        while let Some(Key(key)) = map.next_key()? {
            if entries.is_empty() && key == TOML_DATETIME_KEY {
                let text: String = map.next_value()?;
                return Ok(tree(JsonKind::String(text)));
            }
            let Tree(value) = map.next_value()?;
            entries.push((key, value));
        }
        Ok(tree(JsonKind::Object(entries)))
    }
}

/// An object key: text, or a scalar taken as its text (YAML allows `1:` or `true:` keys).
struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a configuration key (text)")
    }

    fn visit_str<E>(self, v: &str) -> Result<Key, E> {
        Ok(Key(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Key, E> {
        Ok(Key(v))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Key, E> {
        Ok(Key(float_text(v)))
    }

    fn visit_char<E>(self, v: char) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }
}

/// Problems as one serde error: a [`ConfigError`]'s text, every error on its own line.
fn config_error<E: de::Error>(errors: Vec<Diagnostic>, warnings: Vec<Diagnostic>) -> E {
    E::custom(ConfigError { errors, warnings })
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de> Deserialize<'de> for Config {
    /// Reads a YARP document from any serde format exactly as [`Config::from_json`] reads the
    /// same document in JSON: case-insensitive keys, scalars as text, TimeSpans, YARP's defaults,
    /// validation against the built-in policies. Every problem is in the one error it returns.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Tree(document) = Tree::deserialize(deserializer)?;
        let report = check_value(Some(document), &PolicyRegistry::default(), false);
        match report.config {
            Some(config) if report.errors.is_empty() => Ok(config),
            _ => Err(config_error(report.errors, report.warnings)),
        }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de> Deserialize<'de> for HealthPolicyOptions {
    /// Reads a `HealthPolicies` section as the configuration reader does; what is not set keeps
    /// its default.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Tree(section) = Tree::deserialize(deserializer)?;
        let mut diags = Diagnostics::default();
        let options = read_health_policies(&Node::from_json(section), &mut diags);
        if diags.errors.is_empty() {
            Ok(options)
        } else {
            Err(config_error(diags.errors, diags.warnings))
        }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de> Deserialize<'de> for TimeSpan {
    /// Reads a TimeSpan as the configuration does ([`parse_timespan`]): text such as
    /// `"00:00:10"` or `"15s"`, or a number (of days, as .NET reads `10`).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Tree(value) = Tree::deserialize(deserializer)?;
        match value.kind {
            JsonKind::String(text) | JsonKind::Number(text) => {
                parse_timespan(&text).map_err(de::Error::custom)
            }
            other => Err(de::Error::custom(format!(
                "a TimeSpan must be text such as \"00:00:15\", found {}",
                kind_name(&other)
            ))),
        }
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl<'de> Deserialize<'de> for Metadata {
    /// Reads metadata as the configuration does: a map whose values are kept as text (`3`
    /// becomes `"3"`, `true` becomes `"True"`), null values skipped; two keys that differ only
    /// in case, or a value that is an object or array, are errors.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Tree(value) = Tree::deserialize(deserializer)?;
        let JsonKind::Object(entries) = value.kind else {
            return Err(de::Error::custom(format!(
                "metadata must be a map of texts, found {}",
                kind_name(&value.kind)
            )));
        };
        let mut errors = Vec::new();
        let mut seen = std::collections::HashMap::new();
        let mut out = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            let error = |message: String| Diagnostic {
                severity: Severity::Error,
                path: format!("Metadata:{key}"),
                message,
            };
            if let Some(first) = seen.insert(fold_case(&key), key.clone()) {
                errors.push(error(format!(
                    "duplicate key `{key}` (keys are case-insensitive; `{first}` is already set)"
                )));
                continue;
            }
            match Node::from_json(value) {
                Node::Value(text) => out.push((key, text)),
                Node::Null => {}
                Node::Object(_) => errors.push(error(format!(
                    "metadata `{key}` must be a value, found an object"
                ))),
            }
        }
        if errors.is_empty() {
            Ok(Metadata::from_entries(out))
        } else {
            Err(config_error(errors, Vec::new()))
        }
    }
}

fn kind_name(kind: &JsonKind) -> &'static str {
    match kind {
        JsonKind::Object(_) => "an object",
        JsonKind::Array(_) => "an array",
        JsonKind::String(_) => "text",
        JsonKind::Number(_) => "a number",
        JsonKind::Bool(_) => "a boolean",
        JsonKind::Null => "null",
    }
}

// ---------------------------------------------------------------------------------------------
// Writing: the YARP JSON shape.

/// A duration as a TimeSpan in .NET's "c" format (`00:00:10`, `1.02:03:04.5000000`).
fn span(duration: Duration) -> String {
    TimeSpan::from_duration(duration).to_string()
}

/// A number the reader reads back: JSON, and so YARP, has no infinite or NaN values.
fn finite<E: ser::Error>(key: &str, value: f64) -> Result<f64, E> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(E::custom(format!(
            "{key} is {value}, which a configuration document cannot hold"
        )))
    }
}

/// A list of items written as an array.
struct List<'a, T>(&'a [T]);

impl<T: fmt::Display> Serialize for List<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&item.to_string())?;
        }
        seq.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for Config {
    /// Writes the YARP document: `{"ReverseProxy": {"Clusters": ...}}` when it was read from
    /// that shape (or the section [`check_section`](crate::config::check_section) named), else
    /// `{"Clusters": ...}`, and a `HealthPolicies` section when the config has
    /// one; policy names in their registered spelling.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let config = PolicyRegistry::default().canonical(self);
        let clusters = Clusters(&config.clusters);
        let mut map = serializer.serialize_map(None)?;
        // The section it was read from (`ReverseProxy`, or one `check_section` named, nested
        // at its `:`s), else a bare `Clusters`.
        match config.section.strip_suffix(":Clusters") {
            Some(section) => {
                let segments: Vec<&str> = section.split(':').collect();
                map.serialize_entry(
                    segments[0],
                    &Section {
                        inner: &segments[1..],
                        clusters,
                    },
                )?;
            }
            None => map.serialize_entry("Clusters", &clusters)?,
        }
        if let Some(options) = &config.health_policies {
            map.serialize_entry("HealthPolicies", options)?;
        }
        map.end()
    }
}

/// A configuration section holding the clusters, under its `inner` sections.
struct Section<'a, 'c> {
    inner: &'a [&'a str],
    clusters: Clusters<'c>,
}

impl Serialize for Section<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        match self.inner.split_first() {
            Some((first, rest)) => map.serialize_entry(
                first,
                &Section {
                    inner: rest,
                    clusters: Clusters(self.clusters.0),
                },
            )?,
            None => map.serialize_entry("Clusters", &self.clusters)?,
        }
        map.end()
    }
}

/// Clusters by id, in order; their policy names already canonical.
struct Clusters<'a>(&'a [ClusterConfig]);

impl Serialize for Clusters<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for cluster in self.0 {
            map.serialize_entry(&cluster.id, &ClusterBody(cluster))?;
        }
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for ClusterConfig {
    /// Writes the cluster's section (its id is its key in `Clusters`, not part of it), policy
    /// names in their registered spelling.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut cluster = self.clone();
        PolicyRegistry::default().canonicalize_cluster(&mut cluster);
        ClusterBody(&cluster).serialize(serializer)
    }
}

/// A cluster's section as held (names not canonicalized again).
struct ClusterBody<'a>(&'a ClusterConfig);

impl Serialize for ClusterBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut map = serializer.serialize_map(None)?;
        if let Some(name) = &c.load_balancing_policy {
            map.serialize_entry("LoadBalancingPolicy", name)?;
        }
        if let Some(affinity) = &c.session_affinity {
            map.serialize_entry("SessionAffinity", affinity)?;
        }
        map.serialize_entry("HealthCheck", &c.health_check)?;
        if c.dangerous_accept_any_server_certificate || c.max_connections_per_server.is_some() {
            map.serialize_entry("HttpClient", &HttpClient(c))?;
        }
        if c.http_version.is_some() || c.activity_timeout.is_some() {
            map.serialize_entry("HttpRequest", &HttpRequest(c))?;
        }
        if !c.metadata.is_empty() {
            map.serialize_entry("Metadata", &c.metadata)?;
        }
        match c.discovery.as_slice() {
            [] => {}
            [one] => map.serialize_entry("Discovery", one)?,
            many => map.serialize_entry("Discovery", many)?,
        }
        if let Some(tiers) = &c.locality_tiers {
            map.serialize_entry("LocalityTiers", tiers)?;
        }
        if c.load_signals != LoadSignalsConfig::default() {
            map.serialize_entry("LoadSignals", &c.load_signals)?;
        }
        if c.tier_spill != TierSpillConfig::default() {
            map.serialize_entry("TierSpill", &c.tier_spill)?;
        }
        if let Some(slow_start) = &c.slow_start {
            map.serialize_entry("SlowStart", slow_start)?;
        }
        map.serialize_entry("Destinations", &Destinations(&c.destinations))?;
        map.end()
    }
}

struct HttpClient<'a>(&'a ClusterConfig);

impl Serialize for HttpClient<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(
            "DangerousAcceptAnyServerCertificate",
            &self.0.dangerous_accept_any_server_certificate,
        )?;
        if let Some(n) = self.0.max_connections_per_server {
            map.serialize_entry("MaxConnectionsPerServer", &n)?;
        }
        map.end()
    }
}

struct HttpRequest<'a>(&'a ClusterConfig);

impl Serialize for HttpRequest<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(timeout) = self.0.activity_timeout {
            map.serialize_entry("ActivityTimeout", &span(timeout))?;
        }
        if let Some(version) = &self.0.http_version {
            map.serialize_entry("Version", version)?;
        }
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for HealthCheckConfig {
    /// Writes a cluster's `HealthCheck` section: `AvailableDestinationsPolicy` when set, then
    /// `Active` and `Passive`, each with its `Enabled` flag.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(name) = &self.available_destinations_policy {
            map.serialize_entry("AvailableDestinationsPolicy", name)?;
        }
        map.serialize_entry("Active", &self.active)?;
        map.serialize_entry("Passive", &self.passive)?;
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for ActiveHealthCheckConfig {
    /// Writes `HealthCheck:Active`: `Enabled` and whatever else is set.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("Enabled", &self.enabled)?;
        if let Some(interval) = self.interval {
            map.serialize_entry("Interval", &span(interval))?;
        }
        if let Some(timeout) = self.timeout {
            map.serialize_entry("Timeout", &span(timeout))?;
        }
        for (key, value) in [
            ("Policy", &self.policy),
            ("Path", &self.path),
            ("Query", &self.query),
        ] {
            if let Some(value) = value {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for PassiveHealthCheckConfig {
    /// Writes `HealthCheck:Passive`: `Enabled` and whatever else is set.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("Enabled", &self.enabled)?;
        if let Some(policy) = &self.policy {
            map.serialize_entry("Policy", policy)?;
        }
        if let Some(period) = self.reactivation_period {
            map.serialize_entry("ReactivationPeriod", &span(period))?;
        }
        map.end()
    }
}

/// Destinations by id, in order.
struct Destinations<'a>(&'a [DestinationConfig]);

impl Serialize for Destinations<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for destination in self.0 {
            map.serialize_entry(&destination.id, destination)?;
        }
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for DestinationConfig {
    /// Writes the destination's section (its id is its key in `Destinations`): `Address`, then
    /// `Health`, `Host`, `Metadata` (its `Weight` among them) and `Priority` (the tier) when set.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("Address", &self.address)?;
        if let Some(health) = &self.health {
            map.serialize_entry("Health", health)?;
        }
        if let Some(host) = &self.host {
            map.serialize_entry("Host", host)?;
        }
        if !self.metadata.is_empty() {
            map.serialize_entry("Metadata", &self.metadata)?;
        }
        if self.priority != 0 {
            map.serialize_entry("Priority", &self.priority)?;
        }
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for Metadata {
    /// Writes the entries in order, as texts.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (key, value) in self.iter() {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for HealthPolicyOptions {
    /// Writes a `HealthPolicies` section with every option.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(7))?;
        map.serialize_entry("DetectionWindowSize", &span(self.detection_window_size))?;
        map.serialize_entry(
            "MinimalTotalCountThreshold",
            &self.minimal_total_count_threshold,
        )?;
        map.serialize_entry(
            "DefaultFailureRateLimit",
            &finite::<S::Error>(
                "HealthPolicies:DefaultFailureRateLimit",
                self.default_failure_rate_limit,
            )?,
        )?;
        map.serialize_entry(
            "ConsecutiveFailuresThreshold",
            &finite::<S::Error>(
                "HealthPolicies:ConsecutiveFailuresThreshold",
                self.consecutive_failures_threshold,
            )?,
        )?;
        map.serialize_entry("DefaultInterval", &span(self.default_interval))?;
        map.serialize_entry("DefaultTimeout", &span(self.default_timeout))?;
        map.serialize_entry(
            "DefaultReactivationPeriod",
            &span(self.default_reactivation_period),
        )?;
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for TimeSpan {
    /// Writes .NET's "c" format, `[-][d.]hh:mm:ss[.fffffff]`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for DiscoveryConfig {
    /// Writes one source of a cluster's `Discovery` section: `Type`, `Source` when named, the
    /// type's own settings, then `Guard`, `MinRefresh`, `MaxRefresh`, `Jitter` and
    /// `FirstAnswerWithin`, every one as the model holds it.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("Type", self.source.type_name())?;
        if let Some(name) = &self.name {
            map.serialize_entry("Source", name)?;
        }
        match &self.source {
            SourceConfig::Dns(dns) => {
                map.serialize_entry("Name", &dns.name)?;
                let record = match dns.record {
                    DnsRecord::Address => "A",
                    DnsRecord::Srv => "SRV",
                };
                map.serialize_entry("Record", record)?;
                if let Some(port) = dns.port {
                    map.serialize_entry("Port", &port)?;
                }
                map.serialize_entry("Scheme", &dns.scheme)?;
                if !dns.servers.is_empty() {
                    map.serialize_entry("Servers", &List(&dns.servers))?;
                }
                map.serialize_entry("Timeout", &span(dns.timeout))?;
            }
            SourceConfig::ResolveDestinations(resolve) => {
                if !resolve.servers.is_empty() {
                    map.serialize_entry("Servers", &List(&resolve.servers))?;
                }
                map.serialize_entry("Timeout", &span(resolve.timeout))?;
            }
            SourceConfig::Etcd(etcd) => {
                map.serialize_entry("Endpoints", &List(&etcd.endpoints))?;
                map.serialize_entry("Prefix", &etcd.prefix)?;
                map.serialize_entry("Timeout", &span(etcd.timeout))?;
            }
            SourceConfig::Consul(consul) => {
                map.serialize_entry("Service", &consul.service)?;
                if let Some(address) = &consul.address {
                    map.serialize_entry("Address", address.as_str())?;
                }
                if !consul.datacenters.is_empty() {
                    map.serialize_entry("Datacenters", &List(&consul.datacenters))?;
                }
                if let Some(tag) = &consul.tag {
                    map.serialize_entry("Tag", tag)?;
                }
                if let Some(token) = &consul.token {
                    map.serialize_entry("Token", token)?;
                }
                map.serialize_entry("Wait", &span(consul.wait))?;
                // `MaxStale` alone allows stale reads; without it reads are consistent.
                if let Some(max_stale) = consul.stale {
                    map.serialize_entry("MaxStale", &span(max_stale))?;
                }
                map.serialize_entry("Scheme", &consul.scheme)?;
                map.serialize_entry("Timeout", &span(consul.timeout))?;
            }
            SourceConfig::Kubernetes(kubernetes) => {
                map.serialize_entry("Service", &kubernetes.service)?;
                for (key, value) in [
                    ("Namespace", &kubernetes.namespace),
                    ("PortName", &kubernetes.port_name),
                ] {
                    if let Some(value) = value {
                        map.serialize_entry(key, value)?;
                    }
                }
                map.serialize_entry("Scheme", &kubernetes.scheme)?;
                if let Some(context) = &kubernetes.context {
                    map.serialize_entry("Context", context)?;
                }
                map.serialize_entry("Resync", &span(kubernetes.resync))?;
                map.serialize_entry("IdleTimeout", &span(kubernetes.idle_timeout))?;
                if let Some(zone) = &kubernetes.local_zone {
                    map.serialize_entry("LocalZone", zone)?;
                }
            }
        }
        map.serialize_entry("Guard", &Guard(self))?;
        map.serialize_entry("MinRefresh", &span(self.refresh.min))?;
        map.serialize_entry("MaxRefresh", &span(self.refresh.max))?;
        map.serialize_entry(
            "Jitter",
            &finite::<S::Error>("Discovery:Jitter", self.refresh.jitter)?,
        )?;
        map.serialize_entry("FirstAnswerWithin", &span(self.first_answer_within))?;
        map.end()
    }
}

struct Guard<'a>(&'a DiscoveryConfig);

impl Serialize for Guard<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let guard = &self.0.guard;
        let mut map = serializer.serialize_map(Some(3))?;
        let policy = match guard.mode {
            GuardMode::AfterConfirmation => "AfterConfirmation",
            GuardMode::Never => "Never",
            GuardMode::Immediately => "Immediately",
        };
        map.serialize_entry("Policy", policy)?;
        map.serialize_entry(
            "MaxRemovedShare",
            &finite::<S::Error>("Discovery:Guard:MaxRemovedShare", guard.max_removed_share)?,
        )?;
        map.serialize_entry("ConfirmAfter", &span(guard.confirm_after))?;
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for LocalityTiers {
    /// Writes a cluster's `LocalityTiers` section: `Enabled: true`, the local zone and region
    /// when set, and the named `Tiers`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("Enabled", &true)?;
        if let Some(zone) = &self.local_zone {
            map.serialize_entry("LocalZone", zone)?;
        }
        if let Some(region) = &self.local_region {
            map.serialize_entry("LocalRegion", region)?;
        }
        if !self.tiers.is_empty() {
            map.serialize_entry("Tiers", &self.tiers)?;
        }
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for SessionAffinityConfig {
    /// Writes a cluster's `SessionAffinity` section: `Enabled: true`, `Policy`, `FailurePolicy`
    /// and `AffinityKeyName` (YARP requires it), and `BalanceFactor` when it is not the default.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("Enabled", &true)?;
        map.serialize_entry("Policy", self.policy.name())?;
        map.serialize_entry("FailurePolicy", self.failure_policy.name())?;
        map.serialize_entry("AffinityKeyName", &self.affinity_key_name)?;
        if self.balance_factor != SessionAffinityConfig::new(self.policy).balance_factor {
            map.serialize_entry(
                "BalanceFactor",
                &finite::<S::Error>("SessionAffinity:BalanceFactor", self.balance_factor)?,
            )?;
        }
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for LoadSignalsConfig {
    /// Writes a cluster's `LoadSignals` section: the keys that differ from their defaults.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let defaults = LoadSignalsConfig::default();
        let mut map = serializer.serialize_map(None)?;
        if self.decay_time != defaults.decay_time {
            map.serialize_entry("DecayTime", &span(self.decay_time))?;
        }
        if self.default_rtt != defaults.default_rtt {
            map.serialize_entry("DefaultRtt", &span(self.default_rtt))?;
        }
        if self.load_reports != defaults.load_reports {
            map.serialize_entry("LoadReports", &self.load_reports)?;
        }
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for LoadReportsConfig {
    /// Writes `LoadSignals:LoadReports`: the keys that differ from their defaults.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let defaults = LoadReportsConfig::default();
        let mut map = serializer.serialize_map(None)?;
        if self.enabled != defaults.enabled {
            map.serialize_entry("Enabled", &self.enabled)?;
        }
        if self.blackout != defaults.blackout {
            map.serialize_entry("Blackout", &span(self.blackout))?;
        }
        if self.expiration != defaults.expiration {
            map.serialize_entry("Expiration", &span(self.expiration))?;
        }
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for TierSpillConfig {
    /// Writes a cluster's `TierSpill` section: the keys that differ from their defaults.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let defaults = TierSpillConfig::default();
        let mut map = serializer.serialize_map(None)?;
        if self.mode != defaults.mode {
            map.serialize_entry("Mode", self.mode.name())?;
        }
        if self.upper_mark != defaults.upper_mark {
            map.serialize_entry(
                "UpperMark",
                &finite::<S::Error>("TierSpill:UpperMark", self.upper_mark)?,
            )?;
        }
        if self.lower_mark != defaults.lower_mark {
            map.serialize_entry(
                "LowerMark",
                &finite::<S::Error>("TierSpill:LowerMark", self.lower_mark)?,
            )?;
        }
        if self.dwell != defaults.dwell {
            map.serialize_entry("Dwell", &span(self.dwell))?;
        }
        map.end()
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl Serialize for SlowStartConfig {
    /// Writes a cluster's `SlowStart` section: `Window`, and `Aggression` and
    /// `MinWeightPercent` when they differ from their defaults.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let defaults = SlowStartConfig::new(self.window);
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("Window", &span(self.window))?;
        if self.aggression != defaults.aggression {
            map.serialize_entry(
                "Aggression",
                &finite::<S::Error>("SlowStart:Aggression", self.aggression)?,
            )?;
        }
        if self.min_weight_percent != defaults.min_weight_percent {
            map.serialize_entry(
                "MinWeightPercent",
                &finite::<S::Error>("SlowStart:MinWeightPercent", self.min_weight_percent)?,
            )?;
        }
        map.end()
    }
}

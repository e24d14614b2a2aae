//! `healthpick check FILE`: validate a configuration file like `nginx -t`, reporting every problem
//! at once; `--json` prints the effective configuration with every default resolved;
//! `--print-config` prints the configuration as a YARP JSON document that loads again.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use healthpick::config::{
    check, check_section, CheckReport, ClusterConfig, Config, DestinationConfig, DiscoveryConfig,
    DnsRecord, GuardMode, HealthPolicyOptions, LoadSignalsConfig, Metadata, SessionAffinityConfig,
    SlowStartConfig, SourceConfig, TierSpillConfig,
};
use healthpick::{Diagnostic, PolicyRegistry};
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::{emit, plural, read_text};

pub(crate) const AFTER_HELP: &str = "\
The file is a YARP appsettings document ({\"ReverseProxy\": {\"Clusters\": ...}} or
{\"Clusters\": ...}); comments and trailing commas are accepted, keys are case-insensitive.
With --section NAME the clusters are read from NAME:Clusters instead (NAME may be nested,
`Proxies:Internal`), and HealthPolicies from NAME:HealthPolicies when it exists.

Beyond YARP's own validation it warns (errors with --strict) about: keys within a small
edit distance of a known key (`unknown key `Priorty`; did you mean `Priority`?`), a probe
Timeout not shorter than its Interval, and YARP settings healthpick reads but does not
apply (HttpClient:MaxConnectionsPerServer, WebProxy, SslProtocols, HttpRequest:VersionPolicy, ...).

Output (stdout):
  default  `FILE: configuration is valid (N clusters, M destinations)` or
           `FILE: configuration is INVALID (K errors)`, then one
           `error: <path>: <message>` / `warning: <path>: <message>` line per problem
  --json   one JSON object: valid, errors, warnings, the section read, the resolved
           HealthPolicies and the effective configuration of every cluster with all
           defaults resolved (intervals, timeouts, thresholds, canonical policy names,
           outlier detection, HttpClient, HttpRequest, metadata, discovery, session
           affinity, load signals, tier spill, slow start, and each destination's tier,
           weight, metadata and probe URI)
  --print-config
           when the file is valid, the configuration as a YARP JSON document: every
           setting it holds (health checks, policies, HttpClient, HttpRequest, metadata,
           destinations, discovery sources and tokens, locality tiers, SessionAffinity,
           LoadSignals, TierSpill, SlowStart, HealthPolicies),
           PascalCase keys, TimeSpans as hh:mm:ss[.fffffff], canonical policy names;
           defaults not written in the file stay unwritten. It loads again (with
           `healthpick check` or Config::from_json) to the same configuration. Problems
           go to stderr; an invalid file prints nothing on stdout

Exit status:
  0  the configuration is valid (warnings allowed unless --strict)
  1  the configuration is invalid, or FILE cannot be read
  2  usage error

Examples:
  healthpick check appsettings.json
  healthpick check --strict appsettings.json && deploy
  healthpick check --section ReverseProxy2 appsettings.json
  healthpick check --json appsettings.json | jq '.clusters[].destinations'
  healthpick check --print-config appsettings.json > appsettings.canonical.json";

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// The YARP JSON configuration file to check (e.g. appsettings.json)
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Treat warnings as errors
    #[arg(long)]
    pub strict: bool,

    /// Print one JSON object with the diagnostics and the effective configuration
    #[arg(long)]
    pub json: bool,

    /// Print the configuration as a YARP JSON document that loads again (problems to stderr)
    #[arg(long, conflicts_with = "json")]
    pub print_config: bool,

    /// Read the clusters from NAME:Clusters instead of ReverseProxy:Clusters
    #[arg(long, value_name = "NAME")]
    pub section: Option<String>,
}

pub(crate) fn run(args: &CheckArgs) -> ExitCode {
    let text = match read_text(&args.file) {
        Ok(text) => text,
        Err(why) => {
            let message = format!("cannot read `{}`: {why}", args.file.display());
            let _ = writeln!(std::io::stderr(), "healthpick: error: {message}");
            if args.json {
                let diag = Diagnostic {
                    severity: healthpick::config::Severity::Error,
                    path: String::new(),
                    message,
                };
                emit(&json_output(false, &[diag], &[], None));
            }
            return ExitCode::FAILURE;
        }
    };
    let registry = PolicyRegistry::default();
    let report = match &args.section {
        Some(section) => check_section(&text, section, &registry, args.strict),
        None => check(&text, &registry, args.strict),
    };
    let valid = report.is_valid();
    if args.print_config {
        return print_config(&args.file, &report);
    }
    let output = if args.json {
        json_output(
            valid,
            &report.errors,
            &report.warnings,
            report.config.as_ref().map(|c| (c, &registry)),
        )
    } else {
        human_output(&args.file, &report)
    };
    emit(&output);
    if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `--print-config`: the configuration as YARP JSON on stdout, problems on stderr.
fn print_config(file: &Path, report: &CheckReport) -> ExitCode {
    let config = match &report.config {
        Some(config) if report.is_valid() => config,
        _ => {
            let _ = std::io::stderr().write_all(human_output(file, report).as_bytes());
            return ExitCode::FAILURE;
        }
    };
    let mut stderr = std::io::stderr();
    for w in &report.warnings {
        let _ = writeln!(stderr, "warning: {w}");
    }
    match serde_json::to_string_pretty(config) {
        Ok(mut text) => {
            text.push('\n');
            emit(&text);
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(
                stderr,
                "healthpick: error: cannot write the configuration: {e}"
            );
            ExitCode::FAILURE
        }
    }
}

fn human_output(file: &Path, report: &CheckReport) -> String {
    let mut out = String::new();
    let name = file.display();
    match (&report.config, report.is_valid()) {
        (Some(config), true) => {
            let destinations: usize = config
                .clusters()
                .iter()
                .map(|c| c.destinations().len())
                .sum();
            out.push_str(&format!(
                "{name}: configuration is valid ({}, {})\n",
                plural(config.clusters().len(), "cluster"),
                plural(destinations, "destination"),
            ));
        }
        _ => {
            // `check` always reports why a document is unusable; count at least one error.
            let n = report.errors.len().max(1);
            out.push_str(&format!(
                "{name}: configuration is INVALID ({})\n",
                plural(n, "error")
            ));
        }
    }
    for e in &report.errors {
        out.push_str(&format!("error: {e}\n"));
    }
    for w in &report.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// JSON output

/// A JSON object whose keys keep the document's order (serde_json's `Map` would sort them).
/// Exact duplicate keys (already reported as errors) keep their first occurrence.
struct Ordered<T>(Vec<(String, T)>);

impl<T> Ordered<T> {
    fn from_iter(items: impl IntoIterator<Item = (String, T)>) -> Self {
        let mut seen = std::collections::HashSet::new();
        let entries = items
            .into_iter()
            .filter(|(key, _)| seen.insert(key.clone()))
            .collect();
        Ordered(entries)
    }
}

impl<T: Serialize> Serialize for Ordered<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonReport<'a> {
    valid: bool,
    errors: &'a [Diagnostic],
    warnings: &'a [Diagnostic],
    /// The configuration section the clusters were read from (`ReverseProxy:Clusters`).
    #[serde(skip_serializing_if = "Option::is_none")]
    section: Option<String>,
    /// The global health-policy options in force (the file's `HealthPolicies`, defaults
    /// resolved).
    #[serde(skip_serializing_if = "Option::is_none")]
    health_policies: Option<JsonHealthPolicies>,
    clusters: Ordered<JsonCluster<'a>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonHealthPolicies {
    /// Whether the file has a `HealthPolicies` section (else these are the defaults).
    from_file: bool,
    detection_window_size_ms: u64,
    minimal_total_count_threshold: u64,
    default_failure_rate_limit: f64,
    consecutive_failures_threshold: f64,
    default_interval_ms: u64,
    default_timeout_ms: u64,
    default_reactivation_period_ms: u64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonHttpClient {
    dangerous_accept_any_server_certificate: bool,
    /// As given; healthpick reads it but does not apply it (a warning says so).
    max_connections_per_server: Option<u32>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonHttpRequest<'a> {
    /// `HttpRequest:Version` as given, if any.
    version: Option<&'a str>,
    /// The HTTP version probes of https destinations ask for (cleartext probes use HTTP/1.1).
    probe_version: &'static str,
    /// The attempt timeout of requests through the wrapped client or middleware, if set.
    activity_timeout_ms: Option<u64>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonCluster<'a> {
    load_balancing_policy: &'a str,
    available_destinations_policy: &'a str,
    active: JsonActive<'a>,
    passive: JsonPassive,
    /// The cluster's discovery sources, every default resolved.
    sources: Vec<JsonSource>,
    /// The locality-to-tier mapping, when on.
    locality_tiers: Option<serde_json::Value>,
    /// `SessionAffinity`, when enabled.
    session_affinity: Option<JsonSessionAffinity<'a>>,
    /// `LoadSignals` in force (the defaults when the file has none).
    load_signals: JsonLoadSignals,
    /// `TierSpill` in force (`Strict` when the file has none).
    tier_spill: JsonTierSpill,
    /// `SlowStart`, when on.
    slow_start: Option<JsonSlowStart>,
    /// Metadata `HealthCheck.SuspectRanking` (healthpick extension).
    suspect_ranking: bool,
    /// Metadata `HealthCheck.ResetPassiveOnRecovery` (healthpick extension).
    reset_passive_on_recovery: bool,
    /// Metadata `OutlierDetection.*`, in force when the OutlierDetection passive policy runs.
    outlier_detection: JsonOutlierDetection,
    http_client: JsonHttpClient,
    http_request: JsonHttpRequest<'a>,
    /// The cluster metadata as given.
    metadata: Ordered<&'a str>,
    destinations: Ordered<JsonDestination<'a>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonSessionAffinity<'a> {
    policy: &'static str,
    failure_policy: &'static str,
    affinity_key_name: &'a str,
    /// Where a request's key is read: `cookie` or `header` (named by `affinityKeyName`).
    key_from: &'static str,
    balance_factor: f64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonLoadSignals {
    decay_time_ms: u64,
    default_rtt_ms: u64,
    load_reports: JsonLoadReports,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonLoadReports {
    enabled: bool,
    blackout_ms: u64,
    expiration_ms: u64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonTierSpill {
    mode: &'static str,
    upper_mark: f64,
    lower_mark: f64,
    dwell_ms: u64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonSlowStart {
    window_ms: u64,
    aggression: f64,
    min_weight_percent: f64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonSource {
    name: String,
    r#type: &'static str,
    target: String,
    /// The type's own settings.
    settings: serde_json::Value,
    guard: serde_json::Value,
    min_refresh_ms: u64,
    max_refresh_ms: u64,
    jitter: f64,
    first_answer_within_ms: u64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonOutlierDetection {
    #[serde(rename = "consecutive5xx")]
    consecutive_5xx: u32,
    consecutive_gateway_failure: u32,
    base_ejection_time_ms: u64,
    max_ejection_time_ms: u64,
    max_ejection_percent: f64,
    interval_ms: u64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonActive<'a> {
    enabled: bool,
    interval_ms: u64,
    timeout_ms: u64,
    policy: &'a str,
    path: Option<&'a str>,
    query: Option<&'a str>,
    /// Non-finite values (metadata `Infinity`) have no JSON form and print as `null`.
    threshold: f64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonPassive {
    enabled: bool,
    /// The registered spelling of each listed policy, comma-separated.
    policy: String,
    reactivation_period_ms: Option<u64>,
    effective_reactivation_ms: u64,
    rate_limit: f64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonDestination<'a> {
    address: &'a str,
    health: Option<&'a str>,
    host: Option<&'a str>,
    priority: u32,
    weight: f64,
    probe_uri: Option<String>,
    /// The destination metadata as given.
    metadata: Ordered<&'a str>,
}

fn json_output(
    valid: bool,
    errors: &[Diagnostic],
    warnings: &[Diagnostic],
    config: Option<(&Config, &PolicyRegistry)>,
) -> String {
    let mut section = None;
    let mut health_policies = None;
    let clusters = match config {
        Some((config, registry)) => {
            let options = config.health_policies().copied().unwrap_or_default();
            section = Some(config.section().to_string());
            health_policies = Some(JsonHealthPolicies {
                from_file: config.health_policies().is_some(),
                detection_window_size_ms: millis(options.detection_window_size),
                minimal_total_count_threshold: options.minimal_total_count_threshold,
                default_failure_rate_limit: options.default_failure_rate_limit,
                consecutive_failures_threshold: options.consecutive_failures_threshold,
                default_interval_ms: millis(options.default_interval),
                default_timeout_ms: millis(options.default_timeout),
                default_reactivation_period_ms: millis(options.default_reactivation_period),
            });
            Ordered::from_iter(
                config
                    .clusters()
                    .iter()
                    .map(|c| (c.id().to_string(), effective_cluster(c, registry, &options))),
            )
        }
        None => Ordered(Vec::new()),
    };
    let report = JsonReport {
        valid,
        errors,
        warnings,
        section,
        health_policies,
        clusters,
    };
    match serde_json::to_string_pretty(&report) {
        Ok(mut text) => {
            text.push('\n');
            text
        }
        // Serializing these plain structs cannot fail; still, never panic.
        Err(e) => format!(
            "{{\"valid\": false, \"errors\": [{{\"path\": \"\", \"message\": {}}}], \"warnings\": [], \"clusters\": {{}}}}\n",
            serde_json::Value::from(format!("cannot write the report: {e}"))
        ),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn effective_cluster<'a>(
    cluster: &'a ClusterConfig,
    registry: &'a PolicyRegistry,
    options: &HealthPolicyOptions,
) -> JsonCluster<'a> {
    let hc = cluster.health_check();
    let active = hc.active();
    let passive = hc.passive();

    let lb = cluster.load_balancing_policy_name();
    let available = hc.available_destinations_policy_name();
    let active_policy = active.policy_name();
    let passive_policy = passive
        .policy_names()
        .into_iter()
        .map(|name| registry.passive(name).map_or(name, |(n, _)| n))
        .collect::<Vec<_>>()
        .join(", ");
    let outlier = cluster.outlier_detection();

    let reactivation = passive.reactivation_period_setting();
    JsonCluster {
        load_balancing_policy: registry.load_balancing(lb).map_or(lb, |(n, _)| n),
        available_destinations_policy: registry
            .available_destinations(available)
            .map_or(available, |(n, _)| n),
        active: JsonActive {
            enabled: active.is_enabled(),
            interval_ms: millis(cluster.effective_interval(options)),
            timeout_ms: millis(cluster.effective_timeout(options)),
            policy: registry
                .active(active_policy)
                .map_or(active_policy, |(n, _)| n),
            path: active.path_setting(),
            query: active.query_setting(),
            threshold: cluster.failure_threshold(options),
        },
        passive: JsonPassive {
            enabled: passive.is_enabled(),
            policy: passive_policy,
            reactivation_period_ms: reactivation.map(millis),
            effective_reactivation_ms: millis(cluster.effective_reactivation_period(options)),
            rate_limit: cluster.failure_rate_limit(options),
        },
        sources: cluster
            .discovery_sources()
            .iter()
            .map(effective_source)
            .collect(),
        locality_tiers: cluster.locality_tiers_setting().map(|t| {
            serde_json::json!({
                "localZone": t.local_zone_setting(),
                "localRegion": t.local_region_setting(),
                "tiers": t.named_tiers(),
            })
        }),
        session_affinity: cluster.session_affinity_setting().map(effective_affinity),
        load_signals: effective_load_signals(cluster.load_signals_setting()),
        tier_spill: effective_tier_spill(cluster.tier_spill_setting()),
        slow_start: cluster.slow_start_setting().map(effective_slow_start),
        suspect_ranking: cluster.suspect_ranking(),
        reset_passive_on_recovery: cluster.reset_passive_on_recovery(),
        outlier_detection: JsonOutlierDetection {
            consecutive_5xx: outlier.consecutive_5xx,
            consecutive_gateway_failure: outlier.consecutive_gateway_failure,
            base_ejection_time_ms: millis(outlier.base_ejection_time),
            max_ejection_time_ms: millis(outlier.ejection_time(u32::MAX)),
            max_ejection_percent: outlier.max_ejection_percent,
            interval_ms: millis(outlier.interval),
        },
        http_client: JsonHttpClient {
            dangerous_accept_any_server_certificate: cluster
                .dangerous_accept_any_server_certificate(),
            max_connections_per_server: cluster.max_connections_per_server(),
        },
        http_request: JsonHttpRequest {
            version: cluster.http_version_setting(),
            probe_version: cluster.probe_http_version(),
            activity_timeout_ms: cluster.activity_timeout_setting().map(millis),
        },
        metadata: metadata(cluster.metadata_map()),
        destinations: Ordered::from_iter(
            cluster
                .destinations()
                .iter()
                .map(|d| (d.id().to_string(), effective_destination(cluster, d))),
        ),
    }
}

fn effective_affinity(affinity: &SessionAffinityConfig) -> JsonSessionAffinity<'_> {
    let policy = affinity.policy_setting();
    JsonSessionAffinity {
        policy: policy.name(),
        failure_policy: affinity.failure_policy_setting().name(),
        affinity_key_name: affinity.affinity_key_name_setting(),
        key_from: if policy.reads_cookie() {
            "cookie"
        } else {
            "header"
        },
        balance_factor: affinity.balance_factor_setting(),
    }
}

fn effective_load_signals(signals: &LoadSignalsConfig) -> JsonLoadSignals {
    let reports = signals.load_reports_setting();
    JsonLoadSignals {
        decay_time_ms: millis(signals.decay_time_setting()),
        default_rtt_ms: millis(signals.default_rtt_setting()),
        load_reports: JsonLoadReports {
            enabled: reports.enabled_setting(),
            blackout_ms: millis(reports.blackout_setting()),
            expiration_ms: millis(reports.expiration_setting()),
        },
    }
}

fn effective_tier_spill(spill: &TierSpillConfig) -> JsonTierSpill {
    JsonTierSpill {
        mode: spill.mode_setting().name(),
        upper_mark: spill.upper_mark_setting(),
        lower_mark: spill.lower_mark_setting(),
        dwell_ms: millis(spill.dwell_setting()),
    }
}

fn effective_slow_start(slow_start: &SlowStartConfig) -> JsonSlowStart {
    JsonSlowStart {
        window_ms: millis(slow_start.window_setting()),
        aggression: slow_start.aggression_setting(),
        min_weight_percent: slow_start.min_weight_percent_setting(),
    }
}

fn effective_source(source: &DiscoveryConfig) -> JsonSource {
    let settings = match source.source() {
        SourceConfig::Dns(dns) => serde_json::json!({
            "name": dns.dns_name(),
            "record": match dns.record() { DnsRecord::Address => "A", DnsRecord::Srv => "SRV", _ => "other" },
            "port": dns.port(),
            "scheme": dns.url_scheme(),
            "servers": dns.name_servers().iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "timeoutMs": millis(dns.lookup_timeout()),
        }),
        SourceConfig::ResolveDestinations(r) => serde_json::json!({
            "servers": r.name_servers().iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "timeoutMs": millis(r.lookup_timeout()),
        }),
        SourceConfig::Etcd(etcd) => serde_json::json!({
            "endpoints": etcd.endpoint_urls().iter().map(|u| u.as_str()).collect::<Vec<_>>(),
            "prefix": etcd.key_prefix(),
            "timeoutMs": millis(etcd.call_timeout()),
        }),
        SourceConfig::Consul(consul) => serde_json::json!({
            "service": consul.service(),
            "address": consul.agent_address().map(|u| u.as_str().to_string()),
            "datacenters": consul.datacenter_list(),
            "tag": consul.tag_filter(),
            // Never the token itself: `check --json` output ends up in logs and tickets.
            "token": consul.token_setting().map(|_| "(set)"),
            "waitMs": millis(consul.blocking_wait()),
            "maxStaleMs": consul.max_stale().map(millis),
            "scheme": consul.url_scheme(),
            "timeoutMs": millis(consul.call_timeout()),
        }),
        SourceConfig::Kubernetes(kubernetes) => serde_json::json!({
            "service": kubernetes.service(),
            "namespace": kubernetes.namespace_setting(),
            "portName": kubernetes.port_name_setting(),
            "scheme": kubernetes.url_scheme(),
            "context": kubernetes.context_setting(),
            "resyncMs": millis(kubernetes.resync_period()),
            "idleTimeoutMs": millis(kubernetes.watch_idle_timeout()),
            "localZone": kubernetes.local_zone_setting(),
        }),
        _ => serde_json::Value::Null,
    };
    let guard = source.guard_policy();
    let refresh = source.refresh_bounds();
    JsonSource {
        name: source.source_name(),
        r#type: source.source().type_name(),
        target: source.source().target(),
        settings,
        guard: serde_json::json!({
            "policy": match guard.mode() {
                GuardMode::AfterConfirmation => "AfterConfirmation",
                GuardMode::Never => "Never",
                GuardMode::Immediately => "Immediately",
                _ => "Unknown",
            },
            "maxRemovedShare": guard.removed_share(),
            "confirmAfterMs": millis(guard.confirmation_delay()),
        }),
        min_refresh_ms: millis(refresh.min()),
        max_refresh_ms: millis(refresh.max()),
        jitter: refresh.jitter_share(),
        first_answer_within_ms: millis(source.first_answer_wait()),
    }
}

fn effective_destination<'a>(
    cluster: &ClusterConfig,
    dest: &'a DestinationConfig,
) -> JsonDestination<'a> {
    JsonDestination {
        address: dest.address(),
        health: dest.health_setting(),
        host: dest.host_setting(),
        priority: dest.tier(),
        weight: dest.weight(),
        probe_uri: cluster
            .probe_uri(dest)
            .ok()
            .map(|url| url.as_str().to_string()),
        metadata: metadata(dest.metadata_map()),
    }
}

fn metadata(md: &Metadata) -> Ordered<&str> {
    Ordered::from_iter(md.iter().map(|(k, v)| (k.to_string(), v)))
}

//! The configuration model and its builders, with YARP's defaults.

use std::time::Duration;

use super::affinity::SessionAffinityConfig;
use super::discovery::{DiscoveryConfig, LocalityTiers, SourceConfig};
use super::metadata::{
    parse_bool, parse_count, parse_number, parse_percent, parse_positive_timespan, parse_weight,
    Metadata, CONSECUTIVE_FAILURES_THRESHOLD_KEY, OUTLIER_BASE_EJECTION_TIME_KEY,
    OUTLIER_CONSECUTIVE_5XX_KEY, OUTLIER_CONSECUTIVE_GATEWAY_FAILURE_KEY, OUTLIER_INTERVAL_KEY,
    OUTLIER_MAX_EJECTION_PERCENT_KEY, OUTLIER_MAX_EJECTION_TIME_KEY, RESET_PASSIVE_ON_RECOVERY_KEY,
    SUSPECT_RANKING_KEY, TRANSPORT_FAILURE_RATE_LIMIT_KEY, WEIGHT_KEY,
};
use super::traffic::{LoadSignalsConfig, SlowStartConfig, TierSpillConfig};
use crate::ids::eq_ignore_case;

/// Default load-balancing policy of a cluster.
pub(crate) const DEFAULT_LOAD_BALANCING: &str = "PowerOfTwoChoices";
/// Default available-destinations policy of a cluster.
pub(crate) const DEFAULT_AVAILABLE_DESTINATIONS: &str = "HealthyOrPanic";
/// Default active health policy.
pub(crate) const DEFAULT_ACTIVE_POLICY: &str = "ConsecutiveFailures";
/// Default passive health policy.
pub(crate) const DEFAULT_PASSIVE_POLICY: &str = "TransportFailureRate";

/// A whole configuration: the clusters, in the order they were given, and optionally the global
/// health-policy options.
///
/// Read one from a YARP appsettings file with [`Config::from_json`], or build one in code:
///
/// ```
/// use healthpick::config::{ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig};
/// use std::time::Duration;
///
/// let config = Config::new().cluster(
///     ClusterConfig::new("payments")
///         .load_balancing_policy("RoundRobin")
///         .active(ActiveHealthCheckConfig::enabled().interval(Duration::from_secs(5)).path("/health"))
///         .destination(DestinationConfig::new("local-1", "http://10.0.0.1:8080"))
///         .destination(DestinationConfig::new("remote-1", "http://10.1.0.1:8080").priority(1)),
/// );
/// assert_eq!(config.clusters().len(), 1);
/// ```
///
/// # Serde (feature `serde`)
///
/// A `Config` is also `serde::Deserialize` and `serde::Serialize` in the YARP shape. Any serde
/// format (TOML, YAML, ...) loads it exactly as [`Config::from_json`] loads the same document in
/// JSON: case-insensitive keys, scalars as text, TimeSpans, YARP's defaults, validation against
/// the built-in policies, every problem in one error. Serializing writes YARP JSON (PascalCase
/// keys, TimeSpans as `hh:mm:ss[.fffffff]`, policy names as
/// [`PolicyRegistry::canonical`](crate::PolicyRegistry::canonical) spells them) that loads again
/// to an equal `Config`.
///
/// ```
/// # #[cfg(feature = "serde")]
/// # {
/// use healthpick::Config;
///
/// let config: Config = toml::from_str(r#"
///     [Clusters.payments]
///     HealthCheck.Passive = { Enabled = "true", ReactivationPeriod = "2m" }
///     Destinations.eu-1 = { Address = "http://10.0.0.1:8080/" }
/// "#).unwrap();
/// let json = serde_json::to_string(&config).unwrap();
/// assert!(json.contains(r#""ReactivationPeriod":"00:02:00""#));
/// assert_eq!(Config::from_json(&json).unwrap(), config);
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub(crate) clusters: Vec<ClusterConfig>,
    pub(crate) health_policies: Option<HealthPolicyOptions>,
    /// Key prefix for diagnostics: `ReverseProxy:Clusters` or `Clusters`.
    pub(crate) section: String,
}

impl Default for Config {
    /// The same as [`Config::new`].
    fn default() -> Self {
        Config::new()
    }
}

impl Config {
    /// An empty configuration (no clusters).
    pub fn new() -> Self {
        Config {
            clusters: Vec::new(),
            health_policies: None,
            section: "Clusters".to_string(),
        }
    }

    /// Adds a cluster.
    pub fn cluster(mut self, cluster: ClusterConfig) -> Self {
        self.clusters.push(cluster);
        self
    }

    /// Sets the global health-policy options; without them the engine's own options apply.
    pub fn health_policy_options(mut self, options: HealthPolicyOptions) -> Self {
        self.health_policies = Some(options);
        self
    }

    /// The clusters in the order they were given.
    pub fn clusters(&self) -> &[ClusterConfig] {
        &self.clusters
    }

    /// The cluster with this id, compared case-insensitively.
    pub fn find_cluster(&self, id: &str) -> Option<&ClusterConfig> {
        self.clusters.iter().find(|c| eq_ignore_case(&c.id, id))
    }

    /// The global health-policy options given with this config, if any.
    pub fn health_policies(&self) -> Option<&HealthPolicyOptions> {
        self.health_policies.as_ref()
    }

    /// The configuration section the clusters come from, the prefix of every diagnostic's key
    /// path: `ReverseProxy:Clusters`, `Clusters` (a bare document, or a config built in code),
    /// or `NAME:Clusters` for the section [`check_section`](crate::config::check_section)
    /// named.
    pub fn section(&self) -> &str {
        &self.section
    }
}

/// Global options of the built-in health policies and the active monitor, the values
/// YARP sets in code through `TransportFailureRateHealthPolicyOptions`,
/// `ConsecutiveFailuresHealthPolicyOptions` and `ActiveHealthCheckMonitorOptions`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HealthPolicyOptions {
    /// Window over which TransportFailureRate counts outcomes. Default 60 s.
    pub detection_window_size: Duration,
    /// Below this many outcomes in the window the failure rate is 0. Default 10.
    pub minimal_total_count_threshold: u64,
    /// Failure-rate limit when a cluster sets none in its metadata. Default 0.3.
    pub default_failure_rate_limit: f64,
    /// ConsecutiveFailures threshold when a cluster sets none. Default 2.
    pub consecutive_failures_threshold: f64,
    /// Probe interval when a cluster sets none. Default 15 s.
    pub default_interval: Duration,
    /// Probe timeout when a cluster sets none. Default 10 s.
    pub default_timeout: Duration,
    /// Reactivation period when a cluster sets none. Default 60 s.
    pub default_reactivation_period: Duration,
}

impl Default for HealthPolicyOptions {
    fn default() -> Self {
        HealthPolicyOptions {
            detection_window_size: Duration::from_secs(60),
            minimal_total_count_threshold: 10,
            default_failure_rate_limit: 0.3,
            consecutive_failures_threshold: 2.0,
            default_interval: Duration::from_secs(15),
            default_timeout: Duration::from_secs(10),
            default_reactivation_period: Duration::from_secs(60),
        }
    }
}

/// The settings of the OutlierDetection passive policy (Envoy's outlier detection),
/// read from cluster metadata (`OutlierDetection.Consecutive5xx`, ...; see
/// [`ClusterConfig::outlier_detection`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutlierDetectionOptions {
    /// Consecutive 5xx responses (transport failures included) that eject; 0: off. Default 5.
    pub consecutive_5xx: u32,
    /// Consecutive gateway errors (502, 503, 504, transport failures) that eject; 0: off.
    /// Default 5.
    pub consecutive_gateway_failure: u32,
    /// The first ejection's length; the n-th in a row lasts n times as long. Default 30 s.
    pub base_ejection_time: Duration,
    /// The longest ejection (the base ejection time when that is longer). Default 300 s.
    pub max_ejection_time: Duration,
    /// The most destinations ejected at once, in percent of the cluster, never fewer than one.
    /// Default 10.
    pub max_ejection_percent: f64,
    /// Time in service without a new ejection that lowers the ejection count by one. Default
    /// 10 s.
    pub interval: Duration,
}

impl Default for OutlierDetectionOptions {
    fn default() -> Self {
        OutlierDetectionOptions {
            consecutive_5xx: 5,
            consecutive_gateway_failure: 5,
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 10.0,
            interval: Duration::from_secs(10),
        }
    }
}

impl OutlierDetectionOptions {
    /// How long the `count`-th ejection in a row lasts: the base ejection time times `count`,
    /// at most the maximum (or the base, when that is longer).
    pub fn ejection_time(&self, count: u32) -> Duration {
        let cap = self.max_ejection_time.max(self.base_ejection_time);
        self.base_ejection_time
            .checked_mul(count.max(1))
            .map_or(cap, |time| time.min(cap))
    }

    /// How many of a cluster's `size` destinations may be ejected at once: the share of
    /// [`max_ejection_percent`](Self::max_ejection_percent), rounded down, but at least one.
    pub fn max_ejected(&self, size: usize) -> usize {
        let share = (size as f64 * self.max_ejection_percent / 100.0).floor();
        // `share` is finite and at most `size`.
        (share as usize).max(1)
    }
}

/// One cluster: a named group of interchangeable destinations.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    pub(crate) id: String,
    pub(crate) load_balancing_policy: Option<String>,
    pub(crate) health_check: HealthCheckConfig,
    pub(crate) metadata: Metadata,
    pub(crate) destinations: Vec<DestinationConfig>,
    pub(crate) http_version: Option<String>,
    pub(crate) activity_timeout: Option<Duration>,
    pub(crate) dangerous_accept_any_server_certificate: bool,
    pub(crate) max_connections_per_server: Option<u32>,
    pub(crate) discovery: Vec<DiscoveryConfig>,
    pub(crate) locality_tiers: Option<LocalityTiers>,
    pub(crate) load_signals: LoadSignalsConfig,
    pub(crate) tier_spill: TierSpillConfig,
    pub(crate) slow_start: Option<SlowStartConfig>,
    pub(crate) session_affinity: Option<SessionAffinityConfig>,
}

impl ClusterConfig {
    /// A cluster with YARP's defaults: PowerOfTwoChoices, HealthyOrPanic, no health checks.
    pub fn new(id: impl Into<String>) -> Self {
        ClusterConfig {
            id: id.into(),
            load_balancing_policy: None,
            health_check: HealthCheckConfig::default(),
            metadata: Metadata::new(),
            destinations: Vec::new(),
            http_version: None,
            activity_timeout: None,
            dangerous_accept_any_server_certificate: false,
            max_connections_per_server: None,
            discovery: Vec::new(),
            locality_tiers: None,
            load_signals: LoadSignalsConfig::default(),
            tier_spill: TierSpillConfig::default(),
            slow_start: None,
            session_affinity: None,
        }
    }

    /// Sets the load-balancing policy by name (case-insensitive). Default `PowerOfTwoChoices`.
    pub fn load_balancing_policy(mut self, name: impl Into<String>) -> Self {
        self.load_balancing_policy = Some(name.into());
        self
    }

    /// Sets the available-destinations policy by name. Default `HealthyOrPanic`.
    pub fn available_destinations_policy(mut self, name: impl Into<String>) -> Self {
        self.health_check.available_destinations_policy = Some(name.into());
        self
    }

    /// Sets the active health check. Default: disabled.
    pub fn active(mut self, active: ActiveHealthCheckConfig) -> Self {
        self.health_check.active = active;
        self
    }

    /// Sets the passive health check. Default: disabled.
    pub fn passive(mut self, passive: PassiveHealthCheckConfig) -> Self {
        self.health_check.passive = passive;
        self
    }

    /// Adds a metadata entry (for example `ConsecutiveFailuresHealthPolicy.Threshold`).
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key, value);
        self
    }

    /// Adds a destination.
    pub fn destination(mut self, destination: DestinationConfig) -> Self {
        self.destinations.push(destination);
        self
    }

    /// Adds a discovery source: destinations published by it join the configured ones
    ///. Sources run when [`Discovery`](crate::discovery::Discovery) is started.
    pub fn discovery(mut self, source: DiscoveryConfig) -> Self {
        self.discovery.push(source);
        self
    }

    /// Maps the locality of discovered destinations to tiers. Default: off.
    pub fn locality_tiers(mut self, tiers: LocalityTiers) -> Self {
        self.locality_tiers = Some(tiers);
        self
    }

    /// Sets the HTTP version probes use (`"1.1"` default, `"2"`), from `HttpRequest:Version`.
    pub fn http_version(mut self, version: impl Into<String>) -> Self {
        self.http_version = Some(version.into());
        self
    }

    /// Sets how long one attempt of a request through the wrapped client or the middleware may
    /// take (YARP's `HttpRequest:ActivityTimeout`); it replaces the client's attempt timeout for
    /// this cluster (a request's own timeout still wins). Must be positive. Default: none, the
    /// client's setting applies.
    pub fn activity_timeout(mut self, timeout: Duration) -> Self {
        self.activity_timeout = Some(timeout);
        self
    }

    /// The cluster id, spelled as given.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The load-balancing policy name as given, or the default.
    pub fn load_balancing_policy_name(&self) -> &str {
        self.load_balancing_policy
            .as_deref()
            .unwrap_or(DEFAULT_LOAD_BALANCING)
    }

    /// The health-check settings.
    pub fn health_check(&self) -> &HealthCheckConfig {
        &self.health_check
    }

    /// The cluster metadata.
    pub fn metadata_map(&self) -> &Metadata {
        &self.metadata
    }

    /// The destinations in the order they were given.
    pub fn destinations(&self) -> &[DestinationConfig] {
        &self.destinations
    }

    /// The HTTP version probes ask for, if set (`HttpRequest:Version`).
    pub fn http_version_setting(&self) -> Option<&str> {
        self.http_version.as_deref()
    }

    /// The HTTP version probes of https destinations ask for, from `HttpRequest:Version`: `"2"`
    /// for 2 or 2.0, `"1.0"` for 1.0, else `"1.1"` (the default, and what probes use for
    /// HTTP/3, which they do not speak). Cleartext probes always use HTTP/1.1.
    pub fn probe_http_version(&self) -> &'static str {
        use super::http_version::{parse_http_version, HttpVersion};
        match self.http_version.as_deref().map(parse_http_version) {
            Some(HttpVersion::Supported(2, 0)) => "2",
            Some(HttpVersion::Supported(1, 0)) => "1.0",
            _ => "1.1",
        }
    }

    /// The attempt timeout of requests to this cluster, if set (`HttpRequest:ActivityTimeout`).
    pub fn activity_timeout_setting(&self) -> Option<Duration> {
        self.activity_timeout
    }

    /// The ConsecutiveFailures threshold in force: cluster metadata
    /// `ConsecutiveFailuresHealthPolicy.Threshold` when it is a finite number, else the default.
    pub fn failure_threshold(&self, options: &HealthPolicyOptions) -> f64 {
        self.metadata_number(CONSECUTIVE_FAILURES_THRESHOLD_KEY)
            .unwrap_or(options.consecutive_failures_threshold)
    }

    /// The TransportFailureRate limit in force: cluster metadata
    /// `TransportFailureRateHealthPolicy.RateLimit` when it is a finite number, else the default.
    pub fn failure_rate_limit(&self, options: &HealthPolicyOptions) -> f64 {
        self.metadata_number(TRANSPORT_FAILURE_RATE_LIMIT_KEY)
            .unwrap_or(options.default_failure_rate_limit)
    }

    /// Whether destinations whose most recent probe failed rank with Degraded ones: cluster
    /// metadata `HealthCheck.SuspectRanking` (default `true`; healthpick extension).
    pub fn suspect_ranking(&self) -> bool {
        self.metadata_bool(SUSPECT_RANKING_KEY).unwrap_or(true)
    }

    /// Whether passive policies forget a destination's history when active checks see it
    /// recover: cluster metadata `HealthCheck.ResetPassiveOnRecovery` (default `true`;
    /// healthpick extension).
    pub fn reset_passive_on_recovery(&self) -> bool {
        self.metadata_bool(RESET_PASSIVE_ON_RECOVERY_KEY)
            .unwrap_or(true)
    }

    /// The OutlierDetection settings in force: each from its cluster metadata key when that is
    /// valid, else the default (validation warns about invalid ones).
    pub fn outlier_detection(&self) -> OutlierDetectionOptions {
        let d = OutlierDetectionOptions::default();
        let md = &self.metadata;
        OutlierDetectionOptions {
            consecutive_5xx: md
                .get(OUTLIER_CONSECUTIVE_5XX_KEY)
                .and_then(parse_count)
                .unwrap_or(d.consecutive_5xx),
            consecutive_gateway_failure: md
                .get(OUTLIER_CONSECUTIVE_GATEWAY_FAILURE_KEY)
                .and_then(parse_count)
                .unwrap_or(d.consecutive_gateway_failure),
            base_ejection_time: md
                .get(OUTLIER_BASE_EJECTION_TIME_KEY)
                .and_then(parse_positive_timespan)
                .unwrap_or(d.base_ejection_time),
            max_ejection_time: md
                .get(OUTLIER_MAX_EJECTION_TIME_KEY)
                .and_then(parse_positive_timespan)
                .unwrap_or(d.max_ejection_time),
            max_ejection_percent: md
                .get(OUTLIER_MAX_EJECTION_PERCENT_KEY)
                .and_then(parse_percent)
                .unwrap_or(d.max_ejection_percent),
            interval: md
                .get(OUTLIER_INTERVAL_KEY)
                .and_then(parse_positive_timespan)
                .unwrap_or(d.interval),
        }
    }

    fn metadata_bool(&self, key: &str) -> Option<bool> {
        self.metadata.get(key).and_then(parse_bool)
    }

    fn metadata_number(&self, key: &str) -> Option<f64> {
        self.metadata.get(key).and_then(parse_number)
    }

    /// The probe interval in force.
    pub fn effective_interval(&self, options: &HealthPolicyOptions) -> Duration {
        self.health_check
            .active
            .interval
            .unwrap_or(options.default_interval)
    }

    /// The probe timeout in force.
    pub fn effective_timeout(&self, options: &HealthPolicyOptions) -> Duration {
        self.health_check
            .active
            .timeout
            .unwrap_or(options.default_timeout)
    }

    /// How long TransportFailureRate keeps an ejected destination out: max(`ReactivationPeriod`
    /// or the default 60 s, detection window), so old failures have left the window when it
    /// returns.
    pub fn effective_reactivation_period(&self, options: &HealthPolicyOptions) -> Duration {
        self.health_check
            .passive
            .reactivation_period
            .unwrap_or(options.default_reactivation_period)
            .max(options.detection_window_size)
    }

    /// The probe URI of `destination` under this cluster's active-check Path and Query,
    /// built whether or not active checks are enabled.
    ///
    /// # Errors
    /// Why it cannot be built (bad base URL, Path or Query); validation reports the same.
    pub fn probe_uri(&self, destination: &DestinationConfig) -> Result<url::Url, String> {
        let active = &self.health_check.active;
        crate::uri::probe_uri(
            destination
                .health
                .as_deref()
                .unwrap_or(&destination.address),
            active.path.as_deref(),
            active.query.as_deref(),
        )
    }

    /// The discovery sources, in the order given.
    pub fn discovery_sources(&self) -> &[DiscoveryConfig] {
        &self.discovery
    }

    /// The locality-to-tier mapping, if on.
    pub fn locality_tiers_setting(&self) -> Option<&LocalityTiers> {
        self.locality_tiers.as_ref()
    }

    /// Sets `LoadSignals`: how latency estimates and reported load are kept.
    pub fn load_signals(mut self, signals: LoadSignalsConfig) -> Self {
        self.load_signals = signals;
        self
    }

    /// Sets `TierSpill`: whether the preferred tier spills into the next one under load.
    /// Default `Strict`.
    pub fn tier_spill(mut self, spill: TierSpillConfig) -> Self {
        self.tier_spill = spill;
        self
    }

    /// Sets `SlowStart`: destinations that become available warm up over a window. Default
    /// none.
    pub fn slow_start(mut self, slow_start: SlowStartConfig) -> Self {
        self.slow_start = Some(slow_start);
        self
    }

    /// Sets `SessionAffinity` (enabled): requests with the same key go to the same
    /// destination. Default none.
    pub fn session_affinity(mut self, affinity: SessionAffinityConfig) -> Self {
        self.session_affinity = Some(affinity);
        self
    }

    /// Its `LoadSignals`.
    pub fn load_signals_setting(&self) -> &LoadSignalsConfig {
        &self.load_signals
    }

    /// Its `TierSpill`.
    pub fn tier_spill_setting(&self) -> &TierSpillConfig {
        &self.tier_spill
    }

    /// Its `SlowStart`, if any.
    pub fn slow_start_setting(&self) -> Option<&SlowStartConfig> {
        self.slow_start.as_ref()
    }

    /// Its `SessionAffinity`, when enabled.
    pub fn session_affinity_setting(&self) -> Option<&SessionAffinityConfig> {
        self.session_affinity.as_ref()
    }

    /// Whether a `ResolveDestinations` source expands the configured destinations (they are then
    /// templates, not destinations themselves).
    pub fn resolves_destinations(&self) -> bool {
        self.discovery
            .iter()
            .any(|d| matches!(d.source, SourceConfig::ResolveDestinations(_)))
    }

    /// `HttpClient:DangerousAcceptAnyServerCertificate` (default false).
    pub fn dangerous_accept_any_server_certificate(&self) -> bool {
        self.dangerous_accept_any_server_certificate
    }

    /// `HttpClient:MaxConnectionsPerServer`, if set.
    pub fn max_connections_per_server(&self) -> Option<u32> {
        self.max_connections_per_server
    }
}

/// The `HealthCheck` section of a cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HealthCheckConfig {
    pub(crate) available_destinations_policy: Option<String>,
    pub(crate) active: ActiveHealthCheckConfig,
    pub(crate) passive: PassiveHealthCheckConfig,
}

impl HealthCheckConfig {
    /// The available-destinations policy name as given, or the default.
    pub fn available_destinations_policy_name(&self) -> &str {
        self.available_destinations_policy
            .as_deref()
            .unwrap_or(DEFAULT_AVAILABLE_DESTINATIONS)
    }

    /// The active check.
    pub fn active(&self) -> &ActiveHealthCheckConfig {
        &self.active
    }

    /// The passive check.
    pub fn passive(&self) -> &PassiveHealthCheckConfig {
        &self.passive
    }
}

/// Active health checks: periodic probes of each destination.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActiveHealthCheckConfig {
    pub(crate) enabled: bool,
    pub(crate) interval: Option<Duration>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) policy: Option<String>,
    pub(crate) path: Option<String>,
    pub(crate) query: Option<String>,
}

impl ActiveHealthCheckConfig {
    /// Active checks turned on, with the defaults (15 s interval, 10 s timeout,
    /// ConsecutiveFailures).
    pub fn enabled() -> Self {
        ActiveHealthCheckConfig {
            enabled: true,
            ..Self::default()
        }
    }

    /// Sets the probe interval. Default 15 s.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = Some(interval);
        self
    }

    /// Sets the probe timeout. Default 10 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the active policy by name. Default `ConsecutiveFailures`.
    pub fn policy(mut self, name: impl Into<String>) -> Self {
        self.policy = Some(name.into());
        self
    }

    /// Sets the probe path; it must start with `/`. Default: none (the base path).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Sets the probe query; it must start with `?`. Default: none.
    pub fn query(mut self, query: impl Into<String>) -> Self {
        self.query = Some(query.into());
        self
    }

    /// Whether active checks are on.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The interval as given (`None`: the default applies).
    pub fn interval_setting(&self) -> Option<Duration> {
        self.interval
    }

    /// The timeout as given (`None`: the default applies).
    pub fn timeout_setting(&self) -> Option<Duration> {
        self.timeout
    }

    /// The policy name as given, or the default.
    pub fn policy_name(&self) -> &str {
        self.policy.as_deref().unwrap_or(DEFAULT_ACTIVE_POLICY)
    }

    /// The probe path, if any.
    pub fn path_setting(&self) -> Option<&str> {
        self.path.as_deref()
    }

    /// The probe query, if any.
    pub fn query_setting(&self) -> Option<&str> {
        self.query.as_deref()
    }
}

/// Passive health checks: judging destinations by real request outcomes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassiveHealthCheckConfig {
    pub(crate) enabled: bool,
    pub(crate) policy: Option<String>,
    pub(crate) reactivation_period: Option<Duration>,
}

impl PassiveHealthCheckConfig {
    /// Passive checks turned on with TransportFailureRate.
    pub fn enabled() -> Self {
        PassiveHealthCheckConfig {
            enabled: true,
            ..Self::default()
        }
    }

    /// Sets the passive policy by name, or several, comma-separated
    /// (`"TransportFailureRate, OutlierDetection"`; see
    /// [`policy_names`](Self::policy_names)). Default `TransportFailureRate`.
    pub fn policy(mut self, name: impl Into<String>) -> Self {
        self.policy = Some(name.into());
        self
    }

    /// Sets how long an ejected destination stays out before it returns to Unknown. Default: the
    /// policy decides (TransportFailureRate: max(60 s, detection window)).
    pub fn reactivation_period(mut self, period: Duration) -> Self {
        self.reactivation_period = Some(period);
        self
    }

    /// Whether passive checks are on.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The policy name as given (a comma-separated list when several policies run), or the
    /// default.
    pub fn policy_name(&self) -> &str {
        self.policy.as_deref().unwrap_or(DEFAULT_PASSIVE_POLICY)
    }

    /// The passive policies to run, in order: the comma-separated names of
    /// [`policy_name`](Self::policy_name), trimmed, empty entries skipped; the default when none
    /// is left. Several policies combine (healthpick extension): every listed policy judges every
    /// outcome; the destination is passively Unhealthy as soon as one of them says so (for the
    /// longest reactivation period among those that do), Healthy when none does and one says
    /// Healthy.
    ///
    /// ```
    /// use healthpick::config::PassiveHealthCheckConfig;
    ///
    /// let passive = PassiveHealthCheckConfig::enabled().policy("TransportFailureRate, OutlierDetection");
    /// assert_eq!(passive.policy_names(), ["TransportFailureRate", "OutlierDetection"]);
    /// assert_eq!(PassiveHealthCheckConfig::enabled().policy_names(), ["TransportFailureRate"]);
    /// ```
    pub fn policy_names(&self) -> Vec<&str> {
        let names: Vec<&str> = self
            .policy_name()
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        if names.is_empty() {
            vec![DEFAULT_PASSIVE_POLICY]
        } else {
            names
        }
    }

    /// The reactivation period as given.
    pub fn reactivation_period_setting(&self) -> Option<Duration> {
        self.reactivation_period
    }
}

/// One destination (instance) of a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct DestinationConfig {
    pub(crate) id: String,
    pub(crate) address: String,
    pub(crate) health: Option<String>,
    pub(crate) host: Option<String>,
    pub(crate) metadata: Metadata,
    pub(crate) priority: u32,
}

impl DestinationConfig {
    /// A destination with an id and an absolute http(s) base address, in tier 0.
    pub fn new(id: impl Into<String>, address: impl Into<String>) -> Self {
        DestinationConfig {
            id: id.into(),
            address: address.into(),
            health: None,
            host: None,
            metadata: Metadata::new(),
            priority: 0,
        }
    }

    /// Sets a separate base URL for probes. Default: the address.
    pub fn health(mut self, url: impl Into<String>) -> Self {
        self.health = Some(url.into());
        self
    }

    /// Sets the `Host` header sent to this destination. Default: none (from the URL).
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// Sets the tier: 0 is the most preferred. Default 0.
    pub fn priority(mut self, tier: u32) -> Self {
        self.priority = tier;
        self
    }

    /// Adds a metadata entry.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key, value);
        self
    }

    /// The destination id, spelled as given.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The address as given.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The health base URL as given.
    pub fn health_setting(&self) -> Option<&str> {
        self.health.as_deref()
    }

    /// The Host header, if set.
    pub fn host_setting(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The tier (priority), 0 = most preferred.
    pub fn tier(&self) -> u32 {
        self.priority
    }

    /// The destination metadata.
    pub fn metadata_map(&self) -> &Metadata {
        &self.metadata
    }

    /// The weight load balancers give it: metadata `Weight` when it is a non-negative number,
    /// else 1.
    pub fn weight(&self) -> f64 {
        self.metadata
            .get(WEIGHT_KEY)
            .and_then(parse_weight)
            .unwrap_or(1.0)
    }
}

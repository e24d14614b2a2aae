//! The endpoint set: the simple face. A list of base URLs, some preferred, one health
//! path and interval; `pick_endpoint()` returns a healthy one from the best group.
//!
//! It is the same engine as the cluster face — one cluster named [`EndpointSet::CLUSTER`] whose
//! destinations are the base URLs (preferred ones in tier 0, the others in tier 1), probed by
//! the same probes and judged by ConsecutiveFailures.
//!
//! Instead of base URLs, the cluster can be fed by a discovery source
//! ([`EndpointSet::discovery_builder`]; with feature `dns`, [`EndpointSet::dns_builder`] for the
//! A/AAAA records of a name): [`refresh`](EndpointSet::refresh) then asks the source once before
//! it probes, and the [refresh job](EndpointSet::spawn_refresh) runs the source too, refreshed by
//! the answers' TTLs, next to the probe rounds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use tokio_util::sync::DropGuard;

use crate::config::affinity::SessionAffinityConfig;
use crate::config::diagnostics::{ConfigError, Diagnostic, Severity};
use crate::config::discovery::DiscoveryConfig;
#[cfg(feature = "dns")]
use crate::config::discovery::{DnsSourceConfig, SourceConfig};
use crate::config::metadata::CONSECUTIVE_FAILURES_THRESHOLD_KEY;
use crate::config::model::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig, PassiveHealthCheckConfig,
};
use crate::config::traffic::{LoadSignalsConfig, SlowStartConfig, TierSpillConfig};
use crate::discovery::runner::{build as build_source, Built, Discovery};
use crate::discovery::source::PollSource;
use crate::engine::fast_path::PickHandle;
use crate::engine::pick::BestEndpoints;
use crate::engine::publisher::{Publisher, SourceSpec};
use crate::engine::Engine;
use crate::error::PickError;
use crate::monitor::{ActiveMonitor, Prober};

/// Builds an [`EndpointSet`].
///
/// ```
/// use healthpick::EndpointSet;
/// use std::time::Duration;
///
/// let endpoints = EndpointSet::builder(["http://10.0.0.1:8080", "http://10.0.0.2:8080", "http://10.9.0.1:8080"])
///     .preferred_base_urls(["http://10.0.0.1:8080", "http://10.0.0.2:8080"])
///     .health_check_interval(Duration::from_secs(5))
///     .build()?;
/// assert_eq!(endpoints.engine().cluster_ids(), [EndpointSet::CLUSTER]);
/// # Ok::<(), healthpick::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct EndpointSetBuilder {
    base_urls: Vec<String>,
    preferred: Vec<String>,
    /// The discovery source that feeds the set instead of base URLs.
    discovery: Option<DiscoveryConfig>,
    health_path: String,
    interval: Duration,
    timeout: Duration,
    threshold: f64,
    failure_log_level: tracing::Level,
    load_balancing_policy: String,
    max_concurrent_probes: usize,
    /// The cluster sections set as they are: passive health checks (off by default), and
    /// traffic shaping (latency and load signals, tier spill, slow start, affinity).
    sections: ClusterConfig,
}

impl EndpointSetBuilder {
    /// Base URLs that are not in `base_urls` yet are added, in tier 0. Default: none.
    pub fn preferred_base_urls<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.preferred = urls.into_iter().map(Into::into).collect();
        self
    }

    /// The health endpoint path, appended to each base URL. Default `/api/systemstatus`.
    pub fn health_path(mut self, path: impl Into<String>) -> Self {
        self.health_path = path.into();
        self
    }

    /// Time between refreshes of the background job. Default 15 s.
    pub fn health_check_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Timeout of one probe (connect, headers and body). Default 10 s.
    pub fn health_check_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Consecutive failed probes before an endpoint is unhealthy. Default 2.
    pub fn failure_threshold(mut self, threshold: f64) -> Self {
        self.threshold = threshold;
        self
    }

    /// Level at which failed probes are logged. Default `WARN`.
    pub fn failure_log_level(mut self, level: tracing::Level) -> Self {
        self.failure_log_level = level;
        self
    }

    /// Load-balancing policy inside the best group. Default `Random`, not the engine's
    /// `PowerOfTwoChoices`: the set is made for callers who pick a URL and call it with their own
    /// client, often dropping the pick right away; PowerOfTwoChoices (and LeastRequests) choose by
    /// the requests a pick keeps in flight, which such callers never show, so they would be
    /// random with extra work. Callers who keep each pick for the whole request (the wrapped
    /// client does) can choose `PowerOfTwoChoices`; any policy of the engine works.
    pub fn load_balancing_policy(mut self, name: impl Into<String>) -> Self {
        self.load_balancing_policy = name.into();
        self
    }

    /// Bound on probes in flight during a refresh. Default 64.
    pub fn max_concurrent_probes(mut self, n: usize) -> Self {
        self.max_concurrent_probes = n;
        self
    }

    /// Turns on passive health checks: the outcomes the set's picks report
    /// ([`PickHandle::report`], or the wrapped client's own reports through
    /// [`HealthAwareClient::for_endpoint_set`](crate::HealthAwareClient::for_endpoint_set)) are
    /// judged by `passive`'s policy (TransportFailureRate unless it names another), an endpoint
    /// failing too many requests is left until its reactivation period ends. Default: off
    /// (health from probes only).
    ///
    /// ```
    /// use healthpick::config::PassiveHealthCheckConfig;
    /// use healthpick::EndpointSet;
    /// use std::time::Duration;
    ///
    /// let endpoints = EndpointSet::builder(["http://10.0.0.1:8080", "http://10.0.0.2:8080"])
    ///     .passive_health_checks(
    ///         PassiveHealthCheckConfig::enabled().reactivation_period(Duration::from_secs(30)),
    ///     )
    ///     .build()?;
    /// # drop(endpoints);
    /// # Ok::<(), healthpick::ConfigError>(())
    /// ```
    pub fn passive_health_checks(mut self, passive: PassiveHealthCheckConfig) -> Self {
        self.sections = self.sections.passive(passive);
        self
    }

    /// Lets the preferred URLs spill into the others under load instead of only when none is
    /// available ([`SpillMode::Load`](crate::config::SpillMode::Load)); see
    /// [tiers](crate::guide::tiers). Spill judges the preferred tier by the latency of the
    /// requests its picks report, so report each outcome (or call through the wrapped client).
    /// Default: strict.
    ///
    /// ```
    /// use healthpick::config::{SlowStartConfig, SpillMode, TierSpillConfig};
    /// use healthpick::EndpointSet;
    /// use std::time::Duration;
    ///
    /// let endpoints = EndpointSet::builder(["http://10.0.0.1:8080", "http://10.9.0.1:8080"])
    ///     .preferred_base_urls(["http://10.0.0.1:8080"])
    ///     .load_balancing_policy("PeakEwma")
    ///     .tier_spill(TierSpillConfig::default().mode(SpillMode::Load))
    ///     .slow_start(SlowStartConfig::new(Duration::from_secs(30)))
    ///     .build()?;
    /// # drop(endpoints);
    /// # Ok::<(), healthpick::ConfigError>(())
    /// ```
    pub fn tier_spill(mut self, spill: TierSpillConfig) -> Self {
        self.sections = self.sections.tier_spill(spill);
        self
    }

    /// Warms up endpoints that become available (new, or back from a failure) over a window.
    /// Default: off.
    pub fn slow_start(mut self, slow_start: SlowStartConfig) -> Self {
        self.sections = self.sections.slow_start(slow_start);
        self
    }

    /// How latency estimates and reported load are kept (for `PeakEwma` and tier spill).
    /// Default: 10 s decay, 30 ms before the first sample, reports read.
    pub fn load_signals(mut self, signals: LoadSignalsConfig) -> Self {
        self.sections = self.sections.load_signals(signals);
        self
    }

    /// Sends requests with the same affinity key to the same endpoint
    /// ([`EndpointSet::pick_endpoint_for_key`], or the key the wrapped client reads from each
    /// request). Default: off.
    pub fn session_affinity(mut self, affinity: SessionAffinityConfig) -> Self {
        self.sections = self.sections.session_affinity(affinity);
        self
    }

    /// Builds the set.
    ///
    /// # Errors
    /// No base URL, a base URL that is not an absolute http(s) URL, a bad health path or a
    /// zero interval or timeout — every problem at once.
    pub fn build(self) -> Result<EndpointSet, ConfigError> {
        if let Some(source) = self.discovery.clone() {
            return self.build_discovered(source);
        }
        let mut urls = self.base_urls.clone();
        for p in &self.preferred {
            if !urls.contains(p) {
                urls.push(p.clone());
            }
        }
        let mut cluster = self.cluster();
        for url in &urls {
            let tier = if self.preferred.is_empty() || self.preferred.contains(url) {
                0
            } else {
                1
            };
            cluster = cluster
                .destination(DestinationConfig::new(url.clone(), url.clone()).priority(tier));
        }
        if urls.is_empty() {
            return Err(one_error(
                "base_urls",
                "an endpoint set needs at least one base URL",
            ));
        }
        let engine = Engine::new(Config::new().cluster(cluster)).map_err(in_builder_terms)?;
        Ok(self.finish(engine, None))
    }

    /// The cluster of either kind of set: its balancer, threshold and active checks.
    fn cluster(&self) -> ClusterConfig {
        self.sections
            .clone()
            .load_balancing_policy(self.load_balancing_policy.clone())
            .metadata(
                CONSECUTIVE_FAILURES_THRESHOLD_KEY,
                self.threshold.to_string(),
            )
            .active(
                ActiveHealthCheckConfig::enabled()
                    .interval(self.interval)
                    .timeout(self.timeout)
                    .path(self.health_path.clone()),
            )
    }

    /// A set fed by `source`: the source is built now (so a bad one fails here) and registered,
    /// so a pick before its first answer says `DiscoveryPending`.
    fn build_discovered(self, source: DiscoveryConfig) -> Result<EndpointSet, ConfigError> {
        if !self.preferred.is_empty() {
            return Err(one_error(
                "preferred_base_urls",
                "an endpoint set fed by discovery has no base URLs to prefer (SRV priorities or LocalityTiers give discovered endpoints their tiers)",
            ));
        }
        let cluster = self.cluster().discovery(source.clone());
        let engine =
            Engine::new(Config::new().cluster(cluster.clone())).map_err(in_builder_terms)?;
        // A polling source is also asked by `refresh`; a watching one runs in the refresh job.
        let poll =
            match build_source(&cluster, &source).map_err(|why| one_error("discovery", &why))? {
                Built::Poll(poll) => Some(poll),
                Built::Watch(_) => None,
            };
        let publisher = engine
            .publisher(EndpointSet::CLUSTER, SourceSpec::from_config(&source))
            .map_err(|e| one_error("discovery", &e.to_string()))?;
        Ok(self.finish(engine, Some(SetSource { poll, publisher })))
    }

    fn finish(&self, engine: Engine, source: Option<SetSource>) -> EndpointSet {
        EndpointSet {
            inner: Arc::new(Inner {
                engine,
                prober: Arc::new(Prober::new(
                    self.max_concurrent_probes,
                    self.failure_log_level,
                )),
                source,
                pick_refresh: AtomicBool::new(false),
            }),
        }
    }
}

/// The engine's configuration errors of the set's one cluster, with each path said as the
/// builder method that set it (`health_check_interval`, `base_urls[..]`) instead of the YARP key
/// path the user never wrote (`Clusters:endpoints:HealthCheck:Active:Interval`).
fn in_builder_terms(mut error: ConfigError) -> ConfigError {
    for diagnostic in error.errors.iter_mut().chain(error.warnings.iter_mut()) {
        diagnostic.path = builder_path(&diagnostic.path);
    }
    error
}

/// The builder's name for a key path of the set's cluster.
fn builder_path(path: &str) -> String {
    let prefix = format!("Clusters:{}:", EndpointSet::CLUSTER);
    let Some(key) = path.strip_prefix(&prefix) else {
        return path.to_string();
    };
    let named = |k: &str| key.eq_ignore_ascii_case(k);
    if named("HealthCheck:Active:Interval") {
        return "health_check_interval".into();
    }
    if named("HealthCheck:Active:Timeout") {
        return "health_check_timeout".into();
    }
    if named("HealthCheck:Active:Path") {
        return "health_path".into();
    }
    if named("LoadBalancingPolicy") {
        return "load_balancing_policy".into();
    }
    for (section, method) in [
        ("TierSpill", "tier_spill"),
        ("SlowStart", "slow_start"),
        ("LoadSignals", "load_signals"),
        ("SessionAffinity", "session_affinity"),
    ] {
        let within = key.len() > section.len()
            && key[..section.len()].eq_ignore_ascii_case(section)
            && key.as_bytes()[section.len()] == b':';
        if within {
            return format!("{method} ({})", &key[section.len() + 1..]);
        }
    }
    if key.len() > "Metadata:".len() && key[.."Metadata:".len()].eq_ignore_ascii_case("Metadata:") {
        return "failure_threshold".into();
    }
    if key.len() > "HealthCheck:Passive".len()
        && key[.."HealthCheck:Passive".len()].eq_ignore_ascii_case("HealthCheck:Passive")
    {
        return format!("passive_health_checks ({})", &key["HealthCheck:".len()..]);
    }
    if let Some(rest) = key.strip_prefix("Destinations:") {
        // `Destinations:<url>:Address`: the id is the URL itself.
        let url = rest.rsplit_once(':').map_or(rest, |(url, _)| url);
        return format!("base_urls[{url}]");
    }
    key.to_string()
}

/// A configuration error at `path`.
fn one_error(path: &str, message: &str) -> ConfigError {
    ConfigError {
        errors: vec![Diagnostic {
            severity: Severity::Error,
            path: path.into(),
            message: message.into(),
        }],
        warnings: Vec::new(),
    }
}

/// A set of interchangeable base URLs with health checks: the ten-line way to "call one of these
/// URLs, but a healthy one".
///
/// Cheap to clone; clones share state.
#[derive(Debug, Clone)]
pub struct EndpointSet {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    engine: Engine,
    /// Shared by `refresh` and the refresh job: one bound, one connection pool.
    prober: Arc<Prober>,
    /// The discovery source of a set fed by one.
    source: Option<SetSource>,
    /// Whether a refresh started by a pick is running: concurrent first picks share it.
    pick_refresh: AtomicBool,
}

/// The discovery source of a set and the handle it publishes through.
struct SetSource {
    /// A polling source (`refresh` asks it); `None` for a watching one.
    poll: Option<Arc<dyn PollSource>>,
    publisher: Publisher,
}

impl std::fmt::Debug for SetSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetSource")
            .field("source", &self.publisher.source())
            .finish_non_exhaustive()
    }
}

impl EndpointSet {
    /// The id of the one cluster an endpoint set runs.
    pub const CLUSTER: &'static str = "endpoints";

    /// A builder over `base_urls`. With no preferred URLs all are tier 0; otherwise the
    /// preferred ones are tier 0 and the rest tier 1.
    pub fn builder<I, S>(base_urls: I) -> EndpointSetBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        EndpointSetBuilder {
            base_urls: base_urls.into_iter().map(Into::into).collect(),
            preferred: Vec::new(),
            discovery: None,
            health_path: "/api/systemstatus".into(),
            interval: Duration::from_secs(15),
            timeout: Duration::from_secs(10),
            threshold: 2.0,
            failure_log_level: tracing::Level::WARN,
            load_balancing_policy: "Random".into(),
            max_concurrent_probes: 64,
            sections: ClusterConfig::new(EndpointSet::CLUSTER),
        }
    }

    /// A builder whose endpoints come from a discovery source instead of base URLs (its settings,
    /// refresh bounds and update guard as configured in `source`); the other settings are those
    /// of [`builder`](Self::builder). [`refresh`](Self::refresh) asks the source once and then
    /// probes; the [refresh job](Self::spawn_refresh) runs the source as well.
    ///
    /// ```
    /// # #[cfg(feature = "dns")] {
    /// use healthpick::config::{DiscoveryConfig, DnsSourceConfig, RefreshBounds, SourceConfig};
    /// use healthpick::EndpointSet;
    /// use std::time::Duration;
    ///
    /// let source = DnsSourceConfig::srv("_http._tcp.payments.service.test")
    ///     .servers(vec!["127.0.0.1:5353".parse().unwrap()]);
    /// let endpoints = EndpointSet::discovery_builder(
    ///     DiscoveryConfig::new(SourceConfig::Dns(source))
    ///         .refresh(RefreshBounds::new(Duration::from_secs(1), Duration::from_secs(60))),
    /// )
    /// .health_path("/health")
    /// .build()?;
    /// // Nothing is known before the source answers:
    /// assert!(endpoints.engine().pick_endpoint(EndpointSet::CLUSTER).unwrap_err().is_discovery_pending());
    /// # }
    /// # Ok::<(), healthpick::ConfigError>(())
    /// ```
    pub fn discovery_builder(source: DiscoveryConfig) -> EndpointSetBuilder {
        let mut builder = Self::builder(Vec::<String>::new());
        builder.discovery = Some(source);
        builder
    }

    /// A builder whose endpoints are the A/AAAA records of `name` on `port` (plain HTTP, the
    /// system's name servers, the default refresh bounds and update guard): one endpoint per
    /// address, `Host` the name. For SRV records, other servers or other bounds, use
    /// [`discovery_builder`](Self::discovery_builder).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use healthpick::EndpointSet;
    ///
    /// let endpoints = EndpointSet::dns_builder("payments.internal", 8080).build()?;
    /// let _job = endpoints.spawn_refresh(); // DNS refreshed by TTL, probes every 15 s
    /// let pick = endpoints.pick_endpoint().await?; // resolves and probes first if needed
    /// # drop(pick); Ok(()) }
    /// ```
    #[cfg(feature = "dns")]
    #[cfg_attr(docsrs, doc(cfg(feature = "dns")))]
    pub fn dns_builder(name: impl Into<String>, port: u16) -> EndpointSetBuilder {
        Self::discovery_builder(DiscoveryConfig::new(SourceConfig::Dns(
            DnsSourceConfig::address(name, port),
        )))
    }

    /// The engine behind the set, for the wrapped client, status and events.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Probes every base URL now (but one whose probe is in flight already) and updates health,
    /// each result as soon as it arrives; resolves once every probe finished. A failed probe
    /// counts toward the threshold and its reason is kept as the endpoint's last error.
    ///
    /// A set fed by a polling discovery source first asks it once and publishes the answer (a
    /// failure keeps the last set, as in the refresh job), then probes what it has.
    pub async fn refresh(&self) {
        if let Some((source, poll)) = self
            .inner
            .source
            .as_ref()
            .and_then(|s| s.poll.as_ref().map(|p| (s, p)))
        {
            let published = match poll.resolve().await {
                Ok(answer) => match answer.endpoints {
                    Some(endpoints) => source.publisher.publish(endpoints),
                    None => source.publisher.not_found(),
                },
                Err(error) => source.publisher.failed(&error),
            };
            if let Err(e) = published {
                tracing::debug!(target: "healthpick", "endpoint set: answer not published: {e}");
            }
        }
        let _ = self
            .inner
            .prober
            .probe_now(&self.inner.engine, Self::CLUSTER)
            .await;
    }

    /// The best group and its summary status (Healthy, Degraded or Unhealthy).
    ///
    /// # Errors
    /// [`PickError::NoAvailableDestinations`] cannot happen with the default policies (the set
    /// panics to all endpoints instead) but is kept for custom ones.
    pub fn best_endpoints(&self) -> Result<BestEndpoints, PickError> {
        self.inner.engine.best_endpoints(Self::CLUSTER)
    }

    /// A healthy endpoint from the best group. Before anything is known it probes every
    /// endpoint and waits, as [`Engine::pick_endpoint_ready`] does, until a preferred endpoint
    /// answered (or, when none can, one of the others), at most the health-check timeout: an
    /// endpoint that hangs holds back neither this pick nor the others' results. Picks that
    /// come while that first refresh runs wait for it instead of starting their own: fifty
    /// concurrent first picks probe each endpoint once.
    ///
    /// # Errors
    /// As [`Engine::pick_endpoint`].
    pub async fn pick_endpoint(&self) -> Result<PickHandle, PickError> {
        self.pick_ready(None).await
    }

    /// [`pick_endpoint`](Self::pick_endpoint) for a request that carries an affinity key: with
    /// [`session_affinity`](EndpointSetBuilder::session_affinity) on, the same key goes to the
    /// same endpoint while it is available and not loaded beyond its bound.
    ///
    /// # Errors
    /// As [`Engine::pick_endpoint_for_key`].
    pub async fn pick_endpoint_for_key(
        &self,
        key: impl AsRef<[u8]>,
    ) -> Result<PickHandle, PickError> {
        self.pick_ready(Some(key.as_ref())).await
    }

    async fn pick_ready(&self, key: Option<&[u8]>) -> Result<PickHandle, PickError> {
        let engine = &self.inner.engine;
        if let Some(pick) = engine.pick_endpoint_if_ready(Self::CLUSTER, key) {
            return pick;
        }
        if !engine.first_round_done(Self::CLUSTER)
            && self
                .inner
                .pick_refresh
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // In the background, so that the probes of endpoints that hang finish (and count)
            // after this pick has stopped waiting. One at a time: the picks that come while it
            // runs wait for the same round instead of starting their own (single flight).
            let running = PickRefresh(self.clone());
            // A refresh that ended between the check above and taking the flag has done the
            // round: looked at again now that no other can start.
            if !engine.first_round_done(Self::CLUSTER) {
                tokio::spawn(async move { running.0.refresh().await });
            }
        }
        engine.wait_for_warm_up(Self::CLUSTER, Duration::MAX).await;
        match key {
            Some(key) => engine.pick_endpoint_for_key(Self::CLUSTER, key),
            None => engine.pick_endpoint(Self::CLUSTER),
        }
    }

    /// Starts the background refresh job: a refresh every interval until the returned handle is
    /// dropped. It survives probe errors (they are logged) and stops cleanly. For a set fed by
    /// discovery it also runs the source: asked again when its answer's TTL runs out (within its
    /// refresh bounds), its last set kept while it fails.
    pub fn spawn_refresh(&self) -> RefreshJob {
        self.spawn_refresh_with(CancellationToken::new())
    }

    /// [`spawn_refresh`](Self::spawn_refresh) stopping also when `cancel` fires.
    pub fn spawn_refresh_with(&self, cancel: CancellationToken) -> RefreshJob {
        // The discovery source stops with the job: when `cancel` fires or the job is dropped.
        let discovery = self.inner.source.as_ref().map(|_| {
            let stop = cancel.child_token();
            let discovery = Discovery::start(&self.inner.engine);
            let stopped = stop.clone();
            let task = tokio::spawn(async move {
                stopped.cancelled().await;
                discovery.stop().await;
            });
            (stop.drop_guard(), task)
        });
        // The job is the active monitor of the set's one cluster, with the set's prober.
        RefreshJob {
            monitor: ActiveMonitor::builder()
                .prober(self.inner.prober.clone())
                .cancellation_token(cancel)
                .start(&self.inner.engine),
            discovery,
        }
    }
}

/// A refresh started by a pick: the next pick may start another once it ended, however it ended
/// (its task finished, or was dropped with the runtime).
struct PickRefresh(EndpointSet);

impl Drop for PickRefresh {
    fn drop(&mut self) {
        self.0.inner.pick_refresh.store(false, Ordering::Release);
    }
}

/// The background refresh job of an [`EndpointSet`] (its cluster's active monitor); dropping it
/// stops the job.
#[derive(Debug)]
#[must_use = "the refresh job stops when this handle is dropped"]
pub struct RefreshJob {
    monitor: ActiveMonitor,
    /// The discovery source of a set fed by one: stopped when the guard drops.
    discovery: Option<(DropGuard, tokio::task::JoinHandle<()>)>,
}

impl RefreshJob {
    /// Stops the job and waits until it has ended.
    pub async fn stop(self) {
        self.monitor.stop().await;
        if let Some((guard, task)) = self.discovery {
            drop(guard);
            let _ = task.await;
        }
        tracing::debug!(target: "healthpick", "endpoint set refresh job stopped");
    }
}

//! The active health-check monitor (SPEC §3 scheduling): when to probe.
//!
//! - At start, one round for every cluster with active checks, all concurrently. After a
//!   cluster's round finished, its next round starts `Interval` later; rounds of one cluster never
//!   overlap and missed rounds are not caught up.
//! - A cluster added by a reload is probed at once (YARP waits a full interval). A reload that
//!   keeps a cluster's interval does not restart its countdown; a new interval counts from the end
//!   of the last round. A removed cluster (or one whose active checks were turned off) is no
//!   longer probed; a round in flight finishes and its results for removed destinations are
//!   dropped.
//! - All destinations of a round are probed concurrently, under one global bound on probes in
//!   flight, through one shared connection pool. The round's results reach the cluster's active
//!   policy once, after every probe finished or timed out.
//!
//! The monitor stops when its handle is dropped or its cancellation token fires.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::engine::{Engine, ProbeTargets};
use crate::health::probe_result::ProbeResult;
use crate::ids::fold_case;
use crate::probe::{self, DefaultProbeRequestFactory, ProbeRequestFactory};
use crate::rng::RandomSource;

/// Configures and starts an [`ActiveMonitor`].
///
/// ```no_run
/// # async fn run(engine: healthpick::Engine) {
/// use healthpick::monitor::ActiveMonitor;
///
/// let monitor = ActiveMonitor::builder().max_concurrent_probes(128).start(&engine);
/// engine.ready().await; // every cluster probed once
/// // ... serve traffic; dropping `monitor` stops probing.
/// # drop(monitor);
/// # }
/// ```
pub struct ActiveMonitorBuilder {
    max_concurrent_probes: usize,
    jitter: Duration,
    factory: Arc<dyn ProbeRequestFactory>,
    cancel: Option<CancellationToken>,
    failure_log_level: Option<tracing::Level>,
    prober: Option<Arc<Prober>>,
}

impl std::fmt::Debug for ActiveMonitorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActiveMonitorBuilder")
            .field("max_concurrent_probes", &self.max_concurrent_probes)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}

impl Default for ActiveMonitorBuilder {
    fn default() -> Self {
        ActiveMonitorBuilder {
            max_concurrent_probes: 64,
            jitter: Duration::ZERO,
            factory: Arc::new(DefaultProbeRequestFactory),
            cancel: None,
            failure_log_level: None,
            prober: None,
        }
    }
}

impl ActiveMonitorBuilder {
    /// Bound on probes in flight across all clusters. Default 64.
    pub fn max_concurrent_probes(mut self, n: usize) -> Self {
        self.max_concurrent_probes = n.max(1);
        self
    }

    /// Adds a random delay in `0..jitter` to every wait between rounds, so that clusters (and
    /// processes) started together do not probe in lockstep. Default: none.
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }

    /// Replaces the probe-request factory. Default: [`DefaultProbeRequestFactory`].
    pub fn probe_request_factory(mut self, factory: impl ProbeRequestFactory) -> Self {
        self.factory = Arc::new(factory);
        self
    }

    /// Stops the monitor when `token` is cancelled (as well as when the handle is dropped).
    pub fn cancellation_token(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Logs every failed probe at `level` (target `healthpick`). Default: failed probes are not
    /// logged one by one; the health changes they cause are.
    pub fn failure_log_level(mut self, level: tracing::Level) -> Self {
        self.failure_log_level = Some(level);
        self
    }

    /// Probes through `prober` (its bound and clients) instead of a new one: the endpoint set
    /// shares its own with its refresh job.
    pub(crate) fn prober(mut self, prober: Arc<Prober>) -> Self {
        self.prober = Some(prober);
        self
    }

    /// Starts probing `engine`'s clusters on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime, as `tokio::spawn` does.
    pub fn start(self, engine: &Engine) -> ActiveMonitor {
        let cancel = self.cancel.unwrap_or_default().child_token();
        let prober = self.prober.unwrap_or_else(|| {
            Arc::new(Prober {
                semaphore: Arc::new(Semaphore::new(self.max_concurrent_probes)),
                client: probe::probe_client(false),
                insecure_client: std::sync::OnceLock::new(),
                factory: self.factory,
                failure_log_level: self.failure_log_level,
            })
        });
        let shared = Arc::new(Shared {
            prober,
            jitter: self.jitter,
            rng: RandomSource::PerThread,
        });
        let task = tokio::spawn(supervise(engine.clone(), shared, cancel.clone()));
        ActiveMonitor {
            cancel,
            task: Some(task),
        }
    }
}

/// A running active monitor. Dropping it stops all probing; [`stop`](Self::stop) also waits
/// until every task has ended.
#[derive(Debug)]
pub struct ActiveMonitor {
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl ActiveMonitor {
    /// A builder with the defaults (64 probes in flight, no jitter, the default probe).
    pub fn builder() -> ActiveMonitorBuilder {
        ActiveMonitorBuilder::default()
    }

    /// Starts a monitor with the defaults.
    pub fn start(engine: &Engine) -> ActiveMonitor {
        Self::builder().start(engine)
    }

    /// Stops probing and waits until every probe task has ended.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ActiveMonitor {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// What sends probes: the bound, the shared clients, the request factory.
pub(crate) struct Prober {
    semaphore: Arc<Semaphore>,
    client: reqwest::Client,
    /// Built on first use: only clusters with `DangerousAcceptAnyServerCertificate` need it.
    insecure_client: std::sync::OnceLock<reqwest::Client>,
    factory: Arc<dyn ProbeRequestFactory>,
    /// The level failed probes are logged at, if they are logged one by one.
    failure_log_level: Option<tracing::Level>,
}

impl std::fmt::Debug for Prober {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prober")
            .field("available_permits", &self.semaphore.available_permits())
            .finish_non_exhaustive()
    }
}

impl Prober {
    /// A prober with its own bound and clients (for the endpoint set).
    pub fn new(max_concurrent: usize, failure_log_level: tracing::Level) -> Self {
        Prober {
            semaphore: Arc::new(Semaphore::new(max_concurrent.max(1))),
            client: probe::probe_client(false),
            insecure_client: std::sync::OnceLock::new(),
            factory: Arc::new(DefaultProbeRequestFactory),
            failure_log_level: Some(failure_log_level),
        }
    }

    /// One round of `cluster` now: probes every destination, reports the results to the engine
    /// and returns the cluster's probing settings; `None` when the cluster is gone or has active
    /// checks disabled.
    pub async fn probe_now(&self, engine: &Engine, cluster: &str) -> Option<ProbeTargets> {
        let targets = engine.probe_targets(cluster)?;
        let results = self.round(&targets).await;
        if let Some(level) = self.failure_log_level {
            for failed in results.iter().filter(|r| !r.is_success()) {
                log_failure(level, cluster, &failed.destination, &failed.describe());
            }
        }
        let _ = engine.report_probe_round(cluster, &results);
        Some(targets)
    }

    /// Probes every destination of `targets` concurrently (within the bound) and returns all
    /// results once every probe finished or timed out.
    async fn round(&self, targets: &ProbeTargets) -> Vec<ProbeResult> {
        let config = &targets.cluster;
        let timeout = targets.probing.timeout;
        let client = if config.dangerous_accept_any_server_certificate() {
            self.insecure_client
                .get_or_init(|| probe::probe_client(true))
        } else {
            &self.client
        };
        let mut probes = JoinSet::new();
        for destination in &targets.destinations {
            let request = self.factory.create(config, destination);
            let (client, semaphore, id) = (
                client.clone(),
                self.semaphore.clone(),
                destination.info().id.clone(),
            );
            probes.spawn(async move {
                // The timeout starts once the probe may go: waiting for the bound is not the
                // destination's fault.
                let _permit = semaphore.acquire_owned().await;
                probe::send(&client, id, request, timeout).await
            });
        }
        let mut results = Vec::with_capacity(targets.destinations.len());
        while let Some(joined) = probes.join_next().await {
            if let Ok(result) = joined {
                results.push(result);
            }
        }
        results
    }
}

struct Shared {
    prober: Arc<Prober>,
    jitter: Duration,
    rng: RandomSource,
}

/// Keeps one task per cluster with active checks, following configuration changes.
async fn supervise(engine: Engine, shared: Arc<Shared>, cancel: CancellationToken) {
    let mut changes = engine.config_changes();
    let mut clusters: HashMap<String, CancellationToken> = HashMap::new();
    let mut tasks = JoinSet::new();
    loop {
        let wanted = engine.active_cluster_ids();
        let wanted_keys: Vec<String> = wanted.iter().map(|id| fold_case(id)).collect();
        clusters.retain(|key, token| {
            let keep = wanted_keys.contains(key) && !token.is_cancelled();
            if !keep {
                token.cancel();
            }
            keep
        });
        for (id, key) in wanted.into_iter().zip(wanted_keys) {
            if let std::collections::hash_map::Entry::Vacant(slot) = clusters.entry(key) {
                let token = slot.insert(cancel.child_token()).clone();
                tasks.spawn(probe_cluster(engine.clone(), id, shared.clone(), token));
            }
        }
        while tasks.try_join_next().is_some() {}
        tokio::select! {
            () = cancel.cancelled() => break,
            changed = changes.changed() => if changed.is_err() { break },
        }
    }
    // Dropping the set aborts what is still running.
    tasks.shutdown().await;
}

/// Probes one cluster round after round until it is removed, disabled or the monitor stops.
async fn probe_cluster(
    engine: Engine,
    cluster: String,
    shared: Arc<Shared>,
    token: CancellationToken,
) {
    // A task that ends by itself (cluster removed or disabled) marks its token, so the
    // supervisor starts a fresh one if the cluster comes back.
    let _ended = token.clone().drop_guard();
    let mut changes = engine.config_changes();
    loop {
        let probed = tokio::select! {
            () = token.cancelled() => return,
            probed = shared.prober.probe_now(&engine, &cluster) => probed,
        };
        if probed.is_none() {
            return;
        }
        let finished = tokio::time::Instant::now();
        let jitter = if shared.jitter.is_zero() {
            Duration::ZERO
        } else {
            let nanos = u64::try_from(shared.jitter.as_nanos()).unwrap_or(u64::MAX);
            Duration::from_nanos(
                shared
                    .rng
                    .index(usize::try_from(nanos).unwrap_or(usize::MAX)) as u64,
            )
        };
        changes.mark_unchanged();
        // Wait `Interval` from the end of the round; a reload with a new interval re-reads it
        // without restarting the countdown.
        loop {
            let Some(targets) = engine.probe_targets(&cluster) else {
                return;
            };
            let due = finished + targets.probing.interval + jitter;
            tokio::select! {
                () = token.cancelled() => return,
                () = tokio::time::sleep_until(due) => break,
                changed = changes.changed() => if changed.is_err() { return },
            }
        }
    }
}

fn log_failure(level: tracing::Level, cluster: &str, destination: &str, what: &str) {
    match level {
        tracing::Level::ERROR => {
            tracing::error!(target: "healthpick", cluster, destination, "health probe failed: {what}")
        }
        tracing::Level::WARN => {
            tracing::warn!(target: "healthpick", cluster, destination, "health probe failed: {what}")
        }
        tracing::Level::INFO => {
            tracing::info!(target: "healthpick", cluster, destination, "health probe failed: {what}")
        }
        tracing::Level::DEBUG => {
            tracing::debug!(target: "healthpick", cluster, destination, "health probe failed: {what}")
        }
        tracing::Level::TRACE => {
            tracing::trace!(target: "healthpick", cluster, destination, "health probe failed: {what}")
        }
    }
}

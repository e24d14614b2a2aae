//! The active health-check monitor: when to probe.
//!
//! - Every destination has its own schedule: it is probed at once when its cluster (or the
//!   destination itself) appears, then `Interval` after its previous probe finished; missed
//!   probes are not caught up. Its result is applied as soon as it arrives (results that
//!   arrive within 2 ms of each other are applied together), and a destination whose probe is
//!   still outstanding is not probed again, so a probe that hangs delays only its own
//!   destination: the others' verdicts and schedules go on (no head-of-line blocking). An active
//!   policy that asks for whole rounds ([`ProbeDelivery::WholeRounds`]) gets YARP's schedule
//!   instead: all destinations at once, the round's results together once every probe finished
//!   or timed out, the next round `Interval` after that.
//! - A cluster added by a reload is probed at once (YARP waits a full interval). A reload that
//!   keeps a cluster's interval does not restart any countdown; a new interval counts from the
//!   end of each destination's last probe. A removed cluster (or one whose active checks were
//!   turned off) is no longer probed; probes in flight are cancelled.
//! - Every probe runs under one global bound on probes in flight, through one shared connection
//!   pool. No destination is ever probed twice at once, also not by an endpoint set's `refresh`
//!   racing with its refresh job.
//!
//! The monitor stops when its handle is dropped or its cancellation token fires.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::model::ClusterConfig;
use crate::destination::{Destination, ProbeInFlight};
use crate::engine::{Engine, ProbeTargets};
use crate::health::probe_result::ProbeResult;
use crate::ids::fold_case;
#[cfg(doc)]
use crate::policy::active::ProbeDelivery;
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
#[must_use = "a builder does nothing until started"]
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

    /// Adds a random delay in `0..jitter` to every wait between two probes of a destination
    /// (between rounds, for a policy that asks for whole rounds), so that destinations, clusters
    /// and processes started together do not probe in lockstep. Default: none.
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
#[must_use = "probing stops when the monitor is dropped: keep it (`let _monitor = ...`)"]
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

    /// Probes every destination of `cluster` now (but those with a probe in flight already),
    /// concurrently within the bound, and reports the results to the engine: each as it arrives,
    /// or all together for a policy that asks for whole rounds. Resolves when every probe
    /// finished and returns the cluster's probing settings; `None` when the cluster is gone or has
    /// active checks disabled.
    pub async fn probe_now(&self, engine: &Engine, cluster: &str) -> Option<ProbeTargets> {
        let span = tracing::debug_span!(
            target: "healthpick",
            "healthpick.probe_round",
            healthpick.cluster = cluster,
            healthpick.destinations = tracing::field::Empty,
        );
        self.probe_round(engine, cluster, &span)
            .instrument(span.clone())
            .await
    }

    async fn probe_round(
        &self,
        engine: &Engine,
        cluster: &str,
        span: &tracing::Span,
    ) -> Option<ProbeTargets> {
        let targets = engine.probe_targets(cluster)?;
        span.record("healthpick.destinations", targets.destinations.len());
        let mut probes = JoinSet::new();
        for destination in &targets.destinations {
            if let Some(probe) = self.probe(&targets.cluster, destination, targets.probing.timeout)
            {
                let destination = destination.clone();
                probes.spawn(async move { (destination, probe.await) });
            }
        }
        if targets.whole_rounds {
            let mut round = Vec::with_capacity(probes.len());
            while let Some(joined) = probes.join_next().await {
                round.extend(joined.ok());
            }
            self.log_failures(cluster, &round);
            engine.report_probed(cluster, &round, true);
            return Some(targets);
        }
        if probes.is_empty() {
            // Nothing to probe (no destination, or all in flight elsewhere): the engine still
            // learns that this cluster's prober ran.
            engine.report_probed(cluster, &[], false);
        }
        while let Some(joined) = probes.join_next().await {
            let mut batch: Vec<_> = joined.ok().into_iter().collect();
            gather(&mut probes, &mut batch, |done| done.ok()).await;
            self.log_failures(cluster, &batch);
            engine.report_probed(cluster, &batch, false);
        }
        Some(targets)
    }

    /// One probe of `destination`; `None` when a probe of it is in flight already. The
    /// destination counts as probed from now until the returned future ends or is dropped.
    fn probe(
        &self,
        config: &ClusterConfig,
        destination: &Arc<Destination>,
        timeout: Duration,
    ) -> Option<impl Future<Output = ProbeResult> + Send + 'static> {
        let in_flight = ProbeInFlight::start(destination)?;
        let client = if config.dangerous_accept_any_server_certificate() {
            self.insecure_client
                .get_or_init(|| probe::probe_client(true))
        } else {
            &self.client
        }
        .clone();
        let request = self.factory.create(config, destination);
        let semaphore = self.semaphore.clone();
        let id = destination.info().id.clone();
        // A child of the round's span when there is one (the probes of a round run in tasks of
        // their own).
        let span = tracing::debug_span!(
            target: "healthpick",
            "healthpick.probe",
            healthpick.cluster = destination.cluster_id(),
            healthpick.destination = &*id,
            server.address = destination.address().host_str().unwrap_or_default(),
            server.port = destination.address().port_or_known_default(),
            healthpick.probe_result = tracing::field::Empty,
        );
        Some(
            async move {
                let _in_flight = in_flight;
                // The timeout starts once the probe may go: waiting for the bound is not the
                // destination's fault.
                let _permit = semaphore.acquire_owned().await;
                let result = probe::send(&client, id, request, timeout).await;
                let span = tracing::Span::current();
                if !span.is_disabled() {
                    span.record(
                        "healthpick.probe_result",
                        tracing::field::display(result.describe()),
                    );
                }
                result
            }
            .instrument(span),
        )
    }

    fn log_failures(&self, cluster: &str, results: &[(Arc<Destination>, ProbeResult)]) {
        if let Some(level) = self.failure_log_level {
            for (_, failed) in results.iter().filter(|(_, r)| !r.is_success()) {
                log_failure(level, cluster, &failed.destination, &failed.describe());
            }
        }
    }
}

struct Shared {
    prober: Arc<Prober>,
    jitter: Duration,
    rng: RandomSource,
}

impl Shared {
    /// A random delay in `0..jitter`.
    fn jitter(&self) -> Duration {
        if self.jitter.is_zero() {
            return Duration::ZERO;
        }
        let nanos = u64::try_from(self.jitter.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.rng.index(usize::try_from(nanos).unwrap_or(usize::MAX)) as u64)
    }
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

/// What a cluster's probing loop does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// The cluster is gone, has active checks disabled, or the monitor stops.
    Stop,
    /// The cluster's policy asks for the other kind of delivery.
    Switch,
}

/// Probes one cluster until it is removed, disabled or the monitor stops.
async fn probe_cluster(
    engine: Engine,
    cluster: String,
    shared: Arc<Shared>,
    token: CancellationToken,
) {
    // A task that ends by itself (cluster removed or disabled) marks its token, so the
    // supervisor starts a fresh one if the cluster comes back.
    let _ended = token.clone().drop_guard();
    loop {
        let Some(targets) = engine.probe_targets(&cluster) else {
            return;
        };
        let next = if targets.whole_rounds {
            probe_rounds(&engine, &cluster, &shared, &token).await
        } else {
            probe_each(&engine, &cluster, &shared, &token, targets).await
        };
        if next == Next::Stop {
            return;
        }
    }
}

/// Whole rounds (a policy asking for [`ProbeDelivery::WholeRounds`]): one round, then the next
/// `Interval` after it finished.
async fn probe_rounds(
    engine: &Engine,
    cluster: &str,
    shared: &Shared,
    token: &CancellationToken,
) -> Next {
    loop {
        let probed = tokio::select! {
            () = token.cancelled() => return Next::Stop,
            probed = shared.prober.probe_now(engine, cluster) => probed,
        };
        let Some(targets) = probed else {
            return Next::Stop;
        };
        if !targets.whole_rounds {
            return Next::Switch;
        }
        let finished = Instant::now();
        let jitter = shared.jitter();
        // Wait `Interval` from the end of the round; a reload with a new interval re-reads it
        // without restarting the countdown.
        loop {
            let Some(mut targets) = engine.probe_targets(cluster) else {
                return Next::Stop;
            };
            if !targets.whole_rounds {
                return Next::Switch;
            }
            let due = finished + targets.probing.interval + jitter;
            tokio::select! {
                () = token.cancelled() => return Next::Stop,
                () = tokio::time::sleep_until(due) => break,
                _ = targets.changes.changed() => {}
            }
        }
    }
}

/// Each destination on its own schedule, its result applied as soon as it arrives.
async fn probe_each(
    engine: &Engine,
    cluster: &str,
    shared: &Shared,
    token: &CancellationToken,
    mut targets: ProbeTargets,
) -> Next {
    let mut schedule = Schedule::new(targets.probing.interval);
    // Probes in flight: (schedule key, result). Dropping the set cancels them.
    let mut probes: JoinSet<(usize, ProbeResult)> = JoinSet::new();
    schedule.follow(
        &targets.destinations,
        targets.probing.interval,
        Instant::now(),
    );
    if targets.destinations.is_empty() && !targets.first_round_done {
        engine.report_probed(cluster, &[], false);
    }
    loop {
        let next_due = schedule.next_due();
        tokio::select! {
            () = token.cancelled() => return Next::Stop,
            Some(joined) = probes.join_next(), if !probes.is_empty() => {
                let mut done: Vec<_> = joined.ok().into_iter().collect();
                gather(&mut probes, &mut done, |joined| joined.ok()).await;
                let now = Instant::now();
                let batch: Vec<_> = done
                    .into_iter()
                    .filter_map(|(key, result)| {
                        let destination = schedule.finished(key, now, shared.jitter())?;
                        Some((destination, result))
                    })
                    .collect();
                shared.prober.log_failures(cluster, &batch);
                engine.report_probed(cluster, &batch, false);
            }
            () = sleep_until_some(next_due), if next_due.is_some() => {
                let now = Instant::now();
                while let Some((key, destination)) = schedule.pop_due(now) {
                    match shared.prober.probe(&targets.cluster, &destination, targets.probing.timeout) {
                        Some(probe) => {
                            probes.spawn(async move { (key, probe.await) });
                        }
                        // Someone else probes it right now (an endpoint set's refresh): its
                        // result lands without us; look again an interval later.
                        None => {
                            schedule.finished(key, now, shared.jitter());
                        }
                    }
                }
            }
            _ = targets.changes.changed() => {
                let Some(now_targets) = engine.probe_targets(cluster) else {
                    return Next::Stop;
                };
                if now_targets.whole_rounds {
                    return Next::Switch;
                }
                targets = now_targets;
                schedule.follow(&targets.destinations, targets.probing.interval, Instant::now());
                if targets.destinations.is_empty() && !targets.first_round_done {
                    engine.report_probed(cluster, &[], false);
                }
            }
        }
    }
}

/// How long after one probe result the monitor keeps gathering the results that follow, so
/// that results arriving together are applied (and published) together: a round over 10,000
/// destinations then costs a few hundred publications instead of one per result.
const GATHER: Duration = Duration::from_millis(2);

/// After a first finished probe, adds to `batch` the probes that finish within [`GATHER`] (at
/// once when none is left in flight).
async fn gather<T: 'static, U>(
    probes: &mut JoinSet<T>,
    batch: &mut Vec<U>,
    keep: impl Fn(Result<T, tokio::task::JoinError>) -> Option<U>,
) {
    let until = Instant::now() + GATHER;
    while !probes.is_empty() {
        tokio::select! {
            biased;
            Some(joined) = probes.join_next() => batch.extend(keep(joined)),
            () = tokio::time::sleep_until(until) => break,
        }
    }
}

async fn sleep_until_some(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// When each destination of a cluster is due for its next probe.
struct Schedule {
    entries: HashMap<usize, Entry>,
    /// (due, entry sequence, key), earliest first; entries whose sequence moved on are stale.
    heap: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    interval: Duration,
    seq: u64,
}

struct Entry {
    destination: Arc<Destination>,
    /// When its last probe finished, or when it appeared (then it is due at once).
    since: Instant,
    probed: bool,
    jitter: Duration,
    outstanding: bool,
    seq: u64,
}

impl Schedule {
    fn new(interval: Duration) -> Self {
        Schedule {
            entries: HashMap::new(),
            heap: BinaryHeap::new(),
            interval,
            seq: 0,
        }
    }

    /// A destination's key: its address in memory, stable while anything holds it (a probe in
    /// flight holds it).
    fn key(destination: &Arc<Destination>) -> usize {
        Arc::as_ptr(destination) as usize
    }

    fn due(&self, entry: &Entry) -> Instant {
        if entry.probed {
            entry.since + self.interval + entry.jitter
        } else {
            entry.since
        }
    }

    fn push(&mut self, key: usize) {
        self.seq += 1;
        let seq = self.seq;
        if let Some(entry) = self.entries.get_mut(&key) {
            entry.seq = seq;
        }
        if let Some(entry) = self.entries.get(&key) {
            let due = self.due(entry);
            self.heap.push(Reverse((due, seq, key)));
        }
    }

    /// Follows the cluster's current members and interval: new members are due at once, gone
    /// ones are forgotten (a result still in flight for one is dropped), a new interval counts
    /// from the end of each destination's last probe.
    fn follow(&mut self, members: &[Arc<Destination>], interval: Duration, now: Instant) {
        let keys: HashSet<usize> = members.iter().map(Self::key).collect();
        self.entries.retain(|key, _| keys.contains(key));
        let rescheduled = interval != self.interval;
        self.interval = interval;
        if rescheduled {
            self.heap.clear();
            let idle: Vec<usize> = self
                .entries
                .iter()
                .filter(|(_, e)| !e.outstanding)
                .map(|(key, _)| *key)
                .collect();
            for key in idle {
                self.push(key);
            }
        }
        for destination in members {
            let key = Self::key(destination);
            if self.entries.contains_key(&key) {
                continue;
            }
            self.entries.insert(
                key,
                Entry {
                    destination: destination.clone(),
                    since: now,
                    probed: false,
                    jitter: Duration::ZERO,
                    outstanding: false,
                    seq: 0,
                },
            );
            self.push(key);
        }
        if self.heap.len() > 2 * self.entries.len() + 64 {
            // Many stale entries (members came and went): start over from the live ones.
            self.heap.clear();
            let idle: Vec<usize> = self
                .entries
                .iter()
                .filter(|(_, e)| !e.outstanding)
                .map(|(key, _)| *key)
                .collect();
            for key in idle {
                self.push(key);
            }
        }
    }

    /// When the next probe is due, if any destination waits for one.
    fn next_due(&mut self) -> Option<Instant> {
        while let Some(Reverse((due, seq, key))) = self.heap.peek().copied() {
            match self.entries.get(&key) {
                Some(entry) if entry.seq == seq && !entry.outstanding => return Some(due),
                _ => {
                    self.heap.pop();
                }
            }
        }
        None
    }

    /// The next destination due at `now`, marked outstanding.
    fn pop_due(&mut self, now: Instant) -> Option<(usize, Arc<Destination>)> {
        loop {
            let due = self.next_due()?;
            if due > now {
                return None;
            }
            let Reverse((_, _, key)) = self.heap.pop()?;
            if let Some(entry) = self.entries.get_mut(&key) {
                entry.outstanding = true;
                return Some((key, entry.destination.clone()));
            }
        }
    }

    /// A destination's probe finished at `now`: it is due again `Interval` (plus `jitter`)
    /// later. Returns it, unless it left the cluster meanwhile.
    fn finished(&mut self, key: usize, now: Instant, jitter: Duration) -> Option<Arc<Destination>> {
        let entry = self.entries.get_mut(&key)?;
        entry.outstanding = false;
        entry.since = now;
        entry.probed = true;
        entry.jitter = jitter;
        let destination = entry.destination.clone();
        self.push(key);
        Some(destination)
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

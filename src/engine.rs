//! The engine: all clusters' runtime state, config (re)loading, picks, probe rounds, timers,
//! status and events (SPEC §2, §5, §6, §10).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use tokio::sync::{broadcast, Notify};

use crate::clock::{Clock, SystemClock};
use crate::cluster::{ClusterRuntime, ClusterSettings, ClusterSnapshot};
use crate::config::{
    fold_case, validate, with_folded, Config, ConfigError, Diagnostic, Diagnostics,
    HealthPolicyOptions,
};
use crate::destination::{Destination, DestinationInfo, PickHandle};
use crate::error::PickError;
use crate::events::HealthEvent;
use crate::health::updater::{self, Reactivation};
use crate::health::{HealthClass, ProbeResult};
use crate::observer::Observer;
use crate::registry::PolicyRegistry;
use crate::rng::RandomSource;
use crate::selection::{LoadBalancingPolicy, PickContext};
use crate::status::{ClusterStatus, DestinationStatus, EngineStatus};
use crate::uri;

/// The routing engine: holds every cluster's destinations and health, answers picks from
/// immutable snapshots, and takes probe results and request outcomes.
///
/// `Engine` is cheap to clone (an `Arc` inside); clones share everything.
///
/// ```
/// use healthpick::Engine;
///
/// let engine = Engine::from_json(r#"{
///   "ReverseProxy": { "Clusters": { "payments": {
///     "LoadBalancingPolicy": "RoundRobin",
///     "Destinations": {
///       "local-1":  { "Address": "http://127.0.0.1:8001/" },
///       "remote-1": { "Address": "http://127.0.0.1:9001/", "Priority": 1 }
///     } } } } }"#)?;
/// let pick = engine.pick_endpoint("payments")?;
/// assert_eq!(pick.destination().id(), "local-1"); // tier 0 first
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Engine {
    core: Arc<EngineCore>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("clusters", &self.cluster_ids())
            .finish_non_exhaustive()
    }
}

/// Builds an [`Engine`] with custom policies, clock, random seed or options.
///
/// ```
/// use healthpick::{Engine, ManualClock};
/// use std::sync::Arc;
///
/// let clock = Arc::new(ManualClock::new());
/// let engine = Engine::builder().clock(clock.clone()).seed(7).build();
/// assert!(engine.cluster_ids().is_empty());
/// ```
pub struct EngineBuilder {
    registry: PolicyRegistry,
    clock: Option<Arc<dyn Clock>>,
    seed: Option<u64>,
    options: HealthPolicyOptions,
    strict: bool,
    event_capacity: usize,
    observer: Option<Arc<dyn Observer>>,
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("registry", &self.registry)
            .field("seed", &self.seed)
            .field("options", &self.options)
            .field("strict", &self.strict)
            .finish_non_exhaustive()
    }
}

impl Default for EngineBuilder {
    fn default() -> Self {
        EngineBuilder {
            registry: PolicyRegistry::default(),
            clock: None,
            seed: None,
            options: HealthPolicyOptions::default(),
            strict: false,
            event_capacity: 1024,
            observer: None,
        }
    }
}

impl EngineBuilder {
    /// Replaces the whole policy registry. Default: the built-in policies.
    pub fn registry(mut self, registry: PolicyRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// Registers a custom active health policy under `name` (case-insensitive).
    pub fn active_policy(
        mut self,
        name: &str,
        policy: impl crate::health::ActiveHealthPolicy,
    ) -> Self {
        self.registry.register_active(name, Arc::new(policy));
        self
    }

    /// Registers a custom passive health policy under `name`.
    pub fn passive_policy(
        mut self,
        name: &str,
        policy: impl crate::health::PassiveHealthPolicy,
    ) -> Self {
        self.registry.register_passive(name, Arc::new(policy));
        self
    }

    /// Registers a custom available-destinations policy under `name`.
    pub fn available_destinations_policy(
        mut self,
        name: &str,
        policy: impl crate::health::AvailableDestinationsPolicy,
    ) -> Self {
        self.registry
            .register_available_destinations(name, Arc::new(policy));
        self
    }

    /// Registers a custom load-balancing policy under `name`.
    pub fn load_balancing_policy(
        mut self,
        name: &str,
        policy: impl crate::selection::LoadBalancingPolicy,
    ) -> Self {
        self.registry
            .register_load_balancing(name, Arc::new(policy));
        self
    }

    /// Uses `clock` for all time. Default: [`SystemClock`], with reactivation timers driven by a
    /// tokio task. With a custom clock, call [`Engine::fire_due_timers`] after moving it.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Seeds the random source so picks are reproducible. Default: per-thread generators seeded
    /// from the OS (no shared state on the pick path; a seeded engine takes a lock per draw).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Global health-policy options used when a config does not carry a `HealthPolicies`
    /// section. Default: [`HealthPolicyOptions::default`].
    pub fn health_policy_options(mut self, options: HealthPolicyOptions) -> Self {
        self.options = options;
        self
    }

    /// Strict mode: configuration warnings are errors. Default false.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Capacity of the event channel behind [`Engine::subscribe`]. Default 1024.
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity.max(1);
        self
    }

    /// Installs an [`Observer`] that sees every probe round, request outcome, policy evaluation
    /// and change event, synchronously (the simulator and the recorder are observers).
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Builds an engine with no clusters.
    pub fn build(self) -> Engine {
        let auto_timers = self.clock.is_none();
        let clock = self.clock.unwrap_or_else(|| Arc::new(SystemClock::new()));
        let (events, _) = broadcast::channel(self.event_capacity);
        let core = Arc::new_cyclic(|me| EngineCore {
            me: me.clone(),
            clusters: ArcSwap::from_pointee(ClusterTable::default()),
            registry: self.registry,
            options: self.options,
            clock,
            rng: match self.seed {
                Some(seed) => RandomSource::seeded(seed),
                None => RandomSource::PerThread,
            },
            events,
            timers: Mutex::new(BinaryHeap::new()),
            timer_seq: AtomicU64::new(0),
            timer_wake: Arc::new(Notify::new()),
            driver_started: AtomicBool::new(false),
            auto_timers,
            config_lock: Mutex::new(()),
            strict: self.strict,
            config_generation: tokio::sync::watch::Sender::new(0),
            observer: self.observer,
        });
        if let Some(observer) = &core.observer {
            observer.attached(core.clock.now());
        }
        Engine { core }
    }

    /// Builds an engine and applies `config`.
    ///
    /// # Errors
    /// When the configuration is invalid for this builder's policies.
    pub fn build_with(self, config: Config) -> Result<Engine, ConfigError> {
        let engine = self.build();
        engine.apply_config(config)?;
        Ok(engine)
    }
}

/// Every cluster's runtime and current snapshot, indexed by case-folded id: what a pick reads
/// with a single atomic load. Health changes replace the one entry they touch.
#[derive(Default, Clone)]
pub(crate) struct ClusterTable {
    /// Entries in config order, each with its folded id.
    entries: Vec<(Arc<str>, ClusterEntry)>,
    /// Folded id -> position in `entries`, for tables too large to scan.
    index: HashMap<Arc<str>, usize, foldhash::fast::RandomState>,
}

/// One cluster in the table.
#[derive(Clone)]
pub(crate) struct ClusterEntry {
    /// What a pick reads, copied out of the snapshot so that it is one step from the table.
    pub best: Arc<[Arc<Destination>]>,
    pub balancer: Arc<dyn LoadBalancingPolicy>,
    pub runtime: Arc<ClusterRuntime>,
    pub snapshot: Arc<ClusterSnapshot>,
}

impl ClusterEntry {
    fn new(runtime: Arc<ClusterRuntime>, snapshot: Arc<ClusterSnapshot>) -> Self {
        ClusterEntry {
            best: snapshot.best.clone(),
            balancer: snapshot.settings.load_balancing.clone(),
            runtime,
            snapshot,
        }
    }
}

/// Up to this many clusters, a lookup compares ids one by one instead of hashing: a service
/// usually calls a handful of clusters, and comparing a few short ids (mostly just their lengths)
/// costs less than hashing one.
const SCAN_LIMIT: usize = 8;

impl ClusterTable {
    /// Adds a cluster under its folded id (ids are unique: validation rejects duplicates).
    fn push(&mut self, key: Arc<str>, entry: ClusterEntry) {
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, entry));
    }

    /// Looks up a cluster by id, case-insensitively, without allocating for ASCII ids of up to
    /// 64 bytes.
    #[inline]
    fn get(&self, id: &str) -> Option<&ClusterEntry> {
        if id.is_ascii() && self.entries.len() <= SCAN_LIMIT {
            // A folded key is ASCII-lowercase when it matches an ASCII id at all, so an
            // ASCII-case-insensitive byte comparison is the fold comparison here.
            return self
                .entries
                .iter()
                .find(|(key, _)| key.as_bytes().eq_ignore_ascii_case(id.as_bytes()))
                .map(|(_, entry)| entry);
        }
        self.get_indexed(id)
    }

    /// The lookup of tables too big to scan (and of non-ASCII ids): out of line, so that the
    /// small-table scan inlined into every pick stays small.
    #[inline(never)]
    fn get_indexed(&self, id: &str) -> Option<&ClusterEntry> {
        with_folded(id, |folded| self.lookup(folded))
    }

    /// Looks up an already folded id.
    fn lookup(&self, folded: &str) -> Option<&ClusterEntry> {
        self.index
            .get(folded)
            .map(|&position| &self.entries[position].1)
    }

    /// The entry of an already folded id, to replace its snapshot.
    fn lookup_mut(&mut self, folded: &str) -> Option<&mut ClusterEntry> {
        let position = *self.index.get(folded)?;
        Some(&mut self.entries[position].1)
    }

    /// Entries in config order.
    fn entries(&self) -> impl Iterator<Item = &ClusterEntry> {
        self.entries.iter().map(|(_, entry)| entry)
    }
}

pub(crate) struct EngineCore {
    me: Weak<EngineCore>,
    pub clusters: ArcSwap<ClusterTable>,
    registry: PolicyRegistry,
    options: HealthPolicyOptions,
    pub clock: Arc<dyn Clock>,
    rng: RandomSource,
    events: broadcast::Sender<HealthEvent>,
    pub timers: Mutex<BinaryHeap<Reverse<Reactivation>>>,
    timer_seq: AtomicU64,
    timer_wake: Arc<Notify>,
    driver_started: AtomicBool,
    auto_timers: bool,
    config_lock: Mutex<()>,
    strict: bool,
    /// Bumped after every applied configuration; the active monitor follows it.
    pub config_generation: tokio::sync::watch::Sender<u64>,
    pub observer: Option<Arc<dyn Observer>>,
}

impl Drop for EngineCore {
    fn drop(&mut self) {
        // Wake the timer task so it sees the engine is gone and ends.
        self.timer_wake.notify_one();
    }
}

impl EngineCore {
    pub fn cluster(&self, id: &str) -> Option<Arc<ClusterRuntime>> {
        self.clusters.load().get(id).map(|e| e.runtime.clone())
    }

    /// Mirrors a cluster's newly published snapshot into the table picks read. Called under the
    /// cluster's update lock, so mirrors of one cluster happen in publish order.
    pub fn mirror(&self, snapshot: &Arc<ClusterSnapshot>) {
        let key = fold_case(&snapshot.settings.id);
        if self.clusters.load().get(&key).is_none() {
            return; // not in the table yet: the config being applied will add it
        }
        self.clusters.rcu(|table| {
            let mut table = ClusterTable::clone(table);
            if let Some(entry) = table.lookup_mut(&key) {
                *entry = ClusterEntry::new(entry.runtime.clone(), snapshot.clone());
            }
            table
        });
    }

    pub fn emit(&self, event: HealthEvent) {
        if let Some(observer) = &self.observer {
            observer.event(&event);
        }
        // No subscriber is fine.
        let _ = self.events.send(event);
    }

    pub fn schedule(&self, mut entry: Reactivation) {
        entry.seq = self.timer_seq.fetch_add(1, Ordering::Relaxed);
        self.timers.lock().push(Reverse(entry));
        self.timer_wake.notify_one();
        if self.auto_timers && !self.driver_started.load(Ordering::Acquire) {
            self.start_timer_driver();
        }
    }

    fn next_due(&self) -> Option<Duration> {
        self.timers.lock().peek().map(|Reverse(e)| e.due)
    }

    /// Starts the task that fires reactivations on time, if a tokio runtime is at hand.
    fn start_timer_driver(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(target: "healthpick", "no tokio runtime: passive reactivation fires only when Engine::fire_due_timers is called");
            return;
        };
        if self.driver_started.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.me.clone();
        let wake = self.timer_wake.clone();
        handle.spawn(async move {
            loop {
                let delay = {
                    let Some(core) = me.upgrade() else { return };
                    updater::fire_due(&core);
                    core.next_due()
                        .map(|due| due.saturating_sub(core.clock.now()))
                };
                match delay {
                    Some(delay) => {
                        let _ = tokio::time::timeout(delay, wake.notified()).await;
                    }
                    None => wake.notified().await,
                }
            }
        });
    }
}

impl Default for Engine {
    fn default() -> Self {
        Engine::builder().build()
    }
}

impl Engine {
    /// A builder for custom policies, clock, seed and options.
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// An engine with the built-in policies running `config`.
    ///
    /// # Errors
    /// Every problem of the configuration, at once.
    pub fn new(config: Config) -> Result<Engine, ConfigError> {
        Engine::builder().build_with(config)
    }

    /// An engine with the built-in policies running a YARP JSON document.
    ///
    /// # Errors
    /// Every problem of the document, at once.
    pub fn from_json(text: &str) -> Result<Engine, ConfigError> {
        let engine = Engine::default();
        engine.load_json(text)?;
        Ok(engine)
    }

    /// Reads, validates and applies a YARP JSON document (a reload when clusters exist).
    /// Returns the warnings. On error nothing changes: the old configuration stays in force.
    ///
    /// # Errors
    /// Every problem of the document, at once.
    pub fn load_json(&self, text: &str) -> Result<Vec<Diagnostic>, ConfigError> {
        let report = crate::config::check(text, &self.core.registry, self.core.strict);
        match report.config {
            Some(config) if report.errors.is_empty() => {
                self.apply_validated(config);
                log_warnings(&report.warnings);
                Ok(report.warnings)
            }
            _ => Err(log_rejected(ConfigError {
                errors: report.errors,
                warnings: report.warnings,
            })),
        }
    }

    /// Validates and applies `config`. Surviving destinations (same cluster id and destination
    /// id, case-insensitively) keep their health, counters and in-flight counts; removed ones
    /// are dropped; new ones start Unknown. Returns the warnings.
    ///
    /// # Errors
    /// Every problem of the configuration; nothing changes then.
    pub fn apply_config(&self, config: Config) -> Result<Vec<Diagnostic>, ConfigError> {
        let mut diags = Diagnostics::default();
        validate(&config, &self.core.registry, &mut diags);
        diags.finish(self.core.strict);
        match diags.into_result() {
            Ok(warnings) => {
                self.apply_validated(config);
                log_warnings(&warnings);
                Ok(warnings)
            }
            Err(e) => Err(log_rejected(e)),
        }
    }

    fn apply_validated(&self, config: Config) {
        let core = &self.core;
        let _serial = core.config_lock.lock();
        let options = config.health_policies.unwrap_or(core.options);
        let old = core.clusters.load_full();
        let now = core.clock.now();
        let mut runtimes: Vec<(Arc<str>, Arc<ClusterRuntime>)> = Vec::new();
        for cluster in &config.clusters {
            let settings = Arc::new(ClusterSettings::resolve(
                cluster,
                &core.registry,
                options,
                core.clock.clone(),
                core.me.clone(),
                core.observer.clone(),
            ));
            let runtime = old
                .get(&cluster.id)
                .map(|e| e.runtime.clone())
                .unwrap_or_else(|| Arc::new(ClusterRuntime::new(settings.clone())));
            let mut book = runtime.book.lock();
            runtime.settings.store(settings.clone());
            let previous = runtime.snapshot.load_full();
            let surviving: HashMap<String, &Arc<Destination>> = previous
                .all
                .iter()
                .map(|o| (fold_case(&o.info.id), o))
                .collect();
            let cluster_id: Arc<str> = Arc::from(cluster.id.as_str());
            // Kept destinations stay as they are; new ones get their cold part built first and
            // their small hot blocks allocated one after another below, so a pick's working set
            // is dense.
            let planned: Vec<Planned> = cluster
                .destinations
                .iter()
                .filter_map(|d| {
                    // Validation guarantees the address parses.
                    let address = uri::parse_base(&d.address).ok()?;
                    let health_url = d.health.as_deref().and_then(|h| uri::parse_base(h).ok());
                    let old = surviving.get(&fold_case(&d.id));
                    if let Some(old) = old {
                        let unchanged = *old.info.id == *d.id
                            && *old.info.cluster_id == *cluster_id
                            && old.info.address == address
                            && old.info.health_url == health_url
                            && old.info.host == d.host
                            && old.info.tier == d.priority
                            && old.info.metadata == d.metadata;
                        if unchanged {
                            return Some(Planned::Kept(Arc::clone(old)));
                        }
                    }
                    Some(Planned::New(Box::new(DestinationInfo {
                        id: Arc::from(d.id.as_str()),
                        address,
                        health_url,
                        host: d.host.clone(),
                        tier: d.priority,
                        metadata: d.metadata.clone(),
                        state: old.map(|o| o.info.state.clone()).unwrap_or_default(),
                        cluster_id: cluster_id.clone(),
                        cluster: runtime.settings.clone(),
                    })))
                })
                .collect();
            let destinations: Vec<Arc<Destination>> = planned
                .into_iter()
                .map(|planned| match planned {
                    Planned::Kept(kept) => kept,
                    Planned::New(info) => Arc::new(Destination {
                        in_flight: AtomicUsize::new(0),
                        info,
                    }),
                })
                .collect();
            updater::publish(core, &runtime, &mut book, settings, destinations, now);
            drop(book);
            runtimes.push((Arc::from(fold_case(&cluster.id)), runtime));
        }
        // Build the table from the latest snapshots while holding every cluster's update lock, so
        // a health change racing with this reload is neither lost nor applied to a stale table.
        let books: Vec<_> = runtimes.iter().map(|(_, r)| r.book.lock()).collect();
        let mut table = ClusterTable::default();
        for (key, runtime) in &runtimes {
            let snapshot = runtime.snapshot.load_full();
            table.push(key.clone(), ClusterEntry::new(runtime.clone(), snapshot));
        }
        core.clusters.store(Arc::new(table));
        drop(books);
        core.config_generation.send_modify(|g| *g += 1);
        tracing::info!(target: "healthpick", clusters = config.clusters.len(), "configuration applied");
    }

    /// Picks a destination of `cluster` for one request (SPEC §6): best health class, lowest
    /// tier, then the cluster's load-balancing policy. Lock-free; allocates nothing but the
    /// handle's reference count.
    ///
    /// # Errors
    /// [`PickError::NoAvailableDestinations`] when nothing may receive traffic;
    /// [`PickError::UnknownCluster`] when no cluster has that id.
    #[inline]
    pub fn pick_endpoint(&self, cluster: &str) -> Result<PickHandle, PickError> {
        let table = self.core.clusters.load();
        let entry = Self::entry(&table, cluster)?;
        self.choose(entry, &entry.best, cluster)
    }

    #[inline]
    fn entry<'t>(table: &'t ClusterTable, cluster: &str) -> Result<&'t ClusterEntry, PickError> {
        table.get(cluster).ok_or_else(|| PickError::UnknownCluster {
            cluster: cluster.to_string(),
        })
    }

    /// Lets the cluster's load-balancing policy choose in `group`; a single destination is
    /// returned without consulting it (SPEC §6).
    #[inline]
    fn choose(
        &self,
        entry: &ClusterEntry,
        group: &[Arc<Destination>],
        cluster: &str,
    ) -> Result<PickHandle, PickError> {
        let index = match group.len() {
            0 => {
                return Err(PickError::NoAvailableDestinations {
                    cluster: cluster.to_string(),
                })
            }
            1 => 0,
            n => {
                let ctx = PickContext {
                    rng: &self.core.rng,
                    counter: &entry.runtime.counter,
                };
                let i = entry.balancer.pick(&ctx, group);
                // Custom policies may answer out of range; `%` only then (it costs a division).
                if i < n {
                    i
                } else {
                    i % n
                }
            }
        };
        Ok(PickHandle::new(group[index].clone()))
    }

    /// Picks a destination of `cluster` other than those named in `exclude`: the next best of
    /// the same tier, then the next tier (SPEC §8 failover). Meant for retries, so it may
    /// allocate; the first attempt should use [`pick_endpoint`](Self::pick_endpoint).
    ///
    /// ```
    /// # use healthpick::Engine;
    /// let engine = Engine::from_json(r#"{"Clusters": {"c": {"Destinations": {
    ///     "local":  { "Address": "http://127.0.0.1:8001/" },
    ///     "remote": { "Address": "http://127.0.0.1:9001/", "Priority": 1 } } } } }"#)?;
    /// let first = engine.pick_endpoint("c")?;
    /// assert_eq!(first.destination().id(), "local");
    /// // The request to `local` failed before any response: retry elsewhere.
    /// let retry = engine.pick_endpoint_excluding("c", &["local"])?;
    /// assert_eq!(retry.destination().id(), "remote");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`pick_endpoint`](Self::pick_endpoint); `NoAvailableDestinations` also when every
    /// available destination is excluded.
    pub fn pick_endpoint_excluding<S: AsRef<str>>(
        &self,
        cluster: &str,
        exclude: &[S],
    ) -> Result<PickHandle, PickError> {
        let table = self.core.clusters.load();
        let entry = Self::entry(&table, cluster)?;
        let snapshot = &entry.snapshot;
        let ctx = snapshot.settings.available_context();
        let group = crate::selection::best_group_excluding(&ctx, &snapshot.available, exclude);
        self.choose(entry, &group, cluster)
    }

    /// Like [`pick_endpoint`](Self::pick_endpoint), but the first pick of a cluster with active
    /// checks waits for its first probe round (at most the probe timeout) instead of sending the
    /// first request blind (SPEC §6). Once that round finished it never waits.
    ///
    /// # Errors
    /// As [`pick_endpoint`](Self::pick_endpoint).
    pub async fn pick_endpoint_ready(&self, cluster: &str) -> Result<PickHandle, PickError> {
        // The usual case: one table lookup, then the pick itself.
        if let Some(pick) = self.pick_endpoint_if_ready(cluster) {
            return pick;
        }
        // The cluster's first probe round is running: wait for it, at most the probe timeout.
        if let Some(runtime) = self.core.cluster(cluster) {
            let timeout = runtime
                .snapshot
                .load()
                .settings
                .active
                .as_ref()
                .map(|a| a.timeout);
            if let Some(timeout) = timeout {
                let mut first_round = runtime.first_round.subscribe();
                let _ = tokio::time::timeout(timeout, first_round.wait_for(|done| *done)).await;
            }
        }
        self.pick_endpoint(cluster)
    }

    /// [`pick_endpoint`](Self::pick_endpoint) when no warm-up wait is due (the usual case);
    /// `None` when the cluster's first probe round is still running and the caller should await
    /// [`pick_endpoint_ready`](Self::pick_endpoint_ready). Lets callers keep the waiting future
    /// out of their own state.
    #[inline]
    pub(crate) fn pick_endpoint_if_ready(
        &self,
        cluster: &str,
    ) -> Option<Result<PickHandle, PickError>> {
        let table = self.core.clusters.load();
        let entry = match Self::entry(&table, cluster) {
            Ok(entry) => entry,
            Err(e) => return Some(Err(e)),
        };
        if entry.snapshot.settings.active.is_some()
            && !entry.runtime.first_round_done.load(Ordering::Acquire)
        {
            return None;
        }
        Some(self.choose(entry, &entry.best, cluster))
    }

    /// Resolves once every cluster with active checks has finished its first probe round (as
    /// the [`ActiveMonitor`](crate::monitor::ActiveMonitor) runs them). Clusters without active
    /// checks are ready at once.
    pub async fn ready(&self) {
        let pending: Vec<_> = self
            .core
            .clusters
            .load()
            .entries()
            .filter(|e| e.snapshot.settings.active.is_some())
            .map(|e| e.runtime.first_round.subscribe())
            .collect();
        for mut first_round in pending {
            let _ = first_round.wait_for(|done| *done).await;
        }
    }

    /// Whether a probe round of `cluster` has finished (false for unknown clusters).
    pub fn first_round_done(&self, cluster: &str) -> bool {
        self.core
            .cluster(cluster)
            .is_some_and(|r| r.first_round_done.load(Ordering::Acquire))
    }

    /// What the active monitor needs to probe `cluster` now: `None` when the cluster is gone or
    /// has active checks disabled.
    pub(crate) fn round_plan(&self, cluster: &str) -> Option<RoundPlan> {
        let runtime = self.core.cluster(cluster)?;
        let snapshot = runtime.snapshot.load_full();
        let active = snapshot.settings.active.as_ref()?;
        Some(RoundPlan {
            interval: active.interval,
            timeout: active.timeout,
            snapshot: snapshot.clone(),
        })
    }

    /// The current destination `id` of `cluster` (both case-insensitive).
    pub(crate) fn find_destination(&self, cluster: &str, id: &str) -> Option<Arc<Destination>> {
        let table = self.core.clusters.load();
        let entry = table.get(cluster)?;
        entry
            .snapshot
            .all
            .iter()
            .find(|d| crate::config::eq_ignore_case(&d.info.id, id))
            .cloned()
    }

    /// Ids of the clusters with active checks enabled, in config order.
    pub(crate) fn active_cluster_ids(&self) -> Vec<String> {
        self.core
            .clusters
            .load()
            .entries()
            .map(|e| e.snapshot.settings.clone())
            .filter(|s| s.active.is_some())
            .map(|s| s.id.to_string())
            .collect()
    }

    /// Follows configuration changes.
    pub(crate) fn config_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.core.config_generation.subscribe()
    }

    /// The whole best group of `cluster` and its summary status, for callers that pick
    /// themselves (SPEC §6).
    ///
    /// # Errors
    /// As [`pick_endpoint`](Self::pick_endpoint).
    pub fn best_endpoints(&self, cluster: &str) -> Result<BestEndpoints, PickError> {
        let Some(runtime) = self.core.cluster(cluster) else {
            return Err(PickError::UnknownCluster {
                cluster: cluster.to_string(),
            });
        };
        let snapshot = runtime.snapshot.load();
        match snapshot.best_class {
            Some(status) if !snapshot.best.is_empty() => Ok(BestEndpoints {
                destinations: snapshot.best.to_vec(),
                status,
                panic: snapshot.panic,
            }),
            _ => Err(PickError::NoAvailableDestinations {
                cluster: cluster.to_string(),
            }),
        }
    }

    /// Applies one finished probe round of `cluster` (SPEC §3): the cluster's active policy sees
    /// all results at once. Results naming destinations the cluster no longer has are dropped.
    /// Returns how many results were applied (0 when active checks are disabled).
    ///
    /// # Errors
    /// [`PickError::UnknownCluster`].
    pub fn report_probe_round(
        &self,
        cluster: &str,
        results: &[ProbeResult],
    ) -> Result<usize, PickError> {
        let runtime = self
            .core
            .cluster(cluster)
            .ok_or_else(|| PickError::UnknownCluster {
                cluster: cluster.to_string(),
            })?;
        Ok(updater::probe_round(&self.core, &runtime, results))
    }

    /// Fires the passive reactivations due at the clock's current time and returns how many
    /// fired. With the default clock a background task does this; with a custom clock call it
    /// after moving the clock.
    pub fn fire_due_timers(&self) -> usize {
        updater::fire_due(&self.core)
    }

    /// When the next reactivation is due, on the engine clock.
    pub fn next_timer_due(&self) -> Option<Duration> {
        self.core.next_due()
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.core.clock
    }

    /// The engine's policies.
    pub fn registry(&self) -> &PolicyRegistry {
        &self.core.registry
    }

    /// Whether a cluster has this id (case-insensitive).
    pub fn has_cluster(&self, cluster: &str) -> bool {
        self.core.clusters.load().get(cluster).is_some()
    }

    /// Ids of the configured clusters, in config order.
    pub fn cluster_ids(&self) -> Vec<String> {
        self.core
            .clusters
            .load()
            .entries()
            .map(|e| e.snapshot.settings.id.to_string())
            .collect()
    }

    /// Subscribes to change events: every health-part change and every availability or panic
    /// change, in order. A subscriber that falls more than the channel capacity behind gets
    /// `RecvError::Lagged` and continues with newer events.
    pub fn subscribe(&self) -> broadcast::Receiver<HealthEvent> {
        self.core.events.subscribe()
    }

    /// A point-in-time view of every cluster and destination, for dashboards and the CLI
    /// (SPEC §10).
    pub fn status(&self) -> EngineStatus {
        let table = self.core.clusters.load();
        let clusters = table
            .entries()
            .map(|entry| {
                let snapshot = &entry.snapshot;
                let settings = &snapshot.settings;
                let destinations = snapshot
                    .all
                    .iter()
                    .map(|d| {
                        let record = d.info.state.record.lock().clone();
                        let health = d.health();
                        DestinationStatus {
                            id: d.info.id.to_string(),
                            address: d.info.address.to_string(),
                            tier: d.info.tier,
                            active: health.active,
                            passive: health.passive,
                            reported: health.reported,
                            available: snapshot.available.iter().any(|a| Arc::ptr_eq(a, d)),
                            in_best_group: snapshot.best.iter().any(|a| Arc::ptr_eq(a, d)),
                            in_flight: d.in_flight(),
                            last_change: record.last_change,
                            last_reason: record.last_reason,
                            last_probe: record.last_probe,
                            last_probe_result: record.last_probe_result,
                            last_error: record.last_error,
                        }
                    })
                    .collect();
                ClusterStatus {
                    id: settings.id.to_string(),
                    load_balancing_policy: settings.load_balancing_name.clone(),
                    available_destinations_policy: settings.available_policy_name.clone(),
                    active_enabled: settings.active.is_some(),
                    passive_enabled: settings.passive.is_some(),
                    panic: snapshot.panic,
                    best_class: snapshot.best_class,
                    destinations,
                }
            })
            .collect();
        EngineStatus {
            at: self.core.clock.now(),
            clusters,
        }
    }
}

/// A destination of a config being applied: kept as it is, or new (its hot block is allocated
/// after all cold parts, so the cluster's hot blocks sit together).
enum Planned {
    Kept(Arc<Destination>),
    New(Box<DestinationInfo>),
}

/// One probe round's inputs, read from the current snapshot.
pub(crate) struct RoundPlan {
    pub interval: Duration,
    pub timeout: Duration,
    pub snapshot: Arc<crate::cluster::ClusterSnapshot>,
}

/// The best group of a cluster with its summary status.
#[derive(Debug, Clone)]
pub struct BestEndpoints {
    /// The destinations of the best class and lowest tier, in config order.
    pub destinations: Vec<Arc<Destination>>,
    /// The best health class present: Healthy, Degraded, or Unhealthy (panic).
    pub status: HealthClass,
    /// Whether the cluster is in panic mode.
    pub panic: bool,
}

fn log_warnings(warnings: &[Diagnostic]) {
    for w in warnings {
        tracing::warn!(target: "healthpick", path = %w.path, "{}", w.message);
    }
}

fn log_rejected(e: ConfigError) -> ConfigError {
    tracing::error!(target: "healthpick", "configuration rejected, the previous one stays in force: {e}");
    e
}

//! The engine: every cluster's runtime state, picks, configuration
//! reloads and destination sets, probe rounds and request outcomes, timers, status and events.
//!
//! | file | what it owns |
//! |---|---|
//! | `core.rs` | what every clone of an engine shares, and the lock order |
//! | `hub.rs` | where health changes go beyond their cluster: events and timers |
//! | `builder.rs` | [`EngineBuilder`] |
//! | `table.rs` | cluster id to cluster, read through a per-thread cache |
//! | `runtime.rs` | one cluster: its snapshot cell and the book of its sources |
//! | `updater.rs` | the health updater, the only writer of health and snapshots |
//! | `timers.rs` | passive reactivation and held-change confirmation timers |
//! | `guard.rs` | the update guard's verdict on a publication |
//! | `source_state.rs` | what the engine knows about a registered discovery source |
//! | `sources.rs` | a source's answers and failures: the guard, staleness, first answers |
//! | `publisher.rs` | [`Publisher`], the handle sources (and your code) publish through |
//! | `reload.rs` | whole-config reloads and [`Engine::set_destinations`], one code path |
//! | `pick.rs` | picks and the first-pick warm-up |
//! | `status.rs` | the point-in-time status view |
//! | `metrics.rs` | the engine's metrics (feature `metrics`): handles per cluster and destination |

pub(crate) mod builder;
pub(crate) mod core;
pub(crate) mod fast_path;
pub(crate) mod guard;
pub(crate) mod hub;
#[cfg(feature = "metrics")]
pub(crate) mod metrics;
pub(crate) mod pick;
pub(crate) mod publisher;
pub(crate) mod reload;
pub(crate) mod runtime;
pub(crate) mod source_state;
pub(crate) mod sources;
pub(crate) mod status;
pub(crate) mod table;
pub(crate) mod timers;
pub(crate) mod updater;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};

use self::builder::EngineBuilder;
use self::core::EngineCore;
use self::fast_path::PickHandle;
use self::runtime::ClusterRuntime;
use self::updater::ProbeBatch;
use crate::clock::Clock;
use crate::cluster::settings::Probing;
use crate::config::diagnostics::ConfigError;
use crate::config::model::{ClusterConfig, Config};
use crate::destination::{Destination, Latency};
use crate::error::PickError;
use crate::events::HealthEvent;
use crate::health::outcome::RequestOutcome;
use crate::health::probe_result::ProbeResult;
use crate::ids::eq_ignore_case;
use crate::policy::active::ProbeDelivery;
use crate::policy::registry::PolicyRegistry;

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

impl Default for Engine {
    fn default() -> Self {
        Engine::builder().build()
    }
}

/// What probing one cluster needs now: read from its current snapshot.
pub(crate) struct ProbeTargets {
    pub probing: Probing,
    pub cluster: Arc<ClusterConfig>,
    pub destinations: Vec<Arc<Destination>>,
    /// The active policy asks for whole rounds ([`ProbeDelivery::WholeRounds`]).
    pub whole_rounds: bool,
    /// Whether the cluster's first probes are over (every destination had a result).
    pub first_round_done: bool,
    /// Changes when the cluster's members or settings are published anew (or it left).
    pub changes: watch::Receiver<u64>,
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
    /// Warnings (a misspelt key, a metadata number that falls back to its default, a YARP
    /// setting healthpick does not apply, ...) do not refuse the document: each is logged
    /// through `tracing` at WARN under target `healthpick`, with its key `path` as a field. To
    /// get them as values instead, load the document into an engine yourself:
    /// `let warnings = engine.load_json(text)?;` (see [`load_json`](Self::load_json)).
    ///
    /// ```
    /// use healthpick::Engine;
    ///
    /// let text = r#"{"Clusters": {"c": {"Destinations": {"d": {"Address": "http://10.0.0.1/", "Priorty": 1}}}}}"#;
    /// let engine = Engine::from_json(text)?; // logs the warning
    /// let warnings = Engine::default().load_json(text)?; // returns it
    /// assert!(warnings[0].message.ends_with("did you mean `Priority`?"));
    /// # Ok::<(), healthpick::ConfigError>(())
    /// ```
    ///
    /// # Errors
    /// Every problem of the document, at once.
    pub fn from_json(text: &str) -> Result<Engine, ConfigError> {
        let engine = Engine::default();
        engine.load_json(text)?;
        Ok(engine)
    }

    /// Applies one finished probe round of `cluster`: the cluster's active policy sees
    /// all results at once, and the cluster's first round is over (first picks and
    /// [`ready`](Self::ready) stop waiting). Results naming destinations the cluster no longer
    /// has are dropped. Returns how many results were applied (0 when active checks are
    /// disabled).
    ///
    /// # Errors
    /// [`PickError::UnknownCluster`].
    pub fn report_probe_round(
        &self,
        cluster: &str,
        results: &[ProbeResult],
    ) -> Result<usize, PickError> {
        Ok(self
            .runtime(cluster)?
            .apply_probes(ProbeBatch::Round(results)))
    }

    /// Applies probe results of `cluster` as they arrive, without waiting for a whole round
    ///, for a prober of your own: what the [`ActiveMonitor`](crate::ActiveMonitor)
    /// does for a policy with [`ProbeDelivery::PerDestination`](crate::policy::ProbeDelivery).
    /// The active policy sees these results at once; the cluster's first round is over when
    /// every destination has had a result. Results naming destinations the cluster no longer
    /// has are dropped. Returns how many results were applied.
    ///
    /// ```
    /// use healthpick::{Engine, ProbeResult};
    ///
    /// let engine = Engine::from_json(r#"{"Clusters": {"c": {
    ///     "HealthCheck": {"Active": {"Enabled": true}},
    ///     "Destinations": {"a": {"Address": "http://10.0.0.1/"}, "b": {"Address": "http://10.0.0.2/"}}}}}"#)?;
    /// engine.report_probe_results("c", &[ProbeResult::status("a", 200)])?;
    /// assert!(!engine.first_round_done("c")); // `b` has not answered yet
    /// assert_eq!(engine.pick_endpoint("c")?.destination().id(), "a");
    /// engine.report_probe_results("c", &[ProbeResult::error("b", "timed out")])?;
    /// assert!(engine.first_round_done("c"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`PickError::UnknownCluster`].
    pub fn report_probe_results(
        &self,
        cluster: &str,
        results: &[ProbeResult],
    ) -> Result<usize, PickError> {
        Ok(self
            .runtime(cluster)?
            .apply_probes(ProbeBatch::Arrived(results)))
    }

    /// The monitor's probe results of `cluster`'s destinations: as they arrived, or a whole
    /// round.
    pub(crate) fn report_probed(
        &self,
        cluster: &str,
        results: &[(Arc<Destination>, ProbeResult)],
        whole_round: bool,
    ) -> usize {
        self.runtime(cluster).map_or(0, |runtime| {
            runtime.apply_probes(ProbeBatch::Probed {
                results,
                whole_round,
            })
        })
    }

    fn runtime(&self, cluster: &str) -> Result<Arc<ClusterRuntime>, PickError> {
        self.core
            .table()
            .get(cluster)
            .cloned()
            .ok_or_else(|| PickError::UnknownCluster {
                cluster: cluster.to_string(),
            })
    }

    /// Reports the outcome of a request to destination `destination` of `cluster` without a
    /// pick handle (for example when replaying recorded traffic), as
    /// [`PickHandle::report`] would.
    ///
    /// # Errors
    /// [`PickError::UnknownCluster`]; [`PickError::UnknownDestination`] when the cluster has no
    /// such destination.
    pub fn report_outcome(
        &self,
        cluster: &str,
        destination: &str,
        outcome: RequestOutcome,
    ) -> Result<(), PickError> {
        self.find_destination(cluster, destination)?
            .report(outcome, Latency::Unknown);
        Ok(())
    }

    /// Whether `cluster` has a destination `id` (both case-insensitive).
    pub(crate) fn has_destination(&self, cluster: &str, id: &str) -> bool {
        self.find_destination(cluster, id).is_ok()
    }

    /// A handle counting `destination` of `cluster` in flight, as if it had been picked.
    pub(crate) fn hold(&self, cluster: &str, destination: &str) -> Result<PickHandle, PickError> {
        Ok(PickHandle::of(self.find_destination(cluster, destination)?))
    }

    /// The current destination `id` of `cluster` (both case-insensitive).
    fn find_destination(&self, cluster: &str, id: &str) -> Result<Arc<Destination>, PickError> {
        let snapshot = self
            .core
            .snapshot(cluster)
            .ok_or_else(|| PickError::UnknownCluster {
                cluster: cluster.to_string(),
            })?;
        snapshot
            .members
            .iter()
            .find(|d| eq_ignore_case(d.id(), id))
            .cloned()
            .ok_or_else(|| PickError::UnknownDestination {
                cluster: cluster.to_string(),
                destination: id.to_string(),
            })
    }

    /// What the active monitor needs to probe `cluster` now: `None` when the cluster is gone or
    /// has active checks disabled.
    pub(crate) fn probe_targets(&self, cluster: &str) -> Option<ProbeTargets> {
        let runtime = self.core.table().get(cluster).cloned()?;
        // Subscribed before reading, so a change after the read is not missed.
        let changes = runtime.members_changed.subscribe();
        let snapshot = runtime.cell.load_full();
        let settings = &snapshot.settings;
        let active = settings.policies.active.as_ref()?;
        let first_round_done = *runtime.first_round.borrow();
        Some(ProbeTargets {
            probing: settings.probing?,
            cluster: settings.config.clone(),
            destinations: snapshot.members.clone(),
            whole_rounds: active.policy.delivery() == ProbeDelivery::WholeRounds,
            first_round_done,
            changes,
        })
    }

    /// The configurations of the clusters that have discovery sources, in config order.
    pub(crate) fn discovery_clusters(&self) -> Vec<Arc<ClusterConfig>> {
        self.core
            .table()
            .runtimes()
            .map(|r| r.cell.load().settings.config.clone())
            .filter(|c| !c.discovery_sources().is_empty())
            .collect()
    }

    /// Ids of the clusters with active checks enabled, in config order.
    pub(crate) fn active_cluster_ids(&self) -> Vec<String> {
        self.core
            .table()
            .runtimes()
            .map(|r| r.cell.load().settings.clone())
            .filter(|s| s.probing.is_some())
            .map(|s| s.id.to_string())
            .collect()
    }

    /// Follows configuration changes.
    pub(crate) fn config_changes(&self) -> watch::Receiver<u64> {
        self.core.config_generation.subscribe()
    }

    /// Fires the timers due at the clock's current time (passive reactivations, confirmations
    /// of changes an update guard holds, the steps of slow start and tier spill) and returns
    /// how many fired. With the default clock a background task does this; with a custom clock
    /// call it after moving the clock.
    pub fn fire_due_timers(&self) -> usize {
        self.core.hub.timers.fire_due(self.core.clock.now())
    }

    /// When the next timer is due, on the engine clock.
    pub fn next_timer_due(&self) -> Option<Duration> {
        self.core.hub.timers.next_due()
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
        self.core.snapshot(cluster).is_some()
    }

    /// Ids of the configured clusters, in config order.
    pub fn cluster_ids(&self) -> Vec<String> {
        self.core
            .table()
            .runtimes()
            .map(|r| r.cell.load().settings.id.to_string())
            .collect()
    }

    /// Subscribes to change events: every health-part change and every availability or panic
    /// change, in order. A subscriber that falls more than the channel capacity behind gets
    /// `RecvError::Lagged` and continues with newer events.
    pub fn subscribe(&self) -> broadcast::Receiver<HealthEvent> {
        self.core.hub.events.subscribe()
    }
}

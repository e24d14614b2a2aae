//! The point-in-time status view: what a dashboard or `healthpick watch` prints,
//! read from each cluster's snapshot.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::runtime::ClusterBook;
use super::Engine;
use crate::config::discovery::GuardMode;
use crate::destination::latency;
use crate::destination::reported_load;
use crate::destination::Destination;
use crate::events::HeldReason;
use crate::health::state::{DiscoveryHealth, HealthClass, HealthState, ReportedHealth};
use crate::ids::eq_ignore_case;

/// Every cluster at one moment.
#[derive(Debug, Clone, Serialize, Default)]
#[non_exhaustive]
pub struct EngineStatus {
    /// Engine-clock time of the view.
    pub at: Duration,
    /// The configuration in force: when and from where it was loaded, and the last load refused
    /// since.
    pub config: ConfigStatus,
    /// Clusters in config order.
    pub clusters: Vec<ClusterStatus>,
}

/// The engine's configuration at one moment: the load in force and the last one refused since.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ConfigStatus {
    /// Configurations applied so far (0: none yet). A reload that is refused does not count.
    pub generation: u64,
    /// Engine-clock time the configuration in force was applied.
    pub loaded_at: Option<Duration>,
    /// Where it came from (a file path), when its loader said
    /// ([`Engine::load_json_from`]; `None` for [`Engine::load_json`] and
    /// [`Engine::apply_config`]).
    pub origin: Option<String>,
    /// The last load refused since the configuration in force was applied (`None` once a later
    /// one is accepted): what is on disk is not what runs.
    pub last_error: Option<ConfigRejection>,
}

/// A refused configuration load: the configuration in force stayed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[non_exhaustive]
pub struct ConfigRejection {
    /// Engine-clock time of the refusal.
    pub at: Duration,
    /// Where the document came from, when its loader said.
    pub origin: Option<String>,
    /// What was wrong, one line each (`path: message` for a document's errors, or why the file
    /// could not be read).
    pub errors: Vec<String>,
}

impl EngineStatus {
    /// The cluster with this id (case-insensitive).
    pub fn cluster(&self, id: &str) -> Option<&ClusterStatus> {
        self.clusters.iter().find(|c| eq_ignore_case(&c.id, id))
    }
}

/// One cluster at one moment.
#[derive(Debug, Clone, Serialize, Default)]
#[non_exhaustive]
pub struct ClusterStatus {
    /// Cluster id.
    pub id: String,
    /// Resolved load-balancing policy name.
    pub load_balancing_policy: String,
    /// Resolved available-destinations policy name.
    pub available_destinations_policy: String,
    /// Whether active checks run.
    pub active_enabled: bool,
    /// Whether passive checks run.
    pub passive_enabled: bool,
    /// Whether the cluster is in panic mode.
    pub panic: bool,
    /// The best group's class; `None` when nothing is available.
    pub best_class: Option<HealthClass>,
    /// Registered discovery sources, in the order they registered.
    pub sources: Vec<SourceStatus>,
    /// Destinations: the configuration's in config order, then each source's.
    pub destinations: Vec<DestinationStatus>,
    /// Where tier spill stands, for a cluster with `TierSpill` `Load` whose preferred tier
    /// has a next tier to spill to.
    pub spill: Option<SpillStatus>,
}

/// Where a cluster's tier spill stands: how much of the traffic the preferred tier hands to the
/// next, and why.
#[derive(Debug, Clone, Serialize, Default)]
#[non_exhaustive]
pub struct SpillStatus {
    /// The preferred tier (the best group's).
    pub from_tier: u32,
    /// The tier that takes the spill.
    pub to_tier: u32,
    /// The share of the cluster's picks that spill to `to_tier` (0 to 1); the preferred tier
    /// takes the rest.
    pub share: f64,
    /// Why: the preferred tier's median latency over its baseline in the last window judged
    /// (it spills above the upper mark); `None` before the first.
    pub latency_ratio: Option<f64>,
    /// The preferred tier's median latency unloaded, as learnt while nothing spilled.
    pub baseline: Option<Duration>,
}

/// One discovery source of a cluster at one moment.
#[derive(Debug, Clone, Serialize, Default)]
#[non_exhaustive]
pub struct SourceStatus {
    /// The source's name (unique in its cluster).
    pub name: String,
    /// What kind of source (`Dns`, `custom`, ...).
    pub kind: String,
    /// What it watches.
    pub target: String,
    /// Whether it answered at least once.
    pub answered: bool,
    /// Engine-clock time of its last answer.
    pub last_success: Option<Duration>,
    /// Time since its last answer.
    pub age: Option<Duration>,
    /// Its last failure, if any: engine-clock time and what went wrong.
    pub last_error: Option<(Duration, String)>,
    /// Since when it fails (its last good set stays in force); `None` when it answers.
    pub stale_since: Option<Duration>,
    /// Publications applied so far.
    pub generation: u64,
    /// Destinations it has in the cluster now.
    pub endpoints: usize,
    /// The change its update guard holds, if any.
    pub held: Option<HeldStatus>,
}

/// A change the update guard holds.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct HeldStatus {
    /// Why it is held.
    pub reason: HeldReason,
    /// How many destinations it would remove.
    pub removes: usize,
    /// Of how many.
    pub of: usize,
    /// Engine-clock time it was first held.
    pub since: Duration,
    /// When it applies by itself unless the source changes its mind (`None`: only when forced).
    pub applies_at: Option<Duration>,
}

impl ClusterStatus {
    /// The destination with this id (case-insensitive).
    pub fn destination(&self, id: &str) -> Option<&DestinationStatus> {
        self.destinations.iter().find(|d| eq_ignore_case(&d.id, id))
    }
}

/// One destination at one moment.
#[derive(Debug, Clone, Serialize, Default)]
#[non_exhaustive]
pub struct DestinationStatus {
    /// Destination id.
    pub id: String,
    /// Base address.
    pub address: String,
    /// The source that published it: `config`, or a discovery source.
    pub source: String,
    /// Tier (priority).
    pub tier: u32,
    /// Active health.
    pub active: HealthState,
    /// Passive health.
    pub passive: HealthState,
    /// Reported health from the payload.
    pub reported: Option<ReportedHealth>,
    /// Whether the available-destinations policy lets it receive traffic.
    pub available: bool,
    /// Whether it is in the best group (gets picks now).
    pub in_best_group: bool,
    /// Requests in flight.
    pub in_flight: usize,
    /// Its latency estimate (a peak-sensitive moving average of request latencies) as of its
    /// last sample; `None` before the first. Fed by the wrapped client, the middleware and the
    /// tower layer, and by pick handles where the cluster's policy reads latency.
    pub latency: Option<Duration>,
    /// The utilization its server reports (`endpoint-load-metrics`) as it counts now: after the
    /// cluster's blackout, before it expires; `None` otherwise, or when the cluster reads no
    /// reports.
    pub utilization: Option<f64>,
    /// While it warms up under slow start: the factor its weight counts with now (from the
    /// cluster's minimum up to 1); `None` once warm, or outside the best group.
    pub slow_start: Option<f64>,
    /// Engine-clock time of the last health change.
    pub last_change: Option<Duration>,
    /// The last health change and its reason.
    pub last_reason: Option<String>,
    /// Engine-clock time of the last probe.
    pub last_probe: Option<Duration>,
    /// What the last probe saw.
    pub last_probe_result: Option<String>,
    /// The last probe failure.
    pub last_error: Option<String>,
    /// What its discovery source says about it (`Unknown` for configured destinations).
    pub discovery: DiscoveryHealth,
    /// Engine-clock time its source last published it.
    pub last_seen: Option<Duration>,
    /// Where it runs, as its source said (`region/zone/node`, `-` when unknown).
    pub locality: String,
    /// Whether its most recent probe succeeded; `None` before its first probe result. A
    /// destination whose latest probe failed is a suspect: it ranks with Degraded destinations
    /// unless the cluster turns suspect ranking off.
    pub last_probe_succeeded: Option<bool>,
}

impl Engine {
    /// A point-in-time view of every cluster and destination, for dashboards and the CLI.
    ///
    /// A status taken while a configuration is being applied waits for it to be in force, so
    /// that the clusters and the configuration's generation shown belong together.
    pub fn status(&self) -> EngineStatus {
        // The configuration lock: a reload replaces the clusters' destinations one cluster after
        // the other, then the table, then the generation; none of that is seen half done.
        let _applied = self.core.config_lock.lock();
        let table = self.core.table();
        let now = self.core.clock.now();
        let clusters = table
            .runtimes()
            .map(|runtime| {
                let snapshot = runtime.cell.load();
                let settings = &snapshot.settings;
                let available: HashSet<*const Destination> =
                    snapshot.available.iter().map(Arc::as_ptr).collect();
                let best: HashMap<*const Destination, f64> = snapshot
                    .best
                    .destinations()
                    .iter()
                    .enumerate()
                    .map(|(i, d)| (Arc::as_ptr(d), snapshot.best.slow_start_factor(i)))
                    .collect();
                let destinations = snapshot
                    .members
                    .iter()
                    .map(|d| {
                        let record = d.record().clone();
                        let health = d.health();
                        DestinationStatus {
                            id: d.id().to_string(),
                            address: d.address().to_string(),
                            source: d.source().to_string(),
                            tier: d.tier(),
                            active: health.active,
                            passive: health.passive,
                            reported: health.reported,
                            available: available.contains(&Arc::as_ptr(d)),
                            in_best_group: best.contains_key(&Arc::as_ptr(d)),
                            in_flight: d.in_flight(),
                            latency: latency::last_estimate(d.signals.latency()),
                            utilization: settings.signals.reports.as_ref().and_then(|rules| {
                                let (load, since) = d.signals.load();
                                reported_load::utilization(load, since, now, rules)
                            }),
                            slow_start: best
                                .get(&Arc::as_ptr(d))
                                .copied()
                                .filter(|&factor| factor < 1.0),
                            last_change: record.last_change,
                            last_reason: record.last_reason,
                            last_probe: record.last_probe,
                            last_probe_result: record.last_probe_result,
                            last_error: record.last_error,
                            discovery: health.discovery,
                            last_seen: record.last_seen,
                            locality: d.with_attributes(|a| a.locality().to_string()),
                            last_probe_succeeded: d.last_probe_succeeded(),
                        }
                    })
                    .collect();
                let policies = &settings.policies;
                ClusterStatus {
                    id: settings.id.to_string(),
                    load_balancing_policy: policies.load_balancing.name.clone(),
                    available_destinations_policy: policies.available.name.clone(),
                    active_enabled: policies.active.is_some(),
                    passive_enabled: policies.passive.is_some(),
                    panic: snapshot.panic,
                    best_class: snapshot.best_class,
                    sources: sources(&runtime.book.lock(), now),
                    destinations,
                    spill: snapshot.spill.as_ref().map(|spill| {
                        let reading = spill.state.reading();
                        SpillStatus {
                            from_tier: spill.state.from_tier,
                            to_tier: spill.state.to_tier,
                            share: reading.share,
                            latency_ratio: reading.ratio,
                            baseline: reading.baseline,
                        }
                    }),
                }
            })
            .collect();
        EngineStatus {
            at: now,
            config: self.config_status(),
            clusters,
        }
    }

    /// The configuration part of [`status`](Self::status) alone.
    pub fn config_status(&self) -> ConfigStatus {
        // The generation is bumped under the record's lock: the two agree.
        let record = self.core.config_record.lock();
        ConfigStatus {
            generation: *self.core.config_generation.borrow(),
            loaded_at: record.loaded_at,
            origin: record.origin.as_deref().map(str::to_string),
            last_error: record.last_error.clone(),
        }
    }
}

/// The registered sources of a cluster, as of `now`.
fn sources(book: &ClusterBook, now: Duration) -> Vec<SourceStatus> {
    book.sources
        .iter()
        .filter_map(|s| {
            let state = s.state.as_ref()?;
            Some(SourceStatus {
                name: s.source.to_string(),
                kind: state.kind.clone(),
                target: state.target.clone(),
                answered: state.answered,
                last_success: state.last_success,
                age: state.last_success.map(|at| now.saturating_sub(at)),
                last_error: state.last_error.clone(),
                stale_since: state.stale_since,
                generation: state.generation,
                endpoints: s.members.len(),
                held: state.held.as_ref().map(|h| HeldStatus {
                    reason: h.reason,
                    removes: h.removes,
                    of: h.of,
                    since: h.since,
                    applies_at: (state.guard.mode == GuardMode::AfterConfirmation)
                        .then(|| h.since + state.guard.confirm_after),
                }),
            })
        })
        .collect()
}

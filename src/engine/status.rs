//! The point-in-time status view (SPEC §10): what a dashboard or `healthpick watch` prints,
//! read from each cluster's snapshot.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::Engine;
use crate::destination::Destination;
use crate::health::state::{HealthClass, HealthState, ReportedHealth};
use crate::ids::eq_ignore_case;

/// Every cluster at one moment.
#[derive(Debug, Clone, Serialize)]
pub struct EngineStatus {
    /// Engine-clock time of the view.
    pub at: Duration,
    /// Clusters in config order.
    pub clusters: Vec<ClusterStatus>,
}

impl EngineStatus {
    /// The cluster with this id (case-insensitive).
    pub fn cluster(&self, id: &str) -> Option<&ClusterStatus> {
        self.clusters.iter().find(|c| eq_ignore_case(&c.id, id))
    }
}

/// One cluster at one moment.
#[derive(Debug, Clone, Serialize)]
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
    /// Destinations in config order.
    pub destinations: Vec<DestinationStatus>,
}

impl ClusterStatus {
    /// The destination with this id (case-insensitive).
    pub fn destination(&self, id: &str) -> Option<&DestinationStatus> {
        self.destinations.iter().find(|d| eq_ignore_case(&d.id, id))
    }
}

/// One destination at one moment.
#[derive(Debug, Clone, Serialize)]
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
    /// Whether its most recent probe succeeded; `None` before its first probe result. A
    /// destination whose latest probe failed is a suspect: it ranks with Degraded destinations
    /// unless the cluster turns suspect ranking off (SPEC §14.1).
    pub last_probe_succeeded: Option<bool>,
}

impl Engine {
    /// A point-in-time view of every cluster and destination, for dashboards and the CLI
    /// (SPEC §10).
    pub fn status(&self) -> EngineStatus {
        let table = self.core.table();
        let clusters = table
            .runtimes()
            .map(|runtime| {
                let snapshot = runtime.cell.load();
                let settings = &snapshot.settings;
                let available: HashSet<*const Destination> =
                    snapshot.available.iter().map(Arc::as_ptr).collect();
                let best: HashSet<*const Destination> =
                    snapshot.best.iter().map(Arc::as_ptr).collect();
                let destinations = snapshot
                    .members
                    .iter()
                    .map(|d| {
                        let record = d.state().record.lock().clone();
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
                            in_best_group: best.contains(&Arc::as_ptr(d)),
                            in_flight: d.in_flight(),
                            last_change: record.last_change,
                            last_reason: record.last_reason,
                            last_probe: record.last_probe,
                            last_probe_result: record.last_probe_result,
                            last_error: record.last_error,
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

//! The point-in-time status view (SPEC §10): what a dashboard or `healthpick watch` prints.

use std::time::Duration;

use serde::Serialize;

use crate::health::{HealthClass, HealthState, ReportedHealth};

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
        self.clusters
            .iter()
            .find(|c| crate::config::eq_ignore_case(&c.id, id))
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
        self.destinations
            .iter()
            .find(|d| crate::config::eq_ignore_case(&d.id, id))
    }
}

/// One destination at one moment.
#[derive(Debug, Clone, Serialize)]
pub struct DestinationStatus {
    /// Destination id.
    pub id: String,
    /// Base address.
    pub address: String,
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
}

//! The available-destinations extension point: who may receive traffic.
//!
//! Evaluated whenever a health part of a cluster's destination changes and on config change,
//! never on the request path.

use std::sync::Arc;

use crate::destination::Destination;
use crate::health::state::{DiscoveryHealth, HealthState};

/// The destinations that may receive traffic, and whether the policy fell back to all of them.
#[derive(Debug, Clone, Default)]
pub struct Availability {
    /// Available destinations, in config order.
    pub destinations: Vec<Arc<Destination>>,
    /// True when no destination was healthy and the policy let all of them through ("panic").
    pub panic: bool,
}

/// What an available-destinations policy may look at besides the destinations.
#[derive(Debug, Clone, Copy)]
pub struct AvailablePolicyContext<'a> {
    pub(crate) cluster_id: &'a str,
    pub(crate) active_enabled: bool,
    pub(crate) passive_enabled: bool,
    /// Cluster metadata `HealthCheck.SuspectRanking`.
    pub(crate) suspect_ranking: bool,
    /// Active checks are on and some destination has not had its first probe result yet.
    pub(crate) first_probes_pending: bool,
}

impl AvailablePolicyContext<'_> {
    /// The cluster id.
    pub fn cluster_id(&self) -> &str {
        self.cluster_id
    }

    /// Whether the cluster has active checks enabled.
    pub fn active_enabled(&self) -> bool {
        self.active_enabled
    }

    /// Whether the cluster has passive checks enabled.
    pub fn passive_enabled(&self) -> bool {
        self.passive_enabled
    }

    /// Whether the cluster ranks destinations whose most recent probe failed with Degraded ones
    /// (cluster metadata `HealthCheck.SuspectRanking`, default `true`).
    pub fn suspect_ranking(&self) -> bool {
        self.suspect_ranking
    }

    /// Whether `destination` is a suspect: active checks are on, its most recent probe failed,
    /// and the cluster ranks suspects with Degraded destinations. A suspect that its active
    /// policy has not ejected is still available; selection ranks it below destinations whose
    /// most recent probe succeeded.
    pub fn is_suspect(&self, destination: &Destination) -> bool {
        self.suspect_ranking
            && self.active_enabled
            && destination.last_probe_succeeded() == Some(false)
    }

    /// Whether `destination` waits for its first probe result while its cluster's first probes
    /// are still running: until they finished it ranks below destinations already probed
    /// successfully (the first-pick warm-up).
    pub(crate) fn is_unverified(&self, destination: &Destination) -> bool {
        self.first_probes_pending
            && self.suspect_ranking
            && destination.last_probe_succeeded().is_none()
    }

    /// Whether an enabled check marks `destination` Unhealthy, or its discovery source does.
    pub fn is_excluded(&self, destination: &Destination) -> bool {
        let h = destination.health();
        (self.active_enabled && h.active == HealthState::Unhealthy)
            || (self.passive_enabled && h.passive == HealthState::Unhealthy)
            || h.discovery == DiscoveryHealth::Unhealthy
    }
}

/// Chooses the available destinations of a cluster (YARP's `IAvailableDestinationsPolicy`).
pub trait AvailableDestinationsPolicy: Send + Sync + 'static {
    /// The destinations of `all` (config order) that may receive traffic.
    fn available(&self, ctx: &AvailablePolicyContext<'_>, all: &[Arc<Destination>])
        -> Availability;

    /// Whether its answer is the same for a destination whose passive health is Unknown as
    /// for one whose passive health is Healthy, as for the built-ins, which exclude only what
    /// is Unhealthy. Then the engine does not ask it again after such a change, which each
    /// destination's first judged request makes (at 10,000 destinations, 10,000 times).
    /// Default: false, it is asked again after every health change.
    fn passive_unknown_is_healthy(&self) -> bool {
        false
    }
}

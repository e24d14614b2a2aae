//! The passive-policy extension point: what one finished request means for its destination
//! (SPEC §4).

use std::time::Duration;

use super::{HealthState, Reason};
use crate::cluster::ClusterSettings;
use crate::config::{HealthPolicyOptions, Metadata};
use crate::destination::Destination;

/// How a finished request to a destination went (SPEC §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestOutcome {
    /// The request completed (any response the caller considers fine).
    Success,
    /// No usable response: connect refused, reset, TLS failure, or a timeout before or while
    /// reading the response.
    TransportFailure,
    /// An HTTP response arrived with this status. Not a transport failure, whatever the status.
    Status(u16),
    /// The caller cancelled the request: not the destination's fault, counts as a success.
    Cancelled,
}

impl RequestOutcome {
    /// Whether this outcome is a transport failure (the only kind TransportFailureRate counts).
    pub fn is_transport_failure(self) -> bool {
        matches!(self, RequestOutcome::TransportFailure)
    }
}

/// A passive policy's verdict on one outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct PassiveVerdict {
    /// The destination's passive health after this outcome.
    pub health: HealthState,
    /// Why, for events and the status API.
    pub reason: Reason,
    /// When the verdict is Unhealthy, how long until the destination returns to Unknown.
    pub reactivation_after: Duration,
}

/// What a passive policy may look at besides the outcome.
pub struct PassivePolicyContext<'a> {
    pub(crate) settings: &'a ClusterSettings,
    pub(crate) destination: &'a Destination,
    pub(crate) now: Duration,
}

impl std::fmt::Debug for PassivePolicyContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassivePolicyContext")
            .field("cluster", &self.cluster_id())
            .field("destination", &self.destination.id())
            .field("now", &self.now)
            .finish()
    }
}

impl PassivePolicyContext<'_> {
    /// The cluster id.
    pub fn cluster_id(&self) -> &str {
        &self.settings.id
    }

    /// The destination the request went to.
    pub fn destination(&self) -> &Destination {
        self.destination
    }

    /// The cluster metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.settings.config.metadata
    }

    /// The TransportFailureRate limit in force for this cluster (metadata or default).
    pub fn failure_rate_limit(&self) -> f64 {
        self.settings.failure_rate_limit
    }

    /// The cluster's configured `ReactivationPeriod`, if any.
    pub fn reactivation_period(&self) -> Option<Duration> {
        self.settings
            .config
            .health_check
            .passive
            .reactivation_period
    }

    /// The global health-policy options.
    pub fn options(&self) -> &HealthPolicyOptions {
        &self.settings.options
    }

    /// The time of the outcome, from the engine's clock.
    pub fn now(&self) -> Duration {
        self.now
    }
}

/// Decides passive health from request outcomes (YARP's `IPassiveHealthCheckPolicy`).
///
/// Called on the request path for every outcome of a cluster with passive checks enabled: keep it
/// cheap, never block. Return `None` to leave the health as it is.
pub trait PassiveHealthPolicy: Send + Sync + 'static {
    /// Judges one outcome.
    fn request_completed(
        &self,
        ctx: &PassivePolicyContext<'_>,
        outcome: RequestOutcome,
    ) -> Option<PassiveVerdict>;
}

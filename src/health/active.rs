//! The active-policy extension point: what a probe round means for each destination (SPEC §3).

use std::time::Duration;

use super::{HealthState, Reason, ReportedHealth};
use crate::cluster::ClusterSettings;
use crate::config::{HealthPolicyOptions, Metadata};
use crate::destination::Destination;

/// The result of probing one destination in a round.
///
/// A probe succeeds on a 2xx status unless its health payload says `Unhealthy` (SPEC §9); a
/// transport error, timeout, non-2xx status or a request that could not be built is a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeResult {
    /// The probed destination's id.
    pub destination: String,
    /// The HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// The status from the response's health payload, when a 2xx body was one.
    pub reported: Option<ReportedHealth>,
    /// Why the probe failed without a usable response (timeout, connection refused, ...).
    pub error: Option<String>,
}

impl ProbeResult {
    /// A probe that got a response with `status` and no health payload.
    pub fn status(destination: impl Into<String>, status: u16) -> Self {
        ProbeResult {
            destination: destination.into(),
            status: Some(status),
            reported: None,
            error: None,
        }
    }

    /// A probe that failed without a response, for `reason`.
    pub fn error(destination: impl Into<String>, reason: impl Into<String>) -> Self {
        ProbeResult {
            destination: destination.into(),
            status: None,
            reported: None,
            error: Some(reason.into()),
        }
    }

    /// Adds the status of a health payload found in a 2xx body.
    pub fn with_payload(mut self, reported: ReportedHealth) -> Self {
        self.reported = Some(reported);
        self
    }

    /// Whether the probe counts as a success: 2xx, no error, payload not `Unhealthy`.
    pub fn is_success(&self) -> bool {
        self.error.is_none()
            && self.status.is_some_and(|s| (200..300).contains(&s))
            && self.reported != Some(ReportedHealth::Unhealthy)
    }

    /// What the probe saw, for reasons and logs: `HTTP 200`, `HTTP 200 (Degraded)`,
    /// `error: connection refused`.
    pub fn describe(&self) -> String {
        match (&self.error, self.status, self.reported) {
            (Some(e), _, _) => format!("error: {e}"),
            (None, Some(s), Some(r)) => format!("HTTP {s} ({r})"),
            (None, Some(s), None) => format!("HTTP {s}"),
            (None, None, _) => "no response".to_string(),
        }
    }
}

/// An active policy's verdict for one entry of a round.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveVerdict {
    /// Index of the entry in the round passed to the policy.
    pub index: usize,
    /// The destination's new active health.
    pub health: HealthState,
    /// Why, for events and the status API.
    pub reason: Reason,
}

/// What an active policy may look at besides the round itself.
pub struct ActivePolicyContext<'a> {
    pub(crate) settings: &'a ClusterSettings,
    pub(crate) now: Duration,
}

impl std::fmt::Debug for ActivePolicyContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActivePolicyContext")
            .field("cluster", &self.cluster_id())
            .field("now", &self.now)
            .finish()
    }
}

impl ActivePolicyContext<'_> {
    /// The cluster id.
    pub fn cluster_id(&self) -> &str {
        &self.settings.id
    }

    /// The cluster metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.settings.config.metadata
    }

    /// The ConsecutiveFailures threshold in force for this cluster (metadata or default).
    pub fn failure_threshold(&self) -> f64 {
        self.settings.failure_threshold
    }

    /// The global health-policy options.
    pub fn options(&self) -> &HealthPolicyOptions {
        &self.settings.options
    }

    /// The time of the round, from the engine's clock.
    pub fn now(&self) -> Duration {
        self.now
    }
}

/// Decides active health from a completed probe round (YARP's `IActiveHealthCheckPolicy`).
///
/// The engine calls it once per round with every destination probed in it, after all probes
/// finished or timed out. Return one verdict per destination whose health should be set; the
/// engine applies only actual changes.
///
/// ```
/// use healthpick::health::{ActiveHealthPolicy, ActivePolicyContext, ActiveVerdict, HealthState, Reason};
/// use healthpick::{Destination, ProbeResult};
///
/// /// Healthy on any 2xx, Unhealthy on the first failure.
/// struct Strict;
/// impl ActiveHealthPolicy for Strict {
///     fn probing_completed(&self, _ctx: &ActivePolicyContext<'_>, round: &[(&Destination, &ProbeResult)]) -> Vec<ActiveVerdict> {
///         round.iter().enumerate().map(|(index, (_, r))| ActiveVerdict {
///             index,
///             health: if r.is_success() { HealthState::Healthy } else { HealthState::Unhealthy },
///             reason: Reason::Custom(r.describe().into()),
///         }).collect()
///     }
/// }
/// ```
pub trait ActiveHealthPolicy: Send + Sync + 'static {
    /// Judges one round of probe results.
    fn probing_completed(
        &self,
        ctx: &ActivePolicyContext<'_>,
        round: &[(&Destination, &ProbeResult)],
    ) -> Vec<ActiveVerdict>;
}

//! The active-policy extension point: what a probe round means for each destination.

use std::time::Duration;

use crate::config::metadata::Metadata;
use crate::config::model::HealthPolicyOptions;
use crate::destination::Destination;
use crate::health::probe_result::ProbeResult;
use crate::health::reason::Reason;
use crate::health::state::HealthState;

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

/// What an active policy may look at besides the round itself: the cluster's settings, the time,
/// and each destination's state slot for the policy's own data.
pub struct ActivePolicyContext<'a> {
    pub(crate) cluster_id: &'a str,
    pub(crate) metadata: &'a Metadata,
    pub(crate) failure_threshold: f64,
    pub(crate) options: &'a HealthPolicyOptions,
    pub(crate) now: Duration,
}

impl std::fmt::Debug for ActivePolicyContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActivePolicyContext")
            .field("cluster", &self.cluster_id)
            .field("now", &self.now)
            .finish()
    }
}

impl ActivePolicyContext<'_> {
    /// The cluster id.
    pub fn cluster_id(&self) -> &str {
        self.cluster_id
    }

    /// The cluster metadata.
    pub fn metadata(&self) -> &Metadata {
        self.metadata
    }

    /// The ConsecutiveFailures threshold in force for this cluster (metadata or default).
    pub fn failure_threshold(&self) -> f64 {
        self.failure_threshold
    }

    /// The global health-policy options.
    pub fn options(&self) -> &HealthPolicyOptions {
        self.options
    }

    /// The time of the round, from the engine's clock.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Runs `f` on `destination`'s value of type `T`, the policy's own per-destination data
    /// (created with `T::default()` on first use, kept while the destination lives; use a type of
    /// your own so no other policy shares it).
    ///
    /// ```
    /// use healthpick::policy::{ActiveHealthPolicy, ActivePolicyContext, ActiveVerdict};
    /// use healthpick::{Destination, HealthState, ProbeResult, Reason};
    ///
    /// /// Unhealthy after five failed probes in a row, counted in the destination's own slot.
    /// struct FiveStrikes;
    /// #[derive(Default)]
    /// struct Strikes(u32);
    /// impl ActiveHealthPolicy for FiveStrikes {
    ///     fn probing_completed(&self, ctx: &ActivePolicyContext<'_>, round: &[(&Destination, &ProbeResult)]) -> Vec<ActiveVerdict> {
    ///         round.iter().enumerate().map(|(index, (d, r))| {
    ///             let strikes = ctx.with_state(d, |s: &mut Strikes| {
    ///                 s.0 = if r.is_success() { 0 } else { s.0 + 1 };
    ///                 s.0
    ///             });
    ///             let health = if strikes >= 5 { HealthState::Unhealthy } else { HealthState::Healthy };
    ///             ActiveVerdict { index, health, reason: Reason::Custom(format!("{strikes} strikes").into()) }
    ///         }).collect()
    ///     }
    /// }
    /// ```
    pub fn with_state<T: Default + Send + 'static, R>(
        &self,
        destination: &Destination,
        f: impl FnOnce(&mut T) -> R,
    ) -> R {
        destination.records().with_slot(f)
    }
}

/// How an active policy wants the [`ActiveMonitor`](crate::monitor::ActiveMonitor) to hand it
/// probe results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ProbeDelivery {
    /// Each destination's result as soon as it arrives (results that arrive together come in one
    /// call), so a probe that hangs delays only its own destination. Each
    /// destination is probed again `Interval` after its own previous probe finished. The
    /// default; right for any policy that judges each destination by its own results, as
    /// ConsecutiveFailures does.
    #[default]
    PerDestination,
    /// One call per round with every destination of the cluster, after all probes finished or
    /// timed out, and the next round `Interval` after that (YARP's model), for a policy that
    /// compares destinations with each other. A probe that hangs holds back the whole round.
    WholeRounds,
}

/// Decides active health from probe results (YARP's `IActiveHealthCheckPolicy`).
///
/// The engine calls it with the probe results of a cluster: by default (see
/// [`delivery`](Self::delivery)) with each destination's result as soon as it arrives, or with
/// whole rounds for a policy that asks for them. Return one verdict per destination whose health
/// should be set; the engine applies only actual changes.
///
/// ```
/// use healthpick::policy::{ActiveHealthPolicy, ActivePolicyContext, ActiveVerdict};
/// use healthpick::{Destination, HealthState, ProbeResult, Reason};
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
    /// Judges probe results: a whole round, or the results that arrived together (see
    /// [`delivery`](Self::delivery)). Each destination appears at most once.
    fn probing_completed(
        &self,
        ctx: &ActivePolicyContext<'_>,
        round: &[(&Destination, &ProbeResult)],
    ) -> Vec<ActiveVerdict>;

    /// How the active monitor hands this policy its results. Default
    /// [`ProbeDelivery::PerDestination`]; return [`ProbeDelivery::WholeRounds`] when a verdict
    /// needs every destination's result of the same round.
    fn delivery(&self) -> ProbeDelivery {
        ProbeDelivery::PerDestination
    }
}

//! The passive-policy extension point: what one finished request means for its destination
//!.

use std::time::Duration;

use crate::config::metadata::Metadata;
use crate::config::model::{HealthPolicyOptions, OutlierDetectionOptions};
use crate::destination::outcome_window::OutcomeWindow;
use crate::destination::state::StateSlots;
use crate::destination::Destination;
use crate::health::outcome::RequestOutcome;
use crate::health::reason::Reason;
use crate::health::state::HealthState;

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

/// `Success` outcomes a passive policy need not judge one by one: see
/// [`PassiveHealthPolicy::quiet_successes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietSuccesses {
    /// How many successes in a row.
    pub count: u16,
    /// Until when, on the engine's clock (exclusive).
    pub until: Duration,
}

/// What a passive policy may look at besides the outcome: the cluster's settings, the
/// destination, the time, and the destination's state slot for the policy's own data.
pub struct PassivePolicyContext<'a> {
    pub(crate) cluster_id: &'a str,
    pub(crate) metadata: &'a Metadata,
    pub(crate) failure_rate_limit: f64,
    pub(crate) reactivation_period: Option<Duration>,
    pub(crate) effective_reactivation_period: Duration,
    pub(crate) outlier_detection: &'a OutlierDetectionOptions,
    pub(crate) options: &'a HealthPolicyOptions,
    pub(crate) destination: &'a Destination,
    pub(crate) now: Duration,
    /// The cluster's own policy data (one value per type), kept while the cluster exists.
    pub(crate) cluster_state: &'a StateSlots,
    /// Destinations of the cluster now.
    pub(crate) cluster_size: usize,
}

impl std::fmt::Debug for PassivePolicyContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassivePolicyContext")
            .field("cluster", &self.cluster_id)
            .field("destination", &self.destination.id())
            .field("now", &self.now)
            .finish()
    }
}

impl PassivePolicyContext<'_> {
    /// The cluster id.
    pub fn cluster_id(&self) -> &str {
        self.cluster_id
    }

    /// The destination the request went to.
    pub fn destination(&self) -> &Destination {
        self.destination
    }

    /// The cluster metadata.
    pub fn metadata(&self) -> &Metadata {
        self.metadata
    }

    /// The TransportFailureRate limit in force for this cluster (metadata or default).
    pub fn failure_rate_limit(&self) -> f64 {
        self.failure_rate_limit
    }

    /// The cluster's configured `ReactivationPeriod`, if any.
    pub fn reactivation_period(&self) -> Option<Duration> {
        self.reactivation_period
    }

    /// The reactivation period in force: max(`ReactivationPeriod` or the default, the detection
    /// window), so that old failures have left the window when an ejected destination returns
    ///.
    pub fn effective_reactivation_period(&self) -> Duration {
        self.effective_reactivation_period
    }

    /// The OutlierDetection settings in force for this cluster (metadata `OutlierDetection.*`
    /// or the defaults).
    pub fn outlier_detection(&self) -> &OutlierDetectionOptions {
        self.outlier_detection
    }

    /// The global health-policy options.
    pub fn options(&self) -> &HealthPolicyOptions {
        self.options
    }

    /// The time of the outcome, from the engine's clock.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Runs `f` on the destination's value of type `T`, the policy's own per-destination data
    /// (created with `T::default()` on first use, kept while the destination lives; use a type of
    /// your own so no other policy shares it). It is behind a lock of the destination's own:
    /// keep `f` short.
    pub fn with_state<T: Default + Send + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.destination.records().with_slot(f)
    }

    /// Runs `f` on the destination's [`OutcomeWindow`]: its request outcomes in 1-second
    /// buckets over a sliding window, kept as YARP keeps them for its failure-rate policy.
    /// Every destination has exactly one, beside its health, where recording an outcome reads
    /// no memory of its own (cheaper than [`with_state`](Self::with_state) at thousands of
    /// destinations). It is shared by the cluster's passive policies: the built-in
    /// TransportFailureRate records every outcome in it (failed: a transport failure), so a
    /// policy listed together with TransportFailureRate should only read it
    /// ([`OutcomeWindow::counts`]), and one that counts other failures keeps a window of its own
    /// in [`with_state`](Self::with_state). It is behind a lock of the destination's own: keep
    /// `f` short.
    #[inline]
    pub fn with_outcome_window<R>(&self, f: impl FnOnce(&mut OutcomeWindow) -> R) -> R {
        self.destination.with_outcome_window(f)
    }

    /// How many destinations the cluster has now (for a policy that limits how many of them it
    /// ejects at once).
    pub fn cluster_size(&self) -> usize {
        self.cluster_size
    }

    /// Runs `f` on the cluster's value of type `T`, the policy's own per-cluster data (created
    /// with `T::default()` on first use, kept while the cluster exists, across reloads). It is
    /// behind a lock of the cluster's own that every outcome of the cluster would contend on:
    /// take it only on rare paths (an ejection), never for every outcome. It may be taken inside
    /// [`with_state`](Self::with_state), not the other way round.
    pub fn with_cluster_state<T: Default + Send + 'static, R>(
        &self,
        f: impl FnOnce(&mut T) -> R,
    ) -> R {
        self.cluster_state.with(f)
    }
}

/// Decides passive health from request outcomes (YARP's `IPassiveHealthCheckPolicy`).
///
/// Called on the request path for every outcome of a cluster with passive checks enabled: keep it
/// cheap, never block. Return `None` to leave the health as it is.
///
/// ```
/// use std::time::Duration;
/// use healthpick::policy::{PassiveHealthPolicy, PassivePolicyContext, PassiveVerdict};
/// use healthpick::{HealthState, Reason, RequestOutcome};
///
/// /// Out for a minute after three transport failures in a row.
/// struct ThreeInARow;
/// #[derive(Default)]
/// struct Run(u32);
/// impl PassiveHealthPolicy for ThreeInARow {
///     fn request_completed(&self, ctx: &PassivePolicyContext<'_>, outcome: RequestOutcome) -> Option<PassiveVerdict> {
///         let run = ctx.with_state(|run: &mut Run| {
///             run.0 = if outcome.is_transport_failure() { run.0 + 1 } else { 0 };
///             run.0
///         });
///         let health = if run >= 3 { HealthState::Unhealthy } else { HealthState::Healthy };
///         Some(PassiveVerdict { health, reason: Reason::Custom(format!("{run} in a row").into()), reactivation_after: Duration::from_secs(60) })
///     }
/// }
/// ```
pub trait PassiveHealthPolicy: Send + Sync + 'static {
    /// Judges one outcome.
    fn request_completed(
        &self,
        ctx: &PassivePolicyContext<'_>,
        outcome: RequestOutcome,
    ) -> Option<PassiveVerdict>;

    /// Active health checks saw `ctx.destination()` come back (Unhealthy to Healthy), and the
    /// cluster asks passive policies to forget what they saw while it was down (cluster metadata
    /// `HealthCheck.ResetPassiveOnRecovery`, default `true`). Called by the health
    /// updater with the cluster's update lock held: keep it short. Its passive health is not
    /// changed by this (a pending reactivation still decides when an ejected destination
    /// returns); the point is that its first requests after coming back are not judged together
    /// with the failures of its outage. Default: nothing.
    fn destination_recovered(&self, ctx: &PassivePolicyContext<'_>) {
        let _ = ctx;
    }

    /// How many `Success` outcomes in a row the engine may count without calling
    /// [`request_completed`](Self::request_completed), from the destination's outcome `window` as
    /// it is now, and until when: only as many as would each, judged in turn, have been
    /// recorded in `window` as one non-failed outcome and nothing else, and given the verdict
    /// Healthy. The engine asks after a Healthy verdict of a cluster whose only passive policy
    /// this is (and no [`Observer`](crate::observer::Observer) watching evaluations), holding the
    /// window's lock; it then counts those successes in the window itself (in the open bucket,
    /// where [`OutcomeWindow::record`] would have put them) with one atomic operation each, and
    /// judges every other outcome as usual. It withdraws what is left when the destination's
    /// passive health, its cluster's settings or its membership change. TransportFailureRate
    /// answers this, which makes a healthy destination's successes cost about what the clock read
    /// costs. Default: `None` (every outcome is judged).
    fn quiet_successes(
        &self,
        ctx: &PassivePolicyContext<'_>,
        window: &OutcomeWindow,
    ) -> Option<QuietSuccesses> {
        let _ = (ctx, window);
        None
    }
}

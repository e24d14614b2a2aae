//! The engine's metrics (feature `metrics`, the `metrics` facade crate): picks, requests in
//! flight and load signals per destination, request outcomes and available destinations per
//! cluster, and the rare events (health transitions, ejections, discovery updates, held changes)
//! as they happen. The public names, labels and the one table are in [`crate::metrics`].
//!
//! What runs on every request has its handles registered ahead, so that it costs one atomic
//! operation on a handle: a destination's pick counter, in-flight gauge and load-signal gauges
//! when the destination is created (its source published it), a cluster's outcome counters and
//! available gauge when the cluster is created. Rare events register their series when they
//! happen.

use std::sync::Arc;

use ::metrics::{counter, gauge, Counter, Gauge, SharedString};

use crate::destination::latency;
use crate::destination::{Destination, DestinationMetrics};
use crate::events::{HealthEvent, HealthEventKind, HeldReason, PartValue};
use crate::health::outcome::RequestOutcome;
use crate::health::state::{DiscoveryHealth, HealthPart, HealthState, ReportedHealth};

/// Counter: destinations handed out by picks (every [`PickHandle`](crate::PickHandle), retries'
/// and hedges' included). Labels: cluster, destination.
pub const PICKS: &str = "healthpick.picks";
/// Counter: request outcomes the engine took in. Labels: cluster, `outcome`.
pub const OUTCOMES: &str = "healthpick.outcomes";
/// Counter: changes of one health part of a destination. Labels: cluster, `part`, `to`.
pub const HEALTH_TRANSITIONS: &str = "healthpick.health.transitions";
/// Counter: passive ejections (a destination's passive health became Unhealthy). Labels:
/// cluster, destination.
pub const EJECTIONS: &str = "healthpick.ejections";
/// Counter: publications of a discovery source that changed a cluster's destinations. Labels:
/// cluster, `source`.
pub const DISCOVERY_UPDATES: &str = "healthpick.discovery.updates";
/// Counter: publications the update guard held instead of applying. Labels: cluster, `source`,
/// `reason`.
pub const DISCOVERY_HELD: &str = "healthpick.discovery.held";
/// Gauge: destinations a cluster may send traffic to (its available set). Labels: cluster.
pub const DESTINATIONS_AVAILABLE: &str = "healthpick.destinations.available";
/// Gauge: the share of a cluster's picks its preferred tier spills to the next tier under load
/// (`TierSpill` `Load`), 0 to 1. Labels: cluster.
pub const SPILL_SHARE: &str = "healthpick.spill.share";
/// Counter: times a cluster's preferred tier started spilling. Labels: cluster.
pub const SPILL_STARTS: &str = "healthpick.spill.starts";
/// Gauge: requests in flight (picks whose handle is not dropped yet). Labels: cluster,
/// destination.
pub const REQUESTS_IN_FLIGHT: &str = "healthpick.requests.in_flight";
/// Gauge, seconds: a destination's latency estimate (the peak-sensitive moving average of its
/// requests' latencies) as of its last sample; 0 before the first. Labels: cluster, destination.
pub const DESTINATION_LATENCY: &str = "healthpick.destination.latency";
/// Gauge: the utilization a destination's server last reported in an `endpoint-load-metrics`
/// header (`application_utilization`, else `cpu_utilization`; 1 is fully used), whether or not
/// it counts yet; 0 before the first report, and never set where the cluster reads no reports.
/// Labels: cluster, destination.
pub const DESTINATION_UTILIZATION: &str = "healthpick.destination.utilization";

/// Label: the cluster id, spelled as configured. On every metric.
pub const CLUSTER: &str = "healthpick.cluster";
/// Label: the destination id, spelled as configured (for a discovered destination, its key).
pub const DESTINATION: &str = "healthpick.destination";
/// Label of [`OUTCOMES`]: `success`, `cancelled`, `transport_failure`, `status_1xx` to
/// `status_5xx`, `status_other`.
pub const OUTCOME: &str = "outcome";
/// Label of [`HEALTH_TRANSITIONS`]: `active`, `passive`, `reported`, `discovery`.
pub const PART: &str = "part";
/// Label of [`HEALTH_TRANSITIONS`]: the part's new value, `unknown`, `healthy`, `degraded`,
/// `draining`, `unhealthy`, or `none` (a reported status cleared).
pub const TO: &str = "to";
/// Label of the discovery counters: the source's name.
pub const SOURCE: &str = "source";
/// Label of [`DISCOVERY_HELD`] (`emptying`, `mass_removal`, `not_found`) and of the client's
/// retry counter.
pub const REASON: &str = "reason";

/// The `outcome` values, in the order of [`ClusterMetrics::outcomes`].
const OUTCOME_VALUES: [&str; 9] = [
    "success",
    "cancelled",
    "transport_failure",
    "status_1xx",
    "status_2xx",
    "status_3xx",
    "status_4xx",
    "status_5xx",
    "status_other",
];

/// A cluster's handles, registered when the cluster is created; it keeps them across reloads.
pub(crate) struct ClusterMetrics {
    outcomes: [Counter; 9],
    available: Gauge,
    spill_share: Gauge,
}

impl ClusterMetrics {
    /// Registers the handles of cluster `id` with the recorder in force.
    pub fn register(id: &Arc<str>) -> Self {
        ClusterMetrics {
            outcomes: OUTCOME_VALUES.map(|value| {
                counter!(OUTCOMES, CLUSTER => SharedString::from(id.clone()), OUTCOME => value)
            }),
            available: gauge!(DESTINATIONS_AVAILABLE, CLUSTER => SharedString::from(id.clone())),
            spill_share: gauge!(SPILL_SHARE, CLUSTER => SharedString::from(id.clone())),
        }
    }

    /// One outcome taken in: one increment.
    #[inline]
    pub fn outcome(&self, outcome: RequestOutcome) {
        let index = match outcome {
            RequestOutcome::Success => 0,
            RequestOutcome::Cancelled => 1,
            RequestOutcome::TransportFailure => 2,
            RequestOutcome::Status(status @ 100..=599) => 2 + usize::from(status / 100),
            RequestOutcome::Status(_) => 8,
        };
        self.outcomes[index].increment(1);
    }

    /// The cluster published `available` available destinations.
    pub fn available(&self, available: usize) {
        self.available.set(available as f64);
    }

    /// The spill controller set the share of picks that spill.
    pub fn spill_share(&self, share: f64) {
        self.spill_share.set(share);
    }
}

impl std::fmt::Debug for ClusterMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterMetrics").finish_non_exhaustive()
    }
}

/// Registers the handles of a new destination `id` of cluster `cluster`.
pub(crate) fn destination_metrics(cluster: &Arc<str>, id: &Arc<str>) -> DestinationMetrics {
    let labels = [
        (CLUSTER, SharedString::from(cluster.clone())),
        (DESTINATION, SharedString::from(id.clone())),
    ];
    DestinationMetrics {
        picks: counter!(PICKS, &labels),
        in_flight: gauge!(REQUESTS_IN_FLIGHT, &labels),
        latency: gauge!(DESTINATION_LATENCY, &labels),
        utilization: gauge!(DESTINATION_UTILIZATION, &labels),
    }
}

/// `destination`'s latency estimate took a sample: its gauge shows the estimate now (the cell
/// was just written, so reading it back costs no miss), one store.
#[inline]
pub(crate) fn latency_sampled(destination: &Destination) {
    if let Some(estimate) = latency::last_estimate(destination.signals.latency()) {
        destination.metrics().latency.set(estimate.as_secs_f64());
    }
}

/// `destination`'s server reported `utilization`: one store.
#[inline]
pub(crate) fn load_reported(destination: &Destination, utilization: f64) {
    destination.metrics().utilization.set(utilization.max(0.0));
}

/// Counts what a change event says: a health transition (and an ejection), a discovery update,
/// a held change. Called for every event, as it is emitted.
pub(crate) fn record_event(event: &HealthEvent) {
    let cluster = || SharedString::from(event.cluster.clone());
    match &event.kind {
        HealthEventKind::HealthChanged {
            destination,
            part,
            to,
            ..
        } => {
            counter!(HEALTH_TRANSITIONS, CLUSTER => cluster(), PART => part_name(*part), TO => value_name(*to))
                .increment(1);
            if *part == HealthPart::Passive && *to == PartValue::State(HealthState::Unhealthy) {
                counter!(EJECTIONS, CLUSTER => cluster(), DESTINATION => SharedString::from(destination.clone()))
                    .increment(1);
            }
        }
        HealthEventKind::SpillStarted { .. } => {
            counter!(SPILL_STARTS, CLUSTER => cluster()).increment(1);
        }
        HealthEventKind::DestinationsChanged { source, .. } => {
            counter!(DISCOVERY_UPDATES, CLUSTER => cluster(), SOURCE => SharedString::from(source.clone()))
                .increment(1);
        }
        HealthEventKind::ChangeHeld { source, reason, .. } => {
            counter!(DISCOVERY_HELD, CLUSTER => cluster(), SOURCE => SharedString::from(source.clone()), REASON => held_name(*reason))
                .increment(1);
        }
        _ => {}
    }
}

fn part_name(part: HealthPart) -> &'static str {
    match part {
        HealthPart::Active => "active",
        HealthPart::Passive => "passive",
        HealthPart::Reported => "reported",
        HealthPart::Discovery => "discovery",
    }
}

fn value_name(value: PartValue) -> &'static str {
    match value {
        PartValue::State(HealthState::Unknown) => "unknown",
        PartValue::State(HealthState::Healthy) => "healthy",
        PartValue::State(HealthState::Unhealthy) => "unhealthy",
        PartValue::Reported(None) => "none",
        PartValue::Reported(Some(ReportedHealth::Healthy)) => "healthy",
        PartValue::Reported(Some(ReportedHealth::Degraded)) => "degraded",
        PartValue::Reported(Some(ReportedHealth::Unhealthy)) => "unhealthy",
        PartValue::Discovery(DiscoveryHealth::Unknown) => "unknown",
        PartValue::Discovery(DiscoveryHealth::Healthy) => "healthy",
        PartValue::Discovery(DiscoveryHealth::Draining) => "draining",
        PartValue::Discovery(DiscoveryHealth::Unhealthy) => "unhealthy",
    }
}

fn held_name(reason: HeldReason) -> &'static str {
    match reason {
        HeldReason::Emptying => "emptying",
        HeldReason::MassRemoval => "mass_removal",
        HeldReason::NotFound => "not_found",
    }
}

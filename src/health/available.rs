//! Available-destinations policies: who may receive traffic (SPEC §5).
//!
//! Evaluated whenever a health part of a cluster's destination changes and on config change,
//! never on the request path.

use std::sync::Arc;

use super::HealthState;
use crate::destination::Destination;

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

    /// Whether an enabled check marks `destination` Unhealthy.
    pub fn is_excluded(&self, destination: &Destination) -> bool {
        let h = destination.health();
        (self.active_enabled && h.active == HealthState::Unhealthy)
            || (self.passive_enabled && h.passive == HealthState::Unhealthy)
    }
}

/// Chooses the available destinations of a cluster (YARP's `IAvailableDestinationsPolicy`).
pub trait AvailableDestinationsPolicy: Send + Sync + 'static {
    /// The destinations of `all` (config order) that may receive traffic.
    fn available(&self, ctx: &AvailablePolicyContext<'_>, all: &[Arc<Destination>])
        -> Availability;
}

/// Destinations not marked Unhealthy by an enabled check; none left means no traffic
/// (`NoAvailableDestinations`, YARP's 503).
#[derive(Debug, Clone, Copy, Default)]
pub struct HealthyAndUnknown;

impl AvailableDestinationsPolicy for HealthyAndUnknown {
    fn available(
        &self,
        ctx: &AvailablePolicyContext<'_>,
        all: &[Arc<Destination>],
    ) -> Availability {
        let destinations = if ctx.active_enabled || ctx.passive_enabled {
            all.iter()
                .filter(|d| !ctx.is_excluded(d))
                .cloned()
                .collect()
        } else {
            all.to_vec()
        };
        Availability {
            destinations,
            panic: false,
        }
    }
}

/// [`HealthyAndUnknown`], or every destination when that is empty ("panic"): sending traffic to
/// possibly-dead instances beats failing every request. The default.
#[derive(Debug, Clone, Copy, Default)]
pub struct HealthyOrPanic;

impl AvailableDestinationsPolicy for HealthyOrPanic {
    fn available(
        &self,
        ctx: &AvailablePolicyContext<'_>,
        all: &[Arc<Destination>],
    ) -> Availability {
        let healthy = HealthyAndUnknown.available(ctx, all);
        if healthy.destinations.is_empty() && !all.is_empty() {
            Availability {
                destinations: all.to_vec(),
                panic: true,
            }
        } else {
            healthy
        }
    }
}

//! The built-in available-destinations policies: `HealthyAndUnknown`, and
//! `HealthyOrPanic` (the default), which lets every destination through when none is healthy.

use std::sync::Arc;

use super::available::{Availability, AvailableDestinationsPolicy, AvailablePolicyContext};
use crate::destination::Destination;

/// Destinations not marked Unhealthy by an enabled check or by their discovery source; none left means no traffic
/// (`NoAvailableDestinations`, YARP's 503).
#[derive(Debug, Clone, Copy, Default)]
pub struct HealthyAndUnknown;

impl AvailableDestinationsPolicy for HealthyAndUnknown {
    fn available(
        &self,
        ctx: &AvailablePolicyContext<'_>,
        all: &[Arc<Destination>],
    ) -> Availability {
        // Without checks only a discovery source's Unhealthy excludes.
        let destinations = all
            .iter()
            .filter(|d| !ctx.is_excluded(d))
            .cloned()
            .collect();
        Availability {
            destinations,
            panic: false,
        }
    }

    /// It excludes only what is Unhealthy.
    fn passive_unknown_is_healthy(&self) -> bool {
        true
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

    /// It excludes only what is Unhealthy, and panics only when everything is.
    fn passive_unknown_is_healthy(&self) -> bool {
        true
    }
}

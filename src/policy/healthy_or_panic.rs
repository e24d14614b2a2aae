//! The built-in available-destinations policies: `HealthyAndUnknown`, and
//! `HealthyOrPanic` (the default), which lets every destination through when none is healthy.

use std::any::Any;
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

/// Whether `policy` is one of the built-ins here. They tell destinations apart only by
/// [`AvailablePolicyContext::is_excluded`], which a passive health of Unknown or Healthy never
/// sets: a passive change between those two leaves their answer as it was.
pub(crate) fn is_built_in(policy: &dyn AvailableDestinationsPolicy) -> bool {
    let policy: &dyn Any = policy;
    policy.is::<HealthyOrPanic>() || policy.is::<HealthyAndUnknown>()
}

//! `LeastRequests`: the first destination with the strictly smallest number of requests in
//! flight. It reads every count of the group, so it costs O(group size) per pick by definition;
//! what can be made cheap is the reading. Every cluster keeps its counts side by side (see
//! `destination/in_flight.rs`); the policy prepares where they are for each group
//! ([`InFlightCounts`]), and a pick walks them, eight at a time, stopping at the first
//! destination with nothing in flight (see `in_flight_counts.rs`).

use std::sync::Arc;

use super::balancing::{LoadBalancingPolicy, PickContext, Prepared};
use super::in_flight_counts::{first_least, InFlightCounts};
use crate::destination::Destination;

/// The first destination with the fewest requests in flight.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeastRequests;

impl LoadBalancingPolicy for LeastRequests {
    fn prepare(&self, group: &[Arc<Destination>]) -> Prepared {
        Prepared::new(InFlightCounts::of(group))
    }

    #[inline]
    fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
        match ctx.prepared::<InFlightCounts>() {
            Some(counts) => counts.first_least(group),
            // The engine prepares every group it picks from; a context from elsewhere scans.
            None => first_least(group.len(), |i| group[i].in_flight()),
        }
    }
}

//! `LeastRequests`: the first destination with the strictly smallest number of requests in
//! flight. It scans the group, so it costs O(group size) per pick by definition.

use std::sync::Arc;

use super::balancing::{LoadBalancingPolicy, PickContext};
use crate::destination::Destination;

/// The first destination with the fewest requests in flight.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeastRequests;

impl LoadBalancingPolicy for LeastRequests {
    fn pick(&self, _ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
        let mut best = 0;
        let mut least = usize::MAX;
        for (i, d) in group.iter().enumerate() {
            let n = d.in_flight();
            if n < least {
                least = n;
                best = i;
            }
        }
        best
    }
}

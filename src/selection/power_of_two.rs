//! `PowerOfTwoChoices` (the default): two distinct random destinations, the one with fewer
//! requests in flight wins, ties to the first. Mitzenmacher's "power of two choices" gets most of
//! least-loaded balancing's benefit at O(1) cost and without herding on one stale minimum.

use std::sync::Arc;

use super::balancing::{LoadBalancingPolicy, PickContext};
use crate::destination::Destination;

/// Two distinct random indices i != j; fewer in flight wins, ties to i.
#[derive(Debug, Clone, Copy, Default)]
pub struct PowerOfTwoChoices;

impl LoadBalancingPolicy for PowerOfTwoChoices {
    fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
        let (i, j) = ctx.two_random_indices(group.len());
        // A select rather than a branch: under real load the comparison goes either way.
        let j_wins = group[j].in_flight() < group[i].in_flight();
        [i, j][usize::from(j_wins)]
    }
}

//! `PowerOfTwoChoices` (the default): two distinct random destinations, the one with fewer
//! requests in flight wins, ties to the first. Mitzenmacher's "power of two choices" gets most of
//! least-loaded balancing's benefit at O(1) cost and without herding on one stale minimum.
//!
//! In a weighted group the comparison is per unit of weight, as in Envoy's weighted
//! least-request balancer: `j` wins when `w_j / (in_flight_j + 1) > w_i / (in_flight_i + 1)`.

use std::sync::Arc;

use super::balancing::{LoadBalancingPolicy, PickContext, Prepared};
use super::weights;
use crate::destination::Destination;

/// Two distinct random indices i != j; fewer in flight (per unit of weight) wins, ties to i.
#[derive(Debug, Clone, Copy, Default)]
pub struct PowerOfTwoChoices;

/// The group's weights, in group order.
struct Weights(Vec<f64>);

impl LoadBalancingPolicy for PowerOfTwoChoices {
    fn prepare(&self, group: &[Arc<Destination>]) -> Prepared {
        match weights::of(group) {
            Some(weights) => Prepared::new(Weights(weights)),
            None => Prepared::none(),
        }
    }

    fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
        let (i, j) = ctx.two_random_indices(group.len());
        let (load_i, load_j) = (group[i].in_flight(), group[j].in_flight());
        // A select rather than a branch: under real load the comparison goes either way.
        let j_wins = match ctx.prepared::<Weights>() {
            None => load_j < load_i,
            Some(Weights(w)) => w[j] * (load_i as f64 + 1.0) > w[i] * (load_j as f64 + 1.0),
        };
        [i, j][usize::from(j_wins)]
    }
}

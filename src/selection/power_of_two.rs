//! `PowerOfTwoChoices` (the default): two distinct random destinations, the one with fewer
//! requests in flight wins, ties to the first. Mitzenmacher's "power of two choices" gets most of
//! least-loaded balancing's benefit at O(1) cost and without herding on one stale minimum.
//!
//! In a weighted group the first candidate is drawn in proportion to the weights (an alias table
//! prepared once per group) and the second uniformly among the others, and the comparison is
//! per unit of weight: `j` wins when `in_flight_j / w_j < in_flight_i / w_i`, ties to the first.
//! An idle cluster (every count 0, a tie every time) is thus spread in proportion to the
//! weights, and a loaded one balances requests in flight per unit of weight, as Envoy's weighted
//! least-request balancer aims to.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::balancing::{LoadBalancingPolicy, PickContext, Prepared};
use super::weights::{self, AliasTable};
use crate::destination::pick_group::GroupCounts;
use crate::destination::Destination;
use crate::rng::Draws;

/// Two distinct random indices i != j (i by weight in a weighted group); fewer in flight (per
/// unit of weight) wins, ties to i.
#[derive(Debug, Clone, Copy, Default)]
pub struct PowerOfTwoChoices;

/// The group's weights, in group order, and an alias table drawing in proportion to them.
struct Weights {
    weights: Vec<f64>,
    table: AliasTable,
}

impl PowerOfTwoChoices {
    /// The pick of an unweighted group (length >= 2).
    #[inline(always)]
    pub(crate) fn pick_unweighted(rng: Draws<'_>, group: &[Arc<Destination>]) -> usize {
        Self::pick_by(rng, group.len(), |i| group[i].in_flight())
    }

    /// The pick of an unweighted group of `n` (>= 2) destinations whose in-flight counts are
    /// where `counts` says, with the place of the chosen one's count: the two places found for
    /// the comparison serve the handle too, rather than finding the winner's again after it.
    #[inline(always)]
    pub(crate) fn pick_placed(rng: Draws<'_>, n: usize, counts: &GroupCounts) -> (usize, u32) {
        let (i, j) = rng.two_distinct(n);
        let (place_i, place_j) = (counts.place(i), counts.place(j));
        let load = |place| counts.count(place).load(Ordering::Relaxed);
        // A select rather than a branch: under real load the comparison goes either way.
        let j_wins = load(place_j) < load(place_i);
        [(i, place_i), (j, place_j)][usize::from(j_wins)]
    }

    /// The pick of an unweighted group of `n` (>= 2) destinations whose in-flight counts
    /// `in_flight` reads.
    #[inline(always)]
    pub(crate) fn pick_by(rng: Draws<'_>, n: usize, in_flight: impl Fn(usize) -> usize) -> usize {
        let (i, j) = rng.two_distinct(n);
        // A select rather than a branch: under real load the comparison goes either way.
        let j_wins = in_flight(j) < in_flight(i);
        [i, j][usize::from(j_wins)]
    }
}

impl LoadBalancingPolicy for PowerOfTwoChoices {
    fn prepare(&self, group: &[Arc<Destination>]) -> Prepared {
        match weights::of(group) {
            Some(weights) => Prepared::new(Weights {
                table: AliasTable::new(&weights),
                weights,
            }),
            None => Prepared::none(),
        }
    }

    fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
        let Some(Weights { weights: w, table }) = ctx.prepared::<Weights>() else {
            return PowerOfTwoChoices::pick_unweighted(ctx.rng, group);
        };
        let i = table.index(ctx.random_u64());
        let other = ctx.random_index(group.len() - 1);
        let j = other + usize::from(other >= i);
        let (load_i, load_j) = (group[i].in_flight() as f64, group[j].in_flight() as f64);
        let j_wins = load_j * w[i] < load_i * w[j];
        [i, j][usize::from(j_wins)]
    }
}

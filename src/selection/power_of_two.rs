//! `PowerOfTwoChoices` (the default): two distinct random destinations, the one with fewer
//! requests in flight wins, ties to the first. Mitzenmacher's "power of two choices" gets most of
//! least-loaded balancing's benefit at O(1) cost and without herding on one stale minimum.
//!
//! In a weighted group the first candidate is drawn in proportion to the weights (an alias table
//! prepared once per group) and the second uniformly at random among the others, and the
//! comparison is per unit of weight: `j` wins when `in_flight_j / w_j < in_flight_i / w_i`, ties
//! to the first. An idle cluster (every count 0, a tie every time) is thus spread in proportion
//! to the weights, and a loaded one balances requests in flight per unit of weight, as Envoy's
//! weighted least-request balancer aims to.
//!
//! The first candidate's draw is a point of the evenly spread sequence
//! ([`PickView::spread_u64`]), not an independent one, so an idle group follows its weights pick
//! by pick (a destination warming up under slow start follows its ramp second by second, not
//! within the square root of the picks). Under load the comparison decides, and it breaks any
//! pattern the sequence could form with a periodic workload: a destination that got a heavy
//! request loses the comparisons after it.

use super::balancing::{Group, LoadBalancingPolicy, Pick, PickView, Picker};
use super::weights::AliasTable;

/// Two distinct random indices i != j (i by weight in a weighted group); fewer in flight (per
/// unit of weight) wins, ties to i.
#[derive(Debug, Clone, Copy, Default)]
pub struct PowerOfTwoChoices;

/// Picks of a weighted group: the first candidate by weight.
struct Weighted {
    table: AliasTable,
}

impl Pick for Weighted {
    fn pick(&self, view: &PickView<'_>) -> usize {
        let i = self.table.index(view.spread_u64());
        let other = view.random_index(view.len() - 1);
        let j = other + usize::from(other >= i);
        let (load_i, load_j) = (view.in_flight(i) as f64, view.in_flight(j) as f64);
        if load_j * view.weight(i) < load_i * view.weight(j) {
            j
        } else {
            i
        }
    }
}

impl LoadBalancingPolicy for PowerOfTwoChoices {
    fn prepare(&self, group: &Group) -> Picker {
        match group.weights() {
            Some(weights) => Picker::custom(Weighted {
                table: AliasTable::new(weights),
            }),
            None => Picker::TwoChoices,
        }
    }
}

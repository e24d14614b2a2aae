//! `LeastRequests`: the first destination with the strictly smallest number of requests in
//! flight. It reads every count of the group, so it costs O(group size) per pick by definition;
//! nothing is smaller than 0, so the scan stops at the first destination with nothing in
//! flight, and an idle or lightly loaded group costs only as far as its first idle destination.
//!
//! In a weighted group (weights, or a destination warming up under slow start) requests in
//! flight count per unit of weight: the first with the fewest in flight for its weight wins, so
//! a loaded group holds requests in proportion to the weights, as Envoy's weighted
//! least-request balancer does. A destination of weight 0 is taken only when all weigh 0.

use super::balancing::{Group, LoadBalancingPolicy, Pick, PickView, Picker};

/// The first destination with the fewest requests in flight.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeastRequests;

/// Picks of any group: a scan.
struct FirstLeast;

impl Pick for FirstLeast {
    fn pick(&self, view: &PickView<'_>) -> usize {
        let mut best = (usize::MAX, 0);
        for i in 0..view.len() {
            let count = view.in_flight(i);
            if count < best.0 {
                best = (count, i);
                if count == 0 {
                    break;
                }
            }
        }
        best.1
    }
}

/// Picks of a weighted group: a scan for the fewest in flight per unit of weight.
struct FirstLeastPerWeight;

impl Pick for FirstLeastPerWeight {
    fn pick(&self, view: &PickView<'_>) -> usize {
        let mut best = (f64::INFINITY, None);
        for i in 0..view.len() {
            let weight = view.weight(i);
            if weight <= 0.0 {
                continue;
            }
            let load = view.in_flight(i) as f64 / weight;
            if load < best.0 {
                best = (load, Some(i));
                if load == 0.0 {
                    break;
                }
            }
        }
        best.1.unwrap_or(0)
    }
}

impl LoadBalancingPolicy for LeastRequests {
    fn prepare(&self, group: &Group) -> Picker {
        match group.weights() {
            Some(_) => Picker::custom(FirstLeastPerWeight),
            None => Picker::custom(FirstLeast),
        }
    }
}

//! `LeastRequests`: the first destination with the strictly smallest number of requests in
//! flight. It reads every count of the group, so it costs O(group size) per pick by definition;
//! nothing is smaller than 0, so the scan stops at the first destination with nothing in
//! flight, and an idle or lightly loaded group costs only as far as its first idle destination.

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

impl LoadBalancingPolicy for LeastRequests {
    fn prepare(&self, _: &Group) -> Picker {
        Picker::custom(FirstLeast)
    }
}

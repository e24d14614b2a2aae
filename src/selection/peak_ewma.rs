//! `PeakEwma`: two distinct random destinations, the one with the lower expected cost wins,
//! cost = latency estimate x (requests in flight + 1), divided by (1 - utilization) when the
//! destination reports a load that counts. Ties go to the first drawn.
//!
//! This is the balancer of Finagle, linkerd and tower (`p2c` over `PeakEwma`): the latency
//! estimate is a moving average that jumps to any sample above it at once and forgets it with
//! the cluster's decay time, so an instance that turns slow loses its share within a request or
//! two and wins it back as the peak fades, if its answers are fast; multiplying by the requests
//! in flight turns "how fast" into "how long a new request would wait", so a fast instance is
//! not buried either. A server's reported utilization (`endpoint-load-metrics`) adds what the
//! client cannot see: load from other clients. It weighs as a queue does: a server busy a
//! fraction `u` of the time makes a new request wait as if it were `1 / (1 - u)` times slower
//! (M/M/1), so a server at 0.9 costs ten times its latency and one at 0.2 a quarter more. (A
//! factor of `1 + u` would rank them the same way but barely: under load it still sent the one
//! at 0.9 two thirds of the share of the one at 0.2.) Utilization is taken up to 0.99.
//!
//! In a weighted group the first candidate is drawn in proportion to the weights (with a point of
//! the evenly spread sequence) and the second uniformly among the others, and requests in flight
//! count per unit of weight, as in `PowerOfTwoChoices`: cost = latency x (in flight / weight + 1). An idle cluster (every cost
//! a tie when latencies match) is then spread in proportion to the weights, and a loaded one
//! holds requests in proportion to them. The `+ 1` is per unit of weight on purpose: with
//! `(in flight + 1) / weight` the heavier of two idle candidates would win every time, and a
//! destination warming up under slow start (a small weight) would get nothing until the others
//! queued.

use super::balancing::{Group, LoadBalancingPolicy, Pick, PickView, Picker, Signals};
use super::weights::AliasTable;

/// Two random candidates (the first by weight); the lower latency x (in flight per unit of
/// weight + 1) / (1 - utilization) wins, ties to the first.
#[derive(Debug, Clone, Copy, Default)]
pub struct PeakEwma;

/// Picks of a `PeakEwma` group; the alias table of its weights when they differ.
struct PeakEwmaPicker {
    by_weight: Option<AliasTable>,
}

impl PeakEwmaPicker {
    /// The cost of the destination at `index`: its latency estimate in seconds times its
    /// requests in flight (per unit of weight in a weighted group) plus one, over one less its
    /// reported utilization.
    #[inline]
    fn cost(&self, view: &PickView<'_>, index: usize) -> f64 {
        let latency = view.latency_secs(index);
        let in_flight = view.in_flight(index) as f64;
        let queue = match self.by_weight {
            Some(_) => in_flight / view.weight(index) + 1.0,
            None => in_flight + 1.0,
        };
        match view.utilization(index) {
            Some(u) => latency * queue / (1.0 - u.clamp(0.0, 0.99)),
            None => latency * queue,
        }
    }
}

impl Pick for PeakEwmaPicker {
    fn pick(&self, view: &PickView<'_>) -> usize {
        let (i, j) = match &self.by_weight {
            Some(table) => {
                let i = table.index(view.spread_u64());
                let other = view.random_index(view.len() - 1);
                (i, other + usize::from(other >= i))
            }
            None => view.two_random_indices(view.len()),
        };
        // A weightless candidate costs infinity or NaN: it never wins.
        if self.cost(view, j) < self.cost(view, i) {
            j
        } else {
            i
        }
    }
}

impl LoadBalancingPolicy for PeakEwma {
    fn prepare(&self, group: &Group) -> Picker {
        Picker::custom(PeakEwmaPicker {
            by_weight: group.weights().map(AliasTable::new),
        })
    }

    /// Picks read latency and requests in flight: the pick reads the clock, and the handle
    /// times the request from its pick to its report.
    fn signals(&self) -> Signals {
        Signals::LATENCY | Signals::IN_FLIGHT
    }
}

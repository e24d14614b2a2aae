//! `RoundRobin`: a counter advanced only when the policy is consulted; the index is the
//! counter mod the group size. A weighted group cycles through a smooth weighted order instead,
//! built once per change of the group (see `weights.rs`).
//!
//! The counter is each picking thread's own (see [`PickView::next_counter`]): one thread sees
//! 0, 1, 2, ..., and threads together go round the group evenly, each from a start of its own,
//! without writing anything another thread reads.

use super::balancing::{Group, LoadBalancingPolicy, Pick, PickView, Picker, Signals};
use super::weights::round_robin_cycle;

/// Cycles through the group in order, each destination as often as its weight.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobin;

/// One cycle of a weighted group's order.
struct Cycle(Vec<u32>);

impl Pick for Cycle {
    fn pick(&self, view: &PickView<'_>) -> usize {
        self.0[view.next_counter() % self.0.len()] as usize
    }
}

impl LoadBalancingPolicy for RoundRobin {
    fn prepare(&self, group: &Group) -> Picker {
        match group.weights().map(round_robin_cycle) {
            Some(cycle) if !cycle.is_empty() => Picker::custom(Cycle(cycle)),
            _ => Picker::InOrder,
        }
    }

    /// Picks read no load signal.
    fn signals(&self) -> Signals {
        Signals::NONE
    }
}

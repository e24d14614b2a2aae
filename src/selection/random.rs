//! `Random`: a random destination of the group, in proportion to the destinations' weights
//! (uniform when they all weigh the same). The weights become an alias table once per change of
//! the group, so a pick stays O(1): one random draw.

use super::balancing::{Group, LoadBalancingPolicy, Pick, PickView, Picker, Signals};
use super::weights::AliasTable;

/// Random choice, weighted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Random;

impl Pick for AliasTable {
    fn pick(&self, view: &PickView<'_>) -> usize {
        self.index(view.random_u64())
    }
}

impl LoadBalancingPolicy for Random {
    fn prepare(&self, group: &Group) -> Picker {
        match group.weights() {
            Some(weights) => Picker::custom(AliasTable::new(weights)),
            None => Picker::Uniform,
        }
    }

    /// Picks read no load signal.
    fn signals(&self) -> Signals {
        Signals::NONE
    }
}

//! `FirstAlphabetical`: the destination with the smallest id, compared case-insensitively.
//! Deterministic, for tests and for primary/standby setups. The answer changes only when the
//! group does, so it is found once per change and a pick only returns it.
//!
//! Under slow start the first destination takes its slow-start factor's share of the picks
//! (relative to the warmest destination of the group) and hands the rest on to the next in
//! order, which does the same: a primary that comes back takes its traffic back over the
//! window instead of all at once.

use super::balancing::{Group, LoadBalancingPolicy, Pick, PickView, Picker, Signals};
use crate::ids::cmp_ignore_case;

/// The smallest destination id, case-insensitively.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstAlphabetical;

/// Picks of a group whose first destination is warming up: each destination in alphabetical
/// order takes the pick with the probability of its relative slow-start factor.
struct InOrderWhileWarming {
    /// Destination indices in alphabetical order, with the probability each takes a pick that
    /// reached it.
    order: Vec<(usize, f64)>,
}

impl Pick for InOrderWhileWarming {
    fn pick(&self, view: &PickView<'_>) -> usize {
        for &(index, takes) in &self.order {
            // 53 random bits as a fraction in [0, 1).
            if takes >= 1.0 || ((view.random_u64() >> 11) as f64 / (1u64 << 53) as f64) < takes {
                return index;
            }
        }
        self.order.last().map_or(0, |&(index, _)| index)
    }
}

impl LoadBalancingPolicy for FirstAlphabetical {
    fn prepare(&self, group: &Group) -> Picker {
        let ids = group.destinations();
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by(|&a, &b| cmp_ignore_case(ids[a].id(), ids[b].id()).then(a.cmp(&b)));
        let warmest = (0..ids.len())
            .map(|i| group.slow_start_factor(i))
            .fold(0.0, f64::max);
        let takes = |i: usize| group.slow_start_factor(i) / warmest;
        match order.first() {
            Some(&first) if takes(first) < 1.0 => Picker::custom(InOrderWhileWarming {
                order: order.iter().map(|&i| (i, takes(i))).collect(),
            }),
            Some(&first) => Picker::Fixed(first),
            None => Picker::Fixed(0),
        }
    }

    /// Picks read no load signal.
    fn signals(&self) -> Signals {
        Signals::NONE
    }
}

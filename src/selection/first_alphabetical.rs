//! `FirstAlphabetical`: the destination with the smallest id, compared case-insensitively.
//! Deterministic, for tests and for primary/standby setups. The answer changes only when the
//! group does, so it is found once per change and a pick only returns it.

use std::cmp::Ordering;

use super::balancing::{Group, LoadBalancingPolicy, PickView, Picker, Signals};
use crate::ids::cmp_ignore_case;

/// The smallest destination id, case-insensitively.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstAlphabetical;

/// The position of the smallest id in a group.
struct Smallest(usize);

impl Picker for Smallest {
    #[inline]
    fn pick(&self, _: &PickView<'_>) -> usize {
        self.0
    }
}

impl LoadBalancingPolicy for FirstAlphabetical {
    fn prepare(&self, group: &Group) -> Box<dyn Picker> {
        let ids = group.destinations();
        let mut best = 0;
        for i in 1..ids.len() {
            if cmp_ignore_case(ids[i].id(), ids[best].id()) == Ordering::Less {
                best = i;
            }
        }
        Box::new(Smallest(best))
    }

    /// Picks read no load signal.
    fn signals(&self) -> Signals {
        Signals::NONE
    }
}

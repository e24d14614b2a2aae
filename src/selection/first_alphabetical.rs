//! `FirstAlphabetical`: the destination with the smallest id, compared case-insensitively.
//! Deterministic, for tests and for primary/standby setups. The answer changes only when the
//! group does, so it is found once per change and a pick only returns it.

use std::cmp::Ordering;

use super::balancing::{Group, LoadBalancingPolicy, Picker, Signals};
use crate::ids::cmp_ignore_case;

/// The smallest destination id, case-insensitively.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstAlphabetical;

impl LoadBalancingPolicy for FirstAlphabetical {
    fn prepare(&self, group: &Group) -> Picker {
        let ids = group.destinations();
        let mut best = 0;
        for i in 1..ids.len() {
            if cmp_ignore_case(ids[i].id(), ids[best].id()) == Ordering::Less {
                best = i;
            }
        }
        Picker::Fixed(best)
    }

    /// Picks read no load signal.
    fn signals(&self) -> Signals {
        Signals::NONE
    }
}

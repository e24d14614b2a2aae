//! `FirstAlphabetical`: the destination with the smallest id, compared case-insensitively.
//! Deterministic, for tests and for primary/standby setups. The answer changes only when the
//! group does, so it is found once per change (the policy's preparation step) and a pick only
//! reads it.

use std::cmp::Ordering;
use std::sync::Arc;

use super::balancing::{LoadBalancingPolicy, PickContext, Prepared};
use crate::destination::Destination;
use crate::ids::cmp_ignore_case;

/// The smallest destination id, case-insensitively.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstAlphabetical;

/// The position of the smallest id in a group.
struct Smallest(usize);

fn smallest(group: &[Arc<Destination>]) -> usize {
    let mut best = 0;
    for i in 1..group.len() {
        if cmp_ignore_case(group[i].id(), group[best].id()) == Ordering::Less {
            best = i;
        }
    }
    best
}

impl LoadBalancingPolicy for FirstAlphabetical {
    fn prepare(&self, group: &[Arc<Destination>]) -> Prepared {
        Prepared::new(Smallest(smallest(group)))
    }

    fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
        // The engine prepares every group it picks from; a context from elsewhere scans.
        ctx.prepared::<Smallest>()
            .map_or_else(|| smallest(group), |s| s.0)
    }
}

//! `RoundRobin`: one counter per cluster, starting at 0 and advanced only when the policy is
//! consulted; the index is counter mod group size. A weighted group cycles through a
//! smooth weighted order instead, built once per change of the group (see `weights.rs`).

use std::sync::Arc;

use super::balancing::{LoadBalancingPolicy, PickContext, Prepared};
use super::weights;
use crate::destination::Destination;

/// Cycles through the group in order, each destination as often as its weight.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobin;

/// One cycle of a weighted group's order.
struct Cycle(Vec<u32>);

impl RoundRobin {
    /// The pick of an unweighted group of `n` (>= 2) at counter value `counter`: the counter
    /// mod `n`.
    #[inline(always)]
    pub(crate) fn pick_unweighted(counter: usize, n: usize) -> usize {
        counter % n
    }
}

impl LoadBalancingPolicy for RoundRobin {
    fn prepare(&self, group: &[Arc<Destination>]) -> Prepared {
        match weights::of(group) {
            Some(weights) => Prepared::new(Cycle(weights::round_robin_cycle(&weights))),
            None => Prepared::none(),
        }
    }

    fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
        match ctx.prepared::<Cycle>() {
            Some(Cycle(cycle)) if !cycle.is_empty() => {
                cycle[ctx.next_counter() % cycle.len()] as usize
            }
            _ => RoundRobin::pick_unweighted(ctx.next_counter(), group.len()),
        }
    }
}

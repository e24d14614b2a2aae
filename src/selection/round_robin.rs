//! `RoundRobin`: one counter per cluster, starting at 0 and advanced only when the policy is
//! consulted; the index is counter mod group size.

use std::sync::Arc;

use super::balancing::{LoadBalancingPolicy, PickContext};
use crate::destination::Destination;

/// Cycles through the group in order.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobin;

impl LoadBalancingPolicy for RoundRobin {
    fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
        ctx.next_counter() % group.len()
    }
}

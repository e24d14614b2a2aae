//! `Random`: a uniformly random destination of the group.

use std::sync::Arc;

use super::balancing::{LoadBalancingPolicy, PickContext};
use crate::destination::Destination;

/// Uniform random choice.
#[derive(Debug, Clone, Copy, Default)]
pub struct Random;

impl LoadBalancingPolicy for Random {
    fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
        ctx.random_index(group.len())
    }
}

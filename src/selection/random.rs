//! `Random`: a random destination of the group, in proportion to the destinations' weights
//! (uniform when they all weigh the same). The weights become an alias table once per change of
//! the group, so a pick stays O(1): one random draw.

use std::sync::Arc;

use super::balancing::{LoadBalancingPolicy, PickContext, Prepared};
use super::weights::{self, AliasTable};
use crate::destination::Destination;
use crate::rng::Draws;

/// Random choice, weighted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Random;

impl Random {
    /// The pick of an unweighted group of `n` (>= 2): one uniform index.
    #[inline(always)]
    pub(crate) fn pick_unweighted(rng: Draws<'_>, n: usize) -> usize {
        rng.index(n)
    }
}

impl LoadBalancingPolicy for Random {
    fn prepare(&self, group: &[Arc<Destination>]) -> Prepared {
        match weights::of(group) {
            Some(weights) => Prepared::new(AliasTable::new(&weights)),
            None => Prepared::none(),
        }
    }

    fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
        match ctx.prepared::<AliasTable>() {
            Some(table) => table.index(ctx.random_u64()),
            None => Random::pick_unweighted(ctx.rng, group.len()),
        }
    }
}

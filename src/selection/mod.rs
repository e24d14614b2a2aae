//! Best-endpoint selection (SPEC §6): keep the best health class, then the lowest tier, then let
//! the cluster's load-balancing policy pick inside that group.
//!
//! The group is computed when health or config changes and published in the cluster snapshot;
//! a pick only reads it. Each built-in policy has its own file.

mod first_alphabetical;
mod least_requests;
mod power_of_two;
mod random;
mod round_robin;

pub use first_alphabetical::FirstAlphabetical;
pub use least_requests::LeastRequests;
pub use power_of_two::PowerOfTwoChoices;
pub use random::Random;
pub use round_robin::RoundRobin;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::destination::Destination;
use crate::health::{AvailablePolicyContext, HealthClass, ReportedHealth};
use crate::rng::RandomSource;

/// Picks one destination out of a best group (YARP's `ILoadBalancingPolicy`).
///
/// Called on every request with a group of two or more destinations: no locks, no allocation,
/// no I/O. An index out of range is wrapped into range rather than trusted.
///
/// ```
/// use healthpick::selection::{LoadBalancingPolicy, PickContext};
/// use healthpick::Destination;
/// use std::sync::Arc;
///
/// /// Always the last destination of the group.
/// struct Last;
/// impl LoadBalancingPolicy for Last {
///     fn pick(&self, _ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
///         group.len() - 1
///     }
/// }
/// ```
pub trait LoadBalancingPolicy: Send + Sync + 'static {
    /// The index in `group` (length >= 2) of the destination to use.
    fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize;
}

/// Per-pick services for load-balancing policies: the engine's random source and the cluster's
/// counter.
pub struct PickContext<'a> {
    pub(crate) rng: &'a RandomSource,
    pub(crate) counter: &'a AtomicUsize,
}

impl std::fmt::Debug for PickContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PickContext")
            .field("counter", &self.counter.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl PickContext<'_> {
    /// A uniform random index in `0..n` (`n` > 0), from the engine's (possibly seeded) source.
    #[inline]
    pub fn random_index(&self, n: usize) -> usize {
        self.rng.index(n)
    }

    /// Two distinct uniform random indices in `0..n` (`n` >= 2).
    #[inline]
    pub fn two_random_indices(&self, n: usize) -> (usize, usize) {
        self.rng.two_distinct(n)
    }

    /// The cluster's counter (starts at 0), advanced by one: for round-robin style policies.
    #[inline]
    pub fn next_counter(&self) -> usize {
        self.counter.fetch_add(1, Ordering::Relaxed)
    }
}

/// The health class of an available destination (SPEC §6).
pub(crate) fn class_of(ctx: &AvailablePolicyContext<'_>, d: &Destination) -> HealthClass {
    if ctx.is_excluded(d) {
        HealthClass::Unhealthy
    } else {
        match d.health().reported {
            Some(ReportedHealth::Degraded) | Some(ReportedHealth::Unhealthy) => {
                HealthClass::Degraded
            }
            _ => HealthClass::Healthy,
        }
    }
}

/// The best group among `available`: best health class, then lowest tier; with the class.
pub(crate) fn best_group(
    ctx: &AvailablePolicyContext<'_>,
    available: &[Arc<Destination>],
) -> (Vec<Arc<Destination>>, Option<HealthClass>) {
    let classed: Vec<(HealthClass, &Arc<Destination>)> =
        available.iter().map(|d| (class_of(ctx, d), d)).collect();
    let Some(best) = classed.iter().map(|(c, _)| *c).min() else {
        return (Vec::new(), None);
    };
    let tier = classed
        .iter()
        .filter(|(c, _)| *c == best)
        .map(|(_, d)| d.info.tier)
        .min()
        .unwrap_or(0);
    let group = classed
        .into_iter()
        .filter(|(c, d)| *c == best && d.info.tier == tier)
        .map(|(_, d)| d.clone())
        .collect();
    (group, Some(best))
}

/// The best group among `available` once the destinations `exclude` names are set aside: for
/// retries, which move to the next best destination of the same tier, then to the next tier.
pub(crate) fn best_group_excluding<S: AsRef<str>>(
    ctx: &AvailablePolicyContext<'_>,
    available: &[Arc<Destination>],
    exclude: &[S],
) -> Vec<Arc<Destination>> {
    let remaining: Vec<Arc<Destination>> = available
        .iter()
        .filter(|d| {
            !exclude
                .iter()
                .any(|e| crate::config::eq_ignore_case(e.as_ref(), &d.info.id))
        })
        .cloned()
        .collect();
    best_group(ctx, &remaining).0
}

//! The best group: among the available destinations, the best health class present,
//! then within it the lowest tier. Computed when health or destinations change, never per pick.

use std::sync::Arc;

use crate::destination::Destination;
use crate::health::state::{DiscoveryHealth, HealthClass, ReportedHealth};
use crate::ids::eq_ignore_case;
use crate::policy::available::AvailablePolicyContext;

/// The health class of an available destination.
pub(crate) fn class_of(ctx: &AvailablePolicyContext<'_>, d: &Destination) -> HealthClass {
    if ctx.is_excluded(d) {
        return HealthClass::Unhealthy;
    }
    let health = d.health();
    match (health.reported, health.discovery) {
        (Some(ReportedHealth::Degraded) | Some(ReportedHealth::Unhealthy), _)
        | (_, DiscoveryHealth::Draining) => HealthClass::Degraded,
        // Its most recent probe failed (suspect ranking).
        _ if ctx.is_suspect(d) => HealthClass::Degraded,
        _ => HealthClass::Healthy,
    }
}

/// Within a class, while the cluster's first probes are running, a destination still waiting
/// for its first result ranks after those already probed successfully (the warm-up).
fn waits_for_first_probe(ctx: &AvailablePolicyContext<'_>, d: &Destination) -> bool {
    ctx.is_unverified(d)
}

/// How good a destination is, best first: health class, then (while the first probes run)
/// whether it still waits for its first result, then tier.
type Rank = (HealthClass, bool, u32);

/// The best group among `available`: best health class, then lowest tier; with the class. A
/// destination of weight 0 is in it only when the group has no other (weight 0 means
/// "only when nothing else is left").
pub(crate) fn best_group(
    ctx: &AvailablePolicyContext<'_>,
    available: &[Arc<Destination>],
) -> (Vec<Arc<Destination>>, Option<HealthClass>) {
    let ranked: Vec<(Rank, &Arc<Destination>)> = available
        .iter()
        .map(|d| {
            (
                (class_of(ctx, d), waits_for_first_probe(ctx, d), d.tier()),
                d,
            )
        })
        .collect();
    let Some(best) = ranked.iter().map(|(rank, _)| *rank).min() else {
        return (Vec::new(), None);
    };
    let mut group: Vec<Arc<Destination>> = ranked
        .into_iter()
        .filter(|(rank, _)| *rank == best)
        .map(|(_, d)| d.clone())
        .collect();
    if group.iter().any(|d| d.weight() > 0.0) {
        group.retain(|d| d.weight() > 0.0);
    }
    (group, Some(best.0))
}

/// Where the best group spills under load: the available destinations that rank as `best` (a
/// member of the best group) does but for their tier, in the next tier after its, with the same
/// rule for weight 0 as the best group. Empty when there is no such tier: spill never sends
/// traffic to a worse health class.
pub(crate) fn next_tier_group(
    ctx: &AvailablePolicyContext<'_>,
    available: &[Arc<Destination>],
    best: &Destination,
) -> Vec<Arc<Destination>> {
    let rank = |d: &Destination| (class_of(ctx, d), waits_for_first_probe(ctx, d));
    let best_rank = rank(best);
    let candidates: Vec<&Arc<Destination>> = available
        .iter()
        .filter(|d| d.tier() > best.tier() && rank(d) == best_rank)
        .collect();
    let Some(next) = candidates.iter().map(|d| d.tier()).min() else {
        return Vec::new();
    };
    let mut group: Vec<Arc<Destination>> = candidates
        .into_iter()
        .filter(|d| d.tier() == next)
        .cloned()
        .collect();
    if group.iter().any(|d| d.weight() > 0.0) {
        group.retain(|d| d.weight() > 0.0);
    }
    group
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
        .filter(|d| !exclude.iter().any(|e| eq_ignore_case(e.as_ref(), d.id())))
        .cloned()
        .collect();
    best_group(ctx, &remaining).0
}

//! The load-balancing extension point: a policy picks one destination of a best group
//! on every request, from what it prepared once when the group last changed.

use std::any::Any;
use std::sync::Arc;

use crate::destination::Destination;
use crate::rng::Draws;

/// Picks one destination out of a best group (YARP's `ILoadBalancingPolicy`).
///
/// [`pick`](Self::pick) runs on every request with a group of two or more destinations: no locks,
/// no allocation, no I/O. An index out of range is wrapped into range rather than trusted.
/// [`prepare`](Self::prepare) runs when the group changes (a health or destination change, never
/// on the request path): whatever a policy can compute from the group alone — weights, an order,
/// the first destination by name — belongs there, and `pick` reads it with
/// [`PickContext::prepared`].
///
/// ```
/// use healthpick::selection::{LoadBalancingPolicy, PickContext, Prepared};
/// use healthpick::Destination;
/// use std::sync::Arc;
///
/// /// Always the destination with the highest weight (the first of them), found once per change.
/// struct Heaviest;
/// struct Index(usize);
/// impl LoadBalancingPolicy for Heaviest {
///     fn prepare(&self, group: &[Arc<Destination>]) -> Prepared {
///         let heaviest = (0..group.len())
///             .rev()
///             .max_by(|&a, &b| group[a].weight().total_cmp(&group[b].weight()))
///             .unwrap_or(0);
///         Prepared::new(Index(heaviest))
///     }
///     fn pick(&self, ctx: &PickContext<'_>, _group: &[Arc<Destination>]) -> usize {
///         ctx.prepared::<Index>().map_or(0, |index| index.0)
///     }
/// }
/// ```
///
/// (`Any` is implied by `'static`: it lets the engine recognise its own built-in policies and call
/// them in place; a custom policy is always called through [`pick`](Self::pick).)
pub trait LoadBalancingPolicy: Any + Send + Sync + 'static {
    /// What [`pick`](Self::pick) needs for `group`, computed once per change of the group (and
    /// for each group a retry picks from). Default: nothing.
    fn prepare(&self, group: &[Arc<Destination>]) -> Prepared {
        let _ = group;
        Prepared::none()
    }

    /// The index in `group` (length >= 2) of the destination to use.
    fn pick(&self, ctx: &PickContext<'_>, group: &[Arc<Destination>]) -> usize;

    /// Whether [`pick`](Self::pick) reads the in-flight count of every destination of the
    /// group, as `LeastRequests` does. It changes nothing any more: every cluster keeps its
    /// destinations' counts side by side in one array (so that a pick writes only a count
    /// and its thread's own ticket), which an
    /// [`InFlightCounts`](super::InFlightCounts) prepared for the group reads at 4 bytes per
    /// destination. Kept so that policies that say it still compile.
    #[deprecated(note = "every cluster keeps its in-flight counts side by side; this is ignored")]
    fn reads_every_count(&self) -> bool {
        false
    }
}

/// What a load-balancing policy prepared for one group (see
/// [`LoadBalancingPolicy::prepare`]).
#[derive(Default)]
pub struct Prepared(Option<Box<dyn Any + Send + Sync>>);

impl Prepared {
    /// Nothing prepared.
    pub fn none() -> Self {
        Prepared(None)
    }

    /// `value`, for [`PickContext::prepared`] to hand back on every pick from this group.
    pub fn new<T: Any + Send + Sync>(value: T) -> Self {
        Prepared(Some(Box::new(value)))
    }

    /// Whether nothing was prepared.
    pub(crate) fn is_none(&self) -> bool {
        self.0.is_none()
    }

    pub(crate) fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_ref()?.downcast_ref()
    }
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Prepared(..)"
        } else {
            "Prepared(none)"
        })
    }
}

/// Per-pick services for load-balancing policies: the engine's random source, the cluster's
/// round-robin counter, and what the policy prepared for the group.
pub struct PickContext<'a> {
    pub(crate) rng: Draws<'a>,
    pub(crate) counter: &'a dyn Fn() -> usize,
    pub(crate) prepared: &'a Prepared,
}

impl std::fmt::Debug for PickContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PickContext")
            .field("prepared", self.prepared)
            .finish_non_exhaustive()
    }
}

impl PickContext<'_> {
    /// A uniform random index in `0..n` (`n` > 0), from the engine's (possibly seeded) source.
    #[inline]
    pub fn random_index(&self, n: usize) -> usize {
        self.rng.index(n)
    }

    /// 64 random bits from the engine's (possibly seeded) source.
    #[inline]
    pub fn random_u64(&self) -> u64 {
        self.rng.next_u64()
    }

    /// Two distinct uniform random indices in `0..n` (`n` >= 2).
    #[inline]
    pub fn two_random_indices(&self, n: usize) -> (usize, usize) {
        self.rng.two_distinct(n)
    }

    /// The cluster's round-robin counter, advanced by one: 0, 1, 2, ... for a single thread.
    /// Each thread counts on its own (no shared write on the pick path), from 0 for the first
    /// thread that picks from the cluster and from its own offset for every other, so threads
    /// together still spread evenly.
    #[inline]
    pub fn next_counter(&self) -> usize {
        (self.counter)()
    }

    /// What the policy's [`prepare`](LoadBalancingPolicy::prepare) returned for this group, if it
    /// was a `T`.
    #[inline]
    pub fn prepared<T: Any>(&self) -> Option<&T> {
        self.prepared.get()
    }
}

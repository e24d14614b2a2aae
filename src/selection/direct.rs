//! Built-in policies called in place. For an unweighted group, the engine runs Random's,
//! PowerOfTwoChoices' and RoundRobin's pick as a direct call the compiler can inline into the
//! pick path, instead of a call through the policy object (a dynamic call, and a check of what
//! was prepared). Same code, same random draws, same answers: only the call changes. Which one
//! applies is decided once per group, when the group is prepared; a custom policy registered
//! under a built-in's name is a different type and is always called through its object.

use std::any::Any;

use super::balancing::{LoadBalancingPolicy, PickContext, Prepared};
use super::first_alphabetical::FirstAlphabetical;
use super::least_requests::LeastRequests;
use super::power_of_two::PowerOfTwoChoices;
use super::random::Random;
use super::round_robin::RoundRobin;
use super::round_robin_counter::Cursor;
use crate::destination::handle::Ticket;
use crate::destination::in_flight::Layout;
use crate::rng::Draws;

/// How picks from one prepared group are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direct {
    /// Random over an unweighted group.
    Random,
    /// PowerOfTwoChoices over an unweighted group.
    PowerOfTwoChoices,
    /// RoundRobin over an unweighted group.
    RoundRobin,
    /// Through the policy object: custom policies, weighted groups, the other built-ins.
    Policy,
}

impl Direct {
    /// How picks by `policy` from a group it prepared `prepared` for are made.
    pub fn of(policy: &dyn LoadBalancingPolicy, prepared: &Prepared) -> Direct {
        if !prepared.is_none() {
            return Direct::Policy;
        }
        let policy: &dyn Any = policy;
        if policy.is::<Random>() {
            Direct::Random
        } else if policy.is::<PowerOfTwoChoices>() {
            Direct::PowerOfTwoChoices
        } else if policy.is::<RoundRobin>() {
            Direct::RoundRobin
        } else {
            Direct::Policy
        }
    }

    /// The index `policy` picks in the group `ticket` holds (length `n` >= 2), with `rng`'s
    /// draws, the round-robin `cursor` and what was `prepared` for the group, and the place of
    /// its in-flight count (`GroupCounts::place`; PowerOfTwoChoices has it at hand already).
    /// The context a policy object gets is built only for a call through the object.
    #[inline(always)]
    pub fn pick(
        self,
        policy: &dyn LoadBalancingPolicy,
        rng: Draws<'_>,
        cursor: &impl Cursor,
        prepared: &Prepared,
        ticket: &Ticket,
        n: usize,
    ) -> (usize, u32) {
        let counts = ticket.counts();
        let index = match self {
            Direct::Random => Random::pick_unweighted(rng, n),
            // The counts read straight from the pool, not through the destinations.
            Direct::PowerOfTwoChoices => return PowerOfTwoChoices::pick_placed(rng, n, counts),
            // The thread's own counter (`round_robin_counter.rs`).
            Direct::RoundRobin => {
                let index = cursor.index(n);
                return (index, counts.round_robin_place(index));
            }
            Direct::Policy => {
                let i = policy.pick(
                    &PickContext {
                        rng,
                        counter: &|| cursor.next(),
                        prepared,
                    },
                    ticket.group(),
                );
                // Custom policies may answer out of range; `%` only then (it costs a division).
                if i < n {
                    i
                } else {
                    i % n
                }
            }
        };
        (index, counts.place(index))
    }
}

/// Whether `policy` is one of the five built-in load balancers, whose
/// [`prepare`](LoadBalancingPolicy::prepare) reads the group's ids and weights and never its
/// health (a custom policy's may).
pub(crate) fn is_built_in(policy: &dyn LoadBalancingPolicy) -> bool {
    let policy: &dyn Any = policy;
    policy.is::<PowerOfTwoChoices>()
        || policy.is::<RoundRobin>()
        || policy.is::<LeastRequests>()
        || policy.is::<Random>()
        || policy.is::<FirstAlphabetical>()
}

/// How the in-flight counts of a cluster that `policy` balances are laid out in its pool: spread
/// for the policies that write counts at random places (Random and PowerOfTwoChoices, weighted
/// or not), alternate for RoundRobin, compact for the others (see [`Layout`]). Chosen when the
/// cluster is created; a reload that changes the policy keeps the layout (picks are the same
/// either way).
pub(crate) fn count_layout(policy: &dyn LoadBalancingPolicy) -> Layout {
    let policy: &dyn Any = policy;
    if policy.is::<Random>() || policy.is::<PowerOfTwoChoices>() {
        Layout::Spread
    } else if policy.is::<RoundRobin>() {
        Layout::Alternate
    } else {
        Layout::Compact
    }
}

#[cfg(test)]
mod tests {
    use super::{count_layout, Direct};
    use crate::destination::in_flight::Layout;
    use crate::selection::balancing::{LoadBalancingPolicy, PickContext, Prepared};
    use crate::selection::{
        FirstAlphabetical, LeastRequests, PowerOfTwoChoices, Random, RoundRobin,
    };
    use crate::Destination;
    use std::sync::Arc;

    /// A custom policy: always the last destination.
    struct Last;
    impl LoadBalancingPolicy for Last {
        fn pick(&self, _: &PickContext<'_>, group: &[Arc<Destination>]) -> usize {
            group.len() - 1
        }
    }

    #[test]
    fn only_unprepared_built_ins_are_called_in_place() {
        let none = Prepared::none();
        assert_eq!(Direct::of(&Random, &none), Direct::Random);
        assert_eq!(
            Direct::of(&PowerOfTwoChoices, &none),
            Direct::PowerOfTwoChoices
        );
        assert_eq!(Direct::of(&RoundRobin, &none), Direct::RoundRobin);
        assert_eq!(Direct::of(&LeastRequests, &none), Direct::Policy);
        assert_eq!(Direct::of(&FirstAlphabetical, &none), Direct::Policy);
        assert_eq!(Direct::of(&Last, &none), Direct::Policy);
        // A weighted group's preparation sends every pick through the policy.
        assert_eq!(Direct::of(&Random, &Prepared::new(7u32)), Direct::Policy);
    }

    #[test]
    fn the_policies_that_count_at_random_places_spread_their_counts() {
        assert_eq!(count_layout(&Random), Layout::Spread);
        assert_eq!(count_layout(&PowerOfTwoChoices), Layout::Spread);
        assert_eq!(count_layout(&RoundRobin), Layout::Alternate);
        assert_eq!(count_layout(&LeastRequests), Layout::Compact);
        assert_eq!(count_layout(&FirstAlphabetical), Layout::Compact);
        assert_eq!(count_layout(&Last), Layout::Compact);
    }
}

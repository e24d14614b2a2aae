//! The handle a pick returns: the chosen destination, counted in flight until the
//! handle is dropped, and the way its request's outcome reaches passive health checks.
//!
//! A handle keeps its destination alive through a [`Ticket`]: the picking thread's own reference
//! to the group it picked from, one per thread and group. Taking a handle thus writes the
//! ticket's reference count, a cache line only that thread writes, and the destination's
//! in-flight count in its cluster's pool (see `in_flight.rs`); it never writes the
//! destination's own memory, so picks of one destination from several threads do not move its
//! block between cores, and a pick at 10,000 destinations does not miss on it.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use url::Url;

use super::pick_group::{GroupCounts, PickGroup};
use super::Destination;
use crate::health::outcome::RequestOutcome;

/// One thread's reference to a group it picks from: what the handles it takes there hold. It
/// keeps its own copy of where the group's counts are, so that a pick and a drop reach a count
/// in as few steps as they reached a destination before.
pub(crate) struct Ticket {
    counts: GroupCounts,
    group: Arc<PickGroup>,
}

impl Ticket {
    /// A ticket to `group` (one per thread and group; a retry's group gets its own).
    #[cold]
    pub fn new(group: Arc<PickGroup>) -> Arc<Ticket> {
        Arc::new(Ticket {
            counts: group.counts().clone(),
            group,
        })
    }

    /// The group it holds.
    #[inline]
    pub fn group(&self) -> &Arc<PickGroup> {
        &self.group
    }

    /// Where the group's counts are.
    #[inline(always)]
    pub fn counts(&self) -> &GroupCounts {
        &self.counts
    }
}

/// What [`Engine::pick_endpoint`](crate::Engine::pick_endpoint) returns: the chosen destination,
/// counted in flight until this handle is dropped.
///
/// Report how the request went with [`report`](Self::report) so that passive health checks see
/// it. Keep the handle alive for the whole exchange, including reading the body, so that
/// LeastRequests and PowerOfTwoChoices see real load.
#[must_use = "the destination counts as in flight until the handle is dropped"]
pub struct PickHandle {
    ticket: Arc<Ticket>,
    /// The destination's position in the ticket's group (groups are far below 2^32) in the
    /// high half, where it counts in flight (the group's place for it) in the low half: one
    /// word, written and read whole (see `engine/pick.rs`, `Picked`).
    slot: u64,
}

impl PickHandle {
    /// Counts the destination at `index` of `ticket`'s group in flight, at `place`, where the
    /// group keeps its count (`GroupCounts::place(index)`).
    #[inline]
    pub(crate) fn new(ticket: &Arc<Ticket>, index: usize, place: u32) -> Self {
        debug_assert_eq!(place, ticket.counts.place(index));
        ticket.counts.count(place).fetch_add(1, Ordering::Relaxed);
        let handle = PickHandle {
            ticket: ticket.clone(),
            slot: (index as u64) << 32 | u64::from(place),
        };
        #[cfg(feature = "metrics")]
        {
            let metrics = handle.arc().metrics();
            metrics.picks.increment(1);
            metrics.in_flight.increment(1.0);
        }
        handle
    }

    /// A handle counting `destination` in flight, taken outside a pick (a group of its own).
    pub(crate) fn of(destination: Arc<Destination>) -> Self {
        let ticket = Ticket::new(Arc::new(PickGroup::new(vec![destination])));
        let place = ticket.counts.place(0);
        PickHandle::new(&ticket, 0, place)
    }

    #[inline]
    fn arc(&self) -> &Arc<Destination> {
        &self.ticket.group[(self.slot >> 32) as usize]
    }

    /// The picked destination.
    pub fn destination(&self) -> &Destination {
        self.arc()
    }

    /// The picked destination's base URL.
    pub fn address(&self) -> &Url {
        self.destination().address()
    }

    /// The URL of `path_and_query` on the picked destination, joined as the wrapped client and
    /// the probes join it: the base URL's own path is kept (`http://h/v1/` and `/api/orders`
    /// give `http://h/v1/api/orders`, where `Url::join` would drop `/v1`). See
    /// [`Destination::url`].
    pub fn url(&self, path_and_query: &str) -> Url {
        self.destination().url(path_and_query)
    }

    /// A shared reference to the picked destination, for callers that keep it past the handle.
    pub fn destination_arc(&self) -> Arc<Destination> {
        self.arc().clone()
    }

    /// Reports the request's outcome to the cluster's passive health policy, if passive checks
    /// are enabled. Call it once per request. It never blocks on I/O; a health change it causes
    /// is applied before it returns. Outcomes of a destination that has left its cluster count
    /// for nothing.
    pub fn report(&self, outcome: RequestOutcome) {
        self.arc().report(outcome);
    }
}

impl Drop for PickHandle {
    #[inline]
    fn drop(&mut self) {
        self.ticket
            .counts
            .count(self.slot as u32)
            .fetch_sub(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.arc().metrics().in_flight.decrement(1.0);
    }
}

impl fmt::Debug for PickHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PickHandle")
            .field(self.destination())
            .finish()
    }
}

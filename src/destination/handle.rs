//! The handle a pick returns: the chosen destination, counted in flight until the
//! handle is dropped, and the way its request's outcome reaches passive health checks.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use url::Url;

use super::Destination;
use crate::health::outcome::RequestOutcome;

/// What [`Engine::pick_endpoint`](crate::Engine::pick_endpoint) returns: the chosen destination,
/// counted in flight until this handle is dropped.
///
/// Report how the request went with [`report`](Self::report) so that passive health checks see
/// it. Keep the handle alive for the whole exchange, including reading the body, so that
/// LeastRequests and PowerOfTwoChoices see real load.
#[must_use = "the destination counts as in flight until the handle is dropped"]
pub struct PickHandle {
    destination: Arc<Destination>,
}

impl PickHandle {
    #[inline]
    pub(crate) fn new(destination: Arc<Destination>) -> Self {
        destination.in_flight.cell().fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        {
            let metrics = destination.metrics();
            metrics.picks.increment(1);
            metrics.in_flight.increment(1.0);
        }
        PickHandle { destination }
    }

    /// The picked destination.
    pub fn destination(&self) -> &Destination {
        &self.destination
    }

    /// The picked destination's base URL.
    pub fn address(&self) -> &Url {
        self.destination.address()
    }

    /// The URL of `path_and_query` on the picked destination, joined as the wrapped client and
    /// the probes join it: the base URL's own path is kept (`http://h/v1/` and `/api/orders`
    /// give `http://h/v1/api/orders`, where `Url::join` would drop `/v1`). See
    /// [`Destination::url`].
    pub fn url(&self, path_and_query: &str) -> Url {
        self.destination.url(path_and_query)
    }

    /// A shared reference to the picked destination, for callers that keep it past the handle.
    pub fn destination_arc(&self) -> Arc<Destination> {
        self.destination.clone()
    }

    /// Reports the request's outcome to the cluster's passive health policy, if passive checks
    /// are enabled. Call it once per request. It never blocks on I/O; a health change it causes
    /// is applied before it returns. Outcomes of a destination that has left its cluster count
    /// for nothing.
    pub fn report(&self, outcome: RequestOutcome) {
        self.destination.report(outcome);
    }
}

impl Drop for PickHandle {
    fn drop(&mut self) {
        self.destination
            .in_flight
            .cell()
            .fetch_sub(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.destination.metrics().in_flight.decrement(1.0);
    }
}

impl fmt::Debug for PickHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PickHandle")
            .field(&self.destination)
            .finish()
    }
}

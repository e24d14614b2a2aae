//! The failover step (SPEC §8), the one place that decides, attempt by attempt, where a call
//! goes: the first destination (waiting for the cluster's first probe round when due), and after
//! an attempt that failed before any response, whether the call goes on and to which destination
//! — the next best of the same tier, then the next tier, never one already tried, within the
//! attempt count and the cluster's retry budget. The wrapped client and the middleware both
//! drive it, so they behave alike.

use std::sync::Arc;

use super::retry::{AttemptCount, Retries};
use crate::destination::handle::PickHandle;
use crate::destination::Destination;
use crate::engine::Engine;
use crate::error::PickError;
use crate::health::outcome::RequestOutcome;

/// One call's way through a cluster's destinations.
#[derive(Debug)]
pub(crate) struct Failover<'a> {
    engine: &'a Engine,
    retries: &'a Retries,
    cluster: &'a str,
    count: AttemptCount,
    /// Destination ids tried so far, in order.
    tried: Vec<String>,
}

impl<'a> Failover<'a> {
    /// Starts a call of `cluster`: picks its first destination and counts the call in the
    /// cluster's budget. Only the first calls of a cluster with active checks wait, for its first
    /// probe round; that rare wait is boxed, so every call's future stays small.
    pub async fn start(
        engine: &'a Engine,
        retries: &'a Retries,
        cluster: &'a str,
        retryable: bool,
    ) -> Result<(Failover<'a>, PickHandle), PickError> {
        let pick = match engine.pick_endpoint_if_ready(cluster) {
            Some(pick) => pick?,
            None => Box::pin(engine.pick_endpoint_ready(cluster)).await?,
        };
        // After the first pick succeeded, so unknown cluster names leave no budget behind.
        retries.deposit(cluster);
        let failover = Failover {
            engine,
            retries,
            cluster,
            count: AttemptCount::new(&retries.policy, retryable),
            tried: Vec::new(),
        };
        Ok((failover, pick))
    }

    /// An attempt to `failed` ended before any response (`connect`: it never connected, so
    /// nothing was sent): the destination to try next, if the retry policy, the untried
    /// destinations and the budget allow one. Out of line and cold: a call that succeeds never
    /// runs it.
    #[cold]
    #[inline(never)]
    pub fn next(&mut self, failed: &Destination, connect: bool) -> Option<PickHandle> {
        let go_on = self.count.failed(connect);
        self.tried.push(failed.id().to_string());
        tracing::debug!(target: "healthpick", cluster = %self.cluster, destination = %failed.id(), connect, retry = go_on, "attempt failed before any response");
        if !go_on {
            return None;
        }
        // Pick before withdrawing, so that a call with no destination left spends no token.
        let next = self
            .engine
            .pick_endpoint_excluding(self.cluster, &self.tried)
            .ok()?;
        if !self.retries.withdraw(self.cluster) {
            tracing::debug!(target: "healthpick", cluster = %self.cluster, "retry budget exhausted");
            return None;
        }
        Some(next)
    }
}

/// One attempt in flight: reports `Cancelled` (a success, SPEC §4) if the caller drops the call
/// before it finished.
pub(crate) struct Attempt {
    pick: Option<PickHandle>,
}

impl Attempt {
    pub fn new(pick: PickHandle) -> Self {
        Attempt { pick: Some(pick) }
    }

    /// Ends the attempt without the cancellation report.
    fn end(mut self) -> PickHandle {
        self.pick
            .take()
            .expect("an attempt holds its pick until it ends")
    }

    /// Reports a response with `status`; the destination stays in flight until the returned
    /// handle is dropped.
    #[cfg_attr(not(feature = "middleware"), allow(dead_code))]
    pub fn answered(self, status: u16) -> PickHandle {
        let pick = self.end();
        pick.report(RequestOutcome::Status(status));
        pick
    }

    /// Reports a transport failure; returns the destination.
    pub fn failed(self) -> Arc<Destination> {
        let pick = self.end();
        pick.report(RequestOutcome::TransportFailure);
        pick.destination_arc()
    }

    /// The pick, unreported: the caller reports once the response body is read.
    pub fn into_pick(self) -> PickHandle {
        self.end()
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if let Some(pick) = self.pick.take() {
            pick.report(RequestOutcome::Cancelled);
        }
    }
}

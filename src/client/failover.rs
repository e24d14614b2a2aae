//! The failover step, the one place that decides, attempt by attempt, where a
//! call goes and how long it may take: the first destination (waiting for the cluster's first
//! probe round when due, at most until the call's deadline; keyed by the call's affinity key
//! when it has one); each attempt's deadline; after an attempt that failed or was answered with
//! a retryable status, whether the call goes on and to which destination (never one already
//! tried; connect failures and statuses stay in the tier, other failures leave it; a keyed call
//! goes to its key's next choice), within the attempt count, the deadline and the cluster's
//! retry budget; whether and where a slow attempt is hedged; and the tokens given back once the
//! call is answered.
//!
//! It knows nothing of reqwest: attempts end as a [`FailureKind`] or a status. The wrapped
//! client, the middleware and the tower layer drive it through `drive.rs`, so they behave
//! alike, and so will any other integration.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::budget::share_amount;
use super::hedging::{HedgeDelay, Hedging, Latencies};
use super::retry::{AttemptCount, Budgets, ClusterBudget, FailureKind};
use super::timeouts::Timeouts;
use crate::config::affinity::SessionAffinityConfig;
use crate::destination::Destination;
use crate::engine::fast_path::PickHandle;
use crate::engine::pick::CallPick;
use crate::engine::Engine;
use crate::error::PickError;
use crate::health::outcome::RequestOutcome;
#[cfg(feature = "metrics")]
use crate::metrics::{hedged, method_label, record_attempt, refused, retried, AttemptEnd};

/// How a client (or a middleware) calls, unless a request says otherwise: its timeouts, its
/// hedging, and the per-cluster budgets (with the retry policy) that its calls spend.
#[derive(Debug)]
pub(crate) struct CallPolicy {
    pub budgets: Budgets,
    pub timeouts: Timeouts,
    pub hedging: Option<Hedging>,
}

/// What one request asks for beyond its client's [`CallPolicy`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CallOptions {
    /// Whether the request may be sent more than once.
    pub retryable: bool,
    /// Its own attempt timeout (wins over the cluster's and the client's).
    pub attempt_timeout: Option<Duration>,
    /// Its own call timeout.
    pub call_timeout: Option<Duration>,
    /// Its own hedging: `Some(None)` turns the client's off.
    pub hedging: Option<Option<Hedging>>,
}

/// One call's way through a cluster's destinations.
#[derive(Debug)]
pub(crate) struct Failover<'a> {
    engine: &'a Engine,
    calls: &'a CallPolicy,
    cluster: &'a str,
    count: AttemptCount,
    attempt_timeout: Option<Duration>,
    /// When the call must be over.
    deadline: Option<Instant>,
    /// When the first attempt starts (its deadline is the first asked for).
    first_start: Instant,
    first_taken: bool,
    hedging: Option<Hedging>,
    /// The call's affinity key, when it has one: its retries and hedges go to the key's next
    /// choices.
    key: Option<Bytes>,
    /// What only a call that failed over or hedged needs, made on its first failure or hedge:
    /// a call whose first attempt answers carries one pointer.
    retry: Option<Box<RetryState>>,
    /// Its attempts as the attempt histogram sees them.
    #[cfg(feature = "metrics")]
    meter: AttemptMeter,
}

/// The part of a call's way that only retries and hedges need.
#[derive(Debug, Default)]
struct RetryState {
    /// Destination ids tried so far, in order.
    tried: Vec<String>,
    /// Tiers the call left after a failure there (see `FailureKind::leaves_tier`).
    leave_tiers: Vec<u32>,
    /// Budget tokens of retries that followed connect failures: given back once answered.
    refundable: u32,
    /// Whether the last failure was a connect failure.
    after_connect_failure: bool,
    /// The cluster's budget, kept once a hedge needed it.
    budget: Option<Arc<ClusterBudget>>,
    /// How the last attempt failed: the next retry's reason.
    #[cfg(feature = "metrics")]
    last_failure: Option<FailureKind>,
}

fn later(start: Instant, timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| start.checked_add(t))
}

impl<'a> Failover<'a> {
    /// Starts a call of `cluster`: picks its first destination and counts the call in the
    /// cluster's budget. `key_of` reads the call's affinity key, given the cluster's
    /// `SessionAffinity` (see [`Engine::pick_for_call_if_ready`]). Only the first calls of a
    /// cluster with active checks wait, for its first probe round and never past the call's
    /// deadline; that rare wait is boxed, so every call's future stays small.
    pub async fn start(
        engine: &'a Engine,
        calls: &'a CallPolicy,
        cluster: &'a str,
        options: CallOptions,
        key_of: impl FnOnce(Option<&SessionAffinityConfig>) -> Option<Bytes>,
    ) -> Result<(Failover<'a>, PickHandle), PickError> {
        let begun = Instant::now();
        let deadline = later(begun, options.call_timeout.or(calls.timeouts.call));
        let CallPick { key, picked } = engine.pick_for_call_if_ready(cluster, key_of);
        let (pick, cluster_timeout, first_start) = match picked {
            Some(pick) => {
                let (pick, timeout) = pick?;
                (pick, timeout, begun)
            }
            None => {
                let pick = Box::pin(warm_pick(
                    engine,
                    cluster,
                    key.as_deref(),
                    deadline,
                    options.attempt_timeout,
                ))
                .await?;
                (pick, engine.activity_timeout(cluster), Instant::now())
            }
        };
        let hedging = options
            .hedging
            .unwrap_or(calls.hedging)
            .filter(|_| options.retryable);
        // After the first pick succeeded, so unknown cluster names leave no budget behind.
        calls.budgets.deposit(
            cluster,
            begun,
            hedging.map_or(0, |h| share_amount(h.share())),
        );
        #[cfg(feature = "metrics")]
        let mut meter = AttemptMeter::default();
        #[cfg(feature = "metrics")]
        meter.open(pick.destination_arc(), first_start);
        let failover = Failover {
            engine,
            calls,
            cluster,
            count: AttemptCount::new(&calls.budgets.policy, options.retryable),
            attempt_timeout: options
                .attempt_timeout
                .or(cluster_timeout)
                .or(calls.timeouts.attempt),
            deadline,
            first_start,
            first_taken: false,
            hedging,
            key,
            retry: None,
            #[cfg(feature = "metrics")]
            meter,
        };
        Ok((failover, pick))
    }

    /// When the attempt starting now starts, and its deadline: its own timeout, but never past
    /// the call's.
    #[inline]
    pub fn attempt_deadline(&mut self) -> (Instant, Option<Instant>) {
        let start = if std::mem::replace(&mut self.first_taken, true) {
            Instant::now()
        } else {
            self.first_start
        };
        let deadline = match (later(start, self.attempt_timeout), self.deadline) {
            (Some(attempt), Some(call)) => Some(attempt.min(call)),
            (attempt, call) => attempt.or(call),
        };
        #[cfg(feature = "metrics")]
        self.meter.started(start);
        (start, deadline)
    }

    /// The call's hedging, if it hedges (retryable requests only).
    #[inline]
    pub fn hedging(&self) -> Option<Hedging> {
        self.hedging
    }

    /// The request's method, for the attempt histogram's `http.request.method` label (feature
    /// `metrics`; without it this does nothing). An integration calls it once, after
    /// [`start`](Self::start); without it the label is left out.
    #[inline]
    pub fn request_method(&mut self, method: &str) {
        #[cfg(feature = "metrics")]
        {
            self.meter.method = Some(method_label(method));
        }
        #[cfg(not(feature = "metrics"))]
        let _ = method;
    }

    /// Whether a response with `status` is one to try elsewhere (the caller still checks for
    /// `Retry-After`, which is never retried). The driver asks it of every response, before it
    /// tells how the attempt ended ([`failed`](Self::failed) or [`answered`](Self::answered)).
    #[inline]
    pub fn retries_status(&mut self, status: u16) -> bool {
        #[cfg(feature = "metrics")]
        {
            self.meter.status = Some(status);
        }
        self.count.retryable() && self.calls.budgets.policy.retry_statuses.contains(status)
    }

    /// Records that an attempt to `destination` failed (or was answered with a retryable
    /// status); returns whether the call may go on, as the attempt count and the deadline
    /// allow. Out of line and cold: a call that succeeds never runs it.
    #[cold]
    #[inline(never)]
    pub fn failed(&mut self, destination: &Destination, kind: FailureKind) -> bool {
        let mut go_on = self.count.failed(kind);
        #[cfg(feature = "metrics")]
        self.meter.ended(destination, kind);
        let state = self.retry.get_or_insert_with(Box::default);
        #[cfg(feature = "metrics")]
        {
            state.last_failure = Some(kind);
        }
        state.remember(destination);
        if kind.leaves_tier() {
            let tier = destination.tier();
            if !state.leave_tiers.contains(&tier) {
                state.leave_tiers.push(tier);
            }
        }
        state.after_connect_failure = kind == FailureKind::Connect;
        let past_deadline = self.deadline.is_some_and(|d| Instant::now() >= d);
        go_on &= !past_deadline;
        tracing::debug!(target: "healthpick", cluster = %self.cluster, destination = %destination.id(), ?kind, retry = go_on, past_deadline, "attempt failed");
        go_on
    }

    /// The destination to try next, if an untried one is left and the budget allows a retry:
    /// after a failure that leaves its tier, one of another tier while any is available; for a
    /// keyed call, the key's next choice there.
    #[cold]
    #[inline(never)]
    pub fn next(&mut self) -> Option<PickHandle> {
        let state = self.retry.get_or_insert_with(Box::default);
        // Pick before withdrawing, so that a call with no destination left spends no token.
        let next = self
            .engine
            .pick_endpoint_for_retry(
                self.cluster,
                self.key.as_deref(),
                &state.tried,
                &state.leave_tiers,
            )
            .ok()?;
        if !self.calls.budgets.withdraw(self.cluster) {
            tracing::debug!(target: "healthpick", cluster = %self.cluster, "retry budget exhausted");
            #[cfg(feature = "metrics")]
            refused(next.destination(), "retry");
            return None;
        }
        if state.after_connect_failure {
            state.refundable += 1;
        }
        #[cfg(feature = "metrics")]
        {
            retried(next.destination(), retry_reason(state.last_failure));
            self.meter.open(next.destination_arc(), Instant::now());
        }
        Some(next)
    }

    fn cluster_budget(&mut self) -> Arc<ClusterBudget> {
        let (calls, cluster) = (self.calls, self.cluster);
        self.retry
            .get_or_insert_with(Box::default)
            .budget
            .get_or_insert_with(|| calls.budgets.budget(cluster))
            .clone()
    }

    /// How long the call waits for an answer before it hedges, if it hedges: the fixed delay, or
    /// the percentile of the cluster's recent latencies once enough are known.
    pub fn hedge_delay(&mut self) -> Option<Duration> {
        match self.hedging?.delay() {
            HedgeDelay::After(delay) => Some(delay),
            HedgeDelay::Percentile(p) => {
                latencies(&self.cluster_budget()).percentile(p, Instant::now())
            }
        }
    }

    /// Another destination for a hedge of the attempt running on `running`, if one is left and
    /// both the hedge cap and the retry budget allow it; for a keyed call, the key's next choice.
    #[cold]
    #[inline(never)]
    pub fn hedge(&mut self, running: &Destination) -> Option<PickHandle> {
        let budget = self.cluster_budget();
        let state = self.retry.get_or_insert_with(Box::default);
        state.remember(running);
        let pick = self
            .engine
            .pick_endpoint_for_retry(
                self.cluster,
                self.key.as_deref(),
                &state.tried,
                &state.leave_tiers,
            )
            .ok()?;
        let cluster = self.cluster;
        if !budget.hedges.withdraw() {
            tracing::debug!(target: "healthpick", %cluster, "hedge cap reached");
            #[cfg(feature = "metrics")]
            refused(pick.destination(), "hedge");
            return None;
        }
        if !budget.retries.withdraw() {
            budget.hedges.refund(1);
            tracing::debug!(target: "healthpick", %cluster, "retry budget exhausted: no hedge");
            #[cfg(feature = "metrics")]
            refused(pick.destination(), "retry");
            return None;
        }
        #[cfg(feature = "metrics")]
        {
            hedged(pick.destination());
            self.meter.open(pick.destination_arc(), Instant::now());
        }
        tracing::debug!(target: "healthpick", %cluster, slow = %running.id(), hedge = %pick.destination().id(), "hedging");
        state.remember(pick.destination());
        Some(pick)
    }

    /// The call was answered: tokens of retries past connect failures go back to the budget.
    #[inline]
    pub fn answered(&mut self) {
        #[cfg(feature = "metrics")]
        self.meter.answered();
        if self.retry.is_some() {
            self.refund();
        }
    }

    #[cold]
    fn refund(&mut self) {
        if let Some(state) = &mut self.retry {
            let tokens = std::mem::take(&mut state.refundable);
            if tokens > 0 {
                self.calls.budgets.refund(self.cluster, tokens);
            }
        }
    }

    /// Records the latency of the attempt that answered, for hedging at a percentile.
    pub fn record_latency(&mut self, latency: Duration) {
        #[cfg(feature = "metrics")]
        {
            self.meter.latency = Some(latency);
        }
        if matches!(
            self.hedging.map(|h| h.delay()),
            Some(HedgeDelay::Percentile(_))
        ) {
            latencies(&self.cluster_budget()).record(latency, Instant::now());
        }
    }
}

/// The `reason` of a retry that followed a failure of `kind`.
#[cfg(feature = "metrics")]
fn retry_reason(kind: Option<FailureKind>) -> &'static str {
    match kind {
        Some(FailureKind::Connect) => "connect",
        Some(FailureKind::Transport) => "transport",
        Some(FailureKind::TimedOut) => "timeout",
        Some(FailureKind::Status) | None => "status",
    }
}

/// A call's attempts as the attempt histogram (`http.client.request.duration`) sees them: each
/// runs from when the step hands out its destination (the first pick, a retry, a hedge; its
/// start is then set to what [`Failover::attempt_deadline`] says) to when the driver tells how it
/// ended: [`Failover::failed`] with its kind (a retryable status's code is the one
/// [`Failover::retries_status`] was asked last), or [`Failover::answered`] with the status asked
/// last. A hedged call has two attempts in flight; the one that answered is the one whose start
/// lies the latency the driver measured ([`Failover::record_latency`]) before now. Attempts that
/// are cancelled are not recorded.
#[cfg(feature = "metrics")]
#[derive(Debug, Default)]
struct AttemptMeter {
    /// Attempts handed out and not ended yet, oldest first: destination and start.
    open: [Option<(Arc<Destination>, Instant)>; 2],
    /// The status the driver asked about last, until the end of its attempt takes it.
    status: Option<u16>,
    /// The latency the driver measured for the attempt that answered a hedged call.
    latency: Option<Duration>,
    /// The request's method, when the integration gave it.
    method: Option<&'static str>,
}

#[cfg(feature = "metrics")]
impl AttemptMeter {
    /// An attempt to `destination` was handed out at `start`.
    fn open(&mut self, destination: Arc<Destination>, start: Instant) {
        if self.open[0].is_some() && self.open[1].is_some() {
            // More than two in flight never happens; the oldest is forgotten.
            self.open[0] = self.open[1].take();
        }
        let free = usize::from(self.open[0].is_some());
        self.open[free] = Some((destination, start));
    }

    /// The attempt handed out last starts at `start`.
    fn started(&mut self, start: Instant) {
        let newest = if self.open[1].is_some() { 1 } else { 0 };
        if let Some((_, at)) = &mut self.open[newest] {
            *at = start;
        }
    }

    /// The open attempt to `destination`, taken out.
    fn take(&mut self, destination: &Destination) -> Option<(Arc<Destination>, Instant)> {
        let index = self.open.iter().position(|o| {
            o.as_ref()
                .is_some_and(|(d, _)| std::ptr::eq(&**d, destination))
        })?;
        let taken = self.open[index].take();
        if index == 0 {
            self.open[0] = self.open[1].take();
        }
        taken
    }

    /// The attempt to `destination` failed with `kind`.
    fn ended(&mut self, destination: &Destination, kind: FailureKind) {
        let status = self.status.take();
        let end = match kind {
            FailureKind::Connect => AttemptEnd::Connect,
            FailureKind::Transport => AttemptEnd::Transport,
            FailureKind::TimedOut => AttemptEnd::Timeout,
            FailureKind::Status => AttemptEnd::Status(status.unwrap_or_default()),
        };
        if let Some((destination, start)) = self.take(destination) {
            record_attempt(
                &destination,
                self.method,
                end,
                start.elapsed().as_secs_f64(),
            );
        }
    }

    /// The call was answered: by the attempt whose status was asked last, unless that attempt
    /// was recorded already (a retryable status kept while the call went on).
    fn answered(&mut self) {
        let latency = self.latency.take();
        let Some(status) = self.status.take() else {
            return;
        };
        let now = Instant::now();
        let winner = match (&self.open, latency) {
            ([Some((_, first)), Some((_, second))], Some(latency)) => {
                let began = now.checked_sub(latency).unwrap_or(now);
                let off = |at: Instant| {
                    at.saturating_duration_since(began)
                        .max(began.saturating_duration_since(at))
                };
                usize::from(off(*second) < off(*first))
            }
            _ => 0,
        };
        if let Some((destination, start)) = self.open[winner].take() {
            let took = latency.unwrap_or_else(|| now.saturating_duration_since(start));
            record_attempt(
                &destination,
                self.method,
                AttemptEnd::Status(status),
                took.as_secs_f64(),
            );
        }
        self.open = [None, None];
    }
}

impl RetryState {
    fn remember(&mut self, destination: &Destination) {
        if !self.tried.iter().any(|id| id == destination.id()) {
            self.tried.push(destination.id().to_string());
        }
    }
}

/// The cluster's recent latencies, made on first use.
fn latencies(budget: &ClusterBudget) -> &Latencies {
    budget.latencies.get_or_init(|| Box::new(Latencies::new()))
}

/// The first pick of a cluster whose warm-up is running: waits for it (at most the probe
/// timeout), but never past the call's deadline nor longer than the request's own attempt
/// timeout when it set one; then it picks, by the call's affinity key when it has one, as well
/// as the probes finished so far allow.
async fn warm_pick(
    engine: &Engine,
    cluster: &str,
    key: Option<&[u8]>,
    deadline: Option<Instant>,
    request_timeout: Option<Duration>,
) -> Result<PickHandle, PickError> {
    let until_deadline = deadline.map_or(Duration::MAX, |d| {
        d.saturating_duration_since(Instant::now())
    });
    let max_wait = request_timeout.map_or(until_deadline, |t| t.min(until_deadline));
    engine
        .pick_for_call_ready_within(cluster, key, max_wait)
        .await
}

/// One attempt in flight: reports `Cancelled` (a success) if it is dropped before it
/// ended: the caller dropped the call, or a hedge answered first. Every outcome it reports
/// carries how long the attempt took, for the destination's latency estimate, and so does the
/// outcome of the attempt that answers ([`into_timed_pick`](Self::into_timed_pick)). A
/// cancelled attempt's time is no sample: it says only that the answer would have taken longer.
pub(crate) struct Attempt {
    pick: Option<PickHandle>,
    started: Instant,
}

impl Attempt {
    pub fn new(pick: PickHandle) -> Self {
        Attempt {
            pick: Some(pick),
            started: Instant::now(),
        }
    }

    fn pick(&self) -> &PickHandle {
        self.pick
            .as_ref()
            .expect("an attempt holds its pick until it ends")
    }

    /// The destination.
    pub fn destination(&self) -> &Destination {
        self.pick().destination()
    }

    /// The destination, to keep.
    pub fn destination_arc(&self) -> Arc<Destination> {
        self.pick().destination_arc()
    }

    /// When it started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Ends the attempt without the cancellation report.
    fn end(mut self) -> PickHandle {
        self.pick
            .take()
            .expect("an attempt holds its pick until it ends")
    }

    /// Reports a response with `status`; the destination stays in flight until the returned
    /// handle is dropped.
    pub fn answered(self, status: u16) -> PickHandle {
        let took = self.started.elapsed();
        let pick = self.end();
        pick.report_took(RequestOutcome::Status(status), took);
        pick
    }

    /// Reports a transport failure (a timeout included: it counts with the time it took);
    /// returns the destination.
    pub fn failed(self) -> Arc<Destination> {
        let took = self.started.elapsed();
        let pick = self.end();
        pick.report_took(RequestOutcome::TransportFailure, took);
        pick.destination_arc()
    }

    /// Hands the load the destination's server reported with its response (the value of an
    /// `endpoint-load-metrics` header) to the destination's reported load. A malformed value
    /// is ignored, with a debug log.
    pub fn report_load(&self, header_value: &str) {
        self.pick().report_load(header_value);
    }

    /// The pick, unreported, with when the attempt started: the caller reports once the
    /// response body is read, with the time since then ([`report_answer`]).
    pub fn into_timed_pick(self) -> (PickHandle, Instant) {
        let started = self.started;
        (self.end(), started)
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if let Some(pick) = self.pick.take() {
            pick.report(RequestOutcome::Cancelled);
        }
    }
}

/// Reports the outcome of the attempt that answered a call, which started at `started`: with
/// the time it took, for the destination's latency estimate, whatever the cluster's policy.
pub(crate) fn report_answer(pick: &PickHandle, outcome: RequestOutcome, started: Instant) {
    pick.report_took(outcome, started.elapsed());
}

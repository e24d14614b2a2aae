//! Driving one call through the failover step: send an attempt, bound it by
//! its deadline, hand how it ended to [`Failover`], and send the next one where it says; with
//! hedging, keep a second attempt in flight and let the first answer win. Every response's load
//! report (`endpoint-load-metrics`) goes to its destination here, whatever becomes of the
//! response. The wrapped client, the middleware and the tower layer each say how to send an
//! attempt and read what came back ([`Reply`], [`Failure`]); the rest is this one loop.
//!
//! A call without hedging runs the plain loop, one attempt at a time, with nothing boxed; a call
//! that may hedge runs the racing loop, boxed, so the plain call's future stays small.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, RETRY_AFTER};
use tokio::time::{Instant, Sleep};
use tracing::Instrument;

use super::call_timer::CallTimer;
use super::failover::{Attempt, Failover};
use super::retry::FailureKind;
use super::span::{CallSpan, Resend};
use crate::destination::Destination;
use crate::engine::fast_path::PickHandle;
use crate::health::load_report;

/// A response as the driver reads it.
pub(crate) trait Reply: Send {
    /// Its status.
    fn status(&self) -> u16;
    /// Its headers.
    fn headers(&self) -> &HeaderMap;
    /// Whether it carries `Retry-After` (asked only of retryable statuses).
    fn retry_after(&self) -> bool {
        self.headers().contains_key(RETRY_AFTER)
    }
}

/// The header servers report their load in.
static LOAD_METRICS: HeaderName = HeaderName::from_static(load_report::HEADER);

/// Hands the load report `response` carries, if any, to the destination of `attempt`, before
/// anything else happens to either: a report counts whether the response is the call's answer
/// or a status the call goes on from. A value that is not text is ignored, as a malformed one
/// is: a server's load report never fails a call.
#[inline]
fn read_load_report<R: Reply>(attempt: &Attempt, response: &R) {
    if let Some(value) = response.headers().get(&LOAD_METRICS) {
        match value.to_str() {
            Ok(value) => attempt.report_load(value),
            Err(_) => tracing::debug!(
                target: "healthpick",
                destination = %attempt.destination().id(),
                "load report ignored: not text"
            ),
        }
    }
}

/// An attempt's failure before any response, as the driver reads it.
pub(crate) trait Failure: Send {
    /// How it counts for the retry rules.
    fn kind(&self) -> FailureKind;
}

/// Why an attempt of the call did not give the caller its answer.
#[derive(Debug)]
pub(crate) enum Why<E> {
    /// It failed before any response.
    Error(E),
    /// Its deadline passed before any response; how long it had.
    TimedOut(Duration),
    /// It was answered with a retryable status and the call went on.
    Status(u16),
}

/// One attempt that did not give the caller its answer.
#[derive(Debug)]
pub(crate) struct Failed<E> {
    pub destination: Arc<Destination>,
    pub why: Why<E>,
}

/// The response a call ends with.
#[derive(Debug)]
pub(crate) struct Answer<R> {
    pub response: R,
    /// Keeps the destination in flight until the caller is done with the response.
    pub pick: PickHandle,
    /// Whether its outcome was reported already (a retryable status kept while the call went
    /// on, then returned because nothing else answered).
    pub reported: bool,
    /// When its attempt started: its outcome, reported later, carries the time since then
    /// ([`report_answer`](super::failover::report_answer)).
    pub started: Instant,
    /// When reading the rest of the response must be done by.
    pub deadline: Option<Instant>,
    /// The attempt's timer, still registered for that deadline: reading the body goes on
    /// with it instead of registering a new one (see [`CallTimer`]).
    pub timer: Option<CallTimer>,
}

/// How a call ended.
#[derive(Debug)]
pub(crate) enum End<R, E> {
    /// With a response; every attempt that did not give it, in order.
    Answered(Answer<R>, Vec<Failed<E>>),
    /// Without one: every attempt, in order.
    Failed(Vec<Failed<E>>),
}

/// A retryable status kept while the call goes on, with its place in the failures.
type Held<R> = Option<(Answer<R>, usize)>;

/// Drives the call whose first destination is `pick` until it is answered or the failover step
/// has nothing left. `send` sends one attempt to a destination, to be answered by a deadline
/// (which the driver enforces until the response headers; an integration that hands the body
/// on unseen also hands the deadline on); the future it returns must not borrow it, since a
/// hedged call has two in flight.
pub(crate) async fn drive<'x, R, E, F, S>(
    failover: &mut Failover<'_>,
    pick: PickHandle,
    send: &mut S,
) -> End<R, E>
where
    R: Reply,
    E: Failure,
    F: Future<Output = Result<R, E>> + Send + 'x,
    S: FnMut(&Destination, Option<Instant>) -> F + Send,
{
    let mut span = CallSpan::open(pick.destination());
    let instrument = span.span();
    if failover.hedging().is_some() {
        return Box::pin(drive_hedged(failover, pick, send, &mut span))
            .instrument(instrument)
            .await;
    }
    drive_plain(failover, pick, send, &mut span)
        .instrument(instrument)
        .await
}

/// The loop of a call that does not hedge: one attempt at a time.
async fn drive_plain<'x, R, E, F, S>(
    failover: &mut Failover<'_>,
    mut pick: PickHandle,
    send: &mut S,
    span: &mut CallSpan,
) -> End<R, E>
where
    R: Reply,
    E: Failure,
    F: Future<Output = Result<R, E>> + Send + 'x,
    S: FnMut(&Destination, Option<Instant>) -> F + Send,
{
    let mut failures = Vec::new();
    let mut held: Held<R> = None;
    let mut timer: Option<CallTimer> = None;
    loop {
        let (started, deadline) = failover.attempt_deadline();
        let attempt = Attempt::new(pick);
        span.attempt(attempt.destination(), failures.last().map(resend_after));
        let future = send(attempt.destination(), deadline);
        let result = match deadline {
            Some(at) => {
                let timer = match &mut timer {
                    Some(timer) => {
                        timer.sleep().reset(at);
                        timer
                    }
                    None => timer.insert(CallTimer::new(at)),
                };
                race(future, timer.sleep()).await
            }
            None => Ok(future.await),
        };
        let step = match result {
            Ok(Ok(response)) => {
                read_load_report(&attempt, &response);
                let status = response.status();
                if !failover.retries_status(status) || response.retry_after() {
                    failover.answered();
                    let mut answer = answer(attempt, response, deadline);
                    answer.timer = timer;
                    return End::Answered(answer, failures);
                }
                on_status(
                    failover,
                    attempt,
                    response,
                    status,
                    deadline,
                    false,
                    &mut held,
                    &mut failures,
                )
            }
            Ok(Err(error)) if past_deadline(&error, deadline) => on_timeout(
                failover,
                attempt,
                had(started, deadline),
                false,
                &mut failures,
            ),
            Ok(Err(error)) => {
                let kind = error.kind();
                on_failure(
                    failover,
                    attempt,
                    Why::Error(error),
                    kind,
                    false,
                    &mut failures,
                )
            }
            Err(_) => on_timeout(
                failover,
                attempt,
                had(started, deadline),
                false,
                &mut failures,
            ),
        };
        match step {
            Step::Next(next) => pick = next,
            Step::Answer(answer) => return End::Answered(answer, failures),
            // With one attempt at a time there is nothing to wait for.
            Step::Wait | Step::Stop => return without_answer(failover, held, failures),
        }
    }
}

/// Why the attempt after `failed` is sent, for the call's span.
fn resend_after<E: Failure>(failed: &Failed<E>) -> Resend {
    match &failed.why {
        Why::Error(error) => Resend::After(error.kind(), 0),
        Why::TimedOut(_) => Resend::After(FailureKind::TimedOut, 0),
        Why::Status(status) => Resend::After(FailureKind::Status, *status),
    }
}

/// What the call does after an attempt ended without the caller's answer.
enum Step<R> {
    /// Tries this destination next.
    Next(PickHandle),
    /// Waits for the attempt still in flight.
    Wait,
    /// Ends with this response.
    Answer(Answer<R>),
    /// Ends: nothing left to try.
    Stop,
}

#[inline]
fn answer<R>(attempt: Attempt, response: R, deadline: Option<Instant>) -> Answer<R> {
    let (pick, started) = attempt.into_timed_pick();
    Answer {
        response,
        pick,
        reported: false,
        started,
        deadline,
        timer: None,
    }
}

/// A retryable status came back. If the call can go on (or another attempt is in flight), the
/// response is reported and kept, in case nothing else answers; otherwise it is the answer.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn on_status<R, E>(
    failover: &mut Failover<'_>,
    attempt: Attempt,
    response: R,
    status: u16,
    deadline: Option<Instant>,
    other_in_flight: bool,
    held: &mut Held<R>,
    failures: &mut Vec<Failed<E>>,
) -> Step<R> {
    let destination = attempt.destination_arc();
    let go_on = failover.failed(&destination, FailureKind::Status);
    let next = if go_on && !other_in_flight {
        failover.next()
    } else {
        None
    };
    if next.is_none() && !other_in_flight {
        failover.answered();
        return Step::Answer(answer(attempt, response, deadline));
    }
    let started = attempt.started();
    let pick = attempt.answered(status);
    failures.push(Failed {
        destination,
        why: Why::Status(status),
    });
    // A later status replaces an earlier one: the caller gets the last response.
    *held = Some((
        Answer {
            response,
            pick,
            reported: true,
            started,
            deadline,
            timer: None,
        },
        failures.len() - 1,
    ));
    match next {
        Some(next) => Step::Next(next),
        None => Step::Wait,
    }
}

/// An attempt failed before any response.
#[cold]
#[inline(never)]
fn on_failure<R, E>(
    failover: &mut Failover<'_>,
    attempt: Attempt,
    why: Why<E>,
    kind: FailureKind,
    other_in_flight: bool,
    failures: &mut Vec<Failed<E>>,
) -> Step<R> {
    let destination = attempt.failed();
    let go_on = failover.failed(&destination, kind);
    failures.push(Failed { destination, why });
    if other_in_flight {
        return Step::Wait;
    }
    match go_on.then(|| failover.next()).flatten() {
        Some(next) => Step::Next(next),
        None => Step::Stop,
    }
}

/// An attempt ran out of time before any response: a transport failure that had `had`.
#[cold]
#[inline(never)]
fn on_timeout<R, E>(
    failover: &mut Failover<'_>,
    attempt: Attempt,
    had: Duration,
    other_in_flight: bool,
    failures: &mut Vec<Failed<E>>,
) -> Step<R> {
    on_failure(
        failover,
        attempt,
        Why::TimedOut(had),
        FailureKind::TimedOut,
        other_in_flight,
        failures,
    )
}

/// Whether `error` is the HTTP client's own timeout firing once the attempt's deadline had
/// passed: the attempt ran out of its time, whichever timer the runtime woke first (the
/// middleware sets reqwest's a moment past the deadline, and a busy runtime may poll that one
/// first).
fn past_deadline<E: Failure>(error: &E, deadline: Option<Instant>) -> bool {
    error.kind() == FailureKind::TimedOut && deadline.is_some_and(|d| Instant::now() >= d)
}

/// How long an attempt that started at `started` had until `deadline`.
fn had(started: Instant, deadline: Option<Instant>) -> Duration {
    deadline.map_or(Duration::ZERO, |d| d.saturating_duration_since(started))
}

/// The call ends without a new answer: the kept status response if there is one (the caller
/// gets the last response), else every failure.
#[cold]
fn without_answer<R, E>(
    failover: &mut Failover<'_>,
    held: Held<R>,
    mut failures: Vec<Failed<E>>,
) -> End<R, E> {
    match held {
        Some((answer, index)) => {
            failures.remove(index);
            failover.answered();
            End::Answered(answer, failures)
        }
        None => End::Failed(failures),
    }
}

type Bounded<'f, R, E> = Pin<Box<dyn Future<Output = Result<Result<R, E>, Elapsed>> + Send + 'f>>;

/// The deadline passed first.
#[derive(Debug)]
pub(crate) struct Elapsed;

/// `future`, unless `deadline` passes first.
pub(crate) async fn bounded<F: Future>(future: F, deadline: Instant) -> Result<F::Output, Elapsed> {
    race(future, std::pin::pin!(tokio::time::sleep_until(deadline))).await
}

/// `future`, unless `timer` fires first. What `tokio::time::timeout` does, without its
/// cooperative-budget bookkeeping on every poll; the timer is polled (and so registered) only
/// once the future has returned `Pending`.
pub(crate) async fn race<F: Future>(
    future: F,
    mut timer: Pin<&mut Sleep>,
) -> Result<F::Output, Elapsed> {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// One attempt of a hedged call in flight.
struct Running<'f, R, E> {
    attempt: Attempt,
    future: Bounded<'f, R, E>,
    started: Instant,
    deadline: Option<Instant>,
}

fn launch<'x, R, E, F, S>(
    failover: &mut Failover<'_>,
    send: &mut S,
    pick: PickHandle,
    span: &mut CallSpan,
    why: Option<Resend>,
) -> Running<'x, R, E>
where
    R: Reply,
    E: Failure,
    F: Future<Output = Result<R, E>> + Send + 'x,
    S: FnMut(&Destination, Option<Instant>) -> F + Send,
{
    let (started, deadline) = failover.attempt_deadline();
    let attempt = Attempt::new(pick);
    span.attempt(attempt.destination(), why);
    let future = send(attempt.destination(), deadline);
    let future: Bounded<'x, R, E> = match deadline {
        Some(at) => Box::pin(bounded(future, at)),
        None => Box::pin(async move { Ok(future.await) }),
    };
    Running {
        attempt,
        future,
        started,
        deadline,
    }
}

/// What woke the hedged loop.
enum Event<R, E> {
    Done(usize, Result<Result<R, E>, Elapsed>),
    HedgeDue,
}

/// The loop of a call that may hedge: at most two attempts in flight; the first answer wins and
/// the other attempt is dropped, which reports it `Cancelled`.
async fn drive_hedged<'x, R, E, F, S>(
    failover: &mut Failover<'_>,
    pick: PickHandle,
    send: &mut S,
    span: &mut CallSpan,
) -> End<R, E>
where
    R: Reply,
    E: Failure,
    F: Future<Output = Result<R, E>> + Send + 'x,
    S: FnMut(&Destination, Option<Instant>) -> F + Send,
{
    let mut failures = Vec::new();
    let mut held: Held<R> = None;
    let mut slots: [Option<Running<'x, R, E>>; 2] = [None, None];
    slots[0] = Some(launch(failover, send, pick, span, None));
    let mut hedge_timer: Option<Pin<Box<Sleep>>> = failover
        .hedge_delay()
        .map(|delay| Box::pin(tokio::time::sleep(delay)));
    let mut hedged = false;
    loop {
        let event = std::future::poll_fn(|cx| {
            for (i, slot) in slots.iter_mut().enumerate() {
                if let Some(running) = slot {
                    if let Poll::Ready(result) = running.future.as_mut().poll(cx) {
                        return Poll::Ready(Event::Done(i, result));
                    }
                }
            }
            if let Some(timer) = &mut hedge_timer {
                if timer.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Event::HedgeDue);
                }
            }
            Poll::Pending
        })
        .await;
        let (i, result) = match event {
            Event::HedgeDue => {
                hedge_timer = None;
                hedged = true;
                let busy = match (&slots[0], &slots[1]) {
                    (Some(running), None) => Some((1, running.attempt.destination_arc())),
                    (None, Some(running)) => Some((0, running.attempt.destination_arc())),
                    _ => None,
                };
                if let Some((free, running)) = busy {
                    if let Some(pick) = failover.hedge(&running) {
                        slots[free] = Some(launch(failover, send, pick, span, Some(Resend::Hedge)));
                    }
                }
                continue;
            }
            Event::Done(i, result) => (i, result),
        };
        let Some(running) = slots[i].take() else {
            continue;
        };
        let other_in_flight = slots[1 - i].is_some();
        let step = match result {
            Ok(Ok(response)) => {
                read_load_report(&running.attempt, &response);
                let status = response.status();
                if !failover.retries_status(status) || response.retry_after() {
                    failover.record_latency(running.started.elapsed());
                    // The other attempt, if any, lost: dropping it reports it cancelled.
                    slots[1 - i] = None;
                    failover.answered();
                    return End::Answered(
                        answer(running.attempt, response, running.deadline),
                        failures,
                    );
                }
                on_status(
                    failover,
                    running.attempt,
                    response,
                    status,
                    running.deadline,
                    other_in_flight,
                    &mut held,
                    &mut failures,
                )
            }
            Ok(Err(error)) if past_deadline(&error, running.deadline) => on_timeout(
                failover,
                running.attempt,
                had(running.started, running.deadline),
                other_in_flight,
                &mut failures,
            ),
            Ok(Err(error)) => {
                let kind = error.kind();
                on_failure(
                    failover,
                    running.attempt,
                    Why::Error(error),
                    kind,
                    other_in_flight,
                    &mut failures,
                )
            }
            Err(_) => on_timeout(
                failover,
                running.attempt,
                had(running.started, running.deadline),
                other_in_flight,
                &mut failures,
            ),
        };
        match step {
            Step::Next(next) => {
                let why = failures.last().map(resend_after);
                slots[i] = Some(launch(failover, send, next, span, why));
                if !hedged && hedge_timer.is_none() {
                    hedge_timer = failover
                        .hedge_delay()
                        .map(|delay| Box::pin(tokio::time::sleep(delay)));
                }
            }
            Step::Wait => {}
            Step::Answer(answer) => return End::Answered(answer, failures),
            Step::Stop => return without_answer(failover, held, failures),
        }
    }
}

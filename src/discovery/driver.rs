//! The polling driver: asks a [`PollSource`] for its full set, publishes the answer,
//! and asks again when the answer's validity (a DNS TTL) runs out, clamped to the configured
//! bounds, with jitter so processes do not ask in lockstep. After an error it backs off
//! exponentially from the shortest delay to the longest, with jitter, and the last good set
//! stays in force. An entry of an answer the engine would refuse (a bad address or weight, a
//! key given twice) is left out with a warning naming it, and the rest of the answer applies.
//! It stops when its handle is dropped or its token is cancelled.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::admit::admitted;
use super::source::PollSource;
use crate::config::discovery::RefreshBounds;
use crate::engine::publisher::Publisher;

/// A running source task (the driver of a polling source, or a watch loop). Dropping it stops
/// the task; the source's last published set stays in force.
#[derive(Debug)]
#[must_use = "the source stops when this handle is dropped"]
pub struct SourceTask {
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl SourceTask {
    /// Wraps a spawned task stopped by `cancel`.
    pub(crate) fn new(cancel: CancellationToken, task: tokio::task::JoinHandle<()>) -> Self {
        SourceTask {
            cancel,
            task: Some(task),
        }
    }

    /// Stops the task and waits until it has ended.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for SourceTask {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Drives `source` on the current tokio runtime: asks it, publishes through `publisher`, and
/// asks again within `refresh`.
///
/// ```no_run
/// # async fn run(engine: healthpick::Engine, source: std::sync::Arc<dyn healthpick::discovery::PollSource>) -> Result<(), Box<dyn std::error::Error>> {
/// use healthpick::config::RefreshBounds;
/// use healthpick::discovery::{poll, SourceSpec};
/// use std::time::Duration;
///
/// let publisher = engine.publisher("payments", SourceSpec::new("registry"))?;
/// let task = poll(source, publisher, RefreshBounds::new(Duration::from_secs(1), Duration::from_secs(30)));
/// // ... until `task` is dropped.
/// # drop(task); Ok(()) }
/// ```
///
/// # Panics
/// Outside a tokio runtime, as `tokio::spawn` does.
pub fn poll(
    source: Arc<dyn PollSource>,
    publisher: Publisher,
    refresh: RefreshBounds,
) -> SourceTask {
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let task = tokio::spawn(async move {
        let mut backoff = Backoff::new(refresh);
        loop {
            // An answer slower than the longest refresh delay is no use: treat it as a failure.
            let span = refresh_span(&publisher);
            let asked = tokio::select! {
                () = stop.cancelled() => return,
                asked = tokio::time::timeout(refresh.max.max(Duration::from_secs(1)), source.resolve()).instrument(span.clone()) => asked,
            };
            let _refresh = span.enter();
            let delay = match asked {
                Ok(Ok(answer)) => {
                    let published = match answer.endpoints {
                        Some(endpoints) => publisher.publish(admitted(&publisher, endpoints)),
                        None => publisher.not_found(),
                    };
                    if let Err(e) = published {
                        tracing::debug!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "answer not published: {e}");
                    }
                    backoff.succeeded(answer.valid_for)
                }
                Ok(Err(error)) => {
                    let _ = publisher.failed(&error);
                    backoff.failed()
                }
                Err(_) => {
                    let _ = publisher.failed(format_args!(
                        "no answer within {} ms",
                        refresh.max.max(Duration::from_secs(1)).as_millis()
                    ));
                    backoff.failed()
                }
            };
            drop(_refresh);
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    });
    SourceTask::new(cancel, task)
}

/// The span of one refresh of a discovery source (level DEBUG, target `healthpick`): asking
/// the source and publishing what it said. Its events (a failed or held publication) are
/// logged inside it.
pub(crate) fn refresh_span(publisher: &Publisher) -> tracing::Span {
    tracing::debug_span!(
        target: "healthpick",
        "healthpick.discovery_refresh",
        healthpick.cluster = publisher.cluster(),
        healthpick.source = publisher.source(),
    )
}

/// When to ask next.
#[derive(Debug)]
pub(crate) struct Backoff {
    refresh: RefreshBounds,
    next_failure_delay: Duration,
}

impl Backoff {
    pub fn new(refresh: RefreshBounds) -> Self {
        Backoff {
            refresh,
            next_failure_delay: refresh.min,
        }
    }

    /// After an answer valid for `valid_for` (the longest delay when the source did not say):
    /// clamped to the bounds, plus jitter; the failure backoff starts over.
    pub fn succeeded(&mut self, valid_for: Option<Duration>) -> Duration {
        self.next_failure_delay = self.refresh.min;
        let delay = valid_for
            .unwrap_or(self.refresh.max)
            .clamp(self.refresh.min, self.refresh.max);
        self.jittered(delay)
    }

    /// After a failure: the backoff delay, doubled for the next failure up to the longest.
    pub fn failed(&mut self) -> Duration {
        let delay = self.next_failure_delay;
        self.next_failure_delay = (delay * 2).min(self.refresh.max);
        self.jittered(delay)
    }

    fn jittered(&self, delay: Duration) -> Duration {
        let share = self.refresh.jitter.clamp(0.0, 1.0);
        if share == 0.0 {
            return delay;
        }
        delay.mul_f64(1.0 + share * rand::random::<f64>())
    }
}

/// Paces the requests of a source that lists and watches (etcd, Kubernetes) or queries in a
/// loop (Consul): each request starts at least the shortest refresh delay after the one before
/// it, whatever the server answers (errors, garbage, answers at once, history that is always
/// gone), so that no server can make a source spin. The one exception,
/// [`free_next`](Pacer::free_next), lets a list's first watch start at once when the watch
/// before the list held for that long: a source that works is never slowed down.
#[cfg_attr(
    not(any(feature = "etcd", feature = "consul", feature = "kubernetes")),
    allow(dead_code)
)]
#[derive(Debug)]
pub(crate) struct Pacer {
    min: Duration,
    last: Option<tokio::time::Instant>,
    free: bool,
}

#[cfg_attr(
    not(any(feature = "etcd", feature = "consul", feature = "kubernetes")),
    allow(dead_code)
)]
impl Pacer {
    /// Requests at least `min` apart.
    pub fn new(min: Duration) -> Pacer {
        Pacer {
            min,
            last: None,
            free: false,
        }
    }

    /// When the next request may start (`None`: now).
    pub fn next_at(&self) -> Option<tokio::time::Instant> {
        if self.free {
            return None;
        }
        self.last.map(|last| last + self.min)
    }

    /// Waits until the next request may start; `false` when `cancel` came first.
    pub async fn wait(&self, cancel: &CancellationToken) -> bool {
        let Some(at) = self.next_at() else {
            return !cancel.is_cancelled();
        };
        tokio::select! {
            () = cancel.cancelled() => false,
            () = tokio::time::sleep_until(at) => true,
        }
    }

    /// A request starts now.
    pub fn started(&mut self) {
        self.last = Some(tokio::time::Instant::now());
        self.free = false;
    }

    /// The next request may start at once.
    pub fn free_next(&mut self) {
        self.free = true;
    }

    /// The shortest time between two requests.
    pub fn min(&self) -> Duration {
        self.min
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(min: u64, max: u64, jitter: f64) -> RefreshBounds {
        RefreshBounds::new(Duration::from_secs(min), Duration::from_secs(max)).jitter(jitter)
    }

    #[test]
    fn an_answer_is_asked_again_when_it_runs_out_within_the_bounds() {
        let mut b = Backoff::new(bounds(5, 300, 0.0));
        let s = Duration::from_secs;
        assert_eq!(b.succeeded(Some(s(60))), s(60));
        assert_eq!(b.succeeded(Some(s(1))), s(5), "clamped up to the shortest");
        assert_eq!(
            b.succeeded(Some(s(3600))),
            s(300),
            "clamped down to the longest"
        );
        assert_eq!(b.succeeded(None), s(300), "no validity: the longest");
    }

    #[test]
    fn failures_back_off_exponentially_and_an_answer_resets_it() {
        let mut b = Backoff::new(bounds(5, 60, 0.0));
        let s = Duration::from_secs;
        let delays: Vec<Duration> = (0..6).map(|_| b.failed()).collect();
        assert_eq!(delays, [s(5), s(10), s(20), s(40), s(60), s(60)]);
        b.succeeded(None);
        assert_eq!(b.failed(), s(5));
    }

    #[test]
    fn jitter_adds_at_most_its_share() {
        let mut b = Backoff::new(bounds(10, 10, 0.5));
        for _ in 0..200 {
            let d = b.succeeded(None);
            assert!(
                d >= Duration::from_secs(10) && d <= Duration::from_secs(15),
                "{d:?}"
            );
        }
    }
}

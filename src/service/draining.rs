//! Graceful draining: when shutdown starts, report `Degraded` (or `Unhealthy`) and keep
//! serving for a delay, so callers' probes see it and route away before the process stops.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::health::payload::HealthPayload;
use crate::health::state::ReportedHealth;

/// The default drain delay.
const DEFAULT_DELAY: Duration = Duration::from_secs(10);

/// The handle a service holds to tell its callers it is going away.
///
/// Until draining starts, [`status`](Self::status) is `Healthy` (or whatever the service set with
/// [`set_status`](Self::set_status)). [`start`](Self::start) flips it at once to the draining
/// status (`Degraded` by default, `Unhealthy` if configured); [`drain`](Self::drain) starts and
/// then waits the drain delay (10 s by default) so the health endpoint keeps answering while
/// callers' probes notice and route away. Serve [`payload`](Self::payload) from the health
/// endpoint (or use `health_router` with the `axum` feature).
///
/// Cheap to clone: clones share one state, so the health endpoint and the shutdown code can each
/// hold one.
///
/// ```
/// use std::time::Duration;
/// use healthpick::ReportedHealth;
/// use healthpick::service::Draining;
///
/// let draining = Draining::builder()
///     .delay(Duration::from_secs(5))
///     .status_while_draining(ReportedHealth::Unhealthy)
///     .version("1.4.2")
///     .build();
/// let for_health_endpoint = draining.clone();
///
/// assert_eq!(for_health_endpoint.status(), ReportedHealth::Healthy);
/// assert_eq!(for_health_endpoint.payload().status_code(), 200);
///
/// draining.start(); // what `drain().await` and `shutdown_signal(..)` do first
/// assert!(for_health_endpoint.is_draining());
/// assert_eq!(for_health_endpoint.status(), ReportedHealth::Unhealthy);
/// assert_eq!(for_health_endpoint.payload().status_code(), 503);
/// ```
///
/// With axum (feature `axum`), the shutdown side is one line:
///
/// ```no_run
/// # #[cfg(feature = "axum")]
/// # async fn run(
/// #     app: axum::Router,
/// #     listener: tokio::net::TcpListener,
/// #     draining: healthpick::service::Draining,
/// #     shutdown_requested: tokio::sync::oneshot::Receiver<()>,
/// # ) -> std::io::Result<()> {
/// # use healthpick::service::health_router;
/// axum::serve(listener, app.merge(health_router(draining.clone())))
///     .with_graceful_shutdown(draining.shutdown_signal(shutdown_requested)) // e.g. on SIGTERM
///     .await
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Draining {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    delay: Duration,
    status_while_draining: ReportedHealth,
    version: Option<String>,
    environment: Option<String>,
    hostname: Option<String>,
    /// When draining started; set once, never cleared.
    started: OnceLock<Instant>,
    /// Logged "delay over" already (several tasks may await `drain`).
    delay_over_logged: AtomicBool,
    /// The status the service set for itself ([`Draining::set_status`]); written only while
    /// holding `reported`'s lock, so the reported status is always computed from the latest one.
    own_status: Mutex<ReportedHealth>,
    /// The status reported now (own status, or the draining status once draining).
    reported: watch::Sender<ReportedHealth>,
}

/// Builds a [`Draining`] with a delay, a draining status and the payload's descriptive fields.
#[derive(Debug, Clone)]
pub struct DrainingBuilder {
    delay: Duration,
    status_while_draining: ReportedHealth,
    version: Option<String>,
    environment: Option<String>,
    hostname: Option<String>,
}

impl Default for DrainingBuilder {
    fn default() -> Self {
        DrainingBuilder {
            delay: DEFAULT_DELAY,
            status_while_draining: ReportedHealth::Degraded,
            version: None,
            environment: None,
            hostname: None,
        }
    }
}

impl DrainingBuilder {
    /// How long [`Draining::drain`] keeps the service up after draining starts, so callers'
    /// probes can see the new status. Default: 10 s. Pick at least your callers' probe
    /// `Interval` × failure threshold plus a probe `Timeout`.
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The status reported while draining. Default: `Degraded` (callers prefer other instances
    /// but may still use this one if nothing else is left). `Unhealthy` makes callers' probes
    /// count failures (answered with 503), so they stop using it entirely. `Healthy` is accepted
    /// and means draining only delays the stop without telling callers.
    #[must_use]
    pub fn status_while_draining(mut self, status: ReportedHealth) -> Self {
        self.status_while_draining = status;
        self
    }

    /// The version the payload reports. Default: none (healthpick cannot know your version;
    /// `env!("CARGO_PKG_VERSION")` is a good value).
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// The environment the payload reports (`prod`, `staging`, ...). Default: none.
    #[must_use]
    pub fn environment(mut self, environment: impl Into<String>) -> Self {
        self.environment = Some(environment.into());
        self
    }

    /// The hostname the payload reports. Default: the `HOSTNAME` environment variable at
    /// [`build`](Self::build) time if it is set and not empty (a pod's name in Kubernetes),
    /// else none.
    #[must_use]
    pub fn hostname(mut self, hostname: impl Into<String>) -> Self {
        self.hostname = Some(hostname.into());
        self
    }

    /// Builds the handle, not draining, with status `Healthy`.
    pub fn build(self) -> Draining {
        let hostname = self.hostname.or_else(|| {
            std::env::var("HOSTNAME")
                .ok()
                .filter(|h| !h.trim().is_empty())
        });
        Draining {
            inner: Arc::new(Inner {
                delay: self.delay,
                status_while_draining: self.status_while_draining,
                version: self.version,
                environment: self.environment,
                hostname,
                started: OnceLock::new(),
                delay_over_logged: AtomicBool::new(false),
                own_status: Mutex::new(ReportedHealth::Healthy),
                reported: watch::Sender::new(ReportedHealth::Healthy),
            }),
        }
    }
}

impl Default for Draining {
    fn default() -> Self {
        Draining::new()
    }
}

impl Draining {
    /// A handle with the defaults: 10 s delay, `Degraded` while draining, hostname from
    /// `HOSTNAME`.
    pub fn new() -> Self {
        DrainingBuilder::default().build()
    }

    /// Starts configuring a handle; see [`DrainingBuilder`].
    pub fn builder() -> DrainingBuilder {
        DrainingBuilder::default()
    }

    /// The status the health endpoint reports now.
    ///
    /// Before draining: the service's own status (`Healthy` unless changed with
    /// [`set_status`](Self::set_status)). While draining: the configured draining status, or the
    /// service's own status if that is worse (a service that already said `Unhealthy` does not
    /// look better because it is shutting down).
    pub fn status(&self) -> ReportedHealth {
        *self.inner.reported.borrow()
    }

    /// Sets the status the service reports about itself, for example `Degraded` while a
    /// dependency is slow. While draining, the draining status still applies unless this one is
    /// worse. Returns whether the reported [`status`](Self::status) changed.
    pub fn set_status(&self, status: ReportedHealth) -> bool {
        self.republish(Some(status))
    }

    /// Whether draining has started. Never goes back to `false`.
    pub fn is_draining(&self) -> bool {
        self.inner.started.get().is_some()
    }

    /// The configured drain delay.
    pub fn delay(&self) -> Duration {
        self.inner.delay
    }

    /// The status reported while draining (before taking a worse own status into account).
    pub fn status_while_draining(&self) -> ReportedHealth {
        self.inner.status_while_draining
    }

    /// How much of the drain delay is left: `None` before draining starts, zero once it is over.
    pub fn remaining(&self) -> Option<Duration> {
        let started = *self.inner.started.get()?;
        Some((started + self.inner.delay).saturating_duration_since(Instant::now()))
    }

    /// The health payload to serve now: [`status`](Self::status) and the version, environment and
    /// hostname configured on the builder.
    pub fn payload(&self) -> HealthPayload {
        HealthPayload {
            status: Some(self.status()),
            version: self.inner.version.clone(),
            environment: self.inner.environment.clone(),
            hostname: self.inner.hostname.clone(),
        }
    }

    /// The payload plus draining details, for an operator-facing endpoint such as
    /// `/api/health/details`.
    pub fn details(&self) -> HealthDetails {
        let remaining = self.remaining();
        HealthDetails {
            payload: self.payload(),
            draining: remaining.is_some(),
            status_while_draining: self.inner.status_while_draining,
            drain_delay_ms: duration_ms(self.inner.delay),
            drain_remaining_ms: remaining.map(duration_ms),
        }
    }

    /// Subscribes to the reported status: the receiver sees the current value and every change
    /// (from [`set_status`](Self::set_status) or draining), for example to log or export it.
    pub fn subscribe(&self) -> watch::Receiver<ReportedHealth> {
        self.inner.reported.subscribe()
    }

    /// Starts draining now: the reported status flips at once. Idempotent: later calls change
    /// nothing and do not restart the delay. Logs at info (target `healthpick`) the first time.
    pub fn start(&self) {
        if self.inner.started.set(Instant::now()).is_err() {
            return;
        }
        self.republish(None);
        tracing::info!(
            target: "healthpick",
            status = %self.status(),
            delay = ?self.inner.delay,
            "draining started: reporting the draining status until the delay is over",
        );
    }

    /// Starts draining (see [`start`](Self::start)) and waits until the drain delay since the
    /// start is over; then the service may stop. If draining had started earlier (say from a
    /// pre-stop hook), only the rest of the delay is waited.
    ///
    /// Uses `tokio::time`, so it needs a Tokio runtime with time enabled, and honours paused time
    /// in tests.
    pub async fn drain(&self) {
        self.start();
        if let Some(&started) = self.inner.started.get() {
            tokio::time::sleep_until(started + self.inner.delay).await;
        }
        if !self.inner.delay_over_logged.swap(true, Ordering::AcqRel) {
            tracing::info!(
                target: "healthpick",
                delay = ?self.inner.delay,
                "drain delay over: the service may stop",
            );
        }
    }

    /// Waits for `signal` (its output is ignored), then [`drain`](Self::drain)s.
    ///
    /// The returned future owns a clone of the handle, so it is `'static` and can be passed
    /// straight to `axum::serve(..).with_graceful_shutdown(..)` or `tokio::spawn`: the server
    /// keeps serving (and reporting the draining status) during the delay, then shuts down.
    pub fn shutdown_signal<F>(&self, signal: F) -> impl Future<Output = ()> + Send + 'static
    where
        F: Future + Send + 'static,
    {
        let this = self.clone();
        async move {
            signal.await;
            this.drain().await;
        }
    }

    /// Recomputes the reported status from the own status (replaced by `own` if given) and the
    /// draining state; returns whether it changed. Everything happens under the `watch` lock, so
    /// concurrent `set_status` and `start` calls cannot publish a stale status.
    fn republish(&self, own: Option<ReportedHealth>) -> bool {
        self.inner.reported.send_if_modified(|current| {
            let mut own_status = self.inner.own_status.lock();
            if let Some(own) = own {
                *own_status = own;
            }
            let next = if self.is_draining() {
                worse(*own_status, self.inner.status_while_draining)
            } else {
                *own_status
            };
            let changed = *current != next;
            *current = next;
            changed
        })
    }
}

/// [`Draining::details`]: the health payload plus draining details, flattened into one JSON object:
///
/// ```json
/// {"status": "Degraded", "version": "1.4.2", "hostname": "eu-2",
///  "draining": true, "status_while_draining": "Degraded",
///  "drain_delay_ms": 10000, "drain_remaining_ms": 7412}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct HealthDetails {
    /// The same payload as the plain health endpoint.
    #[serde(flatten)]
    pub payload: HealthPayload,
    /// Whether draining has started.
    pub draining: bool,
    /// The status reported while draining.
    pub status_while_draining: ReportedHealth,
    /// The configured drain delay, in milliseconds.
    pub drain_delay_ms: u64,
    /// While draining, how much of the delay is left (0 once over); absent before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_remaining_ms: Option<u64>,
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn worse(a: ReportedHealth, b: ReportedHealth) -> ReportedHealth {
    let rank = |h| match h {
        ReportedHealth::Healthy => 0,
        ReportedHealth::Degraded => 1,
        ReportedHealth::Unhealthy => 2,
    };
    if rank(a) >= rank(b) {
        a
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_status_is_kept_when_worse_than_draining_status() {
        let d = Draining::builder().build();
        assert!(d.set_status(ReportedHealth::Unhealthy));
        d.start();
        assert_eq!(d.status(), ReportedHealth::Unhealthy);
        assert!(d.set_status(ReportedHealth::Healthy));
        assert_eq!(d.status(), ReportedHealth::Degraded);
        assert!(!d.set_status(ReportedHealth::Degraded));
    }

    #[test]
    fn explicit_hostname_wins_over_environment() {
        let d = Draining::builder()
            .hostname("h1")
            .environment("test")
            .build();
        let p = d.payload();
        assert_eq!(p.hostname.as_deref(), Some("h1"));
        assert_eq!(p.environment.as_deref(), Some("test"));
        assert_eq!(d.details().drain_remaining_ms, None);
    }
}

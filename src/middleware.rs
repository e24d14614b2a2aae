//! `reqwest-middleware` integration (feature `middleware`): a [`Middleware`]
//! that routes requests whose URL host is a cluster id — `http://payments/api/orders`, the
//! convention of Spring's load-balanced clients — and leaves every other URL alone. It drives the
//! same failover step as [`HealthAwareClient`](crate::HealthAwareClient): the same timeouts
//! (15 s per attempt, 30 s per call by default; a cluster's `HttpRequest:ActivityTimeout`),
//! retries (connect failures requeued, gateway statuses retried elsewhere, one budget per
//! cluster) and hedging, so it composes with the tracing middleware an application already runs.
//!
//! Unlike the wrapped client, the middleware hands back a plain `reqwest::Response`, so a
//! destination counts as in flight until the response headers arrived, not until its body is
//! read; the attempt's deadline still bounds reading the body (it is set as the request's
//! reqwest timeout).
//!
//! Like the wrapped client, it picks by the request's affinity key when the cluster has
//! `SessionAffinity` (an [`AffinityKey`] extension, else the header or cookie the cluster's
//! `AffinityKeyName` names), and records the load each destination reports in an
//! `endpoint-load-metrics` response header.
//!
//! # Errors
//!
//! For a routed URL, every error healthpick itself returns is
//! `reqwest_middleware::Error::Middleware` wrapping a [`ClientError`]: `Pick` when nothing could
//! be called, `Request` listing every attempt (their reqwest errors included) when none was
//! answered. [`client_error`] gets it back without guessing. Errors of URLs that are not routed
//! pass through unchanged.
//!
//! # Where it goes in a stack
//!
//! Last, or after the middleware that should see one call (not one attempt):
//!
//! - `reqwest-tracing`'s `TracingMiddleware` **before** it (outside) gives one span per call, with
//!   the cluster URL the caller used; **after** it (inside) one span per attempt, with the
//!   destination's URL. Both work; outside is the usual choice.
//! - `reqwest-retry`'s `RetryTransientMiddleware`: healthpick already retries routed requests
//!   on other destinations, within a budget. Put reqwest-retry **before** it (outside) if other
//!   URLs need it: healthpick's own errors are `Middleware` errors, which reqwest-retry's default
//!   strategy treats as fatal, so it does not retry (and multiply) a call healthpick already
//!   failed over. It does retry a 5xx response healthpick passes on when nothing was left to
//!   try; give it a strategy that leaves routed requests alone if that is not wanted. Never put
//!   it after (inside): it would retry each attempt on the same destination.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, HOST};
use reqwest_middleware::{Middleware, Next};
use tokio::time::Instant;

use crate::client::affinity::call_key;
use crate::client::drive::{drive, End, Failure, Reply};
use crate::client::error::{AttemptError, ClientError};
use crate::client::failover::{report_answer, CallOptions, CallPolicy, Failover};
use crate::client::hedging::Hedging;
use crate::client::request::{attempt_failures, transport_failure};
use crate::client::retry::{is_idempotent, Budgets, FailureKind, RetryPolicy};
use crate::client::timeouts::Timeouts;
use crate::destination::Destination;
use crate::engine::Engine;
use crate::error::PickError;
use crate::health::outcome::RequestOutcome;
use crate::ids::looks_like_cluster_id;
use crate::uri::request_url;

/// How much later than an attempt's deadline reqwest's own timeout of the attempt fires.
const BODY_SLACK: Duration = Duration::from_millis(5);

pub use crate::client::extensions::{AffinityKey, CallTimeout, NoHedging, Retryable};

/// Routes `http://<cluster-id>/path` through the engine.
///
/// ```
/// use healthpick::middleware::HealthPickMiddleware;
/// use healthpick::{Engine, Timeouts};
/// use std::time::Duration;
///
/// let engine = Engine::from_json(r#"{"Clusters": {"payments": {"Destinations": {
///     "eu-1": { "Address": "http://127.0.0.1:8001/" } } } } }"#)?;
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(
///         HealthPickMiddleware::builder(engine)
///             .timeouts(Timeouts::default().attempt(Duration::from_secs(5)))
///             .strict_routing(true)
///             .build(),
///     )
///     .build();
/// // client.get("http://payments/api/orders").send().await goes to eu-1.
/// # drop(client);
/// # Ok::<(), healthpick::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct HealthPickMiddleware {
    engine: Engine,
    calls: std::sync::Arc<CallPolicy>,
    strict_routing: bool,
}

/// Builds a [`HealthPickMiddleware`]: see [`HealthPickMiddleware::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until built"]
pub struct HealthPickMiddlewareBuilder {
    engine: Engine,
    policy: RetryPolicy,
    timeouts: Timeouts,
    hedging: Option<Hedging>,
    strict_routing: bool,
}

impl HealthPickMiddlewareBuilder {
    /// The retry policy (attempts, statuses, budget). Default [`RetryPolicy::default`].
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The attempt and call timeouts (default 15 s and 30 s; see [`Timeouts`]). The connect
    /// timeout is the reqwest client's.
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Hedges every retryable call (a request can turn it off or change it). Default: none.
    pub fn hedging(mut self, hedging: impl Into<Option<Hedging>>) -> Self {
        self.hedging = hedging.into();
        self
    }

    /// With strict routing, a URL whose host looks like a cluster id (a single name without
    /// dots, not `localhost`, not an IP address) but names no cluster fails with
    /// [`PickError::UnknownCluster`] instead of going to DNS: a misspelt cluster id is an
    /// error, not a lookup of `paymnts` on the network. Default false (such URLs pass through).
    pub fn strict_routing(mut self, strict: bool) -> Self {
        self.strict_routing = strict;
        self
    }

    /// The middleware.
    pub fn build(self) -> HealthPickMiddleware {
        HealthPickMiddleware {
            engine: self.engine,
            calls: std::sync::Arc::new(CallPolicy {
                budgets: Budgets::new(self.policy),
                timeouts: self.timeouts,
                hedging: self.hedging,
            }),
            strict_routing: self.strict_routing,
        }
    }
}

impl HealthPickMiddleware {
    /// A middleware routing through `engine` with the default [`RetryPolicy`] and
    /// [`Timeouts`].
    pub fn new(engine: Engine) -> Self {
        Self::builder(engine).build()
    }

    /// A middleware with a custom retry policy and the default timeouts.
    pub fn with_retry_policy(engine: Engine, policy: RetryPolicy) -> Self {
        Self::builder(engine).retry_policy(policy).build()
    }

    /// A builder: retry policy, timeouts, hedging, strict routing.
    pub fn builder(engine: Engine) -> HealthPickMiddlewareBuilder {
        HealthPickMiddlewareBuilder {
            engine,
            policy: RetryPolicy::default(),
            timeouts: Timeouts::default(),
            hedging: None,
            strict_routing: false,
        }
    }
}

/// The [`ClientError`] inside an error the middleware returned for a routed URL (see the module
/// documentation); `None` for errors of URLs it did not route, and of other middleware.
///
/// ```
/// # #[cfg(feature = "middleware")]
/// # fn f(err: reqwest_middleware::Error) {
/// if let Some(err) = healthpick::middleware::client_error(&err) {
///     eprintln!("tried: {:?}", err.attempts().iter().map(|a| &a.destination).collect::<Vec<_>>());
/// }
/// # }
/// ```
pub fn client_error(error: &reqwest_middleware::Error) -> Option<&ClientError> {
    match error {
        reqwest_middleware::Error::Middleware(inner) => inner.downcast_ref::<ClientError>(),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

fn middleware_error(error: ClientError) -> reqwest_middleware::Error {
    reqwest_middleware::Error::middleware(error)
}

/// A response with the extensions its attempt ran with.
type Answered = (reqwest::Response, http::Extensions);

impl Reply for Answered {
    fn status(&self) -> u16 {
        self.0.status().as_u16()
    }

    fn headers(&self) -> &HeaderMap {
        self.0.headers()
    }
}

impl Failure for reqwest_middleware::Error {
    fn kind(&self) -> FailureKind {
        match self {
            reqwest_middleware::Error::Reqwest(e) => transport_failure(e),
            reqwest_middleware::Error::Middleware(_) => FailureKind::Transport,
        }
    }
}

impl From<reqwest_middleware::Error> for AttemptError {
    fn from(error: reqwest_middleware::Error) -> Self {
        match error {
            reqwest_middleware::Error::Reqwest(e) => AttemptError::Transport(e),
            reqwest_middleware::Error::Middleware(e) => AttemptError::Middleware(e.into()),
        }
    }
}

#[async_trait::async_trait]
impl Middleware for HealthPickMiddleware {
    async fn handle(
        &self,
        req: reqwest::Request,
        extensions: &mut http::Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let cluster = match req.url().host_str() {
            Some(host) if self.engine.has_cluster(host) => host.to_string(),
            Some(host) if self.strict_routing && looks_like_cluster_id(host) => {
                return Err(middleware_error(ClientError::Pick(
                    PickError::UnknownCluster {
                        cluster: host.to_string(),
                    },
                )));
            }
            _ => return next.run(req, extensions).await,
        };
        let mut path = req.url().path().to_string();
        if let Some(query) = req.url().query() {
            path.push('?');
            path.push_str(query);
        }
        let retryable = (is_idempotent(req.method()) || extensions.get::<Retryable>().is_some())
            && req.try_clone().is_some();
        let hedging = if extensions.get::<NoHedging>().is_some() {
            Some(None)
        } else {
            extensions.get::<Hedging>().map(|h| Some(*h))
        };
        let options = CallOptions {
            retryable,
            attempt_timeout: req.timeout().copied(),
            call_timeout: extensions.get::<CallTimeout>().map(|t| t.0),
            hedging,
        };
        let explicit = extensions.get::<AffinityKey>().map(|key| key.0.clone());
        let (mut failover, pick) =
            Failover::start(&self.engine, &self.calls, &cluster, options, |affinity| {
                call_key(explicit, affinity, Some(req.headers()))
            })
            .await
            .map_err(|e| middleware_error(ClientError::from(e)))?;
        failover.request_method(req.method().as_str());
        // Each attempt runs with its own copy of the caller's extensions; the answer's come
        // back to the caller.
        let template = extensions.clone();
        // A request that cannot be retried is moved into its only attempt; a retryable one is
        // cloned for each.
        let mut original = Some(req);
        let mut send = |destination: &Destination, deadline: Option<Instant>| {
            let request = if retryable {
                original.as_ref().and_then(reqwest::Request::try_clone)
            } else {
                original.take()
            };
            let next = next.clone();
            let mut attempt_extensions = template.clone();
            let path = &path;
            let prepared = request.map(|mut request| {
                *request.url_mut() = request_url(destination.address(), path);
                if let Some(value) = destination
                    .with_attributes(|a| a.host().and_then(|h| HeaderValue::from_str(h).ok()))
                {
                    request.headers_mut().insert(HOST, value);
                }
                // reqwest's own timeout bounds reading the body, which the middleware never
                // sees. It is set a moment past the deadline, so that an attempt with no
                // response by then is the driver's timeout (with how long it had), not reqwest's.
                if let Some(deadline) = deadline {
                    *request.timeout_mut() =
                        Some(deadline.saturating_duration_since(Instant::now()) + BODY_SLACK);
                }
                request
            });
            async move {
                let request = prepared.ok_or_else(|| {
                    middleware_error(ClientError::builder(
                        "the request body cannot be sent again",
                    ))
                })?;
                let response = next.run(request, &mut attempt_extensions).await?;
                Ok::<Answered, reqwest_middleware::Error>((response, attempt_extensions))
            }
        };
        match drive(&mut failover, pick, &mut send).await {
            End::Answered(answer, _) => {
                let (response, answer_extensions) = answer.response;
                *extensions = answer_extensions;
                if !answer.reported {
                    // The middleware hands back a plain response: the destination leaves the
                    // in-flight count now.
                    let outcome = RequestOutcome::Status(response.status().as_u16());
                    report_answer(&answer.pick, outcome, answer.started);
                }
                Ok(response)
            }
            End::Failed(failed) => Err(middleware_error(ClientError::Request {
                cluster,
                attempts: attempt_failures(failed, &path),
            })),
        }
    }
}

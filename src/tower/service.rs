//! The tower layer and its service: route `http::Request`s whose URI authority is a cluster id
//! through the same failover step as the wrapped client and the middleware.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::HOST;
use http::{HeaderMap, HeaderValue, Request, Response, Uri};
use tokio::time::Instant;
use tower::util::ServiceExt;
use tower::{BoxError, Layer, Service};

use super::body::ResponseBody;
use super::replay::{CloneBody, NoReplay, ReplayBody};
use crate::client::affinity::call_key;
use crate::client::drive::{drive, End, Failure, Reply};
use crate::client::error::{not_connected, AttemptError, ClientError};
use crate::client::extensions::{AffinityKey, AttemptTimeout, CallTimeout, NoHedging, Retryable};
use crate::client::failover::{CallOptions, CallPolicy, Failover};
use crate::client::hedging::Hedging;
use crate::client::request::attempt_failures;
use crate::client::retry::{is_idempotent, Budgets, FailureKind, RetryPolicy};
use crate::client::timeouts::Timeouts;
use crate::destination::Destination;
use crate::engine::Engine;
use crate::error::PickError;
use crate::ids::looks_like_cluster_id;
use crate::uri::request_url;

/// A [`Layer`] that routes requests whose URI authority is a cluster id
/// (`http://payments/api/orders`) to one of the cluster's destinations, and passes every other
/// request to the inner service unchanged.
///
/// Build it with [`HealthPickLayer::builder`]; see the [module documentation](crate::tower).
#[derive(Debug, Clone)]
pub struct HealthPickLayer<R = CloneBody> {
    shared: Arc<Shared>,
    replay: R,
}

/// What every service of a layer shares: the engine, the retry budgets, the timeouts.
#[derive(Debug)]
struct Shared {
    engine: Engine,
    calls: CallPolicy,
    strict_routing: bool,
}

/// Builds a [`HealthPickLayer`].
#[derive(Debug)]
#[must_use = "a builder does nothing until built"]
pub struct HealthPickLayerBuilder<R = CloneBody> {
    engine: Engine,
    policy: RetryPolicy,
    timeouts: Timeouts,
    hedging: Option<Hedging>,
    strict_routing: bool,
    replay: R,
}

impl HealthPickLayer {
    /// A layer routing through `engine` with the default [`RetryPolicy`], [`Timeouts`] (15 s per
    /// attempt until the response headers, 30 s per call) and no hedging; bodies are copied
    /// for retries with `Clone` ([`CloneBody`]).
    pub fn new(engine: Engine) -> Self {
        Self::builder(engine).build()
    }

    /// A builder: retry policy, timeouts, hedging, strict routing, how bodies are replayed.
    pub fn builder(engine: Engine) -> HealthPickLayerBuilder {
        HealthPickLayerBuilder {
            engine,
            policy: RetryPolicy::default(),
            timeouts: Timeouts::default(),
            hedging: None,
            strict_routing: false,
            replay: CloneBody,
        }
    }
}

impl<R> HealthPickLayerBuilder<R> {
    /// The retry policy (attempts, statuses, budget). Default [`RetryPolicy::default`].
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The attempt and call timeouts. An attempt's timeout bounds it until its response
    /// headers arrive (a streaming body is not bounded: wrap the body or use tower's
    /// `Timeout` if it must be); the call's bounds every attempt together. Default 15 s and
    /// 30 s; a cluster's `HttpRequest:ActivityTimeout` replaces the attempt timeout.
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Hedges every retryable call (a request can turn it off with [`NoHedging`] or change it
    /// with a [`Hedging`] extension). Default: none.
    pub fn hedging(mut self, hedging: impl Into<Option<Hedging>>) -> Self {
        self.hedging = hedging.into();
        self
    }

    /// With strict routing, an authority that looks like a cluster id (one label without dots,
    /// not `localhost`, not an IP address) but names no cluster fails with
    /// [`PickError::UnknownCluster`] instead of going to the inner service. Default false.
    pub fn strict_routing(mut self, strict: bool) -> Self {
        self.strict_routing = strict;
        self
    }

    /// How request bodies are copied for retries and hedges: [`CloneBody`] (the default) or
    /// [`NoReplay`] for bodies that cannot be copied (tonic's), or your own [`ReplayBody`].
    pub fn replay<R2>(self, replay: R2) -> HealthPickLayerBuilder<R2> {
        HealthPickLayerBuilder {
            engine: self.engine,
            policy: self.policy,
            timeouts: self.timeouts,
            hedging: self.hedging,
            strict_routing: self.strict_routing,
            replay,
        }
    }

    /// Sends every request once: [`replay`](Self::replay) with [`NoReplay`].
    pub fn no_replay(self) -> HealthPickLayerBuilder<NoReplay> {
        self.replay(NoReplay)
    }

    /// The layer.
    pub fn build(self) -> HealthPickLayer<R> {
        HealthPickLayer {
            shared: Arc::new(Shared {
                engine: self.engine,
                calls: CallPolicy {
                    budgets: Budgets::new(self.policy),
                    timeouts: self.timeouts,
                    hedging: self.hedging,
                },
                strict_routing: self.strict_routing,
            }),
            replay: self.replay,
        }
    }
}

impl<S, R: Clone> Layer<S> for HealthPickLayer<R> {
    type Service = HealthPickService<S, R>;

    fn layer(&self, inner: S) -> Self::Service {
        HealthPickService {
            inner,
            shared: self.shared.clone(),
            replay: self.replay.clone(),
        }
    }
}

/// The service of a [`HealthPickLayer`]: routes requests whose URI authority is a cluster id,
/// passes the others to `S`.
///
/// It is always ready: each attempt drives a clone of the inner service to readiness and calls
/// it (`ServiceExt::oneshot`), as routers do, so an inner service that is not ready delays only
/// the attempts that use it. Errors are [`BoxError`]s: for a routed request, a [`ClientError`]
/// ([`client_error`] gets it back); for a request passed through, the inner service's error.
#[derive(Debug, Clone)]
pub struct HealthPickService<S, R = CloneBody> {
    inner: S,
    shared: Arc<Shared>,
    replay: R,
}

/// The future of [`HealthPickService::call`].
pub type ResponseFuture<B> =
    Pin<Box<dyn Future<Output = Result<Response<ResponseBody<B>>, BoxError>> + Send + 'static>>;

/// The [`ClientError`] of a routed request's error; `None` for errors of requests the layer
/// passed through, and of layers around it.
pub fn client_error(error: &BoxError) -> Option<&ClientError> {
    error.downcast_ref::<ClientError>()
}

/// The inner service's error as the failover step reads it.
#[derive(Debug)]
struct ServiceFailure(BoxError);

impl Failure for ServiceFailure {
    fn kind(&self) -> FailureKind {
        if not_connected(self.0.as_ref()) {
            FailureKind::Connect
        } else if self.0.is::<tower::timeout::error::Elapsed>() {
            FailureKind::TimedOut
        } else {
            FailureKind::Transport
        }
    }
}

impl From<ServiceFailure> for AttemptError {
    fn from(failure: ServiceFailure) -> Self {
        AttemptError::Service(failure.0)
    }
}

impl<B: Send> Reply for Response<B> {
    fn status(&self) -> u16 {
        Response::status(self).as_u16()
    }

    fn headers(&self) -> &HeaderMap {
        Response::headers(self)
    }
}

impl<S, B, RB, R> Service<Request<B>> for HealthPickService<S, R>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
    RB: Send + 'static,
    R: ReplayBody<B>,
{
    type Response = Response<ResponseBody<RB>>;
    type Error = BoxError;
    type Future = ResponseFuture<RB>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let shared = &self.shared;
        let cluster = match request.uri().host() {
            Some(host) if shared.engine.has_cluster(host) => host.to_string(),
            Some(host) if shared.strict_routing && looks_like_cluster_id(host) => {
                let error = ClientError::Pick(PickError::UnknownCluster {
                    cluster: host.to_string(),
                });
                return Box::pin(async move { Err(BoxError::from(error)) });
            }
            _ => {
                let inner = self.inner.clone();
                return Box::pin(async move {
                    let response = inner.oneshot(request).await.map_err(Into::into)?;
                    Ok(response.map(ResponseBody::passed))
                });
            }
        };
        Box::pin(route(
            self.inner.clone(),
            self.shared.clone(),
            self.replay.clone(),
            cluster,
            request,
        ))
    }
}

/// One routed call: start the failover step, drive it with attempts sent through clones of
/// `inner`, and hand back the answer with its pick in the body.
async fn route<S, B, RB, R>(
    inner: S,
    shared: Arc<Shared>,
    replay: R,
    cluster: String,
    request: Request<B>,
) -> Result<Response<ResponseBody<RB>>, BoxError>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
    RB: Send + 'static,
    R: ReplayBody<B>,
{
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| "/".to_string(), |p| p.as_str().to_string());
    let may_retry = is_idempotent(&parts.method) || parts.extensions.get::<Retryable>().is_some();
    // The first attempt's copy of the body, made now: without one the request is sent once.
    let mut spare = if may_retry {
        replay.replay(&body)
    } else {
        None
    };
    let retryable = spare.is_some();
    let hedging = if parts.extensions.get::<NoHedging>().is_some() {
        Some(None)
    } else {
        parts.extensions.get::<Hedging>().map(|h| Some(*h))
    };
    let options = CallOptions {
        retryable,
        attempt_timeout: parts.extensions.get::<AttemptTimeout>().map(|t| t.0),
        call_timeout: parts.extensions.get::<CallTimeout>().map(|t| t.0),
        hedging,
    };
    let explicit = parts
        .extensions
        .get::<AffinityKey>()
        .map(|key| key.0.clone());
    let (mut failover, pick) = Failover::start(
        &shared.engine,
        &shared.calls,
        &cluster,
        options,
        |affinity| call_key(explicit, affinity, Some(&parts.headers)),
    )
    .await
    .map_err(|e| BoxError::from(ClientError::from(e)))?;
    failover.request_method(parts.method.as_str());
    // The body: moved into the only attempt of a request that is not retried, copied for each
    // attempt of one that is (the first takes the copy made above).
    let mut original = Some(body);
    let attempt_path = path.as_str();
    // It owns the inner service (which need not be `Sync`) and clones it for each attempt.
    let mut send = move |destination: &Destination, _: Option<Instant>| {
        let body = if retryable {
            spare
                .take()
                .or_else(|| original.as_ref().and_then(|b| replay.replay(b)))
        } else {
            original.take()
        };
        let attempt = body.map(|body| attempt_request(&parts, destination, attempt_path, body));
        let inner = inner.clone();
        async move {
            let request = attempt.ok_or_else(|| {
                ServiceFailure(BoxError::from("the request body cannot be sent again"))
            })?;
            inner
                .oneshot(request?)
                .await
                .map_err(|e| ServiceFailure(e.into()))
        }
    };
    match drive(&mut failover, pick, &mut send).await {
        End::Answered(answer, _) => {
            let status = answer.response.status().as_u16();
            let (pick, reported, started) = (answer.pick, answer.reported, answer.started);
            Ok(answer
                .response
                .map(|body| ResponseBody::routed(body, pick, status, reported, started)))
        }
        End::Failed(failed) => Err(BoxError::from(ClientError::Request {
            attempts: attempt_failures(failed, &path),
            cluster,
        })),
    }
}

/// The request of one attempt: the caller's, sent to `destination` (its address joined with
/// the path and query, its Host when it has one).
fn attempt_request<B>(
    parts: &http::request::Parts,
    destination: &Destination,
    path: &str,
    body: B,
) -> Result<Request<B>, ServiceFailure> {
    let mut parts = parts.clone();
    let url = request_url(destination.address(), path);
    parts.uri = Uri::try_from(url.as_str()).map_err(|e| ServiceFailure(e.into()))?;
    match destination.with_attributes(|a| a.host().and_then(|h| HeaderValue::from_str(h).ok())) {
        Some(host) => {
            parts.headers.insert(HOST, host);
        }
        // A Host the caller set for the cluster name would reach the destination; the client
        // below derives the right one from the URI.
        None => {
            parts.headers.remove(HOST);
        }
    }
    Ok(Request::from_parts(parts, body))
}

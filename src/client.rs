//! The health-aware HTTP client (SPEC §8): a wrapped `reqwest::Client` that picks the
//! destination, reports every attempt's outcome to passive health checks (SPEC §4), and retries
//! an idempotent request that failed before any response on another destination — the next best
//! of the same tier, then the next tier — within a per-cluster retry budget. A connection that
//! could not be established is requeued: it does not use up an attempt (see [`RetryPolicy`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, HOST};
use reqwest::{Method, StatusCode};
use tower::retry::budget::{Budget, TpsBudget};
use url::Url;

use crate::config::{fold_case, with_folded};
use crate::destination::PickHandle;
use crate::engine::Engine;
use crate::error::PickError;
use crate::health::RequestOutcome;
use crate::{Destination, EndpointSet};

/// How retries are limited: attempts per call and a per-cluster budget.
///
/// A call is retried only when it is retryable at all (an idempotent method, or marked
/// [`retryable`](RequestBuilder::retryable); a body that can be sent again) and failed before
/// any response. Each retry goes to a destination not yet tried in that call, first in the same
/// tier, then in the next, and takes one token from the cluster's budget; a call stops at the
/// first retry the budget refuses, or when no untried destination is left.
///
/// Two kinds of failure count differently:
///
/// - a **connect failure** (the connection could not be established, so nothing was sent:
///   [`reqwest::Error::is_connect`]) is *requeued*, as Finagle does with requests that were never
///   written: it does not use up one of `max_attempts`, because trying another destination is
///   always safe and cheap. It still takes a budget token, and since no destination is tried
///   twice, a call makes at most as many requeues as its cluster has destinations. This is what
///   lets a call get past a whole tier of dead servers to the next tier before health checks
///   have noticed them. Turn it off with `requeue_connect_failures: false`;
/// - any other failure before a response (reset, timeout, broken connection) counts as one of
///   `max_attempts`: the request may have reached the server.
///
/// ```
/// use healthpick::RetryPolicy;
///
/// // Every failure counts, connect failures included: at most 2 attempts per call.
/// let strict = RetryPolicy {
///     max_attempts: 2,
///     requeue_connect_failures: false,
///     ..RetryPolicy::default()
/// };
/// # drop(strict);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts per call, the first included, not counting requeued connect failures. Default 3.
    pub max_attempts: usize,
    /// Whether a connect failure of a retryable request is retried on another destination
    /// without counting against `max_attempts` (see above). Default true.
    pub requeue_connect_failures: bool,
    /// Retries may add at most this fraction of the cluster's requests. Default 0.2.
    pub retry_ratio: f32,
    /// ... plus this many retries per second. Default 10.
    pub min_retries_per_second: u32,
    /// Window over which the budget counts (1 to 60 s; values outside are clamped). Default
    /// 10 s.
    pub budget_window: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            requeue_connect_failures: true,
            retry_ratio: 0.2,
            min_retries_per_second: 10,
            budget_window: Duration::from_secs(10),
        }
    }
}

/// The attempts of one call, as the [`RetryPolicy`] counts them (shared by the client and the
/// middleware).
#[derive(Debug)]
pub(crate) struct AttemptCount {
    retryable: bool,
    requeue_connect_failures: bool,
    max_attempts: usize,
    counted: usize,
}

impl AttemptCount {
    pub fn new(policy: &RetryPolicy, retryable: bool) -> Self {
        AttemptCount {
            retryable,
            requeue_connect_failures: policy.requeue_connect_failures,
            max_attempts: policy.max_attempts.max(1),
            counted: 0,
        }
    }

    /// Records an attempt that failed before any response (`connect`: it never connected);
    /// returns whether the call may go on to another destination, budget permitting.
    pub fn failed(&mut self, connect: bool) -> bool {
        if !self.retryable {
            return false;
        }
        if !(connect && self.requeue_connect_failures) {
            self.counted += 1;
        }
        self.counted < self.max_attempts
    }
}

/// Per-cluster retry budgets, shared by the client and the middleware.
#[derive(Debug)]
pub(crate) struct Retries {
    pub policy: RetryPolicy,
    /// Folded cluster id -> budget. Read on every call without a lock; a cluster's first call
    /// adds its entry (copy-on-write, once per cluster).
    budgets: ArcSwap<HashMap<String, Arc<TpsBudget>, foldhash::fast::RandomState>>,
}

impl Retries {
    pub fn new(policy: RetryPolicy) -> Self {
        Retries {
            policy,
            budgets: ArcSwap::from_pointee(HashMap::default()),
        }
    }

    /// Counts one request of `cluster` in its budget (every call makes one deposit).
    pub fn deposit(&self, cluster: &str) {
        // Usual case: a cluster already seen, found without a lock, an allocation or a reference
        // count.
        let found = with_folded(cluster, |folded| match self.budgets.load().get(folded) {
            Some(budget) => {
                budget.deposit();
                true
            }
            None => false,
        });
        if !found {
            self.budget(cluster).deposit();
        }
    }

    /// Takes one retry of `cluster` from its budget; `false` when the budget refuses.
    pub fn withdraw(&self, cluster: &str) -> bool {
        self.budget(cluster).withdraw()
    }

    /// The budget of `cluster`, added on first use.
    #[cold]
    fn budget(&self, cluster: &str) -> Arc<TpsBudget> {
        let folded = fold_case(cluster);
        if let Some(budget) = self.budgets.load().get(&folded) {
            return budget.clone();
        }
        let fresh = Arc::new(self.new_budget());
        // Two first calls racing: the first insert wins and both use its budget.
        self.budgets.rcu(|table| {
            let mut table = HashMap::clone(table);
            table.entry(folded.clone()).or_insert_with(|| fresh.clone());
            table
        });
        self.budgets.load().get(&folded).cloned().unwrap_or(fresh)
    }

    fn new_budget(&self) -> TpsBudget {
        // tower's budget asserts these ranges (from Finagle); clamp instead of panicking.
        TpsBudget::new(
            self.policy
                .budget_window
                .clamp(Duration::from_secs(1), Duration::from_secs(60)),
            self.policy.min_retries_per_second.min(i32::MAX as u32 - 1),
            if self.policy.retry_ratio.is_finite() {
                self.policy.retry_ratio.clamp(0.0, 1000.0)
            } else {
                0.0
            },
        )
    }
}

/// Whether `method` may be retried without being marked: GET, HEAD, OPTIONS, PUT, DELETE, TRACE.
pub(crate) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE | Method::TRACE
    )
}

/// One failed attempt of a call.
#[derive(Debug)]
pub struct AttemptFailure {
    /// The destination tried.
    pub destination: String,
    /// The URL sent to.
    pub url: Url,
    /// What went wrong.
    pub error: reqwest::Error,
}

/// Why a call through [`HealthAwareClient`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No destination of the cluster may receive traffic (nothing was sent).
    #[error("no available destinations in cluster `{cluster}`")]
    NoAvailableDestinations {
        /// The cluster.
        cluster: String,
    },
    /// No cluster has this id.
    #[error("unknown cluster `{cluster}`")]
    UnknownCluster {
        /// The cluster id as asked.
        cluster: String,
    },
    /// Every attempt failed without a response; each destination tried is listed, connect
    /// failures included.
    #[error("request to cluster `{cluster}` failed: {}", describe_attempts(.attempts))]
    Request {
        /// The cluster.
        cluster: String,
        /// Every attempt, in order.
        attempts: Vec<AttemptFailure>,
    },
    /// The request could not be built (bad header, path or body).
    #[error("invalid request: {0}")]
    Builder(String),
    /// A response arrived but its body could not be read or decoded (for example
    /// [`Response::json`] on a body that is not JSON).
    #[error("bad response body: {0}")]
    Body(String),
}

fn describe_attempts(attempts: &[AttemptFailure]) -> String {
    attempts
        .iter()
        .map(|a| {
            format!(
                "destination `{}` ({}): {}",
                a.destination,
                a.url,
                chain(&a.error)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl ClientError {
    /// True when nothing was sent because the cluster had no available destination.
    pub fn is_no_available_destinations(&self) -> bool {
        matches!(self, ClientError::NoAvailableDestinations { .. })
    }

    /// The cluster the error is about, when it is about one.
    pub fn cluster(&self) -> Option<&str> {
        match self {
            ClientError::NoAvailableDestinations { cluster }
            | ClientError::UnknownCluster { cluster }
            | ClientError::Request { cluster, .. } => Some(cluster),
            ClientError::Builder(_) | ClientError::Body(_) => None,
        }
    }

    /// The last destination tried, if any request was sent.
    pub fn destination(&self) -> Option<&str> {
        match self {
            ClientError::Request { attempts, .. } => {
                attempts.last().map(|a| a.destination.as_str())
            }
            _ => None,
        }
    }

    /// Every failed attempt, in order: every destination tried, requeued connect failures
    /// included (their `error.is_connect()` is true).
    pub fn attempts(&self) -> &[AttemptFailure] {
        match self {
            ClientError::Request { attempts, .. } => attempts,
            _ => &[],
        }
    }

    /// The underlying reqwest error of the last attempt.
    pub fn reqwest_error(&self) -> Option<&reqwest::Error> {
        self.attempts().last().map(|a| &a.error)
    }
}

impl From<PickError> for ClientError {
    fn from(e: PickError) -> Self {
        match e {
            PickError::NoAvailableDestinations { cluster } => {
                ClientError::NoAvailableDestinations { cluster }
            }
            PickError::UnknownCluster { cluster } => ClientError::UnknownCluster { cluster },
        }
    }
}

/// A `reqwest::Client` that routes by cluster through an [`Engine`].
///
/// ```no_run
/// use healthpick::{Engine, HealthAwareClient};
///
/// # async fn run(engine: Engine) -> Result<(), Box<dyn std::error::Error>> {
/// let client = HealthAwareClient::new(reqwest::Client::new(), engine);
/// let response = client.get("payments", "/api/orders?id=7").send().await?;
/// println!("{} answered {}", response.destination().id(), response.status());
/// let body = response.text().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct HealthAwareClient {
    inner: Arc<ClientInner>,
}

#[derive(Debug)]
struct ClientInner {
    http: reqwest::Client,
    engine: Engine,
    default_cluster: Option<String>,
    retries: Retries,
}

impl HealthAwareClient {
    /// Wraps `http` (its pool, TLS and timeouts are used as they are) with the default
    /// [`RetryPolicy`].
    pub fn new(http: reqwest::Client, engine: Engine) -> Self {
        Self::with_retry_policy(http, engine, RetryPolicy::default())
    }

    /// Wraps `http` with a custom retry policy.
    pub fn with_retry_policy(http: reqwest::Client, engine: Engine, policy: RetryPolicy) -> Self {
        HealthAwareClient {
            inner: Arc::new(ClientInner {
                http,
                engine,
                default_cluster: None,
                retries: Retries::new(policy),
            }),
        }
    }

    /// A client for an [`EndpointSet`]: [`get_default`](Self::get_default) and friends use its
    /// cluster.
    pub fn for_endpoint_set(http: reqwest::Client, set: &EndpointSet) -> Self {
        HealthAwareClient {
            inner: Arc::new(ClientInner {
                http,
                engine: set.engine().clone(),
                default_cluster: Some(EndpointSet::CLUSTER.to_string()),
                retries: Retries::new(RetryPolicy::default()),
            }),
        }
    }

    /// The engine routing this client.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// A request with any method to `path` (`/api/orders?id=7`) on `cluster`.
    pub fn request(&self, method: Method, cluster: &str, path: &str) -> RequestBuilder {
        // One buffer for both: a request builder makes a single allocation of its own.
        let mut route = String::with_capacity(cluster.len() + path.len());
        route.push_str(cluster);
        route.push_str(path);
        RequestBuilder {
            client: self.clone(),
            route,
            cluster_len: cluster.len(),
            method,
            headers: None,
            body: None,
            timeout: None,
            retryable: None,
            error: None,
        }
    }

    /// A request on the default cluster (the endpoint set's).
    pub fn request_default(&self, method: Method, path: &str) -> RequestBuilder {
        let cluster = self.inner.default_cluster.clone().unwrap_or_default();
        self.request(method, &cluster, path)
    }

    /// `GET` on the default cluster.
    pub fn get_default(&self, path: &str) -> RequestBuilder {
        self.request_default(Method::GET, path)
    }

    /// `GET`.
    pub fn get(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::GET, cluster, path)
    }

    /// `POST` (not retried unless marked [`retryable`](RequestBuilder::retryable)).
    pub fn post(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::POST, cluster, path)
    }

    /// `PUT`.
    pub fn put(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::PUT, cluster, path)
    }

    /// `DELETE`.
    pub fn delete(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::DELETE, cluster, path)
    }

    /// `HEAD`.
    pub fn head(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::HEAD, cluster, path)
    }
}

/// A request being built; mirrors `reqwest::RequestBuilder`.
#[derive(Debug)]
#[must_use = "a request does nothing until sent"]
pub struct RequestBuilder {
    client: HealthAwareClient,
    /// The cluster id followed by the path and query (`payments/api/orders?id=7`).
    route: String,
    /// Where the cluster id ends in `route`.
    cluster_len: usize,
    method: Method,
    /// `None` until a header is added (most requests have none of their own).
    headers: Option<HeaderMap>,
    /// Shared, so every attempt can send it again without a copy.
    body: Option<Bytes>,
    timeout: Option<Duration>,
    retryable: Option<bool>,
    error: Option<String>,
}

impl RequestBuilder {
    /// Adds a header.
    pub fn header<K, V>(mut self, key: K, value: V) -> Self
    where
        HeaderName: TryFrom<K>,
        HeaderValue: TryFrom<V>,
        <HeaderName as TryFrom<K>>::Error: std::fmt::Display,
        <HeaderValue as TryFrom<V>>::Error: std::fmt::Display,
    {
        match (HeaderName::try_from(key), HeaderValue::try_from(value)) {
            (Ok(k), Ok(v)) => {
                self.headers.get_or_insert_with(HeaderMap::new).append(k, v);
            }
            (Err(e), _) => self.error = Some(format!("bad header name: {e}")),
            (_, Err(e)) => self.error = Some(format!("bad header value: {e}")),
        }
        self
    }

    /// Adds headers.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        match &mut self.headers {
            Some(own) => own.extend(headers),
            None => self.headers = Some(headers),
        }
        self
    }

    /// Appends URL-encoded query parameters (`&[("id", "7")]`, a struct, a map).
    pub fn query<T: serde::Serialize + ?Sized>(mut self, query: &T) -> Self {
        match serde_urlencoded::to_string(query) {
            Ok(q) if q.is_empty() => {}
            Ok(q) => {
                let path = &self.route[self.cluster_len..];
                let separator = if path.contains('?') { '&' } else { '?' };
                self.route.push(separator);
                self.route.push_str(&q);
            }
            Err(e) => self.error = Some(format!("bad query: {e}")),
        }
        self
    }

    /// Sets a JSON body and `Content-Type: application/json`.
    pub fn json<T: serde::Serialize + ?Sized>(mut self, json: &T) -> Self {
        match serde_json::to_vec(json) {
            Ok(body) => {
                self.headers.get_or_insert_with(HeaderMap::new).insert(
                    reqwest::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                self.body = Some(body.into());
            }
            Err(e) => self.error = Some(format!("bad JSON body: {e}")),
        }
        self
    }

    /// Sets the body (`&'static str`, `String`, `Vec<u8>`, [`Bytes`]: what reqwest takes in
    /// memory). It is kept so that a retry can send it again; attempts share it, none copies it.
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Timeout of each attempt, as reqwest applies it (until the response body is read).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Marks the request as safe (or not) to retry on another destination. Default: true for
    /// GET, HEAD, OPTIONS, PUT, DELETE and TRACE, false otherwise.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = Some(retryable);
        self
    }

    /// Sends the request: picks a destination, sends, reports the outcome, and on a transport
    /// failure before any response retries a retryable request on another destination, as the
    /// client's [`RetryPolicy`] allows (connect failures do not count as attempts).
    ///
    /// # Errors
    /// [`ClientError::NoAvailableDestinations`] when nothing may be called,
    /// [`ClientError::Request`] with every attempt when none got a response.
    pub async fn send(self) -> Result<Response, ClientError> {
        let RequestBuilder {
            client,
            route,
            cluster_len,
            method,
            mut headers,
            mut body,
            timeout,
            retryable,
            error,
        } = self;
        if let Some(e) = error {
            return Err(ClientError::Builder(e));
        }
        let (cluster, path) = route.split_at(cluster_len);
        let inner = &client.inner;
        let retryable = retryable.unwrap_or_else(|| is_idempotent(&method));
        let mut count = AttemptCount::new(&inner.retries.policy, retryable);
        let mut pick = match inner.engine.pick_endpoint_if_ready(cluster) {
            Some(pick) => pick?,
            // Only the first calls of a cluster wait for its first probe round; boxing that
            // rare future keeps every call's state small.
            None => Box::pin(inner.engine.pick_endpoint_ready(cluster)).await?,
        };
        // After the first pick succeeded, so unknown cluster names leave no budget behind.
        inner.retries.deposit(cluster);
        let mut failures = Failures::default();
        loop {
            let url = crate::uri::request_url(pick.address(), path);
            // A request built directly (not through reqwest's builder): no client handle to
            // clone and nothing moved around for parts this call does not have.
            let mut request = reqwest::Request::new(method.clone(), url);
            // A call that cannot be retried moves its headers and body into its only request.
            let attempt_headers = if retryable {
                headers.clone()
            } else {
                headers.take()
            };
            if let Some(attempt_headers) = attempt_headers {
                *request.headers_mut() = attempt_headers;
            }
            if let Some(value) = pick
                .destination()
                .host()
                .and_then(|h| HeaderValue::from_str(h).ok())
            {
                // The destination's Host replaces any the caller set: exactly one is sent.
                request.headers_mut().insert(HOST, value);
            }
            if timeout.is_some() {
                // reqwest keeps it among the request's extensions: a map, built only if needed.
                *request.timeout_mut() = timeout;
            }
            let attempt_body = if retryable { body.clone() } else { body.take() };
            *request.body_mut() = attempt_body.map(reqwest::Body::from);
            let attempt = Attempt::new(pick);
            let error = match inner.http.execute(request).await {
                Ok(response) => return Ok(Response::new(response, attempt, failures.attempts)),
                Err(error) => error,
            };
            let call = Call {
                inner,
                cluster,
                path,
            };
            match call.after_failure(attempt, error, &mut count, &mut failures) {
                Some(next) => pick = next,
                None => break,
            }
        }
        Err(ClientError::Request {
            cluster: cluster.to_string(),
            attempts: failures.attempts,
        })
    }
}

/// The attempts of one call that failed before any response.
#[derive(Default)]
struct Failures {
    /// Destination ids, in order.
    tried: Vec<String>,
    attempts: Vec<AttemptFailure>,
}

/// What a call's failure handling needs to know.
struct Call<'a> {
    inner: &'a ClientInner,
    cluster: &'a str,
    path: &'a str,
}

impl Call<'_> {
    /// Records an attempt that failed before any response and returns the destination to try
    /// next, if the retry policy, the untried destinations and the budget allow one. Out of line
    /// and cold: a call that succeeds never runs it, so the send future's hot path stays small.
    #[cold]
    #[inline(never)]
    fn after_failure(
        &self,
        attempt: Attempt,
        error: reqwest::Error,
        count: &mut AttemptCount,
        failures: &mut Failures,
    ) -> Option<PickHandle> {
        let failed = attempt.fail();
        let destination = failed.id().to_string();
        let connect = error.is_connect();
        // Built again only on failure, so a successful attempt need not keep a copy.
        let url = crate::uri::request_url(failed.address(), self.path);
        let go_on = count.failed(connect);
        let cluster = self.cluster;
        tracing::debug!(target: "healthpick", %cluster, %destination, %url, connect, retry = go_on, error = %chain(&error), "attempt failed before any response");
        failures.tried.push(destination.clone());
        failures.attempts.push(AttemptFailure {
            destination,
            url,
            error,
        });
        if !go_on {
            return None;
        }
        // Pick before withdrawing, so that a call with no destination left spends no token.
        let next = self
            .inner
            .engine
            .pick_endpoint_excluding(cluster, &failures.tried)
            .ok()?;
        if !self.inner.retries.withdraw(cluster) {
            tracing::debug!(target: "healthpick", %cluster, "retry budget exhausted");
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

    /// Reports a response with `status`.
    #[cfg_attr(not(feature = "middleware"), allow(dead_code))]
    pub fn succeed(mut self, status: u16) {
        if let Some(pick) = self.pick.take() {
            pick.report(RequestOutcome::Status(status));
        }
    }

    /// Reports a transport failure; returns the destination.
    pub fn fail(mut self) -> Arc<Destination> {
        let pick = self
            .pick
            .take()
            .expect("an attempt holds its pick until it ends");
        pick.report(RequestOutcome::TransportFailure);
        pick.destination_arc()
    }

    fn take(mut self) -> Option<PickHandle> {
        self.pick.take()
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if let Some(pick) = self.pick.take() {
            pick.report(RequestOutcome::Cancelled);
        }
    }
}

/// A response from a destination. The destination stays in flight until the body is read or
/// the response dropped; the outcome is reported then (a body that breaks off is a transport
/// failure).
#[derive(Debug)]
pub struct Response {
    /// `None` only once a consuming method took it.
    inner: Option<reqwest::Response>,
    status: StatusCode,
    /// Keeps the destination in flight until the response is dropped.
    pick: PickHandle,
    /// Whether the outcome was reported (by a consuming method; otherwise `Drop` does it).
    reported: bool,
    /// Attempts of the same call that failed before this one answered.
    failed_attempts: Vec<AttemptFailure>,
}

static NO_HEADERS: std::sync::LazyLock<HeaderMap> = std::sync::LazyLock::new(HeaderMap::new);

impl Response {
    fn new(
        inner: reqwest::Response,
        attempt: Attempt,
        failed_attempts: Vec<AttemptFailure>,
    ) -> Self {
        Response {
            status: inner.status(),
            inner: Some(inner),
            pick: attempt
                .take()
                .expect("an attempt holds its pick until it ends"),
            reported: false,
            failed_attempts,
        }
    }

    /// The attempts of this call that failed before this response arrived, in order (each
    /// destination, URL and error): empty when the first attempt answered. Their number is the
    /// number of retries the call took.
    pub fn failed_attempts(&self) -> &[AttemptFailure] {
        &self.failed_attempts
    }

    /// The destination that answered.
    pub fn destination(&self) -> &Destination {
        self.pick.destination()
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        self.inner.as_ref().map_or(&NO_HEADERS, |r| r.headers())
    }

    /// Reports the outcome once; the destination stays in flight until `self` is dropped,
    /// which every caller of this does right after.
    fn finish(&mut self, body_ok: bool) {
        if !std::mem::replace(&mut self.reported, true) {
            self.pick.report(if body_ok {
                RequestOutcome::Status(self.status.as_u16())
            } else {
                RequestOutcome::TransportFailure
            });
        }
    }

    /// The whole body, as `reqwest::Response::bytes` gives it (no copy).
    ///
    /// # Errors
    /// As `reqwest::Response::bytes`; the attempt then counts as a transport failure.
    pub async fn bytes(mut self) -> Result<Bytes, reqwest::Error> {
        let Some(inner) = self.inner.take() else {
            return Ok(Bytes::new());
        };
        let result = inner.bytes().await;
        self.finish(result.is_ok());
        result
    }

    /// The whole body as text (UTF-8, lossy).
    ///
    /// # Errors
    /// As [`bytes`](Self::bytes).
    pub async fn text(self) -> Result<String, reqwest::Error> {
        self.bytes()
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// The body parsed as JSON.
    ///
    /// # Errors
    /// [`ClientError::Body`] naming the problem when the body cannot be read or is not JSON.
    pub async fn json<T: serde::de::DeserializeOwned>(self) -> Result<T, ClientError> {
        let bytes = self
            .bytes()
            .await
            .map_err(|e| ClientError::Body(format!("reading the body failed: {}", chain(&e))))?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Body(format!("not JSON: {e}")))
    }

    /// The underlying reqwest response. The destination is released and the outcome reported
    /// now, so in-flight counts no longer cover reading its body.
    pub fn into_inner(mut self) -> Option<reqwest::Response> {
        self.finish(true);
        self.inner.take()
    }
}

impl Drop for Response {
    fn drop(&mut self) {
        // Not reading the body is the caller's choice: the destination did answer.
        self.finish(true);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Retries, RetryPolicy};

    /// One budget per cluster: ids that differ only in case share it, other clusters do not.
    #[test]
    fn one_budget_per_cluster_whatever_the_case() {
        let retries = Retries::new(RetryPolicy::default());
        let a = retries.budget("payments");
        let b = retries.budget("Payments");
        let c = retries.budget("PAYMENTS");
        let other = retries.budget("orders");
        assert!(Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&a, &c));
        assert!(!Arc::ptr_eq(&a, &other));
        // A non-ASCII id folds like config ids do.
        assert!(Arc::ptr_eq(
            &retries.budget("Übercluster"),
            &retries.budget("übercluster")
        ));
    }

    /// Deposits land in the cluster's one budget whichever way its id is spelt (the lower-case
    /// fast path and the folding slow path), and buy retries at the policy's ratio.
    #[test]
    fn deposits_buy_retries_at_the_ratio_whatever_the_case() {
        let retries = Retries::new(RetryPolicy {
            retry_ratio: 0.5,
            min_retries_per_second: 0,
            ..RetryPolicy::default()
        });
        assert!(!retries.withdraw("payments"), "nothing deposited yet");
        for id in ["payments", "Payments", "payments", "PAYMENTS"] {
            retries.deposit(id);
        }
        retries.deposit("orders");
        // Four requests at 50%: two retries, then none.
        assert!(retries.withdraw("PAYMENTS"));
        assert!(retries.withdraw("payments"));
        assert!(!retries.withdraw("Payments"));
        assert!(
            !retries.withdraw("orders"),
            "one request buys no whole retry"
        );
    }

    /// Threads making a cluster's first calls at once all end up with the same budget.
    #[test]
    fn racing_first_calls_share_one_budget() {
        for _ in 0..20 {
            let retries = Retries::new(RetryPolicy::default());
            let barrier = std::sync::Barrier::new(4);
            let budgets: Vec<_> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|i| {
                        let (retries, barrier) = (&retries, &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            let id = if i % 2 == 0 { "c" } else { "C" };
                            retries.deposit(id);
                            (retries.budget(id), retries.budget("d"))
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for (c, d) in &budgets {
                assert!(Arc::ptr_eq(c, &budgets[0].0));
                assert!(Arc::ptr_eq(d, &budgets[0].1));
            }
            assert!(!Arc::ptr_eq(&budgets[0].0, &budgets[0].1));
        }
    }
}

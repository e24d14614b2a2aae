//! A call being built and sent: [`RequestBuilder`] mirrors `reqwest::RequestBuilder`; sending
//! picks a destination (by the request's affinity key when its cluster has `SessionAffinity`),
//! sends, reports the outcome and, through the failover step, retries elsewhere, hedges and
//! times out as the client's settings and the request's own say.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, HOST};
use reqwest::Method;
use tokio::time::Instant;

use super::affinity::call_key;
use super::drive::{drive, End, Failed, Failure, Reply, Why};
use super::error::{AttemptError, AttemptFailure, ClientError};
use super::failover::{CallOptions, Failover};
use super::hedging::Hedging;
use super::response::Response;
use super::retry::{is_idempotent, FailureKind};
use super::HealthAwareClient;
use crate::destination::Destination;
use crate::uri::request_url;

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
    call_timeout: Option<Duration>,
    hedging: Option<Option<Hedging>>,
    retryable: Option<bool>,
    affinity_key: Option<Bytes>,
    error: Option<ClientError>,
}

impl RequestBuilder {
    pub(crate) fn new(
        client: HealthAwareClient,
        route: String,
        cluster_len: usize,
        method: Method,
    ) -> Self {
        RequestBuilder {
            client,
            route,
            cluster_len,
            method,
            headers: None,
            body: None,
            timeout: None,
            call_timeout: None,
            hedging: None,
            retryable: None,
            affinity_key: None,
            error: None,
        }
    }

    /// Adds a header.
    pub fn header<K, V>(mut self, key: K, value: V) -> Self
    where
        HeaderName: TryFrom<K>,
        HeaderValue: TryFrom<V>,
        <HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        <HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        match (HeaderName::try_from(key), HeaderValue::try_from(value)) {
            (Ok(k), Ok(v)) => {
                self.headers.get_or_insert_with(HeaderMap::new).append(k, v);
            }
            (Err(e), _) => {
                self.error = Some(ClientError::builder_with("bad header name", e.into()));
            }
            (_, Err(e)) => {
                self.error = Some(ClientError::builder_with("bad header value", e.into()));
            }
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
            Err(e) => self.error = Some(ClientError::builder_with("bad query", e)),
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
            Err(e) => self.error = Some(ClientError::builder_with("bad JSON body", e)),
        }
        self
    }

    /// Sets the body (`&'static str`, `String`, `Vec<u8>`, [`Bytes`]: what reqwest takes in
    /// memory). It is kept so that a retry can send it again; attempts share it, none copies it.
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Timeout of each attempt of this request, until its response body is read; replaces the
    /// cluster's `HttpRequest:ActivityTimeout` and the client's attempt timeout (default 15 s,
    /// see [`Timeouts`](crate::Timeouts)).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Timeout of the whole call (every attempt, retry and hedge, until the body is read);
    /// replaces the client's (default 30 s).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = Some(timeout);
        self
    }

    /// Hedging for this request (`None` turns the client's off); see [`Hedging`]. Only
    /// retryable requests hedge.
    pub fn hedging(mut self, hedging: impl Into<Option<Hedging>>) -> Self {
        self.hedging = Some(hedging.into());
        self
    }

    /// Marks the request as safe (or not) to retry on another destination. Default: true for
    /// GET, HEAD, OPTIONS, PUT, DELETE and TRACE, false otherwise.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = Some(retryable);
        self
    }

    /// The request's affinity key (its bytes: a user, cart or tenant id): for a cluster with
    /// `SessionAffinity`, requests with the same key go to the same destination, and a retry
    /// goes to the key's next choice. It wins over the key the cluster's `AffinityKeyName`
    /// names in the request's headers or cookies. Default: that key, when the request has one;
    /// without any key the cluster's load-balancing policy picks. On a cluster without
    /// `SessionAffinity` only a policy that reads keys uses it.
    ///
    /// ```no_run
    /// # async fn run(client: healthpick::HealthAwareClient) -> Result<(), healthpick::ClientError> {
    /// let user = 4711_u64;
    /// let response = client
    ///     .get("carts", "/api/cart")
    ///     .affinity_key(user.to_be_bytes()) // every request of this user: the same destination
    ///     .send()
    ///     .await?;
    /// # drop(response); Ok(()) }
    /// ```
    pub fn affinity_key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.affinity_key = Some(Bytes::copy_from_slice(key.as_ref()));
        self
    }

    /// Sends the request: picks a destination, sends, reports the outcome, and when the attempt
    /// failed before any response, timed out, or was answered with a retryable status (502,
    /// 503, 504), retries a retryable request on another destination, as the client's
    /// [`RetryPolicy`](crate::RetryPolicy) allows; hedges when asked to. The load a
    /// destination reports in an `endpoint-load-metrics` response header is recorded for it.
    ///
    /// # Errors
    /// [`ClientError::Pick`] when nothing may be called (no available destination; under
    /// `SessionAffinity` with `FailurePolicy: Return503Error`, the key's destination is
    /// unavailable: [`ClientError::is_affinity_unavailable`]),
    /// [`ClientError::Request`] with every attempt when none gave an answer,
    /// [`ClientError::Builder`] when the request could not be built.
    pub async fn send(self) -> Result<Response, ClientError> {
        let RequestBuilder {
            client,
            route,
            cluster_len,
            method,
            headers,
            body,
            timeout,
            call_timeout,
            hedging,
            retryable,
            affinity_key,
            error,
        } = self;
        if let Some(e) = error {
            return Err(e);
        }
        let (cluster, path) = route.split_at(cluster_len);
        let inner = &client.inner;
        let retryable = retryable.unwrap_or_else(|| is_idempotent(&method));
        let options = CallOptions {
            retryable,
            attempt_timeout: timeout,
            call_timeout,
            hedging,
        };
        let (mut failover, pick) =
            Failover::start(&inner.engine, &inner.calls, cluster, options, |affinity| {
                call_key(affinity_key, affinity, headers.as_ref())
            })
            .await?;
        failover.request_method(method.as_str());
        let mut exchange = ClientExchange {
            http: &inner.http,
            method,
            path,
            headers,
            body,
            retryable,
        };
        let mut send =
            |destination: &Destination, _deadline: Option<Instant>| exchange.send(destination);
        match drive(&mut failover, pick, &mut send).await {
            End::Answered(answer, failed) => {
                Ok(Response::new(answer, attempt_failures(failed, path)))
            }
            End::Failed(failed) => Err(ClientError::Request {
                cluster: cluster.to_string(),
                attempts: attempt_failures(failed, path),
            }),
        }
    }
}

/// How the wrapped client sends one attempt: a request built directly (not through reqwest's
/// builder), so no client handle is cloned and nothing is moved around for parts a call does
/// not have.
struct ClientExchange<'c> {
    http: &'c reqwest::Client,
    method: Method,
    path: &'c str,
    /// `None` until a header is added; moved into the only attempt of a call that cannot be
    /// retried.
    headers: Option<HeaderMap>,
    body: Option<Bytes>,
    retryable: bool,
}

impl ClientExchange<'_> {
    #[inline]
    fn send(
        &mut self,
        destination: &Destination,
    ) -> impl std::future::Future<Output = Result<reqwest::Response, reqwest::Error>> + Send + 'static
    {
        let url = request_url(destination.address(), self.path);
        let mut request = reqwest::Request::new(self.method.clone(), url);
        // A call that cannot be retried moves its headers and body into its only request.
        let headers = if self.retryable {
            self.headers.clone()
        } else {
            self.headers.take()
        };
        if let Some(headers) = headers {
            *request.headers_mut() = headers;
        }
        if let Some(value) =
            destination.with_attributes(|a| a.host().and_then(|h| HeaderValue::from_str(h).ok()))
        {
            // The destination's Host replaces any the caller set: exactly one is sent.
            request.headers_mut().insert(HOST, value);
        }
        let body = if self.retryable {
            self.body.clone()
        } else {
            self.body.take()
        };
        *request.body_mut() = body.map(reqwest::Body::from);
        // The deadline is the driver's to enforce until the headers, and the response's for the
        // body: no per-request timeout, which would cost reqwest an extension map per call.
        self.http.execute(request)
    }
}

impl Reply for reqwest::Response {
    #[inline]
    fn status(&self) -> u16 {
        reqwest::Response::status(self).as_u16()
    }

    #[inline]
    fn headers(&self) -> &HeaderMap {
        reqwest::Response::headers(self)
    }
}

impl Failure for reqwest::Error {
    fn kind(&self) -> FailureKind {
        transport_failure(self)
    }
}

/// How a reqwest error counts for the retry rules.
pub(crate) fn transport_failure(error: &reqwest::Error) -> FailureKind {
    if error.is_connect() {
        FailureKind::Connect
    } else if error.is_timeout() {
        FailureKind::TimedOut
    } else {
        FailureKind::Transport
    }
}

/// The attempts of a call that did not give its answer, as the caller sees them. Cold: a call
/// whose first attempt answers has none, and building each URL again costs only on failure.
pub(crate) fn attempt_failures<E>(failed: Vec<Failed<E>>, path: &str) -> Vec<AttemptFailure>
where
    AttemptError: From<E>,
{
    if failed.is_empty() {
        return Vec::new();
    }
    failed
        .into_iter()
        .map(|f| {
            let url = request_url(f.destination.address(), path);
            let error = match f.why {
                Why::Error(e) => AttemptError::from(e),
                Why::TimedOut(after) => AttemptError::TimedOut(after),
                Why::Status(status) => AttemptError::Status(
                    reqwest::StatusCode::from_u16(status)
                        .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR),
                ),
            };
            tracing::debug!(target: "healthpick", destination = %f.destination.id(), %url, %error, "attempt failed");
            AttemptFailure {
                destination: f.destination.id().to_string(),
                url,
                error,
            }
        })
        .collect()
}

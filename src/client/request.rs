//! A call being built and sent: [`RequestBuilder`] mirrors `reqwest::RequestBuilder`; sending
//! picks a destination, sends, reports the outcome and, through the failover step, retries
//! elsewhere when the attempt failed before any response.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, HOST};
use reqwest::Method;

use super::error::{chain, AttemptFailure, ClientError};
use super::failover::{Attempt, Failover};
use super::response::Response;
use super::retry::is_idempotent;
use super::HealthAwareClient;
use crate::destination::handle::PickHandle;
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
    retryable: Option<bool>,
    error: Option<String>,
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
            retryable: None,
            error: None,
        }
    }

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
    /// client's [`RetryPolicy`](crate::RetryPolicy) allows (connect failures do not count as
    /// attempts).
    ///
    /// # Errors
    /// [`ClientError::Pick`] when nothing may be called,
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
        let (mut failover, mut pick) =
            Failover::start(&inner.engine, &inner.retries, cluster, retryable).await?;
        let mut failures = Vec::new();
        loop {
            let url = request_url(pick.address(), path);
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
                .with_attributes(|a| a.host().and_then(|h| HeaderValue::from_str(h).ok()))
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
                Ok(response) => return Ok(Response::new(response, attempt.into_pick(), failures)),
                Err(error) => error,
            };
            match failed_attempt(&mut failover, attempt, error, path, &mut failures) {
                Some(next) => pick = next,
                None => break,
            }
        }
        Err(ClientError::Request {
            cluster: cluster.to_string(),
            attempts: failures,
        })
    }
}

/// Records an attempt that failed before any response and asks the failover step where the
/// next one goes. Cold: a call that succeeds never runs it.
#[cold]
#[inline(never)]
fn failed_attempt(
    failover: &mut Failover<'_>,
    attempt: Attempt,
    error: reqwest::Error,
    path: &str,
    failures: &mut Vec<AttemptFailure>,
) -> Option<PickHandle> {
    let failed = attempt.failed();
    let connect = error.is_connect();
    // Built again only on failure, so a successful attempt need not keep a copy.
    let url = request_url(failed.address(), path);
    tracing::debug!(target: "healthpick", destination = %failed.id(), %url, error = %chain(&error), "attempt failed");
    failures.push(AttemptFailure {
        destination: failed.id().to_string(),
        url,
        error,
    });
    failover.next(&failed, connect)
}

//! A response through the wrapped client: the destination stays in flight until the body is read
//! or the response dropped, and the outcome is reported then.

use bytes::Bytes;
use reqwest::header::HeaderMap;
use reqwest::StatusCode;

use super::error::{chain, AttemptFailure, ClientError};
use crate::destination::handle::PickHandle;
use crate::destination::Destination;
use crate::health::outcome::RequestOutcome;

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
    pub(crate) fn new(
        inner: reqwest::Response,
        pick: PickHandle,
        failed_attempts: Vec<AttemptFailure>,
    ) -> Self {
        Response {
            status: inner.status(),
            inner: Some(inner),
            pick,
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

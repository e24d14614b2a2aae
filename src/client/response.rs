//! A response through the wrapped client: the destination stays in flight until the body is read
//! or the response dropped, the outcome is reported then, and reading the body is bounded by the
//! attempt's deadline.

use std::future::Future;
use std::task::Poll;

use bytes::Bytes;
use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use tokio::time::Instant;

use super::call_timer::CallTimer;
use super::drive::{bounded, race, Answer, Elapsed};
use super::error::{AttemptFailure, ClientError};
use super::failover::report_answer;
use crate::destination::Destination;
use crate::engine::fast_path::PickHandle;
use crate::health::outcome::RequestOutcome;

/// A response from a destination. The destination stays in flight until the body is read or
/// the response dropped; the outcome is reported then (a body that breaks off, or is not read
/// by the attempt's deadline, is a transport failure).
#[derive(Debug)]
pub struct Response {
    /// `None` only once a consuming method took it.
    inner: Option<reqwest::Response>,
    status: StatusCode,
    /// Keeps the destination in flight until the response is dropped.
    pick: PickHandle,
    /// Whether the outcome was reported (by a consuming method, or before the response came
    /// back to the caller; otherwise `Drop` does it).
    reported: bool,
    /// When the attempt that gave it started: the outcome carries the time since.
    started: Instant,
    /// When the body must have been read.
    deadline: Option<Instant>,
    /// The call's timer, registered for that deadline, when the call had one.
    timer: Option<CallTimer>,
    /// Attempts of the same call that did not give this answer.
    failed_attempts: Vec<AttemptFailure>,
}

static NO_HEADERS: std::sync::LazyLock<HeaderMap> = std::sync::LazyLock::new(HeaderMap::new);

impl Response {
    /// The response of `answer`, the call's answer; `failed_attempts`: the call's attempts
    /// that did not give it.
    pub(crate) fn new(
        answer: Answer<reqwest::Response>,
        failed_attempts: Vec<AttemptFailure>,
    ) -> Self {
        let inner = answer.response;
        Response {
            status: inner.status(),
            inner: Some(inner),
            pick: answer.pick,
            reported: answer.reported,
            started: answer.started,
            deadline: answer.deadline,
            timer: answer.timer,
            failed_attempts,
        }
    }

    /// The attempts of this call that did not give this answer, in order (each destination, URL
    /// and error: failures before a response, timeouts, retried statuses): empty when the first
    /// attempt answered. A hedge that lost is not among them (it was cancelled, not failed).
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

    /// The URL that answered.
    pub fn url(&self) -> Option<&url::Url> {
        self.inner.as_ref().map(reqwest::Response::url)
    }

    /// The HTTP version of the response (`None` once a consuming method took the body).
    pub fn version(&self) -> Option<reqwest::Version> {
        self.inner.as_ref().map(reqwest::Response::version)
    }

    /// The body's length when the response said it (`Content-Length`), as
    /// `reqwest::Response::content_length`.
    pub fn content_length(&self) -> Option<u64> {
        self.inner
            .as_ref()
            .and_then(reqwest::Response::content_length)
    }

    /// The next chunk of the body, `None` at its end: for bodies read as a stream. The
    /// destination stays in flight while the body is read (until the response is dropped); the
    /// outcome is reported when the body ends or breaks off. The whole body must still be read
    /// by the attempt's deadline.
    ///
    /// ```no_run
    /// # async fn run(client: healthpick::HealthAwareClient) -> Result<(), healthpick::ClientError> {
    /// let mut response = client.get("exports", "/orders.csv").send().await?;
    /// while let Some(chunk) = response.chunk().await? {
    ///     println!("{} bytes", chunk.len()); // the destination counts as busy meanwhile
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`ClientError::Body`] when the body breaks off, [`ClientError::BodyTimedOut`] when it
    /// is not read in time; the attempt then counts as a transport failure.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, ClientError> {
        let Some(inner) = self.inner.as_mut() else {
            return Ok(None);
        };
        let read = inner.chunk();
        let result = match self.deadline {
            None => Ok(read.await),
            Some(deadline) => match self.timer.as_mut() {
                Some(timer) => race(read, timer.sleep()).await,
                None => bounded(read, deadline).await,
            },
        };
        match result {
            Ok(Ok(Some(chunk))) => Ok(Some(chunk)),
            Ok(Ok(None)) => {
                self.finish(true);
                Ok(None)
            }
            Ok(Err(e)) => {
                self.finish(false);
                Err(ClientError::body_with("reading the body failed", e))
            }
            Err(Elapsed) => {
                self.finish(false);
                Err(ClientError::BodyTimedOut {
                    destination: self.pick.destination().id().to_string(),
                })
            }
        }
    }

    /// `Err(ClientError::Status)` when the status is a client or server error (400 to 599),
    /// as `reqwest::Response::error_for_status` does; the response (and its destination) is
    /// released then.
    ///
    /// # Errors
    /// [`ClientError::Status`] naming the cluster, destination, URL and status.
    pub fn error_for_status(self) -> Result<Self, ClientError> {
        match self.status_error() {
            Some(error) => Err(error),
            None => Ok(self),
        }
    }

    /// Like [`error_for_status`](Self::error_for_status), keeping the response.
    ///
    /// # Errors
    /// [`ClientError::Status`] when the status is 400 to 599.
    pub fn error_for_status_ref(&self) -> Result<&Self, ClientError> {
        match self.status_error() {
            Some(error) => Err(error),
            None => Ok(self),
        }
    }

    fn status_error(&self) -> Option<ClientError> {
        if !(self.status.is_client_error() || self.status.is_server_error()) {
            return None;
        }
        let destination = self.destination();
        Some(ClientError::Status {
            cluster: destination.cluster_id().to_string(),
            destination: destination.id().to_string(),
            url: Box::new(
                self.url()
                    .cloned()
                    .unwrap_or_else(|| destination.address().clone()),
            ),
            status: self.status,
        })
    }

    /// Reports the outcome once; the destination stays in flight until `self` is dropped,
    /// which every caller of this does right after.
    fn finish(&mut self, body_ok: bool) {
        if !std::mem::replace(&mut self.reported, true) {
            let outcome = if body_ok {
                RequestOutcome::Status(self.status.as_u16())
            } else {
                RequestOutcome::TransportFailure
            };
            report_answer(&self.pick, outcome, self.started);
        }
    }

    /// The whole body, as `reqwest::Response::bytes` gives it (no copy), read before the
    /// attempt's deadline.
    ///
    /// # Errors
    /// [`ClientError::Body`] when the body breaks off, [`ClientError::BodyTimedOut`] when it
    /// is not read in time; the attempt then counts as a transport failure.
    pub async fn bytes(mut self) -> Result<Bytes, ClientError> {
        let Some(inner) = self.inner.take() else {
            return Ok(Bytes::new());
        };
        let mut read = std::pin::pin!(inner.bytes());
        // A small body is usually here with the headers: then no timer is made at all.
        let first = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
        let result = match (first, self.deadline) {
            (Poll::Ready(read), _) => read,
            (Poll::Pending, None) => read.await,
            (Poll::Pending, Some(deadline)) => match match self.timer.as_mut() {
                Some(timer) => race(read, timer.sleep()).await,
                None => bounded(read, deadline).await,
            } {
                Ok(read) => read,
                Err(Elapsed) => {
                    self.finish(false);
                    return Err(ClientError::BodyTimedOut {
                        destination: self.pick.destination().id().to_string(),
                    });
                }
            },
        }
        .map_err(|e| ClientError::body_with("reading the body failed", e));
        self.finish(result.is_ok());
        result
    }

    /// The whole body as text (UTF-8, lossy).
    ///
    /// # Errors
    /// As [`bytes`](Self::bytes).
    pub async fn text(self) -> Result<String, ClientError> {
        self.bytes()
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// The body parsed as JSON.
    ///
    /// # Errors
    /// As [`bytes`](Self::bytes); [`ClientError::Body`] naming the problem when the body is not
    /// JSON.
    pub async fn json<T: serde::de::DeserializeOwned>(self) -> Result<T, ClientError> {
        let bytes = self.bytes().await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::body_with("not JSON", e))
    }

    /// The underlying reqwest response. The destination is released and the outcome reported
    /// now, so in-flight counts no longer cover reading its body, and healthpick's timeouts no
    /// longer bound it (reqwest's own still do).
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

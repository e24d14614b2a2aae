//! What a call through the wrapped client (or the middleware) can fail with: no destination to
//! call, every attempt failing before a response, a request that cannot be built, or a body that
//! cannot be read.

use url::Url;

use crate::error::PickError;

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

/// Why a call through [`HealthAwareClient`](crate::HealthAwareClient) failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing was sent: the cluster is unknown or has no destination that may receive traffic.
    #[error(transparent)]
    Pick(#[from] PickError),
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
    /// [`Response::json`](crate::Response::json) on a body that is not JSON).
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

/// An error with its causes, which carry the useful part ("connection refused").
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
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
        matches!(self, ClientError::Pick(e) if e.is_no_available_destinations())
    }

    /// True when nothing was sent because no cluster has the id asked for.
    pub fn is_unknown_cluster(&self) -> bool {
        matches!(self, ClientError::Pick(e) if e.is_unknown_cluster())
    }

    /// The cluster the error is about, when it is about one.
    pub fn cluster(&self) -> Option<&str> {
        match self {
            ClientError::Pick(e) => Some(e.cluster()),
            ClientError::Request { cluster, .. } => Some(cluster),
            ClientError::Builder(_) | ClientError::Body(_) => None,
        }
    }

    /// The last destination tried, if any request was sent.
    pub fn destination(&self) -> Option<&str> {
        self.attempts().last().map(|a| a.destination.as_str())
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

//! What a call through the wrapped client (or the middleware) can fail with: no destination to
//! call, every attempt failing before a response, an error status the caller asked to turn into
//! an error, a request that cannot be built, or a body that cannot be read in time.

use std::time::Duration;

use reqwest::StatusCode;
use url::Url;

use crate::error::PickError;

/// One attempt of a call that did not give the caller its answer.
#[derive(Debug)]
#[non_exhaustive]
pub struct AttemptFailure {
    /// The destination tried.
    pub destination: String,
    /// The URL sent to.
    pub url: Url,
    /// What went wrong.
    pub error: AttemptError,
}

/// How one attempt went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum AttemptError {
    /// The HTTP client failed: connection refused, reset, TLS, or one of reqwest's own
    /// timeouts.
    Transport(reqwest::Error),
    /// No response within the attempt's timeout (healthpick's); how long it had.
    TimedOut(Duration),
    /// Answered with this retryable status (502, 503, 504 by default); the call went on to
    /// another destination.
    Status(StatusCode),
    /// Another middleware of a `reqwest-middleware` stack failed (the middleware only).
    Middleware(Box<dyn std::error::Error + Send + Sync>),
    /// The inner service of the tower layer failed (the tower layer only): a hyper-util or
    /// tonic transport error, or whatever the stack below the layer returned.
    Service(Box<dyn std::error::Error + Send + Sync>),
}

impl AttemptError {
    /// True when no connection was made (nothing was sent).
    pub fn is_connect(&self) -> bool {
        match self {
            AttemptError::Transport(e) => e.is_connect(),
            AttemptError::Service(e) => not_connected(e.as_ref()),
            _ => false,
        }
    }

    /// True when the attempt ran out of time: healthpick's attempt timeout or reqwest's own.
    pub fn is_timeout(&self) -> bool {
        match self {
            AttemptError::TimedOut(_) => true,
            AttemptError::Transport(e) => e.is_timeout(),
            _ => false,
        }
    }

    /// The status, when the attempt was answered with a retryable one.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            AttemptError::Status(status) => Some(*status),
            _ => None,
        }
    }

    /// The reqwest error, when the HTTP client failed.
    pub fn reqwest(&self) -> Option<&reqwest::Error> {
        match self {
            AttemptError::Transport(e) => Some(e),
            _ => None,
        }
    }
}

impl std::fmt::Display for AttemptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // reqwest names the URL in its own message; the attempt names it already.
            AttemptError::Transport(e) => f.write_str(&without_url(e)),
            AttemptError::TimedOut(after) => write!(f, "no response within {after:?}"),
            AttemptError::Status(status) => write!(f, "answered {status}"),
            AttemptError::Middleware(e) | AttemptError::Service(e) => {
                f.write_str(&chain(e.as_ref()))
            }
        }
    }
}

/// Whether an error of an HTTP stack other than reqwest's says no connection was made: an I/O
/// error in its source chain that only connecting can give (refused, unreachable, no local
/// address). hyper-util's and tonic's connect errors carry one.
pub(crate) fn not_connected(error: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind;
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                ErrorKind::ConnectionRefused
                    | ErrorKind::HostUnreachable
                    | ErrorKind::NetworkUnreachable
                    | ErrorKind::AddrNotAvailable
            );
        }
        next = error.source();
    }
    false
}

impl From<reqwest::Error> for AttemptError {
    fn from(error: reqwest::Error) -> Self {
        AttemptError::Transport(error)
    }
}

impl std::error::Error for AttemptError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AttemptError::Transport(e) => Some(e),
            AttemptError::Middleware(e) | AttemptError::Service(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

/// Why a call through [`HealthAwareClient`](crate::HealthAwareClient) or the middleware failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Nothing was sent: the cluster is unknown, has no destination that may receive traffic,
    /// or (under `SessionAffinity` with `FailurePolicy: Return503Error`) the destination of the
    /// request's affinity key is unavailable.
    #[error(transparent)]
    Pick(#[from] PickError),
    /// No attempt gave an answer: each failed before a response (connect failures and
    /// timeouts included), or ended otherwise without one; every destination tried is listed.
    #[error("request to cluster `{cluster}` failed: {}", describe_attempts(.attempts))]
    Request {
        /// The cluster.
        cluster: String,
        /// Every attempt, in order.
        attempts: Vec<AttemptFailure>,
    },
    /// The response had an error status, and the caller asked for an error
    /// ([`Response::error_for_status`](crate::Response::error_for_status)).
    #[error("destination `{destination}` of cluster `{cluster}` ({url}) answered {status}")]
    Status {
        /// The cluster.
        cluster: String,
        /// The destination that answered.
        destination: String,
        /// The URL it answered (boxed: it is large, and errors travel in every `Result`).
        url: Box<Url>,
        /// The status.
        status: StatusCode,
    },
    /// The request, or the client, could not be built (bad header, path, body or setting).
    #[error("invalid request: {message}")]
    Builder {
        /// What was wrong.
        message: String,
        /// The error that said so, when another library did (reqwest's, a header parser's).
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A response arrived but its body could not be read or decoded (for example
    /// [`Response::json`](crate::Response::json) on a body that is not JSON).
    #[error("bad response body: {message}")]
    Body {
        /// What went wrong.
        message: String,
        /// The error that said so (reqwest's while reading, serde_json's while decoding).
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A response arrived but its body was not read to the end before the attempt's (or the
    /// call's) deadline.
    #[error(
        "the body of destination `{destination}`'s response was not read by the attempt's deadline"
    )]
    BodyTimedOut {
        /// The destination that answered.
        destination: String,
    },
}

impl ClientError {
    /// A [`Builder`](Self::Builder) error without a source.
    pub(crate) fn builder(message: impl Into<String>) -> Self {
        ClientError::Builder {
            message: message.into(),
            source: None,
        }
    }

    /// A [`Builder`](Self::Builder) error caused by `source`.
    pub(crate) fn builder_with(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        ClientError::Builder {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// A [`Body`](Self::Body) error caused by `source`.
    pub(crate) fn body_with(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        ClientError::Body {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

fn describe_attempts(attempts: &[AttemptFailure]) -> String {
    attempts
        .iter()
        .map(|a| format!("destination `{}` ({}): {}", a.destination, a.url, a.error))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A reqwest error and its causes, without the URL reqwest puts in its own message
/// (`error sending request for url (http://...)`).
fn without_url(e: &reqwest::Error) -> String {
    let text = chain(e);
    match e.url() {
        Some(url) => text.replacen(&format!(" for url ({url})"), "", 1),
        None => text,
    }
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

    /// True when nothing was sent because the destination of the request's affinity key is
    /// unavailable and the cluster's `SessionAffinity` says `FailurePolicy: Return503Error`:
    /// what a proxy answers with 503 Service Unavailable.
    ///
    /// ```no_run
    /// # async fn run(client: healthpick::HealthAwareClient) {
    /// match client.get("carts", "/api/cart").affinity_key("user-4711").send().await {
    ///     Ok(response) => println!("{}", response.status()),
    ///     Err(err) if err.is_affinity_unavailable() => eprintln!("the user's server is down"),
    ///     Err(err) => eprintln!("{err}"),
    /// }
    /// # }
    /// ```
    pub fn is_affinity_unavailable(&self) -> bool {
        matches!(self, ClientError::Pick(e) if e.is_affinity_unavailable())
    }

    /// True when the call ran out of time: its last attempt timed out, or its body was not
    /// read in time.
    pub fn is_timeout(&self) -> bool {
        match self {
            ClientError::BodyTimedOut { .. } => true,
            _ => self.attempts().last().is_some_and(|a| a.error.is_timeout()),
        }
    }

    /// True when the last attempt could not connect (nothing was sent to it).
    pub fn is_connect(&self) -> bool {
        self.attempts().last().is_some_and(|a| a.error.is_connect())
    }

    /// True for an error status the caller asked to turn into an error
    /// ([`Response::error_for_status`](crate::Response::error_for_status)).
    pub fn is_status(&self) -> bool {
        matches!(self, ClientError::Status { .. })
    }

    /// True when the request or the client could not be built.
    pub fn is_builder(&self) -> bool {
        matches!(self, ClientError::Builder { .. })
    }

    /// True when a response arrived but its body could not be read, decoded, or read in time.
    pub fn is_body(&self) -> bool {
        matches!(
            self,
            ClientError::Body { .. } | ClientError::BodyTimedOut { .. }
        )
    }

    /// True when no attempt gave an answer ([`Request`](Self::Request)).
    pub fn is_request(&self) -> bool {
        matches!(self, ClientError::Request { .. })
    }

    /// The status of a [`Status`](Self::Status) error.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The cluster the error is about, when it is about one.
    pub fn cluster(&self) -> Option<&str> {
        match self {
            ClientError::Pick(e) => Some(e.cluster()),
            ClientError::Request { cluster, .. } | ClientError::Status { cluster, .. } => {
                Some(cluster)
            }
            ClientError::Builder { .. }
            | ClientError::Body { .. }
            | ClientError::BodyTimedOut { .. } => None,
        }
    }

    /// The destination that answered (a status or body error), or else the last one tried.
    pub fn destination(&self) -> Option<&str> {
        match self {
            ClientError::Status { destination, .. }
            | ClientError::BodyTimedOut { destination, .. } => Some(destination),
            _ => self.attempts().last().map(|a| a.destination.as_str()),
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

    /// The underlying reqwest error of the last attempt, when reqwest failed.
    pub fn reqwest_error(&self) -> Option<&reqwest::Error> {
        self.attempts().last().and_then(|a| a.error.reqwest())
    }
}

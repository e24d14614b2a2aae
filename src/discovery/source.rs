//! The extension point of polling sources: something that can be asked "what is the
//! full set now?" — DNS, a registry's HTTP API, a file — and answers with a set, "does not
//! exist", or an error. The [driver](super::driver) asks it, publishes its answers and decides
//! when to ask again; watch-style sources push through a [`Publisher`](super::Publisher)
//! themselves.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::destination::endpoint::Endpoint;

/// A boxed future, as [`PollSource::resolve`] returns it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A source that is asked again and again for its full set.
///
/// It is not a tower `Service` on purpose (the same choice reqwest's `dns::Resolve` makes): a
/// source is always ready, answers through `&self` so one value serves every refresh, and
/// returns a boxed future, which keeps the trait object-safe.
///
/// ```
/// use healthpick::discovery::{Answer, BoxFuture, PollSource, SourceError};
/// use healthpick::Endpoint;
/// use std::time::Duration;
///
/// /// Always the same two instances, valid for a minute.
/// struct Fixed;
/// impl PollSource for Fixed {
///     fn resolve(&self) -> BoxFuture<'_, Result<Answer, SourceError>> {
///         Box::pin(async {
///             let endpoints = vec![
///                 Endpoint::new("a", "http://10.0.0.1:8080/".parse().map_err(SourceError::new)?),
///                 Endpoint::new("b", "http://10.0.0.2:8080/".parse().map_err(SourceError::new)?),
///             ];
///             Ok(Answer::found(endpoints).valid_for(Duration::from_secs(60)))
///         })
///     }
/// }
/// ```
pub trait PollSource: Send + Sync + 'static {
    /// Asks for the full current set once.
    ///
    /// # Errors
    /// Why there is no answer (timeout, server failure): the last good set stays in force.
    fn resolve(&self) -> BoxFuture<'_, Result<Answer, SourceError>>;
}

/// One answer of a source: its full set, or "this service does not exist", and how long it is
/// valid (a DNS TTL).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub(crate) endpoints: Option<Vec<Endpoint>>,
    pub(crate) valid_for: Option<Duration>,
}

impl Answer {
    /// The full current set (possibly empty: the service exists and has no instance).
    pub fn found(endpoints: Vec<Endpoint>) -> Self {
        Answer {
            endpoints: Some(endpoints),
            valid_for: None,
        }
    }

    /// The service does not exist (DNS NXDOMAIN).
    pub fn not_found() -> Self {
        Answer {
            endpoints: None,
            valid_for: None,
        }
    }

    /// Says how long the answer is valid; the driver asks again then (within its bounds).
    #[must_use]
    pub fn valid_for(mut self, valid_for: Duration) -> Self {
        self.valid_for = Some(valid_for);
        self
    }

    /// The set, or `None` for "does not exist".
    pub fn endpoints(&self) -> Option<&[Endpoint]> {
        self.endpoints.as_deref()
    }

    /// How long it is valid, if the source said.
    pub fn validity(&self) -> Option<Duration> {
        self.valid_for
    }
}

/// Why a source has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceError {
    message: String,
}

impl SourceError {
    /// An error saying `why`.
    pub fn new(why: impl fmt::Display) -> Self {
        SourceError {
            message: why.to_string(),
        }
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SourceError {}

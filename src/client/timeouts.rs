//! Timeouts of calls through the wrapped client and the middleware: every attempt
//! and every call is bounded by default, so a frozen destination cannot hold its callers.

use std::time::Duration;

/// How long one attempt and one whole call may take.
///
/// - **Attempt**: from sending one attempt until its response has been read to the end (the
///   headers, then the body through [`Response::bytes`](crate::Response::bytes) and friends).
///   An attempt that runs out of time before its response arrived is a transport failure for
///   passive health checks and fails over like any failure before a response (for a
///   retryable request; see [`RetryPolicy`](crate::RetryPolicy)). Default **15 s**, Envoy's
///   route timeout: services behind Envoy or Istio are already shaped to answer within it, and a
///   shorter default would turn slow but healthy endpoints into transport failures that eject
///   healthy destinations.
/// - **Call**: from `send()` until the body has been read, across every attempt, retry, hedge
///   and the first pick's warm-up wait. Default **30 s**: room for one attempt that runs out of
///   time and one that then succeeds elsewhere.
///
/// Which timeout applies, most specific first: the request's own
/// ([`RequestBuilder::timeout`](crate::RequestBuilder::timeout) and
/// [`call_timeout`](crate::RequestBuilder::call_timeout); for the middleware reqwest's
/// `RequestBuilder::timeout` and the `CallTimeout` extension), then the cluster's YARP
/// `HttpRequest:ActivityTimeout` (attempts only), then the client's or the middleware's own,
/// then these defaults. `None` turns a bound off.
///
/// The connect timeout is a setting of the reqwest client that opens the connections:
/// [`HealthAwareClientBuilder::connect_timeout`](crate::HealthAwareClientBuilder::connect_timeout)
/// (default 2 s) when healthpick builds the client; yours otherwise. A connect timeout is a
/// connect failure: nothing was sent, so the call moves on to another destination without using
/// up an attempt.
///
/// ```
/// use healthpick::Timeouts;
/// use std::time::Duration;
///
/// let tight = Timeouts::default().attempt(Duration::from_secs(2));
/// assert_eq!(tight.call, Some(Duration::from_secs(30)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// One attempt, until its response has been read. Default 15 s.
    pub attempt: Option<Duration>,
    /// The whole call. Default 30 s.
    pub call: Option<Duration>,
}

impl Timeouts {
    /// These timeouts with `timeout` per attempt (`None`: unbounded).
    #[must_use]
    pub fn attempt(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.attempt = timeout.into();
        self
    }

    /// These timeouts with `timeout` for the whole call (`None`: unbounded).
    #[must_use]
    pub fn call(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.call = timeout.into();
        self
    }

    /// The default attempt timeout: 15 s.
    pub const DEFAULT_ATTEMPT: Duration = Duration::from_secs(15);
    /// The default call timeout: 30 s.
    pub const DEFAULT_CALL: Duration = Duration::from_secs(30);
    /// The default connect timeout of a reqwest client healthpick builds: 2 s, one lost SYN
    /// (Linux retransmits it after 1 s) on any network whose round trip is below a second.
    /// Longer waits are better spent on another destination: the connect failure is requeued.
    pub const DEFAULT_CONNECT: Duration = Duration::from_secs(2);
    /// No bound at all (reqwest's own default): only for callers that bound calls themselves.
    pub const NONE: Timeouts = Timeouts {
        attempt: None,
        call: None,
    };
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            attempt: Some(Timeouts::DEFAULT_ATTEMPT),
            call: Some(Timeouts::DEFAULT_CALL),
        }
    }
}

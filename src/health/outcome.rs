//! How a finished request went: the input of passive health checks.

/// How a finished request to a destination went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RequestOutcome {
    /// The request completed (any response the caller considers fine).
    Success,
    /// No usable response: connect refused, reset, TLS failure, or a timeout before or while
    /// reading the response.
    TransportFailure,
    /// An HTTP response arrived with this status. Not a transport failure, whatever the status.
    Status(u16),
    /// The caller cancelled the request: not the destination's fault, counts as a success.
    Cancelled,
}

impl RequestOutcome {
    /// Whether this outcome is a transport failure (the only kind TransportFailureRate counts).
    pub fn is_transport_failure(self) -> bool {
        matches!(self, RequestOutcome::TransportFailure)
    }
}

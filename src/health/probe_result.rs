//! The result of one probe: what the probe saw, and whether it counts as a
//! success.

use super::state::ReportedHealth;

/// The result of probing one destination in a round.
///
/// A probe succeeds on a 2xx status unless its health payload says `Unhealthy`; a
/// transport error, timeout, non-2xx status or a request that could not be built is a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeResult {
    /// The probed destination's id.
    pub destination: String,
    /// The HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// The status from the response's health payload, when a 2xx body was one.
    pub reported: Option<ReportedHealth>,
    /// Why the probe failed without a usable response (timeout, connection refused, ...).
    pub error: Option<String>,
}

impl ProbeResult {
    /// A probe that got a response with `status` and no health payload.
    pub fn status(destination: impl Into<String>, status: u16) -> Self {
        ProbeResult {
            destination: destination.into(),
            status: Some(status),
            reported: None,
            error: None,
        }
    }

    /// A probe that failed without a response, for `reason`.
    pub fn error(destination: impl Into<String>, reason: impl Into<String>) -> Self {
        ProbeResult {
            destination: destination.into(),
            status: None,
            reported: None,
            error: Some(reason.into()),
        }
    }

    /// Adds the status of a health payload found in a 2xx body.
    pub fn with_payload(mut self, reported: ReportedHealth) -> Self {
        self.reported = Some(reported);
        self
    }

    /// Whether the probe counts as a success: 2xx, no error, payload not `Unhealthy`.
    pub fn is_success(&self) -> bool {
        self.error.is_none()
            && self.status.is_some_and(|s| (200..300).contains(&s))
            && self.reported != Some(ReportedHealth::Unhealthy)
    }

    /// What the probe saw, for reasons and logs: `HTTP 200`, `HTTP 200 (Degraded)`,
    /// `error: connection refused`.
    pub fn describe(&self) -> String {
        match (&self.error, self.status, self.reported) {
            (Some(e), _, _) => format!("error: {e}"),
            (None, Some(s), Some(r)) => format!("HTTP {s} ({r})"),
            (None, Some(s), None) => format!("HTTP {s}"),
            (None, None, _) => "no response".to_string(),
        }
    }
}

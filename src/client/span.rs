//! The span of one call through the failover step (the wrapped client, the middleware, the tower
//! layer): which cluster, which destination each attempt went to, how many attempts were resent
//! and why, in the field names of OpenTelemetry's HTTP client conventions where they have one.
//!
//! The call opens `healthpick.call` (level INFO, target `healthpick`) as a child of the caller's
//! current span, with the fields
//!
//! | field | value |
//! |---|---|
//! | `healthpick.cluster` | the cluster id |
//! | `healthpick.destination` | the destination id of the latest attempt (the one that answered, when one did) |
//! | `server.address`, `server.port` | that destination's host and port |
//! | `http.request.resend_count` | how many attempts were sent before it (absent for the first) |
//! | `healthpick.retry_reason` | why the latest attempt was sent: `connect failure`, `transport failure`, `timed out`, `status 503`, `hedge` |
//!
//! The same fields are recorded on the caller's span too, when it declared them (a span opened
//! with `server.address = tracing::field::Empty`, as `reqwest-tracing` does, then shows the
//! destination rather than the cluster name). Each retry and hedge is also a DEBUG event in the
//! call's span. With no subscriber interested in the span, none of this costs more than the
//! check that says so.

use std::fmt;

use tracing::field::{display, Empty};
use tracing::Span;

use super::retry::FailureKind;
use crate::destination::Destination;

/// Why an attempt after the first was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resend {
    /// The previous attempt failed (or timed out) before a response, or was answered with a
    /// retryable status.
    After(FailureKind, u16),
    /// The hedge of a slow attempt.
    Hedge,
}

impl fmt::Display for Resend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resend::After(FailureKind::Connect, _) => f.write_str("connect failure"),
            Resend::After(FailureKind::Transport, _) => f.write_str("transport failure"),
            Resend::After(FailureKind::TimedOut, _) => f.write_str("timed out"),
            Resend::After(FailureKind::Status, status) => write!(f, "status {status}"),
            Resend::Hedge => f.write_str("hedge"),
        }
    }
}

/// The span of one call and the caller's span it records on.
#[derive(Debug)]
pub(crate) struct CallSpan {
    span: Span,
    caller: Span,
    attempts: u32,
}

impl CallSpan {
    /// Opens the call's span for a call to `first`'s cluster.
    #[inline]
    pub fn open(first: &Destination) -> CallSpan {
        let span = tracing::info_span!(
            target: "healthpick",
            "healthpick.call",
            healthpick.cluster = first.cluster_id(),
            healthpick.destination = Empty,
            server.address = Empty,
            server.port = Empty,
            http.request.resend_count = Empty,
            healthpick.retry_reason = Empty,
        );
        let caller = if span.is_disabled() {
            Span::none()
        } else {
            Span::current()
        };
        CallSpan {
            span,
            caller,
            attempts: 0,
        }
    }

    /// The span, to instrument the call with.
    pub fn span(&self) -> Span {
        self.span.clone()
    }

    /// An attempt to `destination` starts; `why` for every attempt after the first.
    #[inline]
    pub fn attempt(&mut self, destination: &Destination, why: Option<Resend>) {
        let resent = self.attempts;
        self.attempts += 1;
        if self.span.is_disabled() {
            return;
        }
        self.record(destination, resent, why);
    }

    #[cold]
    fn record(&self, destination: &Destination, resent: u32, why: Option<Resend>) {
        let address = destination.address();
        let host = address.host_str().unwrap_or_default();
        let port = address.port_or_known_default();
        for span in [&self.span, &self.caller] {
            span.record("healthpick.destination", destination.id());
            span.record("server.address", host);
            if let Some(port) = port {
                span.record("server.port", port);
            }
            if resent > 0 {
                span.record("http.request.resend_count", resent);
            }
            if let Some(why) = why {
                span.record("healthpick.retry_reason", display(why));
            }
        }
        if let Some(why) = why {
            tracing::debug!(
                target: "healthpick",
                parent: &self.span,
                destination = destination.id(),
                attempt = resent + 1,
                reason = %why,
                "sending attempt {} to {} ({why})",
                resent + 1,
                destination.id(),
            );
        }
    }
}

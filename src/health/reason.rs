//! Why a health part changed (SPEC §10): kept structured so that building it costs nothing on
//! the request path; it becomes text only when an event is logged or shown.

use std::borrow::Cow;
use std::fmt;

/// Why a health part changed. Kept structured so that building it costs nothing on the request
/// path; it becomes text only when an event is logged or shown.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Reason {
    /// A probe round: the probe's result and the consecutive-failure count after it.
    Probe {
        /// What the probe saw, e.g. `HTTP 503` or `connection refused`.
        result: String,
        /// Consecutive failed probes after this one (0 after a success).
        consecutive_failures: u32,
    },
    /// The failure rate of the passive window.
    FailureRate {
        /// Transport failures in the window.
        failed: u64,
        /// All outcomes in the window.
        total: u64,
        /// `failed / total`, or 0 below the minimal total count.
        rate: f64,
        /// The limit the rate was compared against.
        limit: f64,
    },
    /// The passive reactivation period elapsed.
    Reactivation,
    /// The destination's discovery source said so.
    Discovery {
        /// The source.
        source: std::sync::Arc<str>,
    },
    /// Text from a custom policy.
    Custom(Cow<'static, str>),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Probe {
                result,
                consecutive_failures,
            } => write!(
                f,
                "probe {result}, {consecutive_failures} consecutive failure{}",
                if *consecutive_failures == 1 { "" } else { "s" }
            ),
            Reason::FailureRate {
                failed,
                total,
                rate,
                limit,
            } => write!(
                f,
                "transport failure rate {rate:.3} ({failed}/{total}), limit {limit}"
            ),
            Reason::Reactivation => f.write_str("reactivation"),
            Reason::Discovery { source } => write!(f, "source `{source}`"),
            Reason::Custom(text) => f.write_str(text),
        }
    }
}

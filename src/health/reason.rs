//! Why a health part changed: kept structured so that building it costs nothing on
//! the request path; it becomes text only when an event is logged or shown.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

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
    /// Outlier detection: the destination's consecutive errors after an outcome and what they
    /// led to.
    Outlier {
        /// Consecutive 5xx responses (transport failures included).
        consecutive_5xx: u32,
        /// Consecutive gateway errors (502, 503, 504, transport failures).
        consecutive_gateway_failures: u32,
        /// Whether it is ejected.
        ejection: OutlierEjection,
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
            Reason::Outlier {
                consecutive_5xx,
                consecutive_gateway_failures,
                ejection,
            } => {
                write!(
                    f,
                    "{consecutive_5xx} consecutive 5xx, {consecutive_gateway_failures} consecutive gateway error{}",
                    if *consecutive_gateway_failures == 1 { "" } else { "s" }
                )?;
                match ejection {
                    OutlierEjection::None => Ok(()),
                    OutlierEjection::Ejected { duration, count } => write!(
                        f,
                        ": ejected for {} (ejection {count} in a row)",
                        humantime::format_duration(*duration)
                    ),
                    OutlierEjection::StillEjected { remaining } => write!(
                        f,
                        ": ejected, back in {}",
                        humantime::format_duration(*remaining)
                    ),
                    OutlierEjection::CapReached { ejected, cap } => write!(
                        f,
                        ": not ejected, {ejected} of at most {cap} destinations are ejected already"
                    ),
                }
            }
            Reason::Reactivation => f.write_str("reactivation"),
            Reason::Discovery { source } => write!(f, "source `{source}`"),
            Reason::Custom(text) => f.write_str(text),
        }
    }
}

/// What outlier detection did with a destination on one outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutlierEjection {
    /// Not ejected: below every limit.
    None,
    /// Ejected by this outcome for `duration`, its `count`-th ejection in a row.
    Ejected {
        /// How long it stays out.
        duration: Duration,
        /// Ejections in a row, this one included (after decay).
        count: u32,
    },
    /// Ejected earlier; it returns in `remaining`.
    StillEjected {
        /// Time left of the ejection.
        remaining: Duration,
    },
    /// A limit was reached but not acted on: `ejected` destinations of the cluster are ejected
    /// already, the most allowed at once (`cap`).
    CapReached {
        /// Destinations ejected now.
        ejected: usize,
        /// The most ejected at once.
        cap: usize,
    },
}

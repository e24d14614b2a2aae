//! Change events for subscribers (SPEC §10): every health-part change and every change of a
//! cluster's available set or panic flag, in the order the engine applied them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::health::reason::Reason;
use crate::health::state::{HealthPart, HealthState, ReportedHealth};

/// The value of one health part before or after a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartValue {
    /// An active or passive state.
    State(HealthState),
    /// A reported status, or none.
    Reported(Option<ReportedHealth>),
}

impl fmt::Display for PartValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartValue::State(s) => s.fmt(f),
            PartValue::Reported(Some(r)) => r.fmt(f),
            PartValue::Reported(None) => f.write_str("none"),
        }
    }
}

/// Something that changed in a cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum HealthEventKind {
    /// One health part of one destination changed.
    HealthChanged {
        /// The destination id.
        destination: Arc<str>,
        /// Which part.
        part: HealthPart,
        /// Before.
        from: PartValue,
        /// After.
        to: PartValue,
        /// Why.
        reason: Reason,
    },
    /// The available set or the panic flag changed.
    AvailabilityChanged {
        /// Available destination ids, in config order.
        available: Vec<Arc<str>>,
        /// Whether the cluster is in panic mode.
        panic: bool,
    },
}

/// A change event, stamped with the engine clock.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthEvent {
    /// Engine-clock time of the change.
    pub at: Duration,
    /// The cluster id.
    pub cluster: Arc<str>,
    /// What changed.
    pub kind: HealthEventKind,
}

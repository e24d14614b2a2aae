//! Change events for subscribers: every health-part change, every change of a
//! cluster's available set or panic flag, and what discovery sources do to a cluster (sets
//! applied, changes held and released, sources going stale and recovering), in the order the
//! engine applied them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::health::reason::Reason;
use crate::health::state::{DiscoveryHealth, HealthPart, HealthState, ReportedHealth};

/// The value of one health part before or after a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartValue {
    /// An active or passive state.
    State(HealthState),
    /// A reported status, or none.
    Reported(Option<ReportedHealth>),
    /// What a discovery source says.
    Discovery(DiscoveryHealth),
}

impl fmt::Display for PartValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartValue::State(s) => s.fmt(f),
            PartValue::Reported(Some(r)) => r.fmt(f),
            PartValue::Reported(None) => f.write_str("none"),
            PartValue::Discovery(d) => d.fmt(f),
        }
    }
}

/// Something that changed in a cluster.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
    /// A source's publication changed the cluster's destinations.
    DestinationsChanged {
        /// The source.
        source: Arc<str>,
        /// Destinations that joined.
        added: Vec<Arc<str>>,
        /// Destinations that left (no new picks; requests in flight finish).
        removed: Vec<Arc<str>>,
        /// Destinations whose tier, weight, metadata, Host or locality changed.
        updated: Vec<Arc<str>>,
    },
    /// The update guard held a publication instead of applying it: it would have
    /// emptied the cluster, removed a large share of it, or the source said the service does
    /// not exist. The last applied set stays in force.
    ChangeHeld {
        /// The source.
        source: Arc<str>,
        /// Why it was held.
        reason: HeldReason,
        /// How many of the source's destinations it would remove.
        removes: usize,
        /// How many the source has now.
        of: usize,
    },
    /// A held publication was applied, or given up.
    ChangeReleased {
        /// The source.
        source: Arc<str>,
        /// How.
        how: Release,
    },
    /// A source failed: its last good set stays in force and it is stale until it answers
    /// again.
    SourceStale {
        /// The source.
        source: Arc<str>,
        /// What went wrong.
        error: String,
    },
    /// A stale source answered again.
    SourceRecovered {
        /// The source.
        source: Arc<str>,
    },
    /// The preferred tier is overloaded: the next tier of the same health class now takes a
    /// share of the picks (`TierSpill` `Load`).
    SpillStarted {
        /// The preferred tier.
        from_tier: u32,
        /// The tier that takes the spill.
        to_tier: u32,
        /// The share of the cluster's picks it takes now (0 to 1).
        share: f64,
    },
    /// The preferred tier has had room for the dwell time and the spill was withdrawn: it
    /// takes all traffic again.
    SpillStopped {
        /// The preferred tier.
        from_tier: u32,
        /// The tier that took the spill.
        to_tier: u32,
    },
    /// A configuration (re)load was refused; the configuration in force stays. Its `cluster` is
    /// empty: it is about the whole engine.
    ConfigRejected {
        /// Where the document came from (a file path), if known.
        origin: Option<Arc<str>>,
        /// The errors, one line each.
        errors: Vec<String>,
    },
}

/// Why the update guard held a publication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[non_exhaustive]
pub enum HeldReason {
    /// It would have removed every destination of the source.
    Emptying,
    /// It would have removed at least the configured share of the source's destinations.
    MassRemoval,
    /// The source said the service does not exist (DNS NXDOMAIN, a deleted Kubernetes service).
    NotFound,
}

impl fmt::Display for HeldReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HeldReason::Emptying => "it would remove every destination",
            HeldReason::MassRemoval => "it would remove too many destinations at once",
            HeldReason::NotFound => "the source says the service does not exist",
        })
    }
}

/// How a held publication ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[non_exhaustive]
pub enum Release {
    /// The source said the same again after the confirmation delay: applied.
    Confirmed,
    /// The destinations it removes failed their probes too: applied.
    ProbesAgree,
    /// The application forced it: applied.
    Forced,
    /// A newer publication replaced it (for example the destinations came back): given up.
    Superseded,
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Release::Confirmed => "confirmed after the delay",
            Release::ProbesAgree => "the destinations it removes failed their probes",
            Release::Forced => "forced",
            Release::Superseded => "superseded by a newer publication",
        })
    }
}

/// A change event, stamped with the engine clock.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HealthEvent {
    /// Engine-clock time of the change.
    pub at: Duration,
    /// The cluster id.
    pub cluster: Arc<str>,
    /// What changed.
    pub kind: HealthEventKind,
}

impl HealthEvent {
    /// An event of `cluster` at engine-clock time `at` (for tests and custom tools: the engine
    /// makes its own).
    pub fn new(at: Duration, cluster: impl Into<Arc<str>>, kind: HealthEventKind) -> Self {
        HealthEvent {
            at,
            cluster: cluster.into(),
            kind,
        }
    }
}

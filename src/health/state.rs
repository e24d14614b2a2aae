//! The health parts of a destination and the classes selection ranks them in: what health *is*,
//! independent of any policy that decides it.

use std::fmt;

/// Active or passive health of a destination, as a policy judged it. All destinations start
/// [`HealthState::Unknown`], as in YARP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub enum HealthState {
    /// No verdict yet (or a passive verdict that was reactivated).
    #[default]
    Unknown,
    /// The policy judged the destination healthy.
    Healthy,
    /// The policy judged the destination unhealthy: it gets no traffic unless the cluster panics.
    Unhealthy,
}

impl HealthState {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            HealthState::Unknown => 0,
            HealthState::Healthy => 1,
            HealthState::Unhealthy => 2,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            1 => HealthState::Healthy,
            2 => HealthState::Unhealthy,
            _ => HealthState::Unknown,
        }
    }
}

impl fmt::Display for HealthState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HealthState::Unknown => "Unknown",
            HealthState::Healthy => "Healthy",
            HealthState::Unhealthy => "Unhealthy",
        })
    }
}

/// The status a destination reports about itself in its health payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ReportedHealth {
    /// The service says it is fine.
    Healthy,
    /// The service works but asks for less traffic (for example while draining).
    Degraded,
    /// The service says it is not fit for traffic.
    Unhealthy,
}

impl ReportedHealth {
    pub(crate) fn to_u8(this: Option<Self>) -> u8 {
        match this {
            None => 0,
            Some(ReportedHealth::Healthy) => 1,
            Some(ReportedHealth::Degraded) => 2,
            Some(ReportedHealth::Unhealthy) => 3,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(ReportedHealth::Healthy),
            2 => Some(ReportedHealth::Degraded),
            3 => Some(ReportedHealth::Unhealthy),
            _ => None,
        }
    }

    /// Reads a payload status, case-insensitively (`"degraded"` works).
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        [
            ReportedHealth::Healthy,
            ReportedHealth::Degraded,
            ReportedHealth::Unhealthy,
        ]
        .into_iter()
        .find(|h| h.as_str().eq_ignore_ascii_case(t))
    }

    /// The payload spelling: `Healthy`, `Degraded` or `Unhealthy`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportedHealth::Healthy => "Healthy",
            ReportedHealth::Degraded => "Degraded",
            ReportedHealth::Unhealthy => "Unhealthy",
        }
    }
}

impl fmt::Display for ReportedHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a discovery source says about an endpoint: Kubernetes' ready / serving /
/// terminating conditions, Consul's passing / warning / critical checks, an etcd value's
/// `Health`. Destinations of the configuration are `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub enum DiscoveryHealth {
    /// The source says nothing about it.
    #[default]
    Unknown,
    /// The source says it is ready for traffic.
    Healthy,
    /// It still serves but is going away (Kubernetes terminating-but-serving, Consul warning):
    /// ranks with Degraded, used only when nothing better is left.
    Draining,
    /// The source says it must not get traffic: excluded.
    Unhealthy,
}

impl DiscoveryHealth {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            DiscoveryHealth::Unknown => 0,
            DiscoveryHealth::Healthy => 1,
            DiscoveryHealth::Draining => 2,
            DiscoveryHealth::Unhealthy => 3,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Self {
        match v {
            1 => DiscoveryHealth::Healthy,
            2 => DiscoveryHealth::Draining,
            3 => DiscoveryHealth::Unhealthy,
            _ => DiscoveryHealth::Unknown,
        }
    }

    /// Reads `Healthy`, `Draining`, `Unhealthy` or `Unknown`, case-insensitively.
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        [
            DiscoveryHealth::Unknown,
            DiscoveryHealth::Healthy,
            DiscoveryHealth::Draining,
            DiscoveryHealth::Unhealthy,
        ]
        .into_iter()
        .find(|h| h.as_str().eq_ignore_ascii_case(t))
    }

    /// `Unknown`, `Healthy`, `Draining` or `Unhealthy`.
    pub fn as_str(self) -> &'static str {
        match self {
            DiscoveryHealth::Unknown => "Unknown",
            DiscoveryHealth::Healthy => "Healthy",
            DiscoveryHealth::Draining => "Draining",
            DiscoveryHealth::Unhealthy => "Unhealthy",
        }
    }
}

impl fmt::Display for DiscoveryHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The independent health parts of a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HealthParts {
    /// Written by the active policy from probe rounds.
    pub active: HealthState,
    /// Written by the passive policy from request outcomes.
    pub passive: HealthState,
    /// Read from the destination's own health payload, if its probes return one.
    pub reported: Option<ReportedHealth>,
    /// What its discovery source says about it.
    pub discovery: DiscoveryHealth,
}

/// How good a destination is for traffic right now; selection keeps only the best class present
///. Also the summary status of [`best_endpoints`](crate::Engine::best_endpoints).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum HealthClass {
    /// Usable: active and passive not Unhealthy and not reporting Degraded. Unknown destinations
    /// rank here too, so a destination reactivated to Unknown gets traffic again.
    Healthy,
    /// Usable, but the destination reports `Degraded` (or `Unhealthy` before the active policy
    /// has ejected it), or its discovery source says it is draining: used only when no Healthy
    /// destination is left.
    Degraded,
    /// Excluded by its health checks and present only because the cluster is in panic mode.
    Unhealthy,
}

impl fmt::Display for HealthClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HealthClass::Healthy => "Healthy",
            HealthClass::Degraded => "Degraded",
            HealthClass::Unhealthy => "Unhealthy",
        })
    }
}

/// Which health part an event or verdict is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthPart {
    /// Written by active probing.
    Active,
    /// Written by passive observation of requests.
    Passive,
    /// Read from the destination's health payload.
    Reported,
    /// Said by the destination's discovery source.
    Discovery,
}

impl fmt::Display for HealthPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HealthPart::Active => "active",
            HealthPart::Passive => "passive",
            HealthPart::Reported => "reported",
            HealthPart::Discovery => "discovery",
        })
    }
}

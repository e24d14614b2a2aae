//! A destination at run time: its configuration, its health and in-flight count, and the handle a
//! pick returns (SPEC §1, §6).

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use url::Url;

use crate::cluster::ClusterSettings;
use crate::config::Metadata;
use crate::health::{
    updater, FailureHistory, HealthParts, HealthState, ReportedHealth, RequestOutcome,
};

/// One destination of a cluster, as the engine routes to it.
///
/// A `Destination` is immutable apart from its in-flight count. A config reload that keeps it
/// unchanged keeps the very same object; one that changes its address, Host, tier or metadata
/// builds a new one that shares the old one's health and policy counters (SPEC §2), while its
/// in-flight count starts at 0, since requests in flight went to the old address.
// What a pick touches is only this small block: the reference count and the in-flight count, in
// one 32-byte allocation. The engine allocates a cluster's blocks one after another, so even
// 10,000 destinations' blocks (320 KB) stay in a core's L2 cache, while the configuration (URLs,
// ids, metadata, health) lives in a separate allocation a pick never reads.
pub struct Destination {
    pub(crate) in_flight: AtomicUsize,
    pub(crate) info: Box<DestinationInfo>,
}

/// The cold part of a destination: everything but the in-flight count.
pub(crate) struct DestinationInfo {
    pub(crate) id: Arc<str>,
    pub(crate) address: Url,
    pub(crate) health_url: Option<Url>,
    pub(crate) host: Option<String>,
    pub(crate) tier: u32,
    pub(crate) metadata: Metadata,
    pub(crate) state: Arc<DestinationState>,
    /// The cluster id, spelled as configured.
    pub(crate) cluster_id: Arc<str>,
    /// The cluster's current settings; a reload swaps them without rebuilding destinations.
    pub(crate) cluster: Arc<ArcSwap<ClusterSettings>>,
}

impl Destination {
    /// The destination id, spelled as configured.
    pub fn id(&self) -> &str {
        &self.info.id
    }

    /// The base URL requests go to.
    pub fn address(&self) -> &Url {
        &self.info.address
    }

    /// The separate base URL for probes, if configured.
    pub fn health_url(&self) -> Option<&Url> {
        self.info.health_url.as_ref()
    }

    /// The `Host` header to send, if configured.
    pub fn host(&self) -> Option<&str> {
        self.info.host.as_deref()
    }

    /// The tier (priority): 0 is the most preferred.
    pub fn tier(&self) -> u32 {
        self.info.tier
    }

    /// The destination's metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.info.metadata
    }

    /// The id of the cluster this destination belongs to.
    pub fn cluster_id(&self) -> &str {
        &self.info.cluster_id
    }

    /// The current health parts.
    pub fn health(&self) -> HealthParts {
        self.info.state.health()
    }

    /// Requests in flight to this destination: picks whose handle is not dropped yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Destination")
            .field("cluster", &&*self.info.cluster_id)
            .field("id", &&*self.info.id)
            .field("address", &self.info.address.as_str())
            .field("tier", &self.info.tier)
            .field("health", &self.health())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

/// The part of a destination that survives config reloads: health, policy counters, in-flight.
#[derive(Default)]
pub(crate) struct DestinationState {
    active: AtomicU8,
    passive: AtomicU8,
    reported: AtomicU8,
    /// Per-destination data of the built-in policies.
    pub policy: Mutex<PolicyData>,
    /// What the status API shows; written only on probe rounds and health changes.
    pub record: Mutex<HealthRecord>,
}

/// Per-destination data of the built-in health policies.
#[derive(Default)]
pub(crate) struct PolicyData {
    pub consecutive_failures: u32,
    pub history: FailureHistory,
}

/// Bookkeeping for the status API and reactivation.
#[derive(Default, Clone)]
pub(crate) struct HealthRecord {
    pub last_change: Option<Duration>,
    pub last_reason: Option<String>,
    pub last_probe: Option<Duration>,
    pub last_probe_result: Option<String>,
    pub last_error: Option<String>,
    pub reactivation_due: Option<Duration>,
}

impl DestinationState {
    pub fn health(&self) -> HealthParts {
        HealthParts {
            active: self.active(),
            passive: self.passive(),
            reported: ReportedHealth::from_u8(self.reported.load(Ordering::Acquire)),
        }
    }

    pub fn active(&self) -> HealthState {
        HealthState::from_u8(self.active.load(Ordering::Acquire))
    }

    pub fn passive(&self) -> HealthState {
        HealthState::from_u8(self.passive.load(Ordering::Acquire))
    }

    /// Only the updater writes health, under the cluster's update lock.
    pub fn set_active(&self, h: HealthState) {
        self.active.store(h.to_u8(), Ordering::Release);
    }

    pub fn set_passive(&self, h: HealthState) {
        self.passive.store(h.to_u8(), Ordering::Release);
    }

    pub fn set_reported(&self, h: Option<ReportedHealth>) {
        self.reported
            .store(ReportedHealth::to_u8(h), Ordering::Release);
    }
}

/// What [`Engine::pick_endpoint`](crate::Engine::pick_endpoint) returns: the chosen destination,
/// counted in flight until this handle is dropped.
///
/// Report how the request went with [`report`](Self::report) so that passive health checks see
/// it (SPEC §4). Keep the handle alive for the whole exchange, including reading the body, so that
/// LeastRequests and PowerOfTwoChoices see real load.
#[must_use = "the destination counts as in flight until the handle is dropped"]
pub struct PickHandle {
    destination: Arc<Destination>,
}

impl PickHandle {
    pub(crate) fn new(destination: Arc<Destination>) -> Self {
        destination.in_flight.fetch_add(1, Ordering::Relaxed);
        PickHandle { destination }
    }

    /// The picked destination.
    pub fn destination(&self) -> &Destination {
        &self.destination
    }

    /// The picked destination's base URL.
    pub fn address(&self) -> &Url {
        &self.destination.info.address
    }

    /// A shared reference to the picked destination, for callers that keep it past the handle.
    pub fn destination_arc(&self) -> Arc<Destination> {
        self.destination.clone()
    }

    /// Reports the request's outcome to the cluster's passive health policy, if passive checks
    /// are enabled. Call it once per request. It never blocks on I/O; a health change it causes
    /// is applied before it returns.
    pub fn report(&self, outcome: RequestOutcome) {
        updater::request_completed(&self.destination, outcome);
    }
}

impl Drop for PickHandle {
    fn drop(&mut self) {
        self.destination.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for PickHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PickHandle")
            .field(&self.destination)
            .finish()
    }
}

//! A destination at run time: one instance of a cluster, with its identity, its current
//! attributes, its health, the policies' own data, and where its load signals are (its
//! in-flight count and latency estimate, kept in its cluster's signal pool).
//!
//! A destination is the same object for as long as its source keeps publishing its key at the
//! same address: a change of tier, weight, metadata or Host replaces only its attributes, so its
//! health, policy data, load signals and pending reactivation carry on. A new address under the
//! same key is a new destination (Kubernetes reuses addresses; health starts over).

pub(crate) mod attributes;
pub(crate) mod endpoint;
pub(crate) mod latency;
pub(crate) mod locality;
pub(crate) mod outcome_window;
pub(crate) mod reported_load;
pub(crate) mod signals;
pub(crate) mod state;
pub(crate) mod success_credit;

use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use url::Url;

use crate::uri::request_url;

use self::attributes::DestinationAttributes;
use self::outcome_window::OutcomeWindow;
use self::signals::Place;
use self::state::{DestinationRecords, DestinationState, HealthRecord};
use self::success_credit::SuccessCredit;
use crate::health::outcome::RequestOutcome;
use crate::health::state::HealthParts;

/// Where a destination's request outcomes go: its cluster at run time, which hands them to the
/// passive policy and the health updater. A destination never names what implements it.
pub(crate) trait OutcomeSink: Send + Sync {
    /// One finished request to `destination`; `latency`: how long it took, when measured.
    fn request_completed(
        &self,
        destination: &Arc<Destination>,
        outcome: RequestOutcome,
        latency: Latency,
    );

    /// `destination`'s server reported its utilization (an `endpoint-load-metrics` header).
    fn load_reported(&self, destination: &Arc<Destination>, utilization: f64);
}

/// How long a finished request took, as far as its reporter knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Latency {
    /// Not measured: the cluster's policy reads no latency, or the reporter did not time it.
    Unknown,
    /// It started when the engine clock showed this many microseconds (modulo 2^40, as a
    /// pick handle keeps it) and ends now: a pick handle's report.
    Since(u64),
    /// It took this long (an attempt the wrapped client timed).
    Took(std::time::Duration),
}

/// Where a destination's outcomes go, behind one thin pointer (one per cluster and change of
/// members, shared by the destinations it created), so that the block stays small.
pub(crate) struct Sink(pub Arc<dyn OutcomeSink>);

/// One destination of a cluster, as the engine routes to it.
// Three parts, by how often a request touches them:
// - this block, what an outcome touches: where its signals are in the cluster's pool
//   (`signals.rs`), the successes it may count without a lock (`success_credit.rs`) and where
//   outcomes go; small enough for one 64-byte heap chunk with the reference counts. A pick does
//   not touch it: it writes a count in the pool and its thread's ticket;
// - the warm part, what an outcome that takes the lock reads and writes: the health and the
//   outcome window (with feature `metrics` also the handles a pick updates);
// - the cold part, which no request reads: URLs, ids, attributes, policy data, bookkeeping.
// The engine allocates a cluster's new cold parts, then its new warm parts, then its new blocks,
// each in a run of its own, so that a request whose success needs no verdict stays within the
// blocks' run.
#[repr(C)]
pub struct Destination {
    pub(crate) signals: Place,
    credit: SuccessCredit,
    sink: Arc<Sink>,
    part: Box<WarmPart>,
}

/// What an outcome that takes the lock reads: the health, the outcome window (with feature
/// `metrics`, also the handles a pick updates); and the way to the cold part.
pub(crate) struct WarmPart {
    pub state: DestinationState,
    pub info: Box<DestinationInfo>,
    /// Its pick counter, in-flight gauge and load-signal gauges, registered when it was
    /// created.
    #[cfg(feature = "metrics")]
    pub metrics: DestinationMetrics,
}

/// The cold part of a destination.
pub(crate) struct DestinationInfo {
    pub id: Arc<str>,
    pub cluster_id: Arc<str>,
    /// The source that published it (`config` for configured destinations).
    pub source: Arc<str>,
    /// Its key within the source, case-folded: what identifies it when the source publishes
    /// again.
    pub key: Arc<str>,
    pub address: Url,
    pub attributes: ArcSwap<DestinationAttributes>,
    /// Its policy data and bookkeeping.
    pub records: DestinationRecords,
}

/// A destination's metric handles (feature `metrics`): what a pick and a handle's drop update,
/// and what a latency sample and a load report set, one atomic operation each.
#[cfg(feature = "metrics")]
pub(crate) struct DestinationMetrics {
    pub picks: ::metrics::Counter,
    pub in_flight: ::metrics::Gauge,
    /// Its latency estimate, in seconds.
    pub latency: ::metrics::Gauge,
    /// The utilization its server last reported.
    pub utilization: ::metrics::Gauge,
}

impl Destination {
    /// A new destination with no requests in flight. The engine builds a cluster's new
    /// destinations' cold parts first, their warm parts next and their blocks last, so that
    /// each kind sits together.
    pub(crate) fn new(part: Box<WarmPart>, signals: Place, sink: Arc<Sink>) -> Self {
        Destination {
            signals,
            sink,
            credit: SuccessCredit::default(),
            part,
        }
    }

    /// The successes it may count without the window's lock.
    #[inline]
    pub(crate) fn credit(&self) -> &SuccessCredit {
        &self.credit
    }

    /// Runs `f` on its outcome window under the window's lock, the successes counted without it
    /// added first.
    #[inline]
    pub(crate) fn with_outcome_window<R>(&self, f: impl FnOnce(&mut OutcomeWindow) -> R) -> R {
        self.part.state.with_outcome_window(|window| {
            let taken = self.credit.drain();
            if taken > 0 {
                window.count_successes(taken);
            }
            f(window)
        })
    }

    /// It left its cluster: no new picks, and its outcomes count for nothing.
    pub(crate) fn mark_removed(&self) {
        self.part.state.mark_removed();
        self.credit.revoke();
    }

    /// Sets its passive health; a change withdraws what successes it may count without a
    /// verdict.
    pub(crate) fn set_passive(&self, health: crate::health::state::HealthState) {
        self.part.state.set_passive(health);
        self.credit.revoke();
    }

    pub(crate) fn info(&self) -> &DestinationInfo {
        &self.part.info
    }

    /// Its metric handles (feature `metrics`).
    #[cfg(feature = "metrics")]
    pub(crate) fn metrics(&self) -> &DestinationMetrics {
        &self.part.metrics
    }

    pub(crate) fn state(&self) -> &DestinationState {
        &self.part.state
    }

    /// Its policy data and bookkeeping.
    pub(crate) fn records(&self) -> &DestinationRecords {
        &self.part.info.records
    }

    /// Its bookkeeping for the status view, locked.
    pub(crate) fn record(&self) -> parking_lot::MutexGuard<'_, HealthRecord> {
        self.part.info.records.record.lock()
    }

    /// The destination id, spelled as configured (for a discovered destination, its key).
    pub fn id(&self) -> &str {
        &self.part.info.id
    }

    /// The base URL requests go to.
    pub fn address(&self) -> &Url {
        &self.part.info.address
    }

    /// The URL of `path_and_query` (`/api/orders?id=7`; a leading `/` is optional) on this
    /// destination, with the rules of the wrapped client and the probes: the base URL's path is
    /// kept and the path appended to it, the base URL's own query and fragment dropped, the
    /// query taken from `path_and_query`.
    ///
    /// ```
    /// let engine = healthpick::Engine::from_json(r#"{"Clusters": {"c": {"Destinations": {
    ///     "d": { "Address": "http://10.0.0.1:8080/v1/" } } } } }"#)?;
    /// let pick = engine.pick_endpoint("c")?;
    /// assert_eq!(pick.url("/api/orders?id=7").as_str(), "http://10.0.0.1:8080/v1/api/orders?id=7");
    /// // `Url::join` would replace the base path instead:
    /// assert_eq!(pick.address().join("/api/orders")?.as_str(), "http://10.0.0.1:8080/api/orders");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn url(&self, path_and_query: &str) -> Url {
        request_url(&self.part.info.address, path_and_query)
    }

    /// The id of the cluster this destination belongs to.
    pub fn cluster_id(&self) -> &str {
        &self.part.info.cluster_id
    }

    /// The source that published it: `config` for the destinations of the configuration, or the
    /// name of a discovery source.
    pub fn source(&self) -> &str {
        &self.part.info.source
    }

    /// Its current attributes (tier, weight, Host, probe base, metadata).
    pub fn attributes(&self) -> Arc<DestinationAttributes> {
        self.part.info.attributes.load_full()
    }

    /// Runs `f` on its current attributes without taking a reference count.
    pub fn with_attributes<R>(&self, f: impl FnOnce(&DestinationAttributes) -> R) -> R {
        f(&self.part.info.attributes.load())
    }

    /// The tier (priority): 0 is the most preferred.
    pub fn tier(&self) -> u32 {
        self.with_attributes(DestinationAttributes::tier)
    }

    /// The weight load balancers give it within its group (default 1).
    pub fn weight(&self) -> f64 {
        self.with_attributes(DestinationAttributes::weight)
    }

    /// The current health parts.
    pub fn health(&self) -> HealthParts {
        self.part.state.health()
    }

    /// Whether its most recent probe succeeded (2xx, payload not `Unhealthy`); `None` before its
    /// first probe result, or when its cluster has no active checks.
    pub fn last_probe_succeeded(&self) -> Option<bool> {
        self.part.state.last_probe_succeeded()
    }

    /// Requests in flight to this destination: picks whose handle is not dropped yet.
    #[inline]
    pub fn in_flight(&self) -> usize {
        self.signals.in_flight()
    }

    /// Whether it has left its cluster (it gets no new picks; requests in flight finish).
    pub fn is_removed(&self) -> bool {
        self.part.state.is_removed()
    }

    /// Hands a report of its server's utilization to the cluster.
    pub(crate) fn report_load(self: &Arc<Self>, utilization: f64) {
        self.sink.0.load_reported(self, utilization);
    }

    /// Hands one finished request's outcome to the cluster.
    pub(crate) fn report(self: &Arc<Self>, outcome: RequestOutcome, latency: Latency) {
        self.sink.0.request_completed(self, outcome, latency);
    }
}

/// A probe of a destination in flight: while it lives the destination is not probed again;
/// dropping it (the probe ended or was cancelled) clears the mark.
pub(crate) struct ProbeInFlight(Arc<Destination>);

impl ProbeInFlight {
    /// Marks a probe of `destination` in flight; `None` when one already is.
    pub fn start(destination: &Arc<Destination>) -> Option<Self> {
        destination
            .state()
            .start_probe()
            .then(|| ProbeInFlight(destination.clone()))
    }
}

impl Drop for ProbeInFlight {
    fn drop(&mut self) {
        self.0.state().end_probe();
    }
}

impl fmt::Debug for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Destination")
            .field("cluster", &&*self.part.info.cluster_id)
            .field("id", &&*self.part.info.id)
            .field("address", &self.part.info.address.as_str())
            .field("tier", &self.tier())
            .field("health", &self.health())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block an outcome touches stays within one 64-byte heap chunk: 56 bytes with `Arc`'s
    /// two reference counts (glibc adds 8 bytes of its own and rounds to 16); the warm part
    /// within an 80-byte one.
    #[test]
    fn the_block_is_56_bytes_and_the_warm_part_72() {
        assert_eq!(std::mem::size_of::<Destination>() + 16, 56);
        // The count's place comes first, then what an outcome updates (see the type's notes).
        assert_eq!(std::mem::offset_of!(Destination, signals), 0);
        assert_eq!(std::mem::offset_of!(Destination, credit), 16);
        // With feature `metrics` its four metric handles join it (the pick's two, the load
        // signals' two).
        let handles = if cfg!(feature = "metrics") { 64 } else { 0 };
        assert_eq!(std::mem::size_of::<WarmPart>(), 72 + handles);
    }
}

//! Metrics (feature `metrics`): what the engine and the wrapped client do, as counters, gauges
//! and histograms of the [`metrics`](https://docs.rs/metrics) facade crate. healthpick depends
//! on no exporter: install the recorder of your choice (Prometheus, OpenTelemetry, StatsD, ...)
//! and the series below appear in it. Without the feature none of this is compiled.
//!
//! Every metric carries the cluster (`healthpick.cluster`, spelled as configured). healthpick's
//! own metrics are named `healthpick.*`; the attempt latency follows OpenTelemetry's HTTP client
//! semantic conventions (`http.client.request.duration`, seconds, with `server.address`,
//! `server.port`, `http.request.method`, `http.response.status_code` and `error.type`).
//!
//! | Name | Type | Unit | Labels | Meaning |
//! |---|---|---|---|---|
//! | `healthpick.picks` | counter | picks | cluster, destination | destinations handed out: every [`PickHandle`](crate::PickHandle), the client's retries and hedges included |
//! | `healthpick.requests.in_flight` | gauge | requests | cluster, destination | picks whose handle is not dropped yet (sum over `healthpick.destination` for the cluster's) |
//! | `healthpick.outcomes` | counter | outcomes | cluster, `outcome` | request outcomes the engine took in (reported on a handle, or by the client): `success`, `cancelled`, `transport_failure`, `status_1xx` … `status_5xx`, `status_other` |
//! | `healthpick.destinations.available` | gauge | destinations | cluster | the size of the cluster's available set, as last published (0 once the cluster is gone) |
//! | `healthpick.destination.latency` | gauge | seconds | cluster, destination | the destination's latency estimate (a peak-sensitive moving average of its requests' latencies, what `PeakEwma` and tier spill read) as of its last sample; 0 before the first |
//! | `healthpick.destination.utilization` | gauge | ratio | cluster, destination | the utilization the destination's server last reported in an `endpoint-load-metrics` header (1 is fully used), whether or not it counts yet (it counts after the cluster's blackout, until it expires); 0 before the first report |
//! | `healthpick.spill.share` | gauge | ratio | cluster | the share of the cluster's picks its preferred tier spills to the next tier under load (`TierSpill` `Load`), 0 to 1 |
//! | `healthpick.spill.starts` | counter | starts | cluster | the cluster's preferred tier started spilling to the next tier |
//! | `healthpick.health.transitions` | counter | transitions | cluster, `part`, `to` | one health part of a destination changed: `part` is `active`, `passive`, `reported` or `discovery`; `to` its new value, `unknown`, `healthy`, `degraded`, `draining`, `unhealthy` or `none` (a reported status cleared) |
//! | `healthpick.ejections` | counter | ejections | cluster, destination | a destination's passive health became Unhealthy (TransportFailureRate, OutlierDetection or your passive policy) |
//! | `healthpick.discovery.updates` | counter | updates | cluster, `source` | a discovery source's publication (or [`Engine::set_destinations`](crate::Engine::set_destinations)) changed the cluster's destinations |
//! | `healthpick.discovery.held` | counter | changes | cluster, `source`, `reason` | the update guard held a publication: `reason` is `emptying`, `mass_removal` or `not_found` |
//! | `healthpick.retries` | counter | retries | cluster, `reason` | the client sent a call's next attempt to another destination, after a failure: `reason` is `connect`, `transport`, `timeout` or `status` |
//! | `healthpick.hedges` | counter | hedges | cluster | the client hedged a slow attempt on another destination |
//! | `healthpick.budget.refusals` | counter | refusals | cluster, `budget` | a retry or hedge the client did not send because a budget refused it: `budget` is `retry` (the retry budget) or `hedge` (the hedge cap) |
//! | `http.client.request.duration` | histogram | seconds | cluster, destination, `server.address`, `server.port`, `http.request.method`, `http.response.status_code`, `error.type` | one attempt of a client call, from when it was handed its destination to its response headers or its failure |
//!
//! On `http.client.request.duration`: `http.response.status_code` is present when a response
//! came back; `error.type` is the status code for 4xx and 5xx answers (as OpenTelemetry has it
//! for clients), and `connect`, `transport` or `timeout` for an attempt that failed before any
//! response (then no status code); `http.request.method` is present when the integration
//! passes the method to the failover step (its value is the method, or `_OTHER` for one outside
//! the standard nine). Attempts that were cancelled (a hedge that lost, a call the caller
//! dropped) are not recorded. Buckets are your exporter's: OpenTelemetry advises
//! 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5 and 10 s.
//!
//! ## When handles are registered
//!
//! Metrics on every request cost one atomic operation on a handle registered ahead of time, so
//! picks stay lock-free and allocate nothing more:
//!
//! - a destination's `healthpick.picks`, `healthpick.requests.in_flight`,
//!   `healthpick.destination.latency` and `healthpick.destination.utilization` when the
//!   destination is created (the configuration or a source published it); the latency gauge is
//!   set where a request's latency is taken in, the utilization gauge where a load report is,
//!   one store each;
//! - a cluster's `healthpick.outcomes`, `healthpick.destinations.available` and
//!   `healthpick.spill.share` when the cluster is created;
//! - the client's `http.client.request.duration`, per thread, the first time an attempt ends
//!   with a given destination, method, status and error type (then a hash-map lookup per
//!   attempt, without a lock).
//!
//! Rare events (health transitions, ejections, discovery updates and held changes, retries,
//! hedges and refusals) register their series when they happen.
//!
//! So **install the recorder before building the engine** (and before the first request):
//! handles taken before a recorder exists record nothing, for as long as the destination or
//! cluster lives. [`describe`] gives the recorder every metric's unit and description.
//!
//! ## Cardinality
//!
//! Series per cluster: the destination-labelled ones number four per destination (picks, in
//! flight, latency, utilization) plus one per ejected destination; the attempt histogram one per destination and
//! combination of method, status and error type seen; the rest a handful each. With discovery,
//! a destination that leaves keeps its series in the recorder until the recorder forgets them
//! (Prometheus's exporter has an idle timeout for that).
//!
//! ```
//! use healthpick::{Engine, RequestOutcome};
//! use metrics_util::debugging::{DebugValue, DebuggingRecorder};
//!
//! // Your exporter's recorder, installed first (here a local one, for the example).
//! let recorder = DebuggingRecorder::new();
//! let snapshotter = recorder.snapshotter();
//! metrics::with_local_recorder(&recorder, || -> Result<(), Box<dyn std::error::Error>> {
//!     healthpick::metrics::describe();
//!     let engine = Engine::from_json(r#"{"Clusters": {"payments": {"Destinations": {
//!         "eu-1": { "Address": "http://127.0.0.1:8001/" } } } } }"#)?;
//!     let pick = engine.pick_endpoint("payments")?;
//!     pick.report(RequestOutcome::Status(200));
//!     Ok(())
//! })?;
//! let picks = snapshotter.snapshot().into_vec().into_iter().find_map(|(key, _, _, value)| {
//!     (key.key().name() == healthpick::metrics::PICKS).then_some(value)
//! });
//! assert_eq!(picks, Some(DebugValue::Counter(1)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

use ::metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, histogram, Histogram, Label,
    SharedString, Unit,
};

use crate::destination::Destination;
pub use crate::engine::metrics::{
    CLUSTER, DESTINATION, DESTINATIONS_AVAILABLE, DESTINATION_LATENCY, DESTINATION_UTILIZATION,
    DISCOVERY_HELD, DISCOVERY_UPDATES, EJECTIONS, HEALTH_TRANSITIONS, OUTCOME, OUTCOMES, PART,
    PICKS, REASON, REQUESTS_IN_FLIGHT, SOURCE, SPILL_SHARE, SPILL_STARTS, TO,
};

/// Counter: a call's next attempt sent to another destination after a failure. Labels:
/// cluster, [`REASON`] (`connect`, `transport`, `timeout`, `status`).
pub const RETRIES: &str = "healthpick.retries";
/// Counter: a slow attempt hedged on another destination. Labels: cluster.
pub const HEDGES: &str = "healthpick.hedges";
/// Counter: a retry or hedge not sent because a budget refused it. Labels: cluster, [`BUDGET`].
pub const BUDGET_REFUSALS: &str = "healthpick.budget.refusals";
/// Histogram, seconds: one attempt of a client call (OpenTelemetry's HTTP client request
/// duration). Labels: cluster, destination, [`SERVER_ADDRESS`], [`SERVER_PORT`],
/// [`HTTP_REQUEST_METHOD`], [`HTTP_RESPONSE_STATUS_CODE`], [`ERROR_TYPE`].
pub const ATTEMPT_DURATION: &str = "http.client.request.duration";

/// Label of [`BUDGET_REFUSALS`]: `retry` (the cluster's retry budget) or `hedge` (its hedge cap).
pub const BUDGET: &str = "budget";
/// Label (OpenTelemetry): the destination's host, without brackets for IPv6.
pub const SERVER_ADDRESS: &str = "server.address";
/// Label (OpenTelemetry): the destination's port, or its scheme's default.
pub const SERVER_PORT: &str = "server.port";
/// Label (OpenTelemetry): the request method, when the integration gave it.
pub const HTTP_REQUEST_METHOD: &str = "http.request.method";
/// Label (OpenTelemetry): the response status, when a response came back.
pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
/// Label (OpenTelemetry): why the attempt failed: a 4xx or 5xx status, or `connect`,
/// `transport`, `timeout`; absent for a success.
pub const ERROR_TYPE: &str = "error.type";

/// Gives the recorder in force the unit and description of every metric in the table (what
/// exporters show as help text). Call it once, after installing the recorder.
pub fn describe() {
    describe_counter!(
        PICKS,
        Unit::Count,
        "Destinations handed out by picks, retries and hedges included"
    );
    describe_gauge!(
        REQUESTS_IN_FLIGHT,
        Unit::Count,
        "Requests in flight: picks whose handle is not dropped yet"
    );
    describe_counter!(
        OUTCOMES,
        Unit::Count,
        "Request outcomes taken in by the engine, by kind"
    );
    describe_gauge!(
        DESTINATIONS_AVAILABLE,
        Unit::Count,
        "Destinations the cluster may send traffic to"
    );
    describe_gauge!(
        DESTINATION_LATENCY,
        Unit::Seconds,
        "A destination's latency estimate (peak-sensitive moving average) as of its last sample"
    );
    describe_gauge!(
        DESTINATION_UTILIZATION,
        "The utilization a destination's server last reported (endpoint-load-metrics)"
    );
    describe_gauge!(
        SPILL_SHARE,
        "The share of a cluster's picks its preferred tier spills to the next tier"
    );
    describe_counter!(
        SPILL_STARTS,
        Unit::Count,
        "Times a cluster's preferred tier started spilling to the next tier"
    );
    describe_counter!(
        HEALTH_TRANSITIONS,
        Unit::Count,
        "Changes of one health part of a destination"
    );
    describe_counter!(
        EJECTIONS,
        Unit::Count,
        "Destinations whose passive health became Unhealthy"
    );
    describe_counter!(
        DISCOVERY_UPDATES,
        Unit::Count,
        "Discovery publications that changed a cluster's destinations"
    );
    describe_counter!(
        DISCOVERY_HELD,
        Unit::Count,
        "Discovery publications held by the update guard"
    );
    describe_counter!(
        RETRIES,
        Unit::Count,
        "Attempts sent to another destination after a failure"
    );
    describe_counter!(
        HEDGES,
        Unit::Count,
        "Slow attempts hedged on another destination"
    );
    describe_counter!(
        BUDGET_REFUSALS,
        Unit::Count,
        "Retries and hedges refused by a budget"
    );
    describe_histogram!(
        ATTEMPT_DURATION,
        Unit::Seconds,
        "Duration of one attempt of a client call, to its response headers or its failure"
    );
}

/// How an attempt ended, for [`ATTEMPT_DURATION`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptEnd {
    /// Answered with this status.
    Status(u16),
    /// No connection was established.
    Connect,
    /// The connection failed after it was established.
    Transport,
    /// No response within the attempt's deadline.
    Timeout,
}

impl AttemptEnd {
    fn code(self) -> u16 {
        match self {
            AttemptEnd::Status(status) => status.min(999),
            AttemptEnd::Connect => 1000,
            AttemptEnd::Transport => 1001,
            AttemptEnd::Timeout => 1002,
        }
    }
}

/// The standard methods, as OpenTelemetry lists them; anything else is `_OTHER`.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// The [`HTTP_REQUEST_METHOD`] value of `method`.
pub(crate) fn method_label(method: &str) -> &'static str {
    METHODS
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or("_OTHER")
}

/// Entries one thread keeps before it starts over.
const CACHE_LIMIT: usize = 4096;

/// Key: the destination's address (kept valid by the entry's `Weak`, which keeps the allocation,
/// so no other destination can have it), the end's code, the method.
type CacheKey = (usize, u16, Option<&'static str>);

thread_local! {
    /// This thread's attempt histograms, by destination, end and method.
    static DURATIONS: RefCell<HashMap<CacheKey, (Weak<Destination>, Histogram), foldhash::fast::FixedState>> =
        RefCell::new(HashMap::default());
}

/// Records one attempt of `seconds` to `destination` that ended so.
pub(crate) fn record_attempt(
    destination: &Arc<Destination>,
    method: Option<&'static str>,
    end: AttemptEnd,
    seconds: f64,
) {
    let key = (Arc::as_ptr(destination) as usize, end.code(), method);
    let recorded = DURATIONS.try_with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some((_, histogram)) = cache.get(&key) {
            histogram.record(seconds);
            return;
        }
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        let histogram = attempt_histogram(destination, method, end);
        histogram.record(seconds);
        cache.insert(key, (Arc::downgrade(destination), histogram));
    });
    if recorded.is_err() {
        // The thread is ending: register without the cache.
        attempt_histogram(destination, method, end).record(seconds);
    }
}

/// Registers the histogram of attempts to `destination` that ended so.
#[cold]
fn attempt_histogram(
    destination: &Destination,
    method: Option<&'static str>,
    end: AttemptEnd,
) -> Histogram {
    let info = destination.info();
    let address = destination.address();
    let host = address.host_str().unwrap_or_default();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let mut labels = vec![
        Label::new(CLUSTER, SharedString::from(info.cluster_id.clone())),
        Label::new(DESTINATION, SharedString::from(info.id.clone())),
        Label::new(SERVER_ADDRESS, host.to_string()),
        Label::new(
            SERVER_PORT,
            address
                .port_or_known_default()
                .map(|p| p.to_string())
                .unwrap_or_default(),
        ),
    ];
    if let Some(method) = method {
        labels.push(Label::new(HTTP_REQUEST_METHOD, method));
    }
    match end {
        AttemptEnd::Status(status) => {
            labels.push(Label::new(HTTP_RESPONSE_STATUS_CODE, status.to_string()));
            if status >= 400 {
                labels.push(Label::new(ERROR_TYPE, status.to_string()));
            }
        }
        AttemptEnd::Connect => labels.push(Label::new(ERROR_TYPE, "connect")),
        AttemptEnd::Transport => labels.push(Label::new(ERROR_TYPE, "transport")),
        AttemptEnd::Timeout => labels.push(Label::new(ERROR_TYPE, "timeout")),
    }
    histogram!(ATTEMPT_DURATION, labels)
}

/// A retry to `destination` was sent, after a failure of `reason`.
#[cold]
pub(crate) fn retried(destination: &Destination, reason: &'static str) {
    counter!(RETRIES, CLUSTER => SharedString::from(destination.info().cluster_id.clone()), REASON => reason)
        .increment(1);
}

/// A hedge to `destination` was sent.
#[cold]
pub(crate) fn hedged(destination: &Destination) {
    counter!(HEDGES, CLUSTER => SharedString::from(destination.info().cluster_id.clone()))
        .increment(1);
}

/// A retry or hedge to `destination` was refused by `budget` (`retry` or `hedge`).
#[cold]
pub(crate) fn refused(destination: &Destination, budget: &'static str) {
    counter!(BUDGET_REFUSALS, CLUSTER => SharedString::from(destination.info().cluster_id.clone()), BUDGET => budget)
        .increment(1);
}

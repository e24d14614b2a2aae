//! Watching the engine work: every input it takes and every decision it makes, synchronously and
//! in order. The simulator prints decisions through this hook and the
//! [`Recorder`](crate::simulate::Recorder) writes inputs for replay; custom observers can feed
//! audit logs or metrics.
//!
//! An observer is installed with [`EngineBuilder::observer`](crate::EngineBuilder::observer).
//! Without one the engine pays a single branch per outcome; with one, every call below runs on the
//! thread that caused it (request outcomes on the request path), so keep observers cheap.
//!
//! Many calls come while the engine holds the lock of what changed (a cluster's book, or the
//! configuration lock during a reload): an observer must not call back into the same engine
//! (`status`, a reload, `set_destinations`), which would wait for that lock forever. Hand such
//! work to another thread, or subscribe with [`Engine::subscribe`](crate::Engine::subscribe).

use std::time::Duration;

use crate::events::HealthEvent;
use crate::health::outcome::RequestOutcome;
use crate::health::probe_result::ProbeResult;
use crate::health::reason::Reason;
use crate::health::state::HealthState;

/// What a policy evaluation judged.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Evaluated<'a> {
    /// The active policy judged one probe of a round.
    Probe(&'a ProbeResult),
    /// The passive policy judged one request outcome.
    Outcome(RequestOutcome),
}

/// One policy evaluation of one destination, whether or not it changed anything.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Evaluation<'a> {
    /// Engine-clock time.
    pub at: Duration,
    /// The cluster id, spelled as configured.
    pub cluster: &'a str,
    /// The destination id, spelled as configured.
    pub destination: &'a str,
    /// The policy's registered name, e.g. `ConsecutiveFailures`.
    pub policy: &'a str,
    /// The probe or outcome the policy looked at.
    pub input: Evaluated<'a>,
    /// The health part's value the policy decided (equal to the current one when nothing
    /// changes).
    pub state: HealthState,
    /// The policy's reason, carrying its counters (consecutive failures, window counts).
    pub reason: &'a Reason,
}

/// Sees the engine's inputs and decisions. Every method has an empty default.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use healthpick::observer::{Evaluation, Observer};
/// use healthpick::{Engine, RequestOutcome};
///
/// #[derive(Default)]
/// struct CountOutcomes(Mutex<usize>);
/// impl Observer for CountOutcomes {
///     fn request_completed(&self, _at: Duration, _cluster: &str, _destination: &str, _outcome: RequestOutcome) {
///         *self.0.lock().unwrap() += 1;
///     }
/// }
///
/// let seen = Arc::new(CountOutcomes::default());
/// let engine = Engine::builder().observer(seen.clone()).build();
/// engine.load_json(r#"{"Clusters": {"c": {"Destinations": {"d": {"Address": "http://127.0.0.1:1/"}}}}}"#)?;
/// engine.pick_endpoint("c")?.report(RequestOutcome::Success);
/// assert_eq!(*seen.0.lock().unwrap(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Observer: Send + Sync + 'static {
    /// Called once, when the engine is built, with the clock's time then (the start of a
    /// recording).
    fn attached(&self, now: Duration) {
        let _ = now;
    }

    /// Probe results of `cluster`, before the active policy sees them: a whole round, or (with
    /// per-destination delivery, the default) the results that arrived together. Only results
    /// for destinations the cluster has are passed.
    fn probe_round(&self, at: Duration, cluster: &str, results: &[ProbeResult]) {
        let _ = (at, cluster, results);
    }

    /// A finished request, before the passive policy sees it (also when passive checks are off).
    fn request_completed(
        &self,
        at: Duration,
        cluster: &str,
        destination: &str,
        outcome: RequestOutcome,
    ) {
        let _ = (at, cluster, destination, outcome);
    }

    /// A policy evaluation, whether or not it changed the destination's health.
    fn evaluated(&self, evaluation: &Evaluation<'_>) {
        let _ = evaluation;
    }

    /// A change event, exactly as [`Engine::subscribe`](crate::Engine::subscribe) delivers it,
    /// but synchronously and never lagging.
    fn event(&self, event: &HealthEvent) {
        let _ = event;
    }
}

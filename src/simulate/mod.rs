//! The deterministic simulator: "what would these health settings have done with this traffic?"
//!
//! A [`Scenario`] is a config document plus a timeline of probe rounds, request outcomes, picks,
//! in-flight changes and reloads. A [`Simulation`] runs it through the real engine (the same
//! policies and selection code as production) on a manual clock and a seeded random source, and
//! returns every decision as one JSON line: health changes, every policy evaluation, changes of
//! the available set and panic mode, and picks. Same scenario, same seed: byte-identical output.
//! `healthpick simulate FILE` is the same thing on the command line.
//!
//! A live engine can record its inputs with a [`Recorder`], so an incident can be replayed
//! offline with another configuration ([`Scenario::from_json_with_config`]).
//!
//! # Scenario format
//!
//! ```json
//! {
//!   "config": { "Clusters": { ... } },        // a YARP document, as in appsettings.json
//!   "globals": { "DetectionWindowSize": "00:01:00", "MinimalTotalCountThreshold": 10,
//!                "DefaultFailureRateLimit": 0.3, "ConsecutiveFailuresThreshold": 2 },
//!   "seed": 1,                                  // random source of the load balancers (default 0)
//!   "until": 120.0,                             // fire timers up to this time (seconds)
//!   "events": [
//!     {"at": 10.0, "probe":    {"cluster": "c0", "results": {"d0": 500, "d1": 200, "d2": "error",
//!                               "d3": {"status": 200, "payload": "Degraded"}}}},
//!     {"at": 12.5, "request":  {"cluster": "c0", "destination": "d1", "outcome": "transport-failure"}},
//!     {"at": 13.0, "pick":     {"cluster": "c0", "count": 5, "hold": false}},
//!     {"at": 14.0, "inflight": {"cluster": "c0", "destination": "d0", "delta": 3}},
//!     {"at": 15.0, "reload":   { "Clusters": { ... } }}
//!   ]
//! }
//! ```
//!
//! - `at` is seconds since the start, never decreasing.
//! - `probe` is one completed round: the active policy sees all its results at once; a
//!   destination not listed is not part of the round. A result is an HTTP status, `"error"`,
//!   `{"error": "why"}`, or `{"status": 200, "payload": "Degraded"}` (the health payload).
//! - `request` is one finished request: `"success"`, `"transport-failure"`, `"cancelled"` or an
//!   HTTP status (which is not a transport failure).
//! - `pick` runs `pick_endpoint` `count` times (default 1); with `"hold": true` each picked
//!   destination stays in flight for the rest of the run.
//! - `inflight` adds `delta` to a destination's in-flight count (never below 0).
//! - `reload` applies a new document; a bad one is rejected and the old one stays (a `reload`
//!   line says which).
//! - Passive reactivation timers fire at their due times between events (before an event at the
//!   same time) and up to `until`; without `until` the run ends with the last event.
//!
//! Globals use the keys, TimeSpan grammar and defaults of a config document's `HealthPolicies`
//! section.
//!
//! # Output lines
//!
//! Every line has `at` (seconds) and `type`:
//!
//! | type | fields |
//! |---|---|
//! | `health` | `cluster`, `destination`, `part` (`active`/`passive`/`reported`), `from`, `to`, `reason` |
//! | `evaluation` | `cluster`, `destination`, `policy`, then ConsecutiveFailures: `probe` (`success`/`failure`), `result`, `counter`; TransportFailureRate: `outcome`, `failed`, `total`, `rate`, `limit`; OutlierDetection: `outcome`, `consecutive5xx`, `consecutiveGateway`, `ejection` (`none`, `ejected` with `ejectedFor` seconds and `ejections` in a row, `still-ejected` with `ejectedFor` left, `cap-reached` with `ejected` and `cap`); a custom policy: `reason`; always `state`. With several passive policies, one line per policy and outcome |
//! | `available` | `cluster`, `destinations` (ids), `panic` |
//! | `pick` | `cluster`, `destination` or `error: "NoAvailableDestinations"` |
//! | `reload` | `valid`, `errors` when rejected |
//!
//! ```
//! use healthpick::simulate::{Scenario, Simulation};
//!
//! let scenario = Scenario::from_json(r#"{
//!   "config": {"Clusters": {"c0": {
//!     "HealthCheck": {"Active": {"Enabled": true}},
//!     "Destinations": {"d0": {"Address": "http://10.0.0.1/"}, "d1": {"Address": "http://10.0.0.2/"}}}}},
//!   "events": [
//!     {"at": 5,  "probe": {"cluster": "c0", "results": {"d0": 200, "d1": 503}}},
//!     {"at": 10, "probe": {"cluster": "c0", "results": {"d0": 200, "d1": "error"}}},
//!     {"at": 11, "pick":  {"cluster": "c0", "count": 2}}
//!   ]
//! }"#)?;
//! let lines = Simulation::new(scenario).run()?;
//! // The second failure reaches the default threshold (2): d1 is ejected at t = 10.
//! assert!(lines.contains(&r#"{"at":10.0,"type":"health","cluster":"c0","destination":"d1","part":"active","from":"Unknown","to":"Unhealthy","reason":"probe error: probe failed, 2 consecutive failures"}"#.to_string()));
//! assert!(lines.ends_with(&[
//!     r#"{"at":11.0,"type":"pick","cluster":"c0","destination":"d0"}"#.to_string(),
//!     r#"{"at":11.0,"type":"pick","cluster":"c0","destination":"d0"}"#.to_string(),
//! ]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod record;
mod run;
mod scenario;

pub use record::Recorder;
pub use run::Simulation;
pub use scenario::{Scenario, ScenarioError, ScenarioProblem};

//! The deterministic simulator: "what would these health settings have done with this traffic?"
//!
//! A [`Scenario`] is a config document plus a timeline of probe rounds, request outcomes, picks,
//! in-flight changes and reloads, and of how the destinations answer: how long their requests
//! take and what load they report. A [`Simulation`] runs it through the real engine (the same
//! policies, selection code and timers as production) on a manual clock and a seeded random
//! source, and returns every decision as one JSON line: health changes, every policy evaluation,
//! changes of the available set and panic mode, picks (with their affinity key) or tallies of
//! them, and tier spill starting and stopping. Same scenario, same seed: byte-identical output.
//! `healthpick simulate FILE` is the same thing on the command line.
//!
//! A live engine can record its inputs with a [`Recorder`], so an incident can be replayed
//! offline with another configuration ([`Scenario::from_json_with_config`], or one built in
//! code with [`Simulation::config`]).
//!
//! # Scenario format
//!
//! ```json
//! {
//!   "config": { "Clusters": { ... } },        // a YARP document, as in appsettings.json
//!   "globals": { "DetectionWindowSize": "00:01:00", "MinimalTotalCountThreshold": 10,
//!                "DefaultFailureRateLimit": 0.3, "ConsecutiveFailuresThreshold": 2 },
//!   "seed": 1,                                  // random source of the load balancers (default 0)
//!   "until": 120.0,                             // the run ends at this time (seconds)
//!   "events": [
//!     {"at": 10.0, "probe":    {"cluster": "c0", "results": {"d0": 500, "d1": 200, "d2": "error",
//!                               "d3": {"status": 200, "payload": "Degraded"}}}},
//!     {"at": 12.5, "request":  {"cluster": "c0", "destination": "d1", "outcome": "transport-failure"}},
//!     {"at": 13.0, "pick":     {"cluster": "c0", "count": 5, "hold": false}},
//!     {"at": 14.0, "inflight": {"cluster": "c0", "destination": "d0", "delta": 3}},
//!     {"at": 15.0, "reload":   { "Clusters": { ... } }},
//!     {"at": 16.0, "latency":  {"cluster": "c0", "destinations": {"d0": 0.020, "d1": 0.250}}},
//!     {"at": 16.0, "load":     {"cluster": "c0", "destinations": {"d0": 0.4, "d1": "TEXT cpu_utilization=0.9"}}},
//!     {"at": 16.0, "tally":    {"cluster": "c0", "every": 1.0}},
//!     {"at": 16.0, "pick":     {"cluster": "c0", "rate": 200, "for": 30}},
//!     {"at": 17.0, "pick":     {"cluster": "c0", "count": 8, "keys": {"prefix": "user-", "count": 8}}}
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
//! - `pick` runs `pick_endpoint` `count` times (default 1), all at `at`; with `"hold": true`
//!   each picked destination stays in flight for the rest of the run. With `"rate"` (picks per
//!   second) the picks are spread: one at `at`, then one every `1 / rate` seconds, `count` of
//!   them or as many as `"for"` seconds hold; they come after the other events of the same
//!   instant, and the run goes on while they last. `"key"` gives every pick that affinity key
//!   (`pick_endpoint_for_key`), `"keys"` a list taken in turn (`["a", "b"]`) or a numbered
//!   pattern (`{"prefix": "user-", "count": 100}`: `user-0` to `user-99`, round and round).
//! - `latency` sets how long each listed destination takes to answer, in seconds, from now on;
//!   `null` stops answering. A pick of a destination that answers (and is not held) is in flight
//!   until its answer, `latency` later on the simulated clock, which reports a success that took
//!   that long, as the wrapped client reports an attempt: its latency estimate, `PeakEwma`, tier
//!   spill and passive checks see it then. A pick of a destination without a latency ends at
//!   once, unreported.
//! - `load` sets the `endpoint-load-metrics` value each listed destination's answers carry from
//!   now on, reported before the outcome: a number is its `application_utilization`, a string
//!   the header value itself (`TEXT ...` or `JSON {...}`, it must carry a utilization), `null`
//!   none. The destination must have a latency (the report rides on its answers).
//! - `tally` counts the cluster's picks instead of writing a line per pick: one `tally` line per
//!   `every` seconds (from this event on) with the picks per destination and the pick errors,
//!   and a last one when it is switched off (`"every": null`) or the run ends. Lines of
//!   intervals without picks are left out.
//! - `inflight` adds `delta` to a destination's in-flight count (never below 0).
//! - `reload` applies a new document; a bad one is rejected and the old one stays (a `reload`
//!   line says which).
//! - The engine's timers (passive reactivations, slow-start steps, the tier-spill controller's
//!   looks) fire on the simulated clock at their due times, between events and up to `until`.
//!   At the same instant, tally lines come first, then answers, then timers, then the
//!   scenario's events, then spread picks. Without `until` the run ends when nothing but timers
//!   is left: after the last event, the last spread pick and the last answer; with it, at
//!   `until` (later picks and answers do not happen).
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
//! | `pick` | `cluster`, `key` for a keyed pick, `destination` or `error` (`NoAvailableDestinations`, `AffinityUnavailable`) |
//! | `tally` | `cluster`, `since`, `picks` (destination id to picks), `errors` (error to picks) when any, `spill` (the share that spills now) for a cluster with `TierSpill` `Load`, `warming` (destination id to its slow-start factor) while any warms up |
//! | `spill` | `cluster`, `state` (`started` with the `share` that spills, or `stopped`), `fromTier`, `toTier` |
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
//!
//! With traffic: 100 requests a second for 10 s, answered in 40 ms by one destination and in
//! 400 ms by the other; `PeakEwma` sends nearly all of them to the fast one.
//!
//! ```
//! use healthpick::simulate::{Scenario, Simulation};
//!
//! let scenario = Scenario::from_json(r#"{
//!   "config": {"Clusters": {"c0": {"LoadBalancingPolicy": "PeakEwma", "Destinations": {
//!     "fast": {"Address": "http://10.0.0.1/"}, "slow": {"Address": "http://10.0.0.2/"}}}}},
//!   "seed": 5,
//!   "events": [
//!     {"at": 0, "latency": {"cluster": "c0", "destinations": {"fast": 0.040, "slow": 0.400}}},
//!     {"at": 0, "tally":   {"cluster": "c0", "every": 10}},
//!     {"at": 0, "pick":    {"cluster": "c0", "rate": 100, "for": 10}}
//!   ]
//! }"#)?;
//! let lines = Simulation::new(scenario).run()?;
//! let tally = lines.last().unwrap();
//! assert!(tally.starts_with(r#"{"at":10.0,"type":"tally","cluster":"c0","since":0.0,"picks":{"fast":9"#), "{tally}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod record;
mod run;
mod scenario;

pub use record::Recorder;
pub use run::Simulation;
pub use scenario::{Scenario, ScenarioError, ScenarioProblem};

//! The metrics of feature `metrics` (the table in `healthpick::metrics`), counted exactly over
//! scripted runs: picks, in-flight and available gauges, outcomes by kind, health transitions and
//! ejections (on the engine's manual clock), discovery updates and held changes, and, against
//! real servers on 127.0.0.1, the client's retries by reason, a hedge, budget refusals and the
//! attempt-duration histogram's samples and labels.
//!
//! Each test has its own `DebuggingRecorder`, installed for its thread only
//! (`metrics::with_local_recorder`), and runs everything on that thread (a current-thread tokio
//! runtime for the client tests), so tests running side by side do not see each other's series.
//! A snapshot of that recorder reads what happened since the previous snapshot: it resets
//! counters and gauges to 0 and empties histograms.

#![cfg(feature = "metrics")]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig, HealthPolicyOptions,
    LoadReportsConfig, LoadSignalsConfig, PassiveHealthCheckConfig,
};
use healthpick::discovery::SourceSpec;
use healthpick::metrics::*;
use healthpick::{
    Endpoint, Engine, HealthAwareClient, Hedging, ManualClock, ProbeResult, RequestOutcome,
    RetryPolicy, Timeouts,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use crate::support::clients::http_client;
use crate::support::faulty_servers::{ClosedPort, Mode, RawServer};
use crate::support::servers::EchoServer;

/// One series of a snapshot: its name, its labels, its value.
type Series = (String, Vec<(String, String)>, DebugValue);

/// One snapshot of a test's recorder.
struct Seen(Vec<Series>);

impl Seen {
    fn take(snapshotter: &Snapshotter) -> Seen {
        Seen(
            snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .map(|(key, _, _, value)| {
                    let key = key.key();
                    let labels = key
                        .labels()
                        .map(|l| (l.key().to_string(), l.value().to_string()))
                        .collect();
                    (key.name().to_string(), labels, value)
                })
                .collect(),
        )
    }

    /// The series named `name` that carry every label of `labels` (and maybe others).
    fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&str, &str)],
    ) -> impl Iterator<Item = &'a Series> + 'a {
        self.0.iter().filter(move |(n, have, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| have.iter().any(|(hk, hv)| hk == k && hv == v))
        })
    }

    /// The sum of the matching counters.
    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.matching(name, labels)
            .map(|(_, _, v)| match v {
                DebugValue::Counter(n) => *n,
                other => panic!("{name} is not a counter: {other:?}"),
            })
            .sum()
    }

    /// The sum of the matching gauges.
    fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels)
            .map(|(_, _, v)| match v {
                DebugValue::Gauge(g) => g.into_inner(),
                other => panic!("{name} is not a gauge: {other:?}"),
            })
            .sum()
    }

    /// How many samples the matching histograms hold.
    fn samples(&self, name: &str, labels: &[(&str, &str)]) -> usize {
        self.matching(name, labels)
            .map(|(_, _, v)| match v {
                DebugValue::Histogram(samples) => samples.len(),
                other => panic!("{name} is not a histogram: {other:?}"),
            })
            .sum()
    }

    /// The label sets of the matching series that hold something, sorted.
    fn label_sets(&self, name: &str, labels: &[(&str, &str)]) -> Vec<Vec<(String, String)>> {
        let mut sets: Vec<Vec<(String, String)>> = self
            .matching(name, labels)
            .filter(|(_, _, v)| match v {
                DebugValue::Histogram(samples) => !samples.is_empty(),
                DebugValue::Counter(n) => *n > 0,
                DebugValue::Gauge(_) => true,
            })
            .map(|(_, have, _)| {
                let mut have = have.clone();
                have.sort();
                have
            })
            .collect();
        sets.sort();
        sets
    }
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.sort();
    v
}

/// Runs `test` with `recorder` as this thread's recorder, on a current-thread runtime, so every
/// task it spawns (servers, the client's connections, timers) runs on this thread too.
fn run_with<F: Future<Output = ()>>(recorder: &DebuggingRecorder, test: impl FnOnce() -> F) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    metrics::with_local_recorder(recorder, || runtime.block_on(test()));
}

fn manual_engine(config: Config) -> (Engine, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let engine = Engine::builder()
        .clock(clock.clone())
        .seed(3)
        .build_with(config)
        .expect("valid config");
    (engine, clock)
}

/// Picks in `cluster` until the pick is `id` (every pick counts).
fn pick_id(engine: &Engine, cluster: &str, id: &str) -> healthpick::PickHandle {
    for _ in 0..100 {
        let pick = engine.pick_endpoint(cluster).expect("pick");
        if pick.destination().id() == id {
            return pick;
        }
    }
    panic!("no pick of {id}");
}

#[test]
fn picks_in_flight_outcomes_and_available_destinations_are_counted_exactly() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let engine = Engine::from_json(
            r#"{"Clusters": {"shop": {"LoadBalancingPolicy": "RoundRobin", "Destinations": {
                "a": { "Address": "http://127.0.0.1:8001/" },
                "b": { "Address": "http://127.0.0.1:8002/" },
                "c": { "Address": "http://127.0.0.1:8003/" } } } } }"#,
        )
        .unwrap();
        // Six picks, round robin: two each; then two kept in flight (a, then b).
        for _ in 0..6 {
            drop(engine.pick_endpoint("shop").unwrap());
        }
        let kept = [
            engine.pick_endpoint("shop").unwrap(),
            engine.pick_endpoint("shop").unwrap(),
        ];
        assert_eq!(kept[0].destination().id(), "a");
        assert_eq!(kept[1].destination().id(), "b");
        let seen = Seen::take(&snapshotter);
        let shop = (CLUSTER, "shop");
        assert_eq!(seen.counter(PICKS, &[shop]), 8);
        assert_eq!(seen.counter(PICKS, &[shop, (DESTINATION, "a")]), 3);
        assert_eq!(seen.counter(PICKS, &[shop, (DESTINATION, "b")]), 3);
        assert_eq!(seen.counter(PICKS, &[shop, (DESTINATION, "c")]), 2);
        assert_eq!(seen.gauge(REQUESTS_IN_FLIGHT, &[shop]), 2.0);
        assert_eq!(
            seen.gauge(REQUESTS_IN_FLIGHT, &[shop, (DESTINATION, "c")]),
            0.0
        );
        assert_eq!(seen.gauge(DESTINATIONS_AVAILABLE, &[shop]), 3.0);
        assert_eq!(
            seen.label_sets(PICKS, &[(DESTINATION, "a")]),
            vec![labels(&[shop, (DESTINATION, "a")])],
            "picks carry the cluster and the destination, nothing else"
        );

        use RequestOutcome::*;
        for outcome in [
            Success,
            Success,
            Status(200),
            Status(204),
            Status(503),
            Status(404),
            Status(302),
            Status(101),
            Status(700),
            TransportFailure,
            Cancelled,
        ] {
            kept[0].report(outcome);
        }
        drop(kept);
        let seen = Seen::take(&snapshotter);
        let outcomes = |kind| seen.counter(OUTCOMES, &[shop, (OUTCOME, kind)]);
        assert_eq!(outcomes("success"), 2);
        assert_eq!(outcomes("status_2xx"), 2);
        assert_eq!(outcomes("status_5xx"), 1);
        assert_eq!(outcomes("status_4xx"), 1);
        assert_eq!(outcomes("status_3xx"), 1);
        assert_eq!(outcomes("status_1xx"), 1);
        assert_eq!(outcomes("status_other"), 1);
        assert_eq!(outcomes("transport_failure"), 1);
        assert_eq!(outcomes("cancelled"), 1);
        assert_eq!(seen.counter(OUTCOMES, &[]), 11);
        assert_eq!(
            seen.counter(PICKS, &[]),
            0,
            "no pick since the last snapshot"
        );
        // The snapshot set the gauges to 0; dropping both handles took 2 off since.
        assert_eq!(seen.gauge(REQUESTS_IN_FLIGHT, &[shop]), -2.0);
        assert_eq!(seen.counter(HEALTH_TRANSITIONS, &[]), 0, "no health checks");
        assert_eq!(seen.counter(EJECTIONS, &[]), 0);

        // The cluster leaves the configuration: nothing available any more.
        engine.load_json(r#"{"Clusters": {}}"#).unwrap();
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.gauge(DESTINATIONS_AVAILABLE, &[shop]), 0.0);
    });
}

#[test]
fn an_ejection_its_reactivation_and_active_transitions_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let config = Config::new()
            .health_policy_options(HealthPolicyOptions {
                minimal_total_count_threshold: 1,
                ..HealthPolicyOptions::default()
            })
            .cluster(
                ClusterConfig::new("eject")
                    .passive(PassiveHealthCheckConfig::enabled())
                    .available_destinations_policy("HealthyAndUnknown")
                    .metadata("TransportFailureRateHealthPolicy.RateLimit", "0.5")
                    .destination(DestinationConfig::new("a", "http://127.0.0.1:8001/"))
                    .destination(DestinationConfig::new("b", "http://127.0.0.1:8002/")),
            )
            .cluster(
                ClusterConfig::new("probed")
                    .active(ActiveHealthCheckConfig::enabled())
                    .destination(DestinationConfig::new("p", "http://127.0.0.1:8003/")),
            );
        let (engine, clock) = manual_engine(config);
        let eject = (CLUSTER, "eject");
        let passive = (PART, "passive");
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.gauge(DESTINATIONS_AVAILABLE, &[eject]), 2.0);

        // One transport failure of one request: 1/1 >= 0.5, `a` is ejected (Unknown -> Unhealthy).
        pick_id(&engine, "eject", "a").report(RequestOutcome::TransportFailure);
        let seen = Seen::take(&snapshotter);
        assert_eq!(
            seen.counter(HEALTH_TRANSITIONS, &[eject, passive, (TO, "unhealthy")]),
            1
        );
        assert_eq!(seen.counter(HEALTH_TRANSITIONS, &[eject]), 1);
        assert_eq!(seen.counter(EJECTIONS, &[eject, (DESTINATION, "a")]), 1);
        assert_eq!(seen.counter(EJECTIONS, &[]), 1);
        assert_eq!(seen.gauge(DESTINATIONS_AVAILABLE, &[eject]), 1.0);
        assert_eq!(
            seen.counter(OUTCOMES, &[eject, (OUTCOME, "transport_failure")]),
            1
        );

        // Its reactivation: Unhealthy -> Unknown, available again; no new ejection.
        let due = engine.next_timer_due().expect("a reactivation is due");
        clock.set(due);
        engine.fire_due_timers();
        let seen = Seen::take(&snapshotter);
        assert_eq!(
            seen.counter(HEALTH_TRANSITIONS, &[eject, passive, (TO, "unknown")]),
            1
        );
        assert_eq!(seen.counter(HEALTH_TRANSITIONS, &[]), 1);
        assert_eq!(seen.counter(EJECTIONS, &[]), 0);
        assert_eq!(seen.gauge(DESTINATIONS_AVAILABLE, &[eject]), 2.0);

        // Active checks: a success (Unknown -> Healthy), then two failures (-> Unhealthy).
        let probed = (CLUSTER, "probed");
        let active = (PART, "active");
        engine
            .report_probe_round("probed", &[ProbeResult::status("p", 200)])
            .unwrap();
        for _ in 0..2 {
            engine
                .report_probe_round("probed", &[ProbeResult::status("p", 500)])
                .unwrap();
        }
        let seen = Seen::take(&snapshotter);
        assert_eq!(
            seen.counter(HEALTH_TRANSITIONS, &[probed, active, (TO, "healthy")]),
            1
        );
        assert_eq!(
            seen.counter(HEALTH_TRANSITIONS, &[probed, active, (TO, "unhealthy")]),
            1
        );
        assert_eq!(seen.counter(HEALTH_TRANSITIONS, &[]), 2);
        assert_eq!(
            seen.counter(EJECTIONS, &[]),
            0,
            "active checks do not eject"
        );
    });
}

/// Each destination's latency estimate and reported utilization are gauges, set where the
/// sample and the report are taken in: the estimate as status shows it after every sample (a
/// slow answer raises it at once, a fast one pulls it down), the utilization as reported, even
/// before it counts. A request whose latency nobody took (a policy that does not read latency)
/// and a cluster that reads no reports leave them alone.
#[test]
fn latency_estimates_and_reported_utilization_are_gauges() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let config = Config::new()
            .cluster(
                ClusterConfig::new("ewma")
                    .load_balancing_policy("PeakEwma")
                    .destination(DestinationConfig::new("a", "http://127.0.0.1:8001/")),
            )
            .cluster(
                ClusterConfig::new("plain")
                    .load_balancing_policy("RoundRobin")
                    .load_signals(
                        LoadSignalsConfig::default()
                            .load_reports(LoadReportsConfig::default().enabled(false)),
                    )
                    .destination(DestinationConfig::new("b", "http://127.0.0.1:8002/")),
            );
        let (engine, clock) = manual_engine(config);
        let a = [(CLUSTER, "ewma"), (DESTINATION, "a")];
        let b = [(CLUSTER, "plain"), (DESTINATION, "b")];
        let status_latency = |engine: &Engine| {
            engine.status().clusters[0].destinations[0]
                .latency
                .expect("a sample was taken")
                .as_secs_f64()
        };
        let seen = Seen::take(&snapshotter);
        assert_eq!(
            seen.label_sets(DESTINATION_LATENCY, &[(DESTINATION, "a")]),
            vec![labels(&a)],
            "registered with the destination, labelled like its other series"
        );
        assert_eq!(seen.gauge(DESTINATION_LATENCY, &a), 0.0);
        assert_eq!(seen.gauge(DESTINATION_UTILIZATION, &a), 0.0);

        // A 40 ms answer: the estimate is 40 ms at once.
        let pick = engine.pick_endpoint("ewma").unwrap();
        clock.advance(Duration::from_millis(40));
        pick.report(RequestOutcome::Status(200));
        let seen = Seen::take(&snapshotter);
        let first = seen.gauge(DESTINATION_LATENCY, &a);
        assert!((first - 0.040).abs() < 1e-6, "{first}");
        assert_eq!(first, status_latency(&engine));

        // A 10 ms answer a second later pulls it down a little (decay 10 s).
        clock.advance(Duration::from_secs(1));
        let pick = engine.pick_endpoint("ewma").unwrap();
        clock.advance(Duration::from_millis(10));
        pick.report(RequestOutcome::Success);
        let seen = Seen::take(&snapshotter);
        let second = seen.gauge(DESTINATION_LATENCY, &a);
        assert!(second > 0.010 && second < first, "{second}");
        assert_eq!(second, status_latency(&engine));

        // Load reports: each sets the gauge, from the first (status counts it only after the
        // blackout); a malformed one sets nothing.
        pick.report_load("TEXT application_utilization=0.42, cpu_utilization=0.9");
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.gauge(DESTINATION_UTILIZATION, &a), 0.42);
        assert_eq!(
            engine.status().clusters[0].destinations[0].utilization,
            None
        );
        pick.report_load("TEXT cpu_utilization=0.7");
        pick.report_load("not a load report");
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.gauge(DESTINATION_UTILIZATION, &a), 0.7);
        pick.report_load("not a load report");
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.gauge(DESTINATION_UTILIZATION, &a), 0.0, "not set");
        drop(pick);

        // Round robin reads no latency, so nobody timed the request; this cluster reads no
        // load reports.
        let pick = engine.pick_endpoint("plain").unwrap();
        clock.advance(Duration::from_millis(25));
        pick.report_load("TEXT application_utilization=0.5");
        pick.report(RequestOutcome::Success);
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.gauge(DESTINATION_LATENCY, &b), 0.0);
        assert_eq!(seen.gauge(DESTINATION_UTILIZATION, &b), 0.0);
        assert_eq!(seen.counter(OUTCOMES, &[(CLUSTER, "plain")]), 1);
    });
}

fn ep(key: &str, port: u16) -> Endpoint {
    Endpoint::new(key, format!("http://127.0.0.1:{port}/").parse().unwrap())
}

#[test]
fn discovery_updates_and_held_changes_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let (engine, _clock) = manual_engine(Config::new().cluster(ClusterConfig::new("found")));
        let found = (CLUSTER, "found");
        let registry = (SOURCE, "registry");
        let publisher = engine
            .publisher("found", SourceSpec::new("registry"))
            .unwrap();
        publisher
            .publish(vec![ep("a", 8001), ep("b", 8002), ep("c", 8003)])
            .unwrap();
        publisher
            .publish(vec![
                ep("a", 8001),
                ep("b", 8002),
                ep("c", 8003),
                ep("d", 8004),
            ])
            .unwrap();
        // The same set again changes nothing: not an update.
        publisher
            .publish(vec![
                ep("a", 8001),
                ep("b", 8002),
                ep("c", 8003),
                ep("d", 8004),
            ])
            .unwrap();
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.counter(DISCOVERY_UPDATES, &[found, registry]), 2);
        assert_eq!(seen.counter(DISCOVERY_HELD, &[]), 0);
        assert_eq!(seen.gauge(DESTINATIONS_AVAILABLE, &[found]), 4.0);

        // Emptying: held. Then most of them gone: a new held change. Seen again: still held.
        publisher.publish(Vec::new()).unwrap();
        publisher.publish(vec![ep("a", 8001)]).unwrap();
        publisher.publish(vec![ep("a", 8001)]).unwrap();
        let seen = Seen::take(&snapshotter);
        assert_eq!(
            seen.counter(DISCOVERY_HELD, &[found, registry, (REASON, "emptying")]),
            1
        );
        assert_eq!(
            seen.counter(DISCOVERY_HELD, &[found, registry, (REASON, "mass_removal")]),
            1
        );
        assert_eq!(seen.counter(DISCOVERY_HELD, &[]), 2);
        assert_eq!(seen.counter(DISCOVERY_UPDATES, &[]), 0, "held, not applied");

        // Forced: applied, one update; and a set from the application's own code.
        assert!(publisher.force_held().unwrap());
        engine
            .set_destinations("found", "mine", vec![ep("m", 8100)])
            .unwrap();
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.counter(DISCOVERY_UPDATES, &[found, registry]), 1);
        assert_eq!(
            seen.counter(DISCOVERY_UPDATES, &[found, (SOURCE, "mine")]),
            1
        );
        assert_eq!(seen.counter(DISCOVERY_UPDATES, &[]), 2);
        assert_eq!(seen.counter(DISCOVERY_HELD, &[]), 0);
        assert_eq!(seen.gauge(DESTINATIONS_AVAILABLE, &[found]), 2.0);
    });
}

/// A cluster of `destinations` (id, base URL), all in tier 0, picked alphabetically.
fn alphabetical(id: &str, destinations: &[(&str, String)]) -> ClusterConfig {
    destinations.iter().fold(
        ClusterConfig::new(id).load_balancing_policy("FirstAlphabetical"),
        |c, (d, url)| c.destination(DestinationConfig::new(*d, url.as_str())),
    )
}

#[test]
fn retries_by_reason_and_every_attempt_duration_are_recorded() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    run_with(&recorder, || async {
        // One call, alphabetically: refused, 503, reset, hung past its attempt timeout, answered.
        let closed = ClosedPort::reserve();
        let unavailable = RawServer::start(Mode::Status(503)).await;
        let reset = RawServer::start(Mode::Reset).await;
        let hang = RawServer::start(Mode::Hang).await;
        let ok = EchoServer::start("ok").await;
        let engine = Engine::new(Config::new().cluster(alphabetical(
            "retried",
            &[
                ("a", closed.url()),
                ("b", unavailable.url()),
                ("c", reset.url()),
                ("d", hang.url()),
                ("e", ok.url()),
            ],
        )))
        .unwrap();
        let client = HealthAwareClient::builder(engine)
            .http(http_client())
            .retry_policy(RetryPolicy::default().max_attempts(5))
            .timeouts(Timeouts::default().attempt(Duration::from_millis(300)))
            .build()
            .unwrap();
        let response = client.get("retried", "/api").send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();

        let seen = Seen::take(&snapshotter);
        let retried = (CLUSTER, "retried");
        for reason in ["connect", "status", "transport", "timeout"] {
            assert_eq!(
                seen.counter(RETRIES, &[retried, (REASON, reason)]),
                1,
                "{reason}"
            );
        }
        assert_eq!(seen.counter(RETRIES, &[]), 4);
        assert_eq!(seen.counter(HEDGES, &[]), 0);
        assert_eq!(seen.counter(BUDGET_REFUSALS, &[]), 0);
        assert_eq!(seen.counter(PICKS, &[retried]), 5);
        for d in ["a", "b", "c", "d", "e"] {
            assert_eq!(seen.counter(PICKS, &[(DESTINATION, d)]), 1, "{d}");
        }
        assert_eq!(
            seen.counter(OUTCOMES, &[retried, (OUTCOME, "transport_failure")]),
            3
        );
        assert_eq!(
            seen.counter(OUTCOMES, &[retried, (OUTCOME, "status_5xx")]),
            1
        );
        assert_eq!(
            seen.counter(OUTCOMES, &[retried, (OUTCOME, "status_2xx")]),
            1
        );
        assert_eq!(seen.gauge(REQUESTS_IN_FLIGHT, &[retried]), 0.0);

        // One sample per attempt, each with its end.
        assert_eq!(seen.samples(ATTEMPT_DURATION, &[retried]), 5);
        let port = |url: String| {
            url.rsplit(':')
                .next()
                .unwrap()
                .trim_end_matches('/')
                .to_string()
        };
        let expect = |d: &str, url: String, end: &[(&str, &str)]| {
            let port = port(url);
            let mut set = vec![
                retried,
                (DESTINATION, d),
                (SERVER_ADDRESS, "127.0.0.1"),
                (SERVER_PORT, port.as_str()),
                (HTTP_REQUEST_METHOD, "GET"),
            ];
            set.extend_from_slice(end);
            labels(&set)
        };
        assert_eq!(
            seen.label_sets(ATTEMPT_DURATION, &[retried]),
            {
                let mut sets = vec![
                    expect("a", closed.url(), &[(ERROR_TYPE, "connect")]),
                    expect(
                        "b",
                        unavailable.url(),
                        &[(HTTP_RESPONSE_STATUS_CODE, "503"), (ERROR_TYPE, "503")],
                    ),
                    expect("c", reset.url(), &[(ERROR_TYPE, "transport")]),
                    expect("d", hang.url(), &[(ERROR_TYPE, "timeout")]),
                    expect("e", ok.url(), &[(HTTP_RESPONSE_STATUS_CODE, "200")]),
                ];
                sets.sort();
                sets
            },
            "one series per attempt's end, labelled as OpenTelemetry has it"
        );
        for d in ["a", "b", "c", "d", "e"] {
            assert_eq!(
                seen.samples(ATTEMPT_DURATION, &[(DESTINATION, d)]),
                1,
                "{d}"
            );
        }
        // The timed-out attempt lasted its whole timeout.
        let timed_out = seen
            .matching(ATTEMPT_DURATION, &[(DESTINATION, "d")])
            .find_map(|(_, _, v)| match v {
                DebugValue::Histogram(s) => s.first().map(|s| s.into_inner()),
                _ => None,
            })
            .unwrap();
        assert!(timed_out >= 0.3, "{timed_out}");

        // The same call again takes the same way: one more sample in each of the same series.
        let response = client.get("retried", "/api").send().await.unwrap();
        response.bytes().await.unwrap();
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.samples(ATTEMPT_DURATION, &[retried]), 5);
        assert_eq!(seen.label_sets(ATTEMPT_DURATION, &[retried]).len(), 5);
        assert_eq!(seen.counter(RETRIES, &[]), 4);
    });
}

#[test]
fn a_hedge_and_refusals_of_both_budgets_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    run_with(&recorder, || async {
        let hang = RawServer::start(Mode::Hang).await;
        let unavailable = RawServer::start(Mode::Status(503)).await;
        let ok = EchoServer::start("ok").await;
        let engine = Engine::new(
            Config::new()
                .cluster(alphabetical(
                    "hedged",
                    &[("a", hang.url()), ("b", ok.url())],
                ))
                .cluster(alphabetical(
                    "capped",
                    &[("a", hang.url()), ("b", ok.url())],
                ))
                .cluster(alphabetical(
                    "broke",
                    &[("a", unavailable.url()), ("b", ok.url())],
                )),
        )
        .unwrap();

        // `a` never answers: the call hedges on `b` after 20 ms, and `b` answers.
        let hedging = HealthAwareClient::builder(engine.clone())
            .http(http_client())
            .hedging(Hedging::after(Duration::from_millis(20)).max_share(1.0))
            .build()
            .unwrap();
        let response = hedging.get("hedged", "/api").send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        let seen = Seen::take(&snapshotter);
        let hedged = (CLUSTER, "hedged");
        assert_eq!(seen.counter(HEDGES, &[hedged]), 1);
        assert_eq!(seen.counter(RETRIES, &[]), 0, "a hedge is not a retry");
        assert_eq!(seen.counter(BUDGET_REFUSALS, &[]), 0);
        assert_eq!(seen.counter(PICKS, &[hedged]), 2);
        assert_eq!(
            seen.counter(OUTCOMES, &[hedged, (OUTCOME, "cancelled")]),
            1,
            "the attempt that lost"
        );
        // Only the answer is timed: the attempt that lost was cancelled.
        assert_eq!(seen.samples(ATTEMPT_DURATION, &[hedged]), 1);
        assert_eq!(
            seen.samples(
                ATTEMPT_DURATION,
                &[
                    hedged,
                    (DESTINATION, "b"),
                    (HTTP_RESPONSE_STATUS_CODE, "200")
                ]
            ),
            1
        );

        // No hedge share at all: the hedge is refused by the hedge cap, and the call waits for
        // `a` until its attempt timeout, then retries on `b`.
        let capped_client = HealthAwareClient::builder(engine.clone())
            .http(http_client())
            .hedging(Hedging::after(Duration::from_millis(20)).max_share(0.0))
            .timeouts(Timeouts::default().attempt(Duration::from_millis(200)))
            .build()
            .unwrap();
        let response = capped_client.get("capped", "/api").send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        let seen = Seen::take(&snapshotter);
        let capped = (CLUSTER, "capped");
        assert_eq!(
            seen.counter(BUDGET_REFUSALS, &[capped, (BUDGET, "hedge")]),
            1
        );
        assert_eq!(seen.counter(BUDGET_REFUSALS, &[]), 1);
        assert_eq!(seen.counter(HEDGES, &[]), 0);
        assert_eq!(seen.counter(RETRIES, &[capped, (REASON, "timeout")]), 1);
        assert_eq!(seen.samples(ATTEMPT_DURATION, &[capped]), 2);
        assert_eq!(
            seen.samples(
                ATTEMPT_DURATION,
                &[capped, (DESTINATION, "a"), (ERROR_TYPE, "timeout")]
            ),
            1
        );

        // A retry budget that holds nothing: the retry after the 503 is refused and the caller
        // gets the 503, timed once.
        let broke_client = HealthAwareClient::builder(engine)
            .http(http_client())
            .retry_policy(
                RetryPolicy::default()
                    .retry_ratio(0.0)
                    .min_retries_per_second(0),
            )
            .build()
            .unwrap();
        let response = broke_client.get("broke", "/api").send().await.unwrap();
        assert_eq!(response.status(), 503);
        response.bytes().await.unwrap();
        let seen = Seen::take(&snapshotter);
        let broke = (CLUSTER, "broke");
        assert_eq!(
            seen.counter(BUDGET_REFUSALS, &[broke, (BUDGET, "retry")]),
            1
        );
        assert_eq!(seen.counter(BUDGET_REFUSALS, &[]), 1);
        assert_eq!(seen.counter(RETRIES, &[]), 0);
        assert_eq!(seen.counter(PICKS, &[broke, (DESTINATION, "a")]), 1);
        assert_eq!(
            seen.counter(PICKS, &[broke, (DESTINATION, "b")]),
            1,
            "picked, then refused by the budget"
        );
        assert_eq!(seen.samples(ATTEMPT_DURATION, &[broke]), 1);
        assert_eq!(
            seen.samples(
                ATTEMPT_DURATION,
                &[broke, (DESTINATION, "a"), (ERROR_TYPE, "503")]
            ),
            1
        );
    });
}

#[test]
fn describe_gives_every_metric_its_unit() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        describe();
        let engine = Engine::from_json(
            r#"{"Clusters": {"c": {"Destinations": {"d": {"Address": "http://127.0.0.1:1/"}}}}}"#,
        )
        .unwrap();
        drop(engine.pick_endpoint("c").unwrap());
    });
    let units: Vec<(String, Option<metrics::Unit>)> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == PICKS)
        .map(|(key, unit, desc, _)| {
            assert!(desc.is_some());
            (key.key().name().to_string(), unit)
        })
        .collect();
    assert_eq!(units, vec![(PICKS.to_string(), Some(metrics::Unit::Count))]);
}

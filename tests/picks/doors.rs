//! The doors a load-balancing policy picks through: per destination its requests in flight,
//! its latency estimate and its weight, the request's affinity key, and the signals it
//! declares. Built-in policies use exactly these; the policies here are custom ones.

use std::sync::Arc;
use std::time::Duration;

use healthpick::selection::{Group, LoadBalancingPolicy, Pick, PickView, Picker, Signals};
use healthpick::{Engine, ManualClock, RequestOutcome};

/// With a key, the destination the key's first byte names; without, the lowest latency
/// estimate (the first of equals).
struct KeyOrFastest;

struct KeyOrFastestPicker;

impl Pick for KeyOrFastestPicker {
    fn pick(&self, view: &PickView<'_>) -> usize {
        if let Some(key) = view.key() {
            return usize::from(key.first().copied().unwrap_or(0)) % view.len();
        }
        for i in 0..view.len() {
            // The estimate in seconds is the same estimate.
            let (secs, latency) = (view.latency_secs(i), view.latency(i).as_secs_f64());
            assert!((secs - latency).abs() < 1e-9, "{secs} vs {latency}");
        }
        (0..view.len())
            .min_by_key(|&i| view.latency(i))
            .unwrap_or(0)
    }
}

impl LoadBalancingPolicy for KeyOrFastest {
    fn prepare(&self, _group: &Group) -> Picker {
        Picker::custom(KeyOrFastestPicker)
    }

    fn signals(&self) -> Signals {
        Signals::LATENCY
    }
}

fn engine(clock: Arc<ManualClock>) -> Engine {
    let engine = Engine::builder()
        .clock(clock)
        .load_balancing_policy("KeyOrFastest", KeyOrFastest)
        .build();
    engine
        .load_json(
            r#"{"Clusters": {"c": {"LoadBalancingPolicy": "KeyOrFastest", "Destinations": {
                "a": {"Address": "http://127.0.0.1:1/"},
                "b": {"Address": "http://127.0.0.1:2/"},
                "c": {"Address": "http://127.0.0.1:3/"}}}}}"#,
        )
        .unwrap();
    engine
}

/// A policy that declares it reads latency gets each destination's estimate, fed by the
/// handles' own timing (pick to report, on the engine's clock), and the key of a keyed pick.
#[test]
fn a_policy_reads_latency_estimates_and_the_key_through_its_view() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine(clock.clone());
    // Every estimate starts at the default RTT: the first of equals.
    assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "a");

    // Requests to each destination, timed from pick to report: a 80 ms, b 20 ms, c 50 ms.
    for (id, took) in [("a", 80), ("b", 20), ("c", 50)] {
        let key = [b"abc".iter().position(|&k| k == id.as_bytes()[0]).unwrap() as u8];
        let pick = engine.pick_endpoint_for_key("c", key).unwrap();
        assert_eq!(pick.destination().id(), id, "the key names the destination");
        clock.advance(Duration::from_millis(took));
        pick.report(RequestOutcome::Status(200));
    }
    // Unkeyed picks go to the fastest.
    for _ in 0..10 {
        assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "b");
    }
    let status = engine.status();
    let estimate = |id: &str| {
        status.clusters[0]
            .destination(id)
            .unwrap()
            .latency
            .map(|l| (l.as_secs_f64() * 1000.0).round() as u64)
    };
    assert_eq!(
        (estimate("a"), estimate("b"), estimate("c")),
        (Some(80), Some(20), Some(50))
    );

    // `b` turns slow: its next sample replaces the estimate at once (a peak), so `c` leads.
    let pick = engine.pick_endpoint("c").unwrap();
    clock.advance(Duration::from_millis(300));
    pick.report(RequestOutcome::TransportFailure);
    assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "c");
}

/// A handle is timed only where the cluster's policy reads latency: under a policy that does
/// not, a report leaves the estimate alone (and the pick never read the clock).
#[test]
fn only_a_policy_that_reads_latency_times_its_handles() {
    let clock = Arc::new(ManualClock::new());
    let engine = Engine::builder().clock(clock.clone()).build();
    engine
        .load_json(
            r#"{"Clusters": {"c": {"LoadBalancingPolicy": "RoundRobin", "Destinations": {
                "a": {"Address": "http://127.0.0.1:1/"},
                "b": {"Address": "http://127.0.0.1:2/"}}}}}"#,
        )
        .unwrap();
    let pick = engine.pick_endpoint("c").unwrap();
    clock.advance(Duration::from_millis(40));
    pick.report(RequestOutcome::Status(200));
    let status = engine.status();
    assert!(status.clusters[0]
        .destinations
        .iter()
        .all(|d| d.latency.is_none()));
}

/// Weights reach the prepared picker and the view alike.
#[test]
fn a_policy_sees_each_destinations_weight() {
    struct Heaviest;
    impl LoadBalancingPolicy for Heaviest {
        fn prepare(&self, group: &Group) -> Picker {
            let weights = group.weights().map(<[f64]>::to_vec);
            Picker::custom(move |view: &PickView<'_>| {
                let best = (0..view.len())
                    .max_by(|&a, &b| view.weight(a).total_cmp(&view.weight(b)))
                    .unwrap();
                assert_eq!(weights.as_ref().map(|w| w[best]), Some(view.weight(best)));
                best
            })
        }
        fn signals(&self) -> Signals {
            Signals::NONE
        }
    }
    let engine = Engine::builder()
        .load_balancing_policy("Heaviest", Heaviest)
        .build();
    engine
        .load_json(
            r#"{"Clusters": {"c": {"LoadBalancingPolicy": "Heaviest", "Destinations": {
                "a": {"Address": "http://127.0.0.1:1/", "Metadata": {"Weight": "1"}},
                "b": {"Address": "http://127.0.0.1:2/", "Metadata": {"Weight": "5"}},
                "c": {"Address": "http://127.0.0.1:3/", "Metadata": {"Weight": "2"}}}}}}"#,
        )
        .unwrap();
    assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "b");
}

/// In-flight counts through the view are exact whichever way the cluster counts: shared (the
/// policy declares it reads them) or per thread (it does not, and the view adds them up).
#[test]
fn a_policy_reads_exact_in_flight_counts_either_way() {
    struct Least(Signals);
    impl LoadBalancingPolicy for Least {
        fn prepare(&self, _group: &Group) -> Picker {
            Picker::custom(|view: &PickView<'_>| {
                (0..view.len()).min_by_key(|&i| view.in_flight(i)).unwrap()
            })
        }
        fn signals(&self) -> Signals {
            self.0
        }
    }
    for signals in [Signals::IN_FLIGHT, Signals::NONE] {
        let engine = Engine::builder()
            .load_balancing_policy("Least", Least(signals))
            .build();
        engine
            .load_json(
                r#"{"Clusters": {"c": {"LoadBalancingPolicy": "Least", "Destinations": {
                    "a": {"Address": "http://127.0.0.1:1/"},
                    "b": {"Address": "http://127.0.0.1:2/"},
                    "c": {"Address": "http://127.0.0.1:3/"}}}}}"#,
            )
            .unwrap();
        // Held on this thread and on another: each pick goes to the least loaded.
        let mine: Vec<_> = (0..2).map(|_| engine.pick_endpoint("c").unwrap()).collect();
        let theirs = std::thread::scope(|s| {
            s.spawn(|| engine.pick_endpoint("c").unwrap())
                .join()
                .unwrap()
        });
        let ids: Vec<&str> = mine
            .iter()
            .chain([&theirs])
            .map(|h| h.destination().id())
            .collect();
        assert_eq!(ids, ["a", "b", "c"], "{signals:?}");
        let next = engine.pick_endpoint("c").unwrap();
        assert_eq!(next.destination().id(), "a", "{signals:?}");
        drop((mine, theirs, next));
        assert!(engine.status().clusters[0]
            .destinations
            .iter()
            .all(|d| d.in_flight == 0));
    }
}

//! Best-endpoint selection: health classes, tiers, and the exact algorithms of the
//! load-balancing policies.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use healthpick::config::{ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig};
use healthpick::selection::{Group, LoadBalancingPolicy, PickView, Picker};
use healthpick::{Engine, HealthClass, PickError, ProbeResult, ReportedHealth};

/// A cluster `c` with active checks (threshold 1) and destinations `(id, tier)`.
fn cluster(policy: &str, dests: &[(&str, u32)]) -> Engine {
    let mut c = ClusterConfig::new("c")
        .load_balancing_policy(policy)
        .active(ActiveHealthCheckConfig::enabled())
        .metadata("ConsecutiveFailuresHealthPolicy.Threshold", "1");
    for (i, (id, tier)) in dests.iter().enumerate() {
        c = c.destination(
            DestinationConfig::new(*id, format!("http://127.0.0.1:{}/", 30000 + i)).priority(*tier),
        );
    }
    Engine::builder()
        .seed(3)
        .build_with(Config::new().cluster(c))
        .unwrap()
}

fn pick_id(engine: &Engine) -> String {
    engine
        .pick_endpoint("c")
        .unwrap()
        .destination()
        .id()
        .to_string()
}

fn counts(engine: &Engine, n: usize) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for _ in 0..n {
        *m.entry(pick_id(engine)).or_default() += 1;
    }
    m
}

fn probe(engine: &Engine, results: &[ProbeResult]) {
    engine.report_probe_round("c", results).unwrap();
}

/// The built-in policies, those that count in shared counts and those that count per thread.
const COUNTING_POLICIES: [&str; 5] = [
    "RoundRobin",
    "PowerOfTwoChoices",
    "Random",
    "LeastRequests",
    "FirstAlphabetical",
];

/// Cluster `c` under `policy` with destinations `d0000`, `d0001`, ... on ports from 30000.
fn numbered(policy: &str, n: u16) -> ClusterConfig {
    (0..n).fold(
        ClusterConfig::new("c").load_balancing_policy(policy),
        |c, i| {
            c.destination(DestinationConfig::new(
                format!("d{i:04}"),
                format!("http://127.0.0.1:{}/", 30000 + i),
            ))
        },
    )
}

/// How many of `handles` each destination holds, by id.
fn held_by_id(handles: &[healthpick::PickHandle]) -> HashMap<&str, usize> {
    let mut held = HashMap::new();
    for h in handles {
        *held.entry(h.destination().id()).or_default() += 1;
    }
    held
}

/// Every destination's count in the status view is what `held` says it holds (0 if absent).
fn assert_counts(engine: &Engine, held: &HashMap<&str, usize>, case: &str) {
    for d in &engine.status().clusters[0].destinations {
        let want = held.get(d.id.as_str()).copied().unwrap_or(0);
        assert_eq!(d.in_flight, want, "{case}: {}", d.id);
    }
}

#[test]
fn lowest_tier_first_then_failover_to_the_next_tier() {
    let engine = cluster("Random", &[("local-1", 0), ("local-2", 0), ("remote-1", 1)]);
    let c = counts(&engine, 300);
    assert_eq!(
        c.get("remote-1"),
        None,
        "remote gets nothing while local is usable"
    );
    assert!(c["local-1"] > 100 && c["local-2"] > 100, "{c:?}");

    probe(&engine, &[ProbeResult::status("local-1", 500)]);
    assert!(counts(&engine, 50).keys().all(|k| k == "local-2"));

    probe(&engine, &[ProbeResult::status("local-2", 500)]);
    assert!(counts(&engine, 50).keys().all(|k| k == "remote-1"));

    probe(&engine, &[ProbeResult::status("local-1", 200)]);
    assert!(
        counts(&engine, 50).keys().all(|k| k == "local-1"),
        "traffic returns to tier 0"
    );
}

#[test]
fn more_than_two_tiers() {
    let engine = cluster("Random", &[("zone", 0), ("region", 1), ("far", 2)]);
    assert_eq!(pick_id(&engine), "zone");
    probe(&engine, &[ProbeResult::status("zone", 500)]);
    assert_eq!(pick_id(&engine), "region");
    probe(&engine, &[ProbeResult::status("region", 500)]);
    assert_eq!(pick_id(&engine), "far");
}

#[test]
fn degraded_ranks_below_healthy_even_across_tiers() {
    let engine = cluster("Random", &[("local", 0), ("remote", 1)]);
    probe(
        &engine,
        &[
            ProbeResult::status("local", 200).with_payload(ReportedHealth::Degraded),
            ProbeResult::status("remote", 200),
        ],
    );
    // Class comes before tier: a healthy remote beats a degraded local.
    assert!(counts(&engine, 20).keys().all(|k| k == "remote"));
    let best = engine.best_endpoints("c").unwrap();
    assert_eq!(best.status, HealthClass::Healthy);

    probe(
        &engine,
        &[ProbeResult::status("remote", 200).with_payload(ReportedHealth::Degraded)],
    );
    let best = engine.best_endpoints("c").unwrap();
    assert_eq!(best.status, HealthClass::Degraded);
    assert_eq!(best.destinations.len(), 1);
    assert_eq!(
        best.destinations[0].id(),
        "local",
        "both degraded: lowest tier"
    );
}

#[test]
fn unknown_ranks_with_healthy() {
    let engine = cluster("Random", &[("a", 0), ("b", 0)]);
    probe(&engine, &[ProbeResult::status("a", 200)]); // a Healthy, b Unknown
    let c = counts(&engine, 200);
    assert!(c["a"] > 50 && c["b"] > 50, "{c:?}");
    assert_eq!(
        engine.best_endpoints("c").unwrap().status,
        HealthClass::Healthy
    );
}

#[test]
fn round_robin_counter_starts_at_zero_and_advances_only_when_consulted() {
    let engine = cluster("RoundRobin", &[("a", 0), ("b", 0), ("c", 0), ("z", 1)]);
    probe(
        &engine,
        &[ProbeResult::status("b", 500), ProbeResult::status("c", 500)],
    );
    // Group of one: the policy is not consulted, the counter stays at 0.
    for _ in 0..5 {
        assert_eq!(pick_id(&engine), "a");
    }
    probe(
        &engine,
        &[ProbeResult::status("b", 200), ProbeResult::status("c", 200)],
    );
    let seq: Vec<String> = (0..7).map(|_| pick_id(&engine)).collect();
    assert_eq!(seq, ["a", "b", "c", "a", "b", "c", "a"]);
}

#[test]
fn least_requests_picks_the_first_strictly_smallest() {
    let engine = cluster("LeastRequests", &[("a", 0), ("b", 0), ("c", 0)]);
    let h1 = engine.pick_endpoint("c").unwrap(); // all 0 -> first: a
    assert_eq!(h1.destination().id(), "a");
    let h2 = engine.pick_endpoint("c").unwrap(); // a=1 -> b
    assert_eq!(h2.destination().id(), "b");
    let h3 = engine.pick_endpoint("c").unwrap(); // a=1,b=1 -> c
    assert_eq!(h3.destination().id(), "c");
    let h4 = engine.pick_endpoint("c").unwrap(); // all 1 -> a
    assert_eq!(h4.destination().id(), "a");
    drop(h2); // b=0
    assert_eq!(pick_id(&engine), "b");
    drop((h1, h3, h4));
}

#[test]
fn first_alphabetical_compares_ids_case_insensitively() {
    let engine = cluster(
        "firstalphabetical",
        &[("beta", 0), ("Alpha", 0), ("gamma", 0)],
    );
    for _ in 0..5 {
        assert_eq!(pick_id(&engine), "Alpha");
    }
}

#[test]
fn random_is_uniform() {
    let engine = cluster("Random", &[("a", 0), ("b", 0), ("c", 0), ("d", 0)]);
    let c = counts(&engine, 8000);
    for id in ["a", "b", "c", "d"] {
        let n = c[id];
        assert!((1700..2300).contains(&n), "{id}: {n} of 8000 ({c:?})");
    }
}

#[test]
fn power_of_two_never_picks_a_strictly_busier_destination_of_two() {
    let engine = cluster("PowerOfTwoChoices", &[("a", 0), ("b", 0)]);
    let _busy = engine.pick_endpoint("c").unwrap();
    let busy_id = _busy.destination().id().to_string();
    for _ in 0..200 {
        let p = engine.pick_endpoint("c").unwrap();
        assert_ne!(p.destination().id(), busy_id);
    }
}

#[test]
fn power_of_two_never_picks_the_one_busier_destination_among_four() {
    let engine = cluster(
        "PowerOfTwoChoices",
        &[("a", 0), ("b", 0), ("c", 0), ("d", 0)],
    );
    let busy = engine.pick_endpoint("c").unwrap();
    // Whatever pair is drawn, a pair containing the busy one has a strictly less busy partner.
    for _ in 0..400 {
        let p = engine.pick_endpoint("c").unwrap();
        assert_ne!(p.destination().id(), busy.destination().id());
    }
    // Without load, all four get picks.
    drop(busy);
    assert_eq!(counts(&engine, 400).len(), 4);
}

#[test]
fn in_flight_counts_from_pick_until_drop() {
    let engine = cluster("FirstAlphabetical", &[("a", 0), ("b", 0)]);
    let h1 = engine.pick_endpoint("c").unwrap();
    let h2 = engine.pick_endpoint("c").unwrap();
    assert_eq!(h1.destination().in_flight(), 2);
    assert_eq!(
        engine.status().clusters[0]
            .destination("a")
            .unwrap()
            .in_flight,
        2
    );
    drop(h1);
    assert_eq!(h2.destination().in_flight(), 1);
    drop(h2);
    assert_eq!(
        engine.status().clusters[0]
            .destination("a")
            .unwrap()
            .in_flight,
        0
    );
}

#[test]
fn seeded_engines_pick_the_same_sequence() {
    let a = cluster("Random", &[("a", 0), ("b", 0), ("c", 0)]);
    let b = cluster("Random", &[("a", 0), ("b", 0), ("c", 0)]);
    let sa: Vec<String> = (0..50).map(|_| pick_id(&a)).collect();
    let sb: Vec<String> = (0..50).map(|_| pick_id(&b)).collect();
    assert_eq!(sa, sb);
}

/// Counts its picks; returns index 7 to show out-of-range answers are wrapped, not trusted.
struct Counting(Arc<AtomicUsize>);
impl LoadBalancingPolicy for Counting {
    fn prepare(&self, _group: &Group) -> Picker {
        let calls = self.0.clone();
        Picker::custom(move |_: &PickView<'_>| {
            calls.fetch_add(1, Ordering::SeqCst);
            7
        })
    }
}

#[test]
fn a_single_destination_skips_the_policy_and_bad_indices_are_wrapped() {
    let calls = Arc::new(AtomicUsize::new(0));
    let engine = Engine::builder()
        .load_balancing_policy("Counting", Counting(calls.clone()))
        .build_with(
            Config::new().cluster(
                ClusterConfig::new("c")
                    .load_balancing_policy("counting")
                    .destination(DestinationConfig::new("only", "http://127.0.0.1:1/")),
            ),
        )
        .unwrap();
    assert_eq!(pick_id(&engine), "only");
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    engine
        .apply_config(
            Config::new().cluster(
                ClusterConfig::new("c")
                    .load_balancing_policy("Counting")
                    .destination(DestinationConfig::new("a", "http://127.0.0.1:1/"))
                    .destination(DestinationConfig::new("b", "http://127.0.0.1:2/")),
            ),
        )
        .unwrap();
    assert_eq!(pick_id(&engine), "b", "7 mod 2 = 1");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn unknown_cluster_and_empty_cluster_errors() {
    let engine = Engine::new(Config::new().cluster(ClusterConfig::new("empty"))).unwrap();
    assert_eq!(
        engine.pick_endpoint("nope").unwrap_err(),
        PickError::UnknownCluster {
            cluster: "nope".into()
        }
    );
    assert!(!engine
        .pick_endpoint("nope")
        .unwrap_err()
        .is_no_available_destinations());
    let err = engine.pick_endpoint("empty").unwrap_err();
    assert!(matches!(err, PickError::NoAvailableDestinations { .. }));
    assert!(err.is_no_available_destinations());
    assert_eq!(err.cluster(), "empty");
    assert_eq!(
        err.to_string(),
        "no available destinations in cluster `empty`"
    );
}

#[test]
fn cluster_ids_are_case_insensitive_on_the_pick_path() {
    let engine = Engine::new(
        Config::new().cluster(
            ClusterConfig::new("Payments")
                .destination(DestinationConfig::new("a", "http://127.0.0.1:1/")),
        ),
    )
    .unwrap();
    for id in ["Payments", "payments", "PAYMENTS", "pAyMeNtS"] {
        assert_eq!(engine.pick_endpoint(id).unwrap().destination().id(), "a");
    }
    let long = "P".repeat(100);
    assert!(engine.pick_endpoint(&long).is_err());
}

#[test]
fn retries_move_to_the_next_best_of_the_same_tier_then_the_next_tier() {
    let engine = cluster(
        "FirstAlphabetical",
        &[("a", 0), ("b", 0), ("r", 1), ("s", 2)],
    );
    let next = |tried: &[&str]| {
        engine
            .pick_endpoint_excluding("c", tried)
            .map(|p| p.destination().id().to_string())
    };
    assert_eq!(next(&[]).unwrap(), "a");
    assert_eq!(next(&["a"]).unwrap(), "b", "same tier first");
    assert_eq!(
        next(&["A", "b"]).unwrap(),
        "r",
        "then the next tier (ids case-insensitive)"
    );
    assert_eq!(next(&["a", "b", "r"]).unwrap(), "s");
    assert!(matches!(
        next(&["a", "b", "r", "s"]),
        Err(PickError::NoAvailableDestinations { .. })
    ));
    // Unavailable destinations are never retry targets.
    probe(&engine, &[ProbeResult::status("r", 500)]);
    assert_eq!(next(&["a", "b"]).unwrap(), "s");
}

/// RoundRobin counts on each thread (a pick writes nothing another thread reads): the first
/// thread that picks sees the exact sequence 0, 1, 2, ... across reloads; other threads go
/// round the group from starts of their own, so each spreads evenly over it, and none moves the
/// first thread's sequence.
#[test]
fn round_robin_counts_per_thread_and_keeps_the_single_thread_sequence() {
    let config = |n: usize| {
        let mut c = String::from(
            r#"{"Clusters": {"c": {"LoadBalancingPolicy": "RoundRobin", "Destinations": {"#,
        );
        for i in 0..n {
            if i > 0 {
                c.push(',');
            }
            c.push_str(&format!(
                r#""d{i}": {{"Address": "http://127.0.0.1:{}/"}}"#,
                1000 + i
            ));
        }
        c.push_str("}}}}");
        c
    };
    let engine = Engine::from_json(&config(4)).unwrap();
    let id = |e: &Engine| e.pick_endpoint("c").unwrap().destination().id().to_string();
    let seq: Vec<String> = (0..6).map(|_| id(&engine)).collect();
    assert_eq!(seq, ["d0", "d1", "d2", "d3", "d0", "d1"]);
    // A reload (same cluster) keeps this thread's place.
    engine.load_json(&config(4)).unwrap();
    assert_eq!(id(&engine), "d2");

    // Other threads: each covers the group evenly, round after round.
    let counts: Vec<std::collections::BTreeMap<String, usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let engine = &engine;
                s.spawn(move || {
                    let mut counts = std::collections::BTreeMap::new();
                    for _ in 0..400 {
                        *counts.entry(id(engine)).or_insert(0) += 1;
                    }
                    counts
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for counts in &counts {
        assert_eq!(counts.len(), 4);
        assert!(counts.values().all(|&c| c == 100), "{counts:?}");
    }
    // The main thread goes on with its own counter.
    assert_eq!(id(&engine), "d3");
}

/// A reload that adds or removes another cluster changes the cluster table; the thread's
/// round-robin counter for a cluster that stays is kept, so its sequence goes on.
#[test]
fn round_robin_goes_on_across_a_change_of_the_cluster_table() {
    let c = r#""c": {"LoadBalancingPolicy": "RoundRobin", "Destinations": {
        "d0": {"Address": "http://127.0.0.1:1000/"}, "d1": {"Address": "http://127.0.0.1:1001/"},
        "d2": {"Address": "http://127.0.0.1:1002/"}, "d3": {"Address": "http://127.0.0.1:1003/"}}}"#;
    let x = r#""x": {"Destinations": {"e": {"Address": "http://127.0.0.1:2000/"}}}"#;
    let engine = Engine::from_json(&format!(r#"{{"Clusters": {{{c}}}}}"#)).unwrap();
    let id = |e: &Engine| e.pick_endpoint("c").unwrap().destination().id().to_string();
    assert_eq!((id(&engine), id(&engine)), ("d0".into(), "d1".into()));
    engine
        .load_json(&format!(r#"{{"Clusters": {{{c}, {x}}}}}"#))
        .unwrap();
    assert_eq!(engine.pick_endpoint("x").unwrap().destination().id(), "e");
    assert_eq!(id(&engine), "d2");
    engine
        .load_json(&format!(r#"{{"Clusters": {{{c}}}}}"#))
        .unwrap();
    assert_eq!((id(&engine), id(&engine)), ("d3".into(), "d0".into()));
}

/// Suspect ranking: a destination whose latest probe failed, but which is below the
/// threshold (Healthy or Unknown for YARP), ranks with Degraded: it gets no picks while a
/// destination whose latest probe succeeded exists (in any tier), it is still used before
/// panic, and one successful probe puts it back.
#[test]
fn a_destination_whose_latest_probe_failed_ranks_with_degraded_until_it_succeeds_again() {
    let engine_with = |suspect_ranking: Option<&str>| {
        let mut c = ClusterConfig::new("c")
            .load_balancing_policy("Random")
            .active(ActiveHealthCheckConfig::enabled())
            .metadata("ConsecutiveFailuresHealthPolicy.Threshold", "2")
            .destination(DestinationConfig::new("a", "http://127.0.0.1:30001/"))
            .destination(DestinationConfig::new("b", "http://127.0.0.1:30002/"))
            .destination(DestinationConfig::new("r", "http://127.0.0.1:30003/").priority(1));
        if let Some(value) = suspect_ranking {
            c = c.metadata("HealthCheck.SuspectRanking", value);
        }
        Engine::builder()
            .seed(3)
            .build_with(Config::new().cluster(c))
            .unwrap()
    };
    let ok = |id: &str| ProbeResult::status(id, 200);
    let failed = |id: &str| ProbeResult::error(id, "connection refused");

    let engine = engine_with(None);
    probe(&engine, &[ok("a"), ok("b"), ok("r")]);
    probe(&engine, &[ok("a"), failed("b"), ok("r")]);
    let b = engine.status().clusters[0]
        .destination("b")
        .unwrap()
        .clone();
    assert_eq!(
        b.active,
        healthpick::HealthState::Healthy,
        "below the threshold"
    );
    assert_eq!(b.last_probe_succeeded, Some(false));
    assert!(counts(&engine, 100).keys().all(|k| k == "a"));

    // `a` ejected: the Healthy remote beats the suspect local (class before tier).
    probe(&engine, &[failed("a"), ok("r")]);
    probe(&engine, &[failed("a"), ok("r")]);
    assert!(counts(&engine, 50).keys().all(|k| k == "r"));
    // `r` fails once too: both remaining are suspects; the lower tier wins, before any panic.
    probe(&engine, &[failed("r")]);
    let best = engine.best_endpoints("c").unwrap();
    assert_eq!(best.status, HealthClass::Degraded);
    assert!(!best.panic);
    assert!(counts(&engine, 50).keys().all(|k| k == "b"));
    // One successful probe and `b` is back with the Healthy ones.
    probe(&engine, &[ok("b")]);
    assert_eq!(
        engine.best_endpoints("c").unwrap().status,
        HealthClass::Healthy
    );
    assert!(counts(&engine, 50).keys().all(|k| k == "b"));

    // Switched off (as YARP ranks): a failed probe below the threshold changes nothing.
    let engine = engine_with(Some("False"));
    probe(&engine, &[ok("a"), ok("b"), ok("r")]);
    probe(&engine, &[ok("a"), failed("b"), ok("r")]);
    let c = counts(&engine, 200);
    assert!(c["a"] > 50 && c["b"] > 50, "{c:?}");
}

/// Every pick counts its own destination in flight, whatever the group looks like: its
/// destinations' places side by side (every destination of one tier, in order: a run), or not
/// (the best tier's destinations interleaved with another tier's, or some missing), in small
/// and large groups (a cluster that grows past its first chunk: the next test), counted in the
/// shared counts (PowerOfTwoChoices, LeastRequests) or in the picking thread's own (RoundRobin,
/// Random, FirstAlphabetical). Each case holds one handle per destination of the best group,
/// then checks every destination's count, then drops them.
#[test]
fn in_flight_counts_land_on_the_picked_destination_in_any_group() {
    for policy in COUNTING_POLICIES {
        let none: &[u32] = &[];
        for (n, tiers, missing) in [
            (6, 1, none),
            (6, 2, none),
            (6, 1, &[2]),
            (1_100, 1, none),
            (1_100, 2, none),
            (2_100, 2, none),
            (1_100, 1, &[700]),
            (1_100, 1, &[0]),
            (1_100, 1, &[700, 701]),
            (1_100, 1, &[300, 700]),
        ] {
            let case = format!("{policy}, {n} destinations in {tiers} tiers, {missing:?} missing");
            let tier = |i: u32| if missing.contains(&i) { 1 } else { i % tiers };
            let dests: Vec<(String, u32)> = (0..n).map(|i| (format!("d{i}"), tier(i))).collect();
            let refs: Vec<(&str, u32)> = dests.iter().map(|(id, t)| (id.as_str(), *t)).collect();
            let engine = cluster(policy, &refs);
            let best = dests.iter().filter(|(_, t)| *t == 0).count();
            let handles: Vec<_> = (0..best)
                .map(|_| engine.pick_endpoint("c").unwrap())
                .collect();
            assert!(
                handles.iter().all(|h| h.destination().tier() == 0),
                "{case}"
            );
            let held = held_by_id(&handles);
            if policy == "RoundRobin" {
                assert_eq!(held.len(), best, "{case}: one handle per destination");
            }
            assert_counts(&engine, &held, &case);
            for h in &handles {
                assert_eq!(h.destination().in_flight(), held[h.destination().id()]);
            }
            drop(handles);
            assert_counts(
                &engine,
                &HashMap::new(),
                &format!("{case}, after the drops"),
            );
        }
    }
}

/// A cluster that grows past its first publication takes places beyond its first chunk of
/// counts (its chunks are as large as the first publication asked for: 1,024 places for 600
/// destinations, 2,048 for 1,100): every pick still counts on its own destination, under each
/// policy, and every count is back to zero after the drops.
#[test]
fn in_flight_counts_land_on_the_picked_destination_after_the_cluster_grows() {
    for policy in COUNTING_POLICIES {
        for (first, grown) in [(600, 2_100), (1_100, 4_500)] {
            let case = format!("{policy}, {first} destinations grown to {grown}");
            let engine = Engine::new(Config::new().cluster(numbered(policy, first))).unwrap();
            drop(engine.pick_endpoint("c").unwrap());
            engine
                .apply_config(Config::new().cluster(numbered(policy, grown)))
                .unwrap();
            let handles: Vec<_> = (0..grown)
                .map(|_| engine.pick_endpoint("c").unwrap())
                .collect();
            let held = held_by_id(&handles);
            if policy == "RoundRobin" || policy == "LeastRequests" {
                assert_eq!(held.len(), usize::from(grown), "{case}: one each");
            }
            assert_counts(&engine, &held, &case);
            drop(handles);
            assert_counts(
                &engine,
                &HashMap::new(),
                &format!("{case}, after the drops"),
            );
        }
    }
}

/// A cluster whose policy changes by reload counts right before and after: started with 200
/// destinations under PowerOfTwoChoices (shared counts) or RoundRobin (each thread's own),
/// grown to 300, its picks count on the picked destinations; switched to LeastRequests, each
/// pick goes to the first destination with the fewest in flight.
#[test]
fn least_requests_reads_counts_after_a_change_of_policy() {
    for first in ["PowerOfTwoChoices", "RoundRobin"] {
        least_requests_after(first);
    }
}

fn least_requests_after(first: &str) {
    let engine = Engine::new(Config::new().cluster(numbered(first, 200))).unwrap();
    engine
        .apply_config(Config::new().cluster(numbered(first, 300)))
        .unwrap();
    // Grown, the policy counts each pick on its own destination.
    let held: Vec<_> = (0..600)
        .map(|_| engine.pick_endpoint("c").unwrap())
        .collect();
    assert_counts(&engine, &held_by_id(&held), first);
    drop(held);
    engine
        .apply_config(Config::new().cluster(numbered("LeastRequests", 300)))
        .unwrap();
    let mut handles: Vec<_> = (0..300)
        .map(|_| engine.pick_endpoint("c").unwrap())
        .collect();
    let ids: Vec<&str> = handles.iter().map(|h| h.destination().id()).collect();
    let want: Vec<String> = (0..300).map(|i| format!("d{i:04}")).collect();
    assert_eq!(ids, want);
    // Every destination busy; free a later one, then an earlier one.
    drop(handles.remove(270));
    assert_eq!(pick_id(&engine), "d0270");
    drop(handles.remove(100));
    let again = engine.pick_endpoint("c").unwrap();
    assert_eq!(again.destination().id(), "d0100");
    assert_eq!(pick_id(&engine), "d0270");
    drop((handles, again));
}

/// PowerOfTwoChoices reads the counts of a group whose places do not run on (tier-0
/// destinations between tier-1 ones) where they are: with `b` busy, every pick of the two
/// tier-0 destinations goes to `d`.
#[test]
fn power_of_two_reads_the_counts_of_a_group_whose_places_do_not_run_on() {
    let engine = cluster(
        "PowerOfTwoChoices",
        &[("a", 1), ("b", 0), ("c", 1), ("d", 0)],
    );
    let busy = engine.pick_endpoint("c").unwrap();
    let idle = if busy.destination().id() == "b" {
        "d"
    } else {
        "b"
    };
    for _ in 0..50 {
        assert_eq!(pick_id(&engine), idle);
    }
}

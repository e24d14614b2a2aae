//! The destination-set seam (ARCHITECTURE.md "Seams"): a source
//! publishes the full set of its endpoints with `Engine::set_destinations`, and a whole-config
//! reload is the `config` source publishing through the same code. Identity is cluster, source
//! and key: a surviving key keeps health, policy counters, in-flight count and pending
//! reactivation across weight, metadata, Host and tier changes; a new address under the same key
//! starts over; a removed key gets no new picks while its requests in flight finish.

use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig, PassiveHealthCheckConfig,
};
use healthpick::{
    DestinationsError, Endpoint, Engine, HealthEventKind, HealthState, ManualClock, PickError,
    ProbeResult, RequestOutcome, CONFIG_SOURCE,
};
use url::Url;

const SOURCE: &str = "registry";

fn url(port: u16) -> Url {
    Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap()
}

/// An engine on a manual clock with one cluster `c`: active checks (threshold 2), passive checks
/// with a 30 s reactivation period, the given load balancer, and no configured destinations.
fn engine(policy: &str) -> (Engine, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let config = Config::new().cluster(
        ClusterConfig::new("c")
            .load_balancing_policy(policy)
            .active(ActiveHealthCheckConfig::enabled())
            .passive(
                PassiveHealthCheckConfig::enabled().reactivation_period(Duration::from_secs(30)),
            )
            .metadata("TransportFailureRateHealthPolicy.RateLimit", "0.5"),
    );
    let engine = Engine::builder()
        .clock(clock.clone())
        .seed(3)
        .build_with(config)
        .unwrap();
    (engine, clock)
}

fn status_of(engine: &Engine, id: &str) -> healthpick::DestinationStatus {
    engine.status().clusters[0]
        .destination(id)
        .unwrap_or_else(|| panic!("no destination {id}"))
        .clone()
}

fn ids(engine: &Engine) -> Vec<String> {
    engine.status().clusters[0]
        .destinations
        .iter()
        .map(|d| d.id.clone())
        .collect()
}

/// Ejects `id` passively: 10 transport failures (the minimal count) at a 0.5 limit.
fn eject_passively(engine: &Engine, id: &str) {
    for _ in 0..10 {
        engine
            .report_outcome("c", id, RequestOutcome::TransportFailure)
            .unwrap();
    }
    assert_eq!(status_of(engine, id).passive, HealthState::Unhealthy);
}

#[test]
fn a_surviving_key_keeps_health_counters_in_flight_and_reactivation_when_its_attributes_change() {
    let (engine, clock) = engine("LeastRequests");
    engine
        .set_destinations(
            "c",
            SOURCE,
            vec![Endpoint::new("a", url(1)), Endpoint::new("b", url(2))],
        )
        .unwrap();
    // `a`: one failed probe (threshold 2: still Unknown, counter 1); `b`: passively ejected, with
    // its reactivation due at 30 s; one request in flight to `a`.
    engine
        .report_probe_round("c", &[ProbeResult::status("a", 500)])
        .unwrap();
    eject_passively(&engine, "b");
    let due = engine.next_timer_due().expect("b's reactivation");
    let held = engine.pick_endpoint("c").unwrap();
    assert_eq!(held.destination().id(), "a", "b is excluded");

    // The source publishes both again with new weight, tier, metadata and Host.
    engine
        .set_destinations(
            "c",
            SOURCE,
            vec![
                Endpoint::new("a", url(1))
                    .weight(5)
                    .metadata("zone", "eu-1a")
                    .host("a.internal"),
                Endpoint::new("b", url(2)).tier(1),
            ],
        )
        .unwrap();
    let a = status_of(&engine, "a");
    assert_eq!(a.in_flight, 1, "the in-flight count survives");
    assert_eq!(a.active, HealthState::Unknown);
    assert!(!held.destination().is_removed());
    assert_eq!(
        held.destination().weight(),
        5.0,
        "the new attributes are in force"
    );
    assert_eq!(held.destination().attributes().host(), Some("a.internal"));
    assert_eq!(status_of(&engine, "b").tier, 1);
    assert_eq!(status_of(&engine, "b").passive, HealthState::Unhealthy);

    // The probe counter survived: one more failure is the second in a row.
    engine
        .report_probe_round("c", &[ProbeResult::status("a", 500)])
        .unwrap();
    assert_eq!(status_of(&engine, "a").active, HealthState::Unhealthy);

    // The pending reactivation survived and fires on time.
    assert_eq!(engine.next_timer_due(), Some(due));
    clock.set(due);
    assert_eq!(engine.fire_due_timers(), 1);
    assert_eq!(status_of(&engine, "b").passive, HealthState::Unknown);
    drop(held);
    assert_eq!(status_of(&engine, "a").in_flight, 0);
}

#[test]
fn a_new_address_under_the_same_key_is_a_new_instance_whose_health_starts_over() {
    let (engine, _) = engine("PowerOfTwoChoices");
    engine
        .set_destinations("c", SOURCE, vec![Endpoint::new("a", url(1))])
        .unwrap();
    engine
        .report_probe_round("c", &[ProbeResult::status("a", 500)])
        .unwrap();
    engine
        .report_probe_round("c", &[ProbeResult::status("a", 500)])
        .unwrap();
    eject_passively(&engine, "a");
    let old = engine.pick_endpoint("c").unwrap(); // panic: the only destination
    assert_eq!(old.destination().address(), &url(1));

    engine
        .set_destinations("c", SOURCE, vec![Endpoint::new("a", url(11))])
        .unwrap();
    let a = status_of(&engine, "a");
    assert_eq!(a.address, url(11).as_str());
    assert_eq!(
        (a.active, a.passive, a.in_flight),
        (HealthState::Unknown, HealthState::Unknown, 0),
        "health and in-flight count start over"
    );
    assert!(old.destination().is_removed());
    // The counter started over too: one failure (threshold 2) leaves it Unknown.
    engine
        .report_probe_round("c", &[ProbeResult::status("a", 500)])
        .unwrap();
    assert_eq!(status_of(&engine, "a").active, HealthState::Unknown);
    // The old instance's outcomes count for nothing.
    for _ in 0..20 {
        old.report(RequestOutcome::TransportFailure);
    }
    assert_eq!(status_of(&engine, "a").passive, HealthState::Unknown);
    let new = engine.pick_endpoint("c").unwrap();
    assert_eq!(new.destination().address(), &url(11));
}

#[test]
fn a_removed_key_gets_no_new_picks_while_its_requests_in_flight_finish() {
    let (engine, _) = engine("RoundRobin");
    engine
        .set_destinations(
            "c",
            SOURCE,
            vec![Endpoint::new("a", url(1)), Endpoint::new("b", url(2))],
        )
        .unwrap();
    let mut events = engine.subscribe();
    let held: Vec<_> = (0..4).map(|_| engine.pick_endpoint("c").unwrap()).collect();
    let held_b: Vec<_> = held
        .into_iter()
        .filter(|h| h.destination().id() == "b")
        .collect();
    assert_eq!(held_b.len(), 2, "round robin alternates");

    engine
        .set_destinations("c", SOURCE, vec![Endpoint::new("a", url(1))])
        .unwrap();
    assert_eq!(ids(&engine), ["a"]);
    for _ in 0..50 {
        assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "a");
    }
    assert!(matches!(
        engine.report_outcome("c", "b", RequestOutcome::Success),
        Err(PickError::UnknownDestination { .. })
    ));
    // The requests in flight finish: their outcomes change nothing.
    while events.try_recv().is_ok() {}
    for h in &held_b {
        assert!(h.destination().is_removed());
        for _ in 0..20 {
            h.report(RequestOutcome::TransportFailure);
        }
        assert_eq!(h.destination().in_flight(), 2);
    }
    assert!(
        events.try_recv().is_err(),
        "no event for a removed destination"
    );
    drop(held_b);
}

#[test]
fn a_config_reload_goes_through_the_same_rules_and_keeps_other_sources() {
    let (engine, _) = engine("FirstAlphabetical");
    let config = |address: &str, tier: u32| {
        Config::new().cluster(
            ClusterConfig::new("c")
                .load_balancing_policy("FirstAlphabetical")
                .active(ActiveHealthCheckConfig::enabled())
                .destination(DestinationConfig::new("static", address).priority(tier)),
        )
    };
    engine
        .apply_config(config("http://127.0.0.1:7/", 0))
        .unwrap();
    engine
        .set_destinations("c", SOURCE, vec![Endpoint::new("found", url(8))])
        .unwrap();
    assert_eq!(
        ids(&engine),
        ["static", "found"],
        "config first, then sources"
    );
    assert_eq!(status_of(&engine, "found").source, SOURCE);
    assert_eq!(status_of(&engine, "static").source, CONFIG_SOURCE);
    engine
        .report_probe_round(
            "c",
            &[
                ProbeResult::status("static", 200),
                ProbeResult::status("found", 200),
            ],
        )
        .unwrap();

    // A tier change in the config keeps health; the discovered destination stays.
    engine
        .apply_config(config("http://127.0.0.1:7/", 1))
        .unwrap();
    assert_eq!(ids(&engine), ["static", "found"]);
    assert_eq!(status_of(&engine, "static").active, HealthState::Healthy);
    assert_eq!(status_of(&engine, "found").active, HealthState::Healthy);
    assert_eq!(
        engine.pick_endpoint("c").unwrap().destination().id(),
        "found",
        "static moved to tier 1"
    );
    // An address change in the config starts over, as for any source.
    engine
        .apply_config(config("http://127.0.0.1:9/", 1))
        .unwrap();
    assert_eq!(status_of(&engine, "static").active, HealthState::Unknown);
    assert_eq!(status_of(&engine, "found").active, HealthState::Healthy);
}

#[test]
fn ids_stay_unique_when_two_sources_publish_the_same_key() {
    let (engine, _) = engine("PowerOfTwoChoices");
    engine
        .set_destinations("c", "first", vec![Endpoint::new("10.0.0.1:80", url(1))])
        .unwrap();
    engine
        .set_destinations("c", "second", vec![Endpoint::new("10.0.0.1:80", url(2))])
        .unwrap();
    assert_eq!(ids(&engine), ["10.0.0.1:80", "10.0.0.1:80@second"]);
    // Each source's key is its own: republishing `second` keeps its destination.
    engine
        .report_probe_round("c", &[ProbeResult::status("10.0.0.1:80@second", 200)])
        .unwrap();
    engine
        .set_destinations(
            "c",
            "second",
            vec![Endpoint::new("10.0.0.1:80", url(2)).weight(2)],
        )
        .unwrap();
    assert_eq!(
        status_of(&engine, "10.0.0.1:80@second").active,
        HealthState::Healthy
    );
    // An empty set removes the source's destinations.
    engine.set_destinations("c", "first", Vec::new()).unwrap();
    assert_eq!(ids(&engine), ["10.0.0.1:80@second"]);
}

#[test]
fn bad_sets_are_refused_whole_with_every_problem_named() {
    let (engine, _) = engine("PowerOfTwoChoices");
    engine
        .set_destinations("c", SOURCE, vec![Endpoint::new("a", url(1))])
        .unwrap();
    assert_eq!(
        engine.set_destinations("nope", SOURCE, Vec::new()),
        Err(DestinationsError::UnknownCluster {
            cluster: "nope".into()
        })
    );
    let err = engine
        .set_destinations(
            "c",
            SOURCE,
            vec![
                Endpoint::new("a", url(1)),
                Endpoint::new("A", url(2)),
                Endpoint::new("", url(3)),
                Endpoint::new("ftp", Url::parse("ftp://127.0.0.1/").unwrap()),
                Endpoint::new("heavy", url(4)).weight(f64::NAN),
            ],
        )
        .unwrap_err();
    let DestinationsError::Invalid { problems, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(problems.len(), 4, "{problems:?}");
    let text = err.to_string();
    for needle in [
        "`A` is given twice",
        "empty key",
        "ftp://127.0.0.1/",
        "weight NaN",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    assert!(engine
        .set_destinations("c", CONFIG_SOURCE, Vec::new())
        .unwrap_err()
        .to_string()
        .contains("configuration"));
    assert_eq!(ids(&engine), ["a"], "nothing changed");
}

#[test]
fn dropping_the_engine_lets_go_of_its_destinations() {
    let (engine, _) = engine("PowerOfTwoChoices");
    engine
        .set_destinations("c", SOURCE, vec![Endpoint::new("a", url(1))])
        .unwrap();
    let mut events = engine.subscribe();
    let a = engine.best_endpoints("c").unwrap().destinations[0].clone();
    assert!(Arc::strong_count(&a) > 1);
    // Picks go through a per-thread cache of the cluster's snapshot, released when the thread
    // picks from another engine or ends: pick on a thread that ends (a joined thread has run
    // its thread-local destructors).
    let picker = engine.clone();
    std::thread::spawn(move || drop(picker.pick_endpoint("c").unwrap()))
        .join()
        .unwrap();
    drop(engine);
    assert_eq!(Arc::strong_count(&a), 1, "only this test holds it");
    assert!(a.is_removed());
    assert!(matches!(
        events.try_recv(),
        Err(tokio::sync::broadcast::error::TryRecvError::Closed)
    ));
}

#[test]
fn availability_events_follow_published_sets() {
    let (engine, _) = engine("PowerOfTwoChoices");
    let mut events = engine.subscribe();
    engine
        .set_destinations(
            "c",
            SOURCE,
            vec![Endpoint::new("a", url(1)), Endpoint::new("b", url(2))],
        )
        .unwrap();
    engine
        .set_destinations("c", SOURCE, vec![Endpoint::new("b", url(2))])
        .unwrap();
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let HealthEventKind::AvailabilityChanged { available, .. } = event.kind {
            seen.push(available.iter().map(|d| d.to_string()).collect::<Vec<_>>());
        }
    }
    assert_eq!(seen, [vec!["a", "b"], vec!["b"]]);
}

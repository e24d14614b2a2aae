//! The discovery core through the public API, on a manual clock: publishing through
//! a `Publisher`, the update guard (hold, confirm, probes agree, force, supersede, modes),
//! staleness, first answers, discovery health as a fourth health part, locality to tiers,
//! weights in the load balancers, status and provenance, and the polling driver.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig, GuardMode, GuardPolicy,
    LocalityTiers, RefreshBounds,
};
use healthpick::discovery::{poll, Answer, BoxFuture, PollSource, SourceError, SourceSpec};
use healthpick::{
    DiscoveryHealth, Endpoint, Engine, HealthClass, HealthEvent, HealthEventKind, HealthPart,
    HeldReason, Locality, ManualClock, PartValue, PickError, ProbeResult, Release,
};
use proptest::prelude::*;
use url::Url;

fn url(port: u16) -> Url {
    Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap()
}

fn ep(key: &str, port: u16) -> Endpoint {
    Endpoint::new(key, url(port))
}

/// An engine on a manual clock with cluster `c` (no configured destinations): `policy`, active
/// checks when `active`, the given locality tiers.
fn engine_with(cluster: ClusterConfig) -> (Engine, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let engine = Engine::builder()
        .clock(clock.clone())
        .seed(11)
        .build_with(Config::new().cluster(cluster))
        .unwrap();
    (engine, clock)
}

fn engine(policy: &str) -> (Engine, Arc<ManualClock>) {
    engine_with(ClusterConfig::new("c").load_balancing_policy(policy))
}

fn drain(rx: &mut tokio::sync::broadcast::Receiver<HealthEvent>) -> Vec<HealthEventKind> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e.kind);
    }
    out
}

fn ids(engine: &Engine) -> Vec<String> {
    engine.status().clusters[0]
        .destinations
        .iter()
        .map(|d| d.id.clone())
        .collect()
}

fn best(engine: &Engine) -> Vec<String> {
    let mut ids: Vec<String> = engine
        .best_endpoints("c")
        .map(|b| b.destinations.iter().map(|d| d.id().to_string()).collect())
        .unwrap_or_default();
    ids.sort();
    ids
}

// ---- first answers -------------------------------------------------------------------------

#[test]
fn a_pick_before_the_first_answer_says_discovery_pending() {
    let (engine, _) = engine("PowerOfTwoChoices");
    assert!(matches!(
        engine.pick_endpoint("c"),
        Err(PickError::NoAvailableDestinations { .. })
    ));
    let publisher = engine.publisher("c", SourceSpec::new("registry")).unwrap();
    let err = engine.pick_endpoint("c").unwrap_err();
    assert!(err.is_discovery_pending(), "{err:?}");
    assert!(err.to_string().contains("discovery pending"));
    assert!(engine
        .best_endpoints("c")
        .unwrap_err()
        .is_discovery_pending());
    // An error is not an answer: still pending.
    publisher.failed("timed out").unwrap();
    assert!(engine
        .pick_endpoint("c")
        .unwrap_err()
        .is_discovery_pending());
    // An empty answer is an answer: now plainly nothing available.
    publisher.publish(Vec::new()).unwrap();
    assert!(matches!(
        engine.pick_endpoint("c"),
        Err(PickError::NoAvailableDestinations { .. })
    ));
    publisher.publish(vec![ep("a", 1)]).unwrap();
    assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "a");
}

#[tokio::test(start_paused = true)]
async fn ready_waits_for_first_answers_but_not_past_their_bound() {
    let (engine, _) = engine("PowerOfTwoChoices");
    let slow = engine
        .publisher(
            "c",
            SourceSpec::new("slow").first_answer_within(Duration::from_secs(2)),
        )
        .unwrap();
    let never = engine
        .publisher(
            "c",
            SourceSpec::new("never").first_answer_within(Duration::from_secs(5)),
        )
        .unwrap();
    let start = tokio::time::Instant::now();
    let answering = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        slow.publish(vec![ep("a", 1)]).unwrap();
    });
    engine.ready().await;
    // `slow` answered after 1 s; `never` used up its 5 s: the waits ran side by side.
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    answering.await.unwrap();
    assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "a");
    drop(never);
}

// ---- the update guard ------------------------------------------------------------------------

#[test]
fn small_removals_apply_at_once_and_large_ones_are_held_until_confirmed() {
    let (engine, clock) = engine("RoundRobin");
    let mut events = engine.subscribe();
    let p = engine.publisher("c", SourceSpec::new("registry")).unwrap();
    p.publish((1..=4).map(|i| ep(&format!("d{i}"), i)).collect())
        .unwrap();
    // One of four (25%): a rolling deploy, applied at once.
    p.publish((1..=3).map(|i| ep(&format!("d{i}"), i)).collect())
        .unwrap();
    assert_eq!(ids(&engine), ["d1", "d2", "d3"]);
    drain(&mut events);

    // Two of three at once: held, the set in force stays.
    clock.advance(Duration::from_secs(1));
    p.publish(vec![ep("d1", 1)]).unwrap();
    assert_eq!(ids(&engine), ["d1", "d2", "d3"]);
    let held = engine.status().clusters[0].sources[0].held.clone().unwrap();
    assert_eq!(
        (held.reason, held.removes, held.of),
        (HeldReason::MassRemoval, 2, 3)
    );
    assert_eq!(held.since, Duration::from_secs(1));
    assert_eq!(held.applies_at, Some(Duration::from_secs(31)));
    assert_eq!(
        drain(&mut events),
        [HealthEventKind::ChangeHeld {
            source: "registry".into(),
            reason: HeldReason::MassRemoval,
            removes: 2,
            of: 3
        }]
    );
    // Seen again before the delay: still held; after it: applied.
    clock.advance(Duration::from_secs(10));
    p.publish(vec![ep("d1", 1)]).unwrap();
    assert_eq!(ids(&engine), ["d1", "d2", "d3"]);
    assert!(
        drain(&mut events).is_empty(),
        "seeing it again changes nothing yet"
    );
    clock.advance(Duration::from_secs(20));
    p.publish(vec![ep("d1", 1)]).unwrap();
    assert_eq!(ids(&engine), ["d1"]);
    let kinds = drain(&mut events);
    assert!(kinds.contains(&HealthEventKind::ChangeReleased {
        source: "registry".into(),
        how: Release::Confirmed
    }));
    assert!(engine.status().clusters[0].sources[0].held.is_none());
}

#[test]
fn a_held_change_of_a_push_source_applies_when_its_delay_runs_out() {
    let (engine, clock) = engine("PowerOfTwoChoices");
    let p = engine
        .publisher(
            "c",
            SourceSpec::new("watch").guard(
                GuardPolicy::new(GuardMode::AfterConfirmation)
                    .confirm_after(Duration::from_secs(5)),
            ),
        )
        .unwrap();
    p.publish(vec![ep("a", 1), ep("b", 2)]).unwrap();
    p.publish(Vec::new()).unwrap(); // emptying: held
    assert_eq!(ids(&engine), ["a", "b"]);
    assert_eq!(engine.next_timer_due(), Some(Duration::from_secs(5)));
    clock.advance(Duration::from_secs(5));
    assert_eq!(engine.fire_due_timers(), 1);
    assert!(ids(&engine).is_empty(), "nobody contradicted it: applied");
}

#[test]
fn a_newer_answer_supersedes_a_held_change() {
    let (engine, clock) = engine("PowerOfTwoChoices");
    let mut events = engine.subscribe();
    let p = engine.publisher("c", SourceSpec::new("dns")).unwrap();
    p.publish(vec![ep("a", 1), ep("b", 2)]).unwrap();
    p.not_found().unwrap();
    assert_eq!(
        engine.status().clusters[0].sources[0]
            .held
            .as_ref()
            .unwrap()
            .reason,
        HeldReason::NotFound
    );
    // The service is back with one more instance: applied, the held change is given up.
    p.publish(vec![ep("a", 1), ep("b", 2), ep("c", 3)]).unwrap();
    assert_eq!(ids(&engine), ["a", "b", "c"]);
    assert!(
        drain(&mut events).contains(&HealthEventKind::ChangeReleased {
            source: "dns".into(),
            how: Release::Superseded
        })
    );
    // The timer of the superseded change fires and does nothing.
    clock.advance(Duration::from_secs(30));
    engine.fire_due_timers();
    assert_eq!(ids(&engine), ["a", "b", "c"]);
}

#[test]
fn a_held_change_applies_when_the_destinations_it_removes_fail_their_probes() {
    let (engine, _) = engine_with(
        ClusterConfig::new("c")
            .active(ActiveHealthCheckConfig::enabled())
            .metadata("ConsecutiveFailuresHealthPolicy.Threshold", "1"),
    );
    let mut events = engine.subscribe();
    let p = engine.publisher("c", SourceSpec::new("dns")).unwrap();
    p.publish(vec![ep("a", 1), ep("b", 2), ep("c", 3)]).unwrap();
    p.publish(vec![ep("a", 1)]).unwrap(); // removes 2 of 3: held
    assert_eq!(ids(&engine).len(), 3);
    // Only one of the two fails: still held.
    engine
        .report_probe_round("c", &[ProbeResult::status("b", 503)])
        .unwrap();
    assert_eq!(ids(&engine).len(), 3);
    // Both fail: the probes agree with the source.
    engine
        .report_probe_round("c", &[ProbeResult::status("c", 503)])
        .unwrap();
    assert_eq!(ids(&engine), ["a"]);
    assert!(
        drain(&mut events).contains(&HealthEventKind::ChangeReleased {
            source: "dns".into(),
            how: Release::ProbesAgree
        })
    );
}

#[test]
fn guard_modes_never_and_immediately() {
    let (engine, clock) = engine("PowerOfTwoChoices");
    let never = engine
        .publisher(
            "c",
            SourceSpec::new("careful").guard(GuardPolicy::new(GuardMode::Never)),
        )
        .unwrap();
    never.publish(vec![ep("a", 1), ep("b", 2)]).unwrap();
    never.publish(Vec::new()).unwrap();
    clock.advance(Duration::from_secs(3600));
    engine.fire_due_timers();
    never.publish(Vec::new()).unwrap();
    assert_eq!(
        ids(&engine),
        ["a", "b"],
        "Never: only a forced release applies it"
    );
    assert_eq!(
        engine.status().clusters[0].sources[0]
            .held
            .as_ref()
            .unwrap()
            .applies_at,
        None
    );
    assert!(never.force_held().unwrap());
    assert!(ids(&engine).is_empty());
    assert!(!never.force_held().unwrap(), "nothing held any more");

    let off = engine
        .publisher(
            "c",
            SourceSpec::new("trusting").guard(GuardPolicy::new(GuardMode::Immediately)),
        )
        .unwrap();
    off.publish(vec![ep("x", 7), ep("y", 8)]).unwrap();
    off.publish(Vec::new()).unwrap();
    assert!(ids(&engine).is_empty(), "Immediately: no guard");
}

#[test]
fn the_share_that_is_held_is_configurable() {
    let (engine, _) = engine("PowerOfTwoChoices");
    let p = engine
        .publisher(
            "c",
            SourceSpec::new("strict").guard(GuardPolicy::default().max_removed_share(0.2)),
        )
        .unwrap();
    p.publish((1..=10).map(|i| ep(&format!("d{i}"), i)).collect())
        .unwrap();
    p.publish((1..=9).map(|i| ep(&format!("d{i}"), i)).collect())
        .unwrap();
    assert_eq!(ids(&engine).len(), 9, "10% < 20%: applied");
    p.publish((1..=7).map(|i| ep(&format!("d{i}"), i)).collect())
        .unwrap();
    assert_eq!(ids(&engine).len(), 9, "2 of 9 (22%): held");
}

// ---- staleness -------------------------------------------------------------------------------

#[test]
fn a_failing_source_keeps_its_last_set_and_is_stale_until_it_answers() {
    let (engine, clock) = engine("PowerOfTwoChoices");
    let mut events = engine.subscribe();
    let p = engine
        .publisher(
            "c",
            SourceSpec::new("dns").kind("Dns").target("svc.test A/AAAA"),
        )
        .unwrap();
    p.publish(vec![ep("a", 1)]).unwrap();
    clock.advance(Duration::from_secs(3));
    p.failed("timed out after 500 ms").unwrap();
    p.failed("timed out after 500 ms").unwrap();
    assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "a");
    let source = engine.status().clusters[0].sources[0].clone();
    assert_eq!(source.stale_since, Some(Duration::from_secs(3)));
    assert_eq!(
        source.last_error,
        Some((Duration::from_secs(3), "timed out after 500 ms".to_string()))
    );
    assert_eq!(
        (source.kind.as_str(), source.target.as_str()),
        ("Dns", "svc.test A/AAAA")
    );
    assert_eq!(source.age, Some(Duration::from_secs(3)));
    let kinds = drain(&mut events);
    let stale: Vec<_> = kinds
        .iter()
        .filter(|k| matches!(k, HealthEventKind::SourceStale { .. }))
        .collect();
    assert_eq!(
        stale.len(),
        1,
        "one event when it turns stale, not one per failure"
    );
    // It answers again.
    p.publish(vec![ep("a", 1)]).unwrap();
    assert!(engine.status().clusters[0].sources[0].stale_since.is_none());
    assert!(
        drain(&mut events).contains(&HealthEventKind::SourceRecovered {
            source: "dns".into()
        })
    );
    // A bad set is refused whole and counts as a failure.
    let bad = Endpoint::new("z", Url::parse("ftp://127.0.0.1/").unwrap());
    assert!(p.publish(vec![bad]).is_err());
    assert_eq!(ids(&engine), ["a"]);
    assert!(engine.status().clusters[0].sources[0].stale_since.is_some());
}

// ---- discovery health ------------------------------------------------------------------------

#[test]
fn discovery_health_excludes_unhealthy_and_ranks_draining_with_degraded() {
    let (engine, _) = engine("RoundRobin");
    let mut events = engine.subscribe();
    let p = engine.publisher("c", SourceSpec::new("k8s")).unwrap();
    p.publish(vec![
        ep("ready", 1).health(DiscoveryHealth::Healthy),
        ep("terminating", 2).health(DiscoveryHealth::Draining),
        ep("not-ready", 3).health(DiscoveryHealth::Unhealthy),
    ])
    .unwrap();
    assert_eq!(best(&engine), ["ready"]);
    let status = engine.status();
    let not_ready = status.clusters[0].destination("not-ready").unwrap();
    assert!(
        !not_ready.available,
        "Unhealthy excludes, even without health checks"
    );
    assert_eq!(not_ready.discovery, DiscoveryHealth::Unhealthy);
    // Only the draining one left with a usable class: it gets the traffic, as Degraded.
    p.publish(vec![
        ep("ready", 1).health(DiscoveryHealth::Unhealthy),
        ep("terminating", 2).health(DiscoveryHealth::Draining),
        ep("not-ready", 3).health(DiscoveryHealth::Unhealthy),
    ])
    .unwrap();
    let group = engine.best_endpoints("c").unwrap();
    assert_eq!(group.status, HealthClass::Degraded);
    assert_eq!(best(&engine), ["terminating"]);
    let changes: Vec<(String, PartValue, PartValue)> = drain(&mut events)
        .into_iter()
        .filter_map(|k| match k {
            HealthEventKind::HealthChanged {
                destination,
                part: HealthPart::Discovery,
                from,
                to,
                ..
            } => Some((destination.to_string(), from, to)),
            _ => None,
        })
        .collect();
    assert!(changes.contains(&(
        "ready".to_string(),
        PartValue::Discovery(DiscoveryHealth::Healthy),
        PartValue::Discovery(DiscoveryHealth::Unhealthy)
    )));
}

// ---- locality to tiers -----------------------------------------------------------------------

#[test]
fn locality_maps_to_tiers_and_explicit_tiers_win() {
    let (engine, _) = engine_with(
        ClusterConfig::new("c").locality_tiers(
            LocalityTiers::new()
                .local_zone("eu-1a")
                .local_region("eu-1")
                .tier("us-east-1c", 5),
        ),
    );
    let at = |zone: &str, region: &str| Locality::new().region(region).zone(zone);
    let p = engine.publisher("c", SourceSpec::new("consul")).unwrap();
    p.publish(vec![
        ep("same-zone", 1).locality(at("eu-1a", "eu-1")),
        ep("same-region", 2).locality(at("eu-1b", "eu-1")),
        ep("far", 3).locality(at("us-west-2a", "us-west-2")),
        ep("named", 4).locality(at("us-east-1c", "us-east-1")),
        ep("unknown", 5),
        ep("pinned", 6)
            .locality(at("us-west-2a", "us-west-2"))
            .tier(0),
    ])
    .unwrap();
    let status = engine.status();
    let tiers: BTreeMap<&str, u32> = status.clusters[0]
        .destinations
        .iter()
        .map(|d| (d.id.as_str(), d.tier))
        .collect();
    assert_eq!(
        tiers,
        BTreeMap::from([
            ("far", 2),
            ("named", 5),
            ("pinned", 0),
            ("same-region", 1),
            ("same-zone", 0),
            ("unknown", 2)
        ])
    );
    assert_eq!(best(&engine), ["pinned", "same-zone"]);
    assert_eq!(
        status.clusters[0]
            .destination("same-region")
            .unwrap()
            .locality,
        "eu-1/eu-1b"
    );
}

// ---- weights ---------------------------------------------------------------------------------

fn counts(engine: &Engine, n: usize) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for _ in 0..n {
        *out.entry(
            engine
                .pick_endpoint("c")
                .unwrap()
                .destination()
                .id()
                .to_string(),
        )
        .or_default() += 1;
    }
    out
}

#[test]
fn random_and_round_robin_follow_weights() {
    for policy in ["Random", "RoundRobin"] {
        let (engine, _) = engine(policy);
        engine
            .set_destinations(
                "c",
                "registry",
                vec![
                    ep("heavy", 1).weight(3),
                    ep("light", 2).weight(1),
                    ep("zero", 3).weight(0),
                ],
            )
            .unwrap();
        let c = counts(&engine, 8000);
        let heavy = c["heavy"] as f64 / 8000.0;
        assert!((heavy - 0.75).abs() < 0.03, "{policy}: {c:?}");
        assert!(
            !c.contains_key("zero"),
            "{policy}: weight 0 gets nothing while others exist"
        );
    }
}

#[test]
fn round_robin_is_smooth_and_weights_come_from_static_metadata_too() {
    let (engine, _) = engine_with(
        ClusterConfig::new("c")
            .load_balancing_policy("RoundRobin")
            .destination(DestinationConfig::new("a", "http://127.0.0.1:1/").metadata("Weight", "5"))
            .destination(DestinationConfig::new("b", "http://127.0.0.1:2/"))
            .destination(DestinationConfig::new("c", "http://127.0.0.1:3/")),
    );
    let seq: Vec<String> = (0..14)
        .map(|_| {
            engine
                .pick_endpoint("c")
                .unwrap()
                .destination()
                .id()
                .to_string()
        })
        .collect();
    assert_eq!(
        seq,
        ["a", "a", "b", "a", "c", "a", "a", "a", "a", "b", "a", "c", "a", "a"]
    );
}

#[test]
fn power_of_two_choices_compares_load_per_unit_of_weight() {
    let (engine, _) = engine("PowerOfTwoChoices");
    engine
        .set_destinations(
            "c",
            "registry",
            vec![ep("big", 1).weight(4), ep("small", 2).weight(1)],
        )
        .unwrap();
    // Two destinations: every pick compares both. Holding every handle, `big` takes picks until
    // it carries four times `small`'s load: (big + 1) <= 4 (small + 1).
    let held: Vec<_> = (0..50)
        .map(|_| engine.pick_endpoint("c").unwrap())
        .collect();
    let big = held
        .iter()
        .filter(|h| h.destination().id() == "big")
        .count();
    let small = held.len() - big;
    assert!(
        (big as f64 + 1.0) <= 4.0 * (small as f64 + 1.0) + 4.0,
        "{big} vs {small}"
    );
    assert!(
        big >= 4 * small - 4,
        "{big} vs {small}: in proportion to the weights"
    );
    // Idle (each handle dropped at once, every count 0): picks in proportion to the weights,
    // not all to the heaviest.
    drop(held);
    let mut idle_big = 0;
    for _ in 0..4000 {
        if engine.pick_endpoint("c").unwrap().destination().id() == "big" {
            idle_big += 1;
        }
    }
    let share = f64::from(idle_big) / 4000.0;
    assert!(
        (0.75..=0.85).contains(&share),
        "idle share of big {share}, weight share 0.8"
    );
    // Unweighted groups keep plain P2C: fewer in flight wins.
    let (plain, _) = self::engine("PowerOfTwoChoices");
    plain
        .set_destinations("c", "registry", vec![ep("x", 1), ep("y", 2)])
        .unwrap();
    let first = plain.pick_endpoint("c").unwrap();
    let second = plain.pick_endpoint("c").unwrap();
    assert_ne!(first.destination().id(), second.destination().id());
}

// ---- provenance ------------------------------------------------------------------------------

#[test]
fn status_shows_sources_and_where_each_destination_came_from() {
    let (engine, clock) = engine_with(
        ClusterConfig::new("c")
            .destination(DestinationConfig::new("static", "http://127.0.0.1:9/")),
    );
    let p = engine
        .publisher("c", SourceSpec::new("registry").kind("custom"))
        .unwrap();
    clock.advance(Duration::from_secs(2));
    p.publish(vec![ep("found", 1).locality(Locality::new().zone("z1"))])
        .unwrap();
    clock.advance(Duration::from_secs(5));
    p.publish(vec![ep("found", 1).locality(Locality::new().zone("z1"))])
        .unwrap();
    let status = engine.status();
    let c = &status.clusters[0];
    assert_eq!(c.sources.len(), 1);
    let s = &c.sources[0];
    assert_eq!(
        (s.name.as_str(), s.generation, s.endpoints),
        ("registry", 2, 1)
    );
    assert_eq!(s.last_success, Some(Duration::from_secs(7)));
    let found = c.destination("found").unwrap();
    assert_eq!(found.source, "registry");
    assert_eq!(found.last_seen, Some(Duration::from_secs(7)));
    assert_eq!(found.locality, "z1");
    let stat = c.destination("static").unwrap();
    assert_eq!(
        (stat.source.as_str(), stat.last_seen),
        ("config", Some(Duration::ZERO))
    );
    // Retiring the source takes its destinations and its status out.
    p.retire().unwrap();
    let c = engine.status().clusters.remove(0);
    assert!(c.sources.is_empty());
    assert_eq!(c.destinations.len(), 1);
}

// ---- the polling driver ----------------------------------------------------------------------

/// A source that answers from a script, one entry per call (then repeats the last).
struct Scripted {
    answers: std::sync::Mutex<Vec<Result<Answer, SourceError>>>,
    calls: Arc<std::sync::atomic::AtomicUsize>,
}

impl PollSource for Scripted {
    fn resolve(&self) -> BoxFuture<'_, Result<Answer, SourceError>> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut answers = self.answers.lock().unwrap();
        let next = if answers.len() > 1 {
            answers.remove(0)
        } else {
            answers[0].clone()
        };
        Box::pin(async move { next })
    }
}

#[tokio::test(start_paused = true)]
async fn the_driver_refreshes_by_validity_backs_off_on_errors_and_stops_when_dropped() {
    let engine = Engine::from_json(r#"{"Clusters": {"c": {}}}"#).unwrap();
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let source = Arc::new(Scripted {
        answers: std::sync::Mutex::new(vec![
            Ok(Answer::found(vec![ep("a", 1)]).valid_for(Duration::from_secs(30))),
            Err(SourceError::new("SERVFAIL")),
            Err(SourceError::new("SERVFAIL")),
            Ok(Answer::found(vec![ep("a", 1), ep("b", 2)]).valid_for(Duration::from_secs(1))),
        ]),
        calls: calls.clone(),
    });
    let publisher = engine.publisher("c", SourceSpec::new("scripted")).unwrap();
    let refresh = RefreshBounds::new(Duration::from_secs(5), Duration::from_secs(60)).jitter(0.0);
    let task = poll(source, publisher, refresh);
    let calls_now = || calls.load(std::sync::atomic::Ordering::SeqCst);
    let settle = || tokio::time::sleep(Duration::from_millis(1));
    settle().await;
    assert_eq!((calls_now(), ids(&engine)), (1, vec!["a".to_string()]));
    // Valid for 30 s: asked again at 30 s, not before.
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert_eq!(calls_now(), 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(calls_now(), 2, "asked again when the answer ran out");
    assert!(engine.status().clusters[0].sources[0].stale_since.is_some());
    // Backoff: 5 s, then 10 s; the last good set stays meanwhile.
    tokio::time::sleep(Duration::from_secs(5)).await;
    settle().await;
    assert_eq!(calls_now(), 3);
    assert_eq!(ids(&engine), ["a"]);
    tokio::time::sleep(Duration::from_secs(10)).await;
    settle().await;
    assert_eq!(calls_now(), 4);
    assert_eq!(ids(&engine), ["a", "b"]);
    // Valid for 1 s, clamped up to 5 s.
    tokio::time::sleep(Duration::from_secs(5)).await;
    settle().await;
    assert_eq!(calls_now(), 5);
    drop(task);
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(calls_now(), 5, "a dropped task asks no more");
}

// ---- the guard as a property -----------------------------------------------------------------

/// One step of a random source: publish a set of keys (out of eight) or say "not found".
#[derive(Debug, Clone)]
enum Step {
    Publish(Vec<u16>),
    NotFound,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => proptest::collection::btree_set(0u16..8, 0..8)
            .prop_map(|keys| Step::Publish(keys.into_iter().collect())),
        1 => Just(Step::NotFound),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Without confirmation (the clock never moves, no probes, nothing forced): a removed key
    /// never gets a new pick, and no single change empties the source or takes half of it.
    #[test]
    fn the_guard_never_lets_an_unconfirmed_change_shrink_the_set_too_far(steps in proptest::collection::vec(step(), 1..25)) {
        let (engine, _) = engine("RoundRobin");
        let p = engine.publisher("c", SourceSpec::new("random")).unwrap();
        let mut in_force: Vec<String> = Vec::new();
        for step in steps {
            let before = in_force.clone();
            match &step {
                Step::Publish(keys) => p.publish(keys.iter().map(|k| ep(&format!("k{k}"), 1000 + k)).collect()).unwrap(),
                Step::NotFound => p.not_found().unwrap(),
            }
            in_force = ids(&engine);
            let removed = before.iter().filter(|k| !in_force.contains(k)).count();
            if !before.is_empty() {
                prop_assert!(!in_force.is_empty(), "{step:?} emptied {before:?}");
                prop_assert!((removed as f64) < 0.5 * before.len() as f64,
                    "{step:?} removed {removed} of {before:?}");
            }
            // Every pick is of a key in force now.
            for _ in 0..(2 * in_force.len()) {
                let pick = engine.pick_endpoint("c").unwrap();
                prop_assert!(in_force.iter().any(|k| k == pick.destination().id()));
            }
        }
    }
}

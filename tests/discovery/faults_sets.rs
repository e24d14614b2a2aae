//! Sources' sets in the engine: a held change keeps the promise its status makes when its
//! source is registered again with another confirmation delay, a confirmed change applies as
//! last published, and destination ids stay unique within a cluster whatever keys the sources
//! use. On the engine's manual clock: deterministic, no sleeping.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::support::status::ids;
use healthpick::config::{GuardMode, GuardPolicy};
use healthpick::discovery::{Publisher, SourceSpec};
use healthpick::{Endpoint, Engine, ManualClock, SourceStatus};

fn s(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn engine_on(clock: &Arc<ManualClock>) -> Engine {
    let engine = Engine::builder().clock(clock.clone()).build();
    engine.load_json(r#"{"Clusters": {"c": {}}}"#).unwrap();
    engine
}

fn endpoint(key: &str, port: u16) -> Endpoint {
    Endpoint::new(key, format!("http://127.0.0.1:{port}/").parse().unwrap())
}

/// Registers (or registers again) source `name` of cluster `c` with confirmation delay
/// `confirm_after`.
fn register(engine: &Engine, name: &str, confirm_after: Duration) -> Publisher {
    engine
        .publisher(
            "c",
            SourceSpec::new(name)
                .guard(GuardPolicy::new(GuardMode::AfterConfirmation).confirm_after(confirm_after)),
        )
        .unwrap()
}

fn source(engine: &Engine, name: &str) -> SourceStatus {
    engine.status().clusters[0]
        .sources
        .iter()
        .find(|s| s.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no source {name}"))
}

/// `s1` (ConfirmAfter 30 s) has `{a}`; `{}` is held at 0 s; `s1` is registered again with
/// ConfirmAfter 1 s (a reload of `Guard:ConfirmAfter`). The status says the change applies at
/// 1 s, and at 1 s it does.
#[test]
fn a_shorter_confirmation_delay_applies_the_held_change_when_the_status_says() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine_on(&clock);
    let s1 = register(&engine, "s1", s(30));
    s1.publish(vec![endpoint("a", 7001)]).unwrap();
    s1.publish(Vec::new()).unwrap();
    assert!(source(&engine, "s1").held.is_some(), "emptying is held");

    register(&engine, "s1", s(1));
    let held = source(&engine, "s1").held.unwrap();
    assert_eq!(held.applies_at, Some(s(1)));
    clock.set(s(1));
    engine.fire_due_timers();
    assert!(
        source(&engine, "s1").held.is_none(),
        "applied at 1 s as the status said"
    );
    assert!(ids(&engine).is_empty());
}

/// The same with a longer delay: the old timer (at 1 s) finds nothing due, and the change
/// applies at the new time (60 s), by itself.
#[test]
fn a_longer_confirmation_delay_applies_the_held_change_at_the_new_time() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine_on(&clock);
    let s1 = register(&engine, "s1", s(1));
    s1.publish(vec![endpoint("a", 7001)]).unwrap();
    s1.publish(Vec::new()).unwrap();
    register(&engine, "s1", s(60));
    assert_eq!(source(&engine, "s1").held.unwrap().applies_at, Some(s(60)));
    clock.set(s(1));
    engine.fire_due_timers();
    assert!(source(&engine, "s1").held.is_some(), "not before 60 s");
    assert_eq!(ids(&engine), ["a"]);
    assert_eq!(
        engine.next_timer_due(),
        Some(s(60)),
        "a timer for the new time"
    );
    clock.set(s(60));
    engine.fire_due_timers();
    assert!(source(&engine, "s1").held.is_none(), "applied at 60 s");
    assert!(ids(&engine).is_empty());
}

/// A held change seen again with other attributes (same keys at the same addresses) is
/// confirmed as last published: the weight and metadata of the last publication apply.
#[test]
fn a_confirmed_change_applies_as_last_published() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine_on(&clock);
    let s1 = register(&engine, "s1", s(30));
    s1.publish(vec![endpoint("a", 7001), endpoint("b", 7002)])
        .unwrap();
    // Half of them go: held.
    s1.publish(vec![endpoint("a", 7001).weight(1.0)]).unwrap();
    assert!(source(&engine, "s1").held.is_some());
    clock.set(s(10));
    s1.publish(vec![endpoint("a", 7001)
        .weight(5.0)
        .metadata("version", "2")])
        .unwrap();
    let held = source(&engine, "s1").held.unwrap();
    assert_eq!(
        (held.since, held.applies_at),
        (s(0), Some(s(30))),
        "seen again: still held since it was first seen"
    );
    clock.set(s(30));
    engine.fire_due_timers();
    assert!(source(&engine, "s1").held.is_none());
    let best = engine.best_endpoints("c").unwrap().destinations;
    assert_eq!(best.len(), 1);
    assert_eq!(
        best[0].attributes().weight(),
        5.0,
        "the last publication's weight"
    );
    assert_eq!(best[0].attributes().metadata().get("version"), Some("2"));

    // Confirmed by seeing it again after the delay: the same.
    s1.publish(vec![endpoint("a", 7001), endpoint("b", 7002)])
        .unwrap();
    s1.publish(vec![endpoint("b", 7002)]).unwrap();
    assert!(source(&engine, "s1").held.is_some());
    clock.set(s(70));
    s1.publish(vec![endpoint("b", 7002).weight(7.0)]).unwrap();
    assert!(source(&engine, "s1").held.is_none(), "confirmed");
    let best = engine.best_endpoints("c").unwrap().destinations;
    assert_eq!(best[0].attributes().weight(), 7.0);
}

/// `s1` publishes `{a}`, `s2` publishes `{a, a@s2}` (in either order, in any case): every
/// destination has an id of its own, and each is found by it.
#[test]
fn destination_ids_are_unique_within_a_cluster_whatever_the_keys() {
    for s2_keys in [
        ["a", "a@s2"],
        ["a@s2", "a"],
        ["A", "a@S2"],
        ["a@s2@s2", "a"],
    ] {
        let engine = Engine::from_json(r#"{"Clusters": {"c": {}}}"#).unwrap();
        engine
            .set_destinations("c", "s1", vec![endpoint("a", 7001)])
            .unwrap();
        engine
            .set_destinations(
                "c",
                "s2",
                vec![endpoint(s2_keys[0], 7002), endpoint(s2_keys[1], 7003)],
            )
            .unwrap();
        // A third source whose key is what `s2`'s renamed `a` might be called.
        engine
            .set_destinations("c", "s3", vec![endpoint("a@s2", 7004)])
            .unwrap();
        let status = engine.status();
        let destinations = &status.clusters[0].destinations;
        assert_eq!(destinations.len(), 4, "{s2_keys:?}");
        let folded: HashSet<String> = destinations.iter().map(|d| d.id.to_lowercase()).collect();
        assert_eq!(
            folded.len(),
            4,
            "ids collide for {s2_keys:?}: {:?}",
            destinations.iter().map(|d| &d.id).collect::<Vec<_>>()
        );
        // Each id names its own destination (address), as outcomes and status look them up.
        for d in destinations {
            let found = status.clusters[0].destination(&d.id).unwrap();
            assert_eq!(found.address, d.address, "{s2_keys:?}: {}", d.id);
            let held = engine
                .pick_endpoint_excluding(
                    "c",
                    &destinations
                        .iter()
                        .filter(|o| o.id != d.id)
                        .map(|o| o.id.as_str())
                        .collect::<Vec<_>>(),
                )
                .unwrap();
            assert_eq!(held.destination().address().as_str(), d.address);
        }
        // `s1`'s key is its id.
        assert!(destinations
            .iter()
            .any(|d| d.id == "a" && d.address == "http://127.0.0.1:7001/"));
    }
}

/// Ids stay stable while nothing changes, and a source that republishes keeps its
/// destinations (same ids, same objects).
#[test]
fn qualified_ids_are_stable_across_publications() {
    let engine = Engine::from_json(r#"{"Clusters": {"c": {}}}"#).unwrap();
    engine
        .set_destinations("c", "s1", vec![endpoint("a", 7001)])
        .unwrap();
    let publish_s2 = || {
        engine
            .set_destinations("c", "s2", vec![endpoint("a", 7002), endpoint("a@s2", 7003)])
            .unwrap();
        ids(&engine)
    };
    let first = publish_s2();
    let before: Vec<_> = engine.best_endpoints("c").unwrap().destinations;
    assert_eq!(publish_s2(), first);
    let after: Vec<_> = engine.best_endpoints("c").unwrap().destinations;
    assert!(before.iter().zip(&after).all(|(b, a)| Arc::ptr_eq(b, a)));
}

//! Reloads under picks: a reload is published whole. A cluster enters with its configured
//! destinations and leaves as one, a reload that changes a cluster's policies and destinations
//! is never seen half applied, and a reload that changes `LocalityTiers` re-tiers every
//! destination of the cluster at once, discovered ones included.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use healthpick::config::{Config, LocalityTiers};
use healthpick::selection::{Group, LoadBalancingPolicy, Picker};
use healthpick::{Endpoint, Engine, Locality, PickError};

const WITH_EXTRA: &str = r#"{"Clusters": {
    "main": {"Destinations": {"m1": {"Address": "http://127.0.0.1:7001/"}}},
    "extra": {
        "HealthCheck": {"Active": {"Enabled": true, "Interval": "00:01:00"}},
        "Destinations": {
            "e1": {"Address": "http://127.0.0.1:7101/"},
            "e2": {"Address": "http://127.0.0.1:7102/"},
            "e3": {"Address": "http://127.0.0.1:7103/"}}}}}"#;

const WITHOUT_EXTRA: &str = r#"{"Clusters": {
    "main": {"Destinations": {"m1": {"Address": "http://127.0.0.1:7001/"}}}}}"#;

/// What the pickers saw.
#[derive(Default)]
struct Seen {
    picked: AtomicU64,
    unknown: AtomicU64,
    wrong: AtomicU64,
}

/// Four threads pick `main` and `extra` while the test thread alternates 20,000 times between
/// a document with `extra` and one without it, through `load_json` and `apply_config` in turn.
/// A pick of `extra` finds the cluster with its three destinations or no cluster at all: never
/// an empty one. (More picking threads than cores is what makes a picker lose its core between
/// reading the cluster table and the cluster's snapshot, the moment a reload must not show.)
#[test]
fn a_cluster_enters_and_leaves_with_its_destinations_in_one_publication() {
    let engine = Engine::from_json(WITH_EXTRA).unwrap();
    let with = Config::from_json(WITH_EXTRA).unwrap();
    let without = Config::from_json(WITHOUT_EXTRA).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Seen::default());
    let mut pickers = Vec::new();
    for _ in 0..4 {
        let (engine, stop, seen) = (engine.clone(), stop.clone(), seen.clone());
        pickers.push(thread::spawn(move || {
            let mut errors = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                drop(engine.pick_endpoint("main").expect("main is always there"));
                match engine.pick_endpoint("extra") {
                    Ok(pick) => {
                        assert!(pick.destination().id().starts_with('e'));
                        seen.picked.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(PickError::UnknownCluster { .. }) => {
                        seen.unknown.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(other) => {
                        seen.wrong.fetch_add(1, Ordering::Relaxed);
                        if errors.len() < 3 {
                            errors.push(other.to_string());
                        }
                    }
                }
            }
            errors
        }));
    }
    for round in 0..20_000 {
        let document_has_extra = round % 2 == 1;
        if round % 4 < 2 {
            let text = if document_has_extra {
                WITH_EXTRA
            } else {
                WITHOUT_EXTRA
            };
            engine.load_json(text).unwrap();
        } else {
            let config = if document_has_extra { &with } else { &without };
            engine.apply_config(config.clone()).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let errors: Vec<String> = pickers
        .into_iter()
        .flat_map(|p| p.join().unwrap())
        .collect();
    let (picked, unknown, wrong) = (
        seen.picked.load(Ordering::Relaxed),
        seen.unknown.load(Ordering::Relaxed),
        seen.wrong.load(Ordering::Relaxed),
    );
    assert_eq!(
        wrong, 0,
        "{wrong} picks of `extra` neither succeeded nor found no cluster ({picked} picked, {unknown} unknown): {errors:?}"
    );
    assert!(
        picked > 0 && unknown > 0,
        "both states were seen: {picked} picked, {unknown} unknown"
    );
}

/// Always the first destination of the group.
struct First;
impl LoadBalancingPolicy for First {
    fn prepare(&self, _: &Group) -> Picker {
        Picker::Fixed(0)
    }
}

/// Always the last destination of the group.
struct Last;
impl LoadBalancingPolicy for Last {
    fn prepare(&self, group: &Group) -> Picker {
        Picker::Fixed(group.len().saturating_sub(1))
    }
}

/// One reload changes a cluster's load-balancing policy and its destinations together: `First`
/// over `a1..a3`, or `Last` over `b1..b3`. Every pick sees one document or the other: `a1` or
/// `b3`, never a policy with the other document's destinations (`a3`, `b1`).
#[test]
fn a_reload_of_policies_and_destinations_is_never_seen_half_applied() {
    let document = |policy: &str, prefix: &str| {
        format!(
            r#"{{"Clusters": {{"c": {{"LoadBalancingPolicy": "{policy}", "Destinations": {{
                "{prefix}1": {{"Address": "http://127.0.0.1:7201/"}},
                "{prefix}2": {{"Address": "http://127.0.0.1:7202/"}},
                "{prefix}3": {{"Address": "http://127.0.0.1:7203/"}}}}}}}}}}"#
        )
    };
    let (a, b) = (document("First", "a"), document("Last", "b"));
    let engine = Engine::builder()
        .load_balancing_policy("First", First)
        .load_balancing_policy("Last", Last)
        .build();
    engine.load_json(&a).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut pickers = Vec::new();
    for _ in 0..3 {
        let (engine, stop) = (engine.clone(), stop.clone());
        pickers.push(thread::spawn(move || {
            let mut seen = std::collections::BTreeMap::<String, u64>::new();
            while !stop.load(Ordering::Relaxed) {
                let pick = engine.pick_endpoint("c").unwrap();
                *seen.entry(pick.destination().id().to_string()).or_default() += 1;
            }
            seen
        }));
    }
    for round in 0..2_000 {
        engine
            .load_json(if round % 2 == 0 { &b } else { &a })
            .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for picker in pickers {
        let seen = picker.join().unwrap();
        assert!(
            seen.keys().all(|id| id == "a1" || id == "b3"),
            "half-applied reloads seen: {seen:?}"
        );
    }
}

/// Destinations a source published in zone `z1` under `LocalZone: z1` are tier 0; a reload
/// with `LocalZone: z2` moves them to tier 2 (another zone of an unknown region) at once,
/// together with the configuration's own, without waiting for the source to publish again.
#[test]
fn a_reload_of_locality_tiers_re_tiers_discovered_destinations_at_once() {
    let cluster = |zone: &str| {
        healthpick::config::ClusterConfig::new("c")
            .locality_tiers(LocalityTiers::new().local_zone(zone))
    };
    let engine = Engine::new(Config::new().cluster(cluster("z1"))).unwrap();
    engine
        .set_destinations(
            "c",
            "registry",
            vec![
                Endpoint::new("near", "http://127.0.0.1:7301/".parse().unwrap())
                    .locality(Locality::new().zone("z1")),
                Endpoint::new("far", "http://127.0.0.1:7302/".parse().unwrap())
                    .locality(Locality::new().zone("z2")),
            ],
        )
        .unwrap();
    let tier = |engine: &Engine, id: &str| {
        engine.status().clusters[0]
            .destinations
            .iter()
            .find(|d| d.id == id)
            .unwrap_or_else(|| panic!("no destination {id}"))
            .tier
    };
    assert_eq!((tier(&engine, "near"), tier(&engine, "far")), (0, 2));
    assert_eq!(
        engine.pick_endpoint("c").unwrap().destination().id(),
        "near"
    );

    engine
        .apply_config(Config::new().cluster(cluster("z2")))
        .unwrap();
    assert_eq!(
        (tier(&engine, "near"), tier(&engine, "far")),
        (2, 0),
        "re-tiered by the new rule without a new publication"
    );
    assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "far");
    for _ in 0..20 {
        assert_eq!(engine.best_endpoints("c").unwrap().destinations.len(), 1);
    }
}

/// A cluster fed by discovery alone enters saying its discovery is pending, from the
/// publication that brings it in (no source has even been started): under picks and reloads
/// that add and remove it, a pick finds no cluster or a pending one, never a cluster with
/// nothing available.
#[test]
fn a_cluster_fed_by_discovery_alone_enters_pending() {
    const WITH: &str = r#"{"Clusters": {
        "main": {"Destinations": {"m1": {"Address": "http://127.0.0.1:7001/"}}},
        "found": {"Discovery": {"Type": "Dns", "Name": "web.test", "Port": 8080,
                                "Servers": ["127.0.0.1:53"]}}}}"#;
    let engine = Engine::from_json(WITH).unwrap();
    let error = engine.pick_endpoint("found").unwrap_err();
    assert!(error.is_discovery_pending(), "{error}");
    assert!(engine
        .best_endpoints("found")
        .unwrap_err()
        .is_discovery_pending());

    let stop = Arc::new(AtomicBool::new(false));
    let pickers: Vec<_> = (0..2)
        .map(|_| {
            let (engine, stop) = (engine.clone(), stop.clone());
            thread::spawn(move || {
                let mut wrong = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match engine.pick_endpoint("found") {
                        Err(PickError::UnknownCluster { .. }) => {}
                        Err(e) if e.is_discovery_pending() => {}
                        other => wrong.push(format!("{other:?}")),
                    }
                }
                wrong
            })
        })
        .collect();
    for round in 0..2_000 {
        engine
            .load_json(if round % 2 == 0 { WITHOUT_EXTRA } else { WITH })
            .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for picker in pickers {
        let wrong = picker.join().unwrap();
        assert!(
            wrong.is_empty(),
            "{} picks: {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(3)]
        );
    }
}

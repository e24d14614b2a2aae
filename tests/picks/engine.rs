//! The engine as a whole: reloads keep state, events and tracing, custom
//! policies of every kind, and the reactivation timer on tokio's clock.

use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig, PassiveHealthCheckConfig,
};
use healthpick::policy::{
    Availability, AvailableDestinationsPolicy, AvailablePolicyContext, PassiveHealthPolicy,
    PassivePolicyContext, PassiveVerdict,
};
use healthpick::selection::{Group, LoadBalancingPolicy, PickView, Picker};
use healthpick::{
    Destination, Engine, HealthEvent, HealthEventKind, HealthPart, HealthState, ManualClock,
    PartValue, ProbeResult, Reason, RequestOutcome,
};

use crate::support::policies::FirstStrike;

fn two_destinations(id: &str) -> ClusterConfig {
    ClusterConfig::new(id)
        .active(ActiveHealthCheckConfig::enabled())
        .metadata("ConsecutiveFailuresHealthPolicy.Threshold", "1")
        .destination(DestinationConfig::new("a", "http://127.0.0.1:1/"))
        .destination(DestinationConfig::new("b", "http://127.0.0.1:2/"))
}

fn drain(rx: &mut tokio::sync::broadcast::Receiver<HealthEvent>) -> Vec<HealthEvent> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

#[test]
fn reload_keeps_surviving_state_drops_removed_and_starts_new_unknown() {
    let engine = Engine::new(Config::new().cluster(two_destinations("c"))).unwrap();
    engine
        .report_probe_round(
            "c",
            &[ProbeResult::status("a", 500), ProbeResult::status("b", 200)],
        )
        .unwrap();
    let held = engine.pick_endpoint("c").unwrap();
    assert_eq!(held.destination().id(), "b");

    // Reload: `A` (same id, other case, same address) survives, `b` is removed, `n` is new.
    // (An address change under the same id is another instance: see
    // `tests/discovery/destination_sets.rs`.)
    engine
        .apply_config(
            Config::new().cluster(
                ClusterConfig::new("C")
                    .active(ActiveHealthCheckConfig::enabled())
                    .metadata("ConsecutiveFailuresHealthPolicy.Threshold", "1")
                    .destination(DestinationConfig::new("A", "http://127.0.0.1:1/"))
                    .destination(DestinationConfig::new("n", "http://127.0.0.1:12/")),
            ),
        )
        .unwrap();
    let status = engine.status();
    let c = status.cluster("c").unwrap();
    assert_eq!(c.id, "C", "the new spelling is shown");
    let ids: Vec<&str> = c.destinations.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["A", "n"]);
    let a = c.destination("a").unwrap();
    assert_eq!(
        a.active,
        HealthState::Unhealthy,
        "health survives the reload"
    );
    assert_eq!(a.address, "http://127.0.0.1:1/");
    assert_eq!(c.destination("n").unwrap().active, HealthState::Unknown);
    // `n` is the only usable one.
    assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "n");

    // The consecutive-failure counter survives too: one success resets it, so a single failure
    // (threshold 1) is needed again.
    engine
        .report_probe_round("c", &[ProbeResult::status("a", 200)])
        .unwrap();
    assert_eq!(
        engine.status().clusters[0].destination("a").unwrap().active,
        HealthState::Healthy
    );

    // The removed destination's handle still works and its drop is harmless.
    held.report(RequestOutcome::Success);
    drop(held);
}

#[test]
fn in_flight_counts_survive_a_reload() {
    let engine = Engine::new(Config::new().cluster(two_destinations("c"))).unwrap();
    let h = engine.pick_endpoint("c").unwrap();
    let id = h.destination().id().to_string();
    engine
        .apply_config(Config::new().cluster(two_destinations("c")))
        .unwrap();
    let status = engine.status();
    assert_eq!(status.clusters[0].destination(&id).unwrap().in_flight, 1);
    drop(h);
    let status = engine.status();
    assert_eq!(status.clusters[0].destination(&id).unwrap().in_flight, 0);
}

/// Cluster ids are found case-insensitively (.NET `OrdinalIgnoreCase`) whether the engine scans
/// a few clusters or hashes many, and a reload between the two sizes keeps finding them.
#[test]
fn cluster_ids_are_found_case_insensitively_in_small_and_large_tables() {
    fn config(n: usize) -> Config {
        let ids = ["Payments", "ÜberCluster", "Ωmega", "orders-v2"];
        let mut config = Config::new();
        for (k, id) in ids
            .iter()
            .map(|id| id.to_string())
            .chain((0..n.saturating_sub(ids.len())).map(|i| format!("Extra{i}")))
            .enumerate()
        {
            config = config.cluster(ClusterConfig::new(id).destination(DestinationConfig::new(
                "d",
                format!("http://127.0.0.1:{}/", 1000 + k),
            )));
        }
        config
    }
    fn check(engine: &Engine, n: usize) {
        let port = |cluster: &str| engine.pick_endpoint(cluster).unwrap().address().port();
        for (spelling, port_expected) in [
            ("Payments", 1000),
            ("payments", 1000),
            ("PAYMENTS", 1000),
            ("ÜberCluster", 1001),
            ("überCLUSTER", 1001),
            ("ωMEGA", 1002),
            ("ORDERS-V2", 1003),
        ] {
            assert_eq!(
                port(spelling),
                Some(port_expected),
                "{spelling} with {n} clusters"
            );
        }
        if n > 4 {
            assert_eq!(port("extra0"), Some(1004));
            assert_eq!(port(&format!("EXTRA{}", n - 5)), Some(1000 + n as u16 - 1));
        }
        for unknown in [
            "Payment",
            "paymentsx",
            "",
            "Uber",
            "ÜberClusterX",
            "orders_v2",
        ] {
            assert!(
                matches!(
                    engine.pick_endpoint(unknown),
                    Err(healthpick::PickError::UnknownCluster { .. })
                ),
                "{unknown:?} with {n} clusters"
            );
        }
    }
    let engine = Engine::new(config(4)).unwrap();
    check(&engine, 4);
    engine.apply_config(config(40)).unwrap();
    check(&engine, 40);
    engine.apply_config(config(8)).unwrap();
    check(&engine, 8);
    engine.apply_config(config(9)).unwrap();
    check(&engine, 9);
}

#[test]
fn a_bad_reload_changes_nothing() {
    let engine = Engine::new(Config::new().cluster(two_destinations("c"))).unwrap();
    let before = format!("{:?}", engine.status().clusters);
    let err = engine
        .load_json(r#"{"Clusters": {"c": {"LoadBalancingPolicy": "Nope", "Destinations": {"x": {"Address": "nope"}}}}}"#)
        .unwrap_err();
    assert_eq!(err.errors.len(), 2, "{err}");
    assert_eq!(before, format!("{:?}", engine.status().clusters));
    assert!(["a", "b"].contains(&engine.pick_endpoint("c").unwrap().destination().id()));
}

#[test]
fn a_removed_cluster_is_gone() {
    let engine = Engine::new(
        Config::new()
            .cluster(two_destinations("keep"))
            .cluster(two_destinations("drop")),
    )
    .unwrap();
    engine
        .apply_config(Config::new().cluster(two_destinations("keep")))
        .unwrap();
    assert_eq!(engine.cluster_ids(), ["keep"]);
    assert!(engine.pick_endpoint("drop").is_err());
}

#[test]
fn events_report_every_change_with_from_to_and_reason() {
    let engine = Engine::new(Config::new().cluster(two_destinations("c"))).unwrap();
    let mut rx = engine.subscribe();
    engine
        .report_probe_round(
            "c",
            &[
                ProbeResult::status("a", 200),
                ProbeResult::error("b", "connection refused"),
            ],
        )
        .unwrap();
    let events = drain(&mut rx);
    let kinds: Vec<&HealthEventKind> = events.iter().map(|e| &e.kind).collect();
    assert_eq!(kinds.len(), 3, "{kinds:#?}");
    match kinds[0] {
        HealthEventKind::HealthChanged {
            destination,
            part,
            from,
            to,
            reason,
        } => {
            assert_eq!(&**destination, "a");
            assert_eq!(*part, HealthPart::Active);
            assert_eq!(*from, PartValue::State(HealthState::Unknown));
            assert_eq!(*to, PartValue::State(HealthState::Healthy));
            assert_eq!(
                *reason,
                Reason::Probe {
                    result: "HTTP 200".into(),
                    consecutive_failures: 0
                }
            );
        }
        other => panic!("{other:?}"),
    }
    match kinds[1] {
        HealthEventKind::HealthChanged {
            destination,
            to,
            reason,
            ..
        } => {
            assert_eq!(&**destination, "b");
            assert_eq!(*to, PartValue::State(HealthState::Unhealthy));
            assert!(
                reason.to_string().contains("connection refused"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    match kinds[2] {
        HealthEventKind::AvailabilityChanged { available, panic } => {
            assert_eq!(available.iter().map(|s| &**s).collect::<Vec<_>>(), ["a"]);
            assert!(!panic);
        }
        other => panic!("{other:?}"),
    }
    assert!(events.iter().all(|e| &*e.cluster == "c"));

    // Nothing changes: no events.
    engine
        .report_probe_round("c", &[ProbeResult::status("a", 200)])
        .unwrap();
    assert!(drain(&mut rx).is_empty());

    // Panic entry and exit are availability events with the flag.
    engine
        .report_probe_round("c", &[ProbeResult::status("a", 500)])
        .unwrap();
    let events = drain(&mut rx);
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(HealthEventKind::AvailabilityChanged { panic: true, available }) if available.len() == 2
    ));
    engine
        .report_probe_round("c", &[ProbeResult::status("b", 200)])
        .unwrap();
    let events = drain(&mut rx);
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(HealthEventKind::AvailabilityChanged { panic: false, available }) if available.len() == 1
    ));
}

// ---- custom policies of every kind ------------------------------------------------------------

/// Passive: any 5xx ejects at once.
struct NoFiveHundreds;
impl PassiveHealthPolicy for NoFiveHundreds {
    fn request_completed(
        &self,
        ctx: &PassivePolicyContext<'_>,
        outcome: RequestOutcome,
    ) -> Option<PassiveVerdict> {
        let bad = matches!(outcome, RequestOutcome::Status(s) if s >= 500);
        Some(PassiveVerdict {
            health: if bad {
                HealthState::Unhealthy
            } else {
                HealthState::Healthy
            },
            reason: Reason::Custom(format!("{} saw {outcome:?}", ctx.destination().id()).into()),
            reactivation_after: Duration::from_secs(5),
        })
    }
}

/// Available: only destinations whose metadata says `role=primary`, health ignored.
struct PrimariesOnly;
impl AvailableDestinationsPolicy for PrimariesOnly {
    fn available(
        &self,
        _ctx: &AvailablePolicyContext<'_>,
        all: &[Arc<Destination>],
    ) -> Availability {
        Availability {
            destinations: all
                .iter()
                .filter(|d| d.attributes().metadata().get("role") == Some("primary"))
                .cloned()
                .collect(),
            panic: false,
        }
    }
}

/// Load balancing: always the last of the group.
struct Last;
impl LoadBalancingPolicy for Last {
    fn prepare(&self, _group: &Group) -> Picker {
        Picker::custom(|view: &PickView<'_>| view.len() - 1)
    }
}

#[test]
fn custom_policies_of_every_kind_are_first_class() {
    let clock = Arc::new(ManualClock::new());
    let engine = Engine::builder()
        .clock(clock.clone())
        .active_policy("FirstStrike", FirstStrike)
        .passive_policy("NoFiveHundreds", NoFiveHundreds)
        .available_destinations_policy("PrimariesOnly", PrimariesOnly)
        .load_balancing_policy("Last", Last)
        .build();
    engine
        .load_json(
            r#"{"Clusters": {
              "roles": {
                "LoadBalancingPolicy": "last",
                "HealthCheck": { "AvailableDestinationsPolicy": "PRIMARIESONLY" },
                "Destinations": {
                  "p1": { "Address": "http://127.0.0.1:1/", "Metadata": { "role": "primary" } },
                  "s1": { "Address": "http://127.0.0.1:2/", "Metadata": { "role": "standby" } },
                  "p2": { "Address": "http://127.0.0.1:3/", "Metadata": { "role": "primary" } } } },
              "checks": {
                "LoadBalancingPolicy": "FirstAlphabetical",
                "HealthCheck": {
                  "Active": { "Enabled": true, "Policy": "firststrike" },
                  "Passive": { "Enabled": true, "Policy": "nofivehundreds" } },
                "Metadata": { "ConsecutiveFailuresHealthPolicy.Threshold": "5" },
                "Destinations": {
                  "x": { "Address": "http://127.0.0.1:4/" },
                  "y": { "Address": "http://127.0.0.1:5/" } } } } }"#,
        )
        .unwrap();

    // Available + load balancing: standby excluded, last of [p1, p2].
    assert_eq!(
        engine.pick_endpoint("roles").unwrap().destination().id(),
        "p2"
    );
    let status = engine.status();
    assert!(
        !status
            .cluster("roles")
            .unwrap()
            .destination("s1")
            .unwrap()
            .available
    );

    // Active: one failure ejects despite threshold 5.
    engine
        .report_probe_round("checks", &[ProbeResult::status("x", 500)])
        .unwrap();
    assert_eq!(
        engine.pick_endpoint("checks").unwrap().destination().id(),
        "y"
    );

    // Passive: a 503 ejects y; with x and y both out, HealthyOrPanic panics.
    engine
        .pick_endpoint("checks")
        .unwrap()
        .report(RequestOutcome::Status(503));
    let status = engine.status();
    let checks = status.cluster("checks").unwrap();
    assert_eq!(
        checks.destination("y").unwrap().passive,
        HealthState::Unhealthy
    );
    assert!(checks.panic);
    assert!(checks
        .destination("y")
        .unwrap()
        .last_reason
        .as_deref()
        .unwrap()
        .contains("y saw Status(503)"));
    // The custom reactivation period is honoured.
    assert_eq!(engine.next_timer_due(), Some(Duration::from_secs(5)));
    clock.advance(Duration::from_secs(5));
    assert_eq!(engine.fire_due_timers(), 1);
    assert_eq!(
        engine.pick_endpoint("checks").unwrap().destination().id(),
        "y"
    );

    // Unknown names are errors listing what is known, custom ones included.
    let err = engine
        .load_json(r#"{"Clusters": {"c": {"LoadBalancingPolicy": "Fastest"}}}"#)
        .unwrap_err();
    assert!(err.errors[0].message.contains("Last"), "{err}");
}

// ---- timers on tokio's clock ------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn reactivation_fires_by_itself_on_tokio_time() {
    let engine = Engine::new(
        Config::new().cluster(
            ClusterConfig::new("c")
                .passive(
                    PassiveHealthCheckConfig::enabled()
                        .reactivation_period(Duration::from_secs(90)),
                )
                .metadata("TransportFailureRateHealthPolicy.RateLimit", "0.5")
                .destination(DestinationConfig::new("a", "http://127.0.0.1:1/"))
                .destination(DestinationConfig::new("b", "http://127.0.0.1:2/")),
        ),
    )
    .unwrap();
    let mut rx = engine.subscribe();
    let held = engine.pick_endpoint("c").unwrap();
    let id = held.destination().id().to_string();
    for _ in 0..10 {
        held.report(RequestOutcome::TransportFailure);
    }
    let passive = |engine: &Engine| {
        engine.status().clusters[0]
            .destination(&id)
            .unwrap()
            .passive
    };
    assert_eq!(passive(&engine), HealthState::Unhealthy);

    tokio::time::sleep(Duration::from_secs(89)).await;
    assert_eq!(
        passive(&engine),
        HealthState::Unhealthy,
        "not before the period"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        passive(&engine),
        HealthState::Unknown,
        "reactivated by the timer task"
    );

    let reasons: Vec<Reason> = drain(&mut rx)
        .into_iter()
        .filter_map(|e| match e.kind {
            HealthEventKind::HealthChanged { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert!(
        matches!(reasons.last(), Some(Reason::Reactivation)),
        "{reasons:?}"
    );
    drop(held);
}

/// A load balancer that counts its preparations and picks the destination it prepared.
struct CountingPrepare {
    prepared: Arc<std::sync::atomic::AtomicUsize>,
}

impl LoadBalancingPolicy for CountingPrepare {
    fn prepare(&self, group: &Group) -> Picker {
        self.prepared
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // The last destination of the group, found once.
        let chosen = group.len().saturating_sub(1);
        Picker::custom(move |_: &PickView<'_>| chosen)
    }
}

#[test]
fn a_load_balancer_prepares_once_per_change_of_its_group_never_per_pick() {
    let prepared = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let engine = Engine::builder()
        .load_balancing_policy(
            "Counting",
            CountingPrepare {
                prepared: prepared.clone(),
            },
        )
        .build();
    engine
        .load_json(
            r#"{"Clusters": {"c": {"LoadBalancingPolicy": "Counting",
                "HealthCheck": {"Active": {"Enabled": true}},
                "Metadata": {"ConsecutiveFailuresHealthPolicy.Threshold": "1"},
                "Destinations": {
                    "a": {"Address": "http://127.0.0.1:1/"},
                    "b": {"Address": "http://127.0.0.1:2/"},
                    "c": {"Address": "http://127.0.0.1:3/"}}}}}"#,
        )
        .unwrap();
    let count = || prepared.load(std::sync::atomic::Ordering::SeqCst);
    let after_load = count();
    assert!(after_load >= 1);
    for _ in 0..1000 {
        assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "c");
    }
    assert_eq!(count(), after_load, "no preparation on the pick path");
    // A health change rebuilds the group once and prepares it once.
    engine
        .report_probe_round("c", &[ProbeResult::status("c", 500)])
        .unwrap();
    assert_eq!(count(), after_load + 1);
    assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "b");
    // A retry picks from its own group, prepared for it.
    let retry = engine.pick_endpoint_excluding("c", &["b"]).unwrap();
    assert_eq!(retry.destination().id(), "a");
}

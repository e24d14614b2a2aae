//! Health policies through the engine, on a manual clock: ConsecutiveFailures,
//! TransportFailureRate and reactivation, HealthyAndUnknown / HealthyOrPanic.

use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig, HealthPolicyOptions,
    PassiveHealthCheckConfig,
};
use healthpick::{
    Engine, HealthState, ManualClock, PickError, ProbeResult, ReportedHealth, RequestOutcome,
};

fn engine_with(config: Config) -> (Engine, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let engine = Engine::builder()
        .clock(clock.clone())
        .seed(1)
        .build_with(config)
        .expect("valid config");
    (engine, clock)
}

fn active_cluster(threshold: &str, n: usize) -> Config {
    let mut c = ClusterConfig::new("c0")
        .active(ActiveHealthCheckConfig::enabled())
        .metadata("ConsecutiveFailuresHealthPolicy.Threshold", threshold);
    for i in 0..n {
        c = c.destination(DestinationConfig::new(
            format!("d{i}"),
            format!("http://127.0.0.1:{}/", 20000 + i),
        ));
    }
    Config::new().cluster(c)
}

fn active_of(engine: &Engine, dest: &str) -> HealthState {
    engine.status().clusters[0]
        .destination(dest)
        .expect("destination")
        .active
}

fn passive_of(engine: &Engine, dest: &str) -> HealthState {
    engine.status().clusters[0]
        .destination(dest)
        .expect("destination")
        .passive
}

#[test]
fn consecutive_failures_threshold_3_worked_sequence() {
    let (engine, _) = engine_with(active_cluster("3", 1));
    let seq = [
        (false, HealthState::Unknown),
        (false, HealthState::Unknown),
        (true, HealthState::Healthy),
        (false, HealthState::Healthy),
        (false, HealthState::Healthy),
        (false, HealthState::Unhealthy),
        (false, HealthState::Unhealthy),
        (true, HealthState::Healthy),
    ];
    for (i, (ok, expected)) in seq.into_iter().enumerate() {
        let result = if ok {
            ProbeResult::status("d0", 200)
        } else {
            ProbeResult::status("d0", 500)
        };
        engine.report_probe_round("c0", &[result]).unwrap();
        assert_eq!(active_of(&engine, "d0"), expected, "after probe {}", i + 1);
    }
}

#[test]
fn consecutive_failures_default_threshold_is_two_and_keeps_previous_state() {
    let (engine, _) = engine_with(
        Config::new().cluster(
            ClusterConfig::new("c0")
                .active(ActiveHealthCheckConfig::enabled())
                .destination(DestinationConfig::new("d0", "http://127.0.0.1:1/")),
        ),
    );
    engine
        .report_probe_round("c0", &[ProbeResult::status("d0", 200)])
        .unwrap();
    engine
        .report_probe_round("c0", &[ProbeResult::error("d0", "connection refused")])
        .unwrap();
    assert_eq!(
        active_of(&engine, "d0"),
        HealthState::Healthy,
        "1 < 2 keeps Healthy"
    );
    engine
        .report_probe_round("c0", &[ProbeResult::error("d0", "connection refused")])
        .unwrap();
    assert_eq!(active_of(&engine, "d0"), HealthState::Unhealthy);
    let status = engine.status();
    let d0 = status.clusters[0].destination("d0").unwrap();
    assert!(d0
        .last_error
        .as_deref()
        .unwrap()
        .contains("connection refused"));
    assert!(d0
        .last_reason
        .as_deref()
        .unwrap()
        .contains("2 consecutive failures"));
}

#[test]
fn fractional_threshold_means_the_next_whole_failure() {
    let (engine, _) = engine_with(active_cluster("2.5", 1));
    for expected in [
        HealthState::Unknown,
        HealthState::Unknown,
        HealthState::Unhealthy,
    ] {
        engine
            .report_probe_round("c0", &[ProbeResult::status("d0", 503)])
            .unwrap();
        assert_eq!(active_of(&engine, "d0"), expected);
    }
}

#[test]
fn threshold_zero_or_negative_ejects_on_the_first_failure() {
    for t in ["0", "-1"] {
        let (engine, _) = engine_with(active_cluster(t, 1));
        engine
            .report_probe_round("c0", &[ProbeResult::status("d0", 500)])
            .unwrap();
        assert_eq!(
            active_of(&engine, "d0"),
            HealthState::Unhealthy,
            "threshold {t}"
        );
    }
}

#[test]
fn unparsable_threshold_falls_back_to_the_default_of_two() {
    let (engine, _) = engine_with(active_cluster("abc", 1));
    engine
        .report_probe_round("c0", &[ProbeResult::status("d0", 500)])
        .unwrap();
    assert_eq!(active_of(&engine, "d0"), HealthState::Unknown);
    engine
        .report_probe_round("c0", &[ProbeResult::status("d0", 500)])
        .unwrap();
    assert_eq!(active_of(&engine, "d0"), HealthState::Unhealthy);
}

#[test]
fn health_payload_sets_reported_and_unhealthy_payload_is_a_failed_probe() {
    let (engine, _) = engine_with(active_cluster("1", 2));
    engine
        .report_probe_round(
            "c0",
            &[
                ProbeResult::status("d0", 200).with_payload(ReportedHealth::Degraded),
                ProbeResult::status("d1", 200).with_payload(ReportedHealth::Unhealthy),
            ],
        )
        .unwrap();
    let status = engine.status();
    let c = &status.clusters[0];
    assert_eq!(c.destination("d0").unwrap().active, HealthState::Healthy);
    assert_eq!(
        c.destination("d0").unwrap().reported,
        Some(ReportedHealth::Degraded)
    );
    assert_eq!(c.destination("d1").unwrap().active, HealthState::Unhealthy);
    assert_eq!(
        c.destination("d1").unwrap().reported,
        Some(ReportedHealth::Unhealthy)
    );
    // A non-2xx or a 2xx without payload clears the reported part.
    engine
        .report_probe_round(
            "c0",
            &[
                ProbeResult::status("d0", 200),
                ProbeResult::status("d1", 503).with_payload(ReportedHealth::Healthy),
            ],
        )
        .unwrap();
    let status = engine.status();
    let c = &status.clusters[0];
    assert_eq!(c.destination("d0").unwrap().reported, None);
    assert_eq!(c.destination("d1").unwrap().reported, None);
    assert_eq!(c.destination("d1").unwrap().active, HealthState::Unhealthy);
}

#[test]
fn a_round_only_touches_the_destinations_in_it_and_drops_unknown_ids() {
    let (engine, _) = engine_with(active_cluster("1", 2));
    let applied = engine
        .report_probe_round(
            "c0",
            &[
                ProbeResult::status("D0", 500),
                ProbeResult::status("gone", 500),
            ],
        )
        .unwrap();
    assert_eq!(
        applied, 1,
        "ids are case-insensitive; unknown ids are dropped"
    );
    assert_eq!(active_of(&engine, "d0"), HealthState::Unhealthy);
    assert_eq!(active_of(&engine, "d1"), HealthState::Unknown);
    assert!(matches!(
        engine.report_probe_round("nope", &[]),
        Err(PickError::UnknownCluster { .. })
    ));
}

// ---- TransportFailureRate -------------------------------------------------------------------

fn passive_config(window_secs: u64, min_total: u64, limit: &str, period: Option<u64>) -> Config {
    let mut passive = PassiveHealthCheckConfig::enabled();
    if let Some(p) = period {
        passive = passive.reactivation_period(Duration::from_secs(p));
    }
    Config::new()
        .health_policy_options(HealthPolicyOptions {
            detection_window_size: Duration::from_secs(window_secs),
            minimal_total_count_threshold: min_total,
            ..HealthPolicyOptions::default()
        })
        .cluster(
            ClusterConfig::new("c0")
                .passive(passive)
                .available_destinations_policy("HealthyAndUnknown")
                .metadata("TransportFailureRateHealthPolicy.RateLimit", limit)
                .destination(DestinationConfig::new("d0", "http://127.0.0.1:1/"))
                .destination(DestinationConfig::new("d1", "http://127.0.0.1:2/")),
        )
}

/// Reports one outcome for `dest` at time `at` (seconds).
fn outcome(engine: &Engine, clock: &ManualClock, at: f64, dest: &str, o: RequestOutcome) {
    clock.set(Duration::from_secs_f64(at));
    let pick = loop {
        // d0 and d1 alternate under the seeded default policy; pick until we get `dest`.
        let p = engine.pick_endpoint("c0").expect("pick");
        if p.destination().id() == dest {
            break p;
        }
    };
    pick.report(o);
}

#[test]
fn transport_failure_rate_window_30s_min_1_limit_half() {
    let (engine, clock) = engine_with(passive_config(30, 1, "0.5", None));
    use RequestOutcome::*;
    // t=0: S -> 0/1 -> Healthy
    outcome(&engine, &clock, 0.0, "d0", Success);
    assert_eq!(passive_of(&engine, "d0"), HealthState::Healthy);
    // t=0.2: HTTP 503 is not a failure -> 0/2
    outcome(&engine, &clock, 0.2, "d0", Status(503));
    assert_eq!(passive_of(&engine, "d0"), HealthState::Healthy);
    // t=0.4: F -> 1/3 < 0.5
    outcome(&engine, &clock, 0.4, "d0", TransportFailure);
    assert_eq!(passive_of(&engine, "d0"), HealthState::Healthy);
    // t=0.6: F -> 2/4 = 0.5, equal to the limit -> Unhealthy
    outcome(&engine, &clock, 0.6, "d1", Success); // other destination, own history
    assert_eq!(passive_of(&engine, "d1"), HealthState::Healthy);
    clock.set(Duration::from_secs_f64(0.6));
    {
        // d0 is still available (Healthy), pick it by hand.
        let p = loop {
            let p = engine.pick_endpoint("c0").unwrap();
            if p.destination().id() == "d0" {
                break p;
            }
        };
        p.report(TransportFailure);
    }
    assert_eq!(passive_of(&engine, "d0"), HealthState::Unhealthy);
    // Ejected: every pick now goes to d1.
    for _ in 0..20 {
        assert_eq!(engine.pick_endpoint("c0").unwrap().destination().id(), "d1");
    }
    // Reactivation = max(60 s default, 30 s window) after 0.6 s.
    assert_eq!(engine.next_timer_due(), Some(Duration::from_secs_f64(60.6)));
}

#[test]
fn buckets_expire_only_when_older_than_the_window() {
    // Bucket stamps: first event at 0 -> bucket closes at 1.0. A failure at 0 with min total 2.
    let (engine, clock) = engine_with(passive_config(30, 2, "0.5", None));
    use RequestOutcome::*;
    outcome(&engine, &clock, 0.0, "d0", TransportFailure); // 1/1 but below min total -> 0
    assert_eq!(passive_of(&engine, "d0"), HealthState::Healthy);
    outcome(&engine, &clock, 0.5, "d0", Success); // 1/2 = 0.5 -> Unhealthy
    assert_eq!(passive_of(&engine, "d0"), HealthState::Unhealthy);
    // Let it come back, then check the window arithmetic with d0's history.
    clock.set(Duration::from_secs(61));
    engine.fire_due_timers();
    assert_eq!(passive_of(&engine, "d0"), HealthState::Unknown);
    // At 61 the old bucket (stamp 1.0) is 60 s old > 30 s: dropped; 1 new success -> 0/1 -> 0.
    outcome(&engine, &clock, 61.0, "d0", Success);
    assert_eq!(passive_of(&engine, "d0"), HealthState::Healthy);
}

#[test]
fn reactivation_returns_passive_to_unknown_and_a_remark_does_not_move_it() {
    let (engine, clock) = engine_with(passive_config(10, 1, "0.5", Some(20)));
    use RequestOutcome::*;
    outcome(&engine, &clock, 0.0, "d0", TransportFailure); // 1/1 -> Unhealthy, due 0 + max(20,10)
    assert_eq!(passive_of(&engine, "d0"), HealthState::Unhealthy);
    assert_eq!(engine.next_timer_due(), Some(Duration::from_secs(20)));

    clock.set(Duration::from_secs(5));
    assert_eq!(engine.fire_due_timers(), 0, "not due yet");
    clock.set(Duration::from_secs(20));
    assert_eq!(engine.fire_due_timers(), 1);
    assert_eq!(passive_of(&engine, "d0"), HealthState::Unknown);
    assert_eq!(engine.next_timer_due(), None);

    // The history is kept, but at t=20 the only bucket (stamp 1.0) is 19 s old, outside the
    // 10 s window: a success now makes it Healthy.
    outcome(&engine, &clock, 20.0, "d0", Success);
    assert_eq!(passive_of(&engine, "d0"), HealthState::Healthy);
}

#[test]
fn remark_while_reactivation_pending_keeps_the_first_due_time() {
    let (engine, clock) = engine_with(passive_config(60, 1, "0.5", Some(60)));
    use RequestOutcome::*;
    // Hold a handle to d0 so we can report to it while it is ejected.
    let held = loop {
        let p = engine.pick_endpoint("c0").unwrap();
        if p.destination().id() == "d0" {
            break p;
        }
    };
    clock.set(Duration::from_secs(0));
    held.report(TransportFailure); // 1/1 -> Unhealthy, due 60
    assert_eq!(engine.next_timer_due(), Some(Duration::from_secs(60)));
    clock.set(Duration::from_secs(2));
    held.report(Success); // 1/2 = 0.5 -> still Unhealthy
    held.report(Success); // 1/3 -> Healthy
    assert_eq!(passive_of(&engine, "d0"), HealthState::Healthy);
    clock.set(Duration::from_secs(10));
    held.report(TransportFailure); // 2/4 -> Unhealthy again; the pending due time stands
    held.report(TransportFailure);
    assert_eq!(passive_of(&engine, "d0"), HealthState::Unhealthy);
    assert_eq!(engine.next_timer_due(), Some(Duration::from_secs(60)));
    clock.set(Duration::from_secs(60));
    assert_eq!(engine.fire_due_timers(), 1);
    assert_eq!(passive_of(&engine, "d0"), HealthState::Unknown);
    // History kept: failures still inside the 60 s window eject it again on the next outcome.
    clock.set(Duration::from_secs(61));
    held.report(Success);
    assert_eq!(passive_of(&engine, "d0"), HealthState::Unhealthy);
    drop(held);
}

#[test]
fn active_and_passive_are_independent() {
    let config = Config::new().cluster(
        ClusterConfig::new("c0")
            .active(ActiveHealthCheckConfig::enabled())
            .passive(PassiveHealthCheckConfig::enabled())
            .metadata("TransportFailureRateHealthPolicy.RateLimit", "0.1")
            .destination(DestinationConfig::new("d0", "http://127.0.0.1:1/"))
            .destination(DestinationConfig::new("d1", "http://127.0.0.1:2/")),
    );
    let (engine, _clock) = engine_with(config);
    let held = loop {
        let p = engine.pick_endpoint("c0").unwrap();
        if p.destination().id() == "d0" {
            break p;
        }
    };
    for _ in 0..10 {
        held.report(RequestOutcome::TransportFailure);
    }
    assert_eq!(passive_of(&engine, "d0"), HealthState::Unhealthy);
    engine
        .report_probe_round(
            "c0",
            &[
                ProbeResult::status("d0", 200),
                ProbeResult::status("d1", 200),
            ],
        )
        .unwrap();
    assert_eq!(active_of(&engine, "d0"), HealthState::Healthy);
    assert_eq!(
        passive_of(&engine, "d0"),
        HealthState::Unhealthy,
        "a probe does not lift passive"
    );
    for _ in 0..20 {
        assert_eq!(engine.pick_endpoint("c0").unwrap().destination().id(), "d1");
    }
}

/// When active checks see a destination come back (Unhealthy to Healthy), the
/// failure-rate history of its outage is cleared, so its first successful request after a
/// reactivation does not eject it again (YARP keeps the history: metadata
/// `HealthCheck.ResetPassiveOnRecovery: false`). Reactivation itself is unchanged.
#[test]
fn an_active_recovery_clears_the_failure_rate_history_unless_switched_off() {
    for reset in [None, Some("false")] {
        let mut cluster = ClusterConfig::new("c0")
            .active(ActiveHealthCheckConfig::enabled())
            .passive(PassiveHealthCheckConfig::enabled())
            .destination(DestinationConfig::new("d0", "http://127.0.0.1:1/"))
            .destination(DestinationConfig::new("d1", "http://127.0.0.1:2/"));
        if let Some(value) = reset {
            cluster = cluster.metadata("HealthCheck.ResetPassiveOnRecovery", value);
        }
        let (engine, clock) = engine_with(Config::new().cluster(cluster));
        let probe = |d0: u16| {
            engine
                .report_probe_round(
                    "c0",
                    &[
                        ProbeResult::status("d0", d0),
                        ProbeResult::status("d1", 200),
                    ],
                )
                .unwrap();
        };
        probe(200);
        clock.set(Duration::from_secs(1));
        for _ in 0..20 {
            engine
                .report_outcome("c0", "d0", RequestOutcome::TransportFailure)
                .unwrap();
        }
        assert_eq!(passive_of(&engine, "d0"), HealthState::Unhealthy);
        probe(503);
        probe(503);
        assert_eq!(active_of(&engine, "d0"), HealthState::Unhealthy);
        // Reactivated after 60 s while still down: passive Unknown, active keeps it out.
        clock.set(Duration::from_secs(61));
        assert_eq!(engine.fire_due_timers(), 1);
        assert_eq!(passive_of(&engine, "d0"), HealthState::Unknown);
        // It comes back: one good probe, then its first request (the failures are 60 s old,
        // not older than the 60 s window).
        clock.set(Duration::from_secs(61) + Duration::from_millis(500));
        probe(200);
        assert_eq!(active_of(&engine, "d0"), HealthState::Healthy);
        engine
            .report_outcome("c0", "d0", RequestOutcome::Success)
            .unwrap();
        match reset {
            None => assert_eq!(
                passive_of(&engine, "d0"),
                HealthState::Healthy,
                "ejected again by the outage's failures"
            ),
            Some(_) => assert_eq!(
                passive_of(&engine, "d0"),
                HealthState::Unhealthy,
                "switched off: YARP keeps the history"
            ),
        }
    }
}

// ---- Available destinations -----------------------------------------------------------------

#[test]
fn healthy_and_unknown_fails_picks_when_everything_is_unhealthy() {
    let mut config = active_cluster("1", 2);
    config = Config::new().cluster(
        config.clusters()[0]
            .clone()
            .available_destinations_policy("HealthyAndUnknown"),
    );
    let (engine, _) = engine_with(config);
    engine
        .report_probe_round(
            "c0",
            &[
                ProbeResult::status("d0", 500),
                ProbeResult::status("d1", 500),
            ],
        )
        .unwrap();
    let err = engine.pick_endpoint("c0").unwrap_err();
    assert_eq!(
        err,
        PickError::NoAvailableDestinations {
            cluster: "c0".into()
        }
    );
    assert!(err.to_string().contains("c0"));
}

#[test]
fn healthy_or_panic_uses_everything_when_nothing_is_healthy_and_recovers() {
    let (engine, _) = engine_with(active_cluster("1", 2));
    engine
        .report_probe_round(
            "c0",
            &[
                ProbeResult::status("d0", 500),
                ProbeResult::status("d1", 500),
            ],
        )
        .unwrap();
    let best = engine.best_endpoints("c0").unwrap();
    assert!(best.panic);
    assert_eq!(best.status, healthpick::HealthClass::Unhealthy);
    assert_eq!(best.destinations.len(), 2);
    engine
        .report_probe_round("c0", &[ProbeResult::status("d1", 200)])
        .unwrap();
    let best = engine.best_endpoints("c0").unwrap();
    assert!(!best.panic);
    assert_eq!(best.destinations.len(), 1);
    assert_eq!(best.destinations[0].id(), "d1");
}

#[test]
fn disabled_checks_do_not_exclude() {
    // Active disabled: an active Unhealthy left from an earlier config does not exclude.
    let (engine, _) = engine_with(active_cluster("1", 2));
    engine
        .report_probe_round("c0", &[ProbeResult::status("d0", 500)])
        .unwrap();
    assert_eq!(engine.best_endpoints("c0").unwrap().destinations.len(), 1);
    engine
        .apply_config(
            Config::new().cluster(
                ClusterConfig::new("c0")
                    .destination(DestinationConfig::new("d0", "http://127.0.0.1:20000/"))
                    .destination(DestinationConfig::new("d1", "http://127.0.0.1:20001/")),
            ),
        )
        .unwrap();
    assert_eq!(
        active_of(&engine, "d0"),
        HealthState::Unhealthy,
        "state kept"
    );
    assert_eq!(engine.best_endpoints("c0").unwrap().destinations.len(), 2);
}

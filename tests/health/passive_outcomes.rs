//! Outcomes reported to passive health checks, through the engine: whatever path an outcome
//! takes inside (a healthy destination's successes are counted without a lock while they cannot
//! change its verdict), the passive health and every change's counts are exactly those of
//! YARP's TransportFailureRate applied to each outcome in turn.

use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{
    ClusterConfig, DestinationConfig, HealthPolicyOptions, PassiveHealthCheckConfig,
};
use healthpick::policy::OutcomeWindow;
use healthpick::{
    Config, Engine, HealthEvent, HealthEventKind, HealthPart, HealthState, ManualClock, PartValue,
    Reason, RequestOutcome,
};
use proptest::prelude::*;

/// What a step of the run does.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// The clock moves on by this many milliseconds, then one request reports this outcome.
    Outcome(u64, RequestOutcome),
    /// The configuration is applied again with this rate limit (in percent).
    Reload(u32),
}

fn step() -> impl Strategy<Value = Step> {
    let outcome = prop_oneof![
        12 => Just(RequestOutcome::Success),
        3 => Just(RequestOutcome::TransportFailure),
        1 => Just(RequestOutcome::Status(503)),
        1 => Just(RequestOutcome::Cancelled),
    ];
    prop_oneof![
        30 => (prop_oneof![4 => 0u64..20, 1 => 0u64..1_500], outcome)
            .prop_map(|(ms, o)| Step::Outcome(ms, o)),
        1 => (5u32..95).prop_map(Step::Reload),
    ]
}

fn config(limit_percent: u32) -> Config {
    Config::new().cluster(
        ClusterConfig::new("c")
            .passive(
                // Longer than any run: no reactivation interferes.
                PassiveHealthCheckConfig::enabled().reactivation_period(Duration::from_secs(3600)),
            )
            .metadata(
                "TransportFailureRateHealthPolicy.RateLimit",
                format!("{}", f64::from(limit_percent) / 100.0),
            )
            .destination(DestinationConfig::new("d", "http://127.0.0.1:1/")),
    )
}

/// The passive changes the engine announced: (to, failed, total).
fn passive_changes(
    rx: &mut tokio::sync::broadcast::Receiver<HealthEvent>,
) -> Vec<(HealthState, u64, u64)> {
    let mut out = Vec::new();
    while let Ok(event) = rx.try_recv() {
        if let HealthEventKind::HealthChanged {
            part: HealthPart::Passive,
            to: PartValue::State(to),
            reason: Reason::FailureRate { failed, total, .. },
            ..
        } = event.kind
        {
            out.push((to, failed, total));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn passive_health_follows_every_outcome_exactly(
        steps in proptest::collection::vec(step(), 1..300),
        min_total in 0u64..12,
        first_limit in 5u32..95,
        window_s in 1u64..6,
    ) {
        let window = Duration::from_secs(window_s);
        let clock = Arc::new(ManualClock::new());
        let engine = Engine::builder()
            .clock(clock.clone())
            .health_policy_options(HealthPolicyOptions {
                detection_window_size: window,
                minimal_total_count_threshold: min_total,
                ..HealthPolicyOptions::default()
            })
            .build();
        engine.apply_config(config(first_limit)).unwrap();
        let mut rx = engine.subscribe();

        // The reference: YARP's policy applied to each outcome in turn.
        let mut history = OutcomeWindow::default();
        let mut limit = f64::from(first_limit) / 100.0;
        let mut state = HealthState::Unknown;
        let mut changes = Vec::new();
        let mut elapsed = Duration::ZERO;
        for step in steps {
            match step {
                Step::Reload(percent) => {
                    engine.apply_config(config(percent)).unwrap();
                    limit = f64::from(percent) / 100.0;
                }
                Step::Outcome(ms, outcome) => {
                    clock.advance(Duration::from_millis(ms));
                    elapsed += Duration::from_millis(ms);
                    let handle = engine.pick_endpoint("c").unwrap();
                    handle.report(outcome);
                    drop(handle);
                    let counts = history.record(elapsed, window, outcome.is_transport_failure());
                    let rate = if counts.total == 0 || counts.total < min_total {
                        0.0
                    } else {
                        counts.failed as f64 / counts.total as f64
                    };
                    let verdict = if rate < limit { HealthState::Healthy } else { HealthState::Unhealthy };
                    if verdict != state {
                        state = verdict;
                        changes.push((verdict, counts.failed, counts.total));
                    }
                    let seen = engine.status().clusters[0].destinations[0].passive;
                    prop_assert_eq!(seen, state, "after {:?} at {:?}", outcome, elapsed);
                }
            }
        }
        prop_assert_eq!(passive_changes(&mut rx), changes);
    }
}

/// Long runs of successes on a healthy destination, bucket after bucket, with failures now and
/// then: the counts of each change include every success, however it was counted.
#[test]
fn changes_count_every_success_of_a_long_run() {
    let clock = Arc::new(ManualClock::new());
    let engine = Engine::builder()
        .clock(clock.clone())
        .health_policy_options(HealthPolicyOptions {
            detection_window_size: Duration::from_secs(10),
            minimal_total_count_threshold: 10,
            ..HealthPolicyOptions::default()
        })
        .build();
    engine.apply_config(config(30)).unwrap();
    let mut rx = engine.subscribe();
    let report = |outcome| engine.pick_endpoint("c").unwrap().report(outcome);
    // 5 s of 1,000 successes per second: Healthy from the first one (below the minimum, rate 0).
    for _ in 0..5_000 {
        clock.advance(Duration::from_millis(1));
        report(RequestOutcome::Success);
    }
    // Then failures until 30% of the window failed: 5,000 successes in it, so 2,143 failures.
    let mut failures = 0;
    while engine.status().clusters[0].destinations[0].passive == HealthState::Healthy {
        report(RequestOutcome::TransportFailure);
        failures += 1;
        assert!(failures < 10_000, "never ejected");
    }
    assert_eq!(failures, 2_143);
    assert_eq!(
        passive_changes(&mut rx),
        [
            (HealthState::Healthy, 0, 1),
            (HealthState::Unhealthy, 2_143, 7_143)
        ]
    );
}

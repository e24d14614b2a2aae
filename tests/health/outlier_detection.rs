//! The OutlierDetection passive policy (after Envoy's outlier detection) through the
//! engine, on a manual clock: consecutive 5xx and gateway errors eject, the ejection time grows
//! with repeated ejections and decays back, at most a share of the cluster is ejected at once,
//! it runs beside TransportFailureRate, the simulator shows its decisions, and its settings are
//! validated.

use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{
    self, ClusterConfig, Config, DestinationConfig, PassiveHealthCheckConfig,
    OUTLIER_BASE_EJECTION_TIME_KEY, OUTLIER_CONSECUTIVE_5XX_KEY,
    OUTLIER_CONSECUTIVE_GATEWAY_FAILURE_KEY, OUTLIER_MAX_EJECTION_PERCENT_KEY,
};
use healthpick::simulate::{Scenario, Simulation};
use healthpick::{Engine, HealthState, ManualClock, PolicyRegistry, RequestOutcome};
use serde_json::Value;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Cluster `c` with passive checks by `policy` over `n` destinations `d0..`, and metadata.
fn cluster(policy: &str, n: usize, metadata: &[(&str, &str)]) -> Config {
    let mut c = ClusterConfig::new("c")
        .passive(PassiveHealthCheckConfig::enabled().policy(policy))
        .load_balancing_policy("RoundRobin");
    for (key, value) in metadata {
        c = c.metadata(*key, *value);
    }
    for i in 0..n {
        c = c.destination(DestinationConfig::new(
            format!("d{i}"),
            format!("http://127.0.0.1:{}/", 40000 + i),
        ));
    }
    Config::new().cluster(c)
}

fn engine_with(config: Config) -> (Engine, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let engine = Engine::builder()
        .clock(clock.clone())
        .build_with(config)
        .expect("valid config");
    (engine, clock)
}

fn passive(engine: &Engine, id: &str) -> HealthState {
    engine.status().clusters[0].destination(id).unwrap().passive
}

fn report(engine: &Engine, id: &str, outcome: RequestOutcome, times: usize) {
    for _ in 0..times {
        engine.report_outcome("c", id, outcome).unwrap();
    }
}

/// Moves the clock to `at` and fires the reactivations due by then.
fn advance(engine: &Engine, clock: &ManualClock, at: f64) {
    clock.set(secs(at));
    engine.fire_due_timers();
}

const S503: RequestOutcome = RequestOutcome::Status(503);

#[test]
fn five_consecutive_5xx_eject_for_a_time_that_grows_on_repeat_and_decays_back() {
    let (engine, clock) = engine_with(cluster("OutlierDetection", 2, &[]));
    report(&engine, "d0", S503, 4);
    assert_eq!(passive(&engine, "d0"), HealthState::Healthy, "4 < 5");
    report(&engine, "d0", S503, 1);
    assert_eq!(passive(&engine, "d0"), HealthState::Unhealthy);
    let reason = engine.status().clusters[0]
        .destination("d0")
        .unwrap()
        .last_reason
        .clone();
    assert!(
        reason
            .as_deref()
            .is_some_and(|r| r.contains("5 consecutive 5xx") && r.contains("ejected for 30s")),
        "{reason:?}"
    );
    // Ejected: picks go elsewhere; late outcomes of requests sent before change nothing.
    assert!((0..10).all(|_| engine.pick_endpoint("c").unwrap().destination().id() == "d1"));
    report(&engine, "d0", RequestOutcome::Success, 3);
    assert_eq!(passive(&engine, "d0"), HealthState::Unhealthy);

    // Back after the base ejection time (30 s).
    advance(&engine, &clock, 29.9);
    assert_eq!(passive(&engine, "d0"), HealthState::Unhealthy);
    advance(&engine, &clock, 30.0);
    assert_eq!(passive(&engine, "d0"), HealthState::Unknown);

    // Ejected again at once: the second ejection in a row lasts twice as long.
    advance(&engine, &clock, 31.0);
    report(&engine, "d0", S503, 5);
    assert_eq!(passive(&engine, "d0"), HealthState::Unhealthy);
    advance(&engine, &clock, 90.9);
    assert_eq!(
        passive(&engine, "d0"),
        HealthState::Unhealthy,
        "60 s, not 30 s"
    );
    advance(&engine, &clock, 91.0);
    assert_eq!(passive(&engine, "d0"), HealthState::Unknown);

    // Two intervals (2 x 10 s) in service take the count back to zero: 30 s again.
    advance(&engine, &clock, 111.0);
    report(&engine, "d0", S503, 5);
    assert_eq!(passive(&engine, "d0"), HealthState::Unhealthy);
    advance(&engine, &clock, 141.0);
    assert_eq!(
        passive(&engine, "d0"),
        HealthState::Unknown,
        "decayed back to 30 s"
    );
}

#[test]
fn any_other_outcome_breaks_the_run_and_a_500_breaks_a_run_of_gateway_errors() {
    let (engine, _) = engine_with(cluster("OutlierDetection", 2, &[]));
    for fine in [
        RequestOutcome::Success,
        RequestOutcome::Cancelled,
        RequestOutcome::Status(404),
    ] {
        report(&engine, "d0", S503, 4);
        report(&engine, "d0", fine, 1);
    }
    report(&engine, "d0", S503, 4);
    assert_eq!(passive(&engine, "d0"), HealthState::Healthy);

    // Gateway errors only: a 500 is a 5xx but not a gateway error.
    let (engine, _) = engine_with(cluster(
        "OutlierDetection",
        2,
        &[
            (OUTLIER_CONSECUTIVE_5XX_KEY, "0"),
            (OUTLIER_CONSECUTIVE_GATEWAY_FAILURE_KEY, "3"),
        ],
    ));
    report(&engine, "d0", RequestOutcome::Status(500), 10);
    assert_eq!(
        passive(&engine, "d0"),
        HealthState::Healthy,
        "5xx detector off"
    );
    report(&engine, "d0", RequestOutcome::Status(502), 2);
    report(&engine, "d0", RequestOutcome::Status(500), 1);
    report(&engine, "d0", RequestOutcome::Status(504), 2);
    assert_eq!(passive(&engine, "d0"), HealthState::Healthy);
    // A transport failure counts as a gateway error.
    report(&engine, "d0", RequestOutcome::TransportFailure, 1);
    assert_eq!(passive(&engine, "d0"), HealthState::Unhealthy);
}

#[test]
fn at_most_the_configured_share_of_the_cluster_is_ejected_at_once_but_always_one() {
    // 10 destinations, default 10%: one at a time.
    let (engine, clock) = engine_with(cluster("OutlierDetection", 10, &[]));
    for i in 0..10 {
        report(&engine, &format!("d{i}"), S503, 5);
    }
    let ejected = |engine: &Engine| {
        engine.status().clusters[0]
            .destinations
            .iter()
            .filter(|d| d.passive == HealthState::Unhealthy)
            .map(|d| d.id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ejected(&engine), ["d0"]);
    assert_eq!(
        passive(&engine, "d5"),
        HealthState::Healthy,
        "past its limit, but the cap is full"
    );
    // When d0 returns, the next destination past the limit is ejected by its next error.
    advance(&engine, &clock, 30.0);
    report(&engine, "d5", S503, 1);
    assert_eq!(ejected(&engine), ["d5"]);

    // 20 destinations: two; half of 4: two; 0% of 3: still one.
    for (n, percent, expected) in [(20, "10", 2), (4, "50", 2), (3, "0", 1)] {
        let (engine, _) = engine_with(cluster(
            "OutlierDetection",
            n,
            &[(OUTLIER_MAX_EJECTION_PERCENT_KEY, percent)],
        ));
        for i in 0..n {
            report(&engine, &format!("d{i}"), S503, 5);
        }
        assert_eq!(
            ejected(&engine).len(),
            expected,
            "{n} destinations, {percent}%"
        );
    }
}

/// Two passive policies: every outcome goes to both; either one ejects. TransportFailureRate
/// does not look at statuses and OutlierDetection ejects on them; an ejection by one is not
/// lifted by the other's Healthy verdict.
#[test]
fn outlier_detection_runs_beside_transport_failure_rate() {
    let (engine, clock) = engine_with(cluster(
        "TransportFailureRate, OutlierDetection",
        3,
        &[(OUTLIER_BASE_EJECTION_TIME_KEY, "00:00:05")],
    ));
    let status = engine.status();
    assert!(status.clusters[0].passive_enabled);
    // Statuses: OutlierDetection ejects d0 (5 s), TransportFailureRate alone never would.
    report(&engine, "d0", S503, 5);
    assert_eq!(passive(&engine, "d0"), HealthState::Unhealthy);
    report(&engine, "d0", RequestOutcome::Success, 20);
    assert_eq!(
        passive(&engine, "d0"),
        HealthState::Unhealthy,
        "still ejected"
    );
    advance(&engine, &clock, 5.0);
    assert_eq!(passive(&engine, "d0"), HealthState::Unknown);

    // Transport failures: TransportFailureRate's rate (min 10 outcomes) ejects d1 for 60 s;
    // OutlierDetection, once at its cap (one of three), does not lift it.
    advance(&engine, &clock, 6.0);
    report(&engine, "d2", S503, 5);
    assert_eq!(passive(&engine, "d2"), HealthState::Unhealthy);
    report(&engine, "d1", RequestOutcome::Success, 4);
    report(&engine, "d1", RequestOutcome::TransportFailure, 6);
    assert_eq!(passive(&engine, "d1"), HealthState::Unhealthy);
    advance(&engine, &clock, 30.0);
    assert_eq!(
        passive(&engine, "d1"),
        HealthState::Unhealthy,
        "60 s reactivation period"
    );
    advance(&engine, &clock, 66.0);
    assert_eq!(passive(&engine, "d1"), HealthState::Unknown);
}

#[test]
fn the_simulator_shows_outlier_detection_decisions() {
    let scenario = r#"{
      "config": {"Clusters": {"c": {
        "HealthCheck": {"Passive": {"Enabled": true, "Policy": "TransportFailureRate, OutlierDetection"}},
        "Metadata": {"OutlierDetection.Consecutive5xx": "2", "OutlierDetection.BaseEjectionTime": "00:00:10"},
        "Destinations": {"a": {"Address": "http://10.0.0.1/"}, "b": {"Address": "http://10.0.0.2/"}}}}},
      "until": 30,
      "events": [
        {"at": 1, "request": {"cluster": "c", "destination": "a", "outcome": 500}},
        {"at": 2, "request": {"cluster": "c", "destination": "a", "outcome": 503}},
        {"at": 3, "request": {"cluster": "c", "destination": "a", "outcome": "success"}},
        {"at": 4, "request": {"cluster": "c", "destination": "b", "outcome": 500}},
        {"at": 5, "request": {"cluster": "c", "destination": "b", "outcome": 500}}
      ]
    }"#;
    let run = || {
        Simulation::new(Scenario::from_json(scenario).unwrap())
            .run()
            .unwrap()
    };
    let lines = run();
    assert_eq!(lines, run(), "deterministic");
    let parsed: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let outlier: Vec<&Value> = parsed
        .iter()
        .filter(|l| l["type"] == "evaluation" && l["policy"] == "OutlierDetection")
        .collect();
    assert_eq!(outlier.len(), 5, "{lines:#?}");
    assert_eq!(outlier[0]["consecutive5xx"], 1);
    assert_eq!(outlier[0]["ejection"], "none");
    assert_eq!(outlier[1]["consecutiveGateway"], 1);
    assert_eq!(outlier[1]["ejection"], "ejected");
    assert_eq!(outlier[1]["ejectedFor"], 10.0);
    assert_eq!(outlier[1]["ejections"], 1);
    assert_eq!(outlier[1]["state"], "Unhealthy");
    assert_eq!(outlier[2]["ejection"], "still-ejected");
    assert_eq!(outlier[2]["ejectedFor"], 9.0);
    // `b` reaches the limit while `a` is out: one of two is the most ejected at once.
    assert_eq!(outlier[4]["ejection"], "cap-reached");
    assert_eq!(
        (outlier[4]["ejected"].as_u64(), outlier[4]["cap"].as_u64()),
        (Some(1), Some(1))
    );
    // Both policies judged every outcome.
    let tfr = parsed
        .iter()
        .filter(|l| l["type"] == "evaluation" && l["policy"] == "TransportFailureRate")
        .count();
    assert_eq!(tfr, 5);
    // Ejected at 2 s, back at 12 s.
    let health: Vec<(f64, &str)> = parsed
        .iter()
        .filter(|l| l["type"] == "health" && l["destination"] == "a")
        .map(|l| (l["at"].as_f64().unwrap(), l["to"].as_str().unwrap()))
        .collect();
    assert_eq!(
        health,
        [(1.0, "Healthy"), (2.0, "Unhealthy"), (12.0, "Unknown")]
    );
}

#[test]
fn outlier_detection_settings_are_validated_and_bad_values_fall_back_to_the_defaults() {
    let doc = |metadata: &str, policy: &str| {
        format!(
            r#"{{"Clusters": {{"c": {{
                "HealthCheck": {{"Passive": {{"Enabled": true, "Policy": "{policy}"}}}},
                "Metadata": {{ {metadata} }},
                "Destinations": {{"d": {{"Address": "http://10.0.0.1/"}}}}}}}}}}"#
        )
    };
    let registry = PolicyRegistry::default();
    let report = config::check(
        &doc(
            r#""OutlierDetection.Consecutive5xx": "five", "OutlierDetection.ConsecutiveGatewayFailure": "-1",
               "OutlierDetection.BaseEjectionTime": "00:00:00", "OutlierDetection.MaxEjectionTime": "soon",
               "OutlierDetection.MaxEjectionPercent": "150", "OutlierDetection.Interval": "10s""#,
            "OutlierDetection",
        ),
        &registry,
        false,
    );
    assert!(report.is_valid(), "{:#?}", report.errors);
    let paths: Vec<&str> = report.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "Clusters:c:Metadata:OutlierDetection.Consecutive5xx",
            "Clusters:c:Metadata:OutlierDetection.ConsecutiveGatewayFailure",
            "Clusters:c:Metadata:OutlierDetection.BaseEjectionTime",
            "Clusters:c:Metadata:OutlierDetection.MaxEjectionTime",
            "Clusters:c:Metadata:OutlierDetection.MaxEjectionPercent",
        ]
    );
    assert!(
        report.warnings[0].message.contains("`five`"),
        "{}",
        report.warnings[0].message
    );
    assert!(report.warnings[0].message.contains("the default (5)"));
    let options = report.config.unwrap().clusters()[0].outlier_detection();
    assert_eq!(options.consecutive_5xx, 5);
    assert_eq!(options.base_ejection_time, secs(30.0));
    assert_eq!(options.max_ejection_percent, 10.0);
    assert_eq!(options.interval, secs(10.0), "humantime is read");
    assert!(!config::check(
        &doc(
            r#""OutlierDetection.Consecutive5xx": "x""#,
            "OutlierDetection"
        ),
        &registry,
        true
    )
    .is_valid());

    // A list names known policies, each once.
    let report = config::check(&doc("", "TransportFailureRate, Outliers"), &registry, false);
    assert_eq!(report.errors.len(), 1, "{:#?}", report.errors);
    assert!(report.errors[0]
        .message
        .contains("`Outliers` is not a known policy"));
    assert!(report.errors[0].message.contains("OutlierDetection"));
    let report = config::check(
        &doc("", "outlierdetection, OutlierDetection"),
        &registry,
        false,
    );
    assert_eq!(report.errors.len(), 1, "{:#?}", report.errors);
    assert!(
        report.errors[0].message.contains("listed twice"),
        "{}",
        report.errors[0].message
    );
    assert!(config::check(
        &doc("", " TransportFailureRate ,outlierdetection "),
        &registry,
        false
    )
    .is_valid());
}

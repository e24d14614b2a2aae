//! The simulator (`healthpick::simulate`): worked sequences of outcomes replayed through the real
//! engine, the worked examples in `examples/scenarios/`, determinism, timers, reloads and
//! scenario errors.

use std::sync::Arc;

use healthpick::simulate::{Scenario, Simulation};
use healthpick::PolicyRegistry;
use serde_json::Value;

use crate::support::policies::FirstStrike;

fn run_lines(scenario: &str) -> Vec<String> {
    let scenario = Scenario::from_json(scenario).expect("valid scenario");
    Simulation::new(scenario).run().expect("scenario runs")
}

fn run(scenario: &str) -> Vec<Value> {
    run_lines(scenario)
        .iter()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

fn picks(lines: &[Value]) -> Vec<String> {
    of_type(lines, "pick")
        .iter()
        .map(|l| {
            l["destination"]
                .as_str()
                .or(l["error"].as_str())
                .unwrap()
                .to_string()
        })
        .collect()
}

fn cluster(extra: &str, destinations: &[(&str, u32)]) -> String {
    let dests: Vec<String> = destinations
        .iter()
        .enumerate()
        .map(|(i, (id, tier))| {
            format!(
                r#""{id}": {{"Address": "http://10.0.0.{}/", "Priority": {tier}}}"#,
                i + 1
            )
        })
        .collect();
    format!(
        r#"{{"Clusters": {{"c": {{ {extra} "Destinations": {{ {} }} }} }} }}"#,
        dests.join(", ")
    )
}

fn error_of(scenario: &str) -> healthpick::simulate::ScenarioError {
    match Scenario::from_json(scenario) {
        Err(e) => e,
        Ok(s) => Simulation::new(s)
            .run()
            .expect_err("the scenario must be rejected"),
    }
}

// -------------------------------------------------------------------------------------------
// Worked examples

#[test]
fn worked_examples_give_their_expected_output() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/scenarios");
    let mut checked = Vec::new();
    for name in ["active_ejection", "passive_flapping", "tier_failover"] {
        let scenario = std::fs::read_to_string(format!("{dir}/{name}.json")).unwrap();
        let expected = std::fs::read_to_string(format!("{dir}/{name}.expected.jsonl")).unwrap();
        let mut actual = run_lines(&scenario).join("\n");
        actual.push('\n');
        assert_eq!(
            actual, expected,
            "{name}: output differs from {name}.expected.jsonl"
        );
        checked.push(name);
    }
    assert_eq!(checked.len(), 3);
}

#[test]
fn worked_examples_show_what_their_comments_claim() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/scenarios");
    let load = |name: &str| run(&std::fs::read_to_string(format!("{dir}/{name}.json")).unwrap());

    // Ejected by the second failed probe at t=20, back at t=35; no picks while ejected.
    let lines = load("active_ejection");
    let changes: Vec<(f64, &str)> = of_type(&lines, "health")
        .iter()
        .filter(|l| l["destination"] == "orders-2")
        .map(|l| (l["at"].as_f64().unwrap(), l["to"].as_str().unwrap()))
        .collect();
    assert_eq!(
        changes,
        [(5.0, "Healthy"), (20.0, "Unhealthy"), (35.0, "Healthy")]
    );
    let at_21: Vec<&Value> = of_type(&lines, "pick")
        .into_iter()
        .filter(|l| l["at"] == 21.0)
        .collect();
    assert_eq!(at_21.len(), 4);
    assert!(at_21.iter().all(|l| l["destination"] != "orders-2"));

    // Two ejections and two reactivations at max(20 s, 10 s) after each.
    let lines = load("passive_flapping");
    let cart2: Vec<(f64, &str)> = of_type(&lines, "health")
        .iter()
        .filter(|l| l["destination"] == "cart-2")
        .map(|l| (l["at"].as_f64().unwrap(), l["to"].as_str().unwrap()))
        .collect();
    assert_eq!(
        cart2,
        [
            (1.0, "Healthy"),
            (1.6, "Unhealthy"),
            (21.6, "Unknown"),
            (23.0, "Healthy"),
            (23.6, "Unhealthy"),
            (43.6, "Unknown"),
            (50.0, "Healthy"),
        ]
    );

    // Tier 1 only while both locals are out or local-1 is Degraded.
    let lines = load("tier_failover");
    let by_time = |t: f64| -> Vec<String> {
        of_type(&lines, "pick")
            .iter()
            .filter(|l| l["at"] == t)
            .map(|l| l["destination"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        by_time(16.0),
        ["remote-1", "remote-2", "remote-1", "remote-2"]
    );
    assert_eq!(by_time(31.0), ["local-1", "local-1"]);
    assert_eq!(by_time(41.0), ["remote-1", "remote-2"]);
    assert_eq!(by_time(46.0), ["local-1", "local-1"]);
}

// -------------------------------------------------------------------------------------------
// Worked sequences of outcomes

#[test]
fn consecutive_failures_threshold_3_over_the_spec_sequence() {
    let config = cluster(
        r#""HealthCheck": {"Active": {"Enabled": true}},
           "Metadata": {"ConsecutiveFailuresHealthPolicy.Threshold": "3"},"#,
        &[("d", 0)],
    );
    let outcomes = ["F", "F", "S", "F", "F", "F", "F", "S"];
    let events: Vec<String> = outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let result = if *o == "S" { "200" } else { "500" };
            format!(
                r#"{{"at": {}, "probe": {{"cluster": "c", "results": {{"d": {result}}}}}}}"#,
                i + 1
            )
        })
        .collect();
    let lines = run(&format!(
        r#"{{"config": {config}, "events": [{}]}}"#,
        events.join(",")
    ));
    let evaluations = of_type(&lines, "evaluation");
    let states: Vec<&str> = evaluations
        .iter()
        .map(|l| l["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        [
            "Unknown",
            "Unknown",
            "Healthy",
            "Healthy",
            "Healthy",
            "Unhealthy",
            "Unhealthy",
            "Healthy"
        ]
    );
    let counters: Vec<u64> = evaluations
        .iter()
        .map(|l| l["counter"].as_u64().unwrap())
        .collect();
    assert_eq!(counters, [1, 2, 0, 1, 2, 3, 4, 0]);
    assert!(evaluations
        .iter()
        .all(|l| l["policy"] == "ConsecutiveFailures"));
    // Only actual changes are health lines: Unknown->Healthy, Healthy->Unhealthy, back.
    let changes: Vec<(f64, &str, &str)> = of_type(&lines, "health")
        .iter()
        .map(|l| {
            (
                l["at"].as_f64().unwrap(),
                l["from"].as_str().unwrap(),
                l["to"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            (3.0, "Unknown", "Healthy"),
            (6.0, "Healthy", "Unhealthy"),
            (8.0, "Unhealthy", "Healthy")
        ]
    );
}

#[test]
fn transport_failure_rate_buckets_and_window_as_the_spec_says() {
    // Window 30 s, minimal count 1, limit 0.5. Bucket A opens at 0 (stamped 1.0): S, F.
    let config = cluster(
        r#""HealthCheck": {"Passive": {"Enabled": true}},
           "Metadata": {"TransportFailureRateHealthPolicy.RateLimit": "0.5"},"#,
        &[("d", 0), ("e", 0)],
    );
    let scenario = format!(
        r#"{{"config": {config},
            "globals": {{"DetectionWindowSize": "00:00:30", "MinimalTotalCountThreshold": 1}},
            "events": [
              {{"at": 0.0,  "request": {{"cluster": "c", "destination": "d", "outcome": "success"}}}},
              {{"at": 0.5,  "request": {{"cluster": "c", "destination": "d", "outcome": "transport-failure"}}}},
              {{"at": 31.0, "request": {{"cluster": "c", "destination": "d", "outcome": 503}}}},
              {{"at": 31.5, "request": {{"cluster": "c", "destination": "d", "outcome": "transport-failure"}}}}
            ]}}"#
    );
    let lines = run(&scenario);
    let evaluations = of_type(&lines, "evaluation");
    let seen: Vec<(u64, u64, f64, &str)> = evaluations
        .iter()
        .map(|l| {
            (
                l["failed"].as_u64().unwrap(),
                l["total"].as_u64().unwrap(),
                l["rate"].as_f64().unwrap(),
                l["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (0, 1, 0.0, "Healthy"),
            // 1/2 equals the limit: Unhealthy.
            (1, 2, 0.5, "Unhealthy"),
            // 31.0 closes A (stamp 1.0), exactly 30 s old: kept. 503 is not a failure.
            (1, 3, 1.0 / 3.0, "Healthy"),
            // At 31.5 A is 30.5 s old: dropped; the open bucket holds 503 and F.
            (1, 2, 0.5, "Unhealthy"),
        ]
    );
    assert_eq!(evaluations[2]["outcome"], 503);
    assert!(evaluations
        .iter()
        .all(|l| l["limit"] == 0.5 && l["policy"] == "TransportFailureRate"));
}

#[test]
fn reactivation_fires_at_its_due_time_before_an_event_at_the_same_time_and_up_to_until() {
    let config = cluster(
        r#""HealthCheck": {"Passive": {"Enabled": true, "ReactivationPeriod": "00:00:05"}},"#,
        &[("d", 0), ("e", 0)],
    );
    // Window defaults to 60 s, so reactivation comes after max(5 s, 60 s) = 60 s; minimal count 1.
    let events = r#"[
        {"at": 1, "request": {"cluster": "c", "destination": "d", "outcome": "transport-failure"}},
        {"at": 61, "pick": {"cluster": "c", "count": 2}}
    ]"#;
    let globals = r#"{"MinimalTotalCountThreshold": 1}"#;
    let lines = run(&format!(
        r#"{{"config": {config}, "globals": {globals}, "events": {events}}}"#
    ));
    let reactivation = lines
        .iter()
        .position(|l| l["reason"] == "reactivation")
        .expect("reactivated");
    assert_eq!(lines[reactivation]["at"], 61.0);
    let first_pick = lines.iter().position(|l| l["type"] == "pick").unwrap();
    assert!(
        reactivation < first_pick,
        "the timer fires before the event at the same time"
    );
    // With two available again the picks may reach d; before, only e could be picked.
    let available: Vec<&Value> = of_type(&lines, "available");
    assert_eq!(
        available.last().unwrap()["destinations"],
        serde_json::json!(["d", "e"])
    );

    // Without `until` a timer due after the last event does not fire; with it, it does.
    let short = r#"[{"at": 1, "request": {"cluster": "c", "destination": "d", "outcome": "transport-failure"}}]"#;
    let lines = run(&format!(
        r#"{{"config": {config}, "globals": {globals}, "events": {short}}}"#
    ));
    assert!(!lines.iter().any(|l| l["reason"] == "reactivation"));
    let lines = run(&format!(
        r#"{{"config": {config}, "globals": {globals}, "until": 61.0, "events": {short}}}"#
    ));
    assert!(lines
        .iter()
        .any(|l| l["reason"] == "reactivation" && l["at"] == 61.0));
    let lines = run(&format!(
        r#"{{"config": {config}, "globals": {globals}, "until": 60.9, "events": {short}}}"#
    ));
    assert!(!lines.iter().any(|l| l["reason"] == "reactivation"));
}

// -------------------------------------------------------------------------------------------
// Selection

#[test]
fn round_robin_and_first_alphabetical_pick_sequences() {
    let rr = cluster(
        r#""LoadBalancingPolicy": "RoundRobin","#,
        &[("a", 0), ("b", 0), ("c", 0)],
    );
    let lines = run(&format!(
        r#"{{"config": {rr}, "events": [{{"at": 0, "pick": {{"cluster": "c", "count": 7}}}}]}}"#
    ));
    assert_eq!(picks(&lines), ["a", "b", "c", "a", "b", "c", "a"]);

    let fa = cluster(
        r#""LoadBalancingPolicy": "FirstAlphabetical","#,
        &[("zeta", 0), ("beta", 0), ("Alpha", 1), ("gamma", 0)],
    );
    let lines = run(&format!(
        r#"{{"config": {fa}, "events": [{{"at": 0, "pick": {{"cluster": "c", "count": 3}}}}]}}"#
    ));
    // Alpha sorts first but sits in tier 1.
    assert_eq!(picks(&lines), ["beta", "beta", "beta"]);
}

#[test]
fn power_of_two_choices_never_picks_the_strictly_busier_of_two() {
    let config = cluster("", &[("a", 0), ("b", 0)]);
    // a carries 3 requests: every pick goes to b until b has 3 too.
    let lines = run(&format!(
        r#"{{"config": {config}, "seed": 9, "events": [
            {{"at": 0, "inflight": {{"cluster": "c", "destination": "a", "delta": 3}}}},
            {{"at": 1, "pick": {{"cluster": "c", "count": 3, "hold": true}}}},
            {{"at": 2, "pick": {{"cluster": "c", "count": 40, "hold": true}}}}
        ]}}"#
    ));
    let all = picks(&lines);
    assert_eq!(all[..3], ["b", "b", "b"]);
    // Held picks: after each one the loads differ by at most 1, so the busier is never chosen.
    let (mut a, mut b) = (3i64, 3i64);
    for pick in &all[3..] {
        if a != b {
            let expected = if a < b { "a" } else { "b" };
            assert_eq!(
                pick, expected,
                "picked the busier destination (a={a}, b={b})"
            );
        }
        if pick == "a" {
            a += 1
        } else {
            b += 1
        }
    }
    assert!((a - b).abs() <= 1);
    assert_eq!(a + b, 46);
}

#[test]
fn same_scenario_and_seed_give_byte_identical_output_and_the_seed_matters() {
    let config = cluster(
        r#""LoadBalancingPolicy": "Random","#,
        &[("a", 0), ("b", 0), ("c", 0), ("d", 0)],
    );
    let scenario = |seed: u64| {
        format!(
            r#"{{"config": {config}, "seed": {seed}, "events": [{{"at": 0, "pick": {{"cluster": "c", "count": 64}}}}]}}"#
        )
    };
    let first = run_lines(&scenario(1));
    assert_eq!(first, run_lines(&scenario(1)));
    assert_ne!(first, run_lines(&scenario(2)));
    // Every destination shows up among 64 random picks.
    let lines: Vec<Value> = first
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let picked = picks(&lines);
    for id in ["a", "b", "c", "d"] {
        assert!(picked.iter().any(|p| p == id), "{id} never picked");
    }
}

#[test]
fn panic_entry_and_exit_always_emit_an_available_line() {
    let config = cluster(
        r#""HealthCheck": {"Active": {"Enabled": true}},"#,
        &[("a", 0), ("b", 0)],
    );
    let globals = r#"{"ConsecutiveFailuresThreshold": 1}"#;
    let lines = run(&format!(
        r#"{{"config": {config}, "globals": {globals}, "events": [
            {{"at": 1, "probe": {{"cluster": "c", "results": {{"a": 500, "b": 200}}}}}},
            {{"at": 2, "probe": {{"cluster": "c", "results": {{"b": 500}}}}}},
            {{"at": 3, "pick": {{"cluster": "c", "count": 2}}}},
            {{"at": 4, "probe": {{"cluster": "c", "results": {{"a": 200, "b": 500}}}}}},
            {{"at": 5, "pick": {{"cluster": "c", "count": 2}}}}
        ]}}"#
    ));
    let available: Vec<(f64, Value, bool)> = of_type(&lines, "available")
        .iter()
        .map(|l| {
            (
                l["at"].as_f64().unwrap(),
                l["destinations"].clone(),
                l["panic"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        available,
        [
            (0.0, serde_json::json!(["a", "b"]), false),
            (1.0, serde_json::json!(["b"]), false),
            // HealthyOrPanic: nothing healthy left, so everything is available, in panic.
            (2.0, serde_json::json!(["a", "b"]), true),
            (4.0, serde_json::json!(["a"]), false),
        ]
    );
    let all = picks(&lines);
    assert_eq!(all.len(), 4);
    assert!(all[2..].iter().all(|p| p == "a"));

    // HealthyAndUnknown never panics: the same sequence leaves no destination.
    let strict = cluster(
        r#""HealthCheck": {"Active": {"Enabled": true}, "AvailableDestinationsPolicy": "HealthyAndUnknown"},"#,
        &[("a", 0), ("b", 0)],
    );
    let lines = run(&format!(
        r#"{{"config": {strict}, "globals": {globals}, "events": [
            {{"at": 1, "probe": {{"cluster": "c", "results": {{"a": 500, "b": 500}}}}}},
            {{"at": 2, "pick": {{"cluster": "c"}}}}
        ]}}"#
    ));
    assert_eq!(picks(&lines), ["NoAvailableDestinations"]);
    let last = of_type(&lines, "available").pop().unwrap().clone();
    assert_eq!(last["destinations"], serde_json::json!([]));
    assert_eq!(last["panic"], false);
}

// -------------------------------------------------------------------------------------------
// Reported health, reloads, custom policies

#[test]
fn payload_sets_the_reported_part_and_degraded_ranks_below_healthy() {
    let config = cluster(
        r#""HealthCheck": {"Active": {"Enabled": true}},"#,
        &[("a", 0), ("b", 1)],
    );
    let lines = run(&format!(
        r#"{{"config": {config}, "events": [
            {{"at": 1, "probe": {{"cluster": "c", "results": {{"a": {{"status": 200, "payload": "Degraded"}}, "b": 200}}}}}},
            {{"at": 2, "pick": {{"cluster": "c"}}}},
            {{"at": 3, "probe": {{"cluster": "c", "results": {{"a": {{"status": 200, "payload": "healthy"}}, "b": 200}}}}}},
            {{"at": 4, "pick": {{"cluster": "c"}}}}
        ]}}"#
    ));
    let reported: Vec<(Value, Value)> = of_type(&lines, "health")
        .iter()
        .filter(|l| l["part"] == "reported")
        .map(|l| (l["from"].clone(), l["to"].clone()))
        .collect();
    assert_eq!(
        reported,
        [
            (Value::Null, Value::from("Degraded")),
            (Value::from("Degraded"), Value::from("Healthy"))
        ]
    );
    assert_eq!(picks(&lines), ["b", "a"]);
}

#[test]
fn reload_keeps_surviving_state_and_a_bad_reload_changes_nothing() {
    let config = cluster(
        r#""HealthCheck": {"Active": {"Enabled": true}},"#,
        &[("a", 0), ("b", 0)],
    );
    let grown = cluster(
        r#""HealthCheck": {"Active": {"Enabled": true}},"#,
        &[("a", 0), ("b", 0), ("n", 0)],
    );
    let lines = run(&format!(
        r#"{{"config": {config}, "globals": {{"ConsecutiveFailuresThreshold": 1}}, "events": [
            {{"at": 1, "probe": {{"cluster": "c", "results": {{"a": 500, "b": 200}}}}}},
            {{"at": 2, "reload": {grown}}},
            {{"at": 3, "reload": {{"Clusters": {{"c": {{"LoadBalancingPolicy": "Nope", "Destinations": {{}}}}}}}}}},
            {{"at": 4, "probe": {{"cluster": "c", "results": {{"n": 200}}}}}}
        ]}}"#
    ));
    let reloads = of_type(&lines, "reload");
    assert_eq!(reloads.len(), 2);
    assert_eq!(reloads[0]["valid"], true);
    assert_eq!(reloads[1]["valid"], false);
    assert!(reloads[1]["errors"][0].as_str().unwrap().contains("Nope"));
    // a stays ejected across the reload; n joins; the bad reload did not remove anyone.
    let available = of_type(&lines, "available");
    assert_eq!(
        available.last().unwrap()["destinations"],
        serde_json::json!(["b", "n"])
    );
    assert!(!lines.iter().any(|l| l["type"] == "health"
        && l["destination"] == "a"
        && l["at"].as_f64().unwrap() > 1.0));
}

#[test]
fn custom_policies_run_in_the_simulator_by_name() {
    let mut registry = PolicyRegistry::default();
    registry.register_active("FirstStrike", Arc::new(FirstStrike));
    let config = cluster(
        r#""HealthCheck": {"Active": {"Enabled": true, "Policy": "firststrike"}},"#,
        &[("a", 0), ("b", 0)],
    );
    let scenario = Scenario::from_json(&format!(
        r#"{{"config": {config}, "events": [{{"at": 1, "probe": {{"cluster": "c", "results": {{"a": 502}}}}}}]}}"#
    ))
    .unwrap();
    let lines: Vec<Value> = Simulation::new(scenario)
        .registry(registry)
        .run()
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let evaluation = of_type(&lines, "evaluation")[0];
    assert_eq!(evaluation["policy"], "FirstStrike");
    assert_eq!(evaluation["reason"], "first strike: HTTP 502");
    assert_eq!(evaluation["state"], "Unhealthy");
    assert!(evaluation.get("counter").is_none());
}

// -------------------------------------------------------------------------------------------
// Scenario errors

#[test]
fn malformed_scenarios_report_every_problem_with_the_event_index() {
    let config = cluster("", &[("a", 0)]);
    let e = error_of(&format!(
        r#"{{"config": {config}, "sede": 1, "events": [
            {{"at": 2, "pick": {{"cluster": "c"}}}},
            {{"at": 1, "pick": {{"cluster": "c"}}}},
            {{"at": 3, "teleport": {{}}}},
            {{"at": 4, "request": {{"cluster": "c", "destination": "a", "outcome": "meh"}}}},
            {{"at": 5, "probe": {{"cluster": "c", "results": {{"a": 42}}}}}},
            {{"at": -1, "pick": {{"cluster": "c", "count": 0}}}}
        ]}}"#
    ));
    let paths: Vec<(Option<usize>, &str)> = e
        .problems
        .iter()
        .map(|p| (p.event, p.path.as_str()))
        .collect();
    assert_eq!(
        paths,
        [
            (None, "sede"),
            (Some(1), "events[1].at"),
            (Some(2), "events[2].teleport"),
            (Some(2), "events[2]"),
            (Some(3), "events[3].request.outcome"),
            (Some(4), "events[4].probe.results.a"),
            (Some(5), "events[5].at"),
            (Some(5), "events[5].pick.count"),
        ]
    );
    let text = e.to_string();
    assert!(
        text.contains("events[1].at: 1 is before the previous event (2)"),
        "{text}"
    );
    assert!(text.contains("`meh` is not an outcome"), "{text}");
    assert!(text.contains("42 is not an HTTP status"), "{text}");

    let e = error_of("{ not json");
    assert!(e.to_string().contains("malformed JSON at line 1"), "{e}");
    let e = error_of(r#"{"events": []}"#);
    assert_eq!(e.problems[0].path, "config");
}

#[test]
fn events_naming_what_the_config_lacks_stop_the_run_with_their_index() {
    let config = cluster(
        r#""HealthCheck": {"Passive": {"Enabled": true}},"#,
        &[("a", 0)],
    );
    let cases = [
        (
            r#"{"at": 1, "pick": {"cluster": "nope"}}"#,
            "events[1].pick.cluster",
            "no cluster `nope`",
        ),
        (
            r#"{"at": 1, "probe": {"cluster": "c", "results": {"a": 200}}}"#,
            "events[1].probe.cluster",
            "active health checks disabled",
        ),
        (
            r#"{"at": 1, "request": {"cluster": "c", "destination": "zz", "outcome": "success"}}"#,
            "events[1].request",
            "no destination `zz`",
        ),
        (
            r#"{"at": 1, "inflight": {"cluster": "c", "destination": "a", "delta": -1}}"#,
            "events[1].inflight.delta",
            "below 0",
        ),
    ];
    for (event, path, message) in cases {
        let e = error_of(&format!(
            r#"{{"config": {config}, "events": [{{"at": 0, "pick": {{"cluster": "c"}}}}, {event}]}}"#
        ));
        assert_eq!(e.problems.len(), 1, "{e}");
        assert_eq!(e.problems[0].event, Some(1));
        assert_eq!(e.problems[0].path, path);
        assert!(e.problems[0].message.contains(message), "{e}");
    }
}

#[test]
fn bad_config_and_globals_are_reported_with_their_paths() {
    let e = error_of(
        r#"{"config": {"Clusters": {"c": {"Destinations": {"a": {"Address": "not a url"}}}}}, "events": []}"#,
    );
    assert!(e.problems[0].path.starts_with("config.Clusters.c"), "{e}");
    assert!(e.to_string().contains("not a url"), "{e}");

    let config = cluster("", &[("a", 0)]);
    let e = error_of(&format!(
        r#"{{"config": {config}, "globals": {{"DetectionWindowSize": "soon"}}, "events": []}}"#
    ));
    assert_eq!(e.problems[0].path, "globals.DetectionWindowSize", "{e}");
    assert!(e.to_string().contains("soon"), "{e}");
}

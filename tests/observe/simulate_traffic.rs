//! The simulator with traffic: requests answered after the latencies a scenario gives, load
//! reports riding on the answers, picks spread at a rate and tallied, keyed picks; the worked
//! traffic-shaping scenarios in `examples/scenarios/` (PeakEwma with a slow instance, tier spill
//! under a load step, slow start of a joining instance, keyed picks through an ejection), each
//! run twice to the same bytes.

use std::collections::BTreeMap;

use healthpick::simulate::{Scenario, Simulation};
use serde_json::Value;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/scenarios");

/// A worked scenario's output lines, as `healthpick simulate` prints them.
fn run_worked(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(format!("{DIR}/{name}.json")).unwrap();
    let scenario = Scenario::from_json(&text).unwrap();
    Simulation::new(scenario).run().unwrap()
}

fn parse(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

fn run(scenario: &str) -> Vec<Value> {
    let scenario = Scenario::from_json(scenario).expect("valid scenario");
    parse(&Simulation::new(scenario).run().expect("scenario runs"))
}

fn error_of(scenario: &str) -> healthpick::simulate::ScenarioError {
    match Scenario::from_json(scenario) {
        Err(e) => e,
        Ok(s) => Simulation::new(s)
            .run()
            .expect_err("the scenario must be rejected"),
    }
}

fn of_type<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == kind).collect()
}

/// Each tally line's picks per destination, by the line's time.
fn tallies(lines: &[Value]) -> Vec<(f64, BTreeMap<String, u64>)> {
    of_type(lines, "tally")
        .iter()
        .map(|l| {
            let picks = l["picks"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(id, n)| (id.clone(), n.as_u64().unwrap()))
                .collect();
            (l["at"].as_f64().unwrap(), picks)
        })
        .collect()
}

/// `id`'s share of the picks of the tally line at `at`.
fn share_at(tallies: &[(f64, BTreeMap<String, u64>)], at: f64, id: &str) -> f64 {
    let (_, picks) = tallies
        .iter()
        .find(|(t, _)| *t == at)
        .unwrap_or_else(|| panic!("no tally at {at}: {tallies:?}"));
    let total: u64 = picks.values().sum();
    picks.get(id).copied().unwrap_or(0) as f64 / total as f64
}

fn cluster(extra: &str, ids: &[&str]) -> String {
    let destinations: Vec<String> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| format!(r#""{id}": {{"Address": "http://10.0.0.{}/"}}"#, i + 1))
        .collect();
    format!(
        r#"{{"Clusters": {{"c": {{ {extra} "Destinations": {{ {} }} }} }} }}"#,
        destinations.join(", ")
    )
}

// -------------------------------------------------------------------------------------------
// Worked scenarios

/// Every worked scenario, run twice: the same bytes.
#[test]
fn worked_traffic_scenarios_replay_byte_identically() {
    for name in [
        "peak_ewma_slow_instance",
        "tier_spill_load_step",
        "slow_start_join",
        "keyed_ejection",
    ] {
        let first = run_worked(name);
        assert!(!first.is_empty(), "{name}");
        assert_eq!(first, run_worked(name), "{name}: a second run differs");
    }
}

/// search-4 turns slow at t=10 and fast again at t=20: a quarter of the picks before, a few in
/// the 10 s it is slow, and its share back as its estimate comes down.
#[test]
fn peak_ewma_keeps_the_slow_instance_to_a_small_share() {
    let lines = parse(&run_worked("peak_ewma_slow_instance"));
    let tallies = tallies(&lines);
    assert_eq!(tallies.len(), 10, "{tallies:?}");
    for at in [5.0, 10.0] {
        let share = share_at(&tallies, at, "search-4");
        assert!((0.2..=0.3).contains(&share), "{at}: {share}");
    }
    for at in [15.0, 20.0] {
        let share = share_at(&tallies, at, "search-4");
        assert!(share < 0.02, "slow, {at}: {share}");
    }
    // Back, step by step: more each 5 s, most of its quarter at the end.
    let back: Vec<f64> = [25.0, 30.0, 35.0, 40.0]
        .iter()
        .map(|&at| share_at(&tallies, at, "search-4"))
        .collect();
    assert!(back.windows(2).all(|w| w[0] < w[1]), "{back:?}");
    assert!(share_at(&tallies, 50.0, "search-4") > 0.15, "{tallies:?}");
    // The others took its share while it was slow, evenly.
    for id in ["search-1", "search-2", "search-3"] {
        let share = share_at(&tallies, 15.0, id);
        assert!((0.29..=0.38).contains(&share), "{id}: {share}");
    }
}

/// Nothing spills before the step; spill starts within a tenth of a second of it, and the
/// remote tier takes picks while it lasts; once the local tier has room again spill stops, but
/// only after the dwell time (5 s) below the lower mark.
#[test]
fn tier_spill_starts_after_the_load_step_and_stops_after_it() {
    let lines = parse(&run_worked("tier_spill_load_step"));
    let spills = of_type(&lines, "spill");
    assert_eq!(spills.len(), 2, "{spills:?}");
    let started = spills[0];
    assert_eq!(started["state"], "started");
    assert_eq!(
        (started["fromTier"].as_u64(), started["toTier"].as_u64()),
        (Some(0), Some(1))
    );
    let at = started["at"].as_f64().unwrap();
    assert!((20.0..=20.1).contains(&at), "{started}");
    assert!(started["share"].as_f64().unwrap() > 0.0);
    let stopped = spills[1];
    assert_eq!(stopped["state"], "stopped");
    assert!(stopped.get("share").is_none());
    let stopped_at = stopped["at"].as_f64().unwrap();
    assert!(
        (35.0..40.0).contains(&stopped_at),
        "after the dwell: {stopped}"
    );

    let tallies = tallies(&lines);
    let remote = |at: f64| share_at(&tallies, at, "remote-1") + share_at(&tallies, at, "remote-2");
    for (at, _) in tallies.iter().filter(|(at, _)| *at <= 20.0) {
        assert_eq!(remote(*at), 0.0, "{at}: nothing spills before the step");
    }
    for at in (21..=30).map(f64::from) {
        assert!(remote(at) > 0.1, "{at}: {}", remote(at));
    }
    // The share a tally shows: above 0 until spill stops, 0 after.
    for line in of_type(&lines, "tally") {
        let (at, spill) = (
            line["at"].as_f64().unwrap(),
            line["spill"].as_f64().unwrap(),
        );
        if at > 20.1 && at < stopped_at {
            assert!(spill > 0.0, "{line}");
        } else if at > stopped_at {
            assert_eq!(spill, 0.0, "{line}");
        }
    }
    for at in (37..=50).map(f64::from) {
        assert_eq!(remote(at), 0.0, "{at}");
    }
}

/// catalog-5 gets nothing while its probe fails, then a share that grows with its factor
/// until the window ends, then its fifth.
#[test]
fn slow_start_ramps_the_newcomers_share() {
    let lines = parse(&run_worked("slow_start_join"));
    let tallies = tallies(&lines);
    assert_eq!(share_at(&tallies, 6.0, "catalog-5"), 0.0);
    let ramp: Vec<f64> = [11.0, 16.0, 21.0, 26.0, 31.0, 36.0, 41.0]
        .iter()
        .map(|&at| share_at(&tallies, at, "catalog-5"))
        .collect();
    assert!(ramp.windows(2).all(|w| w[0] < w[1]), "{ramp:?}");
    assert!(ramp[0] < 0.03, "{ramp:?}");
    for at in [46.0, 50.0] {
        assert_eq!(share_at(&tallies, at, "catalog-5"), 0.2, "{tallies:?}");
    }
    // Each tally while it warms shows its factor, up from the minimum; none once warm.
    let factors: Vec<f64> = of_type(&lines, "tally")
        .iter()
        .filter_map(|l| l.get("warming").map(|w| w["catalog-5"].as_f64().unwrap()))
        .collect();
    assert_eq!(factors.len(), 6, "{factors:?}");
    assert_eq!(factors[0], 0.1);
    assert!(factors.windows(2).all(|w| w[0] < w[1]), "{factors:?}");
    assert!(of_type(&lines, "tally")
        .last()
        .unwrap()
        .get("warming")
        .is_none());
}

/// The keys of carts-2 move while it is ejected, the others stay, and all come back.
#[test]
fn keyed_picks_move_off_an_ejected_instance_and_return() {
    let lines = parse(&run_worked("keyed_ejection"));
    let at = |t: f64| -> BTreeMap<String, String> {
        of_type(&lines, "pick")
            .iter()
            .filter(|l| l["at"] == t)
            .map(|l| {
                (
                    l["key"].as_str().unwrap().to_string(),
                    l["destination"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let (before, ejected, after) = (at(2.0), at(6.0), at(16.0));
    assert_eq!(before.len(), 12);
    let homed: Vec<&String> = before
        .iter()
        .filter(|(_, d)| *d == "carts-2")
        .map(|(k, _)| k)
        .collect();
    assert!(homed.len() >= 2, "{before:?}");
    for (key, destination) in &before {
        if destination == "carts-2" {
            assert_ne!(ejected[key], "carts-2", "{key}");
        } else {
            assert_eq!(&ejected[key], destination, "{key} stays");
        }
    }
    assert_eq!(after, before, "the keys come back");
}

// -------------------------------------------------------------------------------------------
// Answers, latencies and load reports

/// A served pick is answered `latency` after it, on the simulated clock: the passive policy
/// sees the answer then, and the latency estimate a policy reads follows.
#[test]
fn answers_come_after_their_latency_on_the_simulated_clock() {
    let config = cluster(
        r#""LoadBalancingPolicy": "RoundRobin", "HealthCheck": {"Passive": {"Enabled": true}},"#,
        &["a", "b"],
    );
    let lines = run(&format!(
        r#"{{"config": {config}, "events": [
            {{"at": 0, "latency": {{"cluster": "c", "destinations": {{"a": 0.25, "b": 1.5}}}}}},
            {{"at": 1, "pick": {{"cluster": "c", "count": 2}}}},
            {{"at": 2, "latency": {{"cluster": "c", "destinations": {{"a": null}}}}}},
            {{"at": 3, "pick": {{"cluster": "c", "count": 2}}}}
        ]}}"#
    ));
    let answered: Vec<(f64, &str)> = of_type(&lines, "evaluation")
        .iter()
        .map(|l| {
            (
                l["at"].as_f64().unwrap(),
                l["destination"].as_str().unwrap(),
            )
        })
        .collect();
    // a at 1.25, b at 2.5; at 3 a is no longer served (dropped unanswered), b answers at 4.5.
    assert_eq!(answered, [(1.25, "a"), (2.5, "b"), (4.5, "b")]);
    assert!(of_type(&lines, "evaluation")
        .iter()
        .all(|l| l["outcome"] == "success"));
}

/// PeakEwma reads what the answers took: a destination that answers ten times slower gets a
/// small share, and spreading the same picks at a rate gives the same lines each run.
#[test]
fn peak_ewma_decisions_depend_on_the_scenarios_latencies() {
    let config = cluster(r#""LoadBalancingPolicy": "PeakEwma","#, &["fast", "slow"]);
    // Both above the default estimate (30 ms), so that both are measured from the start.
    let scenario = |slow: f64| {
        format!(
            r#"{{"config": {config}, "seed": 5, "events": [
                {{"at": 0, "latency": {{"cluster": "c", "destinations": {{"fast": 0.04, "slow": {slow}}}}}}},
                {{"at": 0, "pick": {{"cluster": "c", "rate": 100, "for": 10}}}}
            ]}}"#
        )
    };
    let picks = |lines: &[Value]| -> (usize, usize) {
        let all = of_type(lines, "pick");
        let slow = all.iter().filter(|l| l["destination"] == "slow").count();
        (slow, all.len())
    };
    let lines = run(&scenario(0.4));
    let (slow, all) = picks(&lines);
    assert_eq!(all, 1000);
    assert!((1..100).contains(&slow), "{slow} of {all}");
    // One pick every 10 ms, from t=0.
    let times: Vec<f64> = of_type(&lines, "pick")
        .iter()
        .take(3)
        .map(|l| l["at"].as_f64().unwrap())
        .collect();
    assert_eq!(times, [0.0, 0.01, 0.02]);
    // Alike, they share evenly.
    let (slow, all) = picks(&run(&scenario(0.04)));
    assert!((400..=600).contains(&slow), "{slow} of {all}");
}

/// A load report rides on each answer; once it counts (after the blackout, 10 s by default)
/// PeakEwma weighs it: a destination reporting 300% utilization gets a small share.
#[test]
fn load_reports_ride_on_answers_and_count_after_the_blackout() {
    let config = cluster(r#""LoadBalancingPolicy": "PeakEwma","#, &["a", "b"]);
    let lines = run(&format!(
        r#"{{"config": {config}, "seed": 2, "events": [
            {{"at": 0, "latency": {{"cluster": "c", "destinations": {{"a": 0.02, "b": 0.02}}}}}},
            {{"at": 0, "load": {{"cluster": "c", "destinations": {{"a": 3, "b": "TEXT cpu_utilization=0.1"}}}}}},
            {{"at": 0, "tally": {{"cluster": "c", "every": 5}}}},
            {{"at": 0, "pick": {{"cluster": "c", "rate": 100, "for": 20}}}}
        ]}}"#
    ));
    let tallies = tallies(&lines);
    // In the blackout, alike; after it, `a` costs four times as much.
    assert!(
        (0.4..=0.6).contains(&share_at(&tallies, 5.0, "a")),
        "{tallies:?}"
    );
    assert!(share_at(&tallies, 20.0, "a") < 0.3, "{tallies:?}");
}

/// A load report needs a destination that answers; a report that is not one, or that carries
/// no utilization, is a scenario problem.
#[test]
fn load_values_are_checked() {
    let config = cluster("", &["a"]);
    let e = error_of(&format!(
        r#"{{"config": {config}, "events": [
            {{"at": 0, "load": {{"cluster": "c", "destinations": {{"a": 0.5}}}}}}
        ]}}"#
    ));
    assert_eq!(e.problems[0].path, "events[0].load.destinations.a", "{e}");
    assert!(e.to_string().contains("give it a `latency` first"), "{e}");
    let e = error_of(&format!(
        r#"{{"config": {config}, "events": [
            {{"at": 0, "load": {{"cluster": "c", "destinations": {{"a": "TEXT mem_utilization=0.3", "b": "XML 1", "c": -1, "d": true}}}}}}
        ]}}"#
    ));
    let paths: Vec<&str> = e.problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "events[0].load.destinations.a",
            "events[0].load.destinations.b",
            "events[0].load.destinations.c",
            "events[0].load.destinations.d",
        ],
        "{e}"
    );
    assert!(e.to_string().contains("carries no utilization"), "{e}");
}

// -------------------------------------------------------------------------------------------
// Keys, rates, tallies

#[test]
fn keyed_picks_carry_their_key_and_a_key_keeps_its_destination() {
    let config = cluster(
        r#""SessionAffinity": {"Enabled": true, "Policy": "CustomHeader", "AffinityKeyName": "K"},"#,
        &["a", "b", "c", "d"],
    );
    let lines = run(&format!(
        r#"{{"config": {config}, "events": [
            {{"at": 1, "pick": {{"cluster": "c", "count": 3, "key": "k"}}}},
            {{"at": 2, "pick": {{"cluster": "c", "count": 4, "keys": ["x", "y"]}}}},
            {{"at": 3, "pick": {{"cluster": "c", "count": 6, "keys": {{"prefix": "u", "count": 3}}}}}}
        ]}}"#
    ));
    let picks: Vec<(&str, &str)> = of_type(&lines, "pick")
        .iter()
        .map(|l| {
            (
                l["key"].as_str().unwrap(),
                l["destination"].as_str().unwrap(),
            )
        })
        .collect();
    let keys: Vec<&str> = picks.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        keys,
        ["k", "k", "k", "x", "y", "x", "y", "u0", "u1", "u2", "u0", "u1", "u2"]
    );
    let mut home: BTreeMap<&str, &str> = BTreeMap::new();
    for (key, destination) in &picks {
        assert_eq!(
            *home.entry(key).or_insert(destination),
            *destination,
            "{key}"
        );
    }
}

/// Spread picks come after the other events of their instant; a tally counts a cluster's
/// picks from every `pick` event, errors too, and writes what it counted when it is switched
/// off and at the end.
#[test]
fn tallies_count_a_clusters_picks_until_switched_off() {
    let config = cluster(
        r#""LoadBalancingPolicy": "RoundRobin", "HealthCheck": {"Active": {"Enabled": true}, "AvailableDestinationsPolicy": "HealthyAndUnknown"},"#,
        &["a", "b"],
    );
    let lines = run(&format!(
        r#"{{"config": {config}, "globals": {{"ConsecutiveFailuresThreshold": 1}}, "events": [
            {{"at": 0, "tally": {{"cluster": "c", "every": 1}}}},
            {{"at": 0, "pick": {{"cluster": "c", "rate": 10, "for": 3}}}},
            {{"at": 0.5, "pick": {{"cluster": "c", "count": 4}}}},
            {{"at": 1.5, "probe": {{"cluster": "c", "results": {{"a": 500, "b": 500}}}}}},
            {{"at": 2.5, "tally": {{"cluster": "c", "every": null}}}},
            {{"at": 2.5, "probe": {{"cluster": "c", "results": {{"a": 200}}}}}}
        ]}}"#
    ));
    let tally_lines: Vec<String> = of_type(&lines, "tally")
        .iter()
        .map(|l| l.to_string())
        .collect();
    assert_eq!(
        tally_lines,
        [
            r#"{"at":1.0,"cluster":"c","picks":{"a":7,"b":7},"since":0.0,"type":"tally"}"#,
            r#"{"at":2.0,"cluster":"c","errors":{"NoAvailableDestinations":5},"picks":{"a":3,"b":2},"since":1.0,"type":"tally"}"#,
            r#"{"at":2.5,"cluster":"c","errors":{"NoAvailableDestinations":5},"picks":{},"since":2.0,"type":"tally"}"#,
        ]
    );
    // Off again: a line per pick; the pick at 2.5 comes after the probe at 2.5.
    let picks: Vec<(f64, &str)> = of_type(&lines, "pick")
        .iter()
        .map(|l| {
            (
                l["at"].as_f64().unwrap(),
                l["destination"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(picks.len(), 5);
    assert_eq!(picks[0], (2.5, "a"));
}

#[test]
fn malformed_traffic_events_report_every_problem() {
    let config = cluster("", &["a"]);
    let e = error_of(&format!(
        r#"{{"config": {config}, "events": [
            {{"at": 0, "pick": {{"cluster": "c", "rate": 10}}}},
            {{"at": 0, "pick": {{"cluster": "c", "for": 2}}}},
            {{"at": 0, "pick": {{"cluster": "c", "rate": 10, "for": 2, "count": 3}}}},
            {{"at": 0, "pick": {{"cluster": "c", "key": "k", "keys": ["k"]}}}},
            {{"at": 0, "pick": {{"cluster": "c", "keys": {{"prefix": "u"}}}}}},
            {{"at": 0, "pick": {{"cluster": "c", "keys": []}}}},
            {{"at": 0, "pick": {{"cluster": "c", "rate": 0, "count": 1}}}},
            {{"at": 0, "latency": {{"cluster": "c", "destinations": {{"a": -0.5}}}}}},
            {{"at": 0, "latency": {{"cluster": "c"}}}},
            {{"at": 0, "tally": {{"cluster": "c"}}}},
            {{"at": 0, "tally": {{"cluster": "c", "every": 0}}}}
        ]}}"#
    ));
    let paths: Vec<&str> = e.problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "events[0].pick.rate",
            "events[1].pick.for",
            "events[2].pick.for",
            "events[3].pick.keys",
            "events[4].pick.keys.count",
            "events[5].pick.keys",
            "events[6].pick.rate",
            "events[7].latency.destinations.a",
            "events[8].latency.destinations",
            "events[9].tally.every",
            "events[10].tally.every",
        ],
        "{e}"
    );

    // Run time: what the configuration in force lacks.
    for (event, path, message) in [
        (
            r#"{"at": 1, "latency": {"cluster": "c", "destinations": {"zz": 0.1}}}"#,
            "events[0].latency.destinations.zz",
            "no destination `zz`",
        ),
        (
            r#"{"at": 1, "tally": {"cluster": "nope", "every": 1}}"#,
            "events[0].tally.cluster",
            "no cluster `nope`",
        ),
    ] {
        let e = error_of(&format!(r#"{{"config": {config}, "events": [{event}]}}"#));
        assert_eq!(e.problems.len(), 1, "{e}");
        assert_eq!(e.problems[0].path, path);
        assert!(e.problems[0].message.contains(message), "{e}");
    }
}

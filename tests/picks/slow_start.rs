//! Slow start through the engine, on a hand-driven clock: a destination that becomes available
//! while others serve counts with its weight times max(minimum, t / window) until the window
//! ends; every built-in policy honours the ramp; a group that is all warming still takes all
//! its traffic; a cluster's first destinations take full traffic at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{
    ActiveHealthCheckConfig, ClusterConfig, DestinationConfig, LoadSignalsConfig, SlowStartConfig,
};
use healthpick::{Config, Engine, ManualClock, PickHandle, ProbeResult, RequestOutcome};

const WINDOW: Duration = Duration::from_secs(30);

fn cluster(policy: &str, ids: &[&str]) -> ClusterConfig {
    let mut cluster = ClusterConfig::new("c")
        .load_balancing_policy(policy)
        .slow_start(SlowStartConfig::new(WINDOW))
        .active(ActiveHealthCheckConfig::enabled())
        .metadata("ConsecutiveFailuresHealthPolicy.Threshold", "1");
    for (i, id) in ids.iter().enumerate() {
        let tier = u32::from(id.starts_with("remote"));
        let address = format!("http://127.0.0.1:{}/", 31_000 + i);
        cluster = cluster.destination(DestinationConfig::new(*id, address).priority(tier));
    }
    cluster
}

fn engine(clock: &Arc<ManualClock>, cluster: ClusterConfig) -> Engine {
    Engine::builder()
        .seed(11)
        .clock(clock.clone())
        .build_with(Config::new().cluster(cluster))
        .unwrap()
}

/// Envoy's formula with aggression 1 and a 10% minimum: the newcomer's expected share of the
/// picks among four warm destinations of the same weight, `t` after it joined.
fn expected_share(t: Duration) -> f64 {
    let factor = (t.as_secs_f64() / WINDOW.as_secs_f64()).clamp(0.1, 1.0);
    factor / (4.0 + factor)
}

/// Runs 1,000 picks a second for `seconds` seconds, one each millisecond with the engine's
/// timers fired as the clock moves, each handle held for `hold` picks (and reported as a
/// success when released, if `report`: a request that took `hold` milliseconds); returns the
/// newcomer's share of each second's picks.
fn shares_per_second(
    engine: &Engine,
    clock: &ManualClock,
    seconds: usize,
    hold: usize,
    report: bool,
) -> Vec<f64> {
    let mut held: std::collections::VecDeque<PickHandle> = Default::default();
    let mut shares = Vec::new();
    for _ in 0..seconds {
        let mut newcomer = 0;
        for _ in 0..1_000 {
            clock.advance(Duration::from_millis(1));
            engine.fire_due_timers();
            let pick = engine.pick_endpoint("c").unwrap();
            newcomer += usize::from(pick.destination().id() == "new");
            held.push_back(pick);
            if held.len() > hold {
                let done = held.pop_front().unwrap();
                if report {
                    done.report(RequestOutcome::Status(200));
                }
            }
        }
        shares.push(newcomer as f64 / 1_000.0);
    }
    shares
}

fn join(engine: &Engine, policy: &str) {
    engine
        .apply_config(Config::new().cluster(cluster(policy, &["w1", "w2", "w3", "w4", "new"])))
        .unwrap();
}

/// The newcomer's share of each second's picks stays within 3 points of the formula, from its
/// join to past the end of its window, under each policy that spreads by weight. RoundRobin's
/// order follows the weights pick by pick, and so does the first candidate of
/// PowerOfTwoChoices (a point of the evenly spread sequence): idle, their shares are within
/// half a point on average. Under Random each pick is independent, so its share of a second
/// wanders by chance (one standard deviation is about 1.3 points at a share of 0.2); the engine
/// is seeded, so every run is this one. PeakEwma balances by measured latency, so its requests
/// are reported: each takes as long as it is held, and the default RTT a newcomer starts with
/// is that same latency. Its ramp acts through requests in flight per unit of weight, so it is
/// checked with requests in flight: an idle newcomer that measures as fast as the others is
/// compared on latency alone.
#[test]
fn a_newcomers_share_follows_the_ramp_under_each_weighted_policy() {
    for (policy, hold, mean_within) in [
        ("RoundRobin", 0, 0.005),
        ("Random", 0, 0.012),
        ("PowerOfTwoChoices", 0, 0.005),
        // Balancing by requests in flight: the handles are held, 20 at a time.
        ("PowerOfTwoChoices", 20, 0.012),
        ("PeakEwma", 20, 0.012),
    ] {
        let report = policy == "PeakEwma";
        let rtt = Duration::from_millis(hold.max(1) as u64);
        let signals = LoadSignalsConfig::default().default_rtt(rtt);
        let with_signals = |cluster: ClusterConfig| cluster.load_signals(signals.clone());
        let clock = Arc::new(ManualClock::new());
        let engine = engine(
            &clock,
            with_signals(cluster(policy, &["w1", "w2", "w3", "w4"])),
        );
        clock.advance(Duration::from_secs(1));
        let joined = cluster(policy, &["w1", "w2", "w3", "w4", "new"]);
        engine
            .apply_config(Config::new().cluster(with_signals(joined)))
            .unwrap();
        let shares = shares_per_second(&engine, &clock, 35, hold, report);
        // Each second against the formula at its middle, after the join.
        let distances: Vec<f64> = shares
            .iter()
            .enumerate()
            .map(|(second, share)| {
                let t = Duration::from_millis(second as u64 * 1_000 + 500);
                (share - expected_share(t)).abs()
            })
            .collect();
        let mean = distances.iter().sum::<f64>() / distances.len() as f64;
        let context = format!("{policy} holding {hold}: shares {shares:.3?}");
        assert!(
            distances.iter().all(|&d| d <= 0.03),
            "distances {distances:.3?}; {context}"
        );
        assert!(mean <= mean_within, "{mean:.4} on average; {context}");
    }
}

/// Under LeastRequests the ramp shapes how many requests the newcomer holds: early in its
/// window it holds far fewer than a warm destination, at the end as many.
#[test]
fn least_requests_fills_a_warming_destination_by_its_weight() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine(&clock, cluster("LeastRequests", &["w1", "w2", "w3", "w4"]));
    clock.advance(Duration::from_secs(1));
    join(&engine, "LeastRequests");
    let shares = shares_per_second(&engine, &clock, 35, 100, false);
    assert!(shares[1] < 0.06, "{shares:?}");
    assert!(shares[14] > shares[1] && shares[14] < 0.18, "{shares:?}");
    assert!((shares[33] - 0.2).abs() <= 0.03, "{shares:?}");
}

/// FirstAlphabetical: a first destination that comes back takes its factor's share of the
/// picks, the rest going to the next in order, until its window ends.
#[test]
fn first_alphabetical_hands_a_warming_firsts_share_on() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine(&clock, cluster("FirstAlphabetical", &["a", "b"]));
    let ok = |id: &str| ProbeResult::status(id, 200);
    engine
        .report_probe_results("c", &[ok("a"), ok("b")])
        .unwrap();
    engine
        .report_probe_results("c", &[ProbeResult::error("a", "refused")])
        .unwrap();
    assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "b");
    engine.report_probe_results("c", &[ok("a")]).unwrap();
    let count_a = |engine: &Engine| {
        (0..1_000)
            .filter(|_| engine.pick_endpoint("c").unwrap().destination().id() == "a")
            .count()
    };
    // At the start of its window: the 10% minimum.
    let early = count_a(&engine);
    assert!((70..=130).contains(&early), "{early}");
    // Half way: half.
    clock.advance(WINDOW / 2);
    engine.fire_due_timers();
    let half = count_a(&engine);
    assert!((450..=550).contains(&half), "{half}");
    clock.advance(WINDOW / 2);
    engine.fire_due_timers();
    assert_eq!(count_a(&engine), 1_000);
}

/// A destination back from an ejection warms up again; the status shows its factor growing
/// step by step, and nothing once it is warm.
#[test]
fn a_destination_back_from_an_ejection_warms_up_again() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine(&clock, cluster("Random", &["a", "b", "c"]));
    let factor = |engine: &Engine, id: &str| {
        engine.status().clusters[0]
            .destination(id)
            .unwrap()
            .slow_start
    };
    // A cluster's first destinations take full traffic at once.
    assert_eq!(factor(&engine, "a"), None);
    let ok = |id: &str| ProbeResult::status(id, 200);
    engine
        .report_probe_results("c", &[ok("a"), ok("b"), ok("c")])
        .unwrap();
    assert_eq!(factor(&engine, "a"), None);

    engine
        .report_probe_results("c", &[ProbeResult::error("a", "refused")])
        .unwrap();
    clock.advance(Duration::from_secs(2));
    engine.report_probe_results("c", &[ok("a")]).unwrap();
    assert_eq!(factor(&engine, "a"), Some(0.1));
    assert_eq!(factor(&engine, "b"), None);
    let mut seen = Vec::new();
    for _ in 0..40 {
        clock.advance(Duration::from_secs(1));
        engine.fire_due_timers();
        seen.push(factor(&engine, "a"));
    }
    // 0.1 until 3 s, then t / 30, each second's step published by a timer; warm at 30 s.
    assert_eq!(seen[1], Some(0.1));
    let at_9 = seen[8].unwrap();
    assert!((at_9 - 9.0 / 30.0).abs() < 0.02, "{at_9}");
    assert!(seen[..28].iter().all(Option::is_some), "{seen:?}");
    assert!(seen[30..].iter().all(Option::is_none), "{seen:?}");
    // The steps stop with the ramp: no timer is left.
    assert_eq!(engine.next_timer_due(), None);
}

/// When every destination of the best group is warming, the group still takes all its
/// traffic: tier 0 comes back all at once while tier 1 served, and gets every pick at once.
#[test]
fn a_group_that_is_all_warming_takes_all_its_traffic() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine(&clock, cluster("PowerOfTwoChoices", &["a", "b", "remote"]));
    let ok = |id: &str| ProbeResult::status(id, 200);
    let failed = |id: &str| ProbeResult::error(id, "refused");
    engine
        .report_probe_results("c", &[ok("a"), ok("b"), ok("remote")])
        .unwrap();
    engine
        .report_probe_results("c", &[failed("a"), failed("b")])
        .unwrap();
    assert_eq!(
        engine.pick_endpoint("c").unwrap().destination().id(),
        "remote"
    );
    engine
        .report_probe_results("c", &[ok("a"), ok("b")])
        .unwrap();
    let status = engine.status();
    assert_eq!(
        status.clusters[0].destination("a").unwrap().slow_start,
        Some(0.1)
    );
    let mut counts: HashMap<String, usize> = HashMap::new();
    for _ in 0..1_000 {
        let id = engine
            .pick_endpoint("c")
            .unwrap()
            .destination()
            .id()
            .to_string();
        *counts.entry(id).or_default() += 1;
    }
    assert_eq!(counts.get("remote"), None, "{counts:?}");
    assert!(counts["a"] > 400 && counts["b"] > 400, "{counts:?}");
}

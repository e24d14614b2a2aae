//! `PeakEwma` through the engine, on a hand-driven clock: requests are timed from their pick to
//! their report, the lower latency x (in flight + 1) / weight / (1 - utilization) of two random
//! candidates wins, a slow destination's estimate jumps at once and fades with the decay time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{ClusterConfig, DestinationConfig, LoadReportsConfig, LoadSignalsConfig};
use healthpick::{Config, Engine, ManualClock, PickHandle, RequestOutcome};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn engine(clock: &Arc<ManualClock>, cluster: ClusterConfig) -> Engine {
    Engine::builder()
        .seed(5)
        .clock(clock.clone())
        .build_with(Config::new().cluster(cluster))
        .unwrap()
}

fn cluster(destinations: &[(&str, f64)]) -> ClusterConfig {
    let mut cluster = ClusterConfig::new("c").load_balancing_policy("peakewma");
    for (i, &(id, weight)) in destinations.iter().enumerate() {
        let address = format!("http://127.0.0.1:{}/", 30_000 + i);
        cluster = cluster.destination(
            DestinationConfig::new(id, address).metadata("Weight", weight.to_string()),
        );
    }
    cluster
}

/// One request to each destination of `took` (its id to milliseconds), picked by excluding the
/// others and reported after that long: the samples that set their estimates.
fn time_each(engine: &Engine, clock: &ManualClock, took: &[(&str, u64)]) {
    let ids: Vec<String> = engine.status().clusters[0]
        .destinations
        .iter()
        .map(|d| d.id.clone())
        .collect();
    for &(id, ms_taken) in took {
        let others: Vec<&String> = ids.iter().filter(|other| *other != id).collect();
        let pick = engine.pick_endpoint_excluding("c", &others).unwrap();
        assert_eq!(pick.destination().id(), id);
        clock.advance(ms(ms_taken));
        pick.report(RequestOutcome::Status(200));
    }
}

fn shares(engine: &Engine, picks: usize) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for _ in 0..picks {
        let pick = engine.pick_endpoint("c").unwrap();
        *counts
            .entry(pick.destination().id().to_string())
            .or_default() += 1;
    }
    counts
}

/// With nothing in flight, a pick goes to the faster of its two candidates: the slowest of
/// three never wins, the fastest wins whenever drawn, the middle one when paired with the
/// slowest (a third of the picks each way).
#[test]
fn the_faster_of_two_candidates_wins() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine(&clock, cluster(&[("a", 1.0), ("b", 1.0), ("c", 1.0)]));
    time_each(&engine, &clock, &[("a", 10), ("b", 20), ("c", 50)]);
    let counts = shares(&engine, 3_000);
    assert_eq!(counts.get("c"), None, "{counts:?}");
    let (a, b) = (counts["a"], counts["b"]);
    assert!((1_850..=2_150).contains(&a), "{counts:?}");
    assert!((850..=1_150).contains(&b), "{counts:?}");
}

/// Requests in flight count: a fast destination holding requests costs its latency times them
/// plus one, so a slower idle one wins once it is cheaper.
#[test]
fn requests_in_flight_multiply_the_latency() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine(&clock, cluster(&[("fast", 1.0), ("slow", 1.0)]));
    time_each(&engine, &clock, &[("fast", 10), ("slow", 35)]);
    let mut held: Vec<PickHandle> = Vec::new();
    // 10 x (n + 1) < 35 x 1 while fast holds at most 2: it takes the first three.
    for _ in 0..3 {
        let pick = engine.pick_endpoint("c").unwrap();
        assert_eq!(pick.destination().id(), "fast");
        held.push(pick);
    }
    // 10 x 4 > 35: the slow one's turn.
    assert_eq!(
        engine.pick_endpoint("c").unwrap().destination().id(),
        "slow"
    );
    drop(held);
}

/// A sample above the estimate replaces it at once: a destination that turns slow loses its
/// picks on the next one. Lower samples and idle time bring it back only as the decay allows.
#[test]
fn a_peak_counts_at_once_and_fades_with_the_decay_time() {
    let clock = Arc::new(ManualClock::new());
    let decay = Duration::from_secs(10);
    let engine = engine(
        &clock,
        cluster(&[("a", 1.0), ("b", 1.0)])
            .load_signals(LoadSignalsConfig::default().decay_time(decay)),
    );
    time_each(&engine, &clock, &[("a", 10), ("b", 12)]);
    assert!(shares(&engine, 50).keys().all(|id| id == "a"));
    // `a` answers once in 200 ms: b is cheaper at once.
    time_each(&engine, &clock, &[("a", 200)]);
    assert!(shares(&engine, 50).keys().all(|id| id == "b"));
    let estimate = |id: &str| {
        let latency = engine.status().clusters[0]
            .destination(id)
            .unwrap()
            .latency
            .unwrap();
        (latency.as_secs_f64() * 1000.0).round() as u64
    };
    assert_eq!((estimate("a"), estimate("b")), (200, 12));
    // A fast answer from `a` ten seconds later (it took 10 ms) meets the estimate decayed over
    // those 10.01 s, and weighs its own 10 ms against the decay time:
    // 200 x e^(-1.001) x e^(-0.001) + 10 x (1 - e^(-0.001)) ~ 73 ms.
    clock.advance(Duration::from_secs(10));
    time_each(&engine, &clock, &[("a", 10)]);
    let kept = (-0.001f64).exp();
    let expected = 200.0 * (-1.001f64).exp() * kept + 10.0 * (1.0 - kept);
    assert_eq!(estimate("a"), expected.round() as u64);
}

/// Weights divide the cost: a destination of weight 4 holds four times the requests in flight
/// of one of weight 1 before it costs as much.
#[test]
fn cost_is_per_unit_of_weight() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine(&clock, cluster(&[("big", 4.0), ("small", 1.0)]));
    time_each(&engine, &clock, &[("big", 10), ("small", 10)]);
    let mut held: Vec<PickHandle> = (0..500)
        .map(|_| engine.pick_endpoint("c").unwrap())
        .collect();
    let big = held
        .iter()
        .filter(|h| h.destination().id() == "big")
        .count();
    // (big + 1) / 4 ~ (small + 1): big holds about 4/5 of them.
    assert!((390..=410).contains(&big), "{big} of 500 on big");
    held.clear();
}

/// Reported utilization weighs in once it counts (after the blackout): three equally fast
/// destinations reporting 0.2, 0.5 and 0.9 share picks in that order, the one at 0.9 at most
/// half as many as the one at 0.2: at equal costs their requests in flight plus one stand as
/// 0.8 : 0.5 : 0.1.
#[test]
fn reported_utilization_raises_the_cost() {
    let clock = Arc::new(ManualClock::new());
    let reports = LoadReportsConfig::default().blackout(Duration::from_secs(10));
    let engine = engine(
        &clock,
        cluster(&[("low", 1.0), ("mid", 1.0), ("high", 1.0)])
            .load_signals(LoadSignalsConfig::default().load_reports(reports)),
    );
    let utilization = HashMap::from([("low", 0.2), ("mid", 0.5), ("high", 0.9)]);
    // Six requests at a time, each answered in 10 ms with its server's report, every 40 ms: 20 s
    // in all, the last 9 counted.
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut held: Vec<PickHandle> = Vec::new();
    for _ in 0..3_000 {
        let pick = engine.pick_endpoint("c").unwrap();
        let id = pick.destination().id().to_string();
        pick.report_load(&format!(
            "TEXT application_utilization={}",
            utilization[id.as_str()]
        ));
        if clock.now_ms() >= 11_000 {
            *counts.entry(id).or_default() += 1;
        }
        held.push(pick);
        if held.len() == 6 {
            clock.advance(ms(10));
            for pick in held.drain(..) {
                pick.report(RequestOutcome::Status(200));
            }
            clock.advance(ms(30));
        }
    }
    let count = |id: &str| counts.get(id).copied().unwrap_or(0);
    let (low, mid, high) = (count("low"), count("mid"), count("high"));
    assert!(low > mid && mid > high, "{counts:?}");
    assert!(2 * high <= low, "{counts:?}");
}

trait NowMs {
    fn now_ms(&self) -> u128;
}

impl NowMs for ManualClock {
    fn now_ms(&self) -> u128 {
        use healthpick::Clock;
        self.now().as_millis()
    }
}

/// A destination that joins with no sample starts at the default RTT (30 ms), fading as an
/// idle estimate does: where the others answer in 10 ms it gets no pick at first, and is tried
/// once its default has faded below them, about 11 s on (30 x e^(-t / 10 s) < 10).
#[test]
fn a_newcomer_is_tried_once_its_default_has_faded() {
    let clock = Arc::new(ManualClock::new());
    let engine = engine(&clock, cluster(&[("a", 1.0), ("b", 1.0)]));
    time_each(&engine, &clock, &[("a", 10), ("b", 10)]);
    engine
        .apply_config(Config::new().cluster(cluster(&[("a", 1.0), ("b", 1.0), ("new", 1.0)])))
        .unwrap();
    let joined = healthpick::Clock::now(&*clock);
    let mut first = None;
    for _ in 0..200 {
        // Ten requests every 100 ms, one at a time, each answered in 10 ms.
        for _ in 0..10 {
            let pick = engine.pick_endpoint("c").unwrap();
            if pick.destination().id() == "new" && first.is_none() {
                first = Some(healthpick::Clock::now(&*clock) - joined);
            }
            clock.advance(ms(10));
            pick.report(RequestOutcome::Status(200));
        }
    }
    let first = first.expect("the newcomer was tried");
    assert!(
        first > Duration::from_secs(9) && first < Duration::from_secs(13),
        "{first:?}"
    );
}

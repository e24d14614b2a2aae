//! Tier spill through the engine, on a hand-driven clock: requests are picked at a steady rate
//! and reported after a latency the test sets per phase, as a loaded tier's would grow. The
//! preferred tier keeps everything while its latency stays at its baseline; when it climbs past
//! the upper mark the next tier takes a share within a window, spread by the cluster's policy;
//! the share is withdrawn after the dwell time once the tier has room. Availability comes first.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{
    ActiveHealthCheckConfig, ClusterConfig, DestinationConfig, SlowStartConfig, SpillMode,
    TierSpillConfig,
};
use healthpick::{
    Config, Engine, HealthEvent, HealthEventKind, ManualClock, PickHandle, ProbeResult,
    RequestOutcome,
};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn cluster(mode: SpillMode, policy: &str) -> ClusterConfig {
    cluster_of(mode, policy, &["a", "b", "r1", "r2", "r3", "r4"])
}

/// Tier 0 is the ids not starting with `r`.
fn cluster_of(mode: SpillMode, policy: &str, ids: &[&str]) -> ClusterConfig {
    let mut cluster = ClusterConfig::new("c")
        .load_balancing_policy(policy)
        .tier_spill(TierSpillConfig::default().mode(mode))
        .active(ActiveHealthCheckConfig::enabled())
        .metadata("ConsecutiveFailuresHealthPolicy.Threshold", "1");
    for (i, id) in ids.iter().enumerate() {
        let tier = u32::from(id.starts_with('r'));
        let address = format!("http://127.0.0.1:{}/", 32_000 + i);
        cluster = cluster.destination(DestinationConfig::new(*id, address).priority(tier));
    }
    cluster
}

struct Run {
    engine: Engine,
    clock: Arc<ManualClock>,
    events: tokio::sync::broadcast::Receiver<HealthEvent>,
    /// Handles in flight with the engine-clock time they complete.
    in_flight: VecDeque<(Duration, PickHandle)>,
}

impl Run {
    fn new(mode: SpillMode, policy: &str) -> Run {
        Run::with(cluster(mode, policy))
    }

    fn with(cluster: ClusterConfig) -> Run {
        let clock = Arc::new(ManualClock::new());
        let engine = Engine::builder()
            .seed(2)
            .clock(clock.clone())
            .event_capacity(4_096)
            .build_with(Config::new().cluster(cluster))
            .unwrap();
        let events = engine.subscribe();
        Run {
            engine,
            clock,
            events,
            in_flight: VecDeque::new(),
        }
    }

    /// `seconds` of one pick a millisecond; a request to tier 0 takes `tier0`, to tier 1 15 ms.
    /// Returns each destination's picks.
    fn phase(&mut self, seconds: u64, tier0: Duration) -> HashMap<String, usize> {
        let mut picks: HashMap<String, usize> = HashMap::new();
        for _ in 0..seconds * 1_000 {
            self.clock.advance(ms(1));
            let now = healthpick::Clock::now(&*self.clock);
            while self.in_flight.front().is_some_and(|(done, _)| *done <= now) {
                let (_, handle) = self.in_flight.pop_front().unwrap();
                handle.report(RequestOutcome::Status(200));
            }
            self.engine.fire_due_timers();
            let pick = self.engine.pick_endpoint("c").unwrap();
            let id = pick.destination().id().to_string();
            let took = if id.starts_with('r') { ms(15) } else { tier0 };
            *picks.entry(id).or_default() += 1;
            // Completions in order of their time: latencies are constant within a phase.
            let at = self
                .in_flight
                .partition_point(|(done, _)| *done <= now + took);
            self.in_flight.insert(at, (now + took, pick));
        }
        picks
    }

    fn spill_events(&mut self) -> Vec<(Duration, HealthEventKind)> {
        let mut out = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            if matches!(
                event.kind,
                HealthEventKind::SpillStarted { .. } | HealthEventKind::SpillStopped { .. }
            ) {
                out.push((event.at, event.kind));
            }
        }
        out
    }

    fn share(&self) -> f64 {
        self.engine.status().clusters[0]
            .spill
            .as_ref()
            .map_or(0.0, |s| s.share)
    }
}

fn left_tier_0(picks: &HashMap<String, usize>) -> f64 {
    let total: usize = picks.values().sum();
    let remote: usize = picks
        .iter()
        .filter(|(id, _)| id.starts_with('r'))
        .map(|(_, n)| n)
        .sum();
    remote as f64 / total as f64
}

#[test]
fn an_overloaded_tier_spills_within_a_window_and_takes_it_back_after_the_dwell() {
    let mut run = Run::new(SpillMode::Load, "RoundRobin");
    // Steady at its baseline: nothing leaves tier 0.
    let calm = run.phase(5, ms(10));
    assert_eq!(left_tier_0(&calm), 0.0, "{calm:?}");
    let status = run.engine.status();
    let spill = status.clusters[0].spill.as_ref().unwrap();
    assert_eq!((spill.from_tier, spill.to_tier, spill.share), (0, 1, 0.0));
    assert!(
        spill.baseline.is_some_and(|b| b > ms(9) && b < ms(11)),
        "{spill:?}"
    );

    // Overloaded: tier 0's latency climbs to 4 times its baseline.
    let started = healthpick::Clock::now(&*run.clock);
    let loaded = run.phase(3, ms(40));
    let events = run.spill_events();
    let (at, kind) = &events[0];
    assert!(
        matches!(kind, HealthEventKind::SpillStarted { from_tier: 0, to_tier: 1, share } if *share > 0.0),
        "{events:?}"
    );
    // The first window after the first slow answers (40 ms) is judged within 100 ms.
    assert!(*at - started <= ms(40) + ms(100), "{at:?}");
    assert!(left_tier_0(&loaded) > 0.3, "{loaded:?}");
    // Spread over tier 1 by the cluster's policy: round robin, evenly.
    let remote: Vec<usize> = ["r1", "r2", "r3", "r4"]
        .iter()
        .map(|id| loaded.get(*id).copied().unwrap_or(0))
        .collect();
    let (least, most) = (remote.iter().min().unwrap(), remote.iter().max().unwrap());
    assert!(most - least <= 2, "{remote:?}");

    // Room again: the share comes down, but spill goes on through the dwell (5 s below the
    // lower mark), then stops.
    let calm_from = healthpick::Clock::now(&*run.clock);
    let share = run.share();
    run.phase(4, ms(10));
    assert!(
        run.share() > 0.0 && run.share() < share,
        "{} after {share}",
        run.share()
    );
    assert!(run.spill_events().is_empty());
    run.phase(12, ms(10));
    let events = run.spill_events();
    match &events[..] {
        [(
            at,
            HealthEventKind::SpillStopped {
                from_tier: 0,
                to_tier: 1,
            },
        )] => {
            assert!(*at - calm_from >= Duration::from_secs(5), "{at:?}")
        }
        _ => panic!("{events:?}"),
    }
    assert_eq!(run.share(), 0.0);
    let after = run.phase(2, ms(10));
    assert_eq!(left_tier_0(&after), 0.0, "{after:?}");
}

#[test]
fn strict_tiers_never_spill() {
    let mut run = Run::new(SpillMode::Strict, "RoundRobin");
    run.phase(2, ms(10));
    let loaded = run.phase(3, ms(40));
    assert_eq!(left_tier_0(&loaded), 0.0);
    assert!(run.engine.status().clusters[0].spill.is_none());
    assert!(run.spill_events().is_empty());
}

/// Availability outranks load: a tier 0 with nothing available hands all its traffic to tier
/// 1 at once, spilling or not, and spill resumes its watch when tier 0 is back.
#[test]
fn a_dead_preferred_tier_moves_all_traffic_at_once() {
    let mut run = Run::new(SpillMode::Load, "PowerOfTwoChoices");
    run.phase(2, ms(10));
    let failed = |id: &str| ProbeResult::error(id, "refused");
    run.engine
        .report_probe_results("c", &[failed("a"), failed("b")])
        .unwrap();
    let dead = run.phase(1, ms(10));
    assert_eq!(left_tier_0(&dead), 1.0, "{dead:?}");
    // Tier 1 is the best group now; with no tier after it, nothing spills.
    assert!(run.engine.status().clusters[0].spill.is_none());
    let ok = |id: &str| ProbeResult::status(id, 200);
    run.engine
        .report_probe_results("c", &[ok("a"), ok("b")])
        .unwrap();
    let back = run.phase(1, ms(10));
    assert!(left_tier_0(&back) < 0.05, "{back:?}");
}

/// Spill decisions replay exactly: two runs of the same seed and steps give the same events
/// at the same times and the same picks.
#[test]
fn spill_decisions_replay_exactly() {
    let trace = || {
        let mut run = Run::new(SpillMode::Load, "PowerOfTwoChoices");
        let mut picks = Vec::new();
        for (seconds, latency) in [(3, 10), (2, 40), (8, 10)] {
            let phase = run.phase(seconds, ms(latency));
            let mut phase: Vec<(String, usize)> = phase.into_iter().collect();
            phase.sort();
            picks.push(phase);
        }
        (picks, run.spill_events())
    };
    let first = trace();
    assert!(!first.1.is_empty());
    assert_eq!(first, trace());
}

/// A destination that joins the tier taking the spill warms up there as anywhere: its share of
/// the spilled picks follows its slow-start factor, and is a full one once its window is over.
#[test]
fn a_newcomer_to_the_spill_tier_warms_up() {
    let window = Duration::from_secs(10);
    let ids = ["a", "b", "r1", "r2", "r3", "r4"];
    let with_slow_start = |ids: &[&str]| {
        cluster_of(SpillMode::Load, "RoundRobin", ids).slow_start(SlowStartConfig::new(window))
    };
    let mut run = Run::with(with_slow_start(&ids));
    run.phase(5, ms(10));
    run.phase(3, ms(40));
    assert!(run.share() > 0.1, "spilling: {}", run.share());

    let joined = [&ids[..], &["r5"]].concat();
    run.engine
        .apply_config(Config::new().cluster(with_slow_start(&joined)))
        .unwrap();
    let share_of_r5 = |picks: &HashMap<String, usize>| {
        let remote: usize = picks
            .iter()
            .filter(|(id, _)| id.starts_with('r'))
            .map(|(_, n)| n)
            .sum();
        picks.get("r5").copied().unwrap_or(0) as f64 / remote as f64
    };
    // Its first two seconds: a factor of at most 0.2 among four of weight 1.
    let early = run.phase(2, ms(40));
    assert!(share_of_r5(&early) < 0.05, "{early:?}");
    run.phase(8, ms(40));
    // Past its window: an even fifth of the spill.
    let late = run.phase(2, ms(40));
    assert!((share_of_r5(&late) - 0.2).abs() < 0.02, "{late:?}");
}

//! Tier spill under load: the preferred tier (the best group's tier) keeps all traffic until it
//! is overloaded, then the next tier of the same health class takes the share of the picks
//! needed to bring it back, and gives it back once the preferred tier has had room for a while.
//!
//! # What counts as overloaded
//!
//! A client sees no server's queue, only how long its requests take. A tier that is not
//! overloaded answers in about its unloaded time; one that receives more than it can serve
//! queues requests and its latency climbs without bound. So the load of the preferred tier is
//! its **latency ratio**: the median latency of its requests that completed in the last window
//! (at least 16 requests or 500 ms), over its *baseline*, the median it shows unloaded. The
//! median rather than the mean, so that a few slow requests (a long query, a pause) are not
//! taken for a queue. The baseline follows a falling median at once and a rising one over a
//! minute, and only while nothing spills: a tier that spills is loaded by definition, and a
//! baseline learnt from it would creep up with every window until overload looked normal.
//!
//! # The controller
//!
//! Every [`TICK`] the engine's timer hands the controller what the outcome path counted since
//! (latency samples of the preferred tier in a log-scaled histogram, completions of the next
//! tier) and the requests in flight to both tiers:
//!
//! - **Above the upper mark** the tier is saturated: what it serves a second (`X`) is its
//!   capacity, remembered. The share rises at once to what the measured rates say is needed:
//!   the preferred tier keeps 85% of its capacity, less what drains its queue (`N - X x
//!   baseline` requests beyond what its baseline explains, Little's law) within a quarter of a
//!   second, and the rest of the cluster's arrival rate spills. While its queue still grows the
//!   share rises by at least 5 points a window. The preferred tier always keeps a tenth of the
//!   picks, so that its latency stays measured.
//! - **Not overloaded while spilling**, the share comes down by 10 points a second toward what
//!   the capacity needs (85% of it), so that a tier past its peak takes its traffic back; what it
//!   serves then raises the remembered capacity. Spill goes on (with at least 1% of the picks)
//!   until the tier has stayed below the lower mark for the dwell time; then the share comes
//!   down to nothing and spill stops. A load that swings faster than the dwell time makes spill
//!   start once and follow it, rather than start and stop with every swing.
//! - **A slower release is not a load**: a tier still above the upper mark with the share at its
//!   maximum for the dwell time is slow, not loaded: its baseline is reset to what it shows.
//!
//! Reacting within a window of the overload matters more than the exact share: a queue grows
//! by the excess rate every millisecond it is not drained. The share is read by each pick from
//! one atomic ([`SpillState::takes`]), and decided only by the timer, so spill decisions replay
//! exactly under a simulated clock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::config::traffic::TierSpillConfig;
use crate::rng::Draws;

/// How often the controller looks at what the outcome path counted.
pub(crate) const TICK: Duration = Duration::from_millis(25);

/// Samples a window needs before the controller judges it, unless it has lasted
/// [`LONGEST_WINDOW`].
const MIN_SAMPLES: u32 = 16;

/// The longest a window waits for [`MIN_SAMPLES`].
const LONGEST_WINDOW: Duration = Duration::from_millis(500);

/// The share of its measured throughput the preferred tier keeps when it spills.
const KEEP_UTILIZATION: f64 = 0.85;

/// How fast a spilled queue should drain, in seconds.
const DRAIN_WITHIN: f64 = 0.25;

/// The least the share rises by in a window above the upper mark.
const STEP_UP: f64 = 0.05;

/// How fast the share comes down toward what the preferred tier's capacity needs, per second.
const TRIM_PER_SECOND: f64 = 0.1;

/// The least share kept while spilling, until the preferred tier has had room for the dwell
/// time: spill stops only then.
const MIN_SHARE: f64 = 0.01;

/// The most of the picks that spill: the preferred tier keeps the rest, to stay measured.
const MAX_SHARE: f64 = 0.9;

/// How long the baseline takes to follow a rising median (while nothing spills).
const BASELINE_RISE: Duration = Duration::from_secs(60);

/// Sub-buckets per power of two of the latency histogram: a median within 12.5%.
const SUB_BUCKETS: u32 = 8;

/// Powers of two of microseconds the histogram spans (up to about 71 minutes).
const OCTAVES: u32 = 32;

const BUCKETS: usize = (OCTAVES * SUB_BUCKETS) as usize;

/// What the outcome path counts for a cluster that may spill, and the share its picks read.
pub(crate) struct SpillState {
    /// The preferred tier, whose latencies are counted.
    pub from_tier: u32,
    /// The next tier, which takes the spill.
    pub to_tier: u32,
    /// The share of picks that spill, in 2^32ths (0: none).
    share: AtomicU32,
    /// Latency samples of the preferred tier since the controller's last look.
    samples: Box<[AtomicU32]>,
    /// Completions of the next tier since the controller's last look.
    spilled_done: AtomicU32,
    controller: Mutex<Controller>,
}

/// What the controller keeps between ticks.
struct Controller {
    window: Window,
    /// The preferred tier's unloaded median latency, in microseconds.
    baseline: Option<f64>,
    /// Since when the preferred tier has been below the lower mark.
    calm_since: Option<Duration>,
    /// Since when the share has been at its maximum with the tier still overloaded.
    saturated_since: Option<Duration>,
    /// What the preferred tier serves a second when saturated, as measured while overloaded.
    capacity: Option<f64>,
    share: f64,
    /// The latency ratio of the last window judged.
    ratio: Option<f64>,
}

/// The current window: counts since it began.
struct Window {
    started: Duration,
    counts: Box<[u32]>,
    total: u32,
    spilled_done: u32,
    /// Requests in flight to the preferred and the next tier when it began.
    in_flight_at_start: (usize, usize),
}

/// Requests in flight to the two tiers at a tick.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InFlight {
    pub preferred: usize,
    pub next: usize,
}

/// A change of the spill worth an event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum SpillChange {
    /// The share rose from zero.
    Started { share: f64 },
    /// The share came back to zero.
    Stopped,
}

/// Where the spill stands, for the status view.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SpillReading {
    pub share: f64,
    pub ratio: Option<f64>,
    pub baseline: Option<Duration>,
}

impl SpillState {
    /// A state for spilling from tier `from_tier` to `to_tier`, nothing spilling yet, at
    /// engine-clock time `now`.
    pub fn new(from_tier: u32, to_tier: u32, now: Duration) -> Self {
        SpillState {
            from_tier,
            to_tier,
            share: AtomicU32::new(0),
            samples: (0..BUCKETS).map(|_| AtomicU32::new(0)).collect(),
            spilled_done: AtomicU32::new(0),
            controller: Mutex::new(Controller {
                window: Window::new(
                    now,
                    InFlight {
                        preferred: 0,
                        next: 0,
                    },
                ),
                baseline: None,
                calm_since: None,
                saturated_since: None,
                capacity: None,
                share: 0.0,
                ratio: None,
            }),
        }
    }

    /// Whether this pick goes to the next tier: one atomic load while nothing spills, one
    /// random draw when something does.
    #[inline]
    pub fn takes(&self, draws: Draws<'_>) -> bool {
        match self.share.load(Ordering::Relaxed) {
            0 => false,
            share => (draws.next_u64() as u32) < share,
        }
    }

    /// Counts a request of a destination of tier `tier` that took `sample`: the outcome path.
    #[inline]
    pub fn record(&self, tier: u32, sample: Duration) {
        if tier == self.from_tier {
            self.samples[bucket(sample)].fetch_add(1, Ordering::Relaxed);
        } else if tier == self.to_tier {
            self.spilled_done.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The controller's look at engine-clock time `now`, with `in_flight` requests in flight to
    /// the two tiers: judges the window when it is complete and sets the share.
    pub fn tick(
        &self,
        now: Duration,
        in_flight: InFlight,
        rules: &TierSpillConfig,
    ) -> Option<SpillChange> {
        let mut controller = self.controller.lock();
        let window = &mut controller.window;
        for (count, sample) in window.counts.iter_mut().zip(self.samples.iter()) {
            let n = sample.swap(0, Ordering::Relaxed);
            *count += n;
            window.total += n;
        }
        window.spilled_done += self.spilled_done.swap(0, Ordering::Relaxed);
        let elapsed = now.saturating_sub(window.started);
        if window.total < MIN_SAMPLES && elapsed < LONGEST_WINDOW {
            return None;
        }
        let before = controller.share;
        if controller.window.total > 0 {
            controller.judge(now, elapsed, in_flight, rules);
        }
        controller.window = Window::new(now, in_flight);
        let after = controller.share;
        self.share.store(share_bits(after), Ordering::Relaxed);
        match (before > 0.0, after > 0.0) {
            (false, true) => Some(SpillChange::Started { share: after }),
            (true, false) => Some(SpillChange::Stopped),
            _ => None,
        }
    }

    /// Where the spill stands.
    pub fn reading(&self) -> SpillReading {
        let controller = self.controller.lock();
        SpillReading {
            share: controller.share,
            ratio: controller.ratio,
            baseline: controller
                .baseline
                .map(|micros| Duration::from_secs_f64(micros / 1e6)),
        }
    }
}

impl std::fmt::Debug for SpillState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillState")
            .field("from_tier", &self.from_tier)
            .field("to_tier", &self.to_tier)
            .field("reading", &self.reading())
            .finish()
    }
}

impl Controller {
    /// Judges a complete window of `elapsed` that ends at `now`.
    fn judge(
        &mut self,
        now: Duration,
        elapsed: Duration,
        in_flight: InFlight,
        rules: &TierSpillConfig,
    ) {
        let seconds = elapsed.as_secs_f64().max(1e-3);
        let median = self.window.median();
        let baseline = *self.baseline.get_or_insert(median);
        let ratio = median / baseline;
        self.ratio = Some(ratio);
        if self.share == 0.0 && ratio <= rules.upper_mark_setting() {
            self.baseline = Some(if median < baseline {
                median
            } else {
                let pull = (seconds / BASELINE_RISE.as_secs_f64()).min(1.0);
                baseline + (median - baseline) * pull
            });
        }
        let rates = self.window.rates(seconds, in_flight, baseline);
        if ratio > rules.upper_mark_setting() {
            self.calm_since = None;
            // Saturated: what the tier serves now is what it can serve.
            let capacity = match self.capacity {
                Some(known) => (known + rates.served) / 2.0,
                None => rates.served,
            };
            self.capacity = Some(capacity);
            let needed = rates.needed(capacity, true);
            let growing = in_flight.preferred > self.window.in_flight_at_start.0;
            let least = if growing {
                self.share + STEP_UP
            } else {
                self.share
            };
            self.share = least.max(needed).min(MAX_SHARE);
            if self.share >= MAX_SHARE {
                let since = *self.saturated_since.get_or_insert(now);
                if now.saturating_sub(since) >= rules.dwell_setting() {
                    // Slow with a tenth of the traffic: not load. Judge it from here on.
                    self.baseline = Some(median);
                    self.saturated_since = None;
                }
            }
        } else if self.share > 0.0 {
            self.saturated_since = None;
            // Not overloaded while spilling: what it serves now, it can serve.
            let capacity = self.capacity.map_or(rates.served, |c| c.max(rates.served));
            self.capacity = Some(capacity);
            if ratio < rules.lower_mark_setting() {
                self.calm_since.get_or_insert(now);
            } else {
                self.calm_since = None;
            }
            let settled = self
                .calm_since
                .is_some_and(|since| now.saturating_sub(since) >= rules.dwell_setting());
            // Come down gently toward what the tier's capacity needs while it is not
            // overloaded; to nothing once it has had room for the dwell time (its capacity is
            // then more than was measured).
            let (target, floor) = if settled {
                (0.0, 0.0)
            } else {
                (rates.needed(capacity, false), MIN_SHARE.min(self.share))
            };
            if self.share > target {
                let trimmed = self.share - TRIM_PER_SECOND * seconds;
                self.share = trimmed.max(target).max(floor);
            }
        }
    }
}

/// What a window's counts say about the rates of the preferred tier.
struct Rates {
    /// Requests it completed a second.
    served: f64,
    /// Requests a second the whole cluster received (both tiers).
    arriving: f64,
    /// Requests queued at the preferred tier beyond what its baseline latency explains.
    queue: f64,
}

impl Rates {
    /// The share of the cluster's picks that must spill for the preferred tier, able to serve
    /// `capacity` a second, to run at 85% of it (and, with `drain`, to drain its queue within a
    /// quarter of a second).
    fn needed(&self, capacity: f64, drain: bool) -> f64 {
        if self.arriving <= 0.0 {
            return 0.0;
        }
        let drained = if drain {
            self.queue / DRAIN_WITHIN
        } else {
            0.0
        };
        let keep = (KEEP_UTILIZATION * capacity - drained).max(0.0);
        (1.0 - keep / self.arriving).clamp(0.0, 1.0)
    }
}

impl Window {
    /// The rates over this window of `seconds`, with `in_flight` at its end and the preferred
    /// tier's baseline latency in microseconds: arrivals are completions plus the growth of
    /// what is in flight (Little's law for the queue).
    fn rates(&self, seconds: f64, in_flight: InFlight, baseline_micros: f64) -> Rates {
        let served = f64::from(self.total) / seconds;
        let grew = |now: usize, then: usize| (now as f64 - then as f64) / seconds;
        let preferred = served + grew(in_flight.preferred, self.in_flight_at_start.0);
        let next = f64::from(self.spilled_done) / seconds
            + grew(in_flight.next, self.in_flight_at_start.1);
        Rates {
            served,
            arriving: (preferred + next).max(served),
            queue: (in_flight.preferred as f64 - served * baseline_micros / 1e6).max(0.0),
        }
    }

    fn new(now: Duration, in_flight: InFlight) -> Self {
        Window {
            started: now,
            counts: vec![0; BUCKETS].into_boxed_slice(),
            total: 0,
            spilled_done: 0,
            in_flight_at_start: (in_flight.preferred, in_flight.next),
        }
    }

    /// The median of the window's samples, in microseconds: the middle of the bucket the
    /// middle sample falls in.
    fn median(&self) -> f64 {
        let half = self.total.div_ceil(2);
        let mut seen = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= half && count > 0 {
                let (low, width) = bucket_range(index);
                return low + width / 2.0;
            }
        }
        0.0
    }
}

/// The histogram bucket of a latency: below 8 µs one per microsecond, above eight per power of
/// two.
fn bucket(sample: Duration) -> usize {
    let micros = u64::try_from(sample.as_micros()).unwrap_or(u64::MAX).max(1);
    let octave = 63 - micros.leading_zeros();
    let index = if octave < 3 {
        micros
    } else {
        let sub = (micros >> (octave - 3)) & u64::from(SUB_BUCKETS - 1);
        u64::from(octave * SUB_BUCKETS) + sub
    };
    (index as usize).min(BUCKETS - 1)
}

/// The microseconds bucket `index` covers: its lowest value and its width.
fn bucket_range(index: usize) -> (f64, f64) {
    let index = index as u32;
    if index < 3 * SUB_BUCKETS {
        return (f64::from(index), 1.0);
    }
    let (octave, sub) = (index / SUB_BUCKETS, index % SUB_BUCKETS);
    let width = f64::from(1u32 << (octave - 3));
    (f64::from(SUB_BUCKETS + sub) * width, width)
}

/// A share in 2^32ths, as picks compare a random draw with it.
fn share_bits(share: f64) -> u32 {
    (share.clamp(0.0, 1.0) * f64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn buckets_cover_every_latency_in_order_within_an_eighth() {
        let mut last = 0;
        for micros in [
            1,
            2,
            7,
            8,
            9,
            15,
            16,
            100,
            999,
            10_000,
            10_500,
            11_000,
            1 << 30,
        ] {
            let index = bucket(Duration::from_micros(micros));
            assert!(index >= last, "{micros}");
            last = index;
            let (low, width) = bucket_range(index);
            assert!(
                low <= micros as f64 && (micros as f64) < low + width,
                "{micros}: {low} {width}"
            );
            assert!(width <= (low / 8.0).max(1.0), "{micros}");
        }
        assert_eq!(bucket(Duration::from_secs(1 << 40)), BUCKETS - 1);
        assert_eq!(bucket(Duration::ZERO), 1);
    }

    /// Runs `ticks` ticks from `start` in which `per_tick` requests complete, split between the
    /// tiers by the share: those of tier 0 in `latency`, with `in_flight` at each tick; returns
    /// the changes.
    fn run(
        state: &SpillState,
        start: Duration,
        ticks: u32,
        per_tick: u32,
        latency: Duration,
        in_flight: InFlight,
        rules: &TierSpillConfig,
    ) -> Vec<(Duration, SpillChange)> {
        let mut changes = Vec::new();
        for k in 1..=ticks {
            let spilled = (f64::from(per_tick) * state.reading().share).round() as u32;
            for _ in 0..per_tick - spilled {
                state.record(0, latency);
            }
            for _ in 0..spilled {
                state.record(1, ms(15));
            }
            let now = start + TICK * k;
            if let Some(change) = state.tick(now, in_flight, rules) {
                changes.push((now, change));
            }
        }
        changes
    }

    fn load_rules() -> TierSpillConfig {
        TierSpillConfig::default().mode(crate::config::traffic::SpillMode::Load)
    }

    /// Steady latency never spills; a tier whose median latency jumps past the upper mark
    /// spills within one window; once it has room again the share comes down but spill goes on
    /// until the tier has been below the lower mark for the dwell time, then stops.
    #[test]
    fn spill_starts_on_a_queue_and_stops_after_the_dwell() {
        let rules = load_rules();
        let state = SpillState::new(0, 1, Duration::ZERO);
        let idle = InFlight {
            preferred: 8,
            next: 0,
        };
        assert!(run(&state, Duration::ZERO, 400, 20, ms(10), idle, &rules).is_empty());
        assert_eq!(state.reading().share, 0.0);
        let baseline = state.reading().baseline.unwrap();
        assert!(baseline > ms(9) && baseline < ms(11), "{baseline:?}");

        // Overloaded: latency 30 ms, 40 in flight, 800 served a second.
        let t = TICK * 400;
        let loaded = InFlight {
            preferred: 40,
            next: 0,
        };
        let changes = run(&state, t, 1, 20, ms(30), loaded, &rules);
        assert!(matches!(changes[..], [(_, SpillChange::Started { share })] if share > 0.3));
        // Room again: for the dwell time the share comes down but spill goes on.
        let calm_from = t + TICK;
        let changes = run(&state, calm_from, 4 * 40, 20, ms(10), idle, &rules);
        assert!(changes.is_empty(), "{changes:?}");
        assert!(state.reading().share >= MIN_SHARE);
        let changes = run(
            &state,
            calm_from + TICK * 160,
            16 * 40,
            20,
            ms(10),
            idle,
            &rules,
        );
        match changes[..] {
            [(at, SpillChange::Stopped)] => assert!(at - calm_from >= rules.dwell_setting()),
            _ => panic!("{changes:?}"),
        }
        assert_eq!(state.reading().share, 0.0);
    }

    /// The share needed is what the measured rates say: a tier serving 800 a second that
    /// receives 1,200 with a queue keeps 85% of 800 less the queue's drain.
    #[test]
    fn the_share_rises_to_what_the_rates_need_at_once() {
        let rules = load_rules();
        let state = SpillState::new(0, 1, Duration::ZERO);
        let idle = InFlight {
            preferred: 8,
            next: 0,
        };
        run(&state, Duration::ZERO, 40, 20, ms(10), idle, &rules);
        // One window of 25 ms: 20 served (800/s), in flight from 8 to 18 (+400/s arriving
        // beyond what was served): 1,200/s arriving; queue 18 - 800 x 0.01 = 10.
        let now = TICK * 41;
        for _ in 0..20 {
            state.record(0, ms(30));
        }
        state.tick(
            now,
            InFlight {
                preferred: 18,
                next: 0,
            },
            &rules,
        );
        let expected = 1.0 - (0.85 * 800.0 - 10.0 / 0.25) / 1200.0;
        let share = state.reading().share;
        assert!(
            (share - expected).abs() < 0.02,
            "{share} against {expected}"
        );
    }

    /// Never more than nine tenths spill; a tier still slow with that much gone for the dwell
    /// time is slow, not loaded: its baseline moves to what it shows and the share comes down.
    #[test]
    fn a_tier_slow_without_load_is_rebaselined() {
        let rules = load_rules();
        let state = SpillState::new(0, 1, Duration::ZERO);
        let idle = InFlight {
            preferred: 8,
            next: 0,
        };
        run(&state, Duration::ZERO, 40, 20, ms(10), idle, &rules);
        run(&state, TICK * 40, 400, 20, ms(40), idle, &rules);
        assert!(state.reading().share <= MAX_SHARE);
        let baseline = state.reading().baseline.unwrap();
        assert!(baseline > ms(35), "{baseline:?}");
        let changes = run(&state, TICK * 440, 1_000, 20, ms(40), idle, &rules);
        assert!(
            matches!(changes.last(), Some((_, SpillChange::Stopped))),
            "{changes:?}"
        );
    }

    /// A draw below the share spills.
    #[test]
    fn picks_spill_in_proportion_to_the_share() {
        let state = SpillState::new(0, 1, Duration::ZERO);
        state.share.store(share_bits(0.25), Ordering::Relaxed);
        let rng = crate::rng::RandomSource::seeded(3);
        let own = crate::rng::LocalRng::new();
        let spilled = (0..10_000).filter(|_| state.takes(rng.draws(&own))).count();
        assert!((2_300..=2_700).contains(&spilled), "{spilled}");
        state.share.store(0, Ordering::Relaxed);
        assert!(!(0..1_000).any(|_| state.takes(rng.draws(&own))));
    }
}

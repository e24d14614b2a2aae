//! Hedged requests (Finagle's backup requests, gRPC hedging, "The Tail at Scale"):
//! a retryable call whose attempt has not been answered within a delay gets one more attempt on
//! another destination; the first response wins and the other attempt is cancelled. Hedges take
//! tokens from the retry budget and are capped as a share of the calls that may hedge.
//!
//! The delay is fixed, or a percentile of the cluster's recent answered attempts, kept here in a
//! small lock-free log-linear histogram over the last 5 to 10 seconds.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// When a call hedges, and how many calls may.
///
/// Off unless set, per client
/// ([`HealthAwareClientBuilder::hedging`](crate::HealthAwareClientBuilder::hedging)) or per
/// request ([`RequestBuilder::hedging`](crate::RequestBuilder::hedging)). Only retryable
/// requests hedge, and a call hedges at most once. The hedge goes to another destination (the
/// next best of the same tier, then the next tier); the first response wins, and the attempt that
/// lost is cancelled and reported as [`Cancelled`](crate::RequestOutcome::Cancelled), which is
/// never a failure. A hedge takes a token from the cluster's retry budget and one from its hedge
/// cap: at most [`max_share`](Self::max_share) of the calls that may hedge do (default 5%, what
/// hedging at the 95th percentile sends in steady state).
///
/// ```
/// use healthpick::Hedging;
/// use std::time::Duration;
///
/// let fixed = Hedging::after(Duration::from_millis(50));
/// let adaptive = Hedging::at_percentile(95.0).max_share(0.02);
/// assert_eq!(adaptive.share(), 0.02);
/// # drop(fixed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hedging {
    delay: HedgeDelay,
    max_share: f32,
}

/// How long a call waits for an answer before it hedges.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HedgeDelay {
    /// A fixed delay.
    After(Duration),
    /// This percentile (0 to 100, exclusive) of the latencies of the cluster's recent answered
    /// attempts (time to response headers, over the last 5 to 10 s, of calls that hedge at a
    /// percentile). Until 16 answers are known, calls do not hedge.
    Percentile(f32),
}

impl Hedging {
    /// The default cap: 5% of the calls that may hedge.
    pub const DEFAULT_MAX_SHARE: f32 = 0.05;

    /// Hedge after a fixed `delay`.
    pub fn after(delay: Duration) -> Self {
        Hedging {
            delay: HedgeDelay::After(delay),
            max_share: Self::DEFAULT_MAX_SHARE,
        }
    }

    /// Hedge at the `percentile` (for example 95.0) of the cluster's recent latencies. Values
    /// outside 1 to 99.9 are clamped (NaN is 95).
    pub fn at_percentile(percentile: f32) -> Self {
        let percentile = if percentile.is_nan() {
            95.0
        } else {
            percentile.clamp(1.0, 99.9)
        };
        Hedging {
            delay: HedgeDelay::Percentile(percentile),
            max_share: Self::DEFAULT_MAX_SHARE,
        }
    }

    /// At most this share of calls hedge (0 to 1; clamped, NaN is 0). Default 0.05.
    pub fn max_share(mut self, share: f32) -> Self {
        self.max_share = if share.is_nan() {
            0.0
        } else {
            share.clamp(0.0, 1.0)
        };
        self
    }

    /// The delay.
    pub fn delay(&self) -> HedgeDelay {
        self.delay
    }

    /// The cap, as a share of calls.
    pub fn share(&self) -> f32 {
        self.max_share
    }
}

/// Sub-buckets per power of two: latencies are kept to within 12.5%.
const SUB: u32 = 8;
/// Microsecond buckets: exact below 8 µs, then 8 per power of two up to about 2^40 µs.
const BUCKETS: usize = (SUB as usize) * 38;
/// Length of one half of the window.
const HALF_MILLIS: u64 = 5_000;
/// Answers needed before a percentile is trusted.
const MIN_SAMPLES: u64 = 16;
/// How long a computed percentile is reused.
const CACHE_MILLIS: u64 = 100;

fn bucket(micros: u64) -> usize {
    if micros < u64::from(SUB) {
        return micros as usize;
    }
    let exponent = 63 - micros.leading_zeros(); // >= 3
    let sub = (micros >> (exponent - 3)) & u64::from(SUB - 1);
    ((exponent - 3) as usize * SUB as usize + SUB as usize + sub as usize).min(BUCKETS - 1)
}

/// The largest latency (µs) that falls in bucket `index`.
fn upper_bound(index: usize) -> u64 {
    if index < SUB as usize {
        return index as u64;
    }
    let exponent = (index - SUB as usize) / SUB as usize + 3;
    let sub = ((index - SUB as usize) % SUB as usize) as u64;
    ((u64::from(SUB) + sub + 1) << (exponent - 3)) - 1
}

struct Half {
    /// Which 5-second period its counts belong to.
    period: AtomicU64,
    counts: Box<[AtomicU32]>,
}

/// Recent latencies of one cluster's answered attempts, and their percentiles.
pub(crate) struct Latencies {
    origin: Instant,
    halves: [Half; 2],
    /// The last computed delay in µs plus one (0: none), and when (ms since `origin`).
    cached: AtomicU64,
    cached_at: AtomicU64,
}

impl std::fmt::Debug for Latencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latencies").finish_non_exhaustive()
    }
}

impl Latencies {
    pub fn new() -> Self {
        let half = || Half {
            period: AtomicU64::new(0),
            counts: (0..BUCKETS).map(|_| AtomicU32::new(0)).collect(),
        };
        Latencies {
            origin: Instant::now(),
            halves: [half(), half()],
            cached: AtomicU64::new(0),
            cached_at: AtomicU64::new(0),
        }
    }

    fn millis(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_millis() as u64
    }

    /// Records one answered attempt's latency.
    pub fn record(&self, latency: Duration, now: Instant) {
        let period = self.millis(now) / HALF_MILLIS + 1;
        let half = &self.halves[(period % 2) as usize];
        let seen = half.period.load(Ordering::Acquire);
        if seen != period
            && half
                .period
                .compare_exchange(seen, period, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // The winner clears what the period before last left; a record racing with it may
            // be lost, which a percentile does not notice.
            for count in half.counts.iter() {
                count.store(0, Ordering::Relaxed);
            }
        }
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        half.counts[bucket(micros)].fetch_add(1, Ordering::Relaxed);
    }

    /// The `percentile` of the last 5 to 10 s, or `None` while fewer than 16 answers are known.
    pub fn percentile(&self, percentile: f32, now: Instant) -> Option<Duration> {
        let millis = self.millis(now);
        if millis.saturating_sub(self.cached_at.load(Ordering::Relaxed)) < CACHE_MILLIS {
            if let Some(micros) = self.cached.load(Ordering::Relaxed).checked_sub(1) {
                return Some(Duration::from_micros(micros));
            }
        }
        let period = millis / HALF_MILLIS + 1;
        let live: Vec<&Half> = self
            .halves
            .iter()
            .filter(|h| {
                period
                    .checked_sub(h.period.load(Ordering::Acquire))
                    .is_some_and(|age| age <= 1)
            })
            .collect();
        let count = |i: usize| -> u64 {
            live.iter()
                .map(|h| u64::from(h.counts[i].load(Ordering::Relaxed)))
                .sum()
        };
        let total: u64 = (0..BUCKETS).map(count).sum();
        let found = if total < MIN_SAMPLES {
            None
        } else {
            let rank = ((f64::from(percentile) / 100.0) * total as f64)
                .ceil()
                .max(1.0) as u64;
            let mut seen = 0;
            (0..BUCKETS)
                .find(|&i| {
                    seen += count(i);
                    seen >= rank
                })
                .map(upper_bound)
        };
        self.cached
            .store(found.map_or(0, |m| m.saturating_add(1)), Ordering::Relaxed);
        self.cached_at.store(millis, Ordering::Relaxed);
        found.map(Duration::from_micros)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::{bucket, upper_bound, Hedging, Latencies, BUCKETS};

    #[test]
    fn buckets_keep_latencies_within_an_eighth() {
        for micros in [
            0u64,
            1,
            7,
            8,
            9,
            15,
            16,
            100,
            999,
            1_000,
            12_345,
            1_000_000,
            1 << 39,
        ] {
            let b = bucket(micros);
            assert!(upper_bound(b) >= micros, "{micros} in {b}");
            assert!(
                upper_bound(b) as f64 <= (micros as f64 * 1.125).max(micros as f64 + 1.0),
                "{micros}: {}",
                upper_bound(b)
            );
            if b > 0 {
                assert!(upper_bound(b - 1) < micros, "{micros}");
            }
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[tokio::test(start_paused = true)]
    async fn percentiles_of_the_recent_window() {
        let latencies = Latencies::new();
        let now = Instant::now();
        for _ in 0..15 {
            latencies.record(Duration::from_millis(1), now);
        }
        assert_eq!(latencies.percentile(95.0, now), None, "15 answers");
        tokio::time::advance(Duration::from_millis(200)).await;
        let now = Instant::now();
        latencies.record(Duration::from_millis(1), now);
        for _ in 0..4 {
            latencies.record(Duration::from_millis(40), now);
        }
        // 16 at 1 ms, 4 at 40 ms: p50 is about 1 ms, p90 about 40 ms.
        let p50 = latencies.percentile(50.0, now).unwrap();
        assert!(
            p50 >= Duration::from_millis(1) && p50 < Duration::from_micros(1130),
            "{p50:?}"
        );
        tokio::time::advance(Duration::from_millis(200)).await;
        let p90 = latencies.percentile(90.0, Instant::now()).unwrap();
        assert!(
            p90 >= Duration::from_millis(40) && p90 < Duration::from_millis(45),
            "{p90:?}"
        );
        // Ten seconds later the old answers have left the window.
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(latencies.percentile(50.0, Instant::now()), None);
    }

    #[test]
    fn settings_are_clamped() {
        assert_eq!(Hedging::after(Duration::ZERO).share(), 0.05);
        assert_eq!(
            Hedging::at_percentile(f32::NAN),
            Hedging::at_percentile(95.0)
        );
        assert_eq!(Hedging::at_percentile(250.0), Hedging::at_percentile(99.9));
        assert_eq!(Hedging::at_percentile(-1.0), Hedging::at_percentile(1.0));
        assert_eq!(Hedging::after(Duration::ZERO).max_share(7.0).share(), 1.0);
        assert_eq!(
            Hedging::after(Duration::ZERO).max_share(f32::NAN).share(),
            0.0
        );
    }
}

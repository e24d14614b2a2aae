//! A destination's latency estimate: a peak-sensitive exponentially weighted moving average
//! (PeakEWMA), the load measure of Finagle's and linkerd's balancers and of tower's
//! `load::PeakEwma`.
//!
//! The estimate decays towards zero with decay time `tau` (after `tau` it counts for 1/e), so a
//! destination that got no requests because it looked slow eventually looks cheap, gets one,
//! and is measured again. A sample above the estimate as of now replaces it at once, so a
//! destination that turns slow is seen as slow by the next pick; a lower one is blended in with
//! the weight of its own duration. That is the estimator of tower and Finagle, whose every pick
//! decays the candidates' estimates to the time of the pick, so that a request's sample meets
//! an estimate as old as the request: an estimate that a peak raised comes back down to the
//! destination's current latency within `tau` x ln(peak / current), whether or not requests
//! keep coming (a destination that starts cold is back to its share as soon as it is fast).
//! Here picks only read the estimate and the sample applies the decay since the last one.
//!
//! The estimate lives in one 64-bit cell of its cluster's signal pool (`signals.rs`): the
//! estimate in seconds as an `f32` in the high half, the engine-clock millisecond of its last
//! sample in the low half (wrapping after 49 days, which only shortens one decay). A cell of 0
//! has no sample yet. A destination that joins a cluster starts with the cluster's default RTT
//! as of its joining, marked as no sample (a negative estimate): it fades like an estimate, so
//! that a newcomer to a cluster whose destinations answer faster than the default still gets
//! tried, as tower's balancer does, but it shows as no estimate and the first real sample
//! replaces it whatever its value. Samples are written with a compare-and-swap on the outcome
//! path, reads are one load: no lock anywhere.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The decay time and the estimate before the first sample, from the cluster's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySettings {
    /// The estimate of a destination that has had no sample yet.
    pub default_rtt: Duration,
    /// Minus one over the decay time in milliseconds: every read of an estimate decays it, so
    /// the division is made once here.
    per_ms: f32,
}

impl LatencySettings {
    /// `decay`: how fast the estimate fades (to 1/e in `decay`).
    pub fn new(decay: Duration, default_rtt: Duration) -> Self {
        let decay_ms = decay.as_secs_f64() * 1000.0;
        // A zero decay (refused by validation) forgets at once.
        let per_ms = if decay_ms > 0.0 {
            (-1.0 / decay_ms) as f32
        } else {
            -f32::MAX
        };
        LatencySettings {
            default_rtt,
            per_ms,
        }
    }
}

impl Default for LatencySettings {
    /// Decay 10 s, default RTT 30 ms.
    fn default() -> Self {
        LatencySettings::new(Duration::from_secs(10), Duration::from_millis(30))
    }
}

/// Adds one latency sample, taken at engine-clock time `now`, to the estimate in `cell`.
pub(crate) fn record(
    cell: &AtomicU64,
    sample: Duration,
    now: Duration,
    settings: &LatencySettings,
) {
    let sample = sample.as_secs_f64();
    let now_ms = millis(now);
    let mut current = cell.load(Ordering::Relaxed);
    loop {
        let next = match decode(current) {
            Some((estimate, at_ms)) if !is_provisional(current) => {
                let decayed = estimate * decay_factor(now_ms.wrapping_sub(at_ms), settings);
                if sample > decayed {
                    sample
                } else {
                    // The weight an estimate read at the request's pick keeps after it.
                    let kept = f64::from(((sample * 1000.0) as f32 * settings.per_ms).exp());
                    decayed * kept + sample * (1.0 - kept)
                }
            }
            // No sample yet: the first replaces the default.
            _ => sample,
        };
        match cell.compare_exchange_weak(
            current,
            encode(next, now_ms),
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(seen) => current = seen,
        }
    }
}

/// The estimate in `cell` as of engine-clock time `now`, in seconds: decayed towards zero since
/// its last sample; the default RTT before the first one.
#[inline]
pub(crate) fn estimate_secs(cell: &AtomicU64, now: Duration, settings: &LatencySettings) -> f64 {
    match decode(cell.load(Ordering::Relaxed)) {
        Some((estimate, at_ms)) => {
            estimate * decay_factor(millis(now).wrapping_sub(at_ms), settings)
        }
        None => settings.default_rtt.as_secs_f64(),
    }
}

/// [`last_estimate`], or the default RTT before the first sample, in seconds.
#[inline]
pub(crate) fn last_estimate_secs(cell: &AtomicU64, settings: &LatencySettings) -> f64 {
    last_sampled(cell.load(Ordering::Relaxed)).unwrap_or(settings.default_rtt.as_secs_f64())
}

/// The estimate in `cell` as of its last sample, if it has one (for the status view).
pub(crate) fn last_estimate(cell: &AtomicU64) -> Option<Duration> {
    last_sampled(cell.load(Ordering::Relaxed)).map(Duration::from_secs_f64)
}

/// The estimate in seconds a cell's value holds as of its last sample; `None` before the first.
#[inline]
fn last_sampled(value: u64) -> Option<f64> {
    decode(value)
        .filter(|_| !is_provisional(value))
        .map(|(estimate, _)| estimate)
}

/// e^(-elapsed / decay), in single precision: the estimate is stored in it.
#[inline]
fn decay_factor(elapsed_ms: u32, settings: &LatencySettings) -> f64 {
    f64::from((elapsed_ms as f32 * settings.per_ms).exp())
}

fn millis(at: Duration) -> u32 {
    // Wraps every 49 days: only the difference of two stamps is used.
    at.as_millis() as u32
}

/// Gives a destination that just joined, with no sample yet, the default RTT as of `now`: it
/// fades from there until the first sample replaces it.
pub(crate) fn start(cell: &AtomicU64, now: Duration, settings: &LatencySettings) {
    let provisional = -(settings.default_rtt.as_secs_f64() as f32).max(f32::MIN_POSITIVE);
    let value = u64::from(provisional.to_bits()) << 32 | u64::from(millis(now));
    let _ = cell.compare_exchange(0, value, Ordering::Relaxed, Ordering::Relaxed);
}

/// Whether the cell holds the default a destination started with, not a sample.
fn is_provisional(cell: u64) -> bool {
    cell >> 63 == 1
}

fn encode(estimate: f64, at_ms: u32) -> u64 {
    // A positive estimate keeps the high half non-zero, so no encoded value is 0 ("no
    // sample"); a sample of exactly 0 is stored as the smallest positive f32.
    let estimate = (estimate as f32).max(f32::MIN_POSITIVE);
    u64::from(estimate.to_bits()) << 32 | u64::from(at_ms)
}

#[inline]
fn decode(cell: u64) -> Option<(f64, u32)> {
    (cell != 0).then(|| {
        (
            f64::from(f32::from_bits((cell >> 32) as u32)).abs(),
            cell as u32,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn estimate(cell: &AtomicU64, now: Duration, settings: &LatencySettings) -> Duration {
        Duration::from_secs_f64(estimate_secs(cell, now, settings))
    }

    fn close(a: Duration, b: Duration) -> bool {
        (a.as_secs_f64() - b.as_secs_f64()).abs() < 1e-4
    }

    #[test]
    fn the_default_rtt_stands_until_the_first_sample() {
        let settings = LatencySettings::default();
        let cell = AtomicU64::new(0);
        assert_eq!(estimate(&cell, ms(5000), &settings), ms(30));
        assert_eq!(last_estimate(&cell), None);
        record(&cell, ms(12), ms(5000), &settings);
        assert!(close(estimate(&cell, ms(5000), &settings), ms(12)));
    }

    /// A higher sample replaces the estimate at once; a lower one meets the estimate decayed to
    /// its time and is blended in with the weight of its own duration.
    #[test]
    fn peaks_replace_and_lower_samples_decay_in() {
        let settings = LatencySettings::new(Duration::from_secs(10), ms(30));
        let cell = AtomicU64::new(0);
        record(&cell, ms(10), ms(0), &settings);
        record(&cell, ms(200), ms(1), &settings);
        assert!(close(estimate(&cell, ms(1), &settings), ms(200)));
        // 10 s later a 10 ms sample: the old estimate has decayed to 1/e, and keeps the
        // weight of 10 ms against it.
        record(&cell, ms(10), ms(10_001), &settings);
        let decayed = 0.2 * (-1.0f64).exp();
        let kept = (-0.001f64).exp();
        let expected = decayed * kept + 0.01 * (1.0 - kept);
        let got = last_estimate(&cell).unwrap().as_secs_f64();
        assert!((got - expected).abs() < 1e-5, "{got} vs {expected}");
    }

    /// After a peak, the estimate comes back down to the current latency at least at the
    /// decay's pace while lower samples keep coming: 200 ms, then 10 ms samples every 10 ms;
    /// after 30 s (three decay times, 200 ms x e^-3 = 10 ms) it reads the current 10 ms.
    #[test]
    fn a_peak_fades_to_the_current_latency_while_samples_keep_coming() {
        let settings = LatencySettings::new(Duration::from_secs(10), ms(30));
        let cell = AtomicU64::new(0);
        record(&cell, ms(200), ms(0), &settings);
        for step in 1..=3_000 {
            record(&cell, ms(10), ms(step * 10), &settings);
        }
        let at_30s = estimate(&cell, ms(30_000), &settings);
        assert!(at_30s < Duration::from_micros(10_500), "{at_30s:?}");
        assert!(at_30s >= ms(10) - Duration::from_micros(1), "{at_30s:?}");
        // Half-way the decay alone has brought the peak to 200 ms x e^-1.5 = 44.6 ms, and the
        // samples, each weighing its 10 ms against the 10 s decay, to below 20 ms.
        let cell = AtomicU64::new(0);
        record(&cell, ms(200), ms(0), &settings);
        for step in 1..=1_500 {
            record(&cell, ms(10), ms(step * 10), &settings);
        }
        let at_15s = estimate(&cell, ms(15_000), &settings);
        assert!(at_15s > ms(10) && at_15s < ms(20), "{at_15s:?}");
    }

    /// Without samples a read decays towards zero, so a destination that looked slow looks
    /// cheap again after a while.
    #[test]
    fn an_idle_estimate_fades_when_read() {
        let settings = LatencySettings::default();
        let cell = AtomicU64::new(0);
        record(&cell, ms(500), ms(1000), &settings);
        let later = estimate(&cell, ms(21_000), &settings).as_secs_f64();
        assert!((later - 0.5 * (-2.0f64).exp()).abs() < 1e-4, "{later}");
        // Reading writes nothing.
        assert!(close(last_estimate(&cell).unwrap(), ms(500)));
    }

    /// A newcomer starts at the default RTT as of its joining, fading like an estimate; it is
    /// no estimate to show, and the first sample replaces it even when lower.
    #[test]
    fn a_newcomer_starts_at_a_fading_default_that_any_sample_replaces() {
        let settings = LatencySettings::default();
        let cell = AtomicU64::new(0);
        start(&cell, ms(1000), &settings);
        assert!(close(estimate(&cell, ms(1000), &settings), ms(30)));
        let later = estimate(&cell, ms(11_000), &settings).as_secs_f64();
        assert!((later - 0.03 * (-1.0f64).exp()).abs() < 1e-5, "{later}");
        assert_eq!(last_estimate(&cell), None);
        record(&cell, ms(5), ms(11_000), &settings);
        assert!(close(estimate(&cell, ms(11_000), &settings), ms(5)));
        assert!(close(last_estimate(&cell).unwrap(), ms(5)));
        // A destination with samples keeps them.
        start(&cell, ms(12_000), &settings);
        assert!(close(last_estimate(&cell).unwrap(), ms(5)));
    }

    #[test]
    fn a_zero_sample_is_still_a_sample() {
        let settings = LatencySettings::default();
        let cell = AtomicU64::new(0);
        record(&cell, Duration::ZERO, ms(0), &settings);
        assert!(last_estimate(&cell).is_some());
        assert!(estimate(&cell, ms(0), &settings) < ms(1));
    }
}

//! A destination's reported load: the utilization its server last reported in an
//! `endpoint-load-metrics` response header, and since when it has been reporting.
//!
//! A report counts once the destination has been reporting for the blackout period (the first
//! reports of a server that just started say little about its steady load) and stops counting
//! when no report came for the expiration period (a server that stopped reporting must not be
//! judged by its last word forever); a report after an expiry starts a new blackout. Both rules
//! are applied when the load is read, so a write is two stores and a read two loads: no lock.
//!
//! Two cells of the cluster's signal pool (`signals.rs`): the utilization as an `f32` in the high
//! half of one and the engine-clock millisecond of the last report, plus one, in its low half (0:
//! none), and the millisecond the current run of reports began, plus one, in the other.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// How reports count: after the blackout, until they expire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportRules {
    /// How long after the first report of a run reports begin to count.
    pub blackout: Duration,
    /// How long a report counts without a new one.
    pub expiration: Duration,
}

impl Default for ReportRules {
    /// A 10 s blackout, a 3 min expiration.
    fn default() -> Self {
        ReportRules {
            blackout: Duration::from_secs(10),
            expiration: Duration::from_secs(180),
        }
    }
}

/// Records a report of `utilization` at engine-clock time `now`.
pub(crate) fn record(
    load: &AtomicU64,
    since: &AtomicU32,
    utilization: f64,
    now: Duration,
    rules: &ReportRules,
) {
    let now_ms = millis(now);
    let last = load.load(Ordering::Relaxed);
    let expired = last == 0 || elapsed_ms(now_ms, reported_ms(last)) > rules.expiration.as_millis();
    if expired {
        since.store(now_ms.wrapping_add(1).max(1), Ordering::Relaxed);
    }
    let bits = (utilization.max(0.0) as f32).to_bits();
    load.store(
        u64::from(bits) << 32 | u64::from(now_ms.wrapping_add(1).max(1)),
        Ordering::Relaxed,
    );
}

/// The utilization that counts at engine-clock time `now`: the last one reported, once the run
/// of reports is older than the blackout and while the last report is younger than the
/// expiration.
pub(crate) fn utilization(
    load: &AtomicU64,
    since: &AtomicU32,
    now: Duration,
    rules: &ReportRules,
) -> Option<f64> {
    let last = load.load(Ordering::Relaxed);
    if last == 0 {
        return None;
    }
    let now_ms = millis(now);
    if elapsed_ms(now_ms, reported_ms(last)) > rules.expiration.as_millis() {
        return None;
    }
    let began = since.load(Ordering::Relaxed).wrapping_sub(1);
    if elapsed_ms(now_ms, began) < rules.blackout.as_millis() {
        return None;
    }
    Some(f64::from(f32::from_bits((last >> 32) as u32)))
}

/// The last utilization reported, whether it counts or not (for the status view).
pub(crate) fn last_reported(load: &AtomicU64) -> Option<f64> {
    let last = load.load(Ordering::Relaxed);
    (last != 0).then(|| f64::from(f32::from_bits((last >> 32) as u32)))
}

/// The millisecond of the report held in `load`'s low half.
fn reported_ms(load: u64) -> u32 {
    (load as u32).wrapping_sub(1)
}

fn millis(at: Duration) -> u32 {
    // Wraps every 49 days: only differences are used.
    at.as_millis() as u32
}

fn elapsed_ms(now_ms: u32, then_ms: u32) -> u128 {
    u128::from(now_ms.wrapping_sub(then_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    /// A run of reports counts after the blackout and until a report is older than the
    /// expiration; a report after an expiry starts a new blackout.
    #[test]
    fn reports_count_after_the_blackout_and_until_they_expire() {
        let (load, since) = (AtomicU64::new(0), AtomicU32::new(0));
        let rules = ReportRules::default();
        let read = |at| utilization(&load, &since, s(at), &rules);
        assert_eq!(read(5), None);
        record(&load, &since, 0.5, s(100), &rules);
        assert_eq!(read(105), None, "in the blackout");
        record(&load, &since, 0.75, s(109), &rules);
        assert_eq!(read(110), Some(0.75), "the run began at 100");
        assert_eq!(last_reported(&load), Some(0.75));
        assert_eq!(read(109 + 180), Some(0.75));
        assert_eq!(read(109 + 181), None, "expired");
        record(&load, &since, 0.25, s(400), &rules);
        assert_eq!(read(405), None, "a new run, a new blackout");
        assert_eq!(read(410), Some(0.25));
    }

    #[test]
    fn a_report_at_the_clocks_zero_still_counts() {
        let (load, since) = (AtomicU64::new(0), AtomicU32::new(0));
        let rules = ReportRules {
            blackout: Duration::ZERO,
            expiration: s(60),
        };
        record(&load, &since, 0.75, Duration::ZERO, &rules);
        assert_eq!(
            utilization(&load, &since, Duration::ZERO, &rules),
            Some(0.75)
        );
    }
}

//! The built-in passive policy `TransportFailureRate`, computed exactly as YARP's
//! `TransportFailureRateHealthPolicy`:
//!
//! - outcomes are grouped in 1-second buckets; a bucket is stamped with its closing time (its
//!   first event's time + 1 s) and closed by the first event at or after that time;
//! - each outcome is counted first, then closed buckets stamped **more than** the detection window
//!   before now are dropped (the open bucket never is); nothing decays between outcomes;
//! - the rate is 0 below `MinimalTotalCountThreshold` outcomes, else failed / total;
//! - Healthy if rate < limit, else Unhealthy (a rate equal to the limit is Unhealthy).
//!
//! HTTP error statuses are not failures here; they count in the total. The buckets are the
//! destination's [`OutcomeWindow`], which every destination carries beside its health.

use super::passive::{PassiveHealthPolicy, PassivePolicyContext, PassiveVerdict};
use crate::destination::outcome_window::{OutcomeWindow, WindowCounts};
use crate::health::outcome::RequestOutcome;
use crate::health::reason::Reason;
use crate::health::state::HealthState;

/// Ejects a destination whose transport-failure rate over the detection window reaches the
/// cluster's limit (metadata `TransportFailureRateHealthPolicy.RateLimit`, default 0.3).
/// Reactivation after max(`ReactivationPeriod` or 60 s, detection window).
#[derive(Debug, Clone, Copy, Default)]
pub struct TransportFailureRate;

impl PassiveHealthPolicy for TransportFailureRate {
    fn request_completed(
        &self,
        ctx: &PassivePolicyContext<'_>,
        outcome: RequestOutcome,
    ) -> Option<PassiveVerdict> {
        let options = ctx.options();
        let counts = ctx.with_outcome_window(|window| {
            window.record(
                ctx.now(),
                options.detection_window_size,
                outcome.is_transport_failure(),
            )
        });
        let counts = rated(counts, options.minimal_total_count_threshold);
        let limit = ctx.failure_rate_limit();
        let health = if counts.rate < limit {
            HealthState::Healthy
        } else {
            HealthState::Unhealthy
        };
        // Reactivating before the history expires would let old failures eject it again at once.
        let period = ctx.effective_reactivation_period();
        Some(PassiveVerdict {
            health,
            reason: Reason::FailureRate {
                failed: counts.failed,
                total: counts.total,
                rate: counts.rate,
                limit,
            },
            reactivation_after: period,
        })
    }

    /// The failures of the outage are forgotten: a destination that active checks saw come back
    /// is not ejected again by its first successful request (healthpick extension; YARP keeps
    /// the history).
    fn destination_recovered(&self, ctx: &PassivePolicyContext<'_>) {
        ctx.with_outcome_window(OutcomeWindow::clear);
    }
}

/// Counts of the window after an outcome was added, with the rate.
#[derive(Debug, Clone, Copy, PartialEq)]
struct WindowRate {
    failed: u64,
    total: u64,
    rate: f64,
}

/// The rate of `counts`: 0 below `min_total` outcomes, else failed / total.
fn rated(counts: WindowCounts, min_total: u64) -> WindowRate {
    let rate = if counts.total == 0 || counts.total < min_total {
        0.0
    } else {
        counts.failed as f64 / counts.total as f64
    };
    WindowRate {
        failed: counts.failed,
        total: counts.total,
        rate,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::time::Duration;

    use super::*;

    const BUCKET: Duration = Duration::from_secs(1);

    /// The window and the rate, as the policy computes them.
    #[derive(Default)]
    struct FailureHistory(OutcomeWindow);

    impl FailureHistory {
        fn add(
            &mut self,
            now: Duration,
            window: Duration,
            min_total: u64,
            failed: bool,
        ) -> WindowRate {
            rated(self.0.record(now, window, failed), min_total)
        }
    }

    fn s(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    #[test]
    fn buckets_close_at_first_event_plus_one_second_and_expire_after_the_window() {
        let mut h = FailureHistory::default();
        let w = s(30.0);
        // Bucket A opens at 0 (closes at 1): F, S.
        assert_eq!(h.add(s(0.0), w, 1, true).rate, 1.0);
        assert_eq!(h.add(s(0.9), w, 1, false).rate, 0.5);
        // 1.0 >= 1.0 closes A (stamp 1.0); new bucket B closes at 2.0.
        let c = h.add(s(1.0), w, 1, false);
        assert_eq!((c.failed, c.total), (1, 3));
        // At 31.0, A's stamp (1.0) is exactly 30 s old: not more than the window, kept.
        let c = h.add(s(31.0), w, 1, false);
        assert_eq!((c.failed, c.total), (1, 4));
        // At 31.5 A is 30.5 s old and dropped; B (stamp 2.0) is 29.5 s old, kept.
        let c = h.add(s(31.5), w, 1, false);
        assert_eq!((c.failed, c.total), (0, 3));
    }

    #[test]
    fn the_open_bucket_is_never_dropped() {
        let mut h = FailureHistory::default();
        h.add(s(0.0), s(1.0), 1, true);
        // Same bucket would close at 1.0; an event at 100 closes it and drops it, but the new
        // open bucket holds this event.
        let c = h.add(s(100.0), s(1.0), 1, true);
        assert_eq!((c.failed, c.total), (1, 1));
    }

    #[test]
    fn rate_is_zero_below_the_minimal_total() {
        let mut h = FailureHistory::default();
        for i in 0..9 {
            assert_eq!(h.add(s(i as f64 * 0.01), s(60.0), 10, true).rate, 0.0);
        }
        assert_eq!(h.add(s(0.5), s(60.0), 10, true).rate, 1.0);
    }

    /// The history as it was first written (a plain deque walked on every outcome), kept to
    /// check the compact one against.
    #[derive(Default)]
    struct Reference {
        open_closes_at: Option<Duration>,
        open_total: u64,
        open_failed: u64,
        closed: VecDeque<(Duration, u64, u64)>,
        total: u64,
        failed: u64,
    }

    impl Reference {
        fn add(
            &mut self,
            now: Duration,
            window: Duration,
            min_total: u64,
            failed: bool,
        ) -> WindowRate {
            let closes_at = *self.open_closes_at.get_or_insert(now + BUCKET);
            if now >= closes_at {
                self.closed
                    .push_back((closes_at, self.open_total, self.open_failed));
                self.open_closes_at = Some(now + BUCKET);
                self.open_total = 0;
                self.open_failed = 0;
            }
            self.open_total += 1;
            self.total += 1;
            if failed {
                self.open_failed += 1;
                self.failed += 1;
            }
            while let Some(&(stamp, total, failed)) = self.closed.front() {
                if now.saturating_sub(stamp) > window {
                    self.closed.pop_front();
                    self.total -= total;
                    self.failed -= failed;
                } else {
                    break;
                }
            }
            // The rate as the policy rates counts: what this reference checks is the counting.
            rated(
                WindowCounts {
                    failed: self.failed,
                    total: self.total,
                },
                min_total,
            )
        }
    }

    proptest::proptest! {
        /// Any sequence of outcomes (gaps from 0 to beyond the window, failures or not, a
        /// reset now and then as on recovery) gets the same counts and rate from the compact
        /// history as from the reference, outcome by outcome.
        #[test]
        fn the_compact_history_counts_as_the_reference_does(
            window_ms in 1u64..5_000,
            min_total in 0u64..20,
            steps in proptest::collection::vec((0u64..3_000, proptest::bool::ANY, 0u8..100), 1..400),
        ) {
            let window = Duration::from_millis(window_ms);
            let mut compact = FailureHistory::default();
            let mut reference = Reference::default();
            let mut now = Duration::ZERO;
            for (gap_ms, failed, reset) in steps {
                // Mostly short gaps, so buckets fill; sometimes long ones, so they expire.
                let gap = if gap_ms < 2_500 { gap_ms / 10 } else { gap_ms * 3 };
                now += Duration::from_millis(gap);
                if reset == 0 {
                    compact = FailureHistory::default();
                    reference = Reference::default();
                }
                let got = compact.add(now, window, min_total, failed);
                let want = reference.add(now, window, min_total, failed);
                proptest::prop_assert_eq!(got, want);
                proptest::prop_assert_eq!(compact.0.closed_buckets(), reference.closed.len());
            }
        }
    }
}

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
//! HTTP error statuses are not failures here; they count in the total.

use std::collections::VecDeque;
use std::time::Duration;

use super::passive::{PassiveHealthPolicy, PassivePolicyContext, PassiveVerdict};
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
        let counts = ctx.with_state(|history: &mut FailureHistory| {
            history.add(
                ctx.now(),
                options.detection_window_size,
                options.minimal_total_count_threshold,
                outcome.is_transport_failure(),
            )
        });
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
        ctx.with_state(|history: &mut FailureHistory| *history = FailureHistory::default());
    }
}

const BUCKET: Duration = Duration::from_secs(1);

/// Counts of the window after an outcome was added.
#[derive(Debug, Clone, Copy, PartialEq)]
struct WindowCounts {
    failed: u64,
    total: u64,
    rate: f64,
}

/// One destination's outcome history (YARP's `ProxiedRequestHistory`), kept in its state slot.
#[derive(Debug, Default)]
struct FailureHistory {
    /// Closing time of the open bucket; `None` before the first outcome.
    open_closes_at: Option<Duration>,
    open_total: u64,
    open_failed: u64,
    /// Closed buckets: (closing time, total, failed), oldest first.
    closed: VecDeque<(Duration, u64, u64)>,
    total: u64,
    failed: u64,
}

impl FailureHistory {
    fn add(
        &mut self,
        now: Duration,
        window: Duration,
        min_total: u64,
        failed: bool,
    ) -> WindowCounts {
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
        let rate = if self.total == 0 || self.total < min_total {
            0.0
        } else {
            self.failed as f64 / self.total as f64
        };
        WindowCounts {
            failed: self.failed,
            total: self.total,
            rate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

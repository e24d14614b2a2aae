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

use std::time::Duration;

use super::passive::{PassiveHealthPolicy, PassivePolicyContext, PassiveVerdict, QuietSuccesses};
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

    /// Each success is one non-failed outcome in the window, and the verdict only ever depends
    /// on the window's counts: each success below the minimum rates 0, and past it the rate never
    /// grows, so the first success that reaches the minimum decides for all later ones.
    fn quiet_successes(
        &self,
        ctx: &PassivePolicyContext<'_>,
        window: &OutcomeWindow,
    ) -> Option<QuietSuccesses> {
        let options = ctx.options();
        QuietRule {
            window: options.detection_window_size,
            min_total: options.minimal_total_count_threshold,
            limit: ctx.failure_rate_limit(),
        }
        .grant(window)
    }
}

/// Which `Success` outcomes keep a Healthy verdict without being judged one by one.
#[derive(Debug, Clone, Copy, PartialEq)]
struct QuietRule {
    /// The detection window.
    pub window: Duration,
    /// `MinimalTotalCountThreshold`.
    pub min_total: u64,
    /// The rate limit.
    pub limit: f64,
}

impl QuietRule {
    /// How many successes in a row, from the window as it is, would each leave the verdict
    /// Healthy (at most `u16::MAX`), and until when they would all be counted in the open
    /// bucket; `None` when not one would.
    ///
    /// The rate after `j` more successes is 0 while the total stays below the minimum, then
    /// failed / total, which never grows with `j`: so if the first success that reaches the
    /// minimum rates below the limit, every later one does too, and otherwise the successes
    /// before it are the ones that keep Healthy. Each is decided by the policy's own `rated`.
    fn grant(&self, window: &OutcomeWindow) -> Option<QuietSuccesses> {
        let until = window.quiet_until(self.window)?;
        let counts = window.counts();
        let healthy_after = |j: u64| {
            let after = WindowCounts {
                failed: counts.failed,
                total: counts.total + j,
            };
            rated(after, self.min_total).rate < self.limit
        };
        let first_rated = self.min_total.saturating_sub(counts.total).max(1);
        let count = if healthy_after(first_rated) {
            u64::from(u16::MAX)
        } else if first_rated > 1 && healthy_after(1) {
            (first_rated - 1).min(u64::from(u16::MAX))
        } else {
            0
        };
        (count > 0).then_some(QuietSuccesses {
            count: count as u16,
            until,
        })
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

    #[test]
    fn quiet_successes_stop_where_the_minimum_would_rate_the_failures() {
        let rule = QuietRule {
            window: s(10.0),
            min_total: 10,
            limit: 0.3,
        };
        let mut w = OutcomeWindow::default();
        assert_eq!(rule.grant(&w), None, "no outcome yet: no open bucket");
        for i in 0..6 {
            w.record(s(0.1 * f64::from(i)), rule.window, i < 5);
        }
        // 5 failed of 6: successes 7..9 rate 0 (below the minimum); the 4th makes 5/10 >= 0.3.
        let grant = rule.grant(&w).unwrap();
        assert_eq!(grant.count, 3);
        assert_eq!(grant.until, s(1.0), "the open bucket closes at 1 s");
        // Past the minimum at a low rate: every later success stays below the limit.
        for i in 0..20 {
            w.record(s(0.6 + 0.01 * f64::from(i)), rule.window, false);
        }
        assert_eq!(rule.grant(&w).unwrap().count, u16::MAX);
        // A limit of 0 rates everything Unhealthy: nothing to grant.
        let strict = QuietRule { limit: 0.0, ..rule };
        assert_eq!(strict.grant(&w), None);
    }

    proptest::proptest! {
        /// Whatever the history: each granted success, recorded one by one at the last moment
        /// of the grant, rates below the limit and lands in the open bucket; the success after
        /// the grant (when the grant is not the maximum) would rate at or above it; and at the
        /// grant's end a bucket closes or expires. With no grant, the next success would not
        /// rate below the limit.
        #[test]
        fn granted_successes_are_exactly_those_that_keep_the_verdict(
            steps in proptest::collection::vec((0u64..1_500, proptest::bool::weighted(0.3)), 0..60),
            min_total in 0u64..15,
            limit_percent in 0u32..=100,
            window_s in 1u64..5,
        ) {
            let rule = QuietRule {
                window: Duration::from_secs(window_s),
                min_total,
                limit: f64::from(limit_percent) / 100.0,
            };
            let mut w = OutcomeWindow::default();
            let mut now_ms = 0;
            for (dt, failed) in steps {
                now_ms += dt;
                w.record(Duration::from_millis(now_ms), rule.window, failed);
            }
            let rates_healthy = |c: WindowCounts| rated(c, min_total).rate < rule.limit;
            match rule.grant(&w) {
                Some(QuietSuccesses { count, until }) => {
                    proptest::prop_assert!(count > 0);
                    let last = until - Duration::from_nanos(1);
                    let mut probe = w.clone();
                    let buckets = w.closed_buckets();
                    for j in 1..=u64::from(count.min(200)) {
                        let c = probe.record(last, rule.window, false);
                        proptest::prop_assert_eq!(c.total, w.counts().total + j);
                        proptest::prop_assert_eq!(probe.closed_buckets(), buckets);
                        proptest::prop_assert!(rates_healthy(c));
                    }
                    if count < 200 {
                        let c = probe.record(last, rule.window, false);
                        proptest::prop_assert!(!rates_healthy(c), "the grant is as long as it can be");
                    }
                    let mut edge = w.clone();
                    let c = edge.record(until, rule.window, false);
                    let plain = WindowCounts { failed: w.counts().failed, total: w.counts().total + 1 };
                    proptest::prop_assert!(edge.closed_buckets() != buckets || c != plain);
                }
                None => {
                    if let Some(until) = w.quiet_until(rule.window) {
                        let c = w.clone().record(until - Duration::from_nanos(1), rule.window, false);
                        proptest::prop_assert!(!rates_healthy(c));
                    }
                }
            }
        }
    }
}

//! The built-in passive policy `OutlierDetection`: Envoy's outlier detection on
//! response statuses, which TransportFailureRate does not look at.
//!
//! - Per destination, two counters: consecutive 5xx responses, and consecutive gateway errors
//!   (502, 503, 504). A transport failure counts as both (Envoy counts locally originated errors
//!   as 5xx by default); any other outcome (success, cancellation, a status below 500) resets
//!   both, and a 5xx that is not a gateway error resets the gateway counter.
//! - A counter reaching its limit (`OutlierDetection.Consecutive5xx`,
//!   `OutlierDetection.ConsecutiveGatewayFailure`, default 5 each, 0 turns one off) ejects the
//!   destination: its passive health becomes Unhealthy for the base ejection time (default 30 s)
//!   times the number of ejections in a row, at most the maximum (default 300 s); the engine's
//!   passive reactivation brings it back (to Unknown) when that time is over. Both counters start
//!   over.
//! - Each full `OutlierDetection.Interval` (default 10 s) a destination stays in service without
//!   a new ejection lowers its count of ejections in a row by one, so the ejection time decays
//!   back to the base.
//! - At most `OutlierDetection.MaxEjectionPercent` (default 10) of the cluster's destinations,
//!   rounded down but never fewer than one, are ejected by this policy at once; a destination
//!   reaching a limit while the cap is full is not ejected, and is as soon as there is room and
//!   it fails again.
//!
//! Its data lives in each destination's state slot and, for the ejections of the cluster, in the
//! cluster's state slot, taken only when a destination reaches a limit.

use std::sync::Arc;
use std::time::Duration;

use super::passive::{PassiveHealthPolicy, PassivePolicyContext, PassiveVerdict};
use crate::config::model::OutlierDetectionOptions;
use crate::health::outcome::RequestOutcome;
use crate::health::reason::{OutlierEjection, Reason};
use crate::health::state::HealthState;

/// Ejects a destination after consecutive 5xx responses or gateway errors, for a time that grows
/// with repeated ejections, never more than a share of its cluster at once (Envoy's outlier
/// detection; settings from cluster metadata `OutlierDetection.*`, see
/// [`OutlierDetectionOptions`]).
///
/// It can run beside TransportFailureRate: `"Policy": "TransportFailureRate, OutlierDetection"`
/// (see [`PassiveHealthCheckConfig::policy_names`](crate::config::PassiveHealthCheckConfig::policy_names)
/// for how their verdicts combine).
#[derive(Debug, Clone, Copy, Default)]
pub struct OutlierDetection;

/// What one outcome says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fine,
    ServerError,
    GatewayError,
}

fn kind(outcome: RequestOutcome) -> Kind {
    match outcome {
        RequestOutcome::TransportFailure | RequestOutcome::Status(502..=504) => Kind::GatewayError,
        RequestOutcome::Status(500..=599) => Kind::ServerError,
        RequestOutcome::Success | RequestOutcome::Cancelled | RequestOutcome::Status(_) => {
            Kind::Fine
        }
    }
}

/// One destination's outlier state, in its state slot.
#[derive(Debug, Default)]
struct Outlier {
    consecutive_5xx: u32,
    consecutive_gateway: u32,
    /// Ejections in a row (the multiplier of the ejection time), after decay.
    ejections: u32,
    /// End of the current ejection.
    ejected_until: Option<Duration>,
    /// Since when its ejection count decays (its return, or the last decay step).
    decays_from: Duration,
}

impl Outlier {
    /// Counts one outcome; true when a limit is reached.
    fn count(&mut self, kind: Kind, options: &OutlierDetectionOptions) -> bool {
        match kind {
            Kind::Fine => {
                self.consecutive_5xx = 0;
                self.consecutive_gateway = 0;
            }
            Kind::ServerError => {
                self.consecutive_5xx = self.consecutive_5xx.saturating_add(1);
                self.consecutive_gateway = 0;
            }
            Kind::GatewayError => {
                self.consecutive_5xx = self.consecutive_5xx.saturating_add(1);
                self.consecutive_gateway = self.consecutive_gateway.saturating_add(1);
            }
        }
        (options.consecutive_5xx > 0 && self.consecutive_5xx >= options.consecutive_5xx)
            || (options.consecutive_gateway_failure > 0
                && self.consecutive_gateway >= options.consecutive_gateway_failure)
    }

    /// Lowers the ejection count by one per full interval in service since it last decayed.
    fn decay(&mut self, now: Duration, interval: Duration) {
        if self.ejections == 0 || interval.is_zero() {
            return;
        }
        let steps = now.saturating_sub(self.decays_from).as_nanos() / interval.as_nanos();
        let steps = u32::try_from(steps).unwrap_or(u32::MAX);
        if steps == 0 {
            return;
        }
        self.ejections = self.ejections.saturating_sub(steps);
        self.decays_from = interval
            .checked_mul(steps)
            .and_then(|d| self.decays_from.checked_add(d))
            .unwrap_or(now);
    }

    fn reason(&self, ejection: OutlierEjection) -> Reason {
        Reason::Outlier {
            consecutive_5xx: self.consecutive_5xx,
            consecutive_gateway_failures: self.consecutive_gateway,
            ejection,
        }
    }
}

/// The cluster's current ejections by this policy, in the cluster's state slot.
#[derive(Debug, Default)]
struct Ejections {
    /// (destination id, end of its ejection).
    current: Vec<(Arc<str>, Duration)>,
}

impl Ejections {
    /// Ejects `id` until `until` if fewer than `cap` destinations are ejected at `now`; else
    /// `Err` with how many are.
    fn admit(&mut self, id: &str, now: Duration, until: Duration, cap: usize) -> Result<(), usize> {
        self.current
            .retain(|(other, end)| *end > now && **other != *id);
        if self.current.len() >= cap {
            return Err(self.current.len());
        }
        self.current.push((Arc::from(id), until));
        Ok(())
    }
}

impl PassiveHealthPolicy for OutlierDetection {
    fn request_completed(
        &self,
        ctx: &PassivePolicyContext<'_>,
        outcome: RequestOutcome,
    ) -> Option<PassiveVerdict> {
        let options = ctx.outlier_detection();
        let now = ctx.now();
        let verdict = ctx.with_state(|state: &mut Outlier| {
            if let Some(until) = state.ejected_until {
                if now < until {
                    // Outcomes of requests sent before the ejection change nothing; the
                    // destination stays out (also when another policy would let it back).
                    let remaining = until - now;
                    return PassiveVerdict {
                        health: HealthState::Unhealthy,
                        reason: state.reason(OutlierEjection::StillEjected { remaining }),
                        reactivation_after: remaining,
                    };
                }
                state.ejected_until = None;
                state.decays_from = until;
            }
            state.decay(now, options.interval);
            if !state.count(kind(outcome), options) {
                return healthy(state.reason(OutlierEjection::None));
            }
            let count = state.ejections.saturating_add(1);
            let duration = options.ejection_time(count);
            let until = now.saturating_add(duration);
            let cap = options.max_ejected(ctx.cluster_size());
            let destination = ctx.destination().id();
            let admitted = ctx.with_cluster_state(|ejections: &mut Ejections| {
                ejections.admit(destination, now, until, cap)
            });
            match admitted {
                Ok(()) => {
                    let reason = state.reason(OutlierEjection::Ejected { duration, count });
                    state.ejections = count;
                    state.ejected_until = Some(until);
                    state.consecutive_5xx = 0;
                    state.consecutive_gateway = 0;
                    PassiveVerdict {
                        health: HealthState::Unhealthy,
                        reason,
                        reactivation_after: duration,
                    }
                }
                // The counters stay at the limit: the next error ejects it if there is room.
                Err(ejected) => healthy(state.reason(OutlierEjection::CapReached { ejected, cap })),
            }
        });
        Some(verdict)
    }

    /// Active checks saw the destination come back: its error counters start over (its
    /// ejection count still decays by time).
    fn destination_recovered(&self, ctx: &PassivePolicyContext<'_>) {
        ctx.with_state(|state: &mut Outlier| {
            state.consecutive_5xx = 0;
            state.consecutive_gateway = 0;
        });
    }
}

fn healthy(reason: Reason) -> PassiveVerdict {
    PassiveVerdict {
        health: HealthState::Healthy,
        reason,
        reactivation_after: Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn statuses_and_transport_failures_are_classified_as_envoy_does() {
        assert_eq!(kind(RequestOutcome::Status(500)), Kind::ServerError);
        assert_eq!(kind(RequestOutcome::Status(599)), Kind::ServerError);
        for gateway in [502, 503, 504] {
            assert_eq!(kind(RequestOutcome::Status(gateway)), Kind::GatewayError);
        }
        assert_eq!(kind(RequestOutcome::TransportFailure), Kind::GatewayError);
        for fine in [
            RequestOutcome::Success,
            RequestOutcome::Cancelled,
            RequestOutcome::Status(200),
            RequestOutcome::Status(404),
            RequestOutcome::Status(600),
        ] {
            assert_eq!(kind(fine), Kind::Fine);
        }
    }

    #[test]
    fn a_500_resets_the_gateway_counter_and_a_success_both() {
        let options = OutlierDetectionOptions {
            consecutive_5xx: 0,
            consecutive_gateway_failure: 3,
            ..OutlierDetectionOptions::default()
        };
        let mut o = Outlier::default();
        assert!(!o.count(Kind::GatewayError, &options));
        assert!(!o.count(Kind::GatewayError, &options));
        assert!(
            !o.count(Kind::ServerError, &options),
            "a 500 is not a gateway error"
        );
        assert!(!o.count(Kind::GatewayError, &options));
        assert!(!o.count(Kind::GatewayError, &options));
        assert!(o.count(Kind::GatewayError, &options));
        assert!(!o.count(Kind::Fine, &options));
        assert_eq!((o.consecutive_5xx, o.consecutive_gateway), (0, 0));
    }

    #[test]
    fn ejection_time_grows_with_the_count_up_to_the_maximum() {
        let options = OutlierDetectionOptions::default();
        assert_eq!(options.ejection_time(1), s(30));
        assert_eq!(options.ejection_time(3), s(90));
        assert_eq!(options.ejection_time(10), s(300));
        assert_eq!(options.ejection_time(u32::MAX), s(300));
        let long_base = OutlierDetectionOptions {
            base_ejection_time: s(600),
            ..options
        };
        assert_eq!(long_base.ejection_time(2), s(600), "at least the base");
    }

    #[test]
    fn the_share_of_ejected_destinations_is_rounded_down_but_at_least_one() {
        let options = OutlierDetectionOptions::default();
        assert_eq!(options.max_ejected(1), 1);
        assert_eq!(options.max_ejected(19), 1);
        assert_eq!(options.max_ejected(20), 2);
        let half = OutlierDetectionOptions {
            max_ejection_percent: 50.0,
            ..options
        };
        assert_eq!(half.max_ejected(5), 2);
        let none = OutlierDetectionOptions {
            max_ejection_percent: 0.0,
            ..options
        };
        assert_eq!(none.max_ejected(100), 1);
    }

    #[test]
    fn the_ejection_count_decays_one_per_interval_in_service() {
        let mut o = Outlier {
            ejections: 3,
            decays_from: s(100),
            ..Outlier::default()
        };
        o.decay(s(109), s(10));
        assert_eq!(o.ejections, 3);
        o.decay(s(125), s(10));
        assert_eq!((o.ejections, o.decays_from), (1, s(120)));
        o.decay(s(1000), s(10));
        assert_eq!(o.ejections, 0);
    }

    #[test]
    fn the_cap_counts_only_ejections_still_running() {
        let mut e = Ejections::default();
        assert_eq!(e.admit("a", s(0), s(30), 1), Ok(()));
        assert_eq!(e.admit("b", s(10), s(40), 1), Err(1));
        assert_eq!(e.admit("b", s(30), s(60), 1), Ok(()), "`a` is back at 30 s");
    }
}

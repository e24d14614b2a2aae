//! The built-in active policy `ConsecutiveFailures` (SPEC §3), as YARP's
//! `ConsecutiveFailuresHealthPolicy`: a destination becomes Unhealthy after `threshold`
//! consecutive failed probes and Healthy after one successful probe. Below the threshold a failure
//! keeps the previous state, so a new destination stays Unknown until it fails `threshold` times
//! or succeeds once.

use super::{
    ActiveHealthPolicy, ActivePolicyContext, ActiveVerdict, HealthState, ProbeResult, Reason,
};
use crate::destination::Destination;

/// Ejects a destination after `threshold` consecutive failed probes (cluster metadata
/// `ConsecutiveFailuresHealthPolicy.Threshold`, default 2; a fractional threshold such as `2.5`
/// means the third failure, and a threshold <= 0 the first).
#[derive(Debug, Clone, Copy, Default)]
pub struct ConsecutiveFailures;

impl ActiveHealthPolicy for ConsecutiveFailures {
    fn probing_completed(
        &self,
        ctx: &ActivePolicyContext<'_>,
        round: &[(&Destination, &ProbeResult)],
    ) -> Vec<ActiveVerdict> {
        let threshold = ctx.failure_threshold();
        round
            .iter()
            .enumerate()
            .map(|(index, (destination, result))| {
                let mut data = destination.info.state.policy.lock();
                let health = if result.is_success() {
                    data.consecutive_failures = 0;
                    HealthState::Healthy
                } else {
                    data.consecutive_failures = data.consecutive_failures.saturating_add(1);
                    if f64::from(data.consecutive_failures) >= threshold {
                        HealthState::Unhealthy
                    } else {
                        destination.info.state.active()
                    }
                };
                ActiveVerdict {
                    index,
                    health,
                    reason: Reason::Probe {
                        result: result.describe(),
                        consecutive_failures: data.consecutive_failures,
                    },
                }
            })
            .collect()
    }
}

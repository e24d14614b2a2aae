//! The built-in active policy `ConsecutiveFailures`, as YARP's
//! `ConsecutiveFailuresHealthPolicy`: a destination becomes Unhealthy after `threshold`
//! consecutive failed probes and Healthy after one successful probe. Below the threshold a failure
//! keeps the previous state, so a new destination stays Unknown until it fails `threshold` times
//! or succeeds once.

use super::active::{ActiveHealthPolicy, ActivePolicyContext, ActiveVerdict};
use crate::destination::Destination;
use crate::health::probe_result::ProbeResult;
use crate::health::reason::Reason;
use crate::health::state::HealthState;

/// Ejects a destination after `threshold` consecutive failed probes (cluster metadata
/// `ConsecutiveFailuresHealthPolicy.Threshold`, default 2; a fractional threshold such as `2.5`
/// means the third failure, and a threshold <= 0 the first).
#[derive(Debug, Clone, Copy, Default)]
pub struct ConsecutiveFailures;

/// The policy's data in each destination's state slot.
#[derive(Debug, Default)]
struct FailedProbes(u32);

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
                let failures = ctx.with_state(destination, |failed: &mut FailedProbes| {
                    failed.0 = if result.is_success() {
                        0
                    } else {
                        failed.0.saturating_add(1)
                    };
                    failed.0
                });
                let health = if failures == 0 {
                    HealthState::Healthy
                } else if f64::from(failures) >= threshold {
                    HealthState::Unhealthy
                } else {
                    destination.health().active
                };
                ActiveVerdict {
                    index,
                    health,
                    reason: Reason::Probe {
                        result: result.describe(),
                        consecutive_failures: failures,
                    },
                }
            })
            .collect()
    }
}

//! Custom health policies the tests register, as a user would.

use healthpick::policy::{ActiveHealthPolicy, ActivePolicyContext, ActiveVerdict};
use healthpick::{Destination, HealthState, ProbeResult, Reason};

/// Active: Unhealthy on the first failed probe, whatever the threshold; Healthy on a success.
/// Its reason is `first strike: <the probe's result>`.
pub struct FirstStrike;

impl ActiveHealthPolicy for FirstStrike {
    fn probing_completed(
        &self,
        _ctx: &ActivePolicyContext<'_>,
        round: &[(&Destination, &ProbeResult)],
    ) -> Vec<ActiveVerdict> {
        round
            .iter()
            .enumerate()
            .map(|(index, (_, r))| ActiveVerdict {
                index,
                health: if r.is_success() {
                    HealthState::Healthy
                } else {
                    HealthState::Unhealthy
                },
                reason: Reason::Custom(format!("first strike: {}", r.describe()).into()),
            })
            .collect()
    }
}

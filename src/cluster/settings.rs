//! A cluster's configuration with every policy resolved and every default applied, and the
//! contexts its policies are called with.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::config::discovery::LocalityTiers;
use crate::config::model::{ClusterConfig, HealthPolicyOptions, OutlierDetectionOptions};
use crate::destination::latency::LatencySettings;
use crate::destination::locality::Locality;
use crate::destination::reported_load::ReportRules;
use crate::destination::signals::SignalRules;
use crate::destination::state::StateSlots;
use crate::destination::Destination;
use crate::health::state::HealthState;
use crate::policy::active::ActivePolicyContext;
use crate::policy::available::AvailablePolicyContext;
use crate::policy::passive::PassivePolicyContext;
use crate::policy::registry::ResolvedPolicies;

/// What a cluster runs with: fixed until the next configuration change.
pub(crate) struct ClusterSettings {
    pub id: Arc<str>,
    pub config: Arc<ClusterConfig>,
    pub policies: ResolvedPolicies,
    pub options: HealthPolicyOptions,
    pub failure_threshold: f64,
    pub failure_rate_limit: f64,
    pub reactivation_period: Duration,
    /// Probe interval and timeout, when active checks are on.
    pub probing: Option<Probing>,
    /// How locality maps to tiers, when the cluster asks for it.
    pub locality: Option<LocalityRule>,
    /// Metadata `HealthCheck.SuspectRanking`: a failed probe ranks a destination with Degraded.
    pub suspect_ranking: bool,
    /// Metadata `HealthCheck.ResetPassiveOnRecovery`: passive policies hear of active recoveries.
    pub reset_passive_on_recovery: bool,
    /// Metadata `OutlierDetection.*`.
    pub outlier_detection: OutlierDetectionOptions,
    /// How long one attempt of a request to the cluster may take, when the cluster sets it
    /// (`HttpRequest:ActivityTimeout`); the client's own setting applies otherwise.
    pub activity_timeout: Option<Duration>,
    /// How its destinations' latency estimates decay and what they are before a sample, and
    /// how their reported loads count, when they are read at all.
    pub signals: SignalRules,
    /// The cluster's available-destinations policy treats a passive Unknown destination exactly
    /// as a passive Healthy one (see
    /// [`passive_change_keeps_snapshot`](Self::passive_change_keeps_snapshot)).
    usable_passive_changes_keep_snapshot: bool,
}

/// A cluster's locality-to-tier mapping with this process's zone and region resolved
///: a named zone or region's tier, else same zone 0, same region 1, else 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalityRule {
    pub zone: Option<String>,
    pub region: Option<String>,
    pub named: BTreeMap<String, u32>,
}

impl LocalityRule {
    /// The rule of `tiers`, with `local_zone`/`local_region` where the configuration names none.
    pub fn new(
        tiers: &LocalityTiers,
        local_zone: Option<String>,
        local_region: Option<String>,
    ) -> Self {
        LocalityRule {
            zone: tiers
                .local_zone_setting()
                .map(str::to_string)
                .or(local_zone),
            region: tiers
                .local_region_setting()
                .map(str::to_string)
                .or(local_region),
            named: tiers.named_tiers().clone(),
        }
    }

    /// The tier of a destination at `locality`.
    pub fn tier(&self, locality: &Locality) -> u32 {
        let named = |name: &Option<String>| name.as_ref().and_then(|n| self.named.get(n)).copied();
        if let Some(tier) = named(&locality.zone).or_else(|| named(&locality.region)) {
            return tier;
        }
        let same =
            |ours: &Option<String>, theirs: &Option<String>| ours.is_some() && ours == theirs;
        if same(&self.zone, &locality.zone) {
            0
        } else if same(&self.region, &locality.region) {
            1
        } else {
            2
        }
    }
}

/// How the cluster's `LoadSignals` read its destinations' signals.
fn signal_rules(config: &ClusterConfig) -> SignalRules {
    let signals = config.load_signals_setting();
    let reports = signals.load_reports_setting();
    SignalRules {
        latency: LatencySettings::new(signals.decay_time_setting(), signals.default_rtt_setting()),
        reports: reports.enabled_setting().then(|| ReportRules {
            blackout: reports.blackout_setting(),
            expiration: reports.expiration_setting(),
        }),
    }
}

/// When and how long to probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Probing {
    pub interval: Duration,
    pub timeout: Duration,
}

impl ClusterSettings {
    /// Settings for a validated cluster config and the policies its names resolved to;
    /// `locality`: the cluster's locality rule, if it maps locality to tiers.
    pub fn new(
        config: &ClusterConfig,
        policies: ResolvedPolicies,
        options: HealthPolicyOptions,
        locality: Option<LocalityRule>,
    ) -> Self {
        // A load-balancing policy prepares only when the best group changes, which such a
        // change never does: the group ranks passive Unknown and Healthy alike.
        let usable_passive_changes_keep_snapshot =
            policies.available.policy.passive_unknown_is_healthy();
        ClusterSettings {
            usable_passive_changes_keep_snapshot,
            id: Arc::from(config.id()),
            failure_threshold: config.failure_threshold(&options),
            failure_rate_limit: config.failure_rate_limit(&options),
            reactivation_period: config.effective_reactivation_period(&options),
            probing: policies.active.as_ref().map(|_| Probing {
                interval: config.effective_interval(&options),
                timeout: config.effective_timeout(&options),
            }),
            suspect_ranking: config.suspect_ranking(),
            reset_passive_on_recovery: config.reset_passive_on_recovery(),
            outlier_detection: config.outlier_detection(),
            activity_timeout: config.activity_timeout_setting(),
            signals: signal_rules(config),
            config: Arc::new(config.clone()),
            policies,
            options,
            locality,
        }
    }

    /// Whether a destination's passive health going from `from` to `to` leaves everything its
    /// cluster's snapshot holds as it was, so that nothing needs rebuilding: a change between
    /// Unknown and Healthy under the built-in policies. Neither state excludes a destination and
    /// both rank in the same health class, and the built-in load balancers prepare
    /// from ids and weights alone. Each destination's first judged request makes this change,
    /// which at 10,000 destinations would otherwise rebuild a 10,000-member snapshot 10,000
    /// times.
    pub fn passive_change_keeps_snapshot(&self, from: HealthState, to: HealthState) -> bool {
        self.usable_passive_changes_keep_snapshot
            && from != HealthState::Unhealthy
            && to != HealthState::Unhealthy
    }

    /// The context of the available-destinations policy and of selection; `first_probes_pending`
    /// comes from the cluster's run time (see `ClusterSnapshot::available_context`).
    pub fn available_context(&self, first_probes_pending: bool) -> AvailablePolicyContext<'_> {
        AvailablePolicyContext {
            cluster_id: &self.id,
            active_enabled: self.policies.active.is_some(),
            passive_enabled: self.policies.passive.is_some(),
            suspect_ranking: self.suspect_ranking,
            first_probes_pending: first_probes_pending && self.policies.active.is_some(),
        }
    }

    pub fn active_context(&self, now: Duration) -> ActivePolicyContext<'_> {
        ActivePolicyContext {
            cluster_id: &self.id,
            metadata: self.config.metadata_map(),
            failure_threshold: self.failure_threshold,
            options: &self.options,
            now,
        }
    }

    pub fn passive_context<'a>(
        &'a self,
        destination: &'a Destination,
        cluster_state: &'a StateSlots,
        cluster_size: usize,
        now: Duration,
    ) -> PassivePolicyContext<'a> {
        PassivePolicyContext {
            cluster_id: &self.id,
            metadata: self.config.metadata_map(),
            failure_rate_limit: self.failure_rate_limit,
            reactivation_period: self
                .config
                .health_check()
                .passive()
                .reactivation_period_setting(),
            effective_reactivation_period: self.reactivation_period,
            outlier_detection: &self.outlier_detection,
            options: &self.options,
            destination,
            now,
            cluster_state,
            cluster_size,
        }
    }
}

//! A cluster's configuration with every policy resolved and every default applied, and the
//! contexts its policies are called with.

use std::sync::Arc;
use std::time::Duration;

use crate::config::model::{ClusterConfig, HealthPolicyOptions};
use crate::destination::Destination;
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
    /// How long one attempt of a request to the cluster may take, when the cluster sets it
    /// (`HttpRequest:ActivityTimeout`); the client's own setting applies otherwise.
    pub activity_timeout: Option<Duration>,
}

/// When and how long to probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Probing {
    pub interval: Duration,
    pub timeout: Duration,
}

impl ClusterSettings {
    /// Settings for a validated cluster config and the policies its names resolved to.
    pub fn new(
        config: &ClusterConfig,
        policies: ResolvedPolicies,
        options: HealthPolicyOptions,
    ) -> Self {
        ClusterSettings {
            id: Arc::from(config.id()),
            failure_threshold: config.failure_threshold(&options),
            failure_rate_limit: config.failure_rate_limit(&options),
            reactivation_period: config.effective_reactivation_period(&options),
            probing: policies.active.as_ref().map(|_| Probing {
                interval: config.effective_interval(&options),
                timeout: config.effective_timeout(&options),
            }),
            activity_timeout: config.activity_timeout_setting(),
            config: Arc::new(config.clone()),
            policies,
            options,
        }
    }

    pub fn available_context(&self) -> AvailablePolicyContext<'_> {
        AvailablePolicyContext {
            cluster_id: &self.id,
            active_enabled: self.policies.active.is_some(),
            passive_enabled: self.policies.passive.is_some(),
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
            options: &self.options,
            destination,
            now,
        }
    }
}

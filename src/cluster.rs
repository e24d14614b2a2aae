//! A cluster at run time: its resolved settings and the immutable snapshot picks read
//! (SPEC §5, §6).

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::clock::Clock;
use crate::config::{ClusterConfig, HealthPolicyOptions};
use crate::destination::Destination;
use crate::engine::EngineCore;
use crate::health::{
    ActiveHealthPolicy, AvailableDestinationsPolicy, AvailablePolicyContext, ConsecutiveFailures,
    HealthClass, HealthyOrPanic, PassiveHealthPolicy, TransportFailureRate,
};
use crate::observer::Observer;
use crate::registry::PolicyRegistry;
use crate::selection::{LoadBalancingPolicy, PowerOfTwoChoices};

/// A cluster's configuration with every name resolved to a policy and every default applied.
pub(crate) struct ClusterSettings {
    pub id: Arc<str>,
    pub config: ClusterConfig,
    pub active: Option<ActiveSettings>,
    pub passive: Option<Arc<dyn PassiveHealthPolicy>>,
    /// The passive policy's registered name.
    pub passive_name: String,
    pub available_policy: Arc<dyn AvailableDestinationsPolicy>,
    pub available_policy_name: String,
    pub load_balancing: Arc<dyn LoadBalancingPolicy>,
    pub load_balancing_name: String,
    pub failure_threshold: f64,
    pub failure_rate_limit: f64,
    pub options: HealthPolicyOptions,
    pub clock: Arc<dyn Clock>,
    pub core: Weak<EngineCore>,
    /// The engine's observer, if any: read on the request path, so kept here.
    pub observer: Option<Arc<dyn Observer>>,
}

/// Resolved active-check settings.
pub(crate) struct ActiveSettings {
    pub policy: Arc<dyn ActiveHealthPolicy>,
    /// The policy's registered name.
    pub name: String,
    pub interval: Duration,
    pub timeout: Duration,
}

impl ClusterSettings {
    /// Resolves a validated cluster config.
    pub fn resolve(
        config: &ClusterConfig,
        registry: &PolicyRegistry,
        options: HealthPolicyOptions,
        clock: Arc<dyn Clock>,
        core: Weak<EngineCore>,
        observer: Option<Arc<dyn Observer>>,
    ) -> Self {
        // Validation guarantees the names resolve; the built-ins stand in rather than panicking.
        let hc = &config.health_check;
        let active = hc.active.enabled.then(|| {
            let (name, policy) = registry.active(hc.active.policy_name()).map_or_else(
                || {
                    (
                        "ConsecutiveFailures".to_string(),
                        Arc::new(ConsecutiveFailures) as _,
                    )
                },
                |(n, p)| (n.to_string(), p.clone()),
            );
            ActiveSettings {
                policy,
                name,
                interval: config.effective_interval(&options),
                timeout: config.effective_timeout(&options),
            }
        });
        let (passive_name, passive_policy) =
            registry.passive(hc.passive.policy_name()).map_or_else(
                || {
                    (
                        "TransportFailureRate".to_string(),
                        Arc::new(TransportFailureRate) as _,
                    )
                },
                |(n, p)| (n.to_string(), p.clone()),
            );
        let passive = hc.passive.enabled.then_some(passive_policy);
        let (available_policy_name, available_policy) = registry
            .available_destinations(hc.available_destinations_policy_name())
            .map_or_else(
                || ("HealthyOrPanic".to_string(), Arc::new(HealthyOrPanic) as _),
                |(n, p)| (n.to_string(), p.clone()),
            );
        let (load_balancing_name, load_balancing) = registry
            .load_balancing(config.load_balancing_policy_name())
            .map_or_else(
                || {
                    (
                        "PowerOfTwoChoices".to_string(),
                        Arc::new(PowerOfTwoChoices) as _,
                    )
                },
                |(n, p)| (n.to_string(), p.clone()),
            );
        ClusterSettings {
            id: Arc::from(config.id.as_str()),
            failure_threshold: config.failure_threshold(&options),
            failure_rate_limit: config.failure_rate_limit(&options),
            config: config.clone(),
            active,
            passive,
            passive_name,
            available_policy,
            available_policy_name,
            load_balancing,
            load_balancing_name,
            options,
            clock,
            core,
            observer,
        }
    }

    pub fn available_context(&self) -> AvailablePolicyContext<'_> {
        AvailablePolicyContext {
            cluster_id: &self.id,
            active_enabled: self.active.is_some(),
            passive_enabled: self.passive.is_some(),
        }
    }
}

/// Everything a pick needs, published as one immutable value so a reader never sees settings
/// and health from different moments.
pub(crate) struct ClusterSnapshot {
    pub settings: Arc<ClusterSettings>,
    /// All destinations in config order.
    pub all: Vec<Arc<Destination>>,
    /// Available destinations (SPEC §5).
    pub available: Vec<Arc<Destination>>,
    /// The best group (SPEC §6); shared with the engine's cluster table.
    pub best: Arc<[Arc<Destination>]>,
    /// The best group's health class; `None` when nothing is available.
    pub best_class: Option<HealthClass>,
    pub panic: bool,
}

/// A cluster's runtime state; survives config reloads that keep the cluster id.
pub(crate) struct ClusterRuntime {
    pub snapshot: ArcSwap<ClusterSnapshot>,
    /// The RoundRobin counter (SPEC §6).
    pub counter: AtomicUsize,
    /// Serialises health changes and snapshot rebuilds of this cluster.
    pub book: Mutex<ClusterBook>,
    /// True once a probe round of this cluster finished (first-pick warm-up, SPEC §6).
    pub first_round: tokio::sync::watch::Sender<bool>,
    /// The same, readable without the watch channel's lock on the request path.
    pub first_round_done: std::sync::atomic::AtomicBool,
    /// The current settings, shared by all destinations of the cluster.
    pub settings: Arc<ArcSwap<ClusterSettings>>,
}

/// What the last published snapshot said, to detect availability changes.
#[derive(Default)]
pub(crate) struct ClusterBook {
    pub available_ids: Vec<Arc<str>>,
    pub panic: bool,
    pub published: bool,
}

impl ClusterRuntime {
    /// Records that a probe round finished: releases first-pick waiters and `Engine::ready`.
    pub fn mark_first_round(&self) {
        self.first_round_done
            .store(true, std::sync::atomic::Ordering::Release);
        self.first_round.send_replace(true);
    }

    pub fn new(settings: Arc<ClusterSettings>) -> Self {
        ClusterRuntime {
            snapshot: ArcSwap::from_pointee(ClusterSnapshot {
                settings: settings.clone(),
                all: Vec::new(),
                available: Vec::new(),
                best: Arc::from([]),
                best_class: None,
                panic: false,
            }),
            counter: AtomicUsize::new(0),
            book: Mutex::new(ClusterBook::default()),
            first_round: tokio::sync::watch::Sender::new(false),
            first_round_done: std::sync::atomic::AtomicBool::new(false),
            settings: Arc::new(ArcSwap::new(settings.clone())),
        }
    }
}

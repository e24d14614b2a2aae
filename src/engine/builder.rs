//! Building an engine: policies, clock, random seed, options, observer.

use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};

use super::core::EngineCore;
use super::hub::Hub;
use super::table::ClusterTable;
use super::timers::Timers;
use super::Engine;
use crate::clock::{Clock, SystemClock};
use crate::config::diagnostics::ConfigError;
use crate::config::model::{Config, HealthPolicyOptions};
use crate::observer::Observer;
use crate::policy::active::ActiveHealthPolicy;
use crate::policy::available::AvailableDestinationsPolicy;
use crate::policy::passive::PassiveHealthPolicy;
use crate::policy::registry::PolicyRegistry;
use crate::rng::RandomSource;
use crate::selection::balancing::LoadBalancingPolicy;

/// Builds an [`Engine`] with custom policies, clock, random seed or options.
///
/// ```
/// use healthpick::{Engine, ManualClock};
/// use std::sync::Arc;
///
/// let clock = Arc::new(ManualClock::new());
/// let engine = Engine::builder().clock(clock.clone()).seed(7).build();
/// assert!(engine.cluster_ids().is_empty());
/// ```
pub struct EngineBuilder {
    registry: PolicyRegistry,
    clock: Option<Arc<dyn Clock>>,
    seed: Option<u64>,
    options: HealthPolicyOptions,
    strict: bool,
    event_capacity: usize,
    observer: Option<Arc<dyn Observer>>,
}

impl std::fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("registry", &self.registry)
            .field("seed", &self.seed)
            .field("options", &self.options)
            .field("strict", &self.strict)
            .finish_non_exhaustive()
    }
}

impl Default for EngineBuilder {
    fn default() -> Self {
        EngineBuilder {
            registry: PolicyRegistry::default(),
            clock: None,
            seed: None,
            options: HealthPolicyOptions::default(),
            strict: false,
            event_capacity: 1024,
            observer: None,
        }
    }
}

impl EngineBuilder {
    /// Replaces the whole policy registry. Default: the built-in policies.
    pub fn registry(mut self, registry: PolicyRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// Registers a custom active health policy under `name` (case-insensitive).
    pub fn active_policy(mut self, name: &str, policy: impl ActiveHealthPolicy) -> Self {
        self.registry.register_active(name, Arc::new(policy));
        self
    }

    /// Registers a custom passive health policy under `name`.
    pub fn passive_policy(mut self, name: &str, policy: impl PassiveHealthPolicy) -> Self {
        self.registry.register_passive(name, Arc::new(policy));
        self
    }

    /// Registers a custom available-destinations policy under `name`.
    pub fn available_destinations_policy(
        mut self,
        name: &str,
        policy: impl AvailableDestinationsPolicy,
    ) -> Self {
        self.registry
            .register_available_destinations(name, Arc::new(policy));
        self
    }

    /// Registers a custom load-balancing policy under `name`.
    pub fn load_balancing_policy(mut self, name: &str, policy: impl LoadBalancingPolicy) -> Self {
        self.registry
            .register_load_balancing(name, Arc::new(policy));
        self
    }

    /// Uses `clock` for all time. Default: [`SystemClock`], with reactivation timers driven by a
    /// tokio task. With a custom clock, call [`Engine::fire_due_timers`] after moving it.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Seeds the random source so picks are reproducible. Default: per-thread generators seeded
    /// from the OS (no shared state on the pick path; a seeded engine takes a lock per draw).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Global health-policy options used when a config does not carry a `HealthPolicies`
    /// section. Default: [`HealthPolicyOptions::default`].
    pub fn health_policy_options(mut self, options: HealthPolicyOptions) -> Self {
        self.options = options;
        self
    }

    /// Strict mode: configuration warnings are errors. Default false.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Capacity of the event channel behind [`Engine::subscribe`]. Default 1024.
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity.max(1);
        self
    }

    /// Installs an [`Observer`] that sees every probe round, request outcome, policy evaluation
    /// and change event, synchronously (the simulator and the recorder are observers).
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Builds an engine with no clusters.
    pub fn build(self) -> Engine {
        let auto_timers = self.clock.is_none();
        let clock = self.clock.unwrap_or_else(|| Arc::new(SystemClock::new()));
        let (events, _) = broadcast::channel(self.event_capacity);
        let hub = Arc::new(Hub {
            events,
            observer: self.observer,
            timers: Timers::new(clock.clone(), auto_timers),
        });
        // Inside a runtime the timer task runs from the start (it ends success grants too).
        hub.timers.start();
        let core = Arc::new(EngineCore {
            table: Arc::new(ArcSwap::from_pointee(ClusterTable::default())),
            registry: self.registry,
            options: self.options,
            clock,
            rng: match self.seed {
                Some(seed) => RandomSource::seeded(seed),
                None => RandomSource::PerThread,
            },
            hub,
            config_lock: Mutex::new(()),
            strict: self.strict,
            config_generation: watch::Sender::new(0),
            config_record: Mutex::default(),
        });
        if let Some(observer) = &core.hub.observer {
            observer.attached(core.clock.now());
        }
        Engine { core }
    }

    /// Builds an engine and applies `config`.
    ///
    /// # Errors
    /// When the configuration is invalid for this builder's policies.
    pub fn build_with(self, config: Config) -> Result<Engine, ConfigError> {
        let engine = self.build();
        engine.apply_config(config)?;
        Ok(engine)
    }
}

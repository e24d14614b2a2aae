//! Named policies: the built-ins and the ones an application registers (SPEC §3-§6).
//!
//! Names are compared case-insensitively (`"roundrobin"` resolves), as YARP does. Registering a
//! policy under a built-in's name replaces the built-in.

use std::sync::Arc;

use crate::config::eq_ignore_case;
use crate::health::{
    ActiveHealthPolicy, AvailableDestinationsPolicy, ConsecutiveFailures, HealthyAndUnknown,
    HealthyOrPanic, PassiveHealthPolicy, TransportFailureRate,
};
use crate::selection::{
    FirstAlphabetical, LeastRequests, LoadBalancingPolicy, PowerOfTwoChoices, Random, RoundRobin,
};

/// The policies a configuration may name, by kind.
///
/// ```
/// use healthpick::PolicyRegistry;
///
/// let registry = PolicyRegistry::default();
/// assert!(registry.load_balancing("roundrobin").is_some());
/// assert!(registry.load_balancing("Fastest").is_none());
/// ```
#[derive(Clone)]
pub struct PolicyRegistry {
    active: Vec<(String, Arc<dyn ActiveHealthPolicy>)>,
    passive: Vec<(String, Arc<dyn PassiveHealthPolicy>)>,
    available: Vec<(String, Arc<dyn AvailableDestinationsPolicy>)>,
    load_balancing: Vec<(String, Arc<dyn LoadBalancingPolicy>)>,
}

impl std::fmt::Debug for PolicyRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyRegistry")
            .field("active", &self.active_names())
            .field("passive", &self.passive_names())
            .field(
                "available_destinations",
                &self.available_destinations_names(),
            )
            .field("load_balancing", &self.load_balancing_names())
            .finish()
    }
}

impl Default for PolicyRegistry {
    /// The built-in policies: ConsecutiveFailures; TransportFailureRate; HealthyAndUnknown and
    /// HealthyOrPanic; PowerOfTwoChoices, RoundRobin, LeastRequests, Random, FirstAlphabetical.
    fn default() -> Self {
        let mut r = PolicyRegistry {
            active: Vec::new(),
            passive: Vec::new(),
            available: Vec::new(),
            load_balancing: Vec::new(),
        };
        r.register_active("ConsecutiveFailures", Arc::new(ConsecutiveFailures));
        r.register_passive("TransportFailureRate", Arc::new(TransportFailureRate));
        r.register_available_destinations("HealthyAndUnknown", Arc::new(HealthyAndUnknown));
        r.register_available_destinations("HealthyOrPanic", Arc::new(HealthyOrPanic));
        r.register_load_balancing("PowerOfTwoChoices", Arc::new(PowerOfTwoChoices));
        r.register_load_balancing("RoundRobin", Arc::new(RoundRobin));
        r.register_load_balancing("LeastRequests", Arc::new(LeastRequests));
        r.register_load_balancing("Random", Arc::new(Random));
        r.register_load_balancing("FirstAlphabetical", Arc::new(FirstAlphabetical));
        r
    }
}

fn put<T: ?Sized>(list: &mut Vec<(String, Arc<T>)>, name: &str, policy: Arc<T>) {
    match list.iter_mut().find(|(n, _)| eq_ignore_case(n, name)) {
        Some(slot) => *slot = (name.to_string(), policy),
        None => list.push((name.to_string(), policy)),
    }
}

fn find<'a, T: ?Sized>(list: &'a [(String, Arc<T>)], name: &str) -> Option<(&'a str, &'a Arc<T>)> {
    list.iter()
        .find(|(n, _)| eq_ignore_case(n, name))
        .map(|(n, p)| (n.as_str(), p))
}

fn names<T: ?Sized>(list: &[(String, Arc<T>)]) -> Vec<&str> {
    list.iter().map(|(n, _)| n.as_str()).collect()
}

impl PolicyRegistry {
    /// Registers an active health policy under `name`.
    pub fn register_active(&mut self, name: &str, policy: Arc<dyn ActiveHealthPolicy>) {
        put(&mut self.active, name, policy);
    }

    /// Registers a passive health policy under `name`.
    pub fn register_passive(&mut self, name: &str, policy: Arc<dyn PassiveHealthPolicy>) {
        put(&mut self.passive, name, policy);
    }

    /// Registers an available-destinations policy under `name`.
    pub fn register_available_destinations(
        &mut self,
        name: &str,
        policy: Arc<dyn AvailableDestinationsPolicy>,
    ) {
        put(&mut self.available, name, policy);
    }

    /// Registers a load-balancing policy under `name`.
    pub fn register_load_balancing(&mut self, name: &str, policy: Arc<dyn LoadBalancingPolicy>) {
        put(&mut self.load_balancing, name, policy);
    }

    /// The active policy called `name` (case-insensitive), with its registered spelling.
    pub fn active(&self, name: &str) -> Option<(&str, &Arc<dyn ActiveHealthPolicy>)> {
        find(&self.active, name)
    }

    /// The passive policy called `name` (case-insensitive), with its registered spelling.
    pub fn passive(&self, name: &str) -> Option<(&str, &Arc<dyn PassiveHealthPolicy>)> {
        find(&self.passive, name)
    }

    /// The available-destinations policy called `name` (case-insensitive).
    pub fn available_destinations(
        &self,
        name: &str,
    ) -> Option<(&str, &Arc<dyn AvailableDestinationsPolicy>)> {
        find(&self.available, name)
    }

    /// The load-balancing policy called `name` (case-insensitive).
    pub fn load_balancing(&self, name: &str) -> Option<(&str, &Arc<dyn LoadBalancingPolicy>)> {
        find(&self.load_balancing, name)
    }

    /// Names of the active policies.
    pub fn active_names(&self) -> Vec<&str> {
        names(&self.active)
    }

    /// Names of the passive policies.
    pub fn passive_names(&self) -> Vec<&str> {
        names(&self.passive)
    }

    /// Names of the available-destinations policies.
    pub fn available_destinations_names(&self) -> Vec<&str> {
        names(&self.available)
    }

    /// Names of the load-balancing policies.
    pub fn load_balancing_names(&self) -> Vec<&str> {
        names(&self.load_balancing)
    }
}

//! Named policies: the built-ins and the ones an application registers, and the one
//! place a configuration's policy names are resolved.
//!
//! Names are compared case-insensitively (`"roundrobin"` resolves), as YARP does. Registering a
//! policy under a built-in's name replaces the built-in. Resolving a configuration looks every
//! name up once: a name that resolves is the policy the cluster runs, one that does not is an
//! error naming the known policies; there is no fallback.

use std::sync::Arc;

use super::active::ActiveHealthPolicy;
use super::available::AvailableDestinationsPolicy;
use super::consecutive_failures::ConsecutiveFailures;
use super::healthy_or_panic::{HealthyAndUnknown, HealthyOrPanic};
use super::outlier_detection::OutlierDetection;
use super::passive::PassiveHealthPolicy;
use super::transport_failure_rate::TransportFailureRate;
use crate::config::check::{check, PolicyNames};
use crate::config::diagnostics::{ConfigError, Diagnostic, Diagnostics, Place};
use crate::config::model::{
    ClusterConfig, Config, DEFAULT_ACTIVE_POLICY, DEFAULT_AVAILABLE_DESTINATIONS,
    DEFAULT_PASSIVE_POLICY,
};
use crate::ids::eq_ignore_case;
use crate::selection::balancing::LoadBalancingPolicy;
use crate::selection::built_in_policies;

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
    /// The built-in policies: ConsecutiveFailures; TransportFailureRate and OutlierDetection;
    /// HealthyAndUnknown and HealthyOrPanic; PowerOfTwoChoices, RoundRobin, LeastRequests,
    /// Random, FirstAlphabetical, PeakEwma.
    fn default() -> Self {
        let mut r = PolicyRegistry {
            active: Vec::new(),
            passive: Vec::new(),
            available: Vec::new(),
            load_balancing: Vec::new(),
        };
        r.register_active(DEFAULT_ACTIVE_POLICY, Arc::new(ConsecutiveFailures));
        r.register_passive(DEFAULT_PASSIVE_POLICY, Arc::new(TransportFailureRate));
        r.register_passive("OutlierDetection", Arc::new(OutlierDetection));
        r.register_available_destinations("HealthyAndUnknown", Arc::new(HealthyAndUnknown));
        r.register_available_destinations(DEFAULT_AVAILABLE_DESTINATIONS, Arc::new(HealthyOrPanic));
        for (name, policy) in built_in_policies() {
            r.register_load_balancing(name, policy);
        }
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

/// A policy as a cluster resolved it: its registered spelling and the policy.
pub(crate) struct Named<P: ?Sized> {
    pub name: String,
    pub policy: Arc<P>,
}

impl<P: ?Sized> Clone for Named<P> {
    fn clone(&self) -> Self {
        Named {
            name: self.name.clone(),
            policy: self.policy.clone(),
        }
    }
}

/// Every policy one cluster runs.
#[derive(Clone)]
pub(crate) struct ResolvedPolicies {
    /// Present exactly when active checks are enabled.
    pub active: Option<Named<dyn ActiveHealthPolicy>>,
    /// Present exactly when passive checks are enabled: the policies `HealthCheck:Passive:Policy`
    /// lists, in order, at least one.
    pub passive: Option<Vec<Named<dyn PassiveHealthPolicy>>>,
    pub available: Named<dyn AvailableDestinationsPolicy>,
    pub load_balancing: Named<dyn LoadBalancingPolicy>,
}

fn named<P: ?Sized>(found: Option<(&str, &Arc<P>)>) -> Option<Named<P>> {
    found.map(|(name, policy)| Named {
        name: name.to_string(),
        policy: policy.clone(),
    })
}

impl PolicyRegistry {
    /// Resolves every policy name of `config`, each looked up once: the policies of every
    /// cluster in config order, or `None` when a name is unknown — each unknown name is an error
    /// in `diags` listing the known names.
    pub(crate) fn resolve(
        &self,
        config: &Config,
        diags: &mut Diagnostics,
    ) -> Option<Vec<ResolvedPolicies>> {
        let resolved: Vec<Option<ResolvedPolicies>> = config
            .clusters
            .iter()
            .map(|cluster| {
                let place = Place::cluster(&config.section, &cluster.id);
                self.resolve_cluster(cluster, place, diags)
            })
            .collect();
        resolved.into_iter().collect()
    }

    fn resolve_cluster(
        &self,
        cluster: &ClusterConfig,
        place: Place<'_>,
        diags: &mut Diagnostics,
    ) -> Option<ResolvedPolicies> {
        let mut unknown = |key: &str, what: &str, name: &str, known: Vec<&str>| {
            diags.error(
                place.path(key),
                place.message(format!(
                    "{what} `{name}` is not a known policy (known: {})",
                    known.join(", ")
                )),
            );
        };
        let lb_name = cluster.load_balancing_policy_name();
        let load_balancing = named(self.load_balancing(lb_name));
        if load_balancing.is_none() {
            unknown(
                "LoadBalancingPolicy",
                "LoadBalancingPolicy",
                lb_name,
                self.load_balancing_names(),
            );
        }
        let hc = cluster.health_check();
        let available_name = hc.available_destinations_policy_name();
        let available = named(self.available_destinations(available_name));
        if available.is_none() {
            unknown(
                "HealthCheck:AvailableDestinationsPolicy",
                "AvailableDestinationsPolicy",
                available_name,
                self.available_destinations_names(),
            );
        }
        // A disabled check's policy is neither looked up nor reported (YARP does not either).
        let active = match hc.active().is_enabled() {
            false => Ok(None),
            true => {
                let name = hc.active().policy_name();
                named(self.active(name)).map(Some).ok_or_else(|| {
                    unknown(
                        "HealthCheck:Active:Policy",
                        "active health policy",
                        name,
                        self.active_names(),
                    )
                })
            }
        };
        let mut twice: Vec<&str> = Vec::new();
        let passive = match hc.passive().is_enabled() {
            false => Ok(None),
            true => {
                // A comma-separated list: every listed policy judges every outcome.
                let mut list: Vec<Named<dyn PassiveHealthPolicy>> = Vec::new();
                let mut complete = true;
                for name in hc.passive().policy_names() {
                    match named(self.passive(name)) {
                        Some(policy) if list.iter().any(|p| p.name == policy.name) => {
                            complete = false;
                            twice.push(name);
                        }
                        Some(policy) => list.push(policy),
                        None => {
                            complete = false;
                            unknown(
                                "HealthCheck:Passive:Policy",
                                "passive health policy",
                                name,
                                self.passive_names(),
                            );
                        }
                    }
                }
                if complete {
                    Ok(Some(list))
                } else {
                    Err(())
                }
            }
        };
        for name in twice {
            diags.error(
                place.path("HealthCheck:Passive:Policy"),
                place.message(format!("passive health policy `{name}` is listed twice")),
            );
        }
        Some(ResolvedPolicies {
            active: active.ok()?,
            passive: passive.ok()?,
            available: available?,
            load_balancing: load_balancing?,
        })
    }
}

impl PolicyNames for PolicyRegistry {
    fn policy_problems(&self, config: &Config) -> Vec<Diagnostic> {
        let mut diags = Diagnostics::default();
        self.resolve(config, &mut diags);
        diags.errors
    }
}

impl PolicyRegistry {
    /// `config` with every policy name this registry knows in its registered spelling
    /// (`"roundrobin"` becomes `"RoundRobin"`; each entry of a passive list, joined with `", "`).
    /// Names it does not know, and settings left unset, stay as they are. Names are compared
    /// case-insensitively, so the result runs exactly the policies `config` runs; it is what the
    /// serde form of a configuration (feature `serde`) writes and reads back.
    ///
    /// ```
    /// use healthpick::{Config, PolicyRegistry};
    ///
    /// let config = Config::from_json(r#"{"Clusters": {"c": {"LoadBalancingPolicy": "roundrobin"}}}"#)?;
    /// let canonical = PolicyRegistry::default().canonical(&config);
    /// assert_eq!(canonical.clusters()[0].load_balancing_policy_name(), "RoundRobin");
    /// # Ok::<(), healthpick::ConfigError>(())
    /// ```
    pub fn canonical(&self, config: &Config) -> Config {
        let mut out = config.clone();
        for cluster in &mut out.clusters {
            self.canonicalize_cluster(cluster);
        }
        out
    }

    /// The policy names of one cluster in their registered spelling (see [`canonical`](Self::canonical)).
    pub(crate) fn canonicalize_cluster(&self, cluster: &mut ClusterConfig) {
        fn spell<'a>(name: &mut Option<String>, find: impl Fn(&str) -> Option<&'a str>) {
            if let Some(given) = name.as_mut() {
                if let Some(registered) = find(given) {
                    *given = registered.to_string();
                }
            }
        }
        spell(&mut cluster.load_balancing_policy, |n| {
            self.load_balancing(n).map(|(r, _)| r)
        });
        let hc = &mut cluster.health_check;
        spell(&mut hc.available_destinations_policy, |n| {
            self.available_destinations(n).map(|(r, _)| r)
        });
        spell(&mut hc.active.policy, |n| self.active(n).map(|(r, _)| r));
        if let Some(list) = hc.passive.policy.as_mut() {
            let names: Vec<&str> = list
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(|n| self.passive(n).map_or(n, |(registered, _)| registered))
                .collect();
            if !names.is_empty() {
                *list = names.join(", ");
            }
        }
    }
}

impl Config {
    /// Reads a YARP JSON document (`{"ReverseProxy": {"Clusters": ...}}` or `{"Clusters": ...}`)
    /// and validates it against the built-in policies. To use custom policies, load the document
    /// with [`Engine::load_json`](crate::Engine::load_json) or check it with
    /// [`check`](crate::config::check).
    ///
    /// # Errors
    /// Every problem of the document, at once.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let report = check(text, &PolicyRegistry::default(), false);
        match report.config {
            Some(config) if report.errors.is_empty() => Ok(config),
            _ => Err(ConfigError {
                errors: report.errors,
                warnings: report.warnings,
            }),
        }
    }
}

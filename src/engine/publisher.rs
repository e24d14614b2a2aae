//! The publishing handle: what a discovery source — or your own code — publishes a
//! cluster's endpoints through. Each publication is the source's full current set; the engine
//! diffs it (identity rules of `reload.rs`), the update guard may hold it, and failures keep the
//! last good set and mark the source stale.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::core::EngineCore;
use super::reload::validate_set;
use super::runtime::{ClusterRuntime, CONFIG_SOURCE};
use super::source_state::SourceState;
use super::Engine;
use crate::config::discovery::{DiscoveryConfig, GuardPolicy};
use crate::destination::endpoint::Endpoint;
use crate::error::DestinationsError;

/// Describes a source to the engine: its name (unique within its cluster), what kind of source
/// it is and what it watches (for status), its update guard and how long `Engine::ready` waits
/// for its first answer.
///
/// ```
/// use healthpick::discovery::SourceSpec;
/// use std::time::Duration;
///
/// let spec = SourceSpec::new("registry")
///     .kind("in-house registry")
///     .target("payments@eu")
///     .first_answer_within(Duration::from_secs(2));
/// # drop(spec);
/// ```
#[derive(Debug, Clone)]
pub struct SourceSpec {
    name: String,
    kind: String,
    target: String,
    guard: GuardPolicy,
    first_answer_within: Duration,
}

impl SourceSpec {
    /// A source called `name`, kind `custom`, the default guard, and a 10 s first-answer wait.
    pub fn new(name: impl Into<String>) -> Self {
        SourceSpec {
            name: name.into(),
            kind: "custom".into(),
            target: String::new(),
            guard: GuardPolicy::default(),
            first_answer_within: Duration::from_secs(10),
        }
    }

    /// The spec of a configured source.
    pub fn from_config(config: &DiscoveryConfig) -> Self {
        SourceSpec {
            name: config.source_name(),
            kind: config.source().type_name().to_string(),
            target: config.source().target(),
            guard: *config.guard_policy(),
            first_answer_within: config.first_answer_wait(),
        }
    }

    /// What kind of source it is (`dns`, `kubernetes`, ...), for status. Default `custom`.
    #[must_use]
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = kind.into();
        self
    }

    /// What it watches (a DNS name, a service), for status. Default: empty.
    #[must_use]
    pub fn target(mut self, target: impl Into<String>) -> Self {
        self.target = target.into();
        self
    }

    /// Sets the update guard. Default [`GuardPolicy::default`]: hold a change that would empty
    /// the source's destinations, remove half of them or more, or say the service does not
    /// exist, until it is confirmed 30 s later.
    #[must_use]
    pub fn guard(mut self, guard: GuardPolicy) -> Self {
        self.guard = guard;
        self
    }

    /// Sets how long `Engine::ready` waits for the first answer. Default 10 s.
    #[must_use]
    pub fn first_answer_within(mut self, wait: Duration) -> Self {
        self.first_answer_within = wait;
        self
    }

    /// The source's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The handle a source publishes through, from [`Engine::publisher`]. Cheap to clone.
///
/// Until its first answer, a cluster with no other destinations answers picks with
/// [`PickError::DiscoveryPending`](crate::PickError::DiscoveryPending), and `Engine::ready`
/// waits for it (bounded).
///
/// ```
/// use healthpick::discovery::SourceSpec;
/// use healthpick::{Endpoint, Engine};
///
/// let engine = Engine::from_json(r#"{"Clusters": {"payments": {}}}"#)?;
/// let publisher = engine.publisher("payments", SourceSpec::new("registry"))?;
/// assert!(engine.pick_endpoint("payments").unwrap_err().is_discovery_pending());
/// publisher.publish(vec![
///     Endpoint::new("a", "http://10.0.0.1:8080/".parse()?),
///     Endpoint::new("b", "http://10.0.0.2:8080/".parse()?),
/// ])?;
/// assert!(engine.pick_endpoint("payments").is_ok());
/// // Losing both at once is held by the update guard: the last set stays in force.
/// publisher.publish(Vec::new())?;
/// assert_eq!(engine.best_endpoints("payments")?.destinations.len(), 2);
/// assert!(publisher.force_held()?); // ...until confirmed, or forced.
/// assert!(engine.pick_endpoint("payments").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Publisher {
    core: Weak<EngineCore>,
    cluster: Arc<str>,
    source: Arc<str>,
}

impl Engine {
    /// Registers a discovery source of `cluster` (or picks up one registered before, keeping its
    /// destinations) and returns the handle it publishes through.
    ///
    /// # Errors
    /// [`DestinationsError::UnknownCluster`]; [`DestinationsError::Invalid`] when the name is
    /// empty or [`CONFIG_SOURCE`].
    pub fn publisher(
        &self,
        cluster: &str,
        spec: SourceSpec,
    ) -> Result<Publisher, DestinationsError> {
        let runtime = self.source_runtime(cluster)?;
        if spec.name.trim().is_empty() || spec.name == CONFIG_SOURCE {
            return Err(DestinationsError::Invalid {
                cluster: cluster.to_string(),
                source: spec.name.clone(),
                problems: vec![format!(
                    "`{}` cannot name a source (`{CONFIG_SOURCE}` is the configuration's)",
                    spec.name
                )],
            });
        }
        let state = SourceState::new(spec.kind, spec.target, spec.guard, spec.first_answer_within);
        runtime.register_source(&self.core.hub, &spec.name, state, self.core.clock.now());
        Ok(Publisher {
            core: Arc::downgrade(&self.core),
            cluster: Arc::from(cluster),
            source: Arc::from(spec.name.as_str()),
        })
    }

    fn source_runtime(&self, cluster: &str) -> Result<Arc<ClusterRuntime>, DestinationsError> {
        self.core
            .table()
            .get(cluster)
            .cloned()
            .ok_or_else(|| DestinationsError::UnknownCluster {
                cluster: cluster.to_string(),
            })
    }
}

impl Publisher {
    /// Publishes the source's full current set.
    ///
    /// # Errors
    /// As [`Engine::set_destinations`]: nothing changes on a bad set (and the source is marked
    /// stale with the problems); [`DestinationsError::UnknownSource`] after the source was
    /// retired; [`DestinationsError::EngineGone`].
    pub fn publish(&self, endpoints: Vec<Endpoint>) -> Result<(), DestinationsError> {
        let (core, runtime) = self.target()?;
        if let Err(e) = validate_set(&self.cluster, &self.source, &endpoints) {
            runtime.source_failed(&core.hub, &self.source, e.to_string(), core.clock.now())?;
            return Err(e);
        }
        runtime.source_answer(&core.hub, &self.source, Some(endpoints), core.clock.now())
    }

    /// Publishes the source's full current set without saying it is well again: a source whose
    /// data path works (a list) while the part that keeps it current does not (a watch) stays
    /// stale until that part works, yet its fresh set applies.
    #[cfg_attr(not(any(feature = "etcd", feature = "kubernetes")), allow(dead_code))]
    pub(crate) fn publish_keeping_stale(
        &self,
        endpoints: Vec<Endpoint>,
    ) -> Result<(), DestinationsError> {
        let (core, runtime) = self.target()?;
        if let Err(e) = validate_set(&self.cluster, &self.source, &endpoints) {
            runtime.source_failed(&core.hub, &self.source, e.to_string(), core.clock.now())?;
            return Err(e);
        }
        runtime.source_answer_keeping_stale(&core.hub, &self.source, endpoints, core.clock.now())
    }

    /// Says the service does not exist (DNS NXDOMAIN, a deleted Kubernetes service): held by
    /// the update guard like an emptying change.
    ///
    /// # Errors
    /// As [`publish`](Self::publish).
    pub fn not_found(&self) -> Result<(), DestinationsError> {
        let (core, runtime) = self.target()?;
        runtime.source_answer(&core.hub, &self.source, None, core.clock.now())
    }

    /// Says the source failed (a timeout, a refused connection, a server error): the last good
    /// set stays in force and the source is stale until its next answer.
    ///
    /// # Errors
    /// As [`publish`](Self::publish).
    pub fn failed(&self, error: impl std::fmt::Display) -> Result<(), DestinationsError> {
        let (core, runtime) = self.target()?;
        runtime.source_failed(&core.hub, &self.source, error.to_string(), core.clock.now())
    }

    /// Applies the change the update guard holds for this source now; `false` when it holds
    /// none.
    ///
    /// # Errors
    /// As [`publish`](Self::publish).
    pub fn force_held(&self) -> Result<bool, DestinationsError> {
        let (core, runtime) = self.target()?;
        runtime.force_held(&core.hub, &self.source, core.clock.now())
    }

    /// Takes the source out of its cluster: its destinations leave (requests in flight finish).
    ///
    /// # Errors
    /// [`DestinationsError::UnknownCluster`], [`DestinationsError::EngineGone`].
    pub fn retire(self) -> Result<(), DestinationsError> {
        let (core, runtime) = self.target()?;
        runtime.retire_source(&core.hub, &self.source, core.clock.now());
        Ok(())
    }

    /// The cluster it publishes to.
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// The source's name.
    pub fn source(&self) -> &str {
        &self.source
    }

    fn target(&self) -> Result<(Arc<EngineCore>, Arc<ClusterRuntime>), DestinationsError> {
        let core = self.core.upgrade().ok_or(DestinationsError::EngineGone)?;
        let runtime = core.table().get(&self.cluster).cloned().ok_or_else(|| {
            DestinationsError::UnknownCluster {
                cluster: self.cluster.to_string(),
            }
        })?;
        Ok((core, runtime))
    }
}

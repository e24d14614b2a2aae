//! Changing what clusters exist and what their destinations are (SPEC §2, §13): whole-config
//! reloads and one source's destination set, through one code path.
//!
//! Every destination comes from a source: [`CONFIG_SOURCE`] for those of the configuration, or a
//! discovery source (or the application) publishing through
//! [`Engine::set_destinations`](super::Engine::set_destinations). Each publication is the source's
//! *full* set; it is diffed against what that source published before, by key (identity is
//! cluster + source + key):
//!
//! - a key published again **at the same address** keeps its destination object — health,
//!   policy data, in-flight count and pending reactivation — and only its attributes (tier,
//!   weight, metadata, Host, probe base) are replaced;
//! - a key published **at a new address** is a new instance (Kubernetes reuses addresses): a new
//!   destination whose health starts over;
//! - a key no longer published leaves the cluster's snapshot at once (no new picks) while
//!   requests in flight to it finish; their outcomes count for nothing;
//! - a new key is a new destination, Unknown until its checks say otherwise.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::core::EngineCore;
use super::runtime::{ClusterRuntime, SourceMembers};
use super::table::ClusterTable;
use super::timers::{Reactivate, Reactivation};
use super::updater::After;
use super::Engine;
use crate::cluster::settings::ClusterSettings;
use crate::cluster::snapshot::ClusterSnapshot;
use crate::config::diagnostics::{ConfigError, Diagnostic, Diagnostics};
use crate::config::model::{ClusterConfig, Config};
use crate::config::read::read;
use crate::config::validate::{sort_in_document_order, validate};
use crate::destination::attributes::DestinationAttributes;
use crate::destination::endpoint::Endpoint;
use crate::destination::state::DestinationState;
use crate::destination::{Destination, DestinationInfo, OutcomeSink};
use crate::error::DestinationsError;
use crate::ids::fold_case;
use crate::policy::registry::ResolvedPolicies;
use crate::uri::{parse_base, shown};

/// The source of the destinations a configuration lists.
pub const CONFIG_SOURCE: &str = "config";

impl Engine {
    /// Reads, validates and applies a YARP JSON document (a reload when clusters exist).
    /// Returns the warnings. On error nothing changes: the old configuration stays in force.
    ///
    /// # Errors
    /// Every problem of the document, at once.
    pub fn load_json(&self, text: &str) -> Result<Vec<Diagnostic>, ConfigError> {
        let mut diags = Diagnostics::default();
        let config = read(text, &mut diags);
        self.admit(config, diags)
    }

    /// Validates and applies `config`. Surviving destinations (same cluster id and destination
    /// id, case-insensitively, at the same address) keep their health, counters and in-flight
    /// counts; removed ones are dropped; new ones start Unknown. Returns the warnings.
    ///
    /// # Errors
    /// Every problem of the configuration; nothing changes then.
    pub fn apply_config(&self, config: Config) -> Result<Vec<Diagnostic>, ConfigError> {
        self.admit(Some(config), Diagnostics::default())
    }

    /// Validates a configuration, resolves its policies (each name looked up once) and applies
    /// it when nothing is wrong.
    fn admit(
        &self,
        config: Option<Config>,
        mut diags: Diagnostics,
    ) -> Result<Vec<Diagnostic>, ConfigError> {
        let resolved = config.as_ref().and_then(|config| {
            validate(config, &mut diags);
            let policies = self.core.registry.resolve(config, &mut diags);
            sort_in_document_order(config, &mut diags.errors);
            sort_in_document_order(config, &mut diags.warnings);
            policies
        });
        diags.finish(self.core.strict);
        match (config, resolved) {
            (Some(config), Some(policies)) if diags.errors.is_empty() => {
                self.apply(config, policies);
                for w in &diags.warnings {
                    tracing::warn!(target: "healthpick", path = %w.path, "{}", w.message);
                }
                Ok(diags.warnings)
            }
            _ => {
                let e = ConfigError {
                    errors: diags.errors,
                    warnings: diags.warnings,
                };
                tracing::error!(target: "healthpick", "configuration rejected, the previous one stays in force: {e}");
                Err(e)
            }
        }
    }

    fn apply(&self, config: Config, policies: Vec<ResolvedPolicies>) {
        let core = &self.core;
        let _serial = core.config_lock.lock();
        let options = config.health_policies.unwrap_or(core.options);
        let old = core.table();
        let now = core.clock.now();
        let mut table = ClusterTable::default();
        let mut kept: HashSet<*const ClusterRuntime> = HashSet::new();
        for (cluster, policies) in config.clusters.iter().zip(policies) {
            let settings = Arc::new(ClusterSettings::new(cluster, policies, options));
            let runtime = old.get(cluster.id()).cloned().unwrap_or_else(|| {
                ClusterRuntime::new(
                    settings.clone(),
                    core.clock.clone(),
                    core.hub.observer.clone(),
                    Arc::downgrade(&core.hub),
                )
            });
            runtime.replace_source(
                core,
                Some(settings),
                CONFIG_SOURCE,
                config_endpoints(cluster),
                now,
            );
            kept.insert(Arc::as_ptr(&runtime));
            table.push(Arc::from(fold_case(cluster.id())), runtime);
        }
        core.table.store(Arc::new(table));
        // After the new table is in place, so a pick racing with the reload sees either the old
        // cluster with its destinations or no cluster.
        for runtime in old.runtimes() {
            if !kept.contains(&Arc::as_ptr(runtime)) {
                runtime.retire();
            }
        }
        core.config_generation.send_modify(|g| *g += 1);
        tracing::info!(target: "healthpick", clusters = config.clusters.len(), "configuration applied");
    }

    /// Replaces the destinations `source` publishes for `cluster` with `endpoints`, its full
    /// current set, without a configuration reload: what discovery sources call, and the way to
    /// add and remove destinations at run time from your own code. The cluster keeps its other
    /// sources' destinations (those of the configuration among them).
    ///
    /// Keys identify instances: a key published again at the same address keeps its health,
    /// counters, in-flight count and pending reactivation (its tier, weight, metadata and Host
    /// may change); at a new address it is a new instance whose health starts over; a key left
    /// out gets no new picks at once while its requests in flight finish.
    ///
    /// ```
    /// use healthpick::{Endpoint, Engine};
    ///
    /// let engine = Engine::from_json(r#"{"Clusters": {"payments": {}}}"#)?;
    /// engine.set_destinations("payments", "my-registry", vec![
    ///     Endpoint::new("eu-1", "http://127.0.0.1:8001/".parse()?),
    ///     Endpoint::new("us-1", "http://127.0.0.1:9001/".parse()?).tier(1),
    /// ])?;
    /// assert_eq!(engine.pick_endpoint("payments")?.destination().id(), "eu-1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`DestinationsError::UnknownCluster`]; [`DestinationsError::Invalid`] when an address is
    /// not an absolute http(s) URL, a weight is negative or not finite, a key is empty or given
    /// twice, or `source` is
    /// [`CONFIG_SOURCE`] (reserved for the configuration) — nothing changes then.
    pub fn set_destinations(
        &self,
        cluster: &str,
        source: &str,
        endpoints: Vec<Endpoint>,
    ) -> Result<(), DestinationsError> {
        let Some(runtime) = self.core.table().get(cluster).cloned() else {
            return Err(DestinationsError::UnknownCluster {
                cluster: cluster.to_string(),
            });
        };
        let mut problems = Vec::new();
        if source == CONFIG_SOURCE || source.trim().is_empty() {
            problems.push(format!(
                "`{source}` cannot name a source (`{CONFIG_SOURCE}` is the configuration's)"
            ));
        }
        let mut keys = HashSet::with_capacity(endpoints.len());
        for e in &endpoints {
            if e.key.trim().is_empty() {
                problems.push(format!("endpoint at {} has an empty key", e.address));
            } else if !keys.insert(fold_case(&e.key)) {
                problems.push(format!("key `{}` is given twice", e.key));
            }
            let weight = e.attributes.weight;
            if !(weight.is_finite() && weight >= 0.0) {
                problems.push(format!(
                    "endpoint `{}`: weight {weight} is not a finite number, 0 or more",
                    e.key
                ));
            }
            if let Err(why) = parse_base(e.address.as_str()) {
                problems.push(format!(
                    "endpoint `{}`: address `{}` {why}",
                    e.key,
                    shown(e.address.as_str())
                ));
            }
        }
        if !problems.is_empty() {
            return Err(DestinationsError::Invalid {
                cluster: cluster.to_string(),
                source: source.to_string(),
                problems,
            });
        }
        runtime.replace_source(&self.core, None, source, endpoints, self.core.clock.now());
        Ok(())
    }
}

/// The endpoints a cluster's configuration lists, as the `config` source publishes them.
fn config_endpoints(cluster: &ClusterConfig) -> Vec<Endpoint> {
    cluster
        .destinations()
        .iter()
        .filter_map(|d| {
            // Validation refused every destination whose URLs do not parse.
            let address = parse_base(d.address()).ok()?;
            Some(Endpoint {
                key: d.id().to_string(),
                address,
                attributes: DestinationAttributes {
                    tier: d.tier(),
                    weight: d.weight(),
                    host: d.host_setting().map(str::to_string),
                    health_url: d.health_setting().and_then(|h| parse_base(h).ok()),
                    metadata: d.metadata_map().clone(),
                },
            })
        })
        .collect()
}

/// A destination of a publication: kept as it is, or new (its hot block is allocated after
/// every cold part is built, so the cluster's hot blocks sit together).
enum Planned {
    Kept(Arc<Destination>),
    New(Box<DestinationInfo>),
}

impl ClusterRuntime {
    /// Applies one source's full set (and new settings, for a reload) and publishes the
    /// cluster's new snapshot, all under the cluster's book lock.
    pub(crate) fn replace_source(
        &self,
        core: &EngineCore,
        settings: Option<Arc<ClusterSettings>>,
        source: &str,
        endpoints: Vec<Endpoint>,
        now: Duration,
    ) {
        let mut book = self.book.lock();
        let settings = settings.unwrap_or_else(|| self.cell.load().settings.clone());
        let position = match book.sources.iter().position(|s| &*s.source == source) {
            Some(position) => position,
            None => {
                // The configuration's destinations come first, then sources in arrival order.
                let at = if source == CONFIG_SOURCE {
                    0
                } else {
                    book.sources.len()
                };
                book.sources.insert(
                    at,
                    SourceMembers {
                        source: Arc::from(source),
                        members: Vec::new(),
                    },
                );
                at
            }
        };
        // Ids are unique within a cluster: a key that another source already uses as an id is
        // qualified with this source's name.
        let taken: HashSet<String> = book
            .sources
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != position)
            .flat_map(|(_, s)| s.members.iter().map(|d| fold_case(d.id())))
            .collect();
        let previous = std::mem::take(&mut book.sources[position].members);
        let sink: Arc<dyn OutcomeSink> = match self.me.upgrade() {
            Some(me) => me,
            None => return, // being dropped
        };
        let merged = merge(
            &settings.id,
            &book.sources[position].source,
            previous,
            endpoints,
            &taken,
            &sink,
        );
        book.sources[position].members = merged.members;
        if source != CONFIG_SOURCE && book.sources[position].members.is_empty() {
            book.sources.remove(position);
        }
        let members = book.members();
        let warm_up = self.warm_up_after_change(&mut book, &settings, &members, After::Change);
        let snapshot = ClusterSnapshot::build(settings, members, self.counter.clone(), warm_up);
        self.publish(Some(&core.hub), &mut book, snapshot, now);
        for d in merged.removed {
            d.state().mark_removed();
        }
        for (d, due) in merged.reactivations {
            let cluster: Weak<dyn Reactivate> = self.me.clone();
            core.hub
                .timers
                .schedule(Reactivation::new(due, cluster, Arc::downgrade(&d)));
        }
        drop(book);
        // The active monitor re-reads its targets (new members are probed at once).
        self.members_changed.send_modify(|g| *g += 1);
    }
}

/// What a publication did to one source's destinations.
struct Merged {
    /// The source's destinations now, in the order published.
    members: Vec<Arc<Destination>>,
    /// Those that left (removed keys, and keys now at another address).
    removed: Vec<Arc<Destination>>,
    /// New objects that took over a pending reactivation (a respelt id): it is scheduled again.
    reactivations: Vec<(Arc<Destination>, Duration)>,
}

/// Diffs a source's new full set against its previous destinations.
fn merge(
    cluster_id: &Arc<str>,
    source: &Arc<str>,
    previous: Vec<Arc<Destination>>,
    endpoints: Vec<Endpoint>,
    taken: &HashSet<String>,
    sink: &Arc<dyn OutcomeSink>,
) -> Merged {
    let mut by_key: HashMap<Arc<str>, Arc<Destination>> = previous
        .into_iter()
        .map(|d| (d.info().key.clone(), d))
        .collect();
    let mut removed = Vec::new();
    let mut planned = Vec::with_capacity(endpoints.len());
    for endpoint in endpoints {
        let key: Arc<str> = Arc::from(fold_case(&endpoint.key));
        let id = if taken.contains(&*key) {
            format!("{}@{source}", endpoint.key)
        } else {
            endpoint.key
        };
        let mut state = DestinationState::default();
        match by_key.remove(&key) {
            Some(kept) if kept.address() == &endpoint.address => {
                let info = kept.info();
                if *info.id == *id && *info.cluster_id == **cluster_id {
                    if **info.attributes.load() != endpoint.attributes {
                        info.attributes.store(Arc::new(endpoint.attributes));
                    }
                    planned.push(Planned::Kept(kept));
                    continue;
                }
                // The same instance under a respelt id (ids are case-insensitive): a new object,
                // since ids do not change, that takes over its health and policy data.
                state = DestinationState::taking_over(&info.state);
                removed.push(kept);
            }
            // A new address under a known key is another instance: its health starts over.
            Some(replaced) => removed.push(replaced),
            None => {}
        }
        planned.push(Planned::New(Box::new(DestinationInfo {
            id: Arc::from(id),
            cluster_id: cluster_id.clone(),
            source: source.clone(),
            key,
            address: endpoint.address,
            attributes: ArcSwap::from_pointee(endpoint.attributes),
            state,
            sink: sink.clone(),
        })));
    }
    let mut reactivations = Vec::new();
    let members = planned
        .into_iter()
        .map(|planned| match planned {
            Planned::Kept(kept) => kept,
            Planned::New(info) => {
                let d = Arc::new(Destination::new(info));
                if let Some(due) = d.state().record.lock().reactivation_due {
                    reactivations.push((d.clone(), due));
                }
                d
            }
        })
        .collect();
    removed.extend(by_key.into_values());
    Merged {
        members,
        removed,
        reactivations,
    }
}

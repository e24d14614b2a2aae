//! Changing what clusters exist and what their destinations are: whole-config
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

use super::hub::Hub;
use super::runtime::{ClusterBook, ClusterRuntime, CONFIG_SOURCE};
use super::status::ConfigRejection;
use super::table::ClusterTable;
use super::timers::{Due, Timer, TimerTarget};
use super::updater::{changed, After};
use super::Engine;
use crate::cluster::settings::{ClusterSettings, LocalityRule};
use crate::cluster::snapshot::ClusterSnapshot;
use crate::config::diagnostics::{ConfigError, Diagnostic, Diagnostics};
use crate::config::discovery::{LOCAL_REGION_VAR, LOCAL_ZONE_VAR};
use crate::config::model::{ClusterConfig, Config};
use crate::config::read::read;
use crate::config::validate::{sort_in_document_order, validate};
use crate::destination::attributes::DestinationAttributes;
use crate::destination::endpoint::Endpoint;
use crate::destination::latency;
use crate::destination::locality::Locality;
use crate::destination::signals::SignalPool;
use crate::destination::state::{DestinationRecords, DestinationState};
#[cfg(feature = "metrics")]
use crate::destination::DestinationMetrics;
use crate::destination::{Destination, DestinationInfo, Sink, WarmPart};
use crate::error::DestinationsError;
use crate::events::{HealthEvent, HealthEventKind, PartValue};
use crate::health::reason::Reason;
use crate::health::state::{DiscoveryHealth, HealthPart};
use crate::ids::fold_case;
use crate::policy::registry::ResolvedPolicies;
use crate::uri::parse_base;

impl Engine {
    /// Reads, validates and applies a YARP JSON document (a reload when clusters exist).
    /// Returns the warnings. On error nothing changes: the old configuration stays in force, and
    /// the refusal is a [`ConfigRejected`](HealthEventKind::ConfigRejected) event and the
    /// status's [`last_error`](super::status::ConfigStatus::last_error).
    ///
    /// # Errors
    /// Every problem of the document, at once.
    pub fn load_json(&self, text: &str) -> Result<Vec<Diagnostic>, ConfigError> {
        let mut diags = Diagnostics::default();
        let config = read(text, &mut diags);
        self.admit(config, diags, None)
    }

    /// [`load_json`](Self::load_json) of a document that came from `origin` (a file path): the
    /// status's [`origin`](super::status::ConfigStatus::origin), the rejection event and the
    /// log lines name it.
    ///
    /// ```
    /// use healthpick::{Engine, HealthEventKind};
    ///
    /// let engine = Engine::default();
    /// engine.load_json_from("/etc/app/appsettings.json", r#"{"Clusters": {"c": {}}}"#)?;
    /// assert_eq!(engine.status().config.origin.as_deref(), Some("/etc/app/appsettings.json"));
    ///
    /// let mut events = engine.subscribe();
    /// assert!(engine.load_json_from("/etc/app/appsettings.json", "{ not json").is_err());
    /// assert!(engine.has_cluster("c"), "the configuration in force stays");
    /// let event = events.try_recv()?;
    /// assert!(matches!(event.kind, HealthEventKind::ConfigRejected { origin: Some(_), .. }));
    /// assert!(engine.status().config.last_error.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// Every problem of the document, at once.
    pub fn load_json_from(&self, origin: &str, text: &str) -> Result<Vec<Diagnostic>, ConfigError> {
        let mut diags = Diagnostics::default();
        let config = read(text, &mut diags);
        self.admit(config, diags, Some(origin))
    }

    /// Validates and applies `config`. Surviving destinations (same cluster id and destination
    /// id, case-insensitively, at the same address) keep their health, counters and in-flight
    /// counts; removed ones are dropped; new ones start Unknown. Returns the warnings.
    ///
    /// # Errors
    /// Every problem of the configuration; nothing changes then.
    pub fn apply_config(&self, config: Config) -> Result<Vec<Diagnostic>, ConfigError> {
        self.admit(Some(config), Diagnostics::default(), None)
    }

    /// Validates a configuration, resolves its policies (each name looked up once) and applies
    /// it when nothing is wrong; otherwise records and announces the refusal.
    fn admit(
        &self,
        config: Option<Config>,
        mut diags: Diagnostics,
        origin: Option<&str>,
    ) -> Result<Vec<Diagnostic>, ConfigError> {
        let resolved = config.as_ref().and_then(|config| {
            validate(config, &mut diags);
            let policies = self.core.registry.resolve(config, &mut diags);
            sort_in_document_order(config, &mut diags.errors);
            sort_in_document_order(config, &mut diags.warnings);
            policies
        });
        diags.finish(self.core.strict);
        let from = origin.unwrap_or_default();
        match (config, resolved) {
            (Some(config), Some(policies)) if diags.errors.is_empty() => {
                self.apply(config, policies, origin);
                for w in &diags.warnings {
                    tracing::warn!(target: "healthpick", origin = from, path = %w.path, "{}", w.message);
                }
                Ok(diags.warnings)
            }
            _ => {
                let e = ConfigError {
                    errors: diags.errors,
                    warnings: diags.warnings,
                };
                tracing::error!(target: "healthpick", origin = from, "configuration rejected, the previous one stays in force: {e}");
                self.refused(origin, e.errors.iter().map(ToString::to_string).collect());
                Err(e)
            }
        }
    }

    /// Records a refused (re)load from `origin` — a document's errors, or why it could not be
    /// read — and announces it with a [`ConfigRejected`](HealthEventKind::ConfigRejected) event.
    /// The configuration in force stays.
    pub(crate) fn refused(&self, origin: Option<&str>, errors: Vec<String>) {
        let now = self.core.clock.now();
        let origin: Option<Arc<str>> = origin.map(Arc::from);
        self.core.config_record.lock().last_error = Some(ConfigRejection {
            at: now,
            origin: origin.as_deref().map(str::to_string),
            errors: errors.clone(),
        });
        self.core.hub.emit(HealthEvent {
            at: now,
            cluster: Arc::from(""),
            kind: HealthEventKind::ConfigRejected { origin, errors },
        });
    }

    fn apply(&self, config: Config, policies: Vec<ResolvedPolicies>, origin: Option<&str>) {
        let core = &self.core;
        let _serial = core.config_lock.lock();
        let options = config.health_policies.unwrap_or(core.options);
        let old = core.table();
        let now = core.clock.now();
        let mut table = ClusterTable::default();
        let mut kept: HashSet<*const ClusterRuntime> = HashSet::new();
        let local_zone = std::env::var(LOCAL_ZONE_VAR).ok().filter(|z| !z.is_empty());
        let local_region = std::env::var(LOCAL_REGION_VAR)
            .ok()
            .filter(|r| !r.is_empty());
        for (cluster, policies) in config.clusters.iter().zip(policies) {
            let locality = cluster
                .locality_tiers_setting()
                .map(|t| LocalityRule::new(t, local_zone.clone(), local_region.clone()));
            let settings = Arc::new(ClusterSettings::new(cluster, policies, options, locality));
            let runtime = old.get(cluster.id()).cloned().unwrap_or_else(|| {
                ClusterRuntime::new(
                    settings.clone(),
                    core.clock.clone(),
                    core.hub.observer.clone(),
                    Arc::downgrade(&core.hub),
                )
            });
            runtime.replace_source(
                &core.hub,
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
        {
            // The record and the generation change together (the status reads both under it).
            let mut record = core.config_record.lock();
            record.loaded_at = Some(now);
            record.origin = origin.map(Arc::from);
            record.last_error = None;
            core.config_generation.send_modify(|g| *g += 1);
        }
        tracing::info!(target: "healthpick", origin = origin.unwrap_or_default(), clusters = config.clusters.len(), "configuration applied");
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
    /// A destination's id is its key, unless another source of the cluster already has a
    /// destination with that id (ids are case-insensitive): then it is `key@source`, and when
    /// that is taken too (by another source's destination, or by a key of this set),
    /// `key@source#2`, `key@source#3`, ...: the first free one. Ids are unique within a
    /// cluster, so everything that finds a destination by id finds one.
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
    /// [`DestinationsError::UnknownCluster`]; [`DestinationsError::Invalid`] when an address (or
    /// a probe base, [`Endpoint::health_url`]) is not a usable base URL (absolute http(s), a host
    /// of at most [`MAX_HOST_LEN`](crate::MAX_HOST_LEN) bytes, at most
    /// [`MAX_ADDRESS_LEN`](crate::MAX_ADDRESS_LEN) bytes), a weight is negative or not finite,
    /// a key is empty or given twice, or `source` is
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
        validate_set(cluster, source, &endpoints)?;
        runtime.replace_source(
            &self.core.hub,
            None,
            source,
            endpoints,
            self.core.clock.now(),
        );
        Ok(())
    }
}

/// Checks a source's full set before anything of it is applied: every problem at once.
pub(crate) fn validate_set(
    cluster: &str,
    source: &str,
    endpoints: &[Endpoint],
) -> Result<(), DestinationsError> {
    let mut problems = Vec::new();
    if source == CONFIG_SOURCE || source.trim().is_empty() {
        problems.push(format!(
            "`{source}` cannot name a source (`{CONFIG_SOURCE}` is the configuration's)"
        ));
    }
    let mut keys = HashSet::with_capacity(endpoints.len());
    for e in endpoints {
        if !e.key.trim().is_empty() && !keys.insert(fold_case(&e.key)) {
            problems.push(format!("key `{}` is given twice", e.key));
        }
        problems.extend(e.problems());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(DestinationsError::Invalid {
            cluster: cluster.to_string(),
            source: source.to_string(),
            problems,
        })
    }
}

/// The endpoints a cluster's configuration lists, as the `config` source publishes them (none
/// when a `ResolveDestinations` source expands them instead).
fn config_endpoints(cluster: &ClusterConfig) -> Vec<Endpoint> {
    if cluster.resolves_destinations() {
        return Vec::new();
    }
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
                    locality: Locality::new(),
                    explicit_tier: true,
                },
                explicit_tier: true,
                health: DiscoveryHealth::Unknown,
            })
        })
        .collect()
}

/// A destination of a publication: kept as it is, or new (its warm part and its block are
/// allocated after every cold part is built, so that the cluster's warm parts sit together, and
/// its blocks: see `Destination`).
enum Planned {
    Kept(Arc<Destination>),
    New {
        info: Box<DestinationInfo>,
        state: DestinationState,
        #[cfg(feature = "metrics")]
        metrics: DestinationMetrics,
    },
}

/// A planned destination once the warm parts of the new ones are made.
enum Warmed {
    Kept(Arc<Destination>),
    New(Box<WarmPart>),
}

/// What applying a source's set changed, by destination id.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    pub added: Vec<Arc<str>>,
    pub removed: Vec<Arc<str>>,
    pub updated: Vec<Arc<str>>,
}

impl ClusterRuntime {
    /// Applies one source's full set (and new settings, for a reload) and publishes the
    /// cluster's new snapshot, all under the cluster's book lock.
    pub(crate) fn replace_source(
        &self,
        hub: &Hub,
        settings: Option<Arc<ClusterSettings>>,
        source: &str,
        endpoints: Vec<Endpoint>,
        now: Duration,
    ) -> Applied {
        let mut book = self.book.lock();
        self.apply_set(hub, &mut book, settings, source, endpoints, now)
    }

    /// [`replace_source`](Self::replace_source) with the book already locked.
    pub(crate) fn apply_set(
        &self,
        hub: &Hub,
        book: &mut ClusterBook,
        settings: Option<Arc<ClusterSettings>>,
        source: &str,
        mut endpoints: Vec<Endpoint>,
        now: Duration,
    ) -> Applied {
        if book.retired {
            return Applied::default(); // a set published to a cluster that just left
        }
        let published = self.cell.load().settings.clone();
        let settings = settings.unwrap_or_else(|| published.clone());
        let position = book.source_position(source);
        // Ids are unique within a cluster: a key that another source already uses as an id is
        // qualified with this source's name (`unique_id`).
        let taken: HashSet<String> = book
            .sources
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != position)
            .flat_map(|(_, s)| s.members.iter().map(|d| fold_case(d.id())))
            .collect();
        // Locality decides the tier of endpoints whose source gave none.
        for e in endpoints.iter_mut() {
            e.attributes.explicit_tier = e.explicit_tier;
            if let (Some(rule), false) = (&settings.locality, e.explicit_tier) {
                e.attributes.tier = rule.tier(&e.attributes.locality);
            }
        }
        // A reload that changes the rule re-tiers the other sources' destinations too, in the
        // same publication (this source's are tiered above).
        if settings.locality != published.locality {
            for (_, s) in book
                .sources
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != position)
            {
                for d in &s.members {
                    retier(d, settings.locality.as_ref());
                }
            }
        }
        let previous = std::mem::take(&mut book.sources[position].members);
        let Some(me) = self.me.upgrade() else {
            return Applied::default(); // being dropped
        };
        let sink = Arc::new(Sink(me));
        let merged = merge(
            &settings.id,
            &book.sources[position].source,
            previous,
            endpoints,
            &taken,
            &sink,
            &self.signals,
            now,
        );
        // Newcomers start from the default RTT as of now (see `destination/latency.rs`).
        for d in &merged.members {
            latency::start(d.signals.latency(), now, &settings.signals.latency);
        }
        book.sources[position].members = merged.members;
        let registered = book.sources[position].state.is_some();
        if source != CONFIG_SOURCE && !registered && book.sources[position].members.is_empty() {
            book.sources.remove(position);
        }
        let source_name: Arc<str> = Arc::from(source);
        for (d, from, to) in &merged.health_changes {
            changed(
                Some(hub),
                &settings,
                d,
                HealthPart::Discovery,
                PartValue::Discovery(*from),
                PartValue::Discovery(*to),
                &Reason::Discovery {
                    source: source_name.clone(),
                },
                now,
            );
        }
        let members = book.members();
        let warm_up = self.warm_up_after_change(book, &settings, &members, After::Change);
        // Successes granted under other settings (another rate limit or window) need a verdict.
        let regrant = !Arc::ptr_eq(&published, &settings);
        let previous = self.cell.load();
        let snapshot = ClusterSnapshot::build(
            settings,
            members,
            self.counter.clone(),
            warm_up,
            Some(&previous),
            now,
        );
        self.publish(Some(hub), book, snapshot, now);
        if regrant {
            for d in book.sources.iter().flat_map(|s| &s.members) {
                d.credit().revoke();
            }
        }
        for d in &merged.removed {
            d.mark_removed();
        }
        for (d, due) in merged.reactivations {
            let cluster: Weak<dyn TimerTarget> = self.me.clone();
            hub.timers.schedule(Timer::new(
                due,
                cluster,
                Due::Reactivation(Arc::downgrade(&d)),
            ));
        }
        let applied = Applied {
            added: merged.added,
            removed: merged.removed.iter().map(|d| d.info().id.clone()).collect(),
            updated: merged.updated,
        };
        let changed_any =
            !(applied.added.is_empty() && applied.removed.is_empty() && applied.updated.is_empty());
        // The active monitor re-reads its targets (new members are probed at once).
        self.members_changed.send_modify(|g| *g += 1);
        if source != CONFIG_SOURCE && changed_any {
            hub.emit(HealthEvent {
                at: now,
                cluster: self.cell.load().settings.id.clone(),
                kind: HealthEventKind::DestinationsChanged {
                    source: source_name,
                    added: applied.added.clone(),
                    removed: applied.removed.clone(),
                    updated: applied.updated.clone(),
                },
            });
        }
        applied
    }
}

/// The id of an endpoint whose key another source's destination already has as its id:
/// `key@source`, or, when `in_use` says that is taken too (by a destination of another source,
/// or a key of this source), `key@source#2`, `key@source#3`, ...: the first free one.
fn unique_id(key: &str, source: &str, mut in_use: impl FnMut(&str) -> bool) -> String {
    let qualified = format!("{key}@{source}");
    if !in_use(&qualified) {
        return qualified;
    }
    (2u64..)
        .map(|n| format!("{qualified}#{n}"))
        .find(|candidate| !in_use(candidate))
        .unwrap_or(qualified) // the candidates outnumber any set of ids
}

/// Gives `d` the tier `rule` says for its locality (tier 0 without a rule), unless its source
/// gave it one.
fn retier(d: &Destination, rule: Option<&LocalityRule>) {
    let attributes = d.info().attributes.load();
    if attributes.explicit_tier {
        return;
    }
    let tier = rule.map_or(0, |rule| rule.tier(&attributes.locality));
    if tier != attributes.tier {
        let mut retiered = DestinationAttributes::clone(&attributes);
        retiered.tier = tier;
        d.info().attributes.store(Arc::new(retiered));
    }
}

/// What a publication did to one source's destinations.
struct Merged {
    /// The source's destinations now, in the order published.
    members: Vec<Arc<Destination>>,
    /// Those that left (removed keys, and keys now at another address).
    removed: Vec<Arc<Destination>>,
    /// Ids of new destinations.
    added: Vec<Arc<str>>,
    /// Ids of kept destinations whose attributes changed.
    updated: Vec<Arc<str>>,
    /// Discovery health set by this publication: (destination, from, to).
    health_changes: Vec<(Arc<Destination>, DiscoveryHealth, DiscoveryHealth)>,
    /// New objects that took over a pending reactivation (a respelt id): it is scheduled again.
    reactivations: Vec<(Arc<Destination>, Duration)>,
}

/// Diffs a source's new full set against its previous destinations; new ones count in flight in
/// `pool`.
#[allow(clippy::too_many_arguments)]
fn merge(
    cluster_id: &Arc<str>,
    source: &Arc<str>,
    previous: Vec<Arc<Destination>>,
    endpoints: Vec<Endpoint>,
    taken: &HashSet<String>,
    sink: &Arc<Sink>,
    pool: &SignalPool,
    now: Duration,
) -> Merged {
    let mut by_key: HashMap<Arc<str>, Arc<Destination>> = previous
        .into_iter()
        .map(|d| (d.info().key.clone(), d))
        .collect();
    let mut removed = Vec::new();
    let mut updated = Vec::new();
    let mut health = Vec::with_capacity(endpoints.len());
    let mut planned = Vec::with_capacity(endpoints.len());
    let own_keys: HashSet<String> = endpoints.iter().map(|e| fold_case(&e.key)).collect();
    // Ids given to this publication's renamed endpoints.
    let mut renamed: HashSet<String> = HashSet::new();
    for endpoint in endpoints {
        health.push(endpoint.health);
        let key: Arc<str> = Arc::from(fold_case(&endpoint.key));
        let id = if taken.contains(&*key) {
            unique_id(&endpoint.key, source, |candidate| {
                let folded = fold_case(candidate);
                taken.contains(&folded) || own_keys.contains(&folded) || !renamed.insert(folded)
            })
        } else {
            endpoint.key
        };
        let mut state = DestinationState::default();
        let mut records = DestinationRecords::default();
        match by_key.remove(&key) {
            Some(kept) if kept.address() == &endpoint.address => {
                let info = kept.info();
                if *info.id == *id && *info.cluster_id == **cluster_id {
                    if **info.attributes.load() != endpoint.attributes {
                        info.attributes.store(Arc::new(endpoint.attributes));
                        updated.push(info.id.clone());
                    }
                    planned.push(Planned::Kept(kept));
                    continue;
                }
                // The same instance under a respelt id (ids are case-insensitive): a new object,
                // since ids do not change, that takes over its health and policy data.
                // Successes it counted without the window's lock go over with the window.
                kept.credit().revoke();
                kept.with_outcome_window(|_| ());
                state = DestinationState::taking_over(kept.state());
                records = DestinationRecords::taking_over(&info.records);
                removed.push(kept);
            }
            // A new address under a known key is another instance: its health starts over.
            Some(replaced) => removed.push(replaced),
            None => {}
        }
        let id: Arc<str> = Arc::from(id);
        #[cfg(feature = "metrics")]
        let metrics = super::metrics::destination_metrics(cluster_id, &id);
        let info = Box::new(DestinationInfo {
            id,
            cluster_id: cluster_id.clone(),
            source: source.clone(),
            key,
            address: endpoint.address,
            attributes: ArcSwap::from_pointee(endpoint.attributes),
            records,
        });
        planned.push(Planned::New {
            info,
            state,
            #[cfg(feature = "metrics")]
            metrics,
        });
    }
    let mut reactivations = Vec::new();
    let mut added = Vec::new();
    // The new destinations' warm parts in one run, then their blocks in another (see
    // `Destination`).
    let warmed: Vec<Warmed> = planned
        .into_iter()
        .map(|planned| match planned {
            Planned::Kept(kept) => Warmed::Kept(kept),
            Planned::New {
                info,
                state,
                #[cfg(feature = "metrics")]
                metrics,
            } => Warmed::New(Box::new(WarmPart {
                state,
                info,
                #[cfg(feature = "metrics")]
                metrics,
            })),
        })
        .collect();
    let new = warmed
        .iter()
        .filter(|w| matches!(w, Warmed::New(_)))
        .count();
    pool.reserve(new);
    let members: Vec<Arc<Destination>> = warmed
        .into_iter()
        .map(|warmed| match warmed {
            Warmed::Kept(kept) => kept,
            Warmed::New(part) => {
                let d = Arc::new(Destination::new(part, pool.place(), sink.clone()));
                if let Some(due) = d.record().reactivation_due {
                    reactivations.push((d.clone(), due));
                }
                added.push(d.info().id.clone());
                d
            }
        })
        .collect();
    let mut health_changes = Vec::new();
    for (d, to) in members.iter().zip(health) {
        let state = d.state();
        d.record().last_seen = Some(now);
        let from = state.discovery();
        if from != to {
            state.set_discovery(to);
            health_changes.push((d.clone(), from, to));
        }
    }
    removed.extend(by_key.into_values());
    Merged {
        members,
        removed,
        added,
        updated,
        health_changes,
        reactivations,
    }
}

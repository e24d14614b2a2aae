//! Running the sources a configuration names: every cluster's `Discovery` section
//! gets one task per source, started when [`Discovery::start`] is called and kept in line with
//! configuration reloads — a source that appears is started, one that changes is restarted (its
//! destinations stay until its new task answers), one that disappears is stopped and its
//! destinations leave the cluster.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

#[cfg(feature = "consul")]
use super::consul::source::ConsulSource;
#[cfg(feature = "dns")]
use super::dns::{DnsSource, ResolveDestinations};
use super::driver::{poll, SourceTask};
#[cfg(feature = "etcd")]
use super::etcd::source::EtcdSource;
#[cfg(feature = "kubernetes")]
use super::kubernetes::source::KubernetesSource;
use super::source::PollSource;
use crate::config::discovery::{DiscoveryConfig, RefreshBounds, SourceConfig};
use crate::config::model::{ClusterConfig, DestinationConfig};
use crate::engine::publisher::{Publisher, SourceSpec};
use crate::engine::Engine;
use crate::ids::fold_case;

/// The running discovery sources of an engine's configuration. Dropping it stops them all (their
/// last sets stay in force); [`stop`](Self::stop) also waits for them to end.
///
/// ```no_run
/// # async fn run(text: &str) -> Result<(), Box<dyn std::error::Error>> {
/// use healthpick::discovery::Discovery;
/// use healthpick::{ActiveMonitor, Engine};
///
/// let engine = Engine::from_json(text)?;     // clusters with `Discovery` sections
/// let _discovery = Discovery::start(&engine); // DNS names resolved, refreshed, ...
/// let _monitor = ActiveMonitor::start(&engine);
/// engine.ready().await;                       // every source answered (bounded), probed once
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "the sources stop when this handle is dropped"]
pub struct Discovery {
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Discovery {
    /// Starts every configured source on the current tokio runtime. The sources are registered
    /// before this returns, so `engine.ready()` right after waits for their first answers.
    ///
    /// # Panics
    /// Outside a tokio runtime, as `tokio::spawn` does.
    pub fn start(engine: &Engine) -> Discovery {
        let cancel = CancellationToken::new();
        let mut running = Running::default();
        running.follow(engine);
        let task = tokio::spawn(supervise(engine.clone(), running, cancel.clone()));
        Discovery {
            cancel,
            task: Some(task),
        }
    }

    /// Stops every source and waits until their tasks have ended.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Discovery {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// One running source.
struct Started {
    config: DiscoveryConfig,
    /// The cluster's configured destinations, for a source that expands them
    /// (`ResolveDestinations`): a reload that changes them restarts the source.
    templates: Vec<DestinationConfig>,
    publisher: Publisher,
    _task: Option<SourceTask>,
}

/// Running sources by (folded cluster id, source name).
#[derive(Default)]
struct Running {
    sources: HashMap<(String, String), Started>,
}

impl Running {
    /// Starts, restarts and stops sources so that they match the engine's configuration.
    fn follow(&mut self, engine: &Engine) {
        let mut wanted: HashMap<(String, String), (Arc<ClusterConfig>, DiscoveryConfig)> =
            HashMap::new();
        for cluster in engine.discovery_clusters() {
            for config in cluster.discovery_sources() {
                wanted.insert(
                    (fold_case(cluster.id()), config.source_name()),
                    (cluster.clone(), config.clone()),
                );
            }
        }
        let gone: Vec<(String, String)> = self
            .sources
            .keys()
            .filter(|key| !wanted.contains_key(*key))
            .cloned()
            .collect();
        for key in gone {
            if let Some(started) = self.sources.remove(&key) {
                let _ = started.publisher.retire();
            }
        }
        for (key, (cluster, config)) in wanted {
            let templates = templates(&cluster, &config);
            if self
                .sources
                .get(&key)
                .is_some_and(|s| s.config == config && s.templates == templates)
            {
                continue;
            }
            // New or changed: (re)register (its destinations stay) and start a new task.
            self.sources.remove(&key);
            let publisher = match engine.publisher(cluster.id(), SourceSpec::from_config(&config)) {
                Ok(publisher) => publisher,
                Err(e) => {
                    tracing::error!(target: "healthpick", cluster = cluster.id(), "discovery source not started: {e}");
                    continue;
                }
            };
            let task = match build(&cluster, &config) {
                Ok(source) => Some(source.start(publisher.clone(), *config.refresh_bounds())),
                Err(why) => {
                    let _ = publisher.failed(&why);
                    tracing::error!(target: "healthpick", cluster = cluster.id(), source = publisher.source(), "discovery source not started: {why}");
                    None
                }
            };
            self.sources.insert(
                key,
                Started {
                    config,
                    templates,
                    publisher,
                    _task: task,
                },
            );
        }
    }
}

async fn supervise(engine: Engine, mut running: Running, cancel: CancellationToken) {
    let mut changes = engine.config_changes();
    changes.mark_unchanged();
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            changed = changes.changed() => {
                if changed.is_err() {
                    break;
                }
                running.follow(&engine);
            }
        }
    }
}

/// The configured destinations a source expands (none for the others).
fn templates(cluster: &ClusterConfig, config: &DiscoveryConfig) -> Vec<DestinationConfig> {
    match config.source() {
        SourceConfig::ResolveDestinations(_) => cluster.destinations().to_vec(),
        _ => Vec::new(),
    }
}

/// A source built from its configuration, ready to start.
#[cfg_attr(
    not(any(
        feature = "dns",
        feature = "etcd",
        feature = "consul",
        feature = "kubernetes"
    )),
    allow(dead_code)
)]
pub(crate) enum Built {
    /// Asked again and again by the polling driver (DNS).
    #[cfg_attr(not(feature = "dns"), allow(dead_code))]
    Poll(Arc<dyn PollSource>),
    /// Runs its own watch loop (etcd, Consul, Kubernetes).
    Watch(Box<dyn FnOnce(Publisher, RefreshBounds) -> SourceTask + Send>),
}

impl Built {
    /// Starts it, publishing through `publisher`.
    pub(crate) fn start(self, publisher: Publisher, refresh: RefreshBounds) -> SourceTask {
        match self {
            Built::Poll(source) => poll(source, publisher, refresh),
            Built::Watch(start) => start(publisher, refresh),
        }
    }
}

/// The source a configuration describes.
#[cfg_attr(
    not(all(
        feature = "dns",
        feature = "etcd",
        feature = "consul",
        feature = "kubernetes"
    )),
    allow(unused_variables)
)]
pub(crate) fn build(cluster: &ClusterConfig, config: &DiscoveryConfig) -> Result<Built, String> {
    match config.source() {
        #[cfg(feature = "dns")]
        SourceConfig::Dns(dns) => Ok(Built::Poll(Arc::new(DnsSource::new(dns)?))),
        #[cfg(feature = "dns")]
        SourceConfig::ResolveDestinations(resolve) => Ok(Built::Poll(Arc::new(
            ResolveDestinations::new(resolve, cluster)?,
        ))),
        #[cfg(feature = "etcd")]
        SourceConfig::Etcd(etcd) => {
            let source = EtcdSource::new(etcd)?;
            Ok(Built::Watch(Box::new(move |publisher, refresh| {
                source.refresh(refresh).start(publisher)
            })))
        }
        #[cfg(feature = "consul")]
        SourceConfig::Consul(consul) => {
            let source = ConsulSource::new(consul)?;
            Ok(Built::Watch(Box::new(move |publisher, refresh| {
                source.refresh(refresh).start(publisher)
            })))
        }
        #[cfg(feature = "kubernetes")]
        SourceConfig::Kubernetes(kubernetes) => {
            KubernetesSource::check(kubernetes)?;
            let config = kubernetes.clone();
            Ok(Built::Watch(Box::new(move |publisher, refresh| {
                KubernetesSource::start_from_config(config, refresh, publisher)
            })))
        }
        #[allow(unreachable_patterns)]
        other => Err(format!(
            "discovery Type `{}` needs healthpick's `{}` feature",
            other.type_name(),
            other.feature()
        )),
    }
}

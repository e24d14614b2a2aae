//! The Kubernetes source: the EndpointSlices of one Service (label
//! `kubernetes.io/service-name=<service>`), watched with kube's runtime watcher, published as
//! one full set after every change.
//!
//! - **A list replaces everything.** The watcher lists, then watches from the list's resource
//!   version. The slices of a list (`Init` … `InitDone`) are collected apart and replace the
//!   whole set at `InitDone`, so a slice deleted while the watch was down — which no `DELETED`
//!   event will ever announce — leaves with the list that no longer has it.
//! - **Resumes and re-lists.** A watch the server ends is resumed by kube from the last
//!   resource version (bookmarks move it on). History that is gone (410 Expired) means a new
//!   list, at once; any other error marks the source stale (the last good set stays), backs off
//!   and starts a new list. Every `Resync` the watch is replaced by a new list anyway, so a
//!   watch that missed something without an error cannot leave the set behind for long.
//! - **Idle watches.** The watch asks the server to end it after `IdleTimeout` less 5 s; kube
//!   gives up on a watch that has said nothing for 5 s more; the client's read timeout
//!   (`IdleTimeout` + 5 s) bounds a list or a watch request that is never answered.
//! - **Coalescing.** Changes that arrive within 50 ms of each other are published together:
//!   the slice controller writes the slices of one update one after another, and an endpoint
//!   that moves from one slice to another must not leave (and lose its health) in between.
//! - A Service without slices is an empty set (the update guard decides about it); slices that
//!   cannot be read (`slices.rs`) are left out and reported in the source's status.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher::{self, watcher, Event};
use kube::{Api, Client};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::slices::{is_empty_slice, merge, MappingRules, SliceError};
use crate::config::discovery::{RefreshBounds, LOCAL_ZONE_VAR};
use crate::config::source_kubernetes::KubernetesSourceConfig;
use crate::destination::endpoint::Endpoint;
use crate::discovery::driver::{Backoff, SourceTask};
use crate::engine::publisher::Publisher;

/// The label the EndpointSlice controller puts on every slice of a Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// kube gives up on a watch this long after its `timeoutSeconds` without a line (fixed in kube).
const KUBE_IDLE_MARGIN: Duration = Duration::from_secs(5);

/// Changes this close together are published as one.
const COALESCE: Duration = Duration::from_millis(50);

/// A source of a cluster's destinations from the EndpointSlices of a Kubernetes Service.
///
/// ```no_run
/// # async fn run(engine: healthpick::Engine) -> Result<(), Box<dyn std::error::Error>> {
/// use healthpick::config::KubernetesSourceConfig;
/// use healthpick::discovery::kubernetes::KubernetesSource;
/// use healthpick::discovery::SourceSpec;
///
/// let config = KubernetesSourceConfig::new("payments").namespace("shop").port_name("http");
/// let publisher = engine.publisher(
///     "payments",
///     SourceSpec::new("kubernetes").kind("kubernetes").target(config.target()),
/// )?;
/// let task = KubernetesSource::new(&config).await?.start(publisher);
/// engine.ready().await; // the slices were listed once
/// # drop(task); Ok(()) }
/// ```
#[derive(Clone)]
pub struct KubernetesSource {
    client: Client,
    namespace: String,
    service: String,
    rules: MappingRules,
    resync: Duration,
    idle_timeout: Duration,
    refresh: RefreshBounds,
}

impl std::fmt::Debug for KubernetesSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesSource")
            .field("namespace", &self.namespace)
            .field("service", &self.service)
            .field("rules", &self.rules)
            .field("resync", &self.resync)
            .field("idle_timeout", &self.idle_timeout)
            .field("refresh", &self.refresh)
            .finish_non_exhaustive()
    }
}

impl KubernetesSource {
    /// A source as configured, with a client configured as kube does it: the kubeconfig
    /// (`KUBECONFIG`, else `~/.kube/config`; its current context or the configured one), else
    /// the in-cluster service account. The client's read timeout is the idle timeout plus 5 s.
    /// Default refresh bounds: retries from 5 s up to 5 min.
    ///
    /// TLS to the API server needs the `rustls` (default) or `native-tls` feature.
    ///
    /// # Errors
    /// Bad settings (as [`with_client`](Self::with_client)); no kubeconfig and not in a
    /// cluster; a kubeconfig that cannot be read or lacks the context; a client that cannot
    /// be built.
    pub async fn new(config: &KubernetesSourceConfig) -> Result<KubernetesSource, String> {
        check(config)?;
        let mut kube_config = match &config.context {
            Some(context) => {
                let options = kube::config::KubeConfigOptions {
                    context: Some(context.clone()),
                    ..Default::default()
                };
                kube::Config::from_kubeconfig(&options)
                    .await
                    .map_err(|e| format!("kubeconfig context `{context}`: {e}"))?
            }
            None => kube::Config::infer()
                .await
                .map_err(|e| format!("no Kubernetes client configuration: {e}"))?,
        };
        kube_config.read_timeout = Some(config.idle_timeout + KUBE_IDLE_MARGIN);
        // The read timeout counts from the request, not from when a pooled connection idled.
        kube_config.reset_reader_on_write = true;
        let client = Client::try_from(kube_config)
            .map_err(|e| format!("cannot build the Kubernetes client: {e}"))?;
        Self::with_client(client, config)
    }

    /// A source as configured that talks through `client` (its default namespace is used when
    /// the configuration names none). Give the client a read timeout above the idle timeout
    /// (`kube::Config::read_timeout`), or a list that is never answered waits forever.
    ///
    /// # Errors
    /// A Service name that is not a DNS label, a bad scheme, a resync under 1 s or an idle
    /// timeout under 6 s.
    pub fn with_client(
        client: Client,
        config: &KubernetesSourceConfig,
    ) -> Result<KubernetesSource, String> {
        check(config)?;
        let namespace = config
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        let local_zone = config.local_zone.clone().or_else(|| {
            std::env::var(LOCAL_ZONE_VAR)
                .ok()
                .filter(|z| !z.trim().is_empty())
        });
        Ok(KubernetesSource {
            client,
            namespace,
            service: config.service.clone(),
            rules: MappingRules {
                port_name: config.port_name.clone().filter(|p| !p.is_empty()),
                scheme: config.scheme.clone(),
                local_zone,
            },
            resync: config.resync,
            idle_timeout: config.idle_timeout,
            refresh: RefreshBounds::default(),
        })
    }

    /// Sets the retry bounds after an error (backoff from `min` up to `max`).
    #[must_use]
    pub fn refresh(mut self, refresh: RefreshBounds) -> Self {
        self.refresh = refresh;
        self
    }

    /// The namespace it reads.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Starts listing and watching on the current tokio runtime, publishing through
    /// `publisher`, until the returned task is dropped or stopped.
    ///
    /// # Panics
    /// Outside a tokio runtime, as `tokio::spawn` does.
    pub fn start(self, publisher: Publisher) -> SourceTask {
        let cancel = CancellationToken::new();
        let task = tokio::spawn(self.run(publisher, cancel.clone()));
        SourceTask::new(cancel, task)
    }

    /// Checks settings as the constructors do, without building a client.
    pub(crate) fn check(config: &KubernetesSourceConfig) -> Result<(), String> {
        check(config)
    }

    /// Builds the client from `config` as [`new`](Self::new) does and then runs as
    /// [`start`](Self::start) does, on the current tokio runtime: what a configuration's
    /// `Type: Kubernetes` starts. A client that cannot be built yet (no kubeconfig, a context
    /// it lacks) is the source's failure, shown in its status and retried with backoff, so a
    /// kubeconfig that appears later is picked up.
    pub(crate) fn start_from_config(
        config: KubernetesSourceConfig,
        refresh: RefreshBounds,
        publisher: Publisher,
    ) -> SourceTask {
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let task = tokio::spawn(async move {
            let mut backoff = Backoff::new(refresh);
            let source = loop {
                let built = tokio::select! {
                    () = stop.cancelled() => return,
                    built = KubernetesSource::new(&config) => built,
                };
                match built {
                    Ok(source) => break source.refresh(refresh),
                    Err(why) => {
                        let _ = publisher.failed(&why);
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = tokio::time::sleep(backoff.failed()) => {}
                        }
                    }
                }
            };
            source.run(publisher, stop).await;
        });
        SourceTask::new(cancel, task)
    }

    fn watcher_config(&self) -> watcher::Config {
        let seconds = self
            .idle_timeout
            .saturating_sub(KUBE_IDLE_MARGIN)
            .as_secs()
            .max(1);
        watcher::Config::default()
            .labels(&format!("{SERVICE_NAME_LABEL}={}", self.service))
            .timeout(u32::try_from(seconds).unwrap_or(u32::MAX))
    }

    async fn run(self, publisher: Publisher, cancel: CancellationToken) {
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), &self.namespace);
        let config = self.watcher_config();
        let mut backoff = Backoff::new(self.refresh);
        let mut set = SliceSet::new(self.rules.clone());
        // Lists in a row that ended in 410 Expired: the first is normal, more are a failure.
        let mut gone_in_a_row = 0u32;
        loop {
            let mut events = watcher(api.clone(), config.clone()).boxed();
            let resync = tokio::time::sleep(self.resync.mul_f64(1.0 + 0.1 * rand::random::<f64>()));
            tokio::pin!(resync);
            let mut publish_at: Option<Instant> = None;
            let end = loop {
                let due = publish_at;
                let coalesced = async move {
                    match due {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                let event = tokio::select! {
                    () = cancel.cancelled() => return,
                    () = &mut resync => break End::Resync,
                    () = coalesced => {
                        publish_at = None;
                        set.publish(&publisher);
                        continue;
                    }
                    event = events.next() => event,
                };
                match event {
                    None => break End::Failed("the watch ended".into()),
                    Some(Err(e)) if is_gone(&e) && gone_in_a_row == 0 => {
                        gone_in_a_row += 1;
                        break End::Gone(e.to_string());
                    }
                    Some(Err(e)) => break End::Failed(e.to_string()),
                    Some(Ok(event)) => match set.apply(event) {
                        Applied::Nothing => {}
                        Applied::Listed => {
                            gone_in_a_row = 0;
                            backoff.succeeded(None);
                            publish_at = None;
                            set.publish(&publisher);
                        }
                        Applied::Changed => {
                            publish_at.get_or_insert_with(|| Instant::now() + COALESCE);
                        }
                    },
                }
            };
            if publish_at.is_some() {
                set.publish(&publisher);
            }
            let delay = match end {
                End::Resync => {
                    tracing::debug!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "listing the EndpointSlices again (resync)");
                    continue;
                }
                End::Gone(why) => {
                    tracing::debug!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "listing the EndpointSlices again: {why}");
                    continue;
                }
                End::Failed(why) => {
                    set.failed(&publisher, &format!("Kubernetes watch: {why}"));
                    backoff.failed()
                }
            };
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }
}

/// Checks what the constructors need.
fn check(config: &KubernetesSourceConfig) -> Result<(), String> {
    let service = config.service.as_str();
    let label = service.len() <= 63
        && service.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && service.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && service
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !label {
        return Err(format!(
            "Kubernetes Service name `{service}` is not a DNS label (lower-case letters, digits and `-`, at most 63)"
        ));
    }
    if let Some(namespace) = config.namespace.as_deref() {
        if namespace.is_empty() || namespace.contains('/') {
            return Err(format!(
                "Kubernetes namespace `{namespace}` is not a namespace name"
            ));
        }
    }
    if !matches!(config.scheme.as_str(), "http" | "https") {
        return Err(format!("Scheme `{}` is not http or https", config.scheme));
    }
    if config.resync < Duration::from_secs(1) {
        return Err("Resync must be at least 1 s".into());
    }
    if config.idle_timeout < KUBE_IDLE_MARGIN + Duration::from_secs(1) {
        return Err("IdleTimeout must be at least 6 s".into());
    }
    Ok(())
}

/// History the server no longer has (410 Expired or Gone), however it was said.
fn is_gone(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code == 410,
        _ => false,
    }
}

/// Why a watcher was replaced.
enum End {
    /// Time for a fresh list.
    Resync,
    /// The server's history is gone: list again at once.
    Gone(String),
    /// Anything else: stale, back off, list again.
    Failed(String),
}

/// What an event did to the set.
enum Applied {
    Nothing,
    /// A list completed: the set was replaced.
    Listed,
    /// A slice changed or left.
    Changed,
}

/// The slices of the Service as last seen, and what was last published from them.
struct SliceSet {
    rules: MappingRules,
    live: BTreeMap<String, EndpointSlice>,
    /// The slices of a list in progress (`Init` … `InitDone`).
    listing: Option<BTreeMap<String, EndpointSlice>>,
    published: Option<Vec<Endpoint>>,
    /// Whether the source was marked failed since it last published.
    stale: bool,
}

impl SliceSet {
    fn new(rules: MappingRules) -> SliceSet {
        SliceSet {
            rules,
            live: BTreeMap::new(),
            listing: None,
            published: None,
            stale: false,
        }
    }

    fn apply(&mut self, event: Event<EndpointSlice>) -> Applied {
        let name = |slice: &EndpointSlice| slice.metadata.name.clone().unwrap_or_default();
        match event {
            // A list starts (again): what an earlier, unfinished one collected is thrown away.
            Event::Init => {
                self.listing = Some(BTreeMap::new());
                Applied::Nothing
            }
            Event::InitApply(slice) => {
                self.listing
                    .get_or_insert_with(BTreeMap::new)
                    .insert(name(&slice), slice);
                Applied::Nothing
            }
            Event::InitDone => {
                self.live = self.listing.take().unwrap_or_default();
                Applied::Listed
            }
            Event::Apply(slice) => {
                let key = name(&slice);
                if self.live.get(&key) == Some(&slice) {
                    return Applied::Nothing;
                }
                self.live.insert(key, slice);
                Applied::Changed
            }
            Event::Delete(slice) => match self.live.remove(&name(&slice)) {
                Some(_) => Applied::Changed,
                None => Applied::Nothing,
            },
        }
    }

    /// Publishes the set when it changed (or to say the source answers again); slices that
    /// cannot be read are reported as a failure beside it.
    fn publish(&mut self, publisher: &Publisher) {
        let (endpoints, errors) = merge(self.live.values(), &self.rules);
        let has_endpoints = self.live.values().any(|s| !is_empty_slice(s));
        if !errors.is_empty() && endpoints.is_empty() && has_endpoints {
            // Nothing readable although there is something: keep the last good set.
            self.failed(publisher, &describe(&errors));
            return;
        }
        if self.stale || self.published.as_ref() != Some(&endpoints) {
            match publisher.publish(endpoints.clone()) {
                Ok(()) => {
                    self.published = Some(endpoints);
                    self.stale = false;
                }
                Err(e) => {
                    tracing::debug!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "Kubernetes set not published: {e}");
                }
            }
        }
        if !errors.is_empty() {
            self.failed(publisher, &describe(&errors));
        }
    }

    fn failed(&mut self, publisher: &Publisher, why: &str) {
        tracing::warn!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "{why}");
        self.stale = true;
        let _ = publisher.failed(why);
    }
}

/// The first problems, and how many more.
fn describe(errors: &[SliceError]) -> String {
    let mut text: Vec<String> = errors.iter().take(3).map(ToString::to_string).collect();
    if errors.len() > 3 {
        text.push(format!("and {} more", errors.len() - 3));
    }
    text.join("; ")
}

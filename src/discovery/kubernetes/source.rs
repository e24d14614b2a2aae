//! The Kubernetes source: the EndpointSlices of one Service (label
//! `kubernetes.io/service-name=<service>`), listed and then watched through kube's client,
//! published as one full set after every change. The watch's response is read here, line by
//! line, rather than through kube's event stream, which skips a line it cannot decode: a line
//! cut short by a broken proxy could be the `DELETED` of a slice, and must not go unnoticed.
//!
//! - **A list replaces everything.** The slices are listed (page by page), then watched from
//!   the list's resource version; a list replaces the whole set, so a slice deleted while no
//!   watch was following — which no `DELETED` event will ever announce — leaves with the list
//!   that no longer has it.
//! - **Resumes and re-lists.** A watch the server ends, or one silent for 5 s past its
//!   `timeoutSeconds` (a connection that died without a word), is resumed from the last
//!   resource version seen (events and bookmarks move it on). History that is gone (410
//!   Expired) under a watch that was following means a new list at once. Every `Resync` the
//!   watch is replaced by a new list anyway.
//! - **Failures.** A failed list or watch request marks the source stale (the last good set
//!   stays), backs off from `MinRefresh` to `MaxRefresh` with jitter and lists again; a list
//!   that succeeds makes it well again. A line of the watch that is not an event, or a 410 on a
//!   watch that said nothing since its list (twice in a row: an API server or proxy that says
//!   so to every watch), is a failure of the watch: the source is stale at once (at the second
//!   410), backs off, lists again, and applies what the lists say, but it is well again only
//!   once a watch says something (an event or a bookmark).
//! - **Never a hot loop.** Whatever the server answers, lists start at least `MinRefresh`
//!   apart, and so do watches (a list and its first watch go together); a watch that ends at
//!   once without a word, twice in a row, is a failure.
//! - **Idle watches.** The watch asks the server to end it after `IdleTimeout` less 5 s; a
//!   list or a watch request that is not answered within `IdleTimeout` is a failure.
//! - **Coalescing.** Changes that arrive within 50 ms of each other are published together:
//!   the slice controller writes the slices of one update one after another, and an endpoint
//!   that moves from one slice to another must not leave (and lose its health) in between.
//! - A Service without slices is an empty set (the update guard decides about it); slices that
//!   cannot be read (`slices.rs`) are left out and reported in the source's status.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use futures::io::{AsyncBufRead, AsyncBufReadExt};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::slices::{is_empty_slice, merge, MappingRules, SliceError};
use crate::config::discovery::{RefreshBounds, LOCAL_ZONE_VAR};
use crate::config::source_kubernetes::KubernetesSourceConfig;
use crate::destination::endpoint::Endpoint;
use crate::discovery::admit::admitted;
use crate::discovery::driver::{Backoff, Pacer, SourceTask};
use crate::engine::publisher::Publisher;
use crate::uri::shown;

/// The label the EndpointSlice controller puts on every slice of a Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// kube gives up on a watch this long after its `timeoutSeconds` without a line (fixed in kube).
const KUBE_IDLE_MARGIN: Duration = Duration::from_secs(5);

/// Changes this close together are published as one.
const COALESCE: Duration = Duration::from_millis(50);

/// EndpointSlices asked for per page of a list.
const LIST_PAGE: u32 = 500;

/// A list of more pages than this is refused (a server that hands out continue tokens forever).
const MAX_LIST_PAGES: usize = 1000;

/// The longest line of a watch response: one EndpointSlice (etcd stores objects of at most
/// 1.5 MiB) with room to spare.
const MAX_LINE: usize = 8 << 20;

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

    /// How long a watch may say nothing before it is given up and resumed: the server ends
    /// it after `timeoutSeconds` (the idle timeout less 5 s), so a silence 5 s longer is a
    /// connection that died without a word.
    fn silence_limit(&self) -> Duration {
        Duration::from_secs(u64::from(self.watch_seconds())) + KUBE_IDLE_MARGIN
    }

    /// The watch's `timeoutSeconds`: the idle timeout less 5 s, at least 1.
    fn watch_seconds(&self) -> u32 {
        let seconds = self
            .idle_timeout
            .saturating_sub(KUBE_IDLE_MARGIN)
            .as_secs()
            .max(1);
        u32::try_from(seconds).unwrap_or(u32::MAX)
    }

    fn selector(&self) -> String {
        format!("{SERVICE_NAME_LABEL}={}", self.service)
    }

    async fn run(self, publisher: Publisher, cancel: CancellationToken) {
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), &self.namespace);
        let mut backoff = Backoff::new(self.refresh);
        let mut set = SliceSet::new(self.rules.clone());
        // 410s in a row on watches that said nothing since their list.
        let mut gone_in_a_row = 0u32;
        // However the server answers, requests start at least the shortest delay apart.
        let mut pacer = Pacer::new(self.refresh.min);
        // Whether the last watch held for the shortest delay (or there was none yet).
        let mut held = true;
        loop {
            if !pacer.wait(&cancel).await {
                return;
            }
            pacer.started();
            let listed = tokio::select! {
                () = cancel.cancelled() => return,
                listed = tokio::time::timeout(self.silence_limit(), self.list(&api)) => listed,
            };
            let version = match listed {
                Ok(Ok((slices, version))) => {
                    set.listed(slices);
                    set.publish(&publisher);
                    if held {
                        // A list and its first watch go together.
                        pacer.free_next();
                    }
                    version
                }
                Ok(Err(why)) => {
                    set.failed(&publisher, &format!("Kubernetes list: {why}"));
                    if !pause(&cancel, backoff.failed()).await {
                        return;
                    }
                    continue;
                }
                Err(_) => {
                    set.failed(
                        &publisher,
                        &format!(
                            "Kubernetes list: no answer within {} s",
                            self.silence_limit().as_secs()
                        ),
                    );
                    if !pause(&cancel, backoff.failed()).await {
                        return;
                    }
                    continue;
                }
            };
            let resync_at = Instant::now() + self.resync.mul_f64(1.0 + 0.1 * rand::random::<f64>());
            let following = Following {
                set: &mut set,
                publisher: &publisher,
                backoff: &mut backoff,
                pacer: &mut pacer,
                cancel: &cancel,
            };
            let Some(Followed {
                end,
                delivered,
                held: watch_held,
            }) = self.follow(&api, version, resync_at, following).await
            else {
                return;
            };
            held = watch_held;
            if delivered {
                gone_in_a_row = 0;
            }
            let delay = match end {
                End::Resync => {
                    tracing::debug!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "listing the EndpointSlices again (resync)");
                    continue;
                }
                // History compacted under a watch that was following: list again.
                End::Gone if delivered => {
                    tracing::debug!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "listing the EndpointSlices again: the watch's history is gone (410)");
                    continue;
                }
                // A watch that said nothing since its list learnt only that the history is
                // gone: an API server (or a proxy) that says so to every watch would otherwise
                // be listed and watched in a loop.
                End::Gone => {
                    gone_in_a_row += 1;
                    if gone_in_a_row >= 2 {
                        set.watch_failed(
                            &publisher,
                            &format!("Kubernetes watch: the history is gone (410 Expired) {gone_in_a_row} times in a row, each time before the watch said anything since its list"),
                        );
                    }
                    backoff.failed()
                }
                End::Broken(why) => {
                    set.watch_failed(&publisher, &format!("Kubernetes watch: {why}"));
                    backoff.failed()
                }
                End::Failed(why) => {
                    set.failed(&publisher, &format!("Kubernetes watch: {why}"));
                    backoff.failed()
                }
            };
            if !pause(&cancel, delay).await {
                return;
            }
        }
    }

    /// Lists the slices of the Service, page by page; returns them and the list's resource
    /// version.
    async fn list(&self, api: &Api<EndpointSlice>) -> Result<(Vec<EndpointSlice>, String), String> {
        let selector = self.selector();
        let mut slices = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_LIST_PAGES {
            let mut params = ListParams::default().labels(&selector).limit(LIST_PAGE);
            if let Some(token) = token.take() {
                params = params.continue_token(&token);
            }
            let page = api.list(&params).await.map_err(|e| e.to_string())?;
            slices.extend(page.items);
            match page.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(next) => token = Some(next),
                None => {
                    let version = page.metadata.resource_version.unwrap_or_default();
                    return Ok((slices, version));
                }
            }
        }
        Err(format!(
            "more than {MAX_LIST_PAGES} pages of {LIST_PAGE} EndpointSlices"
        ))
    }

    /// Opens a watch from resource version `version`: the response's lines, as they come.
    async fn open_watch(
        &self,
        api: &Api<EndpointSlice>,
        version: &str,
    ) -> Result<Lines, kube::Error> {
        let params = WatchParams::default()
            .labels(&self.selector())
            .timeout(self.watch_seconds());
        let mut request = kube::core::Request::new(api.resource_url())
            .watch(&params, version)
            .map_err(kube::Error::BuildRequest)?;
        // One event a line, uncompressed (as kube asks for its own watches).
        request.headers_mut().insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("identity"),
        );
        let body = self.client.request_stream(request).await?;
        Ok(Lines::new(Box::pin(body)))
    }

    /// Watches from the list's resource version until it is time for a new list: resumes a
    /// watch the server ends, or one that fell silent, from the last resource version seen
    /// (events and bookmarks move it on), and publishes changes (coalesced). `None`: cancelled.
    async fn follow(
        &self,
        api: &Api<EndpointSlice>,
        mut version: String,
        resync_at: Instant,
        following: Following<'_>,
    ) -> Option<Followed> {
        let Following {
            set,
            publisher,
            backoff,
            pacer,
            cancel,
        } = following;
        let mut delivered = false;
        let mut publish_at: Option<Instant> = None;
        // Watches in a row that ended at once without a word.
        let mut hasty_ends = 0u32;
        let mut started = Instant::now();
        let end = 'watches: loop {
            if let Some(at) = pacer.next_at() {
                tokio::select! {
                    () = cancel.cancelled() => return None,
                    () = tokio::time::sleep_until(resync_at) => break End::Resync,
                    () = tokio::time::sleep_until(at) => {}
                }
            }
            pacer.started();
            started = Instant::now();
            let opened = tokio::select! {
                () = cancel.cancelled() => return None,
                () = tokio::time::sleep_until(resync_at) => break End::Resync,
                opened = tokio::time::timeout(self.silence_limit(), self.open_watch(api, &version)) => opened,
            };
            let mut lines = match opened {
                Ok(Ok(lines)) => lines,
                Ok(Err(e)) if is_gone(&e) => break End::Gone,
                Ok(Err(e)) => break End::Failed(e.to_string()),
                Err(_) => {
                    break End::Failed(format!(
                        "no answer to a watch within {} s",
                        self.silence_limit().as_secs()
                    ))
                }
            };
            let mut said_something = false;
            loop {
                let due = publish_at;
                let coalesced = async move {
                    match due {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                let read = tokio::select! {
                    () = cancel.cancelled() => return None,
                    () = tokio::time::sleep_until(resync_at) => break 'watches End::Resync,
                    () = coalesced => {
                        publish_at = None;
                        set.publish(publisher);
                        continue;
                    }
                    read = tokio::time::timeout(self.silence_limit(), lines.next()) => read,
                };
                let line = match read {
                    Ok(Ok(Some(line))) => line,
                    // The server ended the watch, or the connection went: resume. One that ends
                    // at once without a word, twice in a row, is a failure.
                    Ok(result) => {
                        if said_something || started.elapsed() >= self.refresh.min {
                            hasty_ends = 0;
                        } else {
                            hasty_ends += 1;
                        }
                        if hasty_ends >= 2 {
                            let why = match result {
                                Err(e) => format!("the watch fails at once without a word: {e}"),
                                Ok(_) => "the watch ends at once without a word".to_string(),
                            };
                            break 'watches End::Failed(why);
                        }
                        continue 'watches;
                    }
                    // Silent past the server's own timeout: a dead connection. Resume.
                    Err(_) => {
                        tracing::debug!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "the watch fell silent; watching again");
                        continue 'watches;
                    }
                };
                let event = match decode(&line) {
                    Decoded::Blank => continue,
                    Decoded::Broken(why) => break 'watches End::Broken(why),
                    Decoded::Event(event) => event,
                };
                let change = match *event {
                    WatchEvent::Added(slice) | WatchEvent::Modified(slice) => {
                        version_of(&slice, &mut version);
                        set.apply(Change::Apply(slice))
                    }
                    WatchEvent::Deleted(slice) => {
                        version_of(&slice, &mut version);
                        set.apply(Change::Delete(slice))
                    }
                    WatchEvent::Bookmark(bookmark) => {
                        if !bookmark.metadata.resource_version.is_empty() {
                            version = bookmark.metadata.resource_version;
                        }
                        false
                    }
                    WatchEvent::Error(status) if status.code == 410 => break 'watches End::Gone,
                    WatchEvent::Error(status) => {
                        break 'watches End::Failed(format!("{} ({})", status.message, status.code))
                    }
                };
                said_something = true;
                hasty_ends = 0;
                if !delivered {
                    delivered = true;
                    backoff.succeeded(None);
                }
                // The watch works: a source stale because of its watches is well again.
                set.watch_works(publisher);
                if change {
                    publish_at.get_or_insert_with(|| Instant::now() + COALESCE);
                }
            }
        };
        if publish_at.is_some() {
            set.publish(publisher);
        }
        let held = started.elapsed() >= pacer.min();
        Some(Followed {
            end,
            delivered,
            held,
        })
    }
}

/// Sleeps `delay` unless cancelled first; `false` when cancelled.
async fn pause(cancel: &CancellationToken, delay: Duration) -> bool {
    tokio::select! {
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(delay) => true,
    }
}

/// Moves `version` on to a slice's resource version (kept when the slice has none).
fn version_of(slice: &EndpointSlice, version: &mut String) {
    if let Some(v) = slice
        .metadata
        .resource_version
        .as_ref()
        .filter(|v| !v.is_empty())
    {
        version.clone_from(v);
    }
}

/// What a line of a watch response is.
enum Decoded {
    /// Nothing (a keep-alive newline).
    Blank,
    Event(Box<WatchEvent<EndpointSlice>>),
    /// Not an event: a truncated line, or not JSON of a watch event at all.
    Broken(String),
}

/// Reads one line of a watch response. Every line that is not blank must be an event: a line
/// that is not (a proxy that cut an event short) means the watch missed something, which only
/// a new list can make up for.
fn decode(line: &[u8]) -> Decoded {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Decoded::Blank;
    }
    match serde_json::from_slice::<WatchEvent<EndpointSlice>>(line) {
        Ok(event) => Decoded::Event(Box::new(event)),
        Err(e) => {
            let text = String::from_utf8_lossy(line);
            Decoded::Broken(format!(
                "a line of the watch is not an event ({e}): {}",
                shown(text.trim())
            ))
        }
    }
}

/// The lines of a watch response, each read whole (at most [`MAX_LINE`] bytes).
struct Lines {
    reader: Pin<Box<dyn AsyncBufRead + Send>>,
    line: Vec<u8>,
}

impl Lines {
    fn new(reader: Pin<Box<dyn AsyncBufRead + Send>>) -> Lines {
        Lines {
            reader,
            line: Vec::new(),
        }
    }

    /// The next line, without its newline; `None` at the end of the response. A last line
    /// without its newline is dropped (the connection went mid-event: the watch resumes from
    /// the event before it, which the server sends again). Cancel-safe: what was read of a line
    /// stays for the next call.
    async fn next(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        loop {
            let (complete, used) = {
                let available = self.reader.fill_buf().await?;
                if available.is_empty() {
                    self.line.clear();
                    return Ok(None);
                }
                match available.iter().position(|&b| b == b'\n') {
                    Some(at) => {
                        self.line.extend_from_slice(&available[..at]);
                        (true, at + 1)
                    }
                    None => {
                        self.line.extend_from_slice(available);
                        (false, available.len())
                    }
                }
            };
            self.reader.consume_unpin(used);
            if complete {
                return Ok(Some(std::mem::take(&mut self.line)));
            }
            if self.line.len() > MAX_LINE {
                self.line.clear();
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("a line of the watch is longer than {MAX_LINE} bytes"),
                ));
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

/// History the server no longer has (410 Expired or Gone), answered to the watch request.
fn is_gone(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 410)
}

/// Why a watch ended for good (a new list follows).
enum End {
    /// Time for a fresh list.
    Resync,
    /// The server's history is gone (410).
    Gone,
    /// A line that is not an event: the watch may have missed one.
    Broken(String),
    /// Anything else: stale, back off, list again.
    Failed(String),
}

/// How following a list ended.
struct Followed {
    end: End,
    /// Whether a watch said something (an event or a bookmark) since the list.
    delivered: bool,
    /// Whether the last watch held for the shortest refresh delay.
    held: bool,
}

/// What following a list works with.
struct Following<'a> {
    set: &'a mut SliceSet,
    publisher: &'a Publisher,
    backoff: &'a mut Backoff,
    pacer: &'a mut Pacer,
    cancel: &'a CancellationToken,
}

/// A change a watch reported.
enum Change {
    Apply(EndpointSlice),
    Delete(EndpointSlice),
}

/// The slices of the Service as last seen, and what was last published from them.
struct SliceSet {
    rules: MappingRules,
    live: BTreeMap<String, EndpointSlice>,
    published: Option<Vec<Endpoint>>,
    /// Whether the source was marked failed since it last published.
    stale: bool,
    /// Whether it is failed because its watches do not work (lists do): then a list's set
    /// applies but the source stays stale until a watch says something.
    watch_broken: bool,
}

impl SliceSet {
    fn new(rules: MappingRules) -> SliceSet {
        SliceSet {
            rules,
            live: BTreeMap::new(),
            published: None,
            stale: false,
            watch_broken: false,
        }
    }

    /// A list completed: its slices replace every slice known, so a slice deleted while no
    /// watch was following (which no `DELETED` event will ever announce) leaves.
    fn listed(&mut self, slices: Vec<EndpointSlice>) {
        self.live = slices.into_iter().map(|s| (name(&s), s)).collect();
    }

    /// A watch event; whether it changed the set.
    fn apply(&mut self, change: Change) -> bool {
        match change {
            Change::Apply(slice) => {
                let key = name(&slice);
                if self.live.get(&key) == Some(&slice) {
                    return false;
                }
                self.live.insert(key, slice);
                true
            }
            Change::Delete(slice) => self.live.remove(&name(&slice)).is_some(),
        }
    }

    /// Publishes the set when it changed (or to say the source answers again); slices that
    /// cannot be read are reported as a failure beside it.
    fn publish(&mut self, publisher: &Publisher) {
        let (endpoints, errors) = merge(self.live.values(), &self.rules);
        let endpoints = admitted(publisher, endpoints);
        let has_endpoints = self.live.values().any(|s| !is_empty_slice(s));
        if !errors.is_empty() && endpoints.is_empty() && has_endpoints {
            // Nothing readable although there is something: keep the last good set.
            self.failed(publisher, &describe(&errors));
            return;
        }
        if self.stale || self.published.as_ref() != Some(&endpoints) {
            let published = if self.watch_broken {
                publisher.publish_keeping_stale(endpoints.clone())
            } else {
                publisher.publish(endpoints.clone())
            };
            match published {
                Ok(()) => {
                    self.published = Some(endpoints);
                    self.stale = self.watch_broken;
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

    /// The watches do not work: stale until one says something.
    fn watch_failed(&mut self, publisher: &Publisher, why: &str) {
        self.watch_broken = true;
        self.failed(publisher, why);
    }

    /// A watch said something: a source stale because of its watches is well again.
    fn watch_works(&mut self, publisher: &Publisher) {
        if self.watch_broken {
            self.watch_broken = false;
            self.publish(publisher);
        }
    }
}

/// A slice's name.
fn name(slice: &EndpointSlice) -> String {
    slice.metadata.name.clone().unwrap_or_default()
}

/// The first problems, and how many more.
fn describe(errors: &[SliceError]) -> String {
    let mut text: Vec<String> = errors.iter().take(3).map(ToString::to_string).collect();
    if errors.len() > 3 {
        text.push(format!("and {} more", errors.len() - 3));
    }
    text.join("; ")
}

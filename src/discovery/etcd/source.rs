//! The etcd source: every key under a prefix is one destination. It reads the whole
//! prefix once (`kv/range`, which gives the revision of that view), publishes it, then watches
//! the prefix from the next revision and publishes the full set again after every change —
//! one publication per etcd revision, so deleting the whole prefix at once reaches the update
//! guard as one change. A watch that ends resumes from the revision after the last one seen;
//! when etcd cannot be reached the last good set stays (the source is stale) and it retries
//! with backoff. When etcd has compacted its history past that revision (or the store went
//! back), the prefix is read again; when that happens again before a watch said anything, twice
//! in a row, the source is stale (what the reads say still applies) until a watch says
//! something. It is also read again every `MaxRefresh`, so a watch that went silent without an
//! error cannot leave the set behind for long. Whatever etcd answers, reads and watches start
//! at least `MinRefresh` apart (a read and its first watch go together), and a watch that ends
//! at once without a word, twice in a row, is a failure: the source never spins.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::gateway::{EventType, Gateway, KeyValue};
use super::value::parse_value;
use crate::config::discovery::RefreshBounds;
use crate::config::source_etcd::EtcdSourceConfig;
use crate::destination::endpoint::Endpoint;
use crate::discovery::admit::admitted;
use crate::discovery::driver::{refresh_span, Backoff, Pacer, SourceTask};
use crate::engine::publisher::Publisher;
use crate::ids::fold_case;

/// A source of a cluster's destinations from the keys under an etcd prefix.
///
/// ```no_run
/// # async fn run(engine: healthpick::Engine) -> Result<(), Box<dyn std::error::Error>> {
/// use healthpick::config::EtcdSourceConfig;
/// use healthpick::discovery::etcd::EtcdSource;
/// use healthpick::discovery::SourceSpec;
///
/// let config = EtcdSourceConfig::new(vec!["http://127.0.0.1:2379".parse()?], "/services/payments/");
/// let publisher = engine.publisher("payments", SourceSpec::new("etcd").kind("etcd"))?;
/// let task = EtcdSource::new(&config)?.start(publisher);
/// engine.ready().await; // the prefix was read once
/// # drop(task); Ok(()) }
/// ```
#[derive(Debug)]
pub struct EtcdSource {
    gateway: Arc<Gateway>,
    prefix: String,
    refresh: RefreshBounds,
}

impl EtcdSource {
    /// A source of the keys under the configured prefix, with the default refresh bounds
    /// (retries from 5 s up to 5 min, the prefix read again every 5 min).
    ///
    /// # Errors
    /// No endpoint, an empty prefix, or a client that cannot be built.
    pub fn new(config: &EtcdSourceConfig) -> Result<EtcdSource, String> {
        if config.prefix.is_empty() {
            return Err("an etcd source needs a key prefix (`/services/payments/`)".into());
        }
        Ok(EtcdSource {
            gateway: Arc::new(Gateway::new(config.endpoints.clone(), config.timeout)?),
            prefix: config.prefix.clone(),
            refresh: RefreshBounds::default(),
        })
    }

    /// Sets the retry bounds (backoff from `min` up to `max`) and how often the whole prefix is
    /// read again (`max`).
    #[must_use]
    pub fn refresh(mut self, refresh: RefreshBounds) -> Self {
        self.refresh = refresh;
        self
    }

    /// Starts reading and watching on the current tokio runtime, publishing through
    /// `publisher`, until the returned task is dropped or stopped.
    ///
    /// # Panics
    /// Outside a tokio runtime, as `tokio::spawn` does.
    pub fn start(self, publisher: Publisher) -> SourceTask {
        let cancel = CancellationToken::new();
        let task = tokio::spawn(self.run(publisher, cancel.clone()));
        SourceTask::new(cancel, task)
    }

    async fn run(self, publisher: Publisher, cancel: CancellationToken) {
        let mut backoff = Backoff::new(self.refresh);
        let mut keys = Keys::new(&self.prefix);
        // However etcd answers, requests start at least the shortest delay apart.
        let mut pacer = Pacer::new(self.refresh.min);
        // Whether the last watch held for the shortest delay (or there was none yet).
        let mut held = true;
        // Reads of the prefix in a row whose watch had to read it again before it said
        // anything (history compacted, or a store behind what was read, every time).
        let mut relists_in_a_row = 0u32;
        loop {
            if !pacer.wait(&cancel).await {
                return;
            }
            pacer.started();
            let span = refresh_span(&publisher);
            let listed = tokio::select! {
                () = cancel.cancelled() => return,
                listed = self.gateway.range_prefix(self.prefix.as_bytes()).instrument(span.clone()) => listed,
            };
            let mut revision = match listed {
                Ok(range) => span.in_scope(|| {
                    keys.replace(range.kvs);
                    keys.publish(&publisher);
                    range.header.revision
                }),
                Err(e) => {
                    span.in_scope(|| {
                        let _ = publisher.failed(&e);
                    });
                    if pause(&cancel, backoff.failed()).await {
                        return;
                    }
                    continue;
                }
            };
            if held {
                // A read and its first watch go together.
                pacer.free_next();
            }
            if !keys.watch_broken {
                backoff.succeeded(None);
            }
            let resync = tokio::time::sleep(Backoff::new(self.refresh).succeeded(None));
            tokio::pin!(resync);
            // Watch from the next revision; a lost watch resumes where it was, keeping the
            // last good set, until the prefix must be read again.
            let mut failed = false;
            let mut delivered = false;
            // Watches in a row that ended at once without a word.
            let mut hasty_ends = 0u32;
            loop {
                if let Some(at) = pacer.next_at() {
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = &mut resync => break,
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                pacer.started();
                let started = tokio::time::Instant::now();
                let said_before = delivered;
                let watch = Watch {
                    publisher: &publisher,
                    keys: &mut keys,
                    revision: &mut revision,
                    failed: &mut failed,
                    delivered: &mut delivered,
                };
                let end = tokio::select! {
                    () = cancel.cancelled() => return,
                    () = &mut resync => {
                        held = started.elapsed() >= pacer.min();
                        break;
                    }
                    end = self.watch(watch) => end,
                };
                held = started.elapsed() >= pacer.min();
                if delivered {
                    relists_in_a_row = 0;
                }
                match end {
                    WatchEnd::Relist(why) if delivered => {
                        tracing::debug!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "reading the etcd prefix again: {why}");
                        break;
                    }
                    WatchEnd::Relist(why) => {
                        relists_in_a_row += 1;
                        if relists_in_a_row >= 2 {
                            keys.watch_broken = true;
                            let _ = publisher.failed(format_args!(
                                "etcd watch: {why} ({relists_in_a_row} times in a row, each time before the watch said anything since the prefix was read)"
                            ));
                        }
                        if pause(&cancel, backoff.failed()).await {
                            return;
                        }
                        break;
                    }
                    WatchEnd::Lost { why, progressed } => {
                        tracing::debug!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "etcd watch lost: {why}");
                        let said = delivered && !said_before;
                        if said || started.elapsed() >= pacer.min() {
                            hasty_ends = 0;
                        } else if progressed {
                            hasty_ends += 1;
                        }
                        if progressed && hasty_ends < 2 {
                            // It ran: resume (a restart, a balancer closing it).
                            backoff.succeeded(None);
                            continue;
                        }
                        failed = true;
                        let why = if progressed {
                            format!("the watch ends at once without a word: {why}")
                        } else {
                            why
                        };
                        let _ = publisher.failed(format_args!("etcd watch: {why}"));
                        if pause(&cancel, backoff.failed()).await {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Watches the prefix from `revision + 1`, publishing after every change and moving
    /// `revision` along, until the watch ends.
    async fn watch(&self, w: Watch<'_>) -> WatchEnd {
        let lost = |why: String, progressed| WatchEnd::Lost { why, progressed };
        let mut stream = match self
            .gateway
            .watch_prefix(self.prefix.as_bytes(), *w.revision + 1)
            .await
        {
            Ok(stream) => stream,
            Err(e) if e.is_compacted() => return WatchEnd::Relist(e.to_string()),
            Err(e) => return lost(e.to_string(), false),
        };
        let mut progressed = false;
        loop {
            let message = match stream.next().await {
                None => return lost("etcd ended the watch".into(), progressed),
                Some(Err(e)) => return lost(e.to_string(), progressed),
                Some(Ok(message)) => message,
            };
            if message.canceled {
                if message.compact_revision > 0 {
                    return WatchEnd::Relist(format!(
                        "etcd compacted its history to revision {}, past revision {}",
                        message.compact_revision,
                        *w.revision + 1
                    ));
                }
                return lost(
                    format!("etcd cancelled the watch: {}", message.cancel_reason),
                    progressed,
                );
            }
            if message.created {
                if message.header.revision < *w.revision {
                    // The store is behind what was read from it (restored from a backup, a
                    // new cluster at the same address): its history is another one.
                    return WatchEnd::Relist(format!(
                        "etcd is at revision {}, behind revision {} read before",
                        message.header.revision, *w.revision
                    ));
                }
                progressed = true;
                if std::mem::take(w.failed) {
                    // Answering again: the set in force is current (no longer stale, unless
                    // it is the watches that fail: see `Keys::watch_broken`).
                    w.keys.publish(w.publisher);
                }
                continue;
            }
            *w.delivered = true;
            if std::mem::take(&mut w.keys.watch_broken) {
                // The watch works again: so does the source.
                w.keys.publish(w.publisher);
            }
            if message.events.is_empty() {
                // A progress notification: everything up to its revision was seen.
                *w.revision = (*w.revision).max(message.header.revision);
                continue;
            }
            for event in message.events {
                *w.revision = (*w.revision).max(event.kv.mod_revision);
                match event.kind {
                    EventType::Put => w.keys.put(event.kv),
                    EventType::Delete => w.keys.delete(&event.kv.key),
                }
            }
            w.keys.publish(w.publisher);
        }
    }
}

/// What one watch works on.
struct Watch<'a> {
    publisher: &'a Publisher,
    keys: &'a mut Keys,
    /// The last revision seen.
    revision: &'a mut i64,
    /// Whether the source was marked failed since it last answered.
    failed: &'a mut bool,
    /// Whether a watch said something (events, a progress notification) since the prefix was
    /// read.
    delivered: &'a mut bool,
}

/// Why a watch ended.
enum WatchEnd {
    /// The prefix must be read again (history compacted, the store went back).
    Relist(String),
    /// The stream ended or failed; `progressed` when it had been created.
    Lost { why: String, progressed: bool },
}

/// Sleeps `delay` unless cancelled first; `true` when cancelled.
async fn pause(cancel: &CancellationToken, delay: Duration) -> bool {
    tokio::select! {
        () = cancel.cancelled() => true,
        () = tokio::time::sleep(delay) => false,
    }
}

/// The keys under the prefix as last seen, each with its destination.
struct Keys {
    prefix: String,
    entries: BTreeMap<Vec<u8>, Entry>,
    /// The source fails because its watches do (reads work): what a read says applies, but
    /// the source stays stale until a watch says something.
    watch_broken: bool,
}

/// One key: the revision its value was written at and the last good destination it held.
struct Entry {
    mod_revision: i64,
    endpoint: Option<Endpoint>,
}

impl Keys {
    fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.to_string(),
            entries: BTreeMap::new(),
            watch_broken: false,
        }
    }

    /// Replaces every key with a fresh read of the prefix. A key whose value has not changed
    /// since is not read again.
    fn replace(&mut self, kvs: Vec<KeyValue>) {
        let mut old = std::mem::take(&mut self.entries);
        for kv in kvs {
            match old.remove(&kv.key) {
                Some(entry) if entry.mod_revision == kv.mod_revision => {
                    self.entries.insert(kv.key, entry);
                }
                previous => {
                    let kept = previous.and_then(|e| e.endpoint);
                    self.insert(kv, kept);
                }
            }
        }
    }

    fn put(&mut self, kv: KeyValue) {
        let kept = self.entries.remove(&kv.key).and_then(|e| e.endpoint);
        self.insert(kv, kept);
    }

    fn delete(&mut self, key: &[u8]) {
        self.entries.remove(key);
    }

    /// Reads `kv`; a bad value keeps the destination the key held before (if any).
    fn insert(&mut self, kv: KeyValue, kept: Option<Endpoint>) {
        let key = String::from_utf8_lossy(&kv.key).into_owned();
        let id = key.strip_prefix(&self.prefix).unwrap_or(&key);
        let endpoint = match std::str::from_utf8(&kv.key) {
            Err(_) => Err(format!("etcd key `{key}` is not UTF-8")),
            Ok(_) => parse_value(&key, id, &kv.value).map_err(|e| e.to_string()),
        };
        let endpoint = match endpoint {
            Ok(endpoint) => Some(endpoint),
            Err(why) => {
                tracing::warn!(target: "healthpick", key = %key, "{why}; {}", if kept.is_some() { "it keeps its last good value" } else { "ignored" });
                kept
            }
        };
        self.entries.insert(
            kv.key,
            Entry {
                mod_revision: kv.mod_revision,
                endpoint,
            },
        );
    }

    /// The destinations, one per id (ids compare case-insensitively: of two keys that differ
    /// only in case, the first in key order wins).
    fn endpoints(&self) -> Vec<Endpoint> {
        let mut seen = std::collections::HashSet::new();
        self.entries
            .values()
            .filter_map(|e| e.endpoint.as_ref())
            .filter(|e| seen.insert(fold_case(e.key())))
            .cloned()
            .collect()
    }

    fn publish(&self, publisher: &Publisher) {
        let endpoints = admitted(publisher, self.endpoints());
        let published = if self.watch_broken {
            publisher.publish_keeping_stale(endpoints)
        } else {
            publisher.publish(endpoints)
        };
        if let Err(e) = published {
            tracing::debug!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "etcd set not published: {e}");
        }
    }
}

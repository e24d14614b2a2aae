//! The Consul source: the instances of a service from `/v1/health/service/<name>`,
//! kept current with blocking queries, per datacenter of a failover list (the first is tier 0).
//!
//! With a failover list of datacenters, a destination's key names its datacenter
//! (`eu-west/node/service-id`): node names are unique within a datacenter only.
//!
//! Blocking queries as Consul documents them: each query sends the `X-Consul-Index` of the
//! previous answer and waits up to `wait` for a change; an index that goes backwards is reset to
//! 0 (a read without an index), an index below 1 is taken as 1, and whatever the agent
//! answers (at once, without a change, with an index that keeps moving or goes back), a
//! datacenter's queries start at least the shortest refresh delay apart — the source never
//! spins. After a blocking query that waited, the next one is sent at once. The client's timeout is above `wait + wait/16` (the jitter Consul
//! adds). With stale reads, `X-Consul-LastContact` above the allowed staleness makes the answer a
//! failure. A failing datacenter keeps its last good set, and the source is stale until it
//! answers again.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use url::Url;

use super::entries::{key_part, parse_entries};
use crate::config::discovery::RefreshBounds;
use crate::config::source_consul::{ConsulSourceConfig, CONSUL_ADDRESS_VAR, CONSUL_TOKEN_VAR};
use crate::destination::endpoint::Endpoint;
use crate::discovery::admit::admitted;
use crate::discovery::driver::{refresh_span, Backoff, Pacer, SourceTask};
use crate::discovery::http::{describe, read_bounded};
use crate::engine::publisher::Publisher;

/// The largest answer read.
const MAX_ANSWER: usize = 64 << 20;

/// A source of a cluster's destinations from a Consul service.
///
/// ```no_run
/// # async fn run(engine: healthpick::Engine) -> Result<(), Box<dyn std::error::Error>> {
/// use healthpick::config::ConsulSourceConfig;
/// use healthpick::discovery::consul::ConsulSource;
/// use healthpick::discovery::SourceSpec;
///
/// let config = ConsulSourceConfig::new("payments")
///     .datacenters(vec!["eu-west".into(), "eu-central".into()]);
/// let publisher = engine.publisher("payments", SourceSpec::new("consul").kind("consul"))?;
/// let task = ConsulSource::new(&config)?.start(publisher);
/// engine.ready().await;
/// # drop(task); Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ConsulSource {
    http: reqwest::Client,
    url: Url,
    datacenters: Vec<Option<String>>,
    tag: Option<String>,
    token: Option<String>,
    wait: Duration,
    stale: Option<Duration>,
    scheme: String,
    timeout: Duration,
    refresh: RefreshBounds,
}

/// What one datacenter's query loop tells the source.
enum Update {
    Set(Vec<Endpoint>),
    Failed(String),
}

impl ConsulSource {
    /// A source as configured, with the default refresh bounds (retries from 5 s up to 5 min;
    /// no two queries of a datacenter start sooner than 5 s apart).
    ///
    /// # Errors
    /// An empty service name, an agent address that is not a URL, a bad scheme.
    pub fn new(config: &ConsulSourceConfig) -> Result<ConsulSource, String> {
        if config.service.trim().is_empty() {
            return Err("a Consul source needs the Service to read".into());
        }
        if !matches!(config.scheme.as_str(), "http" | "https") {
            return Err(format!("Scheme `{}` is not http or https", config.scheme));
        }
        let base = match &config.address {
            Some(address) => address.clone(),
            None => {
                let from_env = std::env::var(CONSUL_ADDRESS_VAR).ok();
                agent_url(from_env.as_deref().unwrap_or("127.0.0.1:8500"))?
            }
        };
        let mut url = base
            .join("v1/health/service/")
            .map_err(|e| format!("agent address `{base}`: {e}"))?;
        url.path_segments_mut()
            .map_err(|()| format!("agent address `{base}` cannot have a path"))?
            .pop_if_empty()
            .push(&config.service);
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(config.timeout)
            .build()
            .map_err(|e| format!("cannot build the Consul client: {e}"))?;
        let datacenters = if config.datacenters.is_empty() {
            vec![None]
        } else {
            config.datacenters.iter().cloned().map(Some).collect()
        };
        Ok(ConsulSource {
            http,
            url,
            datacenters,
            tag: config.tag.clone(),
            token: config.token.clone().or_else(|| {
                std::env::var(CONSUL_TOKEN_VAR)
                    .ok()
                    .filter(|t| !t.is_empty())
            }),
            wait: config
                .wait
                .clamp(Duration::from_secs(1), Duration::from_secs(600)),
            stale: config.stale,
            scheme: config.scheme.clone(),
            timeout: config.timeout,
            refresh: RefreshBounds::default(),
        })
    }

    /// Sets the retry bounds (backoff from `min` up to `max`); `min` is also the shortest time
    /// between the starts of two queries of a datacenter.
    #[must_use]
    pub fn refresh(mut self, refresh: RefreshBounds) -> Self {
        self.refresh = refresh;
        self
    }

    /// Starts the queries on the current tokio runtime, publishing through `publisher`, until
    /// the returned task is dropped or stopped.
    ///
    /// # Panics
    /// Outside a tokio runtime, as `tokio::spawn` does.
    pub fn start(self, publisher: Publisher) -> SourceTask {
        let cancel = CancellationToken::new();
        let task = tokio::spawn(self.run(publisher, cancel.clone()));
        SourceTask::new(cancel, task)
    }

    async fn run(self, publisher: Publisher, cancel: CancellationToken) {
        let (tx, mut rx) = mpsc::channel(16);
        let mut loops = JoinSet::new();
        let explicit_tiers = self.datacenters.len() > 1 || self.datacenters[0].is_some();
        for (tier, dc) in self.datacenters.iter().enumerate() {
            let tier = explicit_tiers.then(|| u32::try_from(tier).unwrap_or(u32::MAX));
            loops.spawn(self.clone().query_loop(dc.clone(), tier, tx.clone()));
        }
        drop(tx);
        let mut sets: Vec<Option<Vec<Endpoint>>> = vec![None; self.datacenters.len()];
        let mut failing: Vec<Option<String>> = vec![None; self.datacenters.len()];
        loop {
            let (dc, update) = tokio::select! {
                () = cancel.cancelled() => return,
                update = rx.recv() => match update {
                    Some(update) => update,
                    None => return,
                },
            };
            let _refresh = refresh_span(&publisher).entered();
            match update {
                Update::Set(endpoints) => {
                    sets[dc] = Some(endpoints);
                    failing[dc] = None;
                    // Every datacenter's last good set: those that have not answered yet (or
                    // fail now) add theirs when they do.
                    let all: Vec<Endpoint> = sets.iter().flatten().flatten().cloned().collect();
                    if let Err(e) = publisher.publish(admitted(&publisher, all)) {
                        tracing::debug!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "Consul set not published: {e}");
                    }
                }
                Update::Failed(why) => failing[dc] = Some(why),
            }
            // While any datacenter fails, the source is stale (its part of the set is old).
            if let Some((dc, why)) = failing
                .iter()
                .enumerate()
                .find_map(|(i, f)| f.as_ref().map(|f| (i, f)))
            {
                let name = self.datacenters[dc]
                    .as_deref()
                    .unwrap_or("the agent's datacenter");
                let _ = publisher.failed(format_args!("Consul ({name}): {why}"));
            }
        }
    }

    /// Queries one datacenter forever, sending every answer (or failure) to the source.
    async fn query_loop(
        self,
        dc: Option<String>,
        tier: Option<u32>,
        tx: mpsc::Sender<(usize, Update)>,
    ) {
        let position = self
            .datacenters
            .iter()
            .position(|d| *d == dc)
            .unwrap_or_default();
        let mut backoff = Backoff::new(self.refresh);
        // Whatever the agent answers (at once, with an index that moves or goes back),
        // queries start at least the shortest refresh delay apart.
        let mut pacer = Pacer::new(self.refresh.min);
        let mut index: u64 = 0;
        loop {
            if let Some(at) = pacer.next_at() {
                tokio::time::sleep_until(at).await;
            }
            pacer.started();
            let delay = match self.query(dc.as_deref(), index).await {
                Ok(answer) => {
                    let previous = index;
                    // Consul's rules: backwards resets to 0, below 1 counts as 1.
                    index = if answer.index < previous {
                        0
                    } else {
                        answer.index.max(1)
                    };
                    let update = match self.stale.zip(answer.last_contact) {
                        Some((max, contact)) if contact > max => Update::Failed(format!(
                            "the answer is {} ms stale (at most {} ms allowed)",
                            contact.as_millis(),
                            max.as_millis()
                        )),
                        _ => match parse_entries(&answer.body, &self.scheme, tier) {
                            Ok((endpoints, errors)) => {
                                for e in errors {
                                    tracing::warn!(target: "healthpick", "{e}; left out");
                                }
                                Update::Set(in_datacenter(endpoints, dc.as_deref()))
                            }
                            Err(why) => Update::Failed(why),
                        },
                    };
                    let failed = matches!(update, Update::Failed(_));
                    if tx.send((position, update)).await.is_err() {
                        return;
                    }
                    if failed {
                        backoff.failed()
                    } else {
                        backoff.succeeded(Some(Duration::ZERO));
                        Duration::ZERO
                    }
                }
                Err(why) => {
                    if tx.send((position, Update::Failed(why))).await.is_err() {
                        return;
                    }
                    backoff.failed()
                }
            };
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
    }

    /// One (blocking, when `index` > 0) query.
    async fn query(&self, dc: Option<&str>, index: u64) -> Result<QueryAnswer, String> {
        let mut url = self.url.clone();
        {
            let mut query = url.query_pairs_mut();
            if index > 0 {
                query.append_pair("index", &index.to_string());
                query.append_pair("wait", &format!("{}s", self.wait.as_secs()));
            }
            if let Some(dc) = dc {
                query.append_pair("dc", dc);
            }
            if let Some(tag) = &self.tag {
                query.append_pair("tag", tag);
            }
            if self.stale.is_some() {
                query.append_key_only("stale");
            }
        }
        // Consul adds up to wait/16 to a blocking query: the bound is above that.
        let bound = if index > 0 {
            self.wait + self.wait / 16 + self.timeout
        } else {
            self.timeout
        };
        let mut request = self.http.get(url).timeout(bound);
        if let Some(token) = &self.token {
            request = request.header("X-Consul-Token", token);
        }
        let mut response = request.send().await.map_err(|e| describe(&e))?;
        let status = response.status();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let answered_index = header("X-Consul-Index");
        let last_contact = header("X-Consul-LastContact").map(Duration::from_millis);
        let body = read_bounded(&mut response, MAX_ANSWER)
            .await
            .map_err(|e| e.to_string())?;
        if !status.is_success() {
            let text: String = String::from_utf8_lossy(&body)
                .trim()
                .chars()
                .take(300)
                .collect();
            return Err(format!("HTTP {}: {text}", status.as_u16()));
        }
        let Some(index) = answered_index else {
            return Err("the answer has no X-Consul-Index".into());
        };
        Ok(QueryAnswer {
            index,
            last_contact,
            body,
        })
    }
}

struct QueryAnswer {
    index: u64,
    last_contact: Option<Duration>,
    body: Vec<u8>,
}

/// The endpoints of a named datacenter of the failover list, their keys qualified with it
/// (`dc/node/service-id`): node names are unique within a datacenter only, and the source
/// publishes every datacenter's endpoints together.
fn in_datacenter(endpoints: Vec<Endpoint>, dc: Option<&str>) -> Vec<Endpoint> {
    let Some(dc) = dc else {
        return endpoints;
    };
    endpoints
        .into_iter()
        .map(|mut e| {
            e.key = format!("{}/{}", key_part(dc), e.key);
            e
        })
        .collect()
}

/// `CONSUL_HTTP_ADDR` as Consul's tools take it: `host:port` or a URL.
fn agent_url(text: &str) -> Result<Url, String> {
    let text = text.trim();
    let with_scheme = if text.contains("://") {
        text.to_string()
    } else {
        format!("http://{text}")
    };
    Url::parse(&with_scheme).map_err(|e| format!("Consul address `{text}` is not a URL: {e}"))
}

//! Consul discovery: the instances of a service from a Consul agent's health endpoint, kept
//! current with blocking queries, read from two datacenters as two tiers.
//!
//! **The Consul agent here is a fake**, in-process (axum on a free port of 127.0.0.1): no real
//! Consul is needed, nor started. It serves only `GET /v1/health/service/<name>` the way Consul
//! does — `X-Consul-Index` on every answer, a query with `?index=` held until that datacenter's
//! index moves past it or `wait` runs out, `?dc=` choosing the datacenter, `X-Consul-Token`
//! checked (403 otherwise) — which is what the source relies on. The same fake, with failure
//! modes added, is what the Consul tests run against (`tests/support/consul.rs`).
//!
//! Four small HTTP backends on 127.0.0.1 are the instances of service `payments`: `west-1`,
//! `west-2`, `west-3` in datacenter `eu-west`, `central-1` in `eu-central`. The cluster
//! `payments` is a YARP JSON document whose `Discovery` section is
//! `{"Type": "Consul", "Service": "payments", "Datacenters": ["eu-west", "eu-central"], ...}`:
//! eu-west is tier 0, eu-central tier 1. Every pick is sent to the backend it names:
//!
//! 1. west-1 and west-2 pass their checks: picks stay in eu-west (central-1 is tier 1);
//! 2. west-3 registers: the source's query, blocked at eu-west's index, is answered at once
//!    and the picks follow — no polling;
//! 3. west-2's check turns `warning`: Draining, ranked last (with Degraded destinations):
//!    picks go to west-1 and west-3 only. Queries of a datacenter start at least `MinRefresh`
//!    apart, whatever the agent answers (200 ms here, 5 s by default), so a change that comes
//!    right after another is seen up to that long later;
//! 4. every eu-west check turns `critical`: nothing left in tier 0, so picks fail over to the
//!    second datacenter of the list, central-1;
//! 5. eu-west passes again: picks come back.
//!
//! ```text
//! fake Consul agent (in-process, NOT a real Consul) on http://127.0.0.1:43627: blocking queries on /v1/health/service/<name>
//! backends west-1, west-2, west-3 (eu-west) and central-1 (eu-central) on 127.0.0.1
//! 1. eu-west: west-1 west-2     -> west-1 west-2 west-1 west-2 west-1 west-2
//! 2. west-3 registers           -> west-1 west-2 west-3 west-1 west-2 west-3
//!    (picks followed 1 ms after the change: the eu-west query blocked at index 11 for 47 ms answered it)
//! 3. west-2 check warning       -> west-1 west-3 west-1 west-3 west-1 west-3
//!    (west-2 is Draining, ranked last; picks followed 193 ms after the change)
//! 4. eu-west all critical       -> central-1 central-1 central-1 central-1 central-1 central-1
//!    (failover to eu-central, tier 1; picks followed 197 ms after the change)
//! 5. eu-west passing again      -> west-1 west-2 west-3 west-1 west-2 west-3
//! ok: picks followed blocking queries, a warning ranked last, and the second datacenter took over
//! ```
//!
//! Run with `cargo run --features consul --example discovery_consul`. Exits 0 only if every
//! step's picks went to the expected backends.

#[path = "support/tiny_server.rs"]
mod tiny_server;

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use healthpick::discovery::Discovery;
use healthpick::{DiscoveryHealth, Engine};
use serde_json::{json, Value};
use tiny_server::TinyServer;
use tokio::sync::Notify;

const SERVICE: &str = "payments";
const TOKEN: &str = "example-acl-token";

type Error = Box<dyn std::error::Error>;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Error> {
    let agent = FakeAgent::start().await?;
    println!(
        "fake Consul agent (in-process, NOT a real Consul) on {}: blocking queries on /v1/health/service/<name>",
        agent.url
    );
    let mut ports = HashMap::new();
    let mut backends = Vec::new();
    for name in ["west-1", "west-2", "west-3", "central-1"] {
        let backend = TinyServer::start(name).await?;
        ports.insert(name, backend.addr().port());
        backends.push(backend);
    }
    println!("backends west-1, west-2, west-3 (eu-west) and central-1 (eu-central) on 127.0.0.1");
    let entry = |name: &str, dc: &str, check: &str| instance(name, dc, ports[name], check);

    agent.set(
        "eu-west",
        vec![
            entry("west-1", "eu-west", "passing"),
            entry("west-2", "eu-west", "passing"),
        ],
    );
    agent.set(
        "eu-central",
        vec![entry("central-1", "eu-central", "passing")],
    );
    let engine = Engine::from_json(&format!(
        r#"{{ "ReverseProxy": {{ "Clusters": {{ "payments": {{
              "LoadBalancingPolicy": "RoundRobin",
              "Discovery": {{
                "Type": "Consul", "Service": "{SERVICE}", "Address": "{}",
                "Datacenters": ["eu-west", "eu-central"], "Token": "{TOKEN}",
                "Wait": "00:00:30", "Timeout": "00:00:02", "MinRefresh": "00:00:00.2"
              }} }} }} }} }}"#,
        agent.url
    ))?;
    let _discovery = Discovery::start(&engine); // one blocking-query loop per datacenter
    engine.ready().await; // waits (bounded) for the first answers
    let http = reqwest::Client::builder().no_proxy().build()?;
    // Both datacenters answered, and both queries are parked at their index.
    wait_for("both datacenters read", || destinations(&engine).len() == 3).await?;
    wait_for("both queries blocked", || agent.blocked() == 2).await?;
    calls(
        &engine,
        &http,
        "1. eu-west: west-1 west-2",
        &["west-1", "west-2"],
    )
    .await?;

    // 2. A new instance: delivered by the query that was blocked.
    let answered_before = agent.answered().len();
    let changed = Instant::now();
    agent.set(
        "eu-west",
        vec![
            entry("west-1", "eu-west", "passing"),
            entry("west-2", "eu-west", "passing"),
            entry("west-3", "eu-west", "passing"),
        ],
    );
    wait_for("west-3 in", || {
        destinations(&engine).contains_key("eu-west/west-3/payments")
    })
    .await?;
    let followed = changed.elapsed();
    calls(
        &engine,
        &http,
        "2. west-3 registers",
        &["west-1", "west-2", "west-3"],
    )
    .await?;
    let answered = agent.answered();
    let Some(answer) = answered[answered_before..]
        .iter()
        .find(|a| a.dc == "eu-west" && a.blocked_at.is_some())
    else {
        return Err(format!("no blocked eu-west query answered the change: {answered:?}").into());
    };
    println!(
        "   (picks followed {} ms after the change: the eu-west query blocked at index {} for {} ms answered it)",
        followed.as_millis(),
        answer.blocked_at.unwrap_or_default(),
        answer.held.as_millis()
    );

    // 3. A warning check: Draining, ranked last.
    let changed = Instant::now();
    agent.set(
        "eu-west",
        vec![
            entry("west-1", "eu-west", "passing"),
            entry("west-2", "eu-west", "warning"),
            entry("west-3", "eu-west", "passing"),
        ],
    );
    wait_for("west-2 Draining", || {
        destinations(&engine).get("eu-west/west-2/payments") == Some(&DiscoveryHealth::Draining)
    })
    .await?;
    let followed = changed.elapsed();
    calls(
        &engine,
        &http,
        "3. west-2 check warning",
        &["west-1", "west-3"],
    )
    .await?;
    println!(
        "   (west-2 is Draining, ranked last; picks followed {} ms after the change)",
        followed.as_millis()
    );

    // 4. The whole preferred datacenter fails: the second one takes over.
    let changed = Instant::now();
    agent.set(
        "eu-west",
        vec![
            entry("west-1", "eu-west", "critical"),
            entry("west-2", "eu-west", "critical"),
            entry("west-3", "eu-west", "critical"),
        ],
    );
    wait_for("all of eu-west Unhealthy", || {
        destinations(&engine)
            .iter()
            .filter(|(id, _)| id.starts_with("eu-west/"))
            .all(|(_, health)| *health == DiscoveryHealth::Unhealthy)
    })
    .await?;
    let followed = changed.elapsed();
    calls(&engine, &http, "4. eu-west all critical", &["central-1"]).await?;
    println!(
        "   (failover to eu-central, tier 1; picks followed {} ms after the change)",
        followed.as_millis()
    );

    // 5. Back.
    agent.set(
        "eu-west",
        vec![
            entry("west-1", "eu-west", "passing"),
            entry("west-2", "eu-west", "passing"),
            entry("west-3", "eu-west", "passing"),
        ],
    );
    wait_for("eu-west back", || {
        destinations(&engine)
            .values()
            .all(|health| *health == DiscoveryHealth::Healthy)
    })
    .await?;
    calls(
        &engine,
        &http,
        "5. eu-west passing again",
        &["west-1", "west-2", "west-3"],
    )
    .await?;

    if let Some(refused) = agent.refused() {
        return Err(format!("the fake agent refused a query: {refused}").into());
    }
    println!(
        "ok: picks followed blocking queries, a warning ranked last, and the second datacenter took over"
    );
    Ok(())
}

/// A health entry of service `payments`: node `name` in `dc`, one `serfHealth` check passing
/// and one service check with `check` (`passing`, `warning`, `critical`).
fn instance(name: &str, dc: &str, port: u16, check: &str) -> Value {
    json!({
        "Node": {"Node": name, "Address": "127.0.0.1", "Datacenter": dc},
        "Service": {"ID": SERVICE, "Service": SERVICE, "Port": port, "Address": "",
                    "Tags": ["v1"], "Weights": {"Passing": 1, "Warning": 1}},
        "Checks": [
            {"CheckID": "serfHealth", "Status": "passing"},
            {"CheckID": "service:payments", "Status": check}
        ],
    })
}

/// Picks and calls six times; every answer must come from one of `expected`, each of them.
async fn calls(
    engine: &Engine,
    http: &reqwest::Client,
    step: &str,
    expected: &[&str],
) -> Result<(), Error> {
    let mut answered = Vec::new();
    for _ in 0..6 {
        let pick = engine.pick_endpoint("payments")?;
        let url = pick.url("/hello");
        answered.push(http.get(url).send().await?.text().await?);
    }
    println!("{step:<29} -> {}", answered.join(" "));
    if let Some(who) = answered
        .iter()
        .find(|who| !expected.contains(&who.as_str()))
    {
        return Err(format!("{step}: {who} answered, expected only {expected:?}").into());
    }
    if let Some(missing) = expected.iter().find(|e| !answered.iter().any(|a| a == **e)) {
        return Err(format!("{step}: {missing} got no pick").into());
    }
    Ok(())
}

/// The cluster's destinations (`node/service-id`) and their discovery health.
fn destinations(engine: &Engine) -> HashMap<String, DiscoveryHealth> {
    engine
        .status()
        .cluster("payments")
        .map(|c| {
            c.destinations
                .iter()
                .map(|d| (d.id.clone(), d.discovery))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits (at most 5 s) until `done`.
async fn wait_for(what: &str, mut done: impl FnMut() -> bool) -> Result<(), Error> {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(5) {
            return Err(format!("waited 5 s for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
}

// ---- the fake agent --------------------------------------------------------------------------

/// One answered query, as the fake saw it.
#[derive(Clone, Debug)]
struct Answered {
    dc: String,
    /// The `index` it blocked at (`None`: a first read, not blocking).
    blocked_at: Option<u64>,
    /// How long it was held.
    held: Duration,
}

#[derive(Default)]
struct Datacenter {
    /// Consul's `X-Consul-Index` of the service in this datacenter.
    index: u64,
    entries: Vec<Value>,
}

#[derive(Default)]
struct AgentState {
    datacenters: HashMap<String, Datacenter>,
    /// Queries held now.
    blocked: usize,
    answered: Vec<Answered>,
    refused: Option<String>,
}

/// A fake Consul agent: `/v1/health/service/<name>` with blocking queries, nothing else.
#[derive(Clone)]
struct FakeAgent {
    state: Arc<Mutex<AgentState>>,
    changed: Arc<Notify>,
    url: String,
}

impl FakeAgent {
    async fn start() -> Result<FakeAgent, Error> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let agent = FakeAgent {
            state: Arc::default(),
            changed: Arc::new(Notify::new()),
            url: format!("http://{}", listener.local_addr()?),
        };
        let app = Router::new()
            .route("/v1/health/service/{name}", get(health))
            .with_state(agent.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(agent)
    }

    /// Replaces the entries of `dc` and moves its index on, waking the queries blocked on it.
    fn set(&self, dc: &str, entries: Vec<Value>) {
        {
            let mut state = self.state.lock().expect("agent state");
            let dc = state.datacenters.entry(dc.to_string()).or_default();
            dc.entries = entries;
            // Consul's indexes start high and only grow; 10 is as good as any.
            dc.index = dc.index.max(10) + 1;
        }
        self.changed.notify_waiters();
    }

    fn blocked(&self) -> usize {
        self.state.lock().expect("agent state").blocked
    }

    fn answered(&self) -> Vec<Answered> {
        self.state.lock().expect("agent state").answered.clone()
    }

    fn refused(&self) -> Option<String> {
        self.state.lock().expect("agent state").refused.clone()
    }

    fn index(&self, dc: &str) -> u64 {
        let state = self.state.lock().expect("agent state");
        state.datacenters.get(dc).map_or(1, |d| d.index.max(1))
    }
}

/// `GET /v1/health/service/{name}?dc=&index=&wait=`: a query whose `index` is the current one
/// waits until the datacenter's index moves past it or `wait` (default 5 min) runs out, as
/// Consul holds it; the answer is the entries and `X-Consul-Index`.
async fn health(
    State(agent): State<FakeAgent>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if headers.get("x-consul-token").and_then(|v| v.to_str().ok()) != Some(TOKEN) {
        agent.state.lock().expect("agent state").refused = Some("no or a wrong token".into());
        return (StatusCode::FORBIDDEN, "ACL not found").into_response();
    }
    let dc = query.get("dc").cloned().unwrap_or_else(|| "eu-west".into());
    let index: Option<u64> = query.get("index").and_then(|i| i.parse().ok());
    let wait = query
        .get("wait")
        .and_then(|w| w.strip_suffix('s'))
        .and_then(|w| w.parse::<u64>().ok())
        .map_or(Duration::from_secs(300), Duration::from_secs);
    let start = Instant::now();
    if let Some(asked) = index {
        agent.state.lock().expect("agent state").blocked += 1;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = agent.changed.notified();
            if agent.index(&dc) > asked {
                break;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
    }
    let mut state = agent.state.lock().expect("agent state");
    if index.is_some() {
        state.blocked -= 1;
    }
    state.answered.push(Answered {
        dc: dc.clone(),
        blocked_at: index,
        held: start.elapsed(),
    });
    let (entries, current) = state.datacenters.get(&dc).map_or((Vec::new(), 1), |d| {
        let entries = d
            .entries
            .iter()
            .filter(|e| e["Service"]["Service"] == json!(name))
            .cloned()
            .collect();
        (entries, d.index.max(1))
    });
    drop(state);
    let mut response = axum::Json(entries).into_response();
    let h = response.headers_mut();
    h.insert("X-Consul-Index", current.into());
    h.insert("X-Consul-KnownLeader", "true".parse().expect("a header"));
    h.insert("X-Consul-LastContact", 0u64.into());
    response
}

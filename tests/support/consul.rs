//! A fake Consul agent (no real Consul can be installed on these machines) that implements
//! blocking-query semantics: `/v1/health/service/<name>` answers with `X-Consul-Index` and holds
//! a query whose `index` is current until the index moves past it or `wait` runs out, as Consul
//! does; it can go backwards, fail with 500, hang, answer at once without blocking, and report
//! a stale `X-Consul-LastContact`. axum, plain HTTP on 127.0.0.1, port 0.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::Notify;

/// How the fake answers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// As Consul does.
    Normal,
    /// 500 with an error text.
    Fail,
    /// Never answers.
    Hang,
    /// Answers at once, ignoring `index` and `wait` (a misbehaving proxy in between).
    NoBlocking,
}

/// One query the fake saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub index: Option<u64>,
    pub wait: Option<String>,
    pub dc: Option<String>,
    pub stale: bool,
    pub token: Option<String>,
}

struct Fake {
    index: u64,
    /// Entries by datacenter.
    entries: HashMap<String, Vec<Value>>,
    mode: Mode,
    last_contact_ms: u64,
    seen: Vec<Seen>,
}

/// The fake agent; clones share it.
#[derive(Clone)]
pub struct Agent {
    state: Arc<Mutex<Fake>>,
    changed: Arc<Notify>,
    /// `http://127.0.0.1:PORT`
    pub url: String,
}

impl Agent {
    /// Starts on a free loopback port, at index 10 with no entries, answering as Consul does.
    pub async fn start() -> Agent {
        let agent = Agent {
            state: Arc::new(Mutex::new(Fake {
                index: 10,
                entries: HashMap::new(),
                mode: Mode::Normal,
                last_contact_ms: 0,
                seen: Vec::new(),
            })),
            changed: Arc::new(Notify::new()),
            url: String::new(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = Router::new()
            .route("/v1/health/service/{name}", get(health))
            .with_state(agent.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Agent { url, ..agent }
    }

    /// Replaces the entries of `dc` and moves the index on (or to `index`).
    pub fn set(&self, dc: &str, entries: Vec<Value>, index: Option<u64>) {
        {
            let mut state = self.state.lock();
            state.entries.insert(dc.to_string(), entries);
            state.index = index.unwrap_or(state.index + 1);
        }
        self.changed.notify_waiters();
    }

    /// Answers as `mode` says from now on (queries already waiting included).
    pub fn mode(&self, mode: Mode) {
        self.state.lock().mode = mode;
        self.changed.notify_waiters();
    }

    /// Every query so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().seen.clone()
    }

    /// Reports `X-Consul-LastContact: ms` from now on (how stale the agent's view is).
    pub fn set_last_contact_ms(&self, ms: u64) {
        self.state.lock().last_contact_ms = ms;
    }
}

/// `/v1/health/service/{name}` with Consul's blocking semantics: a query with `index` at or
/// past the current one waits until the index moves past it or `wait` runs out.
async fn health(
    State(agent): State<Agent>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let index: Option<u64> = query.get("index").and_then(|i| i.parse().ok());
    let wait = query
        .get("wait")
        .and_then(|w| w.strip_suffix('s'))
        .and_then(|w| w.parse::<u64>().ok())
        .map_or(Duration::from_secs(300), Duration::from_secs);
    let dc = query.get("dc").cloned();
    let mode = {
        let mut state = agent.state.lock();
        state.seen.push(Seen {
            index,
            wait: query.get("wait").cloned(),
            dc: dc.clone(),
            stale: query.contains_key("stale"),
            token: headers
                .get("x-consul-token")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        });
        state.mode
    };
    match mode {
        Mode::Fail => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "rpc error: No cluster leader",
            )
                .into_response()
        }
        Mode::Hang => std::future::pending::<()>().await,
        Mode::Normal => {
            if let Some(asked) = index {
                let deadline = tokio::time::Instant::now() + wait;
                loop {
                    let notified = agent.changed.notified();
                    if agent.state.lock().index > asked {
                        break;
                    }
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        break;
                    }
                }
            }
        }
        Mode::NoBlocking => {}
    }
    let state = agent.state.lock();
    let dc = dc.unwrap_or_else(|| "dc1".into());
    let entries: Vec<Value> = state
        .entries
        .get(&dc)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["Service"]["Service"] == json!(name))
        .collect();
    let mut response = axum::Json(entries).into_response();
    let h = response.headers_mut();
    h.insert("X-Consul-Index", state.index.to_string().parse().unwrap());
    h.insert(
        "X-Consul-LastContact",
        state.last_contact_ms.to_string().parse().unwrap(),
    );
    h.insert("X-Consul-KnownLeader", "true".parse().unwrap());
    response
}

/// A health entry of service `web`.
pub fn entry(node: &str, port: u16, status: &str) -> Value {
    json!({
        "Node": {"Node": node, "Address": "127.0.0.1", "Datacenter": "dc1"},
        "Service": {"ID": "web", "Service": "web", "Port": port, "Address": "",
                    "Weights": {"Passing": 3, "Warning": 1}},
        "Checks": [{"CheckID": "serfHealth", "Status": "passing"}, {"CheckID": "http", "Status": status}],
    })
}

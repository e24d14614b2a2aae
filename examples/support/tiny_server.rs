//! A tiny HTTP server on 127.0.0.1 for the examples: every path answers with the server's name,
//! except `/health`, which answers with a health payload whose status the example
//! switches between Healthy (200) and Unhealthy (503).

#![allow(dead_code)] // each example uses part of it

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use healthpick::service::HealthPayload;
use healthpick::ReportedHealth;
use tokio::net::TcpListener;

/// A running server; dropping it stops it.
pub struct TinyServer {
    addr: SocketAddr,
    state: Arc<ServerState>,
    task: tokio::task::JoinHandle<()>,
}

struct ServerState {
    name: String,
    healthy: AtomicBool,
    /// Requests served, `/health` not counted.
    hits: AtomicU64,
}

impl TinyServer {
    /// Starts a healthy server called `name` on a free loopback port.
    pub async fn start(name: &str) -> std::io::Result<TinyServer> {
        TinyServer::start_at(name, ([127, 0, 0, 1], 0).into()).await
    }

    /// Starts a healthy server called `name` on `addr` (port 0: a free one), for examples whose
    /// backends share a port on several loopback addresses (what DNS records point at).
    pub async fn start_at(name: &str, addr: SocketAddr) -> std::io::Result<TinyServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(ServerState {
            name: name.to_string(),
            healthy: AtomicBool::new(true),
            hits: AtomicU64::new(0),
        });
        let app = Router::new()
            .route("/health", get(health))
            .fallback(answer)
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(TinyServer { addr, state, task })
    }

    /// The base URL, `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The `127.0.0.1:PORT` the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Makes `/health` answer `200 {"status":"Healthy"}` or `503 {"status":"Unhealthy"}`.
    pub fn set_healthy(&self, healthy: bool) {
        self.state.healthy.store(healthy, Ordering::Relaxed);
    }

    /// Requests served so far, health probes not counted.
    pub fn hits(&self) -> u64 {
        self.state.hits.load(Ordering::Relaxed)
    }
}

impl Drop for TinyServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A base URL where nothing listens: connecting to it is refused, like an instance that crashed.
pub fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    let addr = listener.local_addr().expect("bound address");
    drop(listener); // the port is free again, and closed
    format!("http://{addr}/")
}

async fn health(State(state): State<Arc<ServerState>>) -> (StatusCode, Json<HealthPayload>) {
    let status = if state.healthy.load(Ordering::Relaxed) {
        ReportedHealth::Healthy
    } else {
        ReportedHealth::Unhealthy
    };
    let payload = HealthPayload::new(status).hostname(state.name.clone());
    let code = StatusCode::from_u16(payload.status_code()).expect("200 or 503");
    (code, Json(payload))
}

async fn answer(State(state): State<Arc<ServerState>>) -> String {
    state.hits.fetch_add(1, Ordering::Relaxed);
    state.name.clone()
}

//! A small real HTTP backend on 127.0.0.1 for the examples and integration tests: it serves
//! `/api/systemstatus` (the health payload, from the library's own [`Draining`]
//! handle) and echoes its name on every other path.
//!
//! It can report `Degraded` (or any status), drain (its health endpoint answers `503 Unhealthy`
//! while it keeps serving, then it stops), be killed hard (listener and open connections closed
//! at once, like a crashed process) and be restarted on the same port.

#![allow(dead_code)] // each example or test uses part of it

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use healthpick::service::Draining;
use healthpick::ReportedHealth;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// The drain delay when none is set with [`Backend::set_drain_delay`].
const DEFAULT_DRAIN_DELAY: Duration = Duration::from_secs(3);

struct Shared {
    name: String,
    /// What the health endpoint serves; replaced by a fresh one when a drained backend restarts.
    draining: Mutex<Draining>,
    drain_delay: Mutex<Duration>,
    served: Arc<AtomicU64>,
    /// Time each non-health request takes, in microseconds.
    latency_us: AtomicU64,
    /// How many non-health requests it serves at once, the rest waiting in line (FIFO), as a
    /// server with a fixed pool of workers; `None`: no limit.
    workers: Mutex<Option<Arc<Semaphore>>>,
}

impl Shared {
    fn draining(&self) -> Draining {
        self.draining.lock().unwrap().clone()
    }

    fn fresh_draining(&self) -> Draining {
        Draining::builder()
            .delay(*self.drain_delay.lock().unwrap())
            // Callers stop using a draining instance at once (503), instead of ranking it lower.
            .status_while_draining(ReportedHealth::Unhealthy)
            .version("1.0.0")
            .environment("demo")
            .hostname(self.name.clone())
            .build()
    }
}

/// A running (or killed) backend.
pub struct Backend {
    shared: Arc<Shared>,
    addr: SocketAddr,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Backend {
    /// Starts a backend on a free loopback port, reporting `Healthy`.
    pub async fn start(name: &str) -> std::io::Result<Backend> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let shared = Arc::new(Shared {
            name: name.to_string(),
            draining: Mutex::new(Draining::new()),
            drain_delay: Mutex::new(DEFAULT_DRAIN_DELAY),
            served: Arc::new(AtomicU64::new(0)),
            latency_us: AtomicU64::new(0),
            workers: Mutex::new(None),
        });
        *shared.draining.lock().unwrap() = shared.fresh_draining();
        let addr = listener.local_addr()?;
        let server = Some(tokio::spawn(serve(listener, shared.clone())));
        Ok(Backend {
            shared,
            addr,
            server,
        })
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The backend's name (echoed on every non-health path).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Requests served (health probes not counted).
    pub fn served(&self) -> u64 {
        self.shared.served.load(Ordering::Relaxed)
    }

    /// The counter behind [`served`](Self::served), to read from elsewhere (a live table).
    pub fn served_counter(&self) -> Arc<AtomicU64> {
        self.shared.served.clone()
    }

    /// Makes every non-health request take `latency` (default: none), so that requests are
    /// visibly in flight.
    pub fn set_latency(&self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.shared.latency_us.store(us, Ordering::Relaxed);
    }

    /// Serves at most `workers` non-health requests at once; the others wait in line, first come
    /// first served, as on a server with a fixed pool of workers (default: no limit). With
    /// [`set_latency`](Self::set_latency) it has a capacity: `workers / latency` a second.
    pub fn set_workers(&self, workers: usize) {
        *self.shared.workers.lock().unwrap() = Some(Arc::new(Semaphore::new(workers)));
    }

    /// Sets the status its health payload reports (`Degraded`: 200, ranked below healthy
    /// instances; `Unhealthy`: 503).
    pub fn set_status(&self, status: ReportedHealth) {
        self.shared.draining().set_status(status);
    }

    /// How long [`drain`](Self::drain) keeps serving after draining starts. Default 3 s.
    pub fn set_drain_delay(&self, delay: Duration) {
        *self.shared.drain_delay.lock().unwrap() = delay;
        if !self.shared.draining().is_draining() {
            *self.shared.draining.lock().unwrap() = self.shared.fresh_draining();
        }
    }

    /// The [`Draining`] handle its health endpoint serves, to hand to what else follows this
    /// instance's draining (an `EtcdRegistration`). Taken after
    /// [`set_drain_delay`](Self::set_drain_delay), which replaces it.
    pub fn draining(&self) -> Draining {
        self.shared.draining()
    }

    /// Starts draining now: the health endpoint answers `503 {"status":"Unhealthy"}` while every
    /// other request is still served. Returns the handle; [`drain`](Self::drain) waits for the
    /// delay and stops.
    pub fn start_draining(&self) -> Draining {
        let draining = self.shared.draining();
        draining.start();
        draining
    }

    /// Drains (see [`start_draining`](Self::start_draining)), waits until the drain delay is
    /// over, then stops serving.
    pub async fn drain(&mut self) {
        self.start_draining().drain().await;
        self.kill();
    }

    /// Closes the listener and every open connection at once, like a crashed process.
    pub fn kill(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }

    /// Starts serving again on the same port, reporting `Healthy`, not draining.
    pub async fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        let listener = TcpListener::bind(self.addr).await?;
        *self.shared.draining.lock().unwrap() = self.shared.fresh_draining();
        self.server = Some(tokio::spawn(serve(listener, self.shared.clone())));
        Ok(())
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Accept loop; dropping it (abort) drops the JoinSet, which aborts every connection task.
async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(req, shared.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        // Reap finished connections so the set does not grow without bound.
        while connections.try_join_next().is_some() {}
    }
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = if req.uri().path() == "/api/systemstatus" {
        let payload = shared.draining().payload();
        let code =
            StatusCode::from_u16(payload.status_code()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        let body = serde_json::to_vec(&payload).unwrap_or_default();
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
    } else {
        let workers = shared.workers.lock().unwrap().clone();
        // Tokio's semaphore is fair: waiting requests get a worker in arrival order.
        let _worker = match &workers {
            Some(workers) => Some(workers.acquire().await.expect("never closed")),
            None => None,
        };
        let latency = shared.latency_us.load(Ordering::Relaxed);
        if latency > 0 {
            tokio::time::sleep(Duration::from_micros(latency)).await;
        }
        shared.served.fetch_add(1, Ordering::Relaxed);
        Response::builder().body(Full::new(Bytes::from(shared.name.clone())))
    };
    Ok(response.expect("static response parts"))
}

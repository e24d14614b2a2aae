//! A small real HTTP backend on 127.0.0.1 for the examples and integration tests: it serves
//! `/api/systemstatus` (the health payload of SPEC §9) and echoes its name on every other path.
//! It can be killed hard (listener and open connections closed at once) and restarted on the
//! same port.

#![allow(dead_code)] // each example or test uses part of it

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// What the backend says about itself in its health payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Healthy,
    Degraded,
    Unhealthy,
}

struct Shared {
    name: String,
    status: Mutex<Status>,
    served: AtomicU64,
}

/// A running (or killed) backend.
pub struct Backend {
    shared: Arc<Shared>,
    addr: SocketAddr,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Backend {
    /// Starts a backend on a free loopback port.
    pub async fn start(name: &str) -> std::io::Result<Backend> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let shared = Arc::new(Shared {
            name: name.to_string(),
            status: Mutex::new(Status::Healthy),
            served: AtomicU64::new(0),
        });
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

    /// Requests served (health probes not counted).
    pub fn served(&self) -> u64 {
        self.shared.served.load(Ordering::Relaxed)
    }

    /// Sets the status its health payload reports.
    pub fn set_status(&self, status: Status) {
        *self.shared.status.lock().unwrap() = status;
    }

    /// Closes the listener and every open connection at once, like a crashed process.
    pub fn kill(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }

    /// Starts serving again on the same port.
    pub async fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        let listener = TcpListener::bind(self.addr).await?;
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
        let status = *shared.status.lock().unwrap();
        let code = match status {
            Status::Healthy | Status::Degraded => StatusCode::OK,
            Status::Unhealthy => StatusCode::SERVICE_UNAVAILABLE,
        };
        let body = format!(
            r#"{{"status":"{status:?}","version":"1.0.0","environment":"demo","hostname":"{}"}}"#,
            shared.name
        );
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
    } else {
        shared.served.fetch_add(1, Ordering::Relaxed);
        Response::builder().body(Full::new(Bytes::from(shared.name.clone())))
    };
    Ok(response.expect("static response parts"))
}

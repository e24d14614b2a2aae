//! Shared helpers for the integration tests that talk to real servers (`tests/probing.rs`,
//! `tests/endpoint_set.rs`):
//!
//! - [`HttpServer`]: a hyper server on `127.0.0.1:0` whose answers come from a closure and which
//!   records every request head it receives (method, path, query, headers, arrival time), the
//!   number of requests in flight and its peak, so tests can assert what the prober sent and how
//!   concurrently;
//! - [`RawServer`]: a TCP server that misbehaves at the byte level (accepts and never answers,
//!   or closes in the middle of a body);
//! - [`backend`]: the examples' killable, restartable backend;
//! - polling helpers that wait for a condition with a deadline instead of sleeping and hoping.
//!
//! Every server binds `127.0.0.1:0` and is shut down (listener and open connections) when dropped.

#![allow(dead_code)] // each test crate uses part of it

#[path = "../../examples/support/backend.rs"]
pub mod backend;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use healthpick::{DestinationStatus, Engine};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWrite;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// Installs a global tracing subscriber (level INFO: health transitions, panic mode, rejected
/// configs) that writes to the test output, which libtest shows for failing tests.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_max_level(tracing::Level::INFO)
        .try_init();
}

// ---- recording HTTP server -------------------------------------------------------------------

/// One request head as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Which listener of a shared [`Recorder`] received it (its local address).
    pub listener: SocketAddr,
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub at: Instant,
}

impl Seen {
    /// A header as text (`None` when absent or not visible ASCII).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Everything one or more [`HttpServer`]s received.
#[derive(Debug, Default)]
pub struct Recorder {
    seen: Mutex<Vec<Seen>>,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
}

impl Recorder {
    pub fn new() -> Arc<Recorder> {
        Arc::new(Recorder::default())
    }

    /// All requests so far, in arrival order.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// How many requests arrived.
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// How many requests arrived for exactly this path.
    pub fn count_path(&self, path: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.path == path)
            .count()
    }

    /// Requests per path.
    pub fn counts_by_path(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for s in self.seen.lock().unwrap().iter() {
            *counts.entry(s.path.clone()).or_insert(0) += 1;
        }
        counts
    }

    /// Arrival times, in order.
    pub fn arrivals(&self) -> Vec<Instant> {
        self.seen.lock().unwrap().iter().map(|s| s.at).collect()
    }

    /// Requests being handled right now (from arrival until the handler's delay is over).
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The most requests ever handled at once.
    pub fn peak_in_flight(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

/// Decrements the in-flight count even when the connection goes away mid-handler.
struct InFlight<'a>(&'a Recorder);

impl<'a> InFlight<'a> {
    fn enter(recorder: &'a Recorder) -> Self {
        let now = recorder.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        recorder.peak.fetch_max(now, Ordering::SeqCst);
        InFlight(recorder)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the server answers to one request.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Bytes,
    delay: Duration,
    /// Counts the body bytes handed to hyper (which polls the body only when it can write).
    sent: Option<Arc<AtomicU64>>,
}

impl Reply {
    /// An empty answer with this status.
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Bytes::new(),
            delay: Duration::ZERO,
            sent: None,
        }
    }

    /// A plain-text answer.
    pub fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply::status(status)
            .header("content-type", "text/plain")
            .body(body.into())
    }

    /// A JSON answer.
    pub fn json(status: u16, body: impl Into<String>) -> Reply {
        Reply::status(status)
            .header("content-type", "application/json")
            .body(body.into())
    }

    /// A health payload `{"status": ...}` with the status code a service sends for it.
    pub fn payload(status: &str) -> Reply {
        let code = if status == "Unhealthy" { 503 } else { 200 };
        Reply::json(code, format!(r#"{{"status":"{status}"}}"#))
    }

    pub fn header(mut self, name: &'static str, value: &str) -> Reply {
        self.headers.push((
            HeaderName::from_static(name),
            HeaderValue::from_str(value).expect("test header value"),
        ));
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Reply {
        self.body = body.into();
        self
    }

    /// Waits this long (tokio sleep) before answering; the request counts as in flight meanwhile.
    pub fn delay(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    /// Adds the number of body bytes actually produced to `sent`.
    pub fn count_sent(mut self, sent: Arc<AtomicU64>) -> Reply {
        self.sent = Some(sent);
        self
    }
}

/// A body served in 16 KiB frames, with an exact length (so `Content-Length` is set).
struct FramedBody {
    data: Bytes,
    sent: Option<Arc<AtomicU64>>,
}

impl Body for FramedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.data.is_empty() {
            return Poll::Ready(None);
        }
        let n = self.data.len().min(16 * 1024);
        let frame = self.data.split_to(n);
        if let Some(sent) = &self.sent {
            sent.fetch_add(n as u64, Ordering::SeqCst);
        }
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.len() as u64)
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A real HTTP/1.1 server on `127.0.0.1:0` answering with a closure and recording requests.
pub struct HttpServer {
    addr: SocketAddr,
    recorder: Arc<Recorder>,
    task: JoinHandle<()>,
}

impl HttpServer {
    /// A server with its own recorder.
    pub async fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> HttpServer {
        HttpServer::start_with(Recorder::new(), handler).await
    }

    /// A server recording into `recorder`, which several servers may share.
    pub async fn start_with(
        recorder: Arc<Recorder>,
        handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
    ) -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let handler: Handler = Arc::new(handler);
        let task = tokio::spawn(accept_loop(listener, recorder.clone(), handler));
        HttpServer {
            addr,
            recorder,
            task,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// `http://127.0.0.1:PORT{path}` (`path` starts with `/`).
    pub fn url_for(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn recorder(&self) -> &Arc<Recorder> {
        &self.recorder
    }

    pub fn count(&self) -> usize {
        self.recorder.count()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        // Dropping the accept loop drops its JoinSet, which aborts every connection.
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, recorder: Arc<Recorder>, handler: Handler) {
    let local = listener.local_addr().expect("local addr");
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (recorder, handler) = (recorder.clone(), handler.clone());
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                handle(local, req, recorder.clone(), handler.clone())
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

async fn handle(
    listener: SocketAddr,
    req: Request<Incoming>,
    recorder: Arc<Recorder>,
    handler: Handler,
) -> Result<Response<FramedBody>, Infallible> {
    let seen = Seen {
        listener,
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        query: req.uri().query().map(str::to_string),
        headers: req.headers().clone(),
        at: Instant::now(),
    };
    recorder.seen.lock().unwrap().push(seen.clone());
    let reply = {
        let _in_flight = InFlight::enter(&recorder);
        let reply = handler(&seen);
        if !reply.delay.is_zero() {
            tokio::time::sleep(reply.delay).await;
        }
        reply
    };
    let mut response = Response::new(FramedBody {
        data: reply.body,
        sent: reply.sent,
    });
    *response.status_mut() = StatusCode::from_u16(reply.status).expect("test status code");
    for (name, value) in reply.headers {
        response.headers_mut().append(name, value);
    }
    Ok(response)
}

// ---- misbehaving TCP servers -----------------------------------------------------------------

/// A TCP server on `127.0.0.1:0` that misbehaves below HTTP.
pub struct RawServer {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

#[derive(Clone, Copy)]
enum Misbehaviour {
    /// Reads the request and never answers (keeps the connection open).
    Silent,
    /// Answers `head` and `partial` body bytes, then closes the connection (FIN) if `close`,
    /// else sends nothing more and keeps it open.
    Partial {
        head: &'static str,
        partial: &'static [u8],
        close: bool,
    },
}

impl RawServer {
    /// Accepts connections, reads the requests, never answers.
    pub async fn silent() -> RawServer {
        RawServer::start(Misbehaviour::Silent).await
    }

    /// Answers `head` (status line and headers, ending with the blank line) and `partial`, then
    /// closes the connection cleanly, whatever `Content-Length` promised.
    pub async fn truncating(head: &'static str, partial: &'static [u8]) -> RawServer {
        RawServer::start(Misbehaviour::Partial {
            head,
            partial,
            close: true,
        })
        .await
    }

    /// Answers `head` and `partial`, then sends nothing more and keeps the connection open.
    pub async fn stalling(head: &'static str, partial: &'static [u8]) -> RawServer {
        RawServer::start(Misbehaviour::Partial {
            head,
            partial,
            close: false,
        })
        .await
    }

    async fn start(how: Misbehaviour) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                counter.fetch_add(1, Ordering::SeqCst);
                connections.spawn(misbehave(stream, how));
                while connections.try_join_next().is_some() {}
            }
        });
        RawServer {
            addr,
            accepted,
            task,
        }
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn misbehave(mut stream: TcpStream, how: Misbehaviour) {
    // Read the request head.
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if stream.readable().await.is_err() {
            return;
        }
        match stream.try_read(&mut buf) {
            Ok(0) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
    match how {
        Misbehaviour::Silent => {}
        Misbehaviour::Partial {
            head,
            partial,
            close,
        } => {
            let mut out = head.as_bytes().to_vec();
            out.extend_from_slice(partial);
            let mut written = 0;
            while written < out.len() {
                if stream.writable().await.is_err() {
                    return;
                }
                match stream.try_write(&out[written..]) {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return,
                }
            }
            if close {
                // FIN, not RST: the client sees a body that ends early.
                let _ = poll_fn(|cx| Pin::new(&mut stream).poll_shutdown(cx)).await;
            }
        }
    }
    // Hold the connection until the peer closes it (or the server is dropped).
    loop {
        if stream.readable().await.is_err() {
            return;
        }
        match stream.try_read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
    }
}

/// A listener that never accepts: the kernel completes connections into its backlog and the
/// requests sit unread, as with a process stopped by SIGSTOP. Every request to it hangs until
/// the client gives up.
pub struct FrozenServer {
    listener: std::net::TcpListener,
}

impl FrozenServer {
    pub fn start() -> FrozenServer {
        FrozenServer {
            listener: std::net::TcpListener::bind("127.0.0.1:0").expect("bind"),
        }
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!(
            "http://{}/",
            self.listener.local_addr().expect("local addr")
        )
    }
}

/// A loopback port nothing listens on: bound, read, released. Connecting to it is refused.
pub fn refused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("local addr").port()
}

// ---- waiting without hoping ------------------------------------------------------------------

/// Polls `check` every 5 ms until it returns `Some`, or panics after `deadline` naming `what`.
pub async fn eventually<T>(
    what: &str,
    deadline: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let end = Instant::now() + deadline;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < end,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Awaits `future`, failing the test if it takes longer than `deadline`.
pub async fn within<F: std::future::Future>(
    what: &str,
    deadline: Duration,
    future: F,
) -> F::Output {
    match tokio::time::timeout(deadline, future).await {
        Ok(output) => output,
        Err(_) => panic!("{what} did not finish within {deadline:?}"),
    }
}

/// The status of one destination now.
pub fn destination(engine: &Engine, cluster: &str, id: &str) -> DestinationStatus {
    engine
        .status()
        .cluster(cluster)
        .unwrap_or_else(|| panic!("no cluster `{cluster}`"))
        .destination(id)
        .unwrap_or_else(|| panic!("no destination `{id}` in `{cluster}`"))
        .clone()
}

/// Waits until a probe round of `cluster` newer than `after` (an engine-clock `last_probe`) has
/// been applied to destination `id`, and returns its status once it is settled (two reads 5 ms
/// apart agree, so the probe record and the health parts are from the same round).
pub async fn next_round(
    engine: &Engine,
    cluster: &str,
    id: &str,
    after: Option<Duration>,
) -> DestinationStatus {
    loop {
        let first = eventually("the next probe round", Duration::from_secs(5), || {
            let s = destination(engine, cluster, id);
            (s.last_probe.is_some() && s.last_probe != after).then_some(s)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let second = destination(engine, cluster, id);
        if second.last_probe == first.last_probe
            && second.active == first.active
            && second.reported == first.reported
        {
            return second;
        }
    }
}

/// A reqwest client for test traffic that ignores any proxy settings of the environment.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client")
}

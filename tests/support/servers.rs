//! Real HTTP servers on loopback for the tests to talk to:
//!
//! - [`HttpServer`]: a hyper server on `127.0.0.1:0` whose answers come from a closure and which
//!   records every request head it receives (method, path, query, headers, arrival time), the
//!   number of requests in flight and its peak, so tests can assert what the prober sent and how
//!   concurrently;
//! - [`EchoServer`]: a hyper server that answers with what it received (method, path, query,
//!   `Host`, content type, body) as JSON, after an optional delay, and holds `/slow` requests
//!   forever;
//! - [`StatusServer`]: a server on a chosen loopback address answering a settable status (the
//!   destinations DNS names point at: several loopback addresses on one port).
//!
//! Every server is shut down (listener and open connections) when dropped.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

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

// ---- echo server ------------------------------------------------------------------------------

/// A hyper server that answers every request with what it received, as JSON:
/// `{"server", "method", "path", "query", "host", "hosts", "content_type", "body"}` (`hosts`:
/// every `Host` header received).
/// `/api/systemstatus` answers a healthy payload; `/slow` never answers.
pub struct EchoServer {
    addr: SocketAddr,
    served: Arc<AtomicU64>,
    delay_ms: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl EchoServer {
    /// Starts on a free loopback port; `name` comes back as `server`.
    pub async fn start(name: &str) -> EchoServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let served = Arc::new(AtomicU64::new(0));
        let delay_ms = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(echo_loop(
            listener,
            name.to_string(),
            served.clone(),
            delay_ms.clone(),
        ));
        EchoServer {
            addr,
            served,
            delay_ms,
            task,
        }
    }

    /// Makes every request (health probes excepted) wait `delay` before it is answered; it is
    /// counted in [`served`](Self::served) when it arrives.
    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Requests answered or being held (probes not counted).
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn echo_loop(
    listener: TcpListener,
    name: String,
    served: Arc<AtomicU64>,
    delay_ms: Arc<AtomicU64>,
) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (name, served, delay_ms) = (name.clone(), served.clone(), delay_ms.clone());
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                echo(req, name.clone(), served.clone(), delay_ms.clone())
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

async fn echo(
    req: Request<Incoming>,
    name: String,
    served: Arc<AtomicU64>,
    delay_ms: Arc<AtomicU64>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() == "/api/systemstatus" {
        return Ok(Response::new(Full::new(Bytes::from_static(
            br#"{"status":"Healthy"}"#,
        ))));
    }
    served.fetch_add(1, Ordering::SeqCst);
    let delay = delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    if req.uri().path() == "/slow" {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    let header = |n: &str| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (method, path, query) = (
        req.method().to_string(),
        req.uri().path().to_string(),
        req.uri().query().map(str::to_string),
    );
    let (host, content_type) = (header("host"), header("content-type"));
    let hosts: Vec<String> = req
        .headers()
        .get_all("host")
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let json = serde_json::json!({
        "server": name,
        "method": method,
        "path": path,
        "query": query,
        "host": host,
        "hosts": hosts,
        "content_type": content_type,
        "body": String::from_utf8_lossy(&body),
    });
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(json.to_string())))
        .expect("static response parts"))
}

// ---- a health endpoint on a chosen loopback address ------------------------------------------

/// A tiny HTTP/1.1 server on a chosen address answering every request with a settable status:
/// the destinations DNS names point at (several loopback addresses on one port).
pub struct StatusServer {
    addr: SocketAddr,
    status: Arc<AtomicU16>,
    hits: Arc<AtomicU32>,
    task: tokio::task::JoinHandle<()>,
}

impl StatusServer {
    /// Binds `ip:port` (`port` 0: any) and answers `200`.
    pub async fn bind(ip: IpAddr, port: u16) -> io::Result<StatusServer> {
        let listener = tokio::net::TcpListener::bind((ip, port)).await?;
        let addr = listener.local_addr()?;
        let status = Arc::new(AtomicU16::new(200));
        let hits = Arc::new(AtomicU32::new(0));
        let (s, h) = (status.clone(), hits.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (s, h) = (s.clone(), h.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |_req| {
                        h.fetch_add(1, Ordering::Relaxed);
                        let code = s.load(Ordering::Relaxed);
                        async move {
                            let mut response = hyper::Response::new(http_body_util::Full::new(
                                hyper::body::Bytes::from_static(b"ok"),
                            ));
                            *response.status_mut() =
                                hyper::StatusCode::from_u16(code).unwrap_or_default();
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(StatusServer {
            addr,
            status,
            hits,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers `status` from now on.
    pub fn answer(&self, status: u16) {
        self.status.store(status, Ordering::Relaxed);
    }

    pub fn hits(&self) -> u32 {
        self.hits.load(Ordering::Relaxed)
    }
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Two servers on one port at 127.0.0.1 and 127.0.0.2 (what two A records of a name point at).
pub async fn status_server_pair() -> (StatusServer, StatusServer) {
    for _ in 0..20 {
        let first = StatusServer::bind([127, 0, 0, 1].into(), 0)
            .await
            .expect("bind 127.0.0.1");
        if let Ok(second) = StatusServer::bind([127, 0, 0, 2].into(), first.addr().port()).await {
            return (first, second);
        }
    }
    panic!("no port free on both 127.0.0.1 and 127.0.0.2");
}

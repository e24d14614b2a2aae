//! Servers and helpers for `tests/client.rs` (the wrapped client and the middleware):
//!
//! - [`backend`]: the examples' real hyper backend (killable, restartable on the same port);
//! - [`RawServer`]: a TCP listener that misbehaves at the byte level and records every
//!   connection it accepts (time, method, path), so a test can count the attempts a destination
//!   received even though none of them got a response;
//! - [`ClosedPort`]: a reserved port where nothing listens (every connect is refused);
//! - [`Blackhole`]: a listener whose accept queue is full, so a connect gets no answer at all
//!   (the kernel drops the SYN): what a connect timeout is for;
//! - [`EchoServer`]: a hyper server that answers with what it received (method, path, query,
//!   `Host`, content type, body) as JSON, after an optional delay, and holds `/slow` requests
//!   forever;
//! - [`ChildBackend`]: the examples' backend in a child process (this test binary run again),
//!   for faults that are signals: `SIGKILL` (a crash: the kernel closes its sockets) and
//!   `SIGSTOP`/`SIGCONT` (a freeze);
//! - [`wait_until`]: polls a condition with a deadline instead of sleeping and hoping.
//!
//! Every server binds `127.0.0.1` and stops (listener and open connections) when dropped.

#![allow(dead_code)] // not every test uses every helper

#[path = "../../examples/support/backend.rs"]
pub mod backend;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use healthpick::{DestinationStatus, Engine};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// Installs a tracing subscriber that writes to the test output (shown for failing tests):
/// healthpick at debug (every failed attempt), everything else at info, so the connection
/// pool's per-request debug lines do not flood the output.
pub fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::filter::Targets::new()
        .with_target("healthpick", tracing::Level::DEBUG)
        .with_default(tracing::Level::INFO);
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_test_writer())
        .with(filter)
        .try_init();
}

/// A reqwest client that never goes through a proxy from the environment.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client")
}

/// Polls `condition` every few milliseconds until it holds or `within` has passed; returns
/// whether it held.
pub async fn wait_until(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The status of one destination now.
pub fn destination(engine: &Engine, cluster: &str, id: &str) -> DestinationStatus {
    engine
        .status()
        .cluster(cluster)
        .unwrap_or_else(|| panic!("cluster `{cluster}` in status"))
        .destination(id)
        .unwrap_or_else(|| panic!("destination `{id}` in status"))
        .clone()
}

// ---- closed port ------------------------------------------------------------------------------

/// A loopback port where nothing listens, so connecting is refused (a dead server: a connect
/// failure, nothing sent). The port stays bound, without listening, for as long as this lives,
/// so no other test can take it over in the meantime.
pub struct ClosedPort {
    addr: SocketAddr,
    _socket: tokio::net::TcpSocket,
}

impl ClosedPort {
    /// Reserves a free loopback port.
    pub fn reserve() -> ClosedPort {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind");
        let addr = socket.local_addr().expect("local addr");
        ClosedPort {
            addr,
            _socket: socket,
        }
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

// ---- blackhole --------------------------------------------------------------------------------

/// A loopback listener that never accepts, with an accept queue of one that is already taken:
/// the kernel drops every further SYN, so a connect hangs until the client gives up (as with a
/// host that vanished from the network). Stops when dropped.
pub struct Blackhole {
    addr: SocketAddr,
    _listener: tokio::net::TcpListener,
    _filler: tokio::net::TcpStream,
}

impl Blackhole {
    /// Binds a free loopback port and fills its accept queue; checks that a further connect
    /// indeed gets no answer.
    pub async fn start() -> Blackhole {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind");
        let listener = socket.listen(0).expect("listen");
        let addr = listener.local_addr().expect("local addr");
        let filler = tokio::net::TcpStream::connect(addr)
            .await
            .expect("the one connection the queue takes");
        let probe = tokio::time::timeout(
            Duration::from_millis(300),
            tokio::net::TcpStream::connect(addr),
        )
        .await;
        assert!(
            probe.is_err(),
            "a connect to a full accept queue was answered: {probe:?}"
        );
        Blackhole {
            addr,
            _listener: listener,
            _filler: filler,
        }
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

// ---- raw misbehaving server -------------------------------------------------------------------

/// What a [`RawServer`] does with a connection once it has read the request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Closes the connection without answering (a reset before any response).
    Reset,
    /// Answers `200` with `Content-Length: 100` and closes after five bytes of body.
    TruncatedBody,
    /// Never answers; keeps the connection open.
    Hang,
    /// Answers this status with an empty body and closes.
    Status(u16),
    /// Answers this status with `Retry-After: 1` and closes.
    StatusRetryAfter(u16),
    /// Answers `200` with `Content-Length: 100`, sends five bytes of body, then never more.
    StallBody,
}

/// One connection a [`RawServer`] accepted.
#[derive(Debug, Clone)]
pub struct Hit {
    /// When it was accepted.
    pub at: Instant,
    /// Method of the request head, empty when the client sent nothing.
    pub method: String,
    /// Path (without query) of the request head, empty when the client sent nothing.
    pub path: String,
}

#[derive(Default)]
struct RawShared {
    accepts: AtomicU64,
    hits: Mutex<Vec<Hit>>,
}

/// A TCP server that reads a request head and then misbehaves per [`Mode`]; one connection is
/// one attempt, since it never keeps a connection alive for a second request.
pub struct RawServer {
    addr: SocketAddr,
    shared: Arc<RawShared>,
    task: JoinHandle<()>,
}

impl RawServer {
    /// Starts on a free loopback port.
    pub async fn start(mode: Mode) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Self::serve(listener, mode)
    }

    /// Starts on `addr`, retrying for a while: used right after a backend on that port was
    /// killed, whose listener closes once its aborted task is dropped.
    pub async fn start_at(addr: SocketAddr, mode: Mode) -> RawServer {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match TcpListener::bind(addr).await {
                Ok(listener) => return Self::serve(listener, mode),
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err(e) => panic!("cannot bind {addr} again: {e}"),
            }
        }
    }

    fn serve(listener: TcpListener, mode: Mode) -> RawServer {
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(RawShared::default());
        let task = tokio::spawn(accept_loop(listener, shared.clone(), mode));
        RawServer { addr, shared, task }
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Connections accepted so far.
    pub fn accepts(&self) -> u64 {
        self.shared.accepts.load(Ordering::SeqCst)
    }

    /// Every connection whose head was read (or that sent nothing), in order.
    pub fn hits(&self) -> Vec<Hit> {
        self.shared.hits.lock().unwrap().clone()
    }

    /// Connections whose request path was `path`.
    pub fn hits_on(&self, path: &str) -> Vec<Hit> {
        self.hits().into_iter().filter(|h| h.path == path).collect()
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<RawShared>, mode: Mode) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let at = Instant::now();
        shared.accepts.fetch_add(1, Ordering::SeqCst);
        let shared = shared.clone();
        connections.spawn(async move {
            let head = read_head(&mut stream).await;
            let mut words = head.split_whitespace();
            let method = words.next().unwrap_or_default().to_string();
            let target = words.next().unwrap_or_default();
            let path = target.split('?').next().unwrap_or_default().to_string();
            shared.hits.lock().unwrap().push(Hit { at, method, path });
            match mode {
                Mode::Reset => {}
                Mode::TruncatedBody => {
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort")
                        .await;
                    let _ = stream.flush().await;
                }
                Mode::Hang => tokio::time::sleep(Duration::from_secs(3600)).await,
                Mode::Status(status) | Mode::StatusRetryAfter(status) => {
                    let retry_after = if matches!(mode, Mode::StatusRetryAfter(_)) {
                        "retry-after: 1\r\n"
                    } else {
                        ""
                    };
                    let head = format!(
                        "HTTP/1.1 {status} Raw\r\n{retry_after}content-length: 0\r\nconnection: close\r\n\r\n"
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.flush().await;
                }
                Mode::StallBody => {
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nstall")
                        .await;
                    let _ = stream.flush().await;
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            }
            drop(stream);
        });
        while connections.try_join_next().is_some() {}
    }
}

/// Reads until the end of the request head, EOF, 8 KiB or one second; returns what was read.
async fn read_head(stream: &mut tokio::net::TcpStream) -> String {
    let mut buf = Vec::with_capacity(1024);
    let read = async {
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), read).await;
    String::from_utf8_lossy(&buf).into_owned()
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

// ---- child-process backend --------------------------------------------------------------------

/// The environment variable that makes this test binary a child backend: its value is the
/// backend's name.
const CHILD_ENV: &str = "HEALTHPICK_CHILD_BACKEND";
/// The line a child backend prints once it listens: the marker, then its URL.
const CHILD_MARKER: &str = "HEALTHPICK_CHILD_URL=";
/// The test that is a child backend's entry point (see [`run_child_backend_if_asked`]).
pub const CHILD_TEST: &str = "child_backend_process";

/// In a process started by [`ChildBackend::start`]: serves the examples' backend until killed
/// and never returns. Anywhere else: returns at once.
pub fn run_child_backend_if_asked() {
    let Ok(name) = std::env::var(CHILD_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("child runtime");
    runtime.block_on(async move {
        let server = backend::Backend::start(&name).await.expect("child backend");
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{CHILD_MARKER}{}", server.url()).expect("stdout");
        out.flush().expect("stdout");
        drop(out);
        std::future::pending::<()>().await;
    });
}

/// The examples' backend (it answers its name) in a child process: this test binary, run again
/// with only [`CHILD_TEST`]. Killed (SIGKILL) when dropped.
pub struct ChildBackend {
    child: std::process::Child,
    url: String,
}

impl ChildBackend {
    /// Starts a child backend called `name` and waits (bounded) until it listens.
    pub fn start(name: &str) -> ChildBackend {
        use std::io::BufRead;
        let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([CHILD_TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, name)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn a child backend");
        let stdout = child.stdout.take().expect("child stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                // libtest has printed `test <name> ... ` on the same line.
                if let Some(at) = line.find(CHILD_MARKER) {
                    let _ = tx.send(line[at + CHILD_MARKER.len()..].trim().to_string());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the child backend did not start listening");
        ChildBackend { child, url }
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and waits for the process to be gone (its sockets closed by the kernel).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `signal` (`"STOP"`, `"CONT"`) to the child.
    pub fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill(1)");
        assert!(status.success(), "kill -{signal} {} failed", self.pid());
        if signal == "STOP" {
            // The signal is delivered asynchronously: wait (bounded) until the kernel shows the
            // process stopped.
            let stat = format!("/proc/{}/stat", self.pid());
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while !std::fs::read_to_string(&stat).is_ok_and(|s| {
                s.rsplit(") ")
                    .next()
                    .is_some_and(|rest| rest.starts_with('T'))
            }) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the child did not stop"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Drop for ChildBackend {
    fn drop(&mut self) {
        self.kill();
    }
}

//! Servers that misbehave below HTTP, and addresses where nothing answers:
//!
//! - [`RawServer`]: a TCP listener that reads a request head and then misbehaves per [`Mode`]
//!   (no answer, a reset, a body cut short or stalled, a bare status), recording every
//!   connection it accepts (time, method, path), so a test can count the attempts a destination
//!   received even though none of them got a response;
//! - [`ClosedPort`]: a reserved port where nothing listens (every connect is refused);
//! - [`Blackhole`]: a listener whose accept queue is full, so a connect gets no answer at all
//!   (the kernel drops the SYN): what a connect timeout is for;
//! - [`FrozenServer`]: a listener that never accepts, so connections complete into its backlog
//!   and requests sit unread.
//!
//! Each stops (listener and open connections) when dropped.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

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

    /// The reserved port.
    pub fn port(&self) -> u16 {
        self.addr.port()
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
    /// Answers this head (status line and headers, ending with the blank line) and these body
    /// bytes, then closes the connection cleanly, whatever `Content-Length` promised.
    Truncating(&'static str, &'static [u8]),
    /// Answers this head and these body bytes, then sends nothing more and keeps the
    /// connection open.
    Stalling(&'static str, &'static [u8]),
}

/// The head [`Mode::TruncatedBody`] and [`Mode::StallBody`] answer with.
const HUNDRED_BYTES: &str = "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n";

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
                Mode::TruncatedBody => answer(&mut stream, HUNDRED_BYTES, b"short").await,
                Mode::Truncating(head, body) => answer(&mut stream, head, body).await,
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
                    answer(&mut stream, HUNDRED_BYTES, b"stall").await;
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                Mode::Stalling(head, body) => {
                    answer(&mut stream, head, body).await;
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            }
            drop(stream);
        });
        while connections.try_join_next().is_some() {}
    }
}

/// Writes `head` and `body` in one go (a failed write means the client went away).
async fn answer(stream: &mut tokio::net::TcpStream, head: &str, body: &[u8]) {
    let mut out = head.as_bytes().to_vec();
    out.extend_from_slice(body);
    let _ = stream.write_all(&out).await;
    let _ = stream.flush().await;
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

// ---- frozen listener --------------------------------------------------------------------------

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

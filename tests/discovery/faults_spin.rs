//! No source spins, whatever its server answers. Each source is fed answers that are errors,
//! empty, garbage, at once without blocking, history that is always gone, indexes that go
//! backwards, for a few seconds (simulated for the polling driver; real against servers on
//! loopback: a DNS server, a Consul agent, an etcd gateway, a Kubernetes API server, a watched
//! file). Each must make at most `duration / MinRefresh` requests plus a small constant, never
//! panic, keep its last good set, and be stale while its answers are bad.

#![cfg(all(
    feature = "dns",
    feature = "etcd",
    feature = "consul",
    feature = "kubernetes",
    feature = "file"
))]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use healthpick::config::{
    ConsulSourceConfig, DnsSourceConfig, EtcdSourceConfig, KubernetesSourceConfig, RefreshBounds,
};
use healthpick::discovery::consul::ConsulSource;
use healthpick::discovery::dns::DnsSource;
use healthpick::discovery::etcd::EtcdSource;
use healthpick::discovery::kubernetes::KubernetesSource;
use healthpick::discovery::{
    poll, Answer, BoxFuture, ConfigFile, PollSource, SourceError, SourceSpec,
};
use healthpick::{Endpoint, Engine, HealthEventKind};
use parking_lot::Mutex;
use proptest::prelude::*;
use serde_json::json;

const MIN_REFRESH: Duration = Duration::from_millis(200);

/// How long each server misbehaves.
const WINDOW: Duration = Duration::from_secs(2);

/// The most requests a source may make in `window`: one per `MinRefresh`, plus a few.
fn at_most(window: Duration) -> usize {
    (window.as_millis() / MIN_REFRESH.as_millis()) as usize + 3
}

fn bounds() -> RefreshBounds {
    RefreshBounds::new(MIN_REFRESH, Duration::from_secs(2))
}

fn engine() -> Engine {
    Engine::from_json(r#"{"Clusters": {"c": {}}}"#).unwrap()
}

/// The default guard: an emptying answer is held, so the last good set stays.
fn publisher(engine: &Engine, kind: &str) -> healthpick::discovery::Publisher {
    engine
        .publisher("c", SourceSpec::new(kind).kind(kind))
        .unwrap()
}

async fn until(description: &str, mut what: impl FnMut() -> bool) {
    let start = Instant::now();
    while !what() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not within 10 s: {description}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What one misbehaving run showed.
struct Seen {
    requests: usize,
    ids: Vec<String>,
    stale: bool,
}

/// Checks a run: requests within the bound, the last good set kept, stale when the answers
/// were failures.
fn check(what: &str, seen: &Seen, good: &[&str], failing: bool) {
    let most = at_most(WINDOW);
    assert!(
        seen.requests <= most,
        "{what}: {} requests in {WINDOW:?} (at most {most})",
        seen.requests
    );
    assert_eq!(seen.ids, good, "{what}: the last good set stays");
    assert_eq!(seen.stale, failing, "{what}: stale while the answers fail");
}

// ---------------------------------------------------------------------------------------------
// The polling driver (DNS and your own sources), on tokio's paused clock.

/// One answer of a scripted polling source.
#[derive(Debug, Clone, Copy)]
enum Said {
    /// `{a, b}`, valid for this many seconds (0: asked again as soon as allowed).
    Good(u64),
    Empty,
    NotFound,
    Error,
    /// Answers after a minute: longer than the driver waits.
    Hangs,
}

struct Scripted {
    answers: Mutex<VecDeque<Said>>,
    asked: AtomicUsize,
    /// What it answered, and when it was asked.
    given: Mutex<Vec<(Said, tokio::time::Instant)>>,
}

impl PollSource for Scripted {
    fn resolve(&self) -> BoxFuture<'_, Result<Answer, SourceError>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let said = {
            let mut answers = self.answers.lock();
            if answers.len() > 1 {
                answers.pop_front().unwrap()
            } else {
                answers[0]
            }
        };
        self.given.lock().push((said, tokio::time::Instant::now()));
        Box::pin(async move {
            let at = |port: u16| format!("http://127.0.0.1:{port}/").parse().unwrap();
            match said {
                Said::Good(ttl) => Ok(Answer::found(vec![
                    Endpoint::new("a", at(8001)),
                    Endpoint::new("b", at(8002)),
                ])
                .valid_for(Duration::from_secs(ttl))),
                Said::Empty => Ok(Answer::found(Vec::new()).valid_for(Duration::ZERO)),
                Said::NotFound => Ok(Answer::not_found().valid_for(Duration::ZERO)),
                Said::Error => Err(SourceError::new("SERVFAIL")),
                Said::Hangs => {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Err(SourceError::new("late"))
                }
            }
        })
    }
}

fn said() -> impl Strategy<Value = Said> {
    prop_oneof![
        (0u64..3).prop_map(Said::Good),
        Just(Said::Empty),
        Just(Said::NotFound),
        Just(Said::Error),
        Just(Said::Hangs),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any sequence of answers for 20 simulated seconds: at most one question per MinRefresh
    /// (plus a few), the last good set stays (emptying answers are held), stale exactly when
    /// the last answer that came back (or ran out of time) failed.
    #[test]
    fn the_polling_driver_never_asks_faster_than_min_refresh(
        answers in proptest::collection::vec(said(), 1..40),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let (asked, ids, stale, good) = runtime.block_on(async {
            let engine = engine();
            let scripted = Arc::new(Scripted {
                answers: Mutex::new(answers.iter().copied().collect()),
                asked: AtomicUsize::new(0),
                given: Mutex::new(Vec::new()),
            });
            let _task = poll(scripted.clone(), publisher(&engine, "scripted"), bounds());
            tokio::time::sleep(Duration::from_secs(20)).await;
            let now = tokio::time::Instant::now();
            let mut given = scripted.given.lock().clone();
            // A question still waiting for its answer (one that hangs, asked less than the
            // driver's 2 s ago) has not counted yet.
            if given.last().is_some_and(|(said, at)| matches!(said, Said::Hangs) && now - *at < Duration::from_secs(2)) {
                given.pop();
            }
            let good = given.iter().any(|(said, _)| matches!(said, Said::Good(_)));
            let failing = given.last().is_some_and(|(said, _)| matches!(said, Said::Error | Said::Hangs));
            (scripted.asked.load(Ordering::SeqCst), ids(&engine), source(&engine).stale_since.is_some(), (good, failing))
        });
        let (good, failing) = good;
        let most = (20_000 / MIN_REFRESH.as_millis()) as usize + 3;
        prop_assert!(asked <= most, "{asked} questions in 20 s: {answers:?}");
        if good {
            prop_assert_eq!(ids, ["a", "b"]);
        } else {
            prop_assert!(ids.is_empty());
        }
        prop_assert_eq!(stale, failing, "{:?}", answers);
    }
}

// ---------------------------------------------------------------------------------------------
// DNS: a UDP name server on loopback.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Dns {
    /// `127.0.0.1` (TTL 0) for A, no records for AAAA.
    Good,
    Garbage,
    ServFail,
    /// NOERROR without records.
    Empty,
    NxDomain,
    Silent,
}

struct DnsServer {
    addr: std::net::SocketAddr,
    mode: Arc<Mutex<Dns>>,
    /// A questions received.
    asked: Arc<AtomicUsize>,
}

impl DnsServer {
    async fn start() -> DnsServer {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let mode = Arc::new(Mutex::new(Dns::Good));
        let asked = Arc::new(AtomicUsize::new(0));
        let (m, a) = (mode.clone(), asked.clone());
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            loop {
                let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                    return;
                };
                let query = &buf[..n];
                if n < 12 {
                    continue;
                }
                // The question ends after its name (labels up to a zero byte), type and class.
                let mut end = 12;
                while end < n && query[end] != 0 {
                    end += usize::from(query[end]) + 1;
                }
                let end = (end + 5).min(n);
                let qtype = u16::from_be_bytes([query[end - 4], query[end - 3]]);
                if qtype == 1 {
                    a.fetch_add(1, Ordering::SeqCst);
                }
                let mode = *m.lock();
                let reply = match mode {
                    Dns::Silent => continue,
                    Dns::Garbage => vec![0xde, 0xad, 0xbe, 0xef, 1, 2, 3],
                    Dns::Good | Dns::Empty | Dns::ServFail | Dns::NxDomain => {
                        let rcode = match mode {
                            Dns::ServFail => 2,
                            Dns::NxDomain => 3,
                            _ => 0,
                        };
                        let answer = mode == Dns::Good && qtype == 1;
                        let mut r = Vec::with_capacity(end + 16);
                        r.extend_from_slice(&query[..2]);
                        r.extend_from_slice(&[
                            0x81,
                            0x80 | rcode,
                            0,
                            1,
                            0,
                            u8::from(answer),
                            0,
                            0,
                            0,
                            0,
                        ]);
                        r.extend_from_slice(&query[12..end]);
                        if answer {
                            r.extend_from_slice(&[
                                0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 127, 0, 0, 1,
                            ]);
                        }
                        r
                    }
                };
                let _ = socket.send_to(&reply, from).await;
            }
        });
        DnsServer { addr, mode, asked }
    }
}

/// Against a DNS server that answers garbage, SERVFAIL, no records, NXDOMAIN or nothing: at
/// most one lookup per MinRefresh (each lookup asks A once, and once more after a failure), the
/// last good set stays, stale while lookups fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dns_source_never_spins() {
    let run = |mode: Dns| async move {
        let server = DnsServer::start().await;
        let engine = engine();
        let config = DnsSourceConfig::address("web.test", 8080)
            .servers(vec![server.addr])
            .timeout(Duration::from_millis(300));
        let _task = poll(
            Arc::new(DnsSource::new(&config).unwrap()),
            publisher(&engine, "dns"),
            bounds(),
        );
        until("the good answer", || ids(&engine) == ["127.0.0.1:8080"]).await;
        *server.mode.lock() = mode;
        let before = server.asked.load(Ordering::SeqCst);
        tokio::time::sleep(WINDOW).await;
        // Each lookup asks A at most twice (a retry after a failure or a timeout).
        let lookups = (server.asked.load(Ordering::SeqCst) - before).div_ceil(2);
        Seen {
            requests: lookups,
            ids: ids(&engine),
            stale: source(&engine).stale_since.is_some(),
        }
    };
    let modes = [
        (Dns::Garbage, true),
        (Dns::ServFail, true),
        (Dns::Empty, false),
        (Dns::NxDomain, false),
        (Dns::Silent, true),
        (Dns::Good, false),
    ];
    let seen = futures::future::join_all(modes.iter().map(|(mode, _)| run(*mode))).await;
    for ((mode, failing), seen) in modes.iter().zip(&seen) {
        check(&format!("{mode:?}"), seen, &["127.0.0.1:8080"], *failing);
    }
}

// ---------------------------------------------------------------------------------------------
// Consul: an agent on loopback.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Consul {
    /// Blocking queries, as Consul answers them.
    Normal,
    Fail,
    Garbage,
    /// An empty list of instances.
    Empty,
    /// No `X-Consul-Index`.
    NoIndex,
    /// At once, with an index that moves on every answer (a proxy that ignores `wait`).
    AtOnceMoving,
    /// At once, with an index that goes back on every answer.
    AtOnceBackwards,
}

#[derive(Clone)]
struct Agent {
    mode: Arc<Mutex<Consul>>,
    index: Arc<Mutex<u64>>,
    asked: Arc<AtomicUsize>,
}

async fn consul_answer(
    State(agent): State<Agent>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    agent.asked.fetch_add(1, Ordering::SeqCst);
    let mode = *agent.mode.lock();
    let entry = json!([{
        "Node": {"Node": "n1", "Address": "127.0.0.1"},
        "Service": {"ID": "web", "Service": "web", "Port": 8080},
        "Checks": [],
    }]);
    let index = {
        let mut index = agent.index.lock();
        match mode {
            Consul::AtOnceMoving => *index += 1,
            Consul::AtOnceBackwards => *index = index.saturating_sub(1).max(2),
            _ => {}
        }
        *index
    };
    let (status, body) = match mode {
        Consul::Fail => (500, "rpc error: No cluster leader".to_string()),
        Consul::Garbage => (200, "<html>proxy error</html>".to_string()),
        Consul::Empty => (200, "[]".to_string()),
        Consul::Normal => {
            let asked: Option<u64> = query.get("index").and_then(|i| i.parse().ok());
            if asked == Some(index) {
                // Nothing changes: the query is held for its wait.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            (200, entry.to_string())
        }
        _ => (200, entry.to_string()),
    };
    let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
    if mode != Consul::NoIndex {
        response
            .headers_mut()
            .insert("X-Consul-Index", index.to_string().parse().unwrap());
    }
    response
}

/// Against a Consul agent that fails, answers garbage, no instances, no index, or answers at
/// once with an index that moves or goes back: at most one query per MinRefresh, the last good
/// set stays, stale while the answers fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consul_source_never_spins() {
    let run = |mode: Consul| async move {
        let agent = Agent {
            mode: Arc::new(Mutex::new(Consul::Normal)),
            index: Arc::new(Mutex::new(1000)),
            asked: Arc::new(AtomicUsize::new(0)),
        };
        let app = Router::new()
            .route("/v1/health/service/web", get(consul_answer))
            .with_state(agent.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let engine = engine();
        let config = ConsulSourceConfig::new("web")
            .address(url.parse().unwrap())
            .wait(Duration::from_secs(1))
            .timeout(Duration::from_millis(500));
        let _task = ConsulSource::new(&config)
            .unwrap()
            .refresh(bounds())
            .start(publisher(&engine, "consul"));
        until("the good answer", || ids(&engine) == ["n1/web"]).await;
        *agent.mode.lock() = mode;
        let before = agent.asked.load(Ordering::SeqCst);
        tokio::time::sleep(WINDOW).await;
        Seen {
            requests: agent.asked.load(Ordering::SeqCst) - before,
            ids: ids(&engine),
            stale: source(&engine).stale_since.is_some(),
        }
    };
    let modes = [
        (Consul::Fail, true),
        (Consul::Garbage, true),
        (Consul::Empty, false),
        (Consul::NoIndex, true),
        (Consul::AtOnceMoving, false),
        (Consul::AtOnceBackwards, false),
        (Consul::Normal, false),
    ];
    let seen = futures::future::join_all(modes.iter().map(|(mode, _)| run(*mode))).await;
    for ((mode, failing), seen) in modes.iter().zip(&seen) {
        check(&format!("{mode:?}"), seen, &["n1/web"], *failing);
    }
}

// ---------------------------------------------------------------------------------------------
// etcd: a JSON gateway on loopback (`kv/range`, `watch`).

#[derive(Debug, Clone, Copy, PartialEq)]
enum Etcd {
    /// A watch that stays open.
    Normal,
    Fail,
    Garbage,
    /// Every watch is cancelled at once: history compacted past it.
    Compacted,
    /// Every watch is created at a revision behind the one read.
    Behind,
    /// Every watch is created, then ends at once.
    EndsAtOnce,
    /// Every watch is created, then says garbage.
    WatchGarbage,
}

#[derive(Clone)]
struct Gateway {
    mode: Arc<Mutex<Etcd>>,
    asked: Arc<AtomicUsize>,
}

fn result(value: serde_json::Value) -> String {
    format!("{}\n", json!({ "result": value }))
}

async fn etcd_range(State(gateway): State<Gateway>) -> Response {
    gateway.asked.fetch_add(1, Ordering::SeqCst);
    let b64 = |s: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    match *gateway.mode.lock() {
        Etcd::Fail => (StatusCode::SERVICE_UNAVAILABLE, "etcdserver: no leader").into_response(),
        Etcd::Garbage => (StatusCode::OK, "<html>").into_response(),
        _ => axum::Json(json!({
            "header": {"revision": "100"},
            "kvs": [{"key": b64("/svc/a"), "value": b64(r#"{"Address": "http://127.0.0.1:8001/"}"#),
                     "mod_revision": "90"}],
        }))
        .into_response(),
    }
}

async fn etcd_watch(State(gateway): State<Gateway>) -> Response {
    gateway.asked.fetch_add(1, Ordering::SeqCst);
    let created =
        |revision: &str| result(json!({"header": {"revision": revision}, "created": true}));
    let lines: Vec<String> = match *gateway.mode.lock() {
        Etcd::Fail => {
            return (StatusCode::SERVICE_UNAVAILABLE, "etcdserver: no leader").into_response()
        }
        Etcd::Garbage => vec!["<html>\n".into()],
        Etcd::Compacted => vec![
            created("100"),
            result(
                json!({"header": {"revision": "100"}, "canceled": true, "compact_revision": "150"}),
            ),
        ],
        Etcd::Behind => vec![created("5")],
        Etcd::EndsAtOnce => vec![created("100")],
        Etcd::WatchGarbage => vec![created("100"), "{\"result\": {\"hea\n".into()],
        Etcd::Normal => {
            // Open until the gateway starts to misbehave (the server goes away).
            let mode = gateway.mode.clone();
            let open = futures::stream::iter([Ok::<_, Infallible>(created("100"))]).chain(
                futures::stream::unfold(mode, |mode| async move {
                    while *mode.lock() == Etcd::Normal {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    None::<(Result<String, Infallible>, _)>
                }),
            );
            return Response::new(Body::from_stream(open));
        }
    };
    Response::new(Body::from_stream(futures::stream::iter(
        lines.into_iter().map(Ok::<_, Infallible>),
    )))
}

use crate::support::status::{ids, source};
use futures::StreamExt as _;

/// Against an etcd gateway that fails, answers garbage, cancels every watch (compacted),
/// creates it behind the revision read, or ends it (or breaks it) at once: at most one request
/// per MinRefresh, the last good set stays, stale while the answers fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_source_never_spins() {
    let run = |mode: Etcd| async move {
        let gateway = Gateway {
            mode: Arc::new(Mutex::new(Etcd::Normal)),
            asked: Arc::new(AtomicUsize::new(0)),
        };
        let app = Router::new()
            .route("/v3/kv/range", post(etcd_range))
            .route("/v3/watch", post(etcd_watch))
            .with_state(gateway.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let engine = engine();
        let config = EtcdSourceConfig::new(vec![url.parse().unwrap()], "/svc/")
            .timeout(Duration::from_millis(500));
        let _task = EtcdSource::new(&config)
            .unwrap()
            .refresh(bounds())
            .start(publisher(&engine, "etcd"));
        until("the good answer", || ids(&engine) == ["a"]).await;
        *gateway.mode.lock() = mode;
        let before = gateway.asked.load(Ordering::SeqCst);
        tokio::time::sleep(WINDOW).await;
        Seen {
            requests: gateway.asked.load(Ordering::SeqCst) - before,
            ids: ids(&engine),
            stale: source(&engine).stale_since.is_some(),
        }
    };
    let modes = [
        (Etcd::Fail, true),
        (Etcd::Garbage, true),
        (Etcd::Compacted, true),
        (Etcd::Behind, true),
        (Etcd::EndsAtOnce, true),
        (Etcd::WatchGarbage, true),
        (Etcd::Normal, false),
    ];
    let seen = futures::future::join_all(modes.iter().map(|(mode, _)| run(*mode))).await;
    for ((mode, failing), seen) in modes.iter().zip(&seen) {
        check(&format!("{mode:?}"), seen, &["a"], *failing);
    }
}

// ---------------------------------------------------------------------------------------------
// Kubernetes: the fake API server of `tests/kube_support`.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kube {
    Normal,
    Fail,
    Garbage,
    /// `{}`: JSON, but neither a list nor an event.
    NotAList,
    GoneEvent,
    GoneStatus,
    EndsAtOnce,
}

/// Against an API server that fails, answers garbage or JSON that is not a list, answers every
/// watch with 410 (an event or a status), or ends every watch at once: at most one request per
/// MinRefresh, the last good set stays, stale while the answers fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubernetes_source_never_spins() {
    use crate::support::kubernetes::{ready, slice, Expiry, FakeApiServer};
    let run = |mode: Kube| async move {
        let fake = FakeApiServer::start().await;
        fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
        let engine = engine();
        let config = KubernetesSourceConfig::new("web").port_name("http");
        let _task = KubernetesSource::with_client(fake.client(Duration::from_secs(30)), &config)
            .unwrap()
            .refresh(bounds())
            .start(publisher(&engine, "kubernetes"));
        until("the good answer", || ids(&engine) == ["pod-1"]).await;
        until("watching", || fake.open_watches() == 1).await;
        match mode {
            Kube::Normal => {}
            Kube::Fail => fake.fail_with(Some(500)),
            Kube::Garbage => fake.answer_raw(Some("<html>proxy error</html>")),
            Kube::NotAList => fake.answer_raw(Some("{}")),
            Kube::GoneEvent => fake.expire_every_watch(Some(Expiry::Event)),
            Kube::GoneStatus => fake.expire_every_watch(Some(Expiry::Status)),
            Kube::EndsAtOnce => fake.end_watches_at_once(true),
        }
        let before = fake.requests().len();
        fake.close_watches();
        tokio::time::sleep(WINDOW).await;
        Seen {
            requests: fake.requests().len() - before,
            ids: ids(&engine),
            stale: source(&engine).stale_since.is_some(),
        }
    };
    let modes = [
        (Kube::Fail, true),
        (Kube::Garbage, true),
        (Kube::NotAList, true),
        (Kube::GoneEvent, true),
        (Kube::GoneStatus, true),
        (Kube::EndsAtOnce, true),
        (Kube::Normal, false),
    ];
    let seen = futures::future::join_all(modes.iter().map(|(mode, _)| run(*mode))).await;
    for ((mode, failing), seen) in modes.iter().zip(&seen) {
        check(&format!("{mode:?}"), seen, &["pod-1"], *failing);
    }
}

// ---------------------------------------------------------------------------------------------
// A watched file, rewritten with garbage as fast as possible.

/// A file rewritten every few milliseconds with garbage, an empty file, a half-written
/// document: it is read at most once per debounce delay (plus a few), the configuration in force
/// stays, and the status says the last version was refused; a good version is loaded again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_file_rewritten_in_a_loop_never_makes_it_spin() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("appsettings.json");
    let good =
        r#"{"Clusters": {"c": {"Destinations": {"a": {"Address": "http://127.0.0.1:8001/"}}}}}"#;
    std::fs::write(&path, good).unwrap();
    let engine = Engine::default();
    let debounce = MIN_REFRESH;
    let _watch = ConfigFile::new(&path)
        .debounce(debounce)
        .watch(&engine)
        .unwrap();
    let mut events = engine.subscribe();
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || {
            let bad = [
                "{ not json",
                "",
                r#"{"Clusters": {"c": {"Destinations": {"a": {"Addr"#,
            ];
            let start = Instant::now();
            let mut i = 0;
            while start.elapsed() < WINDOW {
                std::fs::write(
                    &path,
                    format!("{}{}", bad[i % bad.len()], " ".repeat(i % 7)),
                )
                .unwrap();
                i += 1;
                std::thread::sleep(Duration::from_millis(3));
            }
            std::fs::write(&path, bad[0]).unwrap();
            i
        })
    };
    let writes = tokio::task::spawn_blocking(move || writer.join().unwrap())
        .await
        .unwrap();
    // The last write's debounce and read.
    tokio::time::sleep(debounce * 3).await;
    let mut reads = 0;
    while let Ok(event) = events.try_recv() {
        if matches!(event.kind, HealthEventKind::ConfigRejected { .. }) {
            reads += 1;
        }
    }
    let most = ((WINDOW + debounce * 3).as_millis() / debounce.as_millis()) as usize + 3;
    assert!(
        (1..=most).contains(&reads),
        "{reads} refused reads for {writes} writes (at most {most})"
    );
    assert_eq!(ids(&engine), ["a"], "the configuration in force stays");
    assert!(engine.status().config.last_error.is_some());
    std::fs::write(&path, good.replace("8001", "8002")).unwrap();
    until("the good version loaded", || {
        engine.status().config.last_error.is_none()
            && engine.status().clusters[0].destinations[0].address == "http://127.0.0.1:8002/"
    })
    .await;
}

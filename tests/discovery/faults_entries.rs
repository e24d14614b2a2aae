//! A bad discovered entry is left out alone: it never blocks its neighbours and never becomes a
//! destination somewhere else. Every endpoint a source builds is one the engine accepts; an entry
//! that cannot be one is left out (with a warning naming it) while the rest of the answer
//! applies. Through the public parsers, and through the sources against a fake Consul agent on
//! loopback and a real etcd.

#![cfg(all(feature = "consul", feature = "etcd"))]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::status::{ids, source};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use healthpick::config::{
    ConsulSourceConfig, EtcdSourceConfig, GuardMode, GuardPolicy, RefreshBounds,
};
use healthpick::discovery::consul::{parse_entries, ConsulSource};
use healthpick::discovery::etcd::{parse_value, EtcdSource};
use healthpick::discovery::{SourceSpec, SourceTask};
use healthpick::{Endpoint, Engine};
use parking_lot::Mutex;
use serde_json::{json, Value};

fn consul_entry(node: &str, address: &str, port: u32) -> Value {
    json!({
        "Node": {"Node": node, "Address": "10.9.9.9", "Datacenter": "dc1"},
        "Service": {"ID": "web", "Service": "web", "Address": address, "Port": port},
        "Checks": [{"CheckID": "serfHealth", "Status": "passing"}],
    })
}

/// Whether the engine takes `endpoints` as one source's full set.
fn engine_accepts(endpoints: &[Endpoint]) -> Result<(), String> {
    let engine = Engine::from_json(r#"{"Clusters": {"c": {}}}"#).unwrap();
    engine
        .set_destinations("c", "s", endpoints.to_vec())
        .map_err(|e| e.to_string())
}

/// Addresses that are not a host (a path, a query, a fragment, a user, a backslash, a port of
/// their own), a host of 254 bytes, or a URL over 2,048 bytes: each entry is an error naming its
/// key; the good entry beside them is a destination at exactly its host and port; whatever is
/// returned, the engine accepts.
#[test]
fn a_consul_address_that_is_not_a_host_is_left_out() {
    let bad = [
        "10.0.0.1/x",
        "10.0.0.1?x",
        "10.0.0.1#x",
        "a@b",
        "a\\b",
        "10.0.0.1:9000",
        "[fd00::1]/x",
        &"h".repeat(254),
        &format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(62)
        ),
    ];
    let mut entries: Vec<Value> = bad
        .iter()
        .enumerate()
        .map(|(i, address)| consul_entry(&format!("bad{i}"), address, 8080))
        .collect();
    entries.push(consul_entry("good", "10.0.0.2", 8080));
    entries.push(consul_entry("v6", "fd00::2", 8080));
    entries.push(consul_entry("name", "web-1.node.consul", 8080));
    let body = Value::from(entries).to_string();
    let (endpoints, errors) = parse_entries(body.as_bytes(), "http", None).unwrap();
    let addresses: Vec<&str> = endpoints.iter().map(|e| e.address().as_str()).collect();
    assert_eq!(
        addresses,
        [
            "http://10.0.0.2:8080/",
            "http://[fd00::2]:8080/",
            "http://web-1.node.consul:8080/"
        ]
    );
    assert_eq!(errors.len(), bad.len(), "{errors:?}");
    for (i, error) in errors.iter().enumerate() {
        assert!(
            error.to_string().contains(&format!("bad{i}/web")),
            "{error}"
        );
    }
    engine_accepts(&endpoints).unwrap();
}

/// An etcd value whose `Address` is under 2,048 bytes as written but not once parsed is not a
/// destination (the value parser and the engine judge length the same way).
#[test]
fn an_etcd_address_too_long_once_parsed_is_not_a_destination() {
    let long = format!("http://h/{}", "é".repeat(400));
    assert!(long.len() < 2048);
    let value = json!({ "Address": long }).to_string();
    let error = parse_value("/svc/a", "a", value.as_bytes()).unwrap_err();
    assert!(error.to_string().contains("2409 bytes"), "{error}");
    let fits = json!({ "Address": format!("http://h/{}", "é".repeat(200)) }).to_string();
    let endpoint = parse_value("/svc/b", "b", fits.as_bytes()).unwrap();
    engine_accepts(&[endpoint]).unwrap();
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

fn engine() -> Engine {
    Engine::from_json(r#"{"Clusters": {"web": {}}}"#).unwrap()
}

/// A Consul agent that answers every query at once with the entries of the datacenter it
/// names (`dc1` without one), and an index that moves on whenever they change.
#[derive(Clone, Default)]
struct Agent {
    state: Arc<Mutex<Answers>>,
}

/// The agent's index and its entries by datacenter.
#[derive(Default)]
struct Answers {
    index: u64,
    entries: HashMap<String, Vec<Value>>,
}

impl Agent {
    async fn start(&self) -> String {
        let app = Router::new()
            .route("/v1/health/service/web", get(answer))
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    fn set(&self, dc: &str, entries: Vec<Value>) {
        let mut state = self.state.lock();
        state.index += 1;
        state.entries.insert(dc.to_string(), entries);
    }
}

async fn answer(
    State(agent): State<Agent>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let state = agent.state.lock();
    let dc = query.get("dc").cloned().unwrap_or_else(|| "dc1".into());
    let entries = state.entries.get(&dc).cloned().unwrap_or_default();
    let mut response = axum::Json(entries).into_response();
    response.headers_mut().insert(
        "X-Consul-Index",
        (state.index + 1).to_string().parse().unwrap(),
    );
    response
}

fn consul(engine: &Engine, url: &str, datacenters: &[&str]) -> SourceTask {
    let publisher = engine
        .publisher(
            "web",
            SourceSpec::new("consul")
                .kind("consul")
                .guard(GuardPolicy::new(GuardMode::Immediately)),
        )
        .unwrap();
    let config = ConsulSourceConfig::new("web")
        .address(url.parse().unwrap())
        .datacenters(datacenters.iter().map(|d| d.to_string()).collect())
        .wait(Duration::from_secs(1))
        .timeout(Duration::from_millis(500));
    ConsulSource::new(&config)
        .unwrap()
        .refresh(RefreshBounds::new(Duration::from_millis(50), Duration::from_secs(1)).jitter(0.0))
        .start(publisher)
}

/// One registration with a 254-byte host among good ones: the good ones apply and keep
/// following the agent, and the source is not stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_consul_registration_does_not_block_the_service() {
    let agent = Agent::default();
    let url = agent.start().await;
    agent.set(
        "dc1",
        vec![
            consul_entry("n1", "127.0.0.1", 8001),
            consul_entry("bad", &"h".repeat(254), 8002),
        ],
    );
    let engine = engine();
    let _task = consul(&engine, &url, &[]);
    until("n1 applied", || ids(&engine) == ["n1/web"]).await;
    agent.set(
        "dc1",
        vec![
            consul_entry("n1", "127.0.0.1", 8001),
            consul_entry("bad", &"h".repeat(254), 8002),
            consul_entry("n2", "127.0.0.1", 8003),
        ],
    );
    until("n2 applied beside the bad one", || {
        ids(&engine) == ["n1/web", "n2/web"]
    })
    .await;
    assert!(
        source(&engine).stale_since.is_none(),
        "{:?}",
        source(&engine)
    );
}

/// Two datacenters with the same node and service id: two destinations, one per datacenter,
/// with keys that cannot collide; the publication of their union is never refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_node_and_id_in_two_datacenters_are_two_destinations() {
    let agent = Agent::default();
    let url = agent.start().await;
    agent.set("eu-west", vec![consul_entry("n1", "127.0.0.1", 8001)]);
    agent.set("eu-central", vec![consul_entry("n1", "127.0.0.2", 8001)]);
    let engine = engine();
    let _task = consul(&engine, &url, &["eu-west", "eu-central"]);
    until("both datacenters", || ids(&engine).len() == 2).await;
    let status = engine.status();
    let tiers: HashMap<String, (u32, String)> = status.clusters[0]
        .destinations
        .iter()
        .map(|d| (d.address.clone(), (d.tier, d.id.clone())))
        .collect();
    assert_eq!(tiers["http://127.0.0.1:8001/"].0, 0);
    assert_eq!(tiers["http://127.0.0.2:8001/"].0, 1);
    assert!(
        source(&engine).stale_since.is_none(),
        "{:?}",
        source(&engine)
    );
    // A node whose name looks like another datacenter's key does not collide either.
    agent.set(
        "eu-west",
        vec![
            consul_entry("n1", "127.0.0.1", 8001),
            consul_entry("eu-central/n1", "127.0.0.3", 8001),
        ],
    );
    until("three", || ids(&engine).len() == 3).await;
    assert!(
        source(&engine).stale_since.is_none(),
        "{:?}",
        source(&engine)
    );
}

/// An etcd value too long once parsed is left out with a warning; the rest of the prefix
/// applies and keeps updating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_etcd_value_does_not_block_the_prefix() {
    let Some(etcd) = crate::support::etcd::Etcd::start() else {
        return;
    };
    let prefix = "/services/web/";
    etcd.put_destination(&format!("{prefix}a"), "http://127.0.0.1:8001/");
    etcd.put(
        &format!("{prefix}long"),
        &json!({ "Address": format!("http://h/{}", "é".repeat(400)) }).to_string(),
    );
    let engine = engine();
    let publisher = engine
        .publisher(
            "web",
            SourceSpec::new("etcd")
                .kind("etcd")
                .guard(GuardPolicy::new(GuardMode::Immediately)),
        )
        .unwrap();
    let config = EtcdSourceConfig::new(vec![etcd.url().parse().unwrap()], prefix)
        .timeout(Duration::from_secs(2));
    let _task = EtcdSource::new(&config)
        .unwrap()
        .refresh(RefreshBounds::new(Duration::from_millis(200), Duration::from_secs(5)).jitter(0.0))
        .start(publisher);
    until("a applied", || ids(&engine) == ["a"]).await;
    etcd.put_destination(&format!("{prefix}b"), "http://127.0.0.1:8002/");
    until("b applied", || ids(&engine) == ["a", "b"]).await;
    assert!(
        source(&engine).stale_since.is_none(),
        "{:?}",
        source(&engine)
    );
}

/// A polling source (your own, or DNS) whose answer has entries the engine would refuse: a
/// weight that is not a number, a key given twice, an address too long. They are left out and
/// the rest of the answer applies, answer after answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polling_source_answer_applies_without_its_bad_entries() {
    use healthpick::discovery::{poll, Answer, BoxFuture, PollSource, SourceError};

    struct Mixed;
    impl PollSource for Mixed {
        fn resolve(&self) -> BoxFuture<'_, Result<Answer, SourceError>> {
            Box::pin(async {
                let at = |port: u16| format!("http://127.0.0.1:{port}/").parse().unwrap();
                let long = format!("http://127.0.0.1/{}", "p".repeat(2100))
                    .parse()
                    .unwrap();
                Ok(Answer::found(vec![
                    Endpoint::new("good", at(8001)),
                    Endpoint::new("nan", at(8002)).weight(f64::NAN),
                    Endpoint::new("GOOD", at(8003)),
                    Endpoint::new("long", long),
                    Endpoint::new("also-good", at(8004)),
                ]))
            })
        }
    }
    let engine = engine();
    let publisher = engine.publisher("web", SourceSpec::new("mine")).unwrap();
    let _task = poll(
        Arc::new(Mixed),
        publisher,
        RefreshBounds::new(Duration::from_millis(100), Duration::from_millis(100)),
    );
    until("the good ones applied", || {
        ids(&engine) == ["also-good", "good"]
    })
    .await;
    let status = source(&engine);
    assert!(status.stale_since.is_none(), "{status:?}");
    assert_eq!(
        engine.status().clusters[0]
            .destination("good")
            .unwrap()
            .address,
        "http://127.0.0.1:8001/",
        "the first of two entries with the same key stays"
    );
}

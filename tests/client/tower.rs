//! The tower layer and the discovery stream (feature `tower`), against real HTTP servers on
//! 127.0.0.1 through a hyper-util client:
//!
//! - routing: a cluster authority goes to a destination (its base path kept, its Host set), any
//!   other authority passes through, strict routing refuses a misspelt cluster;
//! - failover through the shared failover step: a refused connection and a silent destination
//!   are retried elsewhere, gateway statuses too (never the same destination twice; the last
//!   response when nothing is left), a POST is sent once, `NoReplay` sends once;
//! - the response body keeps the destination in flight until it ends, and its outcome is
//!   reported then;
//! - the discovery stream's inserts and removes follow health changes, tier failover and
//!   published destinations, and tower's own `Balance` over it routes only to the best group.
//!
//! Every wait is bounded; no test sleeps and hopes.
#![cfg(feature = "tower")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use healthpick::tower::{
    client_error, AttemptTimeout, Discovered, HealthPickLayer, HealthPickService, Retryable,
};
use healthpick::{
    AttemptError, ClientError, Destination, Endpoint, Engine, PickError, ProbeResult,
    RequestOutcome,
};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tower::discover::Change;
use tower::{BoxError, Service, ServiceExt};

use crate::support::faulty_servers::{ClosedPort, Mode, RawServer};
use crate::support::servers::{HttpServer, Reply};
use crate::support::status::destination;
use crate::support::waits::within;

type Http = Client<HttpConnector, Full<Bytes>>;

fn http() -> Http {
    Client::builder(TokioExecutor::new()).build_http()
}

fn routed(engine: &Engine) -> HealthPickService<Http> {
    tower::Layer::layer(&HealthPickLayer::new(engine.clone()), http())
}

fn get(uri: &str) -> Request<Full<Bytes>> {
    Request::get(uri).body(Full::default()).expect("request")
}

/// Cluster `c` (FirstAlphabetical, so the first pick is known) with passive checks on.
fn config(destinations: &[(&str, String)]) -> String {
    let list = destinations
        .iter()
        .map(|(id, address)| format!(r#""{id}": {{ "Address": "{address}" }}"#))
        .collect::<Vec<_>>()
        .join(",");
    format!(
        r#"{{"Clusters": {{"c": {{ "LoadBalancingPolicy": "FirstAlphabetical",
            "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
            "Destinations": {{ {list} }} }} }} }}"#
    )
}

fn engine(destinations: &[(&str, String)]) -> Engine {
    Engine::from_json(&config(destinations)).expect("config")
}

/// Request outcomes as the engine received them: (destination, outcome).
type Seen = Arc<Mutex<Vec<(String, RequestOutcome)>>>;

struct Outcomes(Seen);

impl healthpick::observer::Observer for Outcomes {
    fn request_completed(&self, _: Duration, _: &str, destination: &str, outcome: RequestOutcome) {
        self.0
            .lock()
            .unwrap()
            .push((destination.to_string(), outcome));
    }
}

/// [`engine`], with every reported outcome recorded.
fn observed(destinations: &[(&str, String)]) -> (Engine, Seen) {
    let seen = Seen::default();
    let engine = Engine::builder()
        .observer(Arc::new(Outcomes(seen.clone())))
        .build();
    engine.load_json(&config(destinations)).expect("config");
    (engine, seen)
}

fn outcomes(seen: &Seen) -> Vec<(String, RequestOutcome)> {
    seen.lock().unwrap().clone()
}

fn outcome(id: &str, outcome: RequestOutcome) -> (String, RequestOutcome) {
    (id.to_string(), outcome)
}

async fn body_text<B>(response: Response<B>) -> String
where
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

fn request_error(error: &BoxError) -> (&str, Vec<&AttemptError>) {
    match client_error(error) {
        Some(ClientError::Request { cluster, attempts }) => (
            cluster.as_str(),
            attempts.iter().map(|a| &a.error).collect(),
        ),
        other => panic!("expected a request error, got {other:?} ({error})"),
    }
}

#[tokio::test]
async fn a_cluster_authority_is_routed_with_base_path_query_and_host_other_authorities_pass() {
    let server = HttpServer::start(|seen| Reply::text(200, seen.path.clone())).await;
    let engine = Engine::from_json(&format!(
        r#"{{"Clusters": {{"payments": {{ "Destinations": {{
            "eu-1": {{ "Address": "{}v1/", "Host": "payments.internal" }} }} }} }} }}"#,
        server.url()
    ))
    .unwrap();
    let service = routed(&engine);

    let response = service
        .clone()
        .oneshot(get("http://payments/api/orders?id=7"))
        .await
        .expect("routed");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body_text(response).await, "/v1/api/orders");
    let seen = server.recorder().requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].query.as_deref(), Some("id=7"));
    assert_eq!(seen[0].header("host"), Some("payments.internal"));

    // Not a cluster: passed to the inner client unchanged.
    let direct = service
        .oneshot(get(&server.url_for("/direct")))
        .await
        .expect("passed through");
    assert_eq!(body_text(direct).await, "/direct");
    assert_eq!(server.count(), 2);
}

#[tokio::test]
async fn strict_routing_refuses_a_cluster_like_authority_that_names_no_cluster() {
    let closed = ClosedPort::reserve();
    let engine = engine(&[("a", closed.url())]);
    let strict = tower::Layer::layer(
        &HealthPickLayer::builder(engine.clone())
            .strict_routing(true)
            .build(),
        http(),
    );
    let error = strict
        .oneshot(get("http://paymnts/api"))
        .await
        .expect_err("unknown cluster");
    match client_error(&error) {
        Some(ClientError::Pick(PickError::UnknownCluster { cluster })) => {
            assert_eq!(cluster, "paymnts")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_refused_connection_is_retried_elsewhere_and_reported_a_post_is_sent_once() {
    let live = HttpServer::start(|_| Reply::text(200, "b")).await;
    let dead = ClosedPort::reserve();
    let (engine, seen) = observed(&[("a-dead", dead.url()), ("b-live", live.url())]);
    let service = routed(&engine);

    let response = service.clone().oneshot(get("http://c/x")).await.unwrap();
    assert_eq!(body_text(response).await, "b");
    assert_eq!(live.count(), 1);
    assert_eq!(
        outcomes(&seen),
        [
            outcome("a-dead", RequestOutcome::TransportFailure),
            outcome("b-live", RequestOutcome::Status(200)),
        ],
        "the refused attempt and the answer were reported"
    );

    // A POST is not retryable: its one attempt is refused and the call fails, naming it.
    let post = Request::post("http://c/x")
        .body(Full::new(Bytes::from_static(b"order")))
        .unwrap();
    let error = service.clone().oneshot(post).await.expect_err("sent once");
    let (cluster, attempts) = request_error(&error);
    assert_eq!(cluster, "c");
    assert_eq!(attempts.len(), 1);
    assert!(attempts[0].is_connect(), "{}", attempts[0]);
    assert!(matches!(attempts[0], AttemptError::Service(_)));
    assert_eq!(live.count(), 1);

    // Marked retryable, it goes on to b-live.
    let mut post = Request::post("http://c/x")
        .body(Full::new(Bytes::from_static(b"order")))
        .unwrap();
    post.extensions_mut().insert(Retryable);
    let response = service.oneshot(post).await.expect("retried");
    assert_eq!(body_text(response).await, "b");
    assert_eq!(live.count(), 2);
}

#[tokio::test]
async fn every_attempt_failing_lists_each_destination_once() {
    let (a, b) = (ClosedPort::reserve(), ClosedPort::reserve());
    let engine = engine(&[("a", a.url()), ("b", b.url())]);
    let error = routed(&engine)
        .oneshot(get("http://c/x"))
        .await
        .expect_err("nothing answers");
    let ClientError::Request { attempts, .. } = client_error(&error).unwrap() else {
        panic!("{error}");
    };
    let tried: Vec<&str> = attempts.iter().map(|a| a.destination.as_str()).collect();
    assert_eq!(tried, ["a", "b"]);
    assert!(attempts.iter().all(|a| a.error.is_connect()));
}

#[tokio::test]
async fn a_silent_destination_times_out_and_the_call_fails_over() {
    let silent = RawServer::start(Mode::Hang).await;
    let live = HttpServer::start(|_| Reply::text(200, "live")).await;
    let (engine, seen) = observed(&[("a-silent", silent.url()), ("b-live", live.url())]);
    let mut request = get("http://c/x");
    request
        .extensions_mut()
        .insert(AttemptTimeout(Duration::from_millis(200)));
    let response = within(
        "the call",
        Duration::from_secs(5),
        routed(&engine).oneshot(request),
    )
    .await
    .expect("failed over");
    assert_eq!(body_text(response).await, "live");
    assert_eq!(
        outcomes(&seen)[0],
        outcome("a-silent", RequestOutcome::TransportFailure),
        "the timeout is a transport failure"
    );
}

#[tokio::test]
async fn gateway_statuses_are_retried_on_another_destination_and_the_last_one_returned() {
    let a = HttpServer::start(|_| Reply::text(503, "a")).await;
    let b = HttpServer::start(|_| Reply::text(503, "b")).await;
    let both = engine(&[("a", a.url()), ("b", b.url())]);
    let response = routed(&both).oneshot(get("http://c/x")).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body_text(response).await, "b", "the last answer");
    assert_eq!(
        (a.count(), b.count()),
        (1, 1),
        "never the same destination twice"
    );

    let c = HttpServer::start(|_| Reply::text(200, "c")).await;
    let one_up = engine(&[("a", a.url()), ("c", c.url())]);
    let response = routed(&one_up).oneshot(get("http://c/x")).await.unwrap();
    assert_eq!(body_text(response).await, "c");
}

#[tokio::test]
async fn without_replay_a_request_is_sent_once() {
    let a = HttpServer::start(|_| Reply::text(503, "a")).await;
    let b = HttpServer::start(|_| Reply::text(200, "b")).await;
    let engine = engine(&[("a", a.url()), ("b", b.url())]);
    let once = tower::Layer::layer(
        &HealthPickLayer::builder(engine.clone()).no_replay().build(),
        http(),
    );
    let response = once.oneshot(get("http://c/x")).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!((a.count(), b.count()), (1, 0));
}

#[tokio::test]
async fn the_body_keeps_the_destination_in_flight_until_it_ends_then_reports() {
    let server = HttpServer::start(|_| Reply::text(200, "x".repeat(10_000))).await;
    let (engine, seen) = observed(&[("a", server.url())]);
    let response = routed(&engine).oneshot(get("http://c/x")).await.unwrap();
    let in_flight = || destination(&engine, "c", "a").in_flight;
    assert_eq!(
        in_flight(),
        1,
        "headers arrived, the body has not been read"
    );
    assert!(outcomes(&seen).is_empty(), "nothing reported yet");
    assert_eq!(body_text(response).await.len(), 10_000);
    assert_eq!(in_flight(), 0);
    assert_eq!(outcomes(&seen), [outcome("a", RequestOutcome::Status(200))]);

    // A body dropped unread ends the count too, reporting the status.
    let response = routed(&engine).oneshot(get("http://c/x")).await.unwrap();
    assert_eq!(in_flight(), 1);
    drop(response);
    assert_eq!(in_flight(), 0);
    assert_eq!(outcomes(&seen).len(), 2);
}

// ---- the discovery stream ------------------------------------------------------------------

/// Cluster `c` with tiers: `a0`, `b0` in tier 0, `c1` in tier 1; active checks judged by the
/// rounds the test reports (threshold 1).
fn tiered() -> Engine {
    Engine::from_json(
        r#"{"Clusters": {"c": {
            "HealthCheck": { "Active": { "Enabled": true } },
            "Metadata": { "ConsecutiveFailuresHealthPolicy.Threshold": "1" },
            "Destinations": {
                "a0": { "Address": "http://127.0.0.1:1/" },
                "b0": { "Address": "http://127.0.0.1:2/" },
                "c1": { "Address": "http://127.0.0.1:3/", "Priority": 1 } } } } }"#,
    )
    .unwrap()
}

/// A change as text: `+id` or `-id`.
fn text(change: Change<String, Arc<Destination>>) -> String {
    match change {
        Change::Insert(id, destination) => {
            assert_eq!(id, destination.id());
            format!("+{id}")
        }
        Change::Remove(id) => format!("-{id}"),
    }
}

/// The next `n` changes, then checks that no other is ready.
async fn changes(stream: &mut Discovered, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    for _ in 0..n {
        let change = within("a change", Duration::from_secs(5), stream.next())
            .await
            .expect("the stream goes on")
            .unwrap();
        got.push(text(change));
    }
    tokio::task::yield_now().await;
    if let Some(extra) = stream.next().now_or_never() {
        panic!("unexpected change after {got:?}: {extra:?}");
    }
    got
}

fn round(engine: &Engine, results: &[(&str, u16)]) {
    let results: Vec<ProbeResult> = results
        .iter()
        .map(|(id, status)| ProbeResult::status(*id, *status))
        .collect();
    engine.report_probe_round("c", &results).unwrap();
}

#[tokio::test]
async fn the_stream_follows_health_changes_and_tier_failover() {
    let engine = tiered();
    round(&engine, &[("a0", 200), ("b0", 200), ("c1", 200)]);
    let mut stream = Discovered::new(&engine, "c");
    assert_eq!(changes(&mut stream, 2).await, ["+a0", "+b0"]);

    round(&engine, &[("a0", 503), ("b0", 200), ("c1", 200)]);
    assert_eq!(changes(&mut stream, 1).await, ["-a0"]);

    // The whole local tier down: tier 1 comes in.
    round(&engine, &[("a0", 503), ("b0", 503), ("c1", 200)]);
    assert_eq!(changes(&mut stream, 2).await, ["+c1", "-b0"]);

    // A change elsewhere in the engine yields nothing.
    round(&engine, &[("a0", 503), ("b0", 503), ("c1", 200)]);
    assert_eq!(changes(&mut stream, 0).await, Vec::<String>::new());

    // a0 recovers: back to tier 0.
    round(&engine, &[("a0", 200), ("b0", 503), ("c1", 200)]);
    assert_eq!(changes(&mut stream, 2).await, ["+a0", "-c1"]);
}

#[tokio::test]
async fn the_stream_follows_published_destinations_and_replaced_addresses() {
    let engine = Engine::from_json(r#"{"Clusters": {"c": {}}}"#).unwrap();
    let mut stream = Discovered::new(&engine, "c");
    assert_eq!(changes(&mut stream, 0).await, Vec::<String>::new());

    let at = |port: u16| url::Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
    engine
        .set_destinations(
            "c",
            "mine",
            vec![Endpoint::new("x", at(1)), Endpoint::new("y", at(2))],
        )
        .unwrap();
    assert_eq!(changes(&mut stream, 2).await, ["+x", "+y"]);

    // y moves to a new address: inserted again (tower's balancer replaces the service).
    engine
        .set_destinations(
            "c",
            "mine",
            vec![Endpoint::new("x", at(1)), Endpoint::new("y", at(3))],
        )
        .unwrap();
    let next = within("a change", Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap();
    match next {
        Change::Insert(id, destination) => {
            assert_eq!(id, "y");
            assert_eq!(destination.address().port(), Some(3));
        }
        other => panic!("{other:?}"),
    }

    engine
        .set_destinations("c", "mine", vec![Endpoint::new("y", at(3))])
        .unwrap();
    assert_eq!(changes(&mut stream, 1).await, ["-x"]);
}

#[tokio::test]
async fn tower_balance_over_the_stream_sends_only_to_the_best_group() {
    let a = HttpServer::start(|_| Reply::text(200, "a")).await;
    let b = HttpServer::start(|_| Reply::text(200, "b")).await;
    let engine = Engine::from_json(&format!(
        r#"{{"Clusters": {{"c": {{
            "HealthCheck": {{ "Active": {{ "Enabled": true }} }},
            "Metadata": {{ "ConsecutiveFailuresHealthPolicy.Threshold": "1" }},
            "Destinations": {{ "a": {{ "Address": "{}" }}, "b": {{ "Address": "{}" }} }} }} }} }}"#,
        a.url(),
        b.url()
    ))
    .unwrap();
    let client = http();
    let discover = Discovered::new(&engine, "c").into_services(move |destination| {
        let client = client.clone();
        let base = destination.address().clone();
        let service = tower::service_fn(move |path: &'static str| {
            let uri = base.join(path).unwrap().to_string();
            let client = client.clone();
            async move {
                let response = client.request(get(&uri)).await?;
                Ok::<_, BoxError>(body_text(response).await)
            }
        });
        tower::load::Constant::new(service, 1)
    });
    let mut balance = tower::balance::p2c::Balance::new(discover);
    let call = async |balance: &mut tower::balance::p2c::Balance<_, &'static str>| {
        let ready = within("ready", Duration::from_secs(5), balance.ready())
            .await
            .expect("ready");
        ready.call("x").await.expect("answered")
    };
    let mut answered = std::collections::HashSet::new();
    for _ in 0..40 {
        answered.insert(call(&mut balance).await);
    }
    assert_eq!(answered.len(), 2, "both destinations serve: {answered:?}");

    round(&engine, &[("a", 503), ("b", 200)]);
    let before = a.count();
    for _ in 0..40 {
        assert_eq!(call(&mut balance).await, "b");
    }
    assert_eq!(a.count(), before, "a left the balancer");
}

//! Tracing spans: every call through the wrapped client, the middleware and the tower layer
//! records on its `healthpick.call` span (and on the caller's span, where it declared the
//! fields) the cluster, the destination, `server.address`/`server.port`, the resend count and
//! why a retry or hedge was sent; probes and discovery refreshes get DEBUG spans of their own.
//! Captured by a test subscriber against real servers on 127.0.0.1.
//!
//! Alone in its binary, with one process-wide subscriber: tracing caches per-callsite interest
//! process-wide. Each test uses its own cluster ids and looks only at its spans.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use healthpick::discovery::{Answer, BoxFuture, PollSource, SourceError, SourceSpec};
use healthpick::{ActiveMonitor, Endpoint, Engine, HealthAwareClient, Hedging};
use support::clients::http_client;
use support::faulty_servers::ClosedPort;
use support::servers::{HttpServer, Reply};
use support::waits::eventually;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Instrument;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// One span as captured: its name, its parent's name, its fields as text.
#[derive(Debug, Clone, Default)]
struct Captured {
    name: String,
    parent: Option<String>,
    fields: BTreeMap<String, String>,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Default)]
struct Spans {
    /// By span id, in creation order of ids.
    all: Mutex<Vec<(u64, Captured)>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

struct Layer(Arc<Spans>);

impl<S> tracing_subscriber::Layer<S> for Layer
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut captured = Captured {
            name: attrs.metadata().name().to_string(),
            parent: ctx
                .span(id)
                .and_then(|s| s.parent())
                .map(|p| p.name().to_string()),
            fields: BTreeMap::new(),
        };
        attrs.record(&mut Fields(&mut captured.fields));
        self.0.all.lock().unwrap().push((id.into_u64(), captured));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let mut all = self.0.all.lock().unwrap();
        if let Some((_, captured)) = all.iter_mut().rev().find(|(i, _)| *i == id.into_u64()) {
            values.record(&mut Fields(&mut captured.fields));
        }
    }
}

fn spans() -> &'static Arc<Spans> {
    static SPANS: OnceLock<Arc<Spans>> = OnceLock::new();
    SPANS.get_or_init(|| {
        let spans = Arc::new(Spans::default());
        let subscriber = tracing_subscriber::registry().with(Layer(spans.clone()));
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        spans
    })
}

/// The captured spans named `name` whose field `key` is `value`.
fn named(name: &str, key: &str, value: &str) -> Vec<Captured> {
    spans()
        .all
        .lock()
        .unwrap()
        .iter()
        .map(|(_, c)| c)
        .filter(|c| c.name == name && c.field(key) == Some(value))
        .cloned()
        .collect()
}

fn one_call(cluster: &str) -> Captured {
    let mut calls = named("healthpick.call", "healthpick.cluster", cluster);
    assert_eq!(calls.len(), 1, "one call span for {cluster}: {calls:?}");
    calls.remove(0)
}

/// `FirstAlphabetical` over `a` (refused) then `b` (the server).
fn refused_then(cluster: &str, closed: &ClosedPort, server: &HttpServer) -> Engine {
    Engine::from_json(&format!(
        r#"{{"Clusters": {{"{cluster}": {{ "LoadBalancingPolicy": "FirstAlphabetical",
            "Destinations": {{ "a": {{ "Address": "{}" }},
                              "b": {{ "Address": "{}" }} }} }} }} }}"#,
        closed.url(),
        server.url()
    ))
    .unwrap()
}

fn assert_answered_by_b_after_a_refused(call: &Captured, server: &HttpServer) {
    assert_eq!(call.field("healthpick.destination"), Some("b"), "{call:?}");
    assert_eq!(call.field("server.address"), Some("127.0.0.1"), "{call:?}");
    assert_eq!(
        call.field("server.port"),
        Some(server.addr().port().to_string().as_str()),
        "{call:?}"
    );
    assert_eq!(
        call.field("http.request.resend_count"),
        Some("1"),
        "{call:?}"
    );
    assert_eq!(
        call.field("healthpick.retry_reason"),
        Some("connect failure"),
        "{call:?}"
    );
}

#[tokio::test]
async fn a_client_call_records_destination_resend_count_and_reason_on_its_span_and_the_callers() {
    spans();
    let server = HttpServer::start(|_| Reply::text(200, "ok")).await;
    let closed = ClosedPort::reserve();
    let engine = refused_then("spans-client", &closed, &server);
    let client = HealthAwareClient::new(http_client(), engine);
    let caller = tracing::info_span!(
        "caller",
        server.address = tracing::field::Empty,
        server.port = tracing::field::Empty,
        healthpick.destination = tracing::field::Empty,
        marker = "spans-client",
    );
    let response = client
        .get("spans-client", "/x")
        .send()
        .instrument(caller)
        .await
        .unwrap();
    assert_eq!(response.text().await.unwrap(), "ok");

    let call = one_call("spans-client");
    assert_answered_by_b_after_a_refused(&call, &server);
    assert_eq!(call.parent.as_deref(), Some("caller"));
    let caller = named("caller", "marker", "spans-client").remove(0);
    assert_eq!(caller.field("healthpick.destination"), Some("b"));
    assert_eq!(caller.field("server.address"), Some("127.0.0.1"));
    assert_eq!(
        caller.field("server.port"),
        Some(server.addr().port().to_string().as_str())
    );
}

#[cfg(feature = "middleware")]
#[tokio::test]
async fn a_middleware_call_records_the_same_fields() {
    spans();
    let server = HttpServer::start(|_| Reply::text(200, "ok")).await;
    let closed = ClosedPort::reserve();
    let engine = refused_then("spans-mw", &closed, &server);
    let client = reqwest_middleware::ClientBuilder::new(http_client())
        .with(healthpick::middleware::HealthPickMiddleware::new(engine))
        .build();
    let response = client.get("http://spans-mw/x").send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_answered_by_b_after_a_refused(&one_call("spans-mw"), &server);
}

#[cfg(feature = "tower")]
#[tokio::test]
async fn a_tower_layer_call_records_a_status_retry() {
    use tower::ServiceExt;
    spans();
    let a = HttpServer::start(|_| Reply::text(503, "busy")).await;
    let b = HttpServer::start(|_| Reply::text(200, "ok")).await;
    let engine = Engine::from_json(&format!(
        r#"{{"Clusters": {{"spans-tower": {{ "LoadBalancingPolicy": "FirstAlphabetical",
            "Destinations": {{ "a": {{ "Address": "{}" }}, "b": {{ "Address": "{}" }} }} }} }} }}"#,
        a.url(),
        b.url()
    ))
    .unwrap();
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let service = tower::Layer::layer(&healthpick::tower::HealthPickLayer::new(engine), http);
    let request = http::Request::get("http://spans-tower/x")
        .body(http_body_util::Full::default())
        .unwrap();
    let response = service.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let call = one_call("spans-tower");
    assert_eq!(call.field("healthpick.destination"), Some("b"));
    assert_eq!(call.field("http.request.resend_count"), Some("1"));
    assert_eq!(call.field("healthpick.retry_reason"), Some("status 503"));
}

#[tokio::test]
async fn a_hedge_is_recorded_as_the_reason() {
    spans();
    let slow = HttpServer::start(|_| Reply::text(200, "slow").delay(Duration::from_secs(2))).await;
    let fast = HttpServer::start(|_| Reply::text(200, "fast")).await;
    let engine = Engine::from_json(&format!(
        r#"{{"Clusters": {{"spans-hedge": {{ "LoadBalancingPolicy": "FirstAlphabetical",
            "Destinations": {{ "a": {{ "Address": "{}" }}, "b": {{ "Address": "{}" }} }} }} }} }}"#,
        slow.url(),
        fast.url()
    ))
    .unwrap();
    let client = HealthAwareClient::builder(engine)
        .http(http_client())
        .hedging(Hedging::after(Duration::from_millis(20)).max_share(1.0))
        .build()
        .unwrap();
    let response = client.get("spans-hedge", "/x").send().await.unwrap();
    assert_eq!(response.text().await.unwrap(), "fast");
    let call = one_call("spans-hedge");
    assert_eq!(call.field("healthpick.destination"), Some("b"));
    assert_eq!(call.field("healthpick.retry_reason"), Some("hedge"));
}

#[tokio::test]
async fn a_first_attempt_that_answers_records_no_resend() {
    spans();
    let server = HttpServer::start(|_| Reply::text(200, "ok")).await;
    let engine = Engine::from_json(&format!(
        r#"{{"Clusters": {{"spans-once": {{ "Destinations": {{ "only": {{ "Address": "{}" }} }} }} }} }}"#,
        server.url()
    ))
    .unwrap();
    let client = HealthAwareClient::new(http_client(), engine);
    client.get("spans-once", "/x").send().await.unwrap();
    let call = one_call("spans-once");
    assert_eq!(call.field("healthpick.destination"), Some("only"));
    assert_eq!(call.field("http.request.resend_count"), None);
    assert_eq!(call.field("healthpick.retry_reason"), None);
}

#[tokio::test]
async fn probes_get_debug_spans_with_their_destination_and_result() {
    spans();
    let server = HttpServer::start(|_| Reply::text(200, "ok")).await;
    let engine = Engine::from_json(&format!(
        r#"{{"Clusters": {{"spans-probe": {{
            "HealthCheck": {{ "Active": {{ "Enabled": true, "Interval": "00:00:00.1" }} }},
            "Destinations": {{ "p": {{ "Address": "{}" }} }} }} }} }}"#,
        server.url()
    ))
    .unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    let probe = eventually("a probe span", Duration::from_secs(5), || {
        named("healthpick.probe", "healthpick.cluster", "spans-probe")
            .into_iter()
            .find(|p| p.field("healthpick.probe_result").is_some())
    })
    .await;
    assert_eq!(probe.field("healthpick.destination"), Some("p"));
    assert_eq!(
        probe.field("server.port"),
        Some(server.addr().port().to_string().as_str())
    );
    assert!(
        probe
            .field("healthpick.probe_result")
            .unwrap()
            .contains("200"),
        "{probe:?}"
    );
}

struct Fixed(Endpoint);

impl PollSource for Fixed {
    fn resolve(&self) -> BoxFuture<'_, Result<Answer, SourceError>> {
        let endpoint = self.0.clone();
        Box::pin(async move { Ok(Answer::found(vec![endpoint])) })
    }
}

#[tokio::test]
async fn a_discovery_refresh_gets_a_span_of_its_own() {
    spans();
    let engine = Engine::from_json(r#"{"Clusters": {"spans-discovery": {}}}"#).unwrap();
    let publisher = engine
        .publisher("spans-discovery", SourceSpec::new("fixed"))
        .unwrap();
    let endpoint = Endpoint::new("d", "http://127.0.0.1:9/".parse().unwrap());
    let _task = healthpick::discovery::poll(
        Arc::new(Fixed(endpoint)),
        publisher,
        healthpick::config::RefreshBounds::default(),
    );
    let refresh = eventually("a refresh span", Duration::from_secs(5), || {
        named(
            "healthpick.discovery_refresh",
            "healthpick.cluster",
            "spans-discovery",
        )
        .into_iter()
        .next()
    })
    .await;
    assert_eq!(refresh.field("healthpick.source"), Some("fixed"));
    let pick = eventually("the published destination", Duration::from_secs(5), || {
        engine.pick_endpoint("spans-discovery").ok()
    })
    .await;
    assert_eq!(pick.destination().id(), "d");
}

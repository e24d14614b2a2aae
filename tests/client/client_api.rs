//! The wrapped client's API conventions (reqwest as the model), against real servers on
//! 127.0.0.1: error predicates and source chains, an error message that names each URL once,
//! `patch`/`options`, response metadata and a streamed body that keeps its destination in
//! flight until it ends.

use std::error::Error as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use healthpick::observer::Observer;
use healthpick::{ClientError, Engine, HealthAwareClient, RequestOutcome};

use crate::support::clients::http_client;
use crate::support::faulty_servers::ClosedPort;
use crate::support::servers::{HttpServer, Reply};
use crate::support::status::destination;

fn engine_for(url: &str) -> Engine {
    Engine::from_json(&format!(
        r#"{{"Clusters": {{"c": {{ "Destinations": {{ "d": {{ "Address": "{url}" }} }} }} }} }}"#
    ))
    .unwrap()
}

#[tokio::test]
async fn errors_answer_their_predicates_and_keep_their_sources() {
    let server = HttpServer::start(|seen| match seen.path.as_str() {
        "/missing" => Reply::text(404, "no"),
        _ => Reply::text(200, "not json"),
    })
    .await;
    let client = HealthAwareClient::new(http_client(), engine_for(&server.url()));

    let unknown = client.get("nope", "/").send().await.unwrap_err();
    assert!(
        unknown.is_unknown_cluster() && !unknown.is_builder(),
        "{unknown}"
    );

    let bad_header = client
        .get("c", "/")
        .header("bad header", "x")
        .send()
        .await
        .unwrap_err();
    assert!(bad_header.is_builder(), "{bad_header}");
    let source = bad_header.source().expect("the header parser's error");
    assert!(source.downcast_ref::<http::Error>().is_some(), "{source:?}");

    let not_json = client
        .get("c", "/")
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap_err();
    assert!(not_json.is_body() && !not_json.is_status(), "{not_json}");
    let source = not_json.source().expect("serde_json's error");
    assert!(source.downcast_ref::<serde_json::Error>().is_some());

    let status = client
        .get("c", "/missing")
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap_err();
    assert!(status.is_status() && !status.is_request(), "{status}");
}

#[tokio::test]
async fn a_failed_call_names_each_attempts_url_once() {
    let closed = ClosedPort::reserve();
    let port = closed.port();
    let engine = engine_for(&format!("http://127.0.0.1:{port}/"));
    let client = HealthAwareClient::new(http_client(), engine);
    let error = client.get("c", "/api/orders").send().await.unwrap_err();
    assert!(error.is_request() && error.is_connect(), "{error}");
    let text = error.to_string();
    let url = format!("http://127.0.0.1:{port}/api/orders");
    assert_eq!(text.matches(&url).count(), 1, "{text}");
    assert!(
        text.contains("error sending request"),
        "reqwest's words kept: {text}"
    );
}

#[tokio::test]
async fn patch_and_options_send_their_methods() {
    let server = HttpServer::start(|_| Reply::text(200, "ok")).await;
    let client = HealthAwareClient::new(http_client(), engine_for(&server.url()));
    client.patch("c", "/p").body("x").send().await.unwrap();
    client.options("c", "/o").send().await.unwrap();
    let methods: Vec<String> = server
        .recorder()
        .requests()
        .into_iter()
        .map(|s| format!("{} {}", s.method, s.path))
        .collect();
    assert_eq!(methods, ["PATCH /p", "OPTIONS /o"]);
}

struct Outcomes(Arc<Mutex<Vec<RequestOutcome>>>);

impl Observer for Outcomes {
    fn request_completed(&self, _: Duration, _: &str, _: &str, outcome: RequestOutcome) {
        self.0.lock().unwrap().push(outcome);
    }
}

#[tokio::test]
async fn a_streamed_body_keeps_its_destination_in_flight_until_it_ends() {
    let body = "x".repeat(200_000);
    let server = HttpServer::start(move |_| Reply::text(200, body.clone())).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let engine = Engine::builder()
        .observer(Arc::new(Outcomes(seen.clone())))
        .build();
    engine
        .load_json(&format!(
            r#"{{"Clusters": {{"c": {{ "Destinations": {{ "d": {{ "Address": "{}" }} }} }} }} }}"#,
            server.url()
        ))
        .unwrap();
    let client = HealthAwareClient::new(http_client(), engine.clone());
    let mut response = client.get("c", "/big").send().await.unwrap();
    assert_eq!(response.version(), Some(reqwest::Version::HTTP_11));
    assert_eq!(response.content_length(), Some(200_000));
    let mut read = 0;
    while let Some(chunk) = response.chunk().await.unwrap() {
        read += chunk.len();
        if read < 200_000 {
            assert_eq!(destination(&engine, "c", "d").in_flight, 1);
            assert!(seen.lock().unwrap().is_empty(), "reported before the end");
        }
    }
    assert_eq!(read, 200_000);
    assert_eq!(*seen.lock().unwrap(), [RequestOutcome::Status(200)]);
    assert_eq!(
        response.chunk().await.unwrap(),
        None,
        "the end stays the end"
    );
    drop(response);
    assert_eq!(destination(&engine, "c", "d").in_flight, 0);
    assert_eq!(seen.lock().unwrap().len(), 1, "reported once");
}

#[test]
fn client_error_builder_variants_carry_their_messages() {
    // A retry status outside 400..=599 is refused at configuration time, as a builder error.
    let error: ClientError = healthpick::RetryStatuses::new([200]).unwrap_err();
    assert!(error.is_builder());
    assert!(error.to_string().contains("status 200"), "{error}");
}

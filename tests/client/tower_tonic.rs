//! healthpick with a real tonic client against real tonic servers on 127.0.0.1 (feature
//! `tower`), both ways `healthpick::tower` documents:
//!
//! - tonic balances: the discovery stream feeds `Channel::balance_channel`; when one server dies
//!   and the engine learns it, the channel sends every call to the other;
//! - healthpick balances: the tower layer over a hyper-util HTTP/2 client carries tonic's calls,
//!   picks and reports each one, and leaves a destination the engine marked down.
//!
//! Health comes from probe rounds the tests report themselves, so nothing depends on timing.
#![cfg(feature = "tower")]

#[path = "../../examples/support/grpc_backend.rs"]
mod grpc_backend;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use grpc_backend::{who_answered, GrpcBackend};
use healthpick::tower::{Discovered, HealthPickLayer};
use healthpick::{Engine, ProbeResult};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tonic::transport::{channel, Channel, Endpoint};
use tonic_health::pb::health_client::HealthClient;
use tower::discover::Change;

/// Cluster `grpc` over the two backends, active checks on (threshold 1) but judged only by the
/// rounds the test reports.
fn engine(a: &GrpcBackend, b: &GrpcBackend) -> Engine {
    Engine::from_json(&format!(
        r#"{{"Clusters": {{"grpc": {{ "LoadBalancingPolicy": "RoundRobin",
            "HealthCheck": {{ "Active": {{ "Enabled": true }} }},
            "Metadata": {{ "ConsecutiveFailuresHealthPolicy.Threshold": "1" }},
            "Destinations": {{
                "{}": {{ "Address": "{}" }},
                "{}": {{ "Address": "{}" }} }} }} }} }}"#,
        a.name(),
        a.url(),
        b.name(),
        b.url()
    ))
    .expect("config")
}

fn round(engine: &Engine, results: &[(&str, u16)]) {
    let results: Vec<ProbeResult> = results
        .iter()
        .map(|(id, status)| ProbeResult::status(*id, *status))
        .collect();
    engine.report_probe_round("grpc", &results).unwrap();
}

async fn calls<T>(client: &mut HealthClient<T>, n: usize) -> BTreeMap<String, usize>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::ResponseBody: tonic::transport::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::transport::Body>::Error:
        Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    let mut counts = BTreeMap::new();
    for _ in 0..n {
        let who = tokio::time::timeout(
            Duration::from_secs(5),
            who_answered(client, ["eu-1", "eu-2"]),
        )
        .await
        .expect("a call within 5 s")
        .unwrap_or_else(|status| format!("error: {status}"));
        *counts.entry(who).or_default() += 1;
    }
    counts
}

#[tokio::test]
async fn tonic_balance_channel_fed_by_the_stream_leaves_a_dead_server() {
    let mut eu1 = GrpcBackend::start("eu-1").await.unwrap();
    let eu2 = GrpcBackend::start("eu-2").await.unwrap();
    let engine = engine(&eu1, &eu2);
    round(&engine, &[("eu-1", 200), ("eu-2", 200)]);

    let (channel, sender) = Channel::balance_channel::<String>(16);
    let (forwarded, mut handed) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut discovered = Discovered::new(&engine, "grpc");
    let forwarder = tokio::spawn(async move {
        while let Some(Ok(change)) = discovered.next().await {
            let (text, change) = match change {
                Change::Insert(id, destination) => (
                    format!("+{id}"),
                    channel::Change::Insert(
                        id,
                        Endpoint::from_shared(destination.address().to_string()).unwrap(),
                    ),
                ),
                Change::Remove(id) => (format!("-{id}"), channel::Change::Remove(id)),
            };
            sender.send(change).await.unwrap();
            forwarded.send(text).unwrap();
        }
    });
    let mut next_handed = async || {
        tokio::time::timeout(Duration::from_secs(5), handed.recv())
            .await
            .expect("a change within 5 s")
            .unwrap()
    };
    assert_eq!(
        [next_handed().await, next_handed().await],
        ["+eu-1", "+eu-2"]
    );

    let mut client = HealthClient::new(channel);
    let both = calls(&mut client, 30).await;
    assert_eq!(both.len(), 2, "tonic balances over both: {both:?}");
    assert_eq!(both.values().sum::<usize>(), 30);
    assert!(both.keys().all(|k| k.starts_with("eu-")), "{both:?}");

    eu1.kill().await;
    round(&engine, &[("eu-1", 503), ("eu-2", 200)]);
    assert_eq!(next_handed().await, "-eu-1");
    let after = calls(&mut client, 30).await;
    assert_eq!(after, BTreeMap::from([("eu-2".to_string(), 30)]));
    forwarder.abort();
}

#[tokio::test]
async fn tonic_over_the_layer_is_picked_reported_and_leaves_a_destination_marked_down() {
    let mut eu1 = GrpcBackend::start("eu-1").await.unwrap();
    let eu2 = GrpcBackend::start("eu-2").await.unwrap();
    let engine = engine(&eu1, &eu2);
    round(&engine, &[("eu-1", 200), ("eu-2", 200)]);

    let http2 = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<tonic::body::Body>();
    // tonic's request body cannot be cloned: every call is sent once.
    let routed = tower::ServiceBuilder::new()
        .layer(HealthPickLayer::builder(engine.clone()).no_replay().build())
        .service(http2);
    let mut client = HealthClient::with_origin(routed, "http://grpc".parse().unwrap());

    let both = calls(&mut client, 10).await;
    assert_eq!(
        both,
        BTreeMap::from([("eu-1".to_string(), 5), ("eu-2".to_string(), 5)]),
        "round robin over both"
    );
    let in_flight = |id: &str| {
        engine
            .status()
            .cluster("grpc")
            .unwrap()
            .destination(id)
            .unwrap()
            .in_flight
    };
    assert_eq!(
        (in_flight("eu-1"), in_flight("eu-2")),
        (0, 0),
        "each call's body ended, its pick with it"
    );

    eu1.kill().await;
    round(&engine, &[("eu-1", 503), ("eu-2", 200)]);
    let after = calls(&mut client, 10).await;
    assert_eq!(after, BTreeMap::from([("eu-2".to_string(), 10)]));
}

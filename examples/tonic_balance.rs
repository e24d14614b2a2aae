//! tonic's own balancer, told by healthpick which destinations to use (feature `tower`).
//!
//! Two real tonic gRPC servers on 127.0.0.1 (`eu-1`, `eu-2`) serve the standard gRPC health
//! service; each has a plain HTTP health endpoint that healthpick probes every 100 ms. A tonic
//! `Channel::balance_channel` keeps one HTTP/2 connection per destination and balances calls
//! over them; [`Discovered`] feeds it the cluster's best group, so when `eu-1` dies and its
//! probes fail, healthpick removes it and tonic stops calling it.
//!
//! ```text
//! 20 calls: eu-1 8, eu-2 12
//! eu-1 killed; healthpick removed it from the channel after 38 ms
//! 20 calls: eu-2 20, errors 0
//! ok: tonic balanced over both, then only over the survivor
//! ```
//!
//! Run with `cargo run --example tonic_balance --features tower`. Exits 0 only if all that
//! held.

#[path = "support/grpc_backend.rs"]
mod grpc_backend;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use futures::StreamExt;
use grpc_backend::{who_answered, GrpcBackend};
use healthpick::tower::Discovered;
use healthpick::{ActiveMonitor, Engine};
use tokio::time::Instant;
use tonic::transport::{channel, Channel, Endpoint};
use tonic_health::pb::health_client::HealthClient;
use tower::discover::Change;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut eu1 = GrpcBackend::start("eu-1").await?;
    let eu2 = GrpcBackend::start("eu-2").await?;
    let engine = Engine::from_json(&format!(
        r#"{{"Clusters": {{"health": {{
            "HealthCheck": {{ "Active": {{ "Enabled": true, "Interval": "00:00:00.1",
                                          "Timeout": "00:00:00.5", "Path": "/health" }} }},
            "Metadata": {{ "ConsecutiveFailuresHealthPolicy.Threshold": "1" }},
            "Destinations": {{
                "eu-1": {{ "Address": "{}", "Health": "{}" }},
                "eu-2": {{ "Address": "{}", "Health": "{}" }} }} }} }} }}"#,
        eu1.url(),
        eu1.health_url(),
        eu2.url(),
        eu2.health_url()
    ))?;
    let _monitor = ActiveMonitor::start(&engine);
    tokio::time::timeout(Duration::from_secs(5), engine.ready()).await?;

    // The part an application writes: the best group of `health`, into tonic's balancer.
    let (channel, changes) = Channel::balance_channel::<String>(16);
    let mut discovered = Discovered::new(&engine, "health");
    // What the forwarder handed to tonic, for this example's own checks.
    let (forwarded, mut handed) = tokio::sync::mpsc::unbounded_channel::<String>();
    let forwarder = tokio::spawn(async move {
        while let Some(Ok(change)) = discovered.next().await {
            let _ = forwarded.send(match &change {
                Change::Insert(id, _) => format!("+{id}"),
                Change::Remove(id) => format!("-{id}"),
            });
            // tonic has its own `Change`, the same two cases as tower's.
            let change = match change {
                Change::Insert(id, destination) => {
                    match Endpoint::from_shared(destination.address().to_string()) {
                        Ok(endpoint) => channel::Change::Insert(id, endpoint),
                        Err(_) => continue,
                    }
                }
                Change::Remove(id) => channel::Change::Remove(id),
            };
            if changes.send(change).await.is_err() {
                break;
            }
        }
    });
    let mut client = HealthClient::new(channel);

    let before = calls(&mut client, 20).await;
    println!("20 calls: {}", describe(&before));
    if before.get("eu-1").copied().unwrap_or(0) == 0
        || before.get("eu-2").copied().unwrap_or(0) == 0
    {
        return Err(format!("tonic should balance over both: {}", describe(&before)).into());
    }

    eu1.kill().await;
    let killed = Instant::now();
    // Wait (bounded) until the forwarder handed eu-1's removal to tonic: its balancer applies
    // it before it routes the next call.
    loop {
        match tokio::time::timeout_at(killed + Duration::from_secs(5), handed.recv()).await {
            Ok(Some(change)) if change == "-eu-1" => break,
            Ok(Some(_)) => {}
            _ => return Err("eu-1 was not removed within 5 s".into()),
        }
    }
    println!(
        "eu-1 killed; healthpick removed it from the channel after {} ms",
        killed.elapsed().as_millis()
    );

    let after = calls(&mut client, 20).await;
    println!("20 calls: {}", describe(&after));
    if after.get("eu-2").copied() != Some(20) {
        return Err(format!("every call should reach eu-2: {}", describe(&after)).into());
    }
    println!("ok: tonic balanced over both, then only over the survivor");
    forwarder.abort();
    Ok(())
}

/// `n` calls, counted by who answered (`errors` for failed calls).
async fn calls(client: &mut HealthClient<Channel>, n: usize) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for _ in 0..n {
        let who = who_answered(client, ["eu-1", "eu-2"])
            .await
            .unwrap_or_else(|_| "errors".to_string());
        *counts.entry(who).or_default() += 1;
    }
    counts
}

fn describe(counts: &BTreeMap<String, usize>) -> String {
    let mut text: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if !counts.contains_key("errors") && counts.contains_key("eu-2") && !counts.contains_key("eu-1")
    {
        text.push("errors 0".into());
    }
    text.join(", ")
}

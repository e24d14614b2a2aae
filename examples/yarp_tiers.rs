//! A YARP config file with tiers and active health checks: failover to tier 1 and back.
//!
//! Loads `examples/config/tiers.appsettings.json` (cluster `catalog`: `local-1`, `local-2` in tier
//! 0 and `remote-1`, `remote-2` in tier 1, probed at `/health` every 200 ms), pointing each
//! address at a server started on 127.0.0.1. Then:
//!
//! 1. all healthy: calls go to the local tier only;
//! 2. both locals start answering `/health` with 503: after two failed probes each
//!    (ConsecutiveFailures, threshold 2) they are Unhealthy and calls go to the remote tier;
//! 3. the locals recover: one good probe makes them Healthy and calls come back.
//!
//! ```text
//!    [health] local-1 active Unknown -> Healthy: probe HTTP 200 (Healthy) (0 consecutive failures)
//!    ...
//! 1. all healthy           -> local-1 local-2 local-1 local-2 local-1 local-2
//!    [health] local-1 active Healthy -> Unhealthy: probe HTTP 503 (2 consecutive failures)
//!    [health] local-2 active Healthy -> Unhealthy: probe HTTP 503 (2 consecutive failures)
//!    (tier 1 took over after 0.39 s)
//! 2. locals fail /health   -> remote-1 remote-2 remote-1 remote-2 remote-1 remote-2
//!    ...
//!    (tier 0 back after 0.19 s)
//! 3. locals recover        -> local-1 local-2 local-1 local-2 local-1 local-2
//! ok: tier 0, failover to tier 1, back to tier 0
//! ```
//!
//! Run with `cargo run --example yarp_tiers`. Exits 0 only if every call of each step went to the
//! expected tier.

#[path = "support/tiny_server.rs"]
mod tiny_server;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use healthpick::{ActiveMonitor, Engine, HealthAwareClient, HealthEventKind, HealthPart};
use tiny_server::TinyServer;

const CONFIG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/config/tiers.appsettings.json"
);

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
    let mut config = std::fs::read_to_string(CONFIG)?;
    let mut servers = Vec::new();
    for name in ["local-1", "local-2", "remote-1", "remote-2"] {
        let server = TinyServer::start(name).await?;
        let placeholder = format!("{name}.catalog.internal:8080");
        config = config.replace(&placeholder, &server.addr().to_string());
        servers.push(server);
    }
    let engine = Engine::from_json(&config)?;

    // Print every active-health change as it happens.
    let mut events = engine.subscribe();
    tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            if let HealthEventKind::HealthChanged {
                destination,
                part: HealthPart::Active,
                from,
                to,
                reason,
            } = event.kind
            {
                println!("   [health] {destination} active {from} -> {to}: {reason}");
            }
        }
    });

    let _monitor = ActiveMonitor::start(&engine); // probes until dropped
    engine.ready().await; // every destination probed once
    let http = reqwest::Client::builder().no_proxy().build()?;
    let client = HealthAwareClient::new(http, engine.clone());

    calls(&client, "1. all healthy", "local").await?;

    for local in &servers[..2] {
        local.set_healthy(false);
    }
    let took = wait_for_tier(&engine, 1).await?;
    println!("   (tier 1 took over after {:.2} s)", took.as_secs_f64());
    calls(&client, "2. locals fail /health", "remote").await?;

    for local in &servers[..2] {
        local.set_healthy(true);
    }
    let took = wait_for_tier(&engine, 0).await?;
    println!("   (tier 0 back after {:.2} s)", took.as_secs_f64());
    calls(&client, "3. locals recover", "local").await?;

    println!("ok: tier 0, failover to tier 1, back to tier 0");
    Ok(())
}

/// Sends six calls and checks that every one was answered by a destination named `expected-*`.
async fn calls(
    client: &HealthAwareClient,
    step: &str,
    expected: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut answered = Vec::new();
    for _ in 0..6 {
        answered.push(client.get("catalog", "/items").send().await?.text().await?);
    }
    println!("{step:<24} -> {}", answered.join(" "));
    match answered.iter().find(|who| !who.starts_with(expected)) {
        Some(who) => Err(format!("{step}: {who} answered, expected only {expected}-*").into()),
        None => Ok(()),
    }
}

/// Waits (at most 5 s) until the best group of `catalog` is in `tier`; returns how long it took.
async fn wait_for_tier(engine: &Engine, tier: u32) -> Result<Duration, String> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        let best = engine
            .best_endpoints("catalog")
            .map_err(|e| e.to_string())?;
        if best.destinations.iter().all(|d| d.tier() == tier) {
            return Ok(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("tier {tier} did not take over within 5 s"))
}

//! `EndpointSet`: "call one of these base URLs, but a healthy one", preferring local ones.
//!
//! Three base URLs: `zone-a-1` and `zone-a-2` are preferred (same zone: tier 0), `zone-b-1` is
//! the fallback (tier 1). A background job probes `/health` every 200 ms. Then:
//!
//! 1. all healthy: picks spread over the two preferred URLs;
//! 2. `zone-a-1` fails its health checks: picks go to `zone-a-2` only;
//! 3. `zone-a-2` fails too: picks go to the fallback `zone-b-1`.
//!
//! ```text
//! 1. all healthy         -> zone-a-1 zone-a-2 zone-a-2 zone-a-1 zone-a-1 zone-a-2 ...
//!    best group: Healthy ["http://127.0.0.1:PORT/", "http://127.0.0.1:PORT/"]
//! 2. zone-a-1 unhealthy  -> zone-a-2 zone-a-2 zone-a-2 ...
//! 3. zone-a-2 unhealthy  -> zone-b-1 zone-b-1 zone-b-1 ...
//! ok: preferred URLs first, the other one only when no preferred URL was healthy
//! ```
//!
//! Run with `cargo run --example endpoint_set`. Exits 0 only if each step's picks all went to
//! the expected servers.

#[path = "support/tiny_server.rs"]
mod tiny_server;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use healthpick::EndpointSet;
use tiny_server::TinyServer;

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
    let a1 = TinyServer::start("zone-a-1").await?;
    let a2 = TinyServer::start("zone-a-2").await?;
    let b1 = TinyServer::start("zone-b-1").await?;

    let endpoints = EndpointSet::builder([a1.url(), a2.url(), b1.url()])
        .preferred_base_urls([a1.url(), a2.url()])
        .health_path("/health") // default: /api/systemstatus
        .health_check_interval(Duration::from_millis(200)) // default: 15 s
        .build()?;
    let _refresh = endpoints.spawn_refresh(); // probes every interval until dropped

    let http = reqwest::Client::builder().no_proxy().build()?;
    let preferred = ["zone-a-1", "zone-a-2"];
    calls(&endpoints, &http, "1. all healthy", &preferred).await?;
    // The whole best group, for callers who choose themselves:
    let best = endpoints.best_endpoints()?;
    let urls: Vec<&str> = best
        .destinations
        .iter()
        .map(|d| d.address().as_str())
        .collect();
    println!("   best group: {} {urls:?}", best.status);

    a1.set_healthy(false);
    wait_until_only(&endpoints, &a2.url()).await?;
    calls(&endpoints, &http, "2. zone-a-1 unhealthy", &["zone-a-2"]).await?;

    a2.set_healthy(false);
    wait_until_only(&endpoints, &b1.url()).await?;
    calls(&endpoints, &http, "3. zone-a-2 unhealthy", &["zone-b-1"]).await?;

    println!("ok: preferred URLs first, the other one only when no preferred URL was healthy");
    Ok(())
}

/// Picks and calls eight times; every answer must come from one of `expected`.
async fn calls(
    endpoints: &EndpointSet,
    http: &reqwest::Client,
    step: &str,
    expected: &[&str],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut answered = Vec::new();
    for _ in 0..8 {
        let pick = endpoints.pick_endpoint().await?; // probes first if nothing is known yet
        let url = pick.url("/hello");
        answered.push(http.get(url).send().await?.text().await?);
    }
    println!("{step:<22} -> {}", answered.join(" "));
    match answered
        .iter()
        .find(|who| !expected.contains(&who.as_str()))
    {
        Some(who) => Err(format!("{step}: {who} answered, expected only {expected:?}").into()),
        None => Ok(()),
    }
}

/// Waits (at most 5 s) until the best group is exactly `url`.
async fn wait_until_only(endpoints: &EndpointSet, url: &str) -> Result<(), String> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        let best = endpoints.best_endpoints().map_err(|e| e.to_string())?;
        if let [only] = best.destinations.as_slice() {
            if only.address().as_str() == url {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("{url} did not become the only pick within 5 s"))
}

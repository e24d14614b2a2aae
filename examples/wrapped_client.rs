//! `HealthAwareClient`: a wrapped `reqwest::Client` that picks, reports and fails over by itself.
//!
//! The cluster `orders` has two local instances (tier 0) and one remote (tier 1). `local-2` is
//! down. Every GET still succeeds: every other call (round robin) lands on `local-2`, is refused
//! before any response and is retried on another instance of the same tier (`local-1`), never on
//! the remote one while a local instance answers. After ten refusals passive checks eject
//! `local-2`. A call to the cluster `billing`, whose only instance is down, shows the typed error
//! naming what failed.
//!
//! ```text
//! call  1: local-1 answered 200 OK "local-1"
//! ...
//! local-2: passive Healthy -> Unhealthy: transport failure rate 1.000 (10/10), limit 0.3
//! billing: request to cluster `billing` failed: destination `billing-1` (http://127.0.0.1:PORT/api/invoices): ...
//! ok: 20 calls, all answered by local-1; local-2 ejected; billing's error names billing-1
//! ```
//!
//! Run with `cargo run --example wrapped_client`. Exits 0 only if all that held.

#[path = "support/tiny_server.rs"]
mod tiny_server;

use std::process::ExitCode;

use std::time::Duration;

use healthpick::{Engine, HealthAwareClient, HealthState, Timeouts};
use tiny_server::{dead_url, TinyServer};

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
    let local1 = TinyServer::start("local-1").await?;
    let remote1 = TinyServer::start("remote-1").await?;
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{
              "orders": {{
                "LoadBalancingPolicy": "RoundRobin",
                "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
                "Destinations": {{
                  "local-1":  {{ "Address": "{}" }},
                  "local-2":  {{ "Address": "{}" }},
                  "remote-1": {{ "Address": "{}", "Priority": 1 }}
                }} }},
              "billing": {{ "Destinations": {{ "billing-1": {{ "Address": "{}" }} }} }}
            }} }}"#,
        local1.url(),
        dead_url(),
        remote1.url(),
        dead_url(),
    ))?;

    // Your reqwest client's settings (here: no proxy), a connect timeout on it, and bounds on
    // every attempt and call (defaults 2 s, 15 s and 30 s; set here for the example).
    let client = HealthAwareClient::builder(engine.clone())
        .http_builder(reqwest::Client::builder().no_proxy())
        .connect_timeout(Duration::from_secs(2))
        .timeouts(
            Timeouts::default()
                .attempt(Duration::from_secs(5))
                .call(Duration::from_secs(10)),
        )
        .build()?;

    for i in 1..=20 {
        let response = client.get("orders", "/api/orders?id=7").send().await?;
        let who = response.destination().id().to_string();
        let status = response.status();
        let body = response.text().await?;
        println!("call {i:2}: {who} answered {status} {body:?}");
        if who != "local-1" {
            return Err(format!("call {i} was answered by {who}, not local-1").into());
        }
    }

    // Each call that landed on local-2 was refused, reported, and retried on local-1.
    let status = engine.status();
    let local2 = status
        .cluster("orders")
        .and_then(|c| c.destination("local-2"));
    let (health, why) = local2
        .map(|d| (d.passive, d.last_reason.clone()))
        .unwrap_or_default();
    println!("local-2: {}", why.unwrap_or_default());
    if health != HealthState::Unhealthy {
        return Err("local-2 was not ejected".into());
    }

    // Nothing answers in `billing`: the error says which cluster, destination and URL failed.
    match client.get("billing", "/api/invoices").send().await {
        Ok(response) => return Err(format!("billing answered {}", response.status()).into()),
        Err(e) => {
            println!("billing: {e}");
            if e.destination() != Some("billing-1") {
                return Err("the error does not name billing-1".into());
            }
        }
    }
    println!(
        "ok: 20 calls, all answered by local-1; local-2 ejected; billing's error names billing-1"
    );
    Ok(())
}

//! The `reqwest-middleware` middleware: `http://<cluster>/...` URLs routed by healthpick.
//!
//! A `reqwest_middleware` client carries `HealthPickMiddleware`. A request whose URL host is a
//! cluster id (`http://inventory/api/stock`) goes to a destination of that cluster; any other
//! URL passes through untouched. In `inventory` (round robin over two shelves) `shelf-1` is down:
//! every other request lands on it, is refused and is retried on `shelf-2`, so every call
//! succeeds; after ten refusals passive checks eject `shelf-1`.
//!
//! ```text
//! GET http://inventory/api/stock x20 -> 200 shelf-2, 200 shelf-2, ...
//! GET http://127.0.0.1:PORT/direct -> "shelf-2"   (not a cluster: passed through)
//! shelf-1 passive health: Unhealthy
//! ok: 20 routed calls answered by shelf-2, shelf-1 ejected, plain URLs untouched
//! ```
//!
//! Run with `cargo run --example middleware --features middleware`. Exits 0 only if all that
//! held.

#[path = "support/tiny_server.rs"]
mod tiny_server;

use std::process::ExitCode;

use std::time::Duration;

use healthpick::middleware::HealthPickMiddleware;
use healthpick::{Engine, HealthState, Timeouts};
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
    let shelf2 = TinyServer::start("shelf-2").await?;
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "inventory": {{
              "LoadBalancingPolicy": "RoundRobin",
              "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
              "Destinations": {{
                "shelf-1": {{ "Address": "{}" }},
                "shelf-2": {{ "Address": "{}" }}
              }} }} }} }}"#,
        dead_url(),
        shelf2.url(),
    ))?;

    // The connect timeout is the reqwest client's; attempts and calls are bounded by the
    // middleware (defaults 15 s and 30 s; set here for the example).
    let http = reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(2))
        .build()?;
    let client = reqwest_middleware::ClientBuilder::new(http)
        // Tracing middleware goes before it (one span per call); healthpick comes last.
        .with(
            HealthPickMiddleware::builder(engine.clone())
                .timeouts(
                    Timeouts::default()
                        .attempt(Duration::from_secs(5))
                        .call(Duration::from_secs(10)),
                )
                .build(),
        )
        .build();

    let mut answered = Vec::new();
    for _ in 0..20 {
        let response = client.get("http://inventory/api/stock").send().await?;
        answered.push(format!(
            "{} {}",
            response.status().as_u16(),
            response.text().await?
        ));
    }
    println!(
        "GET http://inventory/api/stock x20 -> {}",
        answered.join(", ")
    );
    if let Some(other) = answered.iter().find(|a| *a != "200 shelf-2") {
        return Err(format!("a call got {other:?}, expected 200 from shelf-2").into());
    }

    // Not a cluster id: the middleware leaves the URL alone.
    let direct = format!("{}direct", shelf2.url());
    let body = client.get(&direct).send().await?.text().await?;
    println!("GET {direct} -> {body:?}   (not a cluster: passed through)");

    let status = engine.status();
    let shelf1 = status
        .cluster("inventory")
        .and_then(|c| c.destination("shelf-1"));
    let shelf1 = shelf1.map(|d| d.passive).unwrap_or_default();
    println!("shelf-1 passive health: {shelf1}");
    if shelf1 != HealthState::Unhealthy {
        return Err("shelf-1 was not ejected".into());
    }
    println!("ok: 20 routed calls answered by shelf-2, shelf-1 ejected, plain URLs untouched");
    Ok(())
}

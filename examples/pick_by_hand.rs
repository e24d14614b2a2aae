//! `Engine::pick_endpoint` by hand, with a plain `reqwest::Client`.
//!
//! The cluster `payments` has two instances: `eu-1` answers, `eu-2` is down (its port refuses
//! connections). Passive health checks are on. For each request the caller picks an instance,
//! sends the request itself and reports how it went; a transport failure is retried once on
//! another instance with `pick_endpoint_excluding`. After ten failed requests (the default
//! `MinimalTotalCountThreshold`) TransportFailureRate marks `eu-2` Unhealthy and it gets no more
//! picks.
//!
//! ```text
//! request  1: eu-1 -> 200 "eu-1"
//! request  2: eu-2 -> transport failure, retried: eu-1 -> 200 "eu-1"
//! ...
//! eu-2 passive health: Unhealthy
//! ok: every request answered; eu-2 was ejected after 10 failures and not picked again
//! ```
//!
//! Run with `cargo run --example pick_by_hand`. Exits 0 only if every request got an answer and
//! `eu-2` stopped being picked once ejected.

#[path = "support/tiny_server.rs"]
mod tiny_server;

use std::process::ExitCode;

use healthpick::{Engine, HealthState, PickHandle, RequestOutcome};
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
    let eu1 = TinyServer::start("eu-1").await?;
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "payments": {{
              "LoadBalancingPolicy": "RoundRobin",
              "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
              "Destinations": {{
                "eu-1": {{ "Address": "{}" }},
                "eu-2": {{ "Address": "{}" }}
              }} }} }} }}"#,
        eu1.url(),
        dead_url(),
    ))?;
    let http = reqwest::Client::builder().no_proxy().build()?;

    let mut eu2_picks = 0;
    for i in 1..=30 {
        let pick = engine.pick_endpoint("payments")?;
        let first = pick.destination().id().to_string();
        eu2_picks += usize::from(first == "eu-2");
        let line = match call(&http, &pick).await {
            Ok((status, body)) => format!("{first} -> {status} {body:?}"),
            Err(_) => {
                // Failed before any response: try once more, anywhere but there.
                drop(pick);
                let retry = engine.pick_endpoint_excluding("payments", &[&first])?;
                let (status, body) = call(&http, &retry).await?;
                let second = retry.destination().id();
                format!("{first} -> transport failure, retried: {second} -> {status} {body:?}")
            }
        };
        println!("request {i:2}: {line}");
    }

    let status = engine.status();
    let eu2 = status
        .cluster("payments")
        .and_then(|c| c.destination("eu-2"));
    let eu2 = eu2.map(|d| d.passive).unwrap_or_default();
    println!("eu-2 passive health: {eu2}");
    if eu2 != HealthState::Unhealthy || eu2_picks != 10 {
        return Err(
            format!("expected eu-2 ejected after 10 picks, got {eu2} after {eu2_picks}").into(),
        );
    }
    println!("ok: every request answered; eu-2 was ejected after 10 failures and not picked again");
    Ok(())
}

/// Sends `GET /api/orders?id=7` to the picked instance and reports the outcome to healthpick
/// (passive health checks learn from it). Returns the status and body.
async fn call(http: &reqwest::Client, pick: &PickHandle) -> Result<(u16, String), reqwest::Error> {
    // Joined as the client and the probes join it: a base path such as `/v1/` is kept.
    let url = pick.url("/api/orders?id=7");
    let result = match http.get(url).send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            response.text().await.map(|body| (status, body))
        }
        Err(e) => Err(e),
    };
    // A body that breaks off counts as a transport failure too; any status is not one.
    pick.report(match &result {
        Ok((status, _)) => RequestOutcome::Status(*status),
        Err(_) => RequestOutcome::TransportFailure,
    });
    result
}

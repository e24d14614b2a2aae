//! A service that drains gracefully, watched by a caller.
//!
//! The service serves `/` and healthpick's health endpoints (`health_router`) on 127.0.0.1. After
//! 1 s its shutdown signal arrives (a timer standing in for Ctrl-C or SIGTERM): it starts
//! draining, so `/api/systemstatus` answers `200 {"status":"Degraded"}` while everything is still
//! served for the 2 s drain delay; then the server stops. Meanwhile a caller polls both endpoints
//! every 250 ms and prints what it sees:
//!
//! ```text
//! t=0.00s  /api/systemstatus 200 Healthy    / 200   (serving)
//! t=1.01s  /api/systemstatus 200 Degraded   / 200   (draining)
//! t=3.01s  server stopped
//! ```
//!
//! Run with `cargo run --example draining_service --features axum`. Exits 0 only if the service
//! reported Healthy before the signal, Degraded with 200 while draining (still serving `/`), and
//! stopped after the delay.

use std::future::IntoFuture;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use healthpick::service::{health_router, Draining, HealthPayload};
use healthpick::ReportedHealth;
use tokio::net::TcpListener;

const SIGNAL_AFTER: Duration = Duration::from_secs(1);
const DRAIN_DELAY: Duration = Duration::from_secs(2);
const POLL_EVERY: Duration = Duration::from_millis(250);

/// Which phase the service was in when a poll started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Serving,
    Draining,
    DelayOver,
}

fn phase(draining: &Draining) -> Phase {
    match draining.remaining() {
        None => Phase::Serving,
        Some(left) if !left.is_zero() => Phase::Draining,
        Some(_) => Phase::DelayOver,
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt().with_target(true).init();

    // ---- the service ----
    let draining = Draining::builder()
        .delay(DRAIN_DELAY)
        .version(env!("CARGO_PKG_VERSION"))
        .environment("example")
        .build();
    let app = Router::new()
        .route("/", get(|| async { "hello from a service that drains\n" }))
        .merge(health_router(draining.clone()));
    let listener = match TcpListener::bind("127.0.0.1:0").await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("cannot bind 127.0.0.1:0: {e}");
            return ExitCode::FAILURE;
        }
    };
    let base = format!("http://{}", listener.local_addr().expect("bound address"));
    // In a real service: `draining.shutdown_signal(tokio::signal::ctrl_c())`.
    let shutdown = draining.shutdown_signal(tokio::time::sleep(SIGNAL_AFTER));
    let server = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .into_future(),
    );
    println!("service on {base}: shutdown signal in {SIGNAL_AFTER:?}, drain delay {DRAIN_DELAY:?}");

    // ---- a caller ----
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("client");
    let t0 = Instant::now();
    let mut failures = Vec::new();
    let (mut saw_healthy, mut saw_degraded) = (false, false);

    while !server.is_finished() {
        let phase = phase(&draining);
        let status = poll_status(&client, &base).await;
        let root = client
            .get(format!("{base}/"))
            .send()
            .await
            .map(|r| r.status().as_u16());
        let t = t0.elapsed().as_secs_f64();
        match (&status, &root) {
            (Ok((code, reported)), Ok(root_code)) => {
                let reported = reported.map_or("-", ReportedHealth::as_str);
                println!(
                    "t={t:.2}s  /api/systemstatus {code} {reported:<9} / {root_code}   ({phase:?})"
                );
                match phase {
                    Phase::Serving if *code == 200 && reported == "Healthy" => saw_healthy = true,
                    Phase::Draining if *code == 200 && reported == "Degraded" => {
                        saw_degraded = true
                    }
                    // The flip can land between reading the phase and the answer.
                    Phase::Serving | Phase::DelayOver if *code == 200 => {}
                    _ => failures.push(format!("t={t:.2}s: {code} {reported} while {phase:?}")),
                }
                if *root_code != 200 {
                    failures.push(format!(
                        "t={t:.2}s: `/` answered {root_code} while {phase:?}"
                    ));
                }
            }
            // Only once the delay is over may the service stop answering (it may have ended
            // while the request was on its way).
            _ if self::phase(&draining) == Phase::DelayOver => {
                println!("t={t:.2}s  no answer: stopping")
            }
            _ => failures.push(format!(
                "t={t:.2}s: no answer while {phase:?}: {status:?} {root:?}"
            )),
        }
        tokio::time::sleep(POLL_EVERY).await;
    }

    let stopped_after = t0.elapsed();
    match server.await {
        Ok(Ok(())) => println!("t={:.2}s  server stopped", stopped_after.as_secs_f64()),
        other => failures.push(format!("server ended badly: {other:?}")),
    }
    if stopped_after < SIGNAL_AFTER + DRAIN_DELAY {
        failures.push(format!(
            "server stopped after {stopped_after:?}, before the delay"
        ));
    }
    if poll_status(&client, &base).await.is_ok() {
        failures.push("the service still answers after stopping".to_string());
    }
    if !saw_healthy {
        failures.push("never saw 200 Healthy before the signal".to_string());
    }
    if !saw_degraded {
        failures.push("never saw 200 Degraded while draining".to_string());
    }

    if failures.is_empty() {
        println!(
            "ok: Healthy, then Degraded while still serving for {DRAIN_DELAY:?}, then stopped"
        );
        ExitCode::SUCCESS
    } else {
        for failure in &failures {
            eprintln!("FAILED: {failure}");
        }
        ExitCode::FAILURE
    }
}

/// GETs `/api/systemstatus` the way a caller's probe reads it: the status code and the payload's
/// status.
async fn poll_status(
    client: &reqwest::Client,
    base: &str,
) -> Result<(u16, Option<ReportedHealth>), reqwest::Error> {
    let response = client
        .get(format!("{base}/api/systemstatus"))
        .send()
        .await?;
    let code = response.status().as_u16();
    let body = response.bytes().await?;
    Ok((code, HealthPayload::parse(&body).and_then(|p| p.reported())))
}

//! healthpick routing around failures, end to end, on your machine.
//!
//! Starts five real HTTP backends on 127.0.0.1 (three "local" in tier 0, two "remote" in tier 1),
//! sends steady traffic through `Engine::pick_endpoint` with a plain `reqwest::Client` (retrying a
//! failed attempt with `pick_endpoint_excluding`), probes the backends' `/api/systemstatus` with
//! the built-in `ActiveMonitor`, and runs a scripted set of faults:
//!
//! | t (s) | fault                                   | expected routing                         |
//! |-------|-----------------------------------------|------------------------------------------|
//! | 2     | local-1 killed (connections reset)      | local-2, local-3                         |
//! | 4     | local-2 reports `Degraded`              | local-3 only (Degraded ranks below)      |
//! | 6     | local-2 and local-3 killed              | remote-1, remote-2 (tier failover)       |
//! | 8     | all locals restarted, Healthy           | back to tier 0                           |
//!
//! Run with `cargo run --example demo`. Exits 0 only if every expectation held and no request
//! failed from the caller's point of view (a transport failure is retried on another instance).

#[path = "support/backend.rs"]
mod backend;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backend::{Backend, Status};
use healthpick::{ActiveMonitor, Engine, HealthEventKind, RequestOutcome};

const CLUSTER: &str = "orders";
/// Time allowed for detection after a fault: threshold (2) probe rounds plus requests in flight.
const GRACE: f64 = 1.0;

/// One request attempt: when (s since start), where, and whether it got a response.
struct Attempt {
    at: f64,
    destination: String,
    ok: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("demo failed to run: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let names = ["local-1", "local-2", "local-3", "remote-1", "remote-2"];
    let mut backends = Vec::new();
    for name in names {
        backends.push(Backend::start(name).await?);
    }

    // A YARP cluster definition, as it would sit in appsettings.json. `Priority` is the tier.
    let destinations: Vec<String> = names
        .iter()
        .zip(&backends)
        .map(|(name, b)| {
            let tier = u32::from(name.starts_with("remote"));
            format!(
                r#""{name}": {{ "Address": "{}", "Priority": {tier} }}"#,
                b.url()
            )
        })
        .collect();
    let config = format!(
        r#"{{ "ReverseProxy": {{ "Clusters": {{ "{CLUSTER}": {{
            "HealthCheck": {{
              "Active": {{ "Enabled": true, "Interval": "00:00:00.25", "Timeout": "00:00:00.2",
                          "Path": "/api/systemstatus" }},
              "Passive": {{ "Enabled": true }}
            }},
            "Destinations": {{ {} }}
        }} }} }} }}"#,
        destinations.join(", ")
    );
    let engine = Engine::from_json(&config)?;
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(1))
        .build()?;
    let start = tokio::time::Instant::now();
    let secs = move || start.elapsed().as_secs_f64();

    println!("healthpick demo: 3 local backends (tier 0), 2 remote (tier 1), 4 callers\n");

    // Detection times: when a destination's active health turned Unhealthy.
    let detections = Arc::new(Mutex::new(Vec::<(f64, String, String)>::new()));
    let mut events = engine.subscribe();
    {
        let detections = detections.clone();
        tokio::spawn(async move {
            while let Ok(event) = events.recv().await {
                if let HealthEventKind::HealthChanged {
                    destination,
                    part,
                    from,
                    to,
                    reason,
                } = event.kind
                {
                    let line = format!("{part} {from} -> {to} ({reason})");
                    println!("  [{:5.2}s] {destination}: {line}", secs());
                    detections.lock().unwrap().push((
                        secs(),
                        destination.to_string(),
                        to.to_string(),
                    ));
                }
            }
        });
    }

    // The built-in active monitor probes every destination's /api/systemstatus each 250 ms.
    let monitor = ActiveMonitor::start(&engine);
    engine.ready().await;
    let stop = Arc::new(AtomicBool::new(false));

    let attempts = Arc::new(Mutex::new(Vec::<Attempt>::new()));
    let failures = Arc::new(AtomicU64::new(0));
    let requests = Arc::new(AtomicU64::new(0));
    let retries = Arc::new(AtomicU64::new(0));
    let mut callers = Vec::new();
    for _ in 0..4 {
        let (engine, http, stop) = (engine.clone(), http.clone(), stop.clone());
        let (attempts, failures, requests, retries) = (
            attempts.clone(),
            failures.clone(),
            requests.clone(),
            retries.clone(),
        );
        callers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                requests.fetch_add(1, Ordering::Relaxed);
                let mut tried: Vec<String> = Vec::new();
                let mut done = false;
                for _ in 0..3 {
                    let Some(pick) = pick_untried(&engine, &tried) else {
                        break;
                    };
                    let id = pick.destination().id().to_string();
                    let url = pick.address().join("api/orders")?;
                    let ok = match http.get(url).send().await {
                        Ok(response) => {
                            pick.report(RequestOutcome::Status(response.status().as_u16()));
                            let _ = response.bytes().await;
                            true
                        }
                        Err(_) => {
                            pick.report(RequestOutcome::TransportFailure);
                            false
                        }
                    };
                    drop(pick);
                    attempts.lock().unwrap().push(Attempt {
                        at: secs(),
                        destination: id.clone(),
                        ok,
                    });
                    if ok {
                        done = true;
                        break;
                    }
                    retries.fetch_add(1, Ordering::Relaxed);
                    tried.push(id);
                }
                if !done {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok::<(), url::ParseError>(())
        }));
    }

    let kill_times: Arc<Mutex<BTreeMap<String, f64>>> = Arc::default();
    let step = |t: f64| tokio::time::sleep_until(start + Duration::from_secs_f64(t));

    step(2.0).await;
    println!("[{:5.2}s] FAULT: local-1 killed", secs());
    backends[0].kill();
    kill_times.lock().unwrap().insert("local-1".into(), secs());

    step(4.0).await;
    println!("[{:5.2}s] FAULT: local-2 reports Degraded", secs());
    backends[1].set_status(Status::Degraded);
    kill_times
        .lock()
        .unwrap()
        .insert("local-2 degraded".into(), secs());

    step(6.0).await;
    println!(
        "[{:5.2}s] FAULT: local-2 and local-3 killed: no local instance left",
        secs()
    );
    backends[1].kill();
    backends[2].kill();
    kill_times.lock().unwrap().insert("local-3".into(), secs());

    step(8.0).await;
    println!(
        "[{:5.2}s] RESTORE: all local instances restarted and Healthy",
        secs()
    );
    for b in &mut backends[..3] {
        b.set_status(Status::Healthy);
        b.restart().await?;
    }

    step(10.0).await;
    stop.store(true, Ordering::Relaxed);
    for c in callers {
        c.await??;
    }
    monitor.stop().await;

    print_status(&engine);

    // ---- expectations ----
    let attempts = attempts.lock().unwrap();
    let served_in = |from: f64, to: f64| -> BTreeMap<&str, usize> {
        let mut m = BTreeMap::new();
        for a in attempts
            .iter()
            .filter(|a| a.ok && a.at >= from && a.at < to)
        {
            *m.entry(a.destination.as_str()).or_default() += 1;
        }
        m
    };
    let tried_in = |dest: &str, from: f64, to: f64| {
        attempts
            .iter()
            .filter(|a| a.destination == dest && a.at >= from && a.at < to)
            .count()
    };
    let only = |m: &BTreeMap<&str, usize>, allowed: &[&str]| {
        !m.is_empty() && m.keys().all(|k| allowed.contains(k))
    };
    let phase1 = served_in(0.0, 2.0);
    let phase2 = served_in(2.0 + GRACE, 4.0);
    let phase3 = served_in(4.0 + GRACE, 6.0);
    let phase4 = served_in(6.0 + GRACE, 8.0);
    let phase5 = served_in(8.0 + GRACE, 10.0);
    let failures = failures.load(Ordering::Relaxed);
    let checks = [
        ("no caller-visible failure", failures == 0),
        (
            "0-2 s: only tier 0 serves",
            only(&phase1, &["local-1", "local-2", "local-3"]),
        ),
        (
            "after local-1 died: no attempt reaches it",
            tried_in("local-1", 2.0 + GRACE, 8.0) == 0,
        ),
        (
            "local-2 Degraded: only local-3 serves",
            only(&phase3, &["local-3"]),
        ),
        (
            "no local left: tier 1 serves",
            only(&phase4, &["remote-1", "remote-2"]),
        ),
        (
            "locals restored: traffic is back on tier 0",
            only(&phase5, &["local-1", "local-2", "local-3"]),
        ),
    ];

    println!("\nserved per phase (after {GRACE} s detection grace):");
    for (name, m) in [
        ("0-2 s   all healthy     ", &phase1),
        ("3-4 s   local-1 dead    ", &phase2),
        ("5-6 s   local-2 degraded", &phase3),
        ("7-8 s   locals dead     ", &phase4),
        ("9-10 s  restored        ", &phase5),
    ] {
        println!("  {name}  {m:?}");
    }
    println!(
        "\nrequests: {}   caller-visible failures: {failures}   retries on another instance: {}",
        requests.load(Ordering::Relaxed),
        retries.load(Ordering::Relaxed)
    );
    let detections = detections.lock().unwrap();
    for (fault, at) in kill_times.lock().unwrap().iter() {
        let dest = fault.split(' ').next().unwrap_or(fault);
        let wanted = if fault.ends_with("degraded") {
            "Degraded"
        } else {
            "Unhealthy"
        };
        if let Some((t, _, _)) = detections
            .iter()
            .find(|(t, d, to)| d == dest && to == wanted && t >= at)
        {
            println!("time to detect {fault:<18} {:>5.0} ms", (t - at) * 1000.0);
        }
    }
    let mut all_ok = true;
    println!();
    for (name, ok) in checks {
        println!("  [{}] {name}", if ok { "ok" } else { "FAILED" });
        all_ok &= ok;
    }
    println!(
        "\n{}",
        if all_ok {
            "every expectation held"
        } else {
            "SOME EXPECTATIONS FAILED"
        }
    );
    Ok(all_ok)
}

/// The first attempt takes the best destination; a retry takes the next best one not tried
/// yet in this call, in the same tier first, then the next tier.
fn pick_untried(engine: &Engine, tried: &[String]) -> Option<healthpick::PickHandle> {
    if tried.is_empty() {
        engine.pick_endpoint(CLUSTER).ok()
    } else {
        engine.pick_endpoint_excluding(CLUSTER, tried).ok()
    }
}

fn print_status(engine: &Engine) {
    let status = engine.status();
    println!("\nfinal state:");
    println!(
        "  {:<10} {:>4} {:<10} {:<10} {:<9} {:<9}",
        "dest", "tier", "active", "passive", "reported", "available"
    );
    for c in &status.clusters {
        for d in &c.destinations {
            let reported = d.reported.map_or("-".to_string(), |r| r.to_string());
            println!(
                "  {:<10} {:>4} {:<10} {:<10} {:<9} {:<9}",
                d.id,
                d.tier,
                d.active.to_string(),
                d.passive.to_string(),
                reported,
                d.available
            );
        }
    }
}

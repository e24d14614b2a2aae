//! What callers see while one destination of three is frozen for 5 s, with and without hedging:
//! the 50th, 99th and 99.9th percentile and the maximum of the latencies of the
//! calls that started during the freeze.
//!
//! Three child processes (this binary, run again with `HEALTHPICK_FREEZE_CHILD=<name>`) serve the
//! examples' backend on loopback. For each scenario a fresh engine and `HealthAwareClient` (the
//! default timeouts: 15 s per attempt, so the freeze ends before any attempt times out) get 16
//! callers that send GETs one after another with a 5 ms pause; after 2 s of warm-up one child is
//! stopped (`SIGSTOP`), 5 s later continued (`SIGCONT`), and the callers run 1 s more.
//!
//! Scenarios: the cluster's load balancer (`PowerOfTwoChoices`, the default, which stops sending
//! to a destination whose requests pile up; `RoundRobin`, which keeps sending it every third
//! call) times the hedging (none; after a fixed 20 ms; at the cluster's 95th percentile), each
//! hedge capped at the default 5% of calls.
//!
//! ```text
//! cargo bench --bench freeze
//! ```
//!
//! Prints one line per scenario. Without `--bench` (as `cargo test --benches` runs it) it does
//! nothing: it is a measurement, not a test.
//!
//! Measured so (2-core VM shared with other builds, so the microsecond figures are loose; the
//! second ones are not):
//!
//! ```text
//! PowerOfTwoChoices, no hedging       :  6866 calls, p50 188µs, p99 2.88ms, p99.9 4.36s, max 5.01s; 7 over 1 s
//! PowerOfTwoChoices, hedge after 20 ms:  9189 calls, p50 250µs, p99 22.2ms, p99.9 28.9ms, max 1.22s; 4 over 1 s
//! PowerOfTwoChoices, hedge at p95     :  8125 calls, p50 276µs, p99 4.68ms, p99.9 2.00s, max 2.00s; 12 over 1 s
//!        RoundRobin, no hedging       :    48 calls, p50 400µs, p99 5.00s, p99.9 5.00s, max 5.00s; 16 over 1 s
//!        RoundRobin, hedge after 20 ms:   873 calls, p50 375µs, p99 2.00s, p99.9 2.01s, max 2.01s; 35 over 1 s
//!        RoundRobin, hedge at p95     :   893 calls, p50 349µs, p99 2.00s, p99.9 2.01s, max 2.01s; 38 over 1 s
//! ```
//!
//! How to read it: PowerOfTwoChoices stops sending to the frozen destination once a few
//! requests pile up there, so without hedging only those few callers wait out the freeze (the
//! p99.9 and the maximum); hedging after 20 ms answers them at about 20 ms plus a healthy
//! response (p99 22 ms). RoundRobin keeps sending a third of the calls to the frozen
//! destination: without hedging all 16 callers are soon stuck there for the whole freeze (48
//! calls in 5 s); with hedging the cap (5% of calls) lets only some hedge, and the others end
//! after 2 s, the default connect timeout: the frozen process accepts no more connections once
//! its accept queue is full (every cancelled attempt there left one behind), the connect times
//! out, and the call moves on without using up an attempt. Hedging at p95 waits less than a
//! millisecond here (the 95th percentile of healthy answers), so the slowest 5% of healthy calls
//! spend the 5% cap as well, and fewer of the frozen destination's calls get a hedge than with a
//! fixed 20 ms: a percentile delay is meant for a cap of the share above that percentile
//! (Finagle's rule), and for a frozen destination a fixed delay above the healthy tail does
//! better.

#[path = "../examples/support/backend.rs"]
mod backend;

use std::io::{BufRead, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use healthpick::{Engine, HealthAwareClient, Hedging};
use tokio::time::Instant;

const CHILD_ENV: &str = "HEALTHPICK_FREEZE_CHILD";
const MARKER: &str = "HEALTHPICK_FREEZE_URL=";
const CALLERS: usize = 16;
const WARM_UP: Duration = Duration::from_secs(2);
const FREEZE: Duration = Duration::from_secs(5);
const AFTER: Duration = Duration::from_secs(1);

fn main() {
    if let Ok(name) = std::env::var(CHILD_ENV) {
        serve(&name);
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        println!("freeze: a measurement; run it with `cargo bench --bench freeze`");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        println!(
            "calls started during a {FREEZE:?} SIGSTOP of one destination of three \
             ({CALLERS} callers):"
        );
        for policy in ["PowerOfTwoChoices", "RoundRobin"] {
            for (name, hedging) in [
                ("no hedging", None),
                (
                    "hedge after 20 ms",
                    Some(Hedging::after(Duration::from_millis(20))),
                ),
                ("hedge at p95", Some(Hedging::at_percentile(95.0))),
            ] {
                scenario(policy, name, hedging).await;
            }
        }
    });
}

/// A child: serves until killed.
fn serve(name: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("child runtime");
    runtime.block_on(async {
        let server = backend::Backend::start(name).await.expect("backend");
        let mut out = std::io::stdout().lock();
        writeln!(out, "{MARKER}{}", server.url()).expect("stdout");
        out.flush().expect("stdout");
        drop(out);
        std::future::pending::<()>().await;
    });
}

struct ChildBackend {
    child: Child,
    url: String,
}

impl ChildBackend {
    fn start(name: &str) -> ChildBackend {
        let mut child = Command::new(std::env::current_exe().expect("this binary"))
            .env(CHILD_ENV, name)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn a child");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        let mut reader = std::io::BufReader::new(stdout);
        while !line.contains(MARKER) {
            line.clear();
            if reader.read_line(&mut line).expect("child output") == 0 {
                panic!("child {name} ended before it listened");
            }
        }
        let url = line[line.find(MARKER).unwrap() + MARKER.len()..]
            .trim()
            .to_string();
        ChildBackend { child, url }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill(1)");
        assert!(status.success());
        if signal == "STOP" {
            // Delivered asynchronously: wait until the kernel shows the process stopped.
            let stat = format!("/proc/{}/stat", self.child.id());
            while !std::fs::read_to_string(&stat).is_ok_and(|s| {
                s.rsplit(") ")
                    .next()
                    .is_some_and(|rest| rest.starts_with('T'))
            }) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

impl Drop for ChildBackend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn scenario(policy: &str, name: &str, hedging: Option<Hedging>) {
    let children: Vec<ChildBackend> = ["d0", "d1", "d2"]
        .into_iter()
        .map(ChildBackend::start)
        .collect();
    let destinations = children
        .iter()
        .enumerate()
        .map(|(i, c)| format!(r#""d{i}": {{ "Address": "{}" }}"#, c.url))
        .collect::<Vec<_>>()
        .join(", ");
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "c": {{ "LoadBalancingPolicy": "{policy}",
            "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
            "Destinations": {{ {destinations} }} }} }} }}"#
    ))
    .expect("config");
    let client = HealthAwareClient::builder(engine)
        .http_builder(reqwest::Client::builder().no_proxy())
        .hedging(hedging)
        .build()
        .expect("client");
    let stop = Arc::new(AtomicBool::new(false));
    let calls: Arc<Mutex<Vec<(Instant, Duration, bool)>>> = Arc::default();
    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..CALLERS {
        let (client, stop, calls) = (client.clone(), stop.clone(), calls.clone());
        callers.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let ok = match client.get("c", "/api/orders").send().await {
                    Ok(response) => response.bytes().await.is_ok(),
                    Err(_) => false,
                };
                calls.lock().unwrap().push((started, started.elapsed(), ok));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    }
    tokio::time::sleep(WARM_UP).await;
    let frozen_at = Instant::now();
    children[1].signal("STOP");
    tokio::time::sleep(FREEZE).await;
    children[1].signal("CONT");
    let thawed_at = Instant::now();
    tokio::time::sleep(AFTER).await;
    stop.store(true, Ordering::Relaxed);
    while callers.join_next().await.is_some() {}
    let calls = calls.lock().unwrap();
    let mut during: Vec<Duration> = calls
        .iter()
        .filter(|(at, _, _)| *at >= frozen_at && *at < thawed_at)
        .map(|(_, took, _)| *took)
        .collect();
    let errors = calls.iter().filter(|(_, _, ok)| !ok).count();
    during.sort_unstable();
    let at = |q: f64| during[((during.len() as f64 * q) as usize).min(during.len() - 1)];
    let slow = during
        .iter()
        .filter(|d| **d > Duration::from_secs(1))
        .count();
    println!(
        "  {policy:>17}, {name:<17}: {:>5} calls, p50 {:>9.2?}, p99 {:>9.2?}, p99.9 {:>9.2?}, \
         max {:>9.2?}; {slow} over 1 s; {errors} errors",
        during.len(),
        at(0.50),
        at(0.99),
        at(0.999),
        during[during.len() - 1],
    );
}

//! What the wrapped client ([`HealthAwareClient`]) adds to a request, measured with
//! criterion against a plain `reqwest::Client` on loopback.
//!
//! One hyper server (the examples' backend: a small text body) runs on its own thread with a
//! single-threaded tokio runtime; the callers run on a single-threaded runtime on the bench
//! thread (two busy threads in all, so a two-core machine is not oversubscribed). Both arms share one
//! `reqwest::Client` (no proxy), so they use the same connection pool, and both read the whole
//! body. Clusters have no health checks (every destination is Unknown, so available):
//!
//! - `one`: a single destination (the pick returns it without consulting the load balancer);
//! - `three`: three destinations with the default `PowerOfTwoChoices`; all three point at the
//!   same server, so the load balancer and retry bookkeeping are measured, not a different
//!   server layout.
//!
//! Groups (the full benchmark id is `group/arm`):
//!
//! - `client/latency/{reqwest,healthpick_1dest,healthpick_3dest}`: one GET of `/api/orders`
//!   after another, body read; the figure is the time of one request. Compare the medians.
//! - `client/throughput32/{reqwest,healthpick_1dest,healthpick_3dest}`: the same GETs with 32 in
//!   flight at all times (32 tasks draw from a shared count of requests to make); the figure is
//!   wall time per request and criterion's `thrpt` line shows requests per second.
//!
//! - with `--features metrics` only, a fourth arm, `healthpick_1dest_metrics`: `one` in an
//!   engine of its own built while a `metrics_util` `DebuggingRecorder` was in force, warmed up
//!   under it too, so each request also counts its pick, in-flight gauge and outcome and records
//!   one `http.client.request.duration` sample (the recorder keeps every sample, as exporters'
//!   histograms do until scraped). The other arms have no-op handles. Compare it with
//!   `healthpick_1dest`, in the groups and in the paired run.
//!
//! - after the criterion groups, a **paired** run prints the same comparison with the arms
//!   interleaved: latency request by request (median of 20,000 requests per arm), throughput in
//!   401 short rounds of 2,000 requests per arm with 32 in flight, reported as the median of the
//!   per-round ratios to plain reqwest:
//!
//!   ```text
//!   latency: reqwest <median>, healthpick_1dest <median>, added <+x.xx>%
//!   throughput 32 in flight: reqwest <n> req/s, healthpick_1dest <m> req/s, loss <x.xx>% (...)
//!   ```
//!
//!   where `<n>` is reqwest's median rate and `<m>` is `<n>` times the median per-round ratio,
//!   so that the line agrees with its loss.
//!
//!   Criterion measures the arms one after another, so on a shared machine a change of
//!   background load between two arms shows up as a difference between them; the paired figures
//!   cancel that out. The aim: under 3% added median latency and under 3% throughput loss.
//!
//! - `HEALTHPICK_BENCH_ONE_ARM=<arm>:<n>` in the environment: after warming up, only `n`
//!   requests of that arm with 32 in flight, then exit. Instruction counts do not depend on what
//!   else the machine does, so this is how to see what the wrapper costs the caller's thread:
//!
//!   ```text
//!   valgrind --tool=callgrind --separate-threads=yes target/release/deps/client-<hash> --bench
//!   ```
//!
//!   once with `n` = 1000 and once with 3000, per arm; the difference of the caller thread's
//!   totals (the `-01` file) over 2000 is the arm's instructions per request.
//!
//! Run `cargo bench --bench client` (a few minutes), `cargo bench --bench client -- paired` for
//! the paired comparison alone (the filter matches no criterion benchmark), add `--quick` for a
//! short run that only shows it works, or `cargo bench --bench client -- --test` to run each
//! benchmark once; add `--features metrics` (before `--`) for the metrics arm.

#[path = "../examples/support/backend.rs"]
mod backend;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use healthpick::{Engine, HealthAwareClient};

/// Requests kept in flight by the throughput group.
const IN_FLIGHT: u64 = 32;

/// One way of sending `GET /api/orders` and reading the body.
#[derive(Clone)]
enum Arm {
    Reqwest(reqwest::Client, String),
    Healthpick(HealthAwareClient, &'static str),
}

impl Arm {
    async fn get(&self) -> usize {
        match self {
            Arm::Reqwest(http, url) => {
                let response = http.get(url).send().await.expect("GET");
                assert!(response.status().is_success());
                response.bytes().await.expect("body").len()
            }
            Arm::Healthpick(client, cluster) => {
                let response = client
                    .get(cluster, "/api/orders")
                    .send()
                    .await
                    .expect("GET");
                assert!(response.status().is_success());
                response.bytes().await.expect("body").len()
            }
        }
    }
}

/// Starts the server on its own thread with a single-threaded runtime; returns its URL. The
/// thread lives until the process ends.
fn start_server() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("bench-server".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("server runtime");
            rt.block_on(async move {
                let server = backend::Backend::start("bench").await.expect("server");
                tx.send(server.url()).expect("url");
                std::future::pending::<()>().await;
            });
        })
        .expect("server thread");
    rx.recv().expect("server url")
}

/// `n` destinations named `d0..`, all at `url`.
fn cluster(id: &str, url: &str, n: usize) -> String {
    let destinations = (0..n)
        .map(|i| format!(r#""d{i}": {{ "Address": "{url}" }}"#))
        .collect::<Vec<_>>()
        .join(", ");
    format!(r#""{id}": {{ "Destinations": {{ {destinations} }} }}"#)
}

/// Makes `total` requests with `IN_FLIGHT` of them in flight; returns the wall time.
async fn run_concurrently(arm: &Arm, total: u64) -> Duration {
    let remaining = Arc::new(AtomicU64::new(total));
    let start = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..IN_FLIGHT.min(total) {
        let (arm, remaining) = (arm.clone(), remaining.clone());
        workers.spawn(async move {
            while remaining
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                black_box(arm.get().await);
            }
        });
    }
    while let Some(done) = workers.join_next().await {
        done.expect("worker");
    }
    start.elapsed()
}

fn bench_client(c: &mut Criterion) {
    let url = start_server();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client");
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ {}, {} }} }}"#,
        cluster("one", &url, 1),
        cluster("three", &url, 3)
    ))
    .expect("config");
    // The default timeouts (15 s per attempt, 30 s per call) are on; plain reqwest has none.
    let client = HealthAwareClient::new(http.clone(), engine);
    #[allow(unused_mut)] // the metrics arm comes with feature `metrics` only
    let mut arms = vec![
        (
            "reqwest",
            Arm::Reqwest(http.clone(), format!("{url}api/orders")),
        ),
        ("healthpick_1dest", Arm::Healthpick(client.clone(), "one")),
        ("healthpick_3dest", Arm::Healthpick(client, "three")),
    ];
    // Warm the pool so no arm pays for the first connections.
    rt.block_on(async {
        for (_, arm) in &arms {
            run_concurrently(arm, 4 * IN_FLIGHT).await;
        }
    });
    #[cfg(feature = "metrics")]
    {
        // Handles are registered with the recorder in force: when the engine is built (picks,
        // in flight, outcomes) and on each thread's first attempt of a kind (the histogram).
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let engine = metrics::with_local_recorder(&recorder, || {
            Engine::from_json(&format!(
                r#"{{ "Clusters": {{ {} }} }}"#,
                cluster("one", &url, 1)
            ))
        })
        .expect("config");
        let arm = Arm::Healthpick(HealthAwareClient::new(http, engine), "one");
        metrics::with_local_recorder(&recorder, || {
            rt.block_on(run_concurrently(&arm, 4 * IN_FLIGHT))
        });
        arms.push(("healthpick_1dest_metrics", arm));
    }
    if let Ok(only) = std::env::var("HEALTHPICK_BENCH_ONE_ARM") {
        one_arm(&rt, &arms, &only);
        return;
    }

    let mut latency = c.benchmark_group("client/latency");
    latency.throughput(Throughput::Elements(1));
    for (name, arm) in &arms {
        latency.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(arm.get().await);
                    }
                    start.elapsed()
                })
            });
        });
    }
    latency.finish();

    let mut throughput = c.benchmark_group("client/throughput32");
    throughput.throughput(Throughput::Elements(1));
    for (name, arm) in &arms {
        throughput.bench_function(*name, |b| {
            b.iter_custom(|iters| rt.block_on(run_concurrently(arm, iters)));
        });
    }
    throughput.finish();

    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    // `cargo bench` passes `--bench`; `cargo test --benches` (CI) does not, and criterion then
    // runs each benchmark once as a test: the paired comparison is a measurement, so skip it.
    if has("--bench") && !(has("--test") || has("--list") || has("--profile-time")) {
        let size = if has("--quick") {
            Paired::QUICK
        } else {
            Paired::FULL
        };
        rt.block_on(paired(&arms, size));
    }
}

/// `HEALTHPICK_BENCH_ONE_ARM=<arm>:<requests>`: makes only that many requests of one arm, with
/// `IN_FLIGHT` in flight, and exits, for counting instructions under callgrind (see the file
/// comment).
fn one_arm(rt: &tokio::runtime::Runtime, arms: &[(&str, Arm)], spec: &str) {
    let (name, requests) = spec.split_once(':').unwrap_or((spec, "1000"));
    let requests: u64 = requests
        .parse()
        .expect("HEALTHPICK_BENCH_ONE_ARM=<arm>:<requests>");
    let (_, arm) = arms.iter().find(|(n, _)| *n == name).expect(
        "HEALTHPICK_BENCH_ONE_ARM names an arm: reqwest, healthpick_1dest, healthpick_3dest \
         (and healthpick_1dest_metrics with feature `metrics`)",
    );
    let took = rt.block_on(run_concurrently(arm, requests));
    eprintln!("{name}: {requests} requests in {took:.2?}");
}

/// How much the paired comparison measures.
#[derive(Clone, Copy)]
struct Paired {
    /// Requests per arm in the latency comparison.
    requests: usize,
    /// Rounds of the throughput comparison; each round runs every arm once.
    rounds: usize,
    /// Requests per arm and round (with `IN_FLIGHT` in flight).
    round_requests: u64,
}

impl Paired {
    const FULL: Paired = Paired {
        requests: 20_000,
        rounds: 401,
        round_requests: 2_000,
    };
    /// With `--quick`: enough to see that it works, not a measurement.
    const QUICK: Paired = Paired {
        requests: 2_000,
        rounds: 15,
        round_requests: 1_000,
    };
}

/// The same comparison with the arms interleaved, so that load from elsewhere on the machine
/// hits every arm alike:
///
/// - latency: one request of each arm in turn (who goes first rotates); the median of each
///   arm's latencies;
/// - throughput with `IN_FLIGHT` in flight: many short rounds, in each of which every arm makes
///   the same number of requests (who goes first rotates); each round gives every arm a ratio of
///   its rate to plain reqwest's in that round, and the figure is the median of those ratios, so
///   a change of background load between rounds cancels out.
async fn paired(arms: &[(&str, Arm)], size: Paired) {
    let mut latencies: Vec<Vec<Duration>> = vec![Vec::with_capacity(size.requests); arms.len()];
    for i in 0..size.requests {
        for k in 0..arms.len() {
            let k = (i + k) % arms.len();
            let start = Instant::now();
            black_box(arms[k].1.get().await);
            latencies[k].push(start.elapsed());
        }
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::with_capacity(size.rounds); arms.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::with_capacity(size.rounds); arms.len()];
    let mut cpu: Vec<Duration> = vec![Duration::ZERO; arms.len()];
    for round in 0..size.rounds {
        let mut rate = vec![0.0; arms.len()];
        for k in 0..arms.len() {
            let k = (round + k) % arms.len();
            let cpu_before = thread_cpu_time();
            let took = run_concurrently(&arms[k].1, size.round_requests).await;
            if let (Some(before), Some(after)) = (cpu_before, thread_cpu_time()) {
                cpu[k] += after.saturating_sub(before);
            }
            rate[k] = size.round_requests as f64 / took.as_secs_f64();
        }
        for k in 0..arms.len() {
            rates[k].push(rate[k]);
            ratios[k].push(rate[k] / rate[0]);
        }
    }

    let (base_name, _) = arms[0];
    let base_latency = median(&mut latencies[0]);
    let base_rate = median_f64(&mut rates[0]);
    println!(
        "\npaired comparison ({} interleaved GETs per arm; {} rounds of {} requests per arm with \
         {IN_FLIGHT} in flight):",
        size.requests, size.rounds, size.round_requests
    );
    for k in 1..arms.len() {
        let name = arms[k].0;
        let latency = median(&mut latencies[k]);
        println!(
            "  latency: {base_name} {base_latency:.2?}, {name} {latency:.2?}, added {:+.2}%",
            (latency.as_secs_f64() / base_latency.as_secs_f64() - 1.0) * 100.0
        );
    }
    // The wrapped arm's rate is shown as the reqwest median times the median per-round ratio,
    // so the line agrees with its loss; the arms' own medians come from different rounds.
    for k in 1..arms.len() {
        let name = arms[k].0;
        let own = median_f64(&mut rates[k]);
        let ratio = median_f64(&mut ratios[k]);
        // Sorted by median_f64: the middle half of the rounds lost between these.
        let quartile = |q: usize| (1.0 - ratios[k][ratios[k].len() * q / 4]) * 100.0;
        eprintln!(
            "  {name}: per-round loss quartiles {:.2}% .. {:.2}%",
            quartile(3),
            quartile(1)
        );
        println!(
            "  throughput {IN_FLIGHT} in flight: {base_name} {base_rate:.0} req/s, {name} {:.0} \
             req/s, loss {:.2}% (median of per-round ratios; {name}'s own median {own:.0} req/s)",
            base_rate * ratio,
            (1.0 - ratio) * 100.0
        );
    }
    // Where the time goes: CPU of the callers' thread (user and kernel) per request.
    if cpu[0] > Duration::ZERO {
        let requests = (size.rounds as u64 * size.round_requests) as u32;
        let base_cpu = cpu[0] / requests;
        for k in 1..arms.len() {
            let own = cpu[k] / requests;
            println!(
                "  caller thread CPU per request, {IN_FLIGHT} in flight: {base_name} {base_cpu:.2?}, \
                 {} {own:.2?} ({:+.2}%)",
                arms[k].0,
                (own.as_secs_f64() / base_cpu.as_secs_f64() - 1.0) * 100.0
            );
        }
    }
}

/// CPU time of the calling thread so far (user and kernel), from Linux's
/// `/proc/thread-self/schedstat`; `None` elsewhere.
fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

fn median_f64(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    values[values.len() / 2]
}

criterion_group!(benches, bench_client);
criterion_main!(benches);

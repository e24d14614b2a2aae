//! What one active-probe round costs: wall time and CPU time of probing every
//! destination of a cluster once, on loopback, for 1,000 and 10,000 destinations with a bound of
//! 64 and 256 probes in flight.
//!
//! A custom harness (`harness = false`), not criterion: a round is a long, I/O-bound operation and
//! the interesting figure besides wall time is CPU time, which criterion does not measure.
//!
//! Setup: 4 hyper listeners on `127.0.0.1:0`, served by their own 2-thread tokio runtime (threads
//! `bench-server`); destination `i` is `http://127.0.0.1:PORT/d/{i}/` on listener `i % 4` and is
//! probed at `/d/{i}/health` (distinct paths), answered `200 ok` at once. The prober runs on a
//! separate 2-thread runtime (threads `probe-client`). After every round the bench checks that the
//! servers saw exactly one probe per destination and that every destination is Healthy, so a
//! round that failed cannot pass for a fast one.
//!
//! Two ways to time one round:
//!
//! - `cold`: a new [`ActiveMonitor`] (new connection pool) on a fresh engine, timed from `start`
//!   until `engine.ready()` resolves — what a process pays for its first round, including building
//!   the probe clients and opening up to `bound` connections;
//! - `warm`: [`EndpointSet::refresh`] on a set whose pool is already open — the steady state,
//!   one round every interval.
//!
//! A first case with a single destination shows the fixed cost of a round (for `cold`, mostly
//! building the monitor's probe clients).
//!
//! Figures per case: median and min wall time, the prober's CPU time (sum over the
//! `probe-client` threads from `/proc/self/task/*/schedstat`, ns precision), the servers' CPU
//! time, and the prober's CPU per probe. CPU times need Linux `/proc`; elsewhere they print `-`.
//!
//! Run `cargo bench --bench probe_round` (about 20 s) for the table, or
//! `cargo bench --bench probe_round -- --test` / `cargo test --benches` for one small round of
//! each kind, checked but not worth reading as a timing (CI).

// Without its `[[bench]] harness = false` entry, cargo builds this file as a libtest bench in
// which `main` is unused; the `quick` test below then runs the CI mode instead.
#![cfg_attr(test, allow(dead_code))]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use healthpick::config::{ActiveHealthCheckConfig, ClusterConfig, DestinationConfig};
use healthpick::monitor::ActiveMonitor;
use healthpick::{Config, EndpointSet, Engine, HealthState};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

const LISTENERS: usize = 4;
const CLIENT_THREADS: &str = "probe-client";
const SERVER_THREADS: &str = "bench-server";

/// One measured configuration.
#[derive(Clone, Copy)]
struct Case {
    destinations: usize,
    bound: usize,
    /// Measured rounds of each kind (after one unmeasured warm-up round).
    rounds: usize,
}

fn main() {
    // As criterion does: `cargo bench` passes `--bench` and gets the full run; `cargo test
    // --benches` passes nothing and `cargo bench -- --test` asks for it, both get the quick run.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--test") || !args.iter().any(|a| a == "--bench");
    run(quick);
}

#[cfg(test)]
#[test]
fn quick() {
    run(true);
}

fn run(quick: bool) {
    let cases: Vec<Case> = if quick {
        vec![Case {
            destinations: 200,
            bound: 64,
            rounds: 1,
        }]
    } else {
        // One destination: the fixed cost of a round (for `cold`, of starting a monitor).
        let mut cases = vec![Case {
            destinations: 1,
            bound: 64,
            rounds: 10,
        }];
        for (destinations, rounds) in [(1_000, 10), (10_000, 5)] {
            for bound in [64, 256] {
                cases.push(Case {
                    destinations,
                    bound,
                    rounds,
                });
            }
        }
        cases
    };

    let servers = Servers::start();
    let client = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(CLIENT_THREADS)
        .enable_all()
        .build()
        .expect("client runtime");

    println!(
        "probe_round: one active-probe round on loopback ({} CPUs, {LISTENERS} listeners, \
         prober on 2 threads, servers on 2 threads){}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if quick {
            " [quick mode: no timing value]"
        } else {
            ""
        }
    );
    println!(
        "{:<6} {:>6} {:>5} {:>7} {:>10} {:>10} {:>12} {:>12} {:>13}",
        "kind",
        "dests",
        "bound",
        "rounds",
        "wall med",
        "wall min",
        "client CPU",
        "server CPU",
        "client/probe"
    );
    for case in cases {
        for kind in [Kind::Cold, Kind::Warm] {
            // Spawned, so that the round's own bookkeeping runs on (and is counted for) the
            // client threads rather than on the main thread.
            let (addrs, served) = (servers.addrs.clone(), servers.served.clone());
            let row = client
                .block_on(client.spawn(measure(addrs, served, case, kind)))
                .expect("measurement task");
            row.print(case, kind);
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Cold,
    Warm,
}

/// Medians of the measured rounds.
struct Row {
    wall: Vec<Duration>,
    client_cpu: Option<Duration>,
    server_cpu: Option<Duration>,
}

impl Row {
    fn print(&self, case: Case, kind: Kind) {
        let mut wall = self.wall.clone();
        wall.sort();
        let median = wall[wall.len() / 2];
        let per_probe = self
            .client_cpu
            .map(|c| format!("{:.1} us", c.as_secs_f64() * 1e6 / case.destinations as f64));
        println!(
            "{:<6} {:>6} {:>5} {:>7} {:>10} {:>10} {:>12} {:>12} {:>13}",
            if kind == Kind::Cold { "cold" } else { "warm" },
            case.destinations,
            case.bound,
            wall.len(),
            ms(median),
            ms(wall[0]),
            self.client_cpu.map_or("-".into(), ms),
            self.server_cpu.map_or("-".into(), ms),
            per_probe.unwrap_or_else(|| "-".into()),
        );
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Runs one warm-up round and `case.rounds` measured rounds of `kind`; CPU figures are the
/// medians per round.
async fn measure(addrs: Vec<SocketAddr>, served: Arc<AtomicU64>, case: Case, kind: Kind) -> Row {
    let urls: Vec<String> = (0..case.destinations)
        .map(|i| format!("http://{}/d/{i}/", addrs[i % LISTENERS]))
        .collect();
    let set = match kind {
        Kind::Warm => Some(
            EndpointSet::builder(urls.clone())
                .health_path("/health")
                .max_concurrent_probes(case.bound)
                .health_check_timeout(Duration::from_secs(30))
                .build()
                .expect("valid endpoint set"),
        ),
        Kind::Cold => None,
    };
    let mut wall = Vec::new();
    let mut client_cpu = Vec::new();
    let mut server_cpu = Vec::new();
    for round in 0..=case.rounds {
        let before_count = served.load(Ordering::SeqCst);
        let (took, client, server) = match &set {
            Some(set) => {
                let cpu = CpuSnapshot::take();
                let started = Instant::now();
                set.refresh().await;
                let took = started.elapsed();
                let (c, s) = cpu.since();
                check_healthy(set.engine(), EndpointSet::CLUSTER);
                (took, c, s)
            }
            None => {
                // Built outside the timed region: config validation is not probing.
                let engine = cold_engine(&urls);
                let cpu = CpuSnapshot::take();
                let started = Instant::now();
                let monitor = ActiveMonitor::builder()
                    .max_concurrent_probes(case.bound)
                    .start(&engine);
                engine.ready().await;
                let took = started.elapsed();
                let (c, s) = cpu.since();
                monitor.stop().await;
                check_healthy(&engine, "c");
                (took, c, s)
            }
        };
        let probes = served.load(Ordering::SeqCst) - before_count;
        assert_eq!(
            probes, case.destinations as u64,
            "one round must probe every destination exactly once"
        );
        if round > 0 {
            wall.push(took);
            client_cpu.extend(client);
            server_cpu.extend(server);
        }
    }
    Row {
        wall,
        client_cpu: median(client_cpu),
        server_cpu: median(server_cpu),
    }
}

fn cold_engine(urls: &[String]) -> Engine {
    let cluster = urls.iter().enumerate().fold(
        ClusterConfig::new("c").active(
            ActiveHealthCheckConfig::enabled()
                .interval(Duration::from_secs(3600))
                .timeout(Duration::from_secs(30))
                .path("/health"),
        ),
        |c, (i, url)| c.destination(DestinationConfig::new(format!("d{i}"), url.clone())),
    );
    Engine::new(Config::new().cluster(cluster)).expect("valid benchmark config")
}

fn check_healthy(engine: &Engine, cluster: &str) {
    let status = engine.status();
    let cluster = status.cluster(cluster).expect("the cluster exists");
    let unhealthy = cluster
        .destinations
        .iter()
        .filter(|d| d.active != HealthState::Healthy)
        .count();
    assert_eq!(unhealthy, 0, "{unhealthy} destinations failed their probe");
}

fn median(mut v: Vec<Duration>) -> Option<Duration> {
    if v.is_empty() {
        return None;
    }
    v.sort();
    Some(v[v.len() / 2])
}

// ---- CPU time from /proc ---------------------------------------------------------------------

/// CPU time of the client and server threads, from `/proc/self/task/*/schedstat` (first field:
/// nanoseconds on CPU). Threads are told apart by the names their runtimes give them.
struct CpuSnapshot {
    client: Option<u64>,
    server: Option<u64>,
}

impl CpuSnapshot {
    fn take() -> CpuSnapshot {
        CpuSnapshot {
            client: threads_cpu_ns(CLIENT_THREADS),
            server: threads_cpu_ns(SERVER_THREADS),
        }
    }

    fn since(&self) -> (Option<Duration>, Option<Duration>) {
        let delta = |before: Option<u64>, name| {
            let (before, after) = (before?, threads_cpu_ns(name)?);
            Some(Duration::from_nanos(after.saturating_sub(before)))
        };
        (
            delta(self.client, CLIENT_THREADS),
            delta(self.server, SERVER_THREADS),
        )
    }
}

/// Sum of the on-CPU nanoseconds of this process's threads whose name starts with `prefix`
/// (`comm` is cut at 15 bytes).
fn threads_cpu_ns(prefix: &str) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        if !name.trim_end().starts_with(&prefix[..prefix.len().min(15)]) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(dir.join("schedstat")) else {
            continue;
        };
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

// ---- the loopback servers --------------------------------------------------------------------

struct Servers {
    addrs: Vec<SocketAddr>,
    served: Arc<AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

impl Servers {
    fn start() -> Servers {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(SERVER_THREADS)
            .enable_all()
            .build()
            .expect("server runtime");
        let served = Arc::new(AtomicU64::new(0));
        let addrs = runtime.block_on(async {
            let mut addrs = Vec::new();
            for _ in 0..LISTENERS {
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
                addrs.push(listener.local_addr().expect("local addr"));
                tokio::spawn(serve(listener, served.clone()));
            }
            addrs
        });
        Servers {
            addrs,
            served,
            _runtime: runtime,
        }
    }
}

async fn serve(listener: TcpListener, served: Arc<AtomicU64>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let served = served.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |_req: Request<hyper::body::Incoming>| {
                    served.fetch_add(1, Ordering::Relaxed);
                    async {
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                    }
                });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

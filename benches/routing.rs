//! Routing quality under real load: how each load balancer shares open-loop Poisson traffic
//! between real backend processes that differ in speed, reported load, tier and warmth, and
//! what latency its callers see, next to tower's `p2c` balancer over `PeakEwmaDiscover` in the
//! same run.
//!
//! # What runs
//!
//! - **Backends.** This binary, run again with `--backend ...`: one process per instance,
//!   serving HTTP/1.1 on `127.0.0.1:0` (it prints its port). An instance has `C` workers that each
//!   hold a request for `S` ms and a FIFO queue in front of them. A worker is a sleeping thread,
//!   so service times are accurate without burning the machine's cores. Optionally: an added
//!   network delay (slept before the answer, holding no worker), a service time that falls
//!   linearly after the process starts (a cold instance), and a fixed `endpoint-load-metrics`
//!   response header. A backend dies with the bench (a parent-death signal) and is killed by its
//!   pid when its arm is done; every arm gets fresh instances. The body of an answer is the
//!   instance's name: the shares count who really answered.
//! - **Load.** Open loop: arrival times come from exponential inter-arrival times drawn from a
//!   seeded generator, so every arm of a run sees the same arrivals, and each call starts at its
//!   time whatever earlier calls are doing: a slow instance cannot lower the offered rate. A
//!   profile is a rate over time: constant, a step, or a square wave.
//! - **Arms**, one row each:
//!   - An *engine arm* is a cluster configuration: the engine's JSON without `Destinations`
//!     (`{"LoadBalancingPolicy": "LeastRequests"}`). The harness adds the instances as the
//!     destinations of cluster `svc` (`Priority` = the instance's tier), loads the document into
//!     a strict engine (warnings are errors) and sends every call through `HealthAwareClient`
//!     with its default timeouts and retries (printed at the start), so outcomes are reported as
//!     a user's are. Built in: `PowerOfTwoChoices`, `LeastRequests`, `RoundRobin`, `Random`
//!     and `PeakEwma`; `tier_spill` adds `TierSpill` arms and `cold_start` `SlowStart` arms
//!     (see [`ENGINE_ARMS`]). An arm the engine refuses, or one that names a cluster section this
//!     build does not read (the engine ignores unknown sections, so it would run without it), is
//!     printed as `arm X skipped: <why>` and the run goes on (a refusal of one of the four
//!     policies this build has stops the bench: the harness is broken then). Instances that
//!     join later are published with `Engine::set_destinations`. Each engine arm subscribes to
//!     its engine's events; they are listed under the table with their time in the run
//!     ([`event_label`] names them).
//!   - `tower`: `tower::balance::p2c::Balance` over `tower::load::PeakEwmaDiscover` (see
//!     [`TOWER_DEFAULT_RTT`] and [`TOWER_DECAY`]; a request counts until its body is read) over
//!     one reqwest service per instance, 15 s per call, no retries. Instances that join later are
//!     inserted into its discover stream. It knows no tiers: it balances over every instance.
//!
//! # Scenarios
//!
//! Capacity is the sum of `C / S` over the instances named; offered rates are shares of it.
//!
//! - `slow_instance`: three instances of 8 workers x 10 ms, one of them 50 ms; 70% of their
//!   capacity (1,232 calls/s); 12,000 calls.
//! - `reported_load`: three instances of 8 x 10 ms answering with `endpoint-load-metrics: TEXT
//!   application_utilization=` 0.2, 0.5 and 0.9; 50% for 25 s. The shares are given for the whole
//!   run and from 15 s on (a reported load counts only some seconds after the first report).
//! - `tier_spill`: tier 0 is two instances of 8 x 10 ms, tier 1 four of 8 x 10 ms with 5 ms
//!   added delay. Rates are shares of tier 0's capacity (1,600/s). Runs `tier_spill/constant_50`
//!   (15 s), `tier_spill/constant_150` (10 s), `tier_spill/step` (50% for 10 s, then 150% for
//!   15 s) and `tier_spill/square` (50% and 150% in turn, 15 s each, three periods). Reported:
//!   the share of calls that left tier 0, and tier 0's share per second.
//! - `cold_start`: four warm instances of 8 x 10 ms; at 10 s a fifth joins whose service time
//!   falls from 200 ms to 10 ms over the 20 s after its process starts; 70% of the five
//!   instances' steady capacity (2,800/s) for 40 s. Reported: p99 of the calls in the 10 s before
//!   the join and in the 30 s after it, and the joiner's share per second after it joined.
//!
//! # Running it
//!
//! ```text
//! cargo bench --bench routing                                  # every scenario, full size
//! cargo bench --bench routing -- slow_instance tier_spill/step # some of them
//! HEALTHPICK_ROUTING=slow_instance,tier_spill cargo bench --bench routing
//! HEALTHPICK_ROUTING_ARMS=PowerOfTwoChoices,tower cargo bench --bench routing
//! HEALTHPICK_ROUTING_ADD_ARMS='{"P2C+passive": {"HealthCheck": {"Passive": {"Enabled": true}}}}' \
//!     cargo bench --bench routing
//! HEALTHPICK_ROUTING_OUT=routing.jsonl cargo bench --bench routing   # also JSON lines
//! ```
//!
//! `HEALTHPICK_ROUTING` (or arguments) picks scenarios or single runs by name;
//! `HEALTHPICK_ROUTING_ARMS` picks arms by name (case-insensitive); `HEALTHPICK_ROUTING_ADD_ARMS`
//! adds engine arms to every run (a JSON object: arm name to cluster configuration);
//! `HEALTHPICK_ROUTING_OUT` appends one JSON object per arm and run to a file;
//! `HEALTHPICK_ROUTING_SEED` changes the arrivals. Without `--bench` among its arguments (as
//! `cargo test --benches` runs it), or with `--smoke`, every run is a smoke run: a few hundred
//! calls over profiles of a tenth of a second or so, every arm in the first run and after it only
//! the default policy, the scenario's own arms, added arms and tower. It fails unless every call
//! of every arm was answered: it shows the harness works, it measures nothing.
//!
//! The full run takes about 20 minutes, most of it `tier_spill/square`. The machine's other work
//! shows in the results: the load average at the start is printed.
//!
//! # Adding an arm
//!
//! One line in [`ENGINE_ARMS`] (every run) or in a scenario's list ([`TIER_SPILL_ARMS`],
//! [`SLOW_START_ARMS`]): a name, the cluster configuration, and whether it must run; or, without
//! touching the file, `HEALTHPICK_ROUTING_ADD_ARMS`. What an arm's engine reports about itself
//! arrives through [`EventLog::watch`], its subscription to the engine's events.
//!
//! # Reading the output
//!
//! One table per run, one row per arm. Latencies are in milliseconds from the moment a call was
//! started until its body was read, over every call (failed ones too). `errors` counts calls
//! that failed or were not answered 200 (`+N shed`: calls not started because the harness had
//! too many open connections; the first error of each arm is printed under the table); `>10s`
//! counts calls that took longer. `offered/s` is the profile's mean rate; the line above the
//! table gives the rate of the run's sample of arrivals, which differs from it by chance.
//! `sent/s` is the rate at which calls really started and `lag` how late they started against
//! their arrival times: the open-loop generator kept up when `sent/s` matches the sample's rate
//! and the lag stays within a few milliseconds (the timer's resolution, and what else the machine
//! runs). Shares are percentages of answered calls. Under the table: per-second timelines (30
//! values a line), engine events, and what each backend saw (`served / mean hold ms / longest
//! queue`); a mean hold above the service time is the sleep's overshoot, part of the real
//! service time.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::future::Future;
use std::io::{BufRead, BufReader, Write as _};
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use healthpick::{Endpoint, Engine, HealthAwareClient, HealthEventKind, Timeouts, Url};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;
use tower::balance::p2c::Balance;
use tower::discover::Change;
use tower::load::{CompleteOnResponse, PeakEwmaDiscover};
use tower::{BoxError, Service, ServiceExt as _};

/// The cluster every engine arm routes to.
const CLUSTER: &str = "svc";
/// The path every call asks for (backends answer any path but `/stats` the same way).
const PATH: &str = "/work";
/// The response header that carries a backend's reported load.
const LOAD_HEADER: &str = "endpoint-load-metrics";
/// The tower arm's name.
const TOWER_ARM: &str = "tower";
/// The tower arm's latency estimate of an instance before its first answer: with the
/// scenarios' 10 ms service time, an instance not yet measured costs what a warm one with two
/// requests in flight does (cost = estimate x (in flight + 1)).
const TOWER_DEFAULT_RTT: Duration = Duration::from_millis(30);
/// How fast the tower arm's latency estimate forgets a peak.
const TOWER_DECAY: Duration = Duration::from_secs(10);
/// The tower arm's bound on one call, the wrapped client's default per attempt.
const TOWER_TIMEOUT: Duration = Timeouts::DEFAULT_ATTEMPT;
/// Calls that took longer are counted apart.
const SLOW_CALL: Duration = Duration::from_secs(10);
/// The arrivals' seed unless `HEALTHPICK_ROUTING_SEED` says otherwise.
const SEED: u64 = 0x5eed_cafe;
/// Time between setting up an arm and its first arrival, so the dispatcher is running by then.
const LEAD: Duration = Duration::from_millis(20);

/// Engine arms: name, cluster configuration (the engine's JSON without `Destinations`), and
/// whether the arm must run (a policy this build has; `false`: skipped until the engine reads
/// what it names).
type ArmList = &'static [(&'static str, &'static str, bool)];

/// The engine arms every run has, in table order.
const ENGINE_ARMS: ArmList = &[
    (
        "PowerOfTwoChoices",
        r#"{"LoadBalancingPolicy": "PowerOfTwoChoices"}"#,
        true,
    ),
    (
        "LeastRequests",
        r#"{"LoadBalancingPolicy": "LeastRequests"}"#,
        true,
    ),
    (
        "RoundRobin",
        r#"{"LoadBalancingPolicy": "RoundRobin"}"#,
        true,
    ),
    ("Random", r#"{"LoadBalancingPolicy": "Random"}"#, true),
    ("PeakEwma", r#"{"LoadBalancingPolicy": "PeakEwma"}"#, true),
];

/// The extra engine arms of `tier_spill`.
const TIER_SPILL_ARMS: ArmList = &[
    ("P2C+TierSpill", r#"{"TierSpill": {"Mode": "Load"}}"#, true),
    (
        "PeakEwma+TierSpill",
        r#"{"LoadBalancingPolicy": "PeakEwma", "TierSpill": {"Mode": "Load"}}"#,
        true,
    ),
];

/// The extra engine arms of `cold_start`: slow start over 30 s with Envoy's linear ramp from
/// 10%, the same with a quadratic ramp from 1% (`Aggression` 0.5: a slower beginning, for an
/// instance that starts much slower than it runs), and under PeakEwma.
const SLOW_START_ARMS: ArmList = &[
    (
        "P2C+SlowStart",
        r#"{"SlowStart": {"Window": "00:00:30"}}"#,
        true,
    ),
    (
        "P2C+SlowStart^2",
        r#"{"SlowStart": {"Window": "00:00:30", "Aggression": 0.5, "MinWeightPercent": 1}}"#,
        true,
    ),
    (
        "PeakEwma+SlowStart",
        r#"{"LoadBalancingPolicy": "PeakEwma", "SlowStart": {"Window": "00:00:30"}}"#,
        true,
    ),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--backend") {
        backend_main(&args[1..]);
        return;
    }
    let options = match Options::read(&args) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("routing: {e}");
            std::process::exit(2);
        }
    };
    raise_open_files_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    // Backends are started from this thread (the one `block_on` polls on), which lives as long as
    // the bench: their parent-death signal follows the thread that started them.
    if let Err(e) = runtime.block_on(run_all(options)) {
        eprintln!("routing: {e}");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------------------
// Options, arms and scenarios
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Size {
    Full,
    Smoke,
}

impl Size {
    fn pick<T>(self, full: T, smoke: T) -> T {
        match self {
            Size::Full => full,
            Size::Smoke => smoke,
        }
    }

    fn secs(self, full: f64, smoke: f64) -> Duration {
        Duration::from_secs_f64(self.pick(full, smoke))
    }
}

#[derive(Clone)]
struct Options {
    size: Size,
    /// Scenario or run names; empty: all.
    select: Vec<String>,
    /// Arm names (case-insensitive); `None`: all.
    arms: Option<Vec<String>>,
    /// Engine arms from `HEALTHPICK_ROUTING_ADD_ARMS`.
    added: Vec<Arm>,
    out: Option<PathBuf>,
    seed: u64,
}

impl Options {
    fn read(args: &[String]) -> Result<Options, String> {
        let has = |flag: &str| args.iter().any(|a| a == flag);
        let size = if has("--bench") && !has("--smoke") && !has("--test") {
            Size::Full
        } else {
            Size::Smoke
        };
        let list = |var: &str| {
            std::env::var(var).ok().map(|value| {
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
        };
        let mut select: Vec<String> = args
            .iter()
            .filter(|a| !a.starts_with("--"))
            .cloned()
            .collect();
        select.extend(list("HEALTHPICK_ROUTING").unwrap_or_default());
        let added = match std::env::var("HEALTHPICK_ROUTING_ADD_ARMS") {
            Ok(text) => added_arms(&text)?,
            Err(_) => Vec::new(),
        };
        let seed = match std::env::var("HEALTHPICK_ROUTING_SEED") {
            Ok(text) => text
                .trim()
                .parse()
                .map_err(|_| format!("HEALTHPICK_ROUTING_SEED `{text}` is not a number"))?,
            Err(_) => SEED,
        };
        Ok(Options {
            size,
            select,
            arms: list("HEALTHPICK_ROUTING_ARMS"),
            added,
            out: std::env::var_os("HEALTHPICK_ROUTING_OUT").map(PathBuf::from),
            seed,
        })
    }
}

/// The arms of `HEALTHPICK_ROUTING_ADD_ARMS`: `{"name": {cluster configuration}, ...}`.
fn added_arms(text: &str) -> Result<Vec<Arm>, String> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| format!("HEALTHPICK_ROUTING_ADD_ARMS is not JSON: {e}"))?;
    let Value::Object(arms) = value else {
        return Err("HEALTHPICK_ROUTING_ADD_ARMS is not a JSON object of arm names".into());
    };
    Ok(arms
        .into_iter()
        .map(|(name, cluster)| Arm {
            name,
            kind: ArmKind::Engine(cluster.to_string()),
            required: false,
        })
        .collect())
}

#[derive(Clone, Debug)]
struct Arm {
    name: String,
    kind: ArmKind,
    /// A refusal stops the bench instead of skipping the arm.
    required: bool,
}

#[derive(Clone, Debug)]
enum ArmKind {
    /// A cluster configuration (JSON) for the engine.
    Engine(String),
    Tower,
}

fn engine_arms(list: ArmList) -> impl Iterator<Item = Arm> {
    list.iter().map(|(name, cluster, required)| Arm {
        name: (*name).to_string(),
        kind: ArmKind::Engine((*cluster).to_string()),
        required: *required,
    })
}

/// One instance of a run.
#[derive(Clone, Debug)]
struct InstanceSpec {
    name: String,
    tier: u32,
    workers: usize,
    service: Duration,
    delay: Duration,
    ramp: Option<Ramp>,
    /// The `endpoint-load-metrics` header value it answers with.
    load: Option<String>,
    /// When it starts and joins; `None`: from the start.
    joins_at: Option<Duration>,
}

/// A service time that falls linearly from `from` to `to` over `over` after the process starts.
#[derive(Clone, Copy, Debug)]
struct Ramp {
    from: Duration,
    to: Duration,
    over: Duration,
}

impl InstanceSpec {
    fn new(name: impl Into<String>, tier: u32, workers: usize, service_ms: u64) -> Self {
        InstanceSpec {
            name: name.into(),
            tier,
            workers,
            service: Duration::from_millis(service_ms),
            delay: Duration::ZERO,
            ramp: None,
            load: None,
            joins_at: None,
        }
    }

    fn delay_ms(mut self, ms: u64) -> Self {
        self.delay = Duration::from_millis(ms);
        self
    }

    fn reports(mut self, utilization: f64) -> Self {
        self.load = Some(format!("TEXT application_utilization={utilization}"));
        self
    }

    fn cold(mut self, ramp: Ramp, joins_at: Duration) -> Self {
        self.ramp = Some(ramp);
        self.joins_at = Some(joins_at);
        self
    }

    /// Requests per second at the steady service time.
    fn capacity(&self) -> f64 {
        self.workers as f64 / self.service.as_secs_f64()
    }

    fn backend_args(&self) -> Vec<String> {
        let mut args = vec![
            "--backend".to_string(),
            format!("name={}", self.name),
            format!("workers={}", self.workers),
            format!("service_us={}", self.service.as_micros()),
            format!("delay_us={}", self.delay.as_micros()),
            format!("parent={}", std::process::id()),
        ];
        if let Some(r) = self.ramp {
            args.push(format!(
                "ramp_us={},{},{}",
                r.from.as_micros(),
                r.to.as_micros(),
                r.over.as_micros()
            ));
        }
        if let Some(load) = &self.load {
            args.push(format!("load={load}"));
        }
        args
    }
}

fn capacity(instances: &[InstanceSpec]) -> f64 {
    instances.iter().map(InstanceSpec::capacity).sum()
}

/// A rate over time: pieces of constant rate, one after another.
#[derive(Clone, Debug)]
struct Profile {
    pieces: Vec<(Duration, f64)>,
    text: String,
}

impl Profile {
    fn constant(rate: f64, length: Duration) -> Profile {
        Profile {
            pieces: vec![(length, rate)],
            text: format!("{rate:.0}/s"),
        }
    }

    fn step(low: f64, high: f64, at: Duration, length: Duration) -> Profile {
        Profile {
            pieces: vec![(at, low), (length.saturating_sub(at), high)],
            text: format!(
                "{low:.0}/s, from {} on {high:.0}/s, for {} in all",
                secs(at),
                secs(length)
            ),
        }
    }

    fn square(low: f64, high: f64, period: Duration, periods: usize) -> Profile {
        let half = period / 2;
        Profile {
            pieces: (0..periods)
                .flat_map(|_| [(half, low), (half, high)])
                .collect(),
            text: format!(
                "{low:.0}/s and {high:.0}/s in turn, {} each, {periods} periods",
                secs(half)
            ),
        }
    }

    fn length(&self) -> Duration {
        self.pieces.iter().map(|(length, _)| *length).sum()
    }

    fn mean_rate(&self) -> f64 {
        let calls: f64 = self
            .pieces
            .iter()
            .map(|(length, rate)| length.as_secs_f64() * rate)
            .sum();
        calls / self.length().as_secs_f64()
    }

    /// Arrival times of a Poisson process with this rate: unit-rate exponential gaps laid out
    /// along the integral of the rate, so a change of rate takes effect at its moment.
    fn arrivals(&self, seed: u64, max: Option<usize>) -> Vec<Duration> {
        let mut rng = fastrand::Rng::with_seed(seed);
        // 1 - U lies in (0, 1], so the logarithm is finite.
        let gap = |rng: &mut fastrand::Rng| -(1.0 - rng.f64()).ln();
        let mut out = Vec::new();
        let mut t = 0.0;
        let mut need = gap(&mut rng);
        let mut end = 0.0;
        for (length, rate) in &self.pieces {
            end += length.as_secs_f64();
            loop {
                let room = (end - t) * rate;
                if need > room {
                    need -= room;
                    t = end;
                    break;
                }
                t += need / rate;
                out.push(Duration::from_secs_f64(t));
                if max.is_some_and(|max| out.len() >= max) {
                    return out;
                }
                need = gap(&mut rng);
            }
        }
        out
    }
}

/// What a run reports beyond the common columns.
#[derive(Clone, Copy, Debug)]
enum View {
    /// Share per instance.
    Shares,
    /// Shares over the whole run and from `after` on.
    ReportedLoad { after: Duration },
    /// Shares, the share that left tier 0, and tier 0's share per bucket.
    TierSpill,
    /// Shares, p99 before and after the join, and the joiner's share per bucket after it.
    ColdStart,
}

struct Run {
    scenario: &'static str,
    /// `scenario` or `scenario/sub-run`.
    name: String,
    about: String,
    instances: Vec<InstanceSpec>,
    profile: Profile,
    /// Stop after this many calls.
    max_calls: Option<usize>,
    /// A timeline's step: one second at full size.
    bucket: Duration,
    view: View,
    /// Engine arms of this scenario beyond [`ENGINE_ARMS`].
    extra_arms: ArmList,
}

fn runs(size: Size) -> Vec<Run> {
    let second = size.secs(1.0, 0.02);
    let mut runs = Vec::new();

    let instances = vec![
        InstanceSpec::new("a", 0, 8, 10),
        InstanceSpec::new("b", 0, 8, 10),
        InstanceSpec::new("slow", 0, 8, 50),
    ];
    let cap = capacity(&instances);
    let rate = 0.7 * cap;
    let calls = size.pick(12_000, 200);
    runs.push(Run {
        scenario: "slow_instance",
        name: "slow_instance".into(),
        about: format!(
            "a, b: 8 workers x 10 ms; slow: 8 x 50 ms; capacity {cap:.0}/s; offered 70%; \
             {calls} calls"
        ),
        instances,
        profile: Profile::constant(rate, Duration::from_secs_f64(2.0 * calls as f64 / rate)),
        max_calls: Some(calls),
        bucket: second,
        view: View::Shares,
        extra_arms: &[],
    });

    let instances: Vec<InstanceSpec> = [20, 50, 90]
        .into_iter()
        .map(|u| InstanceSpec::new(format!("util-{u}"), 0, 8, 10).reports(f64::from(u) / 100.0))
        .collect();
    let cap = capacity(&instances);
    let after = size.secs(15.0, 0.075);
    runs.push(Run {
        scenario: "reported_load",
        name: "reported_load".into(),
        about: format!(
            "util-20, util-50, util-90: 8 x 10 ms each, answering `{LOAD_HEADER}: TEXT \
             application_utilization=` 0.2 / 0.5 / 0.9; capacity {cap:.0}/s; offered 50%; \
             shares also from {} on",
            secs(after)
        ),
        instances,
        profile: Profile::constant(0.5 * cap, size.secs(25.0, 0.15)),
        max_calls: None,
        bucket: second,
        view: View::ReportedLoad { after },
        extra_arms: &[],
    });

    let mut instances = vec![
        InstanceSpec::new("t0-a", 0, 8, 10),
        InstanceSpec::new("t0-b", 0, 8, 10),
    ];
    let cap0 = capacity(&instances);
    instances.extend(
        ["t1-a", "t1-b", "t1-c", "t1-d"]
            .into_iter()
            .map(|name| InstanceSpec::new(name, 1, 8, 10).delay_ms(5)),
    );
    let subs = [
        (
            "constant_50",
            "50%",
            Profile::constant(0.5 * cap0, size.secs(15.0, 0.15)),
        ),
        (
            "constant_150",
            "150%",
            Profile::constant(1.5 * cap0, size.secs(10.0, 0.08)),
        ),
        (
            "step",
            "50% then 150%",
            Profile::step(
                0.5 * cap0,
                1.5 * cap0,
                size.secs(10.0, 0.05),
                size.secs(25.0, 0.12),
            ),
        ),
        (
            "square",
            "50% <-> 150%",
            Profile::square(
                0.5 * cap0,
                1.5 * cap0,
                size.secs(30.0, 0.08),
                size.pick(3, 2),
            ),
        ),
    ];
    for (sub, share, profile) in subs {
        runs.push(Run {
            scenario: "tier_spill",
            name: format!("tier_spill/{sub}"),
            about: format!(
                "tier 0: t0-a, t0-b, 8 x 10 ms; tier 1: t1-a..d, 8 x 10 ms + 5 ms delay; \
                 offered {share} of tier 0's capacity {cap0:.0}/s: {}",
                profile.text
            ),
            instances: instances.clone(),
            profile,
            max_calls: None,
            bucket: second,
            view: View::TierSpill,
            extra_arms: TIER_SPILL_ARMS,
        });
    }

    let join = size.secs(10.0, 0.05);
    let ramp = Ramp {
        from: Duration::from_millis(200),
        to: Duration::from_millis(10),
        over: size.secs(20.0, 0.08),
    };
    let mut instances: Vec<InstanceSpec> = (1..=4)
        .map(|i| InstanceSpec::new(format!("w{i}"), 0, 8, 10))
        .collect();
    instances.push(InstanceSpec::new("joiner", 0, 8, 10).cold(ramp, join));
    let cap = capacity(&instances);
    runs.push(Run {
        scenario: "cold_start",
        name: "cold_start".into(),
        about: format!(
            "w1..w4: 8 x 10 ms; joiner: 8 workers from {} joins at {}, service time falling \
             to 10 ms over {}; steady capacity {cap:.0}/s; offered 70%",
            secs(ramp.from),
            secs(join),
            secs(ramp.over)
        ),
        instances,
        profile: Profile::constant(0.7 * cap, join + size.secs(30.0, 0.1)),
        max_calls: None,
        bucket: second,
        view: View::ColdStart,
        extra_arms: SLOW_START_ARMS,
    });
    runs
}

/// The arms of `run`. A smoke run after the first has only the first built-in arm (the
/// engine's default policy), its scenario's own arms, added ones and tower: each arm's path
/// through the harness is the same in every scenario, and CI time matters.
fn arms_of(run: &Run, options: &Options, first: bool) -> Vec<Arm> {
    let built_in = if first || options.size == Size::Full {
        ENGINE_ARMS
    } else {
        &ENGINE_ARMS[..1]
    };
    engine_arms(built_in)
        .chain(engine_arms(run.extra_arms))
        .chain(options.added.iter().cloned())
        .chain([Arm {
            name: TOWER_ARM.into(),
            kind: ArmKind::Tower,
            required: true,
        }])
        .filter(|arm| {
            options
                .arms
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| n.eq_ignore_ascii_case(&arm.name)))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The whole bench
// ---------------------------------------------------------------------------------------------

async fn run_all(options: Options) -> Result<(), String> {
    let all = runs(options.size);
    for wanted in &options.select {
        if !all
            .iter()
            .any(|r| r.name == *wanted || r.scenario == *wanted)
        {
            let names: Vec<&str> = all.iter().map(|r| r.name.as_str()).collect();
            return Err(format!(
                "no scenario or run `{wanted}`; there are {} (or a scenario's name)",
                names.join(", ")
            ));
        }
    }
    if let Some(names) = &options.arms {
        let known: Vec<String> = all
            .iter()
            .flat_map(|run| {
                arms_of(
                    run,
                    &Options {
                        arms: None,
                        ..options.clone()
                    },
                    true,
                )
            })
            .map(|arm| arm.name)
            .collect();
        for name in names {
            if !known.iter().any(|k| k.eq_ignore_ascii_case(name)) {
                return Err(format!(
                    "HEALTHPICK_ROUTING_ARMS: no arm `{name}`; there are {}",
                    dedup(&known).join(", ")
                ));
            }
        }
    }
    let selected: Vec<Run> = all
        .into_iter()
        .filter(|r| {
            options.select.is_empty()
                || options
                    .select
                    .iter()
                    .any(|s| *s == r.name || *s == r.scenario)
        })
        .collect();
    let mut out = match &options.out {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))?,
        ),
        None => None,
    };
    print_preamble(&options);
    let cap = in_flight_cap();
    let stats = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| format!("the reqwest client: {e}"))?;
    let mut ran = 0;
    for (n, run) in selected.iter().enumerate() {
        let load = RunLoad {
            arrivals: run.profile.arrivals(options.seed, run.max_calls).into(),
            cap,
            stats: stats.clone(),
        };
        println!();
        println!("== {} ==", run.name);
        println!("{}", run.about);
        println!(
            "{} arrivals over {}: {:.0}/s",
            load.arrivals.len(),
            secs(load.arrivals.last().copied().unwrap_or_default()),
            sample_rate(&load.arrivals)
        );
        let mut results = Vec::new();
        for arm in arms_of(run, &options, n == 0) {
            let began = std::time::Instant::now();
            let outcome = run_arm(run, &arm, &load).await;
            eprintln!(
                "routing: {} / {}: {:.1} s",
                run.name,
                arm.name,
                began.elapsed().as_secs_f64()
            );
            match outcome {
                Ok(result) => {
                    if options.size == Size::Smoke {
                        smoke_check(run, &result)?;
                    }
                    results.push(result);
                    ran += 1;
                }
                Err(ArmError::Refused(why)) if !arm.required => {
                    println!("arm {} skipped: {why}", arm.name);
                    if let Some(out) = out.as_mut() {
                        write_line(
                            out,
                            &json!({"run": run.name, "arm": arm.name, "skipped": why}),
                        )?;
                    }
                }
                Err(ArmError::Refused(why)) => {
                    return Err(format!("{}: arm {} refused: {why}", run.name, arm.name))
                }
                Err(ArmError::Failed(why)) => {
                    return Err(format!("{}: arm {} failed: {why}", run.name, arm.name))
                }
            }
        }
        report(run, &results);
        if let Some(out) = out.as_mut() {
            for result in &results {
                write_line(out, &result.json(run))?;
            }
        }
    }
    if options.size == Size::Smoke {
        println!(
            "\nsmoke: {ran} arm runs over {} runs, every call answered",
            selected.len()
        );
    }
    Ok(())
}

fn dedup(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    out
}

fn print_preamble(options: &Options) {
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into());
    println!(
        "routing: {} size, seed {:#x}, load average at the start {load}",
        match options.size {
            Size::Full => "full",
            Size::Smoke => "smoke (a check that the harness works, not a measurement)",
        },
        options.seed
    );
    // Read from a client built as the arms build theirs, so the line says what really applies.
    match HealthAwareClient::builder(Engine::default())
        .http_builder(reqwest::Client::builder().no_proxy())
        .build()
    {
        Ok(client) => println!(
            "engine arms: HealthAwareClient defaults: {:?}, connect timeout {:?}, \
             no hedging: {}; {:?}",
            client.timeouts(),
            Timeouts::DEFAULT_CONNECT,
            client.hedging().is_none(),
            client.retry_policy()
        ),
        Err(e) => println!("engine arms: the client cannot be built: {e}"),
    }
    println!(
        "open files: {}, so at most {} calls open at once (more are shed)",
        open_files_limit().map_or("unknown".into(), |n| n.to_string()),
        in_flight_cap()
    );
    println!(
        "tower arm: p2c Balance over PeakEwmaDiscover (default RTT {TOWER_DEFAULT_RTT:?}, decay \
         {TOWER_DECAY:?}, complete on response), one reqwest service per instance, timeout \
         {TOWER_TIMEOUT:?} per call, no retries"
    );
}

/// Raises the limit of open files to what the system allows this process (its children, the
/// backends, inherit it): an overloaded arm keeps thousands of calls open, a socket each, and a
/// shell's usual 1,024 would shed most of them.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given, which lives in this frame.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    let wanted = limit.rlim_max.min(1 << 20);
    if limit.rlim_cur < wanted {
        limit.rlim_cur = wanted;
        // SAFETY: setrlimit only reads the struct it is given. A refusal leaves the limit as it
        // was, and the cap on open calls follows whatever it is.
        let _ = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    }
}

/// The limit of open files in force.
fn open_files_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// How many calls may be open at once: each holds a socket, and the process may open only so
/// many. Beyond it calls are shed (counted, not sent), so an overload cannot end the bench.
fn in_flight_cap() -> usize {
    let files = open_files_limit().unwrap_or(1024);
    (files.saturating_sub(256) * 3 / 4).min(100_000)
}

fn write_line(out: &mut std::fs::File, value: &Value) -> Result<(), String> {
    writeln!(out, "{value}").map_err(|e| format!("cannot write HEALTHPICK_ROUTING_OUT: {e}"))
}

fn smoke_check(run: &Run, result: &ArmResult) -> Result<(), String> {
    let s = &result.summary;
    if s.calls == 0 || s.answered != s.calls {
        return Err(format!(
            "{}: arm {}: {} of {} calls answered ({} failed, {} shed; first error: {})",
            run.name,
            result.arm,
            s.answered,
            s.calls,
            s.failed,
            s.shed,
            s.first_error.as_deref().unwrap_or("none")
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// One arm of one run
// ---------------------------------------------------------------------------------------------

enum ArmError {
    /// The engine refused the arm's configuration, or it names what this build does not read.
    Refused(String),
    /// The harness could not run it.
    Failed(String),
}

impl From<String> for ArmError {
    fn from(why: String) -> Self {
        ArmError::Failed(why)
    }
}

/// One call's record.
struct Record {
    /// Its arrival time in the run.
    scheduled: Duration,
    /// When it was really started, in the run.
    sent: Duration,
    /// From its start until its body was read, or it failed.
    took: Duration,
    outcome: Outcome,
}

enum Outcome {
    /// Answered 200 by the instance of this name.
    Answered(String),
    Failed(String),
    /// Not started: too many calls open.
    Shed,
}

/// What a backend says about itself after the run.
#[derive(Clone, Copy, Debug)]
struct BackendStats {
    served: u64,
    mean_hold: Duration,
    max_queue: i64,
}

struct ArmResult {
    arm: String,
    summary: Summary,
    /// When each joiner really joined, by instance index.
    joined: Vec<(usize, Duration)>,
    backends: Vec<Option<BackendStats>>,
    events: Vec<(Duration, String)>,
}

async fn run_arm(run: &Run, arm: &Arm, load: &RunLoad) -> Result<ArmResult, ArmError> {
    let cluster = match &arm.kind {
        ArmKind::Engine(text) => Some(check_engine_arm(text, &run.instances)?),
        ArmKind::Tower => None,
    };
    let mut children = Vec::with_capacity(run.instances.len());
    for spec in &run.instances {
        children.push(match spec.joins_at {
            None => Some(Instance::spawn(spec)?),
            Some(_) => None,
        });
    }
    let mut instances: Vec<Option<Instance>> = Vec::with_capacity(run.instances.len());
    for (spec, child) in run.instances.iter().zip(children) {
        instances.push(match child {
            Some(child) => Some(Instance::listening(child, spec)?),
            None => None,
        });
    }
    let present: Vec<(&InstanceSpec, Url)> = run
        .instances
        .iter()
        .zip(&instances)
        .filter_map(|(spec, i)| i.as_ref().map(|i| (spec, i.url.clone())))
        .collect();
    let (drive, events) = match cluster {
        Some(cluster) => {
            let engine = Engine::builder().strict(true).build();
            engine
                .load_json(&engine_document(&cluster, &present))
                .map_err(|e| ArmError::Refused(one_line(&e.to_string())))?;
            let client = HealthAwareClient::builder(engine.clone())
                .http_builder(reqwest::Client::builder().no_proxy())
                .build()
                .map_err(|e| format!("the client: {e}"))?;
            // The clock starts once everything is built (a reqwest client takes a while).
            let start = Instant::now() + LEAD;
            let events = EventLog::watch(&engine, start);
            let mut joiner = Joiner::Engine(engine, Vec::new());
            let drive = drive(
                EngineCaller { client },
                &mut joiner,
                run,
                &mut instances,
                Load {
                    arrivals: load.arrivals.clone(),
                    start,
                    cap: load.cap,
                },
            )
            .await?;
            (drive, events.finish().await)
        }
        None => {
            let http = reqwest::Client::builder()
                .no_proxy()
                .connect_timeout(Timeouts::DEFAULT_CONNECT)
                .timeout(TOWER_TIMEOUT)
                .build()
                .map_err(|e| format!("the reqwest client: {e}"))?;
            let (changes, discovered) = futures::channel::mpsc::unbounded();
            for (index, instance) in instances.iter().enumerate() {
                if let Some(instance) = instance {
                    let service = InstanceService::new(&http, &instance.url);
                    changes
                        .unbounded_send(Change::Insert(index, service))
                        .map_err(|e| format!("the discover stream: {e}"))?;
                }
            }
            let discover = PeakEwmaDiscover::new::<()>(
                discovered.map(Ok::<_, Infallible>),
                TOWER_DEFAULT_RTT,
                TOWER_DECAY,
                CompleteOnResponse::default(),
            );
            let balance: Balance<_, ()> = Balance::new(discover);
            let start = Instant::now() + LEAD;
            let mut joiner = Joiner::Tower(changes, http);
            let drive = drive(
                TowerCaller { balance },
                &mut joiner,
                run,
                &mut instances,
                Load {
                    arrivals: load.arrivals.clone(),
                    start,
                    cap: load.cap,
                },
            )
            .await?;
            (drive, Vec::new())
        }
    };
    let mut backends = Vec::with_capacity(instances.len());
    for instance in &instances {
        backends.push(match instance {
            Some(instance) => instance.stats(&load.stats).await,
            None => None,
        });
    }
    drop(instances);
    let summary = Summary::of(run, &drive.records, &drive.joined);
    Ok(ArmResult {
        arm: arm.name.clone(),
        summary,
        joined: drive.joined,
        backends,
        events,
    })
}

/// Checks an engine arm before any process starts: its JSON, the sections it names, and the
/// engine's verdict on it with placeholder addresses. Returns its cluster object.
fn check_engine_arm(
    text: &str,
    instances: &[InstanceSpec],
) -> Result<Map<String, Value>, ArmError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| ArmError::Refused(format!("not JSON: {e}")))?;
    let Value::Object(cluster) = value else {
        return Err(ArmError::Refused(
            "not a JSON object of cluster settings".into(),
        ));
    };
    if cluster
        .keys()
        .any(|k| k.eq_ignore_ascii_case("Destinations"))
    {
        return Err(ArmError::Refused(
            "names `Destinations`: the harness adds the instances itself".into(),
        ));
    }
    let unread = unread_sections(&cluster);
    if !unread.is_empty() {
        return Err(ArmError::Refused(format!(
            "this build does not read cluster setting{} {}",
            if unread.len() == 1 { "" } else { "s" },
            unread
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let placeholder = Url::parse("http://127.0.0.1:9/").expect("a URL");
    let present: Vec<(&InstanceSpec, Url)> = instances
        .iter()
        .filter(|s| s.joins_at.is_none())
        .map(|s| (s, placeholder.clone()))
        .collect();
    Engine::builder()
        .strict(true)
        .build()
        .load_json(&engine_document(&cluster, &present))
        .map_err(|e| ArmError::Refused(one_line(&e.to_string())))?;
    Ok(cluster)
}

/// The cluster settings of `cluster` this build of the engine does not read.
///
/// The engine ignores keys it does not know, as .NET configuration does, so an arm for a section
/// this build lacks would quietly run without it. It warns, though, about a key one letter away
/// from one it reads ("did you mean `K`?"): a near miss of each key tells whether it is read.
fn unread_sections(cluster: &Map<String, Value>) -> Vec<String> {
    cluster
        .keys()
        .filter(|key| {
            let chars: Vec<char> = key.chars().collect();
            if chars.len() < 4 {
                return false;
            }
            let near: String = chars[..chars.len() - 1].iter().collect();
            let mut probe = Map::new();
            probe.insert(near, json!({}));
            let document = json!({"Clusters": {"probe": Value::Object(probe)}}).to_string();
            let wanted = format!("did you mean `{}`?", key.to_ascii_lowercase());
            let read = Engine::default()
                .load_json(&document)
                .is_ok_and(|warnings| {
                    warnings
                        .iter()
                        .any(|w| w.message.to_ascii_lowercase().contains(&wanted))
                });
            !read
        })
        .cloned()
        .collect()
}

/// The engine's document for an arm: its cluster settings plus the instances as destinations.
fn engine_document(cluster: &Map<String, Value>, instances: &[(&InstanceSpec, Url)]) -> String {
    let mut cluster = cluster.clone();
    let mut destinations = Map::new();
    for (spec, url) in instances {
        destinations.insert(
            spec.name.clone(),
            json!({"Address": url.as_str(), "Priority": spec.tier}),
        );
    }
    cluster.insert("Destinations".into(), Value::Object(destinations));
    let mut clusters = Map::new();
    clusters.insert(CLUSTER.into(), Value::Object(cluster));
    json!({ "Clusters": Value::Object(clusters) }).to_string()
}

fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// What every arm of a run shares.
struct RunLoad {
    arrivals: Arc<[Duration]>,
    /// See [`in_flight_cap`].
    cap: usize,
    /// Asks backends for their `/stats`.
    stats: reqwest::Client,
}

/// The arrivals of a run and where its clock starts.
struct Load {
    arrivals: Arc<[Duration]>,
    start: Instant,
    cap: usize,
}

struct Drive {
    records: Vec<Record>,
    joined: Vec<(usize, Duration)>,
}

/// Sends a run's calls through `caller` and starts its joiners at their times.
async fn drive<C: Caller>(
    caller: C,
    joiner: &mut Joiner,
    run: &Run,
    instances: &mut [Option<Instance>],
    load: Load,
) -> Result<Drive, String> {
    let (records, mut recorded) = tokio::sync::mpsc::unbounded_channel();
    let start = load.start;
    let dispatcher = tokio::spawn(dispatch(caller, load, records));
    let mut joins: Vec<(usize, Duration)> = run
        .instances
        .iter()
        .enumerate()
        .filter_map(|(i, spec)| spec.joins_at.map(|at| (i, at)))
        .collect();
    joins.sort_by_key(|(_, at)| *at);
    let mut joined = Vec::new();
    for (index, at) in joins {
        tokio::time::sleep_until(start + at).await;
        // Started here, on the thread that lives as long as the bench.
        let instance = Instance::start(&run.instances[index])?;
        joiner.add(index, &run.instances[index], &instance.url)?;
        joined.push((index, start.elapsed()));
        instances[index] = Some(instance);
    }
    dispatcher
        .await
        .map_err(|e| format!("the dispatcher: {e}"))?;
    let mut out = Vec::new();
    while let Some(record) = recorded.recv().await {
        out.push(record);
    }
    out.sort_by_key(|r| r.scheduled);
    Ok(Drive {
        records: out,
        joined,
    })
}

/// Starts each call at its arrival time, in a task of its own, whatever the others are doing.
async fn dispatch<C: Caller>(
    mut caller: C,
    load: Load,
    records: tokio::sync::mpsc::UnboundedSender<Record>,
) {
    let open = Arc::new(AtomicUsize::new(0));
    for &scheduled in load.arrivals.iter() {
        tokio::time::sleep_until(load.start + scheduled).await;
        let sent_at = Instant::now();
        let sent = sent_at.saturating_duration_since(load.start);
        if open.load(Ordering::Relaxed) >= load.cap {
            let _ = records.send(Record {
                scheduled,
                sent,
                took: Duration::ZERO,
                outcome: Outcome::Shed,
            });
            continue;
        }
        let call = caller.start().await;
        open.fetch_add(1, Ordering::Relaxed);
        let (records, open) = (records.clone(), open.clone());
        tokio::spawn(async move {
            let result = call.0.await;
            let took = sent_at.elapsed();
            open.fetch_sub(1, Ordering::Relaxed);
            let outcome = match result {
                Ok(answer) if answer.status == 200 => Outcome::Answered(answer.body),
                Ok(answer) => Outcome::Failed(format!("status {}", answer.status)),
                Err(e) => Outcome::Failed(e),
            };
            let _ = records.send(Record {
                scheduled,
                sent,
                took,
                outcome,
            });
        });
    }
}

/// An answer: its status and body (the instance's name).
struct Answer {
    status: u16,
    body: String,
}

/// A call that has been started (for the tower arm: its instance picked), to be run to its
/// end in a task of its own.
struct Call(Pin<Box<dyn Future<Output = Result<Answer, String>> + Send>>);

/// How an arm sends calls.
trait Caller: Send + 'static {
    /// One call. A balancer that must be ready before it picks is waited for here.
    fn start(&mut self) -> impl Future<Output = Call> + Send;
}

/// An engine arm: the wrapped client picks, sends, retries and reports.
struct EngineCaller {
    client: HealthAwareClient,
}

impl Caller for EngineCaller {
    fn start(&mut self) -> impl Future<Output = Call> + Send {
        // The pick happens when the call first runs, in its own task.
        let client = self.client.clone();
        let call = Call(Box::pin(async move {
            let response = client
                .get(CLUSTER, PATH)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            let body = response.text().await.map_err(|e| e.to_string())?;
            Ok(Answer { status, body })
        }));
        std::future::ready(call)
    }
}

/// The tower arm: its balancer picks when ready; the call runs apart.
struct TowerCaller<B> {
    balance: B,
}

impl<B> Caller for TowerCaller<B>
where
    B: Service<(), Response = Answer, Error = BoxError> + Send + 'static,
    B::Future: Send + 'static,
{
    async fn start(&mut self) -> Call {
        match self.balance.ready().await {
            Ok(ready) => {
                let call = ready.call(());
                Call(Box::pin(
                    async move { call.await.map_err(|e| e.to_string()) },
                ))
            }
            Err(e) => {
                let e = e.to_string();
                Call(Box::pin(async move { Err(e) }))
            }
        }
    }
}

/// One instance as a tower service: a GET of its path, body read.
#[derive(Clone)]
struct InstanceService {
    http: reqwest::Client,
    url: Url,
}

impl InstanceService {
    fn new(http: &reqwest::Client, base: &Url) -> Self {
        InstanceService {
            http: http.clone(),
            url: base.join(PATH).expect("a path joins a base URL"),
        }
    }
}

impl Service<()> for InstanceService {
    type Response = Answer;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, (): ()) -> Self::Future {
        let request = self.http.get(self.url.clone());
        Box::pin(async move {
            let response = request.send().await?;
            let status = response.status().as_u16();
            let body = response.text().await?;
            Ok(Answer { status, body })
        })
    }
}

/// How an arm learns of an instance that joins.
enum Joiner {
    /// Published as the `joiners` source's full set.
    Engine(Engine, Vec<Endpoint>),
    /// Inserted into the discover stream.
    Tower(
        futures::channel::mpsc::UnboundedSender<Change<usize, InstanceService>>,
        reqwest::Client,
    ),
}

impl Joiner {
    fn add(&mut self, index: usize, spec: &InstanceSpec, url: &Url) -> Result<(), String> {
        match self {
            Joiner::Engine(engine, joined) => {
                joined.push(Endpoint::new(spec.name.clone(), url.clone()).tier(spec.tier));
                engine
                    .set_destinations(CLUSTER, "joiners", joined.clone())
                    .map_err(|e| e.to_string())
            }
            Joiner::Tower(changes, http) => changes
                .unbounded_send(Change::Insert(index, InstanceService::new(http, url)))
                .map_err(|e| format!("the discover stream: {e}")),
        }
    }
}

/// An engine arm's events, with their time in the run.
struct EventLog {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Vec<(Duration, String)>>,
}

impl EventLog {
    /// Where an arm subscribes to its engine: every event from now on is kept with its time.
    fn watch(engine: &Engine, start: Instant) -> EventLog {
        let mut events = engine.subscribe();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            loop {
                tokio::select! {
                    // Events first: those already sent are kept when the run ends.
                    biased;
                    event = events.recv() => {
                        let at = Instant::now().saturating_duration_since(start);
                        match event {
                            Ok(event) => seen.push((at, event_label(&event.kind))),
                            Err(RecvError::Lagged(n)) => {
                                seen.push((at, format!("{n} events missed")));
                            }
                            Err(RecvError::Closed) => break,
                        }
                    }
                    _ = &mut stopped => break,
                }
            }
            seen
        });
        EventLog { stop, task }
    }

    async fn finish(self) -> Vec<(Duration, String)> {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

/// An event as a line of the report. Kinds without a label of their own (tier spill starting
/// and stopping, say, once the engine has them) show in their debug form.
fn event_label(kind: &HealthEventKind) -> String {
    match kind {
        HealthEventKind::DestinationsChanged {
            source,
            added,
            removed,
            updated,
        } => format!(
            "destinations from `{source}`: added {}, removed {}, updated {}",
            names(added),
            names(removed),
            names(updated)
        ),
        HealthEventKind::AvailabilityChanged { available, panic } => format!(
            "available: {}{}",
            names(available),
            if *panic { " (panic)" } else { "" }
        ),
        HealthEventKind::HealthChanged {
            destination,
            part,
            from,
            to,
            reason,
        } => format!("{destination}: {part:?} {from} -> {to} ({reason})"),
        other => format!("{other:?}"),
    }
}

fn names(ids: &[Arc<str>]) -> String {
    if ids.is_empty() {
        "none".into()
    } else {
        ids.iter().map(|s| &**s).collect::<Vec<_>>().join(" ")
    }
}

// ---------------------------------------------------------------------------------------------
// Backend processes
// ---------------------------------------------------------------------------------------------

/// A running backend process, killed by its pid when dropped.
struct Instance {
    url: Url,
    child: Child,
}

impl Instance {
    fn start(spec: &InstanceSpec) -> Result<Instance, String> {
        Instance::listening(Instance::spawn(spec)?, spec)
    }

    /// Starts the process; [`listening`](Self::listening) waits for its port, so several can
    /// start at once.
    fn spawn(spec: &InstanceSpec) -> Result<Child, String> {
        let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
        Command::new(exe)
            .args(spec.backend_args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start backend {}: {e}", spec.name))
    }

    fn listening(mut child: Child, spec: &InstanceSpec) -> Result<Instance, String> {
        let mut line = String::new();
        let read = child
            .stdout
            .take()
            .map(|out| BufReader::new(out).read_line(&mut line));
        let port = match read {
            Some(Ok(_)) => line.trim().parse::<u16>().ok(),
            _ => None,
        };
        let Some(port) = port else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "backend {} printed {line:?} instead of its port",
                spec.name
            ));
        };
        let url = Url::parse(&format!("http://127.0.0.1:{port}/")).expect("a loopback URL");
        Ok(Instance { url, child })
    }

    async fn stats(&self, http: &reqwest::Client) -> Option<BackendStats> {
        let url = self.url.join("stats").ok()?;
        let text = http.get(url).send().await.ok()?.text().await.ok()?;
        let field = |name: &str| {
            text.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse::<i64>().ok())
        };
        let served = field("served")?;
        let held_us = field("held_us")?;
        Some(BackendStats {
            served: served as u64,
            mean_hold: Duration::from_micros((held_us / served.max(1)) as u64),
            max_queue: field("max_queue")?,
        })
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A backend's settings, from its `key=value` arguments.
struct BackendSpec {
    name: String,
    workers: usize,
    service: Duration,
    delay: Duration,
    ramp: Option<Ramp>,
    load: Option<HeaderValue>,
    parent: u32,
}

impl BackendSpec {
    fn parse(args: &[String]) -> Result<BackendSpec, String> {
        let mut spec = BackendSpec {
            name: String::new(),
            workers: 1,
            service: Duration::ZERO,
            delay: Duration::ZERO,
            ramp: None,
            load: None,
            parent: 0,
        };
        let micros = |key: &str, v: &str| {
            v.parse::<u64>()
                .map(Duration::from_micros)
                .map_err(|_| format!("{key}=`{v}` is not a number of microseconds"))
        };
        for arg in args {
            let (key, value) = arg
                .split_once('=')
                .ok_or_else(|| format!("`{arg}` is not key=value"))?;
            match key {
                "name" => spec.name = value.to_string(),
                "workers" => {
                    spec.workers = value
                        .parse()
                        .ok()
                        .filter(|w| *w > 0)
                        .ok_or_else(|| format!("workers=`{value}` is not a positive number"))?;
                }
                "service_us" => spec.service = micros(key, value)?,
                "delay_us" => spec.delay = micros(key, value)?,
                "ramp_us" => {
                    let parts: Vec<&str> = value.split(',').collect();
                    let [from, to, over] = parts[..] else {
                        return Err(format!("ramp_us=`{value}` is not from,to,over"));
                    };
                    spec.ramp = Some(Ramp {
                        from: micros(key, from)?,
                        to: micros(key, to)?,
                        over: micros(key, over)?,
                    });
                }
                "load" => {
                    spec.load = Some(
                        HeaderValue::from_str(value)
                            .map_err(|_| format!("load=`{value}` is not a header value"))?,
                    );
                }
                "parent" => {
                    spec.parent = value
                        .parse()
                        .map_err(|_| format!("parent=`{value}` is not a pid"))?;
                }
                _ => return Err(format!("unknown setting `{key}`")),
            }
        }
        Ok(spec)
    }

    /// The service time `elapsed` after the process started.
    fn service_at(&self, elapsed: Duration) -> Duration {
        match self.ramp {
            None => self.service,
            Some(r) => {
                let done = (elapsed.as_secs_f64() / r.over.as_secs_f64().max(1e-9)).min(1.0);
                let from = r.from.as_secs_f64();
                Duration::from_secs_f64(from + (r.to.as_secs_f64() - from) * done)
            }
        }
    }
}

/// A backend's state, shared by its connections and its worker threads.
struct Backend {
    name: Bytes,
    delay: Duration,
    load: Option<HeaderValue>,
    /// The FIFO queue: each job is the sender that tells its request a worker is done with it.
    jobs: mpsc::Sender<tokio::sync::oneshot::Sender<()>>,
    queued: AtomicI64,
    max_queued: AtomicI64,
    served: AtomicU64,
    held_us: AtomicU64,
}

/// A child process: serves until killed.
fn backend_main(args: &[String]) {
    let spec = match BackendSpec::parse(args) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("routing backend: {e}");
            std::process::exit(2);
        }
    };
    die_with_parent(spec.parent);
    let started = std::time::Instant::now();
    let (jobs, queue) = mpsc::channel();
    let backend = Arc::new(Backend {
        name: Bytes::from(spec.name.clone()),
        delay: spec.delay,
        load: spec.load.clone(),
        jobs,
        queued: AtomicI64::new(0),
        max_queued: AtomicI64::new(0),
        served: AtomicU64::new(0),
        held_us: AtomicU64::new(0),
    });
    let queue = Arc::new(Mutex::new(queue));
    let spec = Arc::new(spec);
    for _ in 0..spec.workers {
        let (backend, queue, spec) = (backend.clone(), queue.clone(), spec.clone());
        std::thread::spawn(move || loop {
            // The lock is held while waiting: whichever worker is free takes the oldest job.
            let job = match queue.lock() {
                Ok(queue) => queue.recv(),
                Err(_) => return,
            };
            let Ok(done) = job else { return };
            backend.queued.fetch_sub(1, Ordering::Relaxed);
            let hold = spec.service_at(started.elapsed());
            let began = std::time::Instant::now();
            std::thread::sleep(hold);
            backend
                .held_us
                .fetch_add(began.elapsed().as_micros() as u64, Ordering::Relaxed);
            backend.served.fetch_add(1, Ordering::Relaxed);
            let _ = done.send(());
        });
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!("routing backend {}: cannot listen: {e}", spec.name);
                std::process::exit(1);
            }
        };
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{port}").and_then(|()| out.flush()).is_err() {
            std::process::exit(1);
        }
        drop(out);
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors, say: wait instead of spinning on the error.
                    eprintln!("routing backend {}: accept: {e}", spec.name);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let backend = backend.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request| answer(request, backend.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

async fn answer(
    request: hyper::Request<Incoming>,
    backend: Arc<Backend>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    if request.uri().path() == "/stats" {
        let text = format!(
            "served={} held_us={} max_queue={}",
            backend.served.load(Ordering::Relaxed),
            backend.held_us.load(Ordering::Relaxed),
            backend.max_queued.load(Ordering::Relaxed)
        );
        return Ok(hyper::Response::new(Full::new(Bytes::from(text))));
    }
    let (done, finished) = tokio::sync::oneshot::channel();
    let queued = backend.queued.fetch_add(1, Ordering::Relaxed) + 1;
    backend.max_queued.fetch_max(queued, Ordering::Relaxed);
    if backend.jobs.send(done).is_err() || finished.await.is_err() {
        let mut response = hyper::Response::new(Full::new(Bytes::from_static(b"no worker")));
        *response.status_mut() = hyper::StatusCode::SERVICE_UNAVAILABLE;
        return Ok(response);
    }
    if !backend.delay.is_zero() {
        tokio::time::sleep(backend.delay).await;
    }
    let mut response = hyper::Response::new(Full::new(backend.name.clone()));
    if let Some(load) = &backend.load {
        response.headers_mut().insert(LOAD_HEADER, load.clone());
    }
    Ok(response)
}

/// Makes this process die when the thread that started it ends, so no backend outlives a bench
/// that was killed.
fn die_with_parent(parent: u32) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_PDEATHSIG takes integers only and sets this process's own
        // parent-death signal; no memory is read or written.
        let set = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        if set != 0 {
            eprintln!("routing backend: cannot set the parent-death signal");
            std::process::exit(1);
        }
    }
    // The parent may have ended before the signal was set: then nobody will kill this process.
    if std::os::unix::process::parent_id() != parent {
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

struct Summary {
    calls: usize,
    answered: usize,
    failed: usize,
    shed: usize,
    slow: usize,
    /// p50, p90, p99, p99.9, max.
    latency: [Duration; 5],
    offered: f64,
    sent: f64,
    /// p99 and max of how late calls started.
    lag: [Duration; 2],
    /// Per instance, % of answered calls.
    shares: Vec<f64>,
    /// `ReportedLoad`: shares of the calls from `after` on.
    later_shares: Option<Vec<f64>>,
    /// % of answered calls that tier 1 or later answered.
    left_tier0: f64,
    /// `ColdStart`: p99 before the join and in the window after it.
    windows: Option<(Duration, Duration)>,
    /// `TierSpill`: tier 0's share per bucket; `ColdStart`: the joiner's share per bucket from
    /// the join on. `None`: nothing answered in that bucket.
    timeline: Vec<Option<f64>>,
    first_error: Option<String>,
}

impl Summary {
    fn of(run: &Run, records: &[Record], joined: &[(usize, Duration)]) -> Summary {
        let index: HashMap<&str, usize> = run
            .instances
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_str(), i))
            .collect();
        // Which instance answered each call (`None`: failed or shed).
        let who: Vec<Option<usize>> = records
            .iter()
            .map(|r| match &r.outcome {
                Outcome::Answered(name) => index.get(name.trim()).copied(),
                _ => None,
            })
            .collect();
        let mut first_error = None;
        let (mut failed, mut shed) = (0, 0);
        for (r, w) in records.iter().zip(&who) {
            match &r.outcome {
                Outcome::Shed => shed += 1,
                Outcome::Failed(e) => {
                    failed += 1;
                    first_error.get_or_insert_with(|| one_line(e));
                }
                Outcome::Answered(name) if w.is_none() => {
                    failed += 1;
                    first_error.get_or_insert_with(|| format!("answered by unknown `{name}`"));
                }
                Outcome::Answered(_) => {}
            }
        }
        let mut took: Vec<Duration> = records
            .iter()
            .filter(|r| !matches!(r.outcome, Outcome::Shed))
            .map(|r| r.took)
            .collect();
        took.sort_unstable();
        let mut lag: Vec<Duration> = records
            .iter()
            .map(|r| r.sent.saturating_sub(r.scheduled))
            .collect();
        lag.sort_unstable();
        let sent_span = match (
            records.iter().map(|r| r.sent).min(),
            records.iter().map(|r| r.sent).max(),
        ) {
            (Some(first), Some(last)) if last > first => (last - first).as_secs_f64(),
            _ => f64::NAN,
        };
        let shares_where = |keep: &dyn Fn(&Record) -> bool| -> Vec<f64> {
            let mut counts = vec![0usize; run.instances.len()];
            for (r, w) in records.iter().zip(&who) {
                if let Some(i) = w.filter(|_| keep(r)) {
                    counts[i] += 1;
                }
            }
            percentages(&counts)
        };
        let shares = shares_where(&|_| true);
        let answered = who.iter().filter(|w| w.is_some()).count();
        let left_tier0 = {
            let left = who
                .iter()
                .flatten()
                .filter(|i| run.instances[**i].tier > 0)
                .count();
            100.0 * left as f64 / answered.max(1) as f64
        };
        let join = joined.first().copied();
        let (later_shares, windows, timeline) = match run.view {
            View::Shares => (None, None, Vec::new()),
            View::ReportedLoad { after } => (
                Some(shares_where(&|r| r.scheduled >= after)),
                None,
                Vec::new(),
            ),
            View::TierSpill => {
                let timeline = buckets(records, &who, Duration::ZERO, run.bucket, |i| {
                    run.instances[i].tier == 0
                });
                (None, None, timeline)
            }
            View::ColdStart => match join {
                Some((joiner, at)) => {
                    let before = p99(records, |r| r.scheduled < at);
                    let after = p99(records, |r| r.scheduled >= at);
                    let timeline = buckets(records, &who, at, run.bucket, |i| i == joiner);
                    (None, Some((before, after)), timeline)
                }
                None => (None, None, Vec::new()),
            },
        };
        Summary {
            calls: records.len(),
            answered,
            failed,
            shed,
            slow: took.iter().filter(|t| **t > SLOW_CALL).count(),
            latency: [
                quantile(&took, 0.50),
                quantile(&took, 0.90),
                quantile(&took, 0.99),
                quantile(&took, 0.999),
                took.last().copied().unwrap_or_default(),
            ],
            offered: run.profile.mean_rate(),
            sent: (records.len().saturating_sub(1)) as f64 / sent_span,
            lag: [
                quantile(&lag, 0.99),
                lag.last().copied().unwrap_or_default(),
            ],
            shares,
            later_shares,
            left_tier0,
            windows,
            timeline,
            first_error,
        }
    }
}

/// The rate of a sample of arrival times (a Poisson sample's differs from its profile's rate by
/// about one over the square root of its size).
fn sample_rate(arrivals: &[Duration]) -> f64 {
    match (arrivals.first(), arrivals.last()) {
        (Some(first), Some(last)) if last > first => {
            (arrivals.len() - 1) as f64 / (*last - *first).as_secs_f64()
        }
        _ => f64::NAN,
    }
}

fn percentages(counts: &[usize]) -> Vec<f64> {
    let total: usize = counts.iter().sum();
    counts
        .iter()
        .map(|c| 100.0 * *c as f64 / total.max(1) as f64)
        .collect()
}

/// The share of answered calls that `counts` accepts, per bucket of arrival time from `from`.
fn buckets(
    records: &[Record],
    who: &[Option<usize>],
    from: Duration,
    bucket: Duration,
    counts: impl Fn(usize) -> bool,
) -> Vec<Option<f64>> {
    let mut tally: Vec<(usize, usize)> = Vec::new();
    for (r, w) in records.iter().zip(who) {
        let (Some(i), Some(since)) = (w, r.scheduled.checked_sub(from)) else {
            continue;
        };
        let b = (since.as_secs_f64() / bucket.as_secs_f64()) as usize;
        if tally.len() <= b {
            tally.resize(b + 1, (0, 0));
        }
        tally[b].1 += 1;
        if counts(*i) {
            tally[b].0 += 1;
        }
    }
    tally
        .into_iter()
        .map(|(yes, all)| (all > 0).then(|| 100.0 * yes as f64 / all as f64))
        .collect()
}

fn p99(records: &[Record], keep: impl Fn(&Record) -> bool) -> Duration {
    let mut took: Vec<Duration> = records
        .iter()
        .filter(|r| !matches!(r.outcome, Outcome::Shed) && keep(r))
        .map(|r| r.took)
        .collect();
    took.sort_unstable();
    quantile(&took, 0.99)
}

/// The nearest-rank quantile of sorted values.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 100.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.0}")
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
        .trim_end_matches('0')
        .trim_end_matches('.')
        .to_string()
        + " s"
}

fn shares_text(shares: &[f64]) -> String {
    shares
        .iter()
        .map(|s| format!("{s:.1}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn report(run: &Run, results: &[ArmResult]) {
    if results.is_empty() {
        return;
    }
    let instance_names = run
        .instances
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(" / ");
    let mut header = vec!["arm".to_string(), format!("share % ({instance_names})")];
    match run.view {
        View::ReportedLoad { after } => header.push(format!("share % from {}", secs(after))),
        View::TierSpill => header.push("left tier 0 %".into()),
        View::ColdStart => {
            header.push("p99 before join".into());
            header.push("p99 after join".into());
        }
        View::Shares => {}
    }
    header.extend(
        [
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max",
            "errors",
            ">10s",
            "offered/s",
            "sent/s",
            "lag p99/max",
        ]
        .map(String::from),
    );
    let mut rows = vec![header];
    for result in results {
        let s = &result.summary;
        let mut row = vec![result.arm.clone(), shares_text(&s.shares)];
        match run.view {
            View::ReportedLoad { .. } => {
                row.push(shares_text(s.later_shares.as_deref().unwrap_or_default()));
            }
            View::TierSpill => row.push(format!("{:.1}", s.left_tier0)),
            View::ColdStart => match s.windows {
                Some((before, after)) => {
                    row.push(ms(before));
                    row.push(ms(after));
                }
                None => row.extend(["-".to_string(), "-".to_string()]),
            },
            View::Shares => {}
        }
        row.extend(s.latency.iter().map(|d| ms(*d)));
        row.push(if s.shed > 0 {
            format!("{} +{} shed", s.failed, s.shed)
        } else {
            s.failed.to_string()
        });
        row.push(s.slow.to_string());
        row.push(format!("{:.0}", s.offered));
        row.push(format!("{:.0}", s.sent));
        row.push(format!("{}/{}", ms(s.lag[0]), ms(s.lag[1])));
        rows.push(row);
    }
    println!("latencies in ms, from a call's start until its body was read");
    print_table(&rows);

    for result in results {
        if let Some(e) = &result.summary.first_error {
            println!(
                "{}: {} errors, the first: {e}",
                result.arm, result.summary.failed
            );
        }
    }
    let what = match run.view {
        View::TierSpill => Some("tier 0's share, %"),
        View::ColdStart => Some("the joiner's share from its join, %"),
        _ => None,
    };
    if let Some(what) = what {
        println!("{what}, per {} of arrivals:", secs(run.bucket));
        for result in results {
            let cells: Vec<String> = result
                .summary
                .timeline
                .iter()
                .map(|v| v.map_or("-".into(), |v| format!("{v:.0}")))
                .collect();
            for (n, line) in cells.chunks(30).enumerate() {
                let label = if n == 0 { result.arm.as_str() } else { "" };
                println!(
                    "  {label:<20} {}",
                    line.iter()
                        .map(|c| format!("{c:>3}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                );
            }
        }
    }
    for result in results.iter().filter(|r| !r.events.is_empty()) {
        println!("{} events:", result.arm);
        const SHOWN: usize = 12;
        for (at, label) in result.events.iter().take(SHOWN) {
            println!("  {:>8.3} s  {label}", at.as_secs_f64());
        }
        if result.events.len() > SHOWN {
            println!("  ... {} more", result.events.len() - SHOWN);
        }
    }
    println!("backends (served / mean hold ms / longest queue):");
    for result in results {
        let mut line = format!("  {:<20}", result.arm);
        for (spec, stats) in run.instances.iter().zip(&result.backends) {
            let _ = match stats {
                Some(b) => write!(
                    line,
                    " {} {}/{}/{}",
                    spec.name,
                    b.served,
                    ms(b.mean_hold),
                    b.max_queue
                ),
                None => write!(line, " {} -", spec.name),
            };
        }
        for (index, at) in &result.joined {
            let _ = write!(
                line,
                "; {} joined at {:.3} s",
                run.instances[*index].name,
                at.as_secs_f64()
            );
        }
        println!("{line}");
    }
}

fn print_table(rows: &[Vec<String>]) {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let w = widths[c];
            let _ = if c == 0 {
                write!(line, "{cell:<w$}")
            } else {
                write!(line, "  {cell:>w$}")
            };
        }
        println!("{}", line.trim_end());
    }
}

impl ArmResult {
    fn json(&self, run: &Run) -> Value {
        let s = &self.summary;
        let per_instance = |values: &[f64]| -> Value {
            Value::Object(
                run.instances
                    .iter()
                    .zip(values)
                    .map(|(spec, v)| (spec.name.clone(), json!(v)))
                    .collect(),
            )
        };
        let millis = |d: Duration| d.as_secs_f64() * 1000.0;
        json!({
            "run": run.name,
            "arm": self.arm,
            "calls": s.calls,
            "answered": s.answered,
            "errors": s.failed,
            "shed": s.shed,
            "over_10s": s.slow,
            "offered_per_s": s.offered,
            "sent_per_s": s.sent,
            "lag_ms": {"p99": millis(s.lag[0]), "max": millis(s.lag[1])},
            "latency_ms": {
                "p50": millis(s.latency[0]),
                "p90": millis(s.latency[1]),
                "p99": millis(s.latency[2]),
                "p99.9": millis(s.latency[3]),
                "max": millis(s.latency[4]),
            },
            "share_pct": per_instance(&s.shares),
            "later_share_pct": s.later_shares.as_deref().map(per_instance),
            "left_tier0_pct": s.left_tier0,
            "p99_before_join_ms": s.windows.map(|w| millis(w.0)),
            "p99_after_join_ms": s.windows.map(|w| millis(w.1)),
            "timeline_pct": s.timeline,
            "timeline_step_s": run.bucket.as_secs_f64(),
            "joined_s": self.joined.iter().map(|(i, at)| json!({
                "instance": run.instances[*i].name, "at": at.as_secs_f64()
            })).collect::<Vec<_>>(),
            "events": self.events.iter().map(|(at, label)| json!({
                "at_s": at.as_secs_f64(), "event": label
            })).collect::<Vec<_>>(),
            "backends": run.instances.iter().zip(&self.backends).map(|(spec, b)| json!({
                "instance": spec.name,
                "served": b.map(|b| b.served),
                "mean_hold_ms": b.map(|b| millis(b.mean_hold)),
                "max_queue": b.map(|b| b.max_queue),
            })).collect::<Vec<_>>(),
        })
    }
}

//! Local first without overload: a local tier that spills to the remote tier under load and
//! takes its traffic back when the load falls, and a new local instance that warms up.
//!
//! The cluster `search` has two local instances (tier 0) and three remote ones (tier 1), each a
//! real server on 127.0.0.1 with 4 workers taking 10 ms a request (the remote ones 15 ms: they
//! are further away), so the local tier serves 800 requests a second. Calls go through the
//! wrapped client, which times every attempt. `TierSpill` is `Load` (dwell shortened to 1 s for
//! the example) and `SlowStart` ramps a newcomer over 4 s. Requests arrive open-loop (at a fixed
//! rate, whatever the answers take):
//!
//! 1. 400 a second (half the local capacity): every call stays local;
//! 2. 1,200 a second (one and a half times it): the local tier's latency climbs past its upper
//!    mark, a share of the calls spills to the remote tier within a fraction of a second, and
//!    every call still succeeds;
//! 3. back to 400 a second: once the local tier has stayed calm for the dwell, the share is
//!    withdrawn step by step and the spill stops;
//! 4. a third local instance joins: it starts at 10% of its weight and ramps to a full share
//!    over its 4 s window (under `PowerOfTwoChoices` an idle newcomer also wins against a busy
//!    instance, so its first second's share is above that 10%).
//!
//! ```text
//! 1. 400/s for 2 s     -> local 100.0%  remote 0.0%  p99 12 ms  errors 0
//!    [spill] tier 0 -> tier 1 started: 64% of picks
//! 2. 1200/s for 4 s    -> local 48.6%  remote 51.4%  p99 42 ms  errors 0
//!    (spill started 0.07 s after the step)
//!    [spill] tier 0 -> tier 1 stopped
//! 3. 400/s until calm  -> spill stopped after 5.0 s
//! 4. local-3 joins     -> its share of the local calls, second by second: 16%, 18%, 26%, 29%, 34%
//! ok: stayed local at 50%, spilled at 150% with no errors, came home, local-3 warmed up
//! ```
//!
//! Run with `cargo run --example tier_spill`. Exits 0 only if every step held.

#[path = "support/backend.rs"]
mod backend;

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backend::Backend;
use healthpick::{Engine, HealthAwareClient, HealthEventKind};
use tokio::sync::Notify;
use tokio::task::JoinSet;

/// Each local instance: 4 workers x 10 ms, so 400 requests a second.
const WORKERS: usize = 4;
const LOCAL_LATENCY: Duration = Duration::from_millis(10);
const REMOTE_LATENCY: Duration = Duration::from_millis(15);
const LOCAL_CAPACITY: f64 = 2.0 * WORKERS as f64 / 0.010;

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
    let mut servers = Vec::new();
    for (name, latency) in [
        ("local-1", LOCAL_LATENCY),
        ("local-2", LOCAL_LATENCY),
        ("local-3", LOCAL_LATENCY),
        ("remote-1", REMOTE_LATENCY),
        ("remote-2", REMOTE_LATENCY),
        ("remote-3", REMOTE_LATENCY),
    ] {
        let server = Backend::start(name).await?;
        server.set_latency(latency);
        server.set_workers(WORKERS);
        servers.push(server);
    }
    let url = |name: &str| {
        servers
            .iter()
            .find(|s| s.name() == name)
            .map(Backend::url)
            .unwrap_or_default()
    };
    let config = |with_local3: bool| {
        let local3 = if with_local3 {
            format!(r#""local-3": {{ "Address": "{}" }},"#, url("local-3"))
        } else {
            String::new()
        };
        format!(
            r#"{{ "Clusters": {{ "search": {{
                  "LoadBalancingPolicy": "PowerOfTwoChoices",
                  "TierSpill": {{ "Mode": "Load", "Dwell": "00:00:01" }},
                  "SlowStart": {{ "Window": "00:00:04" }},
                  "Destinations": {{
                    "local-1":  {{ "Address": "{}" }},
                    "local-2":  {{ "Address": "{}" }},
                    {local3}
                    "remote-1": {{ "Address": "{}", "Priority": 1 }},
                    "remote-2": {{ "Address": "{}", "Priority": 1 }},
                    "remote-3": {{ "Address": "{}", "Priority": 1 }}
                  }} }} }} }}"#,
            url("local-1"),
            url("local-2"),
            url("remote-1"),
            url("remote-2"),
            url("remote-3"),
        )
    };
    let engine = Engine::from_json(&config(false))?;
    let client = HealthAwareClient::builder(engine.clone())
        .http_builder(reqwest::Client::builder().no_proxy())
        .build()?;

    // Print spill events as they happen, and wake whoever waits for the spill to stop.
    let stopped = Arc::new(Notify::new());
    let mut events = engine.subscribe();
    let started_at = Instant::now();
    let spill_started = Arc::new(parking_lot::Mutex::new(None::<Duration>));
    {
        let (stopped, spill_started) = (stopped.clone(), spill_started.clone());
        tokio::spawn(async move {
            while let Ok(event) = events.recv().await {
                match event.kind {
                    HealthEventKind::SpillStarted {
                        from_tier,
                        to_tier,
                        share,
                    } => {
                        let at = started_at.elapsed();
                        spill_started.lock().get_or_insert(at);
                        println!(
                            "   [spill] tier {from_tier} -> tier {to_tier} started: {:.0}% of picks",
                            share * 100.0
                        );
                    }
                    HealthEventKind::SpillStopped { from_tier, to_tier } => {
                        println!("   [spill] tier {from_tier} -> tier {to_tier} stopped");
                        stopped.notify_one();
                    }
                    _ => {}
                }
            }
        });
    }

    // 1. Half the local capacity: nothing leaves the local tier.
    let calm = LOCAL_CAPACITY * 0.5;
    let mut tally = drive(&client, calm, Duration::from_secs(2)).await;
    println!(
        "1. {:<17} -> {}",
        format!("{calm:.0}/s for 2 s"),
        tally.line()
    );
    if tally.errors > 0 || tally.share("remote") > 0.01 {
        return Err("at half the local capacity calls left the local tier".into());
    }

    // 2. One and a half times the local capacity: the remote tier takes what the local one
    // cannot serve without queueing.
    let peak = LOCAL_CAPACITY * 1.5;
    let step = started_at.elapsed();
    let mut tally = drive(&client, peak, Duration::from_secs(4)).await;
    println!(
        "2. {:<17} -> {}",
        format!("{peak:.0}/s for 4 s"),
        tally.line()
    );
    let reaction = spill_started.lock().map(|at| at.saturating_sub(step));
    match reaction {
        Some(after) if after <= Duration::from_secs(2) => {
            println!(
                "   (spill started {:.2} s after the step)",
                after.as_secs_f64()
            )
        }
        Some(after) => return Err(format!("spill started only after {after:?}").into()),
        None => return Err("the local tier was overloaded and never spilled".into()),
    }
    if tally.errors > 0 || tally.share("remote") < 0.1 {
        return Err("the overload was not shared with the remote tier without errors".into());
    }

    // 3. Calm again: the spill is withdrawn once the local tier stays calm for the dwell.
    let calm_since = Instant::now();
    let waiting = stopped.notified();
    tokio::select! {
        _ = waiting => {}
        _ = drive(&client, calm, Duration::from_secs(20)) => {
            return Err("the spill did not stop within 20 s of calm".into());
        }
    }
    println!(
        "3. {:<17} -> spill stopped after {:.1} s",
        format!("{calm:.0}/s until calm"),
        calm_since.elapsed().as_secs_f64()
    );

    // 4. A third local instance joins and warms up over its window.
    engine.load_json(&config(true))?;
    let mut shares = Vec::new();
    for _ in 0..5 {
        let tally = drive(&client, calm, Duration::from_secs(1)).await;
        shares.push(tally.of("local-3") as f64 / tally.local().max(1) as f64);
    }
    let line: Vec<String> = shares
        .iter()
        .map(|s| format!("{:.0}%", s * 100.0))
        .collect();
    println!(
        "4. local-3 joins     -> its share of the local calls, second by second: {}",
        line.join(", ")
    );
    // At the start of its window it takes much less than at the end, when it has about an even
    // third. (Under PowerOfTwoChoices an idle newcomer also wins against a busy instance, so
    // its first second is above the 10% of its weight it starts with.)
    if shares[0] * 1.5 > shares[4] || shares[4] < 0.25 {
        return Err(format!("local-3 did not warm up: shares {shares:.2?}").into());
    }
    println!(
        "ok: stayed local at 50%, spilled at 150% with no errors, came home, local-3 warmed up"
    );
    Ok(())
}

/// What a stretch of calls did: calls per destination, failures, latencies.
#[derive(Default)]
struct Tally {
    by_destination: HashMap<String, u64>,
    errors: u64,
    latencies: Vec<Duration>,
}

impl Tally {
    fn of(&self, id: &str) -> u64 {
        self.by_destination.get(id).copied().unwrap_or(0)
    }

    fn local(&self) -> u64 {
        self.calls_where(|id| id.starts_with("local"))
    }

    fn calls_where(&self, f: impl Fn(&str) -> bool) -> u64 {
        self.by_destination
            .iter()
            .filter(|(id, _)| f(id))
            .map(|(_, n)| n)
            .sum()
    }

    /// The share of the calls answered by destinations whose id starts with `prefix`.
    fn share(&self, prefix: &str) -> f64 {
        let all = self.calls_where(|_| true).max(1);
        self.calls_where(|id| id.starts_with(prefix)) as f64 / all as f64
    }

    fn p99(&mut self) -> Duration {
        self.latencies.sort();
        let at = (self.latencies.len() * 99 / 100).min(self.latencies.len().saturating_sub(1));
        self.latencies.get(at).copied().unwrap_or_default()
    }

    fn line(&mut self) -> String {
        format!(
            "local {:.1}%  remote {:.1}%  p99 {} ms  errors {}",
            self.share("local") * 100.0,
            self.share("remote") * 100.0,
            self.p99().as_millis(),
            self.errors
        )
    }
}

/// Sends calls at `rate` a second for `length`, open-loop: each call starts on time whether or
/// not the ones before it have answered. Returns once every call has ended.
async fn drive(client: &HealthAwareClient, rate: f64, length: Duration) -> Tally {
    let mut calls = JoinSet::new();
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    let end = Instant::now() + length;
    while Instant::now() < end {
        ticks.tick().await;
        let client = client.clone();
        calls.spawn(async move {
            let start = Instant::now();
            let answer = client.get("search", "/query").send().await;
            let who = answer.ok().map(|r| r.destination().id().to_string());
            (who, start.elapsed())
        });
    }
    let mut tally = Tally::default();
    while let Some(Ok((who, took))) = calls.join_next().await {
        match who {
            Some(id) => *tally.by_destination.entry(id).or_default() += 1,
            None => tally.errors += 1,
        }
        tally.latencies.push(took);
    }
    tally
}

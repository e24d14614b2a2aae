//! healthpick routing around failures, end to end, on your machine, with no setup.
//!
//! Starts five real HTTP backends on 127.0.0.1 (three "local" in tier 0 from the configuration,
//! two "remote" in tier 1 published by a discovery source), each serving `/api/systemstatus`
//! with the health payload of its own `Draining` handle. Four
//! callers send steady traffic (about 100 requests/s) through `HealthAwareClient` with the
//! default `RetryPolicy`, the built-in `ActiveMonitor` probes every backend each 250 ms, and
//! passive checks watch the real requests. Then a script injects faults:
//!
//! | t (s) | step                                                | expected routing            |
//! |-------|-----------------------------------------------------|-----------------------------|
//! | 0     | all healthy                                         | tier 0 only                 |
//! | 2     | local-1 killed (connections reset)                  | local-2, local-3            |
//! | 5     | local-1 restarted                                   | tier 0                      |
//! | 7     | local-2 reports `Degraded` (still 200)              | local-1, local-3            |
//! | 10    | local-2 reports `Healthy` again                     | tier 0                      |
//! | 12    | local-3 drains: 503 `Unhealthy`, serving for 3 s... | local-1, local-2            |
//! | 15    | ... then stops; restarted at 16                     | tier 0                      |
//! | 18    | all local instances killed at once                  | remote-1, remote-2 (tier 1) |
//! | 21    | all local instances restarted                       | back to tier 0              |
//!
//! While it runs, a live table shows every destination (tier, active / passive / reported
//! health, available, in flight, requests served, last change). On a terminal it is redrawn in
//! place; when stdout is not a terminal (CI) it is printed as plain timestamped lines.
//!
//! It ends after about 25 s with a summary (requests, caller-visible failures, retries, time to
//! detect each fault) and exits 0 only if every expectation held. Expectations are checked from
//! the engine's change events and from what each call and attempt actually did, with generous
//! time windows, so a loaded machine does not make it fail.
//!
//! Run with `cargo run --example demo`.

#[path = "support/backend.rs"]
mod backend;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backend::Backend;
use healthpick::discovery::SourceSpec;
use healthpick::policy::{
    PassiveHealthPolicy, PassivePolicyContext, PassiveVerdict, TransportFailureRate,
};
use healthpick::table::{LiveTable, OutputMode, StatusTable};
use healthpick::{
    ActiveMonitor, Endpoint, Engine, HealthAwareClient, HealthEvent, HealthEventKind, HealthPart,
    PartValue, ReportedHealth, RequestOutcome,
};
use tokio::sync::mpsc;

const CLUSTER: &str = "orders";
const LOCALS: [&str; 3] = ["local-1", "local-2", "local-3"];
const REMOTES: [&str; 2] = ["remote-1", "remote-2"];
const CALLERS: usize = 4;
/// Each caller sends one request per period: about 100 requests/s in all.
const CALL_PERIOD: Duration = Duration::from_millis(40);
/// Each backend takes this long per request, so requests are visibly in flight.
const LATENCY: Duration = Duration::from_millis(20);
/// How long a draining backend keeps serving before it stops.
const DRAIN_DELAY: Duration = Duration::from_secs(3);
/// Detection (or recovery) must happen within this long after a step. The probes run every
/// 250 ms and two failures eject, so it normally takes well under a second.
const DETECT_WITHIN: Duration = Duration::from_secs(4);
/// After a detection, requests picked later than this must follow the new routing.
const GRACE: Duration = Duration::from_millis(300);
const END: f64 = 24.0;

/// One call as the caller saw it.
struct Call {
    /// Engine time when the call started (the pick happens at once).
    started: Duration,
    /// The destination that answered, or why the call failed.
    result: Result<String, String>,
    /// Whether any attempt was sent (not so when no destination was available at all).
    sent: bool,
}

/// One attempt as the passive policy saw it (every attempt reports an outcome).
struct Attempt {
    at: Duration,
    destination: String,
    transport_failure: bool,
}

/// The built-in TransportFailureRate policy, plus a record of every outcome it sees: that is how
/// the demo counts attempts (and so retries) without touching the client. Registered under the
/// built-in name, so the configuration stays exactly what a YARP file holds.
struct RecordingTransportFailureRate {
    attempts: Arc<Mutex<Vec<Attempt>>>,
}

impl PassiveHealthPolicy for RecordingTransportFailureRate {
    fn request_completed(
        &self,
        ctx: &PassivePolicyContext<'_>,
        outcome: RequestOutcome,
    ) -> Option<PassiveVerdict> {
        self.attempts.lock().unwrap().push(Attempt {
            at: ctx.now(),
            destination: ctx.destination().id().to_string(),
            transport_failure: outcome.is_transport_failure(),
        });
        TransportFailureRate.request_completed(ctx, outcome)
    }
}

/// A step of the script, stamped with the engine time it happened.
struct Step {
    at: Duration,
    what: &'static str,
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
    let names: Vec<&str> = LOCALS.iter().chain(&REMOTES).copied().collect();
    let mut backends = Vec::new();
    for name in &names {
        let backend = Backend::start(name).await?;
        backend.set_latency(LATENCY);
        backend.set_drain_delay(DRAIN_DELAY);
        backends.push(backend);
    }

    // A YARP appsettings document, as it would sit in a file, with the local instances. The
    // passive window and reactivation are shortened from YARP's 60 s to fit a 25 s demo. The
    // remote instances come from a discovery source below.
    let destinations: Vec<String> = names
        .iter()
        .zip(&backends)
        .filter(|(name, _)| LOCALS.contains(name))
        .map(|(name, b)| format!(r#""{name}": {{ "Address": "{}" }}"#, b.url()))
        .collect();
    let config = format!(
        r#"{{
          "HealthPolicies": {{ "DetectionWindowSize": "00:00:01" }},
          "ReverseProxy": {{ "Clusters": {{ "{CLUSTER}": {{
            "HealthCheck": {{
              "Active": {{ "Enabled": true, "Interval": "00:00:00.25", "Timeout": "00:00:01",
                          "Path": "/api/systemstatus" }},
              "Passive": {{ "Enabled": true, "ReactivationPeriod": "00:00:02" }}
            }},
            "Destinations": {{ {} }}
          }} }} }}
        }}"#,
        destinations.join(",\n")
    );
    let attempts: Arc<Mutex<Vec<Attempt>>> = Arc::default();
    let engine = Engine::builder()
        .passive_policy(
            "TransportFailureRate",
            RecordingTransportFailureRate {
                attempts: attempts.clone(),
            },
        )
        .event_capacity(1 << 16)
        .build();
    engine.load_json(&config)?;
    // The remote data centre's instances, as a registry (a discovery source) publishes them:
    // tier 1, beside the configured ones. The table's SOURCE column shows where each came from.
    let registry =
        engine.publisher(CLUSTER, SourceSpec::new("registry").target("orders@remote"))?;
    registry.publish(
        names
            .iter()
            .zip(&backends)
            .filter(|(name, _)| REMOTES.contains(name))
            .map(|(name, b)| Ok(Endpoint::new(*name, b.url().parse()?).tier(1)))
            .collect::<Result<Vec<_>, url::ParseError>>()?,
    )?;
    let now = {
        let engine = engine.clone();
        move || engine.clock().now()
    };

    println!(
        "healthpick demo: 3 local backends (tier 0), 2 remote (tier 1), {CALLERS} callers through \
         HealthAwareClient, faults scripted over {END:.0} s\n"
    );

    // ---- the live table, fed by engine events, script notes and a 250 ms tick ----
    let served: Vec<(String, Arc<std::sync::atomic::AtomicU64>)> = backends
        .iter()
        .map(|b| (b.name().to_string(), b.served_counter()))
        .collect();
    let table = StatusTable::new().served(move |_, destination| {
        served
            .iter()
            .find(|(name, _)| name == destination)
            .map(|(_, n)| n.load(Ordering::Relaxed))
    });
    let live = LiveTable::stdout(table)
        .clock(engine.clock().clone())
        .recent_lines(12)
        .reprint_every(Some(Duration::from_secs(5)));
    let mode = live.mode();
    let events: Arc<Mutex<Vec<HealthEvent>>> = Arc::default();
    let (notes, notes_rx) = mpsc::unbounded_channel::<String>();
    let display = tokio::spawn(display(
        engine.clone(),
        live,
        engine.subscribe(),
        notes_rx,
        events.clone(),
    ));

    // ---- probing, then traffic ----
    let monitor = ActiveMonitor::start(&engine);
    engine.ready().await;
    let http = reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(5))
        .build()?;
    let client = HealthAwareClient::new(http, engine.clone());
    let start = tokio::time::Instant::now();
    let t0 = now();
    let stop = Arc::new(AtomicBool::new(false));
    let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
    let mut callers = Vec::new();
    for _ in 0..CALLERS {
        let (client, stop, calls, now) = (client.clone(), stop.clone(), calls.clone(), now.clone());
        callers.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(CALL_PERIOD);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let started = now();
                let (result, sent) = match client.get(CLUSTER, "/api/orders").send().await {
                    Ok(response) => {
                        let id = response.destination().id().to_string();
                        let status = response.status();
                        let result = match response.bytes().await {
                            Ok(_) if status.is_success() => Ok(id),
                            Ok(_) => Err(format!("{id} answered {status}")),
                            Err(e) => Err(format!("{id}: body broke off ({})", root_cause(&e))),
                        };
                        (result, true)
                    }
                    Err(e) => (Err(describe_failure(&e)), !e.attempts().is_empty()),
                };
                calls.lock().unwrap().push(Call {
                    started,
                    result,
                    sent,
                });
            }
        }));
    }

    // ---- the script ----
    let mut steps: Vec<Step> = Vec::new();
    let at = |t: f64| tokio::time::sleep_until(start + Duration::from_secs_f64(t));
    let mut step = |what: &'static str| {
        steps.push(Step { at: now(), what });
        let _ = notes.send(format!(">>> {what}"));
    };

    at(2.0).await;
    backends[0].kill();
    step("local-1 killed");

    at(5.0).await;
    backends[0].restart().await?;
    step("local-1 restarted");

    at(7.0).await;
    backends[1].set_status(ReportedHealth::Degraded);
    step("local-2 reports Degraded");

    at(10.0).await;
    backends[1].set_status(ReportedHealth::Healthy);
    step("local-2 reports Healthy");

    at(12.0).await;
    let draining = backends[2].start_draining();
    step("local-3 draining");
    draining.drain().await; // keeps serving for the drain delay
    backends[2].kill();
    step("local-3 stopped after draining");

    at(16.0).await;
    backends[2].restart().await?;
    step("local-3 restarted");

    at(18.0).await;
    for b in &mut backends[..3] {
        b.kill();
    }
    step("all local instances killed");

    at(21.0).await;
    for b in &mut backends[..3] {
        b.restart().await?;
    }
    step("all local instances restarted");

    at(END).await;
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        caller.await?;
    }
    let end = now();
    monitor.stop().await;
    drop(notes);
    display.await??;

    // ---- expectations, from events, calls and attempts ----
    let events = events.lock().unwrap();
    let calls = calls.lock().unwrap();
    let attempts = attempts.lock().unwrap();
    let step_at = |what: &str| {
        steps
            .iter()
            .find(|s| s.what == what)
            .map(|s| s.at)
            .expect("every step ran")
    };
    let mut report = Report::default();

    // When none of `ids` is available any more / all of them are available again, after `from`.
    let availability = |from: Duration, ids: &[&str], back: bool| {
        events.iter().find_map(|e| match &e.kind {
            HealthEventKind::AvailabilityChanged { available, .. } if e.at >= from => {
                let has = |id: &&str| available.iter().any(|a| &**a == *id);
                let holds = if back {
                    ids.iter().all(has)
                } else {
                    !ids.iter().any(has)
                };
                holds.then_some(e.at)
            }
            _ => None,
        })
    };
    let reported = |from: Duration, id: &str, status: ReportedHealth| {
        events.iter().find_map(|e| match &e.kind {
            HealthEventKind::HealthChanged {
                destination,
                part: HealthPart::Reported,
                to: PartValue::Reported(Some(to)),
                ..
            } if e.at >= from && &**destination == id && *to == status => Some(e.at),
            _ => None,
        })
    };
    // Destinations that answered calls started in [from, to).
    let answered = |from: Duration, to: Duration| {
        let mut ids: Vec<&str> = calls
            .iter()
            .filter(|c| c.started >= from && c.started < to)
            .filter_map(|c| c.result.as_deref().ok())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    };
    let only = |ids: &[&str], allowed: &[&str]| {
        !ids.is_empty() && ids.iter().all(|id| allowed.contains(id))
    };
    let attempts_to = |id: &str, from: Duration, to: Duration| {
        attempts
            .iter()
            .filter(|a| a.destination == id && a.at >= from && a.at < to)
            .count()
    };

    // Start: every destination probed Healthy, traffic on tier 0 only. The window ends a grace
    // before the first fault: a call started just before local-1 is killed may fail there after
    // connecting, and such a call leaves its tier (`healthpick::guide::timeouts_and_failures`),
    // so tier 1 answers it.
    let first_fault = step_at("local-1 killed");
    let served = answered(t0, first_fault.saturating_sub(GRACE));
    report.check(
        format!("all healthy: tier 0 serves (answered by {served:?})"),
        only(&served, &LOCALS),
    );

    // 1. One local instance killed.
    let killed = first_fault;
    let restarted = step_at("local-1 restarted");
    let detected = report.detection(
        "local-1 killed",
        killed,
        availability(killed, &["local-1"], false),
    );
    if let Some(d) = detected {
        let tried = attempts_to("local-1", d + GRACE, restarted);
        report.check(
            format!("local-1 dead: no attempt reaches it once detected ({tried} did)"),
            tried == 0,
        );
        let served = answered(d + GRACE, restarted);
        report.check(
            format!("local-1 dead: local-2 and local-3 serve ({served:?})"),
            only(&served, &["local-2", "local-3"]),
        );
    }
    report.recovery(
        "local-1 restarted",
        restarted,
        availability(restarted, &["local-1"], true),
    );

    // 2. One local instance degraded.
    let degraded = step_at("local-2 reports Degraded");
    let healthy_again = step_at("local-2 reports Healthy");
    if let Some(d) = report.detection(
        "local-2 degraded",
        degraded,
        reported(degraded, "local-2", ReportedHealth::Degraded),
    ) {
        let served = answered(d + GRACE, healthy_again);
        report.check(
            format!("local-2 Degraded: ranked below, local-1 and local-3 serve ({served:?})"),
            only(&served, &["local-1", "local-3"]),
        );
    }
    report.recovery(
        "local-2 healthy again",
        healthy_again,
        reported(healthy_again, "local-2", ReportedHealth::Healthy),
    );

    // 3. One local instance draining before it stops.
    let drain_start = step_at("local-3 draining");
    let stopped = step_at("local-3 stopped after draining");
    let restarted = step_at("local-3 restarted");
    if let Some(d) = report.detection(
        "local-3 draining",
        drain_start,
        availability(drain_start, &["local-3"], false),
    ) {
        report.check(
            format!(
                "local-3 draining: routed away {} ms before it stopped",
                stopped.saturating_sub(d).as_millis()
            ),
            d < stopped,
        );
        let served = answered(d + GRACE, restarted);
        report.check(
            format!("local-3 draining: local-1 and local-2 serve ({served:?})"),
            only(&served, &["local-1", "local-2"]),
        );
    }
    let failed_on_local_3 = attempts
        .iter()
        .filter(|a| a.destination == "local-3" && a.transport_failure)
        .filter(|a| a.at >= drain_start && a.at < restarted)
        .count();
    report.check(
        format!(
            "local-3 draining: no request to it failed ({failed_on_local_3} transport failures)"
        ),
        failed_on_local_3 == 0,
    );
    report.recovery(
        "local-3 restarted",
        restarted,
        availability(restarted, &["local-3"], true),
    );

    // 4. All local instances down, then restored.
    let all_down = step_at("all local instances killed");
    let restored = step_at("all local instances restarted");
    if let Some(d) = report.detection(
        "all local instances down",
        all_down,
        availability(all_down, &LOCALS, false),
    ) {
        let served = answered(d + GRACE, restored);
        report.check(
            format!("no local left: tier 1 serves ({served:?})"),
            only(&served, &REMOTES),
        );
    }
    if let Some(back) = report.recovery(
        "all local instances restored",
        restored,
        availability(restored, &LOCALS, true),
    ) {
        let served = answered(back + GRACE, end);
        report.check(
            format!("restored: traffic is back on tier 0 ({served:?})"),
            only(&served, &LOCALS),
        );
    }

    // Caller-visible failures: none expected, whatever happened to the backends.
    let failures: Vec<(Duration, &String)> = calls
        .iter()
        .filter_map(|c| c.result.as_ref().err().map(|e| (c.started, e)))
        .collect();
    report.check(
        format!(
            "no caller-visible failure ({} of {} calls failed)",
            failures.len(),
            calls.len()
        ),
        failures.is_empty(),
    );

    // ---- summary ----
    if mode == OutputMode::Redraw {
        println!();
    }
    // Every attempt reports one outcome; a call's first attempt is not a retry.
    let retries = attempts
        .len()
        .saturating_sub(calls.iter().filter(|c| c.sent).count());
    println!("summary after {:.1} s", (end - t0).as_secs_f64());
    println!("  requests sent                 {:>6}", calls.len());
    println!(
        "  caller-visible failures       {:>6}   (expected 0)",
        failures.len()
    );
    println!("  retries on another instance   {retries:>6}");
    for (at, failure) in failures.iter().take(5) {
        println!(
            "    failed call at {:.1} s: {failure}",
            at.saturating_sub(t0).as_secs_f64()
        );
    }
    if failures.len() > 5 {
        println!("    ... and {} more", failures.len() - 5);
    }
    println!("  time to detect / recover:");
    for (what, took) in &report.timings {
        match took {
            Some(t) => println!("    {what:<38} {:>6} ms", t.as_millis()),
            None => println!("    {what:<38}  NOT within {} s", DETECT_WITHIN.as_secs()),
        }
    }
    println!("  expectations:");
    for (what, ok) in &report.checks {
        println!("    [{}] {what}", if *ok { "ok" } else { "FAILED" });
    }
    let all_ok = report.checks.iter().all(|(_, ok)| *ok);
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

/// Expectations and timings, in script order.
#[derive(Default)]
struct Report {
    checks: Vec<(String, bool)>,
    timings: Vec<(String, Option<Duration>)>,
}

impl Report {
    fn check(&mut self, what: String, ok: bool) {
        self.checks.push((what, ok));
    }

    /// Records how long after `step` the event at `seen` came; it must come within
    /// [`DETECT_WITHIN`]. Returns when it came.
    fn detection(
        &mut self,
        what: &str,
        step: Duration,
        seen: Option<Duration>,
    ) -> Option<Duration> {
        let seen = seen.filter(|&t| t - step <= DETECT_WITHIN);
        self.timings
            .push((format!("detect {what}"), seen.map(|t| t - step)));
        self.check(
            format!("{what}: detected within {} s", DETECT_WITHIN.as_secs()),
            seen.is_some(),
        );
        seen
    }

    /// As [`detection`](Self::detection), for a recovery.
    fn recovery(&mut self, what: &str, step: Duration, seen: Option<Duration>) -> Option<Duration> {
        let seen = seen.filter(|&t| t - step <= DETECT_WITHIN);
        self.timings
            .push((format!("recover {what}"), seen.map(|t| t - step)));
        self.check(
            format!(
                "{what}: back in service within {} s",
                DETECT_WITHIN.as_secs()
            ),
            seen.is_some(),
        );
        seen
    }
}

/// Shows the live table until the script's note channel closes, recording every engine event.
async fn display(
    engine: Engine,
    mut live: LiveTable<std::io::Stdout>,
    mut events: tokio::sync::broadcast::Receiver<HealthEvent>,
    mut notes: mpsc::UnboundedReceiver<String>,
    record: Arc<Mutex<Vec<HealthEvent>>>,
) -> std::io::Result<()> {
    use tokio::sync::broadcast::error::RecvError;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(event) => {
                    live.event(&event)?;
                    record.lock().unwrap().push(event);
                }
                Err(RecvError::Lagged(n)) => live.note(&format!("(missed {n} events)"))?,
                Err(RecvError::Closed) => break,
            },
            note = notes.recv() => match note {
                Some(note) => live.note(&note)?,
                None => break,
            },
            _ = tick.tick() => live.update(&engine.status())?,
        }
    }
    // Events already sent before the end still count.
    while let Ok(event) = events.try_recv() {
        live.event(&event)?;
        record.lock().unwrap().push(event);
    }
    live.finish(&engine.status())
}

/// `tried local-2 (connection closed before message completed), local-1 (Connection refused)`.
fn describe_failure(e: &healthpick::ClientError) -> String {
    if e.attempts().is_empty() {
        return e.to_string();
    }
    let tried: Vec<String> = e
        .attempts()
        .iter()
        .map(|a| format!("{} ({})", a.destination, root_cause(&a.error)))
        .collect();
    format!("tried {}", tried.join(", "))
}

/// The innermost cause of an error: the part that says what happened.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

//! The wrapped client's guarantees (passive checks included), against real servers on
//! loopback:
//!
//! - failover: a tier-0 backend killed under load costs callers nothing, and once it is detected
//!   it gets no further attempt (counted by a listener that takes over its port);
//! - all of tier 0 dead: traffic moves to tier 1, and comes back within a probe interval of the
//!   restart;
//! - what is retried (idempotent or marked) and what is not; the retry budget;
//! - passive ejection by TransportFailureRate and reactivation;
//! - the typed errors; response semantics (in-flight until the body is read, Host, query, JSON,
//!   cancellation);
//! - the reqwest-middleware integration (feature `middleware`).
//!
//! Every wait is a bounded poll with a deadline; no test sleeps and hopes.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use healthpick::{
    ActiveMonitor, AttemptError, ClientError, Engine, HealthAwareClient, HealthEventKind,
    HealthState, Hedging, PickError, RetryPolicy, RetryStatuses, Timeouts,
};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::support::backend::Backend;
use crate::support::child_backend::{run_child_backend_if_asked, ChildBackend};
use crate::support::clients::http_client;
use crate::support::faulty_servers::{Blackhole, ClosedPort, Mode, RawServer};
use crate::support::logging::init_tracing;
use crate::support::servers::EchoServer;
use crate::support::status::destination;
use crate::support::waits::{ms, wait_until};

/// Probe interval of the clusters with active checks.
const INTERVAL: Duration = Duration::from_millis(100);

/// `"id": { "Address": url, "Priority": tier }` entries.
fn destinations(list: &[(&str, String, u32)]) -> String {
    list.iter()
        .map(|(id, url, tier)| format!(r#""{id}": {{ "Address": "{url}", "Priority": {tier} }}"#))
        .collect::<Vec<_>>()
        .join(",\n")
}

/// Cluster `c` with active checks every 100 ms (threshold 2) and passive checks.
fn failover_config(list: &[(&str, String, u32)]) -> String {
    format!(
        r#"{{
        "HealthPolicies": {{ "DetectionWindowSize": "00:00:01" }},
        "Clusters": {{ "c": {{
            "HealthCheck": {{
                "Active": {{ "Enabled": true, "Interval": "00:00:00.1", "Timeout": "00:00:00.5",
                             "Path": "/api/systemstatus" }},
                "Passive": {{ "Enabled": true, "ReactivationPeriod": "00:00:01" }}
            }},
            "Metadata": {{ "ConsecutiveFailuresHealthPolicy.Threshold": "2" }},
            "Destinations": {{ {} }}
        }} }} }}"#,
        destinations(list)
    )
}

fn addr_of(url: &str) -> SocketAddr {
    url.trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("a 127.0.0.1:PORT url")
}

/// One successful call as the caller saw it.
#[derive(Debug, Clone)]
struct Answer {
    at: Instant,
    destination: String,
    /// The destinations of the call's attempts that did not give the answer.
    failed_on: Vec<String>,
}

/// A GET on `c` whose body must be the name of the backend that answered (its destination id).
async fn call(client: &HealthAwareClient) -> Result<Answer, String> {
    let response = client
        .get("c", "/api/orders")
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let destination = response.destination().id().to_string();
    let failed_on = response
        .failed_attempts()
        .iter()
        .map(|f| f.destination.clone())
        .collect();
    let status = response.status();
    let body = response.text().await.map_err(|e| format!("body: {e}"))?;
    if status != 200 || body != destination {
        return Err(format!("{destination} answered {status} `{body}`"));
    }
    Ok(Answer {
        at: Instant::now(),
        destination,
        failed_on,
    })
}

/// Callers that send GETs one after another (a pause between calls keeps the rate moderate)
/// until they have sent `per_caller` each or `stop` is set.
struct Load {
    answers: Arc<Mutex<Vec<Answer>>>,
    errors: Arc<Mutex<Vec<String>>>,
    completed: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    tasks: JoinSet<()>,
}

impl Load {
    fn start(client: &HealthAwareClient, callers: usize, per_caller: usize) -> Load {
        let client = client.clone();
        Self::start_with(callers, per_caller, move || {
            let client = client.clone();
            async move { call(&client).await }
        })
    }

    /// Callers that each make `call` one after another.
    fn start_with<F, Fut>(callers: usize, per_caller: usize, call: F) -> Load
    where
        F: Fn() -> Fut + Clone + Send + 'static,
        Fut: std::future::Future<Output = Result<Answer, String>> + Send,
    {
        let mut load = Load {
            answers: Arc::default(),
            errors: Arc::default(),
            completed: Arc::default(),
            stop: Arc::default(),
            tasks: JoinSet::new(),
        };
        for _ in 0..callers {
            let call = call.clone();
            let (answers, errors) = (load.answers.clone(), load.errors.clone());
            let (completed, stop) = (load.completed.clone(), load.stop.clone());
            load.tasks.spawn(async move {
                for _ in 0..per_caller {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    match call().await {
                        Ok(answer) => answers.lock().unwrap().push(answer),
                        Err(e) => errors.lock().unwrap().push(e),
                    }
                    completed.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            });
        }
        load
    }

    fn completed(&self) -> usize {
        self.completed.load(Ordering::SeqCst)
    }

    /// Waits until `n` more calls completed (bounded).
    async fn wait_for_more(&self, n: usize) {
        let target = self.completed() + n;
        let completed = self.completed.clone();
        assert!(
            wait_until(Duration::from_secs(10), || completed.load(Ordering::SeqCst)
                >= target)
            .await,
            "the callers stalled"
        );
    }

    /// Makes every caller stop after its current call.
    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Waits for every caller to end; returns the answers and the errors.
    async fn finish(mut self) -> (Vec<Answer>, Vec<String>) {
        let joined = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(r) = self.tasks.join_next().await {
                r.expect("caller task");
            }
        })
        .await;
        assert!(joined.is_ok(), "callers did not finish in time");
        let answers = std::mem::take(&mut *self.answers.lock().unwrap());
        let errors = std::mem::take(&mut *self.errors.lock().unwrap());
        (answers, errors)
    }
}

/// Records when a destination first leaves the available set of cluster `c`.
fn watch_removal(engine: &Engine, id: &'static str) -> Arc<Mutex<Option<Instant>>> {
    let seen: Arc<Mutex<Option<Instant>>> = Arc::default();
    let mut events = engine.subscribe();
    let slot = seen.clone();
    tokio::spawn(async move {
        loop {
            match events.recv().await {
                Ok(event) => {
                    if let HealthEventKind::AvailabilityChanged { available, .. } = &event.kind {
                        if &*event.cluster == "c" && !available.iter().any(|a| &**a == id) {
                            *slot.lock().unwrap() = Some(Instant::now());
                            return;
                        }
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => return,
            }
        }
    });
    seen
}

// ---- 1. failover under load -------------------------------------------------------------------

/// 8 callers, 150 GETs each; a third of the way in, tier-0 backend `t0-a` is killed hard and a
/// counting listener takes over its port (it reads each request head, then closes without an
/// answer), so every attempt still routed to `t0-a` is seen. No caller sees an error; once
/// `t0-a` left the available set no request reaches it (only probes do), the tier-1 backends
/// serve only the retries of calls whose attempt on `t0-a` failed after connecting (such a
/// failure makes a call leave its tier: it may be a dead tier's stale connection), never a
/// first attempt and nothing after detection, and status shows `t0-a` unavailable.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_a_tier0_backend_under_load_is_invisible_and_it_gets_no_traffic_once_detected() {
    init_tracing();
    let names = ["t0-a", "t0-b", "t0-c", "t1-a", "t1-b"];
    let mut backends = Vec::new();
    for name in names {
        backends.push(Backend::start(name).await.expect("backend"));
    }
    let list: Vec<_> = names
        .iter()
        .zip(&backends)
        .map(|(n, b)| (*n, b.url(), u32::from(n.starts_with("t1"))))
        .collect();
    let engine = Engine::from_json(&failover_config(&list)).expect("config");
    let _monitor = ActiveMonitor::start(&engine);
    tokio::time::timeout(Duration::from_secs(5), engine.ready())
        .await
        .expect("first probe round");
    let client = HealthAwareClient::new(http_client(), engine.clone());
    let removed = watch_removal(&engine, "t0-a");

    const CALLERS: usize = 8;
    const PER_CALLER: usize = 150;
    let load = Load::start(&client, CALLERS, PER_CALLER);
    load.wait_for_more(CALLERS * PER_CALLER / 3).await;

    let victim_addr = addr_of(&backends[0].url());
    let killed_at = Instant::now();
    backends[0].kill();
    let dead = RawServer::start_at(victim_addr, Mode::Reset).await;

    let (answers, errors) = load.finish().await;
    assert!(errors.is_empty(), "caller-visible errors: {errors:?}");
    assert_eq!(answers.len(), CALLERS * PER_CALLER);

    let detected = removed
        .lock()
        .unwrap()
        .expect("t0-a never left the available set");
    let detection = detected - killed_at;
    // Probes keep reaching the listener after detection: it counted throughout.
    let probes_seen = wait_until(Duration::from_secs(2), || {
        dead.hits_on("/api/systemstatus")
            .iter()
            .filter(|h| h.at > detected)
            .count()
            >= 2
    })
    .await;
    assert!(probes_seen, "the listener on t0-a's port saw no probes");

    // A pick made just before the snapshot swap may connect a moment later.
    let margin = Duration::from_millis(100);
    let failed_attempts = dead.hits_on("/api/orders");
    let late: Vec<_> = failed_attempts
        .iter()
        .filter(|h| h.at > detected + margin)
        .map(|h| h.at - detected)
        .collect();
    assert!(
        late.is_empty(),
        "{} requests reached t0-a after it was detected, the first at +{:?}",
        late.len(),
        &late[..late.len().min(5)]
    );
    let after: Vec<_> = answers
        .iter()
        .filter(|a| a.at > detected + margin)
        .collect();
    assert!(
        after.len() >= 100,
        "only {} calls after detection: the check would prove nothing",
        after.len()
    );
    assert!(after.iter().all(|a| a.destination != "t0-a"));
    assert!(
        answers
            .iter()
            .all(|a| a.destination != "t0-a" || a.at < detected),
        "an answer came from t0-a after detection"
    );
    // A failure after connecting (the listener reads the request, then closes, or a kept-alive
    // connection to the killed process breaks) makes a call leave its tier: the retries of calls
    // that failed on t0-a before its detection go to tier 1, and nothing else does.
    let by_tier1: Vec<_> = answers
        .iter()
        .filter(|a| a.destination.starts_with("t1"))
        .collect();
    assert!(
        by_tier1
            .iter()
            .all(|a| a.failed_on.iter().any(|d| d == "t0-a")),
        "tier 1 answered a call that had not failed on t0-a"
    );
    let calls_failed_on_victim = answers
        .iter()
        .filter(|a| a.failed_on.iter().any(|d| d == "t0-a"))
        .count();
    assert!(
        failed_attempts.len() <= calls_failed_on_victim,
        "the listener saw {} requests, but only {calls_failed_on_victim} calls failed on t0-a",
        failed_attempts.len()
    );
    assert!(
        by_tier1.iter().all(|a| a.at <= detected + margin),
        "tier 1 got traffic after t0-a was detected, while tier 0 had capacity"
    );
    assert_eq!(
        backends[3].served() + backends[4].served(),
        by_tier1.len() as u64
    );

    let status = destination(&engine, "c", "t0-a");
    assert!(!status.available, "{status:?}");
    assert_eq!(status.active, HealthState::Unhealthy, "{status:?}");
    eprintln!(
        "failover: {} calls, 0 errors; t0-a detected {detection:?} after the kill, {} attempts \
         reached it before (all retried), {} after; {} calls after detection",
        answers.len(),
        failed_attempts.len(),
        late.len(),
        after.len()
    );
}

// ---- 2. whole tier 0 down and back ------------------------------------------------------------

/// All three tier-0 backends die at once: callers see no error and traffic moves to tier 1;
/// once they are restarted, traffic returns to tier 0 within about one probe interval and
/// tier 1 is idle again.
///
/// The client has the default [`RetryPolicy`]: until the outage is detected a call may find all
/// three tier-0 destinations refusing connections before it reaches tier 1; those connect
/// failures are requeued (they do not use up the three attempts), and their budget tokens come
/// back once the call is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn all_tier0_dead_moves_traffic_to_tier1_and_restart_brings_it_back() {
    init_tracing();
    let names = ["t0-a", "t0-b", "t0-c", "t1-a", "t1-b"];
    let mut backends = Vec::new();
    for name in names {
        backends.push(Backend::start(name).await.expect("backend"));
    }
    let list: Vec<_> = names
        .iter()
        .zip(&backends)
        .map(|(n, b)| (*n, b.url(), u32::from(n.starts_with("t1"))))
        .collect();
    let engine = Engine::from_json(&failover_config(&list)).expect("config");
    let _monitor = ActiveMonitor::start(&engine);
    tokio::time::timeout(Duration::from_secs(5), engine.ready())
        .await
        .expect("first probe round");
    let client = HealthAwareClient::new(http_client(), engine.clone());
    let tier0 = ["t0-a", "t0-b", "t0-c"];
    let tier0_status = |f: fn(&healthpick::DestinationStatus) -> bool| {
        let engine = engine.clone();
        move || tier0.iter().all(|id| f(&destination(&engine, "c", id)))
    };

    let load = Load::start(&client, 8, usize::MAX);
    load.wait_for_more(150).await;
    for backend in &mut backends[..3] {
        backend.kill();
    }
    let killed_at = Instant::now();
    assert!(
        wait_until(Duration::from_secs(3), tier0_status(|d| !d.available)).await,
        "tier 0 was not detected as down"
    );
    let down_at = Instant::now();

    // The tier-0 destinations' passive failures must leave the 1 s detection window (plus the
    // 1 s bucket that holds them) before a restart, or their first success after it would see
    // the old failures and eject them again (the history survives reactivation).
    assert!(
        wait_until(
            Duration::from_secs(5),
            tier0_status(|d| d.passive != HealthState::Unhealthy)
        )
        .await,
        "passive reactivation did not happen"
    );
    tokio::time::sleep_until(down_at + Duration::from_millis(2300)).await;
    let served_before_restart: u64 = backends[..3].iter().map(Backend::served).sum();

    for backend in &mut backends[..3] {
        backend.restart().await.expect("restart on the same port");
    }
    let restarted_at = Instant::now();
    assert!(
        wait_until(
            Duration::from_secs(3),
            tier0_status(|d| d.available && d.active == HealthState::Healthy)
        )
        .await,
        "tier 0 was not probed healthy after the restart"
    );
    let healthy_at = Instant::now();
    load.wait_for_more(200).await;
    load.stop();
    let (answers, errors) = load.finish().await;

    assert!(errors.is_empty(), "caller-visible errors: {errors:?}");
    let margin = Duration::from_millis(100);
    let outage: Vec<_> = answers
        .iter()
        .filter(|a| a.at > down_at + margin && a.at < restarted_at)
        .collect();
    assert!(
        outage.len() >= 100,
        "only {} calls in the outage",
        outage.len()
    );
    assert!(
        outage.iter().all(|a| a.destination.starts_with("t1")),
        "tier 0 answered during its outage"
    );
    let tier1_during_outage: HashSet<_> = outage.iter().map(|a| a.destination.as_str()).collect();
    assert_eq!(
        tier1_during_outage.len(),
        2,
        "both tier-1 destinations share the load"
    );

    let first_back = answers
        .iter()
        .filter(|a| a.at >= restarted_at && a.destination.starts_with("t0"))
        .map(|a| a.at)
        .min()
        .expect("no tier-0 answer after the restart");
    let back_after = first_back - restarted_at;
    assert!(
        back_after <= INTERVAL + Duration::from_millis(400),
        "traffic came back to tier 0 only {back_after:?} after the restart"
    );
    let recovered: Vec<_> = answers
        .iter()
        .filter(|a| a.at > healthy_at + margin)
        .collect();
    assert!(recovered.len() >= 100);
    assert!(
        recovered.iter().all(|a| a.destination.starts_with("t0")),
        "tier 1 still got traffic after tier 0 was healthy again"
    );
    assert!(backends[..3].iter().map(Backend::served).sum::<u64>() > served_before_restart);
    eprintln!(
        "tier outage: detected {:?} after the kill, {} calls served by tier 1, tier 0 back \
         {back_after:?} after the restart (probed healthy after {:?}), 0 errors in {} calls",
        down_at - killed_at,
        outage.len(),
        healthy_at - restarted_at,
        answers.len()
    );
}

// ---- 3. what is retried -----------------------------------------------------------------------

/// Cluster `c` with `FirstAlphabetical` (so `a-...` is always tried first) and no checks.
fn ordered_config(list: &[(&str, String, u32)], extra: &str) -> String {
    format!(
        r#"{{ {extra} "Clusters": {{ "c": {{
            "LoadBalancingPolicy": "FirstAlphabetical",
            "Destinations": {{ {} }} }} }} }}"#,
        destinations(list)
    )
}

/// A client on an engine running [`ordered_config`].
fn ordered_client(list: &[(&str, String, u32)], extra: &str) -> HealthAwareClient {
    let engine = Engine::from_json(&ordered_config(list, extra)).expect("config");
    HealthAwareClient::new(http_client(), engine)
}

#[tokio::test]
async fn post_is_not_retried_unless_marked_retryable() {
    let reset = RawServer::start(Mode::Reset).await;
    let echo = EchoServer::start("b-echo").await;
    let client = ordered_client(
        &[("a-reset", reset.url(), 0), ("b-echo", echo.url(), 0)],
        "",
    );

    let err = client
        .post("c", "/api/orders")
        .body("order-1")
        .send()
        .await
        .expect_err("a POST to a resetting destination fails");
    assert!(
        matches!(&err, ClientError::Request { cluster, .. } if cluster == "c"),
        "{err:?}"
    );
    assert_eq!(err.destination(), Some("a-reset"));
    assert_eq!(err.attempts().len(), 1);
    assert_eq!(err.attempts()[0].destination, "a-reset");
    assert!(err.reqwest_error().is_some());
    assert!(err.to_string().contains("a-reset"), "{err}");
    assert_eq!(reset.accepts(), 1, "exactly one attempt");
    assert_eq!(reset.hits()[0].method, "POST");
    assert_eq!(echo.served(), 0, "a POST must not be retried by default");

    let response = client
        .post("c", "/api/orders")
        .body("order-2")
        .retryable(true)
        .send()
        .await
        .expect("a retryable POST fails over");
    assert_eq!(response.destination().id(), "b-echo");
    let seen: serde_json::Value = response.json().await.expect("echo");
    assert_eq!(seen["method"], "POST");
    assert_eq!(
        seen["body"], "order-2",
        "the body is sent again on the retry"
    );
    assert_eq!(reset.accepts(), 2);

    // PUT is idempotent: retried without being marked.
    let response = client
        .put("c", "/api/orders/7")
        .body("v2")
        .send()
        .await
        .expect("a PUT fails over");
    assert_eq!(response.destination().id(), "b-echo");
    assert_eq!(reset.accepts(), 3);
    assert_eq!(echo.served(), 2);
}

/// `n` destinations refusing connections, named `a-dead`, `b-dead`, ... (so `FirstAlphabetical`
/// tries them in that order, before anything named from `x` on).
fn closed_ports(n: usize) -> (Vec<ClosedPort>, Vec<(String, String)>) {
    let ports: Vec<_> = (0..n).map(|_| ClosedPort::reserve()).collect();
    let named = ports
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("{}-dead", char::from(b'a' + i as u8)), p.url()))
        .collect();
    (ports, named)
}

/// `(id, url)` pairs, all in tier 0.
fn tier0(list: &[(String, String)]) -> Vec<(&str, String, u32)> {
    list.iter()
        .map(|(id, url)| (id.as_str(), url.clone(), 0))
        .collect()
}

fn tried(err: &ClientError) -> Vec<&str> {
    err.attempts()
        .iter()
        .map(|a| a.destination.as_str())
        .collect()
}

/// Connect failures are requeued (Finagle's term): nothing was sent, so with the default policy
/// they do not use up the three attempts. A GET gets past four dead destinations to the live
/// one; every destination tried is in the error of a call that fails, and a call never tries
/// more destinations than the cluster has.
#[tokio::test]
async fn connect_failures_do_not_use_up_attempts() {
    init_tracing();
    let (_ports, mut list) = closed_ports(4);
    let echo = EchoServer::start("x-echo").await;
    list.push(("x-echo".into(), echo.url()));
    let client = ordered_client(&tier0(&list), "");
    let response = client
        .get("c", "/api/orders")
        .send()
        .await
        .expect("four connect failures, then the live destination");
    assert_eq!(response.destination().id(), "x-echo");
    // The response tells which attempts failed before it, in order.
    let failed: Vec<&str> = response
        .failed_attempts()
        .iter()
        .map(|a| a.destination.as_str())
        .collect();
    assert_eq!(failed, ["a-dead", "b-dead", "c-dead", "d-dead"]);
    assert!(response
        .failed_attempts()
        .iter()
        .all(|a| a.error.is_connect()));
    drop(response);
    assert_eq!(echo.served(), 1);

    // Every destination dead: each is tried exactly once, then the call ends.
    let client = ordered_client(&tier0(&list[..4]), "");
    let err = client
        .get("c", "/api/orders")
        .send()
        .await
        .expect_err("all dead");
    assert_eq!(tried(&err), ["a-dead", "b-dead", "c-dead", "d-dead"]);
    assert!(err.attempts().iter().all(|a| a.error.is_connect()), "{err}");
    assert_eq!(err.destination(), Some("d-dead"));
    for (id, url) in &list[..4] {
        let text = err.to_string();
        assert!(
            text.contains(id.as_str()) && text.contains(url.as_str()),
            "{text}"
        );
    }

    // Failures after connecting (a reset: the request may have been read) still count: resets
    // on a, c and e use up the three attempts; the dead b and d in between do not.
    let resets = [
        RawServer::start(Mode::Reset).await,
        RawServer::start(Mode::Reset).await,
        RawServer::start(Mode::Reset).await,
    ];
    let mixed = vec![
        ("a-reset", resets[0].url(), 0),
        ("b-dead", list[1].1.clone(), 0),
        ("c-reset", resets[1].url(), 0),
        ("d-dead", list[2].1.clone(), 0),
        ("e-reset", resets[2].url(), 0),
        ("x-echo", echo.url(), 0),
    ];
    let client = ordered_client(&mixed, "");
    let err = client
        .get("c", "/api/orders")
        .send()
        .await
        .expect_err("three resets use up the attempts");
    assert_eq!(
        tried(&err),
        ["a-reset", "b-dead", "c-reset", "d-dead", "e-reset"]
    );
    let connect: Vec<_> = err
        .attempts()
        .iter()
        .map(|a| a.error.is_connect())
        .collect();
    assert_eq!(connect, [false, true, false, true, false]);
    assert_eq!(resets.iter().map(RawServer::accepts).sum::<u64>(), 3);
    assert_eq!(echo.served(), 1, "the live destination was not reached");
}

/// With `requeue_connect_failures: false` every failure counts: three dead destinations end the
/// call, and the live fourth is never reached.
#[tokio::test]
async fn without_requeueing_connect_failures_use_up_attempts() {
    let (_ports, mut list) = closed_ports(3);
    let echo = EchoServer::start("x-echo").await;
    list.push(("x-echo".into(), echo.url()));
    let engine = Engine::from_json(&ordered_config(&tier0(&list), "")).expect("config");
    let policy = RetryPolicy::default().requeue_connect_failures(false);
    let client = HealthAwareClient::with_retry_policy(http_client(), engine.clone(), policy);
    let err = client
        .get("c", "/api/orders")
        .send()
        .await
        .expect_err("three attempts, all refused");
    assert_eq!(tried(&err), ["a-dead", "b-dead", "c-dead"]);
    assert!(err.reqwest_error().is_some_and(reqwest::Error::is_connect));
    assert_eq!(echo.served(), 0);

    // The same cluster with the default policy reaches it.
    let client = HealthAwareClient::new(http_client(), engine);
    let response = client
        .get("c", "/api/orders")
        .send()
        .await
        .expect("requeued");
    assert_eq!(response.destination().id(), "x-echo");
}

/// Requeues take tokens from the retry budget, and a call that is answered in the end gives
/// them back (stepping over destinations that refused a connection cost nobody anything), so a
/// young client gets past dead destinations however many calls it makes; in an outage of every
/// destination the tokens stay spent and the budget stops the requeues. With a reserve of 10
/// retries (and none earned from requests): 20 calls each step over four dead destinations to
/// the live one; then, the live one gone, three calls spend three requeues each (each names
/// every destination), the fourth runs dry after one, and the fifth gets no retry at all.
#[tokio::test]
async fn retry_budget_stops_requeueing_only_when_requeues_do_not_help() {
    let (_ports, mut list) = closed_ports(4);
    let echo = EchoServer::start("x-echo").await;
    list.push(("x-echo".into(), echo.url()));
    let engine = Engine::from_json(&ordered_config(&tier0(&list), "")).expect("config");
    let policy = RetryPolicy::default()
        .retry_ratio(0.0)
        .min_retries_per_second(1)
        .budget_window(Duration::from_secs(10));
    let client = HealthAwareClient::with_retry_policy(http_client(), engine.clone(), policy);
    for _ in 0..20 {
        let response = client
            .get("c", "/api/orders")
            .send()
            .await
            .expect("requeued, and the tokens given back");
        assert_eq!(response.destination().id(), "x-echo");
        assert_eq!(response.failed_attempts().len(), 4);
    }
    assert_eq!(echo.served(), 20);

    engine
        .load_json(&ordered_config(&tier0(&list[..4]), ""))
        .expect("the live destination leaves");
    for _ in 0..3 {
        let err = client
            .get("c", "/api/orders")
            .send()
            .await
            .expect_err("all dead");
        assert_eq!(tried(&err), ["a-dead", "b-dead", "c-dead", "d-dead"]);
    }
    let err = client
        .get("c", "/api/orders")
        .send()
        .await
        .expect_err("the budget runs out");
    assert_eq!(tried(&err), ["a-dead", "b-dead"]);
    assert!(err.attempts().iter().all(|a| a.error.is_connect()));
    let err = client
        .get("c", "/api/orders")
        .send()
        .await
        .expect_err("no budget left");
    assert_eq!(tried(&err), ["a-dead"]);
}

/// A POST that is not marked retryable is sent once even when the connection was refused
/// (exactly one attempt, and the error names the destination);
/// marked, it is requeued to the live destination.
#[tokio::test]
async fn unmarked_post_to_a_dead_destination_is_one_attempt() {
    let dead = ClosedPort::reserve();
    let echo = EchoServer::start("x-echo").await;
    let client = ordered_client(&[("a-dead", dead.url(), 0), ("x-echo", echo.url(), 0)], "");
    let err = client
        .post("c", "/api/orders")
        .body("order-1")
        .send()
        .await
        .expect_err("refused, not retried");
    assert_eq!(tried(&err), ["a-dead"]);
    assert_eq!(err.destination(), Some("a-dead"));
    assert!(err.to_string().contains("a-dead"), "{err}");
    assert!(err.reqwest_error().is_some_and(reqwest::Error::is_connect));
    assert_eq!(echo.served(), 0, "an unmarked POST must not be retried");

    let response = client
        .post("c", "/api/orders")
        .body("order-2")
        .retryable(true)
        .send()
        .await
        .expect("a marked POST is requeued");
    let seen: serde_json::Value = response.json().await.expect("echo");
    assert_eq!(seen["body"], "order-2");
}

// ---- 4. passive ejection and reactivation -----------------------------------------------------

/// TransportFailureRate over a 1 s window with at least 4 outcomes; no active checks, so only
/// the passive policy acts. `a-bad` resets every connection; `b-good` answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_failure_rate_ejects_a_resetting_server_and_reactivation_brings_it_back() {
    init_tracing();
    let bad = RawServer::start(Mode::Reset).await;
    let good = Backend::start("b-good").await.expect("backend");
    let engine = Engine::from_json(&format!(
        r#"{{
        "HealthPolicies": {{ "DetectionWindowSize": "00:00:01", "MinimalTotalCountThreshold": 4 }},
        "Clusters": {{ "c": {{
            "LoadBalancingPolicy": "FirstAlphabetical",
            "HealthCheck": {{ "Passive": {{ "Enabled": true, "ReactivationPeriod": "00:00:01" }} }},
            "Destinations": {{ {} }} }} }} }}"#,
        destinations(&[("a-bad", bad.url(), 0), ("b-good", good.url(), 0)])
    ))
    .expect("config");
    let client = HealthAwareClient::new(http_client(), engine.clone());

    let mut fourth_call = None;
    for i in 0..10 {
        if i == 3 {
            fourth_call = Some(Instant::now());
        }
        let response = client
            .get("c", "/api/orders")
            .send()
            .await
            .expect("retried");
        assert_eq!(response.text().await.expect("body"), "b-good");
    }
    // Below 4 outcomes the rate is 0; the 4th failure makes it 4/4 and ejects `a-bad`.
    assert_eq!(bad.accepts(), 4, "attempts on a-bad before its ejection");
    let status = destination(&engine, "c", "a-bad");
    assert_eq!(status.passive, HealthState::Unhealthy, "{status:?}");
    assert!(!status.available);
    assert_eq!(
        destination(&engine, "c", "b-good").passive,
        HealthState::Healthy
    );

    // Reactivation: back to Unknown after max(ReactivationPeriod, DetectionWindowSize) = 1 s.
    let engine2 = engine.clone();
    assert!(
        wait_until(Duration::from_secs(3), move || {
            let d = destination(&engine2, "c", "a-bad");
            d.passive == HealthState::Unknown && d.available
        })
        .await,
        "a-bad was not reactivated"
    );
    let reactivated_after = fourth_call.expect("four calls").elapsed();
    assert!(
        reactivated_after >= Duration::from_millis(950),
        "reactivated after {reactivated_after:?}, before the period"
    );
    assert!(destination(&engine, "c", "a-bad").in_best_group);

    // It gets traffic again, and since its failures are still in the window, the very next
    // failure ejects it again.
    let response = client
        .get("c", "/api/orders")
        .send()
        .await
        .expect("retried");
    assert_eq!(response.destination().id(), "b-good");
    drop(response);
    assert_eq!(
        bad.accepts(),
        5,
        "the reactivated destination got the next call"
    );
    assert_eq!(
        destination(&engine, "c", "a-bad").passive,
        HealthState::Unhealthy
    );
    let _ = client.get("c", "/api/orders").send().await.expect("ok");
    assert_eq!(bad.accepts(), 5);
}

/// A body that breaks off after the headers is a transport failure for passive checks.
#[tokio::test]
async fn a_body_that_breaks_off_counts_as_a_transport_failure() {
    let truncating = RawServer::start(Mode::TruncatedBody).await;
    let engine = Engine::from_json(&format!(
        r#"{{
        "HealthPolicies": {{ "MinimalTotalCountThreshold": 3 }},
        "Clusters": {{ "c": {{
            "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
            "Destinations": {{ {} }} }} }} }}"#,
        destinations(&[("only", truncating.url(), 0)])
    ))
    .expect("config");
    let client = HealthAwareClient::new(http_client(), engine.clone());
    for _ in 0..3 {
        let response = client.get("c", "/x").send().await.expect("headers arrive");
        assert_eq!(response.status(), 200);
        assert!(response.text().await.is_err(), "the body is cut short");
    }
    let status = destination(&engine, "c", "only");
    assert_eq!(status.passive, HealthState::Unhealthy, "{status:?}");
    assert_eq!(status.in_flight, 0);
}

// ---- 5. errors --------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_cluster_is_a_typed_error() {
    let backend = Backend::start("a").await.expect("backend");
    let client = ordered_client(&[("a", backend.url(), 0)], "");
    let err = client
        .get("nope", "/x")
        .send()
        .await
        .expect_err("no such cluster");
    assert!(
        matches!(&err, ClientError::Pick(PickError::UnknownCluster { cluster }) if cluster == "nope"),
        "{err:?}"
    );
    assert!(err.to_string().contains("nope"));
    assert!(!err.is_no_available_destinations());
    assert!(err.destination().is_none() && err.attempts().is_empty());
    assert_eq!(err.cluster(), Some("nope"));
    assert_eq!(backend.served(), 0);
}

/// A body that is not JSON is a `Body` error, not a builder error, and the call did reach `a`.
#[tokio::test]
async fn a_body_that_is_not_json_is_a_body_error() {
    let backend = Backend::start("a").await.expect("backend");
    let client = ordered_client(&[("a", backend.url(), 0)], "");
    let response = client.get("c", "/x").send().await.expect("a answers");
    assert!(response.failed_attempts().is_empty());
    let err = response
        .json::<serde_json::Value>()
        .await
        .expect_err("the body is the text `a`");
    assert!(
        matches!(&err, ClientError::Body { message, .. } if message.contains("not JSON")),
        "{err:?}"
    );
    assert_eq!(err.cluster(), None);
    assert_eq!(backend.served(), 1);
}

/// HealthyAndUnknown with every destination probed Unhealthy: nothing is sent.
#[tokio::test]
async fn no_available_destination_sends_nothing() {
    let a = RawServer::start(Mode::Reset).await;
    let b = RawServer::start(Mode::Reset).await;
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "c": {{
            "HealthCheck": {{
                "AvailableDestinationsPolicy": "HealthyAndUnknown",
                "Active": {{ "Enabled": true, "Interval": "00:01:00", "Timeout": "00:00:01",
                             "Path": "/api/systemstatus" }} }},
            "Metadata": {{ "ConsecutiveFailuresHealthPolicy.Threshold": "1" }},
            "Destinations": {{ {} }} }} }} }}"#,
        destinations(&[("a", a.url(), 0), ("b", b.url(), 1)])
    ))
    .expect("config");
    let _monitor = ActiveMonitor::start(&engine);
    tokio::time::timeout(Duration::from_secs(5), engine.ready())
        .await
        .expect("first probe round");
    assert_eq!(
        destination(&engine, "c", "a").active,
        HealthState::Unhealthy
    );
    assert_eq!(
        destination(&engine, "c", "b").active,
        HealthState::Unhealthy
    );
    let probes = a.accepts() + b.accepts();

    let client = HealthAwareClient::new(http_client(), engine);
    let err = client
        .get("c", "/api/orders")
        .send()
        .await
        .expect_err("nothing available");
    assert!(err.is_no_available_destinations(), "{err:?}");
    assert!(
        matches!(&err, ClientError::Pick(PickError::NoAvailableDestinations { cluster }) if cluster == "c"),
        "{err:?}"
    );
    assert!(err.to_string().contains("`c`"), "{err}");
    assert!(err.attempts().is_empty() && err.destination().is_none());
    assert_eq!(err.cluster(), Some("c"));
    assert_eq!(a.accepts() + b.accepts(), probes, "nothing may be sent");
}

/// Every attempt is in the error, in order, and its Display names each destination and URL.
#[tokio::test]
async fn request_error_names_every_destination_tried() {
    let servers = [
        RawServer::start(Mode::Reset).await,
        RawServer::start(Mode::Reset).await,
        RawServer::start(Mode::Reset).await,
    ];
    let ids = ["a-1", "b-2", "c-3"];
    let list: Vec<_> = ids
        .iter()
        .zip(&servers)
        .map(|(id, s)| (*id, s.url(), 0))
        .collect();
    let client = ordered_client(&list, "");
    let err = client
        .get("c", "/api/orders")
        .send()
        .await
        .expect_err("all reset");
    let tried: Vec<_> = err
        .attempts()
        .iter()
        .map(|a| a.destination.as_str())
        .collect();
    assert_eq!(tried, ids, "in FirstAlphabetical order, each once");
    assert_eq!(err.destination(), Some("c-3"));
    let text = err.to_string();
    for (id, server) in ids.iter().zip(&servers) {
        assert!(text.contains(id), "`{text}` does not name {id}");
        assert!(
            text.contains(&server.url()),
            "`{text}` lacks {}",
            server.url()
        );
        assert_eq!(server.accepts(), 1);
    }
    for attempt in err.attempts() {
        assert_eq!(attempt.url.path(), "/api/orders");
    }

    // Fewer destinations than attempts: the call stops when none is left, with the real error.
    let client = ordered_client(&list[..2], "");
    let err = client
        .get("c", "/api/orders")
        .send()
        .await
        .expect_err("both reset");
    assert!(matches!(err, ClientError::Request { .. }), "{err:?}");
    assert_eq!(err.attempts().len(), 2);
}

// ---- 6. response semantics --------------------------------------------------------------------

#[tokio::test]
async fn response_holds_the_destination_in_flight_until_the_body_is_read() {
    let echo = EchoServer::start("e").await;
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "c": {{ "Destinations": {{
            "e": {{ "Address": "{}svc/", "Host": "orders.internal" }} }} }} }} }}"#,
        echo.url()
    ))
    .expect("config");
    let client = HealthAwareClient::new(http_client(), engine.clone());

    let response = client
        .get("c", "/api/orders?x=1")
        .query(&[("id", "7"), ("q", "a b")])
        .send()
        .await
        .expect("ok");
    assert_eq!(response.status(), 200);
    assert_eq!(destination(&engine, "c", "e").in_flight, 1, "unread body");
    let seen: serde_json::Value = response.json().await.expect("echo");
    assert_eq!(destination(&engine, "c", "e").in_flight, 0, "body read");
    assert_eq!(seen["path"], "/svc/api/orders", "joined with the base path");
    assert_eq!(seen["query"], "x=1&id=7&q=a+b");
    assert_eq!(seen["host"], "orders.internal", "the destination's Host");

    // Query parameters added in several calls to a path without a query of its own.
    let response = client
        .get("c", "/api/orders")
        .query(&[("id", "7")])
        .query(&[("page", "2")])
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await
        .expect("ok");
    let seen: serde_json::Value = response.json().await.expect("echo");
    assert_eq!(seen["path"], "/svc/api/orders");
    assert_eq!(seen["query"], "id=7&page=2");

    // Dropping an unread response releases the destination too.
    let response = client.get("c", "/a").send().await.expect("ok");
    assert_eq!(destination(&engine, "c", "e").in_flight, 1);
    drop(response);
    assert_eq!(destination(&engine, "c", "e").in_flight, 0);

    let order = serde_json::json!({ "id": 7, "items": ["book", "pen"] });
    let response = client
        .post("c", "/api/orders")
        .json(&order)
        .send()
        .await
        .expect("ok");
    let seen: serde_json::Value = response.json().await.expect("echo");
    assert_eq!(seen["method"], "POST");
    assert_eq!(seen["content_type"], "application/json");
    let body: serde_json::Value =
        serde_json::from_str(seen["body"].as_str().expect("body text")).expect("JSON body");
    assert_eq!(body, order);
}

/// A destination's configured Host replaces one the caller set: a request carries exactly one
/// `Host` header (RFC 9112, section 3.2: a server must answer 400 to a request with two).
#[tokio::test]
async fn destination_host_is_the_only_host_header_sent() {
    let echo = EchoServer::start("e").await;
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "c": {{ "Destinations": {{
            "e": {{ "Address": "{}", "Host": "orders.internal" }} }} }} }} }}"#,
        echo.url()
    ))
    .expect("config");
    let client = HealthAwareClient::new(http_client(), engine);
    let response = client
        .get("c", "/x")
        .header("host", "caller.example")
        .send()
        .await
        .expect("ok");
    let seen: serde_json::Value = response.json().await.expect("echo");
    assert_eq!(
        seen["hosts"],
        serde_json::json!(["orders.internal"]),
        "exactly one Host header, the destination's"
    );
}

/// A call dropped by its caller while the destination works on it is not the destination's
/// fault: after many cancels its passive health is not Unhealthy, and nothing stays in flight.
#[tokio::test]
async fn cancelled_calls_count_as_success() {
    let echo = EchoServer::start("e").await;
    let engine = Engine::from_json(&format!(
        r#"{{
        "HealthPolicies": {{ "MinimalTotalCountThreshold": 4 }},
        "Clusters": {{ "c": {{
            "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
            "Destinations": {{ {} }} }} }} }}"#,
        destinations(&[("e", echo.url(), 0)])
    ))
    .expect("config");
    let client = HealthAwareClient::new(http_client(), engine.clone());
    for i in 1..=20u64 {
        let call = client.get("c", "/slow").send();
        // Cancel once the server holds the request: the attempt was really in flight.
        let served = || echo.served() >= i;
        tokio::select! {
            r = call => panic!("/slow answered: {r:?}"),
            held = wait_until(Duration::from_secs(5), served) => assert!(held, "request {i} never arrived"),
        }
    }
    let status = destination(&engine, "c", "e");
    assert_ne!(status.passive, HealthState::Unhealthy, "{status:?}");
    assert_eq!(status.passive, HealthState::Healthy, "20 successes");
    assert!(status.available);
    assert_eq!(status.in_flight, 0);
}

/// `timeout` bounds each attempt: a call to two servers that never answer ends with both
/// attempts timed out, each on its own destination, and nothing left in flight.
#[tokio::test]
async fn each_attempt_is_bounded_by_the_request_timeout() {
    let (a, b) = (EchoServer::start("a").await, EchoServer::start("b").await);
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "c": {{ "Destinations": {{ {} }} }} }} }}"#,
        destinations(&[("a", a.url(), 0), ("b", b.url(), 0)])
    ))
    .expect("config");
    let client = HealthAwareClient::new(http_client(), engine.clone());
    let call = client
        .get("c", "/slow")
        .timeout(Duration::from_millis(150))
        .send();
    let error = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the request timeout ended the call")
        .expect_err("nobody answers /slow");
    let attempts = error.attempts();
    let mut tried: Vec<_> = attempts.iter().map(|f| f.destination.as_str()).collect();
    tried.sort_unstable();
    assert_eq!(tried, ["a", "b"], "{error}");
    for failure in attempts {
        assert!(failure.error.is_timeout(), "{failure:?}");
    }
    for id in ["a", "b"] {
        assert_eq!(destination(&engine, "c", id).in_flight, 0);
    }
}

// ---- 7. retry budget --------------------------------------------------------------------------

/// With every destination failing, retries come out of the budget: a burst of calls costs about
/// one attempt each, not `max_attempts` each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_budget_keeps_an_outage_from_multiplying_load() {
    let servers = [
        RawServer::start(Mode::Reset).await,
        RawServer::start(Mode::Reset).await,
        RawServer::start(Mode::Reset).await,
    ];
    let list: Vec<_> = ["a", "b", "c"]
        .iter()
        .zip(&servers)
        .map(|(id, s)| (*id, s.url(), 0))
        .collect();
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "c": {{ "Destinations": {{ {} }} }} }} }}"#,
        destinations(&list)
    ))
    .expect("config");
    let accepts = || servers.iter().map(RawServer::accepts).sum::<u64>();

    // The default budget has room: each call makes its three attempts.
    let generous = HealthAwareClient::new(http_client(), engine.clone());
    for _ in 0..5 {
        let err = generous.get("c", "/x").send().await.expect_err("all reset");
        assert_eq!(err.attempts().len(), 3);
    }
    assert_eq!(accepts(), 15);

    let policy = RetryPolicy::default()
        .max_attempts(3)
        .retry_ratio(0.0)
        .min_retries_per_second(1)
        .budget_window(Duration::from_secs(1));
    let client = HealthAwareClient::with_retry_policy(http_client(), engine, policy);
    const CALLS: u64 = 40;
    let started = Instant::now();
    let mut calls = JoinSet::new();
    for _ in 0..CALLS {
        let client = client.clone();
        calls.spawn(async move { client.get("c", "/x").send().await.map(drop) });
    }
    let mut attempts = 0;
    while let Some(result) = calls.join_next().await {
        let err = result.expect("task").expect_err("all reset");
        attempts += err.attempts().len() as u64;
    }
    let elapsed = started.elapsed();
    assert_eq!(accepts() - 15, attempts, "every attempt reached a server");
    // One retry per second of reserve, and nothing earned from requests (ratio 0).
    let reserve = 1 + elapsed.as_secs_f64().ceil() as u64;
    assert!(
        attempts <= CALLS + reserve,
        "{attempts} attempts for {CALLS} calls in {elapsed:?}: the budget did not hold"
    );
    assert!(attempts > CALLS, "the reserve allows at least one retry");
    eprintln!("retry budget: {CALLS} failing calls made {attempts} attempts in {elapsed:?}");
}

/// A budget window outside tower's accepted 1..=60 s must not panic on the request path.
#[tokio::test]
async fn retry_policy_with_a_short_budget_window_does_not_panic() {
    let backend = Backend::start("a").await.expect("backend");
    let engine = Engine::from_json(&ordered_config(&[("a", backend.url(), 0)], "")).unwrap();
    let policy = RetryPolicy::default().budget_window(Duration::from_millis(500));
    let client = HealthAwareClient::with_retry_policy(http_client(), engine, policy);
    let call = tokio::spawn(async move {
        let response = client.get("c", "/x").send().await?;
        Ok::<_, ClientError>(response.text().await.unwrap_or_default())
    });
    match call.await {
        Ok(result) => assert_eq!(result.expect("answered"), "a"),
        Err(e) => panic!("send() panicked with a 500 ms budget window: {e}"),
    }
}

// ---- 9. timeouts ------------------------------------------------------------------------------

/// The only attempt of a failed call, which must have timed out: how long it had.
fn timed_out_after(err: &ClientError) -> Duration {
    match err.attempts() {
        [only] => match only.error {
            AttemptError::TimedOut(had) => had,
            ref other => panic!("not a timeout: {other:?}"),
        },
        other => panic!("expected one attempt: {other:?}"),
    }
}

/// `a-frozen` accepts connections and reads requests but never answers (a frozen process);
/// `b` and `c` answer. Passive checks on (4 outcomes suffice); FirstAlphabetical, so every call
/// tries `a-frozen` first and fails over to `b`.
fn frozen_config(frozen: &RawServer, b: &EchoServer, c: &EchoServer) -> String {
    format!(
        r#"{{
        "HealthPolicies": {{ "MinimalTotalCountThreshold": 4 }},
        "Clusters": {{ "c": {{
            "LoadBalancingPolicy": "FirstAlphabetical",
            "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
            "Destinations": {{ {} }} }} }} }}"#,
        destinations(&[
            ("a-frozen", frozen.url(), 0),
            ("b", b.url(), 0),
            ("c", c.url(), 0)
        ])
    )
}

/// With the default client (built on a reqwest client without timeouts of its own, like
/// `reqwest::Client::new()`), a frozen destination holds no caller longer than the default
/// attempt timeout (15 s) plus a margin: retryable calls time out on it after exactly that
/// timeout and fail over to `b`; a POST times out and is not retried; passive checks see every
/// timeout as a transport failure and eject the frozen destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_destination_holds_callers_of_the_default_client_one_attempt_timeout() {
    init_tracing();
    let frozen = RawServer::start(Mode::Hang).await;
    let (b, c) = (EchoServer::start("b").await, EchoServer::start("c").await);
    let engine = Engine::from_json(&frozen_config(&frozen, &b, &c)).expect("config");
    let client = HealthAwareClient::new(http_client(), engine.clone());
    assert_eq!(client.timeouts(), Timeouts::default());
    let started = Instant::now();
    let mut calls = JoinSet::new();
    for _ in 0..6 {
        let client = client.clone();
        calls.spawn(async move {
            let result = client.get("c", "/api/orders").send().await;
            (Instant::now(), result)
        });
    }
    let post = {
        let client = client.clone();
        tokio::spawn(async move {
            let result = client.post("c", "/api/orders").body("x").send().await;
            (Instant::now(), result)
        })
    };
    let bound = Timeouts::DEFAULT_ATTEMPT + Duration::from_secs(5);
    let results = tokio::time::timeout(bound + Duration::from_secs(5), async {
        let mut out = Vec::new();
        while let Some(done) = calls.join_next().await {
            out.push(done.expect("caller task"));
        }
        out
    })
    .await
    .expect("callers still waiting well past the attempt timeout");
    for (at, result) in results {
        let response = result.expect("failed over");
        let waited = at - started;
        assert!(waited <= bound, "a caller waited {waited:?}");
        assert_eq!(response.destination().id(), "b");
        match response.failed_attempts() {
            [failed] => {
                assert_eq!(failed.destination, "a-frozen");
                assert!(
                    matches!(failed.error, AttemptError::TimedOut(had) if had == Timeouts::DEFAULT_ATTEMPT),
                    "{failed:?}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    let (at, post) = post.await.expect("post task");
    let err = post.expect_err("a POST is not retried");
    assert!(at - started <= bound);
    assert!(err.is_timeout(), "{err}");
    assert_eq!(tried(&err), ["a-frozen"]);
    assert_eq!(timed_out_after(&err), Timeouts::DEFAULT_ATTEMPT);
    assert_eq!(b.served() + c.served(), 6, "the POST was not retried");
    let status = destination(&engine, "c", "a-frozen");
    assert_eq!(status.passive, HealthState::Unhealthy, "{status:?}");
    assert!(
        status
            .last_reason
            .as_deref()
            .is_some_and(|r| r.contains("transport failure rate")),
        "every timeout is a transport failure: {status:?}"
    );
    assert_eq!(status.in_flight, 0);
}

/// The attempt timeout in force, most specific first: the request's own, then the cluster's
/// `HttpRequest:ActivityTimeout`, then the client's; a call timeout shorter than all of them
/// ends the call. Each timed-out attempt says how long it had, so this needs no clock reading.
#[tokio::test]
async fn attempt_timeouts_come_from_the_request_then_the_cluster_then_the_client() {
    let (h1, h2) = (
        RawServer::start(Mode::Hang).await,
        RawServer::start(Mode::Hang).await,
    );
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{
        "plain": {{ "Destinations": {{ "p": {{ "Address": "{}" }} }} }},
        "slow": {{ "HttpRequest": {{ "ActivityTimeout": "00:00:00.2" }},
                   "Destinations": {{ "s": {{ "Address": "{}" }} }} }} }} }}"#,
        h1.url(),
        h2.url()
    ))
    .expect("config");
    let client = HealthAwareClient::builder(engine)
        .http(http_client())
        .timeouts(
            Timeouts::default()
                .attempt(ms(400))
                .call(Duration::from_secs(5)),
        )
        .build()
        .expect("client");
    let err = client.get("plain", "/x").send().await.unwrap_err();
    assert_eq!(timed_out_after(&err), ms(400), "the client's");
    assert!(err.is_timeout() && !err.is_connect());
    let err = client.get("slow", "/x").send().await.unwrap_err();
    assert_eq!(timed_out_after(&err), ms(200), "the cluster's");
    let err = client
        .get("SLOW", "/x")
        .timeout(ms(100))
        .send()
        .await
        .unwrap_err();
    assert_eq!(timed_out_after(&err), ms(100), "the request's");
    let err = client
        .get("plain", "/x")
        .timeout(ms(1000))
        .call_timeout(ms(150))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        timed_out_after(&err),
        ms(150),
        "the call's ends the attempt"
    );
}

/// The call timeout bounds all attempts together: three destinations that never answer, a
/// 1 s attempt timeout and a 300 ms call timeout make one attempt of 300 ms, and no retry
/// starts after the deadline.
#[tokio::test]
async fn the_call_timeout_bounds_every_attempt_together() {
    let hangs = [
        RawServer::start(Mode::Hang).await,
        RawServer::start(Mode::Hang).await,
        RawServer::start(Mode::Hang).await,
    ];
    let list: Vec<_> = ["a", "b", "c"]
        .iter()
        .zip(&hangs)
        .map(|(id, s)| (*id, s.url(), 0))
        .collect();
    let engine = Engine::from_json(&ordered_config(&list, "")).expect("config");
    let client = HealthAwareClient::builder(engine)
        .http(http_client())
        .timeouts(
            Timeouts::default()
                .attempt(Duration::from_secs(1))
                .call(ms(300)),
        )
        .build()
        .expect("client");
    let started = Instant::now();
    let err = client
        .get("c", "/x")
        .send()
        .await
        .expect_err("nobody answers");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(timed_out_after(&err), ms(300));
    assert_eq!(hangs.iter().map(RawServer::accepts).sum::<u64>(), 1);
}

/// A call to the only destination of a cluster whose probes hang (probe timeout 5 s), sent
/// while its first probes are still running, with `bound` applied to the request; how long it
/// took and how it failed.
async fn first_call_while_probes_hang(
    bound: impl FnOnce(healthpick::RequestBuilder) -> healthpick::RequestBuilder,
) -> (Duration, ClientError) {
    let hang = RawServer::start(Mode::Hang).await;
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "c": {{
            "HealthCheck": {{ "Active": {{ "Enabled": true, "Interval": "00:01:00",
                                           "Timeout": "00:00:05", "Path": "/health" }} }},
            "Destinations": {{ {} }} }} }} }}"#,
        destinations(&[("only", hang.url(), 0)])
    ))
    .expect("config");
    let _monitor = ActiveMonitor::start(&engine);
    let client = HealthAwareClient::new(http_client(), engine.clone());
    let started = Instant::now();
    let err = bound(client.get("c", "/x"))
        .send()
        .await
        .expect_err("nothing answers");
    let took = started.elapsed();
    assert!(
        !engine.first_round_done("c"),
        "the probes are still running"
    );
    (took, err)
}

/// The first pick of a cluster with active checks waits for its first probe round, but never
/// longer than the call may take: with probes that hang a call with a 300 ms call timeout is over
/// well before the probes are, with its attempt timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_pick_waits_for_probes_no_longer_than_the_call_timeout() {
    let (took, err) = first_call_while_probes_hang(|r| r.call_timeout(ms(300))).await;
    assert!(took < Duration::from_secs(2), "waited {took:?}");
    assert!(err.is_timeout(), "{err}");
}

/// The same with the request's own attempt timeout and the default call timeout (30 s): the
/// warm-up wait is bounded by the request's timeout too (at most 300 ms of warm-up, then
/// attempts of 300 ms: far from the 5 s probe timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_pick_waits_for_probes_no_longer_than_the_request_timeout() {
    let (took, err) = first_call_while_probes_hang(|r| r.timeout(ms(300))).await;
    assert!(took < Duration::from_secs(2), "waited {took:?}");
    assert!(err.is_timeout(), "{err}");
}

/// Reading a body is bounded by the attempt's deadline too: a server that sends the headers
/// and then stalls gives a `BodyTimedOut` error, and passive checks count it as a transport
/// failure.
#[tokio::test]
async fn a_body_that_stalls_is_bounded_by_the_attempt_deadline() {
    let stalling = RawServer::start(Mode::StallBody).await;
    let engine = Engine::from_json(&format!(
        r#"{{
        "HealthPolicies": {{ "MinimalTotalCountThreshold": 3 }},
        "Clusters": {{ "c": {{
            "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
            "Destinations": {{ {} }} }} }} }}"#,
        destinations(&[("only", stalling.url(), 0)])
    ))
    .expect("config");
    let client = HealthAwareClient::builder(engine.clone())
        .http(http_client())
        .timeouts(Timeouts::default().attempt(ms(300)))
        .build()
        .expect("client");
    for _ in 0..3 {
        let response = client.get("c", "/x").send().await.expect("headers arrive");
        assert_eq!(response.status(), 200);
        let err = response.text().await.expect_err("the body stalls");
        assert!(
            matches!(&err, ClientError::BodyTimedOut { destination } if destination == "only"),
            "{err:?}"
        );
        assert!(err.is_timeout());
    }
    let status = destination(&engine, "c", "only");
    assert_eq!(status.passive, HealthState::Unhealthy, "{status:?}");
    assert_eq!(status.in_flight, 0);
}

/// A client healthpick builds has a connect timeout (2 s by default): a destination whose SYNs
/// go unanswered costs a connect timeout, which is a connect failure, so the call moves on
/// without using up an attempt (one attempt allowed, and still answered). A reqwest client built
/// elsewhere cannot take one.
#[tokio::test]
async fn a_connect_timeout_is_a_requeued_connect_failure() {
    init_tracing();
    let hole = Blackhole::start().await;
    let echo = EchoServer::start("b").await;
    let engine = Engine::from_json(&ordered_config(
        &[("a-hole", hole.url(), 0), ("b", echo.url(), 0)],
        "",
    ))
    .expect("config");
    let one_attempt = RetryPolicy::default().max_attempts(1);
    let client = HealthAwareClient::builder(engine.clone())
        .http_builder(reqwest::Client::builder().no_proxy())
        .connect_timeout(ms(200))
        .retry_policy(one_attempt)
        .build()
        .expect("client");
    let response = client.get("c", "/x").send().await.expect("requeued");
    assert_eq!(response.destination().id(), "b");
    match response.failed_attempts() {
        [failed] => {
            assert_eq!(failed.destination, "a-hole");
            assert!(
                failed.error.is_connect() && failed.error.is_timeout(),
                "{:?}",
                failed.error
            );
        }
        other => panic!("{other:?}"),
    }
    drop(response);

    // The default connect timeout: the attempt ends as a connect failure after about 2 s, long
    // before the 15 s attempt timeout.
    let client = HealthAwareClient::builder(engine.clone())
        .http_builder(reqwest::Client::builder().no_proxy())
        .retry_policy(one_attempt)
        .build()
        .expect("client");
    let started = Instant::now();
    let response = client.get("c", "/x").send().await.expect("requeued");
    let took = started.elapsed();
    assert!(
        took >= Timeouts::DEFAULT_CONNECT - ms(50) && took < Timeouts::DEFAULT_CONNECT + ms(2000),
        "{took:?}"
    );
    assert!(response.failed_attempts()[0].error.is_connect());

    let err = HealthAwareClient::builder(engine)
        .http(http_client())
        .connect_timeout(ms(100))
        .build()
        .expect_err("a built client cannot take a connect timeout");
    assert!(
        matches!(&err, ClientError::Builder { message, .. } if message.contains("connect_timeout")),
        "{err:?}"
    );
}

// ---- 10. status retries -----------------------------------------------------------------------

/// `a-503` answers every request 503; `b` and `c` answer. With the default PowerOfTwoChoices,
/// a third of first attempts land on `a-503`: no 503 reaches a caller of a retryable request
/// (each such call was retried on another destination, which its response lists), while
/// non-retryable POSTs that land there get the 503 itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_from_one_of_three_never_reaches_callers_of_retryable_requests() {
    let bad = RawServer::start(Mode::Status(503)).await;
    let (b, c) = (EchoServer::start("b").await, EchoServer::start("c").await);
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "c": {{ "Destinations": {{ {} }} }} }} }}"#,
        destinations(&[
            ("a-503", bad.url(), 0),
            ("b", b.url(), 0),
            ("c", c.url(), 0)
        ])
    ))
    .expect("config");
    let client = HealthAwareClient::new(http_client(), engine.clone());
    let mut retried = 0;
    for _ in 0..120 {
        let response = client
            .get("c", "/api/orders")
            .send()
            .await
            .expect("answered");
        assert_eq!(response.status(), 200, "{}", response.destination().id());
        match response.failed_attempts() {
            [] => {}
            [failed] => {
                assert_eq!(failed.destination, "a-503");
                assert_eq!(failed.error.status().map(|s| s.as_u16()), Some(503));
                retried += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(
        retried > 0,
        "no call landed on a-503: the test proves nothing"
    );
    let gets = bad.hits().iter().filter(|h| h.method == "GET").count();
    assert_eq!(gets, retried);

    let mut got_503 = 0;
    for _ in 0..60 {
        let response = client
            .post("c", "/api/orders")
            .body("x")
            .send()
            .await
            .expect("answered");
        assert!(
            response.failed_attempts().is_empty(),
            "a POST is not retried"
        );
        match response.status().as_u16() {
            503 => {
                assert_eq!(response.destination().id(), "a-503");
                got_503 += 1;
            }
            200 => {}
            other => panic!("{other}"),
        }
    }
    assert!(
        got_503 > 0,
        "no POST landed on a-503: the test proves nothing"
    );
    let posts = bad.hits().iter().filter(|h| h.method == "POST").count();
    assert_eq!(posts, got_503);
    assert_eq!(destination(&engine, "c", "a-503").in_flight, 0);
}

/// What status retries leave alone, and what a caller gets when every destination answers
/// badly: a status outside the set (500) and a 503 with `Retry-After` come back as they are;
/// an empty set turns status retries off; with three destinations answering 503 each is tried
/// once and the caller gets the last response (with the other two listed), or the second one
/// when only two attempts are allowed; a 503 followed by a failure with nothing left to try
/// gives the caller that 503. `error_for_status` turns an error status into a typed error.
#[tokio::test]
async fn status_retries_stop_at_the_last_response() {
    let echo = EchoServer::start("z-echo").await;
    let s500 = RawServer::start(Mode::Status(500)).await;
    let response = ordered_client(&[("a-500", s500.url(), 0), ("z-echo", echo.url(), 0)], "")
        .get("c", "/x")
        .send()
        .await
        .expect("answered");
    assert_eq!(
        (response.status().as_u16(), response.destination().id()),
        (500, "a-500")
    );
    drop(response);

    let later = RawServer::start(Mode::StatusRetryAfter(503)).await;
    let response = ordered_client(
        &[("a-later", later.url(), 0), ("z-echo", echo.url(), 0)],
        "",
    )
    .get("c", "/x")
    .send()
    .await
    .expect("answered");
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
    drop(response);

    let s503 = [
        RawServer::start(Mode::Status(503)).await,
        RawServer::start(Mode::Status(503)).await,
        RawServer::start(Mode::Status(503)).await,
    ];
    let engine = Engine::from_json(&ordered_config(
        &[
            ("a-503", s503[0].url(), 0),
            ("b-503", s503[1].url(), 0),
            ("c-503", s503[2].url(), 0),
        ],
        "",
    ))
    .expect("config");
    let off = HealthAwareClient::with_retry_policy(
        http_client(),
        engine.clone(),
        RetryPolicy::default().retry_statuses(RetryStatuses::NONE),
    );
    let response = off.get("c", "/x").send().await.expect("answered");
    assert_eq!(
        (response.status().as_u16(), response.destination().id()),
        (503, "a-503")
    );
    drop(response);
    assert_eq!(echo.served(), 0, "nothing was retried so far");

    let before: Vec<u64> = s503.iter().map(RawServer::accepts).collect();
    let client = HealthAwareClient::new(http_client(), engine.clone());
    let response = client
        .get("c", "/x")
        .send()
        .await
        .expect("the last response");
    assert_eq!(
        (response.status().as_u16(), response.destination().id()),
        (503, "c-503")
    );
    let failed: Vec<_> = response
        .failed_attempts()
        .iter()
        .map(|a| (a.destination.as_str(), a.error.status().map(|s| s.as_u16())))
        .collect();
    assert_eq!(failed, [("a-503", Some(503)), ("b-503", Some(503))]);
    let after: Vec<u64> = s503.iter().map(RawServer::accepts).collect();
    assert_eq!(
        after
            .iter()
            .zip(&before)
            .map(|(a, b)| a - b)
            .collect::<Vec<_>>(),
        [1, 1, 1],
        "each destination once"
    );
    let err = response.error_for_status().expect_err("503 is an error");
    assert!(
        matches!(&err, ClientError::Status { cluster, destination, status, .. }
            if cluster == "c" && destination == "c-503" && status.as_u16() == 503),
        "{err:?}"
    );
    assert_eq!(err.status().map(|s| s.as_u16()), Some(503));
    assert!(err.to_string().contains("c-503"), "{err}");

    let two = HealthAwareClient::with_retry_policy(
        http_client(),
        engine,
        RetryPolicy::default().max_attempts(2),
    );
    let response = two.get("c", "/x").send().await.expect("answered");
    assert_eq!(response.destination().id(), "b-503");
    assert!(response.error_for_status_ref().is_err());
    drop(response);

    let reset = RawServer::start(Mode::Reset).await;
    let response = ordered_client(
        &[("a-503", s503[0].url(), 0), ("b-reset", reset.url(), 0)],
        "",
    )
    .get("c", "/x")
    .send()
    .await
    .expect("the 503 comes back");
    assert_eq!(
        (response.status().as_u16(), response.destination().id()),
        (503, "a-503")
    );
    let failed = response.failed_attempts();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].destination, "b-reset");
    assert!(failed[0].error.reqwest().is_some());
    assert_eq!(reset.accepts(), 1);

    let ok = ordered_client(&[("z-echo", echo.url(), 0)], "")
        .get("c", "/x")
        .send()
        .await
        .expect("answered")
        .error_for_status()
        .expect("200 is no error");
    assert_eq!(ok.status(), 200);
}

// ---- 11. a tier dies; everything dies (child processes, SIGKILL) ------------------------------

/// A GET on cluster `c` whose body must be the name of the backend that answered.
async fn call_named(client: &HealthAwareClient) -> Result<Answer, String> {
    call(client).await
}

/// Tier 0 is three child processes, tier 1 two in-process backends; no health checks at all,
/// so nothing ever ejects tier 0 and every call after the kill has to step over it. 2 s after
/// the first request every tier-0 process is killed (SIGKILL). No caller sees an error: calls in
/// flight on a dead connection leave the tier, new calls step over three refused connections
/// (requeued, and their budget tokens given back once answered), for as long as the outage lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_every_tier0_process_two_seconds_after_the_first_request_costs_no_error() {
    init_tracing();
    let mut tier0: Vec<ChildBackend> = ["t0-a", "t0-b", "t0-c"]
        .into_iter()
        .map(ChildBackend::start)
        .collect();
    let tier1 = [
        Backend::start("t1-a").await.expect("backend"),
        Backend::start("t1-b").await.expect("backend"),
    ];
    let mut list: Vec<_> = ["t0-a", "t0-b", "t0-c"]
        .iter()
        .zip(&tier0)
        .map(|(id, c)| (*id, c.url().to_string(), 0))
        .collect();
    list.extend([("t1-a", tier1[0].url(), 1), ("t1-b", tier1[1].url(), 1)]);
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "c": {{ "Destinations": {{ {} }} }} }} }}"#,
        destinations(&list)
    ))
    .expect("config");
    let client = HealthAwareClient::new(http_client(), engine);
    let load = Load::start_with(8, usize::MAX, {
        let client = client.clone();
        move || {
            let client = client.clone();
            async move { call_named(&client).await }
        }
    });
    load.wait_for_more(1).await;
    let first = Instant::now();
    tokio::time::sleep_until(first + Duration::from_secs(2)).await;
    let killing = Instant::now();
    for child in &mut tier0 {
        child.kill();
    }
    let killed_at = Instant::now();
    load.wait_for_more(1000).await;
    load.stop();
    let (answers, errors) = load.finish().await;
    assert!(
        errors.is_empty(),
        "{} caller-visible errors among {} calls, the first: {:?}",
        errors.len(),
        errors.len() + answers.len(),
        errors.first()
    );
    let before = answers.iter().filter(|a| a.at < killing).count();
    let after: Vec<_> = answers
        .iter()
        .filter(|a| a.at > killed_at + ms(100))
        .collect();
    assert!(
        before >= 50 && after.len() >= 500,
        "{before} / {}",
        after.len()
    );
    assert!(
        answers
            .iter()
            .filter(|a| a.at < killing)
            .all(|a| a.destination.starts_with("t0")),
        "tier 1 answered while tier 0 was alive"
    );
    assert!(after.iter().all(|a| a.destination.starts_with("t1")));
    eprintln!(
        "tier 0 killed: {} calls, 0 errors; {before} before the kill, {} after it",
        answers.len(),
        answers.len() - before
    );
}

/// Five child processes over three tiers, all killed: every call fails fast (every attempt a
/// refused connection, no timeout), the first calls name every destination in tier order, and
/// the outage adds no more attempts than the budget allows: at most 20% of the calls of the
/// window (10 s) plus its reserve of 10 per second, 100 (RetryPolicy's defaults).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_destination_dead_fails_fast_and_extra_attempts_stay_within_the_budget() {
    let names = ["t0-a", "t0-b", "t1-a", "t1-b", "t2-a"];
    let mut children: Vec<ChildBackend> = names.into_iter().map(ChildBackend::start).collect();
    let list: Vec<_> = names
        .iter()
        .zip(&children)
        .map(|(id, c)| (*id, c.url().to_string(), (id.as_bytes()[1] - b'0') as u32))
        .collect();
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "c": {{ "Destinations": {{ {} }} }} }} }}"#,
        destinations(&list)
    ))
    .expect("config");
    let client = HealthAwareClient::new(http_client(), engine);
    const WARM: usize = 20;
    for _ in 0..WARM {
        call(&client).await.expect("alive");
    }
    for child in &mut children {
        child.kill();
    }
    const CALLS: usize = 300;
    let started = Instant::now();
    let mut attempts = 0;
    let mut naming_all = 0;
    for i in 0..CALLS {
        let err = client
            .get("c", "/api/orders")
            .send()
            .await
            .expect_err("everything is dead");
        let tried = tried(&err);
        assert!(
            err.attempts().iter().all(|a| a.error.is_connect()),
            "call {i}: {err}"
        );
        let distinct: HashSet<_> = tried.iter().collect();
        assert_eq!(
            distinct.len(),
            tried.len(),
            "a destination tried twice: {tried:?}"
        );
        if i == 0 {
            let tiers: Vec<u8> = tried.iter().map(|id| id.as_bytes()[1]).collect();
            assert_eq!(
                tiers, b"00112",
                "every destination, in tier order: {tried:?}"
            );
        }
        naming_all += usize::from(tried.len() == names.len());
        attempts += tried.len();
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(10),
        "the bound below assumes one window"
    );
    let extra = attempts - CALLS;
    let bound = 100 + (WARM + CALLS) / 5 + 1;
    assert!(
        extra <= bound,
        "{CALLS} calls made {attempts} attempts: {extra} extra, more than the budget's {bound}"
    );
    assert!(
        naming_all >= 20,
        "only {naming_all} calls named every destination"
    );
    eprintln!(
        "total outage: {CALLS} calls in {elapsed:?} made {attempts} attempts ({extra} extra, \
         +{:.0}%; bound {bound}); {naming_all} calls named all {} destinations",
        extra as f64 * 100.0 / CALLS as f64,
        names.len()
    );
}

// ---- 12. hedging ------------------------------------------------------------------------------

/// `a-slow` takes 5 s to answer, `b-fast` answers at once; FirstAlphabetical sends every first
/// attempt to `a-slow`. With hedging after 50 ms (every call may hedge), every call is answered
/// by `b-fast`, lists no failed attempt, and the attempt on `a-slow` is cancelled: reported as
/// `Cancelled`, a success (20 failures would have ejected it), and no longer in flight. A request
/// can turn hedging off (it then waits for its own timeout); a POST never hedges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hedge_answers_what_a_slow_destination_holds_and_the_loser_is_cancelled() {
    init_tracing();
    let slow = EchoServer::start("a-slow").await;
    slow.set_delay(Duration::from_secs(5));
    let fast = EchoServer::start("b-fast").await;
    let engine = Engine::from_json(&format!(
        r#"{{
        "HealthPolicies": {{ "MinimalTotalCountThreshold": 4 }},
        "Clusters": {{ "c": {{
            "LoadBalancingPolicy": "FirstAlphabetical",
            "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
            "Destinations": {{ {} }} }} }} }}"#,
        destinations(&[("a-slow", slow.url(), 0), ("b-fast", fast.url(), 0)])
    ))
    .expect("config");
    let client = HealthAwareClient::builder(engine.clone())
        .http(http_client())
        .hedging(Hedging::after(ms(50)).max_share(1.0))
        .build()
        .expect("client");
    for i in 0..20 {
        let started = Instant::now();
        let response = client.get("c", "/x").send().await.expect("hedged");
        assert_eq!(response.destination().id(), "b-fast", "call {i}");
        assert!(
            response.failed_attempts().is_empty(),
            "a lost hedge race is no failure"
        );
        let seen: serde_json::Value = response.json().await.expect("echo");
        assert_eq!(seen["server"], "b-fast");
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "call {i} waited for a-slow"
        );
    }
    assert_eq!((slow.served(), fast.served()), (20, 20));
    let status = destination(&engine, "c", "a-slow");
    assert_eq!(status.passive, HealthState::Healthy, "{status:?}");
    assert_eq!(status.in_flight, 0);

    let response = client
        .get("c", "/x")
        .hedging(None)
        .timeout(ms(300))
        .send()
        .await
        .expect("failed over after the timeout");
    assert_eq!(response.destination().id(), "b-fast");
    assert!(response.failed_attempts()[0].error.is_timeout());
    drop(response);

    let err = client
        .post("c", "/x")
        .body("x")
        .timeout(ms(300))
        .send()
        .await
        .expect_err("a POST is neither hedged nor retried");
    assert_eq!(tried(&err), ["a-slow"]);
    assert_eq!(fast.served(), 21);
}

/// Hedges are capped as a share of calls (5% by default): with one slow destination of three
/// (100 ms) and a 10 ms hedge delay, a third of the calls would hedge, yet no more than one in
/// twenty does (counted as requests beyond one per call: nothing fails). Hedges take retry
/// budget too: with none, a call waits for its slow destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedges_never_exceed_their_cap_and_take_retry_budget() {
    let servers = [
        EchoServer::start("a").await,
        EchoServer::start("b").await,
        EchoServer::start("c").await,
    ];
    servers[1].set_delay(ms(100));
    let list: Vec<_> = ["a", "b", "c"]
        .iter()
        .zip(&servers)
        .map(|(id, s)| (*id, s.url(), 0))
        .collect();
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "c": {{ "Destinations": {{ {} }} }} }} }}"#,
        destinations(&list)
    ))
    .expect("config");
    let client = HealthAwareClient::builder(engine)
        .http(http_client())
        .hedging(Hedging::after(ms(10)))
        .build()
        .expect("client");
    const CALLS: u64 = 100;
    let mut slow_first = 0;
    for _ in 0..CALLS {
        let served_b = servers[1].served();
        let response = client.get("c", "/x").send().await.expect("answered");
        assert!(response.failed_attempts().is_empty());
        slow_first +=
            u64::from(servers[1].served() > served_b && response.destination().id() == "b");
    }
    let requests: u64 = servers.iter().map(EchoServer::served).sum();
    let hedges = requests - CALLS;
    assert!(hedges >= 1, "no hedge at all");
    assert!(hedges <= CALLS / 20, "{hedges} hedges for {CALLS} calls");
    assert!(
        slow_first + hedges >= 10,
        "too few calls met the slow destination for the cap to matter"
    );

    let (slow, other) = (
        EchoServer::start("a-slow").await,
        EchoServer::start("b").await,
    );
    slow.set_delay(ms(300));
    let engine = Engine::from_json(&ordered_config(
        &[("a-slow", slow.url(), 0), ("b", other.url(), 0)],
        "",
    ))
    .expect("config");
    let broke = HealthAwareClient::builder(engine)
        .http(http_client())
        .retry_policy(
            RetryPolicy::default()
                .retry_ratio(0.0)
                .min_retries_per_second(0),
        )
        .hedging(Hedging::after(ms(10)).max_share(1.0))
        .build()
        .expect("client");
    let response = broke.get("c", "/x").send().await.expect("answered");
    assert_eq!(response.destination().id(), "a-slow", "no budget, no hedge");
    assert_eq!(other.served(), 0);
}

/// Hedging at a percentile waits for what the cluster's recent answers say: while fewer than 16
/// are known, a call does not hedge (it times out on a slow destination and fails over); once
/// they are, a call on a destination that turned slow hedges after about the 90th percentile of
/// those answers and is answered by the other destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedging_at_a_percentile_follows_the_clusters_recent_latencies() {
    let (a, b) = (EchoServer::start("a").await, EchoServer::start("b").await);
    let engine = Engine::from_json(&ordered_config(&[("a", a.url(), 0), ("b", b.url(), 0)], ""))
        .expect("config");
    let client = HealthAwareClient::builder(engine)
        .http(http_client())
        .timeouts(Timeouts::default().attempt(ms(500)))
        .hedging(Hedging::at_percentile(90.0).max_share(1.0))
        .build()
        .expect("client");
    a.set_delay(Duration::from_secs(3));
    let response = client.get("c", "/x").send().await.expect("failed over");
    assert_eq!(response.destination().id(), "b");
    assert!(
        response.failed_attempts()[0].error.is_timeout(),
        "no percentile known yet, so no hedge"
    );
    drop(response);
    a.set_delay(Duration::ZERO);
    for _ in 0..20 {
        let response = client.get("c", "/x").send().await.expect("answered");
        assert_eq!(response.destination().id(), "a");
    }
    a.set_delay(Duration::from_secs(3));
    let started = Instant::now();
    let response = client.get("c", "/x").send().await.expect("hedged");
    assert_eq!(response.destination().id(), "b");
    assert!(
        response.failed_attempts().is_empty(),
        "hedged, not timed out"
    );
    assert!(started.elapsed() < ms(500), "{:?}", started.elapsed());
}

// ---- 13. the child-process harness ------------------------------------------------------------

/// The entry point of the child processes [`ChildBackend`] starts (this test binary, run again
/// with only this test): there it serves until killed. Run as an ordinary test, it checks the
/// harness the process tests rely on: a child answers with its name, SIGSTOP freezes it (a
/// request gets no answer) until SIGCONT, and SIGKILL makes its port refuse connections.
#[test]
fn child_backend_process() {
    run_child_backend_if_asked();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut child = ChildBackend::start("kid");
        let http = http_client();
        let url = format!("{}x", child.url());
        let get = || async { http.get(&url).send().await?.text().await };
        assert_eq!(get().await.expect("answers"), "kid");
        child.signal("STOP");
        assert!(
            tokio::time::timeout(ms(300), get()).await.is_err(),
            "a stopped child answered"
        );
        child.signal("CONT");
        assert_eq!(get().await.expect("answers again"), "kid");
        child.kill();
        // A fresh client: the old one's pooled connection would fail as closed, not refused.
        let err = http_client().get(&url).send().await.expect_err("killed");
        assert!(err.is_connect(), "{err:?}");
    });
}

// ---- 8. reqwest-middleware --------------------------------------------------------------------

#[cfg(feature = "middleware")]
mod middleware {
    use super::*;
    use healthpick::middleware::{
        client_error, CallTimeout, HealthPickMiddleware, NoHedging, Retryable,
    };
    use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

    fn client(engine: &Engine) -> ClientWithMiddleware {
        ClientBuilder::new(http_client())
            .with(HealthPickMiddleware::new(engine.clone()))
            .build()
    }

    async fn text(client: &ClientWithMiddleware, url: &str) -> reqwest_middleware::Result<String> {
        Ok(client.get(url).send().await?.text().await?)
    }

    #[tokio::test]
    async fn cluster_urls_are_routed_and_other_urls_left_alone() {
        let inside = Backend::start("inside").await.expect("backend");
        let outside = Backend::start("outside").await.expect("backend");
        let engine =
            Engine::from_json(&ordered_config(&[("inside", inside.url(), 0)], "")).unwrap();
        let client = client(&engine);

        assert_eq!(
            text(&client, "http://c/api/orders").await.unwrap(),
            "inside"
        );
        assert_eq!(
            text(&client, "http://C/api/orders?id=7").await.unwrap(),
            "inside"
        );
        assert_eq!(inside.served(), 2);

        let direct = format!("{}x", outside.url());
        assert_eq!(text(&client, &direct).await.unwrap(), "outside");
        assert_eq!(outside.served(), 1);
        assert_eq!(inside.served(), 2, "a non-cluster URL is not routed");
    }

    #[tokio::test]
    async fn failover_and_passive_ejection_work_through_the_middleware() {
        let live = Backend::start("b-live").await.expect("backend");
        let mut dead = Backend::start("a-dead").await.expect("backend");
        let bad = RawServer::start(Mode::Reset).await;
        let engine = Engine::from_json(&format!(
            r#"{{
            "HealthPolicies": {{ "MinimalTotalCountThreshold": 4 }},
            "Clusters": {{
              "f": {{ "Destinations": {{ {} }} }},
              "p": {{ "LoadBalancingPolicy": "FirstAlphabetical",
                     "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
                     "Destinations": {{ {} }} }} }} }}"#,
            destinations(&[("a-dead", dead.url(), 0), ("b-live", live.url(), 0)]),
            destinations(&[("a-bad", bad.url(), 0), ("b-live", live.url(), 0)]),
        ))
        .expect("config");
        let client = client(&engine);

        dead.kill();
        for _ in 0..20 {
            assert_eq!(
                text(&client, "http://f/api/orders").await.unwrap(),
                "b-live"
            );
        }

        for _ in 0..10 {
            assert_eq!(
                text(&client, "http://p/api/orders").await.unwrap(),
                "b-live"
            );
        }
        assert_eq!(bad.accepts(), 4, "ejected after 4 failed outcomes");
        let status = destination(&engine, "p", "a-bad");
        assert_eq!(status.passive, HealthState::Unhealthy, "{status:?}");
        assert_eq!(status.in_flight, 0);
    }

    #[tokio::test]
    async fn post_is_retried_only_with_the_retryable_extension() {
        let reset = RawServer::start(Mode::Reset).await;
        let echo = EchoServer::start("b-echo").await;
        let engine = Engine::from_json(&ordered_config(
            &[("a-reset", reset.url(), 0), ("b-echo", echo.url(), 0)],
            "",
        ))
        .unwrap();
        let client = client(&engine);
        let err = client
            .post("http://c/api/orders")
            .body("one")
            .send()
            .await
            .expect_err("not retried");
        let typed = client_error(&err).expect("healthpick's error");
        assert_eq!(tried(typed), ["a-reset"]);
        assert!(typed.reqwest_error().is_some(), "{typed:?}");
        assert_eq!((reset.accepts(), echo.served()), (1, 0));

        let response = client
            .post("http://c/api/orders")
            .body("two")
            .with_extension(Retryable)
            .send()
            .await
            .expect("retried");
        let seen: serde_json::Value =
            serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert_eq!(
            (seen["method"].as_str(), seen["body"].as_str()),
            (Some("POST"), Some("two"))
        );
        assert_eq!((reset.accepts(), echo.served()), (2, 1));
    }

    #[tokio::test]
    async fn destination_host_and_query_pass_through_the_middleware() {
        let echo = EchoServer::start("e").await;
        let engine = Engine::from_json(&format!(
            r#"{{ "Clusters": {{ "c": {{ "Destinations": {{
                "e": {{ "Address": "{}svc/", "Host": "orders.internal" }} }} }} }} }}"#,
            echo.url()
        ))
        .unwrap();
        let client = client(&engine);
        let body = client
            .get("http://c/api/orders?id=7")
            .header("host", "caller.example")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let seen: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(seen["path"], "/svc/api/orders");
        assert_eq!(seen["query"], "id=7");
        assert_eq!(seen["hosts"], serde_json::json!(["orders.internal"]));
    }

    /// The middleware counts like the wrapped client: connect failures of a retryable request
    /// are requeued (four dead destinations, then the live one), unless the policy says not to
    /// (three attempts, then the connect error); an unmarked POST is sent once.
    #[tokio::test]
    async fn connect_failures_are_requeued_through_the_middleware() {
        let (_ports, mut list) = closed_ports(4);
        let echo = EchoServer::start("x-echo").await;
        list.push(("x-echo".into(), echo.url()));
        let engine = Engine::from_json(&ordered_config(&tier0(&list), "")).unwrap();

        let client = client(&engine);
        let body = text(&client, "http://c/api/orders")
            .await
            .expect("requeued");
        let seen: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(seen["server"], "x-echo");
        assert_eq!(echo.served(), 1);

        let err = client
            .post("http://c/api/orders")
            .body("one")
            .send()
            .await
            .expect_err("an unmarked POST is not requeued");
        let typed = client_error(&err).expect("healthpick's error");
        assert!(typed.is_connect(), "{typed:?}");
        assert_eq!(tried(typed), ["a-dead"], "sent once, to a-dead only");
        assert_eq!(echo.served(), 1);
        let response = client
            .post("http://c/api/orders")
            .body("two")
            .with_extension(Retryable)
            .send()
            .await
            .expect("a marked POST is requeued");
        assert!(response.status().is_success());
        assert_eq!(echo.served(), 2);

        let strict = ClientBuilder::new(http_client())
            .with(HealthPickMiddleware::with_retry_policy(
                engine.clone(),
                RetryPolicy::default().requeue_connect_failures(false),
            ))
            .build();
        let err = text(&strict, "http://c/api/orders")
            .await
            .expect_err("three refused attempts");
        let typed = client_error(&err).expect("healthpick's error");
        assert!(typed.is_connect(), "{typed:?}");
        assert_eq!(tried(typed), ["a-dead", "b-dead", "c-dead"]);
        assert_eq!(
            typed.attempts()[2].url.as_str(),
            format!("{}api/orders", list[2].1),
            "the third attempt, on c-dead, is the last"
        );
        assert_eq!(echo.served(), 2);
    }

    /// When every destination was tried and failed, the caller gets healthpick's error naming
    /// every attempt (with the reqwest error of each), as from the wrapped client, and not "no
    /// available destinations" (which says nothing was sent). It is a `Middleware` error, which
    /// reqwest-retry's default strategy does not retry: the failover already did.
    #[tokio::test]
    async fn exhausted_failover_returns_every_attempt() {
        let reset = RawServer::start(Mode::Reset).await;
        let engine = Engine::from_json(&ordered_config(&[("only", reset.url(), 0)], "")).unwrap();
        let client = client(&engine);
        let err = client
            .get("http://c/api/orders")
            .send()
            .await
            .expect_err("the only destination resets");
        assert_eq!(reset.accepts(), 1);
        assert!(err.is_middleware(), "{err:?}");
        let typed = client_error(&err).expect("the error is a ClientError");
        assert!(!typed.is_no_available_destinations(), "{typed}");
        assert!(
            matches!(typed, ClientError::Request { cluster, .. } if cluster == "c"),
            "{typed:?}"
        );
        assert_eq!(tried(typed), ["only"]);
        assert!(typed.reqwest_error().is_some(), "{typed:?}");
        assert!(err.to_string().contains("only"), "{err}");
    }

    /// Whether `err` is healthpick's error for a call whose last attempt timed out; how long
    /// it had, when healthpick's own timer ended it.
    fn middleware_timeout(err: &reqwest_middleware::Error) -> Duration {
        let typed = client_error(err).unwrap_or_else(|| panic!("not healthpick's: {err:?}"));
        assert!(typed.is_timeout(), "{typed}");
        match &typed.attempts().last().expect("an attempt").error {
            AttemptError::TimedOut(had) => *had,
            other => panic!("not healthpick's timeout: {other:?}"),
        }
    }

    /// The middleware with its defaults gives the same guarantee as the client: a frozen
    /// destination holds no caller longer than the default attempt timeout plus a margin,
    /// retryable calls fail over, a POST is not retried, passive checks see the timeouts.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_frozen_destination_holds_callers_of_the_default_middleware_one_attempt_timeout() {
        let frozen = RawServer::start(Mode::Hang).await;
        let (b, c) = (EchoServer::start("b").await, EchoServer::start("c").await);
        let engine = Engine::from_json(&frozen_config(&frozen, &b, &c)).expect("config");
        let client = client(&engine);
        let started = Instant::now();
        let mut calls = JoinSet::new();
        for _ in 0..6 {
            let client = client.clone();
            calls.spawn(async move {
                let body = text(&client, "http://c/api/orders").await;
                (Instant::now(), body)
            });
        }
        let post = {
            let client = client.clone();
            tokio::spawn(async move {
                let result = client.post("http://c/api/orders").body("x").send().await;
                (Instant::now(), result.map(|r| r.status()))
            })
        };
        let bound = Timeouts::DEFAULT_ATTEMPT + Duration::from_secs(5);
        let results = tokio::time::timeout(bound + Duration::from_secs(5), async {
            let mut out = Vec::new();
            while let Some(done) = calls.join_next().await {
                out.push(done.expect("caller task"));
            }
            out
        })
        .await
        .expect("callers still waiting well past the attempt timeout");
        for (at, body) in results {
            let seen: serde_json::Value =
                serde_json::from_str(&body.expect("failed over")).expect("echo");
            assert_eq!(seen["server"], "b");
            assert!(at - started <= bound, "a caller waited {:?}", at - started);
        }
        let (at, post) = post.await.expect("post task");
        let err = post.expect_err("a POST is not retried");
        assert!(at - started <= bound);
        assert_eq!(middleware_timeout(&err), Timeouts::DEFAULT_ATTEMPT);
        assert_eq!(tried(client_error(&err).unwrap()), ["a-frozen"]);
        assert_eq!(b.served() + c.served(), 6);
        let status = destination(&engine, "c", "a-frozen");
        assert_eq!(status.passive, HealthState::Unhealthy, "{status:?}");
        assert_eq!(status.in_flight, 0);
    }

    /// Timeouts through the middleware, most specific first: reqwest's own per-request
    /// `timeout`, then the cluster's `HttpRequest:ActivityTimeout`, then the middleware's; the
    /// `CallTimeout` extension bounds the whole call. A body that stalls after the headers is cut
    /// by reqwest's timeout, which the middleware sets from the attempt's deadline.
    #[tokio::test]
    async fn timeouts_through_the_middleware() {
        let (h1, h2) = (
            RawServer::start(Mode::Hang).await,
            RawServer::start(Mode::Hang).await,
        );
        let stalling = RawServer::start(Mode::StallBody).await;
        let engine = Engine::from_json(&format!(
            r#"{{ "Clusters": {{
            "plain": {{ "Destinations": {{ "p": {{ "Address": "{}" }} }} }},
            "stall": {{ "Destinations": {{ "s": {{ "Address": "{}" }} }} }},
            "slow": {{ "HttpRequest": {{ "ActivityTimeout": "00:00:00.2" }},
                       "Destinations": {{ "s": {{ "Address": "{}" }} }} }} }} }}"#,
            h1.url(),
            stalling.url(),
            h2.url()
        ))
        .expect("config");
        let client = ClientBuilder::new(http_client())
            .with(
                HealthPickMiddleware::builder(engine)
                    .timeouts(
                        Timeouts::default()
                            .attempt(ms(400))
                            .call(Duration::from_secs(5)),
                    )
                    .build(),
            )
            .build();
        let err = client.get("http://plain/x").send().await.unwrap_err();
        assert_eq!(middleware_timeout(&err), ms(400), "the middleware's");
        let err = client.get("http://slow/x").send().await.unwrap_err();
        assert_eq!(middleware_timeout(&err), ms(200), "the cluster's");
        let err = client
            .get("http://slow/x")
            .timeout(ms(100))
            .send()
            .await
            .unwrap_err();
        assert_eq!(middleware_timeout(&err), ms(100), "the request's");
        let err = client
            .get("http://plain/x")
            .with_extension(CallTimeout(ms(150)))
            .send()
            .await
            .unwrap_err();
        assert_eq!(middleware_timeout(&err), ms(150), "the call's");

        let started = Instant::now();
        let response = client.get("http://stall/x").send().await.expect("headers");
        let err = response.text().await.expect_err("the body stalls");
        assert!(err.is_timeout(), "{err:?}");
        let took = started.elapsed();
        assert!(took >= ms(390) && took < ms(2000), "{took:?}");
    }

    /// As with the client: no 503 of one destination in three reaches callers of retryable
    /// requests through the middleware; non-retryable POSTs that land there get it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_503_from_one_of_three_never_reaches_retryable_callers_through_the_middleware() {
        let bad = RawServer::start(Mode::Status(503)).await;
        let (b, c) = (EchoServer::start("b").await, EchoServer::start("c").await);
        let engine = Engine::from_json(&format!(
            r#"{{ "Clusters": {{ "c": {{ "Destinations": {{ {} }} }} }} }}"#,
            destinations(&[
                ("a-503", bad.url(), 0),
                ("b", b.url(), 0),
                ("c", c.url(), 0)
            ])
        ))
        .expect("config");
        let client = client(&engine);
        for _ in 0..120 {
            let response = client
                .get("http://c/api/orders")
                .send()
                .await
                .expect("answered");
            assert_eq!(response.status(), 200);
        }
        let gets = bad.hits().iter().filter(|h| h.method == "GET").count();
        assert!(gets > 0, "no call landed on a-503: the test proves nothing");
        assert_eq!(b.served() + c.served(), 120);
        let mut got_503 = 0;
        for _ in 0..60 {
            let response = client
                .post("http://c/api/orders")
                .body("x")
                .send()
                .await
                .expect("answered");
            got_503 += usize::from(response.status() == 503);
        }
        assert!(got_503 > 0, "no POST landed on a-503");
        let posts = bad.hits().iter().filter(|h| h.method == "POST").count();
        assert_eq!(posts, got_503, "POSTs are not retried");
        assert_eq!(b.served() + c.served(), 120 + 60 - got_503 as u64);
        assert_eq!(destination(&engine, "c", "a-503").in_flight, 0);
    }

    /// Tier 0 as three child processes killed 2 s after the first request, through the
    /// middleware: no caller sees an error.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn killing_every_tier0_process_costs_no_error_through_the_middleware() {
        let mut tier0: Vec<ChildBackend> = ["t0-a", "t0-b", "t0-c"]
            .into_iter()
            .map(ChildBackend::start)
            .collect();
        let tier1 = [
            Backend::start("t1-a").await.expect("backend"),
            Backend::start("t1-b").await.expect("backend"),
        ];
        let mut list: Vec<_> = ["t0-a", "t0-b", "t0-c"]
            .iter()
            .zip(&tier0)
            .map(|(id, c)| (*id, c.url().to_string(), 0))
            .collect();
        list.extend([("t1-a", tier1[0].url(), 1), ("t1-b", tier1[1].url(), 1)]);
        let engine = Engine::from_json(&format!(
            r#"{{ "Clusters": {{ "c": {{ "Destinations": {{ {} }} }} }} }}"#,
            destinations(&list)
        ))
        .expect("config");
        let client = client(&engine);
        let load = Load::start_with(8, usize::MAX, move || {
            let client = client.clone();
            async move {
                let body = text(&client, "http://c/api/orders")
                    .await
                    .map_err(|e| format!("{e:?}"))?;
                Ok(Answer {
                    at: Instant::now(),
                    destination: body,
                    failed_on: Vec::new(),
                })
            }
        });
        load.wait_for_more(1).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let killing = Instant::now();
        for child in &mut tier0 {
            child.kill();
        }
        let killed_at = Instant::now();
        load.wait_for_more(1000).await;
        load.stop();
        let (answers, errors) = load.finish().await;
        assert!(
            errors.is_empty(),
            "{} caller-visible errors among {} calls, the first: {:?}",
            errors.len(),
            errors.len() + answers.len(),
            errors.first()
        );
        assert!(answers
            .iter()
            .filter(|a| a.at < killing)
            .all(|a| a.destination.starts_with("t0")));
        let after: Vec<_> = answers
            .iter()
            .filter(|a| a.at > killed_at + ms(100))
            .collect();
        assert!(after.len() >= 500, "{}", after.len());
        assert!(after.iter().all(|a| a.destination.starts_with("t1")));
    }

    /// Everything dead, through the middleware: calls fail fast with healthpick's error naming
    /// the destinations tried (all five for the first calls), within the same budget bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_destination_dead_through_the_middleware_stays_within_the_budget() {
        let names = ["t0-a", "t0-b", "t1-a", "t1-b", "t2-a"];
        let mut children: Vec<ChildBackend> = names.into_iter().map(ChildBackend::start).collect();
        let list: Vec<_> = names
            .iter()
            .zip(&children)
            .map(|(id, c)| (*id, c.url().to_string(), (id.as_bytes()[1] - b'0') as u32))
            .collect();
        let engine = Engine::from_json(&format!(
            r#"{{ "Clusters": {{ "c": {{ "Destinations": {{ {} }} }} }} }}"#,
            destinations(&list)
        ))
        .expect("config");
        let client = client(&engine);
        const WARM: usize = 20;
        for _ in 0..WARM {
            text(&client, "http://c/api/orders").await.expect("alive");
        }
        for child in &mut children {
            child.kill();
        }
        const CALLS: usize = 300;
        let started = Instant::now();
        let mut attempts = 0;
        for i in 0..CALLS {
            let err = text(&client, "http://c/api/orders")
                .await
                .expect_err("everything is dead");
            let typed = client_error(&err).expect("healthpick's error");
            assert!(
                typed.attempts().iter().all(|a| a.error.is_connect()),
                "{typed}"
            );
            if i == 0 {
                let tried = tried(typed);
                let tiers: Vec<u8> = tried.iter().map(|id| id.as_bytes()[1]).collect();
                assert_eq!(
                    tiers, b"00112",
                    "every destination, in tier order: {tried:?}"
                );
            }
            attempts += typed.attempts().len();
        }
        assert!(started.elapsed() < Duration::from_secs(10));
        let extra = attempts - CALLS;
        let bound = 100 + (WARM + CALLS) / 5 + 1;
        assert!(extra <= bound, "{extra} extra attempts, bound {bound}");
        assert!(extra >= 100, "the budget's reserve was not used: {extra}");
    }

    /// Hedging through the middleware, set on the middleware or per request (the `Hedging`
    /// extension; `NoHedging` turns it off): a slow destination's calls are answered by the
    /// other, and the lost attempt is cancelled, not failed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hedging_through_the_middleware() {
        let slow = EchoServer::start("a-slow").await;
        slow.set_delay(Duration::from_secs(5));
        let fast = EchoServer::start("b-fast").await;
        let engine = Engine::from_json(&format!(
            r#"{{
            "HealthPolicies": {{ "MinimalTotalCountThreshold": 4 }},
            "Clusters": {{ "c": {{
                "LoadBalancingPolicy": "FirstAlphabetical",
                "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
                "Destinations": {{ {} }} }} }} }}"#,
            destinations(&[("a-slow", slow.url(), 0), ("b-fast", fast.url(), 0)])
        ))
        .expect("config");
        let hedged = ClientBuilder::new(http_client())
            .with(
                HealthPickMiddleware::builder(engine.clone())
                    .hedging(Hedging::after(ms(50)).max_share(1.0))
                    .build(),
            )
            .build();
        let plain = client(&engine);
        for i in 0..10 {
            let body = text(&hedged, "http://c/x").await.expect("hedged");
            let seen: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(seen["server"], "b-fast", "call {i}");
            let body = plain
                .get("http://c/x")
                .with_extension(Hedging::after(ms(50)).max_share(1.0))
                .send()
                .await
                .expect("hedged per request")
                .text()
                .await
                .unwrap();
            let seen: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(seen["server"], "b-fast", "call {i}");
        }
        assert_eq!((slow.served(), fast.served()), (20, 20));
        let status = destination(&engine, "c", "a-slow");
        assert_eq!(status.passive, HealthState::Healthy, "{status:?}");
        assert_eq!(status.in_flight, 0);
        let response = hedged
            .get("http://c/x")
            .with_extension(NoHedging)
            .timeout(ms(200))
            .send()
            .await
            .expect("failed over after the timeout");
        assert_eq!(response.status(), 200);
        assert_eq!(fast.served(), 21);
        assert_eq!(slow.served(), 21);
    }

    /// With strict routing, a host that looks like a cluster id but names none is an error
    /// (nothing is sent, no DNS lookup); hosts with dots, IP addresses and `localhost` pass
    /// through, and clusters are routed as ever.
    #[tokio::test]
    async fn strict_routing_refuses_unknown_cluster_like_hosts() {
        let inside = Backend::start("inside").await.expect("backend");
        let outside = Backend::start("outside").await.expect("backend");
        let engine =
            Engine::from_json(&ordered_config(&[("inside", inside.url(), 0)], "")).unwrap();
        let strict = ClientBuilder::new(http_client())
            .with(
                HealthPickMiddleware::builder(engine)
                    .strict_routing(true)
                    .build(),
            )
            .build();
        let err = text(&strict, "http://paymnts/api/orders")
            .await
            .expect_err("not a cluster");
        let typed = client_error(&err).expect("healthpick's error");
        assert!(typed.is_unknown_cluster(), "{typed:?}");
        assert_eq!(typed.cluster(), Some("paymnts"));
        assert_eq!(text(&strict, "http://c/x").await.unwrap(), "inside");
        assert_eq!(
            text(&strict, &format!("{}x", outside.url())).await.unwrap(),
            "outside"
        );
        let port = addr_of(&outside.url()).port();
        assert_eq!(
            text(&strict, &format!("http://localhost:{port}/x"))
                .await
                .unwrap(),
            "outside"
        );
        assert_eq!((inside.served(), outside.served()), (1, 2));
        let closed = ClosedPort::reserve();
        let err = text(&strict, &format!("{}x", closed.url()))
            .await
            .expect_err("refused, not routed");
        assert!(client_error(&err).is_none() && err.is_connect(), "{err:?}");
    }
}

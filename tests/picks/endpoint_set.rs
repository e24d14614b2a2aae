//! The endpoint set, the simple face, against real servers: builder defaults, preferred
//! URLs in tier 0 with failover and return, `refresh()`, `best_endpoints()`, the first pick's
//! refresh and the background refresh job.
//!
//! Real sockets, so the real clock: short intervals, conditions polled with deadlines.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{
    AffinityPolicy, LoadSignalsConfig, SessionAffinityConfig, SlowStartConfig, SpillMode,
    TierSpillConfig,
};
use healthpick::probe::PROBE_USER_AGENT;
use healthpick::{EndpointSet, HealthClass, HealthState, ReportedHealth};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::support::faulty_servers::ClosedPort;
use crate::support::logging::CapturedOutput;
use crate::support::servers::{HttpServer, Reply};
use crate::support::status::destination;
use crate::support::waits::{eventually, ms, within};

const DEADLINE: Duration = Duration::from_secs(5);

const HEALTHY: u8 = 0;
const DEGRADED: u8 = 1;
const FAILING: u8 = 2;

/// A server whose health answer follows `mode`: Healthy payload, Degraded payload, or 503.
async fn switchable(mode: Arc<AtomicU8>) -> HttpServer {
    HttpServer::start(move |_| match mode.load(Ordering::SeqCst) {
        HEALTHY => Reply::payload("Healthy"),
        DEGRADED => Reply::payload("Degraded"),
        _ => Reply::status(503),
    })
    .await
}

fn mode(m: u8) -> Arc<AtomicU8> {
    Arc::new(AtomicU8::new(m))
}

/// Picks `n` times and returns the distinct base URLs picked, sorted.
async fn picked(set: &EndpointSet, n: usize) -> Vec<String> {
    let mut urls = Vec::new();
    for _ in 0..n {
        let pick = set.pick_endpoint().await.unwrap();
        let id = pick.destination().id().to_string();
        if !urls.contains(&id) {
            urls.push(id);
        }
    }
    urls.sort();
    urls
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[tokio::test]
async fn builder_defaults_probe_the_system_status_path_with_random_and_threshold_two() {
    let server = HttpServer::start(|_| Reply::status(503)).await;
    let set = EndpointSet::builder([server.url()]).build().unwrap();
    let engine = set.engine();
    assert_eq!(engine.cluster_ids(), [EndpointSet::CLUSTER]);
    let status = engine.status();
    let cluster = status.cluster(EndpointSet::CLUSTER).unwrap();
    assert_eq!(cluster.load_balancing_policy, "Random");
    assert!(cluster.active_enabled);
    assert_eq!(cluster.destinations.len(), 1);
    assert_eq!(
        cluster.destinations[0].tier, 0,
        "no preferred URLs: all tier 0"
    );

    set.refresh().await;
    let seen = server.recorder().requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].path, "/api/systemstatus");
    assert_eq!(seen[0].header("user-agent"), Some(PROBE_USER_AGENT));

    // Default threshold 2: one failure keeps Unknown, the second ejects.
    let id = server.url();
    assert_eq!(
        destination(engine, EndpointSet::CLUSTER, &id).active,
        HealthState::Unknown
    );
    set.refresh().await;
    assert_eq!(
        destination(engine, EndpointSet::CLUSTER, &id).active,
        HealthState::Unhealthy
    );
    assert_eq!(server.count(), 2);
}

#[tokio::test]
async fn the_health_path_is_appended_to_the_base_path() {
    let server = HttpServer::start(|_| Reply::payload("Healthy")).await;
    let set = EndpointSet::builder([server.url_for("/svc/")])
        .health_path("/healthz")
        .build()
        .unwrap();
    set.refresh().await;
    assert_eq!(server.recorder().count_path("/svc/healthz"), 1);
    assert_eq!(server.count(), 1);
}

#[tokio::test]
async fn preferred_urls_take_the_traffic_fail_over_to_the_others_and_come_back() {
    let preferred_mode = mode(HEALTHY);
    let p1 = switchable(preferred_mode.clone()).await;
    let p2 = switchable(preferred_mode.clone()).await;
    let other = switchable(mode(HEALTHY)).await;
    let set = EndpointSet::builder([p1.url(), other.url(), p2.url()])
        .preferred_base_urls([p1.url(), p2.url()])
        .build()
        .unwrap();
    let engine = set.engine();
    let status = engine.status();
    let cluster = status.cluster(EndpointSet::CLUSTER).unwrap();
    assert_eq!(cluster.destination(&p1.url()).unwrap().tier, 0);
    assert_eq!(cluster.destination(&p2.url()).unwrap().tier, 0);
    assert_eq!(cluster.destination(&other.url()).unwrap().tier, 1);

    set.refresh().await;
    let preferred = sorted(vec![p1.url(), p2.url()]);
    // Random over the two preferred URLs: both show up in 100 picks (2^-99 chance otherwise).
    assert_eq!(picked(&set, 100).await, preferred);
    let best = set.best_endpoints().unwrap();
    assert_eq!(best.status, HealthClass::Healthy);
    assert_eq!(best.destinations.len(), 2);

    // Both preferred go down: after `threshold` (2) refreshes they are ejected. After the first
    // they are still Healthy (ConsecutiveFailures as in YARP), but suspects: their latest probe
    // failed, so they rank with Degraded and traffic already fails over to tier 1.
    preferred_mode.store(FAILING, Ordering::SeqCst);
    set.refresh().await;
    assert_eq!(
        destination(engine, EndpointSet::CLUSTER, &p1.url()).active,
        HealthState::Healthy,
        "ejected before the threshold"
    );
    assert_eq!(picked(&set, 20).await, [other.url()], "suspects got picks");
    set.refresh().await;
    assert_eq!(picked(&set, 50).await, [other.url()]);
    let best = set.best_endpoints().unwrap();
    assert_eq!(best.status, HealthClass::Healthy);
    assert!(!best.panic);
    assert_eq!(
        destination(engine, EndpointSet::CLUSTER, &p1.url()).active,
        HealthState::Unhealthy
    );

    // They come back: one good refresh and the traffic returns to tier 0.
    preferred_mode.store(HEALTHY, Ordering::SeqCst);
    set.refresh().await;
    assert_eq!(picked(&set, 100).await, preferred);
}

#[tokio::test]
async fn a_preferred_url_missing_from_the_base_urls_is_added_in_tier_0() {
    let other = switchable(mode(HEALTHY)).await;
    let extra = switchable(mode(HEALTHY)).await;
    let set = EndpointSet::builder([other.url()])
        .preferred_base_urls([extra.url()])
        .build()
        .unwrap();
    let status = set.engine().status();
    let cluster = status.cluster(EndpointSet::CLUSTER).unwrap();
    assert_eq!(cluster.destinations.len(), 2);
    assert_eq!(cluster.destination(&extra.url()).unwrap().tier, 0);
    assert_eq!(cluster.destination(&other.url()).unwrap().tier, 1);
    set.refresh().await;
    assert_eq!(picked(&set, 20).await, [extra.url()]);
}

#[tokio::test]
async fn refresh_counts_failures_toward_the_threshold_and_keeps_the_error_text() {
    let erroring = HttpServer::start(|_| Reply::status(500)).await;
    let closed = ClosedPort::reserve();
    let refused = closed.url();
    let set = EndpointSet::builder([erroring.url(), refused.clone()])
        .health_check_timeout(ms(2000))
        .build()
        .unwrap();
    let engine = set.engine();

    set.refresh().await;
    let e = destination(engine, EndpointSet::CLUSTER, &erroring.url());
    assert_eq!(
        e.active,
        HealthState::Unknown,
        "threshold 2: one failure is not enough"
    );
    assert_eq!(e.last_error.as_deref(), Some("HTTP 500"));
    let r = destination(engine, EndpointSet::CLUSTER, &refused);
    assert_eq!(r.active, HealthState::Unknown);
    let error = r.last_error.unwrap().to_lowercase();
    assert!(error.contains("refused"), "{error}");

    set.refresh().await;
    for id in [erroring.url(), refused.clone()] {
        let d = destination(engine, EndpointSet::CLUSTER, &id);
        assert_eq!(d.active, HealthState::Unhealthy, "{id}");
        let reason = d.last_reason.unwrap();
        assert!(reason.contains("2 consecutive failures"), "{reason}");
    }
    // Nothing healthy: HealthyOrPanic lets everything through, summary Unhealthy.
    let best = set.best_endpoints().unwrap();
    assert_eq!(best.status, HealthClass::Unhealthy);
    assert!(best.panic);
    assert_eq!(best.destinations.len(), 2);
}

#[tokio::test]
async fn best_endpoints_summarises_the_best_class_present() {
    let a_mode = mode(HEALTHY);
    let b_mode = mode(DEGRADED);
    let a = switchable(a_mode.clone()).await;
    let b = switchable(b_mode.clone()).await;
    let set = EndpointSet::builder([a.url(), b.url()])
        .failure_threshold(1.0)
        .build()
        .unwrap();

    set.refresh().await;
    let best = set.best_endpoints().unwrap();
    assert_eq!(best.status, HealthClass::Healthy);
    assert_eq!(best.destinations.len(), 1);
    assert_eq!(best.destinations[0].id(), a.url());
    assert_eq!(
        destination(set.engine(), EndpointSet::CLUSTER, &b.url()).reported,
        Some(ReportedHealth::Degraded)
    );

    a_mode.store(DEGRADED, Ordering::SeqCst);
    set.refresh().await;
    let best = set.best_endpoints().unwrap();
    assert_eq!(best.status, HealthClass::Degraded);
    assert_eq!(best.destinations.len(), 2);
    assert!(!best.panic);

    a_mode.store(FAILING, Ordering::SeqCst);
    b_mode.store(FAILING, Ordering::SeqCst);
    set.refresh().await;
    let best = set.best_endpoints().unwrap();
    assert_eq!(best.status, HealthClass::Unhealthy);
    assert!(best.panic);

    b_mode.store(HEALTHY, Ordering::SeqCst);
    set.refresh().await;
    let best = set.best_endpoints().unwrap();
    assert_eq!(best.status, HealthClass::Healthy);
    assert_eq!(best.destinations[0].id(), b.url());
}

#[tokio::test]
async fn the_first_pick_refreshes_first_when_nothing_is_known() {
    let preferred = HttpServer::start(|_| Reply::status(500)).await;
    let other = HttpServer::start(|_| Reply::payload("Healthy")).await;
    let set = EndpointSet::builder([preferred.url(), other.url()])
        .preferred_base_urls([preferred.url()])
        .failure_threshold(1.0)
        .build()
        .unwrap();
    assert_eq!(preferred.count() + other.count(), 0);

    // Blind, the preferred URL would win (Unknown ranks with Healthy, tier 0 first).
    let pick = set.pick_endpoint().await.unwrap();
    assert_eq!(preferred.count(), 1, "the pick did not refresh first");
    assert_eq!(other.count(), 1, "the pick did not refresh first");
    assert_eq!(pick.destination().id(), other.url());
    drop(pick);

    // Known now: later picks do not probe.
    for _ in 0..10 {
        assert_eq!(
            set.pick_endpoint().await.unwrap().destination().id(),
            other.url()
        );
    }
    assert_eq!(preferred.count() + other.count(), 2);
}

#[tokio::test]
async fn the_refresh_job_refreshes_every_interval_and_survives_errors() {
    // Answers: 500, 500, no answer within the timeout, then healthy.
    let n = Arc::new(AtomicUsize::new(0));
    let counter = n.clone();
    let flaky = HttpServer::start(move |_| match counter.fetch_add(1, Ordering::SeqCst) {
        0 | 1 => Reply::status(500),
        2 => Reply::payload("Healthy").delay(ms(1000)),
        _ => Reply::payload("Healthy"),
    })
    .await;
    let closed = ClosedPort::reserve();
    let refused = closed.url();
    let set = EndpointSet::builder([flaky.url(), refused.clone()])
        .health_check_interval(ms(100))
        .health_check_timeout(ms(200))
        .build()
        .unwrap();
    let job = set.spawn_refresh();

    eventually("six refreshes", DEADLINE, || {
        (flaky.count() >= 6).then_some(())
    })
    .await;
    let arrivals = flaky.recorder().arrivals();
    for (i, pair) in arrivals.windows(2).enumerate() {
        let gap = pair[1] - pair[0];
        // Interval counted after each refresh ends; the timed-out one took 200 ms more.
        let least = if i == 2 { ms(290) } else { ms(95) };
        assert!(
            gap >= least,
            "refresh {} came {gap:?} after the previous",
            i + 1
        );
        assert!(
            gap < ms(1000),
            "refresh {} came {gap:?} after the previous",
            i + 1
        );
    }
    let engine = set.engine();
    let f = eventually("the flaky URL healthy again", DEADLINE, || {
        let d = destination(engine, EndpointSet::CLUSTER, &flaky.url());
        (d.active == HealthState::Healthy).then_some(d)
    })
    .await;
    assert_eq!(f.reported, Some(ReportedHealth::Healthy));
    let r = destination(engine, EndpointSet::CLUSTER, &refused);
    assert_eq!(r.active, HealthState::Unhealthy);
    assert!(r.last_error.is_some());
    assert_eq!(
        set.pick_endpoint().await.unwrap().destination().id(),
        flaky.url()
    );
    job.stop().await;
}

#[tokio::test]
async fn the_refresh_job_stops_when_its_handle_is_dropped() {
    let server = HttpServer::start(|_| Reply::payload("Healthy")).await;
    let set = EndpointSet::builder([server.url()])
        .health_check_interval(ms(80))
        .build()
        .unwrap();
    let job = set.spawn_refresh();
    eventually("two refreshes", DEADLINE, || {
        (server.count() >= 2).then_some(())
    })
    .await;
    drop(job);
    tokio::time::sleep(ms(50)).await;
    let after = server.count();
    tokio::time::sleep(ms(400)).await; // five intervals
    assert_eq!(
        server.count(),
        after,
        "refreshes after the handle was dropped"
    );
}

#[tokio::test]
async fn the_refresh_job_stops_when_its_token_fires() {
    let server = HttpServer::start(|_| Reply::payload("Healthy")).await;
    let set = EndpointSet::builder([server.url()])
        .health_check_interval(ms(80))
        .build()
        .unwrap();
    let token = CancellationToken::new();
    let job = set.spawn_refresh_with(token.clone());
    eventually("two refreshes", DEADLINE, || {
        (server.count() >= 2).then_some(())
    })
    .await;
    token.cancel();
    tokio::time::sleep(ms(50)).await;
    let after = server.count();
    tokio::time::sleep(ms(400)).await;
    assert_eq!(server.count(), after, "refreshes after the token fired");
    drop(job);
}

#[tokio::test]
async fn stopping_the_refresh_job_cancels_a_refresh_in_flight() {
    let server = HttpServer::start(|_| Reply::payload("Healthy").delay(ms(400))).await;
    let set = EndpointSet::builder([server.url()])
        .health_check_interval(ms(50))
        .build()
        .unwrap();
    let job = set.spawn_refresh();
    eventually("a refresh in flight", DEADLINE, || {
        (server.recorder().in_flight() == 1).then_some(())
    })
    .await;
    let stopping = Instant::now();
    within("stop", DEADLINE, job.stop()).await;
    assert!(stopping.elapsed() < ms(300), "stop waited for the probe");
    tokio::time::sleep(ms(600)).await;
    let d = destination(set.engine(), EndpointSet::CLUSTER, &server.url());
    assert_eq!(d.last_probe, None, "a refresh finished after stop()");
    assert_eq!(server.count(), 1);
}

#[tokio::test]
async fn failed_probes_are_logged_at_the_configured_level() {
    let failing = HttpServer::start(|_| Reply::status(503)).await;
    let healthy = HttpServer::start(|_| Reply::payload("Healthy")).await;
    let captured = CapturedOutput::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    // The test runs on one thread (current-thread runtime), so a thread-local default sees
    // everything the refresh logs.
    let _guard = tracing::subscriber::set_default(subscriber);

    let set = EndpointSet::builder([failing.url(), healthy.url()])
        .failure_log_level(tracing::Level::ERROR)
        .build()
        .unwrap();
    set.refresh().await;
    let logged = captured.lines("health probe failed");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(logged[0].contains("ERROR"), "{}", logged[0]);
    assert!(logged[0].contains("HTTP 503"), "{}", logged[0]);
    assert!(logged[0].contains(&failing.url()), "{}", logged[0]);

    // Below the subscriber's level: not logged.
    let quiet = EndpointSet::builder([failing.url()])
        .failure_log_level(tracing::Level::DEBUG)
        .build()
        .unwrap();
    quiet.refresh().await;
    assert_eq!(captured.lines("health probe failed").len(), 1);
}

/// Fifty picks arriving together before anything is known share one probe round: each base URL
/// is probed once, not once per pick (single flight).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_picks_share_one_probe_round() {
    let a = HttpServer::start(|_| Reply::payload("Healthy").delay(ms(10))).await;
    let b = HttpServer::start(|_| Reply::payload("Healthy").delay(ms(10))).await;
    let set = EndpointSet::builder([a.url(), b.url()]).build().unwrap();
    let mut picks = tokio::task::JoinSet::new();
    // The picks arrive over the whole round, also while finished probes are being reported
    // (when a second round would see nothing in flight): whatever the timing, one round.
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_micros(300)).await;
        let set = set.clone();
        picks.spawn(async move {
            set.pick_endpoint()
                .await
                .map(|p| p.destination().id().to_string())
        });
    }
    while let Some(picked) = picks.join_next().await {
        let picked = picked.unwrap().unwrap();
        assert!(picked == a.url() || picked == b.url(), "{picked}");
    }
    // The round that answered the picks is over once both probes were seen.
    eventually("both probes", DEADLINE, || {
        (a.count() + b.count() >= 2).then_some(())
    })
    .await;
    assert!(set.engine().first_round_done(EndpointSet::CLUSTER));
    assert_eq!(
        (a.count(), b.count()),
        (1, 1),
        "one probe per base URL for fifty first picks"
    );
}

/// Builder errors name the builder's settings, not the YARP key paths of the cluster behind it.
#[test]
fn builder_errors_name_the_builder_settings() {
    let error = EndpointSet::builder(["not a url", "http://10.0.0.1:8080"])
        .health_check_interval(Duration::ZERO)
        .health_check_timeout(Duration::ZERO)
        .load_balancing_policy("Fastest")
        .build()
        .expect_err("bad settings");
    let paths: Vec<&str> = error.errors.iter().map(|d| d.path.as_str()).collect();
    for expected in [
        "base_urls[not a url]",
        "health_check_interval",
        "health_check_timeout",
        "load_balancing_policy",
    ] {
        assert!(
            paths.contains(&expected),
            "{expected} missing from {paths:?}"
        );
    }
    assert!(
        paths.iter().all(|p| !p.contains("Clusters:")),
        "a YARP path leaked: {paths:?}"
    );
}

/// With passive checks on, an endpoint whose requests keep failing at the transport level is
/// left (passive Unhealthy) while probes still call it healthy.
#[tokio::test]
async fn passive_checks_leave_an_endpoint_whose_requests_fail() {
    use healthpick::config::PassiveHealthCheckConfig;
    use healthpick::RequestOutcome;
    let a = HttpServer::start(|_| Reply::payload("Healthy")).await;
    let b = HttpServer::start(|_| Reply::payload("Healthy")).await;
    let set = EndpointSet::builder([a.url(), b.url()])
        .passive_health_checks(PassiveHealthCheckConfig::enabled())
        .build()
        .unwrap();
    set.refresh().await;
    let engine = set.engine();
    for _ in 0..20 {
        engine
            .report_outcome(
                EndpointSet::CLUSTER,
                &a.url(),
                RequestOutcome::TransportFailure,
            )
            .unwrap();
    }
    let status = destination(engine, EndpointSet::CLUSTER, &a.url());
    assert_eq!(status.passive, HealthState::Unhealthy, "{status:?}");
    assert_eq!(status.active, HealthState::Healthy);
    assert_eq!(picked(&set, 20).await, [b.url()]);
}

/// With session affinity on, a key picked through the set stays on one endpoint, and keys
/// spread over the endpoints; an unkeyed pick still balances.
#[tokio::test]
async fn keyed_picks_of_a_set_stay_on_one_endpoint() {
    let mut servers = Vec::new();
    for _ in 0..4 {
        servers.push(HttpServer::start(|_| Reply::payload("Healthy")).await);
    }
    let set = EndpointSet::builder(servers.iter().map(|s| s.url()))
        .session_affinity(SessionAffinityConfig::new(AffinityPolicy::CustomHeader))
        .build()
        .unwrap();
    // Every endpoint probed first: a pick during the first probes takes the first to answer.
    set.refresh().await;
    let mut homes = Vec::new();
    for key in 0..40 {
        let key = format!("cart-{key}");
        // Each handle dropped at once: a key's endpoint holding requests may pass its bound.
        let first = set.pick_endpoint_for_key(&key).await.unwrap();
        let home = first.destination().id().to_string();
        drop(first);
        for _ in 0..5 {
            let again = set.pick_endpoint_for_key(&key).await.unwrap();
            assert_eq!(again.destination().id(), home, "{key}");
        }
        if !homes.contains(&home) {
            homes.push(home);
        }
    }
    assert_eq!(homes.len(), 4, "40 keys over 4 endpoints: {homes:?}");
    assert_eq!(picked(&set, 200).await.len(), 4);
}

/// Tier spill, slow start and load signals set on the builder reach the set's cluster: under
/// `Load` the status shows where spill stands; their bad values are named by builder method.
#[tokio::test]
async fn the_builder_sets_traffic_shaping_and_names_its_errors() {
    let (local, remote) = (
        HttpServer::start(|_| Reply::payload("Healthy")).await,
        HttpServer::start(|_| Reply::payload("Healthy")).await,
    );
    let spill = TierSpillConfig::default().mode(SpillMode::Load);
    let set = EndpointSet::builder([local.url(), remote.url()])
        .preferred_base_urls([local.url()])
        .load_balancing_policy("PeakEwma")
        .tier_spill(spill.clone())
        .slow_start(SlowStartConfig::new(Duration::from_secs(30)))
        .build()
        .unwrap();
    set.refresh().await;
    let status = set.engine().status();
    let spill_status = status.clusters[0].spill.as_ref().expect("spill under Load");
    assert_eq!((spill_status.from_tier, spill_status.to_tier), (0, 1));
    assert_eq!(spill_status.share, 0.0);
    assert_eq!(picked(&set, 50).await, vec![local.url()]);

    let error = EndpointSet::builder([local.url()])
        .tier_spill(spill.upper_mark(1.1))
        .slow_start(SlowStartConfig::new(Duration::ZERO))
        .load_signals(LoadSignalsConfig::default().decay_time(Duration::ZERO))
        .build()
        .expect_err("bad settings");
    let paths: Vec<&str> = error.errors.iter().map(|d| d.path.as_str()).collect();
    for expected in [
        "tier_spill (UpperMark)",
        "slow_start (Window)",
        "load_signals (DecayTime)",
    ] {
        assert!(
            paths.contains(&expected),
            "{expected} missing from {paths:?}"
        );
    }
}

//! Active health checks against real servers: what a probe sends, how
//! each kind of answer is judged, when rounds run, how the monitor follows reloads and stops, the
//! first-pick warm-up, draining end to end and one round over a thousand destinations.
//!
//! Real sockets and tokio's paused clock do not mix (paused time auto-advances while real I/O is
//! pending and fires probe timeouts early), so these tests run on the real clock with short
//! intervals, wait for conditions with deadlines, and bound every wait.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig,
    CONSECUTIVE_FAILURES_THRESHOLD_KEY,
};
use healthpick::monitor::ActiveMonitor;
use healthpick::probe::{
    DefaultProbeRequestFactory, ProbeRequest, ProbeRequestFactory, PROBE_USER_AGENT,
};
use healthpick::{Destination, Engine, HealthClass, HealthState, ReportedHealth};
use reqwest::header::HeaderValue;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::support::backend::Backend;
use crate::support::faulty_servers::{ClosedPort, Mode, RawServer};
use crate::support::logging::init_tracing;
use crate::support::servers::{HttpServer, Recorder, Reply};
use crate::support::status::{destination, next_round};
use crate::support::waits::{eventually, ms, within};

const HOUR: Duration = Duration::from_secs(3600);
const DEADLINE: Duration = Duration::from_secs(5);

/// A cluster with active checks every `interval`, probe timeout `timeout` and a ConsecutiveFailures
/// threshold.
fn active_cluster(
    id: &str,
    interval: Duration,
    timeout: Duration,
    threshold: u32,
) -> ClusterConfig {
    ClusterConfig::new(id)
        .metadata(CONSECUTIVE_FAILURES_THRESHOLD_KEY, threshold.to_string())
        .active(
            ActiveHealthCheckConfig::enabled()
                .interval(interval)
                .timeout(timeout),
        )
}

/// Runs exactly one probe round (interval one hour, threshold 1) of a destination at `address`
/// and returns its status and how long the round took.
async fn probe_once(address: &str, timeout: Duration) -> (healthpick::DestinationStatus, Duration) {
    init_tracing();
    let engine = Engine::new(Config::new().cluster(
        active_cluster("c", HOUR, timeout, 1).destination(DestinationConfig::new("d", address)),
    ))
    .unwrap();
    let monitor = ActiveMonitor::start(&engine);
    let started = Instant::now();
    within("the first probe round", DEADLINE, engine.ready()).await;
    let took = started.elapsed();
    let status = destination(&engine, "c", "d");
    monitor.stop().await;
    (status, took)
}

// ---- how each answer is judged ---------------------------------------------------------------

#[tokio::test]
async fn a_200_makes_the_destination_healthy() {
    let server = HttpServer::start(|_| Reply::text(200, "fine")).await;
    let (d, _) = probe_once(&server.url(), ms(2000)).await;
    assert_eq!(d.active, HealthState::Healthy);
    assert_eq!(d.reported, None);
    assert_eq!(d.last_probe_result.as_deref(), Some("HTTP 200"));
    assert_eq!(d.last_error, None);
    let reason = d.last_reason.unwrap();
    assert!(reason.contains("Unknown -> Healthy"), "{reason}");
    assert!(d.last_probe.is_some());
    assert_eq!(server.count(), 1);
}

#[tokio::test]
async fn a_500_or_503_is_a_failure_whatever_the_body_says() {
    for code in [500u16, 503] {
        // The body claims Healthy: a non-2xx is a failure anyway.
        let server = HttpServer::start(move |_| Reply::json(code, r#"{"status":"Healthy"}"#)).await;
        let (d, _) = probe_once(&server.url(), ms(2000)).await;
        let expected = format!("HTTP {code}");
        assert_eq!(d.active, HealthState::Unhealthy, "{code}");
        assert_eq!(d.reported, None, "{code}: a non-2xx body is not read");
        assert_eq!(d.last_probe_result.as_deref(), Some(expected.as_str()));
        assert_eq!(d.last_error.as_deref(), Some(expected.as_str()));
        let reason = d.last_reason.unwrap();
        assert!(
            reason.contains("Unknown -> Unhealthy") && reason.contains(&expected),
            "{reason}"
        );
        assert!(reason.contains("1 consecutive failure"), "{reason}");
    }
}

#[tokio::test]
async fn a_redirect_is_a_failure_and_is_not_followed() {
    let server = HttpServer::start(|seen| match seen.path.as_str() {
        "/health" => Reply::status(302).header("location", "/target"),
        _ => Reply::text(200, "target"),
    })
    .await;
    let (d, _) = probe_once(&server.url_for("/health"), ms(2000)).await;
    assert_eq!(d.active, HealthState::Unhealthy);
    assert_eq!(d.last_error.as_deref(), Some("HTTP 302"));
    assert_eq!(server.recorder().count_path("/health"), 1);
    assert_eq!(
        server.recorder().count_path("/target"),
        0,
        "the probe followed the redirect"
    );
}

#[tokio::test]
async fn connection_refused_is_a_failure_with_the_reason() {
    let closed = ClosedPort::reserve();
    let (d, took) = probe_once(&closed.url(), ms(2000)).await;
    assert_eq!(d.active, HealthState::Unhealthy);
    let error = d.last_error.expect("the reason is kept").to_lowercase();
    assert!(error.contains("connect"), "{error}");
    assert!(error.contains("refused"), "{error}");
    assert!(
        took < ms(1500),
        "a refused connection fails fast, took {took:?}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_fails_by_timeout_and_the_round_ends() {
    let server = RawServer::start(Mode::Hang).await;
    let (d, took) = probe_once(&server.url(), ms(300)).await;
    assert_eq!(d.active, HealthState::Unhealthy);
    let error = d.last_error.unwrap();
    assert!(error.contains("timed out"), "{error}");
    assert!(server.accepts() >= 1, "the probe never connected");
    assert!(
        took >= ms(290),
        "the round ended before the timeout: {took:?}"
    );
    assert!(took < ms(2000), "the round hung: {took:?}");
}

#[tokio::test]
async fn a_body_cut_short_is_a_failure() {
    let server = RawServer::start(Mode::Truncating(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n",
        b"only a few bytes",
    ))
    .await;
    let (d, took) = probe_once(&server.url(), ms(2000)).await;
    assert_eq!(d.active, HealthState::Unhealthy, "{d:?}");
    let error = d.last_error.unwrap();
    assert!(error.contains("body"), "{error}");
    assert!(took < ms(1500), "{took:?}");
}

#[tokio::test]
async fn the_timeout_covers_reading_the_body() {
    // Headers at once, then the body stalls: the probe times out instead of waiting for it.
    let server = RawServer::start(Mode::Stalling(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
        br#"{"status":"#,
    ))
    .await;
    let (d, took) = probe_once(&server.url(), ms(300)).await;
    assert_eq!(d.active, HealthState::Unhealthy, "{d:?}");
    let error = d.last_error.unwrap();
    assert!(error.contains("timed out"), "{error}");
    assert!(took >= ms(290), "{took:?}");
    assert!(took < ms(2000), "the round hung: {took:?}");
}

#[tokio::test]
async fn a_ten_megabyte_body_is_a_success_read_only_in_part() {
    const SIZE: usize = 10 * 1024 * 1024;
    // A valid health payload saying Unhealthy, padded to 10 MB. Read whole, it would be a failed
    // probe; read up to the bound (64 KiB), it is not a complete JSON document, so the probe is
    // a plain 2xx success.
    let mut body = br#"{"status":"Unhealthy","pad":""#.to_vec();
    body.resize(SIZE - 2, b'x');
    body.extend_from_slice(br#""}"#);
    assert!(healthpick::service::HealthPayload::parse(&body).is_some());
    let body = hyper::body::Bytes::from(body);
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    let server = HttpServer::start(move |_| {
        Reply::json(200, "")
            .body(body.clone())
            .count_sent(counter.clone())
    })
    .await;
    let (d, took) = probe_once(&server.url(), ms(5000)).await;
    assert_eq!(d.active, HealthState::Healthy, "{d:?}");
    assert_eq!(d.reported, None, "the whole body was read and parsed");
    assert_eq!(d.last_probe_result.as_deref(), Some("HTTP 200"));
    assert!(took < ms(3000), "{took:?}");
    // The client stopped reading: the server could not push the whole body.
    let written = sent.load(Ordering::SeqCst);
    eprintln!("10 MB body: the server produced {written} bytes before the probe hung up");
    assert!(
        written < SIZE as u64,
        "the server wrote all {written} bytes: the probe read the whole body"
    );
}

#[tokio::test]
async fn a_200_that_is_not_a_payload_is_a_plain_success() {
    let server = HttpServer::start(|_| Reply::text(200, "<html>ok</html>")).await;
    let (d, _) = probe_once(&server.url(), ms(2000)).await;
    assert_eq!(d.active, HealthState::Healthy);
    assert_eq!(d.reported, None);
    assert_eq!(d.last_probe_result.as_deref(), Some("HTTP 200"));
}

#[tokio::test]
async fn a_degraded_payload_is_healthy_but_ranks_below_healthy_destinations() {
    let degraded = HttpServer::start(|_| Reply::payload("Degraded")).await;
    let healthy = HttpServer::start(|_| Reply::payload("Healthy")).await;
    let engine = Engine::new(
        Config::new().cluster(
            active_cluster("c", HOUR, ms(2000), 1)
                .load_balancing_policy("RoundRobin")
                .destination(DestinationConfig::new("degraded", degraded.url()))
                .destination(DestinationConfig::new("healthy", healthy.url())),
        ),
    )
    .unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    within("the first round", DEADLINE, engine.ready()).await;

    let d = destination(&engine, "c", "degraded");
    assert_eq!(d.active, HealthState::Healthy);
    assert_eq!(d.reported, Some(ReportedHealth::Degraded));
    assert_eq!(d.last_probe_result.as_deref(), Some("HTTP 200 (Degraded)"));
    assert!(d.available && !d.in_best_group);
    let h = destination(&engine, "c", "healthy");
    assert_eq!(h.reported, Some(ReportedHealth::Healthy));
    assert!(h.in_best_group);

    for _ in 0..20 {
        let pick = engine.pick_endpoint("c").unwrap();
        assert_eq!(pick.destination().id(), "healthy");
    }
    let best = engine.best_endpoints("c").unwrap();
    assert_eq!(best.status, HealthClass::Healthy);
    assert_eq!(best.destinations.len(), 1);
}

#[tokio::test]
async fn an_unhealthy_payload_with_200_is_a_failed_probe() {
    let server =
        HttpServer::start(|_| Reply::json(200, r#"{"status":"Unhealthy","version":"1"}"#)).await;
    let (d, _) = probe_once(&server.url(), ms(2000)).await;
    assert_eq!(d.active, HealthState::Unhealthy);
    assert_eq!(d.reported, Some(ReportedHealth::Unhealthy));
    assert_eq!(d.last_error.as_deref(), Some("HTTP 200 (Unhealthy)"));
}

#[tokio::test]
async fn a_2xx_without_payload_or_a_failure_clears_the_reported_status() {
    let answer = Arc::new(AtomicU8::new(0));
    let switch = answer.clone();
    let server = HttpServer::start(move |_| match switch.load(Ordering::SeqCst) {
        0 => Reply::payload("Degraded"),
        1 => Reply::text(200, "plain"),
        2 => Reply::payload("Degraded"),
        _ => Reply::status(500),
    })
    .await;
    let engine = Engine::new(
        Config::new().cluster(
            active_cluster("c", ms(100), ms(2000), 5)
                .destination(DestinationConfig::new("d", server.url())),
        ),
    )
    .unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    within("the first round", DEADLINE, engine.ready()).await;
    let mut last = destination(&engine, "c", "d");
    assert_eq!(last.reported, Some(ReportedHealth::Degraded));
    for (next, expected) in [(1, None), (2, Some(ReportedHealth::Degraded)), (3, None)] {
        answer.store(next, Ordering::SeqCst);
        // Rounds already under way may still see the previous answer.
        last = loop {
            last = next_round(&engine, "c", "d", last.last_probe).await;
            if last.reported == expected {
                break last;
            }
        };
        assert_eq!(last.active, HealthState::Healthy, "answer {next}: {last:?}");
    }
    assert_eq!(last.last_probe_result.as_deref(), Some("HTTP 500"));
}

/// YARP reads `HttpRequest:Version` with its default `VersionPolicy` RequestVersionOrLower: a
/// cluster asking for HTTP/2 still talks HTTP/1.1 to a destination that cannot do HTTP/2 (every
/// `http://` destination without h2c), and the same file must behave the same here. The
/// probe forces `Version::HTTP_2` on the request, which reqwest refuses for such destinations
/// (`UserUnsupportedVersion`) before connecting, so every destination fails its probes.
#[tokio::test]
async fn a_cluster_asking_for_http2_still_probes_an_http1_destination() {
    let server = HttpServer::start(|_| Reply::payload("Healthy")).await;
    // As a YARP appsettings file writes it.
    let engine = Engine::from_json(&format!(
        r#"{{ "ReverseProxy": {{ "Clusters": {{ "c": {{
            "HttpRequest": {{ "Version": "2" }},
            "HealthCheck": {{ "Active": {{ "Enabled": true, "Interval": "01:00:00" }} }},
            "Destinations": {{ "d": {{ "Address": "{}" }} }}
        }} }} }} }}"#,
        server.url()
    ))
    .unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    within("the first round", DEADLINE, engine.ready()).await;
    let d = destination(&engine, "c", "d");
    assert_eq!(
        d.active,
        HealthState::Healthy,
        "HttpRequest:Version 2 broke probing of an HTTP/1.1 destination: {:?}",
        d.last_error
    );
    assert_eq!(server.count(), 1);
}

#[tokio::test]
async fn a_factory_error_is_a_failed_probe_with_its_reason() {
    struct Refuses;
    impl ProbeRequestFactory for Refuses {
        fn create(
            &self,
            cluster: &ClusterConfig,
            destination: &Destination,
        ) -> Result<ProbeRequest, String> {
            if destination.id() == "bad" {
                return Err("no credentials for `bad`".into());
            }
            DefaultProbeRequestFactory.create(cluster, destination)
        }
    }
    let server = HttpServer::start(|_| Reply::text(200, "ok")).await;
    let engine = Engine::new(
        Config::new().cluster(
            active_cluster("c", HOUR, ms(2000), 1)
                .destination(DestinationConfig::new("good", server.url()))
                .destination(DestinationConfig::new("bad", server.url())),
        ),
    )
    .unwrap();
    let _monitor = ActiveMonitor::builder()
        .probe_request_factory(Refuses)
        .start(&engine);
    within("the first round", DEADLINE, engine.ready()).await;
    assert_eq!(
        destination(&engine, "c", "good").active,
        HealthState::Healthy
    );
    let bad = destination(&engine, "c", "bad");
    assert_eq!(bad.active, HealthState::Unhealthy);
    assert!(
        bad.last_error
            .as_deref()
            .unwrap()
            .contains("no credentials for `bad`"),
        "{bad:?}"
    );
    assert_eq!(server.count(), 1, "the failed build sent nothing");
}

// ---- a destination that dies and comes back --------------------------------------------------

#[tokio::test]
async fn a_killed_destination_is_unhealthy_after_threshold_rounds_and_healthy_after_one_once_back()
{
    init_tracing();
    let mut backend = Backend::start("b1").await.unwrap();
    let engine = Engine::new(
        Config::new().cluster(
            ClusterConfig::new("c")
                .metadata(CONSECUTIVE_FAILURES_THRESHOLD_KEY, "2")
                .active(
                    ActiveHealthCheckConfig::enabled()
                        .interval(ms(150))
                        .timeout(ms(1000))
                        .path("/api/systemstatus"),
                )
                .destination(DestinationConfig::new("b1", backend.url())),
        ),
    )
    .unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    within("the first round", DEADLINE, engine.ready()).await;
    let mut last = destination(&engine, "c", "b1");
    assert_eq!(last.active, HealthState::Healthy);
    assert_eq!(last.reported, Some(ReportedHealth::Healthy));

    backend.kill();
    // A round that was already answered may still land as a success; skip those.
    let first_failure = loop {
        last = next_round(&engine, "c", "b1", last.last_probe).await;
        if last
            .last_probe_result
            .as_deref()
            .is_some_and(|r| r.starts_with("error"))
        {
            break last.clone();
        }
        assert_eq!(last.active, HealthState::Healthy);
    };
    assert_eq!(
        first_failure.active,
        HealthState::Healthy,
        "one failed round with threshold 2 must not eject: {first_failure:?}"
    );
    assert_eq!(
        first_failure.reported, None,
        "a failure clears the reported status"
    );
    assert!(first_failure.last_error.is_some());

    let second = next_round(&engine, "c", "b1", first_failure.last_probe).await;
    assert!(second.last_error.is_some());
    assert_eq!(second.active, HealthState::Unhealthy, "{second:?}");
    let reason = second.last_reason.clone().unwrap();
    assert!(
        reason.contains("Healthy -> Unhealthy") && reason.contains("2 consecutive failures"),
        "{reason}"
    );

    backend.restart().await.unwrap();
    // The first successful round after the restart makes it Healthy at once.
    let mut last = second;
    let mut rounds = 0;
    let back = loop {
        last = next_round(&engine, "c", "b1", last.last_probe).await;
        rounds += 1;
        if last
            .last_probe_result
            .as_deref()
            .is_some_and(|r| r.starts_with("HTTP 200"))
        {
            break last;
        }
        assert_eq!(last.active, HealthState::Unhealthy);
        assert!(
            rounds < 3,
            "no successful round after the restart: {last:?}"
        );
    };
    assert_eq!(back.active, HealthState::Healthy, "{back:?}");
    assert_eq!(back.reported, Some(ReportedHealth::Healthy));
    assert_eq!(engine.pick_endpoint("c").unwrap().destination().id(), "b1");
}

// ---- what a probe sends ----------------------------------------------------------------------

#[tokio::test]
async fn the_health_url_path_query_host_and_user_agent_are_sent() {
    let address = HttpServer::start(|_| Reply::text(200, "not the health server")).await;
    let health = HttpServer::start(|_| Reply::payload("Healthy")).await;
    let engine = Engine::new(
        Config::new().cluster(
            ClusterConfig::new("c")
                .active(
                    ActiveHealthCheckConfig::enabled()
                        .interval(HOUR)
                        .path("/health")
                        .query("?probe=1&x=y"),
                )
                .destination(
                    DestinationConfig::new("d", address.url())
                        .health(health.url_for("/base/"))
                        .host("svc.internal"),
                ),
        ),
    )
    .unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    within("the first round", DEADLINE, engine.ready()).await;

    assert_eq!(
        address.count(),
        0,
        "the Address was probed instead of Health"
    );
    let seen = health.recorder().requests();
    assert_eq!(seen.len(), 1);
    let probe = &seen[0];
    assert_eq!(probe.method, "GET");
    assert_eq!(probe.path, "/base/health");
    assert_eq!(probe.query.as_deref(), Some("probe=1&x=y"));
    assert_eq!(probe.header("host"), Some("svc.internal"));
    let expected_agent = format!(
        "healthpick/{} (active health check)",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(PROBE_USER_AGENT, expected_agent);
    assert_eq!(probe.header("user-agent"), Some(expected_agent.as_str()));
    assert_eq!(probe.header("content-length"), None, "a probe has no body");
    assert_eq!(destination(&engine, "c", "d").active, HealthState::Healthy);
}

#[tokio::test]
async fn a_custom_probe_request_factory_is_used() {
    struct WithKey;
    impl ProbeRequestFactory for WithKey {
        fn create(
            &self,
            cluster: &ClusterConfig,
            destination: &Destination,
        ) -> Result<ProbeRequest, String> {
            let mut request = DefaultProbeRequestFactory.create(cluster, destination)?;
            request.headers.insert(
                "x-api-key",
                HeaderValue::from_str(&format!("key-{}", destination.id())).unwrap(),
            );
            Ok(request)
        }
    }
    let server = HttpServer::start(|seen| {
        if seen.header("x-api-key").is_some() {
            Reply::text(200, "ok")
        } else {
            Reply::status(401)
        }
    })
    .await;
    let engine = Engine::new(
        Config::new().cluster(
            active_cluster("c", HOUR, ms(2000), 1)
                .destination(DestinationConfig::new("d1", server.url())),
        ),
    )
    .unwrap();
    let _monitor = ActiveMonitor::builder()
        .probe_request_factory(WithKey)
        .start(&engine);
    within("the first round", DEADLINE, engine.ready()).await;
    let seen = server.recorder().requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].header("x-api-key"), Some("key-d1"));
    assert_eq!(seen[0].header("user-agent"), Some(PROBE_USER_AGENT));
    assert_eq!(destination(&engine, "c", "d1").active, HealthState::Healthy);
}

// ---- scheduling ------------------------------------------------------------------------------

#[tokio::test]
async fn the_first_round_probes_every_enabled_cluster_at_once() {
    let recorder = Recorder::new();
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(
            HttpServer::start_with(recorder.clone(), |_| Reply::text(200, "ok").delay(ms(400)))
                .await,
        );
    }
    let disabled = HttpServer::start(|_| Reply::text(200, "ok")).await;
    let mut config = Config::new();
    for (i, server) in servers.iter().enumerate() {
        config = config.cluster(
            active_cluster(&format!("c{i}"), HOUR, ms(2000), 1)
                .destination(DestinationConfig::new("d", server.url())),
        );
    }
    config = config.cluster(
        ClusterConfig::new("off").destination(DestinationConfig::new("d", disabled.url())),
    );
    let engine = Engine::new(config).unwrap();
    let started = Instant::now();
    let _monitor = ActiveMonitor::start(&engine);
    within("every first round", DEADLINE, engine.ready()).await;
    let took = started.elapsed();

    assert!(took >= ms(390), "{took:?}");
    let arrivals = recorder.arrivals();
    assert_eq!(arrivals.len(), 3);
    let spread = *arrivals.iter().max().unwrap() - *arrivals.iter().min().unwrap();
    // One after the other, each would start when the previous 400 ms answer came.
    assert!(
        spread < ms(300),
        "first probes spread over {spread:?}: the clusters were not probed concurrently"
    );
    for i in 0..3 {
        assert!(engine.first_round_done(&format!("c{i}")));
    }
    assert_eq!(
        disabled.count(),
        0,
        "a cluster without active checks was probed"
    );
    assert_eq!(destination(&engine, "off", "d").last_probe, None);
}

#[tokio::test]
async fn the_next_round_starts_an_interval_after_the_previous_one_finished() {
    // Each probe takes 150 ms and the interval is 100 ms: a fixed-rate schedule would start a
    // round every 100 ms and overlap; YARP's schedule starts one every ~250 ms, one at a time.
    let server = HttpServer::start(|_| Reply::text(200, "ok").delay(ms(150))).await;
    let engine = Engine::new(
        Config::new().cluster(
            active_cluster("c", ms(100), ms(2000), 1)
                .destination(DestinationConfig::new("d", server.url())),
        ),
    )
    .unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    let started = Instant::now();
    eventually("five probes", DEADLINE, || {
        (server.count() >= 5).then_some(())
    })
    .await;
    let window = started.elapsed();

    let arrivals = server.recorder().arrivals();
    for pair in arrivals.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= ms(235),
            "a round started {gap:?} after the previous one"
        );
        assert!(
            gap < ms(1000),
            "a round started {gap:?} after the previous one"
        );
    }
    assert_eq!(server.recorder().peak_in_flight(), 1, "rounds overlapped");
    // Five rounds need at least four full cycles of 250 ms.
    assert!(window >= ms(4 * 240), "{window:?}");
}

fn json_cluster(id: &str, interval: &str, address: &str) -> String {
    format!(
        r#""{id}": {{
            "HealthCheck": {{ "Active": {{ "Enabled": true, "Interval": "{interval}", "Timeout": "00:00:02" }} }},
            "Metadata": {{ "ConsecutiveFailuresHealthPolicy.Threshold": "1" }},
            "Destinations": {{ "d": {{ "Address": "{address}" }} }}
        }}"#
    )
}

fn json_doc(clusters: &[String]) -> String {
    format!(
        r#"{{ "ReverseProxy": {{ "Clusters": {{ {} }} }} }}"#,
        clusters.join(",\n")
    )
}

#[tokio::test]
async fn a_cluster_added_by_a_reload_is_probed_at_once() {
    let a = HttpServer::start(|_| Reply::text(200, "a")).await;
    let b = HttpServer::start(|_| Reply::text(200, "b")).await;
    let engine = Engine::from_json(&json_doc(&[json_cluster("a", "01:00:00", &a.url())])).unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    within("the first round", DEADLINE, engine.ready()).await;
    assert_eq!(b.count(), 0);

    let reloaded = Instant::now();
    engine
        .load_json(&json_doc(&[
            json_cluster("a", "01:00:00", &a.url()),
            json_cluster("b", "01:00:00", &b.url()),
        ]))
        .unwrap();
    within("the new cluster's first round", DEADLINE, engine.ready()).await;
    let took = reloaded.elapsed();
    assert_eq!(b.count(), 1);
    assert!(took < ms(1000), "the new cluster waited {took:?}");
    assert_eq!(destination(&engine, "b", "d").active, HealthState::Healthy);
    assert_eq!(
        a.count(),
        1,
        "the reload restarted the kept cluster's rounds"
    );
}

#[tokio::test]
async fn a_removed_cluster_is_no_longer_probed() {
    let a = HttpServer::start(|_| Reply::text(200, "a")).await;
    let b = HttpServer::start(|_| Reply::text(200, "b")).await;
    let engine = Engine::from_json(&json_doc(&[
        json_cluster("a", "00:00:00.08", &a.url()),
        json_cluster("b", "00:00:00.08", &b.url()),
    ]))
    .unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    eventually("b probed twice", DEADLINE, || {
        (b.count() >= 2).then_some(())
    })
    .await;

    engine
        .load_json(&json_doc(&[json_cluster("a", "00:00:00.08", &a.url())]))
        .unwrap();
    // A round already sent reaches the server within a few milliseconds.
    tokio::time::sleep(ms(50)).await;
    let b_after = b.count();
    let a_after = a.count();
    // Watch five intervals: `a` keeps going, `b` stays silent.
    eventually("a probed 5 more times", DEADLINE, || {
        (a.count() >= a_after + 5).then_some(())
    })
    .await;
    assert_eq!(b.count(), b_after, "the removed cluster was probed again");
}

#[tokio::test]
async fn a_reload_that_keeps_the_interval_does_not_restart_the_countdown() {
    let a = HttpServer::start(|_| Reply::text(200, "a")).await;
    let other = HttpServer::start(|_| Reply::text(200, "other")).await;
    let doc = json_doc(&[json_cluster("a", "00:00:00.6", &a.url())]);
    let engine = Engine::from_json(&doc).unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    within("the first round", DEADLINE, engine.ready()).await;
    let first = a.recorder().arrivals()[0];

    // 500 ms into the 600 ms countdown, reload: same interval for `a`, plus another cluster.
    tokio::time::sleep_until(first + ms(500)).await;
    engine
        .load_json(&json_doc(&[
            json_cluster("a", "00:00:00.6", &a.url()),
            json_cluster("other", "01:00:00", &other.url()),
        ]))
        .unwrap();
    eventually("the second round", DEADLINE, || {
        (a.count() >= 2).then_some(())
    })
    .await;
    let gap = a.recorder().arrivals()[1] - first;
    assert!(gap >= ms(590), "second round after {gap:?}");
    assert!(
        gap < ms(950),
        "second round after {gap:?}: the reload restarted the 600 ms countdown (would be ~1100 ms)"
    );
}

#[tokio::test]
async fn a_new_interval_counts_from_the_end_of_the_last_round() {
    let a = HttpServer::start(|_| Reply::text(200, "a")).await;
    let engine = Engine::from_json(&json_doc(&[json_cluster("a", "00:00:10", &a.url())])).unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    within("the first round", DEADLINE, engine.ready()).await;
    let first = a.recorder().arrivals()[0];

    // 600 ms after the round, shorten the interval from 10 s to 700 ms: the next round is due
    // 700 ms after the last one ended, not 700 ms after the reload (1.3 s) nor 10 s.
    tokio::time::sleep_until(first + ms(600)).await;
    engine
        .load_json(&json_doc(&[json_cluster("a", "00:00:00.7", &a.url())]))
        .unwrap();
    eventually("the second round", DEADLINE, || {
        (a.count() >= 2).then_some(())
    })
    .await;
    let gap = a.recorder().arrivals()[1] - first;
    assert!(gap >= ms(690), "second round after {gap:?}");
    assert!(gap < ms(1100), "second round after {gap:?}");
}

#[tokio::test]
async fn dropping_the_monitor_stops_probing() {
    let server = HttpServer::start(|_| Reply::text(200, "ok")).await;
    let engine = Engine::new(
        Config::new().cluster(
            active_cluster("c", ms(80), ms(2000), 1)
                .destination(DestinationConfig::new("d", server.url())),
        ),
    )
    .unwrap();
    let monitor = ActiveMonitor::start(&engine);
    eventually("two probes", DEADLINE, || {
        (server.count() >= 2).then_some(())
    })
    .await;
    drop(monitor);
    tokio::time::sleep(ms(50)).await;
    let after = server.count();
    tokio::time::sleep(ms(400)).await; // five intervals
    assert_eq!(
        server.count(),
        after,
        "probes after the monitor was dropped"
    );
}

#[tokio::test]
async fn a_cancelled_token_stops_probing() {
    let server = HttpServer::start(|_| Reply::text(200, "ok")).await;
    let engine = Engine::new(
        Config::new().cluster(
            active_cluster("c", ms(80), ms(2000), 1)
                .destination(DestinationConfig::new("d", server.url())),
        ),
    )
    .unwrap();
    let token = CancellationToken::new();
    let monitor = ActiveMonitor::builder()
        .cancellation_token(token.clone())
        .start(&engine);
    eventually("two probes", DEADLINE, || {
        (server.count() >= 2).then_some(())
    })
    .await;
    token.cancel();
    tokio::time::sleep(ms(50)).await;
    let after = server.count();
    tokio::time::sleep(ms(400)).await;
    assert_eq!(
        server.count(),
        after,
        "probes after the token was cancelled"
    );
    // The handle is still alive: the token alone stopped it.
    drop(monitor);
}

#[tokio::test]
async fn stop_cancels_the_round_in_flight_and_waits_for_the_tasks() {
    let server = HttpServer::start(|_| Reply::text(200, "ok").delay(ms(400))).await;
    let engine = Engine::new(
        Config::new().cluster(
            active_cluster("c", ms(50), ms(2000), 1)
                .destination(DestinationConfig::new("d", server.url())),
        ),
    )
    .unwrap();
    let monitor = ActiveMonitor::start(&engine);
    eventually("a probe in flight", DEADLINE, || {
        (server.recorder().in_flight() == 1).then_some(())
    })
    .await;
    let stopping = Instant::now();
    within("stop", DEADLINE, monitor.stop()).await;
    assert!(
        stopping.elapsed() < ms(300),
        "stop waited for the probe's answer"
    );
    // The answer would have come 400 ms after the request: nothing may apply it later.
    tokio::time::sleep(ms(600)).await;
    let d = destination(&engine, "c", "d");
    assert_eq!(d.last_probe, None, "a round finished after stop(): {d:?}");
    assert!(!engine.first_round_done("c"));
    assert_eq!(server.count(), 1);
}

// ---- warm-up ---------------------------------------------------------------------------------

#[tokio::test]
async fn the_first_pick_waits_for_the_first_round_and_avoids_what_failed() {
    let good = HttpServer::start(|_| Reply::text(200, "ok").delay(ms(200))).await;
    let bad = HttpServer::start(|_| Reply::status(500).delay(ms(200))).await;
    let engine = Engine::new(
        Config::new().cluster(
            active_cluster("c", HOUR, ms(2000), 1)
                .destination(DestinationConfig::new("bad", bad.url()))
                .destination(DestinationConfig::new("good", good.url())),
        ),
    )
    .unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    let started = Instant::now();
    let pick = within("the first pick", DEADLINE, engine.pick_endpoint_ready("c"))
        .await
        .unwrap();
    let waited = started.elapsed();
    assert_eq!(pick.destination().id(), "good");
    assert!(
        waited >= ms(190),
        "the pick did not wait for the round: {waited:?}"
    );
    assert!(engine.first_round_done("c"));
    assert_eq!(
        destination(&engine, "c", "bad").active,
        HealthState::Unhealthy
    );
    drop(pick);

    // Once the first round is done, picks never wait.
    let later = Instant::now();
    for _ in 0..20 {
        let pick = engine.pick_endpoint_ready("c").await.unwrap();
        assert_eq!(pick.destination().id(), "good");
    }
    assert!(later.elapsed() < ms(200), "{:?}", later.elapsed());
}

#[tokio::test(start_paused = true)]
async fn the_first_pick_waits_at_most_the_probe_timeout() {
    // No monitor runs, so no round will ever finish: the pick gives up after the timeout.
    // No I/O happens, so the paused clock is exact.
    let engine = Engine::new(
        Config::new().cluster(
            active_cluster("c", HOUR, ms(300), 1)
                .destination(DestinationConfig::new("d", "http://127.0.0.1:9/")),
        ),
    )
    .unwrap();
    let started = Instant::now();
    let pick = engine.pick_endpoint_ready("c").await.unwrap();
    assert_eq!(started.elapsed(), ms(300));
    assert_eq!(pick.destination().id(), "d");

    // Without active checks a pick never waits.
    let engine = Engine::new(Config::new().cluster(
        ClusterConfig::new("p").destination(DestinationConfig::new("d", "http://127.0.0.1:9/")),
    ))
    .unwrap();
    let started = Instant::now();
    let _pick = engine.pick_endpoint_ready("p").await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test]
async fn ready_resolves_after_every_enabled_clusters_first_round() {
    let fast = HttpServer::start(|_| Reply::text(200, "ok").delay(ms(50))).await;
    let slow = HttpServer::start(|_| Reply::text(200, "ok").delay(ms(300))).await;
    let engine = Engine::new(
        Config::new()
            .cluster(
                active_cluster("fast", HOUR, ms(2000), 1)
                    .destination(DestinationConfig::new("d", fast.url())),
            )
            .cluster(
                active_cluster("slow", HOUR, ms(2000), 1)
                    .destination(DestinationConfig::new("d", slow.url())),
            )
            .cluster(
                ClusterConfig::new("passive-only")
                    .destination(DestinationConfig::new("d", "http://127.0.0.1:9/")),
            ),
    )
    .unwrap();
    let started = Instant::now();
    let _monitor = ActiveMonitor::start(&engine);
    within("ready", DEADLINE, engine.ready()).await;
    assert!(started.elapsed() >= ms(290), "{:?}", started.elapsed());
    assert!(engine.first_round_done("fast") && engine.first_round_done("slow"));
    assert!(destination(&engine, "slow", "d").last_probe.is_some());
}

/// `ready()` resolves after every enabled cluster's first round. A cluster with
/// active checks and no destinations (YARP accepts it; discovery may fill it later) has a
/// trivially finished round; it must count, or `ready()` never resolves.
#[tokio::test]
async fn ready_resolves_for_an_active_cluster_without_destinations() {
    let server = HttpServer::start(|_| Reply::text(200, "ok")).await;
    let engine = Engine::new(
        Config::new()
            .cluster(
                active_cluster("c", ms(100), ms(1000), 1)
                    .destination(DestinationConfig::new("d", server.url())),
            )
            .cluster(active_cluster("empty", ms(100), ms(1000), 1)),
    )
    .unwrap();
    let _monitor = ActiveMonitor::start(&engine);
    // Several rounds of `empty` have run by now.
    eventually("c probed three times", DEADLINE, || {
        (server.count() >= 3).then_some(())
    })
    .await;
    let ready = tokio::time::timeout(ms(1000), engine.ready()).await;
    assert!(
        ready.is_ok(),
        "engine.ready() never resolves while an active cluster has no destinations"
    );
    assert!(engine.first_round_done("empty"));
}

// ---- draining end to end ---------------------------------------------------------------------
#[cfg(feature = "axum")]
mod draining {
    use super::*;
    use crate::support::clients::http_client;
    use healthpick::service::{health_router, Draining};
    use std::sync::atomic::AtomicBool;

    struct Service {
        draining: Draining,
        url: String,
        task: tokio::task::JoinHandle<()>,
    }

    impl Drop for Service {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    async fn start_service(name: &'static str) -> Service {
        let draining = Draining::builder().delay(ms(2000)).hostname(name).build();
        let app = axum::Router::new()
            .route("/work", axum::routing::get(move || async move { name }))
            .merge(health_router(draining.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Service {
            draining,
            url,
            task,
        }
    }

    #[tokio::test]
    async fn a_draining_service_stops_getting_picks_within_one_interval_and_no_request_fails() {
        init_tracing();
        const INTERVAL: Duration = Duration::from_millis(200);
        let a = start_service("a").await;
        let b = start_service("b").await;
        let engine = Engine::new(
            Config::new().cluster(
                ClusterConfig::new("svc")
                    .load_balancing_policy("RoundRobin")
                    .active(
                        ActiveHealthCheckConfig::enabled()
                            .interval(INTERVAL)
                            .timeout(ms(1000))
                            .path("/api/systemstatus"),
                    )
                    .destination(DestinationConfig::new("a", a.url.clone()))
                    .destination(DestinationConfig::new("b", b.url.clone())),
            ),
        )
        .unwrap();
        let _monitor = ActiveMonitor::start(&engine);
        within("the first round", DEADLINE, engine.ready()).await;
        let client = http_client();

        // Traffic runs the whole time; every request must succeed.
        let stop = Arc::new(AtomicBool::new(false));
        let traffic = {
            let (engine, client, stop) = (engine.clone(), client.clone(), stop.clone());
            tokio::spawn(async move {
                let mut log = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    // Logged with the time of the pick: a request picked before the switch may
                    // end after it.
                    let picked_at = Instant::now();
                    let pick = engine.pick_endpoint("svc").unwrap();
                    let id = pick.destination().id().to_string();
                    let url = pick.address().join("work").unwrap();
                    let response = client.get(url).send().await.expect("request failed");
                    assert_eq!(response.status(), 200, "request to {id} failed");
                    assert_eq!(response.text().await.unwrap(), id);
                    log.push((picked_at, id));
                    tokio::time::sleep(ms(5)).await;
                }
                log
            })
        };
        eventually("traffic to both", DEADLINE, || {
            let s = engine.status();
            let c = s.cluster("svc").unwrap();
            (c.destinations.iter().all(|d| d.in_best_group)).then_some(())
        })
        .await;
        tokio::time::sleep(ms(100)).await;

        let drain_started = Instant::now();
        a.draining.start();
        eventually("a out of the best group", DEADLINE, || {
            let d = destination(&engine, "svc", "a");
            (!d.in_best_group).then_some(())
        })
        .await;
        let noticed = drain_started.elapsed();
        // Worst case: a round had just started; the next starts one interval after it ended.
        assert!(
            noticed < INTERVAL + ms(300),
            "callers noticed the draining service after {noticed:?}"
        );
        let d = destination(&engine, "svc", "a");
        assert_eq!(d.reported, Some(ReportedHealth::Degraded));
        assert_eq!(d.active, HealthState::Healthy);
        let switched = Instant::now();
        tokio::time::sleep(ms(300)).await;
        stop.store(true, Ordering::SeqCst);
        let log = within("traffic", DEADLINE, traffic).await.unwrap();

        let before: Vec<_> = log.iter().filter(|(t, _)| *t < drain_started).collect();
        assert!(before.iter().any(|(_, id)| id == "a") && before.iter().any(|(_, id)| id == "b"));
        let after: Vec<_> = log.iter().filter(|(t, _)| *t > switched).collect();
        assert!(after.len() >= 10, "{}", after.len());
        assert!(
            after.iter().all(|(_, id)| id == "b"),
            "picks still went to the draining service"
        );
        // The draining service still answers.
        let still = client.get(format!("{}work", a.url)).send().await.unwrap();
        assert_eq!(still.status(), 200);
        assert!(a.draining.is_draining());
    }
}

// ---- scale -----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_round_over_a_thousand_destinations_respects_the_bound() {
    const N: usize = 1000;
    const BOUND: usize = 16;
    let recorder = Recorder::new();
    let mut servers = Vec::new();
    for _ in 0..4 {
        servers.push(
            HttpServer::start_with(recorder.clone(), |_| Reply::text(200, "ok").delay(ms(5))).await,
        );
    }
    let mut cluster = active_cluster("big", HOUR, ms(5000), 1);
    for i in 0..N {
        let server = &servers[i % servers.len()];
        cluster = cluster.destination(
            DestinationConfig::new(format!("d{i}"), server.url())
                .health(server.url_for(&format!("/d/{i}"))),
        );
    }
    let engine = Engine::new(Config::new().cluster(cluster)).unwrap();
    let started = Instant::now();
    let _monitor = ActiveMonitor::builder()
        .max_concurrent_probes(BOUND)
        .start(&engine);
    within("the round", Duration::from_secs(15), engine.ready()).await;
    let took = started.elapsed();

    let peak = recorder.peak_in_flight();
    assert!(peak <= BOUND, "{peak} probes in flight, bound {BOUND}");
    assert!(peak > 1, "probes ran one at a time");
    let counts = recorder.counts_by_path();
    assert_eq!(counts.len(), N, "not every destination was probed");
    for i in 0..N {
        assert_eq!(counts.get(&format!("/d/{i}")), Some(&1), "destination d{i}");
    }
    let status = engine.status();
    let cluster = status.cluster("big").unwrap();
    assert!(cluster
        .destinations
        .iter()
        .all(|d| d.active == HealthState::Healthy));
    // 1000 probes of >= 5 ms each, at most 16 at a time, cannot take less than ~312 ms.
    assert!(took >= ms(300), "{took:?}");
    eprintln!("1000 destinations, bound {BOUND}: round took {took:?}, peak {peak} in flight");
}

//! What the wrapped client, the middleware and the tower layer learn from every response they
//! see, against real servers on loopback:
//!
//! - the load a server reports in `endpoint-load-metrics` becomes its destination's reported
//!   utilization (in the engine's status), from every attempt, the ones the call went on from
//!   included, once the cluster's blackout is over;
//! - a malformed report is ignored and never fails the call;
//! - every answer feeds its destination's latency estimate, whatever the cluster's policy.
//!
//! The clusters count reports at once (no blackout) or run on a manual clock: nothing here
//! waits on time.

use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{ClusterConfig, DestinationConfig, LoadReportsConfig, LoadSignalsConfig};
use healthpick::{Config, Engine, Hedging, ManualClock};

use crate::support::faces::{Call, Face};
use crate::support::faulty_servers::{Mode, RawServer};
use crate::support::servers::{HttpServer, Reply};
use crate::support::status::destination;

const HEADER: &str = "endpoint-load-metrics";

/// Cluster `c` (FirstAlphabetical: the first attempt goes to the first id) over `destinations`,
/// its load reports read with `blackout`.
fn cluster(destinations: &[(&str, String)], blackout: Duration) -> ClusterConfig {
    let mut cluster = ClusterConfig::new("c")
        .load_balancing_policy("FirstAlphabetical")
        .load_signals(
            LoadSignalsConfig::default()
                .load_reports(LoadReportsConfig::default().blackout(blackout)),
        );
    for (id, address) in destinations {
        cluster = cluster.destination(DestinationConfig::new(*id, address.clone()));
    }
    cluster
}

fn engine(destinations: &[(&str, String)]) -> Engine {
    Engine::builder()
        .build_with(Config::new().cluster(cluster(destinations, Duration::ZERO)))
        .expect("config")
}

fn utilization(engine: &Engine, id: &str) -> Option<f64> {
    destination(engine, "c", id).utilization
}

/// `value` as the engine keeps it (a 32-bit float).
fn kept(value: f64) -> Option<f64> {
    Some(f64::from(value as f32))
}

async fn ok(face: &Face, call: &Call) -> String {
    match face.send("c", call).await {
        Ok((200, body)) => body,
        other => panic!("{face}: {other:?}"),
    }
}

#[tokio::test]
async fn a_reported_utilization_shows_in_the_status_through_each_face() {
    let server = HttpServer::start(|_| {
        Reply::text(200, "hot").header(
            HEADER,
            "TEXT application_utilization=0.9, cpu_utilization=0.2",
        )
    })
    .await;
    // An engine per face, so that each starts without a report.
    for i in 0..Face::count() {
        let engine = engine(&[("hot", server.url())]);
        let face = Face::nth(&engine, i);
        assert_eq!(utilization(&engine, "hot"), None);
        assert_eq!(ok(&face, &Call::get("/")).await, "hot");
        assert_eq!(utilization(&engine, "hot"), kept(0.9), "{face}");
    }
}

/// A report in JSON form, and a later report that replaces the first (from a call that may
/// hedge, which runs its attempts otherwise).
#[tokio::test]
async fn a_json_report_counts_and_the_latest_report_wins() {
    let server = HttpServer::start(|seen| {
        let report = match seen.path.as_str() {
            "/first" => r#"JSON {"cpu_utilization": 0.25}"#,
            _ => r#"JSON {"application_utilization": 0.5, "cpu_utilization": 0.75}"#,
        };
        Reply::text(200, "d").header(HEADER, report)
    })
    .await;
    let engine = engine(&[("d", server.url())]);
    for face in Face::all(&engine) {
        ok(&face, &Call::get("/first")).await;
        assert_eq!(utilization(&engine, "d"), kept(0.25), "{face}");
        let hedged = Call::get("/then").hedging(Hedging::after(Duration::from_secs(5)));
        ok(&face, &hedged).await;
        assert_eq!(utilization(&engine, "d"), kept(0.5), "{face}");
    }
}

/// The first attempt is answered 503 (retried elsewhere) with a report: its destination's load
/// counts as well as the answer's.
#[tokio::test]
async fn every_attempt_reports_its_load_the_retried_ones_too() {
    let busy = HttpServer::start(|_| {
        Reply::status(503).header(HEADER, "TEXT application_utilization=1.5")
    })
    .await;
    let spare = HttpServer::start(|_| {
        Reply::text(200, "b-spare").header(HEADER, "TEXT application_utilization=0.1")
    })
    .await;
    for i in 0..Face::count() {
        let engine = engine(&[("a-busy", busy.url()), ("b-spare", spare.url())]);
        let face = Face::nth(&engine, i);
        assert_eq!(ok(&face, &Call::get("/")).await, "b-spare", "{face}");
        assert_eq!(utilization(&engine, "a-busy"), kept(1.5), "{face}");
        assert_eq!(utilization(&engine, "b-spare"), kept(0.1), "{face}");
    }
    assert_eq!(busy.count(), Face::count());
}

#[tokio::test]
async fn a_malformed_load_report_never_fails_the_call() {
    let malformed = [
        "nonsense",
        "TEXT application_utilization=lots",
        "TEXT application_utilization=-1",
        "TEXT unknown_metric=1",
        "JSON {\"cpu_utilization\": ",
        "BIN CgQIARAB",
        "",
    ];
    let server = HttpServer::start(move |seen| {
        let i: usize = seen.path.trim_start_matches('/').parse().unwrap();
        Reply::text(200, "d").header(HEADER, malformed[i])
    })
    .await;
    let engine = engine(&[("d", server.url())]);
    for face in Face::all(&engine) {
        for i in 0..malformed.len() {
            assert_eq!(ok(&face, &Call::get(&format!("/{i}"))).await, "d", "{face}");
        }
    }
    assert_eq!(utilization(&engine, "d"), None);
}

/// A header value that is not text (bytes past ASCII) is ignored as well.
#[tokio::test]
async fn a_load_report_that_is_not_text_never_fails_the_call() {
    let server = RawServer::start(Mode::Truncating(
        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nendpoint-load-metrics: TEXT application_utilization=0.5\u{e9}\r\nconnection: close\r\n\r\n",
        b"ok",
    ))
    .await;
    let engine = engine(&[("d", server.url())]);
    for face in Face::all(&engine) {
        assert_eq!(ok(&face, &Call::get("/")).await, "ok", "{face}");
    }
    assert_eq!(utilization(&engine, "d"), None);
}

/// With the default 10 s blackout, reports count once the destination has reported for 10 s of
/// the engine's clock.
#[tokio::test]
async fn reports_count_once_the_blackout_is_over() {
    let server =
        HttpServer::start(|_| Reply::text(200, "d").header(HEADER, "TEXT cpu_utilization=0.6"))
            .await;
    let clock = Arc::new(ManualClock::new());
    let engine = Engine::builder()
        .clock(clock.clone())
        .build_with(Config::new().cluster(cluster(&[("d", server.url())], Duration::from_secs(10))))
        .unwrap();
    for face in Face::all(&engine) {
        ok(&face, &Call::get("/")).await;
    }
    assert_eq!(utilization(&engine, "d"), None, "in the blackout");
    clock.advance(Duration::from_secs(10));
    assert_eq!(utilization(&engine, "d"), kept(0.6));
}

/// RoundRobin reads no latency, yet every answer through each face feeds the estimate: the
/// answering attempt's time, at least the backend's delay.
#[tokio::test]
async fn every_answer_feeds_the_latency_estimate_whatever_the_policy() {
    let server =
        HttpServer::start(|_| Reply::text(200, "slow").delay(Duration::from_millis(30))).await;
    for i in 0..Face::count() {
        let engine = Engine::builder()
            .build_with(
                Config::new().cluster(
                    ClusterConfig::new("c")
                        .load_balancing_policy("RoundRobin")
                        .destination(DestinationConfig::new("slow", server.url())),
                ),
            )
            .unwrap();
        let face = Face::nth(&engine, i);
        assert_eq!(destination(&engine, "c", "slow").latency, None);
        assert_eq!(ok(&face, &Call::get("/")).await, "slow");
        let latency = destination(&engine, "c", "slow").latency;
        assert!(
            latency.is_some_and(|l| l >= Duration::from_millis(30)),
            "{face}: {latency:?}"
        );
    }
}

//! The service side: health payload reading, the status-code rule, draining, and the
//! axum endpoints on a real server (feature `axum`).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use healthpick::service::{status_code, Draining, HealthPayload};
use healthpick::ReportedHealth;
use tokio::time::{advance, timeout, Instant};

// ---- payload ---------------------------------------------------------------------------------

#[test]
fn payload_full() {
    let p = HealthPayload::parse(
        br#"{"status":"Healthy","version":"1.4.2","environment":"prod","hostname":"eu-2"}"#,
    )
    .unwrap();
    assert_eq!(p.reported(), Some(ReportedHealth::Healthy));
    assert_eq!(p.version.as_deref(), Some("1.4.2"));
    assert_eq!(p.environment.as_deref(), Some("prod"));
    assert_eq!(p.hostname.as_deref(), Some("eu-2"));
    assert_eq!(
        p,
        HealthPayload::new(ReportedHealth::Healthy)
            .version("1.4.2")
            .environment("prod")
            .hostname("eu-2")
    );
}

#[test]
fn payload_partial() {
    let p = HealthPayload::parse(br#"{"status":"Degraded"}"#).unwrap();
    assert_eq!(p, HealthPayload::new(ReportedHealth::Degraded));

    // An object without a status is still a payload, with no reported status: a probe treats the
    // 2xx as a plain success.
    let p = HealthPayload::parse(br#" {"version": "2"} "#).unwrap();
    assert_eq!(p.reported(), None);
    assert_eq!(p.version.as_deref(), Some("2"));
    assert_eq!(HealthPayload::parse(b"{}"), Some(HealthPayload::default()));
}

#[test]
fn payload_ignores_unknown_fields() {
    let p = HealthPayload::parse(
        br#"{"uptime": 12.5, "checks": [{"name": "db", "ok": true}], "status": "Unhealthy",
            "meta": {"status": "Healthy"}, "x": null}"#,
    )
    .unwrap();
    assert_eq!(p.reported(), Some(ReportedHealth::Unhealthy));
}

#[test]
fn payload_status_is_case_insensitive() {
    for (text, want) in [
        ("degraded", ReportedHealth::Degraded),
        ("HEALTHY", ReportedHealth::Healthy),
        ("unHealthy", ReportedHealth::Unhealthy),
        (" Degraded ", ReportedHealth::Degraded),
    ] {
        let body = format!(r#"{{"status": "{text}"}}"#);
        let p = HealthPayload::parse(body.as_bytes()).unwrap();
        assert_eq!(p.reported(), Some(want), "{body}");
    }
}

#[test]
fn payload_unknown_status_is_no_status() {
    for status in [
        r#""UP""#,
        r#""Warning""#,
        r#""""#,
        "1",
        "true",
        "null",
        "[]",
        "{}",
    ] {
        let body = format!(r#"{{"status": {status}, "version": "v9"}}"#);
        let p = HealthPayload::parse(body.as_bytes())
            .unwrap_or_else(|| panic!("{body} should be a payload"));
        assert_eq!(p.reported(), None, "{body}");
        assert_eq!(p.version.as_deref(), Some("v9"), "{body}");
        assert_eq!(status_code(p.reported()), 503);
    }
}

#[test]
fn payload_rejects_what_is_not_a_json_object() {
    for body in [
        &b""[..],
        b"   ",
        b"OK",
        b"<html><body>Healthy</body></html>",
        b"Healthy",
        br#""Healthy""#,
        br#"[{"status":"Healthy"}]"#,
        b"[]",
        b"null",
        b"42",
        b"{",
        br#"{"status":"Healthy""#,
        br#"{"status":"Healthy"} trailing"#,
        b"\xff\xfe{}",
    ] {
        assert_eq!(
            HealthPayload::parse(body),
            None,
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn payload_64k_garbage_does_not_panic() {
    let garbage: Vec<u8> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    assert_eq!(HealthPayload::parse(&garbage), None);

    let mut opening = vec![b'{'; 64 * 1024];
    assert_eq!(HealthPayload::parse(&opening), None);
    opening[0] = b' ';
    assert_eq!(HealthPayload::parse(&opening), None);

    // A valid object that fills the whole bounded body, and the same body cut short as a probe
    // would read it.
    let big = format!(
        r#"{{"padding": "{}", "status": "Degraded"}}"#,
        "x".repeat(64 * 1024 - 40)
    );
    assert_eq!(
        HealthPayload::parse(big.as_bytes()).unwrap().reported(),
        Some(ReportedHealth::Degraded)
    );
    assert_eq!(HealthPayload::parse(&big.as_bytes()[..40_000]), None);
}

#[test]
fn payload_deeply_nested_json_does_not_panic() {
    let depth = 100_000;
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));

    // At the top level: not an object.
    assert_eq!(HealthPayload::parse(nested.as_bytes()), None);
    // Deep objects at the top level: over the recursion limit, or not a payload; either way None
    // or a status-less payload, never a stack overflow.
    let objects = format!("{}{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    assert_eq!(
        HealthPayload::parse(objects.as_bytes()).and_then(|p| p.reported()),
        None
    );
    // Inside an ignored field: skipped, the status is still read.
    let body = format!(r#"{{"status":"Degraded","x":{nested}}}"#);
    assert_eq!(
        HealthPayload::parse(body.as_bytes()).unwrap().reported(),
        Some(ReportedHealth::Degraded)
    );
    // Inside the status itself: no status.
    let body = format!(r#"{{"status":{nested},"version":"v"}}"#);
    let p = HealthPayload::parse(body.as_bytes()).unwrap();
    assert_eq!((p.reported(), p.version.as_deref()), (None, Some("v")));
}

#[test]
fn payload_serializes_with_lower_case_names_and_omits_absent_fields() {
    let p = HealthPayload::new(ReportedHealth::Unhealthy)
        .version("1")
        .environment("prod")
        .hostname("h");
    assert_eq!(
        serde_json::to_string(&p).unwrap(),
        r#"{"status":"Unhealthy","version":"1","environment":"prod","hostname":"h"}"#
    );
    assert_eq!(
        serde_json::to_string(&HealthPayload::default()).unwrap(),
        "{}"
    );
    // What a service writes, a probe reads back.
    let json = serde_json::to_vec(&p).unwrap();
    assert_eq!(HealthPayload::parse(&json), Some(p));
}

#[test]
fn status_code_mapping() {
    assert_eq!(status_code(Some(ReportedHealth::Healthy)), 200);
    assert_eq!(status_code(Some(ReportedHealth::Degraded)), 200);
    assert_eq!(status_code(Some(ReportedHealth::Unhealthy)), 503);
    assert_eq!(status_code(None), 503);
    assert_eq!(HealthPayload::default().status_code(), 503);
}

// ---- draining --------------------------------------------------------------------------------

/// Polls `fut` once without a runtime waker; time moves only through `advance`.
fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn draining_defaults() {
    let d = Draining::new();
    assert_eq!(d.status(), ReportedHealth::Healthy);
    assert_eq!(d.delay(), Duration::from_secs(10));
    assert_eq!(d.status_while_draining(), ReportedHealth::Degraded);
    assert!(!d.is_draining());
    assert_eq!(d.remaining(), None);
    assert_eq!(d.payload().reported(), Some(ReportedHealth::Healthy));
    assert_eq!(d.payload().status_code(), 200);

    d.start();
    assert!(d.is_draining());
    assert_eq!(d.status(), ReportedHealth::Degraded);
    assert_eq!(d.payload().status_code(), 200);
}

#[test]
fn draining_payload_carries_builder_fields() {
    let d = Draining::builder()
        .version("1.4.2")
        .environment("staging")
        .hostname("pod-7")
        .build();
    assert_eq!(
        d.payload(),
        HealthPayload::new(ReportedHealth::Healthy)
            .version("1.4.2")
            .environment("staging")
            .hostname("pod-7")
    );
}

#[tokio::test(start_paused = true)]
async fn drain_flips_at_once_and_completes_after_exactly_the_delay() {
    let delay = Duration::from_secs(10);
    let d = Draining::new();
    let mut drain = pin!(d.drain());

    assert!(poll_once(drain.as_mut()).is_pending());
    assert!(d.is_draining());
    assert_eq!(d.status(), ReportedHealth::Degraded);

    advance(delay - Duration::from_millis(1)).await;
    assert!(
        poll_once(drain.as_mut()).is_pending(),
        "done before the delay"
    );
    assert_eq!(d.remaining(), Some(Duration::from_millis(1)));

    advance(Duration::from_millis(1)).await;
    assert!(
        poll_once(drain.as_mut()).is_ready(),
        "not done at the delay"
    );
    assert_eq!(d.remaining(), Some(Duration::ZERO));
    assert_eq!(
        d.status(),
        ReportedHealth::Degraded,
        "still draining after the delay"
    );
}

#[tokio::test(start_paused = true)]
async fn drain_takes_the_delay_of_the_builder() {
    let d = Draining::builder()
        .delay(Duration::from_millis(2500))
        .build();
    let t0 = Instant::now();
    assert!(timeout(Duration::from_millis(2499), d.drain())
        .await
        .is_err());
    assert!(d.is_draining());
    // A second drain waits only for the rest of the delay counted from the first start.
    d.drain().await;
    assert_eq!(t0.elapsed(), Duration::from_millis(2500));
}

#[tokio::test(start_paused = true)]
async fn drain_with_unhealthy_status() {
    let d = Draining::builder()
        .status_while_draining(ReportedHealth::Unhealthy)
        .delay(Duration::from_secs(1))
        .build();
    assert_eq!(d.payload().status_code(), 200);
    d.drain().await;
    assert_eq!(d.status(), ReportedHealth::Unhealthy);
    assert_eq!(d.payload().status_code(), 503);
}

#[tokio::test(start_paused = true)]
async fn start_is_idempotent_and_does_not_restart_the_delay() {
    let d = Draining::new();
    let mut changes = d.subscribe();
    d.start();
    assert!(changes.has_changed().unwrap());
    assert_eq!(*changes.borrow_and_update(), ReportedHealth::Degraded);

    advance(Duration::from_secs(4)).await;
    d.start();
    d.clone().start();
    assert!(
        !changes.has_changed().unwrap(),
        "a second start publishes nothing"
    );
    assert_eq!(d.remaining(), Some(Duration::from_secs(6)));

    let t0 = Instant::now();
    d.drain().await;
    assert_eq!(t0.elapsed(), Duration::from_secs(6));
}

#[tokio::test(start_paused = true)]
async fn shutdown_signal_waits_for_the_signal_first() {
    let d = Draining::builder().delay(Duration::from_secs(3)).build();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut shutdown = pin!(d.shutdown_signal(rx));

    assert!(poll_once(shutdown.as_mut()).is_pending());
    advance(Duration::from_secs(60)).await;
    assert!(poll_once(shutdown.as_mut()).is_pending());
    assert!(!d.is_draining(), "draining before the signal");
    assert_eq!(d.status(), ReportedHealth::Healthy);

    tx.send(()).unwrap();
    assert!(poll_once(shutdown.as_mut()).is_pending());
    assert!(d.is_draining());
    assert_eq!(d.status(), ReportedHealth::Degraded);

    advance(Duration::from_millis(2999)).await;
    assert!(poll_once(shutdown.as_mut()).is_pending());
    advance(Duration::from_millis(1)).await;
    assert!(poll_once(shutdown.as_mut()).is_ready());
}

#[tokio::test(start_paused = true)]
async fn shutdown_signal_is_static_and_send() {
    // The shape `with_graceful_shutdown` and `tokio::spawn` need.
    let d = Draining::builder().delay(Duration::from_secs(1)).build();
    let task = tokio::spawn(d.shutdown_signal(tokio::time::sleep(Duration::from_secs(5))));
    let t0 = Instant::now();
    task.await.unwrap();
    assert_eq!(t0.elapsed(), Duration::from_secs(6));
    assert!(d.is_draining());
}

#[test]
fn set_status_before_and_during_draining() {
    let d = Draining::new();
    let mut changes = d.subscribe();
    assert!(d.set_status(ReportedHealth::Degraded));
    assert_eq!(d.status(), ReportedHealth::Degraded);
    assert_eq!(*changes.borrow_and_update(), ReportedHealth::Degraded);
    assert!(
        !d.set_status(ReportedHealth::Degraded),
        "no change, no notification"
    );
    assert!(!changes.has_changed().unwrap());

    assert!(d.set_status(ReportedHealth::Healthy));
    d.start();
    assert_eq!(d.status(), ReportedHealth::Degraded);
    // While draining, a better own status does not undo draining; a worse one shows.
    assert!(!d.set_status(ReportedHealth::Healthy));
    assert_eq!(d.status(), ReportedHealth::Degraded);
    assert!(d.set_status(ReportedHealth::Unhealthy));
    assert_eq!(d.status(), ReportedHealth::Unhealthy);
}

#[test]
fn details_report_draining() {
    let d = Draining::builder().delay(Duration::from_secs(2)).build();
    let before = serde_json::to_value(d.details()).unwrap();
    assert_eq!(before["status"], "Healthy");
    assert_eq!(before["draining"], false);
    assert_eq!(before["status_while_draining"], "Degraded");
    assert_eq!(before["drain_delay_ms"], 2000);
    assert!(before.get("drain_remaining_ms").is_none());

    d.start();
    let during = serde_json::to_value(d.details()).unwrap();
    assert_eq!(during["status"], "Degraded");
    assert_eq!(during["draining"], true);
    assert!(during["drain_remaining_ms"].as_u64().unwrap() <= 2000);
}

// ---- axum endpoints on a real server ---------------------------------------------------------

#[cfg(feature = "axum")]
mod axum_endpoints {
    use std::future::IntoFuture;

    use super::*;
    use healthpick::service::health_router;
    use tokio::net::TcpListener;

    /// Serves `health_router(draining)` on 127.0.0.1:0 until the test ends; returns the base URL.
    async fn serve(draining: Draining) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, health_router(draining)).await });
        format!("http://{addr}")
    }

    fn client() -> reqwest::Client {
        reqwest::Client::builder().no_proxy().build().unwrap()
    }

    /// GETs `url`; returns the status, the content type and the JSON body.
    async fn get(url: &str) -> (u16, String, serde_json::Value) {
        let response = client().get(url).send().await.unwrap();
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let body = response.text().await.unwrap();
        let json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body}: {e}"));
        (status, content_type, json)
    }

    #[tokio::test]
    async fn systemstatus_is_healthy_then_degraded_while_draining() {
        let d = Draining::builder().version("1.4.2").hostname("h").build();
        let base = serve(d.clone()).await;

        let (status, content_type, body) = get(&format!("{base}/api/systemstatus")).await;
        assert_eq!(status, 200);
        assert_eq!(content_type, "application/json");
        assert_eq!(
            body,
            serde_json::json!({"status": "Healthy", "version": "1.4.2", "hostname": "h"})
        );

        d.start();
        let (status, _, body) = get(&format!("{base}/api/systemstatus")).await;
        assert_eq!(status, 200);
        assert_eq!(body["status"], "Degraded");
        // What a caller's probe reads from it.
        let payload = HealthPayload::parse(body.to_string().as_bytes()).unwrap();
        assert_eq!(payload.reported(), Some(ReportedHealth::Degraded));
    }

    #[tokio::test]
    async fn systemstatus_answers_503_when_draining_unhealthy() {
        let d = Draining::builder()
            .status_while_draining(ReportedHealth::Unhealthy)
            .build();
        let base = serve(d.clone()).await;
        d.start();
        let (status, content_type, body) = get(&format!("{base}/api/systemstatus")).await;
        assert_eq!(status, 503);
        assert_eq!(content_type, "application/json");
        assert_eq!(body["status"], "Unhealthy");
    }

    #[tokio::test]
    async fn details_include_draining() {
        let d = Draining::builder()
            .delay(Duration::from_secs(30))
            .environment("test")
            .build();
        let base = serve(d.clone()).await;

        let (status, content_type, body) = get(&format!("{base}/api/health/details")).await;
        assert_eq!((status, content_type.as_str()), (200, "application/json"));
        assert_eq!(body["draining"], false);
        assert_eq!(body["environment"], "test");
        assert_eq!(body["drain_delay_ms"], 30_000);

        d.start();
        let (status, _, body) = get(&format!("{base}/api/health/details")).await;
        assert_eq!(status, 200);
        assert_eq!(body["draining"], true);
        assert_eq!(body["status"], "Degraded");
        assert!(body["drain_remaining_ms"].as_u64().unwrap() <= 30_000);
    }

    #[tokio::test]
    async fn graceful_shutdown_keeps_serving_during_the_delay() {
        let d = Draining::builder()
            .delay(Duration::from_millis(400))
            .build();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(
            axum::serve(listener, health_router(d.clone()))
                .with_graceful_shutdown(d.shutdown_signal(rx))
                .into_future(),
        );

        assert_eq!(get(&format!("{base}/api/systemstatus")).await.0, 200);
        let t0 = std::time::Instant::now();
        tx.send(()).unwrap();
        // Draining flips as soon as the signal is seen; the server still answers.
        while !d.is_draining() {
            tokio::task::yield_now().await;
        }
        let (status, _, body) = get(&format!("{base}/api/systemstatus")).await;
        assert_eq!((status, body["status"].as_str()), (200, Some("Degraded")));

        timeout(Duration::from_secs(10), server)
            .await
            .expect("server stops after the delay")
            .unwrap()
            .unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(400));
    }
}

//! Record a live engine against real local servers, replay the recording in the simulator, and
//! get the same health transitions.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use healthpick::simulate::{Recorder, Scenario, Simulation};
use healthpick::{
    ActiveMonitor, Engine, HealthAwareClient, HealthEvent, HealthEventKind, HealthState, PartValue,
};
use serde_json::Value;

use crate::support::faulty_servers::ClosedPort;
use crate::support::servers::{HttpServer, Reply};
use crate::support::status::destination;
use crate::support::waits::eventually;

const WAIT: Duration = Duration::from_secs(10);

/// A writer the test can read back after the recorder is done.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// (cluster, part) -> the sequence of (destination, from, to), in order.
type Transitions = BTreeMap<(String, String), Vec<(String, String, String)>>;

fn part_text(v: &PartValue) -> String {
    match v {
        PartValue::State(s) => s.to_string(),
        PartValue::Reported(Some(r)) => r.to_string(),
        PartValue::Reported(None) => "null".into(),
        other => other.to_string(),
    }
}

fn live_transitions(events: &[HealthEvent]) -> Transitions {
    let mut out = Transitions::new();
    for e in events {
        if let HealthEventKind::HealthChanged {
            destination,
            part,
            from,
            to,
            ..
        } = &e.kind
        {
            out.entry((e.cluster.to_string(), part.to_string()))
                .or_default()
                .push((destination.to_string(), part_text(from), part_text(to)));
        }
    }
    out
}

fn replayed_transitions(lines: &[String]) -> Transitions {
    let mut out = Transitions::new();
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["type"] != "health" {
            continue;
        }
        let text = |k: &str| match &v[k] {
            Value::String(s) => s.clone(),
            _ => "null".to_string(),
        };
        out.entry((text("cluster"), text("part")))
            .or_default()
            .push((text("destination"), text("from"), text("to")));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_live_run_replays_to_the_same_health_transitions() {
    // `flaky` answers by mode: 0 healthy payload, 1 HTTP 500, 2 Degraded payload.
    let mode = Arc::new(AtomicU8::new(0));
    let m = mode.clone();
    let flaky = HttpServer::start(move |_| match m.load(Ordering::SeqCst) {
        0 => Reply::payload("Healthy"),
        1 => Reply::status(500),
        _ => Reply::payload("Degraded"),
    })
    .await;
    let steady = HttpServer::start(|_| Reply::payload("Healthy")).await;
    let closed = ClosedPort::reserve();
    let dead = closed.url();

    let config = format!(
        r#"{{
      // probed cluster: ConsecutiveFailures, threshold 2
      "HealthPolicies": {{ "MinimalTotalCountThreshold": 3 }},
      "Clusters": {{
        "probed": {{
          "HealthCheck": {{ "Active": {{ "Enabled": true, "Interval": "00:00:00.050", "Timeout": "00:00:02", "Path": "/health" }} }},
          "Destinations": {{
            "flaky":  {{ "Address": "{flaky}" }},
            "steady": {{ "Address": "{steady}" }}
          }}
        }},
        "observed": {{
          "LoadBalancingPolicy": "RoundRobin",
          "HealthCheck": {{ "Passive": {{ "Enabled": true }} }},
          "Destinations": {{
            "steady": {{ "Address": "{steady}" }},
            "dead":   {{ "Address": "{dead}" }}
          }}
        }}
      }}
    }}"#,
        flaky = flaky.url(),
        steady = steady.url(),
    );

    let buffer = Shared::default();
    let recorder = Arc::new(Recorder::new(buffer.clone()).with_config(&config));
    let engine = Engine::builder().observer(recorder.clone()).build();
    let mut live = engine.subscribe();
    engine.load_json(&config).unwrap();
    let monitor = ActiveMonitor::start(&engine);

    let active_is = |id: &str, state: HealthState| {
        let engine = engine.clone();
        let id = id.to_string();
        move || (destination(&engine, "probed", &id).active == state).then_some(())
    };
    eventually(
        "flaky healthy",
        WAIT,
        active_is("flaky", HealthState::Healthy),
    )
    .await;
    eventually(
        "steady healthy",
        WAIT,
        active_is("steady", HealthState::Healthy),
    )
    .await;
    mode.store(1, Ordering::SeqCst);
    eventually(
        "flaky ejected",
        WAIT,
        active_is("flaky", HealthState::Unhealthy),
    )
    .await;
    mode.store(2, Ordering::SeqCst);
    eventually("flaky back, Degraded", WAIT, || {
        let d = destination(&engine, "probed", "flaky");
        (d.active == HealthState::Healthy && d.reported.is_some()).then_some(())
    })
    .await;
    monitor.stop().await;

    // Real requests, one at a time: the dead destination refuses, the client fails over, and the
    // passive policy ejects it once the window holds 3 outcomes with a rate >= 0.3.
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let client = HealthAwareClient::new(http, engine.clone());
    for _ in 0..8 {
        let response = client
            .get("observed", "/work")
            .send()
            .await
            .expect("failover hides the dead one");
        assert_eq!(response.destination().id(), "steady");
    }
    assert_eq!(
        destination(&engine, "observed", "dead").passive,
        HealthState::Unhealthy
    );
    recorder.finish().unwrap();

    let mut events = Vec::new();
    while let Ok(e) = live.try_recv() {
        events.push(e);
    }
    let live = live_transitions(&events);

    let recording = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    let scenario = Scenario::from_json(&recording).expect("the recording is a valid scenario");
    assert!(
        recording.contains(r#""probe":{"cluster":"probed""#),
        "{recording}"
    );
    assert!(
        recording.contains(r#""outcome":"transport-failure""#),
        "{recording}"
    );
    assert!(scenario.event_count() > 8);
    let lines = Simulation::new(scenario)
        .run()
        .expect("the recording replays");
    let replayed = replayed_transitions(&lines);

    // The run went through ejection, return, a Degraded report and a passive ejection ...
    let key = |c: &str, p: &str| (c.to_string(), p.to_string());
    let flaky_active: Vec<&(String, String, String)> = live[&key("probed", "active")]
        .iter()
        .filter(|t| t.0 == "flaky")
        .collect();
    assert_eq!(
        flaky_active
            .iter()
            .map(|t| t.2.as_str())
            .collect::<Vec<_>>(),
        ["Healthy", "Unhealthy", "Healthy"]
    );
    assert!(live[&key("probed", "reported")]
        .iter()
        .any(|t| t.2 == "Degraded"));
    assert!(live[&key("observed", "passive")]
        .iter()
        .any(|t| t.0 == "dead" && t.2 == "Unhealthy"));
    // ... and the replay reproduces every transition, part by part, in order.
    assert_eq!(replayed, live);
}

//! Tracing events: every health transition and panic entry/exit is logged under
//! target `healthpick` with cluster, destination, part, from, to and reason.
//!
//! Alone in its binary: tracing caches per-callsite interest process-wide, so a thread-local
//! subscriber can miss events while other tests run on other threads.

#[path = "support/logging.rs"]
mod logging;

use healthpick::config::{ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig};
use healthpick::{Engine, ProbeResult};
use logging::Captured;

fn two_destinations(id: &str) -> ClusterConfig {
    ClusterConfig::new(id)
        .active(ActiveHealthCheckConfig::enabled())
        .metadata("ConsecutiveFailuresHealthPolicy.Threshold", "1")
        .destination(DestinationConfig::new("a", "http://127.0.0.1:1/"))
        .destination(DestinationConfig::new("b", "http://127.0.0.1:2/"))
}

// --------------------------------------------------------------------------------

#[test]
fn transitions_and_panic_are_logged_at_info_with_their_fields() {
    use tracing_subscriber::layer::SubscriberExt;
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    tracing::subscriber::with_default(subscriber, || {
        let engine = Engine::new(Config::new().cluster(two_destinations("pay"))).unwrap();
        engine
            .report_probe_round(
                "pay",
                &[ProbeResult::status("a", 503), ProbeResult::status("b", 503)],
            )
            .unwrap();
    });
    let events = captured.0.lock().unwrap();
    let field = |fields: &Vec<(String, String)>, name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let to_unhealthy: Vec<_> = events
        .iter()
        .filter(|(level, target, f)| {
            *level == tracing::Level::INFO
                && target == "healthpick"
                && field(f, "to") == "Unhealthy"
        })
        .collect();
    assert_eq!(to_unhealthy.len(), 2, "{events:#?}");
    let (_, _, f) = to_unhealthy[0];
    assert_eq!(field(f, "cluster"), "pay");
    assert_eq!(field(f, "destination"), "a");
    assert_eq!(field(f, "part"), "active");
    assert_eq!(field(f, "from"), "Unknown");
    assert!(field(f, "reason").contains("HTTP 503"), "{f:?}");
    assert!(
        events
            .iter()
            .any(|(level, target, f)| *level == tracing::Level::INFO
                && target == "healthpick"
                && field(f, "message").contains("entering panic")),
        "{events:#?}"
    );
}

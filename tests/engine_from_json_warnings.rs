//! `Engine::from_json` keeps its warnings: it logs each at WARN under target `healthpick`, with
//! its key path (`Engine::default().load_json(text)` returns them instead).
//!
//! Alone in its binary: tracing caches per-callsite interest process-wide.

#[path = "support/logging.rs"]
mod logging;

use healthpick::Engine;
use logging::Captured;

const MISSPELT: &str = r#"{ "ReverseProxy": { "Clusters": { "payments": {
  "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/", "Priorty": 1 } } } } } }"#;

#[test]
fn from_json_logs_each_warning_and_load_json_returns_them() {
    use tracing_subscriber::layer::SubscriberExt;
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    tracing::subscriber::with_default(subscriber, || {
        let engine = Engine::from_json(MISSPELT).expect("a warning does not refuse the file");
        assert!(engine.has_cluster("payments"));
    });
    let events = captured.0.lock().unwrap();
    let warnings: Vec<_> = events
        .iter()
        .filter(|(level, target, _)| *level == tracing::Level::WARN && target == "healthpick")
        .collect();
    assert_eq!(warnings.len(), 1, "{events:#?}");
    let fields = &warnings[0].2;
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        field("path"),
        "ReverseProxy:Clusters:payments:Destinations:eu-1:Priorty"
    );
    assert_eq!(
        field("message"),
        "cluster `payments`: destination `eu-1`: unknown key `Priorty`; did you mean `Priority`?"
    );

    let returned = Engine::default().load_json(MISSPELT).expect("loads");
    assert_eq!(returned.len(), 1);
    assert_eq!(
        returned[0].path,
        "ReverseProxy:Clusters:payments:Destinations:eu-1:Priorty"
    );
}

//! The engine's record of its configuration loads: `EngineStatus::config`
//! (generation, when and from where the configuration in force was loaded, the last refusal
//! since) and the `ConfigRejected` event every refused load emits, whoever loaded it.

use std::sync::Arc;
use std::time::Duration;

use healthpick::config::{ClusterConfig, Config, DestinationConfig};
use healthpick::{Engine, HealthEvent, HealthEventKind, ManualClock};
use tokio::sync::broadcast::Receiver;

const GOOD: &str =
    r#"{"Clusters": {"c": {"Destinations": {"a": {"Address": "http://127.0.0.1:1/"}}}}}"#;
const OTHER: &str =
    r#"{"Clusters": {"d": {"Destinations": {"b": {"Address": "http://127.0.0.1:2/"}}}}}"#;
const INVALID: &str = r#"{"Clusters": {"c": {"LoadBalancingPolicy": "Nope"}}}"#;

fn engine() -> (Engine, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let engine = Engine::builder().clock(clock.clone()).build();
    (engine, clock)
}

fn drain(rx: &mut Receiver<HealthEvent>) -> Vec<HealthEvent> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// The `ConfigRejected` events among `events`, as (origin, errors).
fn rejections(events: &[HealthEvent]) -> Vec<(Option<String>, Vec<String>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            HealthEventKind::ConfigRejected { origin, errors } => {
                assert_eq!(&*e.cluster, "", "about the whole engine");
                Some((origin.as_deref().map(str::to_string), errors.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn an_engine_without_a_configuration_says_so() {
    let (engine, _) = engine();
    let config = engine.status().config;
    assert_eq!(config.generation, 0);
    assert_eq!(config.loaded_at, None);
    assert_eq!(config.origin, None);
    assert_eq!(config.last_error, None);
}

#[test]
fn an_accepted_load_records_its_generation_time_and_origin() {
    let (engine, clock) = engine();
    clock.set(Duration::from_secs(5));
    engine.load_json_from("/etc/app/a.json", GOOD).unwrap();
    let config = engine.status().config;
    assert_eq!(config.generation, 1);
    assert_eq!(config.loaded_at, Some(Duration::from_secs(5)));
    assert_eq!(config.origin.as_deref(), Some("/etc/app/a.json"));
    assert_eq!(config, engine.config_status());

    // A load that names no origin replaces it.
    clock.set(Duration::from_secs(7));
    engine.load_json(OTHER).unwrap();
    let config = engine.status().config;
    assert_eq!(config.generation, 2);
    assert_eq!(config.loaded_at, Some(Duration::from_secs(7)));
    assert_eq!(config.origin, None);
    assert_eq!(engine.cluster_ids(), ["d"]);
}

#[test]
fn a_refused_load_json_emits_config_rejected_and_shows_until_a_good_load() {
    let (engine, clock) = engine();
    engine.load_json_from("a.json", GOOD).unwrap();
    let mut events = engine.subscribe();

    clock.set(Duration::from_secs(3));
    let err = engine.load_json(INVALID).unwrap_err();
    let seen = rejections(&drain(&mut events));
    assert_eq!(seen.len(), 1, "{seen:?}");
    let (origin, errors) = &seen[0];
    assert_eq!(*origin, None, "load_json names no origin");
    assert_eq!(
        *errors,
        err.errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    assert!(errors[0].contains("Nope"), "{errors:?}");

    let config = engine.status().config;
    assert_eq!(config.generation, 1, "a refusal is not a generation");
    assert_eq!(config.origin.as_deref(), Some("a.json"), "the one in force");
    let last = config.last_error.expect("the refusal shows");
    assert_eq!(last.at, Duration::from_secs(3));
    assert_eq!(last.origin, None);
    assert_eq!(last.errors, *errors);
    assert_eq!(
        engine.cluster_ids(),
        ["c"],
        "the configuration in force stays"
    );

    // A document that is not JSON at all, from a named origin.
    engine
        .load_json_from("b.json", "{ \"Clusters\": ")
        .unwrap_err();
    let seen = rejections(&drain(&mut events));
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0.as_deref(), Some("b.json"));
    assert!(!seen[0].1.is_empty());
    assert_eq!(
        engine
            .status()
            .config
            .last_error
            .and_then(|e| e.origin)
            .as_deref(),
        Some("b.json")
    );

    // A good load clears it.
    engine.load_json_from("b.json", OTHER).unwrap();
    let config = engine.status().config;
    assert_eq!(config.generation, 2);
    assert_eq!(config.last_error, None);
    assert_eq!(config.origin.as_deref(), Some("b.json"));
    assert!(rejections(&drain(&mut events)).is_empty());
}

#[test]
fn a_refused_apply_config_is_a_rejection_too() {
    let (engine, _) = engine();
    engine.load_json(GOOD).unwrap();
    let mut events = engine.subscribe();
    let bad = Config::new()
        .cluster(ClusterConfig::new("c").destination(DestinationConfig::new("a", "not a url")));
    engine.apply_config(bad).unwrap_err();
    let seen = rejections(&drain(&mut events));
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, None);
    assert!(engine.status().config.last_error.is_some());
    assert_eq!(engine.status().config.generation, 1);
}

/// A status taken while a reload runs shows the configuration before it or after it, never a
/// mix: here cluster `c` has destination `a` in odd generations and `a`, `b` in even ones, and
/// a second thread keeps reloading while this one reads the status.
#[test]
fn a_status_never_mixes_two_configurations() {
    fn config(with_b: bool) -> Config {
        let mut cluster =
            ClusterConfig::new("c").destination(DestinationConfig::new("a", "http://127.0.0.1:1/"));
        if with_b {
            cluster = cluster.destination(DestinationConfig::new("b", "http://127.0.0.1:2/"));
        }
        Config::new().cluster(cluster)
    }
    const RELOADS: u64 = 2_000;
    let (engine, _clock) = engine();
    engine.apply_config(config(false)).unwrap();
    let reloader = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            for generation in 2..=RELOADS + 1 {
                engine.apply_config(config(generation % 2 == 0)).unwrap();
            }
        })
    };
    let mut seen = 0u64;
    while seen <= RELOADS {
        let status = engine.status();
        let generation = status.config.generation;
        let ids: Vec<&str> = status.clusters[0]
            .destinations
            .iter()
            .map(|d| d.id.as_str())
            .collect();
        let expected: &[&str] = if generation % 2 == 0 {
            &["a", "b"]
        } else {
            &["a"]
        };
        assert_eq!(ids, expected, "generation {generation}");
        seen = generation;
    }
    reloader.join().unwrap();
}

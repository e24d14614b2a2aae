#![cfg(feature = "file")]
//! The watched configuration file (feature `file`) against real files in a temporary
//! directory: saves by rename, a ConfigMap's `..data` symlink swap, a file truncated and written
//! in place, a bad document in between, the file deleted and created again.
//!
//! Nothing here sleeps and hopes: each step waits for what it expects to see (the engine's
//! status or an event) with a deadline, and fails with what it saw instead. Every watch ends
//! with its test (its handle joins its thread on drop), and every directory is removed.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use healthpick::discovery::{ConfigFile, FileError, FileWatch};
use healthpick::{Engine, EngineStatus, HealthEvent, HealthEventKind, HealthState, ProbeResult};
use tokio::sync::broadcast::error::TryRecvError;
use tokio::sync::broadcast::Receiver;

/// How long any one expected change may take to show (generous: the suite shares two cores).
const DEADLINE: Duration = Duration::from_secs(15);
/// The tests' debounce delay: short, so that the suite is quick.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// A YARP document with cluster `orders` and these `(id, port)` destinations, active checks
/// enabled (nothing probes here: the tests hand in probe results) with a threshold of 1.
fn doc(destinations: &[(&str, u16)]) -> String {
    let destinations = destinations
        .iter()
        .map(|(id, port)| format!(r#""{id}": {{ "Address": "http://127.0.0.1:{port}/" }}"#))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"{{ "ReverseProxy": {{ "Clusters": {{ "orders": {{
            "HealthCheck": {{ "Active": {{ "Enabled": true }} }},
            "Metadata": {{ "ConsecutiveFailuresHealthPolicy.Threshold": "1" }},
            "Destinations": {{ {destinations} }} }} }} }} }}"#
    )
}

/// A document that parses but does not validate: an unknown load-balancing policy.
const INVALID: &str =
    r#"{ "ReverseProxy": { "Clusters": { "orders": { "LoadBalancingPolicy": "Nope" } } } }"#;

/// Writes `text` next to `path` and renames it over `path`, as editors save.
fn replace(path: &Path, text: &str) {
    let temp = path.with_extension("json.tmp");
    fs::write(&temp, text).expect("write the temporary file");
    fs::rename(&temp, path).expect("rename it over the file");
}

fn watch(engine: &Engine, path: &Path) -> FileWatch {
    ConfigFile::new(path)
        .debounce(DEBOUNCE)
        .watch(engine)
        .expect("the file loads and is watched")
}

/// The destination ids of `orders`, in order; empty when there is no such cluster.
fn destinations(status: &EngineStatus) -> Vec<String> {
    status
        .cluster("orders")
        .map(|c| c.destinations.iter().map(|d| d.id.clone()).collect())
        .unwrap_or_default()
}

/// Polls the engine's status until `done` holds, or fails after [`DEADLINE`] with `what` and
/// the last status seen.
fn wait_for(engine: &Engine, what: &str, done: impl Fn(&EngineStatus) -> bool) -> EngineStatus {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let status = engine.status();
        if done(&status) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; last status: {:?} {:?}",
            status.config,
            destinations(&status)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for `orders` to have exactly these destinations.
fn wait_for_destinations(engine: &Engine, ids: &[&str]) -> EngineStatus {
    wait_for(engine, &format!("destinations {ids:?}"), |s| {
        destinations(s) == ids
    })
}

/// Reads events until a `ConfigRejected` arrives (failing after [`DEADLINE`]); returns its
/// origin and errors. Other events are skipped.
fn next_rejection(events: &mut Receiver<HealthEvent>) -> (Option<String>, Vec<String>) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match events.try_recv() {
            Ok(HealthEvent {
                kind: HealthEventKind::ConfigRejected { origin, errors },
                ..
            }) => return (origin.as_deref().map(str::to_string), errors),
            Ok(_) | Err(TryRecvError::Lagged(_)) => {}
            Err(TryRecvError::Empty) => {
                assert!(
                    Instant::now() < deadline,
                    "timed out waiting for a ConfigRejected event"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(TryRecvError::Closed) => panic!("the engine is gone"),
        }
    }
}

/// The number of `ConfigRejected` events waiting now.
fn rejections_waiting(events: &mut Receiver<HealthEvent>) -> usize {
    let mut n = 0;
    while let Ok(event) = events.try_recv() {
        n += usize::from(matches!(event.kind, HealthEventKind::ConfigRejected { .. }));
    }
    n
}

fn origin(path: &Path) -> String {
    path.display().to_string()
}

/// A fresh temporary directory with `appsettings.json` holding `text`.
fn config_dir(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("appsettings.json");
    fs::write(&path, text).expect("write the configuration");
    (dir, path)
}

// ---------------------------------------------------------------------------------------------
// the first load

#[test]
fn watch_loads_the_file_before_it_returns() {
    let (_dir, path) = config_dir(&doc(&[("a", 1)]));
    let engine = Engine::default();
    let watch = watch(&engine, &path);
    // No waiting: the load happened inside `watch`.
    let status = engine.status();
    assert_eq!(destinations(&status), ["a"]);
    assert_eq!(status.config.generation, 1);
    assert_eq!(status.config.origin, Some(origin(&path)));
    assert!(status.config.loaded_at.is_some());
    assert_eq!(status.config.last_error, None);
    assert_eq!(watch.first_load(), Ok(&[][..]), "no warnings");
    assert_eq!(watch.path(), path);
}

#[test]
fn a_first_load_that_fails_is_an_error_and_nothing_is_watched() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::default();

    let missing = dir.path().join("missing.json");
    match ConfigFile::new(&missing).watch(&engine) {
        Err(FileError::Unreadable { path, kind, .. }) => {
            assert_eq!(path, missing);
            assert_eq!(kind, std::io::ErrorKind::NotFound);
        }
        other => panic!("expected Unreadable, got {other:?}"),
    }

    let invalid = dir.path().join("invalid.json");
    fs::write(&invalid, INVALID).unwrap();
    match ConfigFile::new(&invalid).watch(&engine) {
        Err(FileError::Rejected { path, error }) => {
            assert_eq!(path, invalid);
            assert!(error.errors[0].message.contains("Nope"), "{error}");
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    let last = engine
        .status()
        .config
        .last_error
        .expect("reported in the status");
    assert_eq!(last.origin, Some(origin(&invalid)));

    let nowhere = dir.path().join("no-such-dir").join("appsettings.json");
    match ConfigFile::new(&nowhere).watch(&engine) {
        Err(e @ FileError::Watch { .. }) => {
            assert!(e.to_string().contains("no-such-dir"), "{e}");
        }
        other => panic!("expected Watch, got {other:?}"),
    }
    assert!(engine.cluster_ids().is_empty());
}

#[test]
fn a_first_load_not_required_is_reported_and_the_first_good_version_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("appsettings.json");
    let engine = Engine::default();
    let watch = ConfigFile::new(&path)
        .debounce(DEBOUNCE)
        .require_first_load(false)
        .watch(&engine)
        .expect("the directory is watched");
    assert!(
        matches!(watch.first_load(), Err(FileError::Unreadable { .. })),
        "{:?}",
        watch.first_load()
    );
    let last = engine.status().config.last_error.expect("in the status");
    assert!(last.errors[0].contains("cannot read"), "{last:?}");
    assert_eq!(engine.status().config.generation, 0);

    replace(&path, &doc(&[("a", 1)]));
    let status = wait_for_destinations(&engine, &["a"]);
    assert_eq!(status.config.last_error, None);
    assert_eq!(status.config.origin, Some(origin(&path)));
}

// ---------------------------------------------------------------------------------------------
// how files change

#[test]
fn a_save_by_rename_reloads_and_surviving_destinations_keep_their_health() {
    let (_dir, path) = config_dir(&doc(&[("a", 1)]));
    let engine = Engine::default();
    let _watch = watch(&engine, &path);
    engine
        .report_probe_round("orders", &[ProbeResult::status("a", 200)])
        .unwrap();

    replace(&path, &doc(&[("a", 1), ("b", 2)]));
    let status = wait_for_destinations(&engine, &["a", "b"]);
    let orders = status.cluster("orders").unwrap();
    assert_eq!(
        orders.destination("a").unwrap().active,
        HealthState::Healthy,
        "a kept its health across the reload"
    );
    assert_eq!(
        orders.destination("b").unwrap().active,
        HealthState::Unknown
    );
    assert_eq!(status.config.generation, 2);

    // A second save: the watch follows the new file, not the inode it started with.
    replace(&path, &doc(&[("b", 2)]));
    wait_for_destinations(&engine, &["b"]);
}

#[cfg(unix)]
#[test]
fn a_configmap_symlink_swap_reloads() {
    use std::os::unix::fs::symlink;

    // What the kubelet lays out: `appsettings.json -> ..data/appsettings.json`,
    // `..data -> ..<timestamp>`, the files in the timestamped directory.
    let dir = tempfile::tempdir().unwrap();
    let version = |name: &str, text: &str| {
        let versioned = dir.path().join(name);
        fs::create_dir(&versioned).unwrap();
        fs::write(versioned.join("appsettings.json"), text).unwrap();
    };
    // An update: a new timestamped directory, a `..data_tmp` link to it renamed over `..data`,
    // then the old directory removed.
    let swap = |to: &str, old: &str| {
        let tmp = dir.path().join("..data_tmp");
        symlink(to, &tmp).unwrap();
        fs::rename(&tmp, dir.path().join("..data")).unwrap();
        fs::remove_dir_all(dir.path().join(old)).unwrap();
    };
    version("..2026_12_01_10_00_00.1", &doc(&[("a", 1)]));
    symlink("..2026_12_01_10_00_00.1", dir.path().join("..data")).unwrap();
    let path = dir.path().join("appsettings.json");
    symlink("..data/appsettings.json", &path).unwrap();

    let engine = Engine::default();
    let _watch = watch(&engine, &path);
    assert_eq!(destinations(&engine.status()), ["a"]);

    version("..2026_12_01_10_05_00.2", &doc(&[("a", 1), ("b", 2)]));
    swap("..2026_12_01_10_05_00.2", "..2026_12_01_10_00_00.1");
    wait_for_destinations(&engine, &["a", "b"]);

    // And again: the watch is on the directory, which outlives every version.
    version("..2026_12_01_10_10_00.3", &doc(&[("c", 3)]));
    swap("..2026_12_01_10_10_00.3", "..2026_12_01_10_05_00.2");
    let status = wait_for_destinations(&engine, &["c"]);
    assert_eq!(
        status.config.origin,
        Some(origin(&path)),
        "the path as given"
    );
    assert_eq!(status.config.last_error, None);
}

#[test]
fn a_file_truncated_then_written_never_loads_its_empty_or_partial_states() {
    let (_dir, path) = config_dir(&doc(&[("a", 1)]));
    let engine = Engine::default();
    let _watch = watch(&engine, &path);
    let mut events = engine.subscribe();

    // Truncated: an empty document is rejected, the configuration in force stays.
    let mut file = File::create(&path).unwrap();
    file.flush().unwrap();
    let (from, errors) = next_rejection(&mut events);
    assert_eq!(from, Some(origin(&path)));
    assert!(errors.iter().any(|e| e.contains("empty")), "{errors:?}");
    assert_eq!(destinations(&engine.status()), ["a"]);

    // Half of the new document: it does not parse, rejected too.
    let next = doc(&[("b", 2)]);
    let (head, tail) = next.split_at(next.len() / 2);
    file.write_all(head.as_bytes()).unwrap();
    file.flush().unwrap();
    let (from, errors) = next_rejection(&mut events);
    assert_eq!(from, Some(origin(&path)));
    assert!(!errors.is_empty());
    let status = engine.status();
    assert_eq!(destinations(&status), ["a"], "still the good one");
    assert_eq!(status.config.generation, 1);
    assert!(status.config.last_error.is_some());

    // The rest: now it is whole, and it applies.
    file.write_all(tail.as_bytes()).unwrap();
    file.flush().unwrap();
    drop(file);
    let status = wait_for_destinations(&engine, &["b"]);
    assert_eq!(status.config.generation, 2);
    assert_eq!(status.config.last_error, None);
}

#[test]
fn a_bad_document_keeps_the_config_in_force_and_is_reported_until_a_good_one() {
    let (_dir, path) = config_dir(&doc(&[("a", 1)]));
    let engine = Engine::default();
    let _watch = watch(&engine, &path);
    let mut events = engine.subscribe();

    replace(&path, INVALID);
    let (from, errors) = next_rejection(&mut events);
    assert_eq!(from, Some(origin(&path)), "the event names the file");
    assert!(errors.iter().any(|e| e.contains("Nope")), "{errors:?}");
    let status = engine.status();
    let last = status
        .config
        .last_error
        .clone()
        .expect("the status shows it");
    assert_eq!(last.origin, Some(origin(&path)));
    assert_eq!(last.errors, errors);
    assert_eq!(status.config.generation, 1, "nothing was applied");
    assert_eq!(destinations(&status), ["a"]);
    assert_eq!(
        engine.pick_endpoint("orders").unwrap().destination().id(),
        "a"
    );

    // Bytes that are not UTF-8 text: refused as well.
    fs::write(path.with_extension("json.tmp"), [0x7b, 0xff, 0x7d]).unwrap();
    fs::rename(path.with_extension("json.tmp"), &path).unwrap();
    let mut utf8 = None;
    while utf8.is_none() {
        let (_, errors) = next_rejection(&mut events);
        utf8 = errors.into_iter().find(|e| e.contains("not UTF-8"));
    }
    assert_eq!(destinations(&engine.status()), ["a"]);

    replace(&path, &doc(&[("b", 2)]));
    let status = wait_for_destinations(&engine, &["b"]);
    assert_eq!(
        status.config.last_error, None,
        "cleared by the good version"
    );
    assert_eq!(status.config.generation, 2);
}

#[test]
fn a_deleted_file_is_reported_and_loaded_again_when_it_returns() {
    let (_dir, path) = config_dir(&doc(&[("a", 1)]));
    let engine = Engine::default();
    let _watch = watch(&engine, &path);
    let mut events = engine.subscribe();

    fs::remove_file(&path).unwrap();
    let (from, errors) = next_rejection(&mut events);
    assert_eq!(from, Some(origin(&path)));
    assert!(errors[0].contains("cannot read"), "{errors:?}");
    let status = engine.status();
    assert_eq!(
        destinations(&status),
        ["a"],
        "the configuration in force stays"
    );
    assert!(status.config.last_error.is_some());

    replace(&path, &doc(&[("a", 1), ("b", 2)]));
    let status = wait_for_destinations(&engine, &["a", "b"]);
    assert_eq!(status.config.last_error, None);
}

#[test]
fn the_same_bytes_saved_again_are_not_reloaded() {
    let text = doc(&[("a", 1)]);
    let (_dir, path) = config_dir(&text);
    let engine = Engine::default();
    let _watch = watch(&engine, &path);
    let mut events = engine.subscribe();

    replace(&path, &text);
    replace(&path, &doc(&[("b", 2)]));
    let status = wait_for_destinations(&engine, &["b"]);
    assert_eq!(
        status.config.generation, 2,
        "one reload: the unchanged save loaded nothing"
    );
    assert_eq!(rejections_waiting(&mut events), 0);
}

// ---------------------------------------------------------------------------------------------
// the handle

#[test]
fn dropping_the_watch_ends_its_thread_and_lets_the_engine_go() {
    let (_dir, path) = config_dir(&doc(&[("a", 1)]));
    let engine = Engine::default();
    let watch = watch(&engine, &path);
    let mut events = engine.subscribe();
    drop(engine);
    // The watch keeps the engine alive while it runs...
    assert!(matches!(events.try_recv(), Err(TryRecvError::Empty)));
    // ...and dropping it joins its thread, so the engine is gone right after.
    drop(watch);
    loop {
        match events.try_recv() {
            Err(TryRecvError::Closed) => break,
            Ok(_) => {}
            other => panic!("the engine outlived its watch: {other:?}"),
        }
    }
}

#[test]
fn stop_ends_the_watch_and_the_config_in_force_stays() {
    let (_dir, path) = config_dir(&doc(&[("a", 1)]));
    let engine = Engine::default();
    let watch = watch(&engine, &path);
    watch.stop();
    assert_eq!(destinations(&engine.status()), ["a"]);
    // Nothing reads the file any more; a new watch picks up what is there now.
    replace(&path, &doc(&[("b", 2)]));
    let _again = ConfigFile::new(&path).watch(&engine).unwrap();
    assert_eq!(destinations(&engine.status()), ["b"]);
}

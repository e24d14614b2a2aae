//! The etcd source and registration against a real etcd (`support::etcd`): the
//! prefix read then watched, value changes (weight vs address), registration with a lease and
//! its expiry, draining and deregistration, compaction forcing a re-list, a server killed and
//! restarted, a watch cut and resumed, the update guard when the whole prefix goes at once, and
//! bad values. Every wait is bounded; each test has its own etcd, killed on drop.

#![cfg(feature = "etcd")]

use std::time::Duration;

use healthpick::config::{EtcdSourceConfig, GuardMode, GuardPolicy, RefreshBounds};
use healthpick::discovery::etcd::EtcdSource;
use healthpick::discovery::{SourceSpec, SourceTask};
use healthpick::service::{Draining, EtcdRegistration};
use healthpick::{DiscoveryHealth, Engine, SourceStatus};

use crate::support::etcd::{Etcd, Relay};
use crate::support::waits::until;

const PREFIX: &str = "/services/api/";

fn engine() -> Engine {
    Engine::from_json(r#"{"Clusters": {"api": {}}}"#).unwrap()
}

/// Starts an etcd source of `api` reading `PREFIX` at `url`, retrying from 200 ms.
fn source(engine: &Engine, url: &str, guard: GuardPolicy) -> SourceTask {
    let publisher = engine
        .publisher("api", SourceSpec::new("etcd").kind("etcd").guard(guard))
        .unwrap();
    let config =
        EtcdSourceConfig::new(vec![url.parse().unwrap()], PREFIX).timeout(Duration::from_secs(2));
    EtcdSource::new(&config)
        .unwrap()
        .refresh(
            RefreshBounds::new(Duration::from_millis(200), Duration::from_secs(60)).jitter(0.0),
        )
        .start(publisher)
}

/// The ids of the cluster's destinations, sorted, with their addresses.
fn members(engine: &Engine) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = engine.status().clusters[0]
        .destinations
        .iter()
        .map(|d| (d.id.clone(), d.address.clone()))
        .collect();
    out.sort();
    out
}

fn ids(engine: &Engine) -> Vec<String> {
    members(engine).into_iter().map(|(id, _)| id).collect()
}

fn source_status(engine: &Engine) -> SourceStatus {
    engine.status().clusters[0]
        .sources
        .iter()
        .find(|s| s.name == "etcd")
        .cloned()
        .expect("the etcd source in the status")
}

fn picked(engine: &Engine) -> String {
    engine
        .pick_endpoint("api")
        .unwrap()
        .destination()
        .id()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prefix_is_read_then_watched_and_picks_follow_additions_and_removals() {
    let Some(etcd) = Etcd::start() else { return };
    etcd.put_destination("/services/api/a", "http://10.0.0.1:8080/");
    etcd.put_destination("/services/api/b", "http://10.0.0.2:8080/");
    etcd.put_destination("/services/other/x", "http://10.9.9.9:8080/");
    let engine = engine();
    let _task = source(&engine, &etcd.url(), GuardPolicy::default());
    tokio::time::timeout(Duration::from_secs(10), engine.ready())
        .await
        .expect("ready once the prefix was read");
    assert_eq!(
        members(&engine),
        [
            ("a".to_string(), "http://10.0.0.1:8080/".to_string()),
            ("b".to_string(), "http://10.0.0.2:8080/".to_string())
        ],
        "the keys under the prefix, named by the rest of the key; other prefixes ignored"
    );
    let status = source_status(&engine);
    assert_eq!(status.kind, "etcd");
    assert_eq!(status.endpoints, 2);
    assert!(status.stale_since.is_none());

    etcd.put_destination("/services/api/c", "http://10.0.0.3:8080/");
    until("c added", || ids(&engine) == ["a", "b", "c"]).await;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        seen.insert(picked(&engine));
    }
    assert!(
        seen.contains("c"),
        "the new destination gets picks: {seen:?}"
    );

    etcd.delete("/services/api/a", false);
    until("a removed", || ids(&engine) == ["b", "c"]).await;
    for _ in 0..200 {
        assert_ne!(picked(&engine), "a", "a removed key gets no new pick");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weight_change_keeps_the_destination_and_an_address_change_starts_over() {
    let Some(etcd) = Etcd::start() else { return };
    etcd.put_destination("/services/api/a", "http://10.0.0.1:8080/");
    etcd.put_destination("/services/api/b", "http://10.0.0.2:8080/");
    let engine = engine();
    let _task = source(&engine, &etcd.url(), GuardPolicy::default());
    until("both read", || ids(&engine).len() == 2).await;
    // Requests in flight to `a` show which destination object it is.
    let held = engine.pick_endpoint_excluding("api", &["b"]).unwrap();
    assert_eq!(held.destination().id(), "a");
    let in_flight = |engine: &Engine| {
        engine.status().clusters[0]
            .destinations
            .iter()
            .find(|d| d.id == "a")
            .map(|d| (d.in_flight, d.address.clone()))
    };
    assert_eq!(
        in_flight(&engine),
        Some((1, "http://10.0.0.1:8080/".into()))
    );

    etcd.put(
        "/services/api/a",
        r#"{"Address": "http://10.0.0.1:8080/", "Weight": 5}"#,
    );
    until("the weight applied", || {
        engine
            .best_endpoints("api")
            .unwrap()
            .destinations
            .iter()
            .any(|d| d.id() == "a" && d.attributes().weight() == 5.0)
    })
    .await;
    assert_eq!(
        in_flight(&engine),
        Some((1, "http://10.0.0.1:8080/".into())),
        "same address: the same destination, its in-flight count kept"
    );

    etcd.put("/services/api/a", r#"{"Address": "http://10.0.0.9:8080/"}"#);
    until("the address applied", || {
        in_flight(&engine).is_some_and(|(_, address)| address == "http://10.0.0.9:8080/")
    })
    .await;
    assert_eq!(
        in_flight(&engine),
        Some((0, "http://10.0.0.9:8080/".into())),
        "a new address under the key is a new instance"
    );
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_instance_is_kept_alive_and_leaves_when_its_lease_runs_out() {
    let Some(etcd) = Etcd::start() else { return };
    let engine = engine();
    let _task = source(
        &engine,
        &etcd.url(),
        GuardPolicy::new(GuardMode::Immediately),
    );
    let endpoints = vec![etcd.url().parse().unwrap()];
    let registration = EtcdRegistration::builder(
        endpoints.clone(),
        "/services/api/eu-1",
        "http://10.0.0.1:8080/".parse().unwrap(),
    )
    .zone("eu-west-1a")
    .ttl(Duration::from_secs(1))
    .register()
    .await
    .unwrap();
    let _other = EtcdRegistration::builder(
        endpoints,
        "/services/api/eu-2",
        "http://10.0.0.2:8080/".parse().unwrap(),
    )
    .ttl(Duration::from_secs(1))
    .register()
    .await
    .unwrap();
    until("both registered", || ids(&engine) == ["eu-1", "eu-2"]).await;
    let status = engine.status();
    let eu1 = status.clusters[0]
        .destinations
        .iter()
        .find(|d| d.id == "eu-1")
        .unwrap();
    assert_eq!(eu1.locality, "eu-west-1a");
    let lease = registration.lease();
    assert_ne!(lease, 0);

    // Three lease lifetimes later, renewals kept it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(ids(&engine), ["eu-1", "eu-2"], "renewed, still registered");
    assert_eq!(registration.lease(), lease, "the same lease all along");

    // A crash: no more renewals, but nobody revokes either. The key outlives the process...
    drop(registration);
    assert!(etcd.get("/services/api/eu-1").is_some());
    // ...until etcd expires the lease, and the source sees it go.
    until("eu-1 expired", || ids(&engine) == ["eu-2"]).await;
    assert!(etcd.get("/services/api/eu-1").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_marks_the_instance_draining_and_deregistering_removes_it_at_once() {
    let Some(etcd) = Etcd::start() else { return };
    let engine = engine();
    let _task = source(
        &engine,
        &etcd.url(),
        GuardPolicy::new(GuardMode::Immediately),
    );
    let draining = Draining::builder().delay(Duration::ZERO).build();
    let registration = EtcdRegistration::builder(
        vec![etcd.url().parse().unwrap()],
        "/services/api/eu-1",
        "http://10.0.0.1:8080/".parse().unwrap(),
    )
    .ttl(Duration::from_secs(30))
    .metadata("version", "1.4.2")
    .drain_with(draining.clone())
    .register()
    .await
    .unwrap();
    until("registered", || ids(&engine) == ["eu-1"]).await;
    let discovery = |engine: &Engine| {
        engine.status().clusters[0]
            .destinations
            .first()
            .map(|d| d.discovery)
    };
    assert_eq!(discovery(&engine), Some(DiscoveryHealth::Unknown));

    draining.start();
    until("marked Draining", || {
        discovery(&engine) == Some(DiscoveryHealth::Draining)
    })
    .await;
    let value = etcd.get("/services/api/eu-1").unwrap();
    assert!(value.contains("\"Status\":\"Draining\""), "{value}");
    assert!(
        value.contains("1.4.2"),
        "the rest of the value kept: {value}"
    );

    registration.deregister().await.unwrap();
    assert!(
        etcd.get("/services/api/eu-1").is_none(),
        "revoking the lease deletes the key at once (a 30 s lease)"
    );
    until("gone", || ids(&engine).is_empty()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_past_the_watch_forces_a_relist_in_which_a_deleted_key_is_gone() {
    let Some(etcd) = Etcd::start() else { return };
    for (key, port) in [("a", 1), ("b", 2), ("c", 3), ("d", 4)] {
        etcd.put_destination(
            &format!("{PREFIX}{key}"),
            &format!("http://10.0.0.{port}:8080/"),
        );
    }
    let relay = Relay::start(etcd.port()).await;
    let engine = engine();
    let _task = source(&engine, &relay.url(), GuardPolicy::default());
    until("read", || ids(&engine).len() == 4).await;

    // The source loses etcd; meanwhile `a` is deleted, `e` added, and the history compacted,
    // so the delete event no longer exists anywhere.
    relay.block();
    until("the source noticed", || {
        source_status(&engine).stale_since.is_some()
    })
    .await;
    etcd.delete("/services/api/a", false);
    etcd.put_destination("/services/api/e", "http://10.0.0.5:8080/");
    etcd.compact();
    relay.unblock();
    // Resuming the watch from the last revision seen fails (compacted): the prefix is read
    // again, and `a` is gone from it.
    until("re-listed", || ids(&engine) == ["b", "c", "d", "e"]).await;
    until("fresh again", || {
        source_status(&engine).stale_since.is_none()
    })
    .await;
    // And the new watch works.
    etcd.put_destination("/services/api/f", "http://10.0.0.6:8080/");
    until("watching again", || ids(&engine).len() == 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_watch_resumes_where_it_was_and_sees_the_changes_made_meanwhile() {
    let Some(etcd) = Etcd::start() else { return };
    for (key, port) in [("a", 1), ("b", 2), ("c", 3)] {
        etcd.put_destination(
            &format!("{PREFIX}{key}"),
            &format!("http://10.0.0.{port}:8080/"),
        );
    }
    let relay = Relay::start(etcd.port()).await;
    let engine = engine();
    let _task = source(&engine, &relay.url(), GuardPolicy::default());
    until("read", || ids(&engine).len() == 3).await;
    relay.block();
    until("stale", || source_status(&engine).stale_since.is_some()).await;
    assert_eq!(ids(&engine), ["a", "b", "c"], "the last good set stays");
    assert!(engine.pick_endpoint("api").is_ok(), "and gets picks");
    etcd.delete("/services/api/a", false);
    etcd.put(
        "/services/api/b",
        r#"{"Address": "http://10.0.0.2:8080/", "Weight": 2}"#,
    );
    relay.unblock();
    // No compaction: the resumed watch replays the delete and the put.
    until("resumed", || ids(&engine) == ["b", "c"]).await;
    until("fresh", || source_status(&engine).stale_since.is_none()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_keeps_the_last_good_set_stale_then_fresh_after_its_restart() {
    let Some(mut etcd) = Etcd::start() else {
        return;
    };
    etcd.put_destination("/services/api/a", "http://10.0.0.1:8080/");
    etcd.put_destination("/services/api/b", "http://10.0.0.2:8080/");
    let engine = engine();
    let _task = source(&engine, &etcd.url(), GuardPolicy::default());
    until("read", || ids(&engine).len() == 2).await;
    let generation = source_status(&engine).generation;

    etcd.kill();
    until("stale", || source_status(&engine).stale_since.is_some()).await;
    let status = source_status(&engine);
    assert!(
        status.last_error.is_some(),
        "the error is shown: {status:?}"
    );
    assert_eq!(ids(&engine), ["a", "b"], "the last good set stays");
    assert!(engine.pick_endpoint("api").is_ok());

    etcd.restart();
    until("fresh", || source_status(&engine).stale_since.is_none()).await;
    assert!(source_status(&engine).generation > generation);
    etcd.put_destination("/services/api/c", "http://10.0.0.3:8080/");
    until("watching the restarted server", || ids(&engine).len() == 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_whole_prefix_at_once_is_held_by_the_update_guard() {
    let Some(etcd) = Etcd::start() else { return };
    for (key, port) in [("a", 1), ("b", 2), ("c", 3), ("d", 4)] {
        etcd.put_destination(
            &format!("{PREFIX}{key}"),
            &format!("http://10.0.0.{port}:8080/"),
        );
    }
    let engine = engine();
    let _task = source(
        &engine,
        &etcd.url(),
        GuardPolicy::new(GuardMode::AfterConfirmation).confirm_after(Duration::from_secs(60)),
    );
    until("read", || ids(&engine).len() == 4).await;
    // One small removal applies at once.
    etcd.delete("/services/api/d", false);
    until("d removed", || ids(&engine).len() == 3).await;

    etcd.delete(PREFIX, true);
    until("held", || source_status(&engine).held.is_some()).await;
    let held = source_status(&engine).held.unwrap();
    assert_eq!((held.removes, held.of), (3, 3), "{held:?}");
    assert_eq!(ids(&engine), ["a", "b", "c"], "nothing removed while held");
    assert!(engine.pick_endpoint("api").is_ok());

    // The instances come back before confirmation: the held change is superseded and nothing
    // was ever removed.
    for (key, port) in [("a", 1), ("b", 2), ("c", 3)] {
        etcd.put_destination(
            &format!("{PREFIX}{key}"),
            &format!("http://10.0.0.{port}:8080/"),
        );
    }
    until("superseded", || source_status(&engine).held.is_none()).await;
    until("all back", || ids(&engine) == ["a", "b", "c"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_value_is_ignored_and_a_bad_update_keeps_the_last_good_value() {
    let Some(etcd) = Etcd::start() else { return };
    etcd.put_destination("/services/api/a", "http://10.0.0.1:8080/");
    etcd.put("/services/api/junk", "not json");
    etcd.put("/services/api/A", r#"{"Address": "http://10.0.0.7:8080/"}"#);
    let engine = engine();
    let _task = source(&engine, &etcd.url(), GuardPolicy::default());
    until("read", || !ids(&engine).is_empty()).await;
    assert_eq!(
        members(&engine),
        [("A".to_string(), "http://10.0.0.7:8080/".to_string())],
        "junk ignored; of two keys equal but for case, the first in key order"
    );
    etcd.delete("/services/api/A", false);
    until("a", || {
        members(&engine) == [("a".to_string(), "http://10.0.0.1:8080/".to_string())]
    })
    .await;

    etcd.put("/services/api/a", r#"{"Address": "ftp://nope/"}"#);
    etcd.put_destination("/services/api/b", "http://10.0.0.2:8080/");
    until("b read after the bad update", || ids(&engine).len() == 2).await;
    assert_eq!(
        members(&engine)[0],
        ("a".to_string(), "http://10.0.0.1:8080/".to_string()),
        "the bad update keeps a's last good value"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_whose_lease_etcd_lost_registers_again() {
    let Some(etcd) = Etcd::start() else { return };
    let registration = EtcdRegistration::builder(
        vec![etcd.url().parse().unwrap()],
        "/services/api/eu-1",
        "http://10.0.0.1:8080/".parse().unwrap(),
    )
    .ttl(Duration::from_secs(1))
    .register()
    .await
    .unwrap();
    let first = registration.lease();
    // Someone revokes the lease (an operator, a restore): the key goes with it.
    etcd.ctl(&["lease", "revoke", &format!("{first:x}")]);
    assert!(etcd.get("/services/api/eu-1").is_none());
    // The next renewal finds the lease gone and registers under a new one.
    until("registered again", || {
        etcd.get("/services/api/eu-1").is_some()
    })
    .await;
    assert_ne!(registration.lease(), first);
    registration.deregister().await.unwrap();
    assert!(etcd.get("/services/api/eu-1").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovery_section_of_type_etcd_runs_under_discovery_start() {
    let Some(etcd) = Etcd::start() else { return };
    etcd.put_destination("/services/api/a", "http://10.0.0.1:8080/");
    let engine = Engine::from_json(&format!(
        r#"{{"Clusters": {{"api": {{"Discovery": {{
            "Type": "Etcd", "Endpoints": ["{}"], "Prefix": "{PREFIX}", "MinRefresh": "00:00:00.2"
        }}}}}}}}"#,
        etcd.url()
    ))
    .unwrap();
    let discovery = healthpick::discovery::Discovery::start(&engine);
    tokio::time::timeout(Duration::from_secs(10), engine.ready())
        .await
        .unwrap();
    assert_eq!(ids(&engine), ["a"]);
    let status = source_status(&engine);
    assert_eq!(status.kind, "Etcd");
    assert!(status.target.contains(PREFIX), "{}", status.target);
    etcd.put_destination("/services/api/b", "http://10.0.0.2:8080/");
    until("b", || ids(&engine) == ["a", "b"]).await;
    discovery.stop().await;
}

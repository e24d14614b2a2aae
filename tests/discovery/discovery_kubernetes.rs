//! The Kubernetes source against a fake API server (`support::kubernetes`; no real API
//! server can be installed on these machines), with kube's own runtime watcher as the client:
//! list then watch, two slices of one Service, terminating endpoints, bookmarks and a watch the
//! server ends, 410 Gone forcing a re-list in which a slice is missing, a silent watch replaced
//! after the idle timeout, server errors keeping the last good set, the periodic re-list, port
//! selection, topology hints, and an endpoint moving between slices. One more test reads a real
//! cluster, only when `KUBECONFIG` is set. Every wait is bounded.

#![cfg(feature = "kubernetes")]

use std::time::{Duration, Instant};

use healthpick::config::{GuardMode, GuardPolicy, KubernetesSourceConfig, RefreshBounds};
use healthpick::discovery::kubernetes::KubernetesSource;
use healthpick::discovery::{SourceSpec, SourceTask};
use healthpick::{DestinationStatus, DiscoveryHealth, Engine};

use crate::support::kubernetes::{endpoint, ready, slice, FakeApiServer};
use crate::support::status::source;
use crate::support::waits::{until, until_within};

fn engine() -> Engine {
    Engine::from_json(r#"{"Clusters": {"web": {}}}"#).unwrap()
}

fn config() -> KubernetesSourceConfig {
    KubernetesSourceConfig::new("web").port_name("http")
}

fn start(engine: &Engine, fake: &FakeApiServer, config: KubernetesSourceConfig) -> SourceTask {
    let publisher = engine
        .publisher(
            "web",
            SourceSpec::new("kubernetes")
                .kind("kubernetes")
                .target(config.target())
                .guard(GuardPolicy::new(GuardMode::Immediately)),
        )
        .unwrap();
    KubernetesSource::with_client(fake.client(Duration::from_secs(30)), &config)
        .unwrap()
        .refresh(RefreshBounds::new(Duration::from_millis(200), Duration::from_secs(1)).jitter(0.0))
        .start(publisher)
}

fn destinations(engine: &Engine) -> Vec<DestinationStatus> {
    let mut d = engine.status().clusters[0].destinations.clone();
    d.sort_by(|a, b| a.id.cmp(&b.id));
    d
}

fn ids(engine: &Engine) -> Vec<String> {
    destinations(engine).into_iter().map(|d| d.id).collect()
}

fn destination(engine: &Engine, id: &str) -> DestinationStatus {
    destinations(engine)
        .into_iter()
        .find(|d| d.id == id)
        .unwrap_or_else(|| panic!("no destination {id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_slices_are_listed_merged_then_followed_by_the_watch() {
    let fake = FakeApiServer::start().await;
    fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
    fake.apply(slice("web-b", "web", vec![ready("127.0.1.2", "pod-2")]));
    fake.apply(slice("other-a", "other", vec![ready("127.0.9.9", "pod-9")]));
    let listed_at = fake.resource_version();
    let engine = engine();
    let _task = start(&engine, &fake, config());
    tokio::time::timeout(Duration::from_secs(10), engine.ready())
        .await
        .unwrap();
    assert_eq!(
        ids(&engine),
        ["pod-1", "pod-2"],
        "both slices, not the other service's"
    );
    let one = destination(&engine, "pod-1");
    assert_eq!(one.address, "http://127.0.1.1:8080/", "the port named http");
    assert_eq!(one.discovery, DiscoveryHealth::Healthy);
    assert_eq!(one.locality, "zone-a/node-1");

    until("watching", || fake.open_watches() == 1).await;
    fake.apply(slice("web-c", "web", vec![ready("127.0.1.3", "pod-3")]));
    until("an ADDED slice", || ids(&engine).len() == 3).await;
    fake.apply(slice(
        "web-a",
        "web",
        vec![ready("127.0.1.1", "pod-1"), ready("127.0.1.4", "pod-4")],
    ));
    until("a MODIFIED slice", || ids(&engine).len() == 4).await;
    fake.delete("web-b");
    until("a DELETED slice", || {
        ids(&engine) == ["pod-1", "pod-3", "pod-4"]
    })
    .await;
    fake.apply(slice("other-a", "other", vec![ready("127.0.9.8", "pod-8")]));
    // Relabelled away from the service: a DELETED for this watch.
    fake.apply(slice(
        "web-c",
        "elsewhere",
        vec![ready("127.0.1.3", "pod-3")],
    ));
    until("relabelled out", || ids(&engine) == ["pod-1", "pod-4"]).await;

    let requests = fake.requests();
    assert_eq!(fake.lists(), 1, "{requests:?}");
    let list = &requests[0];
    assert!(!list.is_watch());
    assert_eq!(
        list.param("labelSelector"),
        Some("kubernetes.io/service-name=web")
    );
    assert_eq!(
        list.path,
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
    );
    let watch = &requests[1];
    assert!(watch.is_watch());
    assert_eq!(
        watch.param("resourceVersion"),
        Some(listed_at.to_string().as_str())
    );
    assert_eq!(watch.param("allowWatchBookmarks"), Some("true"));
    assert_eq!(
        watch.param("timeoutSeconds"),
        Some("295"),
        "idle timeout 5 min less 5 s"
    );
    assert!(source(&engine).stale_since.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_endpoints_drain_and_endpoints_that_do_not_serve_are_excluded() {
    let fake = FakeApiServer::start().await;
    fake.apply(slice(
        "web-a",
        "web",
        vec![
            ready("127.0.1.1", "ready"),
            endpoint("127.0.1.2", "draining", false, true, true),
            endpoint("127.0.1.3", "stopping", false, false, true),
            endpoint("127.0.1.4", "starting", false, false, false),
        ],
    ));
    let engine = engine();
    let _task = start(&engine, &fake, config());
    until("listed", || ids(&engine).len() == 4).await;
    let health = |id: &str| destination(&engine, id).discovery;
    assert_eq!(health("ready"), DiscoveryHealth::Healthy);
    assert_eq!(health("draining"), DiscoveryHealth::Draining);
    assert_eq!(health("stopping"), DiscoveryHealth::Unhealthy);
    assert_eq!(health("starting"), DiscoveryHealth::Unhealthy);
    for _ in 0..50 {
        assert_eq!(
            engine.pick_endpoint("web").unwrap().destination().id(),
            "ready"
        );
    }
    // The ready one starts terminating too: the draining ones are all that is left.
    fake.apply(slice(
        "web-a",
        "web",
        vec![
            endpoint("127.0.1.1", "ready", false, true, true),
            endpoint("127.0.1.2", "draining", false, true, true),
        ],
    ));
    until("both draining", || {
        destinations(&engine).len() == 2
            && destinations(&engine)
                .iter()
                .all(|d| d.discovery == DiscoveryHealth::Draining)
    })
    .await;
    assert!(engine.pick_endpoint("web").is_ok(), "draining still serves");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_and_a_watch_the_server_ends_resume_from_the_last_resource_version() {
    let fake = FakeApiServer::start().await;
    fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
    let engine = engine();
    let _task = start(&engine, &fake, config());
    until("listed", || ids(&engine) == ["pod-1"]).await;
    until("watching", || fake.open_watches() == 1).await;
    // Another service's change moves the resource version on; a bookmark tells the watch.
    fake.apply(slice("other-a", "other", vec![ready("127.0.9.9", "pod-9")]));
    let marked = fake.bookmark();
    // The stream ends after the bookmark line, which kube reads first.
    fake.close_watches();
    until("watching again", || {
        fake.requests().iter().filter(|r| r.is_watch()).count() == 2
    })
    .await;
    let resumed = fake.requests().into_iter().rfind(|r| r.is_watch()).unwrap();
    assert_eq!(
        resumed.param("resourceVersion"),
        Some(marked.to_string().as_str()),
        "resumed from the bookmark"
    );
    until("open again", || fake.open_watches() == 1).await;
    fake.apply(slice("web-b", "web", vec![ready("127.0.1.2", "pod-2")]));
    until("followed after the resume", || ids(&engine).len() == 2).await;
    assert_eq!(fake.lists(), 1, "a resume is not a re-list");
    assert!(
        source(&engine).stale_since.is_none(),
        "a clean end is no failure"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_forces_a_relist_in_which_a_slice_deleted_meanwhile_disappears() {
    let fake = FakeApiServer::start().await;
    fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
    fake.apply(slice("web-b", "web", vec![ready("127.0.1.2", "pod-2")]));
    let engine = engine();
    let _task = start(&engine, &fake, config());
    until("listed", || ids(&engine).len() == 2).await;
    until("watching", || fake.open_watches() == 1).await;
    // The watch drops; while its resume waits, web-b goes and the history is compacted.
    fake.hold_watches(true);
    fake.close_watches();
    until("resume sent", || {
        fake.requests().iter().filter(|r| r.is_watch()).count() == 2
    })
    .await;
    fake.delete("web-b");
    fake.apply(slice(
        "web-a",
        "web",
        vec![ready("127.0.1.1", "pod-1"), ready("127.0.1.3", "pod-3")],
    ));
    fake.compact();
    fake.hold_watches(false);
    // The resume gets ERROR 410: a new list without web-b, which no DELETED ever announced.
    until("web-b gone, pod-3 in", || {
        ids(&engine) == ["pod-1", "pod-3"]
    })
    .await;
    assert_eq!(fake.lists(), 2);
    assert!(source(&engine).stale_since.is_none(), "410 is no failure");

    // An open watch expired by the server: a new list too.
    until("watching", || fake.open_watches() == 1).await;
    fake.expire_watches();
    until("listed a third time", || fake.lists() == 3).await;
    until("watching", || fake.open_watches() == 1).await;
    fake.apply(slice("web-b", "web", vec![ready("127.0.1.2", "pod-2")]));
    until("followed after the re-list", || ids(&engine).len() == 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_watch_is_replaced_after_the_idle_timeout() {
    let fake = FakeApiServer::start().await;
    fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
    let engine = engine();
    // The shortest: the watch asks for timeoutSeconds=1, kube gives up 5 s after a silence.
    let _task = start(
        &engine,
        &fake,
        config().idle_timeout(Duration::from_secs(6)),
    );
    until("listed", || ids(&engine) == ["pod-1"]).await;
    until("watching", || fake.open_watches() == 1).await;
    fake.mute_watches();
    let muted = Instant::now();
    fake.apply(slice("web-b", "web", vec![ready("127.0.1.2", "pod-2")]));
    until_within(Duration::from_secs(15), "seen through a new watch", || {
        ids(&engine).len() == 2
    })
    .await;
    let waited = muted.elapsed();
    assert!(
        waited >= Duration::from_secs(5),
        "not before the idle timeout: {waited:?}"
    );
    assert_eq!(fake.lists(), 1, "a new watch, not a new list");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_keep_the_last_good_set_and_mark_the_source_stale() {
    let fake = FakeApiServer::start().await;
    fake.apply(slice(
        "web-a",
        "web",
        vec![ready("127.0.1.1", "pod-1"), ready("127.0.1.2", "pod-2")],
    ));
    let engine = engine();
    let _task = start(&engine, &fake, config());
    until("listed", || ids(&engine).len() == 2).await;
    until("watching", || fake.open_watches() == 1).await;
    fake.fail_with(Some(500));
    fake.close_watches();
    until("stale", || source(&engine).stale_since.is_some()).await;
    let error = source(&engine).last_error.unwrap().1;
    assert!(error.contains("Kubernetes watch"), "{error}");
    assert_eq!(ids(&engine).len(), 2, "the last good set stays");
    fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
    fake.fail_with(None);
    until("fresh and current", || {
        source(&engine).stale_since.is_none() && ids(&engine) == ["pod-1"]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_periodic_relist_catches_what_a_watch_missed() {
    let fake = FakeApiServer::start().await;
    fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
    fake.apply(slice("web-b", "web", vec![ready("127.0.1.2", "pod-2")]));
    let engine = engine();
    let _task = start(&engine, &fake, config().resync(Duration::from_secs(1)));
    until("listed", || ids(&engine).len() == 2).await;
    until("watching", || fake.open_watches() == 1).await;
    // The watch says nothing about this deletion (a silent connection); the next list does.
    fake.mute_watches();
    fake.delete("web-b");
    until_within(Duration::from_secs(5), "re-listed without web-b", || {
        ids(&engine) == ["pod-1"]
    })
    .await;
    assert!(fake.lists() >= 2);
    let generation = source(&engine).generation;
    until("another resync", || fake.lists() >= 3).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        source(&engine).generation,
        generation,
        "a re-list that changes nothing publishes nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_port_is_chosen_by_name_and_port_problems_show_in_the_status() {
    let fake = FakeApiServer::start().await;
    fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
    // No port name, two ports: an error, no destinations.
    let engine_a = engine();
    let _a = start(&engine_a, &fake, KubernetesSourceConfig::new("web"));
    until("failed", || source(&engine_a).last_error.is_some()).await;
    let error = source(&engine_a).last_error.unwrap().1;
    assert!(
        error.contains("web-a") && error.contains("several ports") && error.contains("PortName"),
        "{error}"
    );
    assert!(ids(&engine_a).is_empty());
    // The other port by name.
    let engine_b = engine();
    let _b = start(
        &engine_b,
        &fake,
        KubernetesSourceConfig::new("web").port_name("metrics"),
    );
    until("listed", || ids(&engine_b) == ["pod-1"]).await;
    assert_eq!(
        destination(&engine_b, "pod-1").address,
        "http://127.0.1.1:9090/"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_hints_for_the_local_zone_are_tier_zero() {
    let fake = FakeApiServer::start().await;
    let hinted = |ip: &str, uid: &str, zone: &str| {
        let mut e = ready(ip, uid);
        e["zone"] = zone.into();
        e["hints"] = serde_json::json!({"forZones": [{"name": zone}]});
        e
    };
    fake.apply(slice(
        "web-a",
        "web",
        vec![
            hinted("127.0.1.1", "near", "zone-a"),
            hinted("127.0.1.2", "far", "zone-b"),
        ],
    ));
    let engine = engine();
    let _task = start(&engine, &fake, config().local_zone("zone-a"));
    until("listed", || ids(&engine).len() == 2).await;
    assert_eq!(destination(&engine, "near").tier, 0);
    assert_eq!(destination(&engine, "far").tier, 1);
    for _ in 0..20 {
        assert_eq!(
            engine.pick_endpoint("web").unwrap().destination().id(),
            "near"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_in_two_slices_is_one_destination_and_keeps_it_when_it_moves() {
    let fake = FakeApiServer::start().await;
    fake.apply(slice(
        "web-a",
        "web",
        vec![ready("127.0.1.1", "pod-1"), ready("127.0.1.2", "pod-2")],
    ));
    // During a rollout the same pod shows in two slices, once not ready.
    fake.apply(slice(
        "web-b",
        "web",
        vec![endpoint("127.0.1.1", "pod-1", false, false, false)],
    ));
    let engine = engine();
    let _task = start(&engine, &fake, config());
    until("listed", || ids(&engine).len() == 2).await;
    assert_eq!(
        destination(&engine, "pod-1").discovery,
        DiscoveryHealth::Healthy
    );
    let generation = source(&engine).generation;
    // The controller moves pod-2 from web-a to web-b: two writes, one after the other.
    until("watching", || fake.open_watches() == 1).await;
    fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
    fake.apply(slice(
        "web-b",
        "web",
        vec![ready("127.0.1.1", "pod-1"), ready("127.0.1.2", "pod-2")],
    ));
    until("published", || source(&engine).generation > generation).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(ids(&engine), ["pod-1", "pod-2"]);
    assert_eq!(
        source(&engine).generation,
        generation + 1,
        "the two writes are published together: pod-2 never left"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_without_slices_is_an_empty_answer() {
    let fake = FakeApiServer::start().await;
    let engine = engine();
    let _task = start(&engine, &fake, config());
    tokio::time::timeout(Duration::from_secs(10), engine.ready())
        .await
        .unwrap();
    let status = source(&engine);
    assert!(status.answered && status.endpoints == 0, "{status:?}");
    fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
    until("then one", || ids(&engine) == ["pod-1"]).await;
}

/// Opt-in: reads a real cluster when `KUBECONFIG` is set. `HEALTHPICK_K8S_SERVICE` and
/// `HEALTHPICK_K8S_NAMESPACE` name the Service (default `kubernetes` in `default`, which every
/// cluster has), `HEALTHPICK_K8S_PORT` its port name (default `https`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_cluster_when_kubeconfig_is_set() {
    if std::env::var_os("KUBECONFIG").is_none() {
        eprintln!("skipped: KUBECONFIG is not set (no real API server here)");
        return;
    }
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let config = KubernetesSourceConfig::new(var("HEALTHPICK_K8S_SERVICE", "kubernetes"))
        .namespace(var("HEALTHPICK_K8S_NAMESPACE", "default"))
        .port_name(var("HEALTHPICK_K8S_PORT", "https"))
        .scheme("https");
    let engine = engine();
    let publisher = engine
        .publisher("web", SourceSpec::new("kubernetes").kind("kubernetes"))
        .unwrap();
    let _task = KubernetesSource::new(&config)
        .await
        .unwrap()
        .start(publisher);
    until_within(
        Duration::from_secs(30),
        "an answer from the cluster",
        || source(&engine).answered || source(&engine).last_error.is_some(),
    )
    .await;
    let status = source(&engine);
    assert!(status.last_error.is_none(), "{status:?}");
    eprintln!(
        "{} endpoints of {}: {:?}",
        status.endpoints,
        config.target(),
        ids(&engine)
    );
}

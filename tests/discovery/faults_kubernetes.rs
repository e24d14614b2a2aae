//! The Kubernetes source against an API server that misbehaves (the fake of
//! `tests/kube_support`, on loopback): one that answers every watch with 410 Expired gets
//! backoff and a stale mark, not a list and a watch in a loop; a watch line cut short (a broken
//! proxy) is noticed: the source goes stale and lists again within the refresh bounds. Real
//! time, a few seconds each.

#![cfg(feature = "kubernetes")]

use std::time::{Duration, Instant};

use crate::support::kubernetes::{ready, slice, Expiry, FakeApiServer};
use crate::support::status::{ids, source};
use healthpick::config::{GuardMode, GuardPolicy, KubernetesSourceConfig, RefreshBounds};
use healthpick::discovery::kubernetes::KubernetesSource;
use healthpick::discovery::{SourceSpec, SourceTask};
use healthpick::{Engine, HealthEvent, HealthEventKind};
use tokio::sync::broadcast;

const MIN_REFRESH: Duration = Duration::from_millis(200);

async fn until(limit: Duration, description: &str, mut what: impl FnMut() -> bool) {
    let start = Instant::now();
    while !what() {
        assert!(
            start.elapsed() < limit,
            "not within {limit:?}: {description}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn engine() -> Engine {
    Engine::from_json(r#"{"Clusters": {"web": {}}}"#).unwrap()
}

fn start(engine: &Engine, fake: &FakeApiServer, max_refresh: Duration) -> SourceTask {
    let config = KubernetesSourceConfig::new("web").port_name("http");
    let publisher = engine
        .publisher(
            "web",
            SourceSpec::new("kubernetes")
                .kind("kubernetes")
                .guard(GuardPolicy::new(GuardMode::Immediately)),
        )
        .unwrap();
    KubernetesSource::with_client(fake.client(Duration::from_secs(30)), &config)
        .unwrap()
        .refresh(RefreshBounds::new(MIN_REFRESH, max_refresh))
        .start(publisher)
}

/// The events seen so far.
fn drain(events: &mut broadcast::Receiver<HealthEvent>) -> Vec<HealthEventKind> {
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event.kind);
    }
    seen
}

/// Against a server that answers every watch with 410 (an `ERROR` event in a `200` stream, or
/// HTTP 410), 10 s with MinRefresh 200 ms make at most 10 s / 200 ms lists plus a few; the source
/// is stale (event and status) and keeps its set; once a watch works again and says something,
/// it recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_that_keeps_answering_gone_gets_backoff_not_a_hot_loop() {
    let run = |expiry: Expiry| async move {
        let fake = FakeApiServer::start().await;
        fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
        let engine = engine();
        let mut events = engine.subscribe();
        let _task = start(&engine, &fake, Duration::from_secs(2));
        until(Duration::from_secs(10), "listed", || {
            ids(&engine) == ["pod-1"]
        })
        .await;
        until(Duration::from_secs(10), "watching", || {
            fake.open_watches() == 1
        })
        .await;

        fake.expire_every_watch(Some(expiry));
        let lists_before = fake.lists();
        let watches_before = fake.watches();
        fake.close_watches();
        let window = Duration::from_secs(10);
        tokio::time::sleep(window).await;
        let lists = fake.lists() - lists_before;
        let watches = fake.watches() - watches_before;
        let most = (window.as_millis() / MIN_REFRESH.as_millis()) as usize + 3;
        assert!(
            lists <= most && watches <= most + 1,
            "{expiry:?}: {lists} lists and {watches} watches in {window:?} (at most {most})"
        );
        assert!(lists >= 2, "{expiry:?}: it kept trying ({lists} lists)");
        let status = source(&engine);
        assert!(status.stale_since.is_some(), "{expiry:?}: {status:?}");
        assert!(
            status.last_error.as_ref().unwrap().1.contains("410"),
            "{expiry:?}: {status:?}"
        );
        assert_eq!(ids(&engine), ["pod-1"], "{expiry:?}: the last set stays");
        let seen = drain(&mut events);
        assert!(
            seen.iter()
                .any(|k| matches!(k, HealthEventKind::SourceStale { .. })),
            "{expiry:?}: {seen:?}"
        );

        // The server is well again: once a watch says something, so is the source.
        fake.expire_every_watch(None);
        until(Duration::from_secs(10), "watching again", || {
            fake.open_watches() == 1
        })
        .await;
        fake.apply(slice(
            "web-a",
            "web",
            vec![ready("127.0.1.1", "pod-1"), ready("127.0.1.2", "pod-2")],
        ));
        until(Duration::from_secs(10), "fresh and current", || {
            source(&engine).stale_since.is_none() && ids(&engine) == ["pod-1", "pod-2"]
        })
        .await;
        let seen = drain(&mut events);
        assert!(
            seen.iter()
                .any(|k| matches!(k, HealthEventKind::SourceRecovered { .. })),
            "{expiry:?}: {seen:?}"
        );
    };
    tokio::join!(run(Expiry::Event), run(Expiry::Status));
}

/// A `DELETED` event cut short on its way (a truncated JSON line): the source goes stale and
/// lists again within the refresh bounds, so the deleted slice's endpoint is gone within
/// MaxRefresh + 1 s instead of at the next resync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_watch_line_is_noticed_and_made_up_for_by_a_new_list() {
    let max_refresh = Duration::from_secs(1);
    let fake = FakeApiServer::start().await;
    fake.apply(slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]));
    fake.apply(slice("web-b", "web", vec![ready("127.0.1.2", "pod-2")]));
    let engine = engine();
    let mut events = engine.subscribe();
    let _task = start(&engine, &fake, max_refresh);
    until(Duration::from_secs(10), "listed", || {
        ids(&engine) == ["pod-1", "pod-2"]
    })
    .await;
    until(Duration::from_secs(10), "watching", || {
        fake.open_watches() == 1
    })
    .await;
    drain(&mut events);

    let cut = Instant::now();
    fake.delete_truncated("web-b");
    until(
        max_refresh + Duration::from_secs(1),
        "pod-2 gone after a new list",
        || ids(&engine) == ["pod-1"],
    )
    .await;
    assert!(
        cut.elapsed() >= MIN_REFRESH,
        "not before the shortest delay: {:?}",
        cut.elapsed()
    );
    assert_eq!(fake.lists(), 2);
    let seen = drain(&mut events);
    let stale = seen.iter().find_map(|k| match k {
        HealthEventKind::SourceStale { error, .. } => Some(error.clone()),
        _ => None,
    });
    let error = stale.unwrap_or_else(|| panic!("no SourceStale: {seen:?}"));
    assert!(error.contains("not an event"), "{error}");

    // The next watch works: the source is well again.
    until(Duration::from_secs(10), "watching again", || {
        fake.open_watches() == 1
    })
    .await;
    fake.apply(slice("web-c", "web", vec![ready("127.0.1.3", "pod-3")]));
    until(Duration::from_secs(10), "followed and fresh", || {
        ids(&engine) == ["pod-1", "pod-3"] && source(&engine).stale_since.is_none()
    })
    .await;
}

//! The Consul source against a fake Consul agent with blocking-query semantics
//! (`support::consul`): blocking reads, health filtering, datacenters and failover, an index
//! that goes backwards, failures, hangs, an agent that does not block and a stale view. Every
//! wait is bounded.

#![cfg(feature = "consul")]

use std::time::{Duration, Instant};

use healthpick::config::{ConsulSourceConfig, GuardPolicy, RefreshBounds};
use healthpick::discovery::consul::ConsulSource;
use healthpick::discovery::{SourceSpec, SourceTask};
use healthpick::{DiscoveryHealth, Engine};

use crate::support::consul::{entry, Agent, Mode};
use crate::support::status::{ids, source};
use crate::support::waits::until;

fn engine() -> Engine {
    Engine::from_json(r#"{"Clusters": {"web": {}}}"#).unwrap()
}

fn start(engine: &Engine, config: ConsulSourceConfig) -> SourceTask {
    let publisher = engine
        .publisher(
            "web",
            SourceSpec::new("consul")
                .kind("consul")
                .guard(GuardPolicy::new(healthpick::config::GuardMode::Immediately)),
        )
        .unwrap();
    ConsulSource::new(&config)
        .unwrap()
        .refresh(RefreshBounds::new(Duration::from_millis(300), Duration::from_secs(2)).jitter(0.0))
        .start(publisher)
}

fn config(agent: &Agent) -> ConsulSourceConfig {
    ConsulSourceConfig::new("web")
        .address(agent.url.parse().unwrap())
        .wait(Duration::from_secs(2))
        .timeout(Duration::from_millis(500))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_queries_deliver_changes_as_they_happen() {
    let agent = Agent::start().await;
    agent.set(
        "dc1",
        vec![entry("n1", 8001, "passing"), entry("n2", 8002, "passing")],
        None,
    );
    let engine = engine();
    let _task = start(&engine, config(&agent).token("s3cret"));
    tokio::time::timeout(Duration::from_secs(10), engine.ready())
        .await
        .unwrap();
    assert_eq!(ids(&engine), ["n1/web", "n2/web"]);
    // The source is now parked in a blocking query at the current index.
    until("a blocking query", || {
        agent.seen().iter().any(|s| s.index == Some(11))
    })
    .await;
    let queries = agent.seen().len();
    let before = Instant::now();
    agent.set(
        "dc1",
        vec![entry("n1", 8001, "passing"), entry("n3", 8003, "passing")],
        None,
    );
    until("n3 in", || ids(&engine) == ["n1/web", "n3/web"]).await;
    assert!(
        before.elapsed() < Duration::from_secs(2),
        "delivered by the blocking query, not by waiting it out"
    );
    // The source applies the change before it sends its next blocking query: wait for that one.
    until("the next blocking query", || agent.seen().len() > queries).await;
    let seen = agent.seen();
    assert_eq!(
        seen.len(),
        queries + 1,
        "one query answered the change: {seen:?}"
    );
    assert!(
        seen.iter().all(|s| s.token.as_deref() == Some("s3cret")),
        "the ACL token is sent"
    );
    assert!(
        seen[1..].iter().all(|s| s.wait.as_deref() == Some("2s")),
        "{seen:?}"
    );
    assert_eq!(seen[0].index, None, "the first read does not block");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_statuses_and_weights_map_to_discovery_health() {
    let agent = Agent::start().await;
    agent.set(
        "dc1",
        vec![
            entry("ok", 8001, "passing"),
            entry("warn", 8002, "warning"),
            entry("down", 8003, "critical"),
        ],
        None,
    );
    let engine = engine();
    let _task = start(&engine, config(&agent));
    until("read", || ids(&engine).len() == 3).await;
    let status = engine.status();
    let by_id = |id: &str| {
        status.clusters[0]
            .destinations
            .iter()
            .find(|d| d.id == id)
            .unwrap()
            .clone()
    };
    assert_eq!(by_id("ok/web").discovery, DiscoveryHealth::Healthy);
    assert!(by_id("ok/web").in_best_group);
    assert_eq!(by_id("warn/web").discovery, DiscoveryHealth::Draining);
    assert!(
        by_id("warn/web").available && !by_id("warn/web").in_best_group,
        "ranks below healthy"
    );
    assert_eq!(by_id("down/web").discovery, DiscoveryHealth::Unhealthy);
    assert!(!by_id("down/web").available, "critical excludes");
    let best = engine.best_endpoints("web").unwrap();
    assert_eq!(best.destinations.len(), 1);
    assert_eq!(
        best.destinations[0].attributes().weight(),
        3.0,
        "Weights.Passing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datacenters_of_the_failover_list_are_tiers() {
    let agent = Agent::start().await;
    agent.set("eu-west", vec![entry("w1", 8001, "passing")], None);
    agent.set("eu-central", vec![entry("c1", 8002, "passing")], None);
    let engine = engine();
    let _task = start(
        &engine,
        config(&agent).datacenters(vec!["eu-west".into(), "eu-central".into()]),
    );
    until("both datacenters", || ids(&engine).len() == 2).await;
    let status = engine.status();
    let tier = |id: &str| {
        status.clusters[0]
            .destinations
            .iter()
            .find(|d| d.id == id)
            .unwrap()
            .tier
    };
    // Keys name the datacenter: node names are unique within one only.
    assert_eq!((tier("eu-west/w1/web"), tier("eu-central/c1/web")), (0, 1));
    for _ in 0..50 {
        assert_eq!(
            engine.pick_endpoint("web").unwrap().destination().id(),
            "eu-west/w1/web"
        );
    }
    // The preferred datacenter's instance fails its check: traffic fails over.
    agent.set("eu-west", vec![entry("w1", 8001, "critical")], None);
    until("failed over", || {
        engine.pick_endpoint("web").unwrap().destination().id() == "eu-central/c1/web"
    })
    .await;
    let dcs: Vec<Option<String>> = agent.seen().iter().map(|s| s.dc.clone()).collect();
    assert!(dcs.contains(&Some("eu-west".into())) && dcs.contains(&Some("eu-central".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_that_goes_backwards_is_reset_and_read_at_once() {
    let agent = Agent::start().await;
    agent.set("dc1", vec![entry("n1", 8001, "passing")], Some(500));
    let engine = engine();
    let _task = start(&engine, config(&agent));
    until("read", || ids(&engine) == ["n1/web"]).await;
    until("blocking at 500", || {
        agent.seen().iter().any(|s| s.index == Some(500))
    })
    .await;
    // A restored server: the index starts over below where the client is.
    agent.set("dc1", vec![entry("n2", 8002, "passing")], Some(7));
    // The blocked query runs out its wait (Consul holds it: 7 is not past 500), answers with 7;
    // the client resets to 0 and reads at once, then blocks at 7.
    until("n2 in", || ids(&engine) == ["n2/web"]).await;
    until("blocking at 7", || {
        agent.seen().iter().any(|s| s.index == Some(7))
    })
    .await;
    let seen = agent.seen();
    let at = seen.iter().position(|s| s.index == Some(7)).unwrap();
    assert_eq!(
        seen[at - 1].index,
        None,
        "reset to 0 before blocking again: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_and_a_hang_keep_the_last_good_set_and_mark_the_source_stale() {
    let agent = Agent::start().await;
    agent.set(
        "dc1",
        vec![entry("n1", 8001, "passing"), entry("n2", 8002, "passing")],
        None,
    );
    let engine = engine();
    let _task = start(&engine, config(&agent));
    until("read", || ids(&engine).len() == 2).await;

    agent.mode(Mode::Fail);
    // Wakes the blocked query (same entries); the next one fails.
    agent.set(
        "dc1",
        vec![entry("n1", 8001, "passing"), entry("n2", 8002, "passing")],
        None,
    );
    until("stale", || source(&engine).stale_since.is_some()).await;
    let error = source(&engine).last_error.unwrap().1;
    assert!(
        error.contains("500") && error.contains("No cluster leader"),
        "{error}"
    );
    assert_eq!(ids(&engine).len(), 2, "the last good set stays");

    agent.set(
        "dc1",
        vec![entry("n1", 8001, "passing"), entry("n2", 8002, "passing")],
        None,
    );
    agent.mode(Mode::Normal);
    until("fresh", || source(&engine).stale_since.is_none()).await;

    // A hang: the query's bound (wait + wait/16 + timeout) ends it.
    agent.mode(Mode::Hang);
    let started = Instant::now();
    agent.set(
        "dc1",
        vec![entry("n1", 8001, "passing"), entry("n2", 8002, "passing")],
        None,
    );
    until("stale after the hang", || {
        source(&engine).stale_since.is_some()
    })
    .await;
    assert!(source(&engine).last_error.unwrap().1.contains("timed out"));
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "not before the wait was up"
    );
    assert_eq!(ids(&engine).len(), 2);
    agent.mode(Mode::Normal);
    until("fresh after the hang", || {
        source(&engine).stale_since.is_none()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_that_do_not_block_never_make_it_spin() {
    let agent = Agent::start().await;
    agent.set("dc1", vec![entry("n1", 8001, "passing")], None);
    agent.mode(Mode::NoBlocking);
    let engine = engine();
    let _task = start(&engine, config(&agent));
    until("read", || ids(&engine) == ["n1/web"]).await;
    let before = agent.seen().len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let queries = agent.seen().len() - before;
    // At most one query per shortest refresh delay (300 ms): about 5 in 1.5 s, not thousands.
    assert!((2..=7).contains(&queries), "{queries} queries in 1.5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_reads_are_asked_for_and_too_stale_an_answer_is_a_failure() {
    let agent = Agent::start().await;
    agent.set("dc1", vec![entry("n1", 8001, "passing")], None);
    agent.set_last_contact_ms(20);
    let engine = engine();
    let _task = start(&engine, config(&agent).stale(Duration::from_millis(100)));
    until("read", || ids(&engine) == ["n1/web"]).await;
    assert!(agent.seen().iter().all(|s| s.stale), "?stale is sent");
    agent.set_last_contact_ms(5_000);
    agent.set("dc1", vec![entry("n2", 8002, "passing")], None);
    until("stale", || source(&engine).stale_since.is_some()).await;
    assert!(source(&engine)
        .last_error
        .unwrap()
        .1
        .contains("5000 ms stale"));
    assert_eq!(
        ids(&engine),
        ["n1/web"],
        "a too-stale answer is not applied"
    );
    agent.set_last_contact_ms(10);
    agent.set("dc1", vec![entry("n2", 8002, "passing")], None);
    until("applied once fresh", || ids(&engine) == ["n2/web"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovery_section_of_type_consul_runs_under_discovery_start() {
    let agent = Agent::start().await;
    agent.set("dc1", vec![entry("n1", 8001, "passing")], None);
    let engine = Engine::from_json(&format!(
        r#"{{"Clusters": {{"web": {{"Discovery": {{
            "Type": "Consul", "Service": "web", "Address": "{}", "Wait": "00:00:02"
        }}}}}}}}"#,
        agent.url
    ))
    .unwrap();
    let discovery = healthpick::discovery::Discovery::start(&engine);
    tokio::time::timeout(Duration::from_secs(10), engine.ready())
        .await
        .unwrap();
    assert_eq!(ids(&engine), ["n1/web"]);
    assert_eq!(source(&engine).kind, "Consul");
    agent.set(
        "dc1",
        vec![entry("n1", 8001, "passing"), entry("n2", 8002, "passing")],
        None,
    );
    until("n2", || ids(&engine) == ["n1/web", "n2/web"]).await;
    discovery.stop().await;
}

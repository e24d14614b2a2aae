//! `"Discovery": {"Type": "Kubernetes", ...}` in a configuration, started by `Discovery::start`,
//! against the fake API server of `support::kubernetes` (no real API server can be installed on
//! these machines). The client is configured as kube does it, from a kubeconfig file named by
//! `KUBECONFIG`: this test binary holds this one test, so setting the variable races with
//! nothing.

#![cfg(feature = "kubernetes")]

mod support;

use std::time::Duration;

use healthpick::discovery::Discovery;
use healthpick::{DiscoveryHealth, Engine, SourceStatus};

use support::kubernetes::{endpoint, ready, slice, FakeApiServer};
use support::waits::until;

fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: {server}
contexts:
- name: fake
  context:
    cluster: fake
    user: nobody
    namespace: shop
current-context: fake
users:
- name: nobody
  user: {{}}
"
    )
}

fn sources(engine: &Engine, cluster: &str) -> Vec<SourceStatus> {
    engine
        .status()
        .clusters
        .into_iter()
        .find(|c| c.id == cluster)
        .expect("cluster")
        .sources
}

/// Cluster `web` reads Service `web` in the kubeconfig context's namespace (`shop`) on the port
/// named `http`; cluster `lost` names a context the kubeconfig lacks: its source fails with
/// that reason in its status instead of stopping anything, and keeps retrying.
#[test]
fn a_configured_kubernetes_source_reads_the_kubeconfig_and_follows_the_slices() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let fake = FakeApiServer::start().await;
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, kubeconfig(&fake.url)).expect("kubeconfig");
        // The only test of this binary, before any source reads it.
        std::env::set_var("KUBECONFIG", &path);

        fake.apply_in(
            "shop",
            slice(
                "web-a",
                "web",
                vec![
                    ready("127.0.1.1", "pod-1"),
                    endpoint("127.0.1.2", "pod-2", true, true, true),
                ],
            ),
        );
        fake.apply(slice("web-a", "web", vec![ready("127.0.9.9", "pod-9")]));
        let engine = Engine::from_json(
            r#"{"Clusters": {
                "web": {"Discovery": {"Type": "Kubernetes", "Service": "web", "PortName": "http",
                                      "Guard": {"Policy": "Immediately"}, "MinRefresh": "00:00:00.2"}},
                "lost": {"Discovery": {"Type": "Kubernetes", "Service": "web",
                                       "Context": "elsewhere", "MinRefresh": "00:00:00.2",
                                       "FirstAnswerWithin": "00:00:01"}}}}"#,
        )
        .expect("config");
        let discovery = Discovery::start(&engine);
        tokio::time::timeout(Duration::from_secs(10), engine.ready())
            .await
            .expect("ready");

        let status = engine.status();
        let web = status.clusters.iter().find(|c| c.id == "web").unwrap();
        let mut ids: Vec<_> = web.destinations.iter().map(|d| d.id.as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["pod-1", "pod-2"], "namespace shop, not default");
        let one = web.destinations.iter().find(|d| d.id == "pod-1").unwrap();
        assert_eq!(one.address, "http://127.0.1.1:8080/");
        let two = web.destinations.iter().find(|d| d.id == "pod-2").unwrap();
        assert_eq!(two.discovery, DiscoveryHealth::Draining, "serving, terminating");
        let source = &web.sources[0];
        assert_eq!(source.kind, "Kubernetes");
        assert!(source.target.contains("web"), "{source:?}");
        assert!(source.last_error.is_none(), "{source:?}");

        fake.apply_in(
            "shop",
            slice("web-a", "web", vec![ready("127.0.1.1", "pod-1")]),
        );
        until("the watch delivers the change", || {
            let status = engine.status();
            let web = status.clusters.iter().find(|c| c.id == "web").unwrap();
            web.destinations.len() == 1
        })
        .await;

        until("the lost context is the source's error", || {
            sources(&engine, "lost")[0].last_error.is_some()
        })
        .await;
        let lost = &sources(&engine, "lost")[0];
        let (_, error) = lost.last_error.as_ref().unwrap();
        assert!(error.contains("elsewhere"), "{error}");
        assert!(!lost.answered);
        assert!(
            fake.requests()
                .iter()
                .all(|r| r.path.contains("/namespaces/shop/")),
            "{:?}",
            fake.requests()
        );
        discovery.stop().await;
    });
}

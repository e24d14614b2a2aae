//! DNS discovery against a real dnsmasq (feature `dns`): the sources on their own
//! (what an answer becomes), then through the real engine, `Discovery` runner and poll driver —
//! first sync, adds and removes, identity across address and weight changes, the update guard
//! on emptying and NXDOMAIN answers, outages and recovery, SRV tiers and weights, churn under
//! concurrent picks, YARP's `ResolveDestinations`, and the endpoint set fed by DNS.
//!
//! Every test starts its own dnsmasq (`support::dnsmasq`) on a free loopback port and waits for
//! what it expects with a deadline; every address the records name is on the loopback range.
//! Without dnsmasq the tests print that they are skipped, and fail when `CI` is set.

#![cfg(feature = "dns")]

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use healthpick::config::{
    DiscoveryConfig, DnsSourceConfig, RefreshBounds, ResolveDestinationsConfig, SourceConfig,
};
use healthpick::discovery::dns::{DnsSource, ResolveDestinations, SRV_ZERO_WEIGHT};
use healthpick::discovery::{Answer, Discovery, PollSource};
use healthpick::{
    Config, EndpointSet, Engine, HealthEvent, HealthEventKind, HealthState, HeldReason,
    ProbeResult, Release,
};
use tokio::sync::broadcast;

use crate::support::dnsmasq::{Dnsmasq, Mode, Srv};
use crate::support::servers::status_server_pair;
use crate::support::status::destination;
use crate::support::waits::{eventually, ms, within};

const WAIT: Duration = Duration::from_secs(5);
const SVC: &str = "_http._tcp.svc.test";

// ---- helpers --------------------------------------------------------------------------------

/// Asks `source` until its answer satisfies `ok` (dnsmasq reloads its hosts directory within
/// a millisecond, but a test never relies on that).
async fn answer_where(source: &dyn PollSource, what: &str, ok: impl Fn(&Answer) -> bool) -> Answer {
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let last = source.resolve().await;
        if let Ok(answer) = &last {
            if ok(answer) {
                return answer.clone();
            }
        }
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for {what}; last answer {last:?}"
        );
        tokio::time::sleep(ms(5)).await;
    }
}

fn keys(answer: &Answer) -> Vec<String> {
    answer
        .endpoints()
        .unwrap_or_default()
        .iter()
        .map(|e| e.key().to_string())
        .collect()
}

/// A `Dns` discovery section asking `dns` for the A/AAAA records of `name`, refreshed every
/// 50 ms to 1 s without jitter, with a 300 ms timeout and `guard`.
fn a_source(dns: &Dnsmasq, name: &str, port: u16, guard: &str) -> String {
    format!(
        r#"{{ "Type": "Dns", "Name": "{name}", "Port": {port}, "Servers": [{}],
             "Timeout": "300ms", "MinRefresh": "50ms", "MaxRefresh": "1s", "Jitter": 0,
             "Guard": {guard} }}"#,
        dns.server_json()
    )
}

/// The same for the SRV records of `name`.
fn srv_source(dns: &Dnsmasq, name: &str, guard: &str) -> String {
    format!(
        r#"{{ "Type": "Dns", "Name": "{name}", "Record": "SRV", "Servers": [{}],
             "Timeout": "300ms", "MinRefresh": "50ms", "MaxRefresh": "1s", "Jitter": 0,
             "Guard": {guard} }}"#,
        dns.server_json()
    )
}

/// An engine with one cluster `svc`: `extra` cluster keys and the discovery section.
fn engine(discovery: &str, extra: &str) -> Engine {
    let comma = if extra.is_empty() { "" } else { "," };
    Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "svc": {{ "Discovery": {discovery}{comma} {extra} }} }} }}"#
    ))
    .expect("config")
}

fn ids(engine: &Engine) -> BTreeSet<String> {
    engine.status().clusters[0]
        .destinations
        .iter()
        .map(|d| d.id.clone())
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

async fn ids_become(engine: &Engine, want: &[&str]) {
    let want = set(want);
    let what = format!("destinations {want:?}");
    eventually(&what, WAIT, || (ids(engine) == want).then_some(())).await;
}

fn source_status(engine: &Engine) -> healthpick::SourceStatus {
    engine.status().clusters[0].sources[0].clone()
}

/// The next event of `events` that `pick` accepts (others are skipped), within the wait.
async fn next_event<T>(
    events: &mut broadcast::Receiver<HealthEvent>,
    what: &str,
    mut pick: impl FnMut(&HealthEventKind) -> Option<T>,
) -> T {
    within(what, WAIT, async {
        loop {
            match events.recv().await {
                Ok(event) => {
                    if let Some(found) = pick(&event.kind) {
                        return found;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => panic!("events closed: {what}"),
            }
        }
    })
    .await
}

/// The ids `n` picks of `svc` return.
fn picked(engine: &Engine, n: usize) -> BTreeSet<String> {
    (0..n)
        .map(|_| {
            engine
                .pick_endpoint("svc")
                .expect("pick")
                .destination()
                .id()
                .to_string()
        })
        .collect()
}

// ---- the sources on their own ---------------------------------------------------------------

#[tokio::test]
async fn a_records_become_one_endpoint_per_address_keyed_ip_port_with_the_name_as_host_and_the_ttl_as_validity(
) {
    let Some(dns) = Dnsmasq::start(Mode::hosts(7)) else {
        return;
    };
    dns.write_hosts(
        "web",
        &[
            ("127.0.0.12", "web.test"),
            ("127.0.0.11", "web.test"),
            ("::1", "web.test"),
            ("127.0.0.99", "other.test"),
        ],
    );
    let source = DnsSource::new(
        &DnsSourceConfig::address("Web.Test", 8080)
            .servers(vec![dns.addr()])
            .timeout(ms(500)),
    )
    .unwrap();
    let answer = answer_where(&source, "three addresses", |a| keys(a).len() == 3).await;
    assert_eq!(
        keys(&answer),
        ["127.0.0.11:8080", "127.0.0.12:8080", "[::1]:8080"],
        "one endpoint per address, in address order, IPv6 in brackets"
    );
    let endpoints = answer.endpoints().unwrap();
    let addresses: Vec<&str> = endpoints.iter().map(|e| e.address().as_str()).collect();
    assert_eq!(
        addresses,
        [
            "http://127.0.0.11:8080/",
            "http://127.0.0.12:8080/",
            "http://[::1]:8080/"
        ]
    );
    for e in endpoints {
        assert_eq!(e.attributes().host(), Some("web.test"), "Host is the name");
        assert_eq!(e.attributes().weight(), 1.0);
    }
    assert_eq!(answer.validity(), Some(Duration::from_secs(7)), "the TTL");

    // The scheme is configurable, and a trailing dot changes nothing.
    let https = DnsSource::new(
        &DnsSourceConfig::address("web.test.", 8443)
            .scheme("https")
            .servers(vec![dns.addr()]),
    )
    .unwrap();
    let answer = https.resolve().await.unwrap();
    assert_eq!(
        answer.endpoints().unwrap()[0].address().as_str(),
        "https://127.0.0.11:8443/"
    );
    assert!(
        dns.log().contains("query[A] web.test from 127.0.0.1"),
        "{}",
        dns.log()
    );
}

#[tokio::test]
async fn nxdomain_is_not_found_nodata_is_empty_and_refused_servfail_timeouts_and_a_dead_server_are_errors(
) {
    let Some(mut dns) = Dnsmasq::start(
        Mode::srv(0, vec![Srv::new(SVC, "web.test", 8080, 10, 10)])
            .with("txt-record=only-txt.test,\"no addresses here\""),
    ) else {
        return;
    };
    dns.write_hosts("web", &[("127.0.0.11", "web.test")]);
    let servers = vec![dns.addr()];
    let a = |name: &str| {
        DnsSource::new(
            &DnsSourceConfig::address(name, 80)
                .servers(servers.clone())
                .timeout(ms(300)),
        )
        .unwrap()
    };
    let srv = |name: &str| {
        DnsSource::new(
            &DnsSourceConfig::srv(name)
                .servers(servers.clone())
                .timeout(ms(300)),
        )
        .unwrap()
    };
    answer_where(&a("web.test"), "web.test", |a| keys(a).len() == 1).await;

    let nx = a("nope.test").resolve().await.unwrap();
    assert_eq!(nx.endpoints(), None, "NXDOMAIN: the service does not exist");
    assert_eq!(
        nx.validity(),
        Some(Duration::ZERO),
        "no SOA, no negative TTL: asked again after the shortest refresh"
    );
    let nodata = a("only-txt.test").resolve().await.unwrap();
    assert_eq!(
        nodata.endpoints(),
        Some(&[][..]),
        "NODATA: exists, no instance"
    );
    assert_eq!(
        srv("_nope._tcp.svc.test")
            .resolve()
            .await
            .unwrap()
            .endpoints(),
        None
    );
    assert_eq!(
        srv("web.test").resolve().await.unwrap().endpoints(),
        Some(&[][..])
    );

    let refused = a("example.com").resolve().await.unwrap_err().to_string();
    assert!(refused.contains("REFUSED"), "{refused}");

    // SERVFAIL: a second dnsmasq forwards to the first and fails DNSSEC validation.
    let proxy = Dnsmasq::start(Mode::ServfailProxy {
        upstream: dns.port(),
    })
    .expect("dnsmasq is there");
    let failing = DnsSource::new(
        &DnsSourceConfig::address("web.test", 80)
            .servers(vec![proxy.addr()])
            .timeout(ms(300)),
    )
    .unwrap();
    let servfail = failing.resolve().await.unwrap_err().to_string();
    assert!(servfail.contains("SERVFAIL"), "{servfail}");

    // A hung server: nothing answers within the timeout.
    dns.pause();
    let hung = within("a lookup of a hung server", WAIT, a("web.test").resolve())
        .await
        .unwrap_err()
        .to_string();
    assert!(hung.contains("no answer"), "{hung}");
    dns.resume();
    answer_where(&a("web.test"), "web.test again", |a| keys(a).len() == 1).await;

    // A dead server: over UDP that is a timeout too (the port-unreachable is not seen).
    dns.stop();
    let dead = within("a lookup of a dead server", WAIT, srv(SVC).resolve())
        .await
        .unwrap_err()
        .to_string();
    assert!(!dead.is_empty());
}

#[tokio::test]
async fn srv_records_become_tiers_and_weights_with_addresses_from_glue_or_a_lookup_of_the_target() {
    // Targets under `ext` live on a second server the first forwards to: the first cannot
    // send their addresses along, so the source looks them up itself.
    let Some(ext) = Dnsmasq::start(Mode::hosts(4).with("local=/ext/")) else {
        return;
    };
    ext.write_hosts("ext", &[("127.0.0.21", "w1.ext"), ("::1", "w1.ext")]);
    let Some(dns) = Dnsmasq::start(
        Mode::srv(
            3,
            vec![
                Srv::new(SVC, "web1.test", 8080, 10, 60),
                Srv::new(SVC, "web2.test", 8081, 10, 0),
                Srv::new(SVC, "w1.ext", 8082, 20, 5),
                Srv::new(SVC, "gone.test", 8083, 5, 1),
            ],
        )
        .with(format!("server=/ext/127.0.0.1#{}", ext.port()))
        .with("cache-size=0"),
    ) else {
        return;
    };
    dns.write_hosts(
        "web",
        &[
            ("127.0.0.11", "web1.test"),
            ("::1", "web2.test"),
            ("127.0.0.12", "web2.test"),
        ],
    );
    let source = DnsSource::new(
        &DnsSourceConfig::srv(SVC)
            .servers(vec![dns.addr()])
            .timeout(ms(500)),
    )
    .unwrap();
    let answer = answer_where(&source, "three SRV destinations", |a| keys(a).len() == 3).await;
    let seen: Vec<(String, String, Option<String>, u32, f64)> = answer
        .endpoints()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e.key().to_string(),
                e.address().to_string(),
                e.attributes().host().map(str::to_string),
                e.attributes().tier(),
                e.attributes().weight(),
            )
        })
        .collect();
    let row = |key: &str, address: &str, host: &str, tier: u32, weight: f64| {
        (
            key.to_string(),
            address.to_string(),
            Some(host.to_string()),
            tier,
            weight,
        )
    };
    assert_eq!(
        seen,
        [
            row(
                "web1.test:8080",
                "http://127.0.0.11:8080/",
                "web1.test",
                0,
                60.0
            ),
            // Two addresses in the glue: the lowest, IPv4 first.
            row(
                "web2.test:8081",
                "http://127.0.0.12:8081/",
                "web2.test",
                0,
                SRV_ZERO_WEIGHT
            ),
            // No glue: looked up through the same resolver.
            row("w1.ext:8082", "http://127.0.0.21:8082/", "w1.ext", 1, 5.0),
        ],
        "gone.test has no address and is left out; priorities 10 and 20 are tiers 0 and 1"
    );
    assert_eq!(
        answer.validity(),
        Some(Duration::from_secs(3)),
        "the shortest TTL of the records and addresses used"
    );
    assert!(ext.log().contains("query[A] w1.ext"), "{}", ext.log());
    assert!(
        !ext.log().contains("web1.test"),
        "glue targets are not looked up: {}",
        ext.log()
    );
}

#[tokio::test]
async fn answers_too_large_or_corrupt_are_errors_not_crashes() {
    // Over 2,183 SRV records do not fit in 64 KiB: truncated even over TCP.
    let many: Vec<Srv> = (0..2300)
        .map(|i| Srv::new(SVC, &format!("t{i:04}.nowhere"), 8080, 10, 1))
        .collect();
    let Some(big) = Dnsmasq::start(Mode::srv(0, many)) else {
        return;
    };
    let source = DnsSource::new(
        &DnsSourceConfig::srv(SVC)
            .servers(vec![big.addr()])
            .timeout(ms(2000)),
    )
    .unwrap();
    let too_large = within("a truncated answer", WAIT, source.resolve())
        .await
        .unwrap_err()
        .to_string();
    assert!(too_large.contains("too large"), "{too_large}");

    // With the targets' addresses added, dnsmasq 2.90 corrupts answers past about 545 records
    // (its name compression wraps): the answer cannot be decoded, which is an error too.
    let corrupt: Vec<Srv> = (0..600)
        .map(|i| Srv::new(SVC, &format!("t{i:04}.test"), 8080, 10, 1))
        .collect();
    let Some(dns) = Dnsmasq::start(Mode::srv(0, corrupt)) else {
        return;
    };
    let targets: Vec<(String, String)> = (0..600)
        .map(|i| {
            (
                format!("127.0.{}.{}", 1 + i / 250, 1 + i % 250),
                format!("t{i:04}.test"),
            )
        })
        .collect();
    let lines: Vec<(&str, &str)> = targets
        .iter()
        .map(|(a, n)| (a.as_str(), n.as_str()))
        .collect();
    dns.write_hosts("targets", &lines);
    let source = DnsSource::new(
        &DnsSourceConfig::srv(SVC)
            .servers(vec![dns.addr()])
            .timeout(ms(300)),
    )
    .unwrap();
    let target = DnsSource::new(
        &DnsSourceConfig::address("t0599.test", 80)
            .servers(vec![dns.addr()])
            .timeout(ms(300)),
    )
    .unwrap();
    answer_where(&target, "the targets' addresses", |a| keys(a).len() == 1).await;
    let undecodable = within("a corrupt answer", WAIT, source.resolve()).await;
    assert!(undecodable.is_err(), "{undecodable:?}");
}

// ---- through the engine ---------------------------------------------------------------------

#[tokio::test]
async fn first_sync_ready_waits_for_the_first_answer_and_a_pick_before_it_is_discovery_pending() {
    let Some(dns) = Dnsmasq::start(Mode::hosts(0)) else {
        return;
    };
    dns.write_hosts(
        "web",
        &[("127.0.0.11", "web.test"), ("127.0.0.12", "web.test")],
    );
    let probe = DnsSource::new(&DnsSourceConfig::address("web.test", 80).servers(vec![dns.addr()]))
        .unwrap();
    answer_where(&probe, "both records", |a| keys(a).len() == 2).await;

    // Nothing answers yet: the cluster waits for its source.
    dns.pause();
    let discovery = a_source(&dns, "web.test", 8080, "{}").replace(
        r#""Guard": {}"#,
        r#""Guard": {}, "FirstAnswerWithin": "400ms""#,
    );
    let engine = engine(&discovery, "");
    let running = Discovery::start(&engine);
    let pending = engine.pick_endpoint("svc").unwrap_err();
    assert!(pending.is_discovery_pending(), "{pending}");
    assert!(!source_status(&engine).answered);
    // `ready` waits for the first answer, but only as long as FirstAnswerWithin.
    within("ready() bounded by FirstAnswerWithin", WAIT, engine.ready()).await;
    assert!(engine
        .pick_endpoint("svc")
        .unwrap_err()
        .is_discovery_pending());

    dns.resume();
    let first = eventually("the first answer", WAIT, || {
        engine.pick_endpoint("svc").ok()
    })
    .await;
    drop(first);
    assert!(source_status(&engine).answered);
    assert_eq!(ids(&engine), set(&["127.0.0.11:8080", "127.0.0.12:8080"]));
    running.stop().await;

    // With the server up, `ready` returns once the source has answered: picks work right after.
    let engine2 = self::engine(&a_source(&dns, "web.test", 8080, "{}"), "");
    let running = Discovery::start(&engine2);
    within("ready()", WAIT, engine2.ready()).await;
    assert!(engine2.pick_endpoint("svc").is_ok());
    assert_eq!(ids(&engine2).len(), 2);
    running.stop().await;
}

#[tokio::test]
async fn added_and_removed_addresses_reach_picks() {
    let Some(dns) = Dnsmasq::start(Mode::hosts(0)) else {
        return;
    };
    let hosts = |ips: &[&str]| {
        let lines: Vec<(&str, &str)> = ips.iter().map(|ip| (*ip, "web.test")).collect();
        dns.write_hosts("web", &lines);
    };
    hosts(&["127.0.0.11", "127.0.0.12", "127.0.0.13"]);
    let engine = engine(
        &a_source(&dns, "web.test", 8080, "{}"),
        r#""LoadBalancingPolicy": "RoundRobin""#,
    );
    let mut events = engine.subscribe();
    let _running = Discovery::start(&engine);
    ids_become(
        &engine,
        &["127.0.0.11:8080", "127.0.0.12:8080", "127.0.0.13:8080"],
    )
    .await;
    assert_eq!(
        picked(&engine, 30).len(),
        3,
        "round robin reaches all three"
    );

    // One added, one removed (a third: below the guard's share, applied at once).
    hosts(&["127.0.0.11", "127.0.0.13", "127.0.0.14"]);
    let (added, removed) = next_event(&mut events, "the change", |kind| match kind {
        HealthEventKind::DestinationsChanged { added, removed, .. }
            if !added.is_empty() && !removed.is_empty() =>
        {
            Some((added.clone(), removed.clone()))
        }
        _ => None,
    })
    .await;
    assert_eq!(
        added.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        ["127.0.0.14:8080"]
    );
    assert_eq!(
        removed.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        ["127.0.0.12:8080"]
    );
    let after = picked(&engine, 30);
    assert_eq!(
        after,
        set(&["127.0.0.11:8080", "127.0.0.13:8080", "127.0.0.14:8080"])
    );
    let d = destination(&engine, "svc", "127.0.0.14:8080");
    assert_eq!(d.address, "http://127.0.0.14:8080/");
    assert_eq!(d.source, "dns");
}

#[tokio::test]
async fn a_new_address_under_an_srv_key_starts_over_while_a_weight_change_keeps_health() {
    let records = |weight: u16| {
        Mode::srv(
            0,
            vec![
                Srv::new(SVC, "web1.test", 8080, 10, weight),
                Srv::new(SVC, "web2.test", 8081, 10, 10),
            ],
        )
    };
    let Some(mut dns) = Dnsmasq::start(records(10)) else {
        return;
    };
    dns.write_hosts(
        "web",
        &[("127.0.0.11", "web1.test"), ("127.0.0.12", "web2.test")],
    );
    // Active checks on (the monitor is not started: probe rounds are reported by hand), one
    // failure is enough.
    let engine = engine(
        &srv_source(&dns, SVC, "{}"),
        r#""HealthCheck": { "Active": { "Enabled": true, "Interval": "01:00:00" } },
           "Metadata": { "ConsecutiveFailuresHealthPolicy.Threshold": "1" }"#,
    );
    let mut events = engine.subscribe();
    let _running = Discovery::start(&engine);
    ids_become(&engine, &["web1.test:8080", "web2.test:8081"]).await;
    engine
        .report_probe_round(
            "svc",
            &[
                ProbeResult::error("web1.test:8080", "connection refused"),
                ProbeResult::status("web2.test:8081", 200),
            ],
        )
        .unwrap();
    let web1 = destination(&engine, "svc", "web1.test:8080");
    assert_eq!(web1.active, HealthState::Unhealthy);

    // A weight change: the same instance, its health stays.
    dns.restart(records(30));
    next_event(&mut events, "the weight change", |kind| match kind {
        HealthEventKind::DestinationsChanged { updated, .. }
            if updated.iter().any(|u| &**u == "web1.test:8080") =>
        {
            Some(())
        }
        _ => None,
    })
    .await;
    let web1 = destination(&engine, "svc", "web1.test:8080");
    assert_eq!(
        web1.active,
        HealthState::Unhealthy,
        "health kept across a weight change"
    );
    assert_eq!(web1.address, "http://127.0.0.11:8080/");

    // A new address under the same key: another instance, its health starts over.
    dns.write_hosts(
        "web",
        &[("127.0.0.13", "web1.test"), ("127.0.0.12", "web2.test")],
    );
    let web1 = eventually("web1's new address", WAIT, || {
        let d = destination(&engine, "svc", "web1.test:8080");
        (d.address == "http://127.0.0.13:8080/").then_some(d)
    })
    .await;
    assert_eq!(
        web1.active,
        HealthState::Unknown,
        "a new instance starts over"
    );
    let web2 = destination(&engine, "svc", "web2.test:8081");
    assert_eq!(
        web2.active,
        HealthState::Healthy,
        "the other one is untouched"
    );
}

#[tokio::test]
async fn an_emptying_answer_is_held_by_the_guard_until_it_is_confirmed() {
    // web.test keeps a TXT record: without its addresses it is NODATA, an empty set.
    let Some(dns) = Dnsmasq::start(Mode::hosts(0).with("txt-record=web.test,\"here\"")) else {
        return;
    };
    dns.write_hosts(
        "web",
        &[("127.0.0.11", "web.test"), ("127.0.0.12", "web.test")],
    );
    let engine = engine(
        &a_source(&dns, "web.test", 8080, r#"{ "ConfirmAfter": "300ms" }"#),
        "",
    );
    let mut events = engine.subscribe();
    let _running = Discovery::start(&engine);
    ids_become(&engine, &["127.0.0.11:8080", "127.0.0.12:8080"]).await;

    dns.write_hosts("web", &[("127.0.0.50", "unrelated.test")]);
    let (reason, removes, of) = next_event(&mut events, "the held change", |kind| match kind {
        HealthEventKind::ChangeHeld {
            reason,
            removes,
            of,
            ..
        } => Some((*reason, *removes, *of)),
        _ => None,
    })
    .await;
    assert_eq!((reason, removes, of), (HeldReason::Emptying, 2, 2));
    // Held: the last set stays in force.
    let held = source_status(&engine)
        .held
        .expect("held change in the status");
    assert_eq!(held.removes, 2);
    assert_eq!(ids(&engine).len(), 2);
    assert!(engine.pick_endpoint("svc").is_ok());

    // Still empty after the confirmation delay: applied.
    let how = next_event(&mut events, "the release", |kind| match kind {
        HealthEventKind::ChangeReleased { how, .. } => Some(*how),
        _ => None,
    })
    .await;
    assert_eq!(how, Release::Confirmed);
    ids_become(&engine, &[]).await;
    assert!(engine.pick_endpoint("svc").is_err());
    assert!(source_status(&engine).held.is_none());
}

#[tokio::test]
async fn nxdomain_is_held_as_not_found_and_the_names_return_supersedes_it() {
    let Some(dns) = Dnsmasq::start(Mode::hosts(0)) else {
        return;
    };
    dns.write_hosts(
        "web",
        &[("127.0.0.11", "web.test"), ("127.0.0.12", "web.test")],
    );
    // Policy Never: held until forced, however often the source says so.
    let engine = engine(
        &a_source(&dns, "web.test", 8080, r#"{ "Policy": "Never" }"#),
        "",
    );
    let mut events = engine.subscribe();
    let _running = Discovery::start(&engine);
    ids_become(&engine, &["127.0.0.11:8080", "127.0.0.12:8080"]).await;

    dns.remove_hosts("web");
    let reason = next_event(&mut events, "the held NXDOMAIN", |kind| match kind {
        HealthEventKind::ChangeHeld { reason, .. } => Some(*reason),
        _ => None,
    })
    .await;
    assert_eq!(reason, HeldReason::NotFound);
    // Several more NXDOMAIN answers later, it is still held and the set still picked.
    let since = source_status(&engine).last_success;
    eventually("more answers", WAIT, || {
        (source_status(&engine).generation > 0 && source_status(&engine).last_success > since)
            .then_some(())
    })
    .await;
    assert!(source_status(&engine).held.is_some());
    assert_eq!(ids(&engine).len(), 2);
    assert!(engine.pick_endpoint("svc").is_ok());
    assert!(
        source_status(&engine).stale_since.is_none(),
        "NXDOMAIN is an answer, not a failure"
    );

    // The name comes back (with one more address: nothing removed, applied at once): the held
    // change is given up.
    dns.write_hosts(
        "web",
        &[
            ("127.0.0.11", "web.test"),
            ("127.0.0.12", "web.test"),
            ("127.0.0.13", "web.test"),
        ],
    );
    let how = next_event(&mut events, "the superseded change", |kind| match kind {
        HealthEventKind::ChangeReleased { how, .. } => Some(*how),
        _ => None,
    })
    .await;
    assert_eq!(how, Release::Superseded);
    ids_become(
        &engine,
        &["127.0.0.11:8080", "127.0.0.12:8080", "127.0.0.13:8080"],
    )
    .await;
}

#[tokio::test]
async fn an_outage_keeps_the_last_good_set_and_marks_the_source_stale_until_it_answers_again() {
    let Some(mut dns) = Dnsmasq::start(Mode::hosts(0)) else {
        return;
    };
    dns.write_hosts(
        "web",
        &[("127.0.0.11", "web.test"), ("127.0.0.12", "web.test")],
    );
    let engine = engine(&a_source(&dns, "web.test", 8080, "{}"), "");
    let mut events = engine.subscribe();
    let _running = Discovery::start(&engine);
    ids_become(&engine, &["127.0.0.11:8080", "127.0.0.12:8080"]).await;

    for outage in ["hung", "killed"] {
        if outage == "hung" {
            dns.pause();
        } else {
            dns.stop();
        }
        let error = next_event(&mut events, "the source going stale", |kind| match kind {
            HealthEventKind::SourceStale { error, .. } => Some(error.clone()),
            _ => None,
        })
        .await;
        assert!(error.contains("web.test"), "{outage}: {error}");
        let status = source_status(&engine);
        assert!(status.stale_since.is_some(), "{outage}");
        assert!(status.last_error.is_some(), "{outage}");
        assert_eq!(ids(&engine).len(), 2, "{outage}: the last good set stays");
        assert_eq!(picked(&engine, 20).len(), 2, "{outage}: and is picked");

        if outage == "hung" {
            dns.resume();
        } else {
            dns.restart(Mode::hosts(0));
        }
        next_event(&mut events, "the recovery", |kind| {
            matches!(kind, HealthEventKind::SourceRecovered { .. }).then_some(())
        })
        .await;
        assert!(source_status(&engine).stale_since.is_none(), "{outage}");
        assert_eq!(ids(&engine).len(), 2, "{outage}");
    }
}

#[tokio::test]
async fn srv_priorities_route_picks_to_the_lowest_tier_with_the_srv_weights() {
    let Some(dns) = Dnsmasq::start(Mode::srv(
        0,
        vec![
            Srv::new(SVC, "web1.test", 8080, 10, 3),
            Srv::new(SVC, "web2.test", 8080, 10, 1),
            Srv::new(SVC, "web3.test", 8080, 20, 5),
            Srv::new(SVC, "web4.test", 8080, 30, 0),
        ],
    )) else {
        return;
    };
    dns.write_hosts(
        "web",
        &[
            ("127.0.0.11", "web1.test"),
            ("127.0.0.12", "web2.test"),
            ("127.0.0.13", "web3.test"),
            ("127.0.0.14", "web4.test"),
        ],
    );
    let engine = engine(&srv_source(&dns, SVC, "{}"), "");
    let _running = Discovery::start(&engine);
    ids_become(
        &engine,
        &[
            "web1.test:8080",
            "web2.test:8080",
            "web3.test:8080",
            "web4.test:8080",
        ],
    )
    .await;
    let tiers: Vec<(String, u32)> = engine.status().clusters[0]
        .destinations
        .iter()
        .map(|d| (d.id.clone(), d.tier))
        .collect();
    assert_eq!(
        tiers,
        [
            ("web1.test:8080".to_string(), 0),
            ("web2.test:8080".to_string(), 0),
            ("web3.test:8080".to_string(), 1),
            ("web4.test:8080".to_string(), 2),
        ]
    );
    let best = engine.best_endpoints("svc").unwrap();
    let weights: Vec<(String, f64)> = best
        .destinations
        .iter()
        .map(|d| (d.id().to_string(), d.weight()))
        .collect();
    assert_eq!(
        weights,
        [
            ("web1.test:8080".to_string(), 3.0),
            ("web2.test:8080".to_string(), 1.0)
        ]
    );
    assert_eq!(
        picked(&engine, 50),
        set(&["web1.test:8080", "web2.test:8080"])
    );
    let hosts: Vec<Option<String>> = best
        .destinations
        .iter()
        .map(|d| d.attributes().host().map(str::to_string))
        .collect();
    assert_eq!(hosts, [Some("web1.test".into()), Some("web2.test".into())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_under_concurrent_picks_hands_out_only_published_destinations_and_in_flight_counts_return_to_zero(
) {
    let Some(dns) = Dnsmasq::start(Mode::hosts(0)) else {
        return;
    };
    let universe: Vec<String> = (10..20).map(|i| format!("127.0.0.{i}")).collect();
    let write = |members: &[usize]| {
        let lines: Vec<(&str, &str)> = members
            .iter()
            .map(|&i| (universe[i].as_str(), "web.test"))
            .collect();
        dns.write_hosts("web", &lines);
    };
    write(&[0, 1, 2, 3]);
    // No guard: every change applies at once, so the set really churns.
    let engine = engine(
        &a_source(&dns, "web.test", 8080, r#"{ "Policy": "Immediately" }"#),
        "",
    );
    let mut events = engine.subscribe();
    let running = Discovery::start(&engine);
    ids_become(
        &engine,
        &[
            "127.0.0.10:8080",
            "127.0.0.11:8080",
            "127.0.0.12:8080",
            "127.0.0.13:8080",
        ],
    )
    .await;

    // Everything the engine ever published, from its events (and the first set).
    let published: Arc<Mutex<HashSet<String>>> =
        Arc::new(Mutex::new(ids(&engine).into_iter().collect()));
    let recorder = {
        let published = published.clone();
        tokio::spawn(async move {
            while let Ok(event) = events.recv().await {
                if let HealthEventKind::DestinationsChanged { added, .. } = event.kind {
                    published
                        .lock()
                        .unwrap()
                        .extend(added.iter().map(|a| a.to_string()));
                }
            }
        })
    };

    let stop = Arc::new(AtomicBool::new(false));
    let picks = Arc::new(AtomicUsize::new(0));
    let mut pickers = Vec::new();
    for seed in 0..4u64 {
        let (engine, stop, picks) = (engine.clone(), stop.clone(), picks.clone());
        pickers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut held = Vec::new();
            let mut n = seed;
            while !stop.load(Ordering::Relaxed) {
                if let Ok(pick) = engine.pick_endpoint("svc") {
                    let d = pick.destination_arc();
                    let ip = d.address().host_str().unwrap_or_default().to_string();
                    assert_eq!(d.id(), format!("{ip}:8080"), "key and address agree");
                    seen.push((d.id().to_string(), d.clone()));
                    held.push(pick);
                    picks.fetch_add(1, Ordering::Relaxed);
                }
                // Hold up to three picks (in flight) for a while, then let the oldest go.
                n = n
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if held.len() > (n >> 62) as usize {
                    drop(held.remove(0));
                }
                tokio::task::yield_now().await;
            }
            drop(held);
            seen
        }));
    }

    // Churn: 40 different sets, each kept for a few refreshes.
    let mut changes = 0;
    for round in 0..40usize {
        let members: Vec<usize> = (0..10)
            .filter(|i| (i * 7 + round * 3) % 10 < 4 + round % 3)
            .collect();
        write(&members);
        changes += 1;
        tokio::time::sleep(ms(60)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut handed_out = Vec::new();
    for picker in pickers {
        handed_out.extend(within("a picker", WAIT, picker).await.unwrap());
    }
    let final_set = [0, 1, 2];
    write(&final_set);
    ids_become(
        &engine,
        &["127.0.0.10:8080", "127.0.0.11:8080", "127.0.0.12:8080"],
    )
    .await;
    running.stop().await;
    recorder.abort();

    assert!(
        picks.load(Ordering::Relaxed) > 1000,
        "picks ran during the churn"
    );
    assert!(changes >= 40);
    let published = published.lock().unwrap().clone();
    assert!(published.len() > 4, "the set changed: {published:?}");
    for (id, destination) in &handed_out {
        assert!(
            published.contains(id),
            "{id} was picked but never published"
        );
        assert_eq!(
            destination.in_flight(),
            0,
            "{id}: every pick handle was dropped, removed destinations included"
        );
    }
    for d in &engine.status().clusters[0].destinations {
        assert_eq!(d.in_flight, 0, "{}", d.id);
    }
    let removed = handed_out.iter().filter(|(_, d)| d.is_removed()).count();
    assert!(
        removed > 0,
        "some picked destinations were removed while in use"
    );
}

#[tokio::test]
async fn resolve_destinations_expands_each_named_destination_per_address_with_its_host_kept() {
    let Some(dns) = Dnsmasq::start(Mode::hosts(5)) else {
        return;
    };
    dns.write_hosts(
        "web",
        &[
            ("127.0.0.11", "api.test"),
            ("127.0.0.21", "multi.test"),
            ("::1", "multi.test"),
        ],
    );
    let cluster = r#""Destinations": {
             "api": { "Address": "http://api.test:8080/base/", "Health": "http://api.test:8081/health/",
                       "Metadata": { "Weight": "3", "zone": "a" } },
             "named": { "Address": "https://multi.test/", "Host": "public.example",
                         "Health": "https://status.example/" },
             "ip": { "Address": "http://127.0.0.1:7000/" }
           }"#;
    let discovery = format!(
        r#"{{ "Type": "ResolveDestinations", "Servers": [{}], "Timeout": "300ms",
             "MinRefresh": "50ms", "MaxRefresh": "1s", "Jitter": 0 }}"#,
        dns.server_json()
    );
    let text =
        format!(r#"{{ "Clusters": {{ "svc": {{ "Discovery": {discovery}, {cluster} }} }} }}"#);

    // What the source answers.
    let config = Config::from_json(&text).unwrap();
    let source = ResolveDestinations::new(
        &ResolveDestinationsConfig::new().servers(vec![dns.addr()]),
        &config.clusters()[0],
    )
    .unwrap();
    let answer = answer_where(&source, "four destinations", |a| keys(a).len() == 4).await;
    /// Key, address, Host, health URL, weight.
    type Row = (String, String, Option<String>, Option<String>, f64);
    let rows: Vec<Row> = answer
        .endpoints()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e.key().to_string(),
                e.address().to_string(),
                e.attributes().host().map(str::to_string),
                e.attributes().health_url().map(ToString::to_string),
                e.attributes().weight(),
            )
        })
        .collect();
    let row = |k: &str, a: &str, h: Option<&str>, health: Option<&str>, w: f64| {
        (
            k.to_string(),
            a.to_string(),
            h.map(str::to_string),
            health.map(str::to_string),
            w,
        )
    };
    assert_eq!(
        rows,
        [
            row(
                "api[127.0.0.11]",
                "http://127.0.0.11:8080/base/",
                Some("api.test:8080"),
                Some("http://127.0.0.11:8081/health/"),
                3.0
            ),
            row(
                "named[127.0.0.21]",
                "https://127.0.0.21/",
                Some("public.example"),
                Some("https://status.example/"),
                1.0
            ),
            row(
                "named[::1]",
                "https://[::1]/",
                Some("public.example"),
                Some("https://status.example/"),
                1.0
            ),
            row("ip", "http://127.0.0.1:7000/", None, None, 1.0),
        ]
    );
    assert_eq!(
        answer.endpoints().unwrap()[0]
            .attributes()
            .metadata()
            .get("zone"),
        Some("a")
    );
    assert_eq!(answer.validity(), Some(Duration::from_secs(5)));

    // Through the engine: the expansions replace the configured destinations.
    let engine = Engine::from_json(&text).unwrap();
    let mut events = engine.subscribe();
    let _running = Discovery::start(&engine);
    ids_become(
        &engine,
        &["api[127.0.0.11]", "named[127.0.0.21]", "named[::1]", "ip"],
    )
    .await;
    assert_eq!(
        destination(&engine, "svc", "named[::1]").address,
        "https://[::1]/"
    );
    assert!(engine.status().clusters[0]
        .destinations
        .iter()
        .all(|d| d.source == "resolvedestinations"));

    // One name stops resolving: the whole answer fails, the last good set stays.
    dns.write_hosts(
        "web",
        &[("127.0.0.21", "multi.test"), ("::1", "multi.test")],
    );
    let error = next_event(&mut events, "the failed refresh", |kind| match kind {
        HealthEventKind::SourceStale { error, .. } => Some(error.clone()),
        _ => None,
    })
    .await;
    assert!(
        error.contains("destination `api`") && error.contains("api.test"),
        "{error}"
    );
    assert_eq!(ids(&engine).len(), 4);

    // It resolves again, to another address: a new destination under a new id.
    dns.write_hosts(
        "web",
        &[
            ("127.0.0.12", "api.test"),
            ("127.0.0.21", "multi.test"),
            ("::1", "multi.test"),
        ],
    );
    ids_become(
        &engine,
        &["api[127.0.0.12]", "named[127.0.0.21]", "named[::1]", "ip"],
    )
    .await;
    assert!(source_status(&engine).stale_since.is_none());
}

#[tokio::test]
async fn resolve_destinations_follows_a_reload_that_changes_the_configured_destinations() {
    let Some(dns) = Dnsmasq::start(Mode::hosts(0)) else {
        return;
    };
    dns.write_hosts(
        "web",
        &[("127.0.0.11", "api.test"), ("127.0.0.31", "extra.test")],
    );
    let document = |destinations: &str| {
        format!(
            r#"{{ "Clusters": {{ "svc": {{
                 "Discovery": {{ "Type": "ResolveDestinations", "Servers": [{}], "Timeout": "300ms",
                                 "MinRefresh": "50ms", "MaxRefresh": "1s", "Jitter": 0 }},
                 "Destinations": {{ {destinations} }} }} }} }}"#,
            dns.server_json()
        )
    };
    let engine = Engine::from_json(&document(
        r#""api": { "Address": "http://api.test:8080/" }"#,
    ))
    .unwrap();
    let _running = Discovery::start(&engine);
    ids_become(&engine, &["api[127.0.0.11]"]).await;

    engine
        .load_json(&document(
            r#""api": { "Address": "http://api.test:8080/" },
               "extra": { "Address": "http://extra.test:9000/" }"#,
        ))
        .unwrap();
    ids_become(&engine, &["api[127.0.0.11]", "extra[127.0.0.31]"]).await;
    assert_eq!(
        destination(&engine, "svc", "extra[127.0.0.31]").address,
        "http://127.0.0.31:9000/"
    );
}

#[tokio::test]
async fn an_endpoint_set_fed_by_dns_resolves_then_probes_and_its_refresh_job_follows_the_records() {
    let Some(dns) = Dnsmasq::start(Mode::hosts(0)) else {
        return;
    };
    let (one, two) = status_server_pair().await;
    let port = one.addr().port();
    dns.write_hosts("set", &[("127.0.0.1", "set.test")]);
    let probe =
        DnsSource::new(&DnsSourceConfig::address("set.test", port).servers(vec![dns.addr()]))
            .unwrap();
    answer_where(&probe, "set.test", |a| keys(a).len() == 1).await;

    let source = DiscoveryConfig::new(SourceConfig::Dns(
        DnsSourceConfig::address("set.test", port)
            .servers(vec![dns.addr()])
            .timeout(ms(300)),
    ))
    .refresh(RefreshBounds::new(ms(50), ms(1000)).jitter(0.0));
    let endpoints = EndpointSet::discovery_builder(source)
        .health_path("/health")
        .health_check_interval(ms(100))
        .failure_threshold(1.0)
        .build()
        .unwrap();
    assert!(endpoints
        .engine()
        .pick_endpoint(EndpointSet::CLUSTER)
        .unwrap_err()
        .is_discovery_pending());

    // The first pick resolves, then probes.
    let pick = within("the first pick", WAIT, endpoints.pick_endpoint())
        .await
        .unwrap();
    assert_eq!(pick.address().as_str(), format!("http://127.0.0.1:{port}/"));
    drop(pick);
    assert!(one.hits() >= 1, "probed before the pick");
    let status = destination(
        endpoints.engine(),
        EndpointSet::CLUSTER,
        &format!("127.0.0.1:{port}"),
    );
    assert_eq!(status.active, HealthState::Healthy);

    // The refresh job follows DNS: a second address joins, is probed, gets picks.
    let job = endpoints.spawn_refresh();
    dns.write_hosts(
        "set",
        &[("127.0.0.1", "set.test"), ("127.0.0.2", "set.test")],
    );
    let second = format!("127.0.0.2:{port}");
    eventually("the second address healthy", WAIT, || {
        let s = endpoints.engine().status();
        let d = s.clusters[0].destination(&second)?;
        (d.active == HealthState::Healthy).then_some(())
    })
    .await;
    assert!(two.hits() >= 1);
    // The first one fails its probes: only the second is picked.
    one.answer(503);
    eventually("the first address unhealthy", WAIT, || {
        let d = destination(
            endpoints.engine(),
            EndpointSet::CLUSTER,
            &format!("127.0.0.1:{port}"),
        );
        (d.active == HealthState::Unhealthy).then_some(())
    })
    .await;
    for _ in 0..20 {
        let pick = endpoints.pick_endpoint().await.unwrap();
        assert_eq!(pick.destination().id(), second);
    }
    within("the refresh job's stop", WAIT, job.stop()).await;
}

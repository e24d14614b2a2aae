//! etcd discovery: instances register themselves under a lease, callers read and watch the
//! prefix, and traffic follows registrations, draining, deregistrations and crashes.
//!
//! Runs on its own. It starts a throwaway single-member etcd when the `etcd` binary is installed
//! (free loopback ports, data in a temporary directory, fast elections and no fsync, killed on
//! exit), or uses the etcd at `ETCD_ENDPOINTS` (comma-separated client URLs) when that is set —
//! under a prefix of its own there, `/services/payments-example-<pid>/`, which it leaves empty.
//! With neither it says how to install etcd and exits 0, or 1 when `CI` is set (a missing
//! install step must not pass).
//!
//! Three small HTTP backends on 127.0.0.1 register with `EtcdRegistration` (a lease of 1 s,
//! renewed every third of it) under `/services/payments/`: keys `backend-1` to `backend-3`,
//! each value a YARP destination object. The cluster `payments` is a YARP JSON document whose
//! `Discovery` section is `{"Type": "Etcd", "Endpoints": [...], "Prefix": "/services/payments/"}`
//! (round robin; `Guard.MaxRemovedShare` 0.75, so that removing one of two applies at once);
//! `Discovery::start` reads the prefix, then watches it. Every pick is sent to the backend it
//! names:
//!
//! 1. three registered: traffic over all three;
//! 2. backend-1 drains: the registration follows its `Draining` handle (`drain_with`), so its
//!    value says `"Status": "Draining"` and callers rank it last — traffic leaves it while it still
//!    serves; after its drain delay it deregisters (the lease is revoked, the key goes at once)
//!    and leaves the cluster;
//! 3. backend-2 crashes: the process is gone and its registration dropped without revoking.
//!    Its key stays until etcd expires the lease — picks still name it meanwhile, which is the
//!    window active and passive health checks cover — then it leaves, and traffic is all on
//!    backend-3.
//!
//! ```text
//! etcd 3.4.23 started on http://127.0.0.1:39699 (data in /tmp/healthpick-etcd-UPLoWO, removed on exit)
//! backends on 127.0.0.1:{46247,39265,39923}, registered under /services/payments/ with a 1 s lease
//! 1. three registered        -> backend-1 10, backend-2 10, backend-3 10   (read 100 ms after Discovery::start)
//! 2. backend-1 drains        -> its value says Draining; callers saw it 3 ms after draining started
//!    traffic                 -> backend-2 15, backend-3 15   (backend-1 still serving, no picks)
//!    drained, deregistered   -> left the cluster 9 ms after deregister() was called
//! 3. backend-2 crashes       -> its key stays until its lease expires: left 1193 ms after the crash
//!    (picks meanwhile        -> 96 of 192 named the dead backend-2)
//!    traffic                 -> backend-3 30
//! ok: traffic followed registration, draining, deregistration and a lease that expired
//! ```
//!
//! Run with `cargo run --features etcd --example discovery_etcd`. Exits 0 only if every step's
//! traffic went to the expected backends (or etcd is missing and `CI` is not set).

#[path = "support/backend.rs"]
mod backend;
#[path = "support/etcd_server.rs"]
mod etcd_server;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use backend::Backend;
use etcd_server::{find_etcd, LocalEtcd};
use healthpick::discovery::Discovery;
use healthpick::service::EtcdRegistration;
use healthpick::{DiscoveryHealth, Engine};
use url::Url;

const CLUSTER: &str = "payments";
/// The registrations' lease: the shortest etcd grants, so a crash is noticed within seconds.
const TTL: Duration = Duration::from_secs(1);

type Error = Box<dyn std::error::Error>;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Where etcd is: one we started (killed when dropped), or the user's.
enum Etcd {
    Own(LocalEtcd),
    External(Vec<Url>),
}

impl Etcd {
    fn endpoints(&self) -> Result<Vec<Url>, Error> {
        Ok(match self {
            Etcd::Own(etcd) => vec![etcd.url().parse()?],
            Etcd::External(urls) => urls.clone(),
        })
    }
}

async fn run() -> Result<(), Error> {
    let (etcd, prefix) = match std::env::var("ETCD_ENDPOINTS") {
        Ok(list) if !list.trim().is_empty() => {
            let urls = list
                .split(',')
                .map(|u| Url::parse(u.trim()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("ETCD_ENDPOINTS `{list}`: {e}"))?;
            println!("etcd at ETCD_ENDPOINTS={list}");
            let prefix = format!("/services/{CLUSTER}-example-{}/", std::process::id());
            (Etcd::External(urls), prefix)
        }
        _ => {
            let Some(binary) = find_etcd() else {
                return no_etcd();
            };
            let etcd = LocalEtcd::start(&binary).await?;
            println!(
                "etcd {} started on {} (data in {}, removed on exit)",
                etcd.version(),
                etcd.url(),
                etcd.dir().display()
            );
            (Etcd::Own(etcd), format!("/services/{CLUSTER}/"))
        }
    };
    let endpoints = etcd.endpoints()?;

    let mut backends = Vec::new();
    for name in ["backend-1", "backend-2", "backend-3"] {
        let backend = Backend::start(name).await?;
        backend.set_drain_delay(Duration::from_millis(500));
        backends.push(backend);
    }
    let ports: Vec<String> = backends
        .iter()
        .map(|b| {
            b.url()
                .trim_end_matches('/')
                .rsplit(':')
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    let mut registrations = Vec::new();
    for backend in &backends {
        let registration = EtcdRegistration::builder(
            endpoints.clone(),
            format!("{prefix}{}", backend.name()),
            backend.url().parse()?,
        )
        .ttl(TTL)
        .metadata("version", "1.0.0")
        .drain_with(backend.draining())
        .register()
        .await?;
        registrations.push(Some(registration));
    }
    println!(
        "backends on 127.0.0.1:{{{}}}, registered under {prefix} with a {} s lease",
        ports.join(","),
        TTL.as_secs()
    );

    let list: Vec<String> = endpoints.iter().map(|u| format!("\"{u}\"")).collect();
    let engine = Engine::from_json(&format!(
        r#"{{ "ReverseProxy": {{ "Clusters": {{ "{CLUSTER}": {{
              "LoadBalancingPolicy": "RoundRobin",
              "Discovery": {{
                "Type": "Etcd", "Endpoints": [{}], "Prefix": "{prefix}", "Timeout": "00:00:02",
                "MinRefresh": "00:00:00.2", "MaxRefresh": "00:05:00",
                "Guard": {{ "MaxRemovedShare": 0.75 }}
              }} }} }} }} }}"#,
        list.join(", ")
    ))?;
    let started = Instant::now();
    let _discovery = Discovery::start(&engine); // reads the prefix, then watches it
    engine.ready().await; // waits (bounded) for the first read
    let http = reqwest::Client::builder().no_proxy().build()?;

    // 1. All three registered.
    wait_for(&engine, "all three registered", |m| m.len() == 3).await?;
    let seen = started.elapsed();
    let served = traffic(&engine, &http, 30, &["backend-1", "backend-2", "backend-3"]).await?;
    println!(
        "1. three registered        -> {served}   (read {} ms after Discovery::start)",
        seen.as_millis()
    );

    // 2. backend-1 drains: ranked last while it finishes, then deregisters.
    let draining = backends[0].start_draining();
    let started = Instant::now();
    wait_for(&engine, "backend-1 marked Draining", |m| {
        m.get("backend-1") == Some(&DiscoveryHealth::Draining)
    })
    .await?;
    println!(
        "2. backend-1 drains        -> its value says Draining; callers saw it {} ms after draining started",
        started.elapsed().as_millis()
    );
    let served = traffic(&engine, &http, 30, &["backend-2", "backend-3"]).await?;
    println!("   traffic                 -> {served}   (backend-1 still serving, no picks)");
    draining.drain().await; // the drain delay
    let registration = registrations[0]
        .take()
        .ok_or("backend-1 is not registered")?;
    let revoked = Instant::now();
    registration.deregister().await?;
    wait_for(&engine, "backend-1 gone", |m| !m.contains_key("backend-1")).await?;
    println!(
        "   drained, deregistered   -> left the cluster {} ms after deregister() was called",
        revoked.elapsed().as_millis()
    );
    backends[0].kill();

    // 3. backend-2 crashes: nobody revokes its lease; etcd expires it.
    backends[1].kill();
    let crashed = Instant::now();
    drop(registrations[1].take());
    let (mut picks, mut stale) = (0, 0);
    while engine_members(&engine).contains_key("backend-2") {
        if crashed.elapsed() > Duration::from_secs(10) {
            return Err("backend-2 still registered 10 s after its crash".into());
        }
        let pick = engine.pick_endpoint(CLUSTER)?;
        picks += 1;
        if pick.destination().id() == "backend-2" {
            stale += 1;
        }
        drop(pick);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let left = crashed.elapsed();
    println!(
        "3. backend-2 crashes       -> its key stays until its lease expires: left {} ms after the crash",
        left.as_millis()
    );
    println!("   (picks meanwhile        -> {stale} of {picks} named the dead backend-2)");
    if left < TTL / 2 {
        return Err(format!("backend-2 left after {left:?}, before its lease could expire").into());
    }
    let served = traffic(&engine, &http, 30, &["backend-3"]).await?;
    println!("   traffic                 -> {served}");

    // Leave etcd as we found it.
    if let Some(registration) = registrations[2].take() {
        registration.deregister().await?;
    }
    if let Etcd::Own(mut own) = etcd {
        own.kill();
    }
    println!(
        "ok: traffic followed registration, draining, deregistration and a lease that expired"
    );
    Ok(())
}

/// Neither an etcd binary nor `ETCD_ENDPOINTS`: how to get one; a failure under `CI`.
fn no_etcd() -> Result<(), Error> {
    println!(
        "This example needs etcd: either the `etcd` binary (it starts a throwaway one itself),"
    );
    println!(
        "or ETCD_ENDPOINTS=http://host:2379[,...] naming a running etcd (v3 API, gateway on)."
    );
    println!("  Debian/Ubuntu: sudo apt-get install etcd-server");
    println!("  macOS:         brew install etcd");
    println!("  elsewhere:     a release from https://github.com/etcd-io/etcd/releases");
    if std::env::var_os("CI").is_some() {
        return Err("etcd is not installed and CI is set: install etcd-server".into());
    }
    println!("skipped: no etcd");
    Ok(())
}

/// The cluster's destinations and their discovery health.
fn engine_members(engine: &Engine) -> BTreeMap<String, DiscoveryHealth> {
    engine
        .status()
        .cluster(CLUSTER)
        .map(|c| {
            c.destinations
                .iter()
                .map(|d| (d.id.clone(), d.discovery))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits (at most 10 s) until the members satisfy `done`.
async fn wait_for(
    engine: &Engine,
    what: &str,
    done: impl Fn(&BTreeMap<String, DiscoveryHealth>) -> bool,
) -> Result<(), Error> {
    let start = Instant::now();
    while !done(&engine_members(engine)) {
        if start.elapsed() > Duration::from_secs(10) {
            return Err(format!(
                "waited 10 s for {what}; the cluster has {:?}",
                engine_members(engine)
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
}

/// Picks and sends `n` requests; every answer must come from one of `expected`, and each of
/// them must answer. Returns `name count, ...`.
async fn traffic(
    engine: &Engine,
    http: &reqwest::Client,
    n: usize,
    expected: &[&str],
) -> Result<String, Error> {
    let mut served: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..n {
        let pick = engine.pick_endpoint(CLUSTER)?;
        let url = pick.url("/work");
        let who = http
            .get(url)
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?;
        if !expected.contains(&who.as_str()) {
            return Err(format!("{who} answered, expected only {expected:?}").into());
        }
        *served.entry(who).or_default() += 1;
    }
    if let Some(missing) = expected.iter().find(|e| !served.contains_key(**e)) {
        return Err(format!("{missing} got no traffic: {served:?}").into());
    }
    Ok(served
        .iter()
        .map(|(who, n)| format!("{who} {n}"))
        .collect::<Vec<_>>()
        .join(", "))
}

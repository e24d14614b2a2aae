//! DNS discovery: a cluster whose destinations are the A records of a name, refreshed by TTL,
//! with the update guard holding an answer that would empty it.
//!
//! Needs nothing installed: the example runs its own authoritative DNS server in-process
//! (hickory-server, an in-memory zone `svc.test.` on a free UDP/TCP port of 127.0.0.1) and three
//! small HTTP backends on one port at 127.0.0.1, 127.0.0.2 and 127.0.0.3. The cluster
//! `payments` is configured as a YARP-style JSON document with a `Discovery` section naming the
//! `Dns` source (`payments.svc.test`, asked again when the answer's TTL of 1 s runs out, within
//! 100 ms to 1 s, plus up to 10% jitter), and every pick is sent to the backend it names:
//!
//! 1. the name has two A records: picks spread over `backend-1` and `backend-2`;
//! 2. the records change — `127.0.0.3` added, `127.0.0.1` removed — and picks follow
//!    (`Guard.MaxRemovedShare` is 0.75 here, so removing one of two applies at once);
//! 3. the A records are deleted (the name keeps a TXT record: NODATA, an empty set): the guard
//!    holds the change and picks keep going to the last set; the status shows the held change;
//! 4. the records come back before the confirmation delay: the held change is given up.
//!
//! ```text
//! DNS server on 127.0.0.1:PORT, zone svc.test.; backends on 127.0.0.{1,2,3}:PORT
//! 1. two A records         -> backend-1 backend-2 backend-1 backend-2 backend-1 backend-2
//! 2. +127.0.0.3 -127.0.0.1 -> backend-2 backend-3 backend-2 backend-3 backend-2 backend-3
//!    (picks followed 1028 ms after the records changed: the records' TTL is 1 s)
//! 3. no A records (NODATA) -> held: it would remove every destination (removes 2 of 2)
//!    picks still           -> backend-2 backend-3 backend-2 backend-3 backend-2 backend-3
//! 4. records back          -> held change superseded by a newer publication
//!                          -> backend-2 backend-3 backend-2 backend-3 backend-2 backend-3
//! ok: picks followed DNS, and the emptying answer was held instead of applied
//! ```
//!
//! Run with `cargo run --features dns --example discovery_dns`. Exits 0 only if every step's
//! picks went to the expected backends.

#[path = "support/tiny_server.rs"]
mod tiny_server;

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use healthpick::discovery::Discovery;
use healthpick::{Engine, HealthEventKind, HeldReason};
use hickory_server::proto::rr::rdata::{A, SOA, TXT};
use hickory_server::proto::rr::{LowerName, Name, RData, Record, RecordType, RrKey};
use hickory_server::store::in_memory::InMemoryZoneHandler;
use hickory_server::zone_handler::{AxfrPolicy, Catalog, ZoneHandler, ZoneType};
use hickory_server::Server;
use tiny_server::TinyServer;
use tokio::net::{TcpListener, UdpSocket};

const ZONE: &str = "svc.test.";
const NAME: &str = "payments.svc.test.";
/// The TTL of the A records: the source asks again when it runs out (within MinRefresh and
/// MaxRefresh).
const TTL: u32 = 1;

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

type Error = Box<dyn std::error::Error>;

async fn run() -> Result<(), Error> {
    // Three backends on one port, at three loopback addresses.
    let first = TinyServer::start_at("backend-1", ([127, 0, 0, 1], 0).into()).await?;
    let port = first.addr().port();
    let backends = [
        first,
        TinyServer::start_at("backend-2", ([127, 0, 0, 2], port).into()).await?,
        TinyServer::start_at("backend-3", ([127, 0, 0, 3], port).into()).await?,
    ];

    let dns = DnsServer::start(&[[127, 0, 0, 1], [127, 0, 0, 2]]).await?;
    println!(
        "DNS server on {}, zone {ZONE}; backends on 127.0.0.{{1,2,3}}:{port}",
        dns.addr
    );
    let engine = Engine::from_json(&format!(
        r#"{{ "ReverseProxy": {{ "Clusters": {{ "payments": {{
              "LoadBalancingPolicy": "RoundRobin",
              "Discovery": {{
                "Type": "Dns", "Name": "payments.svc.test", "Port": {port},
                "Servers": ["{}"], "Timeout": "00:00:01",
                "MinRefresh": "00:00:00.1", "MaxRefresh": "00:00:01", "Jitter": 0.1,
                "Guard": {{ "MaxRemovedShare": 0.75, "ConfirmAfter": "00:00:30" }}
              }} }} }} }} }}"#,
        dns.addr
    ))?;
    let mut events = engine.subscribe();
    let _discovery = Discovery::start(&engine); // resolves now, then by TTL
    engine.ready().await; // waits (bounded) for the first answer
    let http = reqwest::Client::builder().no_proxy().build()?;

    calls(
        &engine,
        &http,
        "1. two A records",
        &["backend-1", "backend-2"],
    )
    .await?;

    // 2. One address added, one removed.
    let changed = Instant::now();
    dns.set_addresses(&[[127, 0, 0, 2], [127, 0, 0, 3]]).await;
    wait_for(&engine, "127.0.0.3 to get picks", |ids| {
        ids.contains(&format!("127.0.0.3:{port}")) && !ids.contains(&format!("127.0.0.1:{port}"))
    })
    .await?;
    let seen_after = changed.elapsed();
    calls(
        &engine,
        &http,
        "2. +127.0.0.3 -127.0.0.1",
        &["backend-2", "backend-3"],
    )
    .await?;
    println!(
        "   (picks followed {} ms after the records changed: the records' TTL is {TTL} s)",
        seen_after.as_millis()
    );

    // 3. No A records any more: held by the guard.
    dns.set_addresses(&[]).await;
    let held = next_held(&mut events).await?;
    let status = engine.status();
    let held_status = status
        .cluster("payments")
        .and_then(|c| c.sources.first())
        .and_then(|s| s.held.clone())
        .ok_or("the status shows no held change")?;
    println!(
        "3. no A records (NODATA) -> held: {held} (removes {} of {})",
        held_status.removes, held_status.of
    );
    if held != HeldReason::Emptying {
        return Err(format!("held for another reason: {held}").into());
    }
    calls(
        &engine,
        &http,
        "   picks still",
        &["backend-2", "backend-3"],
    )
    .await?;

    // 4. The records come back before the confirmation delay: the held change is given up.
    dns.set_addresses(&[[127, 0, 0, 2], [127, 0, 0, 3]]).await;
    let how = next_release(&mut events).await?;
    println!("4. records back          -> held change {how}");
    calls(&engine, &http, "", &["backend-2", "backend-3"]).await?;

    let served: Vec<u64> = backends.iter().map(TinyServer::hits).collect();
    if served.contains(&0) {
        return Err(format!("a backend was never called: {served:?}").into());
    }
    println!("ok: picks followed DNS, and the emptying answer was held instead of applied");
    Ok(())
}

/// Picks and calls six times; every answer must come from one of `expected`.
async fn calls(
    engine: &Engine,
    http: &reqwest::Client,
    step: &str,
    expected: &[&str],
) -> Result<(), Error> {
    let mut answered = Vec::new();
    for _ in 0..6 {
        let pick = engine.pick_endpoint("payments")?;
        let url = pick.url("/hello");
        answered.push(http.get(url).send().await?.text().await?);
    }
    println!("{step:<24} -> {}", answered.join(" "));
    match answered
        .iter()
        .find(|who| !expected.contains(&who.as_str()))
    {
        Some(who) => Err(format!("{step}: {who} answered, expected only {expected:?}").into()),
        None => Ok(()),
    }
}

/// Waits (at most 5 s) until the destination ids satisfy `done`.
async fn wait_for(
    engine: &Engine,
    what: &str,
    done: impl Fn(&[String]) -> bool,
) -> Result<(), Error> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        let status = engine.status();
        let ids: Vec<String> = status
            .cluster("payments")
            .map(|c| c.destinations.iter().map(|d| d.id.clone()).collect())
            .unwrap_or_default();
        if done(&ids) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Err(format!("waited 5 s for {what}").into())
}

async fn next_held(
    events: &mut tokio::sync::broadcast::Receiver<healthpick::HealthEvent>,
) -> Result<HeldReason, Error> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .map_err(|_| "no held change within 5 s")??;
        if let HealthEventKind::ChangeHeld { reason, .. } = event.kind {
            return Ok(reason);
        }
    }
}

async fn next_release(
    events: &mut tokio::sync::broadcast::Receiver<healthpick::HealthEvent>,
) -> Result<healthpick::Release, Error> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .map_err(|_| "the held change was not released within 5 s")??;
        if let HealthEventKind::ChangeReleased { how, .. } = event.kind {
            return Ok(how);
        }
    }
}

/// An authoritative DNS server for `svc.test.` on a free port of 127.0.0.1 (UDP and TCP), whose
/// A records of `payments.svc.test.` the example changes while it runs.
struct DnsServer {
    addr: SocketAddr,
    zone: Arc<InMemoryZoneHandler>,
    _server: Server<Catalog>,
    serial: std::sync::atomic::AtomicU32,
}

impl DnsServer {
    async fn start(addresses: &[[u8; 4]]) -> Result<DnsServer, Error> {
        let origin = Name::from_ascii(ZONE)?;
        let mut zone =
            InMemoryZoneHandler::empty(origin.clone(), ZoneType::Primary, AxfrPolicy::Deny);
        let soa = SOA::new(
            Name::from_ascii("ns.svc.test.")?,
            Name::from_ascii("admin.svc.test.")?,
            1,
            60,
            60,
            600,
            TTL, // the negative TTL of NXDOMAIN and NODATA answers
        );
        zone.upsert_mut(Record::from_rdata(origin.clone(), TTL, RData::SOA(soa)), 1);
        // A TXT record keeps the name in existence without addresses (NODATA, not NXDOMAIN).
        zone.upsert_mut(
            Record::from_rdata(
                Name::from_ascii(NAME)?,
                TTL,
                RData::TXT(TXT::new(vec!["payments".into()])),
            ),
            1,
        );
        for ip in addresses {
            zone.upsert_mut(a_record(*ip)?, 1);
        }
        let zone = Arc::new(zone);
        let mut catalog = Catalog::new();
        catalog.upsert(
            LowerName::new(&origin),
            vec![zone.clone() as Arc<dyn ZoneHandler>],
        );
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = udp.local_addr()?;
        let tcp = TcpListener::bind(addr).await?;
        let mut server = Server::new(catalog);
        server.register_socket(udp);
        server.register_listener(tcp, Duration::from_secs(5), 64);
        Ok(DnsServer {
            addr,
            zone,
            _server: server,
            serial: std::sync::atomic::AtomicU32::new(2),
        })
    }

    /// Replaces the A records of `payments.svc.test.` (none: the name has only its TXT record).
    async fn set_addresses(&self, addresses: &[[u8; 4]]) {
        let serial = self
            .serial
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let key = RrKey::new(
            LowerName::new(&Name::from_ascii(NAME).expect("a name")),
            RecordType::A,
        );
        self.zone.records_mut().await.remove(&key);
        for ip in addresses {
            if let Ok(record) = a_record(*ip) {
                self.zone.upsert(record, serial).await;
            }
        }
    }
}

fn a_record(ip: [u8; 4]) -> Result<Record, Error> {
    Ok(Record::from_rdata(
        Name::from_ascii(NAME)?,
        TTL,
        RData::A(A(Ipv4Addr::from(ip))),
    ))
}

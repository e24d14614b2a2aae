//! What DNS discovery costs and how fast it follows DNS (feature `dns`), against a real
//! dnsmasq (`tests/support/dnsmasq.rs`; skipped without one, failing under `CI`).
//!
//! 1. **Change to picks.** A `Dns` source of A records (TTL 0, so every refresh comes after
//!    `MinRefresh`, plus up to 10% jitter) feeds a cluster picked by a thread that picks every
//!    ~0.1 ms (RoundRobin). Each sample rewrites the hosts file so that one address is added and
//!    one removed (of three: applied at once, the guard holds nothing) and measures, from the
//!    moment the file was renamed into place, (a) the first pick of the added destination and
//!    (b) the last pick of the removed one. The samples start at points spread evenly over the
//!    refresh cycle, so the expected figures are uniform over one refresh delay (`MinRefresh`
//!    plus up to 10%), plus the lookup and the publication.
//! 2. **CPU per refresh of an SRV answer of 1,000 records.** dnsmasq 2.90 corrupts answers with
//!    more than about 545 records when it adds the targets' addresses (the glue), so the 1,000
//!    targets live on a second dnsmasq that the first forwards their domain to: one refresh is
//!    the SRV query (30 KB, over TCP after the truncated UDP answer) plus 1,000 A and 1,000 AAAA
//!    lookups of the targets (16 targets at a time), all through the source's own resolver. A
//!    500-record answer with glue (one query, no target lookups) is measured too. CPU is the
//!    client thread's (`CLOCK_THREAD_CPUTIME_ID`): the source runs on a current-thread tokio
//!    runtime, so the resolver's tasks run on that thread; dnsmasq's CPU is not included.
//! 3. **Answer to publication.** The 1,000 endpoints of (2) published into an engine through a
//!    `Publisher`: the first publication (1,000 new destinations) and a steady-state one (the
//!    same set again, what every refresh of an unchanged answer costs).
//!
//! Run `cargo bench --bench dns_discovery` (about 30 s) for the figures, or
//! `cargo bench --bench dns_discovery -- --test` / `cargo test --benches` for a small run of
//! each part that only shows it works (CI).

#![cfg_attr(test, allow(dead_code))]

#[path = "../tests/support/dnsmasq.rs"]
mod dnsmasq;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dnsmasq::{Dnsmasq, Mode, Srv};
use healthpick::config::DnsSourceConfig;
use healthpick::discovery::dns::DnsSource;
use healthpick::discovery::{Discovery, PollSource, SourceSpec};
use healthpick::{Endpoint, Engine};

fn main() {
    // As criterion does: `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // and `cargo bench -- --test` asks for the quick run.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--test") || !args.iter().any(|a| a == "--bench");
    run(quick);
}

#[cfg(test)]
#[test]
fn quick() {
    run(true);
}

fn run(quick: bool) {
    let Some(probe) = Dnsmasq::start(Mode::hosts(0)) else {
        return;
    };
    drop(probe);
    let refreshes: &[(u64, usize)] = if quick {
        &[(50, 2)]
    } else {
        &[(100, 40), (500, 12)]
    };
    println!("1. DNS change to picks (TTL 0, jitter 10%, a pick every ~0.1 ms)");
    println!(
        "   {:>10} {:>7} | {:>28} | {:>28}",
        "MinRefresh", "samples", "added: first pick p50/p90/max", "removed: last pick p50/p90/max"
    );
    for &(min_refresh, samples) in refreshes {
        change_to_picks(Duration::from_millis(min_refresh), samples);
    }

    let records = if quick { 50 } else { 1000 };
    let rounds = if quick { 2 } else { 20 };
    println!(
        "2. one refresh of an SRV answer (client thread CPU and wall time, median of {rounds})"
    );
    let endpoints = srv_refresh(records, false, rounds);
    if !quick {
        srv_refresh(500, true, rounds);
    }
    println!("3. publishing the answer's endpoints into an engine (median of {rounds})");
    publish(endpoints, rounds);
}

// ---- 1. change to picks ----------------------------------------------------------------------

fn change_to_picks(min_refresh: Duration, samples: usize) {
    let dns = Dnsmasq::start(Mode::hosts(0)).expect("dnsmasq");
    let ip = |i: usize| format!("127.0.0.{}", 10 + i);
    let key = |i: usize| format!("127.0.0.{}:8080", 10 + i);
    let write = |first: usize| {
        let ips: Vec<String> = (first..first + 3).map(ip).collect();
        let lines: Vec<(&str, &str)> = ips.iter().map(|a| (a.as_str(), "web.test")).collect();
        dns.write_hosts("web", &lines);
    };
    write(0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let engine = Engine::from_json(&format!(
        r#"{{ "Clusters": {{ "svc": {{ "LoadBalancingPolicy": "RoundRobin",
             "Discovery": {{ "Type": "Dns", "Name": "web.test", "Port": 8080, "Servers": ["{}"],
               "Timeout": "00:00:01", "MinRefresh": "{}ms", "MaxRefresh": "00:00:05", "Jitter": 0.1 }} }} }} }}"#,
        dns.addr(),
        min_refresh.as_millis()
    ))
    .expect("config");
    let discovery = runtime.block_on(async {
        let discovery = Discovery::start(&engine);
        engine.ready().await;
        discovery
    });

    // The picker: first and last pick time of every destination id.
    let seen: Arc<Mutex<HashMap<String, (Instant, Instant)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let picker = {
        let (engine, seen, stop) = (engine.clone(), seen.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(pick) = engine.pick_endpoint("svc") {
                    let now = Instant::now();
                    let mut seen = seen.lock().unwrap();
                    seen.entry(pick.destination().id().to_string())
                        .and_modify(|(_, last)| *last = now)
                        .or_insert((now, now));
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        })
    };

    let mut added = Vec::new();
    let mut removed = Vec::new();
    for sample in 0..samples {
        // Each sample starts at another point of the refresh cycle (which the previous sample
        // ended just after): spread evenly over one cycle, MinRefresh plus its jitter.
        let phase = (sample as f64 * 0.618_033_988_75).fract();
        std::thread::sleep(min_refresh.mul_f64(1.1 * phase));
        let changed = Instant::now();
        write(sample + 1); // adds key(sample + 3), removes key(sample)
        let (new, old) = (key(sample + 3), key(sample));
        let deadline = changed + min_refresh * 4 + Duration::from_secs(2);
        loop {
            let present = engine.status().clusters[0].destination(&old).is_some();
            let first_new = seen.lock().unwrap().get(&new).map(|(first, _)| *first);
            if let (Some(first), false) = (first_new, present) {
                // Let a picker holding an older snapshot pick once more, if it would.
                std::thread::sleep(Duration::from_millis(5));
                let last_old = seen.lock().unwrap().get(&old).map(|(_, last)| *last);
                added.push(first.saturating_duration_since(changed));
                removed.push(
                    last_old.map_or(Duration::ZERO, |l| l.saturating_duration_since(changed)),
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "sample {sample}: the change never arrived"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    stop.store(true, Ordering::Relaxed);
    picker.join().expect("picker");
    runtime.block_on(discovery.stop());
    println!(
        "   {:>8}ms {:>7} | {:>28} | {:>28}",
        min_refresh.as_millis(),
        samples,
        spread(&mut added),
        spread(&mut removed)
    );
}

/// `p50 / p90 / max` in ms.
fn spread(values: &mut [Duration]) -> String {
    values.sort_unstable();
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "{:.1} / {:.1} / {:.1} ms",
        ms(at(0.5)),
        ms(at(0.9)),
        ms(at(1.0))
    )
}

// ---- 2. one SRV refresh ----------------------------------------------------------------------

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

/// Measures `rounds` refreshes of an SRV answer of `records` records (targets with glue, or on a
/// second server that must be asked) and returns the endpoints of the last one.
fn srv_refresh(records: usize, glue: bool, rounds: usize) -> Vec<Endpoint> {
    let name = "_http._tcp.big.test";
    let domain = if glue { "test" } else { "ext" };
    let srv: Vec<Srv> = (0..records)
        .map(|i| {
            Srv::new(
                name,
                &format!("t{i:04}.{domain}"),
                8080,
                10 + (i % 3) as u16,
                1,
            )
        })
        .collect();
    let targets: Vec<(String, String)> = (0..records)
        .map(|i| {
            (
                format!("127.0.{}.{}", 1 + i / 250, 1 + i % 250),
                format!("t{i:04}.{domain}"),
            )
        })
        .collect();
    let lines: Vec<(&str, &str)> = targets
        .iter()
        .map(|(a, n)| (a.as_str(), n.as_str()))
        .collect();
    let ext = (!glue).then(|| {
        let ext = Dnsmasq::start(Mode::hosts(60).with("local=/ext/")).expect("dnsmasq");
        ext.write_hosts("targets", &lines);
        ext
    });
    let mut mode = Mode::srv(60, srv).with("cache-size=0");
    if let Some(ext) = &ext {
        mode = mode.with(format!("server=/ext/127.0.0.1#{}", ext.port()));
    }
    let dns = Dnsmasq::start(mode).expect("dnsmasq");
    if glue {
        dns.write_hosts("targets", &lines);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let source = runtime.block_on(async {
        DnsSource::new(
            &DnsSourceConfig::srv(name)
                .servers(vec![dns.addr()])
                .timeout(Duration::from_secs(10)),
        )
        .expect("source")
    });
    let mut cpu = Vec::new();
    let mut wall = Vec::new();
    let mut last = Vec::new();
    for round in 0..=rounds {
        let (c0, w0) = (thread_cpu(), Instant::now());
        let answer = runtime.block_on(source.resolve()).expect("an answer");
        let (c1, w1) = (thread_cpu(), Instant::now());
        let endpoints = answer.endpoints().expect("records").to_vec();
        if endpoints.len() != records {
            // dnsmasq reloads its hosts directory by inotify: the first round may come early.
            assert!(round == 0, "{} of {records} endpoints", endpoints.len());
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        if round > 0 {
            cpu.push(c1 - c0);
            wall.push(w1 - w0);
        }
        last = endpoints;
    }
    let queries = if glue { 1 } else { 1 + 2 * records };
    if cpu.is_empty() {
        panic!("no complete answer of {records} records");
    }
    let (cpu, wall) = (median(&mut cpu), median(&mut wall));
    println!(
        "   {records:>5} records, {:<34} {queries:>5} queries: CPU {:>7.2} ms ({:.2} µs per record), wall {:>7.2} ms",
        if glue {
            "addresses in the answer (glue)"
        } else {
            "targets looked up (no glue)"
        },
        cpu.as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e6 / records as f64,
        wall.as_secs_f64() * 1e3
    );
    last
}

// ---- 3. publishing -------------------------------------------------------------------------

fn publish(endpoints: Vec<Endpoint>, rounds: usize) {
    let n = endpoints.len();
    let mut first = Vec::new();
    let mut again = Vec::new();
    for _ in 0..rounds {
        let engine = Engine::from_json(r#"{"Clusters": {"svc": {}}}"#).expect("config");
        let publisher = engine
            .publisher("svc", SourceSpec::new("dns"))
            .expect("publisher");
        let set = endpoints.clone();
        let c0 = thread_cpu();
        publisher.publish(set).expect("published");
        let c1 = thread_cpu();
        let set = endpoints.clone();
        publisher.publish(set).expect("published");
        let c2 = thread_cpu();
        assert_eq!(engine.status().clusters[0].destinations.len(), n);
        first.push(c1 - c0);
        again.push(c2 - c1);
    }
    let (first, again) = (median(&mut first), median(&mut again));
    println!(
        "   {n:>5} endpoints: first publication CPU {:.2} ms ({:.2} µs each), the same set again {:.2} ms ({:.2} µs each)",
        first.as_secs_f64() * 1e3,
        first.as_secs_f64() * 1e6 / n as f64,
        again.as_secs_f64() * 1e3,
        again.as_secs_f64() * 1e6 / n as f64
    );
}

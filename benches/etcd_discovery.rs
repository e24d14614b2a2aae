//! How fast etcd discovery follows etcd and what it holds in memory (feature `etcd`),
//! against a real etcd (`tests/support/etcd.rs`: a private single-member server on loopback, fast
//! elections, no fsync; skipped without one, failing under `CI`).
//!
//! 1. **Delete to picks.** A cluster fed by an `Etcd` discovery section (`Discovery::start`, the
//!    source on a one-worker tokio runtime) holds five keys and is picked round robin by a
//!    thread that, while a sample runs, picks back to back (yielding between picks, so the
//!    resolution is a few microseconds). Each sample writes a new key (`kv/put` through the
//!    gateway) and measures, from just before the request was sent, the first pick of it; then
//!    deletes the oldest key (`kv/deleterange`) and measures, from just before that request, the
//!    last pick of the deleted key. The delete's own round trip is shown beside it: the watch
//!    event and the delete's answer leave etcd at about the same moment.
//! 2. **Lease expiry to picks.** An `EtcdRegistration` with a 1 s lease (renewed every third of
//!    it) is discovered, then dropped — a crash: no more renewals, nobody revokes — at a point
//!    spread evenly over its renewal period; measured from the drop to the last pick of it. etcd
//!    expires a lease at its TTL after the last renewal, checked every 500 ms, so the expected
//!    figure lies between about 0.67 s and 1.5 s.
//! 3. **Memory per 1,000 endpoints.** A counting global allocator gives the bytes requested
//!    and not yet freed (allocator overhead not included). (a) 1,000 endpoints parsed from
//!    typical etcd values (`parse_value`) published into an engine through a `Publisher`: live
//!    bytes after the publication (the input consumed) minus before the endpoints were built;
//!    then the same set again (steady state: nothing should grow). (b) 1,000 keys discovered
//!    from etcd by an `Etcd` source (range, then watching), everything included — engine,
//!    source's own key map, client, watch — minus the same source over an empty prefix.
//!
//! Run `cargo bench --features etcd --bench etcd_discovery` (about a minute and a half) for the
//! figures, or `cargo bench --features etcd --bench etcd_discovery -- --test` /
//! `cargo test --all-features --benches` for a small run of each part that only shows it works.

#![cfg_attr(test, allow(dead_code))]

#[path = "../tests/support/etcd.rs"]
mod etcd;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use etcd::Etcd;
use healthpick::discovery::etcd::parse_value;
use healthpick::discovery::{Discovery, SourceSpec};
use healthpick::service::EtcdRegistration;
use healthpick::{Endpoint, Engine};

// ---- the counting allocator ------------------------------------------------------------------

/// The system allocator, counting the bytes requested and not yet freed.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

// ---- main ------------------------------------------------------------------------------------

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
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let kv = runtime.block_on(async { Kv::new(&etcd.url()) });

    let samples = if quick { 2 } else { 40 };
    println!("1. etcd change to picks ({samples} samples; min / p50 / p90 / max)");
    delete_to_picks(&etcd, &runtime, &kv, samples);

    let samples = if quick { 1 } else { 30 };
    println!("2. lease expiry to picks (TTL 1 s, {samples} samples; min / p50 / p90 / max)");
    lease_to_picks(&etcd, &runtime, samples);

    let n = if quick { 100 } else { 1000 };
    println!("3. memory held (bytes requested and not freed)");
    publisher_memory(n);
    if !quick {
        publisher_memory(10_000);
    }
    source_memory(&etcd, &runtime, &kv, n);
}

/// `kv/put` and `kv/deleterange` through etcd's JSON gateway.
struct Kv {
    http: reqwest::Client,
    url: String,
}

impl Kv {
    fn new(url: &str) -> Kv {
        Kv {
            http: reqwest::Client::builder()
                .no_proxy()
                .http1_only()
                .build()
                .expect("client"),
            url: url.to_string(),
        }
    }

    async fn call(&self, call: &str, body: serde_json::Value) {
        let answer = self
            .http
            .post(format!("{}/v3/{call}", self.url))
            .body(body.to_string())
            .send()
            .await
            .expect("etcd answers");
        assert!(answer.status().is_success(), "{call}: {}", answer.status());
        let _ = answer.bytes().await;
    }

    async fn put(&self, key: &str, value: &str) {
        let body = serde_json::json!({"key": BASE64.encode(key), "value": BASE64.encode(value)});
        self.call("kv/put", body).await;
    }

    async fn delete(&self, key: &str) {
        self.call(
            "kv/deleterange",
            serde_json::json!({"key": BASE64.encode(key)}),
        )
        .await;
    }
}

/// A destination object as a registration writes it.
fn value(i: usize) -> String {
    format!(
        r#"{{"Address":"http://10.{}.{}.{}:8080/","Zone":"eu-west-1{}","Region":"eu-west-1","Metadata":{{"version":"1.4.2"}},"Weight":1}}"#,
        i / 65536 % 256,
        i / 256 % 256,
        i % 256,
        ["a", "b", "c"][i % 3]
    )
}

/// An engine whose cluster `svc` reads `prefix` of `etcd`, its discovery running on `runtime`.
fn engine_on(etcd: &Etcd, runtime: &tokio::runtime::Runtime, prefix: &str) -> (Engine, Discovery) {
    let engine = Engine::from_json(&format!(
        r#"{{"Clusters": {{"svc": {{"LoadBalancingPolicy": "RoundRobin", "Discovery": {{
            "Type": "Etcd", "Endpoints": ["{}"], "Prefix": "{prefix}", "Timeout": "00:00:05",
            "MinRefresh": "00:00:00.2", "Guard": {{"MaxRemovedShare": 0.75}} }} }} }} }}"#,
        etcd.url()
    ))
    .expect("config");
    let discovery = runtime.block_on(async {
        let discovery = Discovery::start(&engine);
        engine.ready().await;
        discovery
    });
    (engine, discovery)
}

fn ids(engine: &Engine) -> Vec<String> {
    engine.status().clusters[0]
        .destinations
        .iter()
        .map(|d| d.id.clone())
        .collect()
}

/// Polls (1 ms, at most 10 s) until `done`.
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not within 10 s: {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A thread picking `svc` and noting each id's first and last pick; back to back while
/// `spin` is set, every ~50 µs otherwise.
struct Picker {
    seen: Arc<Mutex<HashMap<String, (Instant, Instant)>>>,
    spin: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Picker {
    fn start(engine: &Engine) -> Picker {
        let seen: Arc<Mutex<HashMap<String, (Instant, Instant)>>> = Arc::default();
        let spin = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (engine, seen, spin, stop) =
                (engine.clone(), seen.clone(), spin.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(pick) = engine.pick_endpoint("svc") {
                        let now = Instant::now();
                        let mut seen = seen.lock().unwrap();
                        match seen.get_mut(pick.destination().id()) {
                            Some((_, last)) => *last = now,
                            None => {
                                seen.insert(pick.destination().id().to_string(), (now, now));
                            }
                        }
                    }
                    if spin.load(Ordering::Relaxed) {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                }
            })
        };
        Picker {
            seen,
            spin,
            stop,
            thread: Some(thread),
        }
    }

    fn first(&self, id: &str) -> Option<Instant> {
        self.seen.lock().unwrap().get(id).map(|(first, _)| *first)
    }

    fn last(&self, id: &str) -> Option<Instant> {
        self.seen.lock().unwrap().get(id).map(|(_, last)| *last)
    }

    fn spin(&self, on: bool) {
        self.spin.store(on, Ordering::Relaxed);
    }
}

impl Drop for Picker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `min / p50 / p90 / max` in ms.
fn spread(values: &mut [Duration]) -> String {
    values.sort_unstable();
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "{:.2} / {:.2} / {:.2} / {:.2} ms",
        ms(at(0.0)),
        ms(at(0.5)),
        ms(at(0.9)),
        ms(at(1.0))
    )
}

// ---- 1. delete to picks ----------------------------------------------------------------------

fn delete_to_picks(etcd: &Etcd, runtime: &tokio::runtime::Runtime, kv: &Kv, samples: usize) {
    const PREFIX: &str = "/bench/delete/";
    let key = |i: usize| format!("{PREFIX}k{i:03}");
    let id = |i: usize| format!("k{i:03}");
    const HELD: usize = 5;
    for i in 0..HELD {
        runtime.block_on(kv.put(&key(i), &value(i)));
    }
    let (engine, discovery) = engine_on(etcd, runtime, PREFIX);
    assert_eq!(ids(&engine).len(), HELD);
    let picker = Picker::start(&engine);
    let (mut added, mut removed, mut round_trip) = (Vec::new(), Vec::new(), Vec::new());
    for sample in 0..samples {
        // A put: the first pick of the new key.
        let new = sample + HELD;
        picker.spin(true);
        let sent = Instant::now();
        runtime.block_on(kv.put(&key(new), &value(new)));
        until("the new key picked", || picker.first(&id(new)).is_some());
        added.push(picker.first(&id(new)).unwrap() - sent);
        picker.spin(false);
        std::thread::sleep(Duration::from_millis(5 + sample as u64 % 7));

        // A delete: the last pick of the deleted key.
        let old = sample;
        picker.spin(true);
        let sent = Instant::now();
        runtime.block_on(kv.delete(&key(old)));
        round_trip.push(sent.elapsed());
        until("the key deleted", || !ids(&engine).contains(&id(old)));
        // A picker holding the snapshot from before would pick once more, if at all.
        std::thread::sleep(Duration::from_millis(2));
        picker.spin(false);
        let last = picker.last(&id(old)).expect("picked before");
        removed.push(last.saturating_duration_since(sent));
        std::thread::sleep(Duration::from_millis(5 + sample as u64 % 5));
    }
    drop(picker);
    runtime.block_on(discovery.stop());
    println!(
        "   put -> first pick of the new key:     {}",
        spread(&mut added)
    );
    println!(
        "   delete -> last pick of the deleted:   {}",
        spread(&mut removed)
    );
    println!(
        "   (the delete's own round trip:         {})",
        spread(&mut round_trip)
    );
}

// ---- 2. lease expiry to picks ----------------------------------------------------------------

fn lease_to_picks(etcd: &Etcd, runtime: &tokio::runtime::Runtime, samples: usize) {
    const PREFIX: &str = "/bench/lease/";
    let kv = runtime.block_on(async { Kv::new(&etcd.url()) });
    for i in 0..3 {
        runtime.block_on(kv.put(&format!("{PREFIX}static-{i}"), &value(i)));
    }
    let (engine, discovery) = engine_on(etcd, runtime, PREFIX);
    let picker = Picker::start(&engine);
    let endpoints = vec![etcd.url().parse().expect("a URL")];
    let mut expired = Vec::new();
    // The renewal period of a 1 s lease: a third of it.
    let period = Duration::from_millis(333);
    for sample in 0..samples {
        let name = format!("crash-{sample:02}");
        let registration = runtime
            .block_on(
                EtcdRegistration::builder(
                    endpoints.clone(),
                    format!("{PREFIX}{name}"),
                    format!("http://10.9.0.{}:8080/", sample % 250 + 1)
                        .parse()
                        .expect("a URL"),
                )
                .ttl(Duration::from_secs(1))
                .register(),
            )
            .expect("registered");
        until("the registration picked", || picker.first(&name).is_some());
        // Renewed a few times, then dropped at a point spread over the renewal period.
        let phase = (sample as f64 * 0.618_033_988_75).fract();
        std::thread::sleep(Duration::from_millis(700) + period.mul_f64(phase));
        let dropped = Instant::now();
        drop(registration);
        until("the lease expired", || !ids(&engine).contains(&name));
        std::thread::sleep(Duration::from_millis(2));
        let last = picker.last(&name).expect("picked");
        expired.push(last.saturating_duration_since(dropped));
    }
    drop(picker);
    runtime.block_on(discovery.stop());
    println!(
        "   drop -> last pick of it:              {}",
        spread(&mut expired)
    );
}

// ---- 3. memory -------------------------------------------------------------------------------

fn kib(bytes: isize) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// Live bytes once the process has been quiet for a moment (other threads settle).
fn settled() -> isize {
    std::thread::sleep(Duration::from_millis(50));
    live()
}

fn publisher_memory(n: usize) {
    for typical in [true, false] {
        let engine = Engine::from_json(r#"{"Clusters": {"svc": {}}}"#).expect("config");
        let publisher = engine
            .publisher("svc", SourceSpec::new("etcd").kind("etcd"))
            .expect("publisher");
        let build = |n: usize| -> Vec<Endpoint> {
            (0..n)
                .map(|i| {
                    let id = format!("instance-{i:05}");
                    if typical {
                        parse_value(&format!("/services/svc/{id}"), &id, value(i).as_bytes())
                            .expect("a value")
                    } else {
                        Endpoint::new(
                            id,
                            format!(
                                "http://10.{}.{}.{}:8080/",
                                i / 65536,
                                i / 256 % 256,
                                i % 256
                            )
                            .parse()
                            .expect("a URL"),
                        )
                    }
                })
                .collect()
        };
        let before = settled();
        let endpoints = build(n);
        let input = settled() - before;
        publisher.publish(endpoints).expect("published");
        let first = settled() - before;
        publisher.publish(build(n)).expect("published");
        let again = settled() - before;
        assert_eq!(engine.status().clusters[0].destinations.len(), n);
        let per_1000 = |b: isize| kib(b * 1000 / n as isize);
        println!(
            "   {n:>6} endpoints, {}: the Vec<Endpoint> published {} per 1,000; held by the engine once published {} per 1,000 ({} bytes an endpoint), after the same set again {} per 1,000",
            if typical {
                "typical etcd values (address, zone, region, metadata, weight)"
            } else {
                "id and address only"
            },
            per_1000(input),
            per_1000(first),
            first / n as isize,
            per_1000(again)
        );
        drop(publisher);
        drop(engine);
    }
}

fn source_memory(etcd: &Etcd, runtime: &tokio::runtime::Runtime, kv: &Kv, n: usize) {
    const EMPTY: &str = "/bench/empty/";
    const FULL: &str = "/bench/memory/";
    for i in 0..n {
        runtime.block_on(kv.put(&format!("{FULL}instance-{i:05}"), &value(i)));
    }
    let held = |prefix: &str, expected: usize| -> isize {
        let before = settled();
        let (engine, discovery) = engine_on(etcd, runtime, prefix);
        until("every key discovered", || {
            engine.status().clusters[0].destinations.len() == expected
        });
        // Let the watch settle (its stream open, the first messages read).
        std::thread::sleep(Duration::from_millis(300));
        let held = settled() - before;
        runtime.block_on(discovery.stop());
        drop(engine);
        held
    };
    // Once each first, so that lazily built statics (TLS roots, tokio's timer wheel, ...) are
    // not counted as the source's.
    held(EMPTY, 0);
    let empty = held(EMPTY, 0);
    let full = held(FULL, n);
    println!(
        "   etcd source, {n} keys discovered (engine, source's key map, client, watch): {} held; over an empty prefix {}; so {} per 1,000 keys",
        kib(full),
        kib(empty),
        kib((full - empty) * 1000 / n as isize)
    );
}

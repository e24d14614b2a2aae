//! Kubernetes discovery: picks follow a Service's EndpointSlices as they change.
//!
//! No cluster is needed: the example starts a **fake Kubernetes API server in-process** (the
//! one the tests use, `tests/support/kubernetes.rs`: list, chunked watch streams, bookmarks,
//! 410 Gone) on 127.0.0.1 and points kube's real client and watcher at it. Then:
//!
//! 1. two slices of Service `web` (pods `a`, `b` in one, `c` in the other): picks spread over all;
//! 2. `a` starts terminating (serving, not ready): it drains, picks avoid it;
//! 3. slice `web-2` is deleted: `c` leaves;
//! 4. 50 updates of a slice, timed from the write on the fake to the change in picks (median);
//! 5. 1,000 endpoints in 10 slices: memory the source and the engine keep for them, measured
//!    with a counting allocator (the fake server's own copy measured apart and left out).
//!
//! Run with `cargo run --features kubernetes --example discovery_kubernetes`; it exits by itself,
//! 0 when every step saw what it expected.

#[path = "../tests/support/kubernetes.rs"]
mod kubernetes;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use healthpick::config::{GuardMode, GuardPolicy, KubernetesSourceConfig};
use healthpick::discovery::kubernetes::KubernetesSource;
use healthpick::discovery::SourceSpec;
use healthpick::Engine;
use kubernetes::{endpoint, ready, slice, FakeApiServer};

/// Counts the bytes live on the heap.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    match tokio::time::timeout(Duration::from_secs(60), run()).await {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("FAILED: {e}");
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!("FAILED: not done within 60 s");
            ExitCode::FAILURE
        }
    }
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

async fn run() -> Result<()> {
    let fake = FakeApiServer::start().await;
    println!(
        "fake Kubernetes API server (in this process) at {}",
        fake.url
    );
    fake.apply(slice(
        "web-1",
        "web",
        vec![ready("127.0.1.1", "a"), ready("127.0.1.2", "b")],
    ));
    fake.apply(slice("web-2", "web", vec![ready("127.0.1.3", "c")]));

    let engine = Engine::from_json(r#"{"Clusters": {"web": {}}}"#)?;
    let config = KubernetesSourceConfig::new("web").port_name("http");
    let publisher = engine.publisher(
        "web",
        SourceSpec::new("kubernetes")
            .kind("kubernetes")
            .target(config.target())
            // The example removes a third of the set at once: no confirmation wanted here.
            .guard(GuardPolicy::new(GuardMode::Immediately)),
    )?;
    // `KubernetesSource::new(&config)` would read the kubeconfig or the in-cluster account.
    let source = KubernetesSource::with_client(fake.client(Duration::from_secs(30)), &config)?;
    let task = source.start(publisher);
    tokio::time::timeout(Duration::from_secs(10), engine.ready()).await?;

    step(&engine, "1. two slices, three ready pods", &["a", "b", "c"]).await?;
    fake.apply(slice(
        "web-1",
        "web",
        vec![
            endpoint("127.0.1.1", "a", false, true, true),
            ready("127.0.1.2", "b"),
        ],
    ));
    step(&engine, "2. `a` terminating (draining)", &["b", "c"]).await?;
    fake.delete("web-2");
    step(&engine, "3. slice web-2 deleted", &["b"]).await?;

    // 4. Latency: each update flips pod `b`'s address; timed until picks go to the new one.
    let mut latencies = Vec::with_capacity(50);
    for i in 0..50u32 {
        let address = format!("127.0.2.{}", i + 1);
        let expected = format!("http://{address}:8080/");
        let written = Instant::now();
        fake.apply(slice(
            "web-1",
            "web",
            vec![ready(&address, &format!("b-{i}"))],
        ));
        loop {
            let picked = engine
                .pick_endpoint("web")
                .ok()
                .map(|p| p.destination().address().to_string());
            if picked.as_deref() == Some(expected.as_str()) {
                break;
            }
            if written.elapsed() > Duration::from_secs(5) {
                return Err(format!("update {i} not seen within 5 s").into());
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        latencies.push(written.elapsed());
    }
    latencies.sort();
    println!(
        "4. 50 slice updates, write on the fake to the change in picks: median {:.1} ms, min {:.1} ms, max {:.1} ms \
         (includes the source's 50 ms coalescing window; polled every 0.5 ms)",
        ms(latencies[25]),
        ms(latencies[0]),
        ms(latencies[49])
    );

    // 5. Memory per 1,000 endpoints. The fake's copy first, on a fake nobody watches.
    let slices: Vec<serde_json::Value> = (0..10)
        .map(|s| {
            let endpoints = (0..100)
                .map(|e| ready(&format!("127.1.{s}.{}", e + 1), &format!("pod-{s}-{e}")))
                .collect();
            slice(&format!("big-{s}"), "web", endpoints)
        })
        .collect();
    let fake_only = FakeApiServer::start().await;
    let before = live();
    for s in &slices {
        fake_only.apply(s.clone());
    }
    let fake_share = live() - before;
    drop(fake_only);

    settle().await;
    let before = live();
    for s in &slices {
        fake.apply(s.clone());
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while engine.status().clusters[0].destinations.len() != 1_001 {
        if Instant::now() > deadline {
            return Err("1,000 endpoints not seen within 20 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    settle().await;
    let grown = live() - before;
    println!(
        "5. 1,000 endpoints: the process kept {} KiB more, of which the fake server's store {} KiB; \
         the source and the engine: {} KiB, about {} bytes per endpoint",
        grown / 1024,
        fake_share / 1024,
        (grown - fake_share) / 1024,
        (grown - fake_share) / 1_000
    );
    task.stop().await;
    println!("ok: picks followed the slices");
    Ok(())
}

/// Lets the source and the server finish what they were doing (freed buffers, parked tasks).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Waits until picks go to exactly `expected` (by pod uid), then prints 60 of them.
async fn step(engine: &Engine, title: &str, expected: &[&str]) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..60 {
            if let Ok(pick) = engine.pick_endpoint("web") {
                *seen.entry(pick.destination().id().to_string()).or_default() += 1;
            }
        }
        let ids: Vec<&str> = seen.keys().map(String::as_str).collect();
        if ids == expected {
            let counts: Vec<String> = seen.iter().map(|(id, n)| format!("{id}×{n}")).collect();
            println!("{title:<36} -> picks {}", counts.join(" "));
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{title}: picks went to {ids:?}, not {expected:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

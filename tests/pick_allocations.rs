//! The request path allocates nothing: a pick, a report and a drop, counted by a global
//! allocator that counts this thread's allocations. The first pick of a thread (its entry in
//! the pick cache and its ticket to the group) and the outcome window's first growth happen
//! before counting starts; what is counted is the steady state every later request is in.
//!
//! A binary of its own: the counting allocator is the process's allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use healthpick::{Engine, ManualClock, RequestOutcome};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed to the system allocator unchanged; counting touches only a
// const-initialised thread-local without a destructor, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// This thread's allocations while `f` runs.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// A cluster `c` of `n` destinations balanced by `policy`, passive checks on, on `clock`.
fn engine(policy: &str, n: usize, clock: Arc<ManualClock>) -> Engine {
    let engine = Engine::builder().clock(clock).build();
    engine.load_json(&passive_cluster(policy, n)).unwrap();
    engine
}

/// The configuration of that cluster.
fn passive_cluster(policy: &str, n: usize) -> String {
    let destinations: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#""d{i}": {{"Address": "http://127.0.0.1:{}/"}}"#,
                10000 + i
            )
        })
        .collect();
    format!(
        r#"{{"Clusters": {{"c": {{"LoadBalancingPolicy": "{policy}",
            "HealthCheck": {{"Passive": {{"Enabled": true}}}},
            "Destinations": {{{}}}}}}}}}"#,
        destinations.join(",")
    )
}

const POLICIES: [&str; 5] = [
    "PowerOfTwoChoices",
    "Random",
    "RoundRobin",
    "LeastRequests",
    "FirstAlphabetical",
];

/// The counter sees what a pick allocates when it does allocate: a thread's first pick after
/// the group changed takes a new ticket.
#[test]
fn the_count_sees_a_picks_allocations() {
    let engine = engine("Random", 3, Arc::new(ManualClock::new()));
    drop(engine.pick_endpoint("c").unwrap());
    assert_eq!(allocations(|| drop(engine.pick_endpoint("c").unwrap())), 0);
    let grown = engine.load_json(&format!(
        r#"{{"Clusters": {{"c": {{"LoadBalancingPolicy": "Random", "Destinations": {{{}}}}}}}}}"#,
        (0..4)
            .map(|i| format!(
                r#""d{i}": {{"Address": "http://127.0.0.1:{}/"}}"#,
                10000 + i
            ))
            .collect::<Vec<_>>()
            .join(",")
    ));
    grown.unwrap();
    assert!(allocations(|| drop(engine.pick_endpoint("c").unwrap())) > 0);
    assert_eq!(allocations(|| drop(engine.pick_endpoint("c").unwrap())), 0);
}

#[test]
fn a_pick_and_its_drop_allocate_nothing() {
    for policy in POLICIES {
        for n in [3, 100] {
            let engine = engine(policy, n, Arc::new(ManualClock::new()));
            drop(engine.pick_endpoint("c").unwrap());
            let counted = allocations(|| {
                for _ in 0..10_000 {
                    drop(engine.pick_endpoint("c").unwrap());
                }
            });
            assert_eq!(counted, 0, "{policy} over {n}");
            let keyed = allocations(|| {
                for k in 0..1_000u32 {
                    drop(engine.pick_endpoint_for_key("c", k.to_le_bytes()).unwrap());
                }
            });
            assert_eq!(keyed, 0, "{policy} over {n}, keyed");
        }
    }
}

#[test]
fn a_pick_a_report_and_a_drop_allocate_nothing() {
    for policy in POLICIES {
        let clock = Arc::new(ManualClock::new());
        let engine = engine(policy, 100, clock.clone());
        // Warm up: every destination's first verdict, and its outcome window grown to the
        // detection window's length (60 one-second buckets), which it then reuses.
        for _ in 0..70 {
            for _ in 0..200 {
                let pick = engine.pick_endpoint("c").unwrap();
                pick.report(RequestOutcome::Success);
            }
            clock.advance(Duration::from_secs(1));
        }
        let counted = allocations(|| {
            for round in 0..20 {
                for _ in 0..500 {
                    let pick = engine.pick_endpoint("c").unwrap();
                    pick.report(if round % 2 == 0 {
                        RequestOutcome::Success
                    } else {
                        RequestOutcome::Status(503)
                    });
                }
                clock.advance(Duration::from_millis(700));
            }
        });
        assert_eq!(counted, 0, "{policy}");
    }
}

/// On the system clock inside a runtime, a healthy destination's successes are counted
/// without the lock, and one of the engine's timers ends each grant before its bucket closes:
/// the successes that take the lock and are granted anew (setting that timer) allocate nothing
/// either.
#[test]
fn granted_successes_and_the_timers_that_end_them_allocate_nothing() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        for policy in POLICIES {
            let engine = Engine::builder().build();
            engine.load_json(&passive_cluster(policy, 100)).unwrap();
            let successes = || {
                for _ in 0..500 {
                    engine
                        .pick_endpoint("c")
                        .unwrap()
                        .report(RequestOutcome::Success);
                }
            };
            // Warm up: the windows grown to their length, the timer heap to its size.
            for _ in 0..140 {
                successes();
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let mut counted = 0;
            for _ in 0..20 {
                counted += allocations(successes);
                // The grants end while the time moves; the next successes take the lock.
                tokio::time::sleep(Duration::from_millis(700)).await;
            }
            assert_eq!(counted, 0, "{policy}");
        }
    });
}

/// Shaped picks (a policy that times its requests, a cluster that may spill to its next tier,
/// keyed picks of a cluster with affinity), their reports and drops allocate nothing either.
#[test]
fn shaped_picks_and_their_reports_allocate_nothing() {
    let shapes = [
        ("PeakEwma", r#""LoadBalancingPolicy": "PeakEwma""#),
        ("TierSpill", r#""TierSpill": {"Mode": "Load"}"#),
        (
            "SessionAffinity",
            r#""SessionAffinity": {"Enabled": true, "Policy": "CustomHeader",
                "AffinityKeyName": "X-Key"}"#,
        ),
    ];
    for (shape, section) in shapes {
        let clock = Arc::new(ManualClock::new());
        let destinations: Vec<String> = (0..100)
            .map(|i| {
                format!(
                    r#""d{i}": {{"Address": "http://127.0.0.1:{}/", "Priority": {}}}"#,
                    10000 + i,
                    i % 2
                )
            })
            .collect();
        let engine = Engine::builder().clock(clock.clone()).build();
        engine
            .load_json(&format!(
                r#"{{"Clusters": {{"c": {{{section}, "Destinations": {{{}}}}}}}}}"#,
                destinations.join(",")
            ))
            .unwrap();
        let request = |k: u32| {
            let pick = engine.pick_endpoint_for_key("c", k.to_le_bytes()).unwrap();
            clock.advance(Duration::from_micros(50));
            pick.report(RequestOutcome::Success);
            drop(engine.pick_endpoint("c").unwrap());
        };
        for k in 0..1_000 {
            request(k);
        }
        assert_eq!(allocations(|| (0..10_000).for_each(request)), 0, "{shape}");
    }
}

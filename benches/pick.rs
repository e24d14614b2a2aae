//! What a request pays to healthpick, measured with criterion.
//!
//! Every engine here is built with the default builder ([`Engine::new`]) inside a tokio runtime
//! (whose one worker fires the engines' timers): per-thread random generators seeded from the
//! OS (not a seeded engine), the system clock, one cluster `"c"` whose
//! destinations are all in tier 0, Unknown and therefore healthy, and no active health checks.
//!
//! Groups (the full benchmark id is `group/parameter`):
//!
//! - `pick/1thread/{policy}/{n}`: one `engine.pick_endpoint("c")` plus dropping the returned
//!   handle, on one thread, with `n` = 3, 100 and 10,000 destinations, for each built-in
//!   load-balancing policy. The figure is the time of one pick.
//! - `pick/2threads/{policy}/{n}`: the same, done by two threads at once on one shared engine.
//!   Each measured iteration is **two picks, one on each thread, in parallel**: both threads do
//!   `iters` picks, started together by a barrier, and the wall time from the first thread's start
//!   to the last thread's end (thread spawn and join excluded) is reported per iteration. So with
//!   `t1` the 1-thread figure and `t2` the 2-thread figure, the 2-thread throughput is `2 / t2`
//!   picks per unit of time and the scaling factor is `(2 / t2) / (1 / t1) = 2 * t1 / t2`
//!   (2.0 = perfect scaling, 1.0 = no gain, below 1.0 = contention costs more than the second
//!   core brings). Criterion's `thrpt` line shows picks per second directly for both groups.
//!   These figures need two otherwise idle cores: anything else running (a build, another test)
//!   steals a core from one thread and the whole iteration waits for it.
//! - `report/TransportFailureRate/{case}/100`: a cluster of 100 destinations with passive checks
//!   on (TransportFailureRate). `Success` and `Success_Status503_alternating` report on one
//!   handle picked outside the loop (neither outcome is a transport failure, so the destination
//!   stays Healthy and no health change or snapshot rebuild happens in the loop);
//!   `pick_report_drop` is a whole request's bookkeeping: pick, report Success, drop.
//! - `report/first_verdicts/{100,10000}`: a new passive cluster whose every destination gets
//!   its first request (RoundRobin, one pick each) and its first verdict, Unknown to Healthy;
//!   criterion's figure is the time per destination. Under the built-in policies that change
//!   leaves the snapshot as it is, so the cost does not grow with the cluster.
//! - `baseline/arcswap_random_index/{n}`: the physical floor of a random pick: an
//!   `ArcSwap<Vec<u64>>` load, one index from a thread-local `SmallRng`, and reading that element.
//!   Divide a pick figure by the baseline of the same size to see what the engine adds.
//! - `baseline/arcswap_random_index_2threads/{n}`: the baseline on two threads, read like
//!   `pick/2threads`. It writes nothing shared, so its `2 * t1 / t2` is the best scaling the
//!   machine gives at that moment (on a loaded or SMT-shared machine it is well below 2.0): judge
//!   the pick scaling against it.
//! - `baseline/arcswap_random_inflight{,_2threads}/{n}`: the baseline plus what a pick handle
//!   costs at minimum when it writes the chosen destination's own memory: clone the chosen
//!   element's `Arc`, increment and decrement its in-flight counter, drop the clone. The floor
//!   for a pick that counts requests in flight that way (the engine writes a count in a compact
//!   array and its thread's own ticket instead, so it can come in under this floor at 10,000
//!   destinations); on two threads it shows the cost of cache lines moving between cores.
//! - `baseline/arcswap_p2c_inflight{,_2threads}/{n}`: the floor of a PowerOfTwoChoices pick: two
//!   random elements, both in-flight counts read, the one with fewer counted as above.
//!
//! - with `--features metrics` only, `metrics/pick/1thread/PowerOfTwoChoices/{n}`,
//!   `metrics/pick/2threads/PowerOfTwoChoices/{n}` and
//!   `metrics/report/TransportFailureRate/pick_report_drop/100`: the same operations on an
//!   engine built while a `metrics_util` `DebuggingRecorder` was in force (its handles are the
//!   atomics exporters use), so each pick also increments the destination's pick counter and
//!   in-flight gauge and decrements the gauge on drop, and each report increments an outcome
//!   counter. In the same run the plain arms are built without a recorder (no-op handles: one
//!   branch each); a run without the feature has none of it. Compare
//!   `metrics/pick/1thread/PowerOfTwoChoices/{n}` with `pick/1thread/PowerOfTwoChoices/{n}`.
//!
//! - after the criterion groups, a **paired** run prints each arm's ratios with the
//!   arms interleaved: in each of 101 rounds, every arm makes a batch of operations (20,000, or 20
//!   per destination if that is more; for the arms that read every destination on each pick,
//!   2,000,000 / n, at least 100) on one thread and then on two threads, in an order that rotates
//!   from round to round; each round gives every arm its ratio to the baseline of that round and
//!   to its own floor, and two-thread scaling `2 * t1 / t2` from its own one- and two-thread
//!   batches (`t2` the two threads' wall time for a batch each), with the wall time per pick on
//!   two threads (`t2 / 2`) and its ratio to the floor's in the same round. The figures are the
//!   medians over the rounds:
//!
//!   ```text
//!   <n> destinations (baseline <median> ns):
//!     <arm>  1 thread <ratio>x the baseline (<median> ns), <ratio>x <its floor>
//!     <arm>  2 threads: scaling <s>x (<median> ns a pick), <ratio>x <its floor>
//!   ```
//!
//!   Scaling compares an arm with itself; the two-thread ratio to the floor compares what two
//!   threads get done. They part where an arm is faster than its floor on one thread: the same
//!   cost of lines moving between cores then takes a larger share of its time, and its scaling
//!   comes out lower than the floor's while its two threads still pick as fast.
//!
//!   The arms:
//!   - `baseline` (as above) and the floors, the least an arm costs when each pick clones the
//!     chosen destination's `Arc` and counts it in flight beside it (see above):
//!     `floor_random_inflight` and `floor_p2c_inflight` (the `baseline/arcswap_*_inflight`
//!     operations); `floor_counter_inflight`, the same with a thread-local counter for the index
//!     (RoundRobin's floor); `floor_fixed_inflight`, the same with the index known in advance
//!     (FirstAlphabetical's); `floor_scan_inflight`, one pass over a compact array of `n`
//!     in-flight counts for the first smallest, then the chosen one counted (LeastRequests');
//!     `floor_report`, a counted random pick plus one clock read and one per-destination counter
//!     update under a per-destination lock (pick + report + drop's);
//!   - `Random`, `PowerOfTwoChoices`, `RoundRobin` and `FirstAlphabetical`: `pick_endpoint` +
//!     drop; `<policy>_weighted`, the same over weights 1, 2, 3, 1, ...;
//!   - `Random_gap` and `PowerOfTwoChoices_gap`: the same over a best group of `n` whose counts
//!     do not run on one after another (one destination more, in the middle, sits in tier 1,
//!     as an unhealthy one would be left out);
//!   - `LeastRequests_idle` (nothing in flight: the first destination has the fewest) and
//!     `LeastRequests_loaded` (every destination holds one request in flight for the whole run,
//!     so a pick must read every count);
//!   - `PeakEwma`: `pick_endpoint` + drop under `PeakEwma` (the pick reads the clock and two
//!     latency estimates); `P2C_report` and `PeakEwma_report`: pick, report `Success`, drop,
//!     without passive checks, under `PowerOfTwoChoices` and `PeakEwma` (whose handle times the
//!     request and whose report records the sample);
//!   - `clock_read`: one read of the engine's default clock (`SystemClock`), what timing a
//!     request costs per end (a `PeakEwma` pick reads it, and so does its report);
//!   - `keyed`: `pick_endpoint_for_key` + drop on a `PowerOfTwoChoices` cluster with
//!     `SessionAffinity`, each pick with the thread's next of 65,536 keys (compare it with
//!     `PowerOfTwoChoices`);
//!   - `pick_report_drop`: a whole request's bookkeeping with passive TransportFailureRate on
//!     (`PowerOfTwoChoices`, every destination passive Healthy before the run): pick, report
//!     `Success`, drop.
//!
//!   Criterion measures one benchmark after another, so a change of background load between two
//!   of them shows up as a difference between them; on a shared machine that moves single
//!   figures by 10-50% from run to run. Interleaving cancels that out.
//!
//!   Each arm's timed one-thread batch follows an untimed batch of the same operations, so that
//!   every arm is measured with its own data in the caches, as criterion measures after its
//!   warm-up. Without it, an arm would begin its timed batch with the caches holding what the
//!   arms before it left; that costs most where an arm's data is its own and large, the engines'
//!   10,000 destinations, while the floors share one array of slots and keep each other's data
//!   warm. `HEALTHPICK_BENCH_COLD=1` runs the batches cold.
//!
//!   `HEALTHPICK_BENCH_SIZES=100,10000` and `HEALTHPICK_BENCH_ARMS=RoundRobin,pick_report_drop`
//!   narrow the paired run to those sizes and arms (the baseline and the arms' floors always run).
//!   Fewer arms also means warmer caches at 10,000 destinations: each arm starts its batch with
//!   what the arms before it left in the caches.
//!
//!   Address layout matters: with address-space randomization on, some processes run every
//!   engine arm markedly slower at every size (3 destinations included, where everything is in
//!   L1) while the floors stay put. Start the bench binary under `setarch -R` (no randomization)
//!   to compare two builds, or run each several times.
//!
//! Run `cargo bench --bench pick` (a few minutes), `cargo bench --features metrics --bench pick --
//! metrics/` for the metrics arms alone, `cargo bench --bench pick -- paired` for the
//! paired ratios alone (the filter matches no criterion benchmark), or
//! `cargo bench --bench pick -- --test` to run each benchmark once, as CI does.

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use healthpick::config::{
    AffinityPolicy, ClusterConfig, DestinationConfig, PassiveHealthCheckConfig,
    SessionAffinityConfig,
};
use healthpick::{Clock, Config, Engine, HealthState, RequestOutcome, SystemClock};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// The built-in load-balancing policies, by configuration name.
const POLICIES: [&str; 6] = [
    "PowerOfTwoChoices",
    "RoundRobin",
    "LeastRequests",
    "Random",
    "FirstAlphabetical",
    "PeakEwma",
];

/// Destination counts.
const SIZES: [usize; 3] = [3, 100, 10_000];

/// The one cluster id every engine here has.
const CLUSTER: &str = "c";

/// A cluster config `"c"` with `n` tier-0 destinations `d0..d{n-1}`.
fn cluster(policy: &str, n: usize) -> ClusterConfig {
    (0..n).fold(
        ClusterConfig::new(CLUSTER).load_balancing_policy(policy),
        |c, i| {
            c.destination(DestinationConfig::new(
                format!("d{i}"),
                format!("http://127.0.0.1:{}/", 10000 + i),
            ))
        },
    )
}

/// [`cluster`] with destination weights 1, 2, 3, 1, 2, 3, ... (metadata `Weight`).
fn weighted_cluster(policy: &str, n: usize) -> ClusterConfig {
    (0..n).fold(
        ClusterConfig::new(CLUSTER).load_balancing_policy(policy),
        |c, i| {
            c.destination(
                DestinationConfig::new(format!("d{i}"), format!("http://127.0.0.1:{}/", 10000 + i))
                    .metadata("Weight", (i % 3 + 1).to_string()),
            )
        },
    )
}

/// [`cluster`] with one destination more, the middle one in tier 1: the best group is `n`
/// destinations whose counts do not run on one after another (a gap where the other tier's
/// destination sits), as when a destination is unhealthy.
fn gapped_cluster(policy: &str, n: usize) -> ClusterConfig {
    (0..=n).fold(
        ClusterConfig::new(CLUSTER).load_balancing_policy(policy),
        |c, i| {
            c.destination(
                DestinationConfig::new(format!("d{i}"), format!("http://127.0.0.1:{}/", 10000 + i))
                    .priority(u32::from(i == n / 2)),
            )
        },
    )
}

/// A default-builder engine (per-thread RNG, not seeded) running `cluster`, made inside a
/// tokio runtime as in a service, so that its timer task runs (it ends the successes a healthy
/// passive destination counts without the window's lock).
fn engine(cluster: ClusterConfig) -> Engine {
    let _inside = runtime().enter();
    Engine::new(Config::new().cluster(cluster)).expect("valid benchmark config")
}

/// The engines' runtime: one worker of its own, idle but for their timers.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .expect("a runtime")
    })
}

/// One pick plus dropping its handle: what every request pays before it is sent.
#[inline(always)]
fn pick_and_drop(engine: &Engine) {
    let handle = engine
        .pick_endpoint(black_box(CLUSTER))
        .expect("the cluster has available destinations");
    black_box(&handle);
    drop(handle);
}

/// A two-party spin barrier: both threads leave within nanoseconds of each other, unlike
/// `std::sync::Barrier`, whose futex wake-up would add tens of microseconds of skew.
fn spin_barrier(arrived: &AtomicUsize) {
    arrived.fetch_add(1, Ordering::AcqRel);
    let mut spins = 0u32;
    while arrived.load(Ordering::Acquire) < 2 {
        spins += 1;
        if spins < 1 << 16 {
            std::hint::spin_loop();
        } else {
            // The other thread is not running yet (fewer free cores than threads).
            thread::yield_now();
        }
    }
}

/// Two threads each run `op` `iters` times at once; returns the wall time from the earliest
/// start to the latest end (spawn and join excluded), so criterion reports the time of one
/// iteration = two `op`s, one per thread, in parallel.
fn two_threads(iters: u64, op: impl Fn() + Sync) -> Duration {
    let arrived = AtomicUsize::new(0);
    let worker = || {
        spin_barrier(&arrived);
        let start = Instant::now();
        for _ in 0..iters {
            op();
        }
        (start, Instant::now())
    };
    let ((start_a, end_a), (start_b, end_b)) = thread::scope(|s| {
        let a = s.spawn(worker);
        let b = s.spawn(worker);
        (
            a.join().expect("bench thread panicked"),
            b.join().expect("bench thread panicked"),
        )
    });
    end_a.max(end_b) - start_a.min(start_b)
}

/// `pick/1thread/*` and `pick/2threads/*`. Each engine is built once and used by both.
fn bench_pick(c: &mut Criterion) {
    for policy in POLICIES {
        let engines: Vec<(usize, Engine)> = SIZES
            .iter()
            .map(|&n| (n, engine(cluster(policy, n))))
            .collect();

        let mut group = c.benchmark_group(format!("pick/1thread/{policy}"));
        group.throughput(Throughput::Elements(1));
        for (n, engine) in &engines {
            group.bench_with_input(BenchmarkId::from_parameter(n), engine, |b, engine| {
                b.iter(|| pick_and_drop(engine));
            });
        }
        group.finish();

        // One iteration = two picks, one per thread, in parallel (see the file comment).
        let mut group = c.benchmark_group(format!("pick/2threads/{policy}"));
        group.throughput(Throughput::Elements(2));
        for (n, engine) in &engines {
            group.bench_with_input(BenchmarkId::from_parameter(n), engine, |b, engine| {
                b.iter_custom(|iters| two_threads(iters, || pick_and_drop(engine)));
            });
        }
        group.finish();
    }
}

/// `report/TransportFailureRate/*`: passive outcome reporting on a 100-destination cluster.
fn bench_report(c: &mut Criterion) {
    const N: usize = 100;
    let engine = passive_engine("PowerOfTwoChoices", N);

    let mut group = c.benchmark_group("report/TransportFailureRate");
    group.throughput(Throughput::Elements(1));

    let handle = engine.pick_endpoint(CLUSTER).expect("pick");
    group.bench_function(BenchmarkId::new("Success", N), |b| {
        b.iter(|| handle.report(black_box(RequestOutcome::Success)));
    });
    // Neither outcome is a transport failure: the destination stays Healthy throughout.
    let mut flip = false;
    group.bench_function(BenchmarkId::new("Success_Status503_alternating", N), |b| {
        b.iter(|| {
            flip = !flip;
            let outcome = if flip {
                RequestOutcome::Success
            } else {
                RequestOutcome::Status(503)
            };
            handle.report(black_box(outcome));
        });
    });
    drop(handle);

    group.bench_function(BenchmarkId::new("pick_report_drop", N), |b| {
        b.iter(|| {
            let handle = engine
                .pick_endpoint(black_box(CLUSTER))
                .expect("the cluster has available destinations");
            handle.report(black_box(RequestOutcome::Success));
            drop(handle);
        });
    });
    group.finish();
    assert!(all_passive_healthy(&engine), "no destination was ejected");
}

/// `report/first_verdicts/{n}`: a new cluster of `n` destinations with passive checks on, each
/// picked once (RoundRobin) and its `Success` reported: every report is the destination's first
/// verdict, Unknown to Healthy. Time per destination (criterion's throughput); the engine is
/// built outside the timing, and every destination is checked Healthy afterwards.
fn bench_first_verdicts(c: &mut Criterion) {
    let mut group = c.benchmark_group("report/first_verdicts");
    group.sample_size(10);
    for n in [100, 10_000] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    let engine = engine(
                        cluster("RoundRobin", n).passive(PassiveHealthCheckConfig::enabled()),
                    );
                    let start = Instant::now();
                    for _ in 0..n {
                        let handle = engine.pick_endpoint(black_box(CLUSTER)).expect("pick");
                        handle.report(black_box(RequestOutcome::Success));
                    }
                    took += start.elapsed();
                    assert!(all_passive_healthy(&engine), "each destination judged once");
                }
                took
            });
        });
    }
    group.finish();
}

/// `metrics/*`: picks and reports of an engine whose handles a recorder registered (feature
/// `metrics`; nothing without it).
fn bench_metrics(c: &mut Criterion) {
    #[cfg(feature = "metrics")]
    {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let engines: Vec<(usize, Engine)> = SIZES
            .iter()
            .map(|&n| {
                let engine = metrics::with_local_recorder(&recorder, || {
                    engine(cluster("PowerOfTwoChoices", n))
                });
                (n, engine)
            })
            .collect();
        let mut group = c.benchmark_group("metrics/pick/1thread/PowerOfTwoChoices");
        group.throughput(Throughput::Elements(1));
        for (n, engine) in &engines {
            group.bench_with_input(BenchmarkId::from_parameter(n), engine, |b, engine| {
                b.iter(|| pick_and_drop(engine));
            });
        }
        group.finish();
        let mut group = c.benchmark_group("metrics/pick/2threads/PowerOfTwoChoices");
        group.throughput(Throughput::Elements(2));
        for (n, engine) in &engines {
            group.bench_with_input(BenchmarkId::from_parameter(n), engine, |b, engine| {
                b.iter_custom(|iters| two_threads(iters, || pick_and_drop(engine)));
            });
        }
        group.finish();

        const N: usize = 100;
        let engine = metrics::with_local_recorder(&recorder, || {
            engine(cluster("PowerOfTwoChoices", N).passive(PassiveHealthCheckConfig::enabled()))
        });
        // Every destination passive Healthy first, as in `bench_report`.
        for _ in 0..20 {
            for _ in 0..N {
                engine
                    .pick_endpoint(CLUSTER)
                    .expect("pick")
                    .report(RequestOutcome::Success);
            }
        }
        let mut group = c.benchmark_group("metrics/report/TransportFailureRate");
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::new("pick_report_drop", N), |b| {
            b.iter(|| {
                let handle = engine
                    .pick_endpoint(black_box(CLUSTER))
                    .expect("the cluster has available destinations");
                handle.report(black_box(RequestOutcome::Success));
                drop(handle);
            });
        });
        group.finish();
    }
    #[cfg(not(feature = "metrics"))]
    let _ = c;
}

/// Seeds for the baseline's generators: every thread gets its own.
static BASELINE_SEEDS: AtomicU64 = AtomicU64::new(0x5eed_1e55);

thread_local! {
    /// The baseline's fast generator: one per thread, each seeded differently (with one seed for
    /// all, two threads would draw the same indices in step and fight over the same element).
    static BASELINE_RNG: RefCell<SmallRng> =
        RefCell::new(SmallRng::seed_from_u64(BASELINE_SEEDS.fetch_add(0x9e37_79b9, Ordering::Relaxed)));
}

/// The baseline operation: an `ArcSwap` load, a thread-local random index, one element read.
#[inline(always)]
fn baseline_read(values: &ArcSwap<Vec<u64>>) -> u64 {
    let guard = black_box(values).load();
    let i = BASELINE_RNG.with(|r| r.borrow_mut().random_range(0..guard.len()));
    black_box(guard[i])
}

/// `baseline/arcswap_random_index/*`: the least a lock-free random pick can cost; and
/// `baseline/arcswap_random_index_2threads/*`, the same on two threads at once (read like
/// `pick/2threads`), as a control: it shares nothing written, so its scaling `2 * t1 / t2` is
/// what this machine allows at best.
fn bench_baseline(c: &mut Criterion) {
    let tables: Vec<(usize, ArcSwap<Vec<u64>>)> = SIZES
        .iter()
        .map(|&n| (n, ArcSwap::from(Arc::new((0..n as u64).collect()))))
        .collect();

    let mut group = c.benchmark_group("baseline/arcswap_random_index");
    group.throughput(Throughput::Elements(1));
    for (n, values) in &tables {
        group.bench_with_input(BenchmarkId::from_parameter(n), values, |b, values| {
            b.iter(|| baseline_read(values));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("baseline/arcswap_random_index_2threads");
    group.throughput(Throughput::Elements(2));
    for (n, values) in &tables {
        group.bench_with_input(BenchmarkId::from_parameter(n), values, |b, values| {
            b.iter_custom(|iters| {
                two_threads(iters, || {
                    black_box(baseline_read(values));
                })
            });
        });
    }
    group.finish();
}

/// A stand-in for a destination's hot block: an in-flight counter and one pointer-sized field
/// in a 32-byte `Arc` allocation (48 bytes from the allocator; the engine's block is 56, 64 from
/// the allocator). The floors measure the same with 64-byte slots and with slots laid out one
/// after another, so the difference in size does not flatter them.
struct Slot {
    in_flight: AtomicUsize,
    _payload: u64,
}

/// `n` slots, allocated one after another like the engine's hot blocks.
fn slots(n: usize) -> ArcSwap<Vec<Arc<Slot>>> {
    let slots = (0..n)
        .map(|_| {
            Arc::new(Slot {
                in_flight: AtomicUsize::new(0),
                _payload: 0,
            })
        })
        .collect();
    ArcSwap::from_pointee(slots)
}

/// The in-flight baseline operation: as [`baseline_read`], then what a pick handle does to the
/// chosen element: clone its `Arc` and count it in flight, then uncount it and drop the clone.
#[inline(always)]
fn baseline_inflight(slots: &ArcSwap<Vec<Arc<Slot>>>) {
    let guard = black_box(slots).load();
    let i = BASELINE_RNG.with(|r| r.borrow_mut().random_range(0..guard.len()));
    let slot = Arc::clone(&guard[i]);
    drop(guard);
    slot.in_flight.fetch_add(1, Ordering::Relaxed);
    black_box(&slot);
    slot.in_flight.fetch_sub(1, Ordering::Relaxed);
}

/// The floor of a PowerOfTwoChoices pick: as [`baseline_inflight`], but two random elements are
/// drawn, their in-flight counts read, and the one with fewer in flight is counted.
#[inline(always)]
fn baseline_p2c_inflight(slots: &ArcSwap<Vec<Arc<Slot>>>) {
    let guard = black_box(slots).load();
    let n = guard.len();
    let (i, j) = BASELINE_RNG.with(|r| {
        let mut r = r.borrow_mut();
        (r.random_range(0..n), r.random_range(0..n))
    });
    let chosen = if guard[j].in_flight.load(Ordering::Relaxed)
        < guard[i].in_flight.load(Ordering::Relaxed)
    {
        j
    } else {
        i
    };
    let slot = Arc::clone(&guard[chosen]);
    drop(guard);
    slot.in_flight.fetch_add(1, Ordering::Relaxed);
    black_box(&slot);
    slot.in_flight.fetch_sub(1, Ordering::Relaxed);
}

/// `baseline/arcswap_random_inflight/*` and `..._2threads/*`: the floor of a random pick that
/// counts requests in flight. Every call writes the chosen element's cache line, so on two
/// threads lines migrate between cores: compare `pick/2threads` with this rather than with the
/// read-only baseline to see what the engine adds beyond in-flight counting itself.
fn bench_baseline_inflight(c: &mut Criterion) {
    let tables: Vec<(usize, ArcSwap<Vec<Arc<Slot>>>)> =
        SIZES.iter().map(|&n| (n, slots(n))).collect();

    one_and_two_threads(
        c,
        "baseline/arcswap_random_inflight",
        &tables,
        baseline_inflight,
    );
    one_and_two_threads(
        c,
        "baseline/arcswap_p2c_inflight",
        &tables,
        baseline_p2c_inflight,
    );
}

/// The policies whose paired ratios are reported with unweighted and weighted arms.
const PAIRED_POLICIES: [&str; 3] = ["Random", "PowerOfTwoChoices", "RoundRobin"];

/// The policies whose arms also run over a best group with a gap.
const GAPPED_POLICIES: [&str; 2] = ["Random", "PowerOfTwoChoices"];

/// Rounds of the paired comparison.
const PAIRED_ROUNDS: usize = 101;

/// Picks per arm and batch (on one thread; on each of two threads) with `n` destinations: at
/// least 20 per destination, so that refilling the caches after another arm's batch (up to
/// 400 KB at 10,000 destinations) stays a small part of the batch.
fn paired_batch(n: usize) -> u64 {
    (20 * n as u64).max(20_000)
}

/// The same for an arm that reads every destination on each pick (LeastRequests and its
/// floor): a batch reads at least 2,000,000 counts, whatever the size.
fn paired_scan_batch(n: usize) -> u64 {
    (2_000_000 / n as u64).clamp(100, 20_000)
}

/// A default-builder engine running `cluster` with passive TransportFailureRate on, every
/// destination already passive Healthy (so that the one-off first verdict and health change
/// of each destination's first report stay out of the measurements).
fn passive_engine(policy: &str, n: usize) -> Engine {
    let engine = engine(cluster(policy, n).passive(PassiveHealthCheckConfig::enabled()));
    for _ in 0..1000 {
        if all_passive_healthy(&engine) {
            return engine;
        }
        for _ in 0..n.max(100) {
            let handle = engine.pick_endpoint(CLUSTER).expect("pick");
            handle.report(RequestOutcome::Success);
        }
    }
    assert!(
        all_passive_healthy(&engine),
        "every destination reported Healthy"
    );
    engine
}

fn all_passive_healthy(engine: &Engine) -> bool {
    engine.status().clusters[0]
        .destinations
        .iter()
        .all(|d| d.passive == HealthState::Healthy)
}

/// Keys a keyed arm cycles through: as many as the consistent-hash table has slots, so that
/// the lookups spread over the whole table as real keys do.
fn affinity_keys() -> Vec<String> {
    (0..1 << 16).map(|i| format!("session-{i:08x}")).collect()
}

thread_local! {
    /// The keyed arm's position in its keys, one per thread.
    static KEY_CURSOR: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One keyed pick plus dropping its handle, with the thread's next key.
#[inline(always)]
fn keyed_pick_and_drop(engine: &Engine, keys: &[String]) {
    let next = KEY_CURSOR.with(|cursor| {
        let next = (cursor.get() + 1) & 0xffff;
        cursor.set(next);
        next
    });
    let handle = engine
        .pick_endpoint_for_key(black_box(CLUSTER), &keys[next])
        .expect("the cluster has available destinations");
    black_box(&handle);
    drop(handle);
}

/// A whole request's bookkeeping: pick, report `Success`, drop.
#[inline(always)]
fn pick_report_drop(engine: &Engine) {
    let handle = engine
        .pick_endpoint(black_box(CLUSTER))
        .expect("the cluster has available destinations");
    handle.report(black_box(RequestOutcome::Success));
    drop(handle);
}

thread_local! {
    /// The round-robin floor's cursor: one per thread, starting apart (as the engine's).
    static FLOOR_CURSOR: std::cell::Cell<usize> = std::cell::Cell::new(
        BASELINE_SEEDS.fetch_add(0x9e37_79b9, Ordering::Relaxed) as usize,
    );
}

/// The floor of a RoundRobin pick: as [`baseline_inflight`], with a thread-local counter instead
/// of a random draw.
#[inline(always)]
fn floor_counter_inflight(slots: &ArcSwap<Vec<Arc<Slot>>>) {
    let guard = black_box(slots).load();
    let i = FLOOR_CURSOR.with(|c| {
        let v = c.get();
        c.set(v.wrapping_add(1));
        v
    }) % guard.len();
    count_once(&guard[i]);
}

/// The floor of a FirstAlphabetical pick: the answer is known in advance (index 0), so only the
/// snapshot load and the counting remain.
#[inline(always)]
fn floor_fixed_inflight(slots: &ArcSwap<Vec<Arc<Slot>>>) {
    let guard = black_box(slots).load();
    count_once(&guard[black_box(0)]);
}

/// What the LeastRequests floor reads: a compact array of `n` in-flight counts (each 1, as in a
/// cluster where every destination has a request in flight, so no scan can stop early) beside
/// the slots.
struct Counted {
    counts: Vec<AtomicU32>,
    slots: Vec<Arc<Slot>>,
}

/// The floor of a LeastRequests pick: one pass over a compact array of counts for the first
/// smallest, then the chosen one counted in flight (in the array).
#[inline(always)]
fn floor_scan_inflight(counted: &ArcSwap<Counted>) {
    let guard = black_box(counted).load();
    let mut best = 0;
    let mut least = u32::MAX;
    for (i, c) in guard.counts.iter().enumerate() {
        let n = c.load(Ordering::Relaxed);
        if n < least {
            least = n;
            best = i;
        }
    }
    let slot = Arc::clone(&guard.slots[best]);
    guard.counts[best].fetch_add(1, Ordering::Relaxed);
    black_box(&slot);
    guard.counts[best].fetch_sub(1, Ordering::Relaxed);
}

/// The floor of pick + report + drop: a counted random pick, one clock read, and one
/// per-destination counter update under a per-destination lock (what a report that keeps
/// outcome counts per destination costs at least).
#[inline(always)]
fn floor_report(slots: &ArcSwap<Vec<Arc<Slot>>>, outcomes: &[std::sync::Mutex<[u64; 2]>]) {
    let guard = black_box(slots).load();
    let i = BASELINE_RNG.with(|r| r.borrow_mut().random_range(0..guard.len()));
    let slot = Arc::clone(&guard[i]);
    drop(guard);
    slot.in_flight.fetch_add(1, Ordering::Relaxed);
    black_box(&slot);
    black_box(Instant::now());
    {
        let mut counts = outcomes[i].lock().expect("not poisoned");
        counts[0] += 1;
        black_box(&mut *counts);
    }
    slot.in_flight.fetch_sub(1, Ordering::Relaxed);
}

/// Clones `slot`'s `Arc`, counts it in flight, uncounts it, drops the clone: what a pick handle
/// does at least.
#[inline(always)]
fn count_once(slot: &Arc<Slot>) {
    let slot = Arc::clone(slot);
    slot.in_flight.fetch_add(1, Ordering::Relaxed);
    black_box(&slot);
    slot.in_flight.fetch_sub(1, Ordering::Relaxed);
}

/// One arm of the paired comparison.
struct Arm<'a> {
    name: String,
    /// The arm whose operation is this one's floor (the least it costs when a pick writes the
    /// chosen destination's own memory).
    floor: Option<usize>,
    batch: u64,
    op: Box<dyn Fn() + Sync + 'a>,
}

fn arm<'a>(name: &str, floor: Option<usize>, batch: u64, op: Box<dyn Fn() + Sync + 'a>) -> Arm<'a> {
    Arm {
        name: name.to_string(),
        floor,
        batch,
        op,
    }
}

/// The paired comparison (see the file comment). Runs only under `cargo bench`, not when CI runs
/// each benchmark once as a test.
fn bench_paired(_: &mut Criterion) {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    if !has("--bench") || has("--test") || has("--list") || has("--profile-time") {
        return;
    }
    let (only_sizes, only_arms) = paired_filters();
    let warm_up = std::env::var_os("HEALTHPICK_BENCH_COLD").is_none();
    println!(
        "\npaired comparison ({PAIRED_ROUNDS} rounds; per arm and batch 20,000 picks or 20 per \
         destination, whichever is more, for scanning arms 2,000,000 / n; order rotating; {}):",
        if warm_up {
            "each one-thread batch after an untimed one"
        } else {
            "cold batches"
        }
    );
    for n in SIZES {
        if only_sizes.as_ref().is_some_and(|sizes| !sizes.contains(&n)) {
            continue;
        }
        let batch = paired_batch(n);
        let scan_batch = paired_scan_batch(n);
        let values: ArcSwap<Vec<u64>> = ArcSwap::from(Arc::new((0..n as u64).collect()));
        let slots = slots(n);
        let counted = ArcSwap::from_pointee(Counted {
            counts: (0..n).map(|_| AtomicU32::new(1)).collect(),
            slots: slots.load().to_vec(),
        });
        let outcomes: Vec<std::sync::Mutex<[u64; 2]>> =
            (0..n).map(|_| std::sync::Mutex::new([0; 2])).collect();
        let unweighted: Vec<Engine> = PAIRED_POLICIES
            .iter()
            .map(|&policy| engine(cluster(policy, n)))
            .collect();
        let weighted: Vec<Engine> = PAIRED_POLICIES
            .iter()
            .map(|&policy| engine(weighted_cluster(policy, n)))
            .collect();
        let gapped: Vec<Engine> = GAPPED_POLICIES
            .iter()
            .map(|&policy| engine(gapped_cluster(policy, n)))
            .collect();
        let first_alphabetical = engine(cluster("FirstAlphabetical", n));
        let least_idle = engine(cluster("LeastRequests", n));
        // Every destination has one request in flight for the whole run: a scan must read all.
        let least_loaded = engine(cluster("LeastRequests", n));
        let held: Vec<_> = (0..n)
            .map(|_| least_loaded.pick_endpoint(CLUSTER).expect("pick"))
            .collect();
        assert!(
            held.iter().all(|h| h.destination().in_flight() == 1),
            "LeastRequests filled every destination once"
        );
        let reporting = passive_engine("PowerOfTwoChoices", n);
        let keyed = engine(
            cluster("PowerOfTwoChoices", n)
                .session_affinity(SessionAffinityConfig::new(AffinityPolicy::CustomHeader)),
        );
        let keys = affinity_keys();
        let peak_ewma = engine(cluster("PeakEwma", n));
        let p2c_reporting = engine(cluster("PowerOfTwoChoices", n));
        let peak_ewma_reporting = engine(cluster("PeakEwma", n));

        // Floors first, at fixed positions.
        const RANDOM: usize = 1;
        const P2C: usize = 2;
        const COUNTER: usize = 3;
        const FIXED: usize = 4;
        const SCAN: usize = 5;
        const REPORT: usize = 6;
        let mut arms: Vec<Arm<'_>> = vec![
            arm(
                "baseline",
                None,
                batch,
                Box::new(|| {
                    black_box(baseline_read(&values));
                }),
            ),
            arm(
                "floor_random_inflight",
                None,
                batch,
                Box::new(|| baseline_inflight(&slots)),
            ),
            arm(
                "floor_p2c_inflight",
                None,
                batch,
                Box::new(|| baseline_p2c_inflight(&slots)),
            ),
            arm(
                "floor_counter_inflight",
                None,
                batch,
                Box::new(|| floor_counter_inflight(&slots)),
            ),
            arm(
                "floor_fixed_inflight",
                None,
                batch,
                Box::new(|| floor_fixed_inflight(&slots)),
            ),
            arm(
                "floor_scan_inflight",
                None,
                scan_batch,
                Box::new(|| floor_scan_inflight(&counted)),
            ),
            arm(
                "floor_report",
                None,
                batch,
                Box::new(|| floor_report(&slots, &outcomes)),
            ),
        ];
        let floors = [RANDOM, P2C, COUNTER];
        for ((policy, engine), floor) in PAIRED_POLICIES.iter().zip(&unweighted).zip(floors) {
            arms.push(arm(
                policy,
                Some(floor),
                batch,
                Box::new(move || pick_and_drop(engine)),
            ));
        }
        arms.push(arm(
            "FirstAlphabetical",
            Some(FIXED),
            batch,
            Box::new(|| pick_and_drop(&first_alphabetical)),
        ));
        arms.push(arm(
            "LeastRequests_idle",
            Some(SCAN),
            scan_batch,
            Box::new(|| pick_and_drop(&least_idle)),
        ));
        arms.push(arm(
            "LeastRequests_loaded",
            Some(SCAN),
            scan_batch,
            Box::new(|| pick_and_drop(&least_loaded)),
        ));
        for ((policy, engine), floor) in PAIRED_POLICIES.iter().zip(&weighted).zip(floors) {
            arms.push(arm(
                &format!("{policy}_weighted"),
                Some(floor),
                batch,
                Box::new(move || pick_and_drop(engine)),
            ));
        }
        for ((policy, engine), floor) in GAPPED_POLICIES.iter().zip(&gapped).zip([RANDOM, P2C]) {
            arms.push(arm(
                &format!("{policy}_gap"),
                Some(floor),
                batch,
                Box::new(move || pick_and_drop(engine)),
            ));
        }
        arms.push(arm(
            "PeakEwma",
            Some(P2C),
            batch,
            Box::new(|| pick_and_drop(&peak_ewma)),
        ));
        arms.push(arm(
            "P2C_report",
            Some(P2C),
            batch,
            Box::new(|| pick_report_drop(&p2c_reporting)),
        ));
        arms.push(arm(
            "PeakEwma_report",
            Some(P2C),
            batch,
            Box::new(|| pick_report_drop(&peak_ewma_reporting)),
        ));
        // What timing a request costs at least: a `PeakEwma` pick reads the clock once, and its
        // report once more.
        let clock = SystemClock::new();
        arms.push(arm(
            "clock_read",
            None,
            batch,
            Box::new(move || {
                black_box(clock.now());
            }),
        ));
        arms.push(arm(
            "keyed",
            Some(P2C),
            batch,
            Box::new(|| keyed_pick_and_drop(&keyed, &keys)),
        ));
        arms.push(arm(
            "pick_report_drop",
            Some(REPORT),
            batch,
            Box::new(|| pick_report_drop(&reporting)),
        ));
        let count = arms.len();
        // The baseline always runs, and the floors of the arms asked for.
        let mut runs: Vec<bool> = arms
            .iter()
            .map(|a| only_arms.as_ref().is_none_or(|only| only.contains(&a.name)))
            .collect();
        runs[0] = true;
        for index in 0..count {
            if let (true, Some(floor)) = (runs[index], arms[index].floor) {
                runs[floor] = true;
            }
        }
        let mut one: Vec<Vec<f64>> = vec![Vec::with_capacity(PAIRED_ROUNDS); count];
        let mut ratio: Vec<Vec<f64>> = vec![Vec::with_capacity(PAIRED_ROUNDS); count];
        let mut to_floor: Vec<Vec<f64>> = vec![Vec::with_capacity(PAIRED_ROUNDS); count];
        let mut scaling: Vec<Vec<f64>> = vec![Vec::with_capacity(PAIRED_ROUNDS); count];
        let mut two: Vec<Vec<f64>> = vec![Vec::with_capacity(PAIRED_ROUNDS); count];
        let mut two_to_floor: Vec<Vec<f64>> = vec![Vec::with_capacity(PAIRED_ROUNDS); count];
        for round in 0..PAIRED_ROUNDS {
            let mut t1 = vec![0.0; count];
            let mut t2 = vec![0.0; count];
            for k in 0..count {
                let index = (round + k) % count;
                if !runs[index] {
                    continue;
                }
                let Arm { batch, op, .. } = &arms[index];
                if warm_up {
                    for _ in 0..*batch {
                        op();
                    }
                }
                let start = Instant::now();
                for _ in 0..*batch {
                    op();
                }
                t1[index] = start.elapsed().as_secs_f64() * 1e9 / *batch as f64;
                // Wall time per pick with two threads picking (`batch` each).
                t2[index] = two_threads(*batch, op).as_secs_f64() * 1e9 / (2 * *batch) as f64;
                scaling[index].push(t1[index] / t2[index]);
            }
            for index in (0..count).filter(|&i| runs[i]) {
                one[index].push(t1[index]);
                ratio[index].push(t1[index] / t1[0]);
                two[index].push(t2[index]);
                if let Some(floor) = arms[index].floor {
                    to_floor[index].push(t1[index] / t1[floor]);
                    two_to_floor[index].push(t2[index] / t2[floor]);
                }
            }
        }
        let baseline = median(&mut one[0]);
        println!("  {n} destinations (baseline {baseline:.1} ns):");
        for index in (1..count).filter(|&i| runs[i]) {
            let versus_floor = versus_floor(&arms, index, &mut to_floor[index]);
            println!(
                "    {:<28} 1 thread {:.2}x the baseline ({:.1} ns){versus_floor}",
                arms[index].name,
                median(&mut ratio[index]),
                median(&mut one[index]),
            );
        }
        for index in (0..count).filter(|&i| runs[i]) {
            let versus_floor = versus_floor(&arms, index, &mut two_to_floor[index]);
            println!(
                "    {:<28} 2 threads: scaling {:.2}x ({:.1} ns a pick){versus_floor}",
                arms[index].name,
                median(&mut scaling[index]),
                median(&mut two[index]),
            );
        }
        drop(held);
    }
}

/// `, <median of ratios>x <floor>` for an arm with a floor, else nothing.
fn versus_floor(arms: &[Arm<'_>], index: usize, ratios: &mut [f64]) -> String {
    match arms[index].floor {
        Some(floor) => format!(", {:.2}x {}", median(ratios), arms[floor].name),
        None => String::new(),
    }
}

/// `HEALTHPICK_BENCH_SIZES=100,10000` and `HEALTHPICK_BENCH_ARMS=RoundRobin,pick_report_drop`
/// narrow the paired run to those sizes and arms (the baseline and the arms' floors always run),
/// for a quicker look at one case; unset, everything runs.
fn paired_filters() -> (Option<Vec<usize>>, Option<Vec<String>>) {
    let list = |name: &str| {
        std::env::var(name).ok().map(|v| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .collect::<Vec<_>>()
        })
    };
    let sizes = list("HEALTHPICK_BENCH_SIZES").map(|sizes| {
        sizes
            .iter()
            .map(|s| {
                s.parse()
                    .expect("HEALTHPICK_BENCH_SIZES lists destination counts")
            })
            .collect()
    });
    (sizes, list("HEALTHPICK_BENCH_ARMS"))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Registers `{name}/{n}` (one thread) and `{name}_2threads/{n}` (read like `pick/2threads`)
/// running `op` on each table.
fn one_and_two_threads<T: Sync>(
    c: &mut Criterion,
    name: &str,
    tables: &[(usize, T)],
    op: impl Fn(&T) + Sync + Copy,
) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    for (n, table) in tables {
        group.bench_with_input(BenchmarkId::from_parameter(n), table, |b, table| {
            b.iter(|| op(table));
        });
    }
    group.finish();

    let mut group = c.benchmark_group(format!("{name}_2threads"));
    group.throughput(Throughput::Elements(2));
    for (n, table) in tables {
        group.bench_with_input(BenchmarkId::from_parameter(n), table, |b, table| {
            b.iter_custom(|iters| two_threads(iters, || op(table)));
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench_baseline, bench_baseline_inflight, bench_pick, bench_report, bench_first_verdicts, bench_metrics, bench_paired
}
criterion_main!(benches);

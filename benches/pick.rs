//! What a request pays to healthpick, measured with criterion.
//!
//! Every engine here is built with the default builder ([`Engine::new`]): per-thread random
//! generators seeded from the OS (not a seeded engine), the system clock, one cluster `"c"` whose
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
//! - `baseline/arcswap_random_index/{n}`: the physical floor of a random pick: an
//!   `ArcSwap<Vec<u64>>` load, one index from a thread-local `SmallRng`, and reading that element.
//!   Divide a pick figure by the baseline of the same size to see what the engine adds.
//! - `baseline/arcswap_random_index_2threads/{n}`: the baseline on two threads, read like
//!   `pick/2threads`. It writes nothing shared, so its `2 * t1 / t2` is the best scaling the
//!   machine gives at that moment (on a loaded or SMT-shared machine it is well below 2.0): judge
//!   the pick scaling against it.
//! - `baseline/arcswap_random_inflight{,_2threads}/{n}`: the baseline plus what a pick handle
//!   costs at minimum: clone the chosen element's `Arc`, increment and decrement its in-flight
//!   counter, drop the clone. The floor for a pick that counts requests in flight; on two threads
//!   it shows the cost of cache lines moving between cores.
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
//! - after the criterion groups, a **paired** run prints the ratios of issue #2 with the arms
//!   interleaved: in each of 301 rounds, every arm (the baseline, the two counted-pick floors,
//!   `Random`, `PowerOfTwoChoices` and `RoundRobin`, and the same three over a weighted cluster,
//!   weights 1, 2, 3, 1, ...: `<policy>_weighted`) makes a batch of picks (20,000, or 20 per
//!   destination if that is more) on one thread and then on two threads, in an order that
//!   rotates from round to round; each round gives every arm its ratio to the baseline of that
//!   round, and two-thread scaling `2 * t1 / t2` from its own one- and two-thread batches. The
//!   figures are the medians over the rounds:
//!
//!   ```text
//!   <n> destinations (baseline <median> ns):
//!     <arm>  1 thread <ratio>x the baseline (<median> ns)
//!     <arm>  2 threads: scaling <s>x
//!   ```
//!
//!   The arms include the two counted-pick floors (`floor_random_inflight`,
//!   `floor_p2c_inflight`: the `baseline/arcswap_*_inflight` operations), so a policy can be
//!   compared with the least any pick that counts requests in flight costs, in the same run.
//!
//!   Criterion measures one benchmark after another, so a change of background load between two
//!   of them shows up as a difference between them; on a shared machine that moves single
//!   figures by 10-50% from run to run. Interleaving cancels that out.
//!
//! Run `cargo bench --bench pick` (a few minutes), `cargo bench --features metrics --bench pick --
//! metrics/` for the metrics arms alone, `cargo bench --bench pick -- paired` for the
//! paired ratios alone (the filter matches no criterion benchmark), or
//! `cargo bench --bench pick -- --test` to run each benchmark once, as CI does.

use std::cell::RefCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use healthpick::config::{ClusterConfig, DestinationConfig, PassiveHealthCheckConfig};
use healthpick::{Config, Engine, HealthState, RequestOutcome};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// The built-in load-balancing policies, by configuration name.
const POLICIES: [&str; 5] = [
    "PowerOfTwoChoices",
    "RoundRobin",
    "LeastRequests",
    "Random",
    "FirstAlphabetical",
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

/// A default-builder engine (per-thread RNG, not seeded) running `cluster`.
fn engine(cluster: ClusterConfig) -> Engine {
    Engine::new(Config::new().cluster(cluster)).expect("valid benchmark config")
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
    let engine =
        engine(cluster("PowerOfTwoChoices", N).passive(PassiveHealthCheckConfig::enabled()));
    // Move every destination from Unknown to passive Healthy first, so the one-off health change
    // and snapshot rebuild of each destination's first report stay out of the measurements.
    let all_healthy = |engine: &Engine| {
        engine.status().clusters[0]
            .destinations
            .iter()
            .all(|d| d.passive == HealthState::Healthy)
    };
    for _ in 0..1000 {
        if all_healthy(&engine) {
            break;
        }
        for _ in 0..N {
            let handle = engine.pick_endpoint(CLUSTER).expect("pick");
            handle.report(RequestOutcome::Success);
        }
    }
    assert!(all_healthy(&engine), "every destination reported Healthy");

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
    assert!(all_healthy(&engine), "no destination was ejected");
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
/// in a 32-byte `Arc` allocation, as small as the engine's.
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

/// The policies whose ratios issue #2 sets targets for.
const PAIRED_POLICIES: [&str; 3] = ["Random", "PowerOfTwoChoices", "RoundRobin"];

/// Rounds of the paired comparison.
const PAIRED_ROUNDS: usize = 301;

/// Picks per arm and batch (on one thread; on each of two threads) with `n` destinations: at
/// least 20 per destination, so that refilling the caches after another arm's batch (up to
/// 400 KB at 10,000 destinations) stays a small part of the batch.
fn paired_batch(n: usize) -> u64 {
    (20 * n as u64).max(20_000)
}

/// The paired comparison (see the file comment). Runs only under `cargo bench`, not when CI runs
/// each benchmark once as a test.
fn bench_paired(_: &mut Criterion) {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    if !has("--bench") || has("--test") || has("--list") || has("--profile-time") {
        return;
    }
    println!(
        "\npaired comparison ({PAIRED_ROUNDS} rounds; per arm and batch 20,000 picks or 20 per \
         destination, whichever is more; order rotating):"
    );
    for n in SIZES {
        let batch = paired_batch(n);
        let values: ArcSwap<Vec<u64>> = ArcSwap::from(Arc::new((0..n as u64).collect()));
        let slots = slots(n);
        let engines: Vec<Engine> = PAIRED_POLICIES
            .iter()
            .map(|&policy| engine(cluster(policy, n)))
            .chain(
                PAIRED_POLICIES
                    .iter()
                    .map(|&policy| engine(weighted_cluster(policy, n))),
            )
            .collect();
        // Arm 0 is the baseline, 1 and 2 the counted-pick floors, 3.. the engines (unweighted,
        // then weighted).
        let weighted: Vec<String> = PAIRED_POLICIES
            .iter()
            .map(|p| format!("{p}_weighted"))
            .collect();
        let names: Vec<&str> = ["baseline", "floor_random_inflight", "floor_p2c_inflight"]
            .into_iter()
            .chain(PAIRED_POLICIES)
            .chain(weighted.iter().map(String::as_str))
            .collect();
        let arms = names.len();
        let op = |arm: usize| match arm {
            0 => {
                black_box(baseline_read(&values));
            }
            1 => baseline_inflight(&slots),
            2 => baseline_p2c_inflight(&slots),
            k => pick_and_drop(&engines[k - 3]),
        };
        let mut one: Vec<Vec<f64>> = vec![Vec::with_capacity(PAIRED_ROUNDS); arms];
        let mut ratio: Vec<Vec<f64>> = vec![Vec::with_capacity(PAIRED_ROUNDS); arms];
        let mut scaling: Vec<Vec<f64>> = vec![Vec::with_capacity(PAIRED_ROUNDS); arms];
        for round in 0..PAIRED_ROUNDS {
            let mut t1 = vec![0.0; arms];
            for k in 0..arms {
                let arm = (round + k) % arms;
                let start = Instant::now();
                for _ in 0..batch {
                    op(arm);
                }
                t1[arm] = start.elapsed().as_secs_f64() * 1e9 / batch as f64;
                let t2 = two_threads(batch, || op(arm)).as_secs_f64() * 1e9 / batch as f64;
                scaling[arm].push(2.0 * t1[arm] / t2);
            }
            for arm in 0..arms {
                one[arm].push(t1[arm]);
                ratio[arm].push(t1[arm] / t1[0]);
            }
        }
        let baseline = median(&mut one[0]);
        println!("  {n} destinations (baseline {baseline:.1} ns):");
        for arm in 1..arms {
            println!(
                "    {:<28} 1 thread {:.2}x the baseline ({:.1} ns)",
                names[arm],
                median(&mut ratio[arm]),
                median(&mut one[arm]),
            );
        }
        for arm in 0..arms {
            println!(
                "    {:<28} 2 threads: scaling {:.2}x",
                names[arm],
                median(&mut scaling[arm])
            );
        }
    }
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
    targets = bench_baseline, bench_baseline_inflight, bench_pick, bench_report, bench_metrics, bench_paired
}
criterion_main!(benches);

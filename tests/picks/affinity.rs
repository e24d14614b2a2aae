//! Keyed picks of a cluster with `SessionAffinity`, through the engine: a key stays on its
//! destination, moves only as far as the group changes, comes back when its destination does,
//! never piles more than the balance factor onto one destination, maps alike in another process,
//! and fails distinctly under `Return503Error`. Unkeyed picks keep the cluster's policy.

use std::collections::HashMap;
use std::io::Write;

use healthpick::config::{
    ActiveHealthCheckConfig, AffinityFailurePolicy, AffinityPolicy, ClusterConfig,
    DestinationConfig, SessionAffinityConfig,
};
use healthpick::{Config, Engine, PickError, PickHandle, ProbeResult};

fn cluster(ids: &[String], affinity: SessionAffinityConfig) -> ClusterConfig {
    let mut cluster = ClusterConfig::new("c")
        .load_balancing_policy("RoundRobin")
        .active(ActiveHealthCheckConfig::enabled())
        // One failed probe ejects: a destination leaves the best group at once.
        .metadata("ConsecutiveFailuresHealthPolicy.Threshold", "1")
        .session_affinity(affinity);
    for (i, id) in ids.iter().enumerate() {
        let address = format!("http://127.0.0.1:{}/", 20_000 + i);
        cluster = cluster.destination(DestinationConfig::new(id.clone(), address));
    }
    cluster
}

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("node-{i}")).collect()
}

fn engine(ids: &[String], affinity: SessionAffinityConfig) -> Engine {
    Engine::builder()
        .seed(1)
        .build_with(Config::new().cluster(cluster(ids, affinity)))
        .unwrap()
}

fn redistribute() -> SessionAffinityConfig {
    SessionAffinityConfig::new(AffinityPolicy::CustomHeader)
}

fn key(i: usize) -> String {
    format!("session-{i}")
}

/// Where each of the first `keys` keys goes, picked and dropped one at a time (nothing in
/// flight, so the load bound never refuses a home).
fn mapping(engine: &Engine, keys: usize) -> Vec<String> {
    (0..keys)
        .map(|i| {
            let handle = engine.pick_endpoint_for_key("c", key(i)).unwrap();
            handle.destination().id().to_string()
        })
        .collect()
}

fn moved(before: &[String], after: &[String]) -> usize {
    before.iter().zip(after).filter(|(a, b)| a != b).count()
}

#[test]
fn a_key_goes_to_the_same_destination_every_time() {
    let engine = engine(&ids(10), redistribute());
    let first = mapping(&engine, 2_000);
    assert_eq!(mapping(&engine, 2_000), first);
    // Keys spread over every destination.
    let mut per_destination: HashMap<&str, usize> = HashMap::new();
    for id in &first {
        *per_destination.entry(id).or_default() += 1;
    }
    assert_eq!(per_destination.len(), 10, "{per_destination:?}");
    assert!(
        per_destination.values().all(|&n| (120..=280).contains(&n)),
        "{per_destination:?}"
    );
}

/// 10 destinations, 1,000,000 keys: removing one moves only its own keys (about a tenth), adding
/// an eleventh only the keys it takes (about an eleventh).
#[test]
fn removing_or_adding_a_destination_moves_only_its_share_of_keys() {
    const KEYS: usize = 1_000_000;
    let ten = ids(10);
    let engine = engine(&ten, redistribute());
    let before = mapping(&engine, KEYS);

    let nine: Vec<String> = ten.iter().filter(|id| *id != "node-3").cloned().collect();
    engine
        .apply_config(Config::new().cluster(cluster(&nine, redistribute())))
        .unwrap();
    let without = mapping(&engine, KEYS);
    let lost = before.iter().filter(|id| *id == "node-3").count();
    assert_eq!(moved(&before, &without), lost, "only node-3's keys move");
    assert!(
        moved(&before, &without) as f64 <= 0.105 * KEYS as f64,
        "{lost}"
    );

    let eleven: Vec<String> = ids(11);
    engine
        .apply_config(Config::new().cluster(cluster(&eleven, redistribute())))
        .unwrap();
    let with = mapping(&engine, KEYS);
    let taken = with.iter().filter(|id| *id == "node-10").count();
    assert_eq!(
        moved(&before, &with),
        taken,
        "only the keys node-10 takes move"
    );
    assert!(taken as f64 <= 0.095 * KEYS as f64, "{taken}");
    assert!(taken > 0);
}

/// A destination that fails its probe loses its keys to their next choices, and gets them all
/// back once it passes again; the other destinations' keys never move.
#[test]
fn an_ejected_destination_gets_its_keys_back_when_it_recovers() {
    const KEYS: usize = 50_000;
    let engine = engine(&ids(10), redistribute());
    let ok = |id: &str| ProbeResult::status(id, 200);
    let all_ok: Vec<ProbeResult> = ids(10).iter().map(|id| ok(id)).collect();
    engine.report_probe_results("c", &all_ok).unwrap();
    let before = mapping(&engine, KEYS);
    let own = before.iter().filter(|id| *id == "node-7").count();
    assert!(own > 0);

    engine
        .report_probe_results("c", &[ProbeResult::error("node-7", "refused")])
        .unwrap();
    let during = mapping(&engine, KEYS);
    assert!(during.iter().all(|id| id != "node-7"));
    assert_eq!(moved(&before, &during), own, "only node-7's keys move");
    // Where they went is each key's stable next choice: the same on every pick.
    assert_eq!(mapping(&engine, KEYS), during);

    engine.report_probe_results("c", &[ok("node-7")]).unwrap();
    let after = mapping(&engine, KEYS);
    let back = before
        .iter()
        .zip(&after)
        .filter(|(a, b)| *a == "node-7" && *b == "node-7")
        .count();
    assert!(back as f64 >= 0.99 * own as f64, "{back} of {own} back");
    assert_eq!(after, before);
}

/// `Return503Error`: a key whose destination is out fails with its own error instead of
/// moving; other keys still go home.
#[test]
fn return_503_error_fails_a_key_whose_destination_is_out() {
    let affinity = redistribute().failure_policy(AffinityFailurePolicy::Return503Error);
    let engine = engine(&ids(4), affinity);
    let before = mapping(&engine, 400);
    engine
        .report_probe_results("c", &[ProbeResult::error("node-1", "refused")])
        .unwrap();
    for (i, home) in before.iter().enumerate() {
        let picked = engine.pick_endpoint_for_key("c", key(i));
        if home == "node-1" {
            let err = picked.unwrap_err();
            assert!(err.is_affinity_unavailable(), "{err}");
            assert!(
                matches!(err, PickError::AffinityUnavailable { ref cluster } if cluster == "c")
            );
        } else {
            assert_eq!(picked.unwrap().destination().id(), home);
        }
    }
}

/// Picks without a key ignore the affinity: the cluster's policy (round robin here) decides.
#[test]
fn picks_without_a_key_keep_the_clusters_policy() {
    let engine = engine(&ids(4), redistribute());
    let picks: Vec<String> = (0..8)
        .map(|_| {
            engine
                .pick_endpoint("c")
                .unwrap()
                .destination()
                .id()
                .to_string()
        })
        .collect();
    assert_eq!(
        picks[..4],
        picks[4..],
        "a round-robin lap repeats: {picks:?}"
    );
    let mut lap = picks[..4].to_vec();
    lap.sort();
    assert_eq!(lap, ids(4));
}

/// Zipf(1.1) keys over 10 destinations, every pick held in flight: no destination has more
/// than 1.27 times the mean in flight (the balance factor is 1.25), though the hottest key
/// alone asks for far more than that.
#[test]
fn hot_keys_never_load_a_destination_past_the_balance_factor() {
    const KEYS: usize = 10_000;
    const PICKS: usize = 20_000;
    let engine = engine(&ids(10), redistribute());
    // Zipf by inverse transform over the cumulative weights.
    let weights: Vec<f64> = (1..=KEYS).map(|k| (k as f64).powf(-1.1)).collect();
    let total: f64 = weights.iter().sum();
    let mut cumulative = Vec::with_capacity(KEYS);
    let mut sum = 0.0;
    for w in &weights {
        sum += w / total;
        cumulative.push(sum);
    }
    let mut rng = fastrand::Rng::with_seed(7);
    let mut held: Vec<PickHandle> = Vec::with_capacity(PICKS);
    let mut hottest = 0;
    for _ in 0..PICKS {
        let u = rng.f64();
        let k = cumulative.partition_point(|&c| c < u).min(KEYS - 1);
        hottest += usize::from(k == 0);
        held.push(engine.pick_endpoint_for_key("c", key(k)).unwrap());
    }
    let mut in_flight: HashMap<String, usize> = HashMap::new();
    for handle in &held {
        *in_flight
            .entry(handle.destination().id().to_string())
            .or_default() += 1;
    }
    let mean = PICKS as f64 / 10.0;
    let max = *in_flight.values().max().unwrap() as f64;
    assert!(
        hottest as f64 > 1.27 * mean,
        "the hottest key alone: {hottest}"
    );
    assert!(
        max / mean <= 1.27,
        "max / mean = {} ({in_flight:?})",
        max / mean
    );
    // Status counts the same requests in flight.
    let status = engine.status();
    let counted: usize = status.clusters[0]
        .destinations
        .iter()
        .map(|d| d.in_flight)
        .sum();
    assert_eq!(counted, PICKS);
    drop(held);
}

/// The environment variable that makes this test binary print its mapping and exit.
const MAPPING_CHILD_ENV: &str = "HEALTHPICK_AFFINITY_MAPPING_CHILD";

/// Two engines in two processes map 100,000 keys alike: this test runs itself again as a child
/// that builds its engine from the destinations in the other order and prints its mapping.
#[test]
fn two_processes_map_keys_alike() {
    const KEYS: usize = 100_000;
    let mut destinations = ids(10);
    if std::env::var_os(MAPPING_CHILD_ENV).is_some() {
        destinations.reverse();
        let engine = engine(&destinations, redistribute());
        let mut out = std::io::stdout().lock();
        writeln!(out, "\nMAPPING={}", mapping(&engine, KEYS).join(",")).unwrap();
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "affinity::two_processes_map_keys_alike",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(MAPPING_CHILD_ENV, "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the child");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let theirs = stdout
        .lines()
        .find_map(|line| line.strip_prefix("MAPPING="))
        .expect("the child's mapping");
    let theirs: Vec<&str> = theirs.split(',').collect();
    let engine = engine(&destinations, redistribute());
    let ours = mapping(&engine, KEYS);
    assert_eq!(theirs.len(), KEYS);
    assert!(ours.iter().zip(&theirs).all(|(a, b)| a == b));
}

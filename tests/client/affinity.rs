//! Keyed calls of a cluster with `SessionAffinity`, through the wrapped client, the middleware
//! and the tower layer alike, against real servers on loopback:
//!
//! - the key comes from the header or the cookie `AffinityKeyName` names, and every request
//!   with a key goes where the engine maps that key, while different keys spread;
//! - a key given explicitly wins over one in the request; a request without a key is the
//!   cluster's policy's;
//! - a keyed call whose destination fails is retried on the key's next choice, the same one
//!   every time;
//! - under `FailurePolicy: Return503Error` a key whose destination is down fails the call with
//!   an error of its own, and nothing is sent;
//! - the first call of a cluster still warming up is keyed too.
//!
//! Every answer names the backend that gave it; nothing here waits on time.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use healthpick::config::{
    ActiveHealthCheckConfig, AffinityFailurePolicy, AffinityPolicy, ClusterConfig,
    DestinationConfig, SessionAffinityConfig,
};
use healthpick::{Config, Engine, HealthAwareClient, Hedging, ProbeResult};

use crate::support::clients::http_client;
use crate::support::faces::{Call, Face};
use crate::support::faulty_servers::{Mode, RawServer};
use crate::support::servers::{HttpServer, Reply};

/// Backends that answer 200 with their destination id as the body.
async fn backends(n: usize) -> Vec<(String, HttpServer)> {
    let mut list = Vec::new();
    for i in 0..n {
        let id = format!("d{i}");
        let body = id.clone();
        list.push((
            id,
            HttpServer::start(move |_| Reply::text(200, body.clone())).await,
        ));
    }
    list
}

fn addresses(backends: &[(String, HttpServer)]) -> Vec<(String, String)> {
    backends
        .iter()
        .map(|(id, server)| (id.clone(), server.url()))
        .collect()
}

/// Cluster `c`: RoundRobin, so that unkeyed calls are told apart from keyed ones.
fn cluster(affinity: SessionAffinityConfig, destinations: &[(String, String)]) -> ClusterConfig {
    let mut cluster = ClusterConfig::new("c")
        .load_balancing_policy("RoundRobin")
        .session_affinity(affinity);
    for (id, address) in destinations {
        cluster = cluster.destination(DestinationConfig::new(id.clone(), address.clone()));
    }
    cluster
}

fn engine(cluster: ClusterConfig) -> Engine {
    Engine::builder()
        .build_with(Config::new().cluster(cluster))
        .expect("config")
}

/// `cluster` with active checks that one failed probe turns Unhealthy, every destination but
/// `down` probed healthy and `down` failed: its warm-up is over and `down` is out.
fn engine_with_down(cluster: ClusterConfig, down: &str) -> Engine {
    let cluster = cluster
        .active(ActiveHealthCheckConfig::enabled())
        .metadata("ConsecutiveFailuresHealthPolicy.Threshold", "1");
    let ids: Vec<String> = cluster
        .destinations()
        .iter()
        .map(|d| d.id().to_string())
        .collect();
    let engine = engine(cluster);
    let round: Vec<ProbeResult> = ids
        .iter()
        .map(|id| ProbeResult::status(id.as_str(), if id == down { 500 } else { 200 }))
        .collect();
    engine.report_probe_round("c", &round).expect("cluster c");
    engine
}

fn key(i: usize) -> String {
    format!("session-{i}")
}

/// Where `engine` maps `key` (picked and dropped: nothing in flight, so the load bound never
/// sends a key away from its destination).
fn home(engine: &Engine, key: &str) -> String {
    let pick = engine.pick_endpoint_for_key("c", key).expect("keyed pick");
    pick.destination().id().to_string()
}

/// The body of a 200 answer to `call` through `face`.
async fn answer(face: &Face, call: &Call) -> String {
    match face.send("c", call).await {
        Ok((200, body)) => body,
        Ok((status, body)) => panic!("{face}: {call:?} answered {status} `{body}`"),
        Err(failure) => panic!("{face}: {call:?} failed: {}", failure.message),
    }
}

fn header_affinity() -> SessionAffinityConfig {
    SessionAffinityConfig::new(AffinityPolicy::CustomHeader).affinity_key_name("X-Session")
}

#[tokio::test]
async fn a_header_key_sends_every_request_with_it_to_one_backend() {
    let backends = backends(4).await;
    let engine = engine(cluster(header_affinity(), &addresses(&backends)));
    let keys: Vec<String> = (0..12).map(key).collect();
    let homes: Vec<String> = keys.iter().map(|k| home(&engine, k)).collect();
    let spread: HashSet<&String> = homes.iter().collect();
    assert!(spread.len() >= 3, "12 keys spread over backends: {homes:?}");

    for face in Face::all(&engine) {
        for (key, home) in keys.iter().zip(&homes) {
            for _ in 0..3 {
                // Header names are case-insensitive: the one the cluster names, in any case.
                let call = Call::get("/api/cart").header("x-session", key.as_str());
                assert_eq!(&answer(&face, &call).await, home, "{face}, key {key}");
            }
        }
    }
    // Every request reached the backend of its key, and only it.
    for (id, server) in &backends {
        let expected = homes.iter().filter(|h| *h == id).count() * 3 * Face::count();
        assert_eq!(server.count(), expected, "{id}");
    }
}

#[tokio::test]
async fn a_cookie_key_sends_every_request_with_it_to_one_backend() {
    let backends = backends(4).await;
    for policy in [
        AffinityPolicy::Cookie,
        AffinityPolicy::HashCookie,
        AffinityPolicy::ArrCookie,
    ] {
        // YARP's default key name, `.Yarp.Affinity`.
        let engine = engine(cluster(
            SessionAffinityConfig::new(policy),
            &addresses(&backends),
        ));
        let keys: Vec<String> = (0..8).map(key).collect();
        let homes: Vec<String> = keys.iter().map(|k| home(&engine, k)).collect();
        assert!(homes.iter().collect::<HashSet<_>>().len() >= 2, "{homes:?}");
        for face in Face::all(&engine) {
            for (key, home) in keys.iter().zip(&homes) {
                let among_others = Call::get("/api/cart").header(
                    "cookie",
                    format!("theme=dark; .Yarp.Affinity={key}; .Yarp.Affinity=later"),
                );
                // Cookies in two headers (as HTTP/2 sends them), the value quoted.
                let split = Call::get("/api/cart")
                    .header("cookie", "theme=dark; .yarp.affinity=other-case")
                    .header("cookie", format!("lang=en;.Yarp.Affinity=\"{key}\""));
                for call in [among_others, split] {
                    assert_eq!(
                        &answer(&face, &call).await,
                        home,
                        "{face}, {policy:?}, {call:?}"
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn an_explicit_key_wins_over_the_one_in_the_request() {
    let backends = backends(4).await;
    let engine = engine(cluster(header_affinity(), &addresses(&backends)));
    // Two keys whose backends differ.
    let mine = key(0);
    let theirs = (1..)
        .map(key)
        .find(|k| home(&engine, k) != home(&engine, &mine))
        .unwrap();
    for face in Face::all(&engine) {
        for _ in 0..3 {
            let call = Call::get("/api/cart")
                .header("x-session", theirs.as_str())
                .key(mine.as_str());
            assert_eq!(answer(&face, &call).await, home(&engine, &mine), "{face}");
            let call = Call::get("/api/cart").key(theirs.as_str());
            assert_eq!(answer(&face, &call).await, home(&engine, &theirs), "{face}");
        }
    }
}

/// A request without the header (or with it empty, or with only other cookies) has no key:
/// the cluster's RoundRobin spreads such requests evenly.
#[tokio::test]
async fn without_a_key_the_clusters_policy_picks() {
    let backends = backends(4).await;
    for affinity in [
        header_affinity(),
        SessionAffinityConfig::new(AffinityPolicy::Cookie).affinity_key_name("session"),
    ] {
        let engine = engine(cluster(affinity, &addresses(&backends)));
        for face in Face::all(&engine) {
            let calls = [
                Call::get("/api/cart"),
                Call::get("/api/cart").header("x-session", ""),
                Call::get("/api/cart").header("cookie", "sessions=1; session_id=2; theme=dark"),
                Call::get("/api/cart").header("cookie", "session="),
            ];
            let mut answered: HashMap<String, usize> = HashMap::new();
            for call in calls.iter().cycle().take(8) {
                *answered.entry(answer(&face, call).await).or_default() += 1;
            }
            assert_eq!(answered.len(), 4, "{face}: {answered:?}");
            assert!(answered.values().all(|&n| n == 2), "{face}: {answered:?}");
        }
    }
}

/// `bad` answers 503 (a status retried on another destination). Keys whose destination is
/// `bad` are answered, every time, by their next choice: the destination a keyed pick takes
/// when `bad` is out.
#[tokio::test]
async fn a_keyed_retry_goes_to_the_keys_next_choice_every_time() {
    let good = backends(3).await;
    let bad = RawServer::start(Mode::Status(503)).await;
    let mut destinations = addresses(&good);
    destinations.push(("bad".to_string(), bad.url()));
    let engine = engine(cluster(header_affinity(), &destinations));
    // The same destinations, with `bad` down: where the keys of `bad` go next.
    let without_bad = engine_with_down(cluster(header_affinity(), &destinations), "bad");

    let keys: Vec<String> = (0..)
        .map(key)
        .filter(|k| home(&engine, k) == "bad")
        .take(4)
        .collect();
    let next: Vec<String> = keys.iter().map(|k| home(&without_bad, k)).collect();
    assert!(next.iter().all(|n| n != "bad"), "{next:?}");

    let faces = Face::all(&engine);
    for face in &faces {
        for (key, next) in keys.iter().zip(&next) {
            for _ in 0..3 {
                let call = Call::get("/api/cart").header("x-session", key.as_str());
                assert_eq!(&answer(face, &call).await, next, "{face}, key {key}");
            }
        }
    }
    // Every call went to the key's destination first.
    assert_eq!(bad.hits().len(), faces.len() * keys.len() * 3);
}

/// `slow` answers after 10 s; a hedged call whose key's destination is `slow` hedges to the
/// key's next choice, every time, and is answered there.
#[tokio::test]
async fn a_hedge_of_a_keyed_call_goes_to_the_keys_next_choice() {
    let mut backends = backends(3).await;
    backends.push((
        "slow".to_string(),
        HttpServer::start(|_| Reply::text(200, "slow").delay(Duration::from_secs(10))).await,
    ));
    let destinations = addresses(&backends);
    let engine = engine(cluster(header_affinity(), &destinations));
    let without_slow = engine_with_down(cluster(header_affinity(), &destinations), "slow");
    let keys: Vec<String> = (0..)
        .map(key)
        .filter(|k| home(&engine, k) == "slow")
        .take(2)
        .collect();
    let hedging = Hedging::after(Duration::from_millis(20)).max_share(1.0);
    let faces = Face::all(&engine);
    for face in &faces {
        for key in &keys {
            for _ in 0..2 {
                let call = Call::get("/api/cart")
                    .header("x-session", key.as_str())
                    .hedging(hedging);
                assert_eq!(
                    answer(face, &call).await,
                    home(&without_slow, key),
                    "{face}, key {key}"
                );
            }
        }
    }
    let slow = &backends[3].1;
    assert_eq!(
        slow.count(),
        faces.len() * keys.len() * 2,
        "every call went there first"
    );
}

/// The wrapped client names the failed first attempt: the key's destination.
#[tokio::test]
async fn a_keyed_retry_of_the_wrapped_client_names_the_keys_destination_as_failed() {
    let good = backends(2).await;
    let bad = RawServer::start(Mode::Status(503)).await;
    let mut destinations = addresses(&good);
    destinations.push(("bad".to_string(), bad.url()));
    let engine = engine(cluster(header_affinity(), &destinations));
    let key = (0..).map(key).find(|k| home(&engine, k) == "bad").unwrap();
    let client = HealthAwareClient::builder(engine)
        .http(http_client())
        .build()
        .unwrap();
    let response = client
        .get("c", "/api/cart")
        .header("X-Session", key.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let failed: Vec<&str> = response
        .failed_attempts()
        .iter()
        .map(|f| f.destination.as_str())
        .collect();
    assert_eq!(failed, ["bad"]);
}

#[tokio::test]
async fn return503error_fails_a_call_whose_keys_destination_is_down_with_its_own_error() {
    let backends = backends(3).await;
    let affinity = header_affinity().failure_policy(AffinityFailurePolicy::Return503Error);
    let keyed = engine(cluster(affinity.clone(), &addresses(&backends)));
    let stranded = key(0);
    let down = home(&keyed, &stranded);
    let engine = engine_with_down(cluster(affinity, &addresses(&backends)), &down);
    let fine = (1..).map(key).find(|k| home(&keyed, k) != down).unwrap();

    for face in Face::all(&engine) {
        let call = Call::get("/api/cart").header("x-session", stranded.as_str());
        let failure = face
            .send("c", &call)
            .await
            .expect_err("no destination for the key");
        assert!(failure.affinity_unavailable, "{face}: {}", failure.message);
        assert!(
            failure.message.contains("affinity key is unavailable"),
            "{face}: {}",
            failure.message
        );
        // An explicit key fails alike.
        let call = Call::get("/api/cart").key(stranded.as_str());
        assert!(
            face.send("c", &call)
                .await
                .unwrap_err()
                .affinity_unavailable
        );

        // Other keys, and requests without one, are answered.
        let call = Call::get("/api/cart").header("x-session", fine.as_str());
        assert_eq!(answer(&face, &call).await, home(&keyed, &fine), "{face}");
        assert_ne!(answer(&face, &Call::get("/api/cart")).await, down, "{face}");
    }
    let sent: usize = backends
        .iter()
        .filter(|(id, _)| *id == down)
        .map(|(_, s)| s.count())
        .sum();
    assert_eq!(sent, 0, "nothing reached the key's destination");
}

/// The wrapped client's error is a pick error of its own kind.
#[tokio::test]
async fn return503error_is_a_distinct_client_error() {
    let backends = backends(2).await;
    let affinity = header_affinity().failure_policy(AffinityFailurePolicy::Return503Error);
    let keyed = engine(cluster(affinity.clone(), &addresses(&backends)));
    let down = home(&keyed, "k");
    let engine = engine_with_down(cluster(affinity, &addresses(&backends)), &down);
    let client = HealthAwareClient::builder(engine)
        .http(http_client())
        .build()
        .unwrap();
    let err = client
        .get("c", "/")
        .affinity_key("k")
        .send()
        .await
        .unwrap_err();
    assert!(err.is_affinity_unavailable(), "{err:?}");
    assert!(!err.is_no_available_destinations() && !err.is_request());
    assert!(matches!(
        err,
        healthpick::ClientError::Pick(healthpick::PickError::AffinityUnavailable { ref cluster })
            if cluster == "c"
    ));
    assert_eq!(err.cluster(), Some("c"));
}

/// A cluster with active checks whose first probes have not come: the first call waits (here
/// for its attempt timeout), then picks by its key.
#[tokio::test]
async fn a_first_call_that_waits_for_the_warm_up_is_keyed_too() {
    let backends = backends(4).await;
    let cluster = cluster(header_affinity(), &addresses(&backends))
        .active(ActiveHealthCheckConfig::enabled());
    let engine = engine(cluster);
    let client = HealthAwareClient::builder(engine.clone())
        .http(http_client())
        .build()
        .unwrap();
    for key in (0..4).map(key) {
        let home = home(&engine, &key);
        let response = client
            .get("c", "/api/cart")
            .header("x-session", key.as_str())
            .timeout(Duration::from_millis(200))
            .send()
            .await
            .unwrap();
        assert_eq!(response.destination().id(), home, "{key}");
    }
    assert!(
        !engine.first_round_done("c"),
        "no probe ran: every call waited"
    );
}

//! Realistic YARP configuration files read as .NET configuration reads them.
//!
//! The fixtures under `tests/fixtures/yarp/` are written the way teams write `appsettings.json`:
//! `Logging` and `AllowedHosts` beside `ReverseProxy`, `Routes` with `Match`/`Transforms`,
//! comments, trailing commas, mixed key casing, scalars as strings, `HttpClient`, `HttpRequest`
//! and `SessionAffinity` sections. Each is read into the model exactly, loaded into an engine and
//! picked from.

use std::collections::BTreeSet;
use std::time::Duration;

use healthpick::config::{self, ClusterConfig, DestinationConfig};
use healthpick::{Config, Engine, PolicyRegistry};

// ---------------------------------------------------------------------------------------------
// helpers

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/yarp/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

fn load(text: &str) -> Config {
    Config::from_json(text).unwrap_or_else(|e| panic!("the document should load: {e}"))
}

/// Checks a document with the built-in policies; panics with the diagnostics if it is invalid.
fn check_clean(text: &str) {
    for strict in [false, true] {
        let report = config::check(text, &PolicyRegistry::default(), strict);
        assert!(
            report.errors.is_empty(),
            "strict={strict}: unexpected errors {:#?}",
            report.errors
        );
        assert!(
            report.warnings.is_empty(),
            "strict={strict}: unexpected warnings {:#?}",
            report.warnings
        );
        assert!(report.config.is_some());
    }
}

/// Checks a document whose only problems are YARP settings healthpick does not apply: each
/// is a warning at one of `paths` (in order), and an error in strict mode.
fn check_clean_but_not_applied(text: &str, paths: &[&str]) {
    let report = config::check(text, &PolicyRegistry::default(), false);
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    let warned: Vec<&str> = report.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(warned, paths, "{:#?}", report.warnings);
    for w in &report.warnings {
        assert!(
            w.message
                .contains("is a YARP setting that healthpick does not apply: "),
            "{w}"
        );
    }
    let strict = config::check(text, &PolicyRegistry::default(), true);
    let refused: Vec<&str> = strict.errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(refused, paths);
}

/// Case-insensitive id comparison (char-wise lower case, enough for the ids used here).
fn same_id(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_lowercase)
        .eq(b.chars().flat_map(char::to_lowercase))
}

fn cluster<'a>(config: &'a Config, id: &str) -> &'a ClusterConfig {
    config
        .find_cluster(id)
        .unwrap_or_else(|| panic!("cluster `{id}` not found"))
}

fn dest<'a>(cluster: &'a ClusterConfig, id: &str) -> &'a DestinationConfig {
    cluster
        .destinations()
        .iter()
        .find(|d| same_id(d.id(), id))
        .unwrap_or_else(|| panic!("destination `{id}` not found in `{}`", cluster.id()))
}

fn ids(cluster: &ClusterConfig) -> Vec<&str> {
    cluster.destinations().iter().map(|d| d.id()).collect()
}

fn secs(s: u64) -> Option<Duration> {
    Some(Duration::from_secs(s))
}

fn ms(ms: u64) -> Option<Duration> {
    Some(Duration::from_millis(ms))
}

/// `n` picks from `cluster`, by destination id (each handle dropped right away).
fn picks(engine: &Engine, cluster: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let pick = engine
                .pick_endpoint(cluster)
                .unwrap_or_else(|e| panic!("pick from `{cluster}` failed: {e}"));
            assert!(
                same_id(pick.destination().cluster_id(), cluster),
                "pick from `{cluster}` returned a destination of `{}`",
                pick.destination().cluster_id()
            );
            pick.destination().id().to_string()
        })
        .collect()
}

fn distinct(picks: &[String]) -> BTreeSet<&str> {
    picks.iter().map(String::as_str).collect()
}

/// A `ReverseProxy` document with one cluster `c` whose active check is enabled with `settings`
/// spliced into the `Active` object.
fn with_active(settings: &str) -> String {
    format!(
        r#"{{ "ReverseProxy": {{ "Clusters": {{ "c": {{
            "HealthCheck": {{ "Active": {{ "Enabled": true, {settings} }} }},
            "Destinations": {{ "d": {{ "Address": "http://127.0.0.1:1/" }} }}
        }} }} }} }}"#
    )
}

// ---------------------------------------------------------------------------------------------
// fixture 1: the edge gateway (ReverseProxy inside a full appsettings file)

#[test]
fn gateway_appsettings_is_read_exactly() {
    let text = fixture("gateway.appsettings.json");
    // Valid YARP throughout; healthpick says which of its HttpClient and HttpRequest settings
    // it does not apply.
    let p = "ReverseProxy:Clusters:payments";
    check_clean_but_not_applied(
        &text,
        &[
            &format!("{p}:HttpClient:SslProtocols"),
            &format!("{p}:HttpClient:MaxConnectionsPerServer"),
            &format!("{p}:HttpClient:EnableMultipleHttp2Connections"),
            &format!("{p}:HttpClient:WebProxy"),
            &format!("{p}:HttpRequest:VersionPolicy"),
            &format!("{p}:HttpRequest:AllowResponseBuffering"),
            "ReverseProxy:Clusters:catalog:HttpClient:MaxConnectionsPerServer",
        ],
    );
    let config = load(&text);

    let cluster_ids: Vec<&str> = config.clusters().iter().map(|c| c.id()).collect();
    assert_eq!(cluster_ids, ["payments", "catalog"]);

    // payments: every setting spelled out.
    let payments = cluster(&config, "payments");
    assert_eq!(payments.load_balancing_policy_name(), "RoundRobin");
    let hc = payments.health_check();
    assert_eq!(hc.available_destinations_policy_name(), "HealthyAndUnknown");
    let active = hc.active();
    assert!(active.is_enabled(), "\"Enabled\": \"true\" is true");
    assert_eq!(active.interval_setting(), secs(10));
    assert_eq!(active.timeout_setting(), secs(5));
    assert_eq!(active.policy_name(), "ConsecutiveFailures");
    assert_eq!(active.path_setting(), Some("/api/health"));
    assert_eq!(active.query_setting(), Some("?probe=yarp"));
    let passive = hc.passive();
    assert!(passive.is_enabled());
    assert_eq!(passive.policy_name(), "TransportFailureRate");
    assert_eq!(passive.reactivation_period_setting(), secs(120));

    // SessionAffinity applies (its Cookie subsection is the proxy's, read past silently).
    let affinity = payments
        .session_affinity_setting()
        .expect("SessionAffinity is enabled");
    assert_eq!(affinity.policy_setting(), config::AffinityPolicy::Cookie);
    assert_eq!(
        affinity.failure_policy_setting(),
        config::AffinityFailurePolicy::Redistribute
    );
    assert_eq!(affinity.affinity_key_name_setting(), ".Yarp.Affinity");
    assert!(cluster(&config, "catalog")
        .session_affinity_setting()
        .is_none());

    // "MetaData" casing; JSON numbers become their text.
    let md = payments.metadata_map();
    assert_eq!(md.len(), 3);
    assert_eq!(
        md.get("ConsecutiveFailuresHealthPolicy.Threshold"),
        Some("3")
    );
    assert_eq!(
        md.get("consecutivefailureshealthpolicy.threshold"),
        Some("3")
    );
    assert_eq!(
        md.get("TransportFailureRateHealthPolicy.RateLimit"),
        Some("0.5")
    );
    assert_eq!(md.get("OWNER"), Some("team-payments"));

    // HttpClient / HttpRequest: what maps to a client is read, the rest ignored.
    assert_eq!(payments.http_version_setting(), Some("2"));
    assert!(!payments.dangerous_accept_any_server_certificate());
    assert_eq!(payments.max_connections_per_server(), Some(200));

    assert_eq!(ids(payments), ["eu-1", "eu-2", "us-1"]);
    let eu1 = dest(payments, "eu-1");
    assert_eq!(eu1.address(), "https://payments-eu-1.internal:8443/");
    assert_eq!(eu1.health_setting(), None);
    assert_eq!(eu1.host_setting(), None);
    assert_eq!(eu1.tier(), 0);
    assert_eq!(eu1.metadata_map().get("zone"), Some("eu-west-1a"));
    assert_eq!(
        eu1.metadata_map().get("weight"),
        Some("1.50"),
        "1.50 stays 1.50"
    );
    assert_eq!(
        eu1.metadata_map().get("canary"),
        Some("True"),
        "true is True"
    );
    let eu2 = dest(payments, "eu-2");
    assert_eq!(eu2.address(), "https://payments-eu-2.internal:8443/");
    assert_eq!(
        eu2.health_setting(),
        Some("http://payments-eu-2.internal:9090/")
    );
    assert_eq!(eu2.tier(), 0);
    assert_eq!(eu2.metadata_map().get("Weight"), Some("1"));
    assert_eq!(eu2.metadata_map().get("Canary"), Some("False"));
    let us1 = dest(payments, "us-1");
    assert_eq!(us1.address(), "https://payments-us-1.internal:8443/");
    assert_eq!(us1.tier(), 1);
    assert_eq!(us1.host_setting(), Some("payments.example.com"));
    assert!(us1.metadata_map().is_empty());

    // catalog: lower-case keys everywhere, defaults for what is not set.
    let catalog = cluster(&config, "catalog");
    assert_eq!(catalog.load_balancing_policy_name(), "firstalphabetical");
    let hc = catalog.health_check();
    assert_eq!(hc.available_destinations_policy_name(), "HealthyOrPanic");
    assert!(hc.active().is_enabled());
    assert_eq!(hc.active().interval_setting(), secs(30));
    assert_eq!(hc.active().timeout_setting(), None);
    assert_eq!(hc.active().policy_name(), "ConsecutiveFailures");
    assert_eq!(hc.active().path_setting(), Some("/healthz"));
    assert_eq!(hc.active().query_setting(), None);
    assert!(!hc.passive().is_enabled());
    assert_eq!(hc.passive().policy_name(), "TransportFailureRate");
    assert_eq!(hc.passive().reactivation_period_setting(), None);
    assert!(catalog.metadata_map().is_empty());
    assert!(catalog.dangerous_accept_any_server_certificate());
    assert_eq!(catalog.max_connections_per_server(), Some(16));
    assert_eq!(catalog.http_version_setting(), Some("1.1"));
    assert_eq!(ids(catalog), ["catalog-b", "catalog-a"]);
    assert_eq!(
        dest(catalog, "catalog-a").address(),
        "http://catalog-a.internal:5000"
    );
}

#[test]
fn gateway_appsettings_loads_into_an_engine_and_picks() {
    let engine = Engine::from_json(&fixture("gateway.appsettings.json")).expect("loads");
    assert_eq!(engine.cluster_ids(), ["payments", "catalog"]);

    let status = engine.status();
    let payments = status.cluster("payments").expect("payments");
    assert_eq!(payments.load_balancing_policy, "RoundRobin");
    assert_eq!(payments.available_destinations_policy, "HealthyAndUnknown");
    assert!(payments.active_enabled);
    assert!(payments.passive_enabled);
    assert_eq!(payments.destinations.len(), 3);
    assert_eq!(payments.destination("us-1").expect("us-1").tier, 1);
    let catalog = status.cluster("catalog").expect("catalog");
    assert_eq!(catalog.load_balancing_policy, "FirstAlphabetical");
    assert!(catalog.active_enabled);
    assert!(!catalog.passive_enabled);

    // RoundRobin over tier 0 only, never the us fail-over; the file gives eu-1 metadata
    // `weight: 1.50` and eu-2 `Weight: 1`, so a cycle of five is eu-1 three times, smoothly.
    assert_eq!(
        picks(&engine, "payments", 6),
        ["eu-1", "eu-2", "eu-1", "eu-2", "eu-1", "eu-1"]
    );
    let pick = engine.pick_endpoint("PAYMENTS").expect("case-insensitive");
    assert!(pick.address().as_str().starts_with("https://payments-eu-"));

    // FirstAlphabetical: catalog-a although catalog-b comes first in the file.
    assert_eq!(picks(&engine, "catalog", 3), ["catalog-a"; 3]);
    let pick = engine.pick_endpoint("Catalog").expect("case-insensitive");
    assert_eq!(pick.address().as_str(), "http://catalog-a.internal:5000/");
}

// ---------------------------------------------------------------------------------------------
// fixture 2: a production override of a calling service (no comments, strings for scalars)

#[test]
fn orders_production_appsettings_is_read_exactly() {
    let text = fixture("orders.appsettings.Production.json");
    // YARP ignores the negative Interval of the disabled `audit` check; healthpick loads the
    // file too and says so in a warning (an error in strict mode). `Payments` probes with a
    // Timeout (1m30s) longer than its Interval (15s): a warning too.
    let report = config::check(&text, &PolicyRegistry::default(), false);
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    let warnings: Vec<&str> = report.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(
        warnings,
        [
            "ReverseProxy:Clusters:Payments:HealthCheck:Active:Timeout",
            "ReverseProxy:Clusters:audit:HealthCheck:Active:Interval"
        ]
    );
    assert!(report.warnings[0]
        .message
        .contains("Timeout (1m 30s) is not shorter than Interval (15s)"));
    assert!(report.warnings[1].message.contains("`-00:00:05`"));
    let config = load(&text);

    let cluster_ids: Vec<&str> = config.clusters().iter().map(|c| c.id()).collect();
    assert_eq!(cluster_ids, ["Payments", "inventory", "audit"]);

    let payments = cluster(&config, "PAYMENTS");
    assert_eq!(payments.id(), "Payments", "the id keeps its spelling");
    assert_eq!(payments.load_balancing_policy_name(), "leastrequests");
    let active = payments.health_check().active();
    assert!(active.is_enabled(), "\" TRUE \" is true");
    assert_eq!(active.interval_setting(), secs(15), "humantime 15s");
    assert_eq!(active.timeout_setting(), secs(90), "humantime 1m30s");
    assert_eq!(
        active.policy_name(),
        "ConsecutiveFailures",
        "null = default"
    );
    assert_eq!(active.path_setting(), Some("/api/systemstatus"));
    assert_eq!(active.query_setting(), None);
    let passive = payments.health_check().passive();
    assert!(!passive.is_enabled(), "\"False\" is false");
    assert_eq!(
        passive.policy_name(),
        "TransportFailureRate",
        "\"\" = default"
    );
    let md = payments.metadata_map();
    assert_eq!(
        md.get("ConsecutiveFailuresHealthPolicy.Threshold"),
        Some("5")
    );
    assert_eq!(md.get("Team"), Some("payments"));
    assert_eq!(md.get("sla"), Some("99.95"));
    assert_eq!(payments.http_version_setting(), None);
    assert!(!payments.dangerous_accept_any_server_certificate());
    assert_eq!(payments.max_connections_per_server(), None);
    assert_eq!(
        ids(payments),
        ["Local-A", "Local-B", "Region-A", "Remote-A"]
    );
    let tiers: Vec<u32> = payments.destinations().iter().map(|d| d.tier()).collect();
    assert_eq!(tiers, [0, 0, 1, 2], "\"1\" and 1 are the same priority");
    assert_eq!(
        dest(payments, "local-a").address(),
        "http://10.0.1.10:8080/payments/"
    );

    let inventory = cluster(&config, "Inventory");
    assert_eq!(inventory.load_balancing_policy_name(), "PowerOfTwoChoices");
    let hc = inventory.health_check();
    assert_eq!(hc.available_destinations_policy_name(), "healthyorpanic");
    assert!(!hc.active().is_enabled());
    assert!(hc.passive().is_enabled());
    assert_eq!(
        hc.passive().reactivation_period_setting(),
        secs(600),
        "\"00:10\" is ten minutes"
    );
    let inv1 = dest(inventory, "inv-1");
    assert_eq!(inv1.metadata_map().get("rack"), Some("7"));
    assert_eq!(inv1.metadata_map().get("ssd"), Some("True"));
    assert_eq!(
        dest(inventory, "inv-2").address(),
        "https://inventory-2.example.com"
    );

    // A disabled check is not validated (as in YARP): its settings are kept as far as they read.
    let audit = cluster(&config, "audit");
    assert_eq!(audit.load_balancing_policy_name(), "Random");
    let active = audit.health_check().active();
    assert!(!active.is_enabled());
    assert_eq!(active.interval_setting(), None, "negative: not in force");
    assert_eq!(active.policy_name(), "NotInstalledYet");
}

#[test]
fn orders_production_appsettings_loads_into_an_engine_and_picks() {
    let engine = Engine::from_json(&fixture("orders.appsettings.Production.json")).expect("loads");
    assert_eq!(engine.cluster_ids(), ["Payments", "inventory", "audit"]);
    let status = engine.status();
    assert_eq!(
        status
            .cluster("payments")
            .expect("payments")
            .load_balancing_policy,
        "LeastRequests"
    );
    assert_eq!(
        status
            .cluster("inventory")
            .expect("inventory")
            .available_destinations_policy,
        "HealthyOrPanic"
    );

    // LeastRequests over tier 0 (Local-A, Local-B): the first with the fewest in flight.
    let first = engine.pick_endpoint("payments").expect("pick");
    assert_eq!(first.destination().id(), "Local-A");
    let second = engine.pick_endpoint("payments").expect("pick");
    assert_eq!(second.destination().id(), "Local-B");
    let third = engine.pick_endpoint("PAYMENTS").expect("pick");
    assert_eq!(third.destination().id(), "Local-A");
    drop((first, second, third));

    let inventory = picks(&engine, "inventory", 200);
    assert!(distinct(&inventory).is_subset(&BTreeSet::from(["inv-1", "inv-2"])));
    assert_eq!(distinct(&inventory).len(), 2, "PowerOfTwoChoices uses both");
    assert_eq!(picks(&engine, "Audit", 3), ["audit-1"; 3]);
}

// ---------------------------------------------------------------------------------------------
// fixture 3: a bare {"Clusters": ...} document

#[test]
fn bare_clusters_document_is_read_exactly() {
    let text = fixture("bare-clusters.json");
    check_clean(&text);
    let config = load(&text);

    let cluster_ids: Vec<&str> = config.clusters().iter().map(|c| c.id()).collect();
    assert_eq!(cluster_ids, ["search", "geo"]);

    let search = cluster(&config, "search");
    assert_eq!(search.load_balancing_policy_name(), "PowerOfTwoChoices");
    let hc = search.health_check();
    assert_eq!(hc.available_destinations_policy_name(), "HealthyOrPanic");
    assert!(hc.active().is_enabled());
    assert_eq!(hc.active().interval_setting(), secs(600), "00:10 = 10 min");
    assert_eq!(hc.active().timeout_setting(), secs(5), "0:0:5");
    assert_eq!(hc.active().path_setting(), None);
    assert_eq!(hc.active().query_setting(), Some("?deep=false"));
    assert!(hc.passive().is_enabled());
    assert_eq!(
        hc.passive().reactivation_period_setting(),
        Some(Duration::from_millis(93_784_500)),
        "1.02:03:04.5"
    );
    assert_eq!(
        search
            .metadata_map()
            .get("TransportFailureRateHealthPolicy.RateLimit"),
        Some("0.25")
    );
    assert_eq!(ids(search), ["search-1", "search-2", "search-dr"]);
    assert_eq!(dest(search, "search-1").address(), "http://search-1:9200");
    assert_eq!(
        dest(search, "search-1").metadata_map().get("shard"),
        Some("0")
    );
    assert_eq!(
        dest(search, "search-2").metadata_map().get("SHARD"),
        Some("1")
    );
    assert_eq!(dest(search, "search-dr").tier(), 3);

    let geo = cluster(&config, "geo");
    assert_eq!(geo.health_check().active().interval_setting(), ms(500));
    assert_eq!(geo.health_check().active().timeout_setting(), ms(250));
    assert_eq!(ids(geo), ["geo-1"]);
}

#[test]
fn bare_clusters_document_loads_into_an_engine_and_picks() {
    let engine = Engine::from_json(&fixture("bare-clusters.json")).expect("loads");
    assert_eq!(engine.cluster_ids(), ["search", "geo"]);
    let search = picks(&engine, "SEARCH", 200);
    assert_eq!(
        distinct(&search),
        BTreeSet::from(["search-1", "search-2"]),
        "tier 0 only, both used"
    );
    assert_eq!(picks(&engine, "geo", 2), ["geo-1", "geo-1"]);
    let pick = engine.pick_endpoint("geo").expect("pick");
    assert_eq!(
        pick.address().join("lookup?q=1").expect("join").as_str(),
        "http://geo:7000/v1/lookup?q=1"
    );
}

// ---------------------------------------------------------------------------------------------
// fixture 4: a Visual Studio file (UTF-8 BOM, CRLF line endings)

/// Visual Studio saves `appsettings.json` as UTF-8 with a byte-order mark, and .NET reads such a
/// file as usual. `read_to_string` keeps the BOM as a leading U+FEFF, so the reader must skip it
/// for "an existing YARP config file loads unchanged".
#[test]
fn visual_studio_file_with_bom_and_crlf_loads() {
    let text = fixture("visualstudio-bom-crlf.appsettings.json");
    assert!(text.starts_with('\u{feff}'), "the fixture keeps its BOM");
    assert!(text.contains("\r\n"));
    let config = Config::from_json(&text)
        .unwrap_or_else(|e| panic!("a file with a UTF-8 BOM should load: {e}"));
    let billing = cluster(&config, "billing");
    assert_eq!(billing.load_balancing_policy_name(), "RoundRobin");
    let active = billing.health_check().active();
    assert!(active.is_enabled());
    assert_eq!(active.interval_setting(), secs(20));
    assert_eq!(active.timeout_setting(), secs(3));
    assert_eq!(active.path_setting(), Some("/healthz/ready"));
    assert_eq!(ids(billing), ["billing-1", "billing-2"]);
    let engine = Engine::from_json(&text).expect("loads into an engine");
    assert_eq!(
        picks(&engine, "billing", 4),
        ["billing-1", "billing-2", "billing-1", "billing-2"]
    );
}

/// The same file without its BOM loads (so the BOM is the only problem above).
#[test]
fn visual_studio_file_without_bom_loads() {
    let text = fixture("visualstudio-bom-crlf.appsettings.json");
    let text = text.trim_start_matches('\u{feff}');
    check_clean(text);
    let engine = Engine::from_json(text).expect("loads");
    assert_eq!(picks(&engine, "billing", 2), ["billing-1", "billing-2"]);
}

#[test]
fn bare_document_paths_start_at_clusters() {
    let text = fixture("bare-clusters.json").replace("http://search-2:9200", "search-2:9200");
    let err = Config::from_json(&text).expect_err("bad address");
    let paths: Vec<&str> = err.errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["Clusters:search:Destinations:search-2:Address"]);
}

// ---------------------------------------------------------------------------------------------
// .NET configuration reading rules

#[test]
fn keys_and_ids_are_case_insensitive() {
    let text = r#"{
      "reverseproxy": { "CLUSTERS": { "Payments": {
        "loadBalancingPolicy": "RoundRobin",
        "HEALTHCHECK": {
          "availabledestinationspolicy": "HealthyAndUnknown",
          "ACTIVE": { "enabled": true, "INTERVAL": "00:00:07", "tImEoUt": "00:00:03", "PATH": "/h" },
          "passive": { "ENABLED": "true", "reactivationperiod": "00:01:00" }
        },
        "metadata": { "CONSECUTIVEFAILURESHEALTHPOLICY.THRESHOLD": "4" },
        "DESTINATIONS": {
          "EU-1": { "ADDRESS": "http://127.0.0.1:8001/", "priority": 0, "metaDATA": { "Zone": "a" } },
          "eu-2": { "address": "http://127.0.0.1:8002/", "PRIORITY": "1", "health": "http://127.0.0.1:9002/", "HOST": "pay" }
        }
      } } }
    }"#;
    let config = load(text);
    for id in ["payments", "PAYMENTS", "Payments", "pAyMeNtS"] {
        let c = config.find_cluster(id).expect("found whatever the case");
        assert_eq!(c.id(), "Payments");
    }
    assert!(config.find_cluster("payment").is_none());
    let c = cluster(&config, "PAYMENTS");
    assert_eq!(c.load_balancing_policy_name(), "RoundRobin");
    let hc = c.health_check();
    assert_eq!(hc.available_destinations_policy_name(), "HealthyAndUnknown");
    assert!(hc.active().is_enabled());
    assert_eq!(hc.active().interval_setting(), secs(7));
    assert_eq!(hc.active().timeout_setting(), secs(3));
    assert_eq!(hc.active().path_setting(), Some("/h"));
    assert!(hc.passive().is_enabled());
    assert_eq!(hc.passive().reactivation_period_setting(), secs(60));
    assert_eq!(
        c.metadata_map()
            .get("ConsecutiveFailuresHealthPolicy.Threshold"),
        Some("4")
    );
    let eu1 = dest(c, "eu-1");
    assert_eq!(eu1.id(), "EU-1");
    assert_eq!(eu1.address(), "http://127.0.0.1:8001/");
    assert_eq!(eu1.metadata_map().get("ZONE"), Some("a"));
    let eu2 = dest(c, "EU-2");
    assert_eq!(eu2.tier(), 1);
    assert_eq!(eu2.health_setting(), Some("http://127.0.0.1:9002/"));
    assert_eq!(eu2.host_setting(), Some("pay"));

    let engine = Engine::from_json(text).expect("loads");
    for id in ["payments", "PAYMENTS", "Payments"] {
        let pick = engine.pick_endpoint(id).expect("pick by any case");
        assert_eq!(pick.destination().id(), "EU-1");
        assert_eq!(pick.destination().cluster_id(), "Payments");
    }
    let status = engine.status();
    let payments = status.cluster("PAYMENTS").expect("status by any case");
    assert_eq!(payments.destination("eu-1").expect("eu-1").id, "EU-1");
    assert_eq!(payments.destination("EU-2").expect("eu-2").tier, 1);
}

#[test]
fn long_and_unicode_cluster_ids_are_case_insensitive() {
    let long = "Payments-".repeat(12); // longer than any small lookup buffer
    let text = format!(
        r#"{{ "Clusters": {{
          "{long}": {{ "Destinations": {{ "d": {{ "Address": "http://127.0.0.1:1/" }} }} }},
          "Zahlungsdienst-Ö": {{ "Destinations": {{ "e": {{ "Address": "http://127.0.0.1:2/" }} }} }}
        }} }}"#
    );
    let config = load(&text);
    assert!(config.find_cluster(&long.to_uppercase()).is_some());
    assert!(config.find_cluster("zahlungsdienst-ö").is_some());
    let engine = Engine::from_json(&text).expect("loads");
    assert_eq!(picks(&engine, &long.to_lowercase(), 1), ["d"]);
    assert_eq!(picks(&engine, &long.to_uppercase(), 1), ["d"]);
    assert_eq!(picks(&engine, "ZAHLUNGSDIENST-Ö", 1), ["e"]);
    assert_eq!(picks(&engine, "zahlungsdienst-ö", 1), ["e"]);
}

/// .NET compares keys with `OrdinalIgnoreCase`, which maps every character to upper case:
/// `ς` (final sigma) and `σ` both become `Σ`, so `"ΑΣ"` and `"ας"` are one key (a duplicate).
#[test]
fn ids_differing_only_in_greek_sigma_case_are_duplicates() {
    let text = r#"{ "Clusters": {
        "ΑΣ": { "Destinations": { "a": { "Address": "http://127.0.0.1:1/" } } },
        "ας": { "Destinations": { "b": { "Address": "http://127.0.0.1:2/" } } }
    } }"#;
    let report = config::check(text, &PolicyRegistry::default(), false);
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.message.contains("Duplicate cluster")),
        "\"ΑΣ\" and \"ας\" differ only in case: expected a Duplicate cluster error, got {:#?}",
        report.errors
    );
}

/// Whatever the ids, a pick for a cluster never returns another cluster's destination.
#[test]
fn a_pick_never_returns_a_destination_of_another_cluster() {
    let text = r#"{ "Clusters": {
        "ΑΣ": { "Destinations": { "a": { "Address": "http://127.0.0.1:1/" } } },
        "ας": { "Destinations": { "b": { "Address": "http://127.0.0.1:2/" } } },
        "Σ":  { "Destinations": { "c": { "Address": "http://127.0.0.1:3/" } } }
    } }"#;
    // If the document is rejected (the ids collide as in .NET), there is nothing to route.
    let Ok(engine) = Engine::from_json(text) else {
        return;
    };
    for id in engine.cluster_ids() {
        let pick = engine
            .pick_endpoint(&id)
            .expect("each cluster has a destination");
        assert_eq!(
            pick.destination().cluster_id(),
            id,
            "pick for `{id}` returned `{}` of `{}`",
            pick.destination().id(),
            pick.destination().cluster_id()
        );
    }
}

#[test]
fn policy_names_are_case_insensitive() {
    let lb = [
        ("roundrobin", "RoundRobin"),
        ("ROUNDROBIN", "RoundRobin"),
        ("powerOfTwoChoices", "PowerOfTwoChoices"),
        ("leastrequests", "LeastRequests"),
        ("RANDOM", "Random"),
        ("firstAlphabetical", "FirstAlphabetical"),
    ];
    for (given, resolved) in lb {
        let text = format!(
            r#"{{ "ReverseProxy": {{ "Clusters": {{ "c": {{
                "LoadBalancingPolicy": "{given}",
                "HealthCheck": {{
                  "AvailableDestinationsPolicy": "healthyandunknown",
                  "Active": {{ "Enabled": true, "Policy": "consecutivefailures" }},
                  "Passive": {{ "Enabled": true, "Policy": "TRANSPORTFAILURERATE" }}
                }},
                "Destinations": {{
                  "d1": {{ "Address": "http://127.0.0.1:1/" }},
                  "d2": {{ "Address": "http://127.0.0.1:2/" }}
                }}
            }} }} }} }}"#
        );
        check_clean(&text);
        let engine = Engine::from_json(&text).expect("loads");
        let status = engine.status();
        let c = status.cluster("c").expect("c");
        assert_eq!(c.load_balancing_policy, resolved, "{given}");
        assert_eq!(c.available_destinations_policy, "HealthyAndUnknown");
        assert!(c.active_enabled && c.passive_enabled);
        let got = picks(&engine, "c", 4);
        if resolved == "RoundRobin" {
            assert_eq!(
                got,
                ["d1", "d2", "d1", "d2"],
                "{given} behaves as RoundRobin"
            );
        }
    }
}

#[test]
fn scalars_may_be_strings_or_json_values() {
    for (json, expected) in [
        ("true", true),
        ("false", false),
        ("\"true\"", true),
        ("\"True\"", true),
        ("\"TRUE\"", true),
        ("\" TRUE \"", true),
        ("\"\\ttrue\\n\"", true),
        ("\"False\"", false),
        ("\" fAlSe \"", false),
    ] {
        let text = format!(
            r#"{{ "Clusters": {{ "c": {{
                "HealthCheck": {{ "Active": {{ "Enabled": {json} }}, "Passive": {{ "Enabled": {json} }} }},
                "HttpClient": {{ "DangerousAcceptAnyServerCertificate": {json} }}
            }} }} }}"#
        );
        let config = load(&text);
        let c = cluster(&config, "c");
        assert_eq!(c.health_check().active().is_enabled(), expected, "{json}");
        assert_eq!(c.health_check().passive().is_enabled(), expected, "{json}");
        assert_eq!(
            c.dangerous_accept_any_server_certificate(),
            expected,
            "{json}"
        );
    }

    // Numbers as JSON numbers or strings, with surrounding spaces.
    for (json, tier) in [
        ("2", 2),
        ("\"2\"", 2),
        ("\" 2 \"", 2),
        ("0", 0),
        ("\"0\"", 0),
    ] {
        // MaxConnectionsPerServer must be positive (YARP's validator): 0 is tested elsewhere.
        let client = if tier > 0 {
            format!(r#""HttpClient": {{ "MaxConnectionsPerServer": {json} }},"#)
        } else {
            String::new()
        };
        let text = format!(
            r#"{{ "Clusters": {{ "c": {{
                {client}
                "Destinations": {{ "d": {{ "Address": "http://127.0.0.1:1/", "Priority": {json} }} }}
            }} }} }}"#
        );
        let config = load(&text);
        let c = cluster(&config, "c");
        assert_eq!(dest(c, "d").tier(), tier, "Priority {json}");
        assert_eq!(
            c.max_connections_per_server(),
            (tier > 0).then_some(tier),
            "{json}"
        );
    }

    // A JSON number where a TimeSpan goes is its text: 10 is ten days, like "10".
    let config = load(&with_active(r#""Interval": 10, "Timeout": "10""#));
    let active = cluster(&config, "c").health_check().active();
    assert_eq!(active.interval_setting(), secs(10 * 86_400));
    assert_eq!(active.timeout_setting(), secs(10 * 86_400));

    // Metadata values: numbers keep their text, booleans become True/False.
    let config = load(
        r#"{ "Clusters": { "c": { "Metadata": {
            "a": 1.50, "b": true, "c": false, "d": -0.0, "e": 1e3, "f": 12345678901234567890123, "g": "x"
        } } } }"#,
    );
    let md = cluster(&config, "c").metadata_map();
    let got: Vec<(&str, &str)> = md.iter().collect();
    assert_eq!(
        got,
        [
            ("a", "1.50"),
            ("b", "True"),
            ("c", "False"),
            ("d", "-0.0"),
            ("e", "1e3"),
            ("f", "12345678901234567890123"),
            ("g", "x"),
        ]
    );
}

#[test]
fn booleans_other_than_true_and_false_are_errors() {
    for bad in [
        "\"1\"", "\"yes\"", "\"0\"", "\"no\"", "\"on\"", "1", "0", "\"tru\"",
    ] {
        let text = format!(
            r#"{{ "ReverseProxy": {{ "Clusters": {{ "payments": {{
                "HealthCheck": {{ "Active": {{ "Enabled": {bad} }} }}
            }} }} }} }}"#
        );
        let err = Config::from_json(&text).expect_err(bad);
        assert_eq!(err.errors.len(), 1, "{bad}: {:#?}", err.errors);
        let e = &err.errors[0];
        assert_eq!(
            e.path,
            "ReverseProxy:Clusters:payments:HealthCheck:Active:Enabled"
        );
        let shown = bad.trim_matches('"');
        assert!(e.message.contains("payments"), "{}", e.message);
        assert!(e.message.contains("Enabled"), "{}", e.message);
        assert!(e.message.contains(&format!("`{shown}`")), "{}", e.message);
    }
}

#[test]
fn unknown_keys_are_ignored() {
    let text = r#"{
      "Serilog": { "MinimumLevel": "Debug", "WriteTo": [ { "Name": "Console" } ] },
      "FeatureFlags": { "NewCheckout": true },
      "ReverseProxy": {
        "Routes": { "r": { "ClusterId": "c", "Match": { "Hosts": [ "a.example.com" ] } } },
        "SomethingNew": { "Whatever": [ 1, 2, { "x": null } ] },
        "Clusters": { "c": {
          "Comment": "owned by team x",
          "SessionAffinity": { "Enabled": "true", "Policy": "HashCookie", "AffinityKeyName": "s" },
          "HttpClient": { "SslProtocols": [ "Tls12" ], "RequestHeaderEncoding": "utf-8", "ResponseHeaderEncoding": "utf-8" },
          "HttpRequest": { "ActivityTimeout": "00:00:30", "VersionPolicy": "RequestVersionExact" },
          "HealthCheck": {
            "Extra": 42,
            "Active": { "Enabled": true, "Unknown": "x", "Options": { "a": 1 } },
            "Passive": { "Weird": [ ] }
          },
          "Destinations": { "d": {
            "Address": "http://127.0.0.1:1/",
            "Weight": 5,
            "Tags": [ "a", "b" ],
            "Nested": { "Deep": { "Deeper": true } }
          } }
        } }
      }
    }"#;
    // Keys no section knows, and not close to one it knows, are ignored without a word; the
    // YARP settings healthpick does not apply are warnings.
    let p = "ReverseProxy:Clusters:c";
    check_clean_but_not_applied(
        text,
        &[
            &format!("{p}:HttpClient:SslProtocols"),
            &format!("{p}:HttpClient:RequestHeaderEncoding"),
            &format!("{p}:HttpClient:ResponseHeaderEncoding"),
            &format!("{p}:HttpRequest:VersionPolicy"),
        ],
    );
    let config = load(text);
    let c = cluster(&config, "c");
    assert!(c.health_check().active().is_enabled());
    assert!(!c.health_check().passive().is_enabled());
    assert_eq!(c.http_version_setting(), None);
    assert!(dest(c, "d").metadata_map().is_empty());
    assert_eq!(
        picks(&Engine::from_json(text).expect("loads"), "c", 1),
        ["d"]
    );
}

#[test]
fn null_or_empty_policy_is_the_default() {
    for value in ["null", "\"\""] {
        let text = format!(
            r#"{{ "Clusters": {{ "c": {{
                "LoadBalancingPolicy": {value},
                "HealthCheck": {{
                  "AvailableDestinationsPolicy": {value},
                  "Active": {{ "Enabled": true, "Policy": {value}, "Path": {value}, "Query": {value},
                               "Interval": {value}, "Timeout": {value} }},
                  "Passive": {{ "Enabled": true, "Policy": {value}, "ReactivationPeriod": {value} }}
                }},
                "Destinations": {{ "d": {{ "Address": "http://127.0.0.1:1/", "Priority": {value},
                                          "Health": {value}, "Host": {value} }} }}
            }} }} }}"#
        );
        check_clean(&text);
        let config = load(&text);
        let c = cluster(&config, "c");
        assert_eq!(
            c.load_balancing_policy_name(),
            "PowerOfTwoChoices",
            "{value}"
        );
        let hc = c.health_check();
        assert_eq!(hc.available_destinations_policy_name(), "HealthyOrPanic");
        assert_eq!(hc.active().policy_name(), "ConsecutiveFailures", "{value}");
        assert_eq!(hc.active().path_setting(), None);
        assert_eq!(hc.active().query_setting(), None);
        assert_eq!(hc.active().interval_setting(), None);
        assert_eq!(hc.active().timeout_setting(), None);
        assert_eq!(
            hc.passive().policy_name(),
            "TransportFailureRate",
            "{value}"
        );
        assert_eq!(hc.passive().reactivation_period_setting(), None);
        let d = dest(c, "d");
        assert_eq!(d.tier(), 0);
        assert_eq!(d.health_setting(), None);
        assert_eq!(d.host_setting(), None);

        let engine = Engine::from_json(&text).expect("loads");
        let status = engine.status();
        let s = status.cluster("c").expect("c");
        assert_eq!(s.load_balancing_policy, "PowerOfTwoChoices");
        assert_eq!(s.available_destinations_policy, "HealthyOrPanic");
    }
}

// ---------------------------------------------------------------------------------------------
// TimeSpans read through a config file

#[test]
fn every_spec_timespan_example_reads_through_a_config_file() {
    let cases: [(&str, Duration); 10] = [
        ("00:00:10", Duration::from_secs(10)),
        ("0:0:5", Duration::from_secs(5)),
        ("1.02:03:04.5", Duration::from_millis(93_784_500)),
        ("00:10", Duration::from_secs(600)),
        ("10", Duration::from_secs(10 * 86_400)),
        ("00:00:.5", Duration::from_millis(500)),
        ("00:00:15", Duration::from_secs(15)),
        ("10s", Duration::from_secs(10)),
        ("1m30s", Duration::from_secs(90)),
        (" 00:00:07 ", Duration::from_secs(7)),
    ];
    for (text, expected) in cases {
        let doc = format!(
            r#"{{ "ReverseProxy": {{ "Clusters": {{ "c": {{ "HealthCheck": {{
                "Active": {{ "Enabled": true, "Interval": "{text}", "Timeout": "{text}" }},
                "Passive": {{ "Enabled": true, "ReactivationPeriod": "{text}" }}
            }} }} }} }} }}"#
        );
        let config = load(&doc);
        let hc = cluster(&config, "c").health_check();
        assert_eq!(hc.active().interval_setting(), Some(expected), "{text:?}");
        assert_eq!(hc.active().timeout_setting(), Some(expected), "{text:?}");
        assert_eq!(
            hc.passive().reactivation_period_setting(),
            Some(expected),
            "{text:?}"
        );
        Engine::from_json(&doc).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    }
}

#[test]
fn out_of_range_timespans_are_errors() {
    for bad in [
        "24:00:00",
        "00:60:00",
        "00:00:05.12345678",
        "00:00:60",
        "abc",
        "1.5",
    ] {
        let doc = format!(
            r#"{{ "ReverseProxy": {{ "Clusters": {{ "c": {{ "HealthCheck": {{
                "Active": {{ "Enabled": true, "Interval": "{bad}", "Timeout": "{bad}" }},
                "Passive": {{ "Enabled": true, "ReactivationPeriod": "{bad}" }}
            }} }} }} }} }}"#
        );
        let err = Config::from_json(&doc).expect_err(bad);
        let paths: Vec<&str> = err.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "ReverseProxy:Clusters:c:HealthCheck:Active:Interval",
                "ReverseProxy:Clusters:c:HealthCheck:Active:Timeout",
                "ReverseProxy:Clusters:c:HealthCheck:Passive:ReactivationPeriod",
            ],
            "{bad}"
        );
        for (e, key) in err
            .errors
            .iter()
            .zip(["Interval", "Timeout", "ReactivationPeriod"])
        {
            assert!(e.message.contains(&format!("`{bad}`")), "{}", e.message);
            assert!(e.message.contains(key), "{}", e.message);
            assert!(e.message.contains("`c`"), "{}", e.message);
        }
        assert!(Engine::from_json(&doc).is_err());
    }
}

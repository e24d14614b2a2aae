#![cfg(feature = "serde")]
//! The serde form of the configuration (feature `serde`): every YARP sample file writes out as
//! YARP JSON and loads again to an equal `Config`, in JSON, TOML and YAML; documents in TOML and
//! YAML load to exactly what `Config::from_json` gives for the same document in JSON; bad values
//! are reported all at once, naming cluster, key path and value.

use std::path::{Path, PathBuf};
use std::time::Duration;

use healthpick::config::{
    ActiveHealthCheckConfig, ClusterConfig, DestinationConfig, HealthPolicyOptions, Metadata,
    PassiveHealthCheckConfig, TimeSpan,
};
use healthpick::{Config, PolicyRegistry};

/// Every configuration file of the repository that `Config::from_json` accepts, by path: the
/// YARP samples first (all of which must load), then the other configuration fixtures.
fn sample_configs() -> Vec<(PathBuf, Config)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for (dir, all_valid) in [
        ("tests/fixtures/yarp", true),
        ("tests/fixtures/cli", false),
        ("examples/config", true),
    ] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|entry| entry.expect("directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no fixtures in {dir}");
        for path in files {
            let text = std::fs::read_to_string(&path).expect("read fixture");
            match Config::from_json(&text) {
                Ok(config) => out.push((path, config)),
                Err(e) if !all_valid => drop(e),
                Err(e) => panic!("{}: {e}", path.display()),
            }
        }
    }
    out
}

fn canonical(config: &Config) -> Config {
    PolicyRegistry::default().canonical(config)
}

#[test]
fn every_yarp_sample_round_trips_through_yarp_json() {
    let samples = sample_configs();
    assert!(samples.len() >= 8, "{} samples", samples.len());
    for (path, config) in &samples {
        let name = path.display();
        let json = serde_json::to_string_pretty(config).expect("serialize");
        let again = Config::from_json(&json)
            .unwrap_or_else(|e| panic!("{name}: the written document does not load: {e}\n{json}"));
        assert_eq!(again, canonical(config), "{name}: from_json\n{json}");
        let deserialized: Config = serde_json::from_str(&json)
            .unwrap_or_else(|e| panic!("{name}: serde_json does not load it: {e}\n{json}"));
        assert_eq!(deserialized, again, "{name}: Deserialize");
        let twice = serde_json::to_string_pretty(&again).expect("serialize again");
        assert_eq!(twice, json, "{name}: writing is a fixed point");
    }
}

#[test]
fn every_yarp_sample_round_trips_through_toml_and_yaml() {
    for (path, config) in &sample_configs() {
        let name = path.display();
        let toml_text = toml::to_string(config).unwrap_or_else(|e| panic!("{name}: {e}"));
        let from_toml: Config = toml::from_str(&toml_text)
            .unwrap_or_else(|e| panic!("{name}: TOML does not load: {e}\n{toml_text}"));
        assert_eq!(from_toml, canonical(config), "{name}: TOML\n{toml_text}");

        let yaml_text = serde_norway::to_string(config).unwrap_or_else(|e| panic!("{name}: {e}"));
        let from_yaml: Config = serde_norway::from_str(&yaml_text)
            .unwrap_or_else(|e| panic!("{name}: YAML does not load: {e}\n{yaml_text}"));
        assert_eq!(from_yaml, canonical(config), "{name}: YAML\n{yaml_text}");
    }
}

#[test]
fn a_sample_in_canonical_spelling_round_trips_exactly_and_keeps_its_shape() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/yarp/visualstudio-bom-crlf.appsettings.json");
    let config = Config::from_json(&std::fs::read_to_string(path).expect("read")).expect("valid");
    assert_eq!(canonical(&config), config, "already canonical");
    let json = serde_json::to_string(&config).expect("serialize");
    assert_eq!(Config::from_json(&json).expect("loads"), config);
    let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let billing = &value["ReverseProxy"]["Clusters"]["billing"];
    assert_eq!(billing["LoadBalancingPolicy"], "RoundRobin");
    assert_eq!(billing["HealthCheck"]["Active"]["Interval"], "00:00:20");
    assert_eq!(billing["HealthCheck"]["Active"]["Path"], "/healthz/ready");
    assert_eq!(
        billing["Destinations"]["billing-1"]["Address"],
        "https://billing-1.corp.local/"
    );
}

#[test]
fn the_written_document_is_yarp_json_with_canonical_names_and_timespans() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/yarp/orders.appsettings.Production.json");
    let config = Config::from_json(&std::fs::read_to_string(path).expect("read")).expect("valid");
    let value = serde_json::to_value(&config).expect("serialize");
    let clusters = &value["ReverseProxy"]["Clusters"];
    let payments = &clusters["Payments"];
    assert_eq!(payments["LoadBalancingPolicy"], "LeastRequests");
    assert_eq!(payments["HealthCheck"]["Active"]["Enabled"], true);
    // "15s" and "1m30s" in the file: TimeSpans in .NET's "c" format.
    assert_eq!(payments["HealthCheck"]["Active"]["Interval"], "00:00:15");
    assert_eq!(payments["HealthCheck"]["Active"]["Timeout"], "00:01:30");
    assert_eq!(payments["Metadata"]["sla"], "99.95", "metadata stays text");
    assert_eq!(payments["Destinations"]["Region-A"]["Priority"], 1);
    assert!(payments["Destinations"]["Local-A"]
        .get("Priority")
        .is_none());
    assert_eq!(
        clusters["inventory"]["HealthCheck"]["AvailableDestinationsPolicy"],
        "HealthyOrPanic"
    );
    assert_eq!(
        clusters["inventory"]["HealthCheck"]["Passive"]["ReactivationPeriod"],
        "00:10:00"
    );
    // The bare-Clusters shape stays bare; sub-second and day spans keep every digit.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/yarp/bare-clusters.json");
    let config = Config::from_json(&std::fs::read_to_string(path).expect("read")).expect("valid");
    let value = serde_json::to_value(&config).expect("serialize");
    assert!(value.get("ReverseProxy").is_none(), "{value}");
    let search = &value["Clusters"]["search"]["HealthCheck"];
    assert_eq!(
        search["Passive"]["ReactivationPeriod"],
        "1.02:03:04.5000000"
    );
    assert_eq!(
        value["Clusters"]["geo"]["HealthCheck"]["Active"]["Interval"],
        "00:00:00.5000000"
    );
}

#[test]
fn a_config_built_in_code_round_trips_with_every_setting() {
    let config = Config::new()
        .health_policy_options(HealthPolicyOptions {
            detection_window_size: Duration::from_secs(120),
            minimal_total_count_threshold: 20,
            default_failure_rate_limit: 0.125,
            consecutive_failures_threshold: 3.0,
            default_interval: Duration::from_millis(7_500),
            default_timeout: Duration::from_secs(2),
            default_reactivation_period: Duration::from_secs(90),
        })
        .cluster(
            ClusterConfig::new("payments")
                .load_balancing_policy("RoundRobin")
                .available_destinations_policy("HealthyAndUnknown")
                .active(
                    ActiveHealthCheckConfig::enabled()
                        .interval(Duration::from_secs(5))
                        .timeout(Duration::from_nanos(1_234_567_800))
                        .policy("ConsecutiveFailures")
                        .path("/health")
                        .query("?deep=true"),
                )
                .passive(
                    PassiveHealthCheckConfig::enabled()
                        .policy("TransportFailureRate, OutlierDetection")
                        .reactivation_period(Duration::from_secs(86_400 + 1)),
                )
                .http_version("2")
                .activity_timeout(Duration::from_secs(100))
                .metadata("ConsecutiveFailuresHealthPolicy.Threshold", "4")
                .metadata("OutlierDetection.Consecutive5xx", "3")
                .destination(
                    DestinationConfig::new("eu-1", "http://10.0.0.1:8080/")
                        .health("http://10.0.0.1:9090/")
                        .host("payments.example.com")
                        .metadata("Weight", "2.5")
                        .metadata("zone", "eu-west-1a"),
                )
                .destination(DestinationConfig::new("us-1", "http://10.1.0.1:8080/").priority(2)),
        )
        .cluster(ClusterConfig::new("empty"));
    let json = serde_json::to_string(&config).expect("serialize");
    let again = Config::from_json(&json).unwrap_or_else(|e| panic!("{e}\n{json}"));
    assert_eq!(again, config, "{json}");
    assert_eq!(again.clusters()[0].destinations()[0].weight(), 2.5);
    assert_eq!(again.clusters()[0].destinations()[1].tier(), 2);
}

// ---------------------------------------------------------------------------------------------
// TOML and YAML documents load as their JSON equivalent does

/// The same document three times: hand-written in JSON, TOML and YAML, in the loose spellings
/// .NET configuration accepts (lower-case keys, booleans and numbers as text, humantime spans).
const JSON_DOC: &str = r#"{
  "ReverseProxy": { "Clusters": {
    "payments": {
      "loadbalancingpolicy": "roundrobin",
      "HealthCheck": {
        "Active": { "Enabled": "true", "Interval": "00:00:10", "Timeout": "2s", "Path": "/health" },
        "Passive": { "enabled": true, "ReactivationPeriod": "00:02:00" }
      },
      "HttpClient": { "MaxConnectionsPerServer": 64 },
      "Metadata": { "ConsecutiveFailuresHealthPolicy.Threshold": 3, "canary": true },
      "Destinations": {
        "eu-1": { "Address": "http://10.0.0.1:8080/", "Metadata": { "Weight": 1.5 } },
        "us-1": { "Address": "http://10.1.0.1:8080/", "Priority": "1", "Host": "pay.example" }
      }
    },
    "audit": { "Destinations": { "a-1": { "address": "http://audit.internal/" } } }
  } },
  "HealthPolicies": { "DefaultInterval": "00:00:20", "ConsecutiveFailuresThreshold": 4 }
}"#;

const TOML_DOC: &str = r#"
[ReverseProxy.Clusters.payments]
loadbalancingpolicy = "roundrobin"

[ReverseProxy.Clusters.payments.HealthCheck.Active]
Enabled = "true"
Interval = 00:00:10          # unquoted: a TOML local time, read as its text
Timeout = "2s"
Path = "/health"

[ReverseProxy.Clusters.payments.HealthCheck.Passive]
enabled = true
ReactivationPeriod = "00:02:00"

[ReverseProxy.Clusters.payments.HttpClient]
MaxConnectionsPerServer = 64

[ReverseProxy.Clusters.payments.Metadata]
"ConsecutiveFailuresHealthPolicy.Threshold" = 3
canary = true

[ReverseProxy.Clusters.payments.Destinations.eu-1]
Address = "http://10.0.0.1:8080/"
Metadata = { Weight = 1.5 }

[ReverseProxy.Clusters.payments.Destinations.us-1]
Address = "http://10.1.0.1:8080/"
Priority = "1"
Host = "pay.example"

[ReverseProxy.Clusters.audit.Destinations.a-1]
address = "http://audit.internal/"

[HealthPolicies]
DefaultInterval = "00:00:20"
ConsecutiveFailuresThreshold = 4
"#;

const YAML_DOC: &str = r#"
ReverseProxy:
  Clusters:
    payments:
      loadbalancingpolicy: roundrobin
      HealthCheck:
        Active: { Enabled: "true", Interval: "00:00:10", Timeout: 2s, Path: /health }
        Passive:
          enabled: true
          ReactivationPeriod: "00:02:00"
      HttpClient:
        MaxConnectionsPerServer: 64
      Metadata:
        ConsecutiveFailuresHealthPolicy.Threshold: 3
        canary: true
      Destinations:
        eu-1:
          Address: http://10.0.0.1:8080/
          Metadata: { Weight: 1.5 }
        us-1: { Address: "http://10.1.0.1:8080/", Priority: "1", Host: pay.example }
    audit:
      Destinations:
        a-1: { address: "http://audit.internal/" }
HealthPolicies:
  DefaultInterval: "00:00:20"
  ConsecutiveFailuresThreshold: 4
"#;

#[test]
fn toml_and_yaml_documents_load_exactly_as_their_json_equivalent() {
    let from_json = Config::from_json(JSON_DOC).expect("the JSON is valid");
    let from_toml: Config = toml::from_str(TOML_DOC).unwrap_or_else(|e| panic!("TOML: {e}"));
    let from_yaml: Config =
        serde_norway::from_str(YAML_DOC).unwrap_or_else(|e| panic!("YAML: {e}"));
    assert_eq!(from_toml, from_json, "TOML");
    assert_eq!(from_yaml, from_json, "YAML");

    // And what they are is what the loose spellings mean, defaults filled in as YARP does.
    let payments = from_toml.find_cluster("PAYMENTS").expect("payments");
    assert_eq!(payments.load_balancing_policy_name(), "roundrobin");
    let active = payments.health_check().active();
    assert!(active.is_enabled());
    assert_eq!(active.interval_setting(), Some(Duration::from_secs(10)));
    assert_eq!(active.timeout_setting(), Some(Duration::from_secs(2)));
    assert!(payments.health_check().passive().is_enabled());
    assert_eq!(payments.max_connections_per_server(), Some(64));
    assert_eq!(payments.metadata_map().get("canary"), Some("True"));
    let options = from_toml
        .health_policies()
        .copied()
        .expect("HealthPolicies");
    assert_eq!(payments.failure_threshold(&options), 3.0);
    assert_eq!(options.default_interval, Duration::from_secs(20));
    assert_eq!(options.consecutive_failures_threshold, 4.0);
    assert_eq!(payments.destinations()[0].weight(), 1.5);
    assert_eq!(payments.destinations()[1].tier(), 1);
    assert_eq!(
        payments.destinations()[1].host_setting(),
        Some("pay.example")
    );
    let audit = from_toml.find_cluster("audit").expect("audit");
    assert_eq!(audit.load_balancing_policy_name(), "PowerOfTwoChoices");
    assert!(!audit.health_check().active().is_enabled());
}

#[test]
fn a_document_from_any_format_equals_from_json_of_the_same_tree() {
    // serde_json::Value is one more serde format: whatever it holds, Deserialize and from_json
    // of its text agree (one cluster, so the Value's sorted keys change no order).
    let docs = [
        r#"{"Clusters": {"c": {"HealthCheck": {"Active": {"Enabled": 1}}}}}"#,
        r#"{"Clusters": {"c": {"Destinations": {"d": {"Address": "http://a/", "Priority": -1}}}}}"#,
        r#"{"Clusters": {"c": {"Destinations": {"d": {"Address": "http://a/", "Priority": 1.5}}}}}"#,
        r#"{"Clusters": {"c": {"Destinations": {"d": {"Address": "http://a/", "Metadata": {"Weight": 0.1}}}}}}"#,
        r#"{"Clusters": {"c": {"LoadBalancingPolicy": "Fastest"}}}"#,
        r#"{"Clusters": []}"#,
        r#"{"ReverseProxy": null, "Clusters": {"c": null}}"#,
        r#"[1, 2]"#,
        r#"null"#,
        r#"{}"#,
    ];
    for doc in docs {
        let value: serde_json::Value = serde_json::from_str(doc).expect("JSON");
        let by_serde = serde_json::from_value::<Config>(value).map_err(|e| e.to_string());
        let by_reader = Config::from_json(doc).map_err(|e| e.to_string());
        assert_eq!(by_serde, by_reader, "{doc}");
    }
}

#[test]
fn a_bad_toml_value_names_cluster_key_path_and_value_and_every_problem_is_reported() {
    let text = r#"
[ReverseProxy.Clusters.payments]
LoadBalancingPolicy = "Fastest"

[ReverseProxy.Clusters.payments.HealthCheck.Active]
Enabled = true
Interval = "ten seconds"

[ReverseProxy.Clusters.payments.Destinations.eu-2]
Address = "localhost:10010"

[ReverseProxy.Clusters.orders.Destinations.o-1]
Address = "http://orders/"
Priority = -1
"#;
    let error = toml::from_str::<Config>(text)
        .expect_err("invalid")
        .to_string();
    let expected = [
        "ReverseProxy:Clusters:payments:LoadBalancingPolicy: cluster `payments`: LoadBalancingPolicy `Fastest` is not a known policy",
        "ReverseProxy:Clusters:payments:HealthCheck:Active:Interval: cluster `payments`: Interval `ten seconds` is not a TimeSpan",
        "ReverseProxy:Clusters:payments:Destinations:eu-2:Address: cluster `payments`: destination `eu-2`: Address `localhost:10010`",
        "ReverseProxy:Clusters:orders:Destinations:o-1:Priority: cluster `orders`: destination `o-1`: Priority `-1` must not be negative",
    ];
    assert!(
        error.contains("invalid configuration (4 errors)"),
        "{error}"
    );
    for line in expected {
        assert!(error.contains(line), "missing `{line}` in:\n{error}");
    }
    // Equal to what from_json reports for the same document in JSON.
    let json = r#"{"ReverseProxy": {"Clusters": {
        "payments": {"LoadBalancingPolicy": "Fastest",
            "HealthCheck": {"Active": {"Enabled": true, "Interval": "ten seconds"}},
            "Destinations": {"eu-2": {"Address": "localhost:10010"}}},
        "orders": {"Destinations": {"o-1": {"Address": "http://orders/", "Priority": -1}}}}}}"#;
    let from_json = Config::from_json(json).expect_err("invalid").to_string();
    assert!(error.contains(&from_json), "{error}\n---\n{from_json}");
}

#[test]
fn a_bad_yaml_document_says_what_is_wrong() {
    let error = serde_norway::from_str::<Config>("- a\n- b\n")
        .expect_err("not an object")
        .to_string();
    assert!(
        error.contains("the document must be a JSON object, found an array"),
        "{error}"
    );
    let error = serde_norway::from_str::<Config>(
        "Clusters:\n  c:\n    HealthCheck:\n      Active:\n        Enabled: yes please\n",
    )
    .expect_err("bad boolean")
    .to_string();
    assert!(
        error.contains("Clusters:c:HealthCheck:Active:Enabled: cluster `c`: Enabled `yes please` is not a boolean"),
        "{error}"
    );
    // Keys that differ only in case are one key twice, as .NET configuration says.
    let error = serde_norway::from_str::<Config>(
        "Clusters:\n  c:\n    Destinations: {}\n    destinations: {}\n",
    )
    .expect_err("duplicate key")
    .to_string();
    assert!(error.contains("duplicate key `destinations`"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// The parts with serde impls of their own

#[test]
fn timespans_metadata_and_health_policies_read_and_write_alone() {
    let span: TimeSpan = serde_json::from_str("\"1.02:03:04.5\"").expect("TimeSpan");
    assert_eq!(
        serde_json::to_string(&span).expect("write"),
        "\"1.02:03:04.5000000\""
    );
    let humantime: TimeSpan = toml::from_str::<toml::Table>("t = \"250ms\"")
        .expect("toml")
        .get("t")
        .cloned()
        .expect("t")
        .try_into()
        .expect("TimeSpan");
    assert_eq!(humantime.to_string(), "00:00:00.2500000");
    let bad = serde_json::from_str::<TimeSpan>("\"ten seconds\"").expect_err("bad");
    assert!(
        bad.to_string().contains("`ten seconds` is not a TimeSpan"),
        "{bad}"
    );
    let bad = serde_json::from_str::<TimeSpan>("true").expect_err("bad");
    assert!(bad.to_string().contains("found a boolean"), "{bad}");

    let md: Metadata =
        serde_json::from_str(r#"{"Weight": 2, "canary": false, "gone": null}"#).expect("metadata");
    assert_eq!(
        md,
        Metadata::new().with("Weight", "2").with("canary", "False")
    );
    assert_eq!(
        serde_json::to_string(&md).expect("write"),
        r#"{"Weight":"2","canary":"False"}"#
    );
    let bad = serde_json::from_str::<Metadata>(r#"{"a": "1", "A": "2", "b": {"c": 1}}"#)
        .expect_err("bad")
        .to_string();
    assert!(bad.contains("duplicate key `A`"), "{bad}");
    assert!(bad.contains("metadata `b` must be a value"), "{bad}");

    let options: HealthPolicyOptions = serde_json::from_str(
        r#"{"defaultinterval": "00:00:20", "DefaultFailureRateLimit": "0.5"}"#,
    )
    .expect("options");
    assert_eq!(options.default_interval, Duration::from_secs(20));
    assert_eq!(options.default_failure_rate_limit, 0.5);
    assert_eq!(
        options.default_timeout,
        HealthPolicyOptions::default().default_timeout
    );
    let written = serde_json::to_string(&options).expect("write");
    assert_eq!(
        serde_json::from_str::<HealthPolicyOptions>(&written).expect("again"),
        options
    );
    let bad = serde_json::from_str::<HealthPolicyOptions>(
        r#"{"DefaultInterval": "soon", "ConsecutiveFailuresThreshold": "many"}"#,
    )
    .expect_err("bad")
    .to_string();
    assert!(bad.contains("invalid configuration (2 errors)"), "{bad}");
    assert!(bad.contains("HealthPolicies:DefaultInterval"), "{bad}");
    assert!(
        bad.contains("ConsecutiveFailuresThreshold `many` is not a number"),
        "{bad}"
    );
}

#[test]
fn a_cluster_writes_its_section_with_canonical_policy_names() {
    let cluster = ClusterConfig::new("c")
        .load_balancing_policy("firstalphabetical")
        .passive(
            PassiveHealthCheckConfig::enabled().policy("outlierdetection,transportfailurerate"),
        )
        .destination(DestinationConfig::new("d", "http://d/"));
    let value = serde_json::to_value(&cluster).expect("write");
    assert_eq!(
        value,
        serde_json::json!({
            "LoadBalancingPolicy": "FirstAlphabetical",
            "HealthCheck": {
                "Active": {"Enabled": false},
                "Passive": {"Enabled": true, "Policy": "OutlierDetection, TransportFailureRate"}
            },
            "Destinations": {"d": {"Address": "http://d/"}}
        })
    );
}

// ---------------------------------------------------------------------------------------------
// Discovery sources and locality tiers (each source needs its feature to validate)

#[cfg(any(
    feature = "dns",
    all(feature = "etcd", feature = "consul"),
    feature = "kubernetes"
))]
fn assert_round_trips(text: &str) {
    let config = Config::from_json(text).unwrap_or_else(|e| panic!("{e}"));
    let json = serde_json::to_string_pretty(&config).expect("write");
    let again = Config::from_json(&json).unwrap_or_else(|e| panic!("{e}\n{json}"));
    assert_eq!(again, canonical(&config), "{json}");
    let toml_text = toml::to_string(&config).expect("TOML");
    let from_toml: Config =
        toml::from_str(&toml_text).unwrap_or_else(|e| panic!("{e}\n{toml_text}"));
    assert_eq!(from_toml, again, "{toml_text}");
}

#[cfg(feature = "dns")]
#[test]
fn dns_sources_and_locality_tiers_round_trip() {
    assert_round_trips(
        r#"{"Clusters": {"payments": {
        "Discovery": [
            {"Type": "dns", "Name": "payments.svc.test", "Port": "8443", "Scheme": "HTTPS",
             "Servers": ["127.0.0.1:5353", "[::1]:53"], "Timeout": "00:00:02",
             "MinRefresh": "1s", "MaxRefresh": "00:01:00", "Jitter": 0.25,
             "FirstAnswerWithin": "00:00:03",
             "Guard": {"Policy": "never", "MaxRemovedShare": "0.3", "ConfirmAfter": "00:00:45"}},
            {"Type": "Dns", "Name": "_http._tcp.b.test", "Record": "SRV", "Source": "dns-b",
             "MinRefresh": "00:10:00"},
            {"Type": "ResolveDestinations", "Servers": "10.0.0.53:53"}
        ],
        "LocalityTiers": {"LocalZone": "eu-1a", "LocalRegion": "eu-1", "Tiers": {"us-east-1a": 4}},
        "Destinations": {"d": {"Address": "http://payments.test:8080/"}}
    }}}"#,
    );
    assert_round_trips(
        r#"{"Clusters": {"c": {"Discovery": {"Type": "Dns", "Name": "a.test", "Port": 80}}}}"#,
    );
}

#[cfg(all(feature = "etcd", feature = "consul"))]
#[test]
fn etcd_and_consul_sources_round_trip() {
    assert_round_trips(
        r#"{"Clusters": {"pay": {
        "Discovery": [
            {"Type": "Etcd", "Endpoints": ["http://10.0.0.5:2379", "https://10.0.0.6:2379"],
             "Prefix": "/services/pay/", "Timeout": "00:00:02", "MaxRefresh": "00:01:00"},
            {"Type": "consul", "Service": "pay", "Address": "10.0.0.9:8500",
             "Datacenters": ["eu-west", "eu-central"], "Tag": "v2", "Token": "t0k3n",
             "Wait": "00:01:00", "Stale": true, "Scheme": "https", "Timeout": "00:00:03"},
            {"Type": "Consul", "Source": "consul-2", "Service": "pay", "MaxStale": "00:00:30"},
            {"Type": "Consul", "Source": "consul-3", "Service": "pay", "Stale": false}
        ]
    }}}"#,
    );
}

#[cfg(feature = "kubernetes")]
#[test]
fn kubernetes_sources_round_trip() {
    assert_round_trips(
        r#"{"Clusters": {"web": {"Discovery": [
            {"Type": "kubernetes", "Service": "web", "Namespace": "shop", "PortName": "http",
             "Scheme": "HTTPS", "Context": "prod", "Resync": "00:02:00", "IdleTimeout": "00:01:00",
             "LocalZone": "eu-west-1a"},
            {"Type": "Kubernetes", "Source": "k2", "Service": "api"}
        ]}}}"#,
    );
}

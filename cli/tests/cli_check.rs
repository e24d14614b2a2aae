//! `healthpick check FILE [--strict] [--json]`: exit statuses, human and JSON output.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

/// The workspace root, where the fixtures and examples live: the binary runs there, so that the
/// paths it prints are the ones the tests name.
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

const VALID: &str = "tests/fixtures/cli/valid_appsettings.json";
const INVALID: &str = "tests/fixtures/cli/invalid_many.json";
const BAD_THRESHOLD: &str = "tests/fixtures/cli/bad_threshold.json";
const DISABLED_BAD_PATH: &str = "tests/fixtures/cli/disabled_bad_path.json";
const HEALTH_POLICIES: &str = "tests/fixtures/cli/health_policies.json";
const MALFORMED: &str = "tests/fixtures/cli/malformed.json";

fn healthpick(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_healthpick"))
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("run healthpick")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally, not by a signal")
}

/// Runs `check --json` (plus `extra`) and parses stdout as exactly one JSON value.
fn check_json(file: &str, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["check", "--json"];
    args.extend_from_slice(extra);
    args.push(file);
    let out = healthpick(&args);
    let text = stdout(&out);
    let value: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}):\n{text}"));
    assert!(value.is_object(), "not an object: {value}");
    (code(&out), value)
}

fn paths(list: &Value) -> Vec<&str> {
    list.as_array()
        .expect("diagnostics array")
        .iter()
        .map(|d| d["path"].as_str().expect("path is a string"))
        .collect()
}

fn scratch_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, bytes).expect("write scratch file");
    path
}

// ---------------------------------------------------------------------------------------------
// help and usage

#[test]
fn help_describes_the_tool_and_shows_an_example() {
    let out = healthpick(&["--help"]);
    assert_eq!(code(&out), 0);
    let text = stdout(&out);
    assert!(text.contains("Validate, watch and simulate YARP"), "{text}");
    assert!(text.contains("check"), "{text}");
    assert!(text.contains("healthpick check appsettings.json"), "{text}");
}

#[test]
fn check_help_documents_flags_outputs_exit_statuses_and_examples() {
    let out = healthpick(&["check", "--help"]);
    assert_eq!(code(&out), 0);
    let text = stdout(&out);
    for needle in [
        "<FILE>",
        "--strict",
        "Treat warnings as errors",
        "--json",
        "configuration is valid",
        "Exit status:",
        "2  usage error",
        "Examples:",
        "healthpick check --json appsettings.json",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn missing_file_is_a_usage_error() {
    let out = healthpick(&["check"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("<FILE>"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let out = healthpick(&["check", "--bogus", VALID]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--bogus"), "{}", stderr(&out));
}

#[test]
fn missing_subcommand_is_a_usage_error() {
    assert_eq!(code(&healthpick(&[])), 2);
    assert_eq!(code(&healthpick(&["validate", VALID])), 2);
}

// ---------------------------------------------------------------------------------------------
// files that cannot be read

#[test]
fn nonexistent_file_exits_1_naming_the_file() {
    let out = healthpick(&["check", "no/such/appsettings.json"]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("no/such/appsettings.json"), "{err}");
    assert!(err.contains("cannot read"), "{err}");
    assert!(out.stdout.is_empty(), "human mode prints nothing on stdout");
}

#[test]
fn nonexistent_file_with_json_still_prints_one_invalid_object() {
    let (status, v) = check_json("no/such/appsettings.json", &[]);
    assert_eq!(status, 1);
    assert_eq!(v["valid"], false);
    assert_eq!(v["clusters"], serde_json::json!({}));
    let message = v["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("no/such/appsettings.json"), "{message}");
}

#[test]
fn a_directory_is_not_a_readable_file() {
    let out = healthpick(&["check", "tests/fixtures/cli"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("tests/fixtures/cli"));
}

#[test]
fn non_utf8_file_exits_1_naming_the_file() {
    let path = scratch_file(
        "cli_check_latin1.json",
        b"{\"Clusters\": {\"caf\xe9\": {}}}",
    );
    let out = healthpick(&["check", path.to_str().unwrap()]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("cli_check_latin1.json"), "{err}");
    assert!(err.contains("UTF-8"), "{err}");
}

#[test]
fn utf8_byte_order_mark_is_accepted() {
    // Visual Studio saves appsettings.json with a BOM; .NET reads it.
    let mut bytes = b"\xef\xbb\xbf".to_vec();
    bytes.extend_from_slice(&std::fs::read(std::path::Path::new(ROOT).join(VALID)).unwrap());
    let path = scratch_file("cli_check_bom.json", &bytes);
    let out = healthpick(&["check", path.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

#[test]
fn malformed_json_exits_1_with_line_and_column() {
    let out = healthpick(&["check", MALFORMED]);
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(format!("{MALFORMED}: configuration is INVALID (1 error)").as_str())
    );
    let error = lines.next().unwrap();
    assert!(
        error.starts_with("error: malformed JSON at line "),
        "{error}"
    );
    assert!(error.contains(" column "), "{error}");

    let (status, v) = check_json(MALFORMED, &[]);
    assert_eq!(status, 1);
    assert_eq!(v["valid"], false);
    assert_eq!(v["clusters"], serde_json::json!({}));
    assert!(v["errors"][0]["message"].as_str().unwrap().contains("line"));
}

#[test]
fn odd_documents_never_crash() {
    let cases: &[(&str, &[u8])] = &[
        ("empty", b""),
        ("null", b"null"),
        ("string", b"\"ReverseProxy\""),
        ("deep", &[b'['; 100_000]),
        ("clusters_value", b"{\"Clusters\": 42}"),
        (
            "huge_numbers",
            br#"{"Clusters": {"c": {
                "HealthCheck": {"Active": {"Enabled": true, "Interval": "10675199.02:48:05.4775807"},
                                "Passive": {"Enabled": true, "ReactivationPeriod": "10675199.00:00:00"}},
                "Metadata": {"ConsecutiveFailuresHealthPolicy.Threshold": "1e999",
                             "TransportFailureRateHealthPolicy.RateLimit": "NaN"},
                "Destinations": {"d": {"Address": "http://[::1]:99999/", "Priority": "99999999999"},
                                 "e": {"Address": "http://h/", "Health": "   "},
                                 "f": null, "g": 7}}}}"#,
        ),
    ];
    for (name, bytes) in cases {
        let path = scratch_file(&format!("cli_check_odd_{name}.json"), bytes);
        let file = path.to_str().unwrap();
        let out = healthpick(&["check", file]);
        assert!(matches!(code(&out), 0 | 1), "{name}: {out:?}");
        let (status, v) = check_json(file, &[]);
        assert!(matches!(status, 0 | 1), "{name}");
        assert_eq!(v["valid"], status == 0, "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// a valid realistic file

#[test]
fn valid_appsettings_passes_with_counts() {
    let out = healthpick(&["check", VALID]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "{VALID}: configuration is valid (4 clusters, 6 destinations)\n\
             warning: {MAX_CONNECTIONS_PATH}: {MAX_CONNECTIONS_NOT_APPLIED}\n"
        )
    );
    assert!(out.stderr.is_empty());
    // The one warning: YARP applies MaxConnectionsPerServer, healthpick does not. Strict mode
    // makes it an error.
    let strict = healthpick(&["check", "--strict", VALID]);
    assert_eq!(code(&strict), 1);
    assert_eq!(
        stdout(&strict),
        format!(
            "{VALID}: configuration is INVALID (1 error)\n\
             error: {MAX_CONNECTIONS_PATH}: {MAX_CONNECTIONS_NOT_APPLIED}\n"
        )
    );
}

const MAX_CONNECTIONS_PATH: &str =
    "ReverseProxy:Clusters:orders:HttpClient:MaxConnectionsPerServer";
const MAX_CONNECTIONS_NOT_APPLIED: &str = "cluster `orders`: MaxConnectionsPerServer is a YARP setting that healthpick does not apply: connections are pooled by reqwest, with no per-server limit";

#[test]
fn json_resolves_every_default_of_the_valid_file() {
    let (status, v) = check_json(VALID, &[]);
    assert_eq!(status, 0);
    assert_eq!(v["valid"], true);
    assert_eq!(v["errors"], serde_json::json!([]));
    assert_eq!(
        v["warnings"],
        serde_json::json!([{"path": MAX_CONNECTIONS_PATH, "message": MAX_CONNECTIONS_NOT_APPLIED}])
    );
    let clusters = v["clusters"].as_object().unwrap();
    assert_eq!(clusters.len(), 4);

    // orders: names written in lower case come back in their registered spelling; Interval
    // unset; metadata keys in any case; Threshold " 5 " trimmed.
    let orders = &clusters["orders"];
    assert_eq!(orders["loadBalancingPolicy"], "RoundRobin");
    assert_eq!(orders["availableDestinationsPolicy"], "HealthyAndUnknown");
    let active = &orders["active"];
    assert_eq!(active["enabled"], true, "\"Enabled\": \"true\" is on");
    assert_eq!(active["intervalMs"], 15000);
    assert_eq!(active["timeoutMs"], 5000);
    assert_eq!(active["policy"], "ConsecutiveFailures");
    assert_eq!(active["path"], "/api/health/");
    assert_eq!(active["query"], "?key=value");
    assert_eq!(active["threshold"].as_f64(), Some(5.0));
    let passive = &orders["passive"];
    assert_eq!(passive["enabled"], true);
    assert_eq!(passive["policy"], "TransportFailureRate");
    assert_eq!(passive["reactivationPeriodMs"], 120000);
    assert_eq!(passive["effectiveReactivationMs"], 120000);
    assert_eq!(passive["rateLimit"].as_f64(), Some(0.5));
    assert_eq!(
        orders["sources"],
        serde_json::json!([]),
        "no discovery sources"
    );
    assert_eq!(orders["localityTiers"], Value::Null);
    // YARP's SessionAffinity applies, its defaults filled in.
    assert_eq!(
        orders["sessionAffinity"],
        serde_json::json!({
            "policy": "Cookie", "failurePolicy": "Redistribute",
            "affinityKeyName": ".Yarp.Affinity", "keyFrom": "cookie", "balanceFactor": 1.25
        })
    );
    let dests = orders["destinations"].as_object().unwrap();
    assert_eq!(dests.len(), 3);
    assert_eq!(
        dests["orders-eu-1"],
        serde_json::json!({
            "address": "https://localhost:10000/", "health": null, "host": null, "priority": 0,
            "weight": 1.0, "probeUri": "https://localhost:10000/api/health/?key=value",
            "metadata": {}
        })
    );
    assert_eq!(dests["orders-eu-2"]["host"], "orders.internal");
    // Ids keep the file's spelling.
    assert_eq!(dests["Orders-US-1"]["priority"], 1);
    assert_eq!(
        dests["Orders-US-1"]["probeUri"],
        "https://localhost:11000/api/health/?key=value"
    );

    // inventory: probes go to Health, whose base path is kept.
    let inventory = &clusters["inventory"];
    assert_eq!(inventory["active"]["intervalMs"], 30000);
    assert_eq!(inventory["active"]["timeoutMs"], 10000);
    assert_eq!(inventory["active"]["threshold"].as_f64(), Some(2.0));
    let inv1 = &inventory["destinations"]["inventory-1"];
    assert_eq!(inv1["address"], "https://localhost:20001/");
    assert_eq!(inv1["health"], "https://localhost:20000/api");
    assert_eq!(inv1["probeUri"], "https://localhost:20000/api/health/");

    // search: passive only, no ReactivationPeriod.
    let search = &clusters["search"]["passive"];
    assert_eq!(search["enabled"], true, "\"Enabled\": \"True\" is on");
    assert_eq!(search["reactivationPeriodMs"], Value::Null);
    assert_eq!(search["effectiveReactivationMs"], 60000);
    assert_eq!(search["rateLimit"].as_f64(), Some(0.3));

    // catalog: nothing set at all.
    let catalog = &clusters["catalog"];
    assert_eq!(catalog["loadBalancingPolicy"], "PowerOfTwoChoices");
    assert_eq!(catalog["availableDestinationsPolicy"], "HealthyOrPanic");
    assert_eq!(
        catalog["active"],
        serde_json::json!({
            "enabled": false, "intervalMs": 15000, "timeoutMs": 10000,
            "policy": "ConsecutiveFailures", "path": null, "query": null, "threshold": 2.0
        })
    );
    assert_eq!(
        catalog["passive"],
        serde_json::json!({
            "enabled": false, "policy": "TransportFailureRate", "reactivationPeriodMs": null,
            "effectiveReactivationMs": 60000, "rateLimit": 0.3
        })
    );
    assert_eq!(
        catalog["destinations"]["catalog-1"]["probeUri"],
        "https://localhost/"
    );
    // The traffic-shaping settings in force without any section.
    assert_eq!(catalog["sessionAffinity"], Value::Null);
    assert_eq!(
        catalog["loadSignals"],
        serde_json::json!({
            "decayTimeMs": 10000, "defaultRttMs": 30,
            "loadReports": { "enabled": true, "blackoutMs": 10000, "expirationMs": 180000 }
        })
    );
    assert_eq!(
        catalog["tierSpill"],
        serde_json::json!({ "mode": "Strict", "upperMark": 1.5, "lowerMark": 1.2, "dwellMs": 5000 })
    );
    assert_eq!(catalog["slowStart"], Value::Null);
}

/// `check --json` shows each traffic-shaping section resolved: names in their documented
/// spelling, every value in force with the defaults the file leaves out.
#[test]
fn json_resolves_the_traffic_shaping_sections() {
    let path = scratch_file(
        "cli_check_traffic.json",
        br#"{ "Clusters": { "carts": {
            "SessionAffinity": { "enabled": "true", "policy": "customheader", "AffinityKeyName": "X-Cart",
                                 "FailurePolicy": "return503error", "BalanceFactor": 2 },
            "LoadSignals": { "DefaultRtt": "00:00:00.050", "LoadReports": { "Enabled": false } },
            "TierSpill": { "Mode": "load", "UpperMark": 2 },
            "SlowStart": { "Window": "00:00:30" },
            "Destinations": { "a": { "Address": "http://10.0.0.1/" } } } } }"#,
    );
    let (status, v) = check_json(path.to_str().unwrap(), &["--strict"]);
    assert_eq!(status, 0, "{v:#}");
    let carts = &v["clusters"]["carts"];
    assert_eq!(
        carts["sessionAffinity"],
        serde_json::json!({
            "policy": "CustomHeader", "failurePolicy": "Return503Error",
            "affinityKeyName": "X-Cart", "keyFrom": "header", "balanceFactor": 2.0
        })
    );
    assert_eq!(
        carts["loadSignals"],
        serde_json::json!({
            "decayTimeMs": 10000, "defaultRttMs": 50,
            "loadReports": { "enabled": false, "blackoutMs": 10000, "expirationMs": 180000 }
        })
    );
    assert_eq!(
        carts["tierSpill"],
        serde_json::json!({ "mode": "Load", "upperMark": 2.0, "lowerMark": 1.2, "dwellMs": 5000 })
    );
    assert_eq!(
        carts["slowStart"],
        serde_json::json!({ "windowMs": 30000, "aggression": 1.0, "minWeightPercent": 10.0 })
    );

    // A bad value is an error naming cluster, key path and value, in both outputs.
    let bad = scratch_file(
        "cli_check_traffic_bad.json",
        br#"{ "Clusters": { "carts": { "TierSpill": { "LowerMark": 0.5 },
            "Destinations": { "a": { "Address": "http://10.0.0.1/" } } } } }"#,
    );
    let (status, v) = check_json(bad.to_str().unwrap(), &[]);
    assert_eq!(status, 1);
    assert_eq!(paths(&v["errors"]), ["Clusters:carts:TierSpill:LowerMark"]);
    let message = v["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("cluster `carts`: LowerMark `0.5`"),
        "{message}"
    );
}

#[test]
fn json_lists_clusters_and_destinations_in_document_order() {
    let out = healthpick(&["check", "--json", VALID]);
    let text = stdout(&out);
    let at = |key: &str| {
        text.find(&format!("\"{key}\":"))
            .unwrap_or_else(|| panic!("{key} missing"))
    };
    assert!(at("orders") < at("inventory"));
    assert!(at("inventory") < at("search"));
    assert!(at("search") < at("catalog"));
    assert!(at("orders-eu-1") < at("orders-eu-2"));
    assert!(at("orders-eu-2") < at("Orders-US-1"));
}

#[test]
fn json_uses_the_global_health_policy_options() {
    let (status, v) = check_json(HEALTH_POLICIES, &[]);
    assert_eq!(status, 0);
    let ledger = &v["clusters"]["ledger"];
    assert_eq!(ledger["active"]["intervalMs"], 20000);
    assert_eq!(ledger["active"]["timeoutMs"], 3000);
    assert_eq!(ledger["active"]["threshold"].as_f64(), Some(4.0));
    assert_eq!(ledger["passive"]["rateLimit"].as_f64(), Some(0.25));
    // An explicit period longer than the detection window wins.
    assert_eq!(ledger["passive"]["reactivationPeriodMs"], 600000);
    assert_eq!(ledger["passive"]["effectiveReactivationMs"], 600000);
    // The default period (90 s) is shorter than the detection window (5 min): the window wins.
    let audit = &v["clusters"]["audit"]["passive"];
    assert_eq!(audit["reactivationPeriodMs"], Value::Null);
    assert_eq!(audit["effectiveReactivationMs"], 300000);
}

// ---------------------------------------------------------------------------------------------
// invalid files

const INVALID_PATHS: [&str; 4] = [
    "ReverseProxy:Clusters:billing:Destinations:billing-1:Address",
    "ReverseProxy:Clusters:billing:LoadBalancingPolicy",
    "ReverseProxy:Clusters:billing:HealthCheck:Active:Interval",
    "ReverseProxy:Clusters:billing:HealthCheck:Active:Path",
];

#[test]
fn invalid_file_lists_every_problem() {
    let out = healthpick(&["check", INVALID]);
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(format!("{INVALID}: configuration is INVALID (4 errors)").as_str())
    );
    let errors: Vec<&str> = lines.collect();
    assert_eq!(errors.len(), 4, "{text}");
    for (path, value) in INVALID_PATHS.iter().zip([
        "`localhost:10010`",
        "`Fastest`",
        "`ten seconds`",
        "`health`",
    ]) {
        let prefix = format!("error: {path}: ");
        assert!(
            errors
                .iter()
                .any(|l| l.starts_with(&prefix) && l.contains(value)),
            "no {prefix}...{value} in:\n{text}"
        );
    }
}

#[test]
fn invalid_file_json_lists_every_problem_and_the_config_as_read() {
    let (status, v) = check_json(INVALID, &[]);
    assert_eq!(status, 1);
    assert_eq!(v["valid"], false);
    let mut got = paths(&v["errors"]);
    got.sort_unstable();
    let mut want = INVALID_PATHS.to_vec();
    want.sort_unstable();
    assert_eq!(got, want);
    for e in v["errors"].as_array().unwrap() {
        assert!(e["message"].as_str().unwrap().contains("cluster `billing`"));
    }

    let billing = &v["clusters"]["billing"];
    // An unknown name is shown as written; an unreadable Interval falls back to the default.
    assert_eq!(billing["loadBalancingPolicy"], "Fastest");
    assert_eq!(billing["active"]["intervalMs"], 15000);
    assert_eq!(billing["active"]["path"], "health");
    let dests = &billing["destinations"];
    assert_eq!(dests["billing-1"]["address"], "localhost:10010");
    assert_eq!(dests["billing-1"]["probeUri"], Value::Null);
    // A good address, but the probe path is bad.
    assert_eq!(dests["billing-2"]["probeUri"], Value::Null);
}

// ---------------------------------------------------------------------------------------------
// warnings and --strict

const THRESHOLD_PATH: &str =
    "ReverseProxy:Clusters:search:Metadata:ConsecutiveFailuresHealthPolicy.Threshold";

#[test]
fn unparsable_threshold_is_only_a_warning() {
    let out = healthpick(&["check", BAD_THRESHOLD]);
    assert_eq!(code(&out), 0);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        format!("{BAD_THRESHOLD}: configuration is valid (1 cluster, 1 destination)")
    );
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[1].starts_with(&format!("warning: {THRESHOLD_PATH}: ")),
        "{text}"
    );
    assert!(lines[1].contains("`abc`"), "{text}");

    let (status, v) = check_json(BAD_THRESHOLD, &[]);
    assert_eq!(status, 0);
    assert_eq!(v["valid"], true);
    assert_eq!(paths(&v["warnings"]), [THRESHOLD_PATH]);
    assert_eq!(v["errors"], serde_json::json!([]));
    // The default threshold is in force.
    assert_eq!(
        v["clusters"]["search"]["active"]["threshold"].as_f64(),
        Some(2.0)
    );
}

#[test]
fn strict_turns_the_threshold_warning_into_an_error() {
    let out = healthpick(&["check", "--strict", BAD_THRESHOLD]);
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        format!("{BAD_THRESHOLD}: configuration is INVALID (1 error)")
    );
    assert!(
        lines[1].starts_with(&format!("error: {THRESHOLD_PATH}: ")),
        "{text}"
    );
    assert!(!text.contains("warning:"), "{text}");

    let (status, v) = check_json(BAD_THRESHOLD, &["--strict"]);
    assert_eq!(status, 1);
    assert_eq!(v["valid"], false);
    assert_eq!(paths(&v["errors"]), [THRESHOLD_PATH]);
    assert_eq!(v["warnings"], serde_json::json!([]));
}

#[test]
fn bad_path_of_a_disabled_check_is_a_warning_and_has_no_probe_uri() {
    let (status, v) = check_json(DISABLED_BAD_PATH, &[]);
    assert_eq!(status, 0);
    assert_eq!(
        paths(&v["warnings"]),
        ["ReverseProxy:Clusters:reports:HealthCheck:Active:Path"]
    );
    assert_eq!(
        v["clusters"]["reports"]["destinations"]["reports-1"]["probeUri"],
        Value::Null
    );
    assert_eq!(
        code(&healthpick(&["check", "--strict", DISABLED_BAD_PATH])),
        1
    );
}

#[test]
fn blank_health_is_an_error_and_has_no_probe_uri() {
    let path = scratch_file(
        "cli_check_blank_health.json",
        br#"{"Clusters": {"c": {
            "HealthCheck": {"Active": {"Enabled": true, "Path": "/ready"}},
            "Destinations": {"d": {"Address": "http://localhost:8080/", "Health": "   "}}}}}"#,
    );
    let (status, v) = check_json(path.to_str().unwrap(), &[]);
    assert_eq!(status, 1);
    assert_eq!(paths(&v["errors"]), ["Clusters:c:Destinations:d:Health"]);
    assert_eq!(
        v["clusters"]["c"]["destinations"]["d"]["probeUri"],
        Value::Null
    );
}

#[test]
fn every_missing_probe_uri_is_explained_by_a_diagnostic() {
    for file in [
        VALID,
        INVALID,
        BAD_THRESHOLD,
        DISABLED_BAD_PATH,
        HEALTH_POLICIES,
    ] {
        let (_, v) = check_json(file, &[]);
        let mut diagnostics = paths(&v["errors"]);
        diagnostics.extend(paths(&v["warnings"]));
        for (cluster_id, cluster) in v["clusters"].as_object().unwrap() {
            let prefix = format!("ReverseProxy:Clusters:{cluster_id}:");
            for (dest_id, dest) in cluster["destinations"].as_object().unwrap() {
                if dest["probeUri"].is_null() {
                    assert!(
                        diagnostics.iter().any(|p| p.starts_with(&prefix)),
                        "{file}: {cluster_id}/{dest_id} has no probe URI and no diagnostic"
                    );
                }
            }
        }
    }
}

/// `check --json` shows the passive policies a cluster runs (a list, in registered spelling),
/// the OutlierDetection settings in force and healthpick's ranking and recovery switches; a bad
/// OutlierDetection value is a warning naming the key.
#[test]
fn json_shows_outlier_detection_and_the_resilience_switches() {
    let path = scratch_file(
        "cli_check_outliers.json",
        br#"{ "Clusters": {
            "orders": {
                "HealthCheck": { "Passive": { "Enabled": true, "Policy": "transportfailurerate, outlierdetection" } },
                "Metadata": { "OutlierDetection.Consecutive5xx": "3", "OutlierDetection.BaseEjectionTime": "00:00:10",
                              "OutlierDetection.MaxEjectionPercent": "many", "HealthCheck.SuspectRanking": "false" },
                "Destinations": { "a": { "Address": "http://10.0.0.1/" } } },
            "plain": { "Destinations": { "a": { "Address": "http://10.0.0.2/" } } } } }"#,
    );
    let (status, v) = check_json(path.to_str().unwrap(), &[]);
    assert_eq!(status, 0);
    assert_eq!(v["warnings"].as_array().unwrap().len(), 1, "{v:#}");
    assert_eq!(
        v["warnings"][0]["path"],
        "Clusters:orders:Metadata:OutlierDetection.MaxEjectionPercent"
    );
    let orders = &v["clusters"]["orders"];
    assert_eq!(
        orders["passive"]["policy"],
        "TransportFailureRate, OutlierDetection"
    );
    assert_eq!(orders["suspectRanking"], false);
    assert_eq!(orders["resetPassiveOnRecovery"], true);
    assert_eq!(
        orders["outlierDetection"],
        serde_json::json!({
            "consecutive5xx": 3, "consecutiveGatewayFailure": 5, "baseEjectionTimeMs": 10000,
            "maxEjectionTimeMs": 300000, "maxEjectionPercent": 10.0, "intervalMs": 10000
        })
    );
    let plain = &v["clusters"]["plain"];
    assert_eq!(plain["suspectRanking"], true);
    assert_eq!(plain["outlierDetection"]["consecutive5xx"], 5);
    assert_eq!(plain["outlierDetection"]["baseEjectionTimeMs"], 30000);
}

// ---------------------------------------------------------------------------------------------
// --print-config: the configuration as a YARP document that loads again

#[test]
fn print_config_writes_yarp_json_that_loads_again_to_the_same_config() {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(std::path::Path::new(ROOT).join("tests/fixtures/yarp"))
            .expect("fixtures")
            .map(|e| e.expect("entry").path())
            .collect();
    files.push(std::path::Path::new(ROOT).join(VALID));
    files.push(std::path::Path::new(ROOT).join(HEALTH_POLICIES));
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    let registry = healthpick::PolicyRegistry::default();
    for (i, file) in files.iter().enumerate() {
        let name = file.display().to_string();
        let out = healthpick(&["check", "--print-config", &name]);
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        let printed = stdout(&out);
        let original = healthpick::Config::from_json(&std::fs::read_to_string(file).expect("read"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let loaded = healthpick::Config::from_json(&printed)
            .unwrap_or_else(|e| panic!("{name}: the printed config does not load: {e}\n{printed}"));
        assert_eq!(loaded, registry.canonical(&original), "{name}\n{printed}");

        // `healthpick check` accepts it, and printing it again gives the same bytes.
        let copy = scratch_file(&format!("print_config_{i}.json"), printed.as_bytes());
        let copy = copy.to_str().expect("UTF-8 path");
        let out = healthpick(&["check", copy]);
        assert_eq!(code(&out), 0, "{name}: {}", stdout(&out));
        let out = healthpick(&["check", "--print-config", copy]);
        assert_eq!(stdout(&out), printed, "{name}: a fixed point");
    }
}

#[test]
fn print_config_of_an_invalid_file_prints_nothing_on_stdout_and_the_problems_on_stderr() {
    let out = healthpick(&["check", "--print-config", INVALID]);
    assert_eq!(code(&out), 1);
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    assert!(err.contains("configuration is INVALID"), "{err}");
    assert!(
        err.contains("ReverseProxy:Clusters:billing:LoadBalancingPolicy"),
        "{err}"
    );
    // Warnings go to stderr too; stdout stays one JSON document.
    let out = healthpick(&["check", "--print-config", BAD_THRESHOLD]);
    assert_eq!(code(&out), 0);
    assert!(stderr(&out).contains("warning: "), "{}", stderr(&out));
    serde_json::from_str::<Value>(&stdout(&out)).expect("stdout is JSON");
}

#[test]
fn print_config_is_documented_and_excludes_json() {
    let out = healthpick(&["check", "--help"]);
    let text = stdout(&out);
    assert!(text.contains("--print-config"), "{text}");
    assert!(text.contains("loads again"), "{text}");
    let out = healthpick(&["check", "--print-config", "--json", VALID]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
}

// ---------------------------------------------------------------------------------------------
// mistakes YARP refuses or that silently change behaviour

const ONE_CLUSTER: &str = r#"{ "ReverseProxy": { "Clusters": { "payments": {
  "HealthCheck": { "Active": { "Enabled": true, "Interval": "00:00:15", "Timeout": "00:00:05" } },
  "HttpRequest": { "Version": "VERSION" },
  "HttpClient": { "MaxConnectionsPerServer": MAX },
  "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/", "Priority": 1 } } } } } }"#;

fn one_cluster(name: &str, version: &str, max: &str) -> PathBuf {
    let text = ONE_CLUSTER.replace("VERSION", version).replace("MAX", max);
    scratch_file(name, text.as_bytes())
}

#[test]
fn versions_yarp_refuses_and_a_zero_connection_limit_are_errors() {
    for (i, version) in ["1.9", "2.5", "3.1", "20"].iter().enumerate() {
        let file = one_cluster(&format!("version-{i}.json"), version, "10");
        let out = healthpick(&["check", file.to_str().unwrap()]);
        assert_eq!(code(&out), 1, "{version}: {}", stdout(&out));
        let read_as = if *version == "20" {
            " (read as 20.0)"
        } else {
            ""
        };
        assert!(
            stdout(&out).contains(&format!(
                "error: ReverseProxy:Clusters:payments:HttpRequest:Version: cluster `payments`: Version `{version}`{read_as} is not any of supported HTTP versions (1.0, 1.1, 2 and 3)\n"
            )),
            "{}",
            stdout(&out)
        );
    }
    let file = one_cluster("max-zero.json", "2", "0");
    let out = healthpick(&["check", file.to_str().unwrap()]);
    assert_eq!(code(&out), 1);
    assert_eq!(
        stdout(&out),
        format!(
            "{}: configuration is INVALID (1 error)\n\
             error: ReverseProxy:Clusters:payments:HttpClient:MaxConnectionsPerServer: cluster `payments`: MaxConnectionsPerServer `0` must be positive (a connection count: 1, 2, ...)\n",
            file.display()
        )
    );
}

#[test]
fn a_misspelt_key_is_a_did_you_mean_warning_and_fails_strict() {
    let text = ONE_CLUSTER
        .replace("\"Priority\"", "\"Priorty\"")
        .replace("\"HttpClient\": { \"MaxConnectionsPerServer\": MAX },", "")
        .replace("VERSION", "2");
    let file = scratch_file("misspelt.json", text.as_bytes());
    let name = file.to_str().unwrap();
    let line = "ReverseProxy:Clusters:payments:Destinations:eu-1:Priorty: cluster `payments`: destination `eu-1`: unknown key `Priorty`; did you mean `Priority`?";
    let out = healthpick(&["check", name]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        format!("{name}: configuration is valid (1 cluster, 1 destination)\nwarning: {line}\n")
    );
    let strict = healthpick(&["check", "--strict", name]);
    assert_eq!(code(&strict), 1);
    assert_eq!(
        stdout(&strict),
        format!("{name}: configuration is INVALID (1 error)\nerror: {line}\n")
    );
    let (status, v) = check_json(name, &["--strict"]);
    assert_eq!(status, 1);
    assert_eq!(
        paths(&v["errors"]),
        ["ReverseProxy:Clusters:payments:Destinations:eu-1:Priorty"]
    );
}

#[test]
fn a_timeout_of_ten_minutes_against_a_15_second_interval_is_a_warning() {
    let text = ONE_CLUSTER
        .replace("\"00:00:05\"", "\"00:10\"")
        .replace("\"HttpClient\": { \"MaxConnectionsPerServer\": MAX },", "")
        .replace("VERSION", "2");
    let file = scratch_file("timeout-minutes.json", text.as_bytes());
    let out = healthpick(&["check", file.to_str().unwrap()]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains(
        "warning: ReverseProxy:Clusters:payments:HealthCheck:Active:Timeout: cluster `payments`: Timeout (10m) is not shorter than Interval (15s)"
    ), "{}", stdout(&out));
}

#[test]
fn section_picks_another_configuration_section() {
    let text = r#"{
      "ReverseProxy": { "Clusters": { "public": { "Destinations": { "p": { "Address": "http://10.0.0.9/" } } } } },
      "ReverseProxy2": { "Clusters": {
        "payments": { "Destinations": { "eu-1": { "Address": "http://10.0.0.1/" }, "eu-2": { "Address": "http://10.0.0.2/" } } } } }
    }"#;
    let file = scratch_file("two-sections.json", text.as_bytes());
    let name = file.to_str().unwrap();
    let out = healthpick(&["check", "--section", "ReverseProxy2", name]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        format!("{name}: configuration is valid (1 cluster, 2 destinations)\n")
    );
    let (_, v) = check_json(name, &["--section", "ReverseProxy2"]);
    assert_eq!(v["section"], "ReverseProxy2:Clusters");
    assert_eq!(
        v["clusters"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["payments"]
    );
    // Without it, ReverseProxy as before.
    let (_, v) = check_json(name, &[]);
    assert_eq!(v["section"], "ReverseProxy:Clusters");
    assert!(v["clusters"]["public"].is_object());

    let out = healthpick(&["check", "--section", "ReverseProxy3", name]);
    assert_eq!(code(&out), 1);
    assert_eq!(
        stdout(&out),
        format!(
            "{name}: configuration is INVALID (1 error)\n\
             error: ReverseProxy3: no section `ReverseProxy3` in the document (its keys: `ReverseProxy`, `ReverseProxy2`); did you mean `ReverseProxy`?\n"
        )
    );

    // --print-config writes the section back, and it loads again with --section.
    let out = healthpick(&[
        "check",
        "--print-config",
        "--section",
        "ReverseProxy2",
        name,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let printed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        printed["ReverseProxy2"]["Clusters"]["payments"].is_object(),
        "{printed}"
    );
    let again = scratch_file("two-sections-printed.json", stdout(&out).as_bytes());
    let out2 = healthpick(&[
        "check",
        "--print-config",
        "--section",
        "ReverseProxy2",
        again.to_str().unwrap(),
    ]);
    assert_eq!(stdout(&out2), stdout(&out));
}

#[test]
fn json_includes_http_client_http_request_health_policies_and_metadata() {
    let (status, v) = check_json(VALID, &[]);
    assert_eq!(status, 0);
    let orders = &v["clusters"]["orders"];
    assert_eq!(
        orders["httpClient"],
        serde_json::json!({ "dangerousAcceptAnyServerCertificate": false, "maxConnectionsPerServer": 1024 })
    );
    assert_eq!(
        orders["httpRequest"],
        serde_json::json!({ "version": "2", "probeVersion": "2", "activityTimeoutMs": 60000 })
    );
    assert_eq!(
        orders["metadata"],
        serde_json::json!({
            "consecutiveFailuresHealthPolicy.threshold": " 5 ",
            "TRANSPORTFAILURERATEHEALTHPOLICY.RATELIMIT": "0.5"
        })
    );
    // Nothing set: the defaults.
    let catalog = &v["clusters"]["catalog"];
    assert_eq!(
        catalog["httpClient"],
        serde_json::json!({ "dangerousAcceptAnyServerCertificate": false, "maxConnectionsPerServer": null })
    );
    assert_eq!(
        catalog["httpRequest"],
        serde_json::json!({ "version": null, "probeVersion": "1.1", "activityTimeoutMs": null })
    );
    assert_eq!(catalog["metadata"], serde_json::json!({}));
    assert_eq!(
        v["healthPolicies"],
        serde_json::json!({
            "fromFile": false, "detectionWindowSizeMs": 60000, "minimalTotalCountThreshold": 10,
            "defaultFailureRateLimit": 0.3, "consecutiveFailuresThreshold": 2.0,
            "defaultIntervalMs": 15000, "defaultTimeoutMs": 10000,
            "defaultReactivationPeriodMs": 60000
        })
    );
    let (_, v) = check_json(HEALTH_POLICIES, &[]);
    assert_eq!(
        v["healthPolicies"],
        serde_json::json!({
            "fromFile": true, "detectionWindowSizeMs": 300000, "minimalTotalCountThreshold": 10,
            "defaultFailureRateLimit": 0.25, "consecutiveFailuresThreshold": 4.0,
            "defaultIntervalMs": 20000, "defaultTimeoutMs": 3000,
            "defaultReactivationPeriodMs": 90000
        })
    );
    // Destination metadata and weights.
    let text = r#"{ "Clusters": { "c": { "Destinations": {
      "a": { "Address": "http://10.0.0.1/", "Metadata": { "Weight": "3", "Zone": "eu-1a" } },
      "b": { "Address": "http://10.0.0.2/", "Priority": 2 } } } } }"#;
    let file = scratch_file("weights.json", text.as_bytes());
    let (_, v) = check_json(file.to_str().unwrap(), &[]);
    let a = &v["clusters"]["c"]["destinations"]["a"];
    assert_eq!(a["weight"].as_f64(), Some(3.0));
    assert_eq!(
        a["metadata"],
        serde_json::json!({ "Weight": "3", "Zone": "eu-1a" })
    );
    let b = &v["clusters"]["c"]["destinations"]["b"];
    assert_eq!(
        (b["priority"].as_u64(), b["weight"].as_f64()),
        (Some(2), Some(1.0))
    );
    assert_eq!(v["section"], "Clusters");
}

#[test]
fn check_help_documents_section_and_the_new_warnings() {
    let out = healthpick(&["check", "--help"]);
    let text = stdout(&out);
    for part in ["--section <NAME>", "did you mean", "Timeout", "does not"] {
        assert!(text.contains(part), "{part}: {text}");
    }
}

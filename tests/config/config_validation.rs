//! One test per validation rule: each error sits at the .NET key path
//! of the bad setting, and its message names the cluster, the destination (if any), the key and
//! the bad value.

use healthpick::config::{self, CheckReport, Severity};
use healthpick::{Config, Diagnostic, Engine, HealthState, PolicyRegistry, ProbeResult};

// ---------------------------------------------------------------------------------------------
// helpers

fn check(text: &str) -> CheckReport {
    config::check(text, &PolicyRegistry::default(), false)
}

fn check_strict(text: &str) -> CheckReport {
    config::check(text, &PolicyRegistry::default(), true)
}

/// A `ReverseProxy` document with one cluster `payments` whose body is `body`.
fn payments(body: &str) -> String {
    format!(r#"{{ "ReverseProxy": {{ "Clusters": {{ "payments": {{ {body} }} }} }} }}"#)
}

/// `payments` with `active` spliced into `HealthCheck:Active`, plus one valid destination.
fn payments_active(active: &str) -> String {
    payments(&format!(
        r#""HealthCheck": {{ "Active": {{ {active} }} }},
           "Destinations": {{ "eu-1": {{ "Address": "http://10.0.0.1:8080/" }} }}"#
    ))
}

/// `payments` with `passive` spliced into `HealthCheck:Passive`, plus one valid destination.
fn payments_passive(passive: &str) -> String {
    payments(&format!(
        r#""HealthCheck": {{ "Passive": {{ {passive} }} }},
           "Destinations": {{ "eu-1": {{ "Address": "http://10.0.0.1:8080/" }} }}"#
    ))
}

/// `payments` with destination `eu-1` (valid) and `eu-2` whose body is `eu2`.
fn payments_eu2(eu2: &str) -> String {
    payments(&format!(
        r#""Destinations": {{
              "eu-1": {{ "Address": "http://10.0.0.1:8080/" }},
              "eu-2": {{ {eu2} }}
           }}"#
    ))
}

/// The only error of `text`; it must sit at `path`. Also checks that `Config::from_json` and
/// `Engine::from_json` refuse the document with that same error.
fn only_error(text: &str, path: &str) -> Diagnostic {
    let report = check(text);
    assert_eq!(
        report.errors.len(),
        1,
        "expected exactly one error at {path}, got {:#?}",
        report.errors
    );
    let error = report.errors[0].clone();
    assert_eq!(error.path, path);
    assert_eq!(error.severity, Severity::Error);
    let from_json = Config::from_json(text).expect_err("Config::from_json must refuse it");
    assert_eq!(from_json.errors, report.errors);
    let engine = Engine::from_json(text).expect_err("Engine::from_json must refuse it");
    assert_eq!(engine.errors, report.errors);
    error
}

/// Asserts that `message` names every one of `parts` (exact substrings).
fn assert_names(diag: &Diagnostic, parts: &[&str]) {
    for part in parts {
        assert!(
            diag.message.contains(part),
            "message should name {part:?}: {}",
            diag.message
        );
    }
}

fn assert_clean(text: &str) {
    let report = check(text);
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert!(report.is_valid());
}

fn error_paths(report: &CheckReport) -> Vec<&str> {
    report.errors.iter().map(|e| e.path.as_str()).collect()
}

const P: &str = "ReverseProxy:Clusters:payments";

// ---------------------------------------------------------------------------------------------
// Address and Health

#[test]
fn missing_address_is_an_error() {
    for eu2 in [
        r#""Priority": 1"#,
        r#""Address": null"#,
        r#""Address": """#,
        r#""Address": "   ""#,
    ] {
        let e = only_error(
            &payments_eu2(eu2),
            "ReverseProxy:Clusters:payments:Destinations:eu-2:Address",
        );
        assert_names(&e, &["`payments`", "`eu-2`", "Address"]);
    }
}

#[test]
fn non_absolute_address_is_an_error() {
    for bad in [
        "localhost:10010",
        "10.0.0.2:8080",
        "/api/payments",
        "payments-eu-2",
        "ftp://payments-eu-2/",
        "http://",
        "file:///etc/passwd",
    ] {
        let e = only_error(
            &payments_eu2(&format!(r#""Address": "{bad}""#)),
            "ReverseProxy:Clusters:payments:Destinations:eu-2:Address",
        );
        assert_names(
            &e,
            &["`payments`", "`eu-2`", "Address", &format!("`{bad}`")],
        );
    }
}

/// A 50 MB host name must not be accepted (and copied into every request URL): addresses have a
/// length limit, named in the error, and the message does not repeat the whole value.
#[test]
fn addresses_and_host_names_have_a_length_limit_named_in_the_error() {
    let huge_host = "a".repeat(50 << 20);
    let e = only_error(
        &payments_eu2(&format!(r#""Address": "http://{huge_host}/""#)),
        "ReverseProxy:Clusters:payments:Destinations:eu-2:Address",
    );
    assert_names(
        &e,
        &["`payments`", "`eu-2`", "Address", "at most 2048 bytes"],
    );
    assert!(e.message.len() < 400, "{} bytes", e.message.len());

    let long_host = "h".repeat(254);
    let e = only_error(
        &payments_eu2(&format!(r#""Address": "http://{long_host}/""#)),
        "ReverseProxy:Clusters:payments:Destinations:eu-2:Address",
    );
    assert_names(
        &e,
        &["`eu-2`", "host name of 254 bytes", "at most 253 bytes"],
    );
    let e = only_error(
        &payments_eu2(&format!(
            r#""Address": "http://10.0.0.2/", "Health": "http://{long_host}/""#
        )),
        "ReverseProxy:Clusters:payments:Destinations:eu-2:Health",
    );
    assert_names(&e, &["`eu-2`", "Health", "at most 253 bytes"]);

    // At the limits, addresses are fine.
    let host = "h".repeat(253);
    let path = "p".repeat(2048 - "http://10.0.0.2/".len());
    assert_clean(&payments_eu2(&format!(r#""Address": "http://{host}/""#)));
    assert_clean(&payments_eu2(&format!(
        r#""Address": "http://10.0.0.2/{path}""#
    )));
    assert_eq!(healthpick::MAX_ADDRESS_LEN, 2048);
    assert_eq!(healthpick::MAX_HOST_LEN, 253);
}

/// 40,000 bad destinations: every one reported, in document order (without comparing every
/// problem with every destination, which would take seconds).
#[test]
fn forty_thousand_bad_destinations_are_all_reported_in_document_order() {
    let n = 40_000;
    let destinations: Vec<String> = (0..n)
        .map(|i| format!(r#""d{i}": {{ "Address": "not a url {i}", "Priority": -1 }}"#))
        .collect();
    let report = check(&payments(&format!(
        r#""Destinations": {{ {} }}"#,
        destinations.join(",")
    )));
    assert_eq!(report.errors.len(), 2 * n);
    for (i, pair) in report.errors.chunks(2).enumerate() {
        assert_eq!(pair[0].path, format!("{P}:Destinations:d{i}:Address"));
        assert_eq!(pair[1].path, format!("{P}:Destinations:d{i}:Priority"));
    }
}

#[test]
fn bad_health_url_is_an_error() {
    for bad in ["health-host:9000", "/health", "tcp://10.0.0.2:9000"] {
        let e = only_error(
            &payments_eu2(&format!(
                r#""Address": "http://10.0.0.2:8080/", "Health": "{bad}""#
            )),
            "ReverseProxy:Clusters:payments:Destinations:eu-2:Health",
        );
        assert_names(&e, &["`payments`", "`eu-2`", "Health", &format!("`{bad}`")]);
    }
    // A good one is fine.
    assert_clean(&payments_eu2(
        r#""Address": "http://10.0.0.2:8080/", "Health": "https://10.0.0.2:9000/probe/""#,
    ));
}

// ---------------------------------------------------------------------------------------------
// policy names

#[test]
fn unknown_load_balancing_policy_lists_the_known_names() {
    let text = payments(
        r#""LoadBalancingPolicy": "Fastest",
           "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } }"#,
    );
    let e = only_error(&text, "ReverseProxy:Clusters:payments:LoadBalancingPolicy");
    assert_names(
        &e,
        &[
            "`payments`",
            "LoadBalancingPolicy",
            "`Fastest`",
            "PowerOfTwoChoices",
            "RoundRobin",
            "LeastRequests",
            "Random",
            "FirstAlphabetical",
        ],
    );
}

#[test]
fn unknown_available_destinations_policy_lists_the_known_names() {
    // Always checked, even with both checks disabled.
    let text = payments(
        r#""HealthCheck": { "AvailableDestinationsPolicy": "HealthyOnly" },
           "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } }"#,
    );
    let e = only_error(
        &text,
        "ReverseProxy:Clusters:payments:HealthCheck:AvailableDestinationsPolicy",
    );
    assert_names(
        &e,
        &[
            "`payments`",
            "AvailableDestinationsPolicy",
            "`HealthyOnly`",
            "HealthyAndUnknown",
            "HealthyOrPanic",
        ],
    );
}

#[test]
fn unknown_active_policy_is_an_error_only_when_active_checks_are_enabled() {
    let e = only_error(
        &payments_active(r#""Enabled": true, "Policy": "ThreeStrikes""#),
        "ReverseProxy:Clusters:payments:HealthCheck:Active:Policy",
    );
    assert_names(&e, &["`payments`", "`ThreeStrikes`", "ConsecutiveFailures"]);
    assert!(e.message.to_lowercase().contains("policy"), "{}", e.message);
    assert!(e.message.to_lowercase().contains("active"), "{}", e.message);

    for disabled in [r#""Enabled": false, "#, r#""Enabled": "False", "#, ""] {
        let text = payments_active(&format!(r#"{disabled}"Policy": "ThreeStrikes""#));
        assert_clean(&text);
        Engine::from_json(&text).expect("a disabled check is not validated");
    }
}

#[test]
fn unknown_passive_policy_is_an_error_only_when_passive_checks_are_enabled() {
    let e = only_error(
        &payments_passive(r#""Enabled": "true", "Policy": "FiveHundreds""#),
        "ReverseProxy:Clusters:payments:HealthCheck:Passive:Policy",
    );
    assert_names(
        &e,
        &["`payments`", "`FiveHundreds`", "TransportFailureRate"],
    );
    assert!(e.message.to_lowercase().contains("policy"), "{}", e.message);
    assert!(
        e.message.to_lowercase().contains("passive"),
        "{}",
        e.message
    );

    for disabled in [r#""Enabled": false, "#, ""] {
        let text = payments_passive(&format!(r#"{disabled}"Policy": "FiveHundreds""#));
        assert_clean(&text);
        Engine::from_json(&text).expect("a disabled check is not validated");
    }
}

// ---------------------------------------------------------------------------------------------
// TimeSpans

#[test]
fn bad_timespan_is_an_error() {
    for (key, bad) in [
        ("Interval", "24:00:00"),
        ("Timeout", "00:60:00"),
        ("Interval", "00:00:05.12345678"),
        ("Timeout", "five seconds"),
        ("Interval", "1.5"),
    ] {
        let e = only_error(
            &payments_active(&format!(r#""Enabled": true, "{key}": "{bad}""#)),
            &format!("{P}:HealthCheck:Active:{key}"),
        );
        assert_names(&e, &["`payments`", key, &format!("`{bad}`")]);
    }
    let e = only_error(
        &payments_passive(r#""Enabled": true, "ReactivationPeriod": "00:00:60""#),
        &format!("{P}:HealthCheck:Passive:ReactivationPeriod"),
    );
    assert_names(&e, &["`payments`", "ReactivationPeriod", "`00:00:60`"]);
}

#[test]
fn non_positive_durations_are_errors_when_the_check_is_enabled() {
    for value in ["00:00:00", "0", "0s", "-00:00:05", "-1", " -0:0:1 "] {
        for key in ["Interval", "Timeout"] {
            let e = only_error(
                &payments_active(&format!(r#""Enabled": true, "{key}": "{value}""#)),
                &format!("{P}:HealthCheck:Active:{key}"),
            );
            assert_names(&e, &["`payments`", key, &format!("`{value}`")]);
        }
        let e = only_error(
            &payments_passive(&format!(
                r#""Enabled": true, "ReactivationPeriod": "{value}""#
            )),
            &format!("{P}:HealthCheck:Passive:ReactivationPeriod"),
        );
        assert_names(
            &e,
            &["`payments`", "ReactivationPeriod", &format!("`{value}`")],
        );
    }
}

#[test]
fn non_positive_durations_are_not_checked_when_the_check_is_disabled() {
    for value in ["00:00:00", "0", "-00:00:05", "-1"] {
        for enabled in [r#""Enabled": false,"#, ""] {
            let active = payments_active(&format!(
                r#"{enabled} "Interval": "{value}", "Timeout": "{value}""#
            ));
            assert_clean(&active);
            Engine::from_json(&active).expect("disabled: not checked");
            let passive =
                payments_passive(&format!(r#"{enabled} "ReactivationPeriod": "{value}""#));
            assert_clean(&passive);
            Engine::from_json(&passive).expect("disabled: not checked");
        }
    }
}

/// Configs built in code go through the same rule (a zero `Duration`; negatives cannot be
/// written as a `Duration`).
#[test]
fn zero_durations_built_in_code_are_errors_when_the_check_is_enabled() {
    use healthpick::config::{
        ActiveHealthCheckConfig, ClusterConfig, DestinationConfig, PassiveHealthCheckConfig,
    };
    use std::time::Duration;

    let build = |enabled: bool| {
        let (active, passive) = if enabled {
            (
                ActiveHealthCheckConfig::enabled(),
                PassiveHealthCheckConfig::enabled(),
            )
        } else {
            (
                ActiveHealthCheckConfig::default(),
                PassiveHealthCheckConfig::default(),
            )
        };
        Config::new().cluster(
            ClusterConfig::new("payments")
                .active(active.interval(Duration::ZERO).timeout(Duration::ZERO))
                .passive(passive.reactivation_period(Duration::ZERO))
                .destination(DestinationConfig::new("eu-1", "http://10.0.0.1:8080/")),
        )
    };
    let err = Engine::new(build(true)).expect_err("zero durations of enabled checks");
    let paths: Vec<&str> = err.errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "Clusters:payments:HealthCheck:Active:Interval",
            "Clusters:payments:HealthCheck:Active:Timeout",
            "Clusters:payments:HealthCheck:Passive:ReactivationPeriod",
        ]
    );
    for (e, key) in err
        .errors
        .iter()
        .zip(["Interval", "Timeout", "ReactivationPeriod"])
    {
        assert_names(e, &["`payments`", key]);
    }
    Engine::new(build(false)).expect("disabled checks are not validated");
}

// ---------------------------------------------------------------------------------------------
// Path and Query

#[test]
fn path_must_start_with_a_slash() {
    let e = only_error(
        &payments_active(r#""Enabled": true, "Path": "api/health""#),
        "ReverseProxy:Clusters:payments:HealthCheck:Active:Path",
    );
    assert_names(&e, &["`payments`", "Path", "`api/health`"]);
    assert_clean(&payments_active(
        r#""Enabled": true, "Path": "/api/health""#,
    ));
}

#[test]
fn query_must_start_with_a_question_mark() {
    let e = only_error(
        &payments_active(r#""Enabled": true, "Query": "probe=1""#),
        "ReverseProxy:Clusters:payments:HealthCheck:Active:Query",
    );
    assert_names(&e, &["`payments`", "Query", "`probe=1`"]);
    assert_clean(&payments_active(r#""Enabled": true, "Query": "?probe=1""#));
}

#[test]
fn path_and_query_of_a_disabled_check_are_warnings_and_errors_in_strict_mode() {
    let text = payments_active(r#""Enabled": false, "Path": "api/health", "Query": "probe=1""#);
    let report = check(&text);
    assert!(report.is_valid(), "{:#?}", report.errors);
    let paths: Vec<&str> = report.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "ReverseProxy:Clusters:payments:HealthCheck:Active:Path",
            "ReverseProxy:Clusters:payments:HealthCheck:Active:Query",
        ]
    );
    assert!(report
        .warnings
        .iter()
        .all(|w| w.severity == Severity::Warning));
    let strict = check_strict(&text);
    assert_eq!(error_paths(&strict), paths);
    assert!(strict.warnings.is_empty());
}

// ---------------------------------------------------------------------------------------------
// duplicate ids

#[test]
fn duplicate_cluster_ids_differing_in_case_are_an_error() {
    let text = r#"{ "ReverseProxy": { "Clusters": {
        "payments": { "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } } },
        "Payments": { "Destinations": { "eu-9": { "Address": "http://10.0.0.9:8080/" } } }
    } } }"#;
    let e = only_error(text, "ReverseProxy:Clusters:Payments");
    assert_names(&e, &["Duplicate cluster", "`Payments`", "`payments`"]);
}

#[test]
fn duplicate_destination_ids_are_an_error() {
    let text = payments(
        r#""Destinations": {
              "eu-1": { "Address": "http://10.0.0.1:8080/" },
              "EU-1": { "Address": "http://10.0.0.2:8080/" }
           }"#,
    );
    let report = check(&text);
    assert!(!report.is_valid());
    assert!(!report.errors.is_empty());
    assert!(
        report
            .errors
            .iter()
            .all(|e| e.path == "ReverseProxy:Clusters:payments:Destinations:EU-1"),
        "{:#?}",
        report.errors
    );
    let e = report
        .errors
        .iter()
        .find(|e| e.message.contains("Duplicate destination"))
        .unwrap_or_else(|| panic!("no Duplicate destination error: {:#?}", report.errors));
    assert_names(e, &["`payments`", "`EU-1`", "`eu-1`"]);
    assert!(Engine::from_json(&text).is_err());
}

/// One problem, one error: a destination id given twice is one mistake of the user. Every error
/// also names the cluster in its message.
#[test]
fn duplicate_destination_is_reported_once_naming_the_cluster() {
    let text = payments(
        r#""Destinations": {
              "eu-1": { "Address": "http://10.0.0.1:8080/" },
              "EU-1": { "Address": "http://10.0.0.2:8080/" }
           }"#,
    );
    let e = only_error(&text, "ReverseProxy:Clusters:payments:Destinations:EU-1");
    assert_names(&e, &["`payments`", "`EU-1`", "`eu-1`"]);
}

// ---------------------------------------------------------------------------------------------
// Priority

#[test]
fn negative_priority_is_an_error() {
    for bad in ["-1", "\"-1\"", "-2147483648"] {
        let e = only_error(
            &payments_eu2(&format!(
                r#""Address": "http://10.0.0.2:8080/", "Priority": {bad}"#
            )),
            "ReverseProxy:Clusters:payments:Destinations:eu-2:Priority",
        );
        let shown = bad.trim_matches('"');
        assert_names(
            &e,
            &["`payments`", "`eu-2`", "Priority", &format!("`{shown}`")],
        );
    }
}

#[test]
fn non_integer_priority_is_an_error() {
    for bad in [
        "1.5",
        "\"abc\"",
        "\"1.0\"",
        "1e2",
        "true",
        "99999999999999999999999",
        "\"one\"",
    ] {
        let e = only_error(
            &payments_eu2(&format!(
                r#""Address": "http://10.0.0.2:8080/", "Priority": {bad}"#
            )),
            "ReverseProxy:Clusters:payments:Destinations:eu-2:Priority",
        );
        let shown = if bad == "true" {
            "True"
        } else {
            bad.trim_matches('"')
        };
        assert_names(
            &e,
            &["`payments`", "`eu-2`", "Priority", &format!("`{shown}`")],
        );
    }
}

// ---------------------------------------------------------------------------------------------
// metadata numbers: warnings, default used, errors in strict mode

fn threshold_doc(threshold: &str) -> String {
    payments(&format!(
        r#""HealthCheck": {{ "Active": {{ "Enabled": true }} }},
           "Metadata": {{ "ConsecutiveFailuresHealthPolicy.Threshold": {threshold} }},
           "Destinations": {{
              "eu-1": {{ "Address": "http://10.0.0.1:8080/" }},
              "eu-2": {{ "Address": "http://10.0.0.2:8080/" }}
           }}"#
    ))
}

/// How many failed probe rounds in a row make `eu-1` Unhealthy (at most 10).
fn failures_to_unhealthy(engine: &Engine) -> usize {
    for round in 1..=10 {
        engine
            .report_probe_round(
                "payments",
                &[
                    ProbeResult::error("eu-1", "connection refused"),
                    ProbeResult::status("eu-2", 200),
                ],
            )
            .expect("cluster exists");
        let status = engine.status();
        let eu1 = status
            .cluster("payments")
            .and_then(|c| c.destination("eu-1"))
            .expect("eu-1");
        if eu1.active == HealthState::Unhealthy {
            return round;
        }
    }
    panic!("eu-1 never became Unhealthy");
}

#[test]
fn unparsable_threshold_is_a_warning_and_the_default_is_used() {
    for bad in ["\"abc\"", "\"\\u0033x\"", "\"1,5\"", "\"0x10\"", "true"] {
        let text = threshold_doc(bad);
        let report = check(&text);
        assert!(report.is_valid(), "{bad}: {:#?}", report.errors);
        assert_eq!(report.warnings.len(), 1, "{bad}: {:#?}", report.warnings);
        let w = &report.warnings[0];
        assert_eq!(w.severity, Severity::Warning);
        assert_eq!(
            w.path,
            "ReverseProxy:Clusters:payments:Metadata:ConsecutiveFailuresHealthPolicy.Threshold"
        );
        assert_names(
            w,
            &["`payments`", "ConsecutiveFailuresHealthPolicy.Threshold"],
        );
        let config = Config::from_json(&text).expect("warnings do not stop loading");
        assert!(config.find_cluster("payments").is_some());

        let engine = Engine::default();
        let warnings = engine.load_json(&text).expect("loads with a warning");
        assert_eq!(warnings, report.warnings);
        assert_eq!(
            failures_to_unhealthy(&engine),
            2,
            "{bad}: default threshold 2"
        );
    }
    let e = check(&threshold_doc("\"abc\""));
    assert_names(&e.warnings[0], &["`abc`"]);

    // A threshold that parses is used (and gives no warning).
    let text = threshold_doc("\" 3 \"");
    assert!(check(&text).warnings.is_empty());
    let engine = Engine::from_json(&text).expect("loads");
    assert_eq!(failures_to_unhealthy(&engine), 3);
}

#[test]
fn unparsable_rate_limit_is_a_warning() {
    let text = payments(
        r#""HealthCheck": { "Passive": { "Enabled": true } },
           "Metadata": { "transportfailureratehealthpolicy.ratelimit": "thirty percent" },
           "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } }"#,
    );
    let report = check(&text);
    assert!(report.is_valid(), "{:#?}", report.errors);
    assert_eq!(report.warnings.len(), 1, "{:#?}", report.warnings);
    let w = &report.warnings[0];
    assert!(
        w.path.eq_ignore_ascii_case(&format!(
            "{P}:Metadata:TransportFailureRateHealthPolicy.RateLimit"
        )),
        "{}",
        w.path
    );
    assert_names(w, &["`payments`", "`thirty percent`"]);
}

/// healthpick's own switches (suspect ranking, passive reset on recovery) are cluster metadata
/// booleans (`true`/`false`, any case): anything else is a warning (YARP loads any metadata),
/// the default (`true`) is used, and strict mode refuses it.
#[test]
fn suspect_ranking_and_passive_reset_switches_must_be_booleans() {
    let text = payments(
        r#""HealthCheck": { "Active": { "Enabled": true }, "Passive": { "Enabled": true } },
           "Metadata": { "HealthCheck.SuspectRanking": "yes", "HealthCheck.ResetPassiveOnRecovery": " FALSE " },
           "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } }"#,
    );
    let report = check(&text);
    assert!(report.is_valid(), "{:#?}", report.errors);
    assert_eq!(report.warnings.len(), 1, "{:#?}", report.warnings);
    let w = &report.warnings[0];
    assert_eq!(w.path, format!("{P}:Metadata:HealthCheck.SuspectRanking"));
    assert_names(w, &["`payments`", "`yes`", "true or false"]);
    let config = report.config.unwrap();
    assert!(
        config.clusters()[0].suspect_ranking(),
        "the default is used"
    );
    assert!(!config.clusters()[0].reset_passive_on_recovery());
    let strict = check_strict(&text);
    assert_eq!(
        error_paths(&strict),
        [format!("{P}:Metadata:HealthCheck.SuspectRanking")]
    );
}

/// YARP reads the threshold with `double.TryParse(value, NumberStyles.Float,
/// CultureInfo.InvariantCulture)`, which knows `Infinity` but not Rust's `inf`: YARP falls back to
/// the default threshold, so healthpick must too, and warn.
#[test]
fn threshold_inf_is_not_a_number_like_dotnet() {
    let text = threshold_doc("\"inf\"");
    let report = check(&text);
    assert!(report.is_valid(), "{:#?}", report.errors);
    assert_eq!(
        report.warnings.len(),
        1,
        "\"inf\" is not a .NET number: expected a warning, got {:#?}",
        report.warnings
    );
    let engine = Engine::from_json(&text).expect("loads");
    assert_eq!(failures_to_unhealthy(&engine), 2, "the default threshold 2");
}

#[test]
fn strict_mode_turns_warnings_into_errors() {
    let text = threshold_doc("\"abc\"");
    let report = check_strict(&text);
    assert!(!report.is_valid());
    assert!(report.warnings.is_empty());
    assert_eq!(
        error_paths(&report),
        ["ReverseProxy:Clusters:payments:Metadata:ConsecutiveFailuresHealthPolicy.Threshold"]
    );
    assert_eq!(report.errors[0].severity, Severity::Error);
    assert_names(&report.errors[0], &["`payments`", "`abc`"]);

    let strict = Engine::builder().strict(true).build();
    let err = strict.load_json(&text).expect_err("strict engine refuses");
    assert_eq!(err.errors, report.errors);
    assert!(strict.cluster_ids().is_empty());
    // The same document without the bad number loads in strict mode.
    strict
        .load_json(&threshold_doc("2"))
        .expect("nothing to warn about");
    assert_eq!(strict.cluster_ids(), ["payments"]);
}

// ---------------------------------------------------------------------------------------------
// every problem at once

/// Six different problems, one of each kind, in document order.
const SIX_PROBLEMS: &str = r#"{
  // comments and trailing commas are fine; the problems are not
  "ReverseProxy": {
    "Clusters": {
      "payments": {
        "LoadBalancingPolicy": "Fastest",
        "HealthCheck": {
          "Active": {
            "Enabled": true,
            "Interval": "24:00:00",
            "Path": "health",
          },
        },
        "Destinations": {
          "eu-1": { "Address": "http://10.0.0.1:8080/", "Priority": -1 },
          "eu-2": { "Priority": 0 },
        },
      },
      "PAYMENTS": {
        "Destinations": { "x": { "Address": "http://10.0.0.9:8080/" } },
      },
    },
  },
}"#;

const SIX_PATHS: [&str; 6] = [
    "ReverseProxy:Clusters:payments:LoadBalancingPolicy",
    "ReverseProxy:Clusters:payments:HealthCheck:Active:Interval",
    "ReverseProxy:Clusters:payments:HealthCheck:Active:Path",
    "ReverseProxy:Clusters:payments:Destinations:eu-1:Priority",
    "ReverseProxy:Clusters:payments:Destinations:eu-2:Address",
    "ReverseProxy:Clusters:PAYMENTS",
];

#[test]
fn all_problems_are_reported_at_once() {
    let report = check(SIX_PROBLEMS);
    assert!(!report.is_valid());
    let mut got = error_paths(&report);
    got.sort_unstable();
    let mut want = SIX_PATHS.to_vec();
    want.sort_unstable();
    assert_eq!(got, want, "{:#?}", report.errors);

    let by_path = |p: &str| {
        report
            .errors
            .iter()
            .find(|e| e.path == p)
            .unwrap_or_else(|| panic!("no error at {p}"))
    };
    assert_names(by_path(SIX_PATHS[0]), &["`payments`", "`Fastest`"]);
    assert_names(
        by_path(SIX_PATHS[1]),
        &["`payments`", "Interval", "`24:00:00`"],
    );
    assert_names(by_path(SIX_PATHS[2]), &["`payments`", "Path", "`health`"]);
    assert_names(by_path(SIX_PATHS[3]), &["`payments`", "`eu-1`", "`-1`"]);
    assert_names(by_path(SIX_PATHS[4]), &["`payments`", "`eu-2`", "Address"]);
    assert_names(by_path(SIX_PATHS[5]), &["Duplicate cluster", "`PAYMENTS`"]);

    let err = Config::from_json(SIX_PROBLEMS).expect_err("invalid");
    assert_eq!(err.errors, report.errors);
    let shown = err.to_string();
    assert!(shown.contains("6 errors"), "{shown}");
    for path in SIX_PATHS {
        assert!(shown.contains(path), "{shown}");
    }
    let err = Engine::from_json(SIX_PROBLEMS).expect_err("invalid");
    assert_eq!(err.errors.len(), 6);
}

/// `ConfigError::errors` is documented as "every error, in document order".
#[test]
fn errors_come_in_document_order() {
    let report = check(SIX_PROBLEMS);
    assert_eq!(error_paths(&report), SIX_PATHS);
}

// ---------------------------------------------------------------------------------------------
// a bad reload changes nothing

const GOOD: &str = r#"{ "ReverseProxy": { "Clusters": { "payments": {
    "LoadBalancingPolicy": "FirstAlphabetical",
    "HealthCheck": { "Active": { "Enabled": true } },
    "Destinations": {
      "a-1": { "Address": "http://10.0.0.1:8080/" },
      "a-2": { "Address": "http://10.0.0.2:8080/" },
      "a-3": { "Address": "http://10.0.0.3:8080/" }
    }
} } } }"#;

fn status_json(engine: &Engine) -> serde_json::Value {
    serde_json::to_value(engine.status().clusters).expect("status serialises")
}

#[test]
fn a_bad_reload_keeps_the_old_config_in_force() {
    let engine = Engine::from_json(GOOD).expect("loads");
    // Some health so that the status has something to lose: a-1 fails twice (threshold 2).
    for _ in 0..2 {
        engine
            .report_probe_round(
                "payments",
                &[
                    ProbeResult::error("a-1", "connection refused"),
                    ProbeResult::status("a-2", 200),
                    ProbeResult::status("a-3", 200),
                ],
            )
            .expect("cluster exists");
    }
    let pick = engine.pick_endpoint("payments").expect("pick");
    assert_eq!(pick.destination().id(), "a-2");
    drop(pick);
    let before = status_json(&engine);

    let bad_reloads = [
        // valid new destinations and a new cluster, plus one error: nothing may apply
        r#"{ "ReverseProxy": { "Clusters": {
            "payments": {
              "LoadBalancingPolicy": "RoundRobin",
              "Destinations": {
                "b-1": { "Address": "http://10.0.1.1:8080/" },
                "b-2": { "Address": "b-2:8080" }
              }
            },
            "orders": { "Destinations": { "o-1": { "Address": "http://10.0.2.1:8080/" } } }
        } } }"#,
        // malformed JSON
        r#"{ "ReverseProxy": { "Clusters": { "payments": { "Destinations": { "#,
        // an unknown policy only
        r#"{ "ReverseProxy": { "Clusters": { "payments": {
            "LoadBalancingPolicy": "Fastest",
            "Destinations": { "a-1": { "Address": "http://10.0.0.1:8080/" } } } } } }"#,
        // not an object
        "null",
        "42",
    ];
    for bad in bad_reloads {
        let err = engine.load_json(bad).expect_err("bad reload refused");
        assert!(!err.errors.is_empty());
        assert_eq!(engine.cluster_ids(), ["payments"], "{bad}");
        assert_eq!(status_json(&engine), before, "status unchanged after {bad}");
        for _ in 0..5 {
            let pick = engine.pick_endpoint("payments").expect("old config picks");
            assert_eq!(pick.destination().id(), "a-2", "{bad}");
            assert_eq!(pick.address().as_str(), "http://10.0.0.2:8080/");
        }
        assert!(engine.pick_endpoint("orders").is_err());
    }

    // A good reload after the bad ones applies, keeping a-1's health.
    let good = GOOD.replace(
        r#""a-3": { "Address": "http://10.0.0.3:8080/" }"#,
        r#""a-0": { "Address": "http://10.0.0.4:8080/", "Priority": 1 }"#,
    );
    engine.load_json(&good).expect("good reload");
    let status = engine.status();
    let payments = status.cluster("payments").expect("payments");
    let ids: Vec<&str> = payments
        .destinations
        .iter()
        .map(|d| d.id.as_str())
        .collect();
    assert_eq!(ids, ["a-1", "a-2", "a-0"]);
    assert_eq!(
        payments.destination("a-1").expect("a-1").active,
        HealthState::Unhealthy
    );
    assert_eq!(
        payments.destination("a-2").expect("a-2").active,
        HealthState::Healthy
    );
}

/// .NET's JSON configuration provider refuses a document whose top level is not an object
/// ("Top-level JSON element must be an object"); an array is not a configuration, and reloading
/// one must not wipe the clusters in force.
#[test]
fn a_top_level_array_is_not_a_config_document() {
    for text in ["[]", "[1]", r#"[ { "Clusters": {} } ]"#] {
        let report = check(text);
        assert!(
            !report.is_valid(),
            "{text}: accepted with {:#?}",
            report.warnings
        );
        assert_eq!(error_paths(&report), [""], "{text}: {:#?}", report.errors);
        assert!(
            report.errors[0].message.contains("object"),
            "{}",
            report.errors[0].message
        );
    }
    let engine = Engine::from_json(GOOD).expect("loads");
    let before = status_json(&engine);
    let reload = engine.load_json("[]");
    assert!(reload.is_err(), "reloading [] was accepted: {reload:?}");
    assert_eq!(engine.cluster_ids(), ["payments"]);
    assert_eq!(status_json(&engine), before);
}

// ---------------------------------------------------------------------------------------------
// HttpRequest:ActivityTimeout (the attempt timeout of the wrapped client and the middleware)

/// `payments` with `request` spliced into `HttpRequest`, plus one valid destination.
fn payments_request(request: &str) -> String {
    payments(&format!(
        r#""HttpRequest": {{ {request} }},
           "Destinations": {{ "eu-1": {{ "Address": "http://10.0.0.1:8080/" }} }}"#
    ))
}

/// Read as a TimeSpan (or humantime), always in force: a bad or non-positive value is an error
/// naming the cluster, the key and the value; a good one reaches the cluster's config.
#[test]
fn activity_timeout_is_a_positive_timespan() {
    for bad in ["00:60:00", "soon", "-00:00:05", "00:00:00", "0", "0s"] {
        let e = only_error(
            &payments_request(&format!(r#""ActivityTimeout": "{bad}""#)),
            &format!("{P}:HttpRequest:ActivityTimeout"),
        );
        assert_names(&e, &["`payments`", "ActivityTimeout", &format!("`{bad}`")]);
    }
    for (good, ms) in [("00:00:02.5", 2500), ("00:01:40", 100_000), ("750ms", 750)] {
        let text = payments_request(&format!(r#""Version": "2", "ActivityTimeout": "{good}""#));
        assert_clean(&text);
        let config = Config::from_json(&text).expect("valid");
        let cluster = &config.clusters()[0];
        assert_eq!(
            cluster.activity_timeout_setting(),
            Some(std::time::Duration::from_millis(ms)),
            "{good}"
        );
        assert_eq!(cluster.http_version_setting(), Some("2"));
    }
    assert_clean(&payments_request(r#""ActivityTimeout": null"#));
    let none = Config::from_json(&payments_request(r#""ActivityTimeout": """#)).expect("valid");
    assert_eq!(none.clusters()[0].activity_timeout_setting(), None);
}

/// A zero built in code is refused like one read from JSON.
#[test]
fn a_zero_activity_timeout_built_in_code_is_an_error() {
    use healthpick::config::{ClusterConfig, DestinationConfig};
    let config = Config::new().cluster(
        ClusterConfig::new("payments")
            .activity_timeout(std::time::Duration::ZERO)
            .destination(DestinationConfig::new("eu-1", "http://10.0.0.1:8080/")),
    );
    let err = Engine::new(config).expect_err("zero is refused");
    assert_eq!(err.errors.len(), 1, "{:#?}", err.errors);
    assert!(err.errors[0].path.ends_with("HttpRequest:ActivityTimeout"));
    assert_names(&err.errors[0], &["`payments`", "ActivityTimeout"]);
}

// ---------------------------------------------------------------------------------------------
// YARP's validator: HttpRequest:Version and HttpClient:MaxConnectionsPerServer

/// YARP reads `Version` with .NET's `Version.Parse`, `.0` appended when there is no dot, and
/// accepts 1.0, 1.1, 2.0 and 3.0; anything else is an error in YARP's words.
#[test]
fn http_version_follows_yarps_validator() {
    for good in ["1.0", "1.1", "2", "2.0", "3", "3.0", " 2.0 ", "1"] {
        let report = check(&payments_request(&format!(r#""Version": "{good}""#)));
        assert!(report.errors.is_empty(), "{good}: {:#?}", report.errors);
    }
    // A JSON number is the same text.
    assert_clean(&payments_request(r#""Version": 2"#));
    for (bad, read_as) in [
        ("1.9", ""),
        ("2.5", ""),
        ("3.1", ""),
        ("20", " (read as 20.0)"),
        ("2.0.0", ""),
    ] {
        let e = only_error(
            &payments_request(&format!(r#""Version": "{bad}""#)),
            &format!("{P}:HttpRequest:Version"),
        );
        assert_eq!(
            e.message,
            format!(
                "cluster `payments`: Version `{bad}`{read_as} is not any of supported HTTP versions (1.0, 1.1, 2 and 3)"
            )
        );
    }
    for bad in ["two", "HTTP/2", "2.", "-1"] {
        let e = only_error(
            &payments_request(&format!(r#""Version": "{bad}""#)),
            &format!("{P}:HttpRequest:Version"),
        );
        assert_eq!(
            e.message,
            format!(
                "cluster `payments`: Version `{bad}` is not a version (supported HTTP versions: 1.0, 1.1, 2 and 3)"
            )
        );
    }
}

/// HTTP/3 is valid YARP, but probes do not speak it: a warning says they use HTTP/1.1.
#[test]
fn http_version_3_is_a_warning() {
    let report = check(&payments_request(r#""Version": "3""#));
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(report.warnings.len(), 1, "{:#?}", report.warnings);
    assert_eq!(report.warnings[0].path, format!("{P}:HttpRequest:Version"));
    assert_eq!(
        report.warnings[0].message,
        "cluster `payments`: Version `3` (HTTP/3) is accepted, but healthpick's probes do not speak HTTP/3 and use HTTP/1.1"
    );
    let cluster = &report.config.unwrap().clusters()[0].clone();
    assert_eq!(cluster.probe_http_version(), "1.1");
    let two = Config::from_json(&payments_request(r#""Version": "2.0""#)).unwrap();
    assert_eq!(two.clusters()[0].probe_http_version(), "2");
}

/// `payments` with `client` spliced into `HttpClient`, plus one valid destination.
fn payments_client(client: &str) -> String {
    payments(&format!(
        r#""HttpClient": {{ {client} }},
           "Destinations": {{ "eu-1": {{ "Address": "http://10.0.0.1:8080/" }} }}"#
    ))
}

#[test]
fn max_connections_per_server_must_be_positive() {
    for bad in ["0", "-1", "\"-5\"", "\" 0 \""] {
        let e = only_error(
            &payments_client(&format!(r#""MaxConnectionsPerServer": {bad}"#)),
            &format!("{P}:HttpClient:MaxConnectionsPerServer"),
        );
        let shown = bad.trim_matches('"');
        assert_eq!(
            e.message,
            format!(
                "cluster `payments`: MaxConnectionsPerServer `{shown}` must be positive (a connection count: 1, 2, ...)"
            )
        );
    }
    let e = only_error(
        &payments_client(r#""MaxConnectionsPerServer": "many""#),
        &format!("{P}:HttpClient:MaxConnectionsPerServer"),
    );
    assert_names(&e, &["`payments`", "`many`", "is not an integer"]);
    // A positive count is valid, and kept (with a warning that it is not applied).
    let report = check(&payments_client(r#""MaxConnectionsPerServer": 1"#));
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(
        report.config.unwrap().clusters()[0].max_connections_per_server(),
        Some(1)
    );
}

// ---------------------------------------------------------------------------------------------
// Misspelt keys: "did you mean"

/// The one warning of `text`; it must sit at `path`.
fn only_warning(text: &str, path: &str) -> Diagnostic {
    let report = check(text);
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(
        report.warnings.len(),
        1,
        "expected exactly one warning at {path}, got {:#?}",
        report.warnings
    );
    assert_eq!(report.warnings[0].path, path);
    assert_eq!(report.warnings[0].severity, Severity::Warning);
    report.warnings[0].clone()
}

#[test]
fn a_key_close_to_a_known_one_gets_a_did_you_mean_warning() {
    let cases: [(String, String, &str, &str); 12] = [
        (
            payments_active(r#""Enabeld": true"#),
            format!("{P}:HealthCheck:Active:Enabeld"),
            "Enabeld",
            "cluster `payments`: unknown key `Enabeld`; did you mean `Enabled`?",
        ),
        (
            payments(
                r#""HealthCheck": { "Activ": { "Enabled": true } },
                   "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } }"#,
            ),
            format!("{P}:HealthCheck:Activ"),
            "Activ",
            "cluster `payments`: unknown key `Activ`; did you mean `Active`?",
        ),
        (
            payments_eu2(r#""Address": "http://10.0.0.2/", "Priorty": 1"#),
            format!("{P}:Destinations:eu-2:Priorty"),
            "Priorty",
            "cluster `payments`: destination `eu-2`: unknown key `Priorty`; did you mean `Priority`?",
        ),
        (
            payments_eu2(r#""Adress": "http://10.0.0.2/""#),
            format!("{P}:Destinations:eu-2:Adress"),
            "Adress",
            "",
        ),
        (
            payments_active(r#""Enabled": true, "Intervall": "00:00:05""#),
            format!("{P}:HealthCheck:Active:Intervall"),
            "Intervall",
            "cluster `payments`: unknown key `Intervall`; did you mean `Interval`?",
        ),
        (
            payments_active(r#""Enabled": true, "Tiemout": "00:00:05""#),
            format!("{P}:HealthCheck:Active:Tiemout"),
            "Tiemout",
            "cluster `payments`: unknown key `Tiemout`; did you mean `Timeout`?",
        ),
        (
            payments_passive(r#""Enabled": true, "ReactivationPeriode": "00:01:00""#),
            format!("{P}:HealthCheck:Passive:ReactivationPeriode"),
            "ReactivationPeriode",
            "cluster `payments`: unknown key `ReactivationPeriode`; did you mean `ReactivationPeriod`?",
        ),
        (
            payments_request(r#""Verison": "2""#),
            format!("{P}:HttpRequest:Verison"),
            "Verison",
            "cluster `payments`: unknown key `Verison`; did you mean `Version`?",
        ),
        (
            payments_client(r#""DangerousAcceptAnyServerCertificat": true"#),
            format!("{P}:HttpClient:DangerousAcceptAnyServerCertificat"),
            "DangerousAcceptAnyServerCertificat",
            "cluster `payments`: unknown key `DangerousAcceptAnyServerCertificat`; did you mean `DangerousAcceptAnyServerCertificate`?",
        ),
        (
            payments(
                r#""LoadBalacingPolicy": "RoundRobin",
                   "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } }"#,
            ),
            format!("{P}:LoadBalacingPolicy"),
            "LoadBalacingPolicy",
            "cluster `payments`: unknown key `LoadBalacingPolicy`; did you mean `LoadBalancingPolicy`?",
        ),
        (
            payments(
                r#""Metadata": { "ConsecutiveFailuresHealthPolicy.Treshold": "3" },
                   "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } }"#,
            ),
            format!("{P}:Metadata:ConsecutiveFailuresHealthPolicy.Treshold"),
            "ConsecutiveFailuresHealthPolicy.Treshold",
            "cluster `payments`: unknown key `ConsecutiveFailuresHealthPolicy.Treshold`; did you mean `ConsecutiveFailuresHealthPolicy.Threshold`?",
        ),
        (
            r#"{ "HealthPolicys": { "DefaultInterval": "00:00:05" },
                 "ReverseProxy": { "Clusters": { "payments": {
                   "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } } } } } }"#
                .to_string(),
            "HealthPolicys".to_string(),
            "HealthPolicys",
            "unknown key `HealthPolicys`; did you mean `HealthPolicies`?",
        ),
    ];
    for (text, path, key, message) in cases {
        if message.is_empty() {
            // A misspelt Address leaves the destination without one: an error, and the hint.
            let report = check(&text);
            assert_eq!(
                error_paths(&report),
                [format!("{P}:Destinations:eu-2:Address")]
            );
            assert_eq!(report.warnings.len(), 1, "{:#?}", report.warnings);
            assert_eq!(report.warnings[0].path, path);
            assert_eq!(
                report.warnings[0].message,
                format!("cluster `payments`: destination `eu-2`: unknown key `{key}`; did you mean `Address`?")
            );
            continue;
        }
        let w = only_warning(&text, &path);
        assert_eq!(w.message, message, "{key}");
    }
}

/// Case does not make a key unknown; keys far from every known one are ignored as YARP ignores
/// them; strict mode makes a did-you-mean an error.
#[test]
fn did_you_mean_spares_other_keys_and_strict_refuses_it() {
    let text = payments(
        r#""ClusterId": "payments", "Comment": "owned by team x",
           "healthcheck": { "active": { "ENABLED": true, "interval": "00:00:30" } },
           "Destinations": { "eu-1": { "address": "http://10.0.0.1:8080/", "Zone": "eu", "priority": 0 } }"#,
    );
    let report = check(&text);
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert!(report.warnings.is_empty(), "{:#?}", report.warnings);

    let misspelt = payments_eu2(r#""Address": "http://10.0.0.2/", "Priorty": 1"#);
    let strict = check_strict(&misspelt);
    assert!(!strict.is_valid());
    assert_eq!(
        error_paths(&strict),
        [format!("{P}:Destinations:eu-2:Priorty")]
    );
    assert!(strict.errors[0]
        .message
        .ends_with("did you mean `Priority`?"));
    assert!(
        Config::from_json(&misspelt).is_ok(),
        "only a warning without strict"
    );
    // The misspelt setting really is not read: the destination stays in tier 0.
    let config = Config::from_json(&misspelt).unwrap();
    assert_eq!(config.clusters()[0].destinations()[1].tier(), 0);
}

// ---------------------------------------------------------------------------------------------
// Timeout >= Interval, settings YARP applies and healthpick does not

#[test]
fn a_timeout_not_shorter_than_the_interval_is_a_warning() {
    // "00:10" is ten minutes.
    let w = only_warning(
        &payments_active(r#""Enabled": true, "Interval": "00:00:15", "Timeout": "00:10""#),
        &format!("{P}:HealthCheck:Active:Timeout"),
    );
    assert_eq!(
        w.message,
        "cluster `payments`: Timeout (10m) is not shorter than Interval (15s): a probe that hangs is still running when the next one is due, and that one is skipped (TimeSpans are [d.]hh:mm[:ss]: `00:10` is ten minutes, `00:00:10` ten seconds)"
    );
    // Equal is not shorter; the default Timeout (10 s) against a short Interval counts too.
    let w = only_warning(
        &payments_active(r#""Enabled": true, "Interval": "00:00:05""#),
        &format!("{P}:HealthCheck:Active:Timeout"),
    );
    assert_eq!(
        w.message,
        "cluster `payments`: Timeout (10s, the default) is not shorter than Interval (5s): a probe that hangs is still running when the next one is due, and that one is skipped"
    );
    only_warning(
        &payments_active(r#""Enabled": true, "Interval": "5s", "Timeout": "5s""#),
        &format!("{P}:HealthCheck:Active:Timeout"),
    );
    // Shorter is fine; a disabled check is not in force.
    assert!(check(&payments_active(
        r#""Enabled": true, "Interval": "00:00:15", "Timeout": "00:00:14.9""#
    ))
    .warnings
    .is_empty());
    assert!(check(&payments_active(
        r#""Enabled": false, "Interval": "00:00:01", "Timeout": "00:10""#
    ))
    .warnings
    .is_empty());
    let strict = check_strict(&payments_active(r#""Enabled": true, "Timeout": "00:10""#));
    assert_eq!(
        error_paths(&strict),
        [format!("{P}:HealthCheck:Active:Timeout")]
    );
}

#[test]
fn yarp_settings_healthpick_does_not_apply_are_warnings() {
    let text = payments(
        r#""HttpClient": {
             "SslProtocols": [ "Tls12", "Tls13" ],
             "DangerousAcceptAnyServerCertificate": true,
             "MaxConnectionsPerServer": 10,
             "EnableMultipleHttp2Connections": true,
             "RequestHeaderEncoding": "utf-8",
             "ResponseHeaderEncoding": "utf-8",
             "WebProxy": { "Address": "http://proxy:8080", "BypassOnLocal": true }
           },
           "HttpRequest": { "Version": "2", "VersionPolicy": "RequestVersionOrLower",
                            "ActivityTimeout": "00:00:30", "AllowResponseBuffering": false },
           "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } }"#,
    );
    let report = check(&text);
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    let got: Vec<(&str, &str)> = report
        .warnings
        .iter()
        .map(|w| (w.path.as_str(), w.message.as_str()))
        .collect();
    let want = [
        ("HttpClient:SslProtocols", "SslProtocols is a YARP setting that healthpick does not apply: TLS versions are those of healthpick's TLS backend"),
        ("HttpClient:MaxConnectionsPerServer", "MaxConnectionsPerServer is a YARP setting that healthpick does not apply: connections are pooled by reqwest, with no per-server limit"),
        ("HttpClient:EnableMultipleHttp2Connections", "EnableMultipleHttp2Connections is a YARP setting that healthpick does not apply: reqwest decides how many HTTP/2 connections it opens"),
        ("HttpClient:RequestHeaderEncoding", "RequestHeaderEncoding is a YARP setting that healthpick does not apply: headers are encoded as reqwest encodes them"),
        ("HttpClient:ResponseHeaderEncoding", "ResponseHeaderEncoding is a YARP setting that healthpick does not apply: headers are decoded as reqwest decodes them"),
        ("HttpClient:WebProxy", "WebProxy is a YARP setting that healthpick does not apply: probes never use a proxy; the wrapped client uses the reqwest::Client it is given"),
        ("HttpRequest:VersionPolicy", "VersionPolicy is a YARP setting that healthpick does not apply: probes ask for Version over https and for HTTP/1.1 over cleartext http"),
        ("HttpRequest:AllowResponseBuffering", "AllowResponseBuffering is a YARP setting that healthpick does not apply: it is a proxy's setting; a client reads the responses it asks for"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(k, m)| (format!("{P}:{k}"), format!("cluster `payments`: {m}")))
        .collect();
    let want: Vec<(&str, &str)> = want.iter().map(|(p, m)| (p.as_str(), m.as_str())).collect();
    assert_eq!(got, want);
    // What healthpick applies gives no warning: DangerousAcceptAnyServerCertificate (probes),
    // Version (probes), ActivityTimeout (the attempt timeout).
    let applied = payments(
        r#""HttpClient": { "DangerousAcceptAnyServerCertificate": true },
           "HttpRequest": { "Version": "2", "ActivityTimeout": "00:00:30" },
           "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } }"#,
    );
    assert!(
        check(&applied).warnings.is_empty(),
        "{:#?}",
        check(&applied).warnings
    );
}

// ---------------------------------------------------------------------------------------------
// Another section than ReverseProxy

#[test]
fn check_section_reads_another_section_and_names_a_missing_one() {
    use healthpick::config::check_section;
    let text = r#"{
      "ReverseProxy": { "Clusters": { "public": { "Destinations": { "p": { "Address": "http://10.0.0.9/" } } } } },
      "ReverseProxy2": {
        "HealthPolicies": { "DefaultInterval": "00:00:07" },
        "Clusters": { "payments": { "Destinations": { "eu-1": { "Address": "not a url" } } } }
      }
    }"#;
    let registry = PolicyRegistry::default();
    let report = check_section(text, "reverseproxy2", &registry, false);
    assert_eq!(
        error_paths(&report),
        ["reverseproxy2:Clusters:payments:Destinations:eu-1:Address"]
    );
    let config = report.config.unwrap();
    assert_eq!(config.section(), "reverseproxy2:Clusters");
    assert_eq!(config.clusters().len(), 1);
    assert_eq!(config.clusters()[0].id(), "payments");
    assert_eq!(
        config.health_policies().unwrap().default_interval,
        std::time::Duration::from_secs(7)
    );
    // The default is untouched by the other section.
    assert_eq!(check(text).config.unwrap().clusters()[0].id(), "public");

    let missing = check_section(text, "ReverseProxy3", &registry, false);
    assert!(!missing.is_valid());
    assert_eq!(error_paths(&missing), ["ReverseProxy3"]);
    assert_eq!(
        missing.errors[0].message,
        "no section `ReverseProxy3` in the document (its keys: `ReverseProxy`, `ReverseProxy2`); did you mean `ReverseProxy`?"
    );
    assert!(missing.warnings.is_empty(), "{:#?}", missing.warnings);

    // Nested sections, .NET style.
    let nested = r#"{ "Gateway": { "Internal": { "Clusters": { "c": {} } } } }"#;
    let report = check_section(nested, "Gateway:Internal", &registry, false);
    assert!(report.is_valid(), "{:#?}", report.errors);
    assert_eq!(
        report.config.unwrap().section(),
        "Gateway:Internal:Clusters"
    );
    let report = check_section(nested, "Gateway:External", &registry, false);
    assert_eq!(error_paths(&report), ["Gateway:External"]);
    assert_eq!(
        report.errors[0].message,
        "no section `External` in `Gateway` (its keys: `Internal`); did you mean `Internal`?"
    );
}

/// Discovery sections warn about every unknown key (they are healthpick's own); a close one
/// says which key it meant.
#[test]
fn a_misspelt_discovery_key_says_which_key_it_meant() {
    let text = payments(
        r#""Discovery": { "Type": "Dns", "Name": "payments.service", "Port": 8080,
                          "MinRefesh": "00:00:10", "Colour": "blue" },
           "Destinations": {}"#,
    );
    let report = check(&text);
    let warnings: Vec<(&str, &str)> = report
        .warnings
        .iter()
        .map(|w| (w.path.as_str(), w.message.as_str()))
        .collect();
    assert!(
        warnings.contains(&(
            "ReverseProxy:Clusters:payments:Discovery:MinRefesh",
            "cluster `payments`: unknown key `MinRefesh`; did you mean `MinRefresh`?"
        )),
        "{warnings:#?}"
    );
    assert!(
        warnings.iter().any(
            |(p, m)| *p == "ReverseProxy:Clusters:payments:Discovery:Colour"
                && m.contains("`Colour` is not a key of this section and is ignored (known: ")
        ),
        "{warnings:#?}"
    );
}

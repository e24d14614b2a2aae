//! A cluster's traffic-shaping sections in a document: YARP's `SessionAffinity`, and
//! healthpick's `LoadSignals`, `TierSpill` and `SlowStart`. Every key is read, in any case; each
//! bad value is one error naming cluster, key path and value, all of them at once; settings built
//! in code meet the same rules; a refused reload keeps the settings in force; a YARP file's
//! `SessionAffinity` applies without a warning; the sections write out and load again.

use std::time::Duration;

use healthpick::config::{
    self, AffinityFailurePolicy, AffinityPolicy, CheckReport, ClusterConfig, DestinationConfig,
    LoadReportsConfig, LoadSignalsConfig, SessionAffinityConfig, Severity, SlowStartConfig,
    SpillMode, TierSpillConfig,
};
use healthpick::{Config, Diagnostic, Engine, PickError, PolicyRegistry, ProbeResult};

// ---------------------------------------------------------------------------------------------
// helpers

const P: &str = "ReverseProxy:Clusters:payments";

fn check(text: &str) -> CheckReport {
    config::check(text, &PolicyRegistry::default(), false)
}

/// A document whose cluster `payments` has `sections` and two destinations.
fn payments(sections: &str) -> String {
    format!(
        r#"{{ "ReverseProxy": {{ "Clusters": {{ "payments": {{
            {sections}
            "Destinations": {{
              "eu-1": {{ "Address": "http://10.0.0.1:8080/" }},
              "eu-2": {{ "Address": "http://10.0.0.2:8080/" }}
            }}
        }} }} }} }}"#
    )
}

fn load(text: &str) -> Config {
    Config::from_json(text).unwrap_or_else(|e| panic!("the document should load: {e}\n{text}"))
}

fn the_cluster(config: &Config) -> &ClusterConfig {
    config.find_cluster("payments").expect("cluster payments")
}

/// No error and no warning, in either mode.
fn assert_clean(text: &str) {
    for strict in [false, true] {
        let report = config::check(text, &PolicyRegistry::default(), strict);
        assert!(report.errors.is_empty(), "{text}\n{:#?}", report.errors);
        assert!(report.warnings.is_empty(), "{text}\n{:#?}", report.warnings);
    }
}

/// The only problem of `text` is an error at `path`; `Config::from_json` and
/// `Engine::from_json` refuse the document with that same error.
fn only_error(text: &str, path: &str) -> Diagnostic {
    let report = check(text);
    assert_eq!(
        report.errors.len(),
        1,
        "expected one error at {path}, got {:#?}",
        report.errors
    );
    assert!(report.warnings.is_empty(), "{:#?}", report.warnings);
    let error = report.errors[0].clone();
    assert_eq!(error.path, path);
    assert_eq!(error.severity, Severity::Error);
    let from_json = Config::from_json(text).expect_err("Config::from_json must refuse it");
    assert_eq!(from_json.errors, report.errors);
    let engine = Engine::from_json(text).expect_err("Engine::from_json must refuse it");
    assert_eq!(engine.errors, report.errors);
    error
}

fn assert_names(diag: &Diagnostic, parts: &[&str]) {
    for part in parts {
        assert!(
            diag.message.contains(part),
            "the message should name {part:?}: {}",
            diag.message
        );
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

// ---------------------------------------------------------------------------------------------
// reading every key

const EVERY_KEY: &str = r#"
    "SessionAffinity": {
      "Enabled": true,
      "Policy": "CustomHeader",
      "FailurePolicy": "Return503Error",
      "AffinityKeyName": "X-Cart",
      "BalanceFactor": 2
    },
    "LoadSignals": {
      "DecayTime": "00:00:05",
      "DefaultRtt": "50ms",
      "LoadReports": { "Enabled": false, "Blackout": "00:00:00", "Expiration": "00:01:00" }
    },
    "TierSpill": { "Mode": "Load", "UpperMark": 2.5, "LowerMark": "1.5", "Dwell": "00:00:30" },
    "SlowStart": { "Window": "00:01:00", "Aggression": "2", "MinWeightPercent": 25 },
"#;

#[test]
fn every_key_of_the_four_sections_is_read() {
    let text = payments(EVERY_KEY);
    assert_clean(&text);
    let config = load(&text);
    let c = the_cluster(&config);

    let affinity = c.session_affinity_setting().expect("enabled");
    assert_eq!(affinity.policy_setting(), AffinityPolicy::CustomHeader);
    assert_eq!(
        affinity.failure_policy_setting(),
        AffinityFailurePolicy::Return503Error
    );
    assert_eq!(affinity.affinity_key_name_setting(), "X-Cart");
    assert_eq!(affinity.balance_factor_setting(), 2.0);

    let signals = c.load_signals_setting();
    assert_eq!(signals.decay_time_setting(), secs(5));
    assert_eq!(signals.default_rtt_setting(), Duration::from_millis(50));
    let reports = signals.load_reports_setting();
    assert!(!reports.enabled_setting());
    assert_eq!(reports.blackout_setting(), Duration::ZERO);
    assert_eq!(reports.expiration_setting(), secs(60));

    let spill = c.tier_spill_setting();
    assert_eq!(spill.mode_setting(), SpillMode::Load);
    assert_eq!(spill.upper_mark_setting(), 2.5);
    assert_eq!(spill.lower_mark_setting(), 1.5);
    assert_eq!(spill.dwell_setting(), secs(30));

    let slow_start = c.slow_start_setting().expect("on");
    assert_eq!(slow_start.window_setting(), secs(60));
    assert_eq!(slow_start.aggression_setting(), 2.0);
    assert_eq!(slow_start.min_weight_percent_setting(), 25.0);

    // The same settings, built in code.
    let built = ClusterConfig::new("payments")
        .session_affinity(
            SessionAffinityConfig::new(AffinityPolicy::CustomHeader)
                .failure_policy(AffinityFailurePolicy::Return503Error)
                .affinity_key_name("X-Cart")
                .balance_factor(2.0),
        )
        .load_signals(
            LoadSignalsConfig::default()
                .decay_time(secs(5))
                .default_rtt(Duration::from_millis(50))
                .load_reports(
                    LoadReportsConfig::default()
                        .enabled(false)
                        .blackout(Duration::ZERO)
                        .expiration(secs(60)),
                ),
        )
        .tier_spill(
            TierSpillConfig::default()
                .mode(SpillMode::Load)
                .upper_mark(2.5)
                .lower_mark(1.5)
                .dwell(secs(30)),
        )
        .slow_start(
            SlowStartConfig::new(secs(60))
                .aggression(2.0)
                .min_weight_percent(25.0),
        )
        .destination(DestinationConfig::new("eu-1", "http://10.0.0.1:8080/"))
        .destination(DestinationConfig::new("eu-2", "http://10.0.0.2:8080/"));
    assert_eq!(c, &built);
}

#[test]
fn absent_sections_leave_every_default() {
    let text = payments("");
    assert_clean(&text);
    let config = load(&text);
    let c = the_cluster(&config);
    assert!(c.session_affinity_setting().is_none());
    assert!(c.slow_start_setting().is_none());
    let signals = c.load_signals_setting();
    assert_eq!(signals.decay_time_setting(), secs(10));
    assert_eq!(signals.default_rtt_setting(), Duration::from_millis(30));
    let reports = signals.load_reports_setting();
    assert!(reports.enabled_setting());
    assert_eq!(reports.blackout_setting(), secs(10));
    assert_eq!(reports.expiration_setting(), secs(180));
    let spill = c.tier_spill_setting();
    assert_eq!(spill.mode_setting(), SpillMode::Strict);
    assert_eq!(spill.upper_mark_setting(), 1.5);
    assert_eq!(spill.lower_mark_setting(), 1.2);
    assert_eq!(spill.dwell_setting(), secs(5));

    // Sections that set nothing are the defaults too (an empty `SlowStart` is off).
    let empty = payments(
        r#""SessionAffinity": {}, "LoadSignals": { "LoadReports": {} }, "TierSpill": {},
           "SlowStart": { "Window": null, "Aggression": "" },"#,
    );
    assert_clean(&empty);
    assert_eq!(load(&empty), config);
}

#[test]
fn section_defaults_fill_what_a_section_leaves_out() {
    let text = payments(
        r#""SessionAffinity": { "Enabled": true, "AffinityKeyName": ".Yarp.Affinity" },
           "LoadSignals": { "LoadReports": { "Blackout": "00:00:02" } },
           "TierSpill": { "Mode": "Load" },
           "SlowStart": { "Window": "00:00:30" },"#,
    );
    assert_clean(&text);
    let config = load(&text);
    let c = the_cluster(&config);
    let affinity = c.session_affinity_setting().expect("enabled");
    assert_eq!(affinity.policy_setting(), AffinityPolicy::HashCookie);
    assert_eq!(
        affinity.failure_policy_setting(),
        AffinityFailurePolicy::Redistribute
    );
    assert_eq!(affinity.balance_factor_setting(), 1.25);
    let reports = c.load_signals_setting().load_reports_setting();
    assert!(reports.enabled_setting());
    assert_eq!(reports.blackout_setting(), secs(2));
    assert_eq!(reports.expiration_setting(), secs(180));
    assert_eq!(c.load_signals_setting().decay_time_setting(), secs(10));
    let spill = c.tier_spill_setting();
    assert_eq!(
        (
            spill.upper_mark_setting(),
            spill.lower_mark_setting(),
            spill.dwell_setting()
        ),
        (1.5, 1.2, secs(5))
    );
    let slow_start = c.slow_start_setting().expect("on");
    assert_eq!(slow_start.aggression_setting(), 1.0);
    assert_eq!(slow_start.min_weight_percent_setting(), 10.0);
}

#[test]
fn keys_and_names_are_case_insensitive() {
    let shouted = payments(
        r#"
        "SESSIONAFFINITY": {
          "enabled": "TRUE",
          "policy": "customheader",
          "FAILUREPOLICY": "return503error",
          "affinitykeyname": "X-Cart",
          "balancefactor": "2"
        },
        "loadsignals": {
          "decaytime": "00:00:05",
          "DEFAULTRTT": "50ms",
          "loadReports": { "ENABLED": "false", "blackout": "00:00:00", "EXPIRATION": "00:01:00" }
        },
        "tierspill": { "MODE": "load", "uppermark": "2.5", "LOWERMARK": 1.5, "dwell": "00:00:30" },
        "slowSTART": { "WINDOW": "00:01:00", "aggression": 2, "minweightpercent": "25" },
    "#,
    );
    assert_clean(&shouted);
    assert_eq!(load(&shouted), load(&payments(EVERY_KEY)));
}

#[test]
fn every_affinity_policy_and_failure_policy_is_read() {
    for policy in AffinityPolicy::ALL {
        for failure in AffinityFailurePolicy::ALL {
            let text = payments(&format!(
                r#""SessionAffinity": {{ "Enabled": true, "Policy": "{}", "FailurePolicy": "{}",
                                         "AffinityKeyName": "k" }},"#,
                policy.name(),
                failure.name()
            ));
            assert_clean(&text);
            let config = load(&text);
            let affinity = the_cluster(&config)
                .session_affinity_setting()
                .expect("enabled");
            assert_eq!(affinity.policy_setting(), policy);
            assert_eq!(affinity.failure_policy_setting(), failure);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SessionAffinity as YARP writes it

/// A `SessionAffinity` section with every key YARP documents, its `Cookie` subsection included.
const YARP_AFFINITY: &str = r#"
    "SessionAffinity": {
      "Enabled": "true",
      "Policy": "HashCookie",
      "FailurePolicy": "Return503Error",
      "AffinityKeyName": ".Yarp.Affinity",
      "Cookie": {
        "Domain": "example.com",
        "Expiration": "03:00:00",
        "HttpOnly": true,
        "IsEssential": true,
        "MaxAge": "1.00:00:00",
        "Path": "/",
        "SameSite": "Strict",
        "SecurePolicy": "Always"
      }
    },
"#;

#[test]
fn a_yarp_session_affinity_section_loads_without_a_warning_and_applies() {
    let text = payments(YARP_AFFINITY);
    assert_clean(&text);
    let engine = Engine::from_json(&text).expect("loads");
    assert_eq!(
        engine.load_json(&text).expect("reloads"),
        [],
        "no warning on a reload either"
    );
    let config = load(&text);
    let affinity = the_cluster(&config)
        .session_affinity_setting()
        .expect("SessionAffinity applies");
    assert_eq!(affinity.policy_setting(), AffinityPolicy::HashCookie);
    assert_eq!(
        affinity.failure_policy_setting(),
        AffinityFailurePolicy::Return503Error
    );
    assert_eq!(affinity.affinity_key_name_setting(), ".Yarp.Affinity");
    assert_eq!(affinity.balance_factor_setting(), 1.25);

    // The engine applies it: a key picks the same destination every time.
    let first = engine
        .pick_endpoint_for_key("payments", "cart-7")
        .expect("pick");
    let home = first.destination().id().to_string();
    drop(first);
    for _ in 0..20 {
        let pick = engine
            .pick_endpoint_for_key("payments", "cart-7")
            .expect("pick");
        assert_eq!(pick.destination().id(), home);
    }
}

/// YARP's validator refuses an enabled section whose `AffinityKeyName` is null or empty; so
/// does healthpick. A disabled section needs none.
#[test]
fn an_enabled_session_affinity_needs_an_affinity_key_name_as_in_yarp() {
    for key in [
        "",
        r#""AffinityKeyName": null,"#,
        r#""AffinityKeyName": "","#,
    ] {
        let text = payments(&format!(
            r#""SessionAffinity": {{ {key} "Enabled": true, "Policy": "CustomHeader" }},"#
        ));
        let e = only_error(&text, &format!("{P}:SessionAffinity:AffinityKeyName"));
        assert_names(&e, &["cluster `payments`", "AffinityKeyName"]);
    }
    let disabled = payments(r#""SessionAffinity": { "Enabled": false, "Policy": "Cookie" },"#);
    assert_clean(&disabled);
    assert!(the_cluster(&load(&disabled))
        .session_affinity_setting()
        .is_none());
}

#[test]
fn a_session_affinity_section_without_enabled_true_is_off() {
    for enabled in [
        "",
        r#""Enabled": false,"#,
        r#""Enabled": "False","#,
        r#""Enabled": null,"#,
    ] {
        let text = payments(&format!(
            r#""SessionAffinity": {{ {enabled} "Policy": "CustomHeader", "AffinityKeyName": "X-Cart" }},"#
        ));
        assert_clean(&text);
        assert!(
            the_cluster(&load(&text))
                .session_affinity_setting()
                .is_none(),
            "{enabled}"
        );
    }
}

/// YARP does not validate a disabled section; its bad values are warnings here (errors in
/// strict mode), as the settings of a disabled health check are.
#[test]
fn a_disabled_session_affinity_s_bad_values_are_warnings() {
    let text = payments(
        r#""SessionAffinity": { "Enabled": false, "Policy": "Sticky",
                                "FailurePolicy": "Return503", "BalanceFactor": "0.5" },"#,
    );
    let report = check(&text);
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    let warned: Vec<&str> = report.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(
        warned,
        [
            format!("{P}:SessionAffinity:Policy"),
            format!("{P}:SessionAffinity:FailurePolicy"),
            format!("{P}:SessionAffinity:BalanceFactor"),
        ]
    );
    for w in &report.warnings {
        assert!(
            w.message
                .ends_with("(ignored while SessionAffinity is disabled)"),
            "{w}"
        );
    }
    assert_names(&report.warnings[0], &["`payments`", "Policy", "`Sticky`"]);
    let strict = config::check(&text, &PolicyRegistry::default(), true);
    assert_eq!(strict.errors.len(), 3, "{:#?}", strict.errors);
}

// ---------------------------------------------------------------------------------------------
// bad values

/// Each case: the cluster's sections, the key path under the cluster, and what the message must
/// name (the key and the value as written).
const BAD_VALUES: &[(&str, &str, &[&str])] = &[
    (
        r#""SessionAffinity": { "Enabled": "yes", "AffinityKeyName": "k" },"#,
        "SessionAffinity:Enabled",
        &["Enabled", "`yes`", "true or false"],
    ),
    (
        r#""SessionAffinity": { "Enabled": true, "Policy": "Sticky", "AffinityKeyName": "k" },"#,
        "SessionAffinity:Policy",
        &[
            "Policy",
            "`Sticky`",
            "HashCookie, ArrCookie, Cookie, CustomHeader",
        ],
    ),
    (
        r#""SessionAffinity": { "Enabled": true, "FailurePolicy": "Return503", "AffinityKeyName": "k" },"#,
        "SessionAffinity:FailurePolicy",
        &[
            "FailurePolicy",
            "`Return503`",
            "Redistribute, Return503Error",
        ],
    ),
    (
        r#""SessionAffinity": { "Enabled": true, "AffinityKeyName": "k", "BalanceFactor": "0.5" },"#,
        "SessionAffinity:BalanceFactor",
        &["BalanceFactor", "`0.5`", "at least 1"],
    ),
    (
        r#""SessionAffinity": { "Enabled": true, "AffinityKeyName": "k", "BalanceFactor": "lots" },"#,
        "SessionAffinity:BalanceFactor",
        &["BalanceFactor", "`lots`", "not a number"],
    ),
    (
        r#""SessionAffinity": { "Enabled": true, "AffinityKeyName": "k", "BalanceFactor": "Infinity" },"#,
        "SessionAffinity:BalanceFactor",
        &["BalanceFactor", "`Infinity`", "not a number"],
    ),
    (
        r#""LoadSignals": { "DecayTime": "00:00:00" },"#,
        "LoadSignals:DecayTime",
        &["DecayTime", "`00:00:00`", "positive"],
    ),
    (
        r#""LoadSignals": { "DecayTime": "ten seconds" },"#,
        "LoadSignals:DecayTime",
        &["DecayTime", "`ten seconds`", "not a TimeSpan"],
    ),
    (
        r#""LoadSignals": { "DefaultRtt": "-00:00:01" },"#,
        "LoadSignals:DefaultRtt",
        &["DefaultRtt", "`-00:00:01`", "positive"],
    ),
    (
        r#""LoadSignals": { "LoadReports": { "Enabled": "1" } },"#,
        "LoadSignals:LoadReports:Enabled",
        &["Enabled", "`1`"],
    ),
    (
        r#""LoadSignals": { "LoadReports": { "Blackout": "-00:00:05" } },"#,
        "LoadSignals:LoadReports:Blackout",
        &["Blackout", "`-00:00:05`", "negative"],
    ),
    (
        r#""LoadSignals": { "LoadReports": { "Expiration": "0s" } },"#,
        "LoadSignals:LoadReports:Expiration",
        &["Expiration", "`0s`", "positive"],
    ),
    (
        r#""TierSpill": { "Mode": "Spill" },"#,
        "TierSpill:Mode",
        &["Mode", "`Spill`", "Strict, Load"],
    ),
    (
        r#""TierSpill": { "UpperMark": "high" },"#,
        "TierSpill:UpperMark",
        &["UpperMark", "`high`", "not a number"],
    ),
    (
        r#""TierSpill": { "LowerMark": "NaN" },"#,
        "TierSpill:LowerMark",
        &["LowerMark", "`NaN`", "not a number"],
    ),
    (
        r#""TierSpill": { "LowerMark": 0.9, "UpperMark": 1.5 },"#,
        "TierSpill:LowerMark",
        &["LowerMark", "`0.9`", "at least 1"],
    ),
    (
        // Against the default LowerMark 1.2.
        r#""TierSpill": { "Mode": "Load", "UpperMark": 1.1 },"#,
        "TierSpill:UpperMark",
        &["UpperMark `1.1`", "LowerMark `1.2`"],
    ),
    (
        r#""TierSpill": { "UpperMark": 2, "LowerMark": 2 },"#,
        "TierSpill:UpperMark",
        &["UpperMark `2`", "LowerMark `2`"],
    ),
    (
        r#""TierSpill": { "Dwell": "-00:00:01" },"#,
        "TierSpill:Dwell",
        &["Dwell", "`-00:00:01`", "negative"],
    ),
    (
        r#""SlowStart": { "Window": "00:00:00" },"#,
        "SlowStart:Window",
        &["Window", "`00:00:00`", "positive"],
    ),
    (
        r#""SlowStart": { "Aggression": 2 },"#,
        "SlowStart:Window",
        &["SlowStart needs a Window"],
    ),
    (
        r#""SlowStart": { "Window": "00:00:30", "Aggression": 0 },"#,
        "SlowStart:Aggression",
        &["Aggression", "`0`", "positive"],
    ),
    (
        r#""SlowStart": { "Window": "00:00:30", "Aggression": "-1" },"#,
        "SlowStart:Aggression",
        &["Aggression", "`-1`", "positive"],
    ),
    (
        r#""SlowStart": { "Window": "00:00:30", "MinWeightPercent": 101 },"#,
        "SlowStart:MinWeightPercent",
        &["MinWeightPercent", "`101`", "0 to 100"],
    ),
    (
        r#""SlowStart": { "Window": "00:00:30", "MinWeightPercent": "-1" },"#,
        "SlowStart:MinWeightPercent",
        &["MinWeightPercent", "`-1`", "0 to 100"],
    ),
    (
        r#""TierSpill": "Load","#,
        "TierSpill",
        &["TierSpill must be an object"],
    ),
];

#[test]
fn each_bad_value_is_one_error_naming_cluster_key_path_and_value() {
    for (sections, key, names) in BAD_VALUES {
        let text = payments(sections);
        let e = only_error(&text, &format!("{P}:{key}"));
        assert_names(&e, &["cluster `payments`"]);
        assert_names(&e, names);
    }
}

#[test]
fn every_problem_of_every_section_is_reported_at_once_in_document_order() {
    let text = r#"{ "ReverseProxy": { "Clusters": {
        "payments": {
          "SlowStart": { "Window": "00:00:30", "Aggression": 0, "MinWeightPercent": 200 },
          "TierSpill": { "Mode": "Sometimes", "LowerMark": 0.5, "Dwell": "-00:00:01" },
          "LoadSignals": { "DecayTime": "0s", "LoadReports": { "Blackout": "x", "Expiration": "00:00:00" } },
          "SessionAffinity": { "Enabled": true, "Policy": "Sticky", "BalanceFactor": 0 },
          "Destinations": { "eu-1": { "Address": "http://10.0.0.1:8080/" } }
        },
        "orders": {
          "TierSpill": { "UpperMark": 1.0 },
          "SlowStart": { "MinWeightPercent": 5 },
          "Destinations": { "o-1": { "Address": "http://10.0.1.1:8080/" } }
        }
    } } }"#;
    let report = check(text);
    let paths: Vec<&str> = report.errors.iter().map(|e| e.path.as_str()).collect();
    let o = "ReverseProxy:Clusters:orders";
    assert_eq!(
        paths,
        [
            format!("{P}:SessionAffinity:Policy"),
            format!("{P}:SessionAffinity:AffinityKeyName"),
            format!("{P}:SessionAffinity:BalanceFactor"),
            format!("{P}:LoadSignals:DecayTime"),
            format!("{P}:LoadSignals:LoadReports:Blackout"),
            format!("{P}:LoadSignals:LoadReports:Expiration"),
            format!("{P}:TierSpill:Mode"),
            format!("{P}:TierSpill:LowerMark"),
            format!("{P}:TierSpill:Dwell"),
            format!("{P}:SlowStart:Aggression"),
            format!("{P}:SlowStart:MinWeightPercent"),
            format!("{o}:TierSpill:UpperMark"),
            format!("{o}:SlowStart:Window"),
        ],
        "{:#?}",
        report.errors
    );
    assert!(report.warnings.is_empty(), "{:#?}", report.warnings);
    let err = Engine::from_json(text).expect_err("refused");
    assert_eq!(err.errors, report.errors);
}

#[test]
fn a_misspelt_key_gets_a_did_you_mean_warning() {
    let cases = [
        (
            r#""SesionAffinity": {},"#,
            "SesionAffinity",
            "SessionAffinity",
        ),
        (r#""LoadSignal": {},"#, "LoadSignal", "LoadSignals"),
        (r#""TierSpil": {},"#, "TierSpil", "TierSpill"),
        (r#""SlowStrat": {},"#, "SlowStrat", "SlowStart"),
        (
            r#""SessionAffinity": { "Enabled": true, "AffinityKeyName": "k", "FailurePolicyy": "Redistribute" },"#,
            "SessionAffinity:FailurePolicyy",
            "FailurePolicy",
        ),
        (
            r#""SessionAffinity": { "Enabled": true, "AffinityKeyName": "k", "BalanceFacter": 2 },"#,
            "SessionAffinity:BalanceFacter",
            "BalanceFactor",
        ),
        (
            r#""LoadSignals": { "DecayTme": "00:00:05" },"#,
            "LoadSignals:DecayTme",
            "DecayTime",
        ),
        (
            r#""LoadSignals": { "LoadReport": {} },"#,
            "LoadSignals:LoadReport",
            "LoadReports",
        ),
        (
            r#""LoadSignals": { "LoadReports": { "Blackot": "00:00:01" } },"#,
            "LoadSignals:LoadReports:Blackot",
            "Blackout",
        ),
        (
            r#""TierSpill": { "UperMark": 2 },"#,
            "TierSpill:UperMark",
            "UpperMark",
        ),
        (
            r#""SlowStart": { "Window": "00:00:30", "MinWeightPrecent": 5 },"#,
            "SlowStart:MinWeightPrecent",
            "MinWeightPercent",
        ),
    ];
    for (sections, key, meant) in cases {
        let report = check(&payments(sections));
        assert!(report.errors.is_empty(), "{sections}: {:#?}", report.errors);
        assert_eq!(
            report.warnings.len(),
            1,
            "{sections}: {:#?}",
            report.warnings
        );
        let w = &report.warnings[0];
        assert_eq!(w.path, format!("{P}:{key}"));
        let typo = key.rsplit(':').next().unwrap_or(key);
        assert_eq!(
            w.message,
            format!("cluster `payments`: unknown key `{typo}`; did you mean `{meant}`?")
        );
    }
}

#[test]
fn unknown_keys_of_healthpick_s_sections_are_warnings_and_yarp_s_are_ignored() {
    // Healthpick's sections have no keys of other tools: an unknown one is a warning.
    let report = check(&payments(r#""TierSpill": { "Threshold": 2 },"#));
    assert!(report.errors.is_empty(), "{:#?}", report.errors);
    assert_eq!(report.warnings.len(), 1, "{:#?}", report.warnings);
    assert_eq!(report.warnings[0].path, format!("{P}:TierSpill:Threshold"));
    assert!(
        report.warnings[0]
            .message
            .contains("`Threshold` is not a key of this section"),
        "{}",
        report.warnings[0].message
    );
    // YARP's section may carry keys of other YARP versions: far from any known key, ignored.
    assert_clean(&payments(
        r#""SessionAffinity": { "Enabled": true, "AffinityKeyName": "k", "Provider": "Cookie" },"#,
    ));
}

// ---------------------------------------------------------------------------------------------
// settings built in code

#[test]
fn settings_built_in_code_are_validated_like_a_document() {
    let bad = ClusterConfig::new("c")
        .session_affinity(
            SessionAffinityConfig::new(AffinityPolicy::Cookie)
                .affinity_key_name("")
                .balance_factor(0.5),
        )
        .load_signals(
            LoadSignalsConfig::default()
                .decay_time(Duration::ZERO)
                .default_rtt(Duration::ZERO)
                .load_reports(LoadReportsConfig::default().expiration(Duration::ZERO)),
        )
        .tier_spill(
            TierSpillConfig::default()
                .upper_mark(f64::NAN)
                .lower_mark(0.5),
        )
        .slow_start(
            SlowStartConfig::new(Duration::ZERO)
                .aggression(f64::INFINITY)
                .min_weight_percent(150.0),
        )
        .destination(DestinationConfig::new("d", "http://10.0.0.1:8080/"));
    let err = Engine::new(Config::new().cluster(bad.clone())).expect_err("refused");
    let paths: Vec<&str> = err.errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "Clusters:c:SessionAffinity:AffinityKeyName",
            "Clusters:c:SessionAffinity:BalanceFactor",
            "Clusters:c:LoadSignals:DecayTime",
            "Clusters:c:LoadSignals:DefaultRtt",
            "Clusters:c:LoadSignals:LoadReports:Expiration",
            "Clusters:c:TierSpill:UpperMark",
            "Clusters:c:TierSpill:LowerMark",
            "Clusters:c:SlowStart:Window",
            "Clusters:c:SlowStart:Aggression",
            "Clusters:c:SlowStart:MinWeightPercent",
        ],
        "{:#?}",
        err.errors
    );
    for (e, value) in err.errors.iter().zip([
        "must not be empty",
        "`0.5`",
        "`00:00:00`",
        "`00:00:00`",
        "`00:00:00`",
        "`NaN`",
        "`0.5`",
        "`00:00:00`",
        "`inf`",
        "`150`",
    ]) {
        assert_names(e, &["cluster `c`", value]);
    }

    // A running engine refuses it the same way and keeps what it has.
    let good = Config::new().cluster(
        ClusterConfig::new("c")
            .tier_spill(TierSpillConfig::default().mode(SpillMode::Load))
            .destination(DestinationConfig::new("d", "http://10.0.0.1:8080/")),
    );
    let engine = Engine::new(good).expect("valid");
    let refused = engine
        .apply_config(Config::new().cluster(bad))
        .expect_err("refused");
    assert_eq!(refused.errors, err.errors);
    assert_eq!(engine.config_status().generation, 1);
    assert!(engine.config_status().last_error.is_some());
    assert_eq!(
        engine
            .pick_endpoint("c")
            .expect("still picks")
            .destination()
            .id(),
        "d"
    );
}

// ---------------------------------------------------------------------------------------------
// reloads

/// `payments` with `Return503Error` affinity and active checks that eject at the first failure.
fn affinity_doc(failure_policy: &str, extra: &str) -> String {
    payments(&format!(
        r#""SessionAffinity": {{ "Enabled": true, "Policy": "CustomHeader",
                                 "FailurePolicy": "{failure_policy}", "AffinityKeyName": "X-Cart" }},
           "HealthCheck": {{ "Active": {{ "Enabled": true }} }},
           "Metadata": {{ "ConsecutiveFailuresHealthPolicy.Threshold": "1" }},
           {extra}"#
    ))
}

#[test]
fn a_bad_reload_keeps_the_traffic_settings_in_force() {
    let engine = Engine::from_json(&affinity_doc("Return503Error", "")).expect("loads");
    let home = engine
        .pick_endpoint_for_key("payments", "cart-1")
        .expect("pick")
        .destination()
        .id()
        .to_string();
    let other = if home == "eu-1" { "eu-2" } else { "eu-1" };
    engine
        .report_probe_round(
            "payments",
            &[
                ProbeResult::error(home.clone(), "connection refused"),
                ProbeResult::status(other, 200),
            ],
        )
        .expect("cluster exists");
    let refused = |engine: &Engine| {
        matches!(
            engine.pick_endpoint_for_key("payments", "cart-1"),
            Err(PickError::AffinityUnavailable { .. })
        )
    };
    assert!(refused(&engine), "Return503Error is in force");

    // Reloads with Redistribute, each with one bad value of another section: refused whole.
    for bad in [
        r#""TierSpill": { "Mode": "Load", "UpperMark": 1.1 },"#,
        r#""SlowStart": { "Aggression": 2 },"#,
        r#""LoadSignals": { "DecayTime": "00:00:00" },"#,
    ] {
        let err = engine
            .load_json(&affinity_doc("Redistribute", bad))
            .expect_err("refused");
        assert_eq!(err.errors.len(), 1, "{bad}: {:#?}", err.errors);
        assert!(refused(&engine), "{bad}: the old SessionAffinity stays");
    }
    let status = engine.config_status();
    assert_eq!(status.generation, 1);
    assert!(status.last_error.is_some());

    // A good reload applies: the key now goes to its next choice.
    engine
        .load_json(&affinity_doc(
            "Redistribute",
            r#""TierSpill": { "Mode": "Load" },"#,
        ))
        .expect("good reload");
    let pick = engine
        .pick_endpoint_for_key("payments", "cart-1")
        .expect("redistributed");
    assert_eq!(pick.destination().id(), other);
}

// ---------------------------------------------------------------------------------------------
// writing (feature `serde`)

#[cfg(feature = "serde")]
mod written {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(config: &Config) -> Result<(), String> {
        let json = serde_json::to_string(config).map_err(|e| e.to_string())?;
        let again = Config::from_json(&json).map_err(|e| format!("{e}\n{json}"))?;
        if &again != config {
            return Err(format!("JSON: {again:#?}\n!= {config:#?}\n{json}"));
        }
        let toml_text = toml::to_string(config).map_err(|e| e.to_string())?;
        let from_toml: Config =
            toml::from_str(&toml_text).map_err(|e| format!("{e}\n{toml_text}"))?;
        if &from_toml != config {
            return Err(format!("TOML: {toml_text}"));
        }
        let yaml_text = serde_norway::to_string(config).map_err(|e| e.to_string())?;
        let from_yaml: Config =
            serde_norway::from_str(&yaml_text).map_err(|e| format!("{e}\n{yaml_text}"))?;
        if &from_yaml != config {
            return Err(format!("YAML: {yaml_text}"));
        }
        Ok(())
    }

    #[test]
    fn every_key_writes_out_and_loads_again() {
        let config = load(&payments(EVERY_KEY));
        round_trip(&config).unwrap_or_else(|e| panic!("{e}"));
        let value = serde_json::to_value(&config).expect("serialize");
        let c = &value["ReverseProxy"]["Clusters"]["payments"];
        assert_eq!(
            c["SessionAffinity"],
            serde_json::json!({
                "Enabled": true, "Policy": "CustomHeader", "FailurePolicy": "Return503Error",
                "AffinityKeyName": "X-Cart", "BalanceFactor": 2.0
            })
        );
        assert_eq!(
            c["LoadSignals"],
            serde_json::json!({
                "DecayTime": "00:00:05", "DefaultRtt": "00:00:00.0500000",
                "LoadReports": { "Enabled": false, "Blackout": "00:00:00", "Expiration": "00:01:00" }
            })
        );
        assert_eq!(
            c["TierSpill"],
            serde_json::json!({
                "Mode": "Load", "UpperMark": 2.5, "LowerMark": 1.5, "Dwell": "00:00:30"
            })
        );
        assert_eq!(
            c["SlowStart"],
            serde_json::json!({ "Window": "00:01:00", "Aggression": 2.0, "MinWeightPercent": 25.0 })
        );
    }

    #[test]
    fn defaults_are_left_out_of_the_written_document() {
        let config = load(&payments(
            r#""SessionAffinity": { "Enabled": true, "AffinityKeyName": "k" },
               "LoadSignals": { "DecayTime": "00:00:10", "LoadReports": { "Blackout": "00:00:02" } },
               "TierSpill": { "Mode": "Strict", "Dwell": "00:00:05" },
               "SlowStart": { "Window": "00:00:30", "Aggression": 1 },"#,
        ));
        round_trip(&config).unwrap_or_else(|e| panic!("{e}"));
        let value = serde_json::to_value(&config).expect("serialize");
        let c = &value["ReverseProxy"]["Clusters"]["payments"];
        // YARP's keys are written as held (its section needs AffinityKeyName); healthpick's
        // only where they differ from the defaults.
        assert_eq!(
            c["SessionAffinity"],
            serde_json::json!({
                "Enabled": true, "Policy": "HashCookie", "FailurePolicy": "Redistribute",
                "AffinityKeyName": "k"
            })
        );
        assert_eq!(
            c["LoadSignals"],
            serde_json::json!({ "LoadReports": { "Blackout": "00:00:02" } })
        );
        assert!(c.get("TierSpill").is_none(), "{c}");
        assert_eq!(c["SlowStart"], serde_json::json!({ "Window": "00:00:30" }));

        let plain = load(&payments(""));
        let value = serde_json::to_value(&plain).expect("serialize");
        let c = &value["ReverseProxy"]["Clusters"]["payments"];
        for section in ["SessionAffinity", "LoadSignals", "TierSpill", "SlowStart"] {
            assert!(c.get(section).is_none(), "{section}: {c}");
        }
    }

    /// A duration a document can hold exactly: whole 100 ns ticks.
    fn ticks(range: std::ops::RangeInclusive<u64>) -> impl Strategy<Value = Duration> {
        range.prop_map(|t| Duration::from_nanos(t * 100))
    }

    prop_compose! {
        fn affinity()(
            policy in prop::sample::select(AffinityPolicy::ALL.to_vec()),
            failure in prop::sample::select(AffinityFailurePolicy::ALL.to_vec()),
            name in "X-[A-Za-z0-9.]{1,12}",
            factor in prop_oneof![Just(1.25), 1.0..50.0f64],
        ) -> SessionAffinityConfig {
            SessionAffinityConfig::new(policy)
                .failure_policy(failure)
                .affinity_key_name(name)
                .balance_factor(factor)
        }
    }

    prop_compose! {
        fn load_signals()(
            decay in ticks(1..=10_000_000_000),
            rtt in ticks(1..=100_000_000),
            enabled in any::<bool>(),
            blackout in ticks(0..=10_000_000_000),
            expiration in ticks(1..=10_000_000_000),
            default in any::<bool>(),
        ) -> LoadSignalsConfig {
            if default {
                return LoadSignalsConfig::default();
            }
            LoadSignalsConfig::default()
                .decay_time(decay)
                .default_rtt(rtt)
                .load_reports(
                    LoadReportsConfig::default()
                        .enabled(enabled)
                        .blackout(blackout)
                        .expiration(expiration),
                )
        }
    }

    prop_compose! {
        fn tier_spill()(
            mode in prop::sample::select(SpillMode::ALL.to_vec()),
            lower in prop_oneof![Just(1.2), 1.0..5.0f64],
            gap in prop_oneof![Just(0.3), 1e-6..10.0f64],
            dwell in ticks(0..=10_000_000_000),
        ) -> TierSpillConfig {
            TierSpillConfig::default()
                .mode(mode)
                .lower_mark(lower)
                .upper_mark(lower + gap)
                .dwell(dwell)
        }
    }

    prop_compose! {
        fn slow_start()(
            window in ticks(1..=100_000_000_000),
            aggression in prop_oneof![Just(1.0), 1e-3..100.0f64],
            percent in prop_oneof![Just(10.0), Just(0.0), Just(100.0), 0.0..=100.0f64],
        ) -> SlowStartConfig {
            SlowStartConfig::new(window)
                .aggression(aggression)
                .min_weight_percent(percent)
        }
    }

    fn cluster() -> impl Strategy<Value = ClusterConfig> {
        (
            prop::option::of(affinity()),
            load_signals(),
            tier_spill(),
            prop::option::of(slow_start()),
        )
            .prop_map(|(affinity, signals, spill, slow_start)| {
                let mut cluster = ClusterConfig::new("c")
                    .load_signals(signals)
                    .tier_spill(spill)
                    .destination(DestinationConfig::new("d", "http://10.0.0.1:8080/"));
                if let Some(affinity) = affinity {
                    cluster = cluster.session_affinity(affinity);
                }
                if let Some(slow_start) = slow_start {
                    cluster = cluster.slow_start(slow_start);
                }
                cluster
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// What the module documentation promises: a configuration written as YARP JSON (or
        /// TOML, or YAML) loads again to an equal one, whatever its traffic settings.
        #[test]
        fn random_traffic_settings_round_trip(cluster in cluster()) {
            let config = Config::new().cluster(cluster);
            prop_assert!(Engine::new(config.clone()).is_ok(), "the generator makes valid settings");
            let outcome = round_trip(&config);
            prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
        }
    }
}

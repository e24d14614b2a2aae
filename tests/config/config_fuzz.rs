//! Property tests of the configuration reader: no input makes it panic, and every
//! document is either a usable configuration or comes with at least one error.
//!
//! Three sources of input: arbitrary text; random mutations of the realistic fixtures under
//! `tests/fixtures/yarp/`; random JSON values (and huge numbers, deep nesting, long strings)
//! placed at every key of a valid document.

use std::sync::OnceLock;

use healthpick::config;
use healthpick::{Config, Engine, PickError, PolicyRegistry, ProbeResult, RequestOutcome};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------------
// the property every input must satisfy

fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: n,
        // Keep the source tree clean: a failure prints its minimal input instead.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn registry() -> &'static PolicyRegistry {
    static REGISTRY: OnceLock<PolicyRegistry> = OnceLock::new();
    REGISTRY.get_or_init(PolicyRegistry::default)
}

/// Reads `text` every way the crate offers and checks that the answers agree: a document is
/// valid (a config, no errors) or has errors; strict mode adds exactly the warnings as errors;
/// `Config::from_json` and `Engine::from_json` agree with `check`; a valid document routes only to
/// its own clusters' destinations, takes probe results and outcomes, and shows a status.
fn assert_consistent(text: &str) -> Result<(), TestCaseError> {
    let report = config::check(text, registry(), false);
    prop_assert!(
        report.is_valid() || !report.errors.is_empty(),
        "neither a config nor an error"
    );
    for diag in report.errors.iter().chain(&report.warnings) {
        prop_assert!(!diag.message.is_empty(), "empty message at {}", diag.path);
    }

    let strict = config::check(text, registry(), true);
    prop_assert!(strict.warnings.is_empty());
    prop_assert_eq!(
        strict.errors.len(),
        report.errors.len() + report.warnings.len()
    );

    let from_json = Config::from_json(text);
    prop_assert_eq!(from_json.is_ok(), report.is_valid());
    if let Err(err) = &from_json {
        prop_assert_eq!(&err.errors, &report.errors);
        let _ = err.to_string();
    }

    match Engine::from_json(text) {
        Err(err) => {
            prop_assert!(!report.is_valid());
            prop_assert_eq!(&err.errors, &report.errors);
        }
        Ok(engine) => {
            prop_assert!(report.is_valid(), "engine loaded an invalid document");
            exercise(&engine)?;
        }
    }
    Ok(())
}

/// Picks from every cluster, reports outcomes and a failed probe round, reads the status.
fn exercise(engine: &Engine) -> Result<(), TestCaseError> {
    for id in engine.cluster_ids() {
        for _ in 0..3 {
            match engine.pick_endpoint(&id) {
                Ok(pick) => {
                    prop_assert_eq!(
                        pick.destination().cluster_id(),
                        id.as_str(),
                        "a pick returned another cluster's destination"
                    );
                    pick.report(RequestOutcome::TransportFailure);
                }
                Err(PickError::NoAvailableDestinations { .. }) => {}
                Err(other) => prop_assert!(false, "pick from `{}` failed: {}", id, other),
            }
        }
        let results: Vec<ProbeResult> = engine
            .status()
            .cluster(&id)
            .map(|c| {
                c.destinations
                    .iter()
                    .map(|d| ProbeResult::error(d.id.clone(), "refused"))
                    .collect()
            })
            .unwrap_or_default();
        engine
            .report_probe_round(&id, &results)
            .map_err(|e| TestCaseError::fail(format!("probe round of `{id}`: {e}")))?;
        let _ = engine.best_endpoints(&id);
    }
    let _ = serde_json::to_string(&engine.status());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 1. arbitrary text

/// Pieces of JSON and of YARP documents, so random sequences get past the tokenizer.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    " ",
    "\n",
    "//c\n",
    "/*",
    "*/",
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1.5",
    "1e308",
    "99999999999999999999999",
    "\"\"",
    "\"ReverseProxy\"",
    "\"Clusters\"",
    "\"c\"",
    "\"C\"",
    "\"Destinations\"",
    "\"d\"",
    "\"Address\"",
    "\"http://127.0.0.1:1/\"",
    "\"localhost:1\"",
    "\"HealthCheck\"",
    "\"Active\"",
    "\"Passive\"",
    "\"Enabled\"",
    "\"Interval\"",
    "\"00:00:05\"",
    "\"24:00:00\"",
    "\"10s\"",
    "\"Policy\"",
    "\"LoadBalancingPolicy\"",
    "\"RoundRobin\"",
    "\"Priority\"",
    "\"Metadata\"",
    "\"ConsecutiveFailuresHealthPolicy.Threshold\"",
    "\"HealthPolicies\"",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"😀\"",
    "\u{feff}",
    "\\",
];

fn token_soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..120).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(cases(512))]

    #[test]
    fn arbitrary_unicode_text_never_panics(text in any::<String>()) {
        assert_consistent(&text)?;
    }

    #[test]
    fn arbitrary_printable_text_never_panics(text in "\\PC{0,400}") {
        assert_consistent(&text)?;
    }

    #[test]
    fn json_token_soup_never_panics(text in token_soup()) {
        assert_consistent(&text)?;
    }
}

// ---------------------------------------------------------------------------------------------
// 2. mutations of realistic documents

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/yarp/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

fn fixtures() -> &'static [String] {
    static FIXTURES: OnceLock<Vec<String>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        [
            "gateway.appsettings.json",
            "orders.appsettings.Production.json",
            "bare-clusters.json",
        ]
        .into_iter()
        .map(fixture)
        .collect()
    })
}

/// Characters a mutation inserts.
const INSERTED: &[char] = &[
    '{', '}', '[', ']', ':', ',', '"', '/', '*', '\n', '0', '1', '2', '3', '4', '5', '6', '7', '8',
    '9', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r',
    's', 't', 'u', 'v', 'w', 'x', 'y', 'z',
];

#[derive(Debug, Clone)]
enum Mutation {
    Delete(Index),
    Insert(Index, char),
    Duplicate { start: Index, len: usize, at: Index },
    SwapValues(Index, Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Delete),
        (any::<Index>(), prop::sample::select(INSERTED)).prop_map(|(i, c)| Mutation::Insert(i, c)),
        (any::<Index>(), 1usize..64, any::<Index>())
            .prop_map(|(start, len, at)| Mutation::Duplicate { start, len, at }),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapValues(a, b)),
    ]
}

/// Spans (in chars) of the scalar literals of a JSON text: strings, numbers and words.
fn literal_spans(text: &[char]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let start = i;
        match text[i] {
            '"' => {
                i += 1;
                while i < text.len() && text[i] != '"' {
                    i += if text[i] == '\\' { 2 } else { 1 };
                }
                i = (i + 1).min(text.len());
                spans.push((start, i));
            }
            c if c == '-' || c.is_ascii_digit() => {
                while i < text.len()
                    && (text[i].is_ascii_digit() || matches!(text[i], '-' | '+' | '.' | 'e' | 'E'))
                {
                    i += 1;
                }
                spans.push((start, i));
            }
            c if c.is_ascii_alphabetic() => {
                while i < text.len() && text[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                spans.push((start, i));
            }
            _ => i += 1,
        }
    }
    spans
}

fn apply(text: &str, mutations: &[Mutation]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for m in mutations {
        match m {
            Mutation::Delete(i) => {
                if !chars.is_empty() {
                    chars.remove(i.index(chars.len()));
                }
            }
            Mutation::Insert(i, c) => {
                let at = i.index(chars.len() + 1);
                chars.insert(at, *c);
            }
            Mutation::Duplicate { start, len, at } => {
                if !chars.is_empty() {
                    let s = start.index(chars.len());
                    let e = (s + len).min(chars.len());
                    let slice: Vec<char> = chars[s..e].to_vec();
                    let at = at.index(chars.len() + 1);
                    chars.splice(at..at, slice);
                }
            }
            Mutation::SwapValues(a, b) => {
                let spans = literal_spans(&chars);
                if spans.len() >= 2 {
                    let (x, y) = (a.index(spans.len()), b.index(spans.len()));
                    let (first, second) = (spans[x.min(y)], spans[x.max(y)]);
                    if first != second {
                        let one: Vec<char> = chars[first.0..first.1].to_vec();
                        let two: Vec<char> = chars[second.0..second.1].to_vec();
                        // The later span first, so the earlier span's indices stay valid.
                        chars.splice(second.0..second.1, one);
                        chars.splice(first.0..first.1, two);
                    }
                }
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn the_unmutated_fixtures_are_valid() {
    // Not strict: one fixture carries a negative Interval on a disabled check, which YARP
    // accepts and healthpick reports as a warning.
    for text in fixtures() {
        let report = config::check(text, registry(), false);
        assert!(report.is_valid(), "{:#?}", report.errors);
    }
}

proptest! {
    #![proptest_config(cases(384))]

    #[test]
    fn mutated_realistic_documents_never_panic(
        which in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..8),
    ) {
        let base = &fixtures()[which.index(fixtures().len())];
        let text = apply(base, &mutations);
        assert_consistent(&text)?;
    }

    /// Reloading a mutated document into a running engine either applies it or leaves the
    /// engine exactly as it was.
    #[test]
    fn mutated_reloads_apply_fully_or_not_at_all(
        which in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let base = &fixtures()[which.index(fixtures().len())];
        let engine = Engine::from_json(base).expect("fixture loads");
        let before_ids = engine.cluster_ids();
        let before = serde_json::to_value(engine.status().clusters).expect("serialises");
        let text = apply(base, &mutations);
        let valid = config::check(&text, registry(), false).is_valid();
        match engine.load_json(&text) {
            Ok(_) => prop_assert!(valid),
            Err(err) => {
                prop_assert!(!valid);
                prop_assert!(!err.errors.is_empty());
                prop_assert_eq!(engine.cluster_ids(), before_ids);
                let after = serde_json::to_value(engine.status().clusters).expect("serialises");
                prop_assert_eq!(after, before);
            }
        }
        exercise(&engine)?;
    }
}

// ---------------------------------------------------------------------------------------------
// 3. random JSON values at every key

/// Slots of the template: a marker and the valid JSON it stands for. Sections come before the
/// slots inside them, so a random section replaces its inner slots' markers too.
const SLOTS: &[(&str, &str)] = &[
    (
        "⟪REVERSE_PROXY⟫",
        r#"{ "Routes": { "r": { "ClusterId": ⟪CLUSTER_ID⟫, "Match": { "Path": "/{**all}" } } }, "Clusters": ⟪CLUSTERS⟫ }"#,
    ),
    (
        "⟪CLUSTERS⟫",
        r#"{ ⟪CLUSTER_ID⟫: ⟪CLUSTER⟫, "other": { "Destinations": { "o": { "Address": "http://10.0.9.1/" } } } }"#,
    ),
    (
        "⟪CLUSTER⟫",
        r#"{
        "LoadBalancingPolicy": ⟪LB⟫,
        "SessionAffinity": ⟪AFFINITY⟫,
        "HealthCheck": ⟪HEALTH_CHECK⟫,
        "Metadata": ⟪METADATA⟫,
        "HttpClient": ⟪HTTP_CLIENT⟫,
        "HttpRequest": ⟪HTTP_REQUEST⟫,
        "Destinations": ⟪DESTINATIONS⟫
    }"#,
    ),
    (
        "⟪HEALTH_CHECK⟫",
        r#"{ "AvailableDestinationsPolicy": ⟪AVAILABLE⟫, "Active": ⟪ACTIVE⟫, "Passive": ⟪PASSIVE⟫ }"#,
    ),
    (
        "⟪ACTIVE⟫",
        r#"{ "Enabled": ⟪A_ENABLED⟫, "Interval": ⟪A_INTERVAL⟫, "Timeout": ⟪A_TIMEOUT⟫,
                      "Policy": ⟪A_POLICY⟫, "Path": ⟪A_PATH⟫, "Query": ⟪A_QUERY⟫ }"#,
    ),
    (
        "⟪PASSIVE⟫",
        r#"{ "Enabled": ⟪P_ENABLED⟫, "Policy": ⟪P_POLICY⟫, "ReactivationPeriod": ⟪P_REACTIVATION⟫ }"#,
    ),
    (
        "⟪METADATA⟫",
        r#"{ "ConsecutiveFailuresHealthPolicy.Threshold": ⟪MD_THRESHOLD⟫,
                        "TransportFailureRateHealthPolicy.RateLimit": ⟪MD_RATE⟫, "team": ⟪MD_OTHER⟫ }"#,
    ),
    (
        "⟪HTTP_CLIENT⟫",
        r#"{ "DangerousAcceptAnyServerCertificate": ⟪HC_DANGEROUS⟫,
                           "MaxConnectionsPerServer": ⟪HC_MAX⟫, "SslProtocols": ⟪HC_SSL⟫ }"#,
    ),
    (
        "⟪HTTP_REQUEST⟫",
        r#"{ "Version": ⟪HR_VERSION⟫, "ActivityTimeout": ⟪HR_TIMEOUT⟫ }"#,
    ),
    (
        "⟪DESTINATIONS⟫",
        r#"{ ⟪D1_ID⟫: ⟪D1⟫, "d2": { "Address": ⟪D2_ADDRESS⟫, "Priority": ⟪D2_PRIORITY⟫ } }"#,
    ),
    (
        "⟪D1⟫",
        r#"{ "Address": ⟪D1_ADDRESS⟫, "Health": ⟪D1_HEALTH⟫, "Host": ⟪D1_HOST⟫,
                  "Priority": ⟪D1_PRIORITY⟫, "Metadata": ⟪D1_METADATA⟫ }"#,
    ),
    ("⟪D1_METADATA⟫", r#"{ "zone": ⟪D1_MD_VALUE⟫ }"#),
    (
        "⟪HEALTH_POLICIES⟫",
        r#"{ "DetectionWindowSize": ⟪HP_WINDOW⟫, "MinimalTotalCountThreshold": ⟪HP_MIN⟫,
                               "DefaultFailureRateLimit": ⟪HP_RATE⟫, "ConsecutiveFailuresThreshold": ⟪HP_THRESHOLD⟫ }"#,
    ),
    ("⟪CLUSTER_ID⟫", r#""payments""#),
    ("⟪LB⟫", r#""RoundRobin""#),
    (
        "⟪AFFINITY⟫",
        r#"{ "Enabled": true, "Policy": "Cookie", "AffinityKeyName": "session" }"#,
    ),
    ("⟪AVAILABLE⟫", r#""HealthyOrPanic""#),
    ("⟪A_ENABLED⟫", "true"),
    ("⟪A_INTERVAL⟫", r#""00:00:05""#),
    ("⟪A_TIMEOUT⟫", r#""00:00:02""#),
    ("⟪A_POLICY⟫", r#""ConsecutiveFailures""#),
    ("⟪A_PATH⟫", r#""/health""#),
    ("⟪A_QUERY⟫", r#""?deep=1""#),
    ("⟪P_ENABLED⟫", r#""true""#),
    ("⟪P_POLICY⟫", "null"),
    ("⟪P_REACTIVATION⟫", r#""00:01:00""#),
    ("⟪MD_THRESHOLD⟫", "3"),
    ("⟪MD_RATE⟫", "0.5"),
    ("⟪MD_OTHER⟫", r#""payments-team""#),
    ("⟪HC_DANGEROUS⟫", "false"),
    ("⟪HC_MAX⟫", "100"),
    ("⟪HC_SSL⟫", r#"[ "Tls12", "Tls13" ]"#),
    ("⟪HR_VERSION⟫", r#""2""#),
    ("⟪HR_TIMEOUT⟫", r#""00:01:40""#),
    ("⟪D1_ID⟫", r#""eu-1""#),
    ("⟪D1_ADDRESS⟫", r#""http://10.0.0.1:8080/""#),
    ("⟪D1_HEALTH⟫", r#""http://10.0.0.1:9090/""#),
    ("⟪D1_HOST⟫", r#""payments.example.com""#),
    ("⟪D1_PRIORITY⟫", "0"),
    ("⟪D1_MD_VALUE⟫", r#""eu-west-1a""#),
    ("⟪D2_ADDRESS⟫", r#""https://10.0.0.2:8443/""#),
    ("⟪D2_PRIORITY⟫", r#""1""#),
    ("⟪HP_WINDOW⟫", r#""00:01:00""#),
    ("⟪HP_MIN⟫", "10"),
    ("⟪HP_RATE⟫", "0.3"),
    ("⟪HP_THRESHOLD⟫", "2"),
];

/// Slots whose value must be a JSON string (they are object keys).
const KEY_SLOTS: &[&str] = &["⟪CLUSTER_ID⟫", "⟪D1_ID⟫"];

const TEMPLATE: &str = r#"{
  // a realistic frame around the slots
  "Logging": { "LogLevel": { "Default": "Information" } },
  "AllowedHosts": "*",
  "ReverseProxy": ⟪REVERSE_PROXY⟫,
  "HealthPolicies": ⟪HEALTH_POLICIES⟫,
}"#;

/// The template with the chosen slots (indices into [`SLOTS`], taken modulo its length) set to
/// their values and the others to their valid default.
fn fill(values: &[(usize, String)]) -> String {
    let mut text = TEMPLATE.to_string();
    for (i, (marker, default)) in SLOTS.iter().enumerate() {
        let chosen = values.iter().rev().find(|(j, _)| j % SLOTS.len() == i);
        match chosen {
            // A key must be a string: use the value's text as the key.
            Some((_, value)) if KEY_SLOTS.contains(marker) => {
                let key = serde_json::to_string(value).expect("a string serialises");
                text = text.replace(marker, &key);
            }
            Some((_, value)) => text = text.replace(marker, value),
            None => text = text.replace(marker, default),
        }
    }
    text
}

/// Strings a config reader meets: keys, policy names, TimeSpans, URLs, numbers as text.
const STRINGS: &[&str] = &[
    "",
    " ",
    "true",
    " TRUE ",
    "False",
    "1",
    "yes",
    "0",
    "-1",
    "1.5",
    "NaN",
    "inf",
    "-Infinity",
    "1e308",
    "-1e308",
    "99999999999999999999999",
    "00:00:05",
    "00:00:00",
    "-00:00:05",
    "24:00:00",
    "00:60:00",
    "00:00:05.12345678",
    "00:10",
    "10",
    "00:00:.5",
    "10675199.02:48:05.4775807",
    "10675199.02:48:05.4775808",
    "-10675199.02:48:05.4775808",
    "10s",
    "1m30s",
    "30000y",
    "18446744073709551615s 500ms 500ms",
    "http://10.0.0.1/",
    "https://[::1]:443/x?y#z",
    "localhost:10010",
    "/health",
    "health",
    "?x",
    "x=1",
    "RoundRobin",
    "roundrobin",
    "Fastest",
    "HealthyAndUnknown",
    "ConsecutiveFailures",
    "TransportFailureRate",
    "ΑΣ",
    "ας",
    "\u{0}",
    "😀",
    "\u{202e}",
];

fn interesting_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(STRINGS).prop_map(str::to_string),
        2 => "\\PC{0,24}",
        1 => any::<String>(),
        1 => (0usize..20_000).prop_map(|n| "9".repeat(n)),
        1 => (0usize..20_000).prop_map(|n| "x".repeat(n)),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(
            &[
                "Enabled",
                "Interval",
                "Address",
                "Priority",
                "Destinations",
                "Metadata",
                "Policy",
                "ADDRESS",
                "",
                "0",
            ][..]
        )
        .prop_map(str::to_string),
        "\\PC{0,12}",
    ]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(&[0.0, -0.0, 1e308, -1e308, 5e-324, 1.5, f64::MAX, f64::MIN][..])
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        interesting_string().prop_map(Value::String),
    ]
}

/// Depth-limited random JSON trees.
fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// JSON text that `serde_json::Value` cannot hold: huge numbers, deep nesting, long strings.
fn raw_json() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(
            &[
                "1e308",
                "-1e308",
                "1e400",
                "-1e400",
                "1E+999999999999",
                "99999999999999999999999",
                "-99999999999999999999999",
                "0.0000000000000000000000000000000000000000001",
                "123456789012345678901234567890.123456789012345678901234567890",
                "-0",
                "[]",
                "{}",
                "\"\"",
                "[null]",
                "[\"a\", 1, true]",
                "{\"\": null}",
                "\"\\ud800\"",
                "\"\\u0000\"",
            ][..]
        )
        .prop_map(str::to_string),
        (1usize..700).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n))),
        (1usize..700).prop_map(|n| format!("{}1{}", "{\"Enabled\":".repeat(n), "}".repeat(n))),
        (0usize..50_000).prop_map(|n| format!("\"{}\"", "a".repeat(n))),
        // Wide, not deep: arrays become objects with keys 0, 1, ... (validation of wide
        // sections is quadratic, so stay at a size that keeps the test fast in debug builds).
        (0usize..300).prop_map(|n| format!("[{}0]", "0,".repeat(n))),
    ]
}

fn slot_value() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => json_value().prop_map(|v| v.to_string()),
        2 => raw_json(),
    ]
}

#[test]
fn the_filled_template_is_valid() {
    let text = fill(&[]);
    let report = config::check(&text, registry(), false);
    assert!(report.is_valid(), "{text}\n{:#?}", report.errors);
    // Its only warnings: two YARP settings healthpick reads but does not apply.
    let warned: Vec<&str> = report.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(
        warned,
        [
            "ReverseProxy:Clusters:payments:HttpClient:SslProtocols",
            "ReverseProxy:Clusters:payments:HttpClient:MaxConnectionsPerServer",
        ],
        "{:#?}",
        report.warnings
    );
    let engine = Engine::from_json(&text).expect("loads");
    assert_eq!(engine.cluster_ids(), ["payments", "other"]);
    assert_eq!(
        engine
            .pick_endpoint("payments")
            .expect("pick")
            .destination()
            .id(),
        "eu-1"
    );
}

proptest! {
    #![proptest_config(cases(512))]

    #[test]
    fn random_json_values_at_config_keys_never_panic(
        values in prop::collection::vec((0..SLOTS.len(), slot_value()), 1..4),
    ) {
        assert_consistent(&fill(&values))?;
    }
}

proptest! {
    #![proptest_config(cases(32))]

    /// Every slot, one at a time, with the same random value.
    #[test]
    fn each_slot_takes_any_value(value in slot_value()) {
        for i in 0..SLOTS.len() {
            assert_consistent(&fill(&[(i, value.clone())]))?;
        }
    }
}

//! What an etcd key under a cluster's prefix holds: a YARP destination object, the
//! same shape as a destination of the configuration, plus the discovery extensions.
//!
//! ```json
//! {"Address": "http://10.0.0.7:8080/", "Health": "http://10.0.0.7:8081/", "Host": "payments",
//!  "Metadata": {"version": "1.4.2"}, "Priority": 0, "Weight": 2, "Zone": "eu-west-1a",
//!  "Region": "eu-west-1", "Status": "Healthy"}
//! ```
//!
//! Keys are case-insensitive, as in the configuration; numbers may be JSON numbers or text;
//! keys this mapping does not know are ignored (a newer writer may add some). Only `Address` is
//! required. `Status` is what the instance says of itself (`Healthy`, `Draining`, `Unhealthy`,
//! `Unknown`): the destination's discovery health.

use std::fmt;

use serde_json::{Map, Value};

use crate::config::metadata::{parse_weight, Metadata, WEIGHT_KEY};
use crate::destination::endpoint::Endpoint;
use crate::destination::locality::Locality;
use crate::health::state::DiscoveryHealth;
use crate::ids::eq_ignore_case;
use crate::uri::parse_base;

/// Why an etcd value is not a destination: every problem of it, each naming the key path and
/// the bad value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError {
    /// The etcd key.
    pub key: String,
    /// What is wrong, one line each.
    pub problems: Vec<String>,
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "etcd key `{}` is not a destination: {}",
            self.key,
            self.problems.join("; ")
        )
    }
}

impl std::error::Error for ValueError {}

/// The keys of a destination object.
const KNOWN: &[&str] = &[
    "Address", "Health", "Host", "Metadata", "Priority", "Weight", "Zone", "Region", "Status",
];

/// Reads the value of etcd key `key` as destination `id`.
///
/// # Errors
/// Every problem of the value at once.
pub fn parse_value(key: &str, id: &str, value: &[u8]) -> Result<Endpoint, ValueError> {
    let fail = |problems: Vec<String>| ValueError {
        key: key.to_string(),
        problems,
    };
    if id.trim().is_empty() {
        return Err(fail(vec![
            "the key is the prefix itself: a destination needs a name after the prefix".into(),
        ]));
    }
    let text =
        std::str::from_utf8(value).map_err(|_| fail(vec!["the value is not UTF-8".into()]))?;
    let object: Map<String, Value> = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(object)) => object,
        Ok(other) => {
            return Err(fail(vec![format!(
                "the value must be a JSON object with an Address, found {}",
                kind(&other)
            )]))
        }
        Err(e) => return Err(fail(vec![format!("the value is not JSON: {e}")])),
    };
    let mut problems = Vec::new();
    let mut fields: [Option<&Value>; 9] = [None; 9];
    for (name, value) in &object {
        if let Some(slot) = KNOWN.iter().position(|k| eq_ignore_case(k, name)) {
            if fields[slot].is_some() {
                problems.push(format!(
                    "`{}` is given twice (keys are case-insensitive)",
                    KNOWN[slot]
                ));
            }
            fields[slot] = Some(value);
        }
    }
    let [address, health, host, metadata, priority, weight, zone, region, status] = fields;

    let address = match address.map(|v| scalar(v, "Address")) {
        None => {
            problems.push("`Address` is missing (an absolute http(s) URL)".into());
            None
        }
        Some(Err(why)) => {
            problems.push(why);
            None
        }
        Some(Ok(text)) => match parse_base(&text) {
            Ok(url) => Some(url),
            Err(why) => {
                problems.push(format!("Address `{}` {why}", shorten(&text)));
                None
            }
        },
    };
    let health = text_field(health, "Health", &mut problems).and_then(|text| {
        parse_base(&text)
            .map_err(|why| problems.push(format!("Health `{}` {why}", shorten(&text))))
            .ok()
    });
    let host = text_field(host, "Host", &mut problems);
    let tier = text_field(priority, "Priority", &mut problems).and_then(|text| {
        text.trim()
            .parse::<u32>()
            .map_err(|_| {
                problems.push(format!(
                    "Priority `{}` is not a tier (0, 1, 2, ...)",
                    shorten(&text)
                ))
            })
            .ok()
    });
    let weight = text_field(weight, "Weight", &mut problems).and_then(|text| {
        match text.trim().parse::<f64>() {
            Ok(w) if w.is_finite() && w >= 0.0 => Some(w),
            _ => {
                problems.push(format!(
                    "Weight `{}` is not a number, 0 or more",
                    shorten(&text)
                ));
                None
            }
        }
    });
    let zone = text_field(zone, "Zone", &mut problems);
    let region = text_field(region, "Region", &mut problems);
    let status = text_field(status, "Status", &mut problems).and_then(|text| {
        let t = text.trim();
        [
            ("Healthy", DiscoveryHealth::Healthy),
            ("Draining", DiscoveryHealth::Draining),
            ("Unhealthy", DiscoveryHealth::Unhealthy),
            ("Unknown", DiscoveryHealth::Unknown),
        ]
        .into_iter()
        .find(|(name, _)| eq_ignore_case(name, t))
        .map(|(_, health)| health)
        .or_else(|| {
            problems.push(format!(
                "Status `{}` is not Healthy, Draining, Unhealthy or Unknown",
                shorten(&text)
            ));
            None
        })
    });
    let metadata = match metadata {
        None | Some(Value::Null) => Metadata::new(),
        Some(Value::Object(entries)) => {
            let mut metadata = Metadata::new();
            for (name, value) in entries {
                match scalar(value, &format!("Metadata:{name}")) {
                    Ok(text) => metadata.insert(name.clone(), text),
                    Err(why) => problems.push(why),
                }
            }
            metadata
        }
        Some(other) => {
            problems.push(format!(
                "Metadata must be an object of names to values, found {}",
                kind(other)
            ));
            Metadata::new()
        }
    };
    let Some(address) = address else {
        return Err(fail(problems));
    };
    if !problems.is_empty() {
        return Err(fail(problems));
    }
    let mut endpoint = Endpoint::new(id, address).with_metadata(metadata);
    if let Some(url) = health {
        endpoint = endpoint.health_url(url);
    }
    if let Some(host) = host {
        endpoint = endpoint.host(host);
    }
    if let Some(tier) = tier {
        endpoint = endpoint.tier(tier);
    }
    // As in the configuration, metadata `Weight` counts when the object has none of its own.
    let weight = weight.or_else(|| {
        endpoint
            .attributes()
            .metadata()
            .get(WEIGHT_KEY)
            .and_then(parse_weight)
    });
    if let Some(weight) = weight {
        endpoint = endpoint.weight(weight);
    }
    if zone.is_some() || region.is_some() {
        let mut locality = Locality::new();
        if let Some(region) = region {
            locality = locality.region(region);
        }
        if let Some(zone) = zone {
            locality = locality.zone(zone);
        }
        endpoint = endpoint.locality(locality);
    }
    if let Some(status) = status {
        endpoint = endpoint.health(status);
    }
    Ok(endpoint)
}

/// A field that must be a scalar, as text (absent or null: `None`).
fn text_field(value: Option<&Value>, name: &str, problems: &mut Vec<String>) -> Option<String> {
    match value {
        None | Some(Value::Null) => None,
        Some(value) => scalar(value, name).map_err(|why| problems.push(why)).ok(),
    }
}

/// A string, number or boolean as text (as .NET configuration reads scalars).
fn scalar(value: &Value, name: &str) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(format!(
            "`{name}` must be a string or a number, found {}",
            kind(other)
        )),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value short enough for a message.
fn shorten(text: &str) -> String {
    const MAX: usize = 80;
    if text.chars().count() <= MAX {
        text.to_string()
    } else {
        let head: String = text.chars().take(MAX).collect();
        format!("{head}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_full_value_maps_every_field() {
        let e = parse_value(
            "/svc/payments/eu-1",
            "eu-1",
            br#"{"address": "http://10.0.0.7:8080/", "Health": "http://10.0.0.7:8081/",
                 "Host": "payments", "Metadata": {"version": "1.4.2", "canary": true},
                 "Priority": "1", "Weight": 2.5, "Zone": "eu-west-1a", "Region": "eu-west-1",
                 "Status": "draining", "Future": {"ignored": 1}}"#,
        )
        .unwrap();
        assert_eq!(e.key(), "eu-1");
        assert_eq!(e.address().as_str(), "http://10.0.0.7:8080/");
        let a = e.attributes();
        assert_eq!(a.tier, 1);
        assert_eq!(a.weight, 2.5);
        assert_eq!(a.host.as_deref(), Some("payments"));
        assert_eq!(
            a.health_url.as_ref().map(|u| u.as_str()),
            Some("http://10.0.0.7:8081/")
        );
        assert_eq!(a.metadata.get("version"), Some("1.4.2"));
        assert_eq!(a.metadata.get("canary"), Some("true"));
        assert_eq!(a.locality.zone_name(), Some("eu-west-1a"));
        assert_eq!(a.locality.region_name(), Some("eu-west-1"));
        assert_eq!(e.discovery_health(), DiscoveryHealth::Draining);
        let e = parse_value(
            "k",
            "k",
            br#"{"Address": "http://a/", "Metadata": {"Weight": "3"}}"#,
        )
        .unwrap();
        assert_eq!(
            e.attributes().weight,
            3.0,
            "metadata Weight, as in the configuration"
        );
    }

    #[test]
    fn every_problem_of_a_value_is_named_at_once() {
        let e = parse_value(
            "/svc/p/a",
            "a",
            br#"{"Address": "ftp://x/", "Weight": -1, "Priority": "first", "Status": "meh", "Metadata": [1]}"#,
        )
        .unwrap_err();
        let text = e.to_string();
        for needle in [
            "/svc/p/a",
            "ftp://x/",
            "Weight `-1`",
            "Priority `first`",
            "Status `meh`",
            "Metadata must be an object",
        ] {
            assert!(text.contains(needle), "{needle} missing from {text}");
        }
        assert_eq!(e.problems.len(), 5, "{text}");
        assert!(parse_value("/svc/p/a", "a", b"{}")
            .unwrap_err()
            .to_string()
            .contains("`Address` is missing"));
        assert!(parse_value("/svc/p/a", "a", b"[1]")
            .unwrap_err()
            .to_string()
            .contains("found an array"));
        assert!(parse_value("/svc/p/a", "a", b"\xff")
            .unwrap_err()
            .to_string()
            .contains("not UTF-8"));
        assert!(parse_value("/svc/p/", "", br#"{"Address":"http://a/"}"#)
            .unwrap_err()
            .to_string()
            .contains("prefix itself"));
        assert!(parse_value(
            "/svc/p/a",
            "a",
            br#"{"Address":"http://a/","address":"http://b/"}"#
        )
        .unwrap_err()
        .to_string()
        .contains("twice"));
    }

    proptest! {
        /// Whatever bytes a key holds, reading them never panics, and an error names the key.
        #[test]
        fn any_bytes_are_a_destination_or_a_clear_error(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Err(e) = parse_value("/svc/p/k", "k", &bytes) {
                prop_assert!(e.to_string().starts_with("etcd key `/svc/p/k` is not a destination: "));
                prop_assert!(!e.problems.is_empty());
            }
        }

        /// Objects made of the known keys with values of any JSON type: never a panic; an
        /// accepted one has an http(s) address; a rejected one says what is wrong.
        #[test]
        fn any_object_of_known_keys_is_a_destination_or_a_clear_error(
            fields in proptest::collection::vec((0..KNOWN.len(), json_value()), 0..9)
        ) {
            let object: Map<String, Value> =
                fields.into_iter().map(|(i, v)| (KNOWN[i].to_string(), v)).collect();
            let text = Value::Object(object).to_string();
            match parse_value("/svc/p/k", "k", text.as_bytes()) {
                Ok(e) => prop_assert!(matches!(e.address().scheme(), "http" | "https")),
                Err(e) => prop_assert!(e.problems.iter().all(|p| !p.is_empty())),
            }
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            "[ -~]{0,20}".prop_map(Value::String),
            Just(Value::String("http://10.0.0.1:8080/".into())),
            Just(Value::String("Draining".into())),
            Just(serde_json::json!({"k": "v"})),
            Just(serde_json::json!([1, 2])),
        ]
    }
}

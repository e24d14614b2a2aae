//! Reading Consul's `/v1/health/service/<name>` answer: one entry per instance, with
//! its node, its service registration and its checks.
//!
//! - key: `node/service-id` (a service id is unique per node only), with `%` and `/` inside
//!   either written `%25` and `%2F`, so that no two entries share a key;
//! - address: `Service.Address`, else `Node.Address`, with `Service.Port`: `scheme://host:port/`,
//!   where the address must be a host (an IP address or a name): one with a path, a query, a
//!   user or a port of its own, or too long for a host, is not a destination;
//! - discovery health from the checks: any `critical` (maintenance mode included) is
//!   `Unhealthy`, else any `warning` is `Draining`, else `Healthy`;
//! - weight: `Service.Weights.Passing`, or `Weights.Warning` while a check warns;
//! - metadata: `Service.Meta`, plus the tags as `consul.tags` (comma-separated);
//! - locality: the datacenter as region, `zone` from the service's or the node's meta.
//!
//! Every field is optional on the wire; an entry that cannot be a destination (no port, no
//! address) is reported and left out, never a panic.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use crate::destination::endpoint::Endpoint;
use crate::destination::locality::Locality;
use crate::discovery::admit::base_url;
use crate::health::state::DiscoveryHealth;

/// An entry of the answer that is not a destination, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryError {
    /// The entry's `node/service-id` (as much of it as is known).
    pub key: String,
    /// What is wrong.
    pub problem: String,
}

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Consul entry `{}` is not a destination: {}",
            self.key, self.problem
        )
    }
}

impl std::error::Error for EntryError {}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
struct Entry {
    node: Node,
    service: Service,
    checks: Vec<Check>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
struct Node {
    node: String,
    address: String,
    datacenter: String,
    meta: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
struct Service {
    #[serde(rename = "ID")]
    id: String,
    service: String,
    tags: Option<Vec<String>>,
    address: String,
    port: u32,
    weights: Option<Weights>,
    meta: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
struct Weights {
    passing: Option<f64>,
    warning: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "PascalCase")]
struct Check {
    #[serde(rename = "CheckID")]
    check_id: String,
    status: String,
}

/// The destinations of one answer, read from datacenter `tier` of the failover list (`None`:
/// no list, no explicit tier), with URLs of `scheme`; the entries that are not destinations
/// come back as errors beside them.
///
/// # Errors
/// The answer is not a JSON array of entries.
pub fn parse_entries(
    body: &[u8],
    scheme: &str,
    tier: Option<u32>,
) -> Result<(Vec<Endpoint>, Vec<EntryError>), String> {
    let entries: Vec<Entry> = serde_json::from_slice(body)
        .map_err(|e| format!("the answer is not a list of health entries: {e}"))?;
    let mut endpoints = Vec::with_capacity(entries.len());
    let mut errors = Vec::new();
    for entry in entries {
        match endpoint(entry, scheme, tier) {
            Ok(endpoint) => endpoints.push(endpoint),
            Err(e) => errors.push(e),
        }
    }
    Ok((endpoints, errors))
}

fn endpoint(entry: Entry, scheme: &str, tier: Option<u32>) -> Result<Endpoint, EntryError> {
    let Entry {
        node,
        service,
        checks,
    } = entry;
    let id = if service.id.is_empty() {
        &service.service
    } else {
        &service.id
    };
    let key = format!("{}/{}", key_part(&node.node), key_part(id));
    let fail = |problem: String| EntryError {
        key: key.clone(),
        problem,
    };
    if node.node.is_empty() || id.is_empty() {
        return Err(fail("no node name or service id".into()));
    }
    let host = if service.address.is_empty() {
        &node.address
    } else {
        &service.address
    };
    if host.is_empty() {
        return Err(fail(
            "neither the service nor its node has an address".into(),
        ));
    }
    let port = match u16::try_from(service.port) {
        Ok(port) if port > 0 => port,
        _ => {
            return Err(fail(format!(
                "port {} is not a port (1 to 65535)",
                service.port
            )))
        }
    };
    let address = base_url(scheme, host, port).map_err(fail)?;
    let health = health_of(&checks);
    let weights = service.weights.unwrap_or_default();
    let weight = match health {
        DiscoveryHealth::Draining => weights.warning,
        _ => weights.passing,
    }
    .filter(|w| w.is_finite() && *w >= 0.0)
    .unwrap_or(1.0);
    let mut endpoint = Endpoint::new(key, address).health(health).weight(weight);
    let service_meta = service.meta.unwrap_or_default();
    let node_meta = node.meta.unwrap_or_default();
    let mut locality = Locality::new();
    if !node.datacenter.is_empty() {
        locality = locality.region(node.datacenter);
    }
    if let Some(zone) = service_meta.get("zone").or_else(|| node_meta.get("zone")) {
        locality = locality.zone(zone.clone());
    }
    locality = locality.node(node.node);
    endpoint = endpoint.locality(locality);
    for (name, value) in service_meta {
        endpoint = endpoint.metadata(name, value);
    }
    if let Some(tags) = service.tags.filter(|t| !t.is_empty()) {
        endpoint = endpoint.metadata("consul.tags", tags.join(","));
    }
    if let Some(tier) = tier {
        endpoint = endpoint.tier(tier);
    }
    Ok(endpoint)
}

/// A part of a key (a node name, a service id, a datacenter) with `%` and `/` escaped, so that
/// parts joined by `/` never read as other parts.
pub(crate) fn key_part(part: &str) -> std::borrow::Cow<'_, str> {
    if part.contains(['%', '/']) {
        std::borrow::Cow::Owned(part.replace('%', "%25").replace('/', "%2F"))
    } else {
        std::borrow::Cow::Borrowed(part)
    }
}

/// The worst of the checks: critical (maintenance mode is a critical check) excludes, a warning
/// drains, otherwise healthy (an instance without checks is passing, as Consul counts it).
fn health_of(checks: &[Check]) -> DiscoveryHealth {
    let mut health = DiscoveryHealth::Healthy;
    for check in checks {
        match check.status.as_str() {
            "critical" | "maintenance" => return DiscoveryHealth::Unhealthy,
            "warning" => health = DiscoveryHealth::Draining,
            _ => {}
        }
        if check.check_id == "_node_maintenance"
            || check.check_id.starts_with("_service_maintenance")
        {
            return DiscoveryHealth::Unhealthy;
        }
    }
    health
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ANSWER: &str = r#"[
      {"Node": {"Node": "n1", "Address": "10.0.0.1", "Datacenter": "eu-west", "Meta": {"zone": "eu-west-1a"}},
       "Service": {"ID": "web-1", "Service": "web", "Tags": ["v2", "canary"], "Address": "", "Port": 8080,
                   "Weights": {"Passing": 10, "Warning": 1}, "Meta": {"version": "1.4.2"}},
       "Checks": [{"CheckID": "serfHealth", "Status": "passing"}]},
      {"Node": {"Node": "n2", "Address": "10.0.0.2", "Datacenter": "eu-west"},
       "Service": {"ID": "web-1", "Service": "web", "Address": "fd00::2", "Port": 8080,
                   "Weights": {"Passing": 10, "Warning": 1}},
       "Checks": [{"CheckID": "serfHealth", "Status": "passing"}, {"CheckID": "http", "Status": "warning"}]},
      {"Node": {"Node": "n3", "Address": "10.0.0.3"},
       "Service": {"ID": "web-3", "Service": "web", "Port": 8080},
       "Checks": [{"CheckID": "_service_maintenance:web-3", "Status": "critical"}]},
      {"Node": {"Node": "n4", "Address": "10.0.0.4"}, "Service": {"ID": "web-4", "Service": "web"}}
    ]"#;

    #[test]
    fn an_answer_maps_to_keys_addresses_health_weights_and_locality() {
        let (endpoints, errors) = parse_entries(ANSWER.as_bytes(), "http", Some(1)).unwrap();
        assert_eq!(endpoints.len(), 3);
        let [a, b, c] = &endpoints[..] else {
            unreachable!()
        };
        assert_eq!(a.key(), "n1/web-1");
        assert_eq!(
            a.address().as_str(),
            "http://10.0.0.1:8080/",
            "the node's address"
        );
        assert_eq!(a.discovery_health(), DiscoveryHealth::Healthy);
        assert_eq!(a.attributes().weight(), 10.0);
        assert_eq!(a.attributes().tier(), 1);
        assert_eq!(a.attributes().locality().region_name(), Some("eu-west"));
        assert_eq!(a.attributes().locality().zone_name(), Some("eu-west-1a"));
        assert_eq!(a.attributes().metadata().get("version"), Some("1.4.2"));
        assert_eq!(
            a.attributes().metadata().get("consul.tags"),
            Some("v2,canary")
        );
        assert_eq!(
            b.key(),
            "n2/web-1",
            "the same service id on another node is another instance"
        );
        assert_eq!(
            b.address().as_str(),
            "http://[fd00::2]:8080/",
            "the service's own address"
        );
        assert_eq!(b.discovery_health(), DiscoveryHealth::Draining);
        assert_eq!(b.attributes().weight(), 1.0, "the warning weight");
        assert_eq!(
            c.discovery_health(),
            DiscoveryHealth::Unhealthy,
            "maintenance"
        );
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].to_string().contains("n4/web-4") && errors[0].to_string().contains("port 0"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn an_answer_that_is_not_a_list_is_an_error() {
        assert!(parse_entries(b"{}", "http", None)
            .unwrap_err()
            .contains("not a list"));
        assert!(parse_entries(b"", "http", None).is_err());
        assert!(parse_entries(br#"[{"Service": {"Port": "x"}}]"#, "http", None).is_err());
        let (endpoints, errors) = parse_entries(b"[]", "http", None).unwrap();
        assert!(endpoints.is_empty() && errors.is_empty());
    }

    proptest! {
        /// Any bytes: a list of destinations and clear errors, or an error; never a panic.
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_entries(&bytes, "http", None);
        }

        /// Entries with fields of any shape: each is a destination with an http(s) URL, or an
        /// error naming its key.
        #[test]
        fn any_entry_is_a_destination_or_a_named_error(
            node in "[a-z0-9]{0,4}", address in prop_oneof![Just(String::new()), "[0-9a-f:.]{1,12}", "[ -~]{0,10}"],
            id in "[a-z0-9-]{0,4}", port in 0u32..70_000, status in prop_oneof![Just("passing"), Just("warning"), Just("critical"), Just("?")],
            passing in proptest::option::of(any::<f64>()),
        ) {
            let entry = serde_json::json!([{
                "Node": {"Node": node, "Address": address},
                "Service": {"ID": id, "Port": port, "Weights": {"Passing": passing.filter(|w| w.is_finite())}},
                "Checks": [{"CheckID": "c", "Status": status}],
            }]);
            let (endpoints, errors) = parse_entries(entry.to_string().as_bytes(), "https", None).unwrap();
            prop_assert_eq!(endpoints.len() + errors.len(), 1);
            for e in &endpoints {
                prop_assert_eq!(e.address().scheme(), "https");
                prop_assert!(e.attributes().weight().is_finite() && e.attributes().weight() >= 0.0);
            }
            for e in &errors {
                let text = e.to_string();
                prop_assert!(text.starts_with("Consul entry `"), "{}", text);
            }
        }
    }
}

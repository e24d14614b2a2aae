//! From EndpointSlices to destinations: the mapping rules of the Kubernetes source.
//!
//! - **Port**: the Service port named in the configuration (`ports[].name`); with no name, the
//!   slice's only port. A slice with several ports and no name set, without the named port, or
//!   whose port has no number or is not TCP, gives no destinations and an error in the status.
//!   A slice without endpoints (the controller's placeholder) needs no port.
//! - **One destination per endpoint**, at its first address (the addresses of one endpoint are
//!   fungible, as the API says), `scheme://ip:port/` (IPv6 in brackets; `FQDN` slices use the
//!   name). **Key**: the pod's uid (`targetRef.uid`), else `ip:port`.
//! - **Health** from `conditions` (absent `ready` and `serving` read as true, absent
//!   `terminating` as false): terminating and serving is `Draining`, terminating and not
//!   serving is `Unhealthy`; otherwise ready is `Healthy` and not ready `Unhealthy`.
//! - **Locality**: `zone` is the zone, `nodeName` the node (slices carry no region).
//! - **Topology hints**: when this process's zone is known, every endpoint that may get traffic
//!   has `hints.forZones`, and some are hinted for this zone, those get tier 0 and all others
//!   tier 1 — kube-proxy's rule, with failover instead of a hard filter. Otherwise the hints are
//!   ignored and the cluster's locality-to-tier mapping applies to the zones.
//! - **Several slices** of a Service are merged; a key (or an address) found in two slices — an
//!   endpoint moving between slices, a dual-stack Service's IPv4 and IPv6 slices — is kept once:
//!   the healthiest, then IPv4 before IPv6 before FQDN, then the first slice by name.
//! - **Metadata**: `kubernetes.slice`, `kubernetes.pod` (the target's name when it is a pod),
//!   `kubernetes.hostname`, `kubernetes.hints` (the hinted zones, comma-separated).
//!
//! Every field may be absent or odd on the wire; nothing here panics.

use std::collections::HashMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use k8s_openapi::api::discovery::v1::{Endpoint as SliceEndpoint, EndpointSlice};
use url::Url;

use crate::destination::endpoint::Endpoint;
use crate::destination::locality::Locality;
use crate::health::state::DiscoveryHealth;
use crate::ids::fold_case;

/// What the mapping needs from the configuration.
#[derive(Debug, Clone, Default)]
pub(crate) struct MappingRules {
    /// The Service port to use (`None`: the slice's only port).
    pub port_name: Option<String>,
    /// `http` or `https`.
    pub scheme: String,
    /// This process's zone, for topology hints.
    pub local_zone: Option<String>,
}

/// Something in a slice that is not a destination, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SliceError {
    /// The slice's name.
    pub slice: String,
    /// What is wrong.
    pub problem: String,
}

impl fmt::Display for SliceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EndpointSlice `{}`: {}", self.slice, self.problem)
    }
}

/// One endpoint of a slice, before the slices are merged.
#[derive(Debug, Clone)]
struct Found {
    endpoint: Endpoint,
    /// `hints.forZones`, when the endpoint has hints.
    hinted_zones: Option<Vec<String>>,
    /// 0 IPv4, 1 IPv6, 2 FQDN: the preference between the same pod's addresses.
    family: u8,
    slice: String,
}

/// `EndpointSlice.endpoints` is a list before Kubernetes 1.36 and an optional list from 1.36 on
/// in k8s-openapi, which the final binary's version feature chooses.
fn endpoints_of(slice: &EndpointSlice) -> &[SliceEndpoint] {
    k8s_openapi::k8s_if_le_1_35! {
        let endpoints: &[SliceEndpoint] = &slice.endpoints;
    }
    k8s_openapi::k8s_if_ge_1_36! {
        let endpoints: &[SliceEndpoint] = slice.endpoints.as_deref().unwrap_or_default();
    }
    endpoints
}

/// Whether a slice has no endpoints (the controller's placeholder for a Service without any).
pub(crate) fn is_empty_slice(slice: &EndpointSlice) -> bool {
    endpoints_of(slice).is_empty()
}

/// The port of a slice's endpoints under `rules`.
fn port_of(slice: &EndpointSlice, rules: &MappingRules) -> Result<u16, String> {
    let ports = slice.ports.as_deref().unwrap_or_default();
    let port = match rules.port_name.as_deref() {
        Some(name) => ports
            .iter()
            .find(|p| p.name.as_deref().unwrap_or_default() == name)
            .ok_or_else(|| {
                format!(
                    "no port named `{name}` (it has {})",
                    port_names(ports.iter().map(|p| p.name.as_deref()))
                )
            })?,
        None => match ports {
            [only] => only,
            [] => return Err("it has no ports".into()),
            _ => {
                return Err(format!(
                    "it has several ports ({}): name one (PortName)",
                    port_names(ports.iter().map(|p| p.name.as_deref()))
                ))
            }
        },
    };
    let label = port.name.as_deref().unwrap_or("(unnamed)");
    if let Some(protocol) = port.protocol.as_deref().filter(|p| *p != "TCP") {
        return Err(format!("port `{label}` is {protocol}, not TCP"));
    }
    match port.port {
        None => Err(format!("port `{label}` has no number")),
        Some(n) => u16::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("port `{label}` is {n}, not 1 to 65535")),
    }
}

fn port_names<'a>(names: impl Iterator<Item = Option<&'a str>>) -> String {
    let names: Vec<String> = names
        .map(|n| format!("`{}`", n.unwrap_or_default()))
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// What `conditions` say (absent `ready` and `serving` are true, absent `terminating` false).
fn health_of(endpoint: &SliceEndpoint) -> DiscoveryHealth {
    let conditions = endpoint.conditions.as_ref();
    let ready = conditions.and_then(|c| c.ready).unwrap_or(true);
    let serving = conditions.and_then(|c| c.serving).unwrap_or(true);
    let terminating = conditions.and_then(|c| c.terminating).unwrap_or(false);
    match (terminating, serving, ready) {
        (true, true, _) => DiscoveryHealth::Draining,
        (true, false, _) | (false, _, false) => DiscoveryHealth::Unhealthy,
        (false, _, true) => DiscoveryHealth::Healthy,
    }
}

/// The endpoints of one slice, and what in it is not a destination.
fn slice_endpoints(slice: &EndpointSlice, rules: &MappingRules) -> (Vec<Found>, Vec<SliceError>) {
    let name = slice.metadata.name.clone().unwrap_or_default();
    let fail = |problem: String| SliceError {
        slice: name.clone(),
        problem,
    };
    let entries = endpoints_of(slice);
    if entries.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let family = match slice.address_type.as_str() {
        "IPv4" => 0,
        "IPv6" => 1,
        "FQDN" => 2,
        other => {
            return (
                Vec::new(),
                vec![fail(format!(
                    "address type `{other}` is not IPv4, IPv6 or FQDN"
                ))],
            )
        }
    };
    let port = match port_of(slice, rules) {
        Ok(port) => port,
        Err(why) => return (Vec::new(), vec![fail(why)]),
    };
    let mut found = Vec::with_capacity(entries.len());
    let mut errors = Vec::new();
    for entry in entries {
        let Some(address) = entry.addresses.first() else {
            errors.push(fail("an endpoint has no address".into()));
            continue;
        };
        let host = match family {
            0 => address.parse::<Ipv4Addr>().map(|ip| ip.to_string()).ok(),
            1 => address.parse::<Ipv6Addr>().map(|ip| format!("[{ip}]")).ok(),
            _ => Some(address.clone()).filter(|name| is_dns_name(name)),
        };
        let Some(host) = host else {
            errors.push(fail(format!(
                "address `{address}` is not {}",
                slice.address_type
            )));
            continue;
        };
        let url = match Url::parse(&format!("{}://{host}:{port}/", rules.scheme)) {
            Ok(url) => url,
            Err(e) => {
                errors.push(fail(format!("address `{address}` port {port}: {e}")));
                continue;
            }
        };
        let uid = entry
            .target_ref
            .as_ref()
            .and_then(|t| t.uid.as_deref())
            .filter(|uid| !uid.trim().is_empty());
        let key = match uid {
            Some(uid) => uid.to_string(),
            None => format!("{host}:{port}"),
        };
        let mut locality = Locality::new();
        if let Some(zone) = entry.zone.as_deref().filter(|z| !z.is_empty()) {
            locality = locality.zone(zone);
        }
        if let Some(node) = entry.node_name.as_deref().filter(|n| !n.is_empty()) {
            locality = locality.node(node);
        }
        let mut endpoint = Endpoint::new(key, url)
            .health(health_of(entry))
            .locality(locality)
            .metadata("kubernetes.slice", name.as_str());
        if let Some(target) = &entry.target_ref {
            if target.kind.as_deref().is_none_or(|k| k == "Pod") {
                if let Some(pod) = target.name.as_deref().filter(|n| !n.is_empty()) {
                    endpoint = endpoint.metadata("kubernetes.pod", pod);
                }
            }
        }
        if let Some(hostname) = entry.hostname.as_deref().filter(|h| !h.is_empty()) {
            endpoint = endpoint.metadata("kubernetes.hostname", hostname);
        }
        let hinted_zones: Option<Vec<String>> = entry
            .hints
            .as_ref()
            .and_then(|h| h.for_zones.as_ref())
            .map(|zones| zones.iter().map(|z| z.name.clone()).collect())
            .filter(|zones: &Vec<String>| !zones.is_empty());
        if let Some(zones) = &hinted_zones {
            endpoint = endpoint.metadata("kubernetes.hints", zones.join(","));
        }
        found.push(Found {
            endpoint,
            hinted_zones,
            family,
            slice: name.clone(),
        });
    }
    (found, errors)
}

/// A DNS name as an FQDN slice may carry: labels of letters, digits and `-`, dot-separated.
fn is_dns_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Ranks two findings of one endpoint: the lower is kept.
fn rank(found: &Found) -> (u8, u8, &str) {
    let health = match found.endpoint.discovery_health() {
        DiscoveryHealth::Healthy => 0,
        DiscoveryHealth::Unknown => 1,
        DiscoveryHealth::Draining => 2,
        DiscoveryHealth::Unhealthy => 3,
    };
    (health, found.family, found.slice.as_str())
}

/// The destinations of a Service's slices, merged (one per key and per address, sorted by key),
/// with topology hints read against `rules.local_zone`; and what in them is not a destination.
pub(crate) fn merge<'a>(
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    rules: &MappingRules,
) -> (Vec<Endpoint>, Vec<SliceError>) {
    let mut errors = Vec::new();
    let mut by_key: HashMap<String, Found> = HashMap::new();
    for slice in slices {
        let (found, problems) = slice_endpoints(slice, rules);
        errors.extend(problems);
        for f in found {
            let key = fold_case(f.endpoint.key());
            match by_key.get(&key) {
                Some(kept) if rank(kept) <= rank(&f) => {}
                _ => {
                    by_key.insert(key, f);
                }
            }
        }
    }
    // The same address under two keys (a pod uid and a uid-less copy): kept once too.
    let mut by_address: HashMap<String, Found> = HashMap::new();
    for f in by_key.into_values() {
        let address = f.endpoint.address().to_string();
        match by_address.get(&address) {
            Some(kept) if (rank(kept), kept.endpoint.key()) <= (rank(&f), f.endpoint.key()) => {}
            _ => {
                by_address.insert(address, f);
            }
        }
    }
    let mut found: Vec<Found> = by_address.into_values().collect();
    found.sort_by(|a, b| a.endpoint.key().cmp(b.endpoint.key()));
    apply_hints(&mut found, rules.local_zone.as_deref());
    (found.into_iter().map(|f| f.endpoint).collect(), errors)
}

/// Hinted for this zone: tier 0, the rest tier 1 — only when every endpoint that may get
/// traffic has hints and some are for this zone (as kube-proxy uses them).
fn apply_hints(found: &mut [Found], local_zone: Option<&str>) {
    let Some(zone) = local_zone.filter(|z| !z.is_empty()) else {
        return;
    };
    let usable = |f: &Found| f.endpoint.discovery_health() != DiscoveryHealth::Unhealthy;
    let for_zone = |f: &Found| {
        f.hinted_zones
            .as_ref()
            .is_some_and(|zones| zones.iter().any(|z| z == zone))
    };
    let all_hinted = found
        .iter()
        .filter(|f| usable(f))
        .all(|f| f.hinted_zones.is_some());
    if !all_hinted || !found.iter().any(|f| usable(f) && for_zone(f)) {
        return;
    }
    for f in found.iter_mut() {
        let tier = u32::from(!for_zone(f));
        f.endpoint = f.endpoint.clone().tier(tier);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn rules(port: Option<&str>, zone: Option<&str>) -> MappingRules {
        MappingRules {
            port_name: port.map(str::to_string),
            scheme: "http".into(),
            local_zone: zone.map(str::to_string),
        }
    }

    fn slice(value: Value) -> EndpointSlice {
        serde_json::from_value(value).unwrap()
    }

    fn endpoint(ip: &str, uid: &str, conditions: Value, zone: &str, hints: &[&str]) -> Value {
        let mut e = json!({
            "addresses": [ip], "conditions": conditions, "zone": zone, "nodeName": format!("node-{zone}"),
            "targetRef": {"kind": "Pod", "name": format!("pod-{uid}"), "uid": uid},
        });
        if !hints.is_empty() {
            let zones: Vec<Value> = hints.iter().map(|z| json!({"name": z})).collect();
            e["hints"] = json!({"forZones": zones});
        }
        e
    }

    fn web(name: &str, kind: &str, endpoints: Vec<Value>) -> EndpointSlice {
        slice(json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": kind,
            "endpoints": endpoints,
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "metrics", "port": 9090}],
        }))
    }

    #[test]
    fn conditions_keys_ports_and_locality_map_to_destinations() {
        let s = web(
            "web-a",
            "IPv4",
            vec![
                endpoint("10.0.0.1", "u1", json!({}), "z1", &[]),
                endpoint(
                    "10.0.0.2",
                    "u2",
                    json!({"ready": false, "serving": true, "terminating": true}),
                    "z2",
                    &[],
                ),
                endpoint(
                    "10.0.0.3",
                    "u3",
                    json!({"ready": false, "serving": false, "terminating": true}),
                    "z1",
                    &[],
                ),
                endpoint("10.0.0.4", "u4", json!({"ready": false}), "z1", &[]),
                json!({"addresses": ["10.0.0.5"]}),
            ],
        );
        let (endpoints, errors) = merge([&s], &rules(Some("http"), None));
        assert!(errors.is_empty(), "{errors:?}");
        let keys: Vec<&str> = endpoints.iter().map(Endpoint::key).collect();
        assert_eq!(keys, ["10.0.0.5:8080", "u1", "u2", "u3", "u4"]);
        let health: Vec<DiscoveryHealth> = endpoints.iter().map(|e| e.discovery_health()).collect();
        use DiscoveryHealth::*;
        assert_eq!(health, [Healthy, Healthy, Draining, Unhealthy, Unhealthy]);
        let u1 = &endpoints[1];
        assert_eq!(u1.address().as_str(), "http://10.0.0.1:8080/");
        assert_eq!(u1.attributes().locality().zone_name(), Some("z1"));
        assert_eq!(u1.attributes().locality().node_name(), Some("node-z1"));
        assert_eq!(
            u1.attributes().metadata().get("kubernetes.pod"),
            Some("pod-u1")
        );
        assert_eq!(
            u1.attributes().metadata().get("kubernetes.slice"),
            Some("web-a")
        );
        let (metrics, _) = merge([&s], &rules(Some("metrics"), None));
        assert_eq!(metrics[1].address().as_str(), "http://10.0.0.1:9090/");
    }

    #[test]
    fn port_problems_are_errors_of_the_slice_and_empty_slices_need_no_port() {
        let s = web(
            "web-a",
            "IPv4",
            vec![endpoint("10.0.0.1", "u1", json!({}), "z", &[])],
        );
        let (endpoints, errors) = merge([&s], &rules(None, None));
        assert!(endpoints.is_empty());
        assert_eq!(
            errors[0].to_string(),
            "EndpointSlice `web-a`: it has several ports (`http`, `metrics`): name one (PortName)"
        );
        let (_, errors) = merge([&s], &rules(Some("grpc"), None));
        assert!(
            errors[0].problem.contains("no port named `grpc`"),
            "{errors:?}"
        );
        let placeholder =
            slice(json!({"metadata": {"name": "web-p"}, "addressType": "IPv4", "endpoints": []}));
        assert_eq!(
            merge([&placeholder], &rules(None, None)),
            (Vec::new(), Vec::new())
        );
        let only = slice(json!({"metadata": {"name": "one"}, "addressType": "IPv6",
            "endpoints": [{"addresses": ["fd00::1"]}], "ports": [{"port": 80}]}));
        let (endpoints, errors) = merge([&only], &rules(None, None));
        assert!(errors.is_empty());
        assert_eq!(endpoints[0].address().as_str(), "http://[fd00::1]/");
    }

    #[test]
    fn a_key_in_two_slices_is_kept_once_the_healthiest_then_ipv4() {
        let a = web(
            "web-a",
            "IPv4",
            vec![endpoint(
                "10.0.0.1",
                "u1",
                json!({"ready": false}),
                "z",
                &[],
            )],
        );
        let b = web(
            "web-b",
            "IPv4",
            vec![endpoint("10.0.0.1", "u1", json!({"ready": true}), "z", &[])],
        );
        let v6 = web(
            "web-v6",
            "IPv6",
            vec![endpoint("fd00::1", "u1", json!({}), "z", &[])],
        );
        let (endpoints, _) = merge([&a, &b, &v6], &rules(Some("http"), None));
        assert_eq!(endpoints.len(), 1);
        assert_eq!(endpoints[0].discovery_health(), DiscoveryHealth::Healthy);
        assert_eq!(endpoints[0].address().as_str(), "http://10.0.0.1:8080/");
        assert_eq!(
            endpoints[0].attributes().metadata().get("kubernetes.slice"),
            Some("web-b")
        );
    }

    #[test]
    fn hints_for_the_local_zone_make_tiers_only_when_every_usable_endpoint_has_hints() {
        let hinted = web(
            "web-a",
            "IPv4",
            vec![
                endpoint("10.0.0.1", "u1", json!({}), "z1", &["z1"]),
                endpoint("10.0.0.2", "u2", json!({}), "z2", &["z2"]),
                endpoint("10.0.0.3", "u3", json!({}), "z2", &["z1", "z2"]),
                endpoint("10.0.0.4", "u4", json!({"ready": false}), "z3", &[]),
            ],
        );
        let (endpoints, _) = merge([&hinted], &rules(Some("http"), Some("z1")));
        let tiers: Vec<(u32, bool)> = endpoints
            .iter()
            .map(|e| (e.attributes().tier(), e.explicit_tier))
            .collect();
        assert_eq!(tiers, [(0, true), (1, true), (0, true), (1, true)]);
        // Another zone nobody is hinted for, or no zone: hints ignored.
        let (endpoints, _) = merge([&hinted], &rules(Some("http"), Some("z9")));
        assert!(endpoints.iter().all(|e| !e.explicit_tier));
        let (endpoints, _) = merge([&hinted], &rules(Some("http"), None));
        assert!(endpoints.iter().all(|e| !e.explicit_tier));
        // A usable endpoint without hints: hints ignored (the controller is mid-update).
        let partly = web(
            "web-b",
            "IPv4",
            vec![
                endpoint("10.0.0.1", "u1", json!({}), "z1", &["z1"]),
                endpoint("10.0.0.2", "u2", json!({}), "z2", &[]),
            ],
        );
        let (endpoints, _) = merge([&partly], &rules(Some("http"), Some("z1")));
        assert!(endpoints.iter().all(|e| !e.explicit_tier));
    }

    #[test]
    fn bad_addresses_and_address_types_are_named_errors() {
        let s = slice(json!({"metadata": {"name": "odd"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["fd00::1"]}, {"addresses": []}, {"addresses": ["10.1.1.1"]}],
            "ports": [{"port": 80}]}));
        let (endpoints, errors) = merge([&s], &rules(None, None));
        assert_eq!(endpoints.len(), 1);
        assert_eq!(errors.len(), 2, "{errors:?}");
        let fqdn = slice(json!({"metadata": {"name": "names"}, "addressType": "FQDN",
            "endpoints": [{"addresses": ["web.example.test"]}, {"addresses": ["bad name/x"]}],
            "ports": [{"port": 443}]}));
        let (endpoints, errors) = merge(
            [&fqdn],
            &MappingRules {
                scheme: "https".into(),
                ..rules(None, None)
            },
        );
        assert_eq!(endpoints[0].address().as_str(), "https://web.example.test/");
        assert_eq!(errors.len(), 1);
        let other = slice(
            json!({"metadata": {"name": "x"}, "addressType": "Carrier pigeon",
            "endpoints": [{"addresses": ["a"]}]}),
        );
        assert!(merge([&other], &rules(None, None)).1[0]
            .problem
            .contains("address type"));
    }

    /// Any JSON value of a few shapes, with the field names of an EndpointSlice.
    fn any_json(depth: u32) -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1i64..70_000).prop_map(Value::from),
            prop_oneof![
                Just("10.0.0.1"),
                Just("fd00::1"),
                Just("IPv4"),
                Just("IPv6"),
                Just("FQDN"),
                Just("http"),
                Just("TCP"),
                Just("UDP"),
                Just("z1"),
                Just(""),
                Just("a.b"),
            ]
            .prop_map(Value::from),
            "[ -~]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(depth, 48, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("addresses"),
                        Just("conditions"),
                        Just("ready"),
                        Just("serving"),
                        Just("terminating"),
                        Just("zone"),
                        Just("nodeName"),
                        Just("targetRef"),
                        Just("uid"),
                        Just("name"),
                        Just("kind"),
                        Just("hints"),
                        Just("forZones"),
                        Just("port"),
                        Just("protocol"),
                        Just("hostname"),
                    ]
                    .prop_map(str::to_string),
                    inner,
                    0..5,
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// A field of an endpoint or port: often well-formed, sometimes any JSON.
    fn field(good: impl Strategy<Value = Value> + 'static) -> impl Strategy<Value = Option<Value>> {
        proptest::option::weighted(
            0.9,
            prop_oneof![60 => good.boxed(), 1 => any_json(2).boxed()],
        )
    }

    fn any_endpoint() -> impl Strategy<Value = Value> {
        let address = prop_oneof![
            3 => Just("10.0.0.1"), 3 => Just("10.0.0.2"), 2 => Just("fd00::1"), 1 => Just("web.test"),
            1 => Just(""), 1 => Just("x y"),
        ];
        let flag = || proptest::option::of(any::<bool>()).prop_map(|b| json!(b));
        (
            field(proptest::collection::vec(address, 1..3).prop_map(|a| json!(a))),
            field((flag(), flag(), flag()).prop_map(|(r, s, t)| json!({"ready": r, "serving": s, "terminating": t}))),
            field(prop_oneof![Just("z1"), Just("z2"), Just("")].prop_map(|z| json!(z))),
            field(prop_oneof![Just("u1"), Just("u2"), Just(""), Just("U1")].prop_map(|u| json!({"kind": "Pod", "name": "p", "uid": u}))),
            field(proptest::collection::vec(prop_oneof![Just("z1"), Just("z2")], 0..3)
                .prop_map(|z| json!({"forZones": z.iter().map(|z| json!({"name": z})).collect::<Vec<_>>()}))),
        )
            .prop_map(|(addresses, conditions, zone, target, hints)| {
                let mut e = serde_json::Map::new();
                for (name, value) in [("addresses", addresses), ("conditions", conditions), ("zone", zone),
                                      ("targetRef", target), ("hints", hints)] {
                    if let Some(value) = value {
                        e.insert(name.into(), value);
                    }
                }
                Value::Object(e)
            })
    }

    fn any_port() -> impl Strategy<Value = Value> {
        (
            field(prop_oneof![Just("http"), Just(""), Just("metrics")].prop_map(|n| json!(n))),
            field(prop_oneof![1 => Just(-1i64), 1 => Just(0), 3 => Just(80), 3 => Just(8080), 1 => Just(65_536), 1 => Just(i64::from(i32::MAX))].prop_map(|p| json!(p))),
            field(prop_oneof![4 => Just("TCP"), 1 => Just("UDP")].prop_map(|p| json!(p))),
        )
            .prop_map(|(name, port, protocol)| json!({"name": name, "port": port, "protocol": protocol}))
    }

    proptest! {
        /// A slice of any shape decodes or is a serde error (which kube reports as a watch
        /// error); decoded, it maps to destinations with unique keys and addresses and http(s)
        /// URLs, plus errors naming the slice; never a panic.
        #[test]
        fn any_slice_shape_is_destinations_or_named_errors(
            endpoints in prop_oneof![
                4 => proptest::collection::vec(any_endpoint(), 0..5).prop_map(Value::from).boxed(),
                1 => any_json(3).boxed(),
            ],
            ports in prop_oneof![
                4 => prop_oneof![1 => Just(0usize), 4 => Just(1), 2 => Just(2)].prop_flat_map(|n| proptest::collection::vec(any_port(), n)).prop_map(Value::from).boxed(),
                1 => any_json(2).boxed(),
            ],
            address_type in prop_oneof![3 => Just("IPv4"), 1 => Just("IPv6"), 1 => Just("FQDN"), 1 => Just("x")],
            port_name in proptest::option::of(prop_oneof![3 => Just("http"), 1 => Just(""), 1 => Just("name")]),
            zone in proptest::option::of(Just("z1")),
        ) {
            let value = json!({
                "metadata": {"name": "s"}, "addressType": address_type,
                "endpoints": endpoints, "ports": ports,
            });
            let Ok(slice) = serde_json::from_value::<EndpointSlice>(value) else {
                return Ok(());
            };
            let rules = MappingRules {
                port_name: port_name.map(str::to_string),
                scheme: "https".into(),
                local_zone: zone.map(str::to_string),
            };
            let (found, errors) = merge([&slice, &slice], &rules);
            let mut keys = std::collections::HashSet::new();
            let mut addresses = std::collections::HashSet::new();
            for e in &found {
                prop_assert!(keys.insert(fold_case(e.key())));
                prop_assert!(addresses.insert(e.address().to_string()));
                prop_assert_eq!(e.address().scheme(), "https");
                prop_assert!(e.address().port_or_known_default().is_some_and(|p| p > 0));
                prop_assert!(e.discovery_health() != DiscoveryHealth::Unknown);
            }
            for e in &errors {
                prop_assert!(e.to_string().starts_with("EndpointSlice `s`: "), "{}", e);
            }
        }

        /// Well-formed endpoints with random conditions and hints: every one is a destination.
        #[test]
        fn well_formed_endpoints_all_become_destinations(
            conditions in proptest::collection::vec(
                (proptest::option::of(any::<bool>()), proptest::option::of(any::<bool>()),
                 proptest::option::of(any::<bool>()), proptest::option::of(prop_oneof![Just("z1"), Just("z2")])),
                0..20),
        ) {
            let endpoints: Vec<Value> = conditions
                .iter()
                .enumerate()
                .map(|(i, (ready, serving, terminating, hint))| {
                    let hints: Vec<&str> = hint.iter().copied().collect();
                    endpoint(&format!("10.0.{}.{}", i / 200, i % 200 + 1), &format!("u{i}"),
                        json!({"ready": ready, "serving": serving, "terminating": terminating}), "z1", &hints)
                })
                .collect();
            let (found, errors) = merge([&web("w", "IPv4", endpoints)], &rules(Some("http"), Some("z1")));
            prop_assert!(errors.is_empty());
            prop_assert_eq!(found.len(), conditions.len());
        }
    }
}

//! Reading a cluster's `Discovery` and `LocalityTiers` sections (healthpick
//! extensions, which YARP ignores). `Discovery` is one source (an object) or several (an array).
//! Every key is read as .NET configuration reads keys (case-insensitive, scalars as text); every
//! bad value is an error naming cluster, key path and value; a key this section does not know is
//! a warning.

use std::net::SocketAddr;
use std::time::Duration;

use super::discovery::{
    DiscoveryConfig, DnsRecord, DnsSourceConfig, GuardMode, GuardPolicy, LocalityTiers,
    RefreshBounds, ResolveDestinationsConfig, SourceConfig,
};
use super::metadata::parse_number;
use super::source_consul::ConsulSourceConfig;
use super::source_etcd::EtcdSourceConfig;
use super::source_kubernetes::KubernetesSourceConfig;
use super::tree::{join, Node, Reader};
use crate::ids::eq_ignore_case;

/// The source types a `Discovery` section may name.
const TYPES: &[&str] = &["Dns", "ResolveDestinations", "Etcd", "Consul", "Kubernetes"];

/// The keys every source takes, and those of each type.
const COMMON_KEYS: &[&str] = &[
    "Type",
    "Source",
    "Guard",
    "MinRefresh",
    "MaxRefresh",
    "Jitter",
    "FirstAnswerWithin",
];
const DNS_KEYS: &[&str] = &["Name", "Record", "Port", "Scheme", "Servers", "Timeout"];
const RESOLVE_KEYS: &[&str] = &["Servers", "Timeout"];
const ETCD_KEYS: &[&str] = &["Endpoints", "Prefix", "Timeout"];
const KUBERNETES_KEYS: &[&str] = &[
    "Service",
    "Namespace",
    "PortName",
    "Scheme",
    "Context",
    "Resync",
    "IdleTimeout",
    "LocalZone",
];
const CONSUL_KEYS: &[&str] = &[
    "Service",
    "Address",
    "Datacenters",
    "Tag",
    "Token",
    "Wait",
    "Stale",
    "MaxStale",
    "Scheme",
    "Timeout",
];
const GUARD_KEYS: &[&str] = &["Policy", "MaxRemovedShare", "ConfirmAfter"];
const LOCALITY_KEYS: &[&str] = &["Enabled", "LocalZone", "LocalRegion", "Tiers"];

/// The sources of a cluster's `Discovery` section (absent: none).
pub(crate) fn read_discovery(r: &mut Reader<'_, '_>, cluster: &Node) -> Vec<DiscoveryConfig> {
    let Some(section) = r.object(cluster, "", "Discovery") else {
        return Vec::new();
    };
    let entries = section.entries();
    let is_list = !entries.is_empty() && entries.iter().all(|(k, _)| k.parse::<usize>().is_ok());
    if !is_list {
        return read_source(r, section, "Discovery").into_iter().collect();
    }
    entries
        .iter()
        .filter_map(|(index, node)| match node {
            Node::Object(_) => read_source(r, node, &format!("Discovery:{index}")),
            other => {
                r.diags.error(
                    r.place.path(&format!("Discovery:{index}")),
                    r.place.message(format!(
                        "a discovery source must be an object, found {}",
                        other.kind()
                    )),
                );
                None
            }
        })
        .collect()
}

fn read_source(r: &mut Reader<'_, '_>, node: &Node, at: &str) -> Option<DiscoveryConfig> {
    let Some(kind) = r.text(node, at, "Type") else {
        r.diags.error(
            r.place.path(&join(at, "Type")),
            r.place.message(format!(
                "a discovery source needs a Type (one of: {})",
                TYPES.join(", ")
            )),
        );
        return None;
    };
    let source = if eq_ignore_case(kind.trim(), "Dns") {
        r.unknown_keys(node, at, &[COMMON_KEYS, DNS_KEYS]);
        read_dns(r, node, at).map(SourceConfig::Dns)
    } else if eq_ignore_case(kind.trim(), "ResolveDestinations") {
        r.unknown_keys(node, at, &[COMMON_KEYS, RESOLVE_KEYS]);
        Some(SourceConfig::ResolveDestinations(
            ResolveDestinationsConfig {
                servers: servers(r, node, at),
                timeout: r
                    .positive_duration(node, at, "Timeout", true)
                    .unwrap_or(Duration::from_secs(5)),
            },
        ))
    } else if eq_ignore_case(kind.trim(), "Etcd") {
        r.unknown_keys(node, at, &[COMMON_KEYS, ETCD_KEYS]);
        read_etcd(r, node, at).map(SourceConfig::Etcd)
    } else if eq_ignore_case(kind.trim(), "Consul") {
        r.unknown_keys(node, at, &[COMMON_KEYS, CONSUL_KEYS]);
        read_consul(r, node, at).map(SourceConfig::Consul)
    } else if eq_ignore_case(kind.trim(), "Kubernetes") {
        r.unknown_keys(node, at, &[COMMON_KEYS, KUBERNETES_KEYS]);
        read_kubernetes(r, node, at).map(SourceConfig::Kubernetes)
    } else {
        r.diags.error(
            r.place.path(&join(at, "Type")),
            r.place.message(format!(
                "discovery Type `{kind}` is not a known source (known: {})",
                TYPES.join(", ")
            )),
        );
        None
    };
    // The settings every source takes are read even when the type's own are bad, so that every
    // problem is reported at once.
    let name = r.text(node, at, "Source");
    let guard = r
        .object(node, at, "Guard")
        .map(|guard| read_guard(r, guard, &join(at, "Guard")));
    let defaults = RefreshBounds::default();
    let min = r.positive_duration(node, at, "MinRefresh", true);
    let max = r.positive_duration(node, at, "MaxRefresh", true);
    let refresh = RefreshBounds {
        min: min.unwrap_or(defaults.min),
        max: max.unwrap_or(defaults.max.max(min.unwrap_or(defaults.min))),
        jitter: share(r, node, at, "Jitter").unwrap_or(defaults.jitter),
    };
    if refresh.min > refresh.max {
        r.diags.error(
            r.place.path(&join(at, "MinRefresh")),
            r.place.message(format!(
                "MinRefresh ({} ms) is longer than MaxRefresh ({} ms)",
                refresh.min.as_millis(),
                refresh.max.as_millis()
            )),
        );
    }
    let first_answer_within = r.positive_duration(node, at, "FirstAnswerWithin", true);
    let mut config = DiscoveryConfig::new(source?);
    config.name = name;
    if let Some(guard) = guard {
        config.guard = guard;
    }
    config.refresh = refresh;
    if let Some(wait) = first_answer_within {
        config.first_answer_within = wait;
    }
    Some(config)
}

fn read_dns(r: &mut Reader<'_, '_>, node: &Node, at: &str) -> Option<DnsSourceConfig> {
    let name = r.text(node, at, "Name");
    if name.is_none() {
        r.diags.error(
            r.place.path(&join(at, "Name")),
            r.place
                .message("a Dns source needs the Name to look up (payments.service.example)"),
        );
    }
    let record = match r.text(node, at, "Record") {
        None => Some(DnsRecord::Address),
        Some(t)
            if ["A", "AAAA", "Address"]
                .iter()
                .any(|k| eq_ignore_case(k, t.trim())) =>
        {
            Some(DnsRecord::Address)
        }
        Some(t) if eq_ignore_case(t.trim(), "SRV") => Some(DnsRecord::Srv),
        Some(t) => {
            r.diags.error(
                r.place.path(&join(at, "Record")),
                r.place
                    .message(format!("Record `{t}` is not A, AAAA or SRV")),
            );
            None
        }
    };
    let port = match r.integer(node, at, "Port", "a port, 1 to 65535") {
        Some(p @ 1..=65535) => Some(p as u16),
        Some(p) => {
            r.diags.error(
                r.place.path(&join(at, "Port")),
                r.place
                    .message(format!("Port `{p}` is not a port (1 to 65535)")),
            );
            None
        }
        None => None,
    };
    if record == Some(DnsRecord::Address) && port.is_none() && r.text(node, at, "Port").is_none() {
        r.diags.error(
            r.place.path(&join(at, "Port")),
            r.place
                .message("a Dns source of A/AAAA records needs the Port of its destinations"),
        );
    }
    let scheme = read_scheme(r, node, at);
    let servers = servers(r, node, at);
    let timeout = r
        .positive_duration(node, at, "Timeout", true)
        .unwrap_or(Duration::from_secs(5));
    Some(DnsSourceConfig {
        name: name?,
        record: record?,
        port,
        scheme,
        servers,
        timeout,
    })
}

fn read_etcd(r: &mut Reader<'_, '_>, node: &Node, at: &str) -> Option<EtcdSourceConfig> {
    let endpoints = urls(r, node, at, "Endpoints");
    if endpoints.as_ref().is_some_and(Vec::is_empty) || node.get("Endpoints").is_none() {
        r.diags.error(
            r.place.path(&join(at, "Endpoints")),
            r.place
                .message("an Etcd source needs the Endpoints of etcd (http://10.0.0.5:2379)"),
        );
    }
    let prefix = r.text(node, at, "Prefix");
    match &prefix {
        None => r.diags.error(
            r.place.path(&join(at, "Prefix")),
            r.place.message(
                "an Etcd source needs the key Prefix of its instances (/services/payments/)",
            ),
        ),
        Some(p) if p.is_empty() => r.diags.error(
            r.place.path(&join(at, "Prefix")),
            r.place
                .message("Prefix `` is empty: it would read every key of etcd"),
        ),
        Some(_) => {}
    }
    let timeout = r.positive_duration(node, at, "Timeout", true);
    let endpoints = endpoints.filter(|e| !e.is_empty())?;
    let mut config = EtcdSourceConfig::new(endpoints, prefix?);
    if let Some(timeout) = timeout {
        config.timeout = timeout;
    }
    Some(config)
}

fn read_kubernetes(
    r: &mut Reader<'_, '_>,
    node: &Node,
    at: &str,
) -> Option<KubernetesSourceConfig> {
    let service = r.text(node, at, "Service").map(|s| s.trim().to_string());
    let service = match service {
        Some(name) if is_dns_label(&name) => Some(name),
        Some(name) => {
            r.diags.error(
                r.place.path(&join(at, "Service")),
                r.place.message(format!(
                    "Service `{name}` is not a Kubernetes Service name (a DNS label: lower-case letters, digits and `-`, at most 63)"
                )),
            );
            None
        }
        None => {
            r.diags.error(
                r.place.path(&join(at, "Service")),
                r.place
                    .message("a Kubernetes source needs the Service whose EndpointSlices it reads"),
            );
            None
        }
    };
    let namespace = r.text(node, at, "Namespace").map(|s| s.trim().to_string());
    if let Some(ns) = namespace.as_deref().filter(|ns| !is_dns_label(ns)) {
        r.diags.error(
            r.place.path(&join(at, "Namespace")),
            r.place.message(format!(
                "Namespace `{ns}` is not a Kubernetes namespace name (a DNS label)"
            )),
        );
    }
    let scheme = read_scheme(r, node, at);
    let resync = r.positive_duration(node, at, "Resync", true);
    if let Some(every) = resync.filter(|d| *d < Duration::from_secs(1)) {
        r.diags.error(
            r.place.path(&join(at, "Resync")),
            r.place.message(format!(
                "Resync ({} ms) is under 1 s: the slices would be listed again and again",
                every.as_millis()
            )),
        );
    }
    let idle = r.positive_duration(node, at, "IdleTimeout", true);
    if let Some(idle) = idle.filter(|d| *d < Duration::from_secs(6)) {
        r.diags.error(
            r.place.path(&join(at, "IdleTimeout")),
            r.place.message(format!(
                "IdleTimeout ({} ms) is under 6 s (the API server is asked to end a watch 5 s before it)",
                idle.as_millis()
            )),
        );
    }
    let mut config = KubernetesSourceConfig::new(service?);
    config.namespace = namespace;
    config.port_name = r
        .text(node, at, "PortName")
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty());
    config.scheme = scheme;
    config.context = r.text(node, at, "Context").filter(|c| !c.trim().is_empty());
    config.local_zone = r
        .text(node, at, "LocalZone")
        .map(|z| z.trim().to_string())
        .filter(|z| !z.is_empty());
    if let Some(resync) = resync {
        config.resync = resync;
    }
    if let Some(idle) = idle {
        config.idle_timeout = idle;
    }
    Some(config)
}

/// The `Scheme` of the destinations a source names: `http` (default) or `https`, lower-cased; a
/// bad one is an error (and `http` stands in for it).
fn read_scheme(r: &mut Reader<'_, '_>, node: &Node, at: &str) -> String {
    let scheme = r.text(node, at, "Scheme").unwrap_or_else(|| "http".into());
    let folded = scheme.trim().to_ascii_lowercase();
    if folded == "http" || folded == "https" {
        return folded;
    }
    r.diags.error(
        r.place.path(&join(at, "Scheme")),
        r.place
            .message(format!("Scheme `{scheme}` is not http or https")),
    );
    "http".into()
}

/// A DNS label as Kubernetes names Services and namespaces (RFC 1123).
fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn read_consul(r: &mut Reader<'_, '_>, node: &Node, at: &str) -> Option<ConsulSourceConfig> {
    let service = r.text(node, at, "Service").filter(|s| !s.trim().is_empty());
    if service.is_none() {
        r.diags.error(
            r.place.path(&join(at, "Service")),
            r.place
                .message("a Consul source needs the Service whose instances it reads"),
        );
    }
    let address = r.text(node, at, "Address").and_then(|text| {
        let trimmed = text.trim();
        let with_scheme = if trimmed.contains("://") {
            trimmed.to_string()
        } else {
            format!("http://{trimmed}")
        };
        match url::Url::parse(&with_scheme) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => Some(url),
            _ => {
                r.diags.error(
                    r.place.path(&join(at, "Address")),
                    r.place.message(format!(
                        "Address `{text}` is not the URL of a Consul agent (http://127.0.0.1:8500)"
                    )),
                );
                None
            }
        }
    });
    let datacenters = strings(r, node, at, "Datacenters");
    let scheme = read_scheme(r, node, at);
    let wait = r.positive_duration(node, at, "Wait", true);
    if let Some(w) = wait {
        if w > Duration::from_secs(600) {
            r.diags.error(
                r.place.path(&join(at, "Wait")),
                r.place.message(format!(
                    "Wait ({} s) is longer than Consul's longest blocking query (10 min)",
                    w.as_secs()
                )),
            );
        }
    }
    let stale = r.bool(node, at, "Stale");
    let max_stale = r.positive_duration(node, at, "MaxStale", true);
    let timeout = r.positive_duration(node, at, "Timeout", true);
    let mut config = ConsulSourceConfig::new(service?);
    config.address = address;
    config.datacenters = datacenters;
    config.tag = r.text(node, at, "Tag");
    config.token = r.text(node, at, "Token");
    config.scheme = scheme;
    if let Some(wait) = wait {
        config.wait = wait.min(Duration::from_secs(600));
    }
    // `MaxStale` alone allows stale reads too; `Stale: true` alone allows 10 s.
    config.stale = match (stale, max_stale) {
        (Some(false), _) => None,
        (_, Some(max)) => Some(max),
        (Some(true), None) => Some(Duration::from_secs(10)),
        (None, None) => None,
    };
    if let Some(timeout) = timeout {
        config.timeout = timeout;
    }
    Some(config)
}

/// A list of strings (an array, or one string).
fn strings(r: &mut Reader<'_, '_>, node: &Node, at: &str, key: &str) -> Vec<String> {
    match node.get(key) {
        None | Some(Node::Null) => Vec::new(),
        Some(Node::Value(v)) => vec![v.clone()],
        Some(Node::Object(items)) => items
            .iter()
            .filter_map(|(i, v)| match v {
                Node::Value(v) => Some(v.clone()),
                other => {
                    r.diags.error(
                        r.place.path(&join(at, &format!("{key}:{i}"))),
                        r.place.message(format!(
                            "{key} entries must be text, found {}",
                            other.kind()
                        )),
                    );
                    None
                }
            })
            .collect(),
    }
}

/// A list of http(s) URLs (an array, or one string); `None` when one is bad.
fn urls(r: &mut Reader<'_, '_>, node: &Node, at: &str, key: &str) -> Option<Vec<url::Url>> {
    let mut ok = true;
    let mut out = Vec::new();
    let texts = strings(r, node, at, key);
    for (i, text) in texts.iter().enumerate() {
        match url::Url::parse(text.trim()) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
                out.push(url)
            }
            _ => {
                ok = false;
                let path = if texts.len() == 1 && matches!(node.get(key), Some(Node::Value(_))) {
                    join(at, key)
                } else {
                    join(at, &format!("{key}:{i}"))
                };
                r.diags.error(
                    r.place.path(&path),
                    r.place.message(format!(
                        "`{text}` is not an http(s) URL (http://10.0.0.5:2379)"
                    )),
                );
            }
        }
    }
    ok.then_some(out)
}

/// `Servers`: `ip:port` strings, as an array or one string.
fn servers(r: &mut Reader<'_, '_>, node: &Node, at: &str) -> Vec<SocketAddr> {
    let texts: Vec<(String, String)> = match node.get("Servers") {
        None | Some(Node::Null) => return Vec::new(),
        Some(Node::Value(v)) => vec![(join(at, "Servers"), v.clone())],
        Some(Node::Object(items)) => items
            .iter()
            .filter_map(|(i, v)| match v {
                Node::Value(v) => Some((join(at, &format!("Servers:{i}")), v.clone())),
                _ => None,
            })
            .collect(),
    };
    texts
        .into_iter()
        .filter_map(|(path, text)| match text.trim().parse::<SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(_) => {
                r.diags.error(
                    r.place.path(&path),
                    r.place.message(format!(
                        "server `{text}` is not an ip:port address (127.0.0.1:53, [::1]:53)"
                    )),
                );
                None
            }
        })
        .collect()
}

fn read_guard(r: &mut Reader<'_, '_>, node: &Node, at: &str) -> GuardPolicy {
    r.unknown_keys(node, at, &[GUARD_KEYS]);
    let mut guard = GuardPolicy::default();
    match r.text(node, at, "Policy") {
        None => {}
        Some(t) if eq_ignore_case(t.trim(), "AfterConfirmation") => {
            guard.mode = GuardMode::AfterConfirmation
        }
        Some(t) if eq_ignore_case(t.trim(), "Never") => guard.mode = GuardMode::Never,
        Some(t) if eq_ignore_case(t.trim(), "Immediately") => guard.mode = GuardMode::Immediately,
        Some(t) => r.diags.error(
            r.place.path(&join(at, "Policy")),
            r.place.message(format!(
                "guard Policy `{t}` is not AfterConfirmation, Never or Immediately"
            )),
        ),
    }
    if let Some(s) = share(r, node, at, "MaxRemovedShare") {
        guard.max_removed_share = s;
    }
    if let Some(d) = r.positive_duration(node, at, "ConfirmAfter", true) {
        guard.confirm_after = d;
    }
    guard
}

/// A number from 0 to 1.
fn share(r: &mut Reader<'_, '_>, node: &Node, at: &str, key: &str) -> Option<f64> {
    let text = r.text(node, at, key)?;
    match parse_number(&text) {
        Some(v) if (0.0..=1.0).contains(&v) => Some(v),
        _ => {
            r.diags.error(
                r.place.path(&join(at, key)),
                r.place
                    .message(format!("{key} `{text}` is not a share from 0 to 1")),
            );
            None
        }
    }
}

/// A cluster's `LocalityTiers` section (absent, or `Enabled: false`: off).
pub(crate) fn read_locality_tiers(r: &mut Reader<'_, '_>, cluster: &Node) -> Option<LocalityTiers> {
    const AT: &str = "LocalityTiers";
    let node = r.object(cluster, "", AT)?;
    r.unknown_keys(node, AT, &[LOCALITY_KEYS]);
    if r.bool(node, AT, "Enabled") == Some(false) {
        return None;
    }
    let mut tiers = LocalityTiers {
        local_zone: r.text(node, AT, "LocalZone"),
        local_region: r.text(node, AT, "LocalRegion"),
        ..LocalityTiers::default()
    };
    if let Some(named) = r.object(node, AT, "Tiers") {
        for (name, _) in named.entries() {
            let what = "a tier: 0, 1, 2, ...";
            if let Some(tier) = r.integer(named, &join(AT, "Tiers"), name, what) {
                tiers.tiers.insert(name.clone(), tier);
            }
        }
    }
    Some(tiers)
}

//! What a built-in source publishes is what the engine accepts: an entry the engine would
//! refuse (an address that is not a usable base URL, a weight that is not a number of 0 or
//! more, an empty key, a key given twice) is left out of the answer with a warning naming it,
//! and the rest of the answer applies. One bad registration never blocks its neighbours.

use std::collections::HashSet;

use crate::destination::endpoint::Endpoint;
use crate::engine::publisher::Publisher;
use crate::ids::fold_case;
use crate::uri::{check_base, shown};

/// `endpoints` without the entries the engine would refuse (of two with the same key, the
/// first stays); each one left out is logged at WARN, naming the cluster, the source and why.
pub(crate) fn admitted(publisher: &Publisher, endpoints: Vec<Endpoint>) -> Vec<Endpoint> {
    let mut keys = HashSet::with_capacity(endpoints.len());
    endpoints
        .into_iter()
        .filter(|e| {
            let mut problems = e.problems();
            if problems.is_empty() && !keys.insert(fold_case(e.key())) {
                problems.push(format!("key `{}` is given twice; the first stays", e.key()));
            }
            for problem in &problems {
                tracing::warn!(target: "healthpick", cluster = publisher.cluster(), source = publisher.source(), "{problem}; left out");
            }
            problems.is_empty()
        })
        .collect()
}

/// The base URL of a discovered instance: exactly `scheme://host:port/`, with an IPv6 address
/// in brackets, or why `host` is not a host (a path, query, fragment, user or port of its own
/// would otherwise become part of the URL) or the URL is not one the engine accepts.
#[cfg_attr(not(feature = "consul"), allow(dead_code))]
pub(crate) fn base_url(scheme: &str, host: &str, port: u16) -> Result<url::Url, String> {
    let bracketed = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    let url = url::Url::parse(&format!("{scheme}://{bracketed}:{port}/"))
        .map_err(|e| format!("address `{}` with port {port}: {e}", shown(host)))?;
    let exact = url.username().is_empty()
        && url.password().is_none()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none()
        && url.port_or_known_default() == Some(port);
    if !exact {
        return Err(format!(
            "address `{}` is not a host (it would make the URL `{}`)",
            shown(host),
            shown(url.as_str())
        ));
    }
    check_base(url).map_err(|why| format!("address `{}` with port {port} {why}", shown(host)))
}

#[cfg(test)]
mod tests {
    use super::base_url;

    #[test]
    fn a_host_and_a_port_make_exactly_one_base_url() {
        let ok = |host: &str| base_url("http", host, 8080).unwrap().to_string();
        assert_eq!(ok("10.0.0.1"), "http://10.0.0.1:8080/");
        assert_eq!(ok("fd00::1"), "http://[fd00::1]:8080/");
        assert_eq!(ok("[fd00::1]"), "http://[fd00::1]:8080/");
        assert_eq!(ok("Web-1.Node.Consul"), "http://web-1.node.consul:8080/");
        assert_eq!(base_url("http", "h", 80).unwrap().as_str(), "http://h/");
        for bad in [
            "10.0.0.1/x",
            "a?b",
            "a#b",
            "a@b",
            "a\\b",
            "h:1",
            "",
            "a b",
            &"h".repeat(254),
        ] {
            assert!(base_url("http", bad, 8080).is_err(), "{bad}");
        }
    }
}

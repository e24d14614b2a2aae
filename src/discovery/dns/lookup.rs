//! The DNS side of the DNS sources (hickory-resolver 0.26): building a resolver that asks only
//! the configured name servers (or the system's), lookups of addresses and SRV records, and the
//! classification of every outcome into records, "no such name" (NXDOMAIN), "no such records"
//! (NODATA) or an error.
//!
//! The resolver keeps no response cache, so a changed record is seen at the next refresh instead
//! of when a cached copy runs out; the TTLs of the answers still decide when that refresh comes.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig,
    ResolverOpts,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError, NoRecords};
use hickory_resolver::proto::op::ResponseCode;
use hickory_resolver::proto::rr::{Name, RData, RecordType};
use hickory_resolver::{Resolver, TokioResolver};
use tokio::task::JoinSet;

/// How names are looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRules {
    /// Names are fully qualified (no search list) and the hosts file is not read: a `Dns` source.
    Exact,
    /// As the system resolver does when no servers are configured: its search list and the hosts
    /// file (YARP's resolver asks the operating system); with configured servers, as `Exact`.
    LikeTheSystem,
}

/// A resolver and what its messages name.
#[derive(Clone)]
pub(crate) struct Lookups {
    resolver: TokioResolver,
    /// `127.0.0.1:5353` or `the system's name servers (1.2.3.4:53)`, for error messages.
    asks: Arc<str>,
}

impl std::fmt::Debug for Lookups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookups").field("asks", &self.asks).finish()
    }
}

/// What one lookup found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Found<T> {
    /// Records, and the shortest TTL among them (seconds).
    Records(T, u32),
    /// The name exists without records of the asked type (NOERROR, no answer), with the negative
    /// TTL of the server's SOA when it sent one.
    NoData(Option<u32>),
    /// The name does not exist (NXDOMAIN), with the negative TTL when the server sent one.
    NxDomain(Option<u32>),
}

/// Why a lookup has no answer: a timeout, a server failure, a refusal, no reachable server, an
/// answer that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LookupError(pub String);

impl std::fmt::Display for LookupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One SRV record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SrvRecord {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    /// The target, lower case, without the trailing dot; empty for the root (`.`: "no service").
    pub target: String,
}

/// An SRV answer: its records and the addresses of targets the server sent along (the
/// additional section), by target.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct SrvAnswer {
    pub records: Vec<SrvRecord>,
    /// (target, address, TTL) from the additional section.
    pub glue: Vec<(String, IpAddr, u32)>,
}

/// Bound on the lookups one refresh has in flight (SRV targets, ResolveDestinations hosts).
const CONCURRENT_LOOKUPS: usize = 16;

impl Lookups {
    /// A resolver asking `servers` (UDP, then TCP when an answer is truncated), or the system's
    /// name servers when `servers` is empty. Each query gets half of `timeout` and is sent once
    /// more after a timeout or a server failure, so one lookup takes at most `timeout`.
    ///
    /// # Errors
    /// The system configuration cannot be read (no `/etc/resolv.conf`, no name server in it).
    pub fn new(
        servers: &[SocketAddr],
        timeout: Duration,
        rules: NameRules,
    ) -> Result<Self, String> {
        let (config, asks, system) = if servers.is_empty() {
            let (system, _) = hickory_resolver::system_conf::read_system_conf()
                .map_err(|e| format!("the system's resolver configuration cannot be read: {e}"))?;
            let listed: Vec<String> = system
                .name_servers()
                .iter()
                .map(|ns| ns.ip.to_string())
                .collect();
            let asks = format!("the system's name servers ({})", listed.join(", "));
            let config = match rules {
                NameRules::Exact => {
                    ResolverConfig::from_parts(None, Vec::new(), system.name_servers().to_vec())
                }
                NameRules::LikeTheSystem => system,
            };
            (config, asks, true)
        } else {
            let name_servers = servers
                .iter()
                .map(|server| {
                    let mut udp = ConnectionConfig::udp();
                    udp.port = server.port();
                    let mut tcp = ConnectionConfig::tcp();
                    tcp.port = server.port();
                    NameServerConfig::new(server.ip(), true, vec![udp, tcp])
                })
                .collect();
            let listed: Vec<String> = servers.iter().map(ToString::to_string).collect();
            (
                ResolverConfig::from_parts(None, Vec::new(), name_servers),
                listed.join(", "),
                false,
            )
        };
        let mut opts = ResolverOpts::default();
        // One query attempt gets half the budget and is retried once (a lost UDP datagram is
        // not an outage); the caller bounds the whole lookup by `timeout` as well.
        opts.timeout = (timeout / 2).max(Duration::from_millis(1));
        opts.attempts = 1;
        // No response cache: a changed record is seen at the next refresh.
        opts.cache_size = 0;
        opts.use_hosts_file = if system && rules == NameRules::LikeTheSystem {
            ResolveHosts::Auto
        } else {
            ResolveHosts::Never
        };
        if rules == NameRules::Exact {
            opts.ndots = 0;
        }
        opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        let resolver = Resolver::builder_with_config(config, TokioRuntimeProvider::default())
            .with_options(opts)
            .build()
            .map_err(|e| format!("the DNS resolver cannot be built: {e}"))?;
        Ok(Lookups {
            resolver,
            asks: Arc::from(asks),
        })
    }

    /// What the resolver asks, for messages.
    pub fn asks(&self) -> &str {
        &self.asks
    }

    /// The A and AAAA records of `name`, asked at the same time. Records of either family make
    /// the answer; otherwise NXDOMAIN from either says the name does not exist, else NODATA. An
    /// error of either lookup fails the whole lookup (half an answer would remove the other
    /// family's destinations).
    ///
    /// # Errors
    /// Why either lookup has no answer.
    pub async fn addresses(&self, name: &Name) -> Result<Found<Vec<IpAddr>>, LookupError> {
        let (v4, v6) = tokio::join!(
            self.lookup(name, RecordType::A),
            self.lookup(name, RecordType::AAAA)
        );
        Ok(merge_families(v4?, v6?))
    }

    /// The SRV records of `name` and the target addresses sent along with them.
    ///
    /// # Errors
    /// Why the lookup has no answer.
    pub async fn srv(&self, name: &Name) -> Result<Found<SrvAnswer>, LookupError> {
        let lookup = match self.resolver.lookup(name.clone(), RecordType::SRV).await {
            Ok(lookup) => lookup,
            Err(e) => return negative(e, name, RecordType::SRV, &self.asks),
        };
        let mut answer = SrvAnswer::default();
        let mut ttl = u32::MAX;
        for record in lookup.answers() {
            if let RData::SRV(srv) = &record.data {
                ttl = ttl.min(record.ttl);
                answer.records.push(SrvRecord {
                    priority: srv.priority,
                    weight: srv.weight,
                    port: srv.port,
                    target: plain(&srv.target),
                });
            }
        }
        for record in lookup.additionals() {
            let ip = match &record.data {
                RData::A(a) => IpAddr::V4(a.0),
                RData::AAAA(a) => IpAddr::V6(a.0),
                _ => continue,
            };
            answer.glue.push((plain(&record.name), ip, record.ttl));
        }
        if answer.records.is_empty() {
            // An answer without SRV records (only a CNAME, say): the name has none.
            return Ok(Found::NoData(None));
        }
        Ok(Found::Records(answer, ttl))
    }

    /// [`addresses`](Self::addresses) of every name of `names`, at most
    /// [`CONCURRENT_LOOKUPS`] at a time, in the order given.
    pub async fn addresses_of_all(
        &self,
        names: Vec<Name>,
    ) -> Vec<(Name, Result<Found<Vec<IpAddr>>, LookupError>)> {
        type Outcome = Result<Found<Vec<IpAddr>>, LookupError>;
        let mut results: Vec<(Name, Option<Outcome>)> =
            names.iter().map(|n| (n.clone(), None)).collect();
        let mut pending = names.into_iter().enumerate();
        let mut running = JoinSet::new();
        let mut tasks = std::collections::HashMap::new();
        loop {
            while running.len() < CONCURRENT_LOOKUPS {
                let Some((index, name)) = pending.next() else {
                    break;
                };
                let lookups = self.clone();
                let task = running.spawn(async move { (index, lookups.addresses(&name).await) });
                tasks.insert(task.id(), index);
            }
            match running.join_next_with_id().await {
                Some(Ok((_, (index, found)))) => results[index].1 = Some(found),
                Some(Err(e)) => {
                    if let Some(&index) = tasks.get(&e.id()) {
                        results[index].1 =
                            Some(Err(LookupError(format!("the lookup ended early: {e}"))));
                    }
                }
                None => break,
            }
        }
        results
            .into_iter()
            .map(|(name, found)| {
                let found =
                    found.unwrap_or_else(|| Err(LookupError("the lookup did not run".to_string())));
                (name, found)
            })
            .collect()
    }

    /// One lookup of one record type, with the addresses of its answers.
    async fn lookup(
        &self,
        name: &Name,
        kind: RecordType,
    ) -> Result<Found<Vec<IpAddr>>, LookupError> {
        let lookup = match self.resolver.lookup(name.clone(), kind).await {
            Ok(lookup) => lookup,
            Err(e) => return negative(e, name, kind, &self.asks),
        };
        let mut ips = Vec::new();
        let mut ttl = u32::MAX;
        // Every answer counts for the TTL (the CNAME of a chain too); only addresses are kept.
        for record in lookup.answers() {
            let ip = match &record.data {
                RData::A(a) if kind == RecordType::A => IpAddr::V4(a.0),
                RData::AAAA(a) if kind == RecordType::AAAA => IpAddr::V6(a.0),
                RData::CNAME(_) => {
                    ttl = ttl.min(record.ttl);
                    continue;
                }
                _ => continue,
            };
            ttl = ttl.min(record.ttl);
            ips.push(ip);
        }
        if ips.is_empty() {
            return Ok(Found::NoData(None));
        }
        Ok(Found::Records(ips, ttl))
    }
}

/// Combines the A and AAAA outcomes of one name.
fn merge_families(v4: Found<Vec<IpAddr>>, v6: Found<Vec<IpAddr>>) -> Found<Vec<IpAddr>> {
    match (v4, v6) {
        (Found::Records(mut a, t1), Found::Records(b, t2)) => {
            a.extend(b);
            Found::Records(a, t1.min(t2))
        }
        (Found::Records(a, t), _) | (_, Found::Records(a, t)) => Found::Records(a, t),
        (Found::NxDomain(t1), other) | (other, Found::NxDomain(t1)) => {
            Found::NxDomain(min_ttl(t1, negative_ttl(&other)))
        }
        (Found::NoData(t1), Found::NoData(t2)) => Found::NoData(min_ttl(t1, t2)),
    }
}

fn negative_ttl<T>(found: &Found<T>) -> Option<u32> {
    match found {
        Found::NoData(t) | Found::NxDomain(t) => *t,
        Found::Records(_, t) => Some(*t),
    }
}

fn min_ttl(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A failed lookup: NXDOMAIN and NODATA are answers, everything else an error.
fn negative<T>(
    error: NetError,
    name: &Name,
    kind: RecordType,
    asks: &str,
) -> Result<Found<T>, LookupError> {
    if let NetError::Dns(DnsError::NoRecordsFound(NoRecords {
        response_code,
        negative_ttl,
        ..
    })) = &error
    {
        match *response_code {
            ResponseCode::NXDomain => return Ok(Found::NxDomain(*negative_ttl)),
            ResponseCode::NoError => return Ok(Found::NoData(*negative_ttl)),
            _ => {}
        }
    }
    Err(LookupError(describe(&error, name, kind, asks)))
}

/// What a lookup error means, in words that name the query and the servers.
fn describe(error: &NetError, name: &Name, kind: RecordType, asks: &str) -> String {
    let query = format!("{} {kind}", plain(name));
    match error {
        NetError::Timeout => format!("{query}: no answer from {asks} in time"),
        NetError::NoConnections => format!("{query}: no name server reachable ({asks})"),
        NetError::Truncated => {
            format!("{query}: the answer is too large (truncated even over TCP) from {asks}")
        }
        NetError::Dns(DnsError::ResponseCode(ResponseCode::ServFail)) => {
            format!("{query}: server failure (SERVFAIL) from {asks}")
        }
        NetError::Dns(DnsError::ResponseCode(ResponseCode::Refused)) => {
            format!("{query}: refused (REFUSED) by {asks}")
        }
        NetError::Dns(DnsError::ResponseCode(code)) => {
            format!("{query}: error response {code} from {asks}")
        }
        NetError::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("{query}: connection refused by {asks}")
        }
        other => format!("{query}: {other} ({asks})"),
    }
}

/// A name in lower case without its trailing dot (`web1.test`); empty for the root.
pub(crate) fn plain(name: &Name) -> String {
    let text = name.to_lowercase().to_ascii();
    match text.strip_suffix('.') {
        Some(stripped) => stripped.to_string(),
        None => text,
    }
}

/// Parses a configured name as a fully qualified DNS name (a trailing dot is added).
///
/// # Errors
/// The name is empty or not a valid DNS name.
pub(crate) fn fully_qualified(name: &str) -> Result<Name, String> {
    let trimmed = name.trim();
    if trimmed.is_empty() || trimmed == "." {
        return Err("the DNS name is empty".into());
    }
    let mut parsed =
        Name::from_utf8(trimmed).map_err(|e| format!("`{trimmed}` is not a DNS name: {e}"))?;
    parsed.set_fqdn(true);
    Ok(parsed)
}

/// Parses a host name of a URL for a lookup: fully qualified under [`NameRules::Exact`], as
/// written (the search list applies) otherwise.
///
/// # Errors
/// Not a valid DNS name.
pub(crate) fn host_name(host: &str, rules: NameRules) -> Result<Name, String> {
    match rules {
        NameRules::Exact => fully_qualified(host),
        NameRules::LikeTheSystem => {
            let trimmed = host.trim();
            let parsed = Name::from_utf8(trimmed)
                .map_err(|e| format!("`{trimmed}` is not a DNS name: {e}"))?;
            Ok(parsed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn either_family_with_records_makes_the_answer() {
        let v4 = Found::Records(vec![ip("127.0.0.1")], 30);
        let v6 = Found::Records(vec![ip("::1")], 10);
        assert_eq!(
            merge_families(v4.clone(), v6),
            Found::Records(vec![ip("127.0.0.1"), ip("::1")], 10)
        );
        assert_eq!(
            merge_families(Found::NoData(None), v4.clone()),
            Found::Records(vec![ip("127.0.0.1")], 30)
        );
        assert_eq!(
            merge_families(v4, Found::NxDomain(None)),
            Found::Records(vec![ip("127.0.0.1")], 30),
            "records win over an inconsistent NXDOMAIN of the other family"
        );
    }

    #[test]
    fn nxdomain_wins_over_nodata_and_negative_ttls_combine() {
        assert_eq!(
            merge_families(Found::NoData(Some(5)), Found::NxDomain(Some(9))),
            Found::NxDomain(Some(5))
        );
        assert_eq!(
            merge_families(Found::NoData(None), Found::NoData(Some(3))),
            Found::NoData(Some(3))
        );
        assert_eq!(
            merge_families(Found::NxDomain(None), Found::NxDomain(None)),
            Found::NxDomain(None)
        );
    }

    #[test]
    fn names_are_fully_qualified_and_printed_plain() {
        let name = fully_qualified("Payments.Service.test").unwrap();
        assert!(name.is_fqdn());
        assert_eq!(plain(&name), "payments.service.test");
        assert_eq!(
            plain(&fully_qualified("payments.test.").unwrap()),
            "payments.test"
        );
        assert!(fully_qualified("").is_err());
        assert!(fully_qualified(" . ").is_err());
        assert!(fully_qualified("bad..name").is_err());
        assert_eq!(plain(&Name::root()), "");
        let relative = host_name("payments", NameRules::LikeTheSystem).unwrap();
        assert!(!relative.is_fqdn());
    }
}

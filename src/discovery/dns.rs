//! DNS discovery (feature `dns`): a cluster's destinations from the A/AAAA or SRV
//! records of one name ([`DnsSource`]), or YARP's destination resolver, which expands each
//! configured destination whose host is a name into one destination per address
//! ([`ResolveDestinations`]).
//!
//! Both are [`PollSource`]s: the [driver](crate::discovery::poll) asks them again when their
//! answer's TTL runs out (clamped to `MinRefresh..MaxRefresh`, with jitter) and backs off after
//! errors. [`Discovery::start`](crate::discovery::Discovery::start) runs the ones a
//! configuration's `Discovery` sections name.
//!
//! | DNS says | the source answers | the engine does |
//! |---|---|---|
//! | records | [`Answer::found`] with one endpoint per address (A/AAAA) or per record (SRV), valid for the shortest TTL | diffs by key |
//! | NXDOMAIN (no such name) | [`Answer::not_found`], valid for the SOA's negative TTL if sent, else until the shortest refresh | the update guard holds it |
//! | NODATA (the name has no such records) | [`Answer::found`] with no endpoints, valid as NXDOMAIN | the update guard holds the emptying set |
//! | timeout, SERVFAIL, REFUSED, no server reachable, an answer too large | [`SourceError`] | keeps the last good set, marks the source stale, backs off |
//!
//! The resolver asks only the configured `Servers` (UDP, then TCP when an answer is truncated),
//! or the system's name servers (`/etc/resolv.conf`) when none are configured; it keeps no
//! response cache, so a changed record is seen at the next refresh; one refresh takes at most
//! the configured `Timeout` (each query gets half of it and is sent once more after a timeout or
//! SERVFAIL).

mod lookup;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::proto::rr::Name;
use url::{Host, Url};

use self::lookup::{
    fully_qualified, host_name, plain, Found, LookupError, Lookups, NameRules, SrvAnswer, SrvRecord,
};
use super::source::{Answer, BoxFuture, PollSource, SourceError};
use crate::config::discovery::{DnsRecord, DnsSourceConfig, ResolveDestinationsConfig};
use crate::config::metadata::Metadata;
use crate::config::model::ClusterConfig;
use crate::destination::endpoint::Endpoint;
use crate::uri::parse_base;

/// The weight an SRV record of weight 0 gets.
///
/// RFC 2782 gives weight-0 records "a very small chance of being selected" next to records with
/// a weight, and an equal share when every record of their priority says 0 (a common default).
/// A weight of exactly 0 would mean "never" to a weighted load balancer, and would leave such a
/// priority with nothing to pick, so 0 becomes this small positive weight instead: next to a
/// record of weight 1 it gets about one pick in a thousand.
pub const SRV_ZERO_WEIGHT: f64 = 0.001;

/// The A/AAAA or SRV records of one name, as a cluster's destinations.
///
/// - **A/AAAA** ([`DnsSourceConfig::address`]): one destination per address, key `ip:port`
///   (`[ip]:port` for IPv6), address `scheme://ip:port/`, `Host` header the configured name (as
///   YARP's DNS destination resolver keeps it). No explicit tier: a cluster's `LocalityTiers`
///   could place them, else tier 0.
/// - **SRV** ([`DnsSourceConfig::srv`]): one destination per record, key `target:port`,
///   address `scheme://ip:port/` with the target's address, `Host` the target name, an explicit
///   tier = the rank of the record's priority among the answer's distinct priorities (the lowest
///   priority value is tier 0), weight = the SRV weight ([`SRV_ZERO_WEIGHT`] for 0). The target's
///   address comes from the answer's additional section when the server sent it there, else from
///   an A/AAAA lookup of the target with the same resolver; of several addresses the lowest is
///   used (IPv4 before IPv6, then numerically), so the choice does not flip when a server
///   rotates its answers. A record whose target has no address (NXDOMAIN or NODATA), whose
///   target is `.` ("no service here") or whose port is 0 is left out; an *error* looking up a
///   target fails the whole refresh.
///
/// Names are looked up fully qualified (a trailing dot is added: no search list) and never in
/// the hosts file. Keys and Host names are in lower case, without the trailing dot.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use healthpick::config::DnsSourceConfig;
/// use healthpick::discovery::dns::DnsSource;
/// use healthpick::discovery::PollSource;
///
/// let source = DnsSource::new(
///     &DnsSourceConfig::address("payments.service.test", 8080).servers(vec!["127.0.0.1:5353".parse()?]),
/// )?;
/// let answer = source.resolve().await?;
/// for endpoint in answer.endpoints().unwrap_or_default() {
///     println!("{} at {}", endpoint.key(), endpoint.address()); // 10.0.0.7:8080 at http://10.0.0.7:8080/
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DnsSource {
    name: Name,
    /// The name as Host header and in messages: lower case, no trailing dot.
    plain_name: String,
    record: DnsRecord,
    port: u16,
    scheme: String,
    timeout: Duration,
    lookups: Lookups,
}

impl DnsSource {
    /// A source for `config`.
    ///
    /// # Errors
    /// The name is not a DNS name, an A/AAAA source has no port, the scheme is not `http` or
    /// `https`, or (without configured servers) the system's resolver configuration cannot be
    /// read.
    pub fn new(config: &DnsSourceConfig) -> Result<Self, String> {
        let name = fully_qualified(config.dns_name())?;
        let port = match (config.record(), config.port()) {
            (DnsRecord::Address, Some(port)) if port != 0 => port,
            (DnsRecord::Address, _) => {
                return Err(format!(
                    "the A/AAAA records of `{}` need the Port of their destinations",
                    config.dns_name()
                ))
            }
            (DnsRecord::Srv, _) => 0,
        };
        let scheme = checked_scheme(config.url_scheme())?;
        let lookups = Lookups::new(
            config.name_servers(),
            config.lookup_timeout(),
            NameRules::Exact,
        )?;
        Ok(DnsSource {
            plain_name: plain(&name),
            name,
            record: config.record(),
            port,
            scheme,
            timeout: config.lookup_timeout(),
            lookups,
        })
    }

    async fn ask(&self) -> Result<Answer, SourceError> {
        match self.record {
            DnsRecord::Address => {
                let found = self
                    .lookups
                    .addresses(&self.name)
                    .await
                    .map_err(source_error)?;
                match found {
                    Found::Records(ips, ttl) => Ok(Answer::found(address_endpoints(
                        &ips,
                        self.port,
                        &self.scheme,
                        &self.plain_name,
                    )?)
                    .valid_for(seconds(ttl))),
                    Found::NoData(ttl) => Ok(Answer::found(Vec::new()).valid_for(negative(ttl))),
                    Found::NxDomain(ttl) => Ok(Answer::not_found().valid_for(negative(ttl))),
                }
            }
            DnsRecord::Srv => {
                let found = self.lookups.srv(&self.name).await.map_err(source_error)?;
                match found {
                    Found::Records(answer, ttl) => self.srv_answer(answer, ttl).await,
                    Found::NoData(ttl) => Ok(Answer::found(Vec::new()).valid_for(negative(ttl))),
                    Found::NxDomain(ttl) => Ok(Answer::not_found().valid_for(negative(ttl))),
                }
            }
        }
    }

    /// The endpoints of an SRV answer: targets without glue are looked up first.
    async fn srv_answer(&self, answer: SrvAnswer, ttl: u32) -> Result<Answer, SourceError> {
        let mut ttl = ttl;
        let mut addresses: HashMap<String, IpAddr> = HashMap::new();
        for (target, ip, glue_ttl) in &answer.glue {
            if ip.is_unspecified() {
                continue;
            }
            let wanted = answer.records.iter().any(|r| &r.target == target);
            if !wanted {
                continue;
            }
            ttl = ttl.min(*glue_ttl);
            addresses
                .entry(target.clone())
                .and_modify(|known| *known = (*known).min(*ip))
                .or_insert(*ip);
        }
        let missing: BTreeSet<&str> = answer
            .records
            .iter()
            .filter(|r| usable(r) && !addresses.contains_key(&r.target))
            .map(|r| r.target.as_str())
            .collect();
        let names = missing
            .iter()
            .map(|target| fully_qualified(target).map_err(SourceError::new))
            .collect::<Result<Vec<Name>, SourceError>>()?;
        for (name, found) in self.lookups.addresses_of_all(names).await {
            match found.map_err(source_error)? {
                Found::Records(ips, target_ttl) => {
                    ttl = ttl.min(target_ttl);
                    if let Some(ip) = ips.into_iter().filter(|ip| !ip.is_unspecified()).min() {
                        addresses.insert(plain(&name), ip);
                    }
                }
                Found::NoData(_) | Found::NxDomain(_) => {
                    tracing::debug!(target: "healthpick", name = %self.plain_name, target = %plain(&name), "SRV target has no address: its record is left out");
                }
            }
        }
        let endpoints = srv_endpoints(&answer.records, &addresses, &self.scheme)?;
        Ok(Answer::found(endpoints).valid_for(seconds(ttl)))
    }
}

impl PollSource for DnsSource {
    fn resolve(&self) -> BoxFuture<'_, Result<Answer, SourceError>> {
        Box::pin(async move {
            match tokio::time::timeout(self.timeout, self.ask()).await {
                Ok(answer) => answer,
                Err(_) => Err(SourceError::new(format!(
                    "{}: no answer from {} within {} ms",
                    self.plain_name,
                    self.lookups.asks(),
                    self.timeout.as_millis()
                ))),
            }
        })
    }
}

/// YARP's DNS destination resolver (`AddDnsDestinationResolver`) as a source.
///
/// Each configured destination of the cluster whose `Address` host is a name expands to one
/// destination per address the name resolves to (A and AAAA):
///
/// - id (key) `{destinationId}[{ip}]` (`api[10.0.0.7]`, `api[fd00::7]`);
/// - address: the configured `Address` with its host replaced by the address (scheme, port
///   and path kept);
/// - `Host` header: the destination's configured `Host`, else the original authority — the
///   host name, with its port when the address names a non-default one — as YARP keeps it, so the
///   service sees the `Host` it would have seen without the resolver;
/// - `Health`: with its host replaced too when it is the same name; kept as is otherwise;
/// - tier (`Priority`), metadata and weight: the configured destination's.
///
/// A destination whose host is already an IP address is published as it is, under its own id.
/// The configured destinations themselves are then not published by the configuration (they
/// are templates).
///
/// **Failure of one name fails the whole answer**: when any name has no address (NXDOMAIN or
/// NODATA) or its lookup fails, the refresh is an error naming the destination and the name, the
/// last good set stays in force and the source is stale — as YARP keeps its previous
/// destinations when a name does not resolve. A configuration lists its destinations on
/// purpose, so a name that stops resolving is an outage or a typo to report, not an instance to
/// drop silently. This source never answers "does not exist".
///
/// Without configured servers, names are looked up as the operating system would (YARP calls
/// `Dns.GetHostAddressesAsync`): with the system's search list and the hosts file (read when
/// the source starts), so `http://localhost:5000/` expands to `id[127.0.0.1]` and `id[::1]`.
/// With configured servers, only those servers are asked, for the names as written.
#[derive(Debug)]
pub struct ResolveDestinations {
    templates: Vec<Template>,
    timeout: Duration,
    lookups: Lookups,
}

/// One configured destination.
#[derive(Debug)]
struct Template {
    id: String,
    address: Url,
    /// The name to look up, when the address host is one (else published as it is).
    name: Option<Name>,
    /// The host as written in the address (the key of its lookup).
    host: String,
    /// The configured Host, or the original authority.
    host_header: Option<String>,
    health: Option<Url>,
    /// Whether the health URL's host is the address's name (then replaced too).
    health_follows: bool,
    tier: u32,
    weight: f64,
    metadata: Metadata,
}

impl ResolveDestinations {
    /// A resolver for `cluster`'s destinations.
    ///
    /// # Errors
    /// A destination's address (or health address) is not an absolute http(s) URL or its host
    /// is not a DNS name, or (without configured servers) the system's resolver configuration
    /// cannot be read.
    pub fn new(
        config: &ResolveDestinationsConfig,
        cluster: &ClusterConfig,
    ) -> Result<Self, String> {
        let rules = if config.name_servers().is_empty() {
            NameRules::LikeTheSystem
        } else {
            NameRules::Exact
        };
        let mut templates = Vec::with_capacity(cluster.destinations().len());
        for d in cluster.destinations() {
            let address = parse_base(d.address()).map_err(|why| {
                format!("destination `{}`: address `{}` {why}", d.id(), d.address())
            })?;
            let health = match d.health_setting() {
                Some(h) => Some(parse_base(h).map_err(|why| {
                    format!("destination `{}`: health address `{h}` {why}", d.id())
                })?),
                None => None,
            };
            let (name, host) = match address.host() {
                Some(Host::Domain(domain)) => (
                    Some(
                        host_name(domain, rules)
                            .map_err(|why| format!("destination `{}`: {why}", d.id()))?,
                    ),
                    domain.to_string(),
                ),
                _ => (None, address.host_str().unwrap_or_default().to_string()),
            };
            let health_follows = name.is_some()
                && health
                    .as_ref()
                    .and_then(Url::host_str)
                    .is_some_and(|h| h.eq_ignore_ascii_case(&host));
            let host_header = match d.host_setting() {
                Some(configured) if !configured.is_empty() => Some(configured.to_string()),
                _ if name.is_some() => Some(match address.port() {
                    Some(port) => format!("{host}:{port}"),
                    None => host.clone(),
                }),
                _ => None,
            };
            templates.push(Template {
                id: d.id().to_string(),
                address,
                name,
                host,
                host_header,
                health,
                health_follows,
                tier: d.tier(),
                weight: d.weight(),
                metadata: d.metadata_map().clone(),
            });
        }
        Ok(ResolveDestinations {
            templates,
            timeout: config.lookup_timeout(),
            lookups: Lookups::new(config.name_servers(), config.lookup_timeout(), rules)?,
        })
    }

    async fn ask(&self) -> Result<Answer, SourceError> {
        // Each distinct name once, in the order of first use.
        let mut names: Vec<Name> = Vec::new();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for t in &self.templates {
            if let Some(name) = &t.name {
                if seen.insert(host_key(&t.host)) {
                    names.push(name.clone());
                }
            }
        }
        let mut resolved: HashMap<String, Vec<IpAddr>> = HashMap::new();
        let mut ttl: Option<u32> = None;
        let mut failures: HashMap<String, String> = HashMap::new();
        for (name, found) in self.lookups.addresses_of_all(names).await {
            let key = host_key(&plain(&name));
            match found {
                Ok(Found::Records(mut ips, t)) => {
                    ips.retain(|ip| !ip.is_unspecified());
                    ips.sort_unstable();
                    ips.dedup();
                    if ips.is_empty() {
                        failures.insert(key, "has no usable address".into());
                        continue;
                    }
                    ttl = Some(ttl.map_or(t, |known| known.min(t)));
                    resolved.insert(key, ips);
                }
                Ok(Found::NoData(_)) => {
                    failures.insert(key, "has no address (NODATA)".into());
                }
                Ok(Found::NxDomain(_)) => {
                    failures.insert(key, "does not exist (NXDOMAIN)".into());
                }
                Err(LookupError(why)) => {
                    failures.insert(key, why);
                }
            }
        }
        let mut endpoints = Vec::new();
        let mut problems = Vec::new();
        for t in &self.templates {
            let Some(_) = &t.name else {
                endpoints.push(t.endpoint(t.id.clone(), t.address.clone(), t.health.clone()));
                continue;
            };
            let key = host_key(&t.host);
            if let Some(why) = failures.get(&key) {
                problems.push(format!("destination `{}`: host `{}` {why}", t.id, t.host));
                continue;
            }
            let Some(ips) = resolved.get(&key) else {
                problems.push(format!(
                    "destination `{}`: host `{}` was not looked up",
                    t.id, t.host
                ));
                continue;
            };
            for ip in ips {
                let address = with_ip(&t.address, *ip)?;
                let health = match &t.health {
                    Some(h) if t.health_follows => Some(with_ip(h, *ip)?),
                    other => other.clone(),
                };
                endpoints.push(t.endpoint(format!("{}[{ip}]", t.id), address, health));
            }
        }
        if !problems.is_empty() {
            return Err(SourceError::new(problems.join("; ")));
        }
        let answer = Answer::found(endpoints);
        Ok(match ttl {
            Some(ttl) => answer.valid_for(seconds(ttl)),
            None => answer,
        })
    }
}

impl Template {
    fn endpoint(&self, key: String, address: Url, health: Option<Url>) -> Endpoint {
        let mut endpoint = Endpoint::new(key, address)
            .tier(self.tier)
            .weight(self.weight)
            .with_metadata(self.metadata.clone());
        if let Some(host) = &self.host_header {
            endpoint = endpoint.host(host.clone());
        }
        if let Some(health) = health {
            endpoint = endpoint.health_url(health);
        }
        endpoint
    }
}

impl PollSource for ResolveDestinations {
    fn resolve(&self) -> BoxFuture<'_, Result<Answer, SourceError>> {
        Box::pin(async move {
            match tokio::time::timeout(self.timeout, self.ask()).await {
                Ok(answer) => answer,
                Err(_) => Err(SourceError::new(format!(
                    "the destinations' hosts: no answer from {} within {} ms",
                    self.lookups.asks(),
                    self.timeout.as_millis()
                ))),
            }
        })
    }
}

/// A host name as the key of its lookup: lower case, without a trailing dot.
fn host_key(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// `url` with its host replaced by `ip`.
fn with_ip(url: &Url, ip: IpAddr) -> Result<Url, SourceError> {
    let mut url = url.clone();
    url.set_ip_host(ip)
        .map_err(|()| SourceError::new(format!("cannot put {ip} into `{url}`")))?;
    Ok(url)
}

/// One endpoint per address of an A/AAAA answer, in address order (duplicates and unspecified
/// addresses left out).
fn address_endpoints(
    ips: &[IpAddr],
    port: u16,
    scheme: &str,
    host: &str,
) -> Result<Vec<Endpoint>, SourceError> {
    let unique: BTreeSet<IpAddr> = ips
        .iter()
        .copied()
        .filter(|ip| !ip.is_unspecified())
        .collect();
    unique
        .into_iter()
        .map(|ip| {
            let at = SocketAddr::new(ip, port);
            Ok(Endpoint::new(at.to_string(), base_url(scheme, at)?).host(host))
        })
        .collect()
}

/// Whether an SRV record can be a destination: a target (not `.`) and a port.
fn usable(record: &SrvRecord) -> bool {
    !record.target.is_empty() && record.port != 0
}

/// One endpoint per usable SRV record whose target has an address: key `target:port`, tier the
/// rank of its priority, weight its weight ([`SRV_ZERO_WEIGHT`] for 0). A target and port given
/// twice is one endpoint, from the record with the lowest priority (then the highest weight).
fn srv_endpoints(
    records: &[SrvRecord],
    addresses: &HashMap<String, IpAddr>,
    scheme: &str,
) -> Result<Vec<Endpoint>, SourceError> {
    let mut chosen: BTreeMap<(String, u16), &SrvRecord> = BTreeMap::new();
    for record in records.iter().filter(|r| usable(r)) {
        if !addresses.contains_key(&record.target) {
            continue;
        }
        chosen
            .entry((record.target.clone(), record.port))
            .and_modify(|known| {
                if (record.priority, std::cmp::Reverse(record.weight))
                    < (known.priority, std::cmp::Reverse(known.weight))
                {
                    *known = record;
                }
            })
            .or_insert(record);
    }
    let priorities: Vec<u16> = chosen
        .values()
        .map(|r| r.priority)
        .collect::<BTreeSet<u16>>()
        .into_iter()
        .collect();
    let mut endpoints: Vec<(u32, Endpoint)> = Vec::with_capacity(chosen.len());
    for ((target, port), record) in chosen {
        let Some(ip) = addresses.get(&target) else {
            continue;
        };
        let tier = priorities
            .binary_search(&record.priority)
            .unwrap_or_default() as u32;
        let weight = if record.weight == 0 {
            SRV_ZERO_WEIGHT
        } else {
            f64::from(record.weight)
        };
        let endpoint = Endpoint::new(
            format!("{target}:{port}"),
            base_url(scheme, SocketAddr::new(*ip, port))?,
        )
        .host(target.clone())
        .tier(tier)
        .weight(weight);
        endpoints.push((tier, endpoint));
    }
    // Tier, then key: the same answer is always published in the same order.
    endpoints.sort_by(|(t1, e1), (t2, e2)| (t1, e1.key()).cmp(&(t2, e2.key())));
    Ok(endpoints.into_iter().map(|(_, e)| e).collect())
}

/// `scheme://ip:port/`.
fn base_url(scheme: &str, at: SocketAddr) -> Result<Url, SourceError> {
    Url::parse(&format!("{scheme}://{at}/"))
        .map_err(|e| SourceError::new(format!("`{scheme}://{at}/` is not a URL: {e}")))
}

/// `http` or `https`, in lower case.
fn checked_scheme(scheme: &str) -> Result<String, String> {
    let scheme = scheme.trim().to_ascii_lowercase();
    if scheme == "http" || scheme == "https" {
        Ok(scheme)
    } else {
        Err(format!("Scheme `{scheme}` is not http or https"))
    }
}

fn seconds(ttl: u32) -> Duration {
    Duration::from_secs(u64::from(ttl))
}

/// How long a negative answer stands: the server's negative TTL, else nothing (the driver asks
/// again after its shortest refresh delay, so a name that comes back is seen soon and a held
/// NXDOMAIN is confirmed soon).
fn negative(ttl: Option<u32>) -> Duration {
    ttl.map_or(Duration::ZERO, seconds)
}

fn source_error(error: LookupError) -> SourceError {
    SourceError::new(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn srv(priority: u16, weight: u16, port: u16, target: &str) -> SrvRecord {
        SrvRecord {
            priority,
            weight,
            port,
            target: target.into(),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn address_records_are_keyed_ip_port_with_the_name_as_host() {
        let endpoints = address_endpoints(
            &[
                ip("127.0.0.12"),
                ip("::1"),
                ip("127.0.0.11"),
                ip("127.0.0.12"),
                ip("0.0.0.0"),
            ],
            8080,
            "http",
            "payments.test",
        )
        .unwrap();
        let keys: Vec<&str> = endpoints.iter().map(Endpoint::key).collect();
        assert_eq!(keys, ["127.0.0.11:8080", "127.0.0.12:8080", "[::1]:8080"]);
        assert_eq!(endpoints[2].address().as_str(), "http://[::1]:8080/");
        assert!(endpoints
            .iter()
            .all(|e| e.attributes().host() == Some("payments.test")));
    }

    #[test]
    fn srv_priorities_rank_into_tiers_and_zero_weights_become_tiny() {
        let records = [
            srv(30, 5, 8082, "c.test"),
            srv(10, 60, 8080, "a.test"),
            srv(10, 0, 8081, "b.test"),
            srv(20, 1, 8080, "a.test"), // a.test:8080 again: the lower priority wins
            srv(10, 1, 8083, "gone.test"), // no address: left out
            srv(10, 1, 0, "a.test"),    // port 0: left out
            srv(10, 1, 80, ""),         // target `.`: left out
        ];
        let addresses: HashMap<String, IpAddr> = [
            ("a.test".to_string(), ip("127.0.0.1")),
            ("b.test".to_string(), ip("::1")),
            ("c.test".to_string(), ip("127.0.0.3")),
        ]
        .into_iter()
        .collect();
        let endpoints = srv_endpoints(&records, &addresses, "https").unwrap();
        let seen: Vec<(&str, u32, f64, &str, Option<&str>)> = endpoints
            .iter()
            .map(|e| {
                (
                    e.key(),
                    e.attributes().tier(),
                    e.attributes().weight(),
                    e.address().as_str(),
                    e.attributes().host(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "a.test:8080",
                    0,
                    60.0,
                    "https://127.0.0.1:8080/",
                    Some("a.test")
                ),
                (
                    "b.test:8081",
                    0,
                    SRV_ZERO_WEIGHT,
                    "https://[::1]:8081/",
                    Some("b.test")
                ),
                (
                    "c.test:8082",
                    1,
                    5.0,
                    "https://127.0.0.3:8082/",
                    Some("c.test")
                ),
            ],
            "priorities 10 and 30 are tiers 0 and 1 (20 was only a duplicate's)"
        );
    }

    #[test]
    fn an_srv_answer_of_only_unusable_records_is_empty() {
        let records = [srv(0, 0, 80, ""), srv(1, 1, 0, "a.test")];
        let addresses = HashMap::from([("a.test".to_string(), ip("127.0.0.1"))]);
        assert!(srv_endpoints(&records, &addresses, "http")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn hosts_are_replaced_keeping_scheme_port_and_path() {
        let url = Url::parse("https://api.test:8443/base/path/").unwrap();
        assert_eq!(
            with_ip(&url, ip("127.0.0.9")).unwrap().as_str(),
            "https://127.0.0.9:8443/base/path/"
        );
        assert_eq!(
            with_ip(&url, ip("fd00::9")).unwrap().as_str(),
            "https://[fd00::9]:8443/base/path/"
        );
    }

    #[test]
    fn negative_answers_without_a_ttl_ask_again_soon() {
        assert_eq!(negative(None), Duration::ZERO);
        assert_eq!(negative(Some(30)), Duration::from_secs(30));
    }

    #[test]
    fn bad_settings_are_refused_without_panicking() {
        let servers = vec!["127.0.0.1:53".parse().unwrap()];
        assert!(
            DnsSource::new(&DnsSourceConfig::address("", 80).servers(servers.clone())).is_err()
        );
        assert!(
            DnsSource::new(&DnsSourceConfig::address("a..b", 80).servers(servers.clone())).is_err()
        );
        assert!(
            DnsSource::new(&DnsSourceConfig::address("a.test", 0).servers(servers.clone()))
                .is_err()
        );
        assert!(DnsSource::new(
            &DnsSourceConfig::address("a.test", 80)
                .scheme("ftp")
                .servers(servers.clone())
        )
        .is_err());
        assert!(
            DnsSource::new(&DnsSourceConfig::srv("_http._tcp.a.test").servers(servers)).is_ok()
        );
    }
}

//! The discovery part of a cluster's configuration (a healthpick extension YARP
//! ignores): which sources feed the cluster (`Discovery`), how the update guard treats changes
//! that would remove much of it, and how locality maps to tiers (`LocalityTiers`).
//!
//! ```json
//! "payments": {
//!   "Discovery": {
//!     "Type": "Dns", "Name": "payments.service.test", "Port": 8080,
//!     "Servers": ["127.0.0.1:5353"], "MinRefresh": "00:00:05", "MaxRefresh": "00:05:00",
//!     "Guard": { "Policy": "AfterConfirmation", "MaxRemovedShare": 0.5, "ConfirmAfter": "00:00:30" }
//!   },
//!   "LocalityTiers": { "Enabled": true, "LocalZone": "eu-west-1a", "LocalRegion": "eu-west-1" }
//! }
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::source_consul::ConsulSourceConfig;
use super::source_etcd::EtcdSourceConfig;
use super::source_kubernetes::KubernetesSourceConfig;

/// One discovery source of a cluster, as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveryConfig {
    pub(crate) name: Option<String>,
    pub(crate) source: SourceConfig,
    pub(crate) guard: GuardPolicy,
    pub(crate) refresh: RefreshBounds,
    pub(crate) first_answer_within: Duration,
}

/// What kind of source, and its own settings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SourceConfig {
    /// DNS: A/AAAA records (one destination per address) or SRV records (feature `dns`).
    Dns(DnsSourceConfig),
    /// YARP's DNS destination resolver: each configured destination's host is resolved and the
    /// destination expands to one destination per address, `id[ip]` (feature `dns`).
    ResolveDestinations(ResolveDestinationsConfig),
    /// The keys under an etcd prefix, watched (feature `etcd`).
    Etcd(EtcdSourceConfig),
    /// A Consul service's instances, through blocking queries (feature `consul`).
    Consul(ConsulSourceConfig),
    /// A Kubernetes Service's endpoints, from its EndpointSlices, watched (feature
    /// `kubernetes`).
    Kubernetes(KubernetesSourceConfig),
}

/// Which DNS records a [`SourceConfig::Dns`] source reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DnsRecord {
    /// A and AAAA: one destination per address, key `ip:port`, `Host` = the name.
    Address,
    /// SRV: one destination per record, key `target:port`; priority rank is the tier, weight the
    /// weight.
    Srv,
}

/// Settings of a DNS source.
#[derive(Debug, Clone, PartialEq)]
pub struct DnsSourceConfig {
    pub(crate) name: String,
    pub(crate) record: DnsRecord,
    /// Port of A/AAAA destinations (SRV records carry their own).
    pub(crate) port: Option<u16>,
    pub(crate) scheme: String,
    pub(crate) servers: Vec<SocketAddr>,
    pub(crate) timeout: Duration,
}

/// Settings of YARP's destination resolver.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolveDestinationsConfig {
    pub(crate) servers: Vec<SocketAddr>,
    pub(crate) timeout: Duration,
}

/// What the update guard does with a publication that would empty a source's destinations,
/// remove at least [`max_removed_share`](Self::max_removed_share) of them, or say the service
/// does not exist. Smaller changes apply at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GuardPolicy {
    pub(crate) mode: GuardMode,
    pub(crate) max_removed_share: f64,
    pub(crate) confirm_after: Duration,
}

/// How the update guard treats a large removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuardMode {
    /// Hold it until it is confirmed: the source still says so after the confirmation delay, or
    /// the destinations it removes fail their probes too, or the application forces it. The
    /// default.
    AfterConfirmation,
    /// Hold it until the application forces it.
    Never,
    /// No guard: apply everything at once.
    Immediately,
}

impl Default for GuardPolicy {
    fn default() -> Self {
        GuardPolicy {
            mode: GuardMode::AfterConfirmation,
            max_removed_share: 0.5,
            confirm_after: Duration::from_secs(30),
        }
    }
}

impl GuardPolicy {
    /// A policy in `mode` with the default share (0.5) and confirmation delay (30 s).
    pub fn new(mode: GuardMode) -> Self {
        GuardPolicy {
            mode,
            ..GuardPolicy::default()
        }
    }

    /// Sets the share of a source's destinations (0 to 1) a single change may remove before it
    /// is held. Default 0.5.
    #[must_use]
    pub fn max_removed_share(mut self, share: f64) -> Self {
        self.max_removed_share = share;
        self
    }

    /// Sets how long a held change must stand before it is applied. Default 30 s.
    #[must_use]
    pub fn confirm_after(mut self, delay: Duration) -> Self {
        self.confirm_after = delay;
        self
    }

    /// The mode.
    pub fn mode(&self) -> GuardMode {
        self.mode
    }

    /// The share of a source's destinations a change may remove before it is held.
    pub fn removed_share(&self) -> f64 {
        self.max_removed_share
    }

    /// How long a held change must stand before it applies.
    pub fn confirmation_delay(&self) -> Duration {
        self.confirm_after
    }
}

/// How often a polling source asks again: its answer's own validity (a DNS TTL) clamped to
/// `min..=max`, plus up to `jitter` (a share of the delay) so processes do not ask in lockstep;
/// after an error, exponential backoff from `min` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RefreshBounds {
    pub(crate) min: Duration,
    pub(crate) max: Duration,
    pub(crate) jitter: f64,
}

impl Default for RefreshBounds {
    fn default() -> Self {
        RefreshBounds {
            min: Duration::from_secs(5),
            max: Duration::from_secs(300),
            jitter: 0.1,
        }
    }
}

impl RefreshBounds {
    /// Bounds `min..=max` with the default jitter (10%).
    pub fn new(min: Duration, max: Duration) -> Self {
        RefreshBounds {
            min,
            max,
            ..RefreshBounds::default()
        }
    }

    /// Sets the jitter, a share (0 to 1) of each delay added at random. Default 0.1.
    #[must_use]
    pub fn jitter(mut self, share: f64) -> Self {
        self.jitter = share;
        self
    }

    /// The shortest delay between two answers.
    pub fn min(&self) -> Duration {
        self.min
    }

    /// The longest delay between two answers.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The jitter share.
    pub fn jitter_share(&self) -> f64 {
        self.jitter
    }
}

impl DiscoveryConfig {
    /// A source of this kind with the default guard, refresh bounds and first-answer wait
    /// (10 s).
    pub fn new(source: SourceConfig) -> Self {
        DiscoveryConfig {
            name: None,
            source,
            guard: GuardPolicy::default(),
            refresh: RefreshBounds::default(),
            first_answer_within: Duration::from_secs(10),
        }
    }

    /// Names the source (default: its type in lower case, `dns`): destinations and status show
    /// it, and two sources of one cluster need different names.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the update guard. Default [`GuardPolicy::default`].
    #[must_use]
    pub fn guard(mut self, guard: GuardPolicy) -> Self {
        self.guard = guard;
        self
    }

    /// Sets the refresh bounds of a polling source. Default 5 s to 5 min, 10% jitter.
    #[must_use]
    pub fn refresh(mut self, refresh: RefreshBounds) -> Self {
        self.refresh = refresh;
        self
    }

    /// Sets how long `Engine::ready` waits for the source's first answer. Default 10 s.
    #[must_use]
    pub fn first_answer_within(mut self, wait: Duration) -> Self {
        self.first_answer_within = wait;
        self
    }

    /// The source's name: as set, or its type in lower case.
    pub fn source_name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| self.source.type_name().to_ascii_lowercase())
    }

    /// The source's settings.
    pub fn source(&self) -> &SourceConfig {
        &self.source
    }

    /// The update guard.
    pub fn guard_policy(&self) -> &GuardPolicy {
        &self.guard
    }

    /// The refresh bounds.
    pub fn refresh_bounds(&self) -> &RefreshBounds {
        &self.refresh
    }

    /// How long `ready()` waits for the first answer.
    pub fn first_answer_wait(&self) -> Duration {
        self.first_answer_within
    }
}

impl SourceConfig {
    /// The `Type` of the source as configuration names it.
    pub fn type_name(&self) -> &'static str {
        match self {
            SourceConfig::Dns(_) => "Dns",
            SourceConfig::ResolveDestinations(_) => "ResolveDestinations",
            SourceConfig::Etcd(_) => "Etcd",
            SourceConfig::Consul(_) => "Consul",
            SourceConfig::Kubernetes(_) => "Kubernetes",
        }
    }

    /// The cargo feature the source needs.
    pub fn feature(&self) -> &'static str {
        match self {
            SourceConfig::Dns(_) | SourceConfig::ResolveDestinations(_) => "dns",
            SourceConfig::Etcd(_) => "etcd",
            SourceConfig::Consul(_) => "consul",
            SourceConfig::Kubernetes(_) => "kubernetes",
        }
    }

    /// What it watches, for status and logs (`payments.test A`, `_http._tcp.x SRV`).
    pub fn target(&self) -> String {
        match self {
            SourceConfig::Dns(dns) => format!(
                "{} {}",
                dns.name,
                match dns.record {
                    DnsRecord::Address => "A/AAAA",
                    DnsRecord::Srv => "SRV",
                }
            ),
            SourceConfig::ResolveDestinations(_) => "the configured destinations' hosts".into(),
            SourceConfig::Etcd(etcd) => {
                format!("{} at {}", etcd.prefix, join_urls(&etcd.endpoints))
            }
            SourceConfig::Consul(consul) => {
                let mut target = format!("service {}", consul.service);
                if let Some(tag) = &consul.tag {
                    target.push_str(&format!(" tag {tag}"));
                }
                if !consul.datacenters.is_empty() {
                    target.push_str(&format!(" in {}", consul.datacenters.join(", ")));
                }
                target
            }
            SourceConfig::Kubernetes(kubernetes) => format!("service {}", kubernetes.target()),
        }
    }
}

impl DnsSourceConfig {
    /// A/AAAA records of `name`, destinations on `port` over plain HTTP, the system's resolver
    /// configuration, a 5 s timeout.
    pub fn address(name: impl Into<String>, port: u16) -> Self {
        DnsSourceConfig {
            name: name.into(),
            record: DnsRecord::Address,
            port: Some(port),
            scheme: "http".into(),
            servers: Vec::new(),
            timeout: Duration::from_secs(5),
        }
    }

    /// SRV records of `name` (`_http._tcp.payments.service.test`).
    pub fn srv(name: impl Into<String>) -> Self {
        DnsSourceConfig {
            name: name.into(),
            record: DnsRecord::Srv,
            port: None,
            scheme: "http".into(),
            servers: Vec::new(),
            timeout: Duration::from_secs(5),
        }
    }

    /// Asks these name servers instead of the system's. Default: the system's configuration.
    #[must_use]
    pub fn servers(mut self, servers: Vec<SocketAddr>) -> Self {
        self.servers = servers;
        self
    }

    /// Sets the URL scheme of the destinations (`http` or `https`). Default `http`.
    #[must_use]
    pub fn scheme(mut self, scheme: impl Into<String>) -> Self {
        self.scheme = scheme.into();
        self
    }

    /// Sets the timeout of one lookup. Default 5 s.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The DNS name.
    pub fn dns_name(&self) -> &str {
        &self.name
    }

    /// Which records.
    pub fn record(&self) -> DnsRecord {
        self.record
    }

    /// The port of A/AAAA destinations.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The URL scheme.
    pub fn url_scheme(&self) -> &str {
        &self.scheme
    }

    /// The name servers asked (empty: the system's).
    pub fn name_servers(&self) -> &[SocketAddr] {
        &self.servers
    }

    /// The timeout of one lookup.
    pub fn lookup_timeout(&self) -> Duration {
        self.timeout
    }
}

impl ResolveDestinationsConfig {
    /// The system's resolver configuration and a 5 s timeout.
    pub fn new() -> Self {
        ResolveDestinationsConfig {
            servers: Vec::new(),
            timeout: Duration::from_secs(5),
        }
    }

    /// Asks these name servers instead of the system's.
    #[must_use]
    pub fn servers(mut self, servers: Vec<SocketAddr>) -> Self {
        self.servers = servers;
        self
    }

    /// The name servers asked (empty: the system's).
    pub fn name_servers(&self) -> &[SocketAddr] {
        &self.servers
    }

    /// The timeout of one lookup.
    pub fn lookup_timeout(&self) -> Duration {
        self.timeout
    }
}

impl Default for ResolveDestinationsConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// How a cluster maps its destinations' locality to tiers: same zone as this process
/// tier 0, same region tier 1, anywhere else (or unknown) tier 2; a destination whose source gave
/// it a tier keeps it. Named zones or regions in [`tier`](Self::tier) win over that rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalityTiers {
    pub(crate) local_zone: Option<String>,
    pub(crate) local_region: Option<String>,
    pub(crate) tiers: BTreeMap<String, u32>,
}

/// The source name of the destinations a configuration lists, which no discovery source may
/// take.
pub const RESERVED_SOURCE: &str = "config";

/// Environment variable naming this process's zone when the configuration does not.
pub const LOCAL_ZONE_VAR: &str = "HEALTHPICK_LOCAL_ZONE";
/// Environment variable naming this process's region when the configuration does not.
pub const LOCAL_REGION_VAR: &str = "HEALTHPICK_LOCAL_REGION";

impl LocalityTiers {
    /// Zone and region rules, the local zone and region from [`LOCAL_ZONE_VAR`] and
    /// [`LOCAL_REGION_VAR`] unless set here.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets this process's zone.
    #[must_use]
    pub fn local_zone(mut self, zone: impl Into<String>) -> Self {
        self.local_zone = Some(zone.into());
        self
    }

    /// Sets this process's region.
    #[must_use]
    pub fn local_region(mut self, region: impl Into<String>) -> Self {
        self.local_region = Some(region.into());
        self
    }

    /// Puts destinations in zone or region `name` in `tier`, whatever the rule says.
    #[must_use]
    pub fn tier(mut self, name: impl Into<String>, tier: u32) -> Self {
        self.tiers.insert(name.into(), tier);
        self
    }

    /// The local zone as configured (the engine falls back to [`LOCAL_ZONE_VAR`]).
    pub fn local_zone_setting(&self) -> Option<&str> {
        self.local_zone.as_deref()
    }

    /// The local region as configured (the engine falls back to [`LOCAL_REGION_VAR`]).
    pub fn local_region_setting(&self) -> Option<&str> {
        self.local_region.as_deref()
    }

    /// The named tiers.
    pub fn named_tiers(&self) -> &BTreeMap<String, u32> {
        &self.tiers
    }
}

/// URLs as one line for a status.
fn join_urls(urls: &[url::Url]) -> String {
    urls.iter()
        .map(url::Url::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

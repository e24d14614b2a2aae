//! Settings of a Consul discovery source: which agent, which service, and the
//! datacenters to read it from, in order of preference.
//!
//! ```json
//! "Discovery": {"Type": "Consul", "Service": "payments", "Address": "http://127.0.0.1:8500",
//!               "Datacenters": ["eu-west", "eu-central"], "Tag": "v2", "Stale": true}
//! ```

use std::time::Duration;

use url::Url;

/// Environment variable of the Consul agent's address when the configuration does not name one
/// (as Consul's own tools read it).
pub const CONSUL_ADDRESS_VAR: &str = "CONSUL_HTTP_ADDR";
/// Environment variable of the ACL token when the configuration does not give one.
pub const CONSUL_TOKEN_VAR: &str = "CONSUL_HTTP_TOKEN";

/// Settings of a Consul source: the instances of [`service`](Self::service) from
/// `/v1/health/service/<name>`, kept current with blocking queries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsulSourceConfig {
    pub(crate) address: Option<Url>,
    pub(crate) service: String,
    pub(crate) datacenters: Vec<String>,
    pub(crate) tag: Option<String>,
    pub(crate) token: Option<String>,
    pub(crate) wait: Duration,
    pub(crate) stale: Option<Duration>,
    pub(crate) scheme: String,
    pub(crate) timeout: Duration,
}

impl ConsulSourceConfig {
    /// The instances of `service` as the local agent's datacenter knows them: the agent at
    /// [`CONSUL_ADDRESS_VAR`] or `http://127.0.0.1:8500`, blocking queries of up to 5 min,
    /// consistent reads, plain HTTP destinations.
    pub fn new(service: impl Into<String>) -> Self {
        ConsulSourceConfig {
            address: None,
            service: service.into(),
            datacenters: Vec::new(),
            tag: None,
            token: None,
            wait: Duration::from_secs(300),
            stale: None,
            scheme: "http".into(),
            timeout: Duration::from_secs(5),
        }
    }

    /// Asks the agent at `address`.
    #[must_use]
    pub fn address(mut self, address: Url) -> Self {
        self.address = Some(address);
        self
    }

    /// Reads the service from these datacenters: the first is tier 0, the next tier 1, ...
    /// (a failover list). Default: the agent's own datacenter only.
    #[must_use]
    pub fn datacenters(mut self, datacenters: Vec<String>) -> Self {
        self.datacenters = datacenters;
        self
    }

    /// Only instances with this tag.
    #[must_use]
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tag = Some(tag.into());
        self
    }

    /// Sends this ACL token. Default: [`CONSUL_TOKEN_VAR`] when set.
    #[must_use]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Sets the longest a blocking query waits for a change (Consul caps it at 10 min).
    /// Default 5 min.
    #[must_use]
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Allows stale reads from any server (cheaper, and they work without a leader), as long
    /// as the server heard from the leader within `max_stale`; an older answer counts as a
    /// failure (the last good set stays). Default: consistent reads from the leader.
    #[must_use]
    pub fn stale(mut self, max_stale: Duration) -> Self {
        self.stale = Some(max_stale);
        self
    }

    /// Sets the URL scheme of the destinations (`http` or `https`). Default `http`.
    #[must_use]
    pub fn scheme(mut self, scheme: impl Into<String>) -> Self {
        self.scheme = scheme.into();
        self
    }

    /// Sets the bound of one query beyond its wait. Default 5 s.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The agent's address as configured.
    pub fn agent_address(&self) -> Option<&Url> {
        self.address.as_ref()
    }

    /// The service name.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The datacenters, in order of preference (empty: the agent's).
    pub fn datacenter_list(&self) -> &[String] {
        &self.datacenters
    }

    /// The tag filter.
    pub fn tag_filter(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The ACL token as configured.
    pub fn token_setting(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The longest wait of a blocking query.
    pub fn blocking_wait(&self) -> Duration {
        self.wait
    }

    /// How stale an answer may be, when stale reads are allowed.
    pub fn max_stale(&self) -> Option<Duration> {
        self.stale
    }

    /// The URL scheme of the destinations.
    pub fn url_scheme(&self) -> &str {
        &self.scheme
    }

    /// The bound of one query beyond its wait.
    pub fn call_timeout(&self) -> Duration {
        self.timeout
    }
}

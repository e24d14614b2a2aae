//! What a source says about one instance: a key that is stable within the source, the
//! address requests go to, and the attributes that may change without making it another
//! instance. Sources publish full sets of these; the engine turns them into destinations.

use url::Url;

use super::attributes::DestinationAttributes;
use super::locality::Locality;
use crate::config::metadata::Metadata;
use crate::health::state::DiscoveryHealth;
use crate::uri::{check_base, shown};

/// One endpoint of a cluster, as a source (a discovery source, a config file, your own code)
/// publishes it: through a [`Publisher`](crate::discovery::Publisher), or directly with
/// [`Engine::set_destinations`](crate::Engine::set_destinations).
///
/// The `key` identifies the instance within its source (a pod uid, a Consul service id, an etcd
/// key, `ip:port`); it is also the destination id, unless another source of the cluster has a
/// destination with that id already (see [`Engine::set_destinations`](crate::Engine::set_destinations)
/// for the rule that keeps ids unique). Keys are compared case-insensitively.
///
/// ```
/// use healthpick::Endpoint;
///
/// let endpoint = Endpoint::new("10.0.0.7:8080", "http://10.0.0.7:8080/".parse()?)
///     .host("payments.internal")
///     .tier(1)
///     .weight(3);
/// assert_eq!(endpoint.key(), "10.0.0.7:8080");
/// # Ok::<(), url::ParseError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub(crate) key: String,
    pub(crate) address: Url,
    pub(crate) attributes: DestinationAttributes,
    /// Whether the tier was set (it then wins over a locality-to-tier mapping).
    pub(crate) explicit_tier: bool,
    pub(crate) health: DiscoveryHealth,
}

impl Endpoint {
    /// What the engine refuses in this endpoint, one line each (empty: nothing): an empty key,
    /// a weight that is not a finite number of 0 or more, an address or probe base that is not
    /// a usable base URL. The one rule sources leave bad entries out by and
    /// `Engine::set_destinations` refuses a set by.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.key.trim().is_empty() {
            problems.push(format!(
                "endpoint at {} has an empty key",
                shown(self.address.as_str())
            ));
        }
        let weight = self.attributes.weight;
        if !(weight.is_finite() && weight >= 0.0) {
            problems.push(format!(
                "endpoint `{}`: weight {weight} is not a finite number, 0 or more",
                self.key
            ));
        }
        if let Err(why) = check_base(self.address.clone()) {
            problems.push(format!(
                "endpoint `{}`: address `{}` {why}",
                self.key,
                shown(self.address.as_str())
            ));
        }
        if let Some(health) = &self.attributes.health_url {
            if let Err(why) = check_base(health.clone()) {
                problems.push(format!(
                    "endpoint `{}`: health address `{}` {why}",
                    self.key,
                    shown(health.as_str())
                ));
            }
        }
        problems
    }

    /// An endpoint `key` at `address` (an absolute http(s) URL, the base of requests), in tier
    /// 0, with weight 1, no Host header and no metadata.
    pub fn new(key: impl Into<String>, address: Url) -> Self {
        Endpoint {
            key: key.into(),
            address,
            attributes: DestinationAttributes::default(),
            explicit_tier: false,
            health: DiscoveryHealth::Unknown,
        }
    }

    /// Sets the tier: 0 is the most preferred. It wins over the cluster's locality-to-tier
    /// mapping. Default: from the locality when the cluster maps locality to tiers, else 0.
    #[must_use]
    pub fn tier(mut self, tier: u32) -> Self {
        self.attributes.tier = tier;
        self.explicit_tier = true;
        self
    }

    /// Sets where it runs, for the cluster's locality-to-tier mapping. Default: unknown.
    #[must_use]
    pub fn locality(mut self, locality: Locality) -> Self {
        self.attributes.locality = locality;
        self
    }

    /// Sets what the source says about its health: `Unhealthy` excludes it, `Draining` ranks it
    /// with Degraded destinations. Default `Unknown`.
    #[must_use]
    pub fn health(mut self, health: DiscoveryHealth) -> Self {
        self.health = health;
        self
    }

    /// Sets the weight load balancers give it within its group (a finite number, 0 or more).
    /// Default 1.
    #[must_use]
    pub fn weight(mut self, weight: impl Into<f64>) -> Self {
        self.attributes.weight = weight.into();
        self
    }

    /// Sets the `Host` header sent to it (probes and requests). Default: none.
    #[must_use]
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.attributes.host = Some(host.into());
        self
    }

    /// Sets a separate base URL for its probes. Default: the address.
    #[must_use]
    pub fn health_url(mut self, url: Url) -> Self {
        self.attributes.health_url = Some(url);
        self
    }

    /// Adds a metadata entry.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.metadata.insert(key, value);
        self
    }

    /// Replaces all metadata.
    #[must_use]
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.attributes.metadata = metadata;
        self
    }

    /// The key, as given.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The address.
    pub fn address(&self) -> &Url {
        &self.address
    }

    /// The attributes it will have.
    pub fn attributes(&self) -> &DestinationAttributes {
        &self.attributes
    }

    /// What the source says about its health.
    pub fn discovery_health(&self) -> DiscoveryHealth {
        self.health
    }
}

//! What may change about a destination without making it another instance: its
//! tier, weight, metadata, `Host` header, probe base and locality. A source that republishes a key with new
//! attributes keeps the destination (its health, counters and in-flight count); only a new
//! address makes a new one.

use url::Url;

use super::locality::Locality;
use crate::config::metadata::Metadata;

/// A destination's current attributes.
///
/// ```
/// # use healthpick::Engine;
/// let engine = Engine::from_json(r#"{"Clusters": {"c": {"Destinations": {
///     "d": { "Address": "http://127.0.0.1:8001/", "Priority": 1, "Host": "svc.internal",
///            "Metadata": { "Weight": "3" } } } } } }"#)?;
/// let d = engine.best_endpoints("c")?.destinations[0].clone();
/// let attributes = d.attributes();
/// assert_eq!((attributes.tier(), attributes.weight()), (1, 3.0));
/// assert_eq!(attributes.host(), Some("svc.internal"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct DestinationAttributes {
    pub(crate) tier: u32,
    pub(crate) weight: f64,
    pub(crate) host: Option<String>,
    pub(crate) health_url: Option<Url>,
    pub(crate) metadata: Metadata,
    pub(crate) locality: Locality,
    /// Whether its source gave the tier; otherwise the cluster's locality rule decides it, and
    /// a reload that changes the rule re-tiers it.
    pub(crate) explicit_tier: bool,
}

impl Default for DestinationAttributes {
    fn default() -> Self {
        DestinationAttributes {
            tier: 0,
            weight: 1.0,
            host: None,
            health_url: None,
            metadata: Metadata::new(),
            locality: Locality::new(),
            explicit_tier: false,
        }
    }
}

impl DestinationAttributes {
    /// The tier (priority): 0 is the most preferred.
    pub fn tier(&self) -> u32 {
        self.tier
    }

    /// The weight load balancers give it among its group (default 1).
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// The `Host` header sent to it, if any.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The separate base URL of its probes, if any.
    pub fn health_url(&self) -> Option<&Url> {
        self.health_url.as_ref()
    }

    /// Its metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Where it runs, as its source said.
    pub fn locality(&self) -> &Locality {
        &self.locality
    }
}

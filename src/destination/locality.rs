//! Where an instance runs: region, zone and node, as discovery sources report them
//! (Kubernetes' `zone`, Consul's datacenter, an etcd value's `Zone`). A cluster can map locality
//! to tiers: same zone first, then same region, then the rest.

use std::fmt;

/// An endpoint's locality; every part is optional.
///
/// ```
/// use healthpick::Locality;
///
/// let here = Locality::new().region("eu-west-1").zone("eu-west-1a");
/// assert_eq!(here.to_string(), "eu-west-1/eu-west-1a");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Locality {
    pub(crate) region: Option<String>,
    pub(crate) zone: Option<String>,
    pub(crate) node: Option<String>,
}

impl Locality {
    /// Nowhere in particular.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the region (`eu-west-1`, a Consul datacenter).
    #[must_use]
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Sets the zone (`eu-west-1a`).
    #[must_use]
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = Some(zone.into());
        self
    }

    /// Sets the node (a Kubernetes node name, a host).
    #[must_use]
    pub fn node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// The region, if known.
    pub fn region_name(&self) -> Option<&str> {
        self.region.as_deref()
    }

    /// The zone, if known.
    pub fn zone_name(&self) -> Option<&str> {
        self.zone.as_deref()
    }

    /// The node, if known.
    pub fn node_name(&self) -> Option<&str> {
        self.node.as_deref()
    }

    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        self.region.is_none() && self.zone.is_none() && self.node.is_none()
    }
}

impl fmt::Display for Locality {
    /// `region/zone/node`, leaving out what is unknown (`-` when nothing is).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<&str> = [&self.region, &self.zone, &self.node]
            .into_iter()
            .filter_map(|p| p.as_deref())
            .collect();
        if parts.is_empty() {
            f.write_str("-")
        } else {
            f.write_str(&parts.join("/"))
        }
    }
}

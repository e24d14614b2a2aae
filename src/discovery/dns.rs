//! DNS discovery (feature `dns`; SPEC §13) — being written: the interface the runner uses.

use super::source::{Answer, BoxFuture, PollSource, SourceError};
use crate::config::discovery::{DnsSourceConfig, ResolveDestinationsConfig};
use crate::config::model::ClusterConfig;

/// A/AAAA or SRV records of one name.
#[derive(Debug)]
pub struct DnsSource {
    _config: DnsSourceConfig,
}

impl DnsSource {
    /// A source for `config`.
    ///
    /// # Errors
    /// Not yet written.
    pub fn new(config: &DnsSourceConfig) -> Result<Self, String> {
        let _ = config;
        Err("the dns source is not written yet".into())
    }
}

impl PollSource for DnsSource {
    fn resolve(&self) -> BoxFuture<'_, Result<Answer, SourceError>> {
        Box::pin(async { Err(SourceError::new("not written yet")) })
    }
}

/// YARP's destination resolver.
#[derive(Debug)]
pub struct ResolveDestinations {
    _config: ResolveDestinationsConfig,
}

impl ResolveDestinations {
    /// A resolver for `cluster`'s destinations.
    ///
    /// # Errors
    /// Not yet written.
    pub fn new(
        config: &ResolveDestinationsConfig,
        cluster: &ClusterConfig,
    ) -> Result<Self, String> {
        let _ = (config, cluster);
        Err("the dns source is not written yet".into())
    }
}

impl PollSource for ResolveDestinations {
    fn resolve(&self) -> BoxFuture<'_, Result<Answer, SourceError>> {
        Box::pin(async { Err(SourceError::new("not written yet")) })
    }
}

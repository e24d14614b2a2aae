//! Settings of an etcd discovery source: which etcd, and the key prefix under which
//! a cluster's instances register.
//!
//! ```json
//! "Discovery": {"Type": "Etcd", "Endpoints": ["http://10.0.0.5:2379"], "Prefix": "/services/payments/"}
//! ```

use std::time::Duration;

use url::Url;

/// Settings of an etcd source: every key under [`key_prefix`](Self::key_prefix) is one destination
/// (its id the rest of the key, its value a YARP destination object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdSourceConfig {
    pub(crate) endpoints: Vec<Url>,
    pub(crate) prefix: String,
    pub(crate) timeout: Duration,
}

impl EtcdSourceConfig {
    /// Keys under `prefix` in the etcd at `endpoints` (its client URLs, tried in turn), each
    /// call bounded by 5 s.
    pub fn new(endpoints: Vec<Url>, prefix: impl Into<String>) -> Self {
        EtcdSourceConfig {
            endpoints,
            prefix: prefix.into(),
            timeout: Duration::from_secs(5),
        }
    }

    /// Sets the bound of one call (a range, opening a watch). Default 5 s.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The client URLs.
    pub fn endpoint_urls(&self) -> &[Url] {
        &self.endpoints
    }

    /// The key prefix.
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The bound of one call.
    pub fn call_timeout(&self) -> Duration {
        self.timeout
    }
}

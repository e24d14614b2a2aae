//! Errors of the routing path.

/// Why a pick (or a call naming a cluster) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickError {
    /// The cluster has no destination that may receive traffic (YARP answers 503 here).
    #[error("no available destinations in cluster `{cluster}`")]
    NoAvailableDestinations {
        /// The cluster id as asked.
        cluster: String,
    },
    /// No cluster has this id (compared case-insensitively).
    #[error("unknown cluster `{cluster}`")]
    UnknownCluster {
        /// The cluster id as asked.
        cluster: String,
    },
}

impl PickError {
    /// True when the cluster exists but nothing in it may receive traffic.
    pub fn is_no_available_destinations(&self) -> bool {
        matches!(self, PickError::NoAvailableDestinations { .. })
    }

    /// The cluster the error is about.
    pub fn cluster(&self) -> &str {
        match self {
            PickError::NoAvailableDestinations { cluster }
            | PickError::UnknownCluster { cluster } => cluster,
        }
    }
}

//! Errors of the routing path: picks, and destination sets published at run time.

/// Why a pick (or a call naming a cluster) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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
    /// The cluster has no destination yet because a discovery source has not answered:
    /// distinct from [`NoAvailableDestinations`](Self::NoAvailableDestinations), which
    /// means every known destination is out.
    #[error("cluster `{cluster}`: discovery pending, no source has answered yet")]
    DiscoveryPending {
        /// The cluster id as asked.
        cluster: String,
    },
    /// The destination a request's affinity key maps to is not available, and the cluster's
    /// `SessionAffinity` says `FailurePolicy: Return503Error` (YARP answers 503 here).
    #[error("cluster `{cluster}`: the destination of the request's affinity key is unavailable")]
    AffinityUnavailable {
        /// The cluster id as asked.
        cluster: String,
    },
    /// The cluster has no destination with this id (compared case-insensitively).
    #[error("cluster `{cluster}` has no destination `{destination}`")]
    UnknownDestination {
        /// The cluster id as asked.
        cluster: String,
        /// The destination id as asked.
        destination: String,
    },
}

impl PickError {
    /// True when the cluster exists but nothing in it may receive traffic.
    pub fn is_no_available_destinations(&self) -> bool {
        matches!(self, PickError::NoAvailableDestinations { .. })
    }

    /// True when nothing could be picked because a discovery source has not answered yet.
    pub fn is_discovery_pending(&self) -> bool {
        matches!(self, PickError::DiscoveryPending { .. })
    }

    /// True when a keyed pick failed because its key's destination is unavailable and the
    /// cluster's affinity says to fail rather than redistribute.
    pub fn is_affinity_unavailable(&self) -> bool {
        matches!(self, PickError::AffinityUnavailable { .. })
    }

    /// True when no cluster has the id asked for.
    pub fn is_unknown_cluster(&self) -> bool {
        matches!(self, PickError::UnknownCluster { .. })
    }

    /// The cluster the error is about.
    pub fn cluster(&self) -> &str {
        match self {
            PickError::NoAvailableDestinations { cluster }
            | PickError::UnknownCluster { cluster }
            | PickError::DiscoveryPending { cluster }
            | PickError::AffinityUnavailable { cluster }
            | PickError::UnknownDestination { cluster, .. } => cluster,
        }
    }
}

/// Why [`Engine::set_destinations`](crate::Engine::set_destinations) or a
/// [`Publisher`](crate::discovery::Publisher) changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DestinationsError {
    /// No cluster has this id.
    UnknownCluster {
        /// The cluster id as asked.
        cluster: String,
    },
    /// The set was refused; every problem is listed.
    Invalid {
        /// The cluster id as asked.
        cluster: String,
        /// The source that published.
        source: String,
        /// What is wrong, one entry per problem.
        problems: Vec<String>,
    },
    /// The cluster has no registered source of this name (it was retired, or the cluster was
    /// removed and added again).
    UnknownSource {
        /// The cluster id.
        cluster: String,
        /// The source.
        source: String,
    },
    /// The engine the publisher belonged to is gone.
    EngineGone,
}

impl std::fmt::Display for DestinationsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DestinationsError::UnknownCluster { cluster } => {
                write!(f, "unknown cluster `{cluster}`")
            }
            DestinationsError::Invalid {
                cluster,
                source,
                problems,
            } => write!(
                f,
                "cluster `{cluster}`: source `{source}`: {}",
                problems.join("; ")
            ),
            DestinationsError::UnknownSource { cluster, source } => {
                write!(f, "cluster `{cluster}` has no source `{source}`")
            }
            DestinationsError::EngineGone => f.write_str("the engine is gone"),
        }
    }
}

impl std::error::Error for DestinationsError {}

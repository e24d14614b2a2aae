//! A cluster's `SessionAffinity` section, as YARP names it: requests that carry the same key go
//! to the same destination. YARP's proxy sets the key in a cookie of its own; a client reads it
//! from the request it sends (a header, or a cookie of that name) or is given it explicitly, and
//! maps it to a destination by consistent hashing with bounded load (see
//! `selection/consistent_hash.rs`).

/// `SessionAffinity:Policy`: where a request's affinity key comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AffinityPolicy {
    /// The request header named by `AffinityKeyName`.
    CustomHeader,
    /// The cookie named by `AffinityKeyName`.
    Cookie,
    /// The cookie named by `AffinityKeyName` (YARP's default; YARP hashes the destination id it
    /// writes there, a client hashes whatever the cookie holds).
    #[default]
    HashCookie,
    /// The cookie named by `AffinityKeyName` (YARP's ARR-compatible cookie).
    ArrCookie,
}

impl AffinityPolicy {
    /// Every policy, in the order the documentation lists them.
    pub const ALL: [AffinityPolicy; 4] = [
        AffinityPolicy::HashCookie,
        AffinityPolicy::ArrCookie,
        AffinityPolicy::Cookie,
        AffinityPolicy::CustomHeader,
    ];

    /// Its name in a configuration document (`HashCookie`).
    pub fn name(self) -> &'static str {
        match self {
            AffinityPolicy::CustomHeader => "CustomHeader",
            AffinityPolicy::Cookie => "Cookie",
            AffinityPolicy::HashCookie => "HashCookie",
            AffinityPolicy::ArrCookie => "ArrCookie",
        }
    }

    /// Whether the key is a cookie (else a header).
    pub fn reads_cookie(self) -> bool {
        !matches!(self, AffinityPolicy::CustomHeader)
    }
}

/// `SessionAffinity:FailurePolicy`: what a keyed pick does when the key's destination is not
/// available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AffinityFailurePolicy {
    /// The key's next choice, the same every time (the default).
    #[default]
    Redistribute,
    /// The pick fails ([`PickError::AffinityUnavailable`](crate::PickError::AffinityUnavailable),
    /// a 503 for the caller).
    Return503Error,
}

impl AffinityFailurePolicy {
    /// Both policies, the default first.
    pub const ALL: [AffinityFailurePolicy; 2] = [
        AffinityFailurePolicy::Redistribute,
        AffinityFailurePolicy::Return503Error,
    ];

    /// Its name in a configuration document (`Redistribute`).
    pub fn name(self) -> &'static str {
        match self {
            AffinityFailurePolicy::Redistribute => "Redistribute",
            AffinityFailurePolicy::Return503Error => "Return503Error",
        }
    }
}

/// `SessionAffinity`: requests with the same key go to the same destination of the best group,
/// unless that destination has more than `BalanceFactor` times the group's mean requests in
/// flight (then the key's next choice takes the request). Changing the set of destinations moves
/// only about 1/n of the keys, two engines with the same destinations map a key alike, and a key
/// whose destination leaves and comes back returns to it. Requests without a key use the
/// cluster's load-balancing policy.
///
/// ```
/// use healthpick::config::{AffinityPolicy, ClusterConfig, SessionAffinityConfig};
///
/// let cluster = ClusterConfig::new("carts").session_affinity(
///     SessionAffinityConfig::new(AffinityPolicy::CustomHeader).affinity_key_name("X-Cart"),
/// );
/// let affinity = cluster.session_affinity_setting().unwrap();
/// assert_eq!(affinity.affinity_key_name_setting(), "X-Cart");
/// assert_eq!(affinity.balance_factor_setting(), 1.25);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SessionAffinityConfig {
    pub(crate) policy: AffinityPolicy,
    pub(crate) failure_policy: AffinityFailurePolicy,
    pub(crate) affinity_key_name: String,
    pub(crate) balance_factor: f64,
}

/// YARP's default `AffinityKeyName`.
pub const DEFAULT_AFFINITY_KEY_NAME: &str = ".Yarp.Affinity";

impl SessionAffinityConfig {
    /// Affinity by `policy`'s key, YARP's default key name, `Redistribute`, balance factor 1.25.
    pub fn new(policy: AffinityPolicy) -> Self {
        SessionAffinityConfig {
            policy,
            failure_policy: AffinityFailurePolicy::Redistribute,
            affinity_key_name: DEFAULT_AFFINITY_KEY_NAME.to_string(),
            balance_factor: 1.25,
        }
    }

    /// `FailurePolicy`. Default `Redistribute`.
    pub fn failure_policy(mut self, policy: AffinityFailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// `AffinityKeyName`: the header or cookie the key is read from. Default `.Yarp.Affinity`.
    pub fn affinity_key_name(mut self, name: impl Into<String>) -> Self {
        self.affinity_key_name = name.into();
        self
    }

    /// `BalanceFactor` (healthpick extension): no destination takes a keyed request while it
    /// has more than this times the group's mean requests in flight. Default 1.25, the factor
    /// Mirrokni, Thorup and Zadimoghaddam's analysis and Google's deployment of bounded-load
    /// hashing use: at most 25% above the mean, while about 4 in 5 keys stay home.
    pub fn balance_factor(mut self, factor: f64) -> Self {
        self.balance_factor = factor;
        self
    }

    /// Where the key comes from.
    pub fn policy_setting(&self) -> AffinityPolicy {
        self.policy
    }

    /// What a keyed pick does when the key's destination is unavailable.
    pub fn failure_policy_setting(&self) -> AffinityFailurePolicy {
        self.failure_policy
    }

    /// The header or cookie the key is read from.
    pub fn affinity_key_name_setting(&self) -> &str {
        &self.affinity_key_name
    }

    /// The balance factor in force.
    pub fn balance_factor_setting(&self) -> f64 {
        self.balance_factor
    }
}

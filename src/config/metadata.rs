//! String-to-string metadata with case-insensitive keys, as .NET configuration reads it, and
//! the metadata keys and number syntax YARP's built-in policies read.

use crate::ids::eq_ignore_case;

/// Metadata key of the ConsecutiveFailures threshold (cluster metadata), as in YARP.
pub const CONSECUTIVE_FAILURES_THRESHOLD_KEY: &str = "ConsecutiveFailuresHealthPolicy.Threshold";
/// Metadata key of the TransportFailureRate limit (cluster metadata), as in YARP.
pub const TRANSPORT_FAILURE_RATE_LIMIT_KEY: &str = "TransportFailureRateHealthPolicy.RateLimit";

/// Metadata key of a destination's weight (healthpick extension; YARP ignores it).
pub const WEIGHT_KEY: &str = "Weight";

/// Cluster metadata key (healthpick extension): whether a destination whose most recent probe
/// failed, but which its active policy has not ejected yet, ranks with Degraded destinations
/// (`true`, the default) or with Healthy ones, as in YARP (`false`).
pub const SUSPECT_RANKING_KEY: &str = "HealthCheck.SuspectRanking";

/// Cluster metadata key (healthpick extension): whether the passive policies forget what they
/// saw of a destination when active checks see it come back, Unhealthy to Healthy (`true`, the
/// default), or keep it, as in YARP (`false`).
pub const RESET_PASSIVE_ON_RECOVERY_KEY: &str = "HealthCheck.ResetPassiveOnRecovery";

/// Cluster metadata key of OutlierDetection: consecutive 5xx responses (transport failures
/// included) that eject a destination; a non-negative integer, `0` turns this detector off.
/// Default 5 (Envoy's `consecutive_5xx`).
pub const OUTLIER_CONSECUTIVE_5XX_KEY: &str = "OutlierDetection.Consecutive5xx";
/// Cluster metadata key of OutlierDetection: consecutive gateway errors (502, 503, 504 and
/// transport failures) that eject a destination; `0` turns this detector off. Default 5
/// (Envoy's `consecutive_gateway_failure`).
pub const OUTLIER_CONSECUTIVE_GATEWAY_FAILURE_KEY: &str =
    "OutlierDetection.ConsecutiveGatewayFailure";
/// Cluster metadata key of OutlierDetection: the first ejection's length, a TimeSpan; the n-th
/// ejection in a row lasts n times as long. Default `00:00:30` (Envoy's `base_ejection_time`).
pub const OUTLIER_BASE_EJECTION_TIME_KEY: &str = "OutlierDetection.BaseEjectionTime";
/// Cluster metadata key of OutlierDetection: the longest ejection, a TimeSpan (at least the
/// base ejection time). Default `00:05:00` (Envoy's `max_ejection_time`).
pub const OUTLIER_MAX_EJECTION_TIME_KEY: &str = "OutlierDetection.MaxEjectionTime";
/// Cluster metadata key of OutlierDetection: the most destinations ejected at once, in percent
/// of the cluster (0 to 100), but never fewer than one destination. Default 10 (Envoy's
/// `max_ejection_percent`).
pub const OUTLIER_MAX_EJECTION_PERCENT_KEY: &str = "OutlierDetection.MaxEjectionPercent";
/// Cluster metadata key of OutlierDetection: how long a destination must stay in service,
/// without a new ejection, for its ejection count to drop by one, a TimeSpan. Default
/// `00:00:10` (Envoy's `interval`).
pub const OUTLIER_INTERVAL_KEY: &str = "OutlierDetection.Interval";

/// Reads a metadata boolean as .NET's `bool.TryParse` does: `true` or `false` in any case,
/// surrounding spaces allowed.
pub(crate) fn parse_bool(value: &str) -> Option<bool> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("true") {
        Some(true)
    } else if value.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// Reads a destination weight: a finite, non-negative number (`3`, `1.5`).
pub(crate) fn parse_weight(value: &str) -> Option<f64> {
    parse_number(value).filter(|w| *w >= 0.0)
}

/// Reads a metadata number as YARP's `double.TryParse` would (invariant culture).
/// Non-finite values (`inf`, `NaN`, `1e999`) are refused: .NET's invariant parse does not read
/// Rust's `inf` spellings, and an infinite threshold would silently disable the policy.
pub(crate) fn parse_number(value: &str) -> Option<f64> {
    value.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Metadata of a cluster or destination: string keys (compared case-insensitively) to string
/// values, in the order they were given.
///
/// ```
/// use healthpick::config::Metadata;
///
/// let md = Metadata::new().with("ConsecutiveFailuresHealthPolicy.Threshold", "3");
/// assert_eq!(md.get("consecutivefailureshealthpolicy.threshold"), Some("3"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    entries: Vec<(String, String)>,
}

impl Metadata {
    /// Empty metadata.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value`, replacing an entry whose key differs only in case.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.insert(key, value);
        self
    }

    /// Sets `key` to `value`, replacing an entry whose key differs only in case.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let (key, value) = (key.into(), value.into());
        match self
            .entries
            .iter_mut()
            .find(|(k, _)| eq_ignore_case(k, &key))
        {
            Some(entry) => entry.1 = value,
            None => self.entries.push((key, value)),
        }
    }

    /// Metadata from entries in order; of keys that differ only in case the last value wins, at
    /// the first key's position (as repeated [`insert`](Self::insert)s would do, in linear time).
    pub(crate) fn from_entries(entries: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let mut out: Vec<(String, String)> = Vec::new();
        for (key, value) in entries {
            match index.entry(crate::ids::fold_case(&key)) {
                std::collections::hash_map::Entry::Occupied(at) => out[*at.get()].1 = value,
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(out.len());
                    out.push((key, value));
                }
            }
        }
        Metadata { entries: out }
    }

    /// The value of `key`, compared case-insensitively.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| eq_ignore_case(k, key))
            .map(|(_, v)| v.as_str())
    }

    /// All entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Reads a metadata count: a non-negative integer (`5`; `5.0` is refused).
pub(crate) fn parse_count(value: &str) -> Option<u32> {
    value.trim().parse::<u32>().ok()
}

/// Reads a metadata TimeSpan (the configuration's grammar, humantime included); only positive
/// values.
pub(crate) fn parse_positive_timespan(value: &str) -> Option<std::time::Duration> {
    crate::config::timespan::parse_timespan(value)
        .ok()
        .filter(|span| span.is_positive())
        .and_then(|span| span.to_duration())
}

/// Reads a metadata percentage: a number from 0 to 100.
pub(crate) fn parse_percent(value: &str) -> Option<f64> {
    parse_number(value).filter(|p| (0.0..=100.0).contains(p))
}

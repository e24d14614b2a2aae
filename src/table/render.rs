//! The status table as text: one row per destination, columns as wide as their content.

use std::fmt;
use std::time::Duration;

use crate::engine::status::{
    ClusterStatus, DestinationStatus, EngineStatus, SourceStatus, SpillStatus,
};
use crate::health::state::{DiscoveryHealth, HealthState};

/// A per-destination counter the caller supplies (for example requests each backend served):
/// given the cluster id and the destination id, the count, or `None` for "not known" (shown `-`).
pub type Counter = dyn Fn(&str, &str) -> Option<u64> + Send + Sync;

/// Renders an [`EngineStatus`] as a text table, one row per destination, in config order.
///
/// Columns: `CLUSTER`, `DESTINATION`, `SOURCE` and `DISCOVERY` (only when some destination
/// comes from a discovery source), `TIER`, `ACTIVE`, `PASSIVE`, `REPORTED`, `AVAILABLE`,
/// `IN FLIGHT`, the load columns `LATENCY`, `UTIL` and `SLOW START` (each only when some
/// destination has a value), `SERVED` (only with a [`served`](Self::served) counter) and
/// `LAST CHANGE`. Under the rows, one line per cluster that may spill to its next tier (where
/// the spill stands and why), then one line per discovery source: what it watches, how many
/// destinations it has, how long ago it answered, and whether it is stale or holds a change.
///
/// - `ACTIVE` / `PASSIVE` show `off` when the cluster does not run that check;
/// - `REPORTED` shows `-` until a probe read a health payload;
/// - `AVAILABLE` is `yes (best)` for a destination in the best group (it gets picks now), `yes`
///   for one that may receive traffic but ranks lower (a Degraded one, a remote tier), `no` for
///   one excluded by its checks, and `panic` / `panic (best)` when the cluster is in panic mode
///   (every destination failed its checks and all of them get traffic anyway);
/// - `SOURCE` is where the destination came from (`config`, or the source's name); `DISCOVERY`
///   what that source says about its health (`-` when nothing);
/// - `LATENCY` is the destination's latency estimate as of its last request (`-` before any),
///   `UTIL` the utilization its server reports once it counts (`-` otherwise), `SLOW START` the
///   share of its weight it counts with while it warms up (`-` once warm);
/// - `LAST CHANGE` is the last health change and its reason, `-` before any.
///
/// Every column is as wide as its widest cell; rows carry no trailing spaces.
pub struct StatusTable {
    served: Option<Box<Counter>>,
    max_reason_width: Option<usize>,
}

impl fmt::Debug for StatusTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatusTable")
            .field("served", &self.served.is_some())
            .field("max_reason_width", &self.max_reason_width)
            .finish()
    }
}

impl Default for StatusTable {
    fn default() -> Self {
        Self::new()
    }
}

const HEADERS: [&str; 15] = [
    "CLUSTER",
    "DESTINATION",
    "SOURCE",
    "DISCOVERY",
    "TIER",
    "ACTIVE",
    "PASSIVE",
    "REPORTED",
    "AVAILABLE",
    "IN FLIGHT",
    "LATENCY",
    "UTIL",
    "SLOW START",
    "SERVED",
    "LAST CHANGE",
];
const SOURCE_COLUMNS: [usize; 2] = [2, 3];
/// `LATENCY`, `UTIL`, `SLOW START`: each shown when some destination has a value.
const LOAD_COLUMNS: [usize; 3] = [10, 11, 12];
const SERVED_COLUMN: usize = 13;
/// Columns aligned to the right (numbers).
const RIGHT_ALIGNED: [usize; 6] = [4, 9, 10, 11, 12, 13];

impl StatusTable {
    /// A table without a `SERVED` column and with reasons shown in full.
    pub fn new() -> Self {
        StatusTable {
            served: None,
            max_reason_width: None,
        }
    }

    /// Adds a `SERVED` column filled by `counter(cluster_id, destination_id)`. Default: no such
    /// column. A map works too: `move |_, d| map.get(d).copied()`.
    #[must_use]
    pub fn served(
        mut self,
        counter: impl Fn(&str, &str) -> Option<u64> + Send + Sync + 'static,
    ) -> Self {
        self.served = Some(Box::new(counter));
        self
    }

    /// Cuts `LAST CHANGE` cells longer than `chars` characters, ending them with `...`.
    /// Default: no limit.
    #[must_use]
    pub fn max_reason_width(mut self, chars: usize) -> Self {
        self.max_reason_width = Some(chars.max(4));
        self
    }

    /// The table as text: a header row, then one row per destination, each ending with `\n`.
    pub fn render(&self, status: &EngineStatus) -> String {
        let mut text = String::new();
        for row in self.lines(status) {
            text.push_str(&row);
            text.push('\n');
        }
        text
    }

    /// The table's rows, the header first, then a line per cluster that may spill and one per
    /// discovery source, without line ends.
    pub fn lines(&self, status: &EngineStatus) -> Vec<String> {
        let mut rows: Vec<[String; 15]> = vec![HEADERS.map(String::from)];
        for cluster in &status.clusters {
            for d in &cluster.destinations {
                rows.push(self.cells(cluster, d));
            }
        }
        let discovered = status
            .clusters
            .iter()
            .any(|c| !c.sources.is_empty() || c.destinations.iter().any(|d| d.source != "config"));
        // A load column without a value in any row says nothing.
        let valued = |c: usize| rows[1..].iter().any(|r| r[c] != "-");
        let shown: Vec<usize> = (0..HEADERS.len())
            .filter(|&c| c != SERVED_COLUMN || self.served.is_some())
            .filter(|c| discovered || !SOURCE_COLUMNS.contains(c))
            .filter(|&c| !LOAD_COLUMNS.contains(&c) || valued(c))
            .collect();
        let widths: Vec<usize> = (0..HEADERS.len())
            .map(|c| rows.iter().map(|r| width(&r[c])).max().unwrap_or(0))
            .collect();
        rows.iter()
            .map(|row| {
                let mut line = String::new();
                for (i, &c) in shown.iter().enumerate() {
                    let cell = &row[c];
                    let pad = widths[c] - width(cell);
                    if i > 0 {
                        line.push_str("  ");
                    }
                    if RIGHT_ALIGNED.contains(&c) {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(cell);
                    } else {
                        line.push_str(cell);
                        if i + 1 < shown.len() {
                            line.extend(std::iter::repeat_n(' ', pad));
                        }
                    }
                }
                line
            })
            .chain(
                status
                    .clusters
                    .iter()
                    .filter_map(|c| c.spill.as_ref().map(|spill| spill_line(&c.id, spill))),
            )
            .chain(status.clusters.iter().flat_map(|c| {
                c.sources
                    .iter()
                    .map(move |s| source_line(&c.id, s, status.at))
            }))
            .collect()
    }

    fn cells(&self, cluster: &ClusterStatus, d: &DestinationStatus) -> [String; 15] {
        let state = |enabled: bool, s: HealthState| {
            if enabled {
                s.to_string()
            } else {
                "off".to_string()
            }
        };
        let available = match (d.available, d.in_best_group, cluster.panic) {
            (false, _, _) => "no",
            (true, true, false) => "yes (best)",
            (true, false, false) => "yes",
            (true, true, true) => "panic (best)",
            (true, false, true) => "panic",
        };
        let served = self
            .served
            .as_ref()
            .and_then(|counter| counter(&cluster.id, &d.id))
            .map_or_else(|| "-".to_string(), |n| n.to_string());
        let reason = d.last_reason.as_deref().unwrap_or("-");
        let reason = match self.max_reason_width {
            Some(max) if width(reason) > max => {
                let mut cut: String = reason.chars().take(max - 3).collect();
                cut.push_str("...");
                cut
            }
            _ => reason.to_string(),
        };
        let discovery = match d.discovery {
            DiscoveryHealth::Unknown => "-".to_string(),
            other => other.to_string(),
        };
        [
            cluster.id.clone(),
            d.id.clone(),
            d.source.clone(),
            discovery,
            d.tier.to_string(),
            state(cluster.active_enabled, d.active),
            state(cluster.passive_enabled, d.passive),
            d.reported
                .map_or_else(|| "-".to_string(), |r| r.to_string()),
            available.to_string(),
            d.in_flight.to_string(),
            d.latency.map_or_else(|| "-".to_string(), format_latency),
            d.utilization.map_or_else(|| "-".to_string(), percent),
            d.slow_start.map_or_else(|| "-".to_string(), percent),
            served,
            reason,
        ]
    }
}

/// A latency estimate: `850us`, `12.3ms`, `1.25s`.
pub fn format_latency(latency: Duration) -> String {
    let seconds = latency.as_secs_f64();
    if seconds < 0.001 {
        format!("{:.0}us", seconds * 1e6)
    } else if seconds < 1.0 {
        format!("{:.1}ms", seconds * 1e3)
    } else {
        format!("{seconds:.2}s")
    }
}

/// A share or a utilization: `42%`.
fn percent(value: f64) -> String {
    format!("{:.0}%", value * 100.0)
}

/// Where a cluster's tier spill stands: `spill orders: tier 0 -> tier 1: 35% of picks; tier 0 at
/// 2.10x its unloaded latency (12.0ms)`, `...: none; ...`, or `...: none; tier 0 not measured
/// yet`.
pub fn spill_summary(spill: &SpillStatus) -> String {
    let share = if spill.share > 0.0 {
        format!("{} of picks", percent(spill.share))
    } else {
        "none".to_string()
    };
    let why = match (spill.latency_ratio, spill.baseline) {
        (Some(ratio), Some(baseline)) => format!(
            "tier {} at {ratio:.2}x its unloaded latency ({})",
            spill.from_tier,
            format_latency(baseline)
        ),
        (Some(ratio), None) => format!(
            "tier {} at {ratio:.2}x its unloaded latency",
            spill.from_tier
        ),
        (None, _) => format!("tier {} not measured yet", spill.from_tier),
    };
    format!(
        "tier {} -> tier {}: {share}; {why}",
        spill.from_tier, spill.to_tier
    )
}

fn spill_line(cluster: &str, spill: &SpillStatus) -> String {
    format!("spill {cluster}: {}", spill_summary(spill))
}

/// `source payments/dns (Dns svc.test A/AAAA): 3 destinations, generation 5, answered 2.1s ago`,
/// then `; STALE since 10.0s: timed out` and `; HELD: removes 2 of 3 (...), applies at 41.0s`.
fn source_line(cluster: &str, s: &SourceStatus, now: Duration) -> String {
    let secs = |d: Duration| format!("{:.1}s", d.as_secs_f64());
    let mut line = format!("source {cluster}/{} ({} {})", s.name, s.kind, s.target);
    line.push_str(&format!(
        ": {} destination{}, generation {}, ",
        s.endpoints,
        if s.endpoints == 1 { "" } else { "s" },
        s.generation
    ));
    match s.last_success {
        Some(at) => line.push_str(&format!("answered {} ago", secs(now.saturating_sub(at)))),
        None => line.push_str("no answer yet"),
    }
    if let Some(since) = s.stale_since {
        let why = s.last_error.as_ref().map_or("", |(_, e)| e.as_str());
        line.push_str(&format!("; STALE since {}: {why}", secs(since)));
    }
    if let Some(held) = &s.held {
        line.push_str(&format!(
            "; HELD: removes {} of {} ({})",
            held.removes, held.of, held.reason
        ));
        match held.applies_at {
            Some(at) => line.push_str(&format!(", applies at {}", secs(at))),
            None => line.push_str(", until forced"),
        }
    }
    line
}

pub(crate) fn width(text: &str) -> usize {
    text.chars().count()
}

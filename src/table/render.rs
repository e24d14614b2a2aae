//! The status table as text: one row per destination, columns as wide as their content.

use std::fmt;

use crate::engine::status::{ClusterStatus, DestinationStatus, EngineStatus};
use crate::health::state::HealthState;

/// A per-destination counter the caller supplies (for example requests each backend served):
/// given the cluster id and the destination id, the count, or `None` for "not known" (shown `-`).
pub type Counter = dyn Fn(&str, &str) -> Option<u64> + Send + Sync;

/// Renders an [`EngineStatus`] as a text table, one row per destination, in config order.
///
/// Columns: `CLUSTER`, `DESTINATION`, `TIER`, `ACTIVE`, `PASSIVE`, `REPORTED`, `AVAILABLE`,
/// `IN FLIGHT`, `SERVED` (only with a [`served`](Self::served) counter) and `LAST CHANGE`.
///
/// - `ACTIVE` / `PASSIVE` show `off` when the cluster does not run that check;
/// - `REPORTED` shows `-` until a probe read a health payload;
/// - `AVAILABLE` is `yes (best)` for a destination in the best group (it gets picks now), `yes`
///   for one that may receive traffic but ranks lower (a Degraded one, a remote tier), `no` for
///   one excluded by its checks, and `panic` / `panic (best)` when the cluster is in panic mode
///   (every destination failed its checks and all of them get traffic anyway);
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

const HEADERS: [&str; 10] = [
    "CLUSTER",
    "DESTINATION",
    "TIER",
    "ACTIVE",
    "PASSIVE",
    "REPORTED",
    "AVAILABLE",
    "IN FLIGHT",
    "SERVED",
    "LAST CHANGE",
];
const SERVED_COLUMN: usize = 8;
/// Columns aligned to the right (numbers).
const RIGHT_ALIGNED: [usize; 3] = [2, 7, 8];

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

    /// The table's rows, the header first, without line ends.
    pub fn lines(&self, status: &EngineStatus) -> Vec<String> {
        let mut rows: Vec<[String; 10]> = vec![HEADERS.map(String::from)];
        for cluster in &status.clusters {
            for d in &cluster.destinations {
                rows.push(self.cells(cluster, d));
            }
        }
        let shown: Vec<usize> = (0..HEADERS.len())
            .filter(|&c| c != SERVED_COLUMN || self.served.is_some())
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
            .collect()
    }

    fn cells(&self, cluster: &ClusterStatus, d: &DestinationStatus) -> [String; 10] {
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
        [
            cluster.id.clone(),
            d.id.clone(),
            d.tier.to_string(),
            state(cluster.active_enabled, d.active),
            state(cluster.passive_enabled, d.passive),
            d.reported
                .map_or_else(|| "-".to_string(), |r| r.to_string()),
            available.to_string(),
            d.in_flight.to_string(),
            served,
            reason,
        ]
    }
}

pub(crate) fn width(text: &str) -> usize {
    text.chars().count()
}

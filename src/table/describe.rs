//! One line per change event, as the live table and `healthpick watch` print them.

use crate::events::{HealthEvent, HealthEventKind};

/// One line describing a change event:
/// `orders/local-1: active Healthy -> Unhealthy (probe HTTP 503, 2 consecutive failures)`,
/// `orders: available local-2, local-3` (with ` (PANIC)` in panic mode, `nothing` when empty),
/// `orders: source dns: added 10.0.0.7:8080; removed 10.0.0.5:8080`,
/// `orders: source dns: HELD a change removing 3 of 4 (it would remove too many destinations at
/// once)`, `orders: source dns: STALE (timed out)`.
pub fn describe_event(event: &HealthEvent) -> String {
    match &event.kind {
        HealthEventKind::HealthChanged {
            destination,
            part,
            from,
            to,
            reason,
        } => format!(
            "{}/{destination}: {part} {from} -> {to} ({reason})",
            event.cluster
        ),
        HealthEventKind::AvailabilityChanged { available, panic } => {
            let list = if available.is_empty() {
                "nothing".to_string()
            } else {
                available
                    .iter()
                    .map(|d| d.as_ref())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let panic = if *panic {
                " (PANIC: every destination failed its checks, all get traffic)"
            } else {
                ""
            };
            format!("{}: available {list}{panic}", event.cluster)
        }
        HealthEventKind::DestinationsChanged {
            source,
            added,
            removed,
            updated,
        } => {
            let mut parts = Vec::new();
            for (what, ids) in [("added", added), ("removed", removed), ("updated", updated)] {
                if !ids.is_empty() {
                    let ids: Vec<&str> = ids.iter().map(|d| d.as_ref()).collect();
                    parts.push(format!("{what} {}", ids.join(", ")));
                }
            }
            format!(
                "{}: source {source}: {}",
                event.cluster,
                if parts.is_empty() {
                    "no change".to_string()
                } else {
                    parts.join("; ")
                }
            )
        }
        HealthEventKind::ChangeHeld {
            source,
            reason,
            removes,
            of,
        } => format!(
            "{}: source {source}: HELD a change removing {removes} of {of} ({reason})",
            event.cluster
        ),
        HealthEventKind::ChangeReleased { source, how } => {
            format!(
                "{}: source {source}: held change released ({how})",
                event.cluster
            )
        }
        HealthEventKind::SourceStale { source, error } => {
            format!("{}: source {source}: STALE ({error})", event.cluster)
        }
        HealthEventKind::SourceRecovered { source } => {
            format!("{}: source {source}: answering again", event.cluster)
        }
        HealthEventKind::SpillStarted {
            from_tier,
            to_tier,
            share,
        } => format!(
            "{}: tier {from_tier} overloaded: {:.0}% of picks spill to tier {to_tier}",
            event.cluster,
            share * 100.0
        ),
        HealthEventKind::SpillStopped { from_tier, to_tier } => format!(
            "{}: tier {from_tier} has room again: spill to tier {to_tier} withdrawn",
            event.cluster
        ),
        HealthEventKind::ConfigRejected { origin, errors } => format!(
            "configuration {}rejected, the one in force stays: {}",
            origin
                .as_deref()
                .map(|o| format!("{o} "))
                .unwrap_or_default(),
            errors.join("; ")
        ),
    }
}

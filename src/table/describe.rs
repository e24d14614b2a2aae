//! One line per change event, as the live table and `healthpick watch` print them.

use crate::events::{HealthEvent, HealthEventKind};

/// One line describing a change event:
/// `orders/local-1: active Healthy -> Unhealthy (probe HTTP 503, 2 consecutive failures)`, or
/// `orders: available local-2, local-3` (with ` (PANIC)` in panic mode, `nothing` when empty).
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
    }
}

//! The health updater: the only writer of health (YARP's `DestinationHealthUpdater`).
//!
//! It applies policy verdicts, records reasons, schedules and fires passive reactivation, emits
//! events and tracing, and rebuilds and publishes the cluster snapshot — all under the cluster's
//! update lock, and only when something changed.

use std::cmp::Reverse;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{
    ActivePolicyContext, HealthPart, HealthState, PassivePolicyContext, PassiveVerdict,
    ProbeResult, Reason, RequestOutcome,
};
use crate::cluster::{ClusterBook, ClusterRuntime, ClusterSettings, ClusterSnapshot};
use crate::config::fold_case;
use crate::destination::{Destination, DestinationState};
use crate::engine::EngineCore;
use crate::events::{HealthEvent, HealthEventKind, PartValue};
use crate::observer::{Evaluated, Evaluation};
use crate::selection;

/// A pending passive reactivation.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Reactivation {
    pub due: Duration,
    pub seq: u64,
    pub cluster: Arc<str>,
    pub destination: Arc<str>,
    pub state: WeakState,
}

/// A weak reference to a destination's state; never compared (seq makes entries unique).
pub(crate) struct WeakState(pub Weak<DestinationState>);

impl PartialEq for WeakState {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for WeakState {}
impl PartialOrd for WeakState {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for WeakState {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

/// Hot path: one request outcome. Costs the passive policy's evaluation; takes the cluster lock
/// only when the verdict changes the destination's passive health.
pub(crate) fn request_completed(destination: &Destination, outcome: RequestOutcome) {
    let settings = destination.info.cluster.load();
    // One clock read serves the observer and the policy.
    let observed_at = settings.observer.as_ref().map(|observer| {
        let at = settings.clock.now();
        observer.request_completed(at, &settings.id, &destination.info.id, outcome);
        at
    });
    let Some(policy) = &settings.passive else {
        return;
    };
    let now = observed_at.unwrap_or_else(|| settings.clock.now());
    let ctx = PassivePolicyContext {
        settings: &settings,
        destination,
        now,
    };
    let Some(verdict) = policy.request_completed(&ctx, outcome) else {
        return;
    };
    if let Some(observer) = &settings.observer {
        observer.evaluated(&Evaluation {
            at: now,
            cluster: &settings.id,
            destination: &destination.info.id,
            policy: &settings.passive_name,
            input: Evaluated::Outcome(outcome),
            state: verdict.health,
            reason: &verdict.reason,
        });
    }
    if verdict.health == destination.info.state.passive() {
        return;
    }
    if let Some(core) = settings.core.upgrade() {
        set_passive(&core, destination, verdict, now);
    }
}

fn set_passive(
    core: &EngineCore,
    destination: &Destination,
    verdict: PassiveVerdict,
    now: Duration,
) {
    let Some(runtime) = core.cluster(&destination.info.cluster_id) else {
        return;
    };
    let mut book = runtime.book.lock();
    let state = &destination.info.state;
    let from = state.passive();
    if from == verdict.health {
        return; // another thread applied the same verdict first
    }
    state.set_passive(verdict.health);
    let snapshot = runtime.snapshot.load_full();
    let settings = &snapshot.settings;
    changed(
        core,
        settings,
        destination,
        HealthPart::Passive,
        PartValue::State(from),
        PartValue::State(verdict.health),
        &verdict.reason,
        now,
    );
    if verdict.health == HealthState::Unhealthy {
        let mut record = state.record.lock();
        // A re-mark while a reactivation is pending does not move it: the first due time stands.
        if record.reactivation_due.is_none() {
            let due = now + verdict.reactivation_after;
            record.reactivation_due = Some(due);
            drop(record);
            core.schedule(Reactivation {
                due,
                seq: 0,
                cluster: settings.id.clone(),
                destination: destination.info.id.clone(),
                state: WeakState(Arc::downgrade(state)),
            });
        }
    }
    rebuild(core, &runtime, &mut book, &snapshot, now);
}

/// A finished probe round of one cluster. Results for destinations no longer in the cluster are
/// dropped. Returns how many results matched a destination.
pub(crate) fn probe_round(
    core: &EngineCore,
    runtime: &ClusterRuntime,
    results: &[ProbeResult],
) -> usize {
    let mut book = runtime.book.lock();
    let snapshot = runtime.snapshot.load_full();
    let settings = &snapshot.settings;
    let Some(active) = &settings.active else {
        return 0;
    };
    let now = core.clock.now();
    let by_id: std::collections::HashMap<String, &Destination> = snapshot
        .all
        .iter()
        .map(|d| (fold_case(&d.info.id), &**d))
        .collect();
    let round: Vec<(&Destination, &ProbeResult)> = results
        .iter()
        .filter_map(|r| by_id.get(&fold_case(&r.destination)).map(|d| (*d, r)))
        .collect();
    if round.is_empty() {
        // A round over no (known) destination still counts as the cluster's first round.
        runtime.mark_first_round();
        return 0;
    }
    if let Some(observer) = &settings.observer {
        let results: Vec<ProbeResult> = round.iter().map(|(_, r)| (*r).clone()).collect();
        observer.probe_round(now, &settings.id, &results);
    }
    let ctx = ActivePolicyContext { settings, now };
    let verdicts = active.policy.probing_completed(&ctx, &round);
    if let Some(observer) = &settings.observer {
        for verdict in &verdicts {
            if let Some((destination, result)) = round.get(verdict.index) {
                observer.evaluated(&Evaluation {
                    at: now,
                    cluster: &settings.id,
                    destination: &destination.info.id,
                    policy: &active.name,
                    input: Evaluated::Probe(result),
                    state: verdict.health,
                    reason: &verdict.reason,
                });
            }
        }
    }

    for (destination, result) in &round {
        let state = &destination.info.state;
        {
            let mut record = state.record.lock();
            record.last_probe = Some(now);
            record.last_probe_result = Some(result.describe());
            if !result.is_success() {
                record.last_error = Some(result.describe());
            }
        }
        // A 2xx health payload sets the reported part; any other result clears it (SPEC §3).
        let reported =
            if result.error.is_none() && result.status.is_some_and(|s| (200..300).contains(&s)) {
                result.reported
            } else {
                None
            };
        let from = state.health().reported;
        if from != reported {
            state.set_reported(reported);
            let reason = Reason::Probe {
                result: result.describe(),
                consecutive_failures: state.policy.lock().consecutive_failures,
            };
            changed(
                core,
                settings,
                destination,
                HealthPart::Reported,
                PartValue::Reported(from),
                PartValue::Reported(reported),
                &reason,
                now,
            );
        }
    }
    for verdict in verdicts {
        let Some((destination, _)) = round.get(verdict.index) else {
            continue;
        };
        let from = destination.info.state.active();
        if from != verdict.health {
            destination.info.state.set_active(verdict.health);
            changed(
                core,
                settings,
                destination,
                HealthPart::Active,
                PartValue::State(from),
                PartValue::State(verdict.health),
                &verdict.reason,
                now,
            );
        }
    }
    rebuild(core, runtime, &mut book, &snapshot, now);
    runtime.mark_first_round();
    round.len()
}

/// Fires every reactivation due at the clock's current time. Returns how many fired.
pub(crate) fn fire_due(core: &EngineCore) -> usize {
    let now = core.clock.now();
    let mut fired = 0;
    loop {
        let entry = {
            let mut timers = core.timers.lock();
            match timers.peek() {
                Some(Reverse(e)) if e.due <= now => timers.pop().map(|Reverse(e)| e),
                _ => None,
            }
        };
        let Some(entry) = entry else {
            return fired;
        };
        fired += 1;
        let Some(state) = entry.state.0.upgrade() else {
            continue;
        };
        let Some(runtime) = core.cluster(&entry.cluster) else {
            continue;
        };
        let mut book = runtime.book.lock();
        {
            let mut record = state.record.lock();
            if record.reactivation_due != Some(entry.due) {
                continue;
            }
            record.reactivation_due = None;
        }
        if state.passive() != HealthState::Unhealthy {
            continue;
        }
        let snapshot = runtime.snapshot.load_full();
        // The destination may have been reloaded: find its current incarnation by state.
        let Some(destination) = snapshot
            .all
            .iter()
            .find(|d| Arc::ptr_eq(&d.info.state, &state))
        else {
            continue;
        };
        state.set_passive(HealthState::Unknown);
        changed(
            core,
            &snapshot.settings,
            destination,
            HealthPart::Passive,
            PartValue::State(HealthState::Unhealthy),
            PartValue::State(HealthState::Unknown),
            &Reason::Reactivation,
            entry.due,
        );
        rebuild(core, &runtime, &mut book, &snapshot, entry.due);
    }
}

#[allow(clippy::too_many_arguments)]
fn changed(
    core: &EngineCore,
    settings: &ClusterSettings,
    destination: &Destination,
    part: HealthPart,
    from: PartValue,
    to: PartValue,
    reason: &Reason,
    now: Duration,
) {
    {
        let mut record = destination.info.state.record.lock();
        record.last_change = Some(now);
        record.last_reason = Some(format!("{part} {from} -> {to}: {reason}"));
    }
    let unhealthy = PartValue::State(HealthState::Unhealthy);
    if from == unhealthy || to == unhealthy {
        tracing::info!(target: "healthpick", cluster = %settings.id, destination = %destination.info.id, %part, %from, %to, %reason, "destination health changed");
    } else {
        tracing::debug!(target: "healthpick", cluster = %settings.id, destination = %destination.info.id, %part, %from, %to, %reason, "destination health changed");
    }
    core.emit(HealthEvent {
        at: now,
        cluster: settings.id.clone(),
        kind: HealthEventKind::HealthChanged {
            destination: destination.info.id.clone(),
            part,
            from,
            to,
            reason: reason.clone(),
        },
    });
}

/// Recomputes availability and the best group from `snapshot`'s destinations and publishes it.
pub(crate) fn rebuild(
    core: &EngineCore,
    runtime: &ClusterRuntime,
    book: &mut ClusterBook,
    snapshot: &ClusterSnapshot,
    now: Duration,
) {
    publish(
        core,
        runtime,
        book,
        snapshot.settings.clone(),
        snapshot.all.clone(),
        now,
    );
}

/// Publishes a snapshot for `all` under `settings` (config change or health change).
pub(crate) fn publish(
    core: &EngineCore,
    runtime: &ClusterRuntime,
    book: &mut ClusterBook,
    settings: Arc<ClusterSettings>,
    all: Vec<Arc<Destination>>,
    now: Duration,
) {
    let ctx = settings.available_context();
    let availability = settings.available_policy.available(&ctx, &all);
    let (best, best_class) = selection::best_group(&ctx, &availability.destinations);
    let ids: Vec<Arc<str>> = availability
        .destinations
        .iter()
        .map(|d| d.info.id.clone())
        .collect();
    let panic = availability.panic;
    let snapshot = Arc::new(ClusterSnapshot {
        settings: settings.clone(),
        all,
        available: availability.destinations,
        best: best.into(),
        best_class,
        panic,
    });
    runtime.snapshot.store(snapshot.clone());
    core.mirror(&snapshot);
    if book.published && panic != book.panic {
        if panic {
            tracing::info!(target: "healthpick", cluster = %settings.id, "no healthy destination left: entering panic mode, all destinations get traffic");
        } else {
            tracing::info!(target: "healthpick", cluster = %settings.id, available = ids.len(), "healthy destinations are back: leaving panic mode");
        }
    }
    if !book.published || panic != book.panic || ids != book.available_ids {
        core.emit(HealthEvent {
            at: now,
            cluster: settings.id.clone(),
            kind: HealthEventKind::AvailabilityChanged {
                available: ids.clone(),
                panic,
            },
        });
        book.available_ids = ids;
        book.panic = panic;
        book.published = true;
    }
}

//! The health updater: the only writer of health (YARP's `DestinationHealthUpdater`).
//!
//! It applies policy verdicts, records reasons, schedules and fires passive reactivation, emits
//! events and tracing, and builds and publishes the cluster's snapshot — all under the cluster's
//! book lock, once per change, and only when something changed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::hub::Hub;
use super::runtime::{ClusterBook, ClusterRuntime};
use super::timers::{Due, Timer, TimerTarget};
use crate::cluster::settings::ClusterSettings;
use crate::cluster::snapshot::ClusterSnapshot;
use crate::destination::Destination;
use crate::events::{HealthEvent, HealthEventKind, PartValue};
use crate::health::outcome::RequestOutcome;
use crate::health::probe_result::ProbeResult;
use crate::health::reason::Reason;
use crate::health::state::{HealthPart, HealthState};
use crate::ids::fold_case;
use crate::observer::{Evaluated, Evaluation};
use crate::policy::passive::PassiveVerdict;

impl ClusterRuntime {
    /// Hot path: one request outcome. Costs the passive policy's evaluation; takes the book lock
    /// only when the verdict changes the destination's passive health.
    pub(crate) fn outcome(&self, destination: &Arc<Destination>, outcome: RequestOutcome) {
        if destination.is_removed() {
            return;
        }
        let snapshot = self.cell.load();
        let settings = &snapshot.settings;
        // One clock read serves the observer and the policy.
        let observed_at = self.observer.as_ref().map(|observer| {
            let at = self.clock.now();
            observer.request_completed(at, &settings.id, destination.id(), outcome);
            at
        });
        let Some(passive) = &settings.policies.passive else {
            return;
        };
        let now = observed_at.unwrap_or_else(|| self.clock.now());
        let ctx = settings.passive_context(destination, now);
        let Some(verdict) = passive.policy.request_completed(&ctx, outcome) else {
            return;
        };
        if let Some(observer) = &self.observer {
            observer.evaluated(&Evaluation {
                at: now,
                cluster: &settings.id,
                destination: destination.id(),
                policy: &passive.name,
                input: Evaluated::Outcome(outcome),
                state: verdict.health,
                reason: &verdict.reason,
            });
        }
        if verdict.health == destination.state().passive() {
            return;
        }
        drop(snapshot);
        self.set_passive(destination, verdict, now);
    }

    fn set_passive(&self, destination: &Arc<Destination>, verdict: PassiveVerdict, now: Duration) {
        let hub = self.hub.upgrade();
        let mut book = self.book.lock();
        let state = destination.state();
        let from = state.passive();
        if from == verdict.health || destination.is_removed() {
            return; // another thread applied the same verdict first, or it just left
        }
        state.set_passive(verdict.health);
        let snapshot = self.cell.load_full();
        changed(
            hub.as_deref(),
            &snapshot.settings,
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
                if let Some(hub) = &hub {
                    let cluster: std::sync::Weak<dyn TimerTarget> = self.me.clone();
                    hub.timers.schedule(Timer::new(
                        due,
                        cluster,
                        Due::Reactivation(Arc::downgrade(destination)),
                    ));
                }
            }
        }
        let rebuilt = snapshot.rebuilt(snapshot.waiting);
        self.publish(hub.as_deref(), &mut book, rebuilt, now);
    }

    /// A finished probe round. Results for destinations no longer in the cluster are dropped.
    /// Returns how many results matched a destination.
    pub(crate) fn probe_round(&self, results: &[ProbeResult]) -> usize {
        let hub = self.hub.upgrade();
        let mut book = self.book.lock();
        let snapshot = self.cell.load_full();
        let settings = &snapshot.settings;
        let Some(active) = &settings.policies.active else {
            return 0;
        };
        let now = self.clock.now();
        let by_id: HashMap<String, &Destination> = snapshot
            .members
            .iter()
            .map(|d| (fold_case(d.id()), &**d))
            .collect();
        let round: Vec<(&Destination, &ProbeResult)> = results
            .iter()
            .filter_map(|r| by_id.get(&fold_case(&r.destination)).map(|d| (*d, r)))
            .collect();
        if round.is_empty() {
            // A round over no (known) destination still counts as the cluster's first round.
            self.first_round_finished(hub.as_deref(), &mut book, &snapshot, now);
            return 0;
        }
        if let Some(observer) = &self.observer {
            let results: Vec<ProbeResult> = round.iter().map(|(_, r)| (*r).clone()).collect();
            observer.probe_round(now, &settings.id, &results);
        }
        let ctx = settings.active_context(now);
        let verdicts = active.policy.probing_completed(&ctx, &round);
        let mut reasons: Vec<Option<&Reason>> = vec![None; round.len()];
        for verdict in &verdicts {
            if let Some((destination, result)) = round.get(verdict.index) {
                reasons[verdict.index] = Some(&verdict.reason);
                if let Some(observer) = &self.observer {
                    observer.evaluated(&Evaluation {
                        at: now,
                        cluster: &settings.id,
                        destination: destination.id(),
                        policy: &active.name,
                        input: Evaluated::Probe(result),
                        state: verdict.health,
                        reason: &verdict.reason,
                    });
                }
            }
        }

        for ((destination, result), verdict_reason) in round.iter().zip(&reasons) {
            let state = destination.state();
            {
                let mut record = state.record.lock();
                record.last_probe = Some(now);
                record.last_probe_result = Some(result.describe());
                if !result.is_success() {
                    record.last_error = Some(result.describe());
                }
            }
            // A 2xx health payload sets the reported part; any other result clears it (SPEC §3).
            let reported = if result.error.is_none()
                && result.status.is_some_and(|s| (200..300).contains(&s))
            {
                result.reported
            } else {
                None
            };
            let from = state.reported();
            if from != reported {
                state.set_reported(reported);
                // The probe's own words, with the active policy's failure count when it kept one.
                let consecutive_failures = match verdict_reason {
                    Some(Reason::Probe {
                        consecutive_failures,
                        ..
                    }) => *consecutive_failures,
                    _ => 0,
                };
                let reason = Reason::Probe {
                    result: result.describe(),
                    consecutive_failures,
                };
                changed(
                    hub.as_deref(),
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
            let from = destination.state().active();
            if from != verdict.health {
                destination.state().set_active(verdict.health);
                changed(
                    hub.as_deref(),
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
        self.first_round_finished(hub.as_deref(), &mut book, &snapshot, now);
        round.len()
    }

    /// Publishes the snapshot after a probe round and releases first-pick waiters and
    /// `Engine::ready` the first time.
    fn first_round_finished(
        &self,
        hub: Option<&Hub>,
        book: &mut ClusterBook,
        snapshot: &ClusterSnapshot,
        now: Duration,
    ) {
        book.first_round_done = true;
        let waiting = book.waiting(&snapshot.settings);
        self.publish(hub, book, snapshot.rebuilt(waiting), now);
        self.first_round.send_replace(true);
        // A change held by a source's update guard may now be backed by the probes.
        if let Some(hub) = hub {
            self.release_if_probes_agree(hub, book, now);
        }
    }

    /// A due reactivation of `destination`: its passive health returns to Unknown if it is still
    /// Unhealthy and this is still its pending reactivation.
    pub(crate) fn reactivate_at(&self, destination: &Destination, due: Duration) {
        let hub = self.hub.upgrade();
        let mut book = self.book.lock();
        let state = destination.state();
        {
            let mut record = state.record.lock();
            if record.reactivation_due != Some(due) {
                return;
            }
            record.reactivation_due = None;
        }
        if state.passive() != HealthState::Unhealthy || destination.is_removed() {
            return;
        }
        state.set_passive(HealthState::Unknown);
        let snapshot = self.cell.load_full();
        changed(
            hub.as_deref(),
            &snapshot.settings,
            destination,
            HealthPart::Passive,
            PartValue::State(HealthState::Unhealthy),
            PartValue::State(HealthState::Unknown),
            &Reason::Reactivation,
            due,
        );
        let rebuilt = snapshot.rebuilt(snapshot.waiting);
        self.publish(hub.as_deref(), &mut book, rebuilt, due);
    }

    /// Swaps in `snapshot` and tells subscribers when the available set or panic mode changed.
    /// Called with the book locked, so publications of one cluster happen in order.
    pub(crate) fn publish(
        &self,
        hub: Option<&Hub>,
        book: &mut ClusterBook,
        snapshot: ClusterSnapshot,
        now: Duration,
    ) {
        let ids: Vec<Arc<str>> = snapshot
            .available
            .iter()
            .map(|d| d.info().id.clone())
            .collect();
        let panic = snapshot.panic;
        let cluster = snapshot.settings.id.clone();
        self.cell.store(Arc::new(snapshot));
        if book.published && panic != book.panic {
            if panic {
                tracing::info!(target: "healthpick", %cluster, "no healthy destination left: entering panic mode, all destinations get traffic");
            } else {
                tracing::info!(target: "healthpick", %cluster, available = ids.len(), "healthy destinations are back: leaving panic mode");
            }
        }
        if !book.published || panic != book.panic || ids != book.available_ids {
            if let Some(hub) = hub {
                hub.emit(HealthEvent {
                    at: now,
                    cluster,
                    kind: HealthEventKind::AvailabilityChanged {
                        available: ids.clone(),
                        panic,
                    },
                });
            }
            book.available_ids = ids;
            book.panic = panic;
            book.published = true;
        }
    }
}

/// Records and announces one health-part change.
#[allow(clippy::too_many_arguments)]
pub(crate) fn changed(
    hub: Option<&Hub>,
    settings: &ClusterSettings,
    destination: &Destination,
    part: HealthPart,
    from: PartValue,
    to: PartValue,
    reason: &Reason,
    now: Duration,
) {
    {
        let mut record = destination.state().record.lock();
        record.last_change = Some(now);
        record.last_reason = Some(format!("{part} {from} -> {to}: {reason}"));
    }
    let unhealthy = PartValue::State(HealthState::Unhealthy);
    let id = destination.id();
    if from == unhealthy || to == unhealthy {
        tracing::info!(target: "healthpick", cluster = %settings.id, destination = %id, %part, %from, %to, %reason, "destination health changed");
    } else {
        tracing::debug!(target: "healthpick", cluster = %settings.id, destination = %id, %part, %from, %to, %reason, "destination health changed");
    }
    if let Some(hub) = hub {
        hub.emit(HealthEvent {
            at: now,
            cluster: settings.id.clone(),
            kind: HealthEventKind::HealthChanged {
                destination: destination.info().id.clone(),
                part,
                from,
                to,
                reason: reason.clone(),
            },
        });
    }
}

//! The health updater: the only writer of health (YARP's `DestinationHealthUpdater`).
//!
//! It applies policy verdicts, records reasons, schedules and fires passive reactivation, emits
//! events and tracing, and builds and publishes the cluster's snapshot — all under the cluster's
//! book lock, once per change, and only when something changed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::fast_path::{elapsed_since, with_current};
use super::hub::Hub;
use super::runtime::{ClusterBook, ClusterRuntime, FirstProbes};
use super::timers::{Due, Timer, TimerTarget};
use crate::cluster::settings::ClusterSettings;
use crate::cluster::snapshot::{ClusterSnapshot, WarmUp};
use crate::destination::{latency, reported_load};
use crate::destination::{Destination, Latency};
use crate::events::{HealthEvent, HealthEventKind, PartValue};
use crate::health::outcome::RequestOutcome;
use crate::health::probe_result::ProbeResult;
use crate::health::reason::Reason;
use crate::health::state::{HealthPart, HealthState};
use crate::ids::fold_case;
use crate::observer::{Evaluated, Evaluation};
use crate::policy::active::ActiveHealthPolicy;
use crate::policy::passive::{
    PassiveHealthPolicy, PassivePolicyContext, PassiveVerdict, QuietSuccesses,
};
use crate::policy::registry::Named;
use crate::selection::balancing::Group;
use crate::selection::tier_spill::{InFlight, SpillChange, TICK};

/// What the first-probe bookkeeping runs after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// A change of members or settings.
    Change,
    /// Probe results as they arrived.
    Probes,
    /// A whole probe round.
    Round,
}

/// Probe results handed to the health updater.
pub(crate) enum ProbeBatch<'a> {
    /// A whole round, by destination id (`Engine::report_probe_round`): the cluster's first
    /// round is over after it.
    Round(&'a [ProbeResult]),
    /// Results that arrived, by destination id (`Engine::report_probe_results`).
    Arrived(&'a [ProbeResult]),
    /// Results of the destinations the monitor probed: as they arrived, or a whole round.
    Probed {
        results: &'a [(Arc<Destination>, ProbeResult)],
        whole_round: bool,
    },
}

impl ClusterRuntime {
    /// Hot path: one request outcome. Costs the passive policy's evaluation and one clock read;
    /// takes the book lock only when the verdict changes the destination's passive health. A
    /// `Success` the destination was granted (see `destination/success_credit.rs`) costs one
    /// compare-and-swap in the destination's block, and nothing else (and the clock read where
    /// its handle timed the request).
    pub(crate) fn outcome(
        &self,
        destination: &Arc<Destination>,
        outcome: RequestOutcome,
        latency: Latency,
    ) {
        let mut read_at = None;
        if latency != Latency::Unknown {
            let now = self.clock.now();
            let sample = match latency {
                Latency::Since(started) => elapsed_since(started, now),
                Latency::Took(took) => took,
                Latency::Unknown => Duration::ZERO,
            };
            with_current(&self.cell, |snapshot| {
                latency::record(
                    destination.signals.latency(),
                    sample,
                    now,
                    &snapshot.settings.signals.latency,
                );
                if let Some(spill) = &snapshot.spill {
                    spill.state.record(destination.tier(), sample);
                }
            });
            #[cfg(feature = "metrics")]
            super::metrics::latency_sampled(destination);
            read_at = Some(now);
        }
        if outcome == RequestOutcome::Success && destination.credit().take() {
            #[cfg(feature = "metrics")]
            self.metrics.outcome(outcome);
            return;
        }
        self.judged_outcome(destination, outcome, read_at);
    }

    /// A load report from `destination`'s server (`endpoint-load-metrics`): recorded where the
    /// cluster reads reports, without a lock.
    pub(crate) fn record_load(&self, destination: &Arc<Destination>, utilization: f64) {
        if destination.is_removed() {
            return;
        }
        let (load, since) = destination.signals.load();
        let now = self.clock.now();
        with_current(&self.cell, |snapshot| {
            if let Some(rules) = &snapshot.settings.signals.reports {
                reported_load::record(load, since, utilization, now, rules);
                #[cfg(feature = "metrics")]
                super::metrics::load_reported(destination, utilization);
            }
        });
    }

    /// An outcome the passive policy judges (`now`: the clock, if read already).
    fn judged_outcome(
        &self,
        destination: &Arc<Destination>,
        outcome: RequestOutcome,
        now: Option<Duration>,
    ) {
        // The snapshot through this thread's pick cache: no shared write when it picked here.
        with_current(&self.cell, |snapshot| {
            let settings = &snapshot.settings;
            // Most clusters neither judge nor watch outcomes: they skip the destination's state,
            // whose line a pick from a large cluster does not otherwise bring in.
            let watched = settings.policies.passive.is_some() || self.observer.is_some();
            if (watched || cfg!(feature = "metrics")) && destination.is_removed() {
                return;
            }
            #[cfg(feature = "metrics")]
            self.metrics.outcome(outcome);
            if !watched {
                return;
            }
            // One clock read serves the observer and the policy.
            let observed_at = self.observer.as_ref().map(|observer| {
                let at = now.unwrap_or_else(|| self.clock.now());
                observer.request_completed(at, &settings.id, destination.id(), outcome);
                at
            });
            let Some(passive) = settings.policies.passive.as_deref() else {
                return;
            };
            let now = observed_at.or(now).unwrap_or_else(|| self.clock.now());
            let ctx = settings.passive_context(
                destination,
                &self.policy_state,
                snapshot.members.len(),
                now,
            );
            let (verdict, only) = match passive {
                // The usual case: one policy, nobody watching its evaluations; only then may
                // successes skip the evaluation.
                [only] if self.observer.is_none() => (
                    only.policy.request_completed(&ctx, outcome),
                    Some(&*only.policy),
                ),
                _ => (
                    self.combined_verdict(settings, passive, &ctx, destination, outcome, now),
                    None,
                ),
            };
            if let Some(verdict) = verdict {
                if verdict.health != destination.state().passive() {
                    self.set_passive(destination, verdict, now);
                }
            }
            if let Some(policy) = only {
                self.grant_successes(destination, policy, &ctx, settings);
            }
        });
    }

    /// Grants `destination`, if it is Healthy, the successes its only passive policy says keep
    /// that verdict ([`PassiveHealthPolicy::quiet_successes`]); withdrawn again at once if its
    /// health, its settings or its membership changed meanwhile (each such change withdraws
    /// grants after it is made, so one side sees the other).
    fn grant_successes(
        &self,
        destination: &Arc<Destination>,
        policy: &dyn PassiveHealthPolicy,
        ctx: &PassivePolicyContext<'_>,
        settings: &Arc<ClusterSettings>,
    ) {
        if destination.state().passive() != HealthState::Healthy {
            return;
        }
        // Only a timer ends a grant: none unless a task fires the engine's timers on time (with
        // a custom clock, time moves and timers fire when the user says, so every outcome is
        // judged as it comes).
        let Some(hub) = self.hub.upgrade().filter(|hub| hub.timers.start()) else {
            return;
        };
        let ends = destination.with_outcome_window(|window| {
            let QuietSuccesses { count, until } = policy.quiet_successes(ctx, window)?;
            let ends = grant_end(until);
            (count > 0 && ends > ctx.now()).then(|| {
                destination.credit().grant(count);
                ends
            })
        });
        let Some(ends) = ends else {
            return;
        };
        self.end_grant_at(&hub, destination, ends);
        if destination.state().passive() != HealthState::Healthy
            || destination.is_removed()
            || !Arc::ptr_eq(&self.cell.load().settings, settings)
        {
            destination.credit().revoke();
        }
    }

    /// Makes sure a timer ends `destination`'s grant by `ends`: one is set unless an earlier
    /// one is pending (ending a later grant early only sends its next success to the lock).
    fn end_grant_at(&self, hub: &Hub, destination: &Arc<Destination>, ends: Duration) {
        let mut record = destination.record();
        if record.grant_ends.is_some_and(|pending| pending <= ends) {
            return;
        }
        record.grant_ends = Some(ends);
        drop(record);
        let cluster: std::sync::Weak<dyn TimerTarget> = self.me.clone();
        hub.timers.schedule(Timer::new(
            ends,
            cluster,
            Due::GrantEnds(Arc::downgrade(destination)),
        ));
    }

    /// The timer due at `due` ends `destination`'s grant: the successes it took join the
    /// window, and the next one takes the lock (and is granted anew).
    pub(crate) fn end_grant(&self, destination: &Destination, due: Duration) {
        let mut record = destination.record();
        if record.grant_ends == Some(due) {
            record.grant_ends = None;
        }
        drop(record);
        destination.with_outcome_window(|_| ());
    }

    /// Every listed passive policy judges the outcome (and the observer sees each verdict); one
    /// Unhealthy verdict is enough.
    fn combined_verdict(
        &self,
        settings: &ClusterSettings,
        passive: &[Named<dyn PassiveHealthPolicy>],
        ctx: &PassivePolicyContext<'_>,
        destination: &Destination,
        outcome: RequestOutcome,
        now: Duration,
    ) -> Option<PassiveVerdict> {
        let mut combined: Option<PassiveVerdict> = None;
        for policy in passive {
            let Some(verdict) = policy.policy.request_completed(ctx, outcome) else {
                continue;
            };
            if let Some(observer) = &self.observer {
                observer.evaluated(&Evaluation {
                    at: now,
                    cluster: &settings.id,
                    destination: destination.id(),
                    policy: &policy.name,
                    input: Evaluated::Outcome(outcome),
                    state: verdict.health,
                    reason: &verdict.reason,
                });
            }
            combined = Some(match combined {
                None => verdict,
                Some(earlier) => combine(earlier, verdict),
            });
        }
        combined
    }

    fn set_passive(&self, destination: &Arc<Destination>, verdict: PassiveVerdict, now: Duration) {
        let hub = self.hub.upgrade();
        let mut book = self.book.lock();
        let state = destination.state();
        let from = state.passive();
        if from == verdict.health || destination.is_removed() {
            return; // another thread applied the same verdict first, or it just left
        }
        destination.set_passive(verdict.health);
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
            let mut record = destination.record();
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
        if snapshot
            .settings
            .passive_change_keeps_snapshot(from, verdict.health)
        {
            return;
        }
        let rebuilt = snapshot.rebuilt(now);
        self.publish(hub.as_deref(), &mut book, rebuilt, now);
    }

    /// Applies probe results. Results for destinations no longer in the cluster
    /// are dropped. Returns how many results matched a destination.
    pub(crate) fn apply_probes(&self, batch: ProbeBatch<'_>) -> usize {
        let hub = self.hub.upgrade();
        let mut book = self.book.lock();
        let snapshot = self.cell.load_full();
        let settings = &snapshot.settings;
        let Some(active) = &settings.policies.active else {
            return 0;
        };
        let now = self.clock.now();
        let whole_round = matches!(
            batch,
            ProbeBatch::Round(_)
                | ProbeBatch::Probed {
                    whole_round: true,
                    ..
                }
        );
        let round: Vec<(&Destination, &ProbeResult)> = match batch {
            ProbeBatch::Round(results) | ProbeBatch::Arrived(results) => {
                let by_id: HashMap<String, &Destination> = snapshot
                    .members
                    .iter()
                    .map(|d| (fold_case(d.id()), &**d))
                    .collect();
                results
                    .iter()
                    .filter_map(|r| by_id.get(&fold_case(&r.destination)).map(|d| (*d, r)))
                    .collect()
            }
            // The monitor's own destinations: one that left its cluster is marked removed under
            // this lock, so the rest are members.
            ProbeBatch::Probed { results, .. } => results
                .iter()
                .filter(|(d, _)| !d.is_removed())
                .map(|(d, r)| (&**d, r))
                .collect(),
        };
        let mut dirty = false;
        if !round.is_empty() {
            // Counted only while the first probes run.
            let first_probes = (!book.first_round_done).then_some(&mut book.first_probes);
            dirty = self.judge(hub.as_deref(), &snapshot, active, &round, first_probes, now);
        }
        let after = if whole_round {
            After::Round
        } else {
            After::Probes
        };
        let warm_up = self.warm_up_after_change(&mut book, settings, &snapshot.members, after);
        if dirty || warm_up != snapshot.warm_up() {
            self.publish(
                hub.as_deref(),
                &mut book,
                snapshot.rebuilt_with(warm_up, now),
                now,
            );
        }
        // A change held by a source's update guard may now be backed by the probes.
        if dirty {
            if let Some(hub) = hub.as_deref() {
                self.release_if_probes_agree(hub, &mut book, now);
            }
        }
        round.len()
    }

    /// Runs the active policy over `round` and applies what it and the probes say; returns
    /// whether anything selection looks at changed.
    fn judge(
        &self,
        hub: Option<&Hub>,
        snapshot: &ClusterSnapshot,
        active: &Named<dyn ActiveHealthPolicy>,
        round: &[(&Destination, &ProbeResult)],
        mut first_probes: Option<&mut FirstProbes>,
        now: Duration,
    ) -> bool {
        let settings = &snapshot.settings;
        if let Some(observer) = &self.observer {
            let results: Vec<ProbeResult> = round.iter().map(|(_, r)| (*r).clone()).collect();
            observer.probe_round(now, &settings.id, &results);
        }
        let ctx = settings.active_context(now);
        let verdicts = active.policy.probing_completed(&ctx, round);
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

        let mut dirty = false;
        for ((destination, result), verdict_reason) in round.iter().zip(&reasons) {
            let state = destination.state();
            {
                let mut record = destination.record();
                record.last_probe = Some(now);
                record.last_probe_result = Some(result.describe());
                if !result.is_success() {
                    record.last_error = Some(result.describe());
                }
            }
            // Suspect ranking and the warm-up read what the latest probe said.
            let succeeded = result.is_success();
            let before = state.set_last_probe(succeeded);
            dirty |= before != Some(succeeded);
            if let Some(first_probes) = first_probes.as_deref_mut() {
                first_probes.record(destination.tier(), before, succeeded);
            }
            // A 2xx health payload sets the reported part; any other result clears it.
            let reported = if result.error.is_none()
                && result.status.is_some_and(|s| (200..300).contains(&s))
            {
                result.reported
            } else {
                None
            };
            let from = state.reported();
            if from != reported {
                dirty = true;
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
                    hub,
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
                dirty = true;
                destination.state().set_active(verdict.health);
                changed(
                    hub,
                    settings,
                    destination,
                    HealthPart::Active,
                    PartValue::State(from),
                    PartValue::State(verdict.health),
                    &verdict.reason,
                    now,
                );
                if from == HealthState::Unhealthy && verdict.health == HealthState::Healthy {
                    self.recovered(snapshot, destination, now);
                }
            }
        }
        dirty
    }

    /// Active checks saw `destination` come back: its passive policies forget its outage, if
    /// the cluster asks for it.
    fn recovered(&self, snapshot: &ClusterSnapshot, destination: &Destination, now: Duration) {
        let settings = &snapshot.settings;
        let Some(passive) = &settings.policies.passive else {
            return;
        };
        if !settings.reset_passive_on_recovery {
            return;
        }
        let ctx =
            settings.passive_context(destination, &self.policy_state, snapshot.members.len(), now);
        for policy in passive {
            policy.policy.destination_recovered(&ctx);
        }
        tracing::debug!(target: "healthpick", cluster = %settings.id, destination = %destination.id(), "active checks saw the destination recover: passive history cleared");
    }

    /// After probe results or a change of members: whether every member has had its first
    /// probe result (or a whole round was reported) and whether the first-pick warm-up is over;
    /// releases `Engine::ready` and first-pick waiters when they are. Returns the warm-up state
    /// for the next snapshot.
    pub(crate) fn warm_up_after_change(
        &self,
        book: &mut ClusterBook,
        settings: &ClusterSettings,
        members: &[Arc<Destination>],
        after: After,
    ) -> WarmUp {
        if settings.probing.is_none() {
            return book.warm_up(settings);
        }
        if !book.first_round_done {
            if after == After::Change {
                book.first_probes = FirstProbes::of(members);
            }
            // A cluster without members has finished its first probes once a prober said so.
            let every_member_probed =
                (after != After::Change || !members.is_empty()) && book.first_probes.awaiting == 0;
            if after == After::Round || every_member_probed {
                book.first_round_done = true;
                book.first_probes = FirstProbes::default();
            } else if !book.warmed && book.first_probes.best_tier_answered() {
                book.warmed = true;
            }
        }
        if book.first_round_done {
            self.first_round
                .send_if_modified(|done| !std::mem::replace(done, true));
        }
        if book.first_round_done || book.warmed {
            self.warmed
                .send_if_modified(|done| !std::mem::replace(done, true));
        }
        book.warm_up(settings)
    }

    /// A due reactivation of `destination`: its passive health returns to Unknown if it is still
    /// Unhealthy and this is still its pending reactivation.
    pub(crate) fn reactivate_at(&self, destination: &Destination, due: Duration) {
        let hub = self.hub.upgrade();
        let mut book = self.book.lock();
        let state = destination.state();
        {
            let mut record = destination.record();
            if record.reactivation_due != Some(due) {
                return;
            }
            record.reactivation_due = None;
        }
        if state.passive() != HealthState::Unhealthy || destination.is_removed() {
            return;
        }
        destination.set_passive(HealthState::Unknown);
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
        let rebuilt = snapshot.rebuilt(due);
        self.publish(hub.as_deref(), &mut book, rebuilt, due);
    }

    /// A step of slow start: the weights of the warming destinations are recomputed for `due`
    /// (and the next step scheduled while some still warm).
    pub(crate) fn slow_start_step(&self, due: Duration) {
        let hub = self.hub.upgrade();
        let mut book = self.book.lock();
        if book.ramp_due != Some(due) {
            return;
        }
        book.ramp_due = None;
        let rebuilt = self.cell.load().rebuilt(due);
        self.publish(hub.as_deref(), &mut book, rebuilt, due);
    }

    /// The spill controller's look at `due`: it judges what the preferred tier's requests showed
    /// since its last look and sets the share that spills; a start or stop is announced. The
    /// looks go on every [`TICK`] while the cluster may spill.
    pub(crate) fn spill_tick(&self, due: Duration) {
        let hub = self.hub.upgrade();
        let mut book = self.book.lock();
        if book.spill_due != Some(due) {
            return;
        }
        book.spill_due = None;
        let snapshot = self.cell.load_full();
        let Some(spill) = &snapshot.spill else {
            return;
        };
        let in_flight = |group: &Group| group.destinations().iter().map(|d| d.in_flight()).sum();
        let in_flight = InFlight {
            preferred: in_flight(&snapshot.best),
            next: in_flight(&spill.group),
        };
        let rules = snapshot.settings.config.tier_spill_setting();
        let change = spill.state.tick(due, in_flight, rules);
        #[cfg(feature = "metrics")]
        self.metrics.spill_share(spill.state.reading().share);
        let (from_tier, to_tier) = (spill.state.from_tier, spill.state.to_tier);
        let cluster = &snapshot.settings.id;
        let kind = match change {
            Some(SpillChange::Started { share }) => {
                tracing::info!(target: "healthpick", %cluster, from_tier, to_tier, share, "preferred tier overloaded: spilling to the next tier");
                Some(HealthEventKind::SpillStarted {
                    from_tier,
                    to_tier,
                    share,
                })
            }
            Some(SpillChange::Stopped) => {
                tracing::info!(target: "healthpick", %cluster, from_tier, to_tier, "preferred tier has room again: spill withdrawn");
                Some(HealthEventKind::SpillStopped { from_tier, to_tier })
            }
            None => None,
        };
        if let Some(hub) = hub.as_deref() {
            if let Some(kind) = kind {
                hub.emit(HealthEvent {
                    at: due,
                    cluster: cluster.clone(),
                    kind,
                });
            }
            self.schedule_spill_tick(hub, &mut book, due + TICK);
        }
    }

    fn schedule_spill_tick(&self, hub: &Hub, book: &mut ClusterBook, due: Duration) {
        book.spill_due = Some(due);
        let cluster: std::sync::Weak<dyn TimerTarget> = self.me.clone();
        hub.timers
            .schedule(Timer::new(due, cluster, Due::SpillTick));
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
        if book.retired {
            return; // it keeps its retired snapshot
        }
        let ids: Vec<Arc<str>> = snapshot
            .available
            .iter()
            .map(|d| d.info().id.clone())
            .collect();
        let panic = snapshot.panic;
        let cluster = snapshot.settings.id.clone();
        let ramp_due = snapshot.ramp_due;
        let spills = snapshot.spill.is_some();
        #[cfg(feature = "metrics")]
        self.metrics.available(ids.len());
        self.cell.store(Arc::new(snapshot));
        if let (Some(due), None, Some(hub)) = (ramp_due, book.ramp_due, hub) {
            book.ramp_due = Some(due);
            let cluster: std::sync::Weak<dyn TimerTarget> = self.me.clone();
            hub.timers
                .schedule(Timer::new(due, cluster, Due::SlowStart));
        }
        if let (true, None, Some(hub)) = (spills, book.spill_due, hub) {
            self.schedule_spill_tick(hub, book, now + TICK);
        }
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
        let mut record = destination.record();
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

/// Grants end on a grid of this step, a step or two before the open bucket closes: the grants
/// of many destinations end with one wake of the timer task, and a timer that fires a little
/// late still ends its grant before a success could fall in the wrong bucket.
const GRANT_STEP: Duration = Duration::from_millis(10);

/// When a grant whose successes the window would count in its open bucket until `until` ends.
fn grant_end(until: Duration) -> Duration {
    let step = GRANT_STEP.as_nanos();
    let steps = until.as_nanos() / step;
    Duration::from_nanos(u64::try_from(steps.saturating_sub(1) * step).unwrap_or(u64::MAX))
}

/// Two passive policies' verdicts on one outcome as one: Unhealthy when either says so (with
/// the longer reactivation period), else Healthy when either says so.
fn combine(earlier: PassiveVerdict, later: PassiveVerdict) -> PassiveVerdict {
    match (earlier.health, later.health) {
        (HealthState::Unhealthy, HealthState::Unhealthy) => PassiveVerdict {
            reactivation_after: earlier.reactivation_after.max(later.reactivation_after),
            ..earlier
        },
        (HealthState::Unhealthy, _) => earlier,
        (_, HealthState::Unhealthy) => later,
        (HealthState::Healthy, _) => earlier,
        (_, HealthState::Healthy) => later,
        _ => earlier,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use arc_swap::Guard;

    use crate::clock::ManualClock;
    use crate::cluster::snapshot::ClusterSnapshot;
    use crate::config::{ClusterConfig, Config, DestinationConfig, PassiveHealthCheckConfig};
    use crate::destination::Destination;
    use crate::engine::Engine;
    use crate::events::HealthEventKind;
    use crate::health::outcome::RequestOutcome;
    use crate::health::state::HealthState;
    use crate::policy::available::{
        Availability, AvailableDestinationsPolicy, AvailablePolicyContext,
    };

    fn engine(clock: &Arc<ManualClock>, limit: &str) -> Engine {
        let engine = Engine::builder().clock(clock.clone()).build();
        engine.apply_config(config(limit)).unwrap();
        engine
    }

    fn config(limit: &str) -> Config {
        Config::new().cluster(
            ClusterConfig::new("c")
                .passive(PassiveHealthCheckConfig::enabled())
                .metadata("TransportFailureRateHealthPolicy.RateLimit", limit)
                .destination(DestinationConfig::new("d", "http://127.0.0.1:1/")),
        )
    }

    fn destination(engine: &Engine) -> Arc<Destination> {
        engine.pick_endpoint("c").unwrap().destination_arc()
    }

    fn report(engine: &Engine, outcome: RequestOutcome) {
        engine.pick_endpoint("c").unwrap().report(outcome);
    }

    fn window_total(d: &Destination) -> u64 {
        d.with_outcome_window(|w| w.counts().total)
    }

    /// An engine on the system clock, made inside the test's runtime (whose time is paused), so
    /// that its timer task runs.
    fn timed_engine(limit: &str) -> Engine {
        Engine::builder().build_with(config(limit)).unwrap()
    }

    /// Lets the timer task fire what is due.
    async fn settle() {
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    }

    /// The first success is judged (Unknown becomes Healthy) and grants the ones after it,
    /// which are counted without the lock and show in the window once anyone reads it.
    #[tokio::test(start_paused = true)]
    async fn a_healthy_destination_counts_its_successes_without_the_lock() {
        let engine = timed_engine("0.3");
        let d = destination(&engine);
        assert!(!d.credit().is_granted(), "nothing before the first verdict");
        report(&engine, RequestOutcome::Success);
        assert!(d.credit().is_granted());
        for _ in 0..99 {
            report(&engine, RequestOutcome::Success);
        }
        // 99 taken without the lock: the window shows them once drained.
        assert_eq!(window_total(&d), 100);
        assert_eq!(d.credit().drain(), 0, "reading the window drained them");
    }

    /// A timer ends the grant a step before the open bucket closes: what it took joins the
    /// window, the next success takes the lock, closes the bucket and is granted anew.
    #[tokio::test(start_paused = true)]
    async fn a_timer_ends_the_grant_before_the_open_bucket_closes() {
        let engine = timed_engine("0.3");
        let d = destination(&engine);
        report(&engine, RequestOutcome::Success);
        report(&engine, RequestOutcome::Success);
        assert!(d.credit().is_granted(), "granted within the first second");
        // The first outcome opened a bucket closing at 1 s; its grant ends at 990 ms.
        assert_eq!(engine.next_timer_due(), Some(Duration::from_millis(990)));
        tokio::time::sleep(Duration::from_millis(989)).await;
        settle().await;
        assert!(d.credit().is_granted());
        tokio::time::sleep(Duration::from_millis(1)).await;
        settle().await;
        assert!(!d.credit().is_granted(), "ended at 990 ms");
        assert_eq!(d.credit().drain(), 0, "what it took joined the window");
        assert_eq!(window_total(&d), 2);
        // Judged under the lock, in the open bucket; no grant for its last 10 ms (the grid's
        // step before 1 s is 990 ms, already past).
        report(&engine, RequestOutcome::Success);
        assert!(!d.credit().is_granted());
        tokio::time::sleep(Duration::from_millis(10)).await;
        report(&engine, RequestOutcome::Success);
        assert!(d.credit().is_granted(), "granted again for the new bucket");
        assert_eq!(d.with_outcome_window(|w| w.closed_buckets()), 1);
        assert_eq!(window_total(&d), 4);
        assert_eq!(engine.next_timer_due(), Some(Duration::from_millis(1_990)));
    }

    /// Grants need a task that fires the engine's timers on time: none outside a tokio
    /// runtime, none with a custom clock (its timers fire when the user says), none once the
    /// runtime that ran the task is gone. Every outcome is then judged under the lock.
    #[test]
    fn grants_only_while_a_task_fires_the_timers() {
        // Ten successes: whether the last ones were granted, and the window's total.
        let ten_successes = |engine: &Engine| {
            let d = destination(engine);
            for _ in 0..10 {
                report(engine, RequestOutcome::Success);
            }
            (d.credit().is_granted(), window_total(&d))
        };
        let outside = Engine::builder().build_with(config("0.3")).unwrap();
        assert_eq!(ten_successes(&outside), (false, 10));
        let clock = Arc::new(ManualClock::new());
        assert_eq!(ten_successes(&engine(&clock, "0.3")), (false, 10));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let inside = {
            let _inside = runtime.enter();
            Engine::builder().build_with(config("0.3")).unwrap()
        };
        assert_eq!(ten_successes(&inside), (true, 10));
        drop(runtime);
        assert_eq!(ten_successes(&inside), (false, 20));
    }

    /// A change of health, of settings or of membership withdraws the grant.
    #[tokio::test(start_paused = true)]
    async fn changes_withdraw_the_grant() {
        let engine = timed_engine("0.3");
        let d = destination(&engine);
        for _ in 0..20 {
            report(&engine, RequestOutcome::Success);
        }
        assert!(d.credit().is_granted());
        // Other settings: granted again only after a verdict under them.
        engine.apply_config(config("0.5")).unwrap();
        assert!(!d.credit().is_granted());
        report(&engine, RequestOutcome::Success);
        assert!(d.credit().is_granted());
        // Failures until Unhealthy: nothing is granted while it is.
        while d.health().passive == crate::HealthState::Healthy {
            report(&engine, RequestOutcome::TransportFailure);
        }
        assert!(!d.credit().is_granted());
        // 20 of 40 failed; the next success rates 20/41 < 0.5: Healthy again, and granted.
        report(&engine, RequestOutcome::Success);
        assert_eq!(d.health().passive, crate::HealthState::Healthy);
        assert!(d.credit().is_granted());
        // Leaving the cluster withdraws it too.
        let engine = timed_engine("0.3");
        let d = destination(&engine);
        report(&engine, RequestOutcome::Success);
        assert!(d.credit().is_granted());
        engine
            .apply_config(Config::new().cluster(ClusterConfig::new("c")))
            .unwrap();
        assert!(d.is_removed());
        assert!(!d.credit().is_granted());
    }

    fn passive_cluster(available: &str) -> Config {
        Config::new().cluster(
            ClusterConfig::new("c")
                .passive(PassiveHealthCheckConfig::enabled())
                .available_destinations_policy(available)
                .destination(DestinationConfig::new("a", "http://127.0.0.1:1/"))
                .destination(DestinationConfig::new("b", "http://127.0.0.1:2/")),
        )
    }

    fn snapshot(engine: &Engine) -> Arc<ClusterSnapshot> {
        Guard::into_inner(engine.core.snapshot("c").unwrap())
    }

    fn report_to(engine: &Engine, id: &str, outcome: RequestOutcome) {
        let d = snapshot(engine)
            .members
            .iter()
            .find(|d| d.id() == id)
            .unwrap()
            .clone();
        crate::engine::fast_path::PickHandle::of(d).report(outcome);
    }

    /// Under the built-in policies a destination's first verdict (Unknown to Healthy) changes
    /// nothing the snapshot holds: it is applied in place and announced, and the snapshot stays
    /// the same object. An ejection still rebuilds it.
    #[test]
    fn a_first_healthy_verdict_keeps_the_snapshot() {
        let engine = Engine::builder()
            .clock(Arc::new(ManualClock::new()))
            .build();
        engine
            .apply_config(passive_cluster("HealthyOrPanic"))
            .unwrap();
        let mut events = engine.subscribe();
        let before = snapshot(&engine);
        report_to(&engine, "a", RequestOutcome::Success);
        report_to(&engine, "b", RequestOutcome::Success);
        let after = snapshot(&engine);
        assert!(Arc::ptr_eq(&before, &after), "no rebuild");
        assert!(after
            .members
            .iter()
            .all(|d| d.health().passive == HealthState::Healthy));
        let changes = std::iter::from_fn(|| events.try_recv().ok())
            .filter(|e| matches!(e.kind, HealthEventKind::HealthChanged { .. }))
            .count();
        assert_eq!(changes, 2, "each change is announced");
        // Ejected: rebuilt without it.
        while snapshot(&engine).available.len() == 2 {
            report_to(&engine, "a", RequestOutcome::TransportFailure);
        }
        let ejected = snapshot(&engine);
        assert!(!Arc::ptr_eq(&after, &ejected));
        assert_eq!(ejected.best.len(), 1);
        assert_eq!(ejected.best.destination(0).id(), "b");
    }

    /// Admits only destinations judged Healthy: it tells passive Unknown from Healthy.
    struct JudgedOnly;
    impl AvailableDestinationsPolicy for JudgedOnly {
        fn available(
            &self,
            _: &AvailablePolicyContext<'_>,
            all: &[Arc<Destination>],
        ) -> Availability {
            Availability {
                destinations: all
                    .iter()
                    .filter(|d| d.health().passive == HealthState::Healthy)
                    .cloned()
                    .collect(),
                panic: false,
            }
        }
    }

    /// A custom available-destinations policy may tell Unknown from Healthy: every passive change
    /// rebuilds the snapshot for it.
    #[test]
    fn a_custom_available_policy_sees_every_first_verdict() {
        let engine = Engine::builder()
            .clock(Arc::new(ManualClock::new()))
            .available_destinations_policy("JudgedOnly", JudgedOnly)
            .build();
        engine.apply_config(passive_cluster("JudgedOnly")).unwrap();
        assert!(snapshot(&engine).available.is_empty());
        report_to(&engine, "b", RequestOutcome::Success);
        let ids: Vec<_> = snapshot(&engine)
            .available
            .iter()
            .map(|d| d.id().to_string())
            .collect();
        assert_eq!(ids, ["b"]);
        report_to(&engine, "a", RequestOutcome::Success);
        assert_eq!(snapshot(&engine).available.len(), 2);
    }
}

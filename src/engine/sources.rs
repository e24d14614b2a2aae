//! A registered discovery source's life in its cluster: registration, answers
//! judged by the update guard, failures that keep the last good set and mark the source stale,
//! held changes released by confirmation, by probes that agree, or by force, and retirement.
//! Everything happens under the cluster's book lock, like every other change of the cluster.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::guard::{judge, Held, Verdict};
use super::hub::Hub;
use super::runtime::{ClusterBook, ClusterRuntime};
use super::source_state::SourceState;
use super::timers::{Due, Timer, TimerTarget};
use crate::cluster::snapshot::ClusterSnapshot;
use crate::config::discovery::GuardMode;
use crate::destination::endpoint::Endpoint;
use crate::error::DestinationsError;
use crate::events::{HealthEvent, HealthEventKind, Release};
use crate::health::state::HealthState;
use crate::ids::fold_case;

impl ClusterRuntime {
    /// Registers (or re-registers, keeping its destinations) a discovery source.
    pub(crate) fn register_source(
        &self,
        hub: &Hub,
        source: &str,
        state: SourceState,
        now: Duration,
    ) {
        let mut book = self.book.lock();
        if book.retired {
            return; // the cluster just left
        }
        let position = book.source_position(source);
        let source_name = book.sources[position].source.clone();
        match &mut book.sources[position].state {
            Some(existing) => {
                existing.kind = state.kind;
                existing.target = state.target;
                existing.first_answer_within = state.first_answer_within;
                let guard_changed = existing.guard != state.guard;
                existing.guard = state.guard;
                // A held change applies when the new guard says (what the status shows): the
                // timer set under the old delay would fire too late, or find nothing due.
                if let Some(held) = existing.held.as_ref().filter(|_| guard_changed) {
                    if existing.guard.mode == GuardMode::AfterConfirmation {
                        let target: Weak<dyn TimerTarget> = self.me.clone();
                        hub.timers.schedule(Timer::new(
                            held.since + existing.guard.confirm_after,
                            target,
                            Due::HeldChange(source_name),
                        ));
                    }
                }
            }
            slot @ None => *slot = Some(state),
        }
        self.republish(hub, &mut book, now);
    }

    /// Takes a source out: its destinations leave the cluster, its status goes.
    pub(crate) fn retire_source(&self, hub: &Hub, source: &str, now: Duration) {
        let mut book = self.book.lock();
        let Some(position) = book.sources.iter().position(|s| &*s.source == source) else {
            return;
        };
        let gone = book.sources.remove(position);
        self.republish(hub, &mut book, now);
        for d in gone.members {
            d.mark_removed();
        }
    }

    /// A source's answer: its full set, or `None` ("does not exist"). The update guard decides
    /// whether it applies now. A stale source is well again.
    pub(crate) fn source_answer(
        &self,
        hub: &Hub,
        source: &str,
        endpoints: Option<Vec<Endpoint>>,
        now: Duration,
    ) -> Result<(), DestinationsError> {
        self.answer(hub, source, endpoints, true, now)
    }

    /// [`source_answer`](Self::source_answer) of a full set from a source that stays stale (see
    /// `Publisher::publish_keeping_stale`).
    #[cfg_attr(not(any(feature = "etcd", feature = "kubernetes")), allow(dead_code))]
    pub(crate) fn source_answer_keeping_stale(
        &self,
        hub: &Hub,
        source: &str,
        endpoints: Vec<Endpoint>,
        now: Duration,
    ) -> Result<(), DestinationsError> {
        self.answer(hub, source, Some(endpoints), false, now)
    }

    /// A source's answer; `settles`: whether a stale source is well again.
    fn answer(
        &self,
        hub: &Hub,
        source: &str,
        endpoints: Option<Vec<Endpoint>>,
        settles: bool,
        now: Duration,
    ) -> Result<(), DestinationsError> {
        let mut book = self.book.lock();
        let position = self.registered(&book, source)?;
        let cluster = self.cell.load().settings.id.clone();
        let current: HashSet<Arc<str>> = book.sources[position]
            .members
            .iter()
            .map(|d| d.info().key.clone())
            .collect();
        let Some(state) = book.sources[position].state.as_mut() else {
            return Err(unknown_source(&cluster, source));
        };
        let first = !state.answered;
        state.answered = true;
        state.last_success = Some(now);
        let recovered = settles && state.stale_since.take().is_some();
        let verdict = judge(&state.guard, &current, endpoints.as_deref());
        let source_name: Arc<str> = book.sources[position].source.clone();
        if recovered {
            tracing::info!(target: "healthpick", %cluster, source = %source_name, "discovery source answers again");
            hub.emit(event(
                &cluster,
                now,
                HealthEventKind::SourceRecovered {
                    source: source_name.clone(),
                },
            ));
        }
        let Some(state) = book.sources[position].state.as_mut() else {
            return Err(unknown_source(&cluster, source));
        };
        match verdict {
            Verdict::Apply => {
                let superseded = state.held.take().is_some();
                state.generation += 1;
                if superseded {
                    hub.emit(event(
                        &cluster,
                        now,
                        HealthEventKind::ChangeReleased {
                            source: source_name.clone(),
                            how: Release::Superseded,
                        },
                    ));
                }
                self.apply_set(
                    hub,
                    &mut book,
                    None,
                    source,
                    endpoints.unwrap_or_default(),
                    now,
                );
            }
            Verdict::Hold {
                reason,
                removes,
                of,
            } => {
                let confirm_after = state.guard.confirm_after;
                let mode = state.guard.mode;
                match &mut state.held {
                    Some(held) if held.same_as(endpoints.as_deref()) => {
                        // Seen again: what applies once confirmed is what the source says now
                        // (weights, metadata, health may have changed), held since it was first
                        // seen; applied once it has stood for the confirmation delay.
                        held.endpoints = endpoints;
                        if mode == GuardMode::AfterConfirmation && now >= held.since + confirm_after
                        {
                            self.release(hub, &mut book, position, Release::Confirmed, now);
                            answered(&book, position);
                            return Ok(());
                        }
                    }
                    _ => {
                        state.held = Some(Held {
                            endpoints,
                            reason,
                            removes,
                            of,
                            since: now,
                        });
                        tracing::warn!(target: "healthpick", %cluster, source = %source_name, removes, of, "{reason}: the change is held and the last applied destinations stay in force");
                        hub.emit(event(
                            &cluster,
                            now,
                            HealthEventKind::ChangeHeld {
                                source: source_name.clone(),
                                reason,
                                removes,
                                of,
                            },
                        ));
                        if mode == GuardMode::AfterConfirmation {
                            let target: Weak<dyn TimerTarget> = self.me.clone();
                            hub.timers.schedule(Timer::new(
                                now + confirm_after,
                                target,
                                Due::HeldChange(source_name),
                            ));
                        }
                    }
                }
                if first {
                    self.republish(hub, &mut book, now);
                }
                self.release_if_probes_agree(hub, &mut book, now);
            }
        }
        answered(&book, position);
        Ok(())
    }

    /// A source failed: its last good set stays, and it is stale until it answers again.
    pub(crate) fn source_failed(
        &self,
        hub: &Hub,
        source: &str,
        error: String,
        now: Duration,
    ) -> Result<(), DestinationsError> {
        let mut book = self.book.lock();
        let position = self.registered(&book, source)?;
        let cluster = self.cell.load().settings.id.clone();
        let source_name = book.sources[position].source.clone();
        let Some(state) = book.sources[position].state.as_mut() else {
            return Err(unknown_source(&cluster, source));
        };
        state.last_error = Some((now, error.clone()));
        if state.stale_since.is_none() {
            state.stale_since = Some(now);
            tracing::warn!(target: "healthpick", %cluster, source = %source_name, "discovery source failed, its last answer stays in force: {error}");
            hub.emit(event(
                &cluster,
                now,
                HealthEventKind::SourceStale {
                    source: source_name,
                    error,
                },
            ));
        }
        Ok(())
    }

    /// Applies the change `source` holds, if any; returns whether there was one.
    pub(crate) fn force_held(
        &self,
        hub: &Hub,
        source: &str,
        now: Duration,
    ) -> Result<bool, DestinationsError> {
        let mut book = self.book.lock();
        let position = self.registered(&book, source)?;
        let held = book.sources[position]
            .state
            .as_ref()
            .is_some_and(|s| s.held.is_some());
        if held {
            self.release(hub, &mut book, position, Release::Forced, now);
        }
        Ok(held)
    }

    /// The confirmation delay of `source`'s held change ran out: applied, unless that change
    /// is gone or was replaced by a newer one since (which has its own timer).
    pub(crate) fn confirm_held(&self, source: &str, due: Duration) {
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        let mut book = self.book.lock();
        let Ok(position) = self.registered(&book, source) else {
            return;
        };
        let stands = book.sources[position].state.as_ref().is_some_and(|s| {
            s.guard.mode == GuardMode::AfterConfirmation
                && s.held
                    .as_ref()
                    .is_some_and(|h| h.since + s.guard.confirm_after <= due)
        });
        if stands {
            self.release(&hub, &mut book, position, Release::Confirmed, due);
        }
    }

    /// Applies every held change whose removed destinations all failed their probes: active
    /// checks agree with the source.
    pub(crate) fn release_if_probes_agree(&self, hub: &Hub, book: &mut ClusterBook, now: Duration) {
        if self.cell.load().settings.probing.is_none() {
            return;
        }
        let agreeing: Vec<usize> = book
            .sources
            .iter()
            .enumerate()
            .filter_map(|(position, s)| {
                let held = s.state.as_ref()?.held.as_ref()?;
                let kept: HashSet<String> = held
                    .endpoints
                    .iter()
                    .flatten()
                    .map(|e| fold_case(&e.key))
                    .collect();
                let mut removed = s
                    .members
                    .iter()
                    .filter(|d| !kept.contains(&*d.info().key))
                    .peekable();
                let any = removed.peek().is_some();
                let all_down = removed.all(|d| d.health().active == HealthState::Unhealthy);
                (any && all_down).then_some(position)
            })
            .collect();
        for position in agreeing {
            self.release(hub, book, position, Release::ProbesAgree, now);
        }
    }

    /// Applies the change held at `position` and says how it was released.
    fn release(
        &self,
        hub: &Hub,
        book: &mut ClusterBook,
        position: usize,
        how: Release,
        now: Duration,
    ) {
        let source = book.sources[position].source.clone();
        let Some(state) = book.sources[position].state.as_mut() else {
            return;
        };
        let Some(held) = state.held.take() else {
            return;
        };
        state.generation += 1;
        let cluster = self.cell.load().settings.id.clone();
        tracing::info!(target: "healthpick", %cluster, %source, "held discovery change applied: {how}");
        hub.emit(event(
            &cluster,
            now,
            HealthEventKind::ChangeReleased {
                source: source.clone(),
                how,
            },
        ));
        self.apply_set(
            hub,
            book,
            None,
            &source,
            held.endpoints.unwrap_or_default(),
            now,
        );
    }

    /// Publishes the current members again (what the cluster waits for changed).
    fn republish(&self, hub: &Hub, book: &mut ClusterBook, now: Duration) {
        let settings = self.cell.load().settings.clone();
        let warm_up = book.warm_up(&settings);
        let snapshot = ClusterSnapshot::build(
            settings,
            book.members(),
            self.counter.clone(),
            warm_up,
            Some(&self.cell.load()),
            now,
        );
        self.publish(Some(hub), book, snapshot, now);
    }

    /// The position of a registered source in the book.
    fn registered(&self, book: &ClusterBook, source: &str) -> Result<usize, DestinationsError> {
        book.sources
            .iter()
            .position(|s| &*s.source == source && s.state.is_some())
            .ok_or_else(|| unknown_source(&self.cell.load().settings.id, source))
    }
}

fn unknown_source(cluster: &str, source: &str) -> DestinationsError {
    DestinationsError::UnknownSource {
        cluster: cluster.to_string(),
        source: source.to_string(),
    }
}

fn event(cluster: &Arc<str>, at: Duration, kind: HealthEventKind) -> HealthEvent {
    HealthEvent {
        at,
        cluster: cluster.clone(),
        kind,
    }
}

/// Tells `Engine::ready` that source `position` answered — once what it answered is in the
/// snapshot, so a waiter that wakes sees it.
fn answered(book: &ClusterBook, position: usize) {
    if let Some(state) = book.sources[position].state.as_ref() {
        state.first_answer.send_replace(true);
    }
}

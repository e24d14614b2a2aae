//! One cluster inside the engine: the cell its snapshot is published in, the book of what its
//! sources published, and the first-round latch picks and `ready()` wait on.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::hub::Hub;
use super::source_state::SourceState;
use super::timers::{Due, TimerTarget};
use crate::clock::Clock;
use crate::cluster::settings::ClusterSettings;
use crate::cluster::snapshot::{ClusterSnapshot, WarmUp};
use crate::config::discovery::RESERVED_SOURCE;
use crate::destination::signals::SignalPool;
use crate::destination::state::StateSlots;
use crate::destination::{Destination, Latency, OutcomeSink};
use crate::health::outcome::RequestOutcome;
use crate::observer::Observer;
use crate::selection::balancing::ClusterCounter;

#[cfg(feature = "metrics")]
use super::metrics::ClusterMetrics;

/// The source of the destinations a configuration lists.
pub const CONFIG_SOURCE: &str = RESERVED_SOURCE;

/// Where a cluster's snapshot is published: shared with each thread's pick cache.
pub(crate) type SnapshotCell = Arc<ArcSwap<ClusterSnapshot>>;

/// A cluster's runtime state; it survives configuration reloads that keep the cluster id.
pub(crate) struct ClusterRuntime {
    /// The one publication of the cluster's state (shared with the threads' pick caches).
    pub cell: SnapshotCell,
    /// Serialises every change of this cluster (health, members, settings).
    pub book: Mutex<ClusterBook>,
    /// True once every destination of this cluster had its first probe result, or a whole
    /// probe round was reported (`Engine::ready`).
    pub first_round: watch::Sender<bool>,
    /// True once the first-pick warm-up is over: first picks wait for it.
    pub warmed: watch::Sender<bool>,
    /// Bumped whenever the cluster's members or settings were published anew (a source
    /// published, a reload, the cluster left): the active monitor re-reads its targets.
    pub members_changed: watch::Sender<u64>,
    /// The passive policies' per-cluster data (`PassivePolicyContext::with_cluster_state`).
    pub policy_state: StateSlots,
    /// The counter for picks off the pick path, carried into every snapshot.
    pub counter: Arc<ClusterCounter>,
    /// Its destinations' load signals, side by side (`destination/signals.rs`).
    pub signals: SignalPool,
    /// Read on every request outcome, so held here rather than behind the engine.
    pub clock: Arc<dyn Clock>,
    pub observer: Option<Arc<dyn Observer>>,
    /// For what only health changes need: events, timers.
    pub hub: Weak<Hub>,
    /// This runtime, for the reactivation timers it schedules.
    pub me: Weak<ClusterRuntime>,
    /// Its outcome counters and available gauge, registered when the cluster was created.
    #[cfg(feature = "metrics")]
    pub metrics: ClusterMetrics,
}

/// What the cluster's sources published and what its last snapshot said.
#[derive(Default)]
pub(crate) struct ClusterBook {
    /// Each source's destinations, `config` first, then in the order sources first published.
    pub sources: Vec<SourceMembers>,
    /// Available ids and panic flag of the last published snapshot, to emit changes only.
    pub available_ids: Vec<Arc<str>>,
    pub panic: bool,
    pub published: bool,
    pub first_round_done: bool,
    /// The first-pick warm-up is over (implied by `first_round_done`).
    pub warmed: bool,
    /// Who has had a probe result, while the first probes run.
    pub first_probes: FirstProbes,
    /// The cluster left the engine: nothing is published or added any more.
    pub retired: bool,
    /// The due time of the pending slow-start step, if one is scheduled.
    pub ramp_due: Option<Duration>,
    /// The due time of the spill controller's next look, while the cluster may spill.
    pub spill_due: Option<Duration>,
}

/// How far a cluster's first probes are, kept up to date result by result so that neither the
/// end of the first round nor the end of the warm-up costs a pass over the members per result.
#[derive(Debug, Default)]
pub(crate) struct FirstProbes {
    /// Members without a probe result.
    pub awaiting: usize,
    /// Per tier: (members, members with a result, members whose latest probe succeeded).
    pub tiers: BTreeMap<u32, (usize, usize, usize)>,
}

impl FirstProbes {
    /// Counts `members` as they are now.
    pub fn of(members: &[Arc<Destination>]) -> Self {
        let mut progress = FirstProbes::default();
        for d in members {
            let tier = progress.tiers.entry(d.tier()).or_default();
            tier.0 += 1;
            match d.last_probe_succeeded() {
                None => progress.awaiting += 1,
                Some(succeeded) => {
                    tier.1 += 1;
                    tier.2 += usize::from(succeeded);
                }
            }
        }
        progress
    }

    /// A member of `tier` had a probe result: `succeeded` now, `before` the one before it.
    pub fn record(&mut self, tier: u32, before: Option<bool>, succeeded: bool) {
        let Some(counts) = self.tiers.get_mut(&tier) else {
            return;
        };
        match before {
            None => {
                self.awaiting = self.awaiting.saturating_sub(1);
                counts.1 += 1;
            }
            Some(true) => counts.2 = counts.2.saturating_sub(1),
            Some(false) => {}
        }
        counts.2 += usize::from(succeeded);
    }

    /// Whether the first picks need not wait any longer: going from the best tier
    /// down, the first tier whose destinations have not all failed their probes has one whose
    /// latest probe succeeded. A tier whose probes are still running holds the wait; a tier
    /// whose every probe failed is skipped; once every probe finished, nothing holds it.
    pub fn best_tier_answered(&self) -> bool {
        for &(members, finished, succeeded) in self.tiers.values() {
            if succeeded > 0 {
                return true;
            }
            if finished < members {
                return false;
            }
        }
        !self.tiers.is_empty()
    }
}

impl ClusterBook {
    /// The position of `source`'s entry, added (empty) if it has none: the configuration's
    /// destinations come first, then sources in arrival order.
    pub fn source_position(&mut self, source: &str) -> usize {
        if let Some(position) = self.sources.iter().position(|s| &*s.source == source) {
            return position;
        }
        let at = if source == CONFIG_SOURCE {
            0
        } else {
            self.sources.len()
        };
        self.sources.insert(
            at,
            SourceMembers {
                source: Arc::from(source),
                members: Vec::new(),
                state: None,
            },
        );
        at
    }
}

/// One source's current destinations in a cluster.
pub(crate) struct SourceMembers {
    pub source: Arc<str>,
    pub members: Vec<Arc<Destination>>,
    /// A registered discovery source's status and update guard (`None`: the configuration, or
    /// a set published with `Engine::set_destinations`).
    pub state: Option<SourceState>,
}

impl ClusterBook {
    /// Where the cluster stands in its first probes and its sources' first answers, for its
    /// next snapshot. A source the configuration names counts as not answered until it is
    /// registered and answers, so a cluster fed by discovery alone says so from the
    /// publication that brings it in.
    pub fn warm_up(&self, settings: &ClusterSettings) -> WarmUp {
        let active = settings.probing.is_some();
        let registered = |name: &str| {
            self.sources
                .iter()
                .any(|s| s.state.is_some() && &*s.source == name)
        };
        WarmUp {
            warming: active && !self.warmed && !self.first_round_done,
            first_probes_pending: active && !self.first_round_done,
            discovery_pending: self
                .sources
                .iter()
                .any(|s| s.state.as_ref().is_some_and(|state| !state.answered))
                || settings
                    .config
                    .discovery_sources()
                    .iter()
                    .any(|d| !registered(&d.source_name())),
        }
    }

    /// Every member, source after source.
    pub fn members(&self) -> Vec<Arc<Destination>> {
        self.sources
            .iter()
            .flat_map(|s| s.members.iter().cloned())
            .collect()
    }
}

impl ClusterRuntime {
    pub fn new(
        settings: Arc<ClusterSettings>,
        clock: Arc<dyn Clock>,
        observer: Option<Arc<dyn Observer>>,
        hub: Weak<Hub>,
    ) -> Arc<Self> {
        let counter = Arc::new(ClusterCounter::default());
        #[cfg(feature = "metrics")]
        let metrics = ClusterMetrics::register(&settings.id);
        Arc::new_cyclic(|me| ClusterRuntime {
            cell: Arc::new(ArcSwap::from_pointee(ClusterSnapshot::empty(
                settings,
                counter.clone(),
            ))),
            book: Mutex::new(ClusterBook::default()),
            first_round: watch::Sender::new(false),
            warmed: watch::Sender::new(false),
            members_changed: watch::Sender::new(0),
            policy_state: StateSlots::default(),
            signals: SignalPool::default(),
            counter,
            clock,
            observer,
            hub,
            me: me.clone(),
            #[cfg(feature = "metrics")]
            metrics,
        })
    }

    /// Takes the cluster out of service: every member is removed and the snapshot replaced by
    /// a retired one (which also lets go of the members, whose outcome sink is this runtime).
    /// A pick that read the cluster table before the reload finds no cluster there, as a pick
    /// after it does.
    pub fn retire(&self) {
        let mut book = self.book.lock();
        book.retired = true;
        for source in book.sources.drain(..) {
            for d in source.members {
                d.mark_removed();
            }
        }
        let settings = self.cell.load().settings.clone();
        self.cell.store(Arc::new(ClusterSnapshot::retired(
            settings,
            self.counter.clone(),
        )));
        #[cfg(feature = "metrics")]
        self.metrics.available(0);
        drop(book);
        self.members_changed.send_modify(|g| *g += 1);
    }
}

impl TimerTarget for ClusterRuntime {
    fn fire(&self, due: Duration, what: &Due) {
        match what {
            Due::Reactivation(destination) => {
                if let Some(destination) = destination.upgrade() {
                    self.reactivate_at(&destination, due);
                }
            }
            Due::GrantEnds(destination) => {
                if let Some(destination) = destination.upgrade() {
                    self.end_grant(&destination, due);
                }
            }
            Due::HeldChange(source) => self.confirm_held(source, due),
            Due::SlowStart => self.slow_start_step(due),
            Due::SpillTick => self.spill_tick(due),
        }
    }
}

impl OutcomeSink for ClusterRuntime {
    fn request_completed(
        &self,
        destination: &Arc<Destination>,
        outcome: RequestOutcome,
        latency: Latency,
    ) {
        self.outcome(destination, outcome, latency);
    }

    fn load_reported(&self, destination: &Arc<Destination>, utilization: f64) {
        self.record_load(destination, utilization);
    }
}

//! One cluster inside the engine: the cell its snapshot is published in, the book of what its
//! sources published, and the first-round latch picks and `ready()` wait on.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Weak};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::hub::Hub;
use super::source_state::SourceState;
use super::timers::{Due, TimerTarget};
use crate::clock::Clock;
use crate::cluster::settings::ClusterSettings;
use crate::cluster::snapshot::{ClusterSnapshot, Waiting};
use crate::config::discovery::RESERVED_SOURCE;
use crate::destination::{Destination, OutcomeSink};
use crate::health::outcome::RequestOutcome;
use crate::observer::Observer;

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
    /// True once a probe round of this cluster finished (first-pick warm-up, SPEC §6).
    pub first_round: watch::Sender<bool>,
    /// The round-robin counter, carried into every snapshot.
    pub counter: Arc<AtomicUsize>,
    /// Read on every request outcome, so held here rather than behind the engine.
    pub clock: Arc<dyn Clock>,
    pub observer: Option<Arc<dyn Observer>>,
    /// For what only health changes need: events, timers.
    pub hub: Weak<Hub>,
    /// This runtime, for the reactivation timers it schedules.
    pub me: Weak<ClusterRuntime>,
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

    /// What the cluster waits for, under `settings`.
    pub fn waiting(&self, settings: &ClusterSettings) -> Waiting {
        Waiting {
            first_round: settings.probing.is_some() && !self.first_round_done,
            discovery: self
                .sources
                .iter()
                .any(|s| s.state.as_ref().is_some_and(|state| !state.answered)),
        }
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
        let counter = Arc::new(AtomicUsize::new(0));
        Arc::new_cyclic(|me| ClusterRuntime {
            cell: Arc::new(ArcSwap::from_pointee(ClusterSnapshot::empty(
                settings,
                counter.clone(),
            ))),
            book: Mutex::new(ClusterBook::default()),
            first_round: watch::Sender::new(false),
            counter,
            clock,
            observer,
            hub,
            me: me.clone(),
        })
    }

    /// Takes the cluster out of service: every member is removed and the snapshot emptied (which
    /// also lets go of the members, whose outcome sink is this runtime).
    pub fn retire(&self) {
        let mut book = self.book.lock();
        for source in book.sources.drain(..) {
            for d in source.members {
                d.state().mark_removed();
            }
        }
        let settings = self.cell.load().settings.clone();
        self.cell.store(Arc::new(ClusterSnapshot::empty(
            settings,
            self.counter.clone(),
        )));
    }
}

impl TimerTarget for ClusterRuntime {
    fn fire(&self, due: std::time::Duration, what: &Due) {
        match what {
            Due::Reactivation(destination) => {
                if let Some(destination) = destination.upgrade() {
                    self.reactivate_at(&destination, due);
                }
            }
            Due::HeldChange(source) => self.confirm_held(source, due),
        }
    }
}

impl OutcomeSink for ClusterRuntime {
    fn request_completed(&self, destination: &Arc<Destination>, outcome: RequestOutcome) {
        self.outcome(destination, outcome);
    }
}

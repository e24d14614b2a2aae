//! The one publication of a cluster's state (SPEC §5, §6, §15): settings, members, the available
//! set, the best group and what the load balancer prepared for it, in one immutable value. The
//! engine's health updater builds a new one on every change and swaps it in; picks, status, the
//! prober and the client load it, so no reader sees settings and health from different moments.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use super::settings::ClusterSettings;
use crate::destination::Destination;
use crate::health::state::HealthClass;
use crate::selection::balancing::Prepared;
use crate::selection::group::best_group;

/// Everything a pick, the status view and the prober read about one cluster.
pub(crate) struct ClusterSnapshot {
    pub settings: Arc<ClusterSettings>,
    /// Every destination, static ones in config order, then each source's in the order it
    /// published them.
    pub members: Vec<Arc<Destination>>,
    /// Available destinations (SPEC §5), in member order.
    pub available: Vec<Arc<Destination>>,
    /// The best group (SPEC §6).
    pub best: Box<[Arc<Destination>]>,
    /// The best group's health class; `None` when nothing is available.
    pub best_class: Option<HealthClass>,
    pub panic: bool,
    /// What the load-balancing policy prepared for `best`.
    pub prepared: Prepared,
    /// The cluster's round-robin counter, shared by all its snapshots (SPEC §6).
    pub counter: Arc<AtomicUsize>,
    /// What the cluster still waits for before its first picks.
    pub waiting: Waiting,
}

/// What a cluster waits for before its first picks (SPEC §6, §13).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Waiting {
    /// Active checks are on and no probe round has finished yet: the first picks wait for one.
    pub first_round: bool,
    /// A discovery source has not answered yet: a pick that finds nothing says so.
    pub discovery: bool,
}

impl ClusterSnapshot {
    /// Runs the cluster's available-destinations policy over `members`, finds the best group and
    /// lets the load balancer prepare for it.
    pub fn build(
        settings: Arc<ClusterSettings>,
        members: Vec<Arc<Destination>>,
        counter: Arc<AtomicUsize>,
        waiting: Waiting,
    ) -> Self {
        let ctx = settings.available_context();
        let availability = settings.policies.available.policy.available(&ctx, &members);
        let (best, best_class) = best_group(&ctx, &availability.destinations);
        let prepared = settings.policies.load_balancing.policy.prepare(&best);
        ClusterSnapshot {
            members,
            available: availability.destinations,
            best: best.into_boxed_slice(),
            best_class,
            panic: availability.panic,
            prepared,
            counter,
            waiting,
            settings,
        }
    }

    /// The same members under the same settings, judged again (after a health change), now
    /// waiting for `waiting`.
    pub fn rebuilt(&self, waiting: Waiting) -> Self {
        Self::build(
            self.settings.clone(),
            self.members.clone(),
            self.counter.clone(),
            waiting,
        )
    }

    /// No members at all: what a cluster holds before its first publication and after it left
    /// the engine.
    pub fn empty(settings: Arc<ClusterSettings>, counter: Arc<AtomicUsize>) -> Self {
        ClusterSnapshot {
            settings,
            members: Vec::new(),
            available: Vec::new(),
            best: Box::new([]),
            best_class: None,
            panic: false,
            prepared: Prepared::none(),
            counter,
            waiting: Waiting::default(),
        }
    }
}

//! The one publication of a cluster's state: settings, members, the available
//! set, the best group and what the load balancer prepared for it, in one immutable value. The
//! engine's health updater builds a new one on every change and swaps it in; picks, status, the
//! prober and the client load it, so no reader sees settings and health from different moments.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use super::settings::ClusterSettings;
use crate::config::traffic::{SlowStartConfig, SpillMode};
use crate::destination::Destination;
use crate::health::state::HealthClass;
use crate::policy::available::AvailablePolicyContext;
use crate::selection::affinity::Affinity;
use crate::selection::balancing::{ClusterCounter, Group, Picker, Signals};
use crate::selection::group::{best_group, next_tier_group};
use crate::selection::tier_spill::SpillState;

/// Everything a pick, the status view and the prober read about one cluster.
pub(crate) struct ClusterSnapshot {
    pub settings: Arc<ClusterSettings>,
    /// Every destination, static ones in config order, then each source's in the order it
    /// published them.
    pub members: Vec<Arc<Destination>>,
    /// Available destinations, in member order.
    pub available: Vec<Arc<Destination>>,
    /// The best group, with where its destinations' load signals are. Each thread that picks
    /// from it holds a ticket to it (see `engine/fast_path.rs`), renewed when the group changes.
    pub best: Arc<Group>,
    /// The best group's health class; `None` when nothing is available.
    pub best_class: Option<HealthClass>,
    pub panic: bool,
    /// What the load-balancing policy prepared for `best`.
    pub picker: Picker,
    /// Where keyed picks go, for a cluster with `SessionAffinity`.
    pub affinity: Option<Arc<Affinity>>,
    /// Where the best group spills under load, for a cluster with `TierSpill` `Load` whose
    /// best tier has a next tier of the same health class.
    pub spill: Option<Spill>,
    /// The load signals the policy's picks read.
    pub signals: Signals,
    /// The cluster's counter for picks off the pick path, shared by all its snapshots.
    pub counter: Arc<ClusterCounter>,
    /// Active checks are on and the first-pick warm-up is not over: the first picks wait.
    pub warming: bool,
    /// Active checks are on and some member has not had its first probe result yet: until then
    /// those rank below members already probed successfully.
    pub first_probes_pending: bool,
    /// A discovery source has not answered yet: a pick that finds nothing says so.
    pub discovery_pending: bool,
    /// The cluster left the engine: a pick that still reached this snapshot (it read the
    /// cluster table just before the reload that removed the cluster) finds no cluster, as a
    /// pick after the reload does, rather than a cluster without destinations.
    pub retired: bool,
    /// When a destination of the best group is warming up (slow start): the engine-clock time
    /// its weights are due to be recomputed.
    pub ramp_due: Option<Duration>,
}

/// The next tier's group, as the best group spills to it, and the state that decides how much.
pub(crate) struct Spill {
    pub group: Arc<Group>,
    /// What the load-balancing policy prepared for `group`.
    pub picker: Picker,
    /// The share picks read and the samples the controller judges, carried from snapshot to
    /// snapshot while the two tiers stay the same.
    pub state: Arc<SpillState>,
}

/// Where a cluster stands in its first probes and its sources' first answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct WarmUp {
    /// The first picks still wait: no destination of the best tier that can still succeed has
    /// succeeded, and not every first probe has finished.
    pub warming: bool,
    /// Not every destination has had its first probe result.
    pub first_probes_pending: bool,
    /// A discovery source of the cluster has not answered yet.
    pub discovery_pending: bool,
}

impl ClusterSnapshot {
    /// Whether its picks are shaped beyond the policy's choice in the best group: they may
    /// spill to the next tier, follow an affinity key, or read latency (and time the request).
    #[inline]
    pub fn shaped(&self) -> bool {
        self.spill.is_some() || self.affinity.is_some() || self.signals.reads_latency()
    }

    /// Runs the cluster's available-destinations policy over `members`, finds the best group and
    /// lets the load balancer prepare for it, at engine-clock time `now`. When the best group is
    /// the one `previous` picked from (same destinations, weights and policy), it is kept with
    /// its picker, and so are the threads' tickets to it.
    pub fn build(
        settings: Arc<ClusterSettings>,
        members: Vec<Arc<Destination>>,
        counter: Arc<ClusterCounter>,
        warm_up: WarmUp,
        previous: Option<&ClusterSnapshot>,
        now: Duration,
    ) -> Self {
        let ctx = settings.available_context(warm_up.first_probes_pending);
        let availability = settings.policies.available.policy.available(&ctx, &members);
        let (best, best_class) = best_group(&ctx, &availability.destinations);
        let slow_start = settings.config.slow_start_setting();
        if let (Some(_), Some(previous)) = (slow_start, previous) {
            mark_newly_available(&previous.available, &availability.destinations, now);
        }
        let ramp_of = |group: &[Arc<Destination>]| -> Vec<f64> {
            group
                .iter()
                .map(|d| slow_start.map_or(1.0, |ramp| warmth(ramp, d, now)))
                .collect()
        };
        let ramp = ramp_of(&best);
        let policy = &settings.policies.load_balancing.policy;
        let spill_to = match best.first() {
            Some(first)
                if settings.config.tier_spill_setting().mode_setting() == SpillMode::Load =>
            {
                Some(next_tier_group(&ctx, &availability.destinations, first))
                    .filter(|group| !group.is_empty())
            }
            _ => None,
        };
        // The spill controller judges the preferred tier by its latency: its picks are timed.
        let signals = match spill_to {
            Some(_) => policy.signals() | Signals::LATENCY,
            None => policy.signals(),
        };
        let affinity = settings.config.session_affinity_setting();
        // Keyed picks bound each destination's load by the cluster's mean: they read the
        // shared counts and the cluster's total.
        let shared_counts = signals.reads_in_flight() || affinity.is_some();
        let rules = settings.signals;
        let weights: Vec<f64> = best
            .iter()
            .zip(&ramp)
            .map(|(d, factor)| d.weight() * factor)
            .collect();
        // The spill group ramps its newcomers too.
        let spill_ramp = spill_to.as_deref().map(ramp_of).unwrap_or_default();
        let ramp_due = slow_start
            .filter(|_| ramp.iter().chain(&spill_ramp).any(|&f| f < 1.0))
            .map(|ramp| now + ramp_step(ramp));
        let tier = best.first().map(|d| d.tier());
        let kept = previous.filter(|p| {
            Arc::ptr_eq(&p.settings.policies.load_balancing.policy, policy)
                && p.best
                    .same_as(&best, &weights, shared_counts, &rules, affinity.is_some())
        });
        let (best, picker) = match kept {
            Some(previous) => (previous.best.clone(), previous.picker.clone()),
            None => {
                let mut group = Group::new(best, weights, shared_counts, rules).ramping(ramp);
                if affinity.is_some() {
                    group = group.counting_total(counter.clone());
                }
                let picker = policy.prepare(&group);
                (Arc::new(group), picker)
            }
        };
        let spill = spill_to.map(|group| {
            let previous = previous.and_then(|p| p.spill.as_ref());
            let (from_tier, to_tier) = (best.destination(0).tier(), group[0].tier());
            let state = match previous {
                Some(p) if (p.state.from_tier, p.state.to_tier) == (from_tier, to_tier) => {
                    p.state.clone()
                }
                _ => Arc::new(SpillState::new(from_tier, to_tier, now)),
            };
            let weights: Vec<f64> = group
                .iter()
                .zip(&spill_ramp)
                .map(|(d, factor)| d.weight() * factor)
                .collect();
            match previous.filter(|p| {
                Arc::ptr_eq(&p.state, &state)
                    && p.group
                        .same_as(&group, &weights, shared_counts, &rules, false)
            }) {
                Some(p) => Spill {
                    group: p.group.clone(),
                    picker: p.picker.clone(),
                    state,
                },
                None => {
                    let group =
                        Group::new(group, weights, shared_counts, rules).ramping(spill_ramp);
                    Spill {
                        picker: policy.prepare(&group),
                        group: Arc::new(group),
                        state,
                    }
                }
            }
        });
        let affinity = affinity.map(|config| {
            let tier: Vec<Arc<Destination>> = members
                .iter()
                .filter(|d| Some(d.tier()) == tier)
                .cloned()
                .collect();
            let previous = previous.and_then(|p| p.affinity.as_deref());
            Arc::new(Affinity::prepare(config, &tier, &best, previous))
        });
        ClusterSnapshot {
            members,
            available: availability.destinations,
            best,
            best_class,
            panic: availability.panic,
            picker,
            affinity,
            spill,
            signals,
            counter,
            warming: warm_up.warming,
            first_probes_pending: warm_up.first_probes_pending,
            discovery_pending: warm_up.discovery_pending,
            retired: false,
            ramp_due,
            settings,
        }
    }

    /// The same members under the same settings and warm-up, judged again at `now` (after a
    /// health change, or a step of slow start).
    pub fn rebuilt(&self, now: Duration) -> Self {
        self.rebuilt_with(self.warm_up(), now)
    }

    /// The same members under the same settings, judged again in `warm_up` at `now`.
    pub fn rebuilt_with(&self, warm_up: WarmUp, now: Duration) -> Self {
        Self::build(
            self.settings.clone(),
            self.members.clone(),
            self.counter.clone(),
            warm_up,
            Some(self),
            now,
        )
    }

    /// Its warm-up state.
    pub fn warm_up(&self) -> WarmUp {
        WarmUp {
            warming: self.warming,
            first_probes_pending: self.first_probes_pending,
            discovery_pending: self.discovery_pending,
        }
    }

    /// The context selection ranked this snapshot's destinations in.
    pub fn available_context(&self) -> AvailablePolicyContext<'_> {
        self.settings.available_context(self.first_probes_pending)
    }

    /// What a cluster that left the engine holds: no members, and picks that reach it find
    /// no cluster.
    pub fn retired(settings: Arc<ClusterSettings>, counter: Arc<ClusterCounter>) -> Self {
        ClusterSnapshot {
            retired: true,
            ..Self::empty(settings, counter)
        }
    }

    /// No members at all: what a cluster holds before its first publication.
    pub fn empty(settings: Arc<ClusterSettings>, counter: Arc<ClusterCounter>) -> Self {
        let group = Group::default();
        let picker = settings.policies.load_balancing.policy.prepare(&group);
        ClusterSnapshot {
            signals: settings.policies.load_balancing.policy.signals(),
            settings,
            members: Vec::new(),
            available: Vec::new(),
            best: Arc::new(group),
            best_class: None,
            panic: false,
            picker,
            affinity: None,
            spill: None,
            counter,
            warming: false,
            first_probes_pending: false,
            discovery_pending: false,
            retired: false,
            ramp_due: None,
        }
    }
}

/// Notes the time a destination became available, for slow start: those available now that
/// were not before, when the cluster had others available (a cluster's first destinations, or
/// the first after none was left, have nobody to leave traffic to and take it all at once).
fn mark_newly_available(
    before: &[Arc<Destination>],
    now_available: &[Arc<Destination>],
    now: Duration,
) {
    if before.is_empty() {
        return;
    }
    let before: HashSet<*const Destination> = before.iter().map(Arc::as_ptr).collect();
    for d in now_available {
        if !before.contains(&Arc::as_ptr(d)) {
            d.record().available_since = Some(now);
        }
    }
}

/// A destination's slow-start factor at `now`: 1 unless it became available less than the
/// window ago.
fn warmth(ramp: &SlowStartConfig, destination: &Destination, now: Duration) -> f64 {
    match destination.record().available_since {
        Some(since) => ramp.factor(now.saturating_sub(since)),
        None => 1.0,
    }
}

/// How often the weights of a warming group are recomputed: a hundredth of the window, within
/// 100 ms and 1 s, so that each step moves a share by at most about a point and a long window
/// costs one rebuild a second.
fn ramp_step(ramp: &SlowStartConfig) -> Duration {
    (ramp.window_setting() / 100).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

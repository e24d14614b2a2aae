//! Keyed picks of a cluster with `SessionAffinity`: a request's affinity key goes to the same
//! destination of the best group every time, by consistent hashing with bounded load
//! (`consistent_hash.rs` explains the algorithm and where it comes from).
//!
//! The ring is built over the members of the best group's tier, whatever their health, with
//! their configured weights: a key's order of preference then depends only on which instances
//! the tier has, so a destination that is ejected and comes back gets its keys back, and a health
//! change costs no rebuild. A keyed pick walks the key's candidates and takes the first that is
//! in the best group (available, of the best health class) and under the load bound; the key's
//! home being out of the best group is what `FailurePolicy: Return503Error` refuses.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::balancing::Group;
use super::consistent_hash::{HashRing, LoadBound};
use crate::config::affinity::{AffinityFailurePolicy, SessionAffinityConfig};
use crate::destination::Destination;

/// Candidates a keyed pick tries before it settles for the first available one, whatever its
/// load: the walk stays within what the candidates' walk keeps without allocating, and with
/// the default balance factor a key almost never needs more.
const CHOICES: usize = 8;

/// A cluster's keyed-pick ring and rules, prepared when its best tier's members change.
pub(crate) struct Affinity {
    /// Shared with the next snapshots while the tier's members stay.
    ring: Arc<HashRing>,
    /// The ring's members, in ring order.
    members: Box<[Arc<Destination>]>,
    /// For each ring member, its index in the best group of the snapshot this was prepared
    /// with, or [`NOT_IN_GROUP`].
    in_group: Box<[u32]>,
    /// The ring shares of the members in that group, added up: a member's share of the load
    /// is its ring share over this, so that the group's bounds add up to the whole load
    /// whatever part of the tier is out.
    group_share: f64,
    balance_factor: f64,
    failure_policy: AffinityFailurePolicy,
}

/// [`Affinity::in_group`] of a member that is not in the best group.
const NOT_IN_GROUP: u32 = u32::MAX;

/// Why a keyed pick found nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AffinityMiss {
    /// The key's home is unavailable and the cluster fails such picks.
    Unavailable,
    /// No ring member is in the group (an empty tier, or a group of another tier).
    NoCandidate,
}

impl Affinity {
    /// The affinity of a cluster configured with `config`, whose best tier's members are
    /// `tier` and whose best group is `group`; the ring of `previous` is kept when the tier's
    /// members and weights are the same.
    pub fn prepare(
        config: &SessionAffinityConfig,
        tier: &[Arc<Destination>],
        group: &Group,
        previous: Option<&Affinity>,
    ) -> Affinity {
        let weights: Vec<f64> = tier.iter().map(|d| d.weight()).collect();
        let ring = match previous {
            Some(previous) if previous.has_members(tier, &weights) => previous.ring.clone(),
            _ => {
                let ids: Vec<(&str, f64)> = tier
                    .iter()
                    .zip(&weights)
                    .map(|(d, &w)| (d.id(), w))
                    .collect();
                Arc::new(HashRing::new(&ids))
            }
        };
        let in_group: Box<[u32]> = tier
            .iter()
            .map(|member| {
                group
                    .destinations()
                    .iter()
                    .position(|d| Arc::ptr_eq(d, member))
                    .map_or(NOT_IN_GROUP, |i| i as u32)
            })
            .collect();
        let group_share = in_group
            .iter()
            .enumerate()
            .filter(|(_, &i)| i != NOT_IN_GROUP)
            .map(|(member, _)| ring.share(member))
            .sum();
        Affinity {
            ring,
            members: tier.into(),
            in_group,
            group_share,
            balance_factor: config.balance_factor_setting(),
            failure_policy: config.failure_policy_setting(),
        }
    }

    /// Whether its ring was built from `tier` with `weights`.
    fn has_members(&self, tier: &[Arc<Destination>], weights: &[f64]) -> bool {
        self.members.len() == tier.len()
            && self
                .members
                .iter()
                .zip(tier)
                .zip(weights)
                .all(|((a, b), &w)| Arc::ptr_eq(a, b) && a.weight() == w)
    }

    /// The index in `group` (the group it was prepared with) of the destination for the key
    /// hashed to `key_hash`, with `total` requests in flight to the cluster.
    #[inline]
    pub fn pick(&self, group: &Group, key_hash: u64, total: usize) -> Result<usize, AffinityMiss> {
        let in_group = |member: usize| {
            Some(self.in_group[member])
                .filter(|&i| i != NOT_IN_GROUP)
                .map(|i| i as usize)
        };
        self.pick_by(group, key_hash, total, self.group_share, in_group)
    }

    /// [`pick`](Self::pick) from a group computed for one pick (a retry's), found in it by
    /// destination.
    pub fn pick_in(
        &self,
        group: &Group,
        key_hash: u64,
        total: usize,
    ) -> Result<usize, AffinityMiss> {
        let in_group = |member: usize| {
            let member = &self.members[member];
            group
                .destinations()
                .iter()
                .position(|d| Arc::ptr_eq(d, member))
        };
        let group_share = (0..self.members.len())
            .filter(|&member| in_group(member).is_some())
            .map(|member| self.ring.share(member))
            .sum();
        self.pick_by(group, key_hash, total, group_share, in_group)
    }

    fn pick_by(
        &self,
        group: &Group,
        key_hash: u64,
        total: usize,
        group_share: f64,
        in_group: impl Fn(usize) -> Option<usize>,
    ) -> Result<usize, AffinityMiss> {
        if self.failure_policy == AffinityFailurePolicy::Return503Error
            && self.ring.home(key_hash).and_then(&in_group).is_none()
        {
            return Err(AffinityMiss::Unavailable);
        }
        let bound = LoadBound::new(self.balance_factor, total);
        let mut first_available = None;
        for member in self.ring.candidates(key_hash).take(CHOICES) {
            let Some(index) = in_group(member) else {
                continue;
            };
            first_available.get_or_insert(index);
            let in_flight = group
                .shared_count(group.place(index))
                .load(Ordering::Relaxed) as usize;
            if bound.admits(in_flight, self.ring.share(member) / group_share) {
                return Ok(index);
            }
        }
        match first_available {
            Some(index) => Ok(index),
            None => self.first_in_group(key_hash, &in_group),
        }
    }

    /// The key's first candidate that is in the group at all, past the first few: a walk that
    /// may allocate, taken only when none of those was available.
    #[cold]
    #[inline(never)]
    fn first_in_group(
        &self,
        key_hash: u64,
        in_group: &impl Fn(usize) -> Option<usize>,
    ) -> Result<usize, AffinityMiss> {
        self.ring
            .candidates(key_hash)
            .skip(CHOICES)
            .find_map(in_group)
            .ok_or(AffinityMiss::NoCandidate)
    }
}

impl std::fmt::Debug for Affinity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Affinity")
            .field("ring", &self.ring)
            .field("balance_factor", &self.balance_factor)
            .field("failure_policy", &self.failure_policy)
            .finish()
    }
}

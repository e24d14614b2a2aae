//! The update guard (a healthpick extension no anchor has): a publication that would
//! empty a source's destinations, remove at least the configured share of them, or say the
//! service does not exist is held, not applied, until it is confirmed. Small removals (a rolling
//! deploy) apply at once.
//!
//! Judged per source, against that source's own destinations: a cluster fed by the
//! configuration and a DNS name is still protected when the DNS answer empties.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::config::discovery::{GuardMode, GuardPolicy};
use crate::destination::endpoint::Endpoint;
use crate::events::HeldReason;
use crate::ids::fold_case;

/// What the guard says about one publication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Apply,
    Hold {
        reason: HeldReason,
        removes: usize,
        of: usize,
    },
}

/// A held publication: the full set (or "does not exist"), and since when.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    /// `None`: the source said the service does not exist.
    pub endpoints: Option<Vec<Endpoint>>,
    pub reason: HeldReason,
    pub removes: usize,
    pub of: usize,
    pub since: Duration,
}

impl Held {
    /// Whether `endpoints` says the same as this held change (the same keys at the same
    /// addresses, or "does not exist" again): seeing it again confirms it.
    pub fn same_as(&self, endpoints: Option<&[Endpoint]>) -> bool {
        match (&self.endpoints, endpoints) {
            (None, None) => true,
            (Some(held), Some(new)) => identities(held) == identities(new),
            _ => false,
        }
    }
}

fn identities(endpoints: &[Endpoint]) -> HashSet<(String, &str)> {
    endpoints
        .iter()
        .map(|e| (fold_case(&e.key), e.address.as_str()))
        .collect()
}

/// Judges a publication of `incoming` (`None`: does not exist) against the source's current
/// keys (folded).
pub(crate) fn judge(
    policy: &GuardPolicy,
    current: &HashSet<Arc<str>>,
    incoming: Option<&[Endpoint]>,
) -> Verdict {
    let of = current.len();
    if policy.mode == GuardMode::Immediately || of == 0 {
        return Verdict::Apply;
    }
    let Some(incoming) = incoming else {
        return Verdict::Hold {
            reason: HeldReason::NotFound,
            removes: of,
            of,
        };
    };
    let kept: HashSet<String> = incoming.iter().map(|e| fold_case(&e.key)).collect();
    let removes = current.iter().filter(|k| !kept.contains(&***k)).count();
    if incoming.is_empty() {
        Verdict::Hold {
            reason: HeldReason::Emptying,
            removes,
            of,
        }
    } else if removes > 0 && removes as f64 >= policy.max_removed_share * of as f64 {
        Verdict::Hold {
            reason: HeldReason::MassRemoval,
            removes,
            of,
        }
    } else {
        Verdict::Apply
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(ks: &[&str]) -> HashSet<Arc<str>> {
        ks.iter().map(|k| Arc::from(*k)).collect()
    }

    fn endpoints(ks: &[&str]) -> Vec<Endpoint> {
        ks.iter()
            .map(|k| Endpoint::new(*k, "http://127.0.0.1:1/".parse().unwrap()))
            .collect()
    }

    #[test]
    fn small_removals_apply_and_large_ones_are_held() {
        let policy = GuardPolicy::default();
        let current = keys(&["a", "b", "c", "d"]);
        assert_eq!(
            judge(&policy, &current, Some(&endpoints(&["a", "b", "c"]))),
            Verdict::Apply
        );
        assert_eq!(
            judge(&policy, &current, Some(&endpoints(&["a", "b"]))),
            Verdict::Hold {
                reason: HeldReason::MassRemoval,
                removes: 2,
                of: 4
            },
            "half is the default share: held"
        );
        assert_eq!(
            judge(&policy, &current, Some(&[])),
            Verdict::Hold {
                reason: HeldReason::Emptying,
                removes: 4,
                of: 4
            }
        );
        assert_eq!(
            judge(&policy, &current, None),
            Verdict::Hold {
                reason: HeldReason::NotFound,
                removes: 4,
                of: 4
            }
        );
        // Keys compare case-insensitively; additions never count.
        assert_eq!(
            judge(
                &policy,
                &current,
                Some(&endpoints(&["A", "B", "C", "D", "e", "f"]))
            ),
            Verdict::Apply
        );
        // Nothing to protect yet, or no guard.
        assert_eq!(judge(&policy, &keys(&[]), Some(&[])), Verdict::Apply);
        let off = GuardPolicy::new(GuardMode::Immediately);
        assert_eq!(judge(&off, &current, None), Verdict::Apply);
    }

    #[test]
    fn a_held_change_is_seen_again_only_when_it_says_the_same() {
        let held = Held {
            endpoints: Some(endpoints(&["a"])),
            reason: HeldReason::MassRemoval,
            removes: 3,
            of: 4,
            since: Duration::ZERO,
        };
        assert!(held.same_as(Some(&endpoints(&["A"]))));
        assert!(!held.same_as(Some(&endpoints(&["a", "b"]))));
        assert!(!held.same_as(None));
    }
}

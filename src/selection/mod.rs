//! Best-endpoint selection: keep the best health class, then the lowest tier, then let
//! the cluster's load-balancing policy pick inside that group.
//!
//! The group is computed when health or destinations change and published in the cluster
//! snapshot together with the picker the policy prepared for it; a pick only reads them. Each
//! built-in policy has its own file and uses only what a custom policy gets:
//! [`LoadBalancingPolicy`], [`Picker`] (with [`Pick`]) and [`PickView`]. A new built-in is its
//! file and one line in `built_in_policies`.

pub(crate) mod affinity;
pub(crate) mod balancing;
pub(crate) mod consistent_hash;
pub(crate) mod first_alphabetical;
pub(crate) mod group;
pub(crate) mod least_requests;
pub(crate) mod peak_ewma;
pub(crate) mod power_of_two;
pub(crate) mod random;
pub(crate) mod round_robin;
pub(crate) mod tier_spill;
pub(crate) mod weights;

use std::sync::Arc;

pub use balancing::{Group, LoadBalancingPolicy, Pick, PickView, Picker, Signals};
pub use first_alphabetical::FirstAlphabetical;
pub use least_requests::LeastRequests;
pub use peak_ewma::PeakEwma;
pub use power_of_two::PowerOfTwoChoices;
pub use random::Random;
pub use round_robin::RoundRobin;

/// The built-in load-balancing policies under their configuration names, the default
/// (`PowerOfTwoChoices`) first.
pub(crate) fn built_in_policies() -> Vec<(&'static str, Arc<dyn LoadBalancingPolicy>)> {
    vec![
        ("PowerOfTwoChoices", Arc::new(PowerOfTwoChoices)),
        ("RoundRobin", Arc::new(RoundRobin)),
        ("LeastRequests", Arc::new(LeastRequests)),
        ("Random", Arc::new(Random)),
        ("FirstAlphabetical", Arc::new(FirstAlphabetical)),
        ("PeakEwma", Arc::new(PeakEwma)),
    ]
}

//! Best-endpoint selection: keep the best health class, then the lowest tier, then let
//! the cluster's load-balancing policy pick inside that group.
//!
//! The group is computed when health or destinations change and published in the cluster
//! snapshot together with what the policy prepared for it; a pick only reads them. Each built-in
//! policy has its own file and uses only what a custom policy gets: [`PickContext`],
//! [`LoadBalancingPolicy::prepare`] and [`InFlightCounts`].

pub(crate) mod balancing;
pub(crate) mod consistent_hash;
pub(crate) mod direct;
pub(crate) mod first_alphabetical;
pub(crate) mod group;
pub(crate) mod in_flight_counts;
pub(crate) mod least_requests;
pub(crate) mod power_of_two;
pub(crate) mod random;
pub(crate) mod round_robin;
pub(crate) mod round_robin_counter;
pub(crate) mod weights;

pub use balancing::{LoadBalancingPolicy, PickContext, Prepared};
pub use first_alphabetical::FirstAlphabetical;
pub use in_flight_counts::InFlightCounts;
pub use least_requests::LeastRequests;
pub use power_of_two::PowerOfTwoChoices;
pub use random::Random;
pub use round_robin::RoundRobin;

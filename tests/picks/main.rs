//! Picks: best-endpoint selection and the load-balancing algorithms, the doors a policy picks
//! through, the engine as a whole, and the endpoint set against real servers.

#[path = "../support/mod.rs"]
mod support;

mod affinity;
mod doors;
mod endpoint_set;
mod engine;
mod peak_ewma;
mod selection;
mod slow_start;
mod tier_spill;

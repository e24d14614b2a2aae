//! Discovery from Kubernetes (feature `kubernetes`): the endpoints of a Service from
//! its EndpointSlices (`discovery.k8s.io/v1`), listed and then watched through kube's client;
//! a list replaces the whole set. `slices.rs` holds the mapping
//! rules (ports, keys, conditions to discovery health, zones and topology hints to tiers,
//! merging several slices), `source.rs` the watch loop.
//!
//! The final binary chooses the Kubernetes API version k8s-openapi is built for (one of its
//! `v1_*` features, or `K8S_OPENAPI_ENABLED_VERSION`); healthpick works with all of them.

mod slices;
pub(crate) mod source;

pub use source::{KubernetesSource, SERVICE_NAME_LABEL};

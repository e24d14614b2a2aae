//! The service side: the health payload that probes read, and graceful draining.
//!
//! healthpick mostly runs in the *caller*. This module is for the *callee*: a service that wants
//! its callers' probes to learn more than "it answered 2xx".
//!
//! - [`HealthPayload`] is the JSON body of a health endpoint,
//!   `{"status": "Healthy", "version": "1.4.2", "environment": "prod", "hostname": "eu-2"}`.
//!   Active probes read it with [`HealthPayload::parse`]: a 2xx answer whose payload says
//!   `Degraded` ranks the destination below healthy ones, one that says `Unhealthy` counts as a
//!   failed probe.
//! - [`status_code`] is the HTTP status a service answers with for a given status: `Healthy` and
//!   `Degraded` → 200, `Unhealthy` and no status → 503.
//! - [`Draining`] is the handle a service holds so that, when shutdown starts, its health endpoint
//!   reports `Degraded` (or `Unhealthy`) for a while before the process stops, giving callers'
//!   probes time to see it and route away.
//! - With the `axum` feature, `health_router` serves `GET /api/systemstatus` and
//!   `GET /api/health/details` from a [`Draining`].
//!
//! Everything except `health_router` is independent of any web framework: serve
//! [`Draining::payload`] with [`status_code`] from whatever server you use.

mod draining;
#[cfg(feature = "etcd")]
mod etcd_registration;

#[cfg(feature = "axum")]
mod axum;

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use self::axum::health_router;
pub use self::draining::{Draining, DrainingBuilder, HealthDetails};
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub use self::etcd_registration::{EtcdRegistration, EtcdRegistrationBuilder};
pub use crate::health::payload::{status_code, HealthPayload};

//! Health policies and the registry that names them.
//!
//! YARP keeps four roles apart and so do we:
//! - the **active policy** ([`ActiveHealthPolicy`], built-in [`ConsecutiveFailures`]) reads a probe
//!   round and says what each destination's active health is;
//! - the **passive policy** ([`PassiveHealthPolicy`], built-ins [`TransportFailureRate`] and
//!   [`OutlierDetection`], one or several per cluster) reads one request outcome and says what the
//!   destination's passive health is;
//! - the **available-destinations policy** ([`AvailableDestinationsPolicy`], built-in
//!   [`HealthyAndUnknown`] and [`HealthyOrPanic`]) decides who may get traffic;
//! - the engine's **health updater** applies those verdicts, schedules reactivation, emits events
//!   and publishes a new snapshot; it is the only writer of health.
//!
//! The built-in policies use exactly the doors a custom policy gets: their contexts, a
//! per-destination state slot (`with_state`) for their own data, and each destination's
//! [`OutcomeWindow`] (`with_outcome_window`), what TransportFailureRate counts in.

pub(crate) mod active;
pub(crate) mod available;
pub(crate) mod consecutive_failures;
pub(crate) mod healthy_or_panic;
pub(crate) mod outlier_detection;
pub(crate) mod passive;
pub(crate) mod registry;
pub(crate) mod transport_failure_rate;

pub use crate::destination::outcome_window::{OutcomeWindow, WindowCounts};
pub use active::{ActiveHealthPolicy, ActivePolicyContext, ActiveVerdict, ProbeDelivery};
pub use available::{Availability, AvailableDestinationsPolicy, AvailablePolicyContext};
pub use consecutive_failures::ConsecutiveFailures;
pub use healthy_or_panic::{HealthyAndUnknown, HealthyOrPanic};
pub use outlier_detection::OutlierDetection;
pub use passive::{PassiveHealthPolicy, PassivePolicyContext, PassiveVerdict, QuietSuccesses};
pub use registry::PolicyRegistry;
pub use transport_failure_rate::TransportFailureRate;

//! What health is: the health parts of a destination and the classes
//! selection ranks them in, probe results, request outcomes, the reasons a part changed, and the
//! health payload a service reports itself with.
//!
//! Deciding health is the job of the policies in [`crate::policy`]: YARP keeps four roles apart
//! and so do we — the active policy reads probe results, the passive policy reads request
//! outcomes, the available-destinations policy decides who may get traffic, and the engine's
//! health updater is the only writer of health.

pub(crate) mod load_report;
pub(crate) mod outcome;
pub(crate) mod payload;
pub(crate) mod probe_result;
pub(crate) mod reason;
pub(crate) mod state;

pub use outcome::RequestOutcome;
pub use payload::{status_code, HealthPayload};
pub use probe_result::ProbeResult;
pub use reason::{OutlierEjection, Reason};
pub use state::{
    DiscoveryHealth, HealthClass, HealthPart, HealthParts, HealthState, ReportedHealth,
};

//! Reading, validating and reporting configuration: YARP files as .NET reads them, every
//! validation rule, the `Discovery` sections, the traffic-shaping sections, serde formats, the
//! engine's record of its loads, and property tests of the reader.

mod config_discovery;
mod config_fuzz;
mod config_serde;
mod config_status;
mod config_validation;
mod config_yarp;
mod faults;
mod traffic;

//! Health: active checks against real servers, the passive policies and their outcome windows,
//! the health policies through the engine, and health under real faults.

#[path = "../support/mod.rs"]
mod support;

mod faults;
mod outlier_detection;
mod passive_outcomes;
mod policies;
mod probing;

//! What healthpick shows of itself: metrics, the simulator and its recordings, and the service
//! side's health payloads and draining.

#[path = "../support/mod.rs"]
mod support;

mod metrics;
mod service;
mod simulate;
mod simulate_record;
mod simulate_traffic;

//! # healthpick
//!
//! Client-side service discovery and health-aware routing for Rust services.
//!
//! Before every outgoing request, ask healthpick which instance of a service to call. It keeps
//! per-instance health from **active probes** (YARP's `ConsecutiveFailures`) and **passive
//! observation** of real requests (YARP's `TransportFailureRate`, with reactivation), keeps only
//! the available destinations (`HealthyOrPanic` by default), prefers the best health class and the
//! most preferred **tier** (same zone first), and load-balances inside it (`PowerOfTwoChoices` by
//! default). Configuration is an existing YARP `ReverseProxy:Clusters` JSON file, unchanged.
//!
//! ## Quick start
//!
//! ```
//! use healthpick::{Engine, RequestOutcome};
//!
//! let engine = Engine::from_json(r#"{
//!   // a YARP appsettings section: comments and trailing commas are fine
//!   "ReverseProxy": { "Clusters": { "payments": {
//!     "HealthCheck": { "Passive": { "Enabled": true } },
//!     "Destinations": {
//!       "eu-1": { "Address": "http://127.0.0.1:8001/" },
//!       "eu-2": { "Address": "http://127.0.0.1:8002/" },
//!       "us-1": { "Address": "http://127.0.0.1:9001/", "Priority": 1 },
//!     } } } } }"#)?;
//!
//! let pick = engine.pick_endpoint("payments")?;      // eu-1 or eu-2: tier 0 first
//! let url = pick.address().join("api/orders?id=7")?;
//! // ... send the request to `url`, then tell healthpick how it went:
//! pick.report(RequestOutcome::Status(200));
//! drop(pick);                                         // no longer in flight
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## How it fits together
//!
//! Data flows one way: [`config`] (a YARP document or builders) → validation → runtime state in
//! the [`Engine`] → an immutable per-cluster snapshot → [`Engine::pick_endpoint`]. Probe rounds
//! ([`Engine::report_probe_round`]) and request outcomes ([`PickHandle::report`]) flow back only
//! through the health updater, which alone rebuilds snapshots, emits [events](Engine::subscribe)
//! and `tracing` events (target `healthpick`).
//!
//! | concern | module |
//! |---|---|
//! | configuration, TimeSpans, validation | [`config`] |
//! | health parts and the four policy kinds | [`health`], [`selection`] |
//! | named policies | [`PolicyRegistry`] |
//! | status view and change events | [`Engine::status`], [`HealthEvent`] |
//!
//! Time comes from a [`Clock`] ([`ManualClock`] in tests) and randomness from a seedable source
//! ([`EngineBuilder::seed`]), so every rule is deterministic under test.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod clock;
mod cluster;
pub mod config;
mod destination;
mod endpoint_set;
mod engine;
mod error;
mod events;
pub mod health;
#[cfg(feature = "middleware")]
pub mod middleware;
pub mod monitor;
pub mod probe;
mod registry;
mod rng;
pub mod selection;
pub mod service;
mod status;
pub mod table;
mod uri;

pub use client::{
    AttemptFailure, ClientError, HealthAwareClient, RequestBuilder, Response, RetryPolicy,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{Config, ConfigError, Diagnostic};
pub use destination::{Destination, PickHandle};
pub use endpoint_set::{EndpointSet, EndpointSetBuilder, RefreshJob};
pub use engine::{BestEndpoints, Engine, EngineBuilder};
pub use error::PickError;
pub use events::{HealthEvent, HealthEventKind, PartValue};
pub use health::{
    HealthClass, HealthPart, HealthParts, HealthState, ProbeResult, Reason, ReportedHealth,
    RequestOutcome,
};
pub use monitor::ActiveMonitor;
pub use registry::PolicyRegistry;
pub use status::{ClusterStatus, DestinationStatus, EngineStatus};
pub use uri::probe_uri;

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

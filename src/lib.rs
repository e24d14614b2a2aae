//! # healthpick
//!
//! Client-side service discovery and health-aware routing for Rust services.
//!
//! Before every outgoing request, ask healthpick which instance of a service to call. It keeps
//! per-instance health from **active probes** (YARP's `ConsecutiveFailures`, each destination on
//! its own schedule) and **passive observation** of real requests (YARP's `TransportFailureRate`,
//! with reactivation, and Envoy's outlier detection, `OutlierDetection`), keeps only
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
//! ## Guide
//!
//! The manual is the [`guide`] module, one chapter per task:
//!
//! - [discovery](guide::discovery), with a chapter per source: [DNS](guide::discovery::dns),
//!   [a watched file](guide::discovery::config_file), [etcd](guide::discovery::etcd),
//!   [Consul](guide::discovery::consul), [Kubernetes](guide::discovery::kubernetes);
//! - [tiers and load balancing](guide::tiers);
//! - [health under faults](guide::health), and the service side;
//! - [timeouts, failures and retries](guide::timeouts_and_failures);
//! - [integrations](guide::integrations): reqwest-middleware, tower and tonic, tracing, metrics,
//!   TOML and YAML;
//! - [the configuration reference](guide::configuration);
//! - [the command line](guide::command_line);
//! - [performance](guide::performance): what the benches measure.
//!
//! ## Faces
//!
//! One engine, several ways in. They all build the same runtime state and pick through the same
//! selector; choose by what you start from.
//!
//! | You have | Use | Runnable example |
//! |---|---|---|
//! | a few base URLs, some in your zone | [`EndpointSet`]: [`pick_endpoint`](EndpointSet::pick_endpoint) | `examples/endpoint_set.rs` |
//! | a YARP config file, and you send requests yourself | [`Engine::from_json`], [`ActiveMonitor`], [`Engine::pick_endpoint`], [`PickHandle::report`] | `examples/yarp_tiers.rs`, `examples/pick_by_hand.rs` |
//! | a `reqwest::Client` that should route, report and fail over by itself | [`HealthAwareClient`] | `examples/wrapped_client.rs` |
//! | a `reqwest_middleware` client stack | `middleware::HealthPickMiddleware` (feature `middleware`) | `examples/middleware.rs` |
//! | a service that others call | [`service::HealthPayload`], [`service::Draining`] | `examples/draining_service.rs` |
//!
//! ## How data flows
//!
//! One way, as in YARP, with the roles kept apart:
//!
//! ```text
//!  YARP JSON / builders ─> Config ─ validate ─> Engine ─ publish ─> snapshot per cluster ─> pick
//!                                                 ^                                           │
//!        probe rounds (ActiveMonitor) ────────────┤ health updater                            │
//!        request outcomes (PickHandle::report) ───┘ (the only writer)      <─ PickHandle ─────┘
//! ```
//!
//! 1. **Configuration.** [`Config::from_json`] and [`Engine::load_json`] read a YARP document;
//!    [`config::ClusterConfig`] and friends build one in code, with the same defaults. Validation
//!    ([`config::check`]) reports every problem at once in a [`ConfigError`]; a bad reload
//!    changes nothing.
//! 2. **Runtime state.** The [`Engine`] holds each cluster's destinations and their health. Every
//!    destination comes from a source — the configuration, or a discovery source or your own
//!    code publishing with [`Engine::set_destinations`] — and keeps its health, counters and
//!    in-flight count for as long as its source keeps publishing its key at the same address.
//! 3. **Health in.** Probe rounds — run by the [`ActiveMonitor`] or an endpoint set's refresh job,
//!    or handed in with [`Engine::report_probe_round`] — go to the cluster's
//!    [`ActiveHealthPolicy`](policy::ActiveHealthPolicy). Request outcomes — reported with
//!    [`PickHandle::report`], or by the wrapped client and the middleware — go to its
//!    [`PassiveHealthPolicy`](policy::PassiveHealthPolicy). The health updater applies their
//!    verdicts, schedules passive reactivation, asks the
//!    [`AvailableDestinationsPolicy`](policy::AvailableDestinationsPolicy) who may get traffic,
//!    and publishes the cluster's one new immutable snapshot: members, available set, best group
//!    (best health class, then lowest tier) and what the load balancer prepared for it.
//! 4. **Picks out.** [`Engine::pick_endpoint`] reads that snapshot without locks and lets the
//!    cluster's [`LoadBalancingPolicy`](selection::LoadBalancingPolicy) choose inside the best
//!    group. The [`PickHandle`] counts the destination in flight until it is dropped.
//!    [`Engine::best_endpoints`] returns the whole group for callers who choose themselves.
//! 5. **Seeing it.** Every change is a [`HealthEvent`] ([`Engine::subscribe`]) and a `tracing`
//!    event (target `healthpick`); [`Engine::status`] is a point-in-time view of everything; an
//!    [`Observer`](observer::Observer) sees every input and policy evaluation as it happens.
//!
//! ## Where things live
//!
//! | Concern | Where |
//! |---|---|
//! | config model and builders, YARP JSON reading, TimeSpans, validation | [`config`] |
//! | health parts, probe results, request outcomes, reasons, the health payload | [`health`] |
//! | active, passive and available-destinations policies; policies by name | [`policy`], [`PolicyRegistry`], [`EngineBuilder`] |
//! | best group and the load-balancing policies | [`selection`] |
//! | destinations from sources other than the configuration: DNS, a watched file, etcd, Consul, Kubernetes, your own code | [`discovery`], [`Engine::set_destinations`], [`Endpoint`] |
//! | when to probe | [`monitor`] ([`ActiveMonitor`]) |
//! | what a probe sends and how its answer is judged | [`probe`] |
//! | picks, reloads, status and events | [`Engine`], [`EngineStatus`], [`HealthEvent`] |
//! | the simple face | [`EndpointSet`] |
//! | the wrapped client, its errors, retries, timeouts and hedging | [`HealthAwareClient`], [`ClientError`], [`RetryPolicy`], [`Timeouts`], [`Hedging`] |
//! | the service side: health payload, draining | [`service`] |
//! | a live per-destination table (what the demo and `healthpick watch` show) | [`table`] |
//! | replaying a timeline of probes and outcomes; recording one from a live engine | [`simulate`] |
//! | seeing every input and decision synchronously (audit, metrics, recording) | [`observer`] |
//! | counters, gauges and histograms for your metrics exporter (feature `metrics`) | `metrics` |
//!
//! ## Extending
//!
//! Four kinds of policy, registered by name (case-insensitive) in a [`PolicyRegistry`] or on the
//! [`EngineBuilder`], and named from config exactly like the built-ins:
//! [`policy::ActiveHealthPolicy`] (`HealthCheck:Active:Policy`),
//! [`policy::PassiveHealthPolicy`] (`HealthCheck:Passive:Policy`),
//! [`policy::AvailableDestinationsPolicy`] (`HealthCheck:AvailableDestinationsPolicy`) and
//! [`selection::LoadBalancingPolicy`] (`LoadBalancingPolicy`). The built-ins use exactly the
//! doors yours get: the policy contexts, a per-destination state slot for a policy's own data
//! (`with_state` on the active and passive contexts), and for load balancers a per-group
//! preparation step ([`LoadBalancingPolicy::prepare`](selection::LoadBalancingPolicy::prepare),
//! which returns a [`selection::Picker`]) and a [`selection::PickView`] of each destination's
//! requests in flight, latency estimate, reported utilization and weight (slow start included).
//! The probe request itself is replaced with a [`probe::ProbeRequestFactory`] on the monitor.
//! `examples/custom_policy.rs` registers a weighted load balancer that adds up its weights once
//! per change.
//!
//! The crate's layers and seams are described in `ARCHITECTURE.md`; a test keeps imports
//! one-way. The command-line tool is its own package, `healthpick-cli` (see
//! [the command line](guide::command_line)).
//!
//! Time comes from a [`Clock`] ([`ManualClock`] in tests, with [`Engine::fire_due_timers`]) and
//! randomness from a seedable source ([`EngineBuilder::seed`]), so every rule is deterministic
//! under test.
//!
//! ## Feature flags
//!
//! | Feature | Default | What it adds |
//! |---|---|---|
//! | `rustls` | yes | TLS through rustls for probes and the client |
//! | `native-tls` | no | TLS through the platform's library instead |
//! | `http2` | yes | HTTP/2 probes when a cluster's `HttpRequest:Version` asks for it |
//! | `middleware` | no | the `middleware` module: `HealthPickMiddleware` for `reqwest-middleware` |
//! | `axum` | no | `service::health_router`, ready-made axum health endpoints |
//! | `serde` | no | `Deserialize` and `Serialize` for [`Config`]: the YARP document in TOML, YAML or any serde format |
//! | `file` | no | `discovery::ConfigFile`: a YARP configuration file reloaded whenever it changes |
//! | `dns` | no | `discovery::dns`: destinations from A/AAAA or SRV records, and YARP's per-destination DNS resolution (hickory) |
//! | `etcd` | no | `discovery::etcd`: the keys under an etcd prefix, watched (etcd's JSON gateway), and `service::EtcdRegistration` |
//! | `consul` | no | `discovery::consul`: a Consul service's instances through blocking queries |
//! | `metrics` | no | the `metrics` module: counters, gauges and histograms through the `metrics` facade crate (no exporter) |
//! | `kubernetes` | no | `discovery::kubernetes`: a Service's EndpointSlices, listed and watched through kube's client; Rust 1.89, and your binary chooses k8s-openapi's version feature |
//! | `tower` | no | the `tower` module: a tower `Layer` for hyper, axum's client side and tonic, and a `tower::discover` stream of a cluster's best destinations |

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The layers of ARCHITECTURE.md, lowest first; `tests/tidy/architecture.rs` keeps them one-way.

// Foundation.
mod clock;
mod ids;
mod jsonc;
mod rng;
mod uri;

// Vocabulary.
pub mod config;
mod error;
mod events;
pub mod health;
pub mod observer;

// The destination.
mod destination;

// Rules.
pub mod policy;
pub mod selection;

// One cluster at run time.
mod cluster;

// The engine.
mod engine;

// Async edges.
mod client;
pub mod discovery;
mod endpoint_set;
#[cfg(feature = "metrics")]
pub mod metrics;
#[cfg(feature = "middleware")]
pub mod middleware;
pub mod monitor;
pub mod probe;
pub mod service;
#[cfg(feature = "tower")]
pub mod tower;

// Tools.
pub mod simulate;
pub mod table;

// Facade: the user's guide, documentation only.
pub mod guide;

pub use client::{
    AttemptError, AttemptFailure, ClientError, HealthAwareClient, HealthAwareClientBuilder,
    HedgeDelay, Hedging, RequestBuilder, Response, RetryPolicy, RetryStatuses, Timeouts,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{Config, ConfigError, Diagnostic};
pub use destination::attributes::DestinationAttributes;
pub use destination::endpoint::Endpoint;
pub use destination::locality::Locality;
pub use destination::Destination;
pub use endpoint_set::{EndpointSet, EndpointSetBuilder, RefreshJob};
pub use engine::builder::EngineBuilder;
pub use engine::fast_path::PickHandle;
pub use engine::pick::BestEndpoints;
pub use engine::runtime::CONFIG_SOURCE;
pub use engine::status::{
    ClusterStatus, ConfigRejection, ConfigStatus, DestinationStatus, EngineStatus, HeldStatus,
    SourceStatus, SpillStatus,
};
pub use engine::Engine;
pub use error::{DestinationsError, PickError};
pub use events::{HealthEvent, HealthEventKind, HeldReason, PartValue, Release};
pub use health::{
    DiscoveryHealth, HealthClass, HealthPart, HealthParts, HealthState, OutlierEjection,
    ProbeResult, Reason, ReportedHealth, RequestOutcome,
};
pub use monitor::ActiveMonitor;
pub use policy::PolicyRegistry;
/// The cancellation token [`ActiveMonitorBuilder::cancellation_token`](monitor::ActiveMonitorBuilder::cancellation_token)
/// and [`EndpointSet::spawn_refresh_with`] take (tokio-util's), re-exported so that callers need
/// not depend on tokio-util themselves.
pub use tokio_util::sync::CancellationToken;
pub use uri::{probe_uri, MAX_ADDRESS_LEN, MAX_HOST_LEN};
/// The URL type of addresses and request URLs ([`Destination::address`], [`Endpoint::new`],
/// [`PickHandle::url`]), re-exported from the `url` crate.
pub use url::Url;

/// The README's code blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

//! tower integration (feature `tower`): a [`Layer`](tower::Layer) for hyper, axum's and
//! tonic's clients, and a `tower::discover` stream for tonic's and tower's own balancers.
//!
//! # The layer
//!
//! [`HealthPickLayer`] wraps any service of `http::Request<B>` to `http::Response<_>` (a
//! hyper-util `Client`, a tonic transport, a tower stack). A request whose URI authority is a
//! cluster id — `http://payments/api/orders` — is routed like the wrapped client routes it:
//! picked, its URI rewritten to the destination (the destination's base path kept, its `Host`
//! set), retried on another destination through the same failover step as
//! [`HealthAwareClient`](crate::HealthAwareClient) and the middleware (connect failures
//! requeued, gateway statuses retried elsewhere, one retry budget per cluster, attempt and call
//! timeouts, hedging), and its outcome reported when its response body ends. Every other
//! request goes to the inner service unchanged.
//!
//! Per request, extensions change the defaults: [`Retryable`] (retry a request whose method is
//! not idempotent), [`AttemptTimeout`], [`CallTimeout`], [`NoHedging`] or a
//! [`Hedging`](crate::Hedging), and [`AffinityKey`]: for a cluster with `SessionAffinity`,
//! requests with the same key go to the same destination (without the extension the key is the
//! header or cookie the cluster's `AffinityKeyName` names, when the request has it). The load a
//! destination reports in an `endpoint-load-metrics` response header is recorded for it.
//!
//! A retry sends the body again, so the layer must be able to copy it: with [`CloneBody`] (the
//! default) bodies are cloned (`Full<Bytes>`, `String`, `Empty`); with [`NoReplay`] — for
//! bodies that cannot be cloned, such as tonic's — every request is sent once (failover then
//! happens only at the pick: the engine never picks a destination it knows to be down).
//!
//! ```
//! use http_body_util::Full;
//! use healthpick::tower::HealthPickLayer;
//! use healthpick::Engine;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use tower::ServiceBuilder;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let engine = Engine::from_json(r#"{"Clusters": {"payments": {"Destinations": {
//!     "eu-1": { "Address": "http://127.0.0.1:8001/" } } } } }"#)?;
//! let http = Client::builder(TokioExecutor::new()).build_http::<Full<bytes::Bytes>>();
//! let client = ServiceBuilder::new()
//!     .layer(HealthPickLayer::new(engine))
//!     .service(http);
//! // client.oneshot(Request::get("http://payments/api/orders").body(Full::default())?) goes to
//! // eu-1 (or fails over), and the response's body keeps eu-1 in flight until it ends.
//! # drop(client);
//! # Ok(())
//! # }
//! ```
//!
//! # With tonic
//!
//! Two ways, by what should balance:
//!
//! - **tonic balances** (usually preferred for gRPC): one `Channel` per destination, fed by
//!   [`Discovered`] into `Channel::balance_channel`. tonic keeps an HTTP/2 connection per
//!   destination and balances streams over them; healthpick decides which destinations are in
//!   the set — only the best group, so a tier that dies is left and a recovered one comes back.
//!   Outcomes are not reported (tonic does not say which channel served a call): health comes
//!   from active probes. `examples/tonic_balance.rs` runs this against two local tonic servers,
//!   one of which dies.
//! - **healthpick balances**: the layer over a hyper-util HTTP/2 client, with the tonic client
//!   built on it (`with_origin(service, "http://payments")`) and
//!   [`no_replay`](HealthPickLayerBuilder::no_replay) (tonic's body cannot be cloned). Every
//!   call is picked and reported like any other request; gRPC calls are POSTs, sent once.
//!
//! # The discovery stream
//!
//! [`Discovered`] yields `Change::Insert(id, destination)` / `Change::Remove(id)` as a
//! cluster's best group changes; [`Discovered::into_services`] makes each destination a
//! service, which is what `tower::balance::p2c::Balance` takes.

mod body;
mod discover;
mod replay;
mod service;

pub use crate::client::extensions::{
    AffinityKey, AttemptTimeout, CallTimeout, NoHedging, Retryable,
};
pub use body::ResponseBody;
pub use discover::{Discovered, DiscoveredServices};
pub use replay::{CloneBody, NoReplay, ReplayBody};
pub use service::{
    client_error, HealthPickLayer, HealthPickLayerBuilder, HealthPickService, ResponseFuture,
};

//! Service discovery: destinations from sources other than the configuration — DNS,
//! a watched configuration file, or your own code — with the engine's identity rules, an update
//! guard no anchor has, staleness, first-sync and provenance.
//!
//! - A source publishes the **full set** of a cluster's endpoints through a [`Publisher`]
//!   ([`Engine::publisher`](crate::Engine::publisher)); the engine diffs it by key, so a
//!   surviving key keeps its health and in-flight count and a new address under a key starts
//!   over. That is also the way to add and remove destinations from your own code.
//! - The **update guard** holds a publication that would empty the source's destinations,
//!   remove at least half of them (configurable), or say the service does not exist, until it
//!   is confirmed after a delay, or the destinations it removes fail their probes too, or you
//!   force it ([`Publisher::force_held`]). Holding and releasing are events and show in the
//!   status.
//! - A source that fails keeps its last good set and is marked **stale** until it answers again.
//! - Until a source's **first answer**, `Engine::ready` waits (bounded) and a pick of a cluster
//!   that has nothing else says [`DiscoveryPending`](crate::PickError::DiscoveryPending).
//! - What a source says about an endpoint's health is a fourth health part
//!   ([`DiscoveryHealth`](crate::DiscoveryHealth)): `Unhealthy` excludes it, `Draining` ranks it
//!   with Degraded ones.
//!
//! Polling sources implement the small [`PollSource`] trait and run under [`poll`], which
//! handles refresh timing (the answer's validity within bounds, with jitter), backoff on errors
//! and cancellation. [`Discovery::start`] runs the sources a configuration's `Discovery`
//! sections name.
//!
//! | source | feature | what it reads |
//! |---|---|---|
//! | `Dns` (`DnsSource`) | `dns` | A/AAAA records (one destination per address) or SRV records |
//! | `ResolveDestinations` | `dns` | YARP's resolver: each configured destination's host, expanded per address |
//! | a configuration file (`ConfigFile`) | `file` | a YARP document reloaded whenever the file changes |

pub(crate) mod admit;
#[cfg(feature = "consul")]
#[cfg_attr(docsrs, doc(cfg(feature = "consul")))]
pub mod consul;
#[cfg(feature = "dns")]
#[cfg_attr(docsrs, doc(cfg(feature = "dns")))]
pub mod dns;
pub(crate) mod driver;
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub mod etcd;
#[cfg(feature = "file")]
#[cfg_attr(docsrs, doc(cfg(feature = "file")))]
pub mod file;
#[cfg(any(feature = "etcd", feature = "consul"))]
pub(crate) mod http;
#[cfg(feature = "kubernetes")]
#[cfg_attr(docsrs, doc(cfg(feature = "kubernetes")))]
pub mod kubernetes;
pub(crate) mod runner;
pub(crate) mod source;

pub use crate::engine::publisher::{Publisher, SourceSpec};
pub use driver::{poll, SourceTask};
#[cfg(feature = "file")]
pub use file::{ConfigFile, FileError, FileWatch};
pub use runner::Discovery;
pub use source::{Answer, BoxFuture, PollSource, SourceError};

//! Per-request settings carried in a request's extensions, for the integrations that take a
//! request they did not build: the `reqwest-middleware` middleware (`.with_extension(..)`) and
//! the tower layer (`request.extensions_mut().insert(..)`). The wrapped client's
//! [`RequestBuilder`](crate::RequestBuilder) has methods for the same settings instead.

use std::time::Duration;

use bytes::Bytes;

/// Marks a request as safe to retry even though its method is not idempotent (a POST the
/// service deduplicates, a gRPC call that is safe to repeat).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retryable;

/// Bounds one request's whole call (every attempt, retry and hedge), replacing the call timeout
/// of the middleware or layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallTimeout(pub Duration);

/// Bounds each attempt of one request until its response headers arrive, replacing the
/// cluster's `HttpRequest:ActivityTimeout` and the layer's attempt timeout (the tower layer;
/// through the middleware, reqwest's own `RequestBuilder::timeout` does this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptTimeout(pub Duration);

/// Turns hedging off for one request; a [`Hedging`](crate::Hedging) extension turns it on or
/// changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoHedging;

/// The affinity key of one request (its bytes: a user, cart or tenant id): for a cluster with
/// `SessionAffinity`, requests with the same key go to the same destination, and a retry goes
/// to the key's next choice. It wins over the key the cluster's `AffinityKeyName` names in the
/// request's headers or cookies, which is read when the request has no `AffinityKey`.
///
/// ```
/// # #[cfg(feature = "tower")]
/// # fn main() -> Result<(), http::Error> {
/// use healthpick::tower::AffinityKey;
///
/// let mut request = http::Request::get("http://carts/api/cart").body(())?;
/// request.extensions_mut().insert(AffinityKey::new("user-4711"));
/// # Ok(()) }
/// # #[cfg(not(feature = "tower"))]
/// # fn main() {}
/// ```
///
/// Through the middleware: `client.get(url).with_extension(AffinityKey::new("user-4711"))`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AffinityKey(pub Bytes);

impl AffinityKey {
    /// The key made of `key`'s bytes.
    pub fn new(key: impl AsRef<[u8]>) -> Self {
        AffinityKey(Bytes::copy_from_slice(key.as_ref()))
    }
}

//! The health-aware HTTP client (SPEC §8): a wrapped `reqwest::Client` that picks the
//! destination, reports every attempt's outcome to passive health checks (SPEC §4), and retries
//! an idempotent request that failed before any response on another destination — the next best
//! of the same tier, then the next tier — within a per-cluster retry budget. A connection that
//! could not be established is requeued: it does not use up an attempt (see [`RetryPolicy`]).
//!
//! | file | what it owns |
//! |---|---|
//! | `mod.rs` | [`HealthAwareClient`] and its constructors |
//! | `request.rs` | [`RequestBuilder`] and sending a call |
//! | `response.rs` | [`Response`], which keeps the destination in flight until its body is read |
//! | `failover.rs` | the failover step the client and the middleware share |
//! | `retry.rs` | [`RetryPolicy`] and the per-cluster retry budgets |
//! | `error.rs` | [`ClientError`] and [`AttemptFailure`] |

pub(crate) mod error;
pub(crate) mod failover;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod retry;

use std::sync::Arc;

use reqwest::Method;

pub use self::error::{AttemptFailure, ClientError};
pub use self::request::RequestBuilder;
pub use self::response::Response;
pub use self::retry::RetryPolicy;

use self::retry::Retries;
use crate::endpoint_set::EndpointSet;
use crate::engine::Engine;

/// A `reqwest::Client` that routes by cluster through an [`Engine`].
///
/// ```no_run
/// use healthpick::{Engine, HealthAwareClient};
///
/// # async fn run(engine: Engine) -> Result<(), Box<dyn std::error::Error>> {
/// let client = HealthAwareClient::new(reqwest::Client::new(), engine);
/// let response = client.get("payments", "/api/orders?id=7").send().await?;
/// println!("{} answered {}", response.destination().id(), response.status());
/// let body = response.text().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct HealthAwareClient {
    pub(crate) inner: Arc<ClientInner>,
}

#[derive(Debug)]
pub(crate) struct ClientInner {
    pub http: reqwest::Client,
    pub engine: Engine,
    pub default_cluster: Option<String>,
    pub retries: Retries,
}

impl HealthAwareClient {
    /// Wraps `http` (its pool, TLS and timeouts are used as they are) with the default
    /// [`RetryPolicy`].
    pub fn new(http: reqwest::Client, engine: Engine) -> Self {
        Self::with_retry_policy(http, engine, RetryPolicy::default())
    }

    /// Wraps `http` with a custom retry policy.
    pub fn with_retry_policy(http: reqwest::Client, engine: Engine, policy: RetryPolicy) -> Self {
        HealthAwareClient {
            inner: Arc::new(ClientInner {
                http,
                engine,
                default_cluster: None,
                retries: Retries::new(policy),
            }),
        }
    }

    /// A client for an [`EndpointSet`]: [`get_default`](Self::get_default) and friends use its
    /// cluster.
    pub fn for_endpoint_set(http: reqwest::Client, set: &EndpointSet) -> Self {
        HealthAwareClient {
            inner: Arc::new(ClientInner {
                http,
                engine: set.engine().clone(),
                default_cluster: Some(EndpointSet::CLUSTER.to_string()),
                retries: Retries::new(RetryPolicy::default()),
            }),
        }
    }

    /// The engine routing this client.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// A request with any method to `path` (`/api/orders?id=7`) on `cluster`.
    pub fn request(&self, method: Method, cluster: &str, path: &str) -> RequestBuilder {
        // One buffer for both: a request builder makes a single allocation of its own.
        let mut route = String::with_capacity(cluster.len() + path.len());
        route.push_str(cluster);
        route.push_str(path);
        RequestBuilder::new(self.clone(), route, cluster.len(), method)
    }

    /// A request on the default cluster (the endpoint set's).
    pub fn request_default(&self, method: Method, path: &str) -> RequestBuilder {
        let cluster = self.inner.default_cluster.clone().unwrap_or_default();
        self.request(method, &cluster, path)
    }

    /// `GET` on the default cluster.
    pub fn get_default(&self, path: &str) -> RequestBuilder {
        self.request_default(Method::GET, path)
    }

    /// `GET`.
    pub fn get(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::GET, cluster, path)
    }

    /// `POST` (not retried unless marked [`retryable`](RequestBuilder::retryable)).
    pub fn post(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::POST, cluster, path)
    }

    /// `PUT`.
    pub fn put(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::PUT, cluster, path)
    }

    /// `DELETE`.
    pub fn delete(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::DELETE, cluster, path)
    }

    /// `HEAD`.
    pub fn head(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::HEAD, cluster, path)
    }
}

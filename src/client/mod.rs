//! The health-aware HTTP client: a wrapped `reqwest::Client` that picks the
//! destination (by the request's affinity key when its cluster has `SessionAffinity`), reports
//! every attempt's outcome, time and reported load, bounds every attempt and call by a timeout,
//! retries a retryable request that failed before any response or was answered with a gateway
//! status on another destination — the next best of the same tier, or the next tier after a
//! failure past connecting, or a keyed request's next choice — within a per-cluster retry
//! budget, and hedges slow attempts when asked to.
//!
//! | file | what it owns |
//! |---|---|
//! | `mod.rs` | [`HealthAwareClient`], its builder and constructors |
//! | `request.rs` | [`RequestBuilder`] and how the client sends one attempt |
//! | `affinity.rs` | a call's affinity key: the caller's, or the header or cookie its cluster names |
//! | `response.rs` | [`Response`], which keeps the destination in flight until its body is read |
//! | `failover.rs` | the failover step the client, the middleware and the tower layer share: every decision |
//! | `drive.rs` | the loop that drives a call through the failover step, with or without a hedge; load reports |
//! | `call_timer.rs` | the one timer of a call and the spares a thread keeps of it |
//! | `retry.rs` | [`RetryPolicy`], [`RetryStatuses`], attempt counting, the per-cluster budgets |
//! | `budget.rs` | the lock-free windowed token budget retries and hedges spend |
//! | `timeouts.rs` | [`Timeouts`] and their defaults |
//! | `hedging.rs` | [`Hedging`] and the latency percentiles it can wait for |
//! | `error.rs` | [`ClientError`], [`AttemptFailure`], [`AttemptError`] |

pub(crate) mod affinity;
pub(crate) mod budget;
pub(crate) mod call_timer;
pub(crate) mod drive;
pub(crate) mod error;
#[cfg(any(feature = "middleware", feature = "tower"))]
pub(crate) mod extensions;
pub(crate) mod failover;
pub(crate) mod hedging;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod retry;
pub(crate) mod span;
pub(crate) mod timeouts;

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;

pub use self::error::{AttemptError, AttemptFailure, ClientError};
pub use self::hedging::{HedgeDelay, Hedging};
pub use self::request::RequestBuilder;
pub use self::response::Response;
pub use self::retry::{RetryPolicy, RetryStatuses};
pub use self::timeouts::Timeouts;

use self::failover::CallPolicy;
use self::retry::Budgets;
use crate::endpoint_set::EndpointSet;
use crate::engine::Engine;

/// A `reqwest::Client` that routes by cluster through an [`Engine`].
///
/// ```no_run
/// use healthpick::{Engine, HealthAwareClient, Timeouts};
/// use std::time::Duration;
///
/// # async fn run(engine: Engine) -> Result<(), Box<dyn std::error::Error>> {
/// let client = HealthAwareClient::builder(engine)
///     .timeouts(Timeouts::default().attempt(Duration::from_secs(5)))
///     .build()?;
/// let response = client.get("payments", "/api/orders?id=7").send().await?;
/// println!("{} answered {}", response.destination().id(), response.status());
/// let body = response.error_for_status()?.text().await?;
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
    pub calls: CallPolicy,
}

impl HealthAwareClient {
    /// A builder for a client routing through `engine`: the reqwest client (or its builder),
    /// timeouts, retry policy, hedging, a default cluster.
    pub fn builder(engine: Engine) -> HealthAwareClientBuilder {
        HealthAwareClientBuilder {
            engine,
            http: None,
            connect_timeout: Some(Timeouts::DEFAULT_CONNECT),
            connect_timeout_set: false,
            timeouts: Timeouts::default(),
            policy: RetryPolicy::default(),
            hedging: None,
            default_cluster: None,
        }
    }

    /// A builder for a client of an [`EndpointSet`]: [`get_default`](Self::get_default) and
    /// friends use its cluster.
    pub fn builder_for_endpoint_set(set: &EndpointSet) -> HealthAwareClientBuilder {
        let mut builder = Self::builder(set.engine().clone());
        builder.default_cluster = Some(EndpointSet::CLUSTER.to_string());
        builder
    }

    /// Wraps `http` (its pool, TLS and own timeouts are used as they are) with the default
    /// [`RetryPolicy`] and [`Timeouts`] (15 s per attempt, 30 s per call; the connect timeout is
    /// `http`'s). The same as `builder(engine).http(http)`.
    pub fn new(http: reqwest::Client, engine: Engine) -> Self {
        Self::with_retry_policy(http, engine, RetryPolicy::default())
    }

    /// Wraps `http` with a custom retry policy and the default timeouts.
    pub fn with_retry_policy(http: reqwest::Client, engine: Engine, policy: RetryPolicy) -> Self {
        Self::builder(engine).retry_policy(policy).wrap(http)
    }

    /// A client for an [`EndpointSet`] with the default retry policy and timeouts:
    /// [`get_default`](Self::get_default) and friends use its cluster.
    pub fn for_endpoint_set(http: reqwest::Client, set: &EndpointSet) -> Self {
        Self::builder_for_endpoint_set(set).wrap(http)
    }

    /// The engine routing this client.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The timeouts this client's calls have unless a request or its cluster sets its own.
    pub fn timeouts(&self) -> Timeouts {
        self.inner.calls.timeouts
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.inner.calls.budgets.policy
    }

    /// The hedging of this client's calls, unless a request sets its own (none by default).
    pub fn hedging(&self) -> Option<Hedging> {
        self.inner.calls.hedging
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

    /// `PATCH` (not retried unless marked [`retryable`](RequestBuilder::retryable)).
    pub fn patch(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::PATCH, cluster, path)
    }

    /// `OPTIONS`.
    pub fn options(&self, cluster: &str, path: &str) -> RequestBuilder {
        self.request(Method::OPTIONS, cluster, path)
    }
}

/// Builds a [`HealthAwareClient`]: see [`HealthAwareClient::builder`].
///
/// ```
/// use healthpick::{Engine, HealthAwareClient, Hedging, RetryPolicy, Timeouts};
/// use std::time::Duration;
///
/// let engine = Engine::from_json(r#"{"Clusters": {"payments": {"Destinations": {
///     "eu-1": { "Address": "http://127.0.0.1:8001/" } } } } }"#)?;
/// let client = HealthAwareClient::builder(engine)
///     .http_builder(reqwest::Client::builder().user_agent("orders/1.0"))
///     .connect_timeout(Duration::from_secs(1))
///     .timeouts(Timeouts::default().attempt(Duration::from_secs(3)).call(Duration::from_secs(8)))
///     .retry_policy(RetryPolicy::default().max_attempts(2))
///     .hedging(Hedging::at_percentile(95.0))
///     .build()?;
/// assert_eq!(client.timeouts().attempt, Some(Duration::from_secs(3)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until built"]
pub struct HealthAwareClientBuilder {
    engine: Engine,
    http: Option<Http>,
    connect_timeout: Option<Duration>,
    connect_timeout_set: bool,
    timeouts: Timeouts,
    policy: RetryPolicy,
    hedging: Option<Hedging>,
    default_cluster: Option<String>,
}

/// Where the reqwest client comes from.
#[derive(Debug)]
enum Http {
    Client(reqwest::Client),
    Builder(Box<reqwest::ClientBuilder>),
}

impl HealthAwareClientBuilder {
    /// Sends through `http`, a client you built: its pool, TLS, proxies and own timeouts are
    /// used as they are, and its connect timeout is the one that applies (healthpick cannot
    /// change a built client's). Default: a client healthpick builds, with
    /// [`connect_timeout`](Self::connect_timeout).
    pub fn http(mut self, http: reqwest::Client) -> Self {
        self.http = Some(Http::Client(http));
        self
    }

    /// Builds the reqwest client from `builder` (your TLS, proxies, headers), with
    /// healthpick's [`connect_timeout`](Self::connect_timeout) set on it.
    pub fn http_builder(mut self, builder: reqwest::ClientBuilder) -> Self {
        self.http = Some(Http::Builder(Box::new(builder)));
        self
    }

    /// How long establishing a connection may take, on the reqwest client healthpick builds
    /// (`None`: no bound but the attempt timeout). Default 2 s
    /// ([`Timeouts::DEFAULT_CONNECT`]). A connect timeout is a connect failure: the call moves
    /// on to another destination without using up an attempt.
    pub fn connect_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.connect_timeout = timeout.into();
        self.connect_timeout_set = true;
        self
    }

    /// The attempt and call timeouts (default 15 s and 30 s; see [`Timeouts`]).
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The retry policy (attempts, statuses, budget). Default [`RetryPolicy::default`].
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Hedges every retryable call (a request can turn it off or change it). Default: none.
    pub fn hedging(mut self, hedging: impl Into<Option<Hedging>>) -> Self {
        self.hedging = hedging.into();
        self
    }

    /// The cluster of [`get_default`](HealthAwareClient::get_default) and friends.
    pub fn default_cluster(mut self, cluster: impl Into<String>) -> Self {
        self.default_cluster = Some(cluster.into());
        self
    }

    /// The client.
    ///
    /// # Errors
    /// [`ClientError::Builder`] when reqwest cannot build its client (a TLS backend that fails
    /// to start), or when a connect timeout was set for a reqwest client built elsewhere.
    pub fn build(mut self) -> Result<HealthAwareClient, ClientError> {
        let http = match self.http.take() {
            Some(Http::Client(http)) if self.connect_timeout_set => {
                drop(http);
                return Err(ClientError::builder(
                    "connect_timeout cannot change a reqwest::Client that is already built: set \
                     it on its builder, or pass the builder with http_builder",
                ));
            }
            Some(Http::Client(http)) => http,
            Some(Http::Builder(builder)) => self.build_http(*builder)?,
            None => self.build_http(reqwest::Client::builder())?,
        };
        Ok(self.wrap(http))
    }

    fn build_http(&self, builder: reqwest::ClientBuilder) -> Result<reqwest::Client, ClientError> {
        let builder = match self.connect_timeout {
            Some(timeout) => builder.connect_timeout(timeout),
            None => builder,
        };
        builder
            .build()
            .map_err(|e| ClientError::builder_with("reqwest client", e))
    }

    fn wrap(self, http: reqwest::Client) -> HealthAwareClient {
        HealthAwareClient {
            inner: Arc::new(ClientInner {
                http,
                engine: self.engine,
                default_cluster: self.default_cluster,
                calls: CallPolicy {
                    budgets: Budgets::new(self.policy),
                    timeouts: self.timeouts,
                    hedging: self.hedging,
                },
            }),
        }
    }
}

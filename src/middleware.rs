//! `reqwest-middleware` integration (feature `middleware`, SPEC §8): a [`Middleware`] that
//! routes requests whose URL host is a cluster id — `http://payments/api/orders`, the convention
//! of Spring's load-balanced clients — and leaves every other URL alone. It reports outcomes and
//! retries like [`HealthAwareClient`](crate::HealthAwareClient) (connect failures requeued, by the
//! same [`RetryPolicy`]), so it composes with the tracing and retry middleware an application
//! already runs.
//!
//! Unlike the wrapped client, the middleware hands back a plain `reqwest::Response`, so a
//! destination counts as in flight until the response headers arrived, not until its body is
//! read.

use std::sync::Arc;

use reqwest::header::{HeaderValue, HOST};
use reqwest_middleware::{Middleware, Next};

use crate::client::error::ClientError;
use crate::client::failover::{Attempt, Failover};
use crate::client::retry::{is_idempotent, Retries, RetryPolicy};
use crate::engine::Engine;
use crate::uri::request_url;

/// Marks a request as safe to retry even though its method is not idempotent: insert it into
/// the request's extensions (`.with_extension(Retryable)`).
#[derive(Debug, Clone, Copy)]
pub struct Retryable;

/// Routes `http://<cluster-id>/path` through the engine.
///
/// ```
/// use healthpick::middleware::HealthPickMiddleware;
/// use healthpick::Engine;
///
/// let engine = Engine::from_json(r#"{"Clusters": {"payments": {"Destinations": {
///     "eu-1": { "Address": "http://127.0.0.1:8001/" } } } } }"#)?;
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(HealthPickMiddleware::new(engine))
///     .build();
/// // client.get("http://payments/api/orders").send().await goes to eu-1.
/// # drop(client);
/// # Ok::<(), healthpick::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct HealthPickMiddleware {
    engine: Engine,
    retries: Arc<Retries>,
}

impl HealthPickMiddleware {
    /// A middleware routing through `engine` with the default [`RetryPolicy`].
    pub fn new(engine: Engine) -> Self {
        Self::with_retry_policy(engine, RetryPolicy::default())
    }

    /// A middleware with a custom retry policy.
    pub fn with_retry_policy(engine: Engine, policy: RetryPolicy) -> Self {
        HealthPickMiddleware {
            engine,
            retries: Arc::new(Retries::new(policy)),
        }
    }
}

#[async_trait::async_trait]
impl Middleware for HealthPickMiddleware {
    async fn handle(
        &self,
        req: reqwest::Request,
        extensions: &mut http::Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let cluster = match req.url().host_str() {
            Some(host) if self.engine.has_cluster(host) => host.to_string(),
            _ => return next.run(req, extensions).await,
        };
        let mut path = req.url().path().to_string();
        if let Some(query) = req.url().query() {
            path.push('?');
            path.push_str(query);
        }
        let retryable = (is_idempotent(req.method()) || extensions.get::<Retryable>().is_some())
            && req.try_clone().is_some();
        let (mut failover, mut pick) =
            Failover::start(&self.engine, &self.retries, &cluster, retryable)
                .await
                .map_err(|e| reqwest_middleware::Error::middleware(ClientError::from(e)))?;
        // A request that cannot be retried is moved into its only attempt; a retryable one is
        // cloned for each, since a requeued connect failure may follow any attempt.
        let mut original = Some(req);
        loop {
            let mut request = if retryable {
                original.as_ref().and_then(reqwest::Request::try_clone)
            } else {
                original.take()
            }
            .ok_or_else(|| {
                reqwest_middleware::Error::middleware(ClientError::Builder(
                    "the request body cannot be sent again".into(),
                ))
            })?;
            *request.url_mut() = request_url(pick.address(), &path);
            if let Some(value) = pick
                .destination()
                .with_attributes(|a| a.host().and_then(|h| HeaderValue::from_str(h).ok()))
            {
                request.headers_mut().insert(HOST, value);
            }
            let attempt = Attempt::new(pick);
            let error = match next.clone().run(request, extensions).await {
                Ok(response) => {
                    // The middleware hands back a plain response: the destination leaves the
                    // in-flight count now.
                    drop(attempt.answered(response.status().as_u16()));
                    return Ok(response);
                }
                Err(error) => error,
            };
            let failed = attempt.failed();
            let connect = matches!(&error, reqwest_middleware::Error::Reqwest(e) if e.is_connect());
            tracing::debug!(target: "healthpick", %cluster, destination = %failed.id(), error = %error, "attempt failed");
            // Nothing left to fail over to, or no budget: the caller sees the last transport
            // error (something was sent), not "no available destinations".
            match failover.next(&failed, connect) {
                Some(next_pick) => pick = next_pick,
                None => return Err(error),
            }
        }
    }
}

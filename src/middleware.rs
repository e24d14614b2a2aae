//! `reqwest-middleware` integration (feature `middleware`, SPEC §8): a [`Middleware`] that
//! routes requests whose URL host is a cluster id — `http://payments/api/orders`, the convention
//! of Spring's load-balanced clients — and leaves every other URL alone. It reports outcomes and
//! retries like [`HealthAwareClient`](crate::HealthAwareClient), so it composes with the tracing
//! and retry middleware an application already runs.
//!
//! Unlike the wrapped client, the middleware hands back a plain `reqwest::Response`, so a
//! destination counts as in flight until the response headers arrived, not until its body is
//! read.

use std::sync::Arc;

use reqwest::header::{HeaderValue, HOST};
use reqwest_middleware::{Middleware, Next};

use crate::client::{is_idempotent, Attempt, ClientError, Retries, RetryPolicy};
use crate::engine::Engine;

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
        let budget = self.retries.request(&cluster);
        let max_attempts = self.retries.policy.max_attempts.max(1);
        let mut tried: Vec<String> = Vec::new();
        let mut original = Some(req);
        let mut attempt = 1;
        let mut last_error = None;
        loop {
            let pick = if tried.is_empty() {
                self.engine.pick_endpoint_ready(&cluster).await
            } else {
                self.engine.pick_endpoint_excluding(&cluster, &tried)
            };
            let pick = match (pick, last_error.take()) {
                (Ok(pick), _) => pick,
                // Nothing left to fail over to: the caller sees the last transport error.
                (Err(_), Some(error)) => return Err(error),
                (Err(e), None) => {
                    return Err(reqwest_middleware::Error::middleware(ClientError::from(e)))
                }
            };
            let last = !retryable || attempt == max_attempts;
            let mut request = match (&original, last) {
                (Some(r), false) => r.try_clone(),
                _ => original.take(),
            }
            .ok_or_else(|| {
                reqwest_middleware::Error::middleware(ClientError::Builder(
                    "the request body cannot be sent again".into(),
                ))
            })?;
            *request.url_mut() = crate::uri::request_url(pick.address(), &path)
                .map_err(|e| reqwest_middleware::Error::middleware(ClientError::Builder(e)))?;
            if let Some(value) = pick
                .destination()
                .host()
                .and_then(|h| HeaderValue::from_str(h).ok())
            {
                request.headers_mut().insert(HOST, value);
            }
            let guard = Attempt::new(pick);
            match next.clone().run(request, extensions).await {
                Ok(response) => {
                    guard.succeed(response.status().as_u16());
                    return Ok(response);
                }
                Err(error) => {
                    let destination = guard.fail();
                    tried.push(destination);
                    if last || !budget_allows(&budget) {
                        return Err(error);
                    }
                    last_error = Some(error);
                }
            }
            attempt += 1;
        }
    }
}

fn budget_allows(budget: &tower::retry::budget::TpsBudget) -> bool {
    use tower::retry::budget::Budget;
    budget.withdraw()
}

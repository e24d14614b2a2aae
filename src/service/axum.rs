//! Ready-made axum endpoints for the service side, behind the `axum` feature.
//!
//! Thin on purpose: everything they serve comes from [`Draining`]; the status-code rule is
//! [`status_code`](super::status_code).

use ::axum::extract::State;
use ::axum::http::{header, HeaderValue, StatusCode};
use ::axum::response::{IntoResponse, Response};
use ::axum::routing::get;
use ::axum::{Json, Router};
use serde::Serialize;

use super::draining::Draining;
use crate::health::payload::status_code;

/// An axum router serving a service's health endpoints from `draining`:
///
/// - `GET /api/systemstatus`: the [`HealthPayload`](super::HealthPayload) JSON, `200` for
///   `Healthy` and `Degraded`, `503` for `Unhealthy`. This is the endpoint to point callers'
///   active health checks at (`"Path": "/api/systemstatus"`).
/// - `GET /api/health/details`: the same payload plus the draining details of
///   [`HealthDetails`](super::HealthDetails) (`draining`, `status_while_draining`,
///   `drain_delay_ms`, `drain_remaining_ms`), with the same status code, for operators.
///
/// Both answer `Content-Type: application/json` and `Cache-Control: no-store`; `HEAD` works too.
/// Merge it into your app: `app.merge(health_router(draining.clone()))`.
///
/// ```
/// use healthpick::service::{health_router, Draining};
///
/// let draining = Draining::new();
/// let app: axum::Router = axum::Router::new().merge(health_router(draining.clone()));
/// # drop(app);
/// ```
pub fn health_router(draining: Draining) -> Router {
    Router::new()
        .route("/api/systemstatus", get(system_status))
        .route("/api/health/details", get(health_details))
        .with_state(draining)
}

async fn system_status(State(draining): State<Draining>) -> Response {
    let payload = draining.payload();
    json_response(payload.status_code(), &payload)
}

async fn health_details(State(draining): State<Draining>) -> Response {
    let details = draining.details();
    json_response(status_code(details.payload.status), &details)
}

fn json_response<T: Serialize>(code: u16, body: &T) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let mut response = (code, Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

//! The probe request: what one active health check sends and how its response is
//! judged. The [`monitor`](crate::monitor) decides when to probe; this module only probes.
//!
//! A probe is a `GET` with no body, `User-Agent: healthpick/<version> (active health check)`, the
//! destination's `Host` header if configured, HTTP/1.1 unless the cluster asks for HTTP/2, and no
//! redirects (a 3xx is a failure). One timeout covers connecting, the headers and reading the body,
//! of which at most [`MAX_PROBE_BODY`] bytes are read. A 2xx is a success unless its body is a
//! health payload saying `Unhealthy`.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, HOST, USER_AGENT};
use reqwest::{Method, Version};
use url::Url;

use crate::config::http_version::{parse_http_version, HttpVersion};
use crate::config::model::ClusterConfig;
use crate::destination::Destination;
use crate::health::payload::HealthPayload;
use crate::health::probe_result::ProbeResult;
use crate::uri::probe_uri;

/// At most this much of a probe's body is read (64 KiB); a longer body is cut there.
pub const MAX_PROBE_BODY: usize = 64 * 1024;

/// The `User-Agent` of probes.
pub const PROBE_USER_AGENT: &str = concat!(
    "healthpick/",
    env!("CARGO_PKG_VERSION"),
    " (active health check)"
);

/// One probe to send: method, URI, headers and HTTP version.
#[derive(Debug, Clone)]
pub struct ProbeRequest {
    /// Default `GET`.
    pub method: Method,
    /// The probe URI.
    pub uri: Url,
    /// Headers; the default carries `User-Agent` and, when configured, `Host`.
    pub headers: HeaderMap,
    /// Default HTTP/1.1; HTTP/2 when the cluster's `HttpRequest:Version` is `2`.
    pub version: Version,
}

/// Builds the probe request for a destination (YARP's `IProbingRequestFactory`). Replace it to
/// probe with another method, extra headers or a different URI.
///
/// ```
/// use healthpick::probe::{DefaultProbeRequestFactory, ProbeRequest, ProbeRequestFactory};
/// use healthpick::config::ClusterConfig;
/// use healthpick::Destination;
/// use reqwest::header::HeaderValue;
///
/// /// The default probe plus an API key.
/// struct WithKey;
/// impl ProbeRequestFactory for WithKey {
///     fn create(&self, cluster: &ClusterConfig, destination: &Destination) -> Result<ProbeRequest, String> {
///         let mut request = DefaultProbeRequestFactory.create(cluster, destination)?;
///         request.headers.insert("x-api-key", HeaderValue::from_static("secret"));
///         Ok(request)
///     }
/// }
/// ```
pub trait ProbeRequestFactory: Send + Sync + 'static {
    /// The request probing `destination` of `cluster`.
    ///
    /// # Errors
    /// Why no request can be built; the probe then counts as failed with that reason.
    fn create(
        &self,
        cluster: &ClusterConfig,
        destination: &Destination,
    ) -> Result<ProbeRequest, String>;
}

/// The probe: `GET` of the probe URI with the healthpick User-Agent and the destination's
/// Host header.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultProbeRequestFactory;

impl ProbeRequestFactory for DefaultProbeRequestFactory {
    fn create(
        &self,
        cluster: &ClusterConfig,
        destination: &Destination,
    ) -> Result<ProbeRequest, String> {
        let active = cluster.health_check().active();
        let attributes = destination.attributes();
        let base = attributes.health_url().unwrap_or(destination.address());
        let uri = probe_uri(base.as_str(), active.path_setting(), active.query_setting())?;
        let mut headers = HeaderMap::new();
        headers.insert(USER_AGENT, HeaderValue::from_static(PROBE_USER_AGENT));
        if let Some(host) = attributes.host() {
            let value = HeaderValue::from_str(host)
                .map_err(|_| format!("Host `{host}` is not a valid header value"))?;
            headers.insert(HOST, value);
        }
        // Cleartext HTTP/2 needs prior knowledge that most servers lack; like YARP's default
        // `RequestVersionOrLower`, a cleartext probe stays on HTTP/1.1.
        let version = match uri.scheme() {
            "https" => http_version(cluster.http_version_setting()),
            _ => Version::HTTP_11,
        };
        Ok(ProbeRequest {
            method: Method::GET,
            uri,
            headers,
            version,
        })
    }
}

/// `HttpRequest:Version` as YARP reads it (`"1.0"`, `"1.1"`, `"2"`, `"2.0"`); anything else,
/// HTTP/3 included (which probes do not speak; validation warns), is HTTP/1.1.
fn http_version(setting: Option<&str>) -> Version {
    match setting.map(parse_http_version) {
        Some(HttpVersion::Supported(2, 0)) => Version::HTTP_2,
        Some(HttpVersion::Supported(1, 0)) => Version::HTTP_10,
        _ => Version::HTTP_11,
    }
}

/// The HTTP client probes share: one connection pool, no redirects, no proxy.
pub(crate) fn probe_client(accept_invalid_certs: bool) -> reqwest::Client {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .pool_idle_timeout(Duration::from_secs(90));
    #[cfg(any(feature = "rustls", feature = "native-tls"))]
    let builder = builder.tls_danger_accept_invalid_certs(accept_invalid_certs);
    #[cfg(not(any(feature = "rustls", feature = "native-tls")))]
    let _ = accept_invalid_certs;
    builder.build().unwrap_or_else(|e| {
        tracing::error!(target: "healthpick", "cannot build the probe client ({e}); using defaults");
        reqwest::Client::new()
    })
}

/// Sends one probe and judges it. Never takes longer than `timeout`, never panics.
pub(crate) async fn send(
    client: &reqwest::Client,
    destination: Arc<str>,
    request: Result<ProbeRequest, String>,
    timeout: Duration,
) -> ProbeResult {
    let request = match request {
        Ok(r) => r,
        Err(why) => {
            return ProbeResult::error(&*destination, format!("cannot build the probe: {why}"))
        }
    };
    match tokio::time::timeout(timeout, exchange(client, request)).await {
        Ok(Ok((status, body))) => {
            let result = ProbeResult::status(&*destination, status);
            match body
                .filter(|_| (200..300).contains(&status))
                .and_then(|b| HealthPayload::parse(&b))
                .and_then(|p| p.reported())
            {
                Some(reported) => result.with_payload(reported),
                None => result,
            }
        }
        Ok(Err(e)) => ProbeResult::error(&*destination, e),
        Err(_) => ProbeResult::error(
            &*destination,
            format!("timed out after {} ms", timeout.as_millis()),
        ),
    }
}

/// Status and (for a 2xx) the first [`MAX_PROBE_BODY`] bytes of the body.
async fn exchange(
    client: &reqwest::Client,
    request: ProbeRequest,
) -> Result<(u16, Option<Vec<u8>>), String> {
    let mut response = client
        .request(request.method, request.uri)
        .headers(request.headers)
        .version(request.version)
        .send()
        .await
        .map_err(|e| describe(&e))?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        return Ok((status, None));
    }
    let mut body = Vec::new();
    while body.len() < MAX_PROBE_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = MAX_PROBE_BODY - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) => break,
            Err(e) => return Err(format!("reading the body failed: {}", describe(&e))),
        }
    }
    Ok((status, Some(body)))
}

/// A reqwest error with its causes, which carry the useful part ("connection refused").
fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_connect() {
        "connect failed".to_string()
    } else if e.is_timeout() {
        "timed out".to_string()
    } else {
        e.to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Engine;

    /// The probe request the default factory builds for the only destination of a cluster.
    fn probe_for(address: &str, version: Option<&str>) -> ProbeRequest {
        let version = version.map_or(String::new(), |v| {
            format!(r#", "HttpRequest": {{ "Version": "{v}" }}"#)
        });
        let json = format!(
            r#"{{"Clusters": {{"c": {{
                "HealthCheck": {{ "Active": {{ "Enabled": true, "Path": "/health" }} }}{version},
                "Destinations": {{ "d": {{ "Address": "{address}", "Host": "svc.internal" }} }} }} }} }}"#
        );
        let engine = Engine::from_json(&json).unwrap();
        let config = crate::Config::from_json(&json).unwrap();
        let destination = engine.best_endpoints("c").unwrap().destinations[0].clone();
        DefaultProbeRequestFactory
            .create(&config.clusters()[0], &destination)
            .unwrap()
    }

    #[test]
    fn default_probe_is_a_get_with_user_agent_host_and_http11() {
        let p = probe_for("http://127.0.0.1:8080/api", None);
        assert_eq!(p.method, Method::GET);
        assert_eq!(p.uri.as_str(), "http://127.0.0.1:8080/api/health");
        assert_eq!(p.headers[USER_AGENT], PROBE_USER_AGENT);
        assert!(
            PROBE_USER_AGENT.starts_with("healthpick/")
                && PROBE_USER_AGENT.ends_with(" (active health check)")
        );
        assert_eq!(p.headers[HOST], "svc.internal");
        assert_eq!(p.version, Version::HTTP_11);
    }

    #[test]
    fn http2_is_asked_for_over_tls_only() {
        assert_eq!(
            probe_for("https://10.0.0.1/", Some("2")).version,
            Version::HTTP_2
        );
        assert_eq!(
            probe_for("https://10.0.0.1/", Some("2.0")).version,
            Version::HTTP_2
        );
        assert_eq!(
            probe_for("https://10.0.0.1/", Some("1.1")).version,
            Version::HTTP_11
        );
        assert_eq!(
            probe_for("https://10.0.0.1/", None).version,
            Version::HTTP_11
        );
        // Cleartext h2 needs prior knowledge most servers lack: stay on HTTP/1.1.
        assert_eq!(
            probe_for("http://10.0.0.1/", Some("2")).version,
            Version::HTTP_11
        );
    }
}

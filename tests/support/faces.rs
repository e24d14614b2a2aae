//! The three ways a caller sends a request through healthpick — the wrapped client, the
//! reqwest middleware (feature `middleware`) and the tower layer over a hyper-util client
//! (feature `tower`) — behind one call, so that a test of what all three must do is written
//! once and run through each.

use std::fmt;

use healthpick::{Engine, HealthAwareClient, Hedging};

use super::clients::http_client;

/// A GET as a test describes it: its path, its headers (in order; a name given twice is sent
/// twice), an explicit affinity key and its hedging.
#[derive(Debug, Clone)]
pub struct Call {
    path: String,
    headers: Vec<(&'static str, String)>,
    key: Option<String>,
    hedging: Option<Hedging>,
}

impl Call {
    /// A GET of `path` (`/api/cart`).
    pub fn get(path: &str) -> Call {
        Call {
            path: path.to_string(),
            headers: Vec::new(),
            key: None,
            hedging: None,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Call {
        self.headers.push((name, value.into()));
        self
    }

    /// Gives the request this affinity key explicitly (the client's `affinity_key`, the
    /// integrations' `AffinityKey` extension).
    pub fn key(mut self, key: impl Into<String>) -> Call {
        self.key = Some(key.into());
        self
    }

    /// Hedges the request (the client's `hedging`, the integrations' `Hedging` extension).
    pub fn hedging(mut self, hedging: Hedging) -> Call {
        self.hedging = Some(hedging);
        self
    }
}

/// A call that healthpick failed.
#[derive(Debug)]
pub struct Failure {
    /// The error as the caller sees it.
    pub message: String,
    /// Whether it is healthpick's error for a key whose destination is unavailable
    /// (`ClientError::is_affinity_unavailable`).
    pub affinity_unavailable: bool,
}

/// One way to send requests, routing through an engine.
pub enum Face {
    Client(HealthAwareClient),
    #[cfg(feature = "middleware")]
    Middleware(reqwest_middleware::ClientWithMiddleware),
    #[cfg(feature = "tower")]
    Tower(Box<healthpick::tower::HealthPickService<tower_face::Http>>),
}

impl fmt::Display for Face {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Face::Client(_) => "the wrapped client",
            #[cfg(feature = "middleware")]
            Face::Middleware(_) => "the middleware",
            #[cfg(feature = "tower")]
            Face::Tower(_) => "the tower layer",
        })
    }
}

impl Face {
    /// Every face the enabled features offer, each routing through `engine` with its
    /// defaults.
    pub fn all(engine: &Engine) -> Vec<Face> {
        #[allow(unused_mut)]
        let mut faces = vec![Face::Client(
            HealthAwareClient::builder(engine.clone())
                .http(http_client())
                .build()
                .expect("client"),
        )];
        #[cfg(feature = "middleware")]
        faces.push(Face::Middleware(
            reqwest_middleware::ClientBuilder::new(http_client())
                .with(healthpick::middleware::HealthPickMiddleware::new(
                    engine.clone(),
                ))
                .build(),
        ));
        #[cfg(feature = "tower")]
        faces.push(Face::Tower(Box::new(tower_face::service(engine))));
        faces
    }

    /// How many faces [`all`](Self::all) offers.
    pub fn count() -> usize {
        1 + usize::from(cfg!(feature = "middleware")) + usize::from(cfg!(feature = "tower"))
    }

    /// The `i`th face of [`all`](Self::all), routing through `engine`: for a test that wants
    /// an engine of its own for each face.
    pub fn nth(engine: &Engine, i: usize) -> Face {
        Face::all(engine).swap_remove(i)
    }

    /// Sends `call` to `cluster`; its status and body, or how healthpick failed it.
    pub async fn send(&self, cluster: &str, call: &Call) -> Result<(u16, String), Failure> {
        match self {
            Face::Client(client) => {
                let mut request = client.get(cluster, &call.path);
                for (name, value) in &call.headers {
                    request = request.header(*name, value.as_str());
                }
                if let Some(key) = &call.key {
                    request = request.affinity_key(key);
                }
                if let Some(hedging) = call.hedging {
                    request = request.hedging(hedging);
                }
                let failed = |e: healthpick::ClientError| Failure {
                    message: e.to_string(),
                    affinity_unavailable: e.is_affinity_unavailable(),
                };
                let response = request.send().await.map_err(failed)?;
                let status = response.status().as_u16();
                Ok((status, response.text().await.map_err(failed)?))
            }
            #[cfg(feature = "middleware")]
            Face::Middleware(client) => {
                let mut request = client.get(format!("http://{cluster}{}", call.path));
                for (name, value) in &call.headers {
                    request = request.header(*name, value.as_str());
                }
                if let Some(key) = &call.key {
                    request = request.with_extension(healthpick::middleware::AffinityKey::new(key));
                }
                if let Some(hedging) = call.hedging {
                    request = request.with_extension(hedging);
                }
                let failed = |e: reqwest_middleware::Error| Failure {
                    message: e.to_string(),
                    affinity_unavailable: healthpick::middleware::client_error(&e)
                        .is_some_and(|e| e.is_affinity_unavailable()),
                };
                let response = request.send().await.map_err(failed)?;
                let status = response.status().as_u16();
                let body = response.text().await.map_err(|e| failed(e.into()))?;
                Ok((status, body))
            }
            #[cfg(feature = "tower")]
            Face::Tower(service) => tower_face::send(service, cluster, call).await,
        }
    }
}

#[cfg(feature = "tower")]
mod tower_face {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use tower::ServiceExt;

    use healthpick::tower::{client_error, AffinityKey, HealthPickLayer, HealthPickService};
    use healthpick::Engine;

    use super::{Call, Failure};

    pub type Http = Client<HttpConnector, Full<Bytes>>;

    pub fn service(engine: &Engine) -> HealthPickService<Http> {
        let http = Client::builder(TokioExecutor::new()).build_http();
        tower::Layer::layer(&HealthPickLayer::new(engine.clone()), http)
    }

    pub async fn send(
        service: &HealthPickService<Http>,
        cluster: &str,
        call: &Call,
    ) -> Result<(u16, String), Failure> {
        let mut request = http::Request::get(format!("http://{cluster}{}", call.path));
        for (name, value) in &call.headers {
            request = request.header(*name, value.as_str());
        }
        let mut request = request.body(Full::default()).expect("request");
        if let Some(key) = &call.key {
            request.extensions_mut().insert(AffinityKey::new(key));
        }
        if let Some(hedging) = call.hedging {
            request.extensions_mut().insert(hedging);
        }
        let response = service
            .clone()
            .oneshot(request)
            .await
            .map_err(|e| Failure {
                message: e.to_string(),
                affinity_unavailable: client_error(&e).is_some_and(|e| e.is_affinity_unavailable()),
            })?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| Failure {
                message: e.to_string(),
                affinity_unavailable: false,
            })?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}

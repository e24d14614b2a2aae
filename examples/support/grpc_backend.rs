//! A real gRPC backend on 127.0.0.1 for the tonic example and tests: a tonic server with the
//! standard gRPC health service (so no protobuf code is generated), which reports its own name
//! as a serving service (`who.<name>`: a caller learns who answered), and beside it a plain HTTP
//! health endpoint (`GET /health`, 200) for healthpick's probes, on its own port — the
//! destination's `Health` address. Killing it stops both.

#![allow(dead_code)] // each user takes part of it

use std::net::SocketAddr;

use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::ServingStatus;

/// A running gRPC backend; dropping it stops it.
pub struct GrpcBackend {
    name: String,
    grpc: SocketAddr,
    health: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    tasks: Vec<JoinHandle<()>>,
}

impl GrpcBackend {
    /// Starts the gRPC server and its HTTP health endpoint on free loopback ports.
    pub async fn start(name: &str) -> std::io::Result<GrpcBackend> {
        let grpc_listener = TcpListener::bind("127.0.0.1:0").await?;
        let health_listener = TcpListener::bind("127.0.0.1:0").await?;
        let (grpc, health) = (grpc_listener.local_addr()?, health_listener.local_addr()?);
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter
            .set_service_status(format!("who.{name}"), ServingStatus::Serving)
            .await;
        let (stop, stopped) = oneshot::channel::<()>();
        let serve = tokio::spawn(async move {
            let _ = Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(TcpIncoming::from(grpc_listener), async {
                    let _ = stopped.await;
                })
                .await;
        });
        let probes = tokio::spawn(async move {
            let app = axum::Router::new().route("/health", get(|| async { "Healthy" }));
            let _ = axum::serve(health_listener, app).await;
        });
        Ok(GrpcBackend {
            name: name.to_string(),
            grpc,
            health,
            stop: Some(stop),
            tasks: vec![serve, probes],
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `http://127.0.0.1:PORT` of the gRPC server: the destination's `Address`.
    pub fn url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// `http://127.0.0.1:PORT/` of the health endpoint: the destination's `Health`.
    pub fn health_url(&self) -> String {
        format!("http://{}/", self.health)
    }

    /// Stops both servers: the gRPC server says GOAWAY to its connections and closes them, the
    /// health endpoint stops at once; both ports refuse connections from then on.
    pub async fn kill(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        for task in self.tasks.drain(..) {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for GrpcBackend {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Which of `names` answered a call through `client`: it asks for `who.<first name>`, which only
/// that backend serves; the others answer NotFound. With two backends that names the one that
/// answered; any other error is the call's.
pub async fn who_answered<T>(
    client: &mut HealthClient<T>,
    names: [&str; 2],
) -> Result<String, tonic::Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::ResponseBody: tonic::transport::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::transport::Body>::Error:
        Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    let asked = HealthCheckRequest {
        service: format!("who.{}", names[0]),
    };
    match client.check(asked).await {
        Ok(_) => Ok(names[0].to_string()),
        Err(status) if status.code() == tonic::Code::NotFound => Ok(names[1].to_string()),
        Err(status) => Err(status),
    }
}

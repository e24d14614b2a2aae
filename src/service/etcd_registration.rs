//! Registering this instance in etcd, for callers whose clusters read an etcd
//! prefix: one key under the cluster's prefix whose value is this instance's destination object,
//! attached to a lease this process keeps alive. A crashed process stops renewing, and etcd
//! deletes the key when the lease runs out; a graceful shutdown revokes the lease, which deletes
//! it at once. Paired with [`Draining`], the value says `"Status": "Draining"` as soon as draining
//! starts, so callers rank this instance last while it finishes its work.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use url::Url;

use super::draining::Draining;
use crate::discovery::etcd::gateway::{EtcdError, Gateway};

/// This instance's key in etcd, kept alive until [`deregister`](Self::deregister) (or until
/// the handle is dropped and the lease runs out).
///
/// ```no_run
/// # async fn run(draining: healthpick::service::Draining) -> Result<(), Box<dyn std::error::Error>> {
/// use healthpick::service::EtcdRegistration;
/// use std::time::Duration;
///
/// let registration = EtcdRegistration::builder(
///     vec!["http://127.0.0.1:2379".parse()?],
///     "/services/payments/eu-1",
///     "http://10.0.0.7:8080/".parse()?,
/// )
/// .zone("eu-west-1a")
/// .ttl(Duration::from_secs(10))
/// .drain_with(draining.clone())
/// .register()
/// .await?;
/// // ... serve; on shutdown:
/// draining.drain().await;            // the value says Draining meanwhile
/// registration.deregister().await?;  // the key is gone at once
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "the registration is renewed only while this handle lives"]
pub struct EtcdRegistration {
    shared: Arc<Shared>,
    cancel: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// What [`EtcdRegistration::builder`] sets up: the destination object written, the lease's
/// TTL, and the [`Draining`] handle followed.
#[derive(Debug)]
#[must_use = "a builder does nothing until started"]
pub struct EtcdRegistrationBuilder {
    endpoints: Vec<Url>,
    key: String,
    value: Map<String, Value>,
    ttl: Duration,
    timeout: Duration,
    draining: Option<Draining>,
}

#[derive(Debug)]
struct Shared {
    gateway: Gateway,
    key: String,
    value: Map<String, Value>,
    ttl: i64,
    lease: AtomicI64,
}

impl EtcdRegistration {
    /// Registers `key` (under the cluster's prefix, `/services/payments/eu-1`) for an instance
    /// at `address`, in the etcd at `endpoints`, with a 10 s lease.
    pub fn builder(
        endpoints: Vec<Url>,
        key: impl Into<String>,
        address: Url,
    ) -> EtcdRegistrationBuilder {
        let mut value = Map::new();
        value.insert("Address".into(), Value::String(address.to_string()));
        EtcdRegistrationBuilder {
            endpoints,
            key: key.into(),
            value,
            ttl: Duration::from_secs(10),
            timeout: Duration::from_secs(5),
            draining: None,
        }
    }

    /// The lease the key is attached to now (it changes when etcd lost the old one and the
    /// registration made a new one).
    pub fn lease(&self) -> i64 {
        self.shared.lease.load(Ordering::Acquire)
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// Stops renewing and revokes the lease: the key is deleted at once, and every caller's
    /// etcd source sees this instance go.
    ///
    /// # Errors
    /// etcd could not be told (the key then goes when the lease runs out).
    pub async fn deregister(mut self) -> Result<(), EtcdError> {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        match self.shared.gateway.revoke(self.lease()).await {
            Err(e) if e.is_lease_gone() => Ok(()),
            other => other,
        }
    }
}

impl Drop for EtcdRegistration {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl EtcdRegistrationBuilder {
    /// Sets the lease's time to live: how long after this process stops renewing (a crash)
    /// its key stays. Renewed every third of it. Default 10 s; etcd may raise a short one.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets the bound of one call to etcd. Default 5 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets a separate base URL for probes (`Health`).
    pub fn health(self, url: Url) -> Self {
        self.field("Health", Value::String(url.to_string()))
    }

    /// Sets the `Host` header callers send.
    pub fn host(self, host: impl Into<String>) -> Self {
        self.field("Host", Value::String(host.into()))
    }

    /// Sets the zone (for callers' locality tiers).
    pub fn zone(self, zone: impl Into<String>) -> Self {
        self.field("Zone", Value::String(zone.into()))
    }

    /// Sets the region.
    pub fn region(self, region: impl Into<String>) -> Self {
        self.field("Region", Value::String(region.into()))
    }

    /// Sets the weight (default 1).
    pub fn weight(self, weight: f64) -> Self {
        self.field(
            "Weight",
            serde_json::Number::from_f64(weight).map_or(Value::Null, Value::Number),
        )
    }

    /// Sets the tier (`Priority`; 0 is the most preferred).
    pub fn priority(self, tier: u32) -> Self {
        self.field("Priority", Value::from(tier))
    }

    /// Adds a metadata entry.
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let entry = self
            .value
            .entry("Metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(map) = entry {
            map.insert(key.into(), Value::String(value.into()));
        }
        self
    }

    /// Follows `draining`: once it starts, the value says `"Status": "Draining"`, so callers
    /// send this instance traffic only when nothing better is left.
    pub fn drain_with(mut self, draining: Draining) -> Self {
        self.draining = Some(draining);
        self
    }

    fn field(mut self, name: &str, value: Value) -> Self {
        self.value.insert(name.into(), value);
        self
    }

    /// Grants the lease, writes the key, and keeps the lease alive on the current tokio runtime.
    ///
    /// # Errors
    /// etcd could not be reached or refused the lease or the key.
    pub async fn register(self) -> Result<EtcdRegistration, EtcdError> {
        let gateway = Gateway::new(self.endpoints, self.timeout).map_err(|reason| {
            EtcdError::Unreachable {
                endpoint: String::new(),
                reason,
            }
        })?;
        let ttl = i64::try_from(self.ttl.as_secs().max(1)).unwrap_or(i64::MAX);
        let shared = Arc::new(Shared {
            gateway,
            key: self.key,
            value: self.value,
            ttl,
            lease: AtomicI64::new(0),
        });
        let draining = self.draining.as_ref().is_some_and(Draining::is_draining);
        let granted = shared.register(draining).await?;
        let cancel = CancellationToken::new();
        let task = tokio::spawn(renew(
            shared.clone(),
            granted,
            self.draining,
            cancel.clone(),
        ));
        Ok(EtcdRegistration {
            shared,
            cancel,
            task: Some(task),
        })
    }
}

impl Shared {
    /// Grants a lease and writes the key under it; returns the TTL granted.
    async fn register(&self, draining: bool) -> Result<i64, EtcdError> {
        let (lease, granted) = self.gateway.grant(self.ttl).await?;
        self.lease.store(lease, Ordering::Release);
        self.write(draining).await?;
        Ok(granted)
    }

    async fn write(&self, draining: bool) -> Result<(), EtcdError> {
        let mut value = self.value.clone();
        if draining {
            value.insert("Status".into(), Value::String("Draining".into()));
        }
        let value = Value::Object(value).to_string();
        self.gateway
            .put(
                self.key.as_bytes(),
                value.as_bytes(),
                self.lease.load(Ordering::Acquire),
            )
            .await
            .map(drop)
    }
}

/// Renews the lease every third of its TTL; makes a new one (and writes the key again) when
/// etcd lost it; rewrites the value when draining starts.
async fn renew(
    shared: Arc<Shared>,
    granted: i64,
    draining: Option<Draining>,
    cancel: CancellationToken,
) {
    let every = |ttl: i64| {
        Duration::from_millis(u64::try_from(ttl.max(1)).unwrap_or(1) * 1000 / 3)
            .max(Duration::from_millis(200))
    };
    let mut period = every(granted);
    // Subscribed before looking, so a start between the two is not missed.
    let mut changes = draining.as_ref().map(Draining::subscribe);
    let mut marked = false;
    loop {
        if !marked && draining.as_ref().is_some_and(Draining::is_draining) {
            marked = true;
            changes = None;
            if let Err(e) = shared.write(true).await {
                tracing::warn!(target: "healthpick", key = %shared.key, "etcd registration not marked Draining: {e}");
            }
        }
        let draining_changed = async {
            match changes.as_mut() {
                Some(rx) => rx.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = cancel.cancelled() => return,
            open = draining_changed => {
                if !open {
                    changes = None;
                }
            }
            () = tokio::time::sleep(period) => {
                match shared.gateway.keep_alive(shared.lease.load(Ordering::Acquire)).await {
                    Ok(ttl) if ttl > 0 => period = every(ttl.min(granted.max(1))),
                    Ok(_) => {
                        tracing::warn!(target: "healthpick", key = %shared.key, "etcd lost the registration's lease: registering again");
                        match shared.register(marked).await {
                            Ok(granted) => period = every(granted),
                            Err(e) => {
                                tracing::warn!(target: "healthpick", key = %shared.key, "etcd registration failed: {e}");
                                period = Duration::from_secs(1).min(every(granted));
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(target: "healthpick", key = %shared.key, "etcd lease not renewed: {e}");
                        period = Duration::from_secs(1).min(every(granted));
                    }
                }
            }
        }
    }
}

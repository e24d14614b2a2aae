//! Settings of a Kubernetes discovery source: which Service's EndpointSlices, in which
//! namespace, which of its ports, and how the watch is kept honest (a periodic re-list, an idle
//! timeout).
//!
//! ```json
//! "Discovery": {"Type": "Kubernetes", "Service": "payments", "Namespace": "shop",
//!               "PortName": "http", "Scheme": "http", "Resync": "00:10:00", "IdleTimeout": "00:05:00"}
//! ```

use std::time::Duration;

/// Settings of a Kubernetes source: the endpoints of the EndpointSlices labelled
/// `kubernetes.io/service-name=<service>`, listed and watched through kube's client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesSourceConfig {
    pub(crate) service: String,
    pub(crate) namespace: Option<String>,
    pub(crate) port_name: Option<String>,
    pub(crate) scheme: String,
    pub(crate) context: Option<String>,
    pub(crate) resync: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) local_zone: Option<String>,
}

impl KubernetesSourceConfig {
    /// The endpoints of Service `service` in the client's default namespace, on the slices'
    /// only port, over plain HTTP; the client from the kubeconfig (`KUBECONFIG`,
    /// `~/.kube/config`) or else the in-cluster service account; a full re-list every 10 min
    /// and a watch that says nothing for 5 min replaced.
    pub fn new(service: impl Into<String>) -> Self {
        KubernetesSourceConfig {
            service: service.into(),
            namespace: None,
            port_name: None,
            scheme: "http".into(),
            context: None,
            resync: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(300),
            local_zone: None,
        }
    }

    /// Reads the Service in `namespace`. Default: the client's default namespace — in a pod,
    /// the service account's (`/var/run/secrets/kubernetes.io/serviceaccount/namespace`); from
    /// a kubeconfig, its context's; else `default`.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Uses the Service port named `name` (the slices' `ports[].name`). Default: none, which
    /// works when each slice has exactly one port; a slice with several ports and no name set,
    /// or without the named port, is an error in the source's status (its endpoints are left
    /// out).
    #[must_use]
    pub fn port_name(mut self, name: impl Into<String>) -> Self {
        self.port_name = Some(name.into());
        self
    }

    /// Sets the URL scheme of the destinations (`http` or `https`). Default `http`.
    #[must_use]
    pub fn scheme(mut self, scheme: impl Into<String>) -> Self {
        self.scheme = scheme.into();
        self
    }

    /// Uses this kubeconfig context instead of the current one. Default: the current context,
    /// or the in-cluster configuration when there is no kubeconfig.
    #[must_use]
    pub fn context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into());
        self
    }

    /// Sets how often the slices are listed again from scratch (a fresh watch), with up to 10%
    /// jitter: a watch that missed something without an error cannot leave the set behind for
    /// longer. Default 10 min.
    #[must_use]
    pub fn resync(mut self, every: Duration) -> Self {
        self.resync = every;
        self
    }

    /// Sets how long a watch may say nothing (no event, no bookmark) before it is replaced by a
    /// new one from the last resource version: the watch asks the API server to end it after
    /// this less 5 s (`timeoutSeconds`), and kube gives up on it 5 s later. It is also the bound
    /// of a list, plus 5 s. At least 6 s. Default 5 min.
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets this process's zone, which topology hints (`hints.forZones`) are read against.
    /// Default: [`LOCAL_ZONE_VAR`](crate::config::LOCAL_ZONE_VAR) when set.
    #[must_use]
    pub fn local_zone(mut self, zone: impl Into<String>) -> Self {
        self.local_zone = Some(zone.into());
        self
    }

    /// The Service name.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// The namespace as configured (`None`: the client's default).
    pub fn namespace_setting(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The port name as configured.
    pub fn port_name_setting(&self) -> Option<&str> {
        self.port_name.as_deref()
    }

    /// The URL scheme of the destinations.
    pub fn url_scheme(&self) -> &str {
        &self.scheme
    }

    /// The kubeconfig context as configured.
    pub fn context_setting(&self) -> Option<&str> {
        self.context.as_deref()
    }

    /// How often the slices are listed again.
    pub fn resync_period(&self) -> Duration {
        self.resync
    }

    /// How long a silent watch is trusted.
    pub fn watch_idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    /// The local zone as configured (the source falls back to
    /// [`LOCAL_ZONE_VAR`](crate::config::LOCAL_ZONE_VAR)).
    pub fn local_zone_setting(&self) -> Option<&str> {
        self.local_zone.as_deref()
    }

    /// What the source watches, for status: `namespace/service` (`service` alone when the
    /// namespace is the client's default), with `:port` when a port is named.
    pub fn target(&self) -> String {
        let mut target = match &self.namespace {
            Some(namespace) => format!("{namespace}/{}", self.service),
            None => self.service.clone(),
        };
        if let Some(port) = &self.port_name {
            target.push(':');
            target.push_str(port);
        }
        target
    }
}

//! Configuration: the cluster model, its builders, the YARP JSON reader and validation.
//!
//! Data flows one way: a JSON document ([`Config::from_json`]) or code (the builders here) gives a
//! [`Config`]; validation checks it and reports every problem at once (policy names are checked
//! by the [`PolicyRegistry`](crate::PolicyRegistry) that resolves them); the
//! [`Engine`](crate::Engine) turns a valid config into runtime state.
//!
//! With the `serde` feature, [`Config`] is `Deserialize` (through that same reader and
//! validation, from any serde format: TOML, YAML, ...) and `Serialize` (the YARP JSON shape,
//! which loads again to an equal `Config`); see [`Config`]'s documentation.

pub(crate) mod affinity;
pub(crate) mod check;
pub(crate) mod diagnostics;
pub(crate) mod discovery;
pub(crate) mod dns_name;
pub(crate) mod http_version;
pub(crate) mod metadata;
pub(crate) mod model;
pub(crate) mod read;
pub(crate) mod read_discovery;
pub(crate) mod read_traffic;
pub(crate) mod source_consul;
pub(crate) mod source_etcd;
pub(crate) mod source_kubernetes;
pub mod timespan;
pub(crate) mod traffic;
pub(crate) mod tree;
pub(crate) mod validate;
pub(crate) mod validate_traffic;
#[cfg(feature = "serde")]
pub(crate) mod yarp_serde;

pub use affinity::{
    AffinityFailurePolicy, AffinityPolicy, SessionAffinityConfig, DEFAULT_AFFINITY_KEY_NAME,
};
pub use check::{check, check_section, PolicyNames};
pub use diagnostics::{CheckReport, ConfigError, Diagnostic, Severity};
pub use discovery::{
    DiscoveryConfig, DnsRecord, DnsSourceConfig, GuardMode, GuardPolicy, LocalityTiers,
    RefreshBounds, ResolveDestinationsConfig, SourceConfig, LOCAL_REGION_VAR, LOCAL_ZONE_VAR,
};
pub use metadata::{
    Metadata, CONSECUTIVE_FAILURES_THRESHOLD_KEY, OUTLIER_BASE_EJECTION_TIME_KEY,
    OUTLIER_CONSECUTIVE_5XX_KEY, OUTLIER_CONSECUTIVE_GATEWAY_FAILURE_KEY, OUTLIER_INTERVAL_KEY,
    OUTLIER_MAX_EJECTION_PERCENT_KEY, OUTLIER_MAX_EJECTION_TIME_KEY, RESET_PASSIVE_ON_RECOVERY_KEY,
    SUSPECT_RANKING_KEY, TRANSPORT_FAILURE_RATE_LIMIT_KEY, WEIGHT_KEY,
};
pub use model::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig, HealthCheckConfig,
    HealthPolicyOptions, OutlierDetectionOptions, PassiveHealthCheckConfig,
};
pub use source_consul::{ConsulSourceConfig, CONSUL_ADDRESS_VAR, CONSUL_TOKEN_VAR};
pub use source_etcd::EtcdSourceConfig;
pub use source_kubernetes::KubernetesSourceConfig;
pub use timespan::{parse_timespan, TimeSpan, TimeSpanError};
pub use traffic::{
    LoadReportsConfig, LoadSignalsConfig, SlowStartConfig, SpillMode, TierSpillConfig,
};

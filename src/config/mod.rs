//! Configuration: the cluster model, its builders, the YARP JSON reader and validation (SPEC §2).
//!
//! Data flows one way: a JSON document ([`Config::from_json`]) or code (the builders here) gives a
//! [`Config`]; validation checks it against the known policy names and reports every problem at
//! once; the [`Engine`](crate::Engine) turns a valid config into runtime state.

mod json;
mod metadata;
mod model;
pub mod timespan;
mod validate;

pub use metadata::Metadata;
pub use model::{
    ActiveHealthCheckConfig, ClusterConfig, Config, DestinationConfig, HealthCheckConfig,
    HealthPolicyOptions, PassiveHealthCheckConfig,
};
pub use timespan::{parse_timespan, TimeSpan, TimeSpanError};
pub use validate::{check, CheckReport, ConfigError, Diagnostic, Severity};

pub(crate) use json::parse_options;
pub(crate) use validate::{parse_metadata_number, validate, write_located, Diagnostics};

/// Metadata key of the ConsecutiveFailures threshold (cluster metadata), as in YARP.
pub const CONSECUTIVE_FAILURES_THRESHOLD_KEY: &str = "ConsecutiveFailuresHealthPolicy.Threshold";
/// Metadata key of the TransportFailureRate limit (cluster metadata), as in YARP.
pub const TRANSPORT_FAILURE_RATE_LIMIT_KEY: &str = "TransportFailureRateHealthPolicy.RateLimit";

/// Case-insensitive equality as .NET's `OrdinalIgnoreCase` compares keys and ids.
pub(crate) fn eq_ignore_case(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    a.chars().map(fold_char).eq(b.chars().map(fold_char))
}

/// The case-folded form of an id, as the engine indexes clusters and destinations; two ids are
/// equal ignoring case exactly when their folded forms are equal.
pub(crate) fn fold_case(s: &str) -> String {
    if s.is_ascii() {
        s.to_ascii_lowercase()
    } else {
        s.chars().map(fold_char).collect()
    }
}

/// .NET's `OrdinalIgnoreCase` maps each character to its simple upper case (`ς` and `σ` both
/// become `Σ`; `ß` stays). ASCII results are then lower-cased so the ASCII fast paths, which
/// lower-case, agree with it.
fn fold_char(c: char) -> char {
    let mut upper = c.to_uppercase();
    let u = match (upper.next(), upper.next()) {
        (Some(u), None) => u,
        _ => c,
    };
    if u.is_ascii() {
        u.to_ascii_lowercase()
    } else {
        u
    }
}

impl Config {
    /// Reads a YARP JSON document (`{"ReverseProxy": {"Clusters": ...}}` or `{"Clusters": ...}`)
    /// and validates it against the built-in policies. To use custom policies, load the document
    /// with [`Engine::load_json`](crate::Engine::load_json) or check it with [`check`].
    ///
    /// # Errors
    /// Every problem of the document, at once.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let report = check(text, &crate::PolicyRegistry::default(), false);
        match report.config {
            Some(config) if report.errors.is_empty() => Ok(config),
            _ => Err(ConfigError {
                errors: report.errors,
                warnings: report.warnings,
            }),
        }
    }
}

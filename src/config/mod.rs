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

/// Calls `f` with the folded form of `id` (as [`fold_case`] gives it), without allocating for the
/// usual ids: already folded, or ASCII of up to 64 bytes (folded on the stack).
pub(crate) fn with_folded<R>(id: &str, f: impl FnOnce(&str) -> R) -> R {
    if id.is_ascii() {
        if !id.bytes().any(|b| b.is_ascii_uppercase()) {
            return f(id);
        }
        if id.len() <= 64 {
            let mut buf = [0u8; 64];
            let folded = &mut buf[..id.len()];
            folded.copy_from_slice(id.as_bytes());
            folded.make_ascii_lowercase();
            if let Ok(folded) = std::str::from_utf8(folded) {
                return f(folded);
            }
        }
    }
    f(&fold_case(id))
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

#[cfg(test)]
mod tests {
    use super::{fold_case, with_folded};

    /// The allocation-free fold agrees with `fold_case` on every kind of id: already folded,
    /// mixed-case ASCII on the stack (up to 64 bytes) and past it, and non-ASCII.
    #[test]
    fn with_folded_gives_what_fold_case_gives() {
        let long = "Payments".repeat(9); // 72 bytes: past the stack buffer
        for id in [
            "",
            "payments",
            "Payments",
            "PAYMENTS-eu_1",
            &"A".repeat(64),
            &long,
            "Übercluster",
            "ΣΙΓΜΑ-ς",
        ] {
            assert_eq!(with_folded(id, str::to_owned), fold_case(id), "{id:?}");
        }
    }
}

//! Checking a configuration document: read it, validate it and ask the policies it names
//! whether they exist, collecting every problem in document order (what `healthpick check`
//! and [`Config::from_json`] report).

use super::diagnostics::{CheckReport, Diagnostic, Diagnostics};
use super::model::Config;
#[cfg(feature = "serde")]
use super::read::read_value;
use super::read::{read, read_section};
use super::validate::{sort_in_document_order, validate};
#[cfg(feature = "serde")]
use crate::jsonc::Json;

/// Whether the policy names a configuration uses exist: implemented by
/// [`PolicyRegistry`](crate::PolicyRegistry), which resolves each name once and reports the
/// unknown ones, listing the names it knows.
pub trait PolicyNames {
    /// The problems of `config`'s policy names: one error per unknown name (load-balancing and
    /// available-destinations policies always, active and passive ones when that check is
    /// enabled).
    fn policy_problems(&self, config: &Config) -> Vec<Diagnostic>;
}

/// Reads and validates a JSON document against `policies`' names (usually a
/// [`PolicyRegistry`](crate::PolicyRegistry)), collecting every problem. Nothing is applied
/// anywhere.
pub fn check(text: &str, policies: &dyn PolicyNames, strict: bool) -> CheckReport {
    let mut diags = Diagnostics::default();
    let config = read(text, &mut diags);
    finish(config, diags, policies, strict)
}

/// [`check`] of the clusters under another section than `ReverseProxy`: `section:Clusters`
/// (`"Proxies"`, or nested as .NET names sections, `"Gateway:Internal"`; keys compared
/// case-insensitively), and `section:HealthPolicies` when it exists (else the document's
/// top-level `HealthPolicies`). A missing section is an error naming it. What
/// `healthpick check --section NAME` runs.
///
/// ```
/// use healthpick::config::check_section;
/// use healthpick::PolicyRegistry;
///
/// let text = r#"{"Internal": {"Clusters": {"c": {"Destinations": {"d": {"Address": "http://10.0.0.1/"}}}}}}"#;
/// let report = check_section(text, "Internal", &PolicyRegistry::default(), false);
/// assert!(report.is_valid());
/// assert_eq!(report.config.unwrap().clusters()[0].id(), "c");
///
/// let missing = check_section(text, "ReverseProxy2", &PolicyRegistry::default(), false);
/// assert_eq!(missing.errors[0].path, "ReverseProxy2");
/// ```
pub fn check_section(
    text: &str,
    section: &str,
    policies: &dyn PolicyNames,
    strict: bool,
) -> CheckReport {
    let mut diags = Diagnostics::default();
    let config = read_section(text, Some(section), &mut diags);
    finish(config, diags, policies, strict)
}

/// [`check`] of a document already parsed (`None`: empty), as a serde format gives it.
#[cfg(feature = "serde")]
pub(crate) fn check_value(
    document: Option<Json>,
    policies: &dyn PolicyNames,
    strict: bool,
) -> CheckReport {
    let mut diags = Diagnostics::default();
    let config = read_value(document, &mut diags);
    finish(config, diags, policies, strict)
}

fn finish(
    config: Option<Config>,
    mut diags: Diagnostics,
    policies: &dyn PolicyNames,
    strict: bool,
) -> CheckReport {
    if let Some(config) = &config {
        validate(config, &mut diags);
        diags.extend(policies.policy_problems(config));
        sort_in_document_order(config, &mut diags.errors);
        sort_in_document_order(config, &mut diags.warnings);
    }
    diags.finish(strict);
    CheckReport {
        config,
        errors: diags.errors,
        warnings: diags.warnings,
    }
}

//! Problems found in a configuration: each names the cluster (and destination), the
//! key path and the bad value; errors and warnings are collected, never thrown one at a time.

use std::fmt;

use serde::Serialize;

use super::model::Config;

/// How bad a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Severity {
    /// The configuration cannot be used.
    Error,
    /// The configuration loads, with a fallback the user should know about.
    Warning,
}

/// One problem found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    #[serde(skip)]
    pub severity: Severity,
    /// The .NET configuration key path, e.g.
    /// `ReverseProxy:Clusters:payments:Destinations:eu-2:Address`.
    pub path: String,
    /// What is wrong, naming cluster, destination, key and value.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_located(f, &self.path, &self.message)
    }
}

/// `path: message`, or the message alone when there is no path (configuration and scenario
/// problems print alike).
pub(crate) fn write_located(f: &mut fmt::Formatter<'_>, path: &str, message: &str) -> fmt::Result {
    if path.is_empty() {
        f.write_str(message)
    } else {
        write!(f, "{path}: {message}")
    }
}

/// A configuration that cannot be used, with every error (and the warnings) found in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// Every error, cluster by cluster and destination by destination in document order;
    /// within one cluster or destination, keys in the order YARP documents them.
    pub errors: Vec<Diagnostic>,
    /// Warnings found alongside.
    pub warnings: Vec<Diagnostic>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "invalid configuration ({n} error{})",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

/// The result of checking a configuration document, as `healthpick check` reports it.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The configuration read, when the document could be read at all. It may still be invalid.
    pub config: Option<Config>,
    /// Every error.
    pub errors: Vec<Diagnostic>,
    /// Every warning (empty in strict mode, where they count as errors).
    pub warnings: Vec<Diagnostic>,
}

impl CheckReport {
    /// Whether the document is usable.
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty() && self.config.is_some()
    }
}

/// A growing list of problems.
#[derive(Debug, Default)]
pub(crate) struct Diagnostics {
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

impl Diagnostics {
    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(Diagnostic {
            severity: Severity::Error,
            path: path.into(),
            message: message.into(),
        });
    }

    pub fn warning(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(Diagnostic {
            severity: Severity::Warning,
            path: path.into(),
            message: message.into(),
        });
    }

    /// Adds an error, or a warning when the setting is not in force (a disabled check).
    pub fn problem(&mut self, in_force: bool, path: String, message: String) {
        self.problem_unless_off(in_force, path, message, "the check is disabled");
    }

    /// Adds an error, or, when the setting is not in force, a warning that says why it is
    /// ignored (`off`: "SessionAffinity is disabled").
    pub fn problem_unless_off(&mut self, in_force: bool, path: String, message: String, off: &str) {
        if in_force {
            self.error(path, message);
        } else {
            self.warning(path, format!("{message} (ignored while {off})"));
        }
    }

    /// Adds problems found elsewhere, each as the severity it carries.
    pub fn extend(&mut self, problems: impl IntoIterator<Item = Diagnostic>) {
        for problem in problems {
            match problem.severity {
                Severity::Error => self.errors.push(problem),
                Severity::Warning => self.warnings.push(problem),
            }
        }
    }

    /// In strict mode warnings become errors.
    pub fn finish(&mut self, strict: bool) {
        if strict {
            for mut w in self.warnings.drain(..) {
                w.severity = Severity::Error;
                self.errors.push(w);
            }
        }
    }
}

/// Where a key sits: builds key paths and message prefixes naming cluster and destination.
#[derive(Clone, Copy)]
pub(crate) struct Place<'a> {
    pub section: &'a str,
    pub cluster: Option<&'a str>,
    pub destination: Option<&'a str>,
}

impl<'a> Place<'a> {
    pub fn cluster(section: &'a str, cluster: &'a str) -> Self {
        Place {
            section,
            cluster: Some(cluster),
            destination: None,
        }
    }

    pub fn destination(self, destination: &'a str) -> Self {
        Place {
            destination: Some(destination),
            ..self
        }
    }

    /// `ReverseProxy:Clusters:c:Destinations:d:` + key
    pub fn path(&self, key: &str) -> String {
        let mut p = self.section.to_string();
        if let Some(c) = self.cluster {
            p.push(':');
            p.push_str(c);
        }
        if let Some(d) = self.destination {
            p.push_str(":Destinations:");
            p.push_str(d);
        }
        if !key.is_empty() {
            p.push(':');
            p.push_str(key);
        }
        p
    }

    /// "cluster `c`: destination `d`: " + text
    pub fn message(&self, text: impl fmt::Display) -> String {
        let mut m = String::new();
        if let Some(c) = self.cluster {
            m.push_str(&format!("cluster `{c}`: "));
        }
        if let Some(d) = self.destination {
            m.push_str(&format!("destination `{d}`: "));
        }
        m.push_str(&text.to_string());
        m
    }
}

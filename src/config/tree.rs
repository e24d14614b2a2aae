//! The configuration tree as .NET sees a JSON document (objects, arrays as objects keyed `0`,
//! `1`, ..., scalars as text) and the reader that turns one setting of it into a value,
//! reporting problems with their key path.

use std::time::Duration;

use super::diagnostics::{Diagnostics, Place};
use super::metadata::Metadata;
use super::timespan::parse_timespan;
use crate::ids::{eq_ignore_case, fold_case};
use crate::jsonc::{Json, JsonKind};

/// A configuration tree as .NET sees it: objects (arrays become objects with keys `0`, `1`, ...)
/// and scalar values kept as text.
#[derive(Debug)]
pub(crate) enum Node {
    Object(Vec<(String, Node)>),
    /// A string, a number (its text as written) or a boolean (`True`/`False`, as .NET writes it).
    Value(String),
    Null,
}

impl Node {
    pub fn from_json(value: Json) -> Node {
        match value.kind {
            JsonKind::String(s) | JsonKind::Number(s) => Node::Value(s),
            JsonKind::Bool(b) => Node::Value(if b { "True" } else { "False" }.into()),
            JsonKind::Null => Node::Null,
            JsonKind::Object(members) => Node::Object(
                members
                    .into_iter()
                    .map(|(name, v)| (name, Node::from_json(v)))
                    .collect(),
            ),
            JsonKind::Array(items) => Node::Object(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (i.to_string(), Node::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// The first child whose key matches, case-insensitively.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Object(entries) => entries
                .iter()
                .find(|(k, _)| eq_ignore_case(k, key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn entries(&self) -> &[(String, Node)] {
        match self {
            Node::Object(entries) => entries,
            _ => &[],
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Node::Object(_) => "an object",
            Node::Value(_) => "a value",
            Node::Null => "null",
        }
    }
}

/// .NET configuration rejects a document with two keys that differ only in case.
pub(crate) fn check_duplicate_keys(node: &Node, path: &str, diags: &mut Diagnostics) {
    let entries = node.entries();
    let mut seen: std::collections::HashMap<String, &str> =
        std::collections::HashMap::with_capacity(entries.len());
    for (key, _) in entries {
        if let Some(first) = seen.get(&fold_case(key)) {
            let at = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}:{key}")
            };
            diags.error(
                at,
                format!(
                    "duplicate key `{key}` (keys are case-insensitive; `{first}` is already set)"
                ),
            );
        } else {
            seen.insert(fold_case(key), key);
        }
    }
}

/// Reads one setting of an object and turns its text into a value, reporting problems.
pub(crate) struct Reader<'a, 'd> {
    pub place: Place<'a>,
    pub diags: &'d mut Diagnostics,
}

impl Reader<'_, '_> {
    /// The text of `key` under `node` at `prefix`; `None` when absent, null or empty.
    pub fn text(&mut self, node: &Node, prefix: &str, key: &str) -> Option<String> {
        match node.get(key)? {
            Node::Value(v) if v.is_empty() => None,
            Node::Value(v) => Some(v.clone()),
            Node::Null => None,
            Node::Object(entries) if entries.is_empty() => None,
            Node::Object(_) => {
                self.diags.error(
                    self.place.path(&join(prefix, key)),
                    self.place
                        .message(format!("{key} must be a value, found an object")),
                );
                None
            }
        }
    }

    pub fn bool(&mut self, node: &Node, prefix: &str, key: &str) -> Option<bool> {
        let text = self.text(node, prefix, key)?;
        match text.trim() {
            t if t.eq_ignore_ascii_case("true") => Some(true),
            t if t.eq_ignore_ascii_case("false") => Some(false),
            _ => {
                self.diags.error(
                    self.place.path(&join(prefix, key)),
                    self.place
                        .message(format!("{key} `{text}` is not a boolean (true or false)")),
                );
                None
            }
        }
    }

    /// A positive TimeSpan. Non-positive values are errors only when `in_force`.
    pub fn positive_duration(
        &mut self,
        node: &Node,
        prefix: &str,
        key: &str,
        in_force: bool,
    ) -> Option<Duration> {
        let text = self.text(node, prefix, key)?;
        let path = self.place.path(&join(prefix, key));
        match parse_timespan(&text) {
            Ok(span) if span.is_positive() => span.to_duration(),
            Ok(_) => {
                self.diags.problem(
                    in_force,
                    path,
                    self.place
                        .message(format!("{key} `{text}` must be positive")),
                );
                None
            }
            Err(e) => {
                self.diags
                    .error(path, self.place.message(format!("{key} {e}")));
                None
            }
        }
    }

    /// A TimeSpan of zero or more; a negative one is an error.
    pub fn non_negative_duration(
        &mut self,
        node: &Node,
        prefix: &str,
        key: &str,
    ) -> Option<Duration> {
        let text = self.text(node, prefix, key)?;
        let path = self.place.path(&join(prefix, key));
        match parse_timespan(&text) {
            Ok(span) => {
                let duration = span.to_duration();
                if duration.is_none() {
                    self.diags.error(
                        path,
                        self.place
                            .message(format!("{key} `{text}` must not be negative")),
                    );
                }
                duration
            }
            Err(e) => {
                self.diags
                    .error(path, self.place.message(format!("{key} {e}")));
                None
            }
        }
    }

    pub fn integer(&mut self, node: &Node, prefix: &str, key: &str, what: &str) -> Option<u32> {
        let text = self.text(node, prefix, key)?;
        let trimmed = text.trim();
        let problem = match trimmed.parse::<i128>() {
            Ok(v) if v < 0 => "must not be negative",
            Ok(v) => match u32::try_from(v) {
                Ok(v) => return Some(v),
                Err(_) => "is too large",
            },
            Err(_) => "is not an integer",
        };
        self.diags.error(
            self.place.path(&join(prefix, key)),
            self.place
                .message(format!("{key} `{text}` {problem} (expected {what})")),
        );
        None
    }

    pub fn metadata(&mut self, node: &Node, prefix: &str) -> Metadata {
        let Some(section) = node.get("Metadata") else {
            return Metadata::new();
        };
        check_duplicate_keys(
            section,
            &self.place.path(&join(prefix, "Metadata")),
            self.diags,
        );
        let mut entries = Vec::with_capacity(section.entries().len());
        for (key, value) in section.entries() {
            match value {
                Node::Value(v) => entries.push((key.clone(), v.clone())),
                Node::Null => {}
                Node::Object(_) => self.diags.warning(
                    self.place.path(&join(prefix, &format!("Metadata:{key}"))),
                    self.place
                        .message(format!("metadata `{key}` is an object and is ignored")),
                ),
            }
        }
        Metadata::from_entries(entries)
    }

    pub fn object<'n>(&mut self, node: &'n Node, prefix: &str, key: &str) -> Option<&'n Node> {
        match node.get(key)? {
            section @ Node::Object(_) => {
                check_duplicate_keys(section, &self.place.path(&join(prefix, key)), self.diags);
                Some(section)
            }
            Node::Null => None,
            Node::Value(v) if v.is_empty() => None,
            other => {
                self.diags.error(
                    self.place.path(&join(prefix, key)),
                    self.place
                        .message(format!("{key} must be an object, found {}", other.kind())),
                );
                None
            }
        }
    }
}

/// The known key `key` is most likely a misspelling of: the closest of `known` by edit distance
/// (case-insensitive; a transposition counts as one edit), when that distance is at most 2 and
/// at most a third of the known key's length (so `Host` takes one slip, `Priority` two). `None`
/// when `key` is known, or nothing is close.
pub(crate) fn misspelt<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    if known.iter().any(|k| eq_ignore_case(k, key)) {
        return None;
    }
    let folded = fold_case(key);
    known
        .iter()
        .map(|k| (strsim::osa_distance(&folded, &fold_case(k)), *k))
        .filter(|(d, k)| *d <= 2 && *d * 3 <= k.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

impl Reader<'_, '_> {
    /// Warns about each key of `node` (at `prefix`) that is not one of `known` but close to one:
    /// probably misspelt, so the setting it meant is silently left at its default. Other unknown
    /// keys are ignored, as .NET configuration ignores them.
    pub fn misspelt_keys(&mut self, node: &Node, prefix: &str, known: &[&str]) {
        for (key, _) in node.entries() {
            if let Some(meant) = misspelt(key, known) {
                self.diags.warning(
                    self.place.path(&join(prefix, key)),
                    self.place.message(did_you_mean(key, meant)),
                );
            }
        }
    }

    /// Warns about every key of `node` (at `prefix`) that none of `known` lists: the sections
    /// healthpick adds to YARP's have no keys of other tools, so an unknown one is ignored and
    /// probably misspelt.
    pub fn unknown_keys(&mut self, node: &Node, prefix: &str, known: &[&[&str]]) {
        for (key, _) in node.entries() {
            if !known
                .iter()
                .flat_map(|k| k.iter())
                .any(|k| eq_ignore_case(k, key))
            {
                let expected: Vec<&str> = known.iter().flat_map(|k| k.iter().copied()).collect();
                let message = match misspelt(key, &expected) {
                    Some(meant) => did_you_mean(key, meant),
                    None => format!(
                        "`{key}` is not a key of this section and is ignored (known: {})",
                        expected.join(", ")
                    ),
                };
                self.diags.warning(
                    self.place.path(&join(prefix, key)),
                    self.place.message(message),
                );
            }
        }
    }
}

/// Whether `key` is absent from `node` or says "not set" (null, an empty value or an empty
/// object), as .NET configuration reads it.
pub(crate) fn is_unset(node: &Node, key: &str) -> bool {
    match node.get(key) {
        None | Some(Node::Null) => true,
        Some(Node::Value(v)) => v.is_empty(),
        Some(Node::Object(entries)) => entries.is_empty(),
    }
}

/// "unknown key `Priorty`; did you mean `Priority`?"
pub(crate) fn did_you_mean(key: &str, meant: &str) -> String {
    format!("unknown key `{key}`; did you mean `{meant}`?")
}

pub(crate) fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}:{key}")
    }
}

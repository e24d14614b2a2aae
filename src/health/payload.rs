//! The health payload: the JSON body a service's health endpoint answers with and
//! active probes read, and the HTTP status that goes with each reported status. Probes parse it
//! here; the service side ([`crate::service`]) builds and serves it.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::state::ReportedHealth;

/// The JSON body of a service's health endpoint.
///
/// ```json
/// {"status": "Healthy", "version": "1.4.2", "environment": "prod", "hostname": "eu-2"}
/// ```
///
/// Every field is optional. Serializing omits absent fields. Reading is deliberately lenient,
/// because the body comes from another service that healthpick does not control:
///
/// - unknown fields are ignored and missing fields are `None`;
/// - `status` is read case-insensitively (`"degraded"` works);
/// - a `status` that is not one of the three known values (`"UP"`, `"Warning"`, `42`, `null`)
///   is read as *no status* rather than an error, so a payload from a service with its own status
///   vocabulary still parses, and the probe treats it as a plain 2xx;
/// - a field of the wrong type (`"version": 3`) is read as `None`;
/// - field names are matched case-insensitively, so a .NET service that writes `"Status"`
///   is understood; when a field appears more than once, the last one wins.
///
/// Build one for your own endpoint with [`HealthPayload::new`] and the setters, or take it from
/// [`Draining::payload`](crate::service::Draining::payload).
///
/// ```
/// use healthpick::ReportedHealth;
/// use healthpick::service::{status_code, HealthPayload};
///
/// let payload = HealthPayload::new(ReportedHealth::Degraded).version("1.4.2");
/// assert_eq!(status_code(payload.reported()), 200);
/// let json = serde_json::to_string(&payload)?;
/// assert_eq!(json, r#"{"status":"Degraded","version":"1.4.2"}"#);
///
/// let read = HealthPayload::parse(br#"{"status": "unhealthy", "uptime": 12}"#).unwrap();
/// assert_eq!(read.reported(), Some(ReportedHealth::Unhealthy));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct HealthPayload {
    /// What the service says about itself; `None` when absent or not a known status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ReportedHealth>,
    /// The service's version, for dashboards and logs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The environment the service runs in (`prod`, `staging`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// The host or pod that answered, to tell instances behind one address apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
}

impl HealthPayload {
    /// A payload reporting `status`, with no version, environment or hostname.
    pub fn new(status: ReportedHealth) -> Self {
        HealthPayload {
            status: Some(status),
            ..HealthPayload::default()
        }
    }

    /// Sets the version the payload reports (none by default).
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Sets the environment the payload reports (none by default).
    #[must_use]
    pub fn environment(mut self, environment: impl Into<String>) -> Self {
        self.environment = Some(environment.into());
        self
    }

    /// Sets the hostname the payload reports (none by default).
    #[must_use]
    pub fn hostname(mut self, hostname: impl Into<String>) -> Self {
        self.hostname = Some(hostname.into());
        self
    }

    /// Reads a health endpoint's response body, as active probes do with a 2xx body.
    ///
    /// Returns `Some` for any JSON object (leading UTF-8 BOM and whitespace allowed), read
    /// leniently as described on [`HealthPayload`]; an object without a usable `status` gives a
    /// payload whose [`reported`](Self::reported) is `None`, which a probe treats as a plain
    /// success. Returns `None` for anything else: not JSON, an array, a string, an empty body,
    /// trailing garbage after the object, or nesting deeper than serde_json's recursion limit.
    ///
    /// Never panics. Cost is one pass over the body with no allocation for ignored fields, so
    /// probes can call it on every (bounded) response.
    pub fn parse(body: &[u8]) -> Option<HealthPayload> {
        let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
        // Cheap rejection before serde: only an object can be a payload.
        let first = body.iter().find(|b| !b.is_ascii_whitespace())?;
        if *first != b'{' {
            return None;
        }
        serde_json::from_slice(body).ok()
    }

    /// The status the payload reports, if it has a known one. This is what sets a destination's
    /// `reported` health part.
    pub fn reported(&self) -> Option<ReportedHealth> {
        self.status
    }

    /// The HTTP status code a service answers with when serving this payload; see
    /// [`status_code`].
    pub fn status_code(&self) -> u16 {
        status_code(self.status)
    }
}

/// The HTTP status code for a health endpoint reporting `status`: `Healthy` → 200,
/// `Degraded` → 200 (still usable, just less preferred), `Unhealthy` → 503, none → 503.
///
/// Degraded answers 200 so that callers which only look at the status code keep using the
/// instance; healthpick callers read the payload and rank it lower.
pub fn status_code(status: Option<ReportedHealth>) -> u16 {
    match status {
        Some(ReportedHealth::Healthy | ReportedHealth::Degraded) => 200,
        Some(ReportedHealth::Unhealthy) | None => 503,
    }
}

// ---- lenient reading ------------------------------------------------------------------------
//
// Hand-written rather than derived: the derive rejects duplicate fields and wrong types, and a
// wrong `version` type must not hide an `Unhealthy` status from the probe.

impl<'de> Deserialize<'de> for HealthPayload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(PayloadVisitor)
    }
}

struct PayloadVisitor;

impl<'de> Visitor<'de> for PayloadVisitor {
    type Value = HealthPayload;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a health payload object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<HealthPayload, A::Error> {
        let mut payload = HealthPayload::default();
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Status => {
                    let text = map.next_value::<LenientString>()?.0;
                    payload.status = text.as_deref().and_then(ReportedHealth::parse);
                }
                Field::Version => payload.version = map.next_value::<LenientString>()?.0,
                Field::Environment => payload.environment = map.next_value::<LenientString>()?.0,
                Field::Hostname => payload.hostname = map.next_value::<LenientString>()?.0,
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(payload)
    }
}

/// A payload field name, matched case-insensitively.
enum Field {
    Status,
    Version,
    Environment,
    Hostname,
    Other,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Field, E> {
                Ok(
                    match [
                        ("status", Field::Status),
                        ("version", Field::Version),
                        ("environment", Field::Environment),
                        ("hostname", Field::Hostname),
                    ]
                    .into_iter()
                    .find(|(known, _)| known.eq_ignore_ascii_case(name))
                    {
                        Some((_, field)) => field,
                        None => Field::Other,
                    },
                )
            }
        }
        deserializer.deserialize_identifier(FieldVisitor)
    }
}

/// A string value, or `None` for a value of any other type (which is skipped without building it).
struct LenientString(Option<String>);

impl<'de> Deserialize<'de> for LenientString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientStringVisitor)
    }
}

struct LenientStringVisitor;

impl<'de> Visitor<'de> for LenientStringVisitor {
    type Value = LenientString;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<LenientString, E> {
        Ok(LenientString(Some(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<LenientString, E> {
        Ok(LenientString(Some(v)))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<LenientString, E> {
        Ok(LenientString(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<LenientString, E> {
        Ok(LenientString(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<LenientString, E> {
        Ok(LenientString(None))
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<LenientString, E> {
        Ok(LenientString(None))
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<LenientString, E> {
        Ok(LenientString(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<LenientString, E> {
        Ok(LenientString(None))
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<LenientString, E> {
        Ok(LenientString(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<LenientString, E> {
        Ok(LenientString(None))
    }
    fn visit_none<E: de::Error>(self) -> Result<LenientString, E> {
        Ok(LenientString(None))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<LenientString, D::Error> {
        LenientString::deserialize(d)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<LenientString, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(LenientString(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LenientString, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(LenientString(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_field_is_lenient_but_other_fields_survive() {
        let p =
            HealthPayload::parse(br#"{"status":{"a":[1,2]},"version":"v","hostname":7}"#).unwrap();
        assert_eq!(p.reported(), None);
        assert_eq!(p.version.as_deref(), Some("v"));
        assert_eq!(p.hostname, None);
    }

    #[test]
    fn pascal_case_names_and_last_duplicate_win() {
        let p = HealthPayload::parse(br#"{"Status":"Healthy","STATUS":"Unhealthy"}"#).unwrap();
        assert_eq!(p.reported(), Some(ReportedHealth::Unhealthy));
    }

    #[test]
    fn bom_and_whitespace_are_allowed_trailing_garbage_is_not() {
        assert!(HealthPayload::parse(b"\xEF\xBB\xBF \n{}").is_some());
        assert!(HealthPayload::parse(b"{} x").is_none());
        assert!(HealthPayload::parse(b"{\"status\":\"Healthy\"").is_none());
    }
}

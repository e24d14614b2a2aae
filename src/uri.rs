//! Building URLs from a destination's base URL (probe URIs; reused for requests).

use url::Url;

/// The longest address (base URL) accepted, in bytes, measured on the URL as parsed (what is
/// stored and sent: non-ASCII characters percent-encoded, the host in its ASCII form), wherever
/// an address is checked: configuration, published sets, probes. Real base URLs are far shorter;
/// the limit keeps a pathological value (a 50 MB host name) from being stored and copied into
/// every request URL.
pub const MAX_ADDRESS_LEN: usize = 2048;

/// A text this long is refused without being parsed: parsing never makes a URL shorter than a
/// quarter of its text, except for padding the parser drops (tabs, line breaks, `/./`).
const MAX_ADDRESS_TEXT: usize = 4 * MAX_ADDRESS_LEN;

/// The longest host name accepted, in bytes: the limit of DNS names (RFC 1035).
pub const MAX_HOST_LEN: usize = 253;

/// Why a text is not a usable base URL; its `Display` completes a sentence that starts with the
/// value (`Address `...` is not an absolute http(s) URL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BaseUrlError {
    NotAbsolute,
    NoHost,
    TooLong(usize),
    HostTooLong(usize),
}

impl std::fmt::Display for BaseUrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BaseUrlError::NotAbsolute => f.write_str("is not an absolute http(s) URL"),
            BaseUrlError::NoHost => f.write_str("has no host"),
            BaseUrlError::TooLong(len) => write!(
                f,
                "is {len} bytes long; an address may have at most {MAX_ADDRESS_LEN} bytes"
            ),
            BaseUrlError::HostTooLong(len) => write!(
                f,
                "has a host name of {len} bytes; a host name may have at most {MAX_HOST_LEN} bytes"
            ),
        }
    }
}

/// Parses an absolute http(s) URL with a host of at most [`MAX_HOST_LEN`] bytes, at most
/// [`MAX_ADDRESS_LEN`] bytes long once parsed, or says what is wrong with it.
pub(crate) fn parse_base(text: &str) -> Result<Url, BaseUrlError> {
    let text = text.trim();
    // A huge value is refused without being parsed or copied.
    if text.len() > MAX_ADDRESS_TEXT {
        return Err(BaseUrlError::TooLong(text.len()));
    }
    let url = Url::parse(text).map_err(|_| BaseUrlError::NotAbsolute)?;
    check_base(url)
}

/// Checks a parsed URL as [`parse_base`] does: http(s), a host of at most [`MAX_HOST_LEN`]
/// bytes, at most [`MAX_ADDRESS_LEN`] bytes in all.
pub(crate) fn check_base(url: Url) -> Result<Url, BaseUrlError> {
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(BaseUrlError::NotAbsolute);
    }
    match url.host_str() {
        None | Some("") => return Err(BaseUrlError::NoHost),
        Some(host) if host.len() > MAX_HOST_LEN => {
            return Err(BaseUrlError::HostTooLong(host.len()))
        }
        Some(_) => {}
    }
    if url.as_str().len() > MAX_ADDRESS_LEN {
        return Err(BaseUrlError::TooLong(url.as_str().len()));
    }
    Ok(url)
}

/// A value for a message: as it is, or its first characters and its length when it is long, so
/// that a huge value does not end up in every log line.
pub(crate) fn shown(value: &str) -> std::borrow::Cow<'_, str> {
    const SHOWN: usize = 80;
    if value.len() <= SHOWN {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut end = SHOWN;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}... ({} bytes)", &value[..end], value.len()))
}

/// The probe URI of a destination, by the rules of active checks: base = `health` or `address` without its query and
/// fragment; with an empty `path` the base path (at least `/`), otherwise the base path with one
/// trailing `/` removed followed by `path`; then `query` verbatim. The `url` crate percent-encodes
/// what lies outside the path set and normalises scheme, host and default ports.
///
/// ```
/// # use healthpick::probe_uri;
/// let uri = probe_uri("https://localhost:10000/", Some("/api/health/"), Some("?key=value")).unwrap();
/// assert_eq!(uri.as_str(), "https://localhost:10000/api/health/?key=value");
/// ```
///
/// # Errors
/// A message when the base is not an absolute http(s) URL, `path` does not start with `/` or
/// `query` does not start with `?`.
pub fn probe_uri(base: &str, path: Option<&str>, query: Option<&str>) -> Result<Url, String> {
    let url = parse_base(base).map_err(|why| format!("base `{}` {why}", shown(base)))?;
    join(url, path, query)
}

/// The rules of [`probe_uri`] on an already parsed base URL.
fn join(mut url: Url, path: Option<&str>, query: Option<&str>) -> Result<Url, String> {
    clear_query_and_fragment(&mut url);
    let path = path.unwrap_or("");
    if !path.is_empty() {
        if !path.starts_with('/') {
            return Err(format!("Path `{path}` must start with `/`"));
        }
        set_joined_path(&mut url, path);
    }
    match query {
        Some(q) if !q.is_empty() => {
            let Some(rest) = q.strip_prefix('?') else {
                return Err(format!("Query `{q}` must start with `?`"));
            };
            url.set_query(Some(rest));
        }
        _ => {}
    }
    Ok(url)
}

/// Drops the base's query and fragment (untouched when it has none: the setters re-serialize).
fn clear_query_and_fragment(url: &mut Url) {
    if url.fragment().is_some() {
        url.set_fragment(None);
    }
    if url.query().is_some() {
        url.set_query(None);
    }
}

/// Sets the path to the base path with one trailing `/` removed followed by `path` (which
/// starts with `/`). `set_path` would treat `?` and `#` as data anyway, but they are encoded
/// here so the rule does not depend on the url crate's choice.
fn set_joined_path(url: &mut Url, path: &str) {
    let base_path = url.path();
    let trimmed = base_path.strip_suffix('/').unwrap_or(base_path);
    let escape = path.contains(['?', '#']);
    if trimmed.is_empty() && !escape {
        // The usual base (`http://host:port/`): the path as it is, without building a copy.
        url.set_path(path);
        return;
    }
    let mut joined = String::with_capacity(trimmed.len() + path.len() + 4);
    joined.push_str(trimmed);
    if escape {
        for c in path.chars() {
            match c {
                '?' => joined.push_str("%3F"),
                '#' => joined.push_str("%23"),
                c => joined.push(c),
            }
        }
    } else {
        joined.push_str(path);
    }
    url.set_path(&joined);
}

/// The URL of a request to `path_and_query` (`/api/orders?id=7`) on a destination whose base
/// URL is `base`, by the same rules as probe URIs: the base path with one trailing `/`
/// removed, then the path, then the query verbatim. A path without a leading `/` gets one.
pub(crate) fn request_url(base: &Url, path_and_query: &str) -> Url {
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    };
    // The base was parsed when the config was applied: start from a copy, not a re-parse.
    let mut url = base.clone();
    clear_query_and_fragment(&mut url);
    if !path.is_empty() {
        if path.starts_with('/') {
            set_joined_path(&mut url, path);
        } else {
            set_joined_path(&mut url, &format!("/{path}"));
        }
    }
    if let Some(query) = query {
        url.set_query(Some(query));
    }
    url
}

#[cfg(test)]
mod tests {
    use super::probe_uri;

    fn uri(base: &str, path: Option<&str>, query: Option<&str>) -> String {
        probe_uri(base, path, query).unwrap().to_string()
    }

    #[test]
    fn spec_examples() {
        assert_eq!(
            uri(
                "https://localhost:10000/",
                Some("/api/health/"),
                Some("?key=value")
            ),
            "https://localhost:10000/api/health/?key=value"
        );
        assert_eq!(
            uri("https://localhost:20000/api", Some("/health/"), None),
            "https://localhost:20000/api/health/"
        );
        assert_eq!(
            uri("https://localhost:10000/api", None, None),
            "https://localhost:10000/api"
        );
        assert_eq!(
            uri("https://localhost:443/", None, None),
            "https://localhost/"
        );
    }

    #[test]
    fn base_query_and_fragment_are_dropped() {
        assert_eq!(
            uri("http://h:81/a/?x=1#frag", Some("/b"), None),
            "http://h:81/a/b"
        );
    }

    #[test]
    fn only_one_trailing_slash_is_removed() {
        assert_eq!(uri("http://h/a//", Some("/b"), None), "http://h/a//b");
    }

    #[test]
    fn path_characters_are_percent_encoded() {
        assert_eq!(uri("http://h/", Some("/a b"), None), "http://h/a%20b");
        assert_eq!(uri("http://h/", Some("/a?b"), None), "http://h/a%3Fb");
    }

    #[test]
    fn scheme_and_host_are_lower_cased_and_default_ports_vanish() {
        assert_eq!(
            uri("HTTP://LocalHost:80/Api", None, None),
            "http://localhost/Api"
        );
    }

    #[test]
    fn request_urls_join_path_and_query() {
        let base = url::Url::parse("http://h:81/svc/").unwrap();
        let u = |p: &str| super::request_url(&base, p).to_string();
        assert_eq!(u("/api/orders?id=7"), "http://h:81/svc/api/orders?id=7");
        assert_eq!(u("api/orders"), "http://h:81/svc/api/orders");
        assert_eq!(u(""), "http://h:81/svc/");
        assert_eq!(u("?x=1"), "http://h:81/svc/?x=1");
        assert_eq!(u("/a?"), "http://h:81/svc/a?");
        assert_eq!(u("/a#b?c#d"), "http://h:81/svc/a%23b?c%23d");
        // The base's own query and fragment never reach a request.
        let base = url::Url::parse("http://h:81/svc?k=v#top").unwrap();
        let u = |p: &str| super::request_url(&base, p).to_string();
        assert_eq!(u("/api"), "http://h:81/svc/api");
        assert_eq!(u(""), "http://h:81/svc");
        assert_eq!(u("/api?id=7"), "http://h:81/svc/api?id=7");
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(probe_uri("localhost:10010", None, None).is_err());
        assert!(probe_uri("ftp://h/", None, None).is_err());
        assert!(probe_uri("http://h/", Some("health"), None).is_err());
        assert!(probe_uri("http://h/", None, Some("a=b")).is_err());
    }

    #[test]
    fn addresses_and_host_names_have_a_length_limit() {
        use super::{parse_base, BaseUrlError, MAX_ADDRESS_LEN, MAX_HOST_LEN};
        let host = "a".repeat(MAX_HOST_LEN);
        assert!(parse_base(&format!("http://{host}/")).is_ok());
        let host = "a".repeat(MAX_HOST_LEN + 1);
        assert_eq!(
            parse_base(&format!("http://{host}/")),
            Err(BaseUrlError::HostTooLong(MAX_HOST_LEN + 1))
        );
        let path = "p".repeat(MAX_ADDRESS_LEN);
        let long = format!("http://h/{path}");
        assert_eq!(parse_base(&long), Err(BaseUrlError::TooLong(long.len())));
        // Judged once parsed: 700 two-byte characters are 4,200 bytes percent-encoded.
        let encoded = format!("http://h/{}", "é".repeat(700));
        assert_eq!(encoded.len(), 1409);
        assert_eq!(parse_base(&encoded), Err(BaseUrlError::TooLong(4209)));
        let huge = "p".repeat(super::MAX_ADDRESS_TEXT + 1);
        assert!(matches!(parse_base(&huge), Err(BaseUrlError::TooLong(_))));
        assert!(BaseUrlError::TooLong(long.len())
            .to_string()
            .contains("at most 2048 bytes"));
        let err = probe_uri(&long, None, None).unwrap_err();
        assert!(
            err.len() < 300,
            "the message repeats the whole value: {}",
            err.len()
        );
    }
}

//! A call's affinity key, from the request it sends: a cluster's `SessionAffinity` names a
//! request header (`CustomHeader`) or a cookie (`Cookie`, `HashCookie`, `ArrCookie`) whose value
//! is the key, and a key the caller gives for one request wins over it. The wrapped client, the
//! middleware and the tower layer all read it here, so a request keyed through one goes where
//! the same request through another goes.
//!
//! Only a request to a cluster with `SessionAffinity` (or with a key of its own) is read: every
//! other call costs nothing here.

use bytes::Bytes;
use http::header::{HeaderMap, COOKIE};

use crate::config::affinity::SessionAffinityConfig;

/// The affinity key of a call: `explicit`, the key the caller gave for the request, or else the
/// one its `headers` carry where the cluster's `affinity` says; `None` when there is neither
/// (the cluster's load-balancing policy then picks).
#[inline]
pub(crate) fn call_key(
    explicit: Option<Bytes>,
    affinity: Option<&SessionAffinityConfig>,
    headers: Option<&HeaderMap>,
) -> Option<Bytes> {
    match (explicit, affinity, headers) {
        (Some(key), ..) => Some(key),
        (None, Some(affinity), Some(headers)) => request_key(affinity, headers),
        _ => None,
    }
}

/// The key `headers` carry where `affinity` says: the first value of the header it names, or
/// the first cookie of that name in the request's `Cookie` headers. An empty value is no key.
#[inline(never)]
fn request_key(affinity: &SessionAffinityConfig, headers: &HeaderMap) -> Option<Bytes> {
    let name = affinity.affinity_key_name_setting();
    let value = if affinity.policy_setting().reads_cookie() {
        cookie(headers, name.as_bytes())?
    } else {
        headers.get(name)?.as_bytes()
    };
    (!value.is_empty()).then(|| Bytes::copy_from_slice(value))
}

/// The value of the first cookie named `name` in the `Cookie` headers of a request (HTTP/2
/// may send a request's cookies in several), with the double quotes around a quoted value
/// taken off. Pairs are separated by `;`, whitespace around them, their names and values does
/// not count, names are case-sensitive, and a pair without `=` is no cookie (as RFC 6265 has a
/// server read them).
fn cookie<'h>(headers: &'h HeaderMap, name: &[u8]) -> Option<&'h [u8]> {
    headers
        .get_all(COOKIE)
        .iter()
        .flat_map(|header| header.as_bytes().split(|&b| b == b';'))
        .find_map(|pair| {
            let (key, value) = pair.split_at(pair.iter().position(|&b| b == b'=')?);
            (trim(key) == name).then(|| unquote(trim(&value[1..])))
        })
}

/// `bytes` without the spaces and tabs around it.
fn trim(bytes: &[u8]) -> &[u8] {
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes.iter().position(|b| !blank(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !blank(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// A cookie value without the double quotes it may be sent in.
fn unquote(value: &[u8]) -> &[u8] {
    match value {
        [b'"', inner @ .., b'"'] => inner,
        _ => value,
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http::header::{HeaderMap, HeaderValue, COOKIE};

    use super::{call_key, cookie, trim};
    use crate::config::affinity::{AffinityPolicy, SessionAffinityConfig};

    fn headers(list: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in list {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    fn cookies(values: &[&'static str]) -> HeaderMap {
        let list: Vec<_> = values.iter().map(|v| ("cookie", *v)).collect();
        headers(&list)
    }

    fn found<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
        cookie(headers, name.as_bytes()).map(|v| std::str::from_utf8(v).unwrap())
    }

    #[test]
    fn a_cookie_is_found_among_pairs_and_headers_first_match_winning() {
        let h = cookies(&["a=1; session=abc; b=2"]);
        assert_eq!(found(&h, "session"), Some("abc"));
        assert_eq!(found(&h, "a"), Some("1"));
        assert_eq!(found(&h, "b"), Some("2"));
        assert_eq!(found(&h, "c"), None);

        let h = cookies(&["a=1", "session=from-second; session=later"]);
        assert_eq!(found(&h, "session"), Some("from-second"));
        let h = cookies(&["session=first", "session=second"]);
        assert_eq!(found(&h, "session"), Some("first"));
    }

    #[test]
    fn cookie_names_are_exact_and_whitespace_and_quotes_do_not_count() {
        let h = cookies(&[" \tsession = \"a b\" ;Session=upper;xsession=other;sess=short"]);
        assert_eq!(found(&h, "session"), Some("a b"));
        assert_eq!(found(&h, "Session"), Some("upper"));
        assert_eq!(found(&h, "sess"), Some("short"));
        assert_eq!(found(&h, "ession"), None);

        // A value may hold `=`; a pair without one is no cookie; empty pairs are skipped.
        let h = cookies(&[";;session; token=a=b==; session=ok;"]);
        assert_eq!(found(&h, "token"), Some("a=b=="));
        assert_eq!(found(&h, "session"), Some("ok"));
        // A lone quote is not a quoted value.
        assert_eq!(found(&cookies(&["q=\""]), "q"), Some("\""));
        assert_eq!(found(&cookies(&["q=\"\""]), "q"), Some(""));
        assert_eq!(found(&cookies(&[""]), "q"), None);
        assert_eq!(found(&HeaderMap::new(), "q"), None);
    }

    #[test]
    fn trimming_leaves_inner_whitespace() {
        assert_eq!(trim(b"  a b\t "), b"a b");
        assert_eq!(trim(b" \t "), b"");
        assert_eq!(trim(b""), b"");
    }

    fn affinity(policy: AffinityPolicy) -> SessionAffinityConfig {
        SessionAffinityConfig::new(policy).affinity_key_name("X-Cart")
    }

    fn key(explicit: Option<&str>, policy: Option<AffinityPolicy>, h: &HeaderMap) -> Option<Bytes> {
        let explicit = explicit.map(|k| Bytes::copy_from_slice(k.as_bytes()));
        call_key(explicit, policy.map(affinity).as_ref(), Some(h))
    }

    #[test]
    fn the_key_comes_from_the_header_or_cookie_the_affinity_names() {
        let h = headers(&[
            ("x-cart", "c-1"),
            ("x-cart", "c-2"),
            (COOKIE.as_str(), "X-Cart=k-1"),
        ]);
        assert_eq!(
            key(None, Some(AffinityPolicy::CustomHeader), &h),
            Some("c-1".into())
        );
        for policy in [
            AffinityPolicy::Cookie,
            AffinityPolicy::HashCookie,
            AffinityPolicy::ArrCookie,
        ] {
            assert_eq!(
                key(None, Some(policy), &h),
                Some("k-1".into()),
                "{policy:?}"
            );
        }
        // The cookie's name is exact, the header's is not (header names never are).
        let h = headers(&[("cookie", "x-cart=lower")]);
        assert_eq!(key(None, Some(AffinityPolicy::Cookie), &h), None);
    }

    #[test]
    fn an_explicit_key_wins_and_no_key_or_an_empty_one_is_none() {
        let h = headers(&[("x-cart", "c-1"), ("cookie", "X-Cart=")]);
        let header = Some(AffinityPolicy::CustomHeader);
        assert_eq!(key(Some("mine"), header, &h), Some("mine".into()));
        assert_eq!(
            key(Some("mine"), None, &h),
            Some("mine".into()),
            "no affinity"
        );
        assert_eq!(key(None, None, &h), None, "no affinity, no key");
        assert_eq!(
            key(None, Some(AffinityPolicy::Cookie), &h),
            None,
            "empty cookie"
        );
        let empty = headers(&[("x-cart", "")]);
        assert_eq!(key(None, header, &empty), None, "empty header");
        assert_eq!(key(None, header, &HeaderMap::new()), None);
        assert_eq!(
            call_key(None, Some(&affinity(AffinityPolicy::Cookie)), None),
            None
        );
    }
}

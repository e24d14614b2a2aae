//! `HttpRequest:Version` as YARP reads and validates it: .NET's `Version.Parse` of the
//! text, with `.0` appended when it has no dot (so `"2"` is 2.0 and `"20"` is 20.0), then one of
//! the versions YARP's validator accepts: 1.0, 1.1, 2.0 and 3.0.

/// What a `Version` text means to YARP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HttpVersion {
    /// A version YARP accepts: 1.0, 1.1, 2.0 or 3.0, as (major, minor).
    Supported(u32, u32),
    /// A version, but not one YARP accepts; .NET's text of it (`20.0`, `2.0.0`).
    Unsupported(String),
    /// Not a version at all (YARP fails to load the file).
    Malformed,
}

/// Reads a `Version` text as YARP's configuration reader and validator do.
pub(crate) fn parse_http_version(text: &str) -> HttpVersion {
    let mut text = text.to_string();
    if !text.contains('.') {
        text.push_str(".0");
    }
    let parts: Vec<&str> = text.split('.').collect();
    if !(2..=4).contains(&parts.len()) {
        return HttpVersion::Malformed;
    }
    // Each component as .NET's `int.Parse(NumberStyles.Integer)`: spaces and a `+` allowed,
    // non-negative, at most `int.MaxValue`.
    let mut numbers = Vec::with_capacity(parts.len());
    for part in parts {
        let part = part.trim();
        let digits = part.strip_prefix('+').unwrap_or(part);
        match digits.parse::<u32>() {
            Ok(n) if digits.bytes().all(|b| b.is_ascii_digit()) && n <= i32::MAX as u32 => {
                numbers.push(n)
            }
            _ => return HttpVersion::Malformed,
        }
    }
    match numbers.as_slice() {
        [1, 0] | [1, 1] | [2, 0] | [3, 0] => HttpVersion::Supported(numbers[0], numbers[1]),
        _ => HttpVersion::Unsupported(
            numbers
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("."),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yarp_accepts_these() {
        for (text, want) in [
            ("1.0", (1, 0)),
            ("1.1", (1, 1)),
            ("2", (2, 0)),
            ("2.0", (2, 0)),
            ("3", (3, 0)),
            ("3.0", (3, 0)),
            (" 2.0 ", (2, 0)),
            ("1", (1, 0)),
            ("01.1", (1, 1)),
        ] {
            assert_eq!(
                parse_http_version(text),
                HttpVersion::Supported(want.0, want.1),
                "{text}"
            );
        }
    }

    #[test]
    fn yarp_rejects_these() {
        for (text, net) in [
            ("1.9", "1.9"),
            ("2.5", "2.5"),
            ("3.1", "3.1"),
            ("20", "20.0"),
            ("2.0.0", "2.0.0"),
            ("0", "0.0"),
        ] {
            assert_eq!(
                parse_http_version(text),
                HttpVersion::Unsupported(net.into()),
                "{text}"
            );
        }
        for text in [
            "abc",
            "2.",
            "-1.0",
            "HTTP/2",
            "1.1.1.1.1",
            "",
            "2,0",
            "99999999999.0",
        ] {
            assert_eq!(parse_http_version(text), HttpVersion::Malformed, "{text}");
        }
    }
}

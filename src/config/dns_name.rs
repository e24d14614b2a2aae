//! Whether a text is a DNS name a resolver can be asked for, judged as the `Dns` source reads
//! it (a name of labels, each an internationalised label processed by UTS 46 with the STD3
//! rules, or an underscore label such as `_http`), so that a configuration that passes
//! validation names something the source can look up.

use idna::uts46::{AsciiDenyList, DnsLength, Hyphens, Uts46};

/// The longest name, in bytes of its ASCII form without the trailing dot (255 on the wire).
const MAX_NAME_LEN: usize = 253;

/// The longest label, in bytes of its ASCII form.
const MAX_LABEL_LEN: usize = 63;

/// Why `name` is not a DNS name, or `None` when it is one. A trailing dot and surrounding
/// spaces are allowed; a name is case-insensitive.
pub(crate) fn dns_name_problem(name: &str) -> Option<String> {
    let name = name.trim();
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Some("it is empty".into());
    }
    let mut ascii_len = 0;
    for label in name.split('.') {
        let ascii = match ascii_label(label) {
            Ok(ascii) => ascii,
            Err(why) => return Some(why),
        };
        ascii_len += ascii.len() + 1;
    }
    let ascii_len = ascii_len - 1;
    (ascii_len > MAX_NAME_LEN)
        .then(|| format!("it is {ascii_len} bytes long; a DNS name has at most {MAX_NAME_LEN}"))
}

/// The ASCII form of one label, or why it is not a label.
fn ascii_label(label: &str) -> Result<String, String> {
    if label.is_empty() {
        return Err("it has an empty label (two dots in a row, or a leading dot)".into());
    }
    let ascii = if label.starts_with('_') {
        // A service or protocol label (`_http._tcp`): ASCII as written.
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "label `{label}` has characters other than letters, digits, `-` and `_`"
            ));
        }
        label.to_ascii_lowercase()
    } else {
        Uts46::new()
            .to_ascii(
                label.as_bytes(),
                AsciiDenyList::STD3,
                Hyphens::Allow,
                DnsLength::Ignore,
            )
            .map_err(|_| {
                format!("label `{label}` is not a host name label (letters, digits and `-`, or a valid internationalised name)")
            })?
            .into_owned()
    };
    if ascii.is_empty() {
        return Err(format!("label `{label}` is empty once normalised"));
    }
    if ascii.starts_with('-') {
        return Err(format!("label `{label}` starts with `-`"));
    }
    if ascii.len() > MAX_LABEL_LEN {
        return Err(format!(
            "label `{label}` is {} bytes long; a label has at most {MAX_LABEL_LEN}",
            ascii.len()
        ));
    }
    Ok(ascii)
}

#[cfg(test)]
mod tests {
    use super::dns_name_problem;

    #[test]
    fn names_and_what_is_wrong_with_the_others() {
        for good in [
            "payments.test",
            "payments.test.",
            "PAYMENTS.test",
            "_http._tcp.payments.test",
            "bücher.test",
            "xn--bcher-kva.test",
            "localhost",
            "1.payments.test",
        ] {
            assert_eq!(dns_name_problem(good), None, "{good}");
        }
        let problem = |name: &str| dns_name_problem(name).unwrap_or_else(|| panic!("{name}"));
        assert!(problem("pay`ments.test").contains("label `pay`ments`"));
        assert!(problem("xn--bcher-kvq.test").contains("xn--bcher-kvq"));
        assert!(problem("a..test").contains("empty label"));
        assert!(problem("").contains("empty"));
        assert!(problem(".").contains("empty"));
        assert!(problem("-a.test").contains("starts with `-`"));
        assert!(problem("_a b.test").contains("characters other than"));
        assert!(problem(&format!("{}.test", "a".repeat(64))).contains("at most 63"));
        assert!(problem(&"abcdefghi.".repeat(26)).contains("at most 253"));
    }
}

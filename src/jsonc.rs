//! The JSON dialect of .NET configuration files (`appsettings.json`): `//` and `/* */` comments,
//! trailing commas and a leading byte-order mark, otherwise strict JSON as System.Text.Json reads
//! it. The config reader and the simulator's scenario reader both parse through here,
//! into one tree that keeps each value's kind and where it sits in the text.

use std::ops::Range;

use jsonc_parser::ast::{ObjectPropName, Value};
use jsonc_parser::common::Ranged;
use jsonc_parser::{CollectOptions, ParseOptions};

/// One JSON value and the byte range of the document it was read from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Json {
    pub kind: JsonKind,
    pub span: Range<usize>,
}

/// What a JSON value is. Numbers keep their text as written (`1.50` stays `1.50`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum JsonKind {
    Object(Vec<(String, Json)>),
    Array(Vec<Json>),
    String(String),
    Number(String),
    Bool(bool),
    Null,
}

/// Parses `text`; `Ok(None)` for an empty document. Spans are byte ranges of `text` itself (a
/// leading byte-order mark is skipped, as .NET does, and counted).
///
/// # Errors
/// `malformed JSON at line L column C: <what>`.
pub(crate) fn parse(text: &str) -> Result<Option<Json>, String> {
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let offset = text.len() - body.len();
    let parsed =
        jsonc_parser::parse_to_ast(body, &CollectOptions::default(), &dialect()).map_err(|e| {
            format!(
                "malformed JSON at line {} column {}: {}",
                e.line_display(),
                e.column_display(),
                e.kind()
            )
        })?;
    Ok(parsed.value.map(|v| Json::from_ast(v, offset)))
}

fn dialect() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

impl Json {
    fn from_ast(value: Value<'_>, offset: usize) -> Json {
        let range = value.range();
        let span = range.start + offset..range.end + offset;
        let kind = match value {
            Value::StringLit(s) => JsonKind::String(s.value.into_owned()),
            Value::NumberLit(n) => JsonKind::Number(n.value.to_string()),
            Value::BooleanLit(b) => JsonKind::Bool(b.value),
            Value::NullKeyword(_) => JsonKind::Null,
            Value::Object(o) => JsonKind::Object(
                o.properties
                    .into_iter()
                    .map(|p| {
                        let name = match p.name {
                            ObjectPropName::String(s) => s.value.into_owned(),
                            ObjectPropName::Word(w) => w.value.to_string(),
                        };
                        (name, Json::from_ast(p.value, offset))
                    })
                    .collect(),
            ),
            Value::Array(a) => JsonKind::Array(
                a.elements
                    .into_iter()
                    .map(|v| Json::from_ast(v, offset))
                    .collect(),
            ),
        };
        Json { kind, span }
    }

    /// `an object`, `an array`, `a string`, `a number`, `a boolean` or `null`, for messages.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            JsonKind::Object(_) => "an object",
            JsonKind::Array(_) => "an array",
            JsonKind::String(_) => "a string",
            JsonKind::Number(_) => "a number",
            JsonKind::Bool(_) => "a boolean",
            JsonKind::Null => "null",
        }
    }

    /// The text of `document` this value was read from.
    pub fn text_in<'t>(&self, document: &'t str) -> &'t str {
        document.get(self.span.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_trailing_commas_and_a_byte_order_mark_are_read() {
        let text =
            "\u{feff}{ // a comment\n \"A\": [1.50, true, null, \"x\",], /* b */ \"b\": {} , }";
        let json = parse(text).unwrap().unwrap();
        let JsonKind::Object(members) = &json.kind else {
            panic!("{json:?}")
        };
        let (key, a) = &members[0];
        assert_eq!(key, "A");
        let JsonKind::Array(items) = &a.kind else {
            panic!("{a:?}")
        };
        assert_eq!(items[0].kind, JsonKind::Number("1.50".into()));
        assert_eq!(items[1].kind, JsonKind::Bool(true));
        assert_eq!(items[2].kind, JsonKind::Null);
        assert_eq!(items[3].kind_name(), "a string");
        // Spans count the byte-order mark, so they slice the text as given.
        assert_eq!(a.text_in(text), "[1.50, true, null, \"x\",]");
        assert_eq!(members[1].1.text_in(text), "{}");
    }

    #[test]
    fn what_strict_json_refuses_is_refused_with_a_position() {
        assert_eq!(parse("").unwrap(), None);
        for bad in [
            "{'a': 1}",
            "{a: 1}",
            "{\"a\": 0x10}",
            "{\"a\": +1}",
            "{\"a\": .5}",
            "{\"a\" 1}",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                e.starts_with("malformed JSON at line 1 column "),
                "{bad}: {e}"
            );
        }
    }
}

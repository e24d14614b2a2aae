//! Words that mean nothing to a reader of the code or the docs, kept out by a test: users have
//! neither the design notes nor the issue tracker, and a figure from one machine on one day goes
//! stale the day the code changes. This reads the Rust files of `src/`, `cli/src`, `cli/tests`
//! and `tests/`, and `ARCHITECTURE.md`, `README.md` and the guide's chapters, and fails, naming
//! file and line, on
//!
//! - a citation of a section of the specification (a section sign before a number);
//! - an issue number ("issue" and a number, or a number sign before a number in prose);
//! - a date (year, month and day, or year and month);
//! - benchmark history: figures from past runs (a figure after "was", an arrow between two
//!   figures with units, a note of what was measured or on which host, instruction counts, a
//!   time per pick or request).
//!
//! In Rust files only comments count, and string literals for the specification rule: code and
//! test data may hold anything (a Kubernetes timestamp, a `#[derive]`, a hex colour). Markdown
//! files count as a whole. `README.md` and the guide have a test of their own.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// One kind of problem: its name in the report and the pattern that finds it.
struct Rule {
    name: &'static str,
    pattern: Regex,
    /// Whether the rule reads string literals of Rust files too (not only comments).
    in_strings: bool,
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rule = |name, pattern: &str, in_strings| Rule {
        name,
        pattern: Regex::new(pattern).expect("tidy pattern"),
        in_strings,
    };
    vec![
        rule(
            "a specification section",
            r"SPEC\s*(\x{a7}|section\s*)?\s*\d|SPEC\s*\x{a7}|\x{a7}\s*\d|\bspec's [\w ]*section",
            true,
        ),
        rule(
            "an issue number",
            r"(?i)\bissues?\s+#?\d|(^|[\s(\[,;])#\d{1,5}\b",
            false,
        ),
        rule("a date", r"\b20\d\d-(0[1-9]|1[0-2])(-[0-3]\d)?\b", false),
        rule(
            "benchmark history",
            concat!(
                r"(?i)\bwas\s+~?\d",
                r"|\d[\d.,]*\s?(ns|us|\x{b5}s|ms|s|x|%|KiB|MiB)\s*(->|\x{2192})\s*~?\d",
                r"|\(measured|\bmeasured on (the |a |an )?([\w-]+ )?(host|machine|vm)\b|\binstructions\b",
                r"|\b\d[\d.,]*\s?(ns|us|\x{b5}s) (a|per|for one) (pick|request|call)\b",
            ),
            false,
        ),
    ]
});

/// Where a line's text to check lies.
#[derive(Default)]
struct LineText {
    comment: String,
    string: String,
}

/// The comment text and string-literal text of each line of Rust `source`: `//` comments and
/// `/* */` blocks (nested) outside literals, and the contents of string literals, raw ones
/// included. Character literals and lifetimes are told apart, so that `'"'` opens nothing.
fn rust_texts(source: &str) -> Vec<LineText> {
    enum State {
        Code,
        LineComment,
        Block(usize),
        Str,
        Raw(usize),
    }
    let chars: Vec<char> = source.chars().collect();
    let mut lines = vec![LineText::default()];
    let mut state = State::Code;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            lines.push(LineText::default());
            if let State::LineComment = state {
                state = State::Code;
            }
            i += 1;
            continue;
        }
        let line = lines.last_mut().expect("a line");
        match state {
            State::Code => match c {
                '/' if at(i + 1) == '/' => {
                    state = State::LineComment;
                    i += 2;
                    continue;
                }
                '/' if at(i + 1) == '*' => {
                    state = State::Block(1);
                    i += 2;
                    continue;
                }
                '"' => state = State::Str,
                'r' if !is_ident(at(i.wrapping_sub(1))) || at(i.wrapping_sub(1)) == 'b' => {
                    let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
                    if at(i + 1 + hashes) == '"' {
                        state = State::Raw(hashes);
                        i += hashes + 2;
                        continue;
                    }
                }
                '\'' if at(i + 1) == '\\' => {
                    // An escaped character literal: skip to its closing quote.
                    i += 2;
                    while i < chars.len() && chars[i] != '\'' && chars[i] != '\n' {
                        i += 1;
                    }
                }
                '\'' if at(i + 2) == '\'' => i += 2,
                _ => {}
            },
            State::LineComment => line.comment.push(c),
            State::Block(depth) => {
                if c == '/' && at(i + 1) == '*' {
                    state = State::Block(depth + 1);
                    i += 2;
                    continue;
                }
                if c == '*' && at(i + 1) == '/' {
                    state = if depth == 1 {
                        State::Code
                    } else {
                        State::Block(depth - 1)
                    };
                    i += 2;
                    continue;
                }
                line.comment.push(c);
            }
            State::Str => match c {
                '\\' => {
                    line.string.push(c);
                    if at(i + 1) != '\n' {
                        line.string.push(at(i + 1));
                        i += 1;
                    }
                }
                '"' => state = State::Code,
                _ => line.string.push(c),
            },
            State::Raw(hashes) => {
                if c == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                    state = State::Code;
                    i += hashes + 1;
                    continue;
                }
                line.string.push(c);
            }
        }
        i += 1;
    }
    lines
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The problems of one file, as `path:line: kind: line`.
fn problems_in(path: &str, source: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut report = |number: usize, rule: &Rule| {
        let line = source.lines().nth(number).unwrap_or("").trim();
        found.push(format!("{path}:{}: {}: {line}", number + 1, rule.name));
    };
    if path.ends_with(".rs") {
        for (number, text) in rust_texts(source).iter().enumerate() {
            for rule in RULES.iter() {
                if rule.pattern.is_match(&text.comment)
                    || (rule.in_strings && rule.pattern.is_match(&text.string))
                {
                    report(number, rule);
                }
            }
        }
    } else {
        for (number, text) in source.lines().enumerate() {
            for rule in RULES.iter() {
                if rule.pattern.is_match(text) {
                    report(number, rule);
                }
            }
        }
    }
    found
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            into.push(path);
        }
    }
}

/// The problems of the files at `paths` (relative to the repository), all at once.
fn problems(paths: &[PathBuf]) -> Vec<String> {
    let root = root();
    let mut found = Vec::new();
    for path in paths {
        let source = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let shown = path.strip_prefix(&root).unwrap_or(path);
        found.extend(problems_in(&shown.display().to_string(), &source));
    }
    found
}

fn assert_tidy(found: &[String]) {
    assert!(
        found.is_empty(),
        "{} line(s) cite what readers do not have (specification sections, issue numbers, \
         dates, benchmark history); say why in words instead:\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn code_and_architecture_cite_no_spec_sections_issues_dates_or_benchmark_history() {
    let root = root();
    let mut paths = Vec::new();
    for dir in ["src", "cli/src", "cli/tests", "tests"] {
        rust_files(&root.join(dir), &mut paths);
    }
    assert!(
        paths.len() > 100,
        "found only {} Rust files under {}",
        paths.len(),
        root.display()
    );
    paths.push(root.join("ARCHITECTURE.md"));
    assert_tidy(&problems(&paths));
}

#[test]
fn readme_and_guide_cite_no_spec_sections_issues_dates_or_benchmark_history() {
    let root = root();
    let mut paths = vec![root.join("README.md")];
    let guide = std::fs::read_dir(root.join("src/guide")).expect("src/guide");
    for entry in guide {
        let path = entry.expect("a guide entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            paths.push(path);
        }
    }
    assert!(paths.len() > 5, "the guide's chapters: {paths:?}");
    assert_tidy(&problems(&paths));
}

/// Every rule fires on a line made for it, and stays quiet on its look-alikes: a test that
/// could not fail would prove nothing about the tree.
#[test]
fn each_rule_finds_its_kind_and_leaves_look_alikes_alone() {
    // Spelled apart, so that this file does not cite what it detects.
    let section = '\u{a7}';
    let issue = "issue";
    let flagged = [
        format!("// The status code of SPEC {section}9."),
        format!("/// Healthy again ({section}14.1)."),
        format!("//! See {issue} 14."),
        "// The acceptance point of issue #4.".to_owned(),
        "// The ratios of #2 and #19.".to_owned(),
        "// Faster since 2026-12-05.".to_owned(),
        "// Measured on the big host.".to_owned(),
        "// The engine's way until 2026-12.".to_owned(),
        "// It was 28 ns, now 13.".to_owned(),
        "// The test build 7m04s -> 4m23s.".to_owned(),
        "// A pick took 2.21x -> 1.70x the baseline.".to_owned(),
        "// Faster (measured with strace).".to_owned(),
        "// 19 fewer instructions a pick.".to_owned(),
        "// It costs 24 ns a pick.".to_owned(),
        format!("fn f() {{}} /* {issue} 7 */"),
        format!("let m = \"see SPEC {section}2\";"),
    ];
    for line in &flagged {
        assert_eq!(
            problems_in("sample.rs", line).len(),
            1,
            "not flagged exactly once: {line}"
        );
    }
    let in_string = format!("let s = \"// {issue} 3 in a string is data\";");
    let clean = [
        "#[derive(Debug)] // a derive",
        "#![forbid(unsafe_code)]",
        "let raw = r#\"{\"a\": 1}\"#; // a raw string",
        "meta.insert(\"creationTimestamp\".into(), \"2026-01-01T00:00:00Z\".into());",
        "let colour = \"#123456\"; // #ff00aa",
        "// A span in .NET ticks (100 ns); 2^24 ns units.",
        "// The window was full; 0/1 -> Healthy.",
        "/// The longest address, measured on the URL as parsed.",
        "let c = '\"'; // a quote, and the next line is code",
        &in_string,
        "fn f<'a>(x: &'a str) -> &'a str { x } // lifetimes",
        "// RFC 9112, section 3.2.",
        "let n = format!(\"{:#x}\", 3);",
    ];
    for line in clean {
        let found = problems_in("sample.rs", line);
        assert!(found.is_empty(), "flagged: {found:?}");
    }
    // A comment after a string that spans lines, and one after a nested block comment.
    let source = format!(
        "let s = \"a\n// still in the string\";\n/* a /* nested */ {issue} 5 */ let x = 1;\n"
    );
    let found = problems_in("sample.rs", &source);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("sample.rs:3: an issue number"),
        "{found:?}"
    );
    // Markdown counts as a whole: headings are not issue numbers, dates anywhere are dates.
    let markdown = "## 1. Picks\n\nSee #12.\n\n| 2026-12-03 | 14 ns |\n";
    let found = problems_in("README.md", markdown);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("README.md:3: an issue number"));
    assert!(found[1].starts_with("README.md:5: a date"));
}

//! The README stays a front door and the guide stays written for users, kept true by a test
//! in the spirit of `tests/architecture.rs`: this reads `README.md`, `src/guide/` and `.ci/run`
//! and fails, naming the file and line, on
//!
//! - a README longer than 400 lines, or a performance section longer than 30;
//! - README commands that are not the ones CI runs (`cargo run --example demo`,
//!   `cargo test --all-features`);
//! - a chapter file that `src/guide/mod.rs` does not include, or a README link to a chapter
//!   that does not exist;
//! - a specification section, an issue number or a date in the README or a chapter: readers
//!   have neither the specification nor the issues, and history belongs to `git log`.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The chapters: every markdown file under `src/guide/`, as paths from the repository root.
fn chapters() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(Path::new(ROOT).join("src/guide"))
        .expect("src/guide exists")
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .map(|path: PathBuf| format!("src/guide/{}", path.file_name().unwrap().to_string_lossy()))
        .collect();
    files.sort();
    files
}

#[test]
fn the_readme_is_short_and_so_is_its_performance_section() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 400, "README.md has {lines} lines; at most 400");
    let performance = readme
        .lines()
        .skip_while(|line| *line != "## Performance")
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .count();
    assert!(performance > 0, "README.md has no `## Performance` section");
    assert!(
        performance <= 30,
        "README.md's performance section has {performance} lines; at most 30"
    );
}

#[test]
fn the_readme_commands_are_the_ones_ci_runs() {
    let readme = read("README.md");
    let ci = read(".ci/run");
    for command in ["cargo run --example demo", "cargo test --all-features"] {
        assert!(
            readme
                .lines()
                .any(|line| line.starts_with(&format!("{command} "))),
            "README.md does not show `{command}` at the start of a line"
        );
        assert!(
            ci.lines().any(|line| line.trim() == command),
            ".ci/run does not run `{command}`"
        );
    }
}

#[test]
fn every_chapter_is_in_the_guide_and_every_readme_link_to_one_resolves() {
    let guide = read("src/guide/mod.rs");
    let chapters = chapters();
    assert!(!chapters.is_empty(), "src/guide/ has no chapters");
    for chapter in &chapters {
        let name = chapter.trim_start_matches("src/guide/");
        assert!(
            guide.contains(&format!("include_str!(\"{name}\")")),
            "{chapter} is not included by src/guide/mod.rs"
        );
    }
    let readme = read("README.md");
    let links: Vec<&str> = readme
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|target| target.starts_with("src/guide/"))
        .collect();
    assert!(!links.is_empty(), "README.md links to no chapter");
    for link in links {
        assert!(
            chapters.iter().any(|c| c == link),
            "README.md links to {link}, which is not a chapter"
        );
    }
}

/// Whether `line` holds a date written `YYYY-MM-DD`.
fn has_date(line: &str) -> bool {
    let bytes = line.as_bytes();
    bytes.windows(10).any(|w| {
        let digits = |r: std::ops::Range<usize>| w[r].iter().all(u8::is_ascii_digit);
        digits(0..4) && w[4] == b'-' && digits(5..7) && w[7] == b'-' && digits(8..10)
    })
}

#[test]
fn no_specification_sections_issue_numbers_or_dates() {
    let mut problems = Vec::new();
    let mut files = vec!["README.md".to_string(), "src/guide/mod.rs".to_string()];
    files.extend(chapters());
    for file in &files {
        for (i, line) in read(file).lines().enumerate() {
            let lower = line.to_lowercase();
            let why = if line.contains("SPEC") || line.contains('§') {
                "a specification section"
            } else if lower.contains("issue #")
                || lower
                    .split("issue ")
                    .skip(1)
                    .any(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            {
                "an issue number"
            } else if has_date(line) {
                "a date"
            } else {
                continue;
            };
            problems.push(format!("{file}:{}: {why}: {line}", i + 1));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_date_check_sees_dates_and_nothing_else() {
    assert!(has_date("measured 2026-12-05 on"));
    assert!(!has_date("p50 / p90 / max of 40, 1,000-2,000 records"));
    assert!(!has_date("`00:00:10`"));
}

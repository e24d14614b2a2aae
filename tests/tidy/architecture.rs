//! The layering rules of `ARCHITECTURE.md`, kept true by a test (in the spirit of
//! rust-analyzer's tidy tests): this reads every file of `src/` (the library; the CLI is the
//! separate `cli/` package), finds the module paths it names — `use crate::...`, `use super::...`,
//! `use self::...` and inline `crate::` / `super::` paths — and fails on
//!
//! - an import cycle between files (two or more files that reach each other through imports);
//! - an import that goes to a higher layer than the importing file's own;
//! - an import through the crate root (`crate::Engine` instead of `crate::engine::Engine`) or
//!   through another module's re-export (`crate::health::HealthState` when `health/mod.rs` only
//!   re-exports what `health/state.rs` defines);
//! - a file whose module has no layer in the table.
//!
//! Each file is one module (`src/a.rs` and `src/a/mod.rs` are `crate::a`). Edges from a module to
//! its own descendants (its `mod` declarations and re-exports) are not imports; edges to an
//! ancestor are. Unit-test modules (`#[cfg(test)] mod ... { }`) are left out: tests may reach
//! anywhere.
//!
//! `HEALTHPICK_TIDY_SRC=<dir>` checks another source tree against this repository's table (to
//! see an older tree fail, say).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// One layer of the table: its number, its name and the module prefixes it covers.
#[derive(Debug)]
struct Layer {
    rank: usize,
    name: String,
    modules: Vec<Module>,
}

/// Reads the layer table of ARCHITECTURE.md: rows `| <n> <name> | `a`, `b::c` | ... |`.
fn read_layers(text: &str) -> Vec<Layer> {
    let mut layers = Vec::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[0].is_empty() {
            continue;
        }
        let mut head = cells[1].splitn(2, ' ');
        let Some(Ok(rank)) = head.next().map(str::parse::<usize>) else {
            continue;
        };
        let name = head.next().unwrap_or("").to_string();
        let modules = cells[2]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|m| m.split("::").map(str::to_string).collect())
            .collect();
        layers.push(Layer {
            rank,
            name,
            modules,
        });
    }
    layers
}

/// The layer of a module: the row naming its longest prefix. The crate root is `lib`.
fn layer_of<'a>(layers: &'a [Layer], module: &[String]) -> Option<&'a Layer> {
    let module: Module = if module.is_empty() {
        vec!["lib".to_string()]
    } else {
        module.to_vec()
    };
    layers
        .iter()
        .flat_map(|l| l.modules.iter().map(move |m| (l, m)))
        .filter(|(_, m)| module.starts_with(m))
        .max_by_key(|(_, m)| m.len())
        .map(|(l, _)| l)
}

/// Source text with comments, string, byte-string, raw-string and char literals blanked out
/// (lifetimes kept), so paths inside them are not read as imports.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let at = |k: usize| chars.get(k).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if (c == 'r' || (c == 'b' && at(i + 1) == 'r'))
            && !at(i.wrapping_sub(1)).is_alphanumeric()
            && {
                let mut k = i + if c == 'b' { 2 } else { 1 };
                while at(k) == '#' {
                    k += 1;
                }
                at(k) == '"'
            }
        {
            // r"..." / r#"..."# / br#"..."#
            let mut k = i + if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while at(k) == '#' {
                hashes += 1;
                k += 1;
            }
            k += 1;
            loop {
                if k >= chars.len() {
                    break;
                }
                if chars[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#') {
                    k += 1 + hashes;
                    break;
                }
                k += 1;
            }
            out.push_str("\"\"");
            i = k;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            if at(i + 1) == '\\' {
                // '\n', '\'', '\u{..}'
                let mut k = i + 2;
                while k < chars.len() && chars[k] != '\'' {
                    k += 1;
                }
                i = k + 1;
                out.push_str("' '");
            } else if at(i + 2) == '\'' {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c); // a lifetime
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Drops `#[cfg(test)]` modules (from the attribute to the module's closing brace).
fn without_test_modules(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("#[cfg(test)]") {
        let after = &rest[start + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        let is_mod = trimmed.starts_with("mod ") || trimmed.starts_with("pub(crate) mod ");
        let Some(open) = trimmed.find('{').filter(|_| is_mod) else {
            out.push_str(&rest[..start + "#[cfg(test)]".len()]);
            rest = after;
            continue;
        };
        let body_start = rest.len() - trimmed.len() + open;
        let mut depth = 0;
        let mut end = rest.len();
        for (k, ch) in rest[body_start..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = body_start + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push_str(&rest[..start]);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Flattens a use tree (`a::{b, c::{d, e as f}, self}`) into paths.
fn expand_use_tree(tree: &str) -> Vec<String> {
    // Renames (`x as y`) name `x`: drop ` as y` before the spaces go.
    let mut words: Vec<&str> = Vec::new();
    let mut tokens = tree.split_whitespace().peekable();
    while let Some(token) = tokens.next() {
        if token == "as" {
            if let Some(renamed) = tokens.next() {
                // Keep what follows the new name (`,`, `}`) but not the name itself.
                let tail = renamed.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
                words.push(tail);
            }
        } else {
            words.push(token);
        }
    }
    let tree: String = words.concat();
    let mut out = Vec::new();
    expand(&tree, "", &mut out);
    out
}

fn expand(tree: &str, prefix: &str, out: &mut Vec<String>) {
    for part in split_top(tree) {
        if let Some(open) = part.find('{') {
            let head = &part[..open];
            let inner = &part[open + 1..part.len().saturating_sub(1)];
            expand(inner, &format!("{prefix}{head}"), out);
        } else if !part.is_empty() {
            let path = format!("{prefix}{part}");
            out.push(path.trim_end_matches("::self").to_string());
        }
    }
}

/// Splits on commas outside braces.
fn split_top(tree: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, ch) in tree.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&tree[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[start..]);
    parts
}

/// Every module path a file names: use statements and inline `crate::`/`super::`/`self::` paths.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest_of_code = String::new();
    let mut cursor = 0;
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut k = 0;
    while let Some(pos) = code[k..].find("use ") {
        let at = k + pos;
        let before_ok = at == 0 || !is_ident(bytes[at - 1]);
        if !before_ok {
            k = at + 4;
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            break;
        };
        let tree = &code[at + 4..at + end];
        rest_of_code.push_str(&code[cursor..at]);
        cursor = at + end + 1;
        k = cursor;
        for path in expand_use_tree(tree) {
            paths.push(path.split("::").map(str::to_string).collect());
        }
    }
    rest_of_code.push_str(&code[cursor..]);
    // Inline paths.
    let text = rest_of_code.as_bytes();
    let mut i = 0;
    while i < text.len() {
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .find(|p| text[i..].starts_with(p.as_bytes()));
        let boundary = i == 0 || !(is_ident(text[i - 1]) || text[i - 1] == b'$');
        match starts {
            Some(_) if boundary => {
                let mut j = i;
                while j < text.len() && (is_ident(text[j]) || text[j] == b':') {
                    j += 1;
                }
                let path = rest_of_code[i..j].trim_end_matches(':');
                paths.push(path.split("::").map(str::to_string).collect());
                i = j;
            }
            _ => i += 1,
        }
    }
    paths
}

/// A source tree: module path -> file.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    fn walk(dir: &Path, src: &Path, out: &mut BTreeMap<Module, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let rel = path.strip_prefix(src).expect("under src");
            if rel
                .components()
                .next()
                .is_some_and(|c| c.as_os_str() == "bin")
            {
                continue;
            }
            if path.is_dir() {
                walk(&path, src, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut module: Module = rel
                    .with_extension("")
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if module.last().is_some_and(|l| l == "mod" || l == "lib") {
                    module.pop();
                }
                out.insert(module, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, src, &mut out);
    out
}

/// An import edge: from, to, and the names imported.
type Edges = BTreeMap<Module, BTreeMap<Module, BTreeSet<String>>>;

fn edges(files: &BTreeMap<Module, PathBuf>) -> Edges {
    let mut edges: Edges = BTreeMap::new();
    for (module, path) in files {
        let text = std::fs::read_to_string(path).expect("read source");
        let code = without_test_modules(&strip(&text));
        for segs in named_paths(&code) {
            let (mut base, rest): (Module, &[String]) = match segs.first().map(String::as_str) {
                Some("crate") => (Vec::new(), &segs[1..]),
                Some("super") | Some("self") => (module.clone(), &segs[..]),
                _ => continue,
            };
            let mut rest = rest;
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
            let full: Module = base.iter().chain(rest).cloned().collect();
            let Some(k) = (0..=full.len())
                .rev()
                .find(|&k| files.contains_key(&full[..k].to_vec()))
            else {
                continue;
            };
            let target = full[..k].to_vec();
            if target.starts_with(module) {
                continue; // itself or a descendant
            }
            let item = full
                .get(k)
                .filter(|s| *s != "*")
                .cloned()
                .unwrap_or_else(|| "(module)".to_string());
            edges
                .entry(module.clone())
                .or_default()
                .entry(target)
                .or_default()
                .insert(item);
        }
    }
    edges
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(files: &BTreeMap<Module, PathBuf>, edges: &Edges) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a Edges,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        next: usize,
        out: Vec<Vec<Module>>,
    }
    fn visit(s: &mut State<'_>, v: &Module) {
        s.index.insert(v.clone(), s.next);
        s.low.insert(v.clone(), s.next);
        s.next += 1;
        s.stack.push(v.clone());
        s.on.insert(v.clone());
        let targets: Vec<Module> = s
            .edges
            .get(v)
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default();
        for w in targets {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let low = s.low[v].min(s.low[&w]);
                s.low.insert(v.clone(), low);
            } else if s.on.contains(&w) {
                let low = s.low[v].min(s.index[&w]);
                s.low.insert(v.clone(), low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(&w);
                let done = &w == v;
                component.push(w);
                if done {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in files.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The names a file defines itself (items, not re-exports).
fn defined_names(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
        .filter(|w| !w.is_empty())
        .collect();
    for pair in words.windows(2) {
        if matches!(
            pair[0],
            "fn" | "struct"
                | "enum"
                | "trait"
                | "type"
                | "const"
                | "static"
                | "mod"
                | "union"
                | "macro_rules!"
        ) {
            names.insert(pair[1].to_string());
        }
    }
    names
}

/// Every broken rule of the tree at `src`, as text; empty when the tree is tidy.
fn problems(src: &Path, layers: &[Layer]) -> String {
    let files = modules(src);
    let edges = edges(&files);
    let name = |m: &Module| {
        files[m]
            .strip_prefix(src.parent().unwrap_or(src))
            .unwrap_or(&files[m])
            .display()
            .to_string()
    };
    let mut report = String::new();
    for module in files.keys() {
        if layer_of(layers, module).is_none() {
            let _ = writeln!(
                report,
                "{} (`{}`) has no layer in ARCHITECTURE.md",
                name(module),
                module.join("::")
            );
        }
    }
    for component in cycles(&files, &edges) {
        let _ = writeln!(
            report,
            "import cycle of {} files: {}",
            component.len(),
            component.iter().map(name).collect::<Vec<_>>().join(", ")
        );
        for a in &component {
            for (b, items) in edges.get(a).into_iter().flatten() {
                if component.contains(b) {
                    let items: Vec<&str> = items.iter().map(String::as_str).collect();
                    let _ = writeln!(report, "  {} -> {}: {}", name(a), name(b), items.join(", "));
                }
            }
        }
    }
    for (from, targets) in &edges {
        let Some(own) = layer_of(layers, from) else {
            continue;
        };
        for (to, items) in targets {
            let items: Vec<&str> = items.iter().map(String::as_str).collect();
            if to.is_empty() {
                let _ = writeln!(
                    report,
                    "{} imports {} through the crate root (src/lib.rs): import from the defining module",
                    name(from),
                    items.join(", ")
                );
                continue;
            }
            let defined = defined_names(&without_test_modules(&strip(
                &std::fs::read_to_string(&files[to]).expect("read source"),
            )));
            let re_exported: Vec<&str> = items
                .iter()
                .copied()
                .filter(|item| *item != "(module)" && !defined.contains(*item))
                .collect();
            if !re_exported.is_empty() {
                let _ = writeln!(
                    report,
                    "{} imports {} through {}, which does not define it: import from the defining module",
                    name(from),
                    re_exported.join(", "),
                    name(to)
                );
            }
            let Some(theirs) = layer_of(layers, to) else {
                continue;
            };
            if theirs.rank > own.rank {
                let _ = writeln!(
                    report,
                    "{} (layer {} {}) imports {} from {} (layer {} {}): a higher layer",
                    name(from),
                    own.rank,
                    own.name,
                    items.join(", "),
                    name(to),
                    theirs.rank,
                    theirs.name
                );
            }
        }
    }
    report
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn table() -> Vec<Layer> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let layers = read_layers(&text);
    assert!(
        layers.len() >= 8,
        "ARCHITECTURE.md's layer table has {} rows",
        layers.len()
    );
    layers
}

#[test]
fn src_has_no_import_cycles_and_no_upward_imports() {
    let src = std::env::var_os("HEALTHPICK_TIDY_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("src"));
    let report = problems(&src, &table());
    assert!(
        report.is_empty(),
        "the layering rules of ARCHITECTURE.md are broken:\n{report}"
    );
}

#[test]
fn the_table_reads_every_layer_in_order() {
    let layers = table();
    let ranks: Vec<usize> = layers.iter().map(|l| l.rank).collect();
    assert_eq!(ranks, (0..layers.len()).collect::<Vec<_>>());
    let engine = layer_of(&layers, &["engine".into(), "updater".into()]).unwrap();
    assert_eq!(engine.name, "engine");
    assert_eq!(layer_of(&layers, &[]).unwrap().name, "facade");
}

/// The reader itself: a tree with a cycle, an upward import, a root import, commented-out and
/// quoted paths, and a test module, checked against a two-layer table.
#[test]
fn the_checker_finds_cycles_upward_and_root_imports_and_ignores_literals() {
    let dir = std::env::temp_dir().join(format!("healthpick-tidy-{}", std::process::id()));
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(src.join("low")).unwrap();
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).unwrap();
    write("lib.rs", "mod low; mod high; mod via; pub use low::A;");
    write("low/mod.rs", "mod a; mod b; pub use self::a::A;");
    // a <-> b is a cycle; b reaches up to `high`.
    write(
        "low/a.rs",
        "use super::b::B;\n// use crate::high::Ignored;\nconst S: &str = \"crate::high::Quoted\";\nconst R: &str = r#\"super::super::high::Raw\"#;\nconst C: char = '\"';\npub struct A<'a>(&'a B);",
    );
    write(
        "low/b.rs",
        "pub struct B;\nfn f() -> crate::high::H { let _ = super::a::A(&B); crate::high::H }\nfn g() -> crate::A<'static> { todo!() }\n#[cfg(test)]\nmod tests { use crate::high::FromTest; }",
    );
    write("high.rs", "pub struct H;");
    // `low/mod.rs` only re-exports `A`.
    write("via.rs", "use crate::low::A;");
    let layers =
        read_layers("| 0 low | `low` | |\n| 1 high | `high`, `via` | |\n| 2 facade | `lib` | |");
    let report = problems(&src, &layers);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        report.contains("import cycle of 2 files: src/low/a.rs, src/low/b.rs"),
        "{report}"
    );
    assert!(
        report.contains("src/low/a.rs -> src/low/b.rs: B"),
        "{report}"
    );
    assert!(
        report.contains("src/low/b.rs -> src/low/a.rs: A"),
        "{report}"
    );
    assert!(
        report.contains("src/low/b.rs (layer 0 low) imports H from src/high.rs (layer 1 high)"),
        "{report}"
    );
    assert!(
        report.contains("src/low/b.rs imports A through the crate root"),
        "{report}"
    );
    assert!(
        report.contains("src/via.rs imports A through src/low/mod.rs, which does not define it"),
        "{report}"
    );
    for literal in ["Ignored", "Quoted", "Raw", "FromTest"] {
        assert!(!report.contains(literal), "{literal} was read:\n{report}");
    }
    // via -> low is downward (only its re-export is wrong); lib's re-export is an edge to a
    // descendant.
    assert!(!report.contains("src/via.rs (layer"), "{report}");
    for importer in ["src/high.rs", "src/lib.rs"] {
        assert!(
            !report.lines().any(|l| l.trim_start().starts_with(importer)),
            "{report}"
        );
    }
}

//! The layering of the library and the console crate, read from their sources: every
//! `use crate::…`, `super::…`, `self::…` and child-module path of every file becomes an edge of a
//! module graph, which must have no import circle and no import from a lower layer to a higher
//! one (the orders ARCHITECTURE.md draws). A file may use its own folder's `mod.rs` (a folder
//! is one module split over files); every other edge counts. The files of the library and of
//! the binary are held to the same rule one level down: no import circle between two files,
//! inside one module or across modules.
//!
//! A parser of paths, not of Rust: comments are dropped, strings are not, which only ever adds
//! edges (a check that errs strict). Hand-rolled on purpose: `syn` is not a dependency of the
//! workspace, and reading paths needs no more than this.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate, `""` for the crate root.
type Module = String;

/// One import: from a file's module to another module, first seen on `line` of `file`.
#[derive(Debug, Clone)]
struct Edge {
    from: Module,
    to: Module,
    file: String,
    line: usize,
    /// Whether `to` is a folder `from` sits in (its `mod.rs`, or the crate root): allowed
    /// within a layer and left out of the circle search, still held to the layer order.
    to_ancestor: bool,
}

/// Every module of the crate under `src` (a `.rs` file each), with its source.
fn modules(src: &Path) -> BTreeMap<Module, (String, String)> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                let rel = path.strip_prefix(src).expect("under src");
                out.insert(module_of(rel), (rel.display().to_string(), text));
            }
        }
    }
    out
}

/// `lib.rs` → `""`, `a.rs` and `a/mod.rs` → `a`, `a/b.rs` → `a::b`.
fn module_of(rel: &Path) -> Module {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts.join("::")
}

fn join(parts: &[String]) -> Module {
    parts.join("::")
}

fn split(module: &str) -> Vec<String> {
    if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_string).collect()
    }
}

/// The text without `//` and `/* */` comments (line breaks kept, so lines still count).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '/' && chars.peek() == Some(&'/') {
            for c in chars.by_ref() {
                if c == '\n' {
                    out.push('\n');
                    break;
                }
            }
        } else if c == '/' && chars.peek() == Some(&'*') {
            chars.next();
            let mut prev = ' ';
            for c in chars.by_ref() {
                if c == '\n' {
                    out.push('\n');
                }
                if prev == '*' && c == '/' {
                    break;
                }
                prev = c;
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths a `use` tree names, each as its segments: `a::{b, c::{d, e as f}}` gives
/// `a::b`, `a::c::d`, `a::c::e`.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    fn walk(s: &[char], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        loop {
            while *i < s.len() && s[*i].is_whitespace() {
                *i += 1;
            }
            if *i < s.len() && s[*i] == '{' {
                *i += 1;
                loop {
                    walk(s, i, &path, out);
                    while *i < s.len() && s[*i].is_whitespace() {
                        *i += 1;
                    }
                    match s.get(*i) {
                        Some(',') => *i += 1,
                        Some('}') => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                    while *i < s.len() && s[*i].is_whitespace() {
                        *i += 1;
                    }
                    if s.get(*i) == Some(&'}') {
                        *i += 1;
                        return;
                    }
                }
            }
            let start = *i;
            while *i < s.len() && (is_ident(s[*i]) || s[*i] == '*') {
                *i += 1;
            }
            path.push(s[start..*i].iter().collect());
            if s.get(*i) == Some(&':') && s.get(*i + 1) == Some(&':') {
                *i += 2;
                continue;
            }
            // `as name` renames the last segment; the path stays the same.
            while *i < s.len() && !matches!(s[*i], ',' | '}') {
                *i += 1;
            }
            out.push(path);
            return;
        }
    }
    let chars: Vec<char> = tree.chars().collect();
    let mut out = Vec::new();
    walk(&chars, &mut 0, &[], &mut out);
    out
}

/// The inline modules of `code` (`mod tests { … }`): name and byte range of the body.
fn inline_mods(code: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("mod ") {
        let at = from + found;
        from = at + 4;
        if at > 0 && is_ident(code[..at].chars().next_back().unwrap_or(' ')) {
            continue;
        }
        let name: String = code[at + 4..]
            .chars()
            .take_while(|c| is_ident(*c))
            .collect();
        let after = code[at + 4 + name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0usize;
        let mut end = code.len();
        for (i, b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push((name, open..end));
    }
    out
}

/// A path a file names: its segments, its line, and the inline modules it sits in.
type Named = (Vec<String>, usize, Vec<String>);

/// Every path a file names: the expanded `use` trees, then any other `crate::`, `super::` or
/// `self::` path in the code.
fn paths(text: &str) -> Vec<Named> {
    let code = strip_comments(text);
    let inline = inline_mods(&code);
    let within = |at: usize| -> Vec<String> {
        inline
            .iter()
            .filter(|(_, r)| r.contains(&at))
            .map(|(n, _)| n.clone())
            .collect()
    };
    let line_at = |at: usize| code[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut rest = code.clone();
    let mut from = 0;
    while let Some(found) = rest[from..].find("use ") {
        let at = from + found;
        let word_start = at == 0 || !is_ident(rest[..at].chars().next_back().unwrap_or(' '));
        let Some(end) = rest[at..].find(';').map(|e| at + e) else {
            break;
        };
        if word_start {
            let tree = &rest[at + 4..end];
            for path in expand_use(tree) {
                out.push((path, line_at(at), within(at)));
            }
            rest.replace_range(at..end, &" ".repeat(end - at));
        }
        from = at + 4;
    }
    let chars: Vec<char> = rest.chars().collect();
    let mut byte = 0;
    let mut i = 0;
    while i < chars.len() {
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .find(|p| rest[byte..].starts_with(**p));
        let boundary = i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':');
        if let (Some(_), true) = (starts, boundary) {
            let begin = byte;
            let mut segs = Vec::new();
            let mut seg = String::new();
            while i < chars.len() {
                let c = chars[i];
                if is_ident(c) {
                    seg.push(c);
                } else if c == ':' && chars.get(i + 1) == Some(&':') {
                    segs.push(std::mem::take(&mut seg));
                    byte += 1;
                    i += 1;
                } else {
                    break;
                }
                byte += c.len_utf8();
                i += 1;
            }
            if !seg.is_empty() {
                segs.push(seg);
            }
            out.push((segs, line_at(begin), within(begin)));
            continue;
        }
        byte += chars[i].len_utf8();
        i += 1;
    }
    out
}

/// The module a path names inside the crate (`""` for an item of the crate root): the
/// longest prefix that is a module of `known`, after `crate`, `super` and `self` are resolved
/// from `here` (the file's module, then the inline modules the path sits in); `None` for a
/// path outside the crate (std, another crate).
fn resolve(
    path: &[String],
    here: &str,
    inline: &[String],
    here_is_dir: bool,
    known: &BTreeSet<Module>,
) -> Option<Module> {
    let mut abs = split(here);
    abs.extend(inline.iter().cloned());
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            abs.clear();
            rest = &path[1..];
        }
        Some("super" | "self") => {
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "self" => {}
                    "super" => {
                        abs.pop()?;
                    }
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        // A bare first segment is a child module when one is declared, else another crate.
        Some(first) => {
            let mut child = abs.clone();
            child.push(first.to_string());
            if !inline.is_empty()
                || !(here_is_dir || here.is_empty())
                || !known.contains(&join(&child))
            {
                return None;
            }
        }
        None => return None,
    }
    // The innermost file module the resolved start lies in (inline modules are not files).
    while !abs.is_empty() && !known.contains(&join(&abs)) {
        abs.pop();
    }
    let mut best = join(&abs);
    let mut cur = abs;
    for seg in rest {
        cur.push(seg.clone());
        if known.contains(&join(&cur)) {
            best = join(&cur);
        } else {
            break;
        }
    }
    Some(best)
}

/// The import edges between the modules of the crate under `src`, each module reduced by
/// `node` (the whole path for a file-level graph, its first segment for top-level modules).
fn edges(src: &Path, node: fn(&str) -> Module) -> Vec<Edge> {
    let mods = modules(src);
    let known: BTreeSet<Module> = mods.keys().cloned().collect();
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (module, (file, text)) in &mods {
        let is_dir = file.ends_with("mod.rs") || file.ends_with("lib.rs");
        for (path, line, inline) in paths(text) {
            let Some(to) = resolve(&path, module, &inline, is_dir, &known) else {
                continue;
            };
            let (from, to) = (node(module), node(&to));
            if from == to {
                continue;
            }
            if !seen.insert((from.clone(), to.clone())) {
                continue;
            }
            out.push(Edge {
                to_ancestor: to.is_empty() || from.starts_with(&format!("{to}::")),
                from,
                to,
                file: file.clone(),
                line,
            });
        }
    }
    out
}

/// The first import circle found, as its edges in order.
fn find_circle(edges: &[Edge]) -> Option<Vec<Edge>> {
    let mut next: BTreeMap<&str, Vec<&Edge>> = BTreeMap::new();
    for e in edges.iter().filter(|e| !e.to_ancestor) {
        next.entry(e.from.as_str()).or_default().push(e);
    }
    // 0 unseen, 1 on the current path, 2 done.
    let mut mark: BTreeMap<&str, u8> = BTreeMap::new();
    fn visit<'a>(
        at: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a Edge>>,
        mark: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a Edge>,
    ) -> Option<Vec<Edge>> {
        mark.insert(at, 1);
        for e in next.get(at).into_iter().flatten() {
            match mark.get(e.to.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|p| p.from == e.to).unwrap_or(0);
                    let mut circle: Vec<Edge> =
                        path[start..].iter().map(|e| (*e).clone()).collect();
                    circle.push((*e).clone());
                    return Some(circle);
                }
                0 => {
                    path.push(e);
                    if let Some(c) = visit(&e.to, next, mark, path) {
                        return Some(c);
                    }
                    path.pop();
                }
                _ => {}
            }
        }
        mark.insert(at, 2);
        None
    }
    let starts: Vec<&str> = next.keys().copied().collect();
    for start in starts {
        if mark.get(start).copied().unwrap_or(0) == 0
            && let Some(c) = visit(start, &next, &mut mark, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

/// What is wrong with `edges` against `layers` (bottom first; each a list of module path
/// prefixes): modules in no layer, imports from a lower layer to a higher one, a circle.
fn problems(edges: &[Edge], layers: &[&[&str]]) -> Vec<String> {
    let rank = |m: &str| {
        layers.iter().position(|l| {
            l.iter()
                .any(|p| m == *p || m.starts_with(&format!("{p}::")))
        })
    };
    let mut out = Vec::new();
    let mut unplaced = BTreeSet::new();
    for e in edges {
        for m in [&e.from, &e.to] {
            if rank(m).is_none() && unplaced.insert(m.clone()) {
                out.push(format!(
                    "module {} is in no declared layer; add it to the layer order in tests/it/layers.rs (and ARCHITECTURE.md)",
                    shown(m)
                ));
            }
        }
        if let (Some(a), Some(b)) = (rank(&e.from), rank(&e.to))
            && a < b
        {
            out.push(format!(
                "upward import: {} (layer {a}) uses {} (layer {b}) at {}:{}; move what it needs down a layer or pass it in",
                shown(&e.from),
                shown(&e.to),
                e.file,
                e.line
            ));
        }
    }
    if let Some(circle) = find_circle(edges) {
        let steps: Vec<String> = circle
            .iter()
            .map(|e| {
                format!(
                    "{} → {} ({}:{})",
                    shown(&e.from),
                    shown(&e.to),
                    e.file,
                    e.line
                )
            })
            .collect();
        out.push(format!(
            "import circle: {}; break it by moving the shared item down",
            steps.join(", ")
        ));
    }
    out
}

/// How a message names a module: its path, or the crate root.
fn shown(m: &str) -> String {
    if m.is_empty() {
        "the crate root".into()
    } else {
        format!("`{m}`")
    }
}

fn crate_src(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn whole(m: &str) -> Module {
    m.to_string()
}

fn top_level(m: &str) -> Module {
    m.split("::").next().unwrap_or("").to_string()
}

/// The console's layers, bottom first (ARCHITECTURE.md, Console): helpers; state; view
/// state; draw; input (it reads what draw laid out); the loop; the unit tests; the root.
const CONSOLE_LAYERS: &[&[&str]] = &[
    &["error", "text", "theme"],
    &["state"],
    &["view"],
    &["draw"],
    &["input"],
    &["run"],
    &["tests"],
    &[""],
];

/// The library's layers, bottom first (ARCHITECTURE.md, "Layers inside the library").
const LIBRARY_LAYERS: &[&[&str]] = &[
    &["json", "net", "private_files"],
    &["config"],
    &["conversation_test"],
    &["observe"],
    &["mcp"],
    &["tools"],
    &["model"],
    &["pipeline"],
    &["bot"],
    &["store"],
    &["sessions"],
    &["server"],
    &["bridge", "attach"],
    &["app"],
    &[""],
];

#[test]
fn console_files_import_downward_only_and_in_no_circle() {
    let edges = edges(&crate_src("crates/console/src"), whole);
    assert!(edges.len() > 50, "too few imports read: {}", edges.len());
    let found = problems(&edges, CONSOLE_LAYERS);
    assert!(
        found.is_empty(),
        "the console's layering:\n{}",
        found.join("\n")
    );
}

#[test]
fn library_modules_import_downward_only_and_in_no_circle() {
    let edges = edges(&crate_src("crates/turnscope/src"), top_level);
    assert!(edges.len() > 20, "too few imports read: {}", edges.len());
    let found = problems(&edges, LIBRARY_LAYERS);
    assert!(
        found.is_empty(),
        "the library's layering:\n{}",
        found.join("\n")
    );
}

/// The first import circle between the files of the crate under `src`, as a message (the
/// layer tests see only top-level modules, so a circle between two files of one module, or
/// of the binary, would pass them).
fn file_circle(src: &str) -> Option<String> {
    let edges = edges(&crate_src(src), whole);
    assert!(edges.len() > 10, "too few imports read: {}", edges.len());
    find_circle(&edges).map(|circle| {
        let steps: Vec<String> = circle
            .iter()
            .map(|e| format!("{} → {} ({}:{})", shown(&e.from), shown(&e.to), e.file, e.line))
            .collect();
        format!(
            "import circle between files of {src}: {}; break it by moving the shared item into a file both use",
            steps.join(", ")
        )
    })
}

#[test]
fn library_files_import_in_no_circle() {
    let found = file_circle("crates/turnscope/src");
    assert!(found.is_none(), "{}", found.unwrap_or_default());
}

#[test]
fn binary_files_import_in_no_circle() {
    let found = file_circle("src");
    assert!(found.is_none(), "{}", found.unwrap_or_default());
}

fn edge(from: &str, to: &str) -> Edge {
    Edge {
        from: from.into(),
        to: to.into(),
        file: format!("{from}.rs"),
        line: 1,
        to_ancestor: false,
    }
}

#[test]
fn the_checker_finds_a_circle_and_an_upward_import() {
    let layers: &[&[&str]] = &[&["low"], &["mid"], &["high"]];
    let clean = [edge("high", "mid"), edge("mid", "low"), edge("high", "low")];
    assert!(problems(&clean, layers).is_empty());

    let circle = [
        edge("mid::a", "mid::b"),
        edge("mid::b", "mid::c"),
        edge("mid::c", "mid::a"),
    ];
    let found = problems(&circle, layers);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("import circle: `mid::a` → `mid::b`"),
        "{found:?}"
    );
    assert!(found[0].contains("`mid::c` → `mid::a`"), "{found:?}");

    let upward = [edge("low", "high")];
    let found = problems(&upward, layers);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("upward import: `low` (layer 0) uses `high` (layer 2)"));

    let stray = [edge("high", "elsewhere")];
    assert!(problems(&stray, layers)[0].contains("`elsewhere` is in no declared layer"));
}

#[test]
fn the_checker_reads_use_trees_and_resolves_relative_paths() {
    let text = "//! a doc link to [`x`](crate::ignored)\n\
                use std::fmt;\n\
                use super::{a::{B, c as d}, e};\n\
                pub(crate) use child::Thing;\n\
                fn f() { crate::view::ids::PaneId::Sessions; }\n";
    let found: Vec<(String, usize)> = paths(text)
        .into_iter()
        .map(|(p, l, _)| (p.join("::"), l))
        .collect();
    let names: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        names,
        [
            "std::fmt",
            "super::a::B",
            "super::a::c",
            "super::e",
            "child::Thing",
            "crate::view::ids::PaneId::Sessions"
        ]
    );
    assert_eq!(found[5].1, 5);

    let known: BTreeSet<Module> = ["a", "a::b", "a::child", "view", "view::ids"]
        .into_iter()
        .map(String::from)
        .collect();
    let r = |p: &str, here: &str, dir: bool| resolve(&split(p), here, &[], dir, &known);
    assert_eq!(
        r("crate::view::ids::PaneId", "a::b", false).as_deref(),
        Some("view::ids")
    );
    assert_eq!(r("super::b::X", "a::child", false).as_deref(), Some("a::b"));
    assert_eq!(r("child::Thing", "a", true).as_deref(), Some("a::child"));
    assert_eq!(r("std::fmt", "a", true), None);
    // An item of the crate root is an edge to the root, which sits in the top layer.
    assert_eq!(r("super::X", "a", false).as_deref(), Some(""));
    assert_eq!(r("crate::wait", "a::b", false).as_deref(), Some(""));

    // `super::*` in a file's inline `mod tests` names the file itself.
    let text = "fn f() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n";
    let found = paths(text);
    assert_eq!(found.len(), 1, "{found:?}");
    let (path, line, inline) = &found[0];
    assert_eq!((path.join("::").as_str(), *line), ("super::*", 4));
    assert_eq!(inline, &["tests".to_string()]);
    let from_tests = resolve(path, "a::b", inline, false, &known);
    assert_eq!(from_tests.as_deref(), Some("a::b"));
}

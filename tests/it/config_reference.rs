//! The config reference (`docs/config.md`) kept true: every key the config types accept has a
//! row there, every row is a key they accept, and every default written as a TOML value is the
//! real default. A key added to a section without its row fails here, naming the key and the
//! heading to add it under.
//!
//! The keys are read from the real parser, not from a list kept by hand: each table is asked for
//! an unknown key (`__probe`), and serde's `deny_unknown_fields` answers with every key it
//! accepts ("unknown field `__probe`, expected one of `host`, `port`, …", serde's own wording,
//! unchanged for years). Each key is then tried as a table and as an array of tables to find the
//! nested ones. So a section or key added anywhere under `Config` is found with no change here.
//! (serde has no other way to list a struct's fields at run time; a schema derive would need
//! every config type, including hand-written `Deserialize` impls such as `ToolFilter`'s, to
//! carry it.)

use std::collections::{BTreeMap, BTreeSet};

use turnscope::config::Config;

/// The reference, relative to the repository's root.
pub const REFERENCE: &str = "docs/config.md";

/// One step of a path into the config: a key, or an entry of an array of tables.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Entry,
}

/// How a key is laid out in TOML.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    Table,
    ArrayOfTables,
    Value,
}

/// A key the parser accepts: its dotted name (`mcp_servers.tool_filter.allow`) and the table it
/// belongs to, written as the reference heads it (`[[mcp_servers]]`, `[mcp_servers.tool_filter]`).
#[derive(Debug, Clone)]
struct Key {
    dotted: String,
    table: String,
    leaf: String,
    /// Whether every step to it is a plain table (only then is its default checked).
    plain: bool,
}

/// A TOML document putting `value` at `path` (inline tables and arrays, so one line).
fn document(path: &[Step], value: &str) -> String {
    fn nest(path: &[Step], value: &str) -> String {
        match path.split_first() {
            None => value.to_string(),
            Some((Step::Key(k), rest)) => format!("{{ {k:?} = {} }}", nest(rest, value)),
            Some((Step::Entry, rest)) => format!("[ {} ]", nest(rest, value)),
        }
    }
    match path.split_first() {
        None => format!("__probe = {value}"),
        Some((Step::Key(k), rest)) => format!("{k:?} = {}", nest(rest, value)),
        Some((Step::Entry, _)) => unreachable!("the root is a table"),
    }
}

/// The keys serde lists when the table at `path` gets the unknown key `__probe`; `None` when
/// the value there is not a table with named keys.
fn keys_of(path: &[Step]) -> Option<Vec<String>> {
    let text = if path.is_empty() {
        document(path, "1")
    } else {
        document(path, "{ __probe = 1 }")
    };
    let message = match Config::parse(&text) {
        Ok(_) => return None,
        Err(e) => e.to_string(),
    };
    let at = message.find("unknown field `__probe`")?;
    let rest = message[at..].lines().next().unwrap_or_default();
    let rest = rest.trim_start_matches("unknown field `__probe`");
    Some(
        rest.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect(),
    )
}

/// Every key under `path`, depth first.
fn walk(path: &mut Vec<Step>, out: &mut Vec<Key>) {
    let keys = keys_of(path).unwrap_or_else(|| panic!("no table at {path:?}"));
    for key in keys {
        path.push(Step::Key(key.clone()));
        let shape = if keys_of(path).is_some() {
            Shape::Table
        } else {
            path.push(Step::Entry);
            let entry = keys_of(path).is_some();
            path.pop();
            if entry {
                Shape::ArrayOfTables
            } else {
                Shape::Value
            }
        };
        match shape {
            Shape::Table => walk(path, out),
            Shape::ArrayOfTables => {
                path.push(Step::Entry);
                walk(path, out);
                path.pop();
            }
            Shape::Value => out.push(describe(path)),
        }
        path.pop();
    }
}

fn describe(path: &[Step]) -> Key {
    let names: Vec<&str> = path
        .iter()
        .filter_map(|s| match s {
            Step::Key(k) => Some(k.as_str()),
            Step::Entry => None,
        })
        .collect();
    let (leaf, parents) = names.split_last().expect("a key has a name");
    let parent_path = &path[..path.len() - 1];
    let table = if parents.is_empty() {
        "top level".to_string()
    } else if parent_path.last() == Some(&Step::Entry) {
        format!("[[{}]]", parents.join("."))
    } else {
        format!("[{}]", parents.join("."))
    };
    Key {
        dotted: names.join("."),
        table,
        leaf: (*leaf).to_string(),
        plain: !path.contains(&Step::Entry),
    }
}

/// Every key of the config, found through the parser.
fn config_keys() -> Vec<Key> {
    let mut out = Vec::new();
    walk(&mut Vec::new(), &mut out);
    out
}

/// A documented key: its table heading, the key as written, its default cell.
#[derive(Debug)]
struct Row {
    table: String,
    key: String,
    default: String,
    line: usize,
}

/// The rows of every table under a heading that names a config table (`## `[server]``,
/// `### `[[mcp_servers]]``); other headings' tables are prose and ignored. A row's key may be
/// dotted (`tool_filter.allow`) for an inline table inside its table.
fn documented(reference: &str) -> Vec<Row> {
    let mut out = Vec::new();
    let mut table: Option<String> = None;
    for (n, line) in reference.lines().enumerate() {
        if line.starts_with('#') {
            let heading = line.trim_start_matches('#').trim();
            table = heading
                .strip_prefix('`')
                .and_then(|h| h.split('`').next())
                .filter(|h| h.starts_with('['))
                .map(str::to_string);
            continue;
        }
        let Some(table) = &table else { continue };
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with('`') {
            continue;
        }
        out.push(Row {
            table: table.clone(),
            key: cells[1].trim_matches('`').to_string(),
            default: cells[2].to_string(),
            line: n + 1,
        });
    }
    out
}

/// `[[mcp_servers]]` → `mcp_servers`, `[model.extra]` → `model.extra`.
fn table_name(heading: &str) -> &str {
    heading.trim_matches(|c| c == '[' || c == ']')
}

fn dotted(row: &Row) -> String {
    format!("{}.{}", table_name(&row.table), row.key)
}

fn reference_text() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(REFERENCE);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn the_probe_finds_sections_nested_tables_and_arrays_of_tables() {
    let keys: BTreeSet<String> = config_keys().into_iter().map(|k| k.dotted).collect();
    for expected in [
        "server.port",
        "bot.system_prompt",
        "model.extra",
        "model.stop",
        "mcp_servers.command",
        "mcp_servers.tool_filter.allow",
        "bridges.xiaozhi.tools.deny",
        "policy.locked",
        "wire.max_kib",
    ] {
        assert!(keys.contains(expected), "{expected} not found in {keys:?}");
    }
    assert!(!keys.contains("mcp_servers"), "a table is not a leaf");
}

#[test]
fn every_config_key_is_in_the_reference_and_every_row_is_a_key() {
    let reference = reference_text();
    let rows = documented(&reference);
    let keys = config_keys();
    let row_keys: BTreeSet<String> = rows.iter().map(dotted).collect();
    // A table documented under its own heading (`[model.extra]`) documents the key too.
    let headings: BTreeSet<String> = rows
        .iter()
        .map(|r| table_name(&r.table).to_string())
        .chain(
            reference
                .lines()
                .filter(|l| l.starts_with('#'))
                .filter_map(|l| l.split('`').nth(1))
                .map(|h| table_name(h).to_string()),
        )
        .collect();
    // The config tables the reference has headings for, as written (`[[mcp_servers]]`).
    let tables: Vec<&str> = reference
        .lines()
        .filter(|l| l.starts_with('#'))
        .filter_map(|l| l.split('`').nth(1))
        .filter(|h| h.starts_with('['))
        .collect();
    let mut problems = Vec::new();
    for key in &keys {
        if row_keys.contains(&key.dotted) || headings.contains(&key.dotted) {
            continue;
        }
        // The nearest table documented above the key: its own, or one it is nested in
        // (`tool_filter.allow` under `[[mcp_servers]]`).
        let nearest = tables
            .iter()
            .filter(|t| {
                key.dotted
                    .strip_prefix(table_name(t))
                    .is_some_and(|rest| rest.starts_with('.'))
            })
            .max_by_key(|t| table_name(t).len());
        problems.push(match nearest {
            Some(table) => {
                let row = &key.dotted[table_name(table).len() + 1..];
                format!(
                    "config key `{}` is not documented: add a row `| `{row}` | <default> | <what it does> |` \
                     to the table under the heading `{table}` in {REFERENCE}",
                    key.dotted
                )
            }
            None => format!(
                "config key `{}` is not documented, nor is its table: add a heading `## `{}`` to \
                 {REFERENCE} with a table `| key | default | meaning |` and a row `| `{}` | <default> | <what it does> |`",
                key.dotted, key.table, key.leaf
            ),
        });
    }
    let real: BTreeSet<&str> = keys.iter().map(|k| k.dotted.as_str()).collect();
    for row in &rows {
        let name = dotted(row);
        if !real.contains(name.as_str()) {
            problems.push(format!(
                "{REFERENCE}:{}: `{}` under `{}` is not a config key (`{name}`): the config types \
                 do not accept it; fix the name or remove the row",
                row.line, row.key, row.table
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the config reference and the config types disagree:\n{}",
        problems.join("\n")
    );
}

/// The TOML value of a default cell: a backquoted value, alone or followed by a parenthesis
/// (`` `[]` (all) ``); `None` for prose (`none`, `` `host:port` as bound ``).
fn toml_default(cell: &str) -> Option<&str> {
    let rest = cell.strip_prefix('`')?;
    let (value, tail) = rest.split_once('`')?;
    (tail.is_empty() || tail.starts_with(" (")).then_some(value)
}

/// A default written as a TOML value (`8`, `"answer"`, `true`, `[]`) must be what a config
/// without the key gets; prose defaults ("none", "host:port as bound") are not checked.
#[test]
fn documented_defaults_are_the_real_defaults() {
    let reference = reference_text();
    let keys: BTreeMap<String, Key> = config_keys()
        .into_iter()
        .map(|k| (k.dotted.clone(), k))
        .collect();
    let default = format!(
        "{:?}",
        Config::parse("").expect("the defaults are a valid config")
    );
    let mut problems = Vec::new();
    let mut checked = 0;
    for row in documented(&reference) {
        let Some(key) = keys.get(&dotted(&row)) else {
            continue;
        };
        let Some(value) = toml_default(&row.default) else {
            continue;
        };
        if !key.plain {
            continue;
        }
        let path: Vec<Step> = key
            .dotted
            .split('.')
            .map(|k| Step::Key(k.to_string()))
            .collect();
        match Config::parse(&document(&path, value)) {
            Ok(config) if format!("{config:?}") == default => checked += 1,
            Ok(_) => problems.push(format!(
                "{REFERENCE}:{}: `{}` is documented with the default {value}, but a config \
                 setting it to that differs from one without it: write the real default",
                row.line, key.dotted
            )),
            Err(e) => problems.push(format!(
                "{REFERENCE}:{}: the default of `{}`, {value}, is not accepted: {e}",
                row.line, key.dotted
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 20, "only {checked} defaults were checked");
}

/// The annotated example config is a valid config.
#[test]
fn the_example_config_loads() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/turnscope.toml");
    let loaded = Config::load(Some(&path), &Default::default());
    assert!(loaded.is_ok(), "{}: {:?}", path.display(), loaded.err());
}

/// The example config shows the tasks settings beside the other `[server]` keys, commented out
/// at their defaults (it showed only `task_after_seconds`).
#[test]
fn the_example_config_shows_the_tasks_settings() {
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/turnscope.toml"),
    )
    .expect("read examples/turnscope.toml");
    let defaults = format!("{:?}", Config::default());
    for key in ["tasks", "task_after_seconds", "task_poll_seconds"] {
        let line = example
            .lines()
            .find(|l| l.starts_with(&format!("# {key} = ")))
            .unwrap_or_else(|| panic!("examples/turnscope.toml shows no `# {key} = …` line"));
        let setting = line.trim_start_matches("# ").split(" #").next().unwrap();
        let config = Config::parse(&format!("[server]\n{setting}\n"))
            .unwrap_or_else(|e| panic!("`{setting}` is not accepted: {e}"));
        assert_eq!(
            format!("{config:?}"),
            defaults,
            "`{setting}` in the example is not the default"
        );
    }
}

/// `turnscope config example` prints that same file.
#[test]
fn config_example_prints_the_example_file() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(["config", "example"])
        .output()
        .expect("run turnscope config example");
    assert!(out.status.success(), "{out:?}");
    let file = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/turnscope.toml"),
    )
    .expect("read examples/turnscope.toml");
    assert_eq!(String::from_utf8_lossy(&out.stdout), file);
}

/// The example config shows every top-level section (set, or commented out as `# [section]`),
/// so a section added to the config reaches the file a new user starts from.
#[test]
fn the_example_config_shows_every_section() {
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/turnscope.toml"),
    )
    .expect("read examples/turnscope.toml");
    let headings: Vec<&str> = example
        .lines()
        .map(|l| {
            l.trim_start_matches("# ")
                .split_whitespace()
                .next()
                .unwrap_or("")
        })
        .filter(|l| l.starts_with('['))
        .collect();
    // A nested table (`[mcp_servers.tool_filter]`) counts as shown when a table above it is.
    let shown = |table: &str| {
        let name = table.trim_matches(['[', ']']);
        headings.iter().any(|h| {
            let h = h.trim_matches(['[', ']']);
            name == h || name.starts_with(&format!("{h}."))
        })
    };
    let mut missing: Vec<String> = config_keys()
        .into_iter()
        .map(|k| k.table)
        .filter(|t| !shown(t))
        .collect();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "examples/turnscope.toml shows no {missing:?}: add each, commented out if it is optional"
    );
}

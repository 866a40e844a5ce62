//! Where in a TOML config file an error is: the line (and column) and the dotted key, so a
//! refused reload can say `turnscope.toml:4: server.sessions: must be at least 1` on one line.
//! A reader of lines, not of TOML: table headers (`[a]`, `[[a]]`, counted per name) and
//! `key = value` lines are enough for the keys the config has; a key it cannot find has no line.

use std::path::PathBuf;

use super::ConfigError;

impl ConfigError {
    /// The error on one line, for a log line or a notice: `FILE:LINE[:COLUMN]: KEY: what is
    /// wrong`, with as much of the place as is known.
    pub fn brief(&self) -> String {
        let place = |file: &Option<PathBuf>, spot: Option<&Spot>| {
            let mut out = file
                .as_ref()
                .map(|f| f.display().to_string())
                .unwrap_or_else(|| "config".into());
            if let Some(spot) = spot {
                out.push_str(&format!(":{}", spot.line));
                if let Some(column) = spot.column {
                    out.push_str(&format!(":{column}"));
                }
            }
            out
        };
        match self {
            ConfigError::Read { .. } => one_line(&self.to_string()),
            ConfigError::Syntax {
                file,
                at: Some((spot, what)),
                ..
            } => match &spot.key {
                Some(key) => format!("{}: {key}: {}", place(file, Some(spot)), one_line(what)),
                None => format!("{}: {}", place(file, Some(spot)), one_line(what)),
            },
            ConfigError::Syntax { file, message, .. } => {
                format!("{}: {}", place(file, None), one_line(message))
            }
            ConfigError::Invalid {
                file: None,
                message,
                ..
            } => one_line(message),
            ConfigError::Invalid { file, message, at } => {
                format!("{}: {}", place(file, at.as_ref()), one_line(message))
            }
        }
    }
}

/// `text` with its line breaks (and the spaces around them) as single spaces.
pub(super) fn one_line(text: &str) -> String {
    text.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A place in the config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spot {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, when the parser gave one.
    pub column: Option<usize>,
    /// The dotted key at that place (`server.port`, `mcp_servers[1].command`), when known.
    pub key: Option<String>,
}

/// The spot of a parser error at byte `offset` of `text`: its line and column, and the key
/// written on that line under its table.
pub(super) fn spot_at(text: &str, offset: usize) -> Spot {
    let offset = offset.min(text.len());
    let before = &text[..floor_char_boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let mut key = None;
    let mut table = Table::default();
    for (n, raw) in text.lines().enumerate() {
        if n + 1 > line {
            break;
        }
        match parse_line(raw) {
            Line::Header { name, array } => {
                table.enter(&name, array);
                if n + 1 == line {
                    key = Some(table.path());
                }
            }
            Line::Key(k) if n + 1 == line => key = Some(table.join(&k)),
            _ => {}
        }
    }
    Spot {
        line,
        column: Some(column),
        key,
    }
}

/// The line where `key` (as a validation message names it: `server.sessions`,
/// `mcp_servers[0] ("files").command`) is set in `text`; failing that, the line of its table.
pub(super) fn find_key(text: &str, key: &str) -> Option<Spot> {
    let wanted = normalize(key);
    let mut table = Table::default();
    let mut header = None;
    for (n, raw) in text.lines().enumerate() {
        match parse_line(raw) {
            Line::Header { name, array } => {
                table.enter(&name, array);
                if header.is_none() && wanted.starts_with(&format!("{}.", table.path())) {
                    header = Some(n + 1);
                }
            }
            Line::Key(k) if table.join(&k) == wanted => {
                return Some(Spot {
                    line: n + 1,
                    column: None,
                    key: Some(key_of(key)),
                });
            }
            _ => {}
        }
    }
    header.map(|line| Spot {
        line,
        column: None,
        key: Some(key_of(key)),
    })
}

/// The key as messages write it, without the entry's name in parentheses.
fn key_of(key: &str) -> String {
    normalize(key)
}

/// `mcp_servers[0] ("files").command` → `mcp_servers[0].command`.
fn normalize(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut depth = 0;
    for c in key.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ' ' if depth == 0 => {}
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The table the lines so far are in, with how many times each array of tables was opened.
#[derive(Default)]
struct Table {
    path: String,
    arrays: std::collections::HashMap<String, usize>,
}

impl Table {
    fn enter(&mut self, name: &str, array: bool) {
        if array {
            let n = self.arrays.entry(name.to_string()).or_default();
            self.path = format!("{name}[{n}]");
            *n += 1;
        } else {
            self.path = name.to_string();
        }
    }

    fn path(&self) -> String {
        self.path.clone()
    }

    fn join(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }
}

enum Line {
    Header { name: String, array: bool },
    Key(String),
    Other,
}

fn parse_line(raw: &str) -> Line {
    let line = raw.trim();
    if let Some(rest) = line.strip_prefix("[[") {
        let name = rest.split("]]").next().unwrap_or_default();
        return Line::Header {
            name: unquote_dotted(name),
            array: true,
        };
    }
    if let Some(rest) = line.strip_prefix('[') {
        let name = rest.split(']').next().unwrap_or_default();
        return Line::Header {
            name: unquote_dotted(name),
            array: false,
        };
    }
    if line.starts_with('#') {
        return Line::Other;
    }
    match line.split_once('=') {
        Some((key, _)) if !key.trim().is_empty() => Line::Key(unquote_dotted(key)),
        _ => Line::Other,
    }
}

/// `a . "b"` → `a.b`.
fn unquote_dotted(key: &str) -> String {
    key.split('.')
        .map(|part| part.trim().trim_matches(|c| c == '"' || c == '\''))
        .collect::<Vec<_>>()
        .join(".")
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# a bot\n[server]\nport = \"x\"\nsessions = 0\n\n[[mcp_servers]]\nname = \"a\"\n\
                        [[mcp_servers]]\nname = \"b\"\ncommand = \"\"\n";

    #[test]
    fn a_parser_offset_is_a_line_a_column_and_the_key_under_its_table() {
        let at = TEXT.find("\"x\"").unwrap();
        assert_eq!(
            spot_at(TEXT, at),
            Spot {
                line: 3,
                column: Some(8),
                key: Some("server.port".into())
            }
        );
        let at = TEXT.rfind("command").unwrap();
        assert_eq!(
            spot_at(TEXT, at).key.as_deref(),
            Some("mcp_servers[1].command")
        );
    }

    #[test]
    fn a_validation_key_is_found_where_it_is_set_or_at_its_table() {
        assert_eq!(find_key(TEXT, "server.sessions").unwrap().line, 4);
        let s = find_key(TEXT, "mcp_servers[1] (\"b\").command").unwrap();
        assert_eq!(
            (s.line, s.key.as_deref()),
            (10, Some("mcp_servers[1].command"))
        );
        // Not written in the file (a default broke a rule): the line of its table.
        assert_eq!(find_key(TEXT, "server.max_body_bytes").unwrap().line, 2);
        assert!(find_key(TEXT, "wire.max_kib").is_none());
    }

    #[test]
    fn a_refused_file_is_one_line_with_the_file_the_line_and_the_key() {
        let dir = std::env::temp_dir().join(format!("turnscope-locate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let brief = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            let e = crate::config::Config::load(Some(&path), &Default::default()).unwrap_err();
            let brief = e.brief();
            assert!(!brief.contains('\n'), "{brief}");
            brief.replace(&format!("{}/", dir.display()), "")
        };
        assert_eq!(
            brief("a.toml", "[server]\nport = \"x\"\n"),
            "a.toml:2:8: server.port: invalid type: string \"x\", expected a whole number from 0 to 65535"
        );
        assert!(
            brief("b.toml", "[server]\nprot = 1\n")
                .starts_with("b.toml:2:1: server.prot: unknown field `prot`, expected one of")
        );
        assert_eq!(
            brief("c.toml", "[bot]\nround_cap = 8\n[server]\nsessions = 0\n"),
            "c.toml:4: server.sessions: must be at least 1"
        );
        assert_eq!(
            brief("d.toml", "[bot\nx = 1\n"),
            "d.toml:1:5: bot: unclosed table, expected `]`"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Configuration of tool sources: `[[mcp_servers]]` entries and the `[policy]` section of the
//! TOML config, and the Claude-Desktop `mcpServers` JSON shape most users already have.
//!
//! Everything here only parses and validates (no I/O, no environment): `${VAR}` placeholders
//! are checked for syntax at load and expanded when the server is started, so a missing
//! variable skips that one server with a clear reason instead of failing the bot.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

pub use super::claude_json::parse_claude_json;

/// Seconds a tool call may take when `timeout_seconds` is not given (TurnCall's 10 s).
pub const DEFAULT_CALL_TIMEOUT_SECONDS: f64 = 10.0;

/// How turnscope talks to an MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// Streamable HTTP (the default for a server with a `url`).
    Http,
    /// The legacy HTTP+SSE transport (protocol 2024-11-05).
    Sse,
    /// A child process speaking MCP on stdin/stdout.
    Stdio,
}

impl TransportKind {
    /// `http`, `sse` or `stdio`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Http => "http",
            TransportKind::Sse => "sse",
            TransportKind::Stdio => "stdio",
        }
    }
}

/// Who shares a server's connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// One connection for every session (the default).
    #[default]
    Shared,
    /// One connection per session, opened when the session starts and closed when it ends
    /// (TurnCall's model, for stateful servers).
    Session,
}

/// Which of a server's tools are offered. Deny beats allow; an empty allow list allows all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolFilter {
    /// Only these tools (empty = all).
    pub allow: Vec<String>,
    /// Never these tools.
    pub deny: Vec<String>,
}

impl ToolFilter {
    /// Whether the tool called `name` (the server's own name for it) is offered.
    pub fn admits(&self, name: &str) -> bool {
        !self.deny.iter().any(|d| d == name)
            && (self.allow.is_empty() || self.allow.iter().any(|a| a == name))
    }
}

impl<'de> Deserialize<'de> for ToolFilter {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FilterVisitor;

        impl<'de> Visitor<'de> for FilterVisitor {
            type Value = ToolFilter;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a list of tool names (only these) or a table with `allow` and/or `deny` lists",
                )
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ToolFilter, A::Error> {
                let mut allow = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    allow.push(name);
                }
                Ok(ToolFilter {
                    allow,
                    deny: Vec::new(),
                })
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolFilter, A::Error> {
                let mut filter = ToolFilter::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "allow" => filter.allow = map.next_value()?,
                        "deny" => filter.deny = map.next_value()?,
                        other => {
                            return Err(de::Error::unknown_field(other, &["allow", "deny"]));
                        }
                    }
                }
                Ok(filter)
            }
        }

        deserializer.deserialize_any(FilterVisitor)
    }
}

/// One MCP server a bot takes tools from (`[[mcp_servers]]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Unique name: lowercase letters, digits and `-`. Used in logs and events; config order
    /// is precedence order.
    pub name: String,
    /// `http` (streamable HTTP), `sse` or `stdio`; absent = `stdio` when `command` is given,
    /// else `http`.
    #[serde(default)]
    pub transport: Option<TransportKind>,
    /// Executable to run (stdio).
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments (stdio).
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables for it (stdio); values may use `${VAR}`.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Server URL (http / sse); may use `${VAR}`.
    #[serde(default)]
    pub url: Option<String>,
    /// Extra request headers (http / sse); values may use `${VAR}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Seconds one tool call may take before it is abandoned and cancelled upstream.
    #[serde(default = "default_call_timeout")]
    pub timeout_seconds: f64,
    /// Which tools to offer (absent = all).
    #[serde(default)]
    pub tool_filter: Option<ToolFilter>,
    /// `shared` (default) or `session`.
    #[serde(default)]
    pub scope: Scope,
    /// Leave this server out without deleting its entry.
    #[serde(default)]
    pub disabled: bool,
}

fn default_call_timeout() -> f64 {
    DEFAULT_CALL_TIMEOUT_SECONDS
}

impl McpServerConfig {
    pub(crate) fn blank(name: &str, transport: TransportKind) -> Self {
        Self {
            name: name.into(),
            transport: Some(transport),
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            timeout_seconds: DEFAULT_CALL_TIMEOUT_SECONDS,
            tool_filter: None,
            scope: Scope::Shared,
            disabled: false,
        }
    }

    /// A stdio server: `command` with `args`.
    pub fn stdio(name: &str, command: &str, args: &[&str]) -> Self {
        Self {
            command: Some(command.into()),
            args: args.iter().map(|a| (*a).to_string()).collect(),
            ..Self::blank(name, TransportKind::Stdio)
        }
    }

    /// A streamable HTTP server at `url`.
    pub fn http(name: &str, url: &str) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::blank(name, TransportKind::Http)
        }
    }

    /// A legacy SSE server at `url` (the SSE endpoint, usually ending in `/sse`).
    pub fn sse(name: &str, url: &str) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::blank(name, TransportKind::Sse)
        }
    }

    /// The transport in effect (see [`McpServerConfig::transport`]).
    pub fn transport_kind(&self) -> TransportKind {
        self.transport.unwrap_or(if self.command.is_some() {
            TransportKind::Stdio
        } else {
            TransportKind::Http
        })
    }
}

/// `[policy]`: which tool sources may be reached. Every field can also come from TurnCall's
/// environment variables, which win over the file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicySection {
    /// URL patterns http/sse servers must match (`BYOM_ALLOWED_URL_PATTERNS`), e.g.
    /// `https://*.example.com/*`. Empty = all, unless locked.
    pub allowed_url_patterns: Option<Vec<String>>,
    /// Whether stdio servers may run (`MCP_STDIO_ENABLED`); default on, off when locked.
    pub stdio_enabled: Option<bool>,
    /// Commands stdio servers may run (`MCP_STDIO_ALLOWED_COMMANDS`). Empty = any, unless
    /// locked.
    pub stdio_allowed_commands: Option<Vec<String>>,
    /// TurnCall's defaults for shared deployments (`--locked`): stdio off and an allowlist
    /// required (empty lists allow nothing).
    pub locked: bool,
}

/// Checks every server entry; the error names the entry and the key, and says what was
/// expected.
pub fn validate_servers(servers: &[McpServerConfig]) -> Result<(), String> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, server) in servers.iter().enumerate() {
        let at = format!("mcp_servers[{i}]");
        check_name(&server.name).map_err(|e| format!("{at}.name: {e}"))?;
        let at = format!("{at} (\"{}\")", server.name);
        if let Some(first) = seen.insert(&server.name, i) {
            return Err(format!(
                "{at}.name: \"{}\" is already the name of mcp_servers[{first}]; give each server its own name",
                server.name
            ));
        }
        crate::config::check_seconds(
            &format!("{at}.timeout_seconds"),
            server.timeout_seconds,
            false,
        )?;
        match server.transport_kind() {
            TransportKind::Stdio => {
                match server.command.as_deref().map(str::trim) {
                    None | Some("") => {
                        return Err(format!(
                            "{at}.command: missing; a stdio server needs the executable to run, e.g. command = \"npx\""
                        ));
                    }
                    Some(_) => {}
                }
                if server.url.is_some() {
                    return Err(format!(
                        "{at}.url: a stdio server has no url; remove it, or set transport = \"http\" or \"sse\""
                    ));
                }
                if !server.headers.is_empty() {
                    return Err(format!(
                        "{at}.headers: a stdio server sends no HTTP headers; pass values through env instead"
                    ));
                }
                for (key, value) in &server.env {
                    check_placeholders(value).map_err(|e| format!("{at}.env.{key}: {e}"))?;
                }
            }
            kind @ (TransportKind::Http | TransportKind::Sse) => {
                let Some(url) = server.url.as_deref() else {
                    return Err(format!(
                        "{at}.url: missing; a {} server needs its URL, e.g. url = \"http://127.0.0.1:9000/{}\"",
                        kind.as_str(),
                        if kind == TransportKind::Sse {
                            "sse"
                        } else {
                            "mcp"
                        }
                    ));
                };
                check_placeholders(url).map_err(|e| format!("{at}.url: {e}"))?;
                if !url.contains("${") {
                    check_url(url).map_err(|e| format!("{at}.url: {e}"))?;
                }
                if server.command.is_some() || !server.args.is_empty() || !server.env.is_empty() {
                    return Err(format!(
                        "{at}: command/args/env belong to stdio servers; remove them or set transport = \"stdio\""
                    ));
                }
                for (name, value) in &server.headers {
                    check_header_name(name).map_err(|e| format!("{at}.headers.{name}: {e}"))?;
                    check_placeholders(value).map_err(|e| format!("{at}.headers.{name}: {e}"))?;
                }
            }
        }
    }
    Ok(())
}

/// Checks a server name: 1-64 characters from `a-z`, `0-9` and `-`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected 1-64 characters from a-z, 0-9 and '-', got {name:?}; rename the server"
        ))
    }
}

fn check_url(url: &str) -> Result<(), String> {
    match reqwest::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => Ok(()),
        Ok(parsed) => Err(format!(
            "expected an http:// or https:// URL, got scheme {:?} in {url:?}",
            parsed.scheme()
        )),
        Err(e) => Err(format!("expected an http(s) URL, got {url:?} ({e})")),
    }
}

/// Header names rmcp sets itself and refuses to take from the config.
const RESERVED_HEADERS: [&str; 4] = [
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

fn check_header_name(name: &str) -> Result<(), String> {
    if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err("not a valid HTTP header name".into());
    }
    if RESERVED_HEADERS
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
    {
        return Err("this header is set by the MCP transport itself; remove it".into());
    }
    Ok(())
}

/// Checks that every `$` in `text` starts a well-formed `${NAME}` placeholder or is `$$`
/// (a literal `$`).
pub fn check_placeholders(text: &str) -> Result<(), String> {
    expand_env(text, &|_| Some(String::new())).map(|_| ())
}

/// Replaces each `${NAME}` in `text` with `lookup(NAME)`; `$$` is a literal `$`, and a `$`
/// followed by anything else is kept as is.
///
/// # Errors
/// A placeholder that is not closed or names no valid variable, or a variable `lookup` does
/// not know; the message says which and what to do.
pub fn expand_env(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        if let Some(after) = tail.strip_prefix('$') {
            out.push('$');
            rest = after;
        } else if let Some(body) = tail.strip_prefix('{') {
            let Some(end) = body.find('}') else {
                return Err(format!(
                    "a `${{` placeholder is not closed in {text:?}; write ${{NAME}} (or $$ for a literal $)"
                ));
            };
            let name = &body[..end];
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid {
                return Err(format!(
                    "`${{{name}}}` is not a variable name; use letters, digits and _ (not first)"
                ));
            }
            match lookup(name) {
                Some(value) => out.push_str(&value),
                None => {
                    return Err(format!(
                        "the environment variable {name} is not set; export it or remove ${{{name}}}"
                    ));
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = tail;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

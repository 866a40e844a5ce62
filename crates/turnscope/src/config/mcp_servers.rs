//! `[[mcp_servers]]` (the MCP servers a bot takes tools from, in precedence order) and
//! `[policy]` (which of them may be reached). Only parses and validates, with no I/O and no
//! environment: `${VAR}` placeholders are checked for syntax here and expanded when the server
//! starts, so a missing variable skips that one server with a reason instead of failing the bot.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::env::check_placeholders;
use super::seconds::check_seconds;
use super::tool_filter::ToolFilter;

/// Seconds a tool call may take when `timeout_seconds` is not given (10 s).
pub(crate) const DEFAULT_CALL_TIMEOUT_SECONDS: f64 = 10.0;

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
    /// (for stateful servers, so sessions never share their state).
    Session,
}

/// One MCP server a bot takes tools from (`[[mcp_servers]]`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
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
    /// The folder it runs in (stdio). A relative one, and the default, is the config file's
    /// folder (set by [`crate::config::Config::load`]), so relative script paths in `args`
    /// work wherever turnscope is started; with no config file, turnscope's own folder. A
    /// relative `command` with a `/` (`./server.sh`) is looked for there too.
    #[serde(default)]
    pub cwd: Option<std::path::PathBuf>,
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
    pub(crate) disabled: bool,
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
            cwd: None,
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

    /// Anchors a stdio server's folder to `dir` (the config file's): the folder itself when
    /// none is given, `dir` joined with a relative one.
    pub(crate) fn anchor_cwd(&mut self, dir: &std::path::Path) {
        if self.transport_kind() != TransportKind::Stdio {
            return;
        }
        self.cwd = Some(match self.cwd.take() {
            Some(cwd) if cwd.is_absolute() => cwd,
            Some(cwd) => dir.join(cwd),
            None => dir.to_path_buf(),
        });
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

/// `[policy]`: which tool sources may be reached. Every field can also come from the
/// environment variable named in its doc, which wins over the file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
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
    /// The defaults for shared deployments (`--locked`): stdio off and an allowlist required
    /// (empty lists allow nothing).
    pub locked: bool,
}

/// Checks every server entry; the error names the entry and the key, and says what was
/// expected.
pub(crate) fn validate_servers(servers: &[McpServerConfig]) -> Result<(), String> {
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
        check_seconds(
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
                        "{at}.url: missing; a {} server needs its URL, e.g. url = \"http://127.0.0.1:9000/{}\"{}",
                        kind.as_str(),
                        if kind == TransportKind::Sse {
                            "sse"
                        } else {
                            "mcp"
                        },
                        // Neither given: the transport was only inferred.
                        if server.transport.is_none() {
                            " (or give command = \"...\" for a server started over stdio)"
                        } else {
                            ""
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
pub(crate) fn check_name(name: &str) -> Result<(), String> {
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

#[cfg(test)]
#[path = "mcp_servers_tests.rs"]
mod tests;

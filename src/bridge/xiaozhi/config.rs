//! Configuration of Xiaozhi bridges: `[[bridges.xiaozhi]]` entries in turnscope's TOML, the
//! baseline's `mcp_config.json` (`mcpServers`) shape, `${VAR}` expansion, and endpoint
//! resolution.
//!
//! Endpoint resolution, per bridge: its own `endpoint` → `$MCP_ENDPOINT_<NAME>` (name
//! upper-cased, every other character than `A-Z0-9` turned into `_`) → `$MCP_ENDPOINT`. A
//! bridge with none is skipped with a warning; several bridges on the global one get a
//! warning, because an endpoint keeps one connection per agent and they would keep
//! replacing each other. Environment lookups go through a function so tests need not touch
//! the process environment.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::bot::BOT;
use super::endpoint::Endpoint;
use super::filter::{ToolFilter, ToolRules};
use crate::mcp::spec::ServerSpec;

/// One `[[bridges.xiaozhi]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XiaozhiEntry {
    /// The bridge's name (also picks `MCP_ENDPOINT_<NAME>`).
    pub name: String,
    /// The endpoint URL; `${VAR}` is replaced from the environment.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// What to relay: one name from `[[mcp_servers]]`, or `["@bot"]`.
    #[serde(default)]
    pub servers: Vec<String>,
    /// Which tools the endpoint may see and call.
    #[serde(default)]
    pub tools: ToolRules,
}

/// Checks entries without looking at the environment: names present and unique, servers
/// given, `@bot` alone, tool filters consistent.
///
/// # Errors
///
/// The first problem, naming the entry and the key.
pub fn validate_entries(entries: &[XiaozhiEntry]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, e) in entries.iter().enumerate() {
        let at = format!("bridges.xiaozhi[{i}]");
        if e.name.trim().is_empty() {
            return Err(format!("{at}.name: must not be empty"));
        }
        if !seen.insert(e.name.as_str()) {
            return Err(format!(
                "{at}.name: `{}` is used by two bridges; names must be unique",
                e.name
            ));
        }
        if e.servers.is_empty() {
            return Err(format!(
                "{at}.servers: empty; name one server from [[mcp_servers]], or [\"{BOT}\"] for the bot itself"
            ));
        }
        if e.servers.iter().any(|s| s == BOT) && e.servers.len() > 1 {
            return Err(format!(
                "{at}.servers: \"{BOT}\" cannot be combined with other servers"
            ));
        }
        ToolFilter::new(&e.tools).map_err(|m| format!("{at}.{m}"))?;
    }
    Ok(())
}

/// The environment variable naming the endpoint of bridge `name`: `MCP_ENDPOINT_<NAME>`.
pub fn env_var_for(name: &str) -> String {
    let tail: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("MCP_ENDPOINT_{tail}")
}

/// Replaces every `${VAR}` in `text` with the variable's value.
///
/// # Errors
///
/// A variable that is not set (or empty), or an unclosed `${`.
pub fn expand_vars(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| "an unclosed ${ (write ${NAME})".to_string())?;
        let var = &after[..end];
        let value = env(var)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("${{{var}}} is not set; export {var} or write the value in"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Where a bridge's endpoint came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointSource {
    /// Its own `endpoint` (config or `--endpoint`).
    Own,
    /// `MCP_ENDPOINT_<NAME>`.
    Named(String),
    /// `MCP_ENDPOINT`, possibly shared.
    Global,
}

/// A bridge whose endpoint is known.
#[derive(Debug, Clone)]
pub struct Placed<T> {
    /// The bridge's name.
    pub name: String,
    /// Its endpoint.
    pub endpoint: Endpoint,
    /// Where the endpoint came from.
    pub source: EndpointSource,
    /// Whatever else the caller attached.
    pub item: T,
}

/// Resolves the endpoint of each `(name, own endpoint, item)`. Bridges without a usable
/// endpoint are left out; every such case, and bridges sharing `MCP_ENDPOINT`, produce a
/// warning (tokens masked).
pub fn place<T>(
    bridges: Vec<(String, Option<String>, T)>,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Vec<Placed<T>>, Vec<String>) {
    let mut placed = Vec::new();
    let mut warnings = Vec::new();
    for (name, own, item) in bridges {
        let named = env_var_for(&name);
        let (raw, source) = if let Some(own) = own.filter(|s| !s.trim().is_empty()) {
            (own, EndpointSource::Own)
        } else if let Some(v) = env(&named).filter(|s| !s.trim().is_empty()) {
            (v, EndpointSource::Named(named.clone()))
        } else if let Some(v) = env("MCP_ENDPOINT").filter(|s| !s.trim().is_empty()) {
            (v, EndpointSource::Global)
        } else {
            warnings.push(format!(
                "xiaozhi bridge {name}: no endpoint (set `endpoint`, {named} or MCP_ENDPOINT); skipped"
            ));
            continue;
        };
        let url = match expand_vars(&raw, env) {
            Ok(url) => url,
            Err(e) => {
                warnings.push(format!("xiaozhi bridge {name}: endpoint: {e}; skipped"));
                continue;
            }
        };
        match Endpoint::parse(&url) {
            Ok(endpoint) => placed.push(Placed {
                name,
                endpoint,
                source,
                item,
            }),
            Err(e) => warnings.push(format!("xiaozhi bridge {name}: {e}; skipped")),
        }
    }
    let global: Vec<&str> = placed
        .iter()
        .filter(|p| p.source == EndpointSource::Global)
        .map(|p| p.name.as_str())
        .collect();
    if global.len() > 1 {
        warnings.push(format!(
            "xiaozhi bridges {} all use MCP_ENDPOINT; an endpoint keeps one connection per agent, so they \
             will keep replacing each other. Give each its own endpoint (`endpoint` or MCP_ENDPOINT_<NAME>)",
            global.join(", ")
        ));
    }
    (placed, warnings)
}

/// One enabled server of an `mcp_config.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonServer {
    /// Its key under `mcpServers`.
    pub name: String,
    /// How to reach it.
    pub spec: ServerSpec,
    /// Its own endpoint, if given.
    pub endpoint: Option<String>,
    /// Its tool filter.
    pub tools: ToolRules,
}

#[derive(Deserialize)]
struct JsonFile {
    #[serde(rename = "mcpServers")]
    mcp_servers: BTreeMap<String, JsonEntry>,
}

#[derive(Deserialize)]
struct JsonEntry {
    #[serde(default, rename = "type", alias = "transportType")]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default)]
    tools: ToolRules,
}

/// Reads the baseline's `mcp_config.json` shape: `{"mcpServers": {NAME: {type|transportType,
/// command, args, env, url, headers, disabled, endpoint, tools{allow,deny}}}}`. The type is
/// `stdio`, `sse`, or `http`/`streamablehttp`/`streamable-http` (case, `-` and `_` ignored);
/// without one, a `command` means stdio and a `url` means SSE when its path ends in `/sse`,
/// else streamable HTTP. Disabled servers are left out; other keys (`timeout`, …) are
/// ignored.
///
/// # Errors
///
/// Text that is not such a file, or an entry that cannot be run, named by its key.
pub fn parse_mcp_config(text: &str) -> Result<Vec<JsonServer>, String> {
    let file: JsonFile =
        serde_json::from_str(text).map_err(|e| format!("not an mcp_config.json: {e}"))?;
    let mut servers = Vec::new();
    for (name, e) in file.mcp_servers {
        if e.disabled {
            continue;
        }
        let at = format!("mcpServers.{name}");
        let kind = match e
            .kind
            .as_deref()
            .map(|k| k.to_ascii_lowercase().replace(['-', '_'], ""))
        {
            Some(k) => k,
            None if e.command.is_some() => "stdio".into(),
            None => match &e.url {
                Some(u)
                    if u.split(['?', '#'])
                        .next()
                        .unwrap_or("")
                        .trim_end_matches('/')
                        .ends_with("/sse") =>
                {
                    "sse".into()
                }
                Some(_) => "http".into(),
                None => {
                    return Err(format!(
                        "{at}: give \"command\" (stdio) or \"url\" (http/sse)"
                    ));
                }
            },
        };
        let url = || {
            e.url
                .clone()
                .ok_or_else(|| format!("{at}: type {kind} needs \"url\""))
        };
        let spec = match kind.as_str() {
            "stdio" => ServerSpec::Stdio {
                command: e
                    .command
                    .clone()
                    .filter(|c| !c.trim().is_empty())
                    .ok_or_else(|| format!("{at}: type stdio needs \"command\""))?,
                args: e.args.clone(),
                env: e.env.clone(),
            },
            "sse" => ServerSpec::Sse {
                url: url()?,
                headers: e.headers.clone(),
            },
            "http" | "streamablehttp" | "streamable" => ServerSpec::Http {
                url: url()?,
                headers: e.headers.clone(),
            },
            other => {
                return Err(format!(
                    "{at}.type: unknown transport {other:?}; expected stdio, sse or streamablehttp"
                ));
            }
        };
        ToolFilter::new(&e.tools).map_err(|m| format!("{at}.{m}"))?;
        servers.push(JsonServer {
            name,
            spec,
            endpoint: e.endpoint,
            tools: e.tools,
        });
    }
    Ok(servers)
}

/// Reads and parses an `mcp_config.json` file.
///
/// # Errors
///
/// The file cannot be read or parsed; the message names the file.
pub fn read_mcp_config(path: &Path) -> Result<Vec<JsonServer>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}; check the path", path.display()))?;
    parse_mcp_config(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

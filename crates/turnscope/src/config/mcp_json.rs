//! The one reader of the `mcpServers` JSON shape (`{"mcpServers": {"name": {...}}}`: Claude
//! Desktop's config and the Xiaozhi bridges' `mcp_config.json`) into [`McpServerConfig`]s in file
//! order, since config order is precedence order. [`parse_mcp_json`] lists the keys it takes.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::mcp_servers::{McpServerConfig, Scope, TransportKind, check_name};
use super::tool_filter::ToolFilter;
use crate::json::json_kind;

/// One entry of an `mcpServers` object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JsonServer {
    /// The server, named by its key.
    pub server: McpServerConfig,
    /// The Xiaozhi endpoint its bridge dials (`endpoint`), when given.
    pub endpoint: Option<String>,
}

/// Reads and parses an `mcpServers` JSON file.
///
/// # Errors
/// The file cannot be read or parsed; the message names the file.
pub(crate) fn read_mcp_json(path: &std::path::Path) -> Result<Vec<JsonServer>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}; check the path", path.display()))?;
    parse_mcp_json(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses an `mcpServers` JSON config, keeping the servers in file order. Other top-level keys
/// (a Claude Desktop file has several) are ignored; unknown keys inside a server entry are
/// errors. Without a `type`, a `command` means stdio, a `url` whose path ends in `/sse` the
/// legacy SSE transport, any other `url` streamable HTTP.
///
/// # Errors
/// Text that is not such a config, or an entry that cannot be run, named by its key.
///
/// The file is read with order-keeping visitors (serde_json's map sorts keys), so entries
/// come out in file order.
///
/// Entries take `command`/`args`/`env` (stdio) or `url`/`type`/`headers`, plus `disabled`,
/// `timeout`, `disabledTools`, turnscope's own `tool_filter` (also `tools`) and `scope`, and a
/// Xiaozhi bridge's `endpoint`. Keys other clients add (`autoApprove`, `alwaysAllow`) are
/// ignored; any other key is an error naming it.
pub(crate) fn parse_mcp_json(text: &str) -> Result<Vec<JsonServer>, String> {
    let file: ClaudeFile =
        serde_json::from_str(text).map_err(|e| format!("not a JSON config: {e}"))?;
    if !file.ignored.is_empty() {
        tracing::debug!(keys = ?file.ignored, "JSON config: top-level keys other than mcpServers ignored");
    }
    let Some(servers) = file.servers else {
        return Err(
            "mcpServers: missing; a JSON config holds {\"mcpServers\": {\"name\": {\"command\": ...}}}"
                .into(),
        );
    };
    let mut out: Vec<JsonServer> = Vec::with_capacity(servers.0.len());
    let mut names: Vec<String> = Vec::with_capacity(servers.0.len());
    for (given, entry) in servers.0 {
        let at = format!("mcpServers.{given}");
        // Claude Desktop files name servers `GitHub`, `mcp_server_time`: taken as `github`,
        // `mcp-server-time` (turnscope's names are lowercase, digits and `-`).
        let name = json_name(&given);
        check_name(&name).map_err(|e| format!("{at}: {e}"))?;
        if names.contains(&name) {
            return Err(format!(
                "{at}: taken as `{name}`, the name of another server in this file; rename one"
            ));
        }
        if name != given {
            tracing::info!("JSON config: server `{given}` is called `{name}` here");
        }
        let server = json_entry(&name, &entry).map_err(|e| format!("{at}.{e}"))?;
        names.push(name);
        out.push(server);
    }
    Ok(out)
}

/// A server's name from a JSON config as turnscope names servers: lowercase, `_` and spaces
/// as `-` (what is still not a name is refused by `check_name`, naming the key).
fn json_name(given: &str) -> String {
    given
        .chars()
        .map(|c| match c {
            '_' | ' ' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// Keys that other MCP clients put in server entries and that mean nothing here.
const IGNORED_ENTRY_KEYS: [&str; 4] = ["autoApprove", "alwaysAllow", "description", "note"];

fn json_entry(name: &str, entry: &Value) -> Result<JsonServer, String> {
    let Value::Object(map) = entry else {
        return Err(format!(
            "(entry): expected an object with command/args/env or url/type, got {}",
            json_kind(entry)
        ));
    };
    let mut server = McpServerConfig {
        transport: None,
        ..McpServerConfig::blank(name, TransportKind::Http)
    };
    let mut endpoint = None;
    for (key, value) in map {
        match key.as_str() {
            "command" => server.command = Some(string(key, value)?),
            "args" => server.args = strings(key, value)?,
            "cwd" => server.cwd = Some(string(key, value)?.into()),
            "env" => server.env = string_map(key, value)?,
            "url" => server.url = Some(string(key, value)?),
            "headers" => server.headers = string_map(key, value)?,
            "type" | "transport" | "transportType" => {
                server.transport = Some(transport_name(key, &string(key, value)?)?);
            }
            "disabled" => server.disabled = boolean(key, value)?,
            "enabled" => server.disabled = !boolean(key, value)?,
            "timeout" | "timeout_seconds" => {
                server.timeout_seconds = value
                    .as_f64()
                    .ok_or_else(|| format!("{key}: expected seconds, got {}", json_kind(value)))?;
            }
            "endpoint" => endpoint = Some(string(key, value)?),
            "tool_filter" | "tools" => {
                server.tool_filter =
                    Some(ToolFilter::deserialize(value).map_err(|e| format!("{key}: {e}"))?);
            }
            "disabledTools" | "disabled_tools" => {
                let deny = strings(key, value)?;
                server
                    .tool_filter
                    .get_or_insert_with(ToolFilter::default)
                    .deny = deny;
            }
            "scope" => {
                server.scope = Scope::deserialize(value)
                    .map_err(|e| format!("{key}: expected \"shared\" or \"session\" ({e})"))?;
            }
            k if IGNORED_ENTRY_KEYS.contains(&k) => {}
            other => {
                return Err(format!(
                    "{other}: unknown key; expected command, args, cwd, env, url, type, headers, disabled, \
                     timeout_seconds, tool_filter, disabledTools, scope or endpoint"
                ));
            }
        }
    }
    if server.transport.is_none()
        && server.command.is_none()
        && server.url.as_deref().is_some_and(is_sse_url)
    {
        server.transport = Some(TransportKind::Sse);
    }
    if let Some(filter) = &server.tool_filter {
        filter.check().map_err(|e| format!("tools: {e}"))?;
    }
    Ok(JsonServer { server, endpoint })
}

/// Whether a URL's path ends in `/sse`, the legacy transport's usual path.
fn is_sse_url(url: &str) -> bool {
    url.split(['?', '#'])
        .next()
        .unwrap_or("")
        .trim_end_matches('/')
        .ends_with("/sse")
}

fn transport_name(key: &str, name: &str) -> Result<TransportKind, String> {
    let folded: String = name
        .chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect();
    match folded.as_str() {
        "stdio" => Ok(TransportKind::Stdio),
        "sse" => Ok(TransportKind::Sse),
        "http" | "streamablehttp" | "streamable" => Ok(TransportKind::Http),
        _ => Err(format!(
            "{key}: expected \"stdio\", \"sse\" or \"http\" (streamable HTTP), got {name:?}"
        )),
    }
}

fn string(key: &str, value: &Value) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{key}: expected a string, got {}", json_kind(value)))
}

fn boolean(key: &str, value: &Value) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| format!("{key}: expected true or false, got {}", json_kind(value)))
}

fn strings(key: &str, value: &Value) -> Result<Vec<String>, String> {
    let Value::Array(items) = value else {
        return Err(format!(
            "{key}: expected an array of strings, got {}",
            json_kind(value)
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| string(&format!("{key}[{i}]"), item))
        .collect()
}

fn string_map(key: &str, value: &Value) -> Result<BTreeMap<String, String>, String> {
    let Value::Object(map) = value else {
        return Err(format!(
            "{key}: expected an object of strings, got {}",
            json_kind(value)
        ));
    };
    map.iter()
        .map(|(k, v)| Ok((k.clone(), string(&format!("{key}.{k}"), v)?)))
        .collect()
}

/// The top level of a JSON config: `mcpServers` in file order, other keys only named.
struct ClaudeFile {
    servers: Option<OrderedObject>,
    ignored: Vec<String>,
}

impl<'de> Deserialize<'de> for ClaudeFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FileVisitor;

        impl<'de> Visitor<'de> for FileVisitor {
            type Value = ClaudeFile;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object with an `mcpServers` object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ClaudeFile, A::Error> {
                let mut file = ClaudeFile {
                    servers: None,
                    ignored: Vec::new(),
                };
                while let Some(key) = map.next_key::<String>()? {
                    if key == "mcpServers" {
                        file.servers = Some(map.next_value()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                        file.ignored.push(key);
                    }
                }
                Ok(file)
            }
        }

        deserializer.deserialize_map(FileVisitor)
    }
}

/// A JSON object with its keys in document order (serde_json's own map sorts them, and
/// config order is precedence order).
struct OrderedObject(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for OrderedObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;

        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = OrderedObject;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of server entries")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedObject, A::Error> {
                let mut entries: Vec<(String, Value)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Value>()? {
                    if entries.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(format!(
                            "server {key:?} is listed twice; give each server its own name"
                        )));
                    }
                    entries.push((key, value));
                }
                Ok(OrderedObject(entries))
            }
        }

        deserializer.deserialize_map(ObjectVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_config_json_in_the_baseline_shape() {
        let text = r#"{
          "mcpServers": {
            "calc": {"type": "stdio", "command": "python", "args": ["calc.py"], "env": {"A": "1"},
                     "tools": {"deny": ["rm"]}, "endpoint": "wss://h/mcp/?token=x", "timeout": 5},
            "remote": {"transportType": "Streamable-HTTP", "url": "http://h/mcp", "headers": {"X": "y"}},
            "legacy": {"url": "http://h/sse/"},
            "guess": {"url": "http://h/mcp"},
            "off": {"command": "nope", "disabled": true}
          }
        }"#;
        let servers = parse_mcp_json(text).unwrap();
        let names: Vec<&str> = servers.iter().map(|s| s.server.name.as_str()).collect();
        assert_eq!(
            names,
            ["calc", "remote", "legacy", "guess", "off"],
            "file order"
        );
        let calc = &servers[0].server;
        assert_eq!(calc.transport_kind(), TransportKind::Stdio);
        assert_eq!(
            (calc.command.as_deref(), calc.args.as_slice()),
            (Some("python"), &["calc.py".to_string()][..])
        );
        assert_eq!(calc.env, BTreeMap::from([("A".into(), "1".into())]));
        assert_eq!(
            calc.tool_filter.as_ref().map(|f| f.deny.clone()),
            Some(vec!["rm".to_string()])
        );
        assert_eq!(calc.timeout_seconds, 5.0);
        assert_eq!(servers[0].endpoint.as_deref(), Some("wss://h/mcp/?token=x"));
        assert_eq!(servers[1].server.transport_kind(), TransportKind::Http);
        assert_eq!(servers[1].server.headers["X"], "y");
        assert_eq!(
            servers[2].server.transport_kind(),
            TransportKind::Sse,
            "a url ending in /sse"
        );
        assert_eq!(servers[3].server.transport_kind(), TransportKind::Http);
        assert!(servers[4].server.disabled);
    }

    #[test]
    fn mcp_config_errors_name_the_server() {
        let e = parse_mcp_json(r#"{"mcpServers": {"x": {"type": "ws", "url": "u"}}}"#).unwrap_err();
        assert!(e.contains("mcpServers.x.type"), "{e}");
        let e = parse_mcp_json(
            r#"{"mcpServers": {"x": {"command": "c", "tools": {"allow": ["a"], "deny": ["a"]}}}}"#,
        )
        .unwrap_err();
        assert!(e.contains("mcpServers.x.tools"), "{e}");
        assert!(parse_mcp_json("[server]\nport = 1").is_err());
    }

    /// Names as Claude Desktop files write them are taken lowercase with `-` (the whole file
    /// was refused over one `Bad_Name`: tour I); two that become one are refused, named.
    #[test]
    fn desktop_style_names_are_taken_as_turnscope_names() {
        let servers = parse_mcp_json(
            r#"{"mcpServers": {"GitHub": {"url": "http://h/mcp"}, "mcp_server_time": {"command": "t"}}}"#,
        )
        .unwrap();
        let names: Vec<&str> = servers.iter().map(|s| s.server.name.as_str()).collect();
        assert_eq!(names, ["github", "mcp-server-time"]);
        let e =
            parse_mcp_json(r#"{"mcpServers": {"a_b": {"command": "t"}, "a-b": {"command": "t"}}}"#)
                .unwrap_err();
        assert!(e.contains("mcpServers.a-b: taken as `a-b`"), "{e}");
        let e = parse_mcp_json(r#"{"mcpServers": {"tools/x": {"command": "t"}}}"#).unwrap_err();
        assert!(e.contains("mcpServers.tools/x"), "{e}");
    }
}

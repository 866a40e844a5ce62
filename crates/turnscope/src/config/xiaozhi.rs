//! `[[bridges.xiaozhi]]`: Xiaozhi WebSocket endpoints the server dials, and what each relays
//! (`servers`: names of `[[mcp_servers]]`, or `["@bot"]` for the bot itself). Parsing and
//! validation only; endpoints are resolved from the environment when the bridges start.

use serde::{Deserialize, Serialize};

use super::tool_filter::ToolFilter;

/// The name that stands for the bot itself (its `start`/`chat` tools) in `servers`.
pub const BOT: &str = "@bot";

/// One `[[bridges.xiaozhi]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
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
    pub tools: ToolFilter,
}

/// Checks entries without looking at the environment: names present and unique, servers
/// given, `@bot` alone, tool filters consistent.
///
/// # Errors
///
/// The first problem, naming the entry and the key.
pub(crate) fn validate_entries(entries: &[XiaozhiEntry]) -> Result<(), String> {
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
        e.tools.check().map_err(|m| format!("{at}.tools: {m}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, servers: &[&str]) -> XiaozhiEntry {
        XiaozhiEntry {
            name: name.into(),
            endpoint: None,
            servers: servers.iter().map(|s| s.to_string()).collect(),
            tools: ToolFilter::default(),
        }
    }

    #[test]
    fn entries_are_validated() {
        assert!(validate_entries(&[entry("a", &["files"]), entry("b", &["@bot"])]).is_ok());
        let dup = validate_entries(&[entry("a", &["x"]), entry("a", &["y"])]).unwrap_err();
        assert!(dup.contains("bridges.xiaozhi[1].name"), "{dup}");
        assert!(
            validate_entries(&[entry("a", &[])])
                .unwrap_err()
                .contains("servers")
        );
        assert!(validate_entries(&[entry("a", &["@bot", "x"])]).is_err());
        let mut overlap = entry("a", &["x"]);
        overlap.tools = ToolFilter {
            allow: vec!["rm".into()],
            deny: vec!["rm".into()],
        };
        let e = validate_entries(&[overlap]).unwrap_err();
        assert!(
            e.contains("bridges.xiaozhi[0].tools") && e.contains("rm"),
            "{e}"
        );
    }
}

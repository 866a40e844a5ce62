//! The naming rules: how built-ins, the bot's own tools and MCP servers' tools become one flat
//! list of unique names. Precedence is built-in, own, then servers in config order; a taken name
//! is skipped, never shadowed; reserved names are never a server's; per-server and total caps
//! apply. Pure: the [`registry`](super::registry) calls [`merge`] and logs the skips.

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

use super::ToolSpec;
use super::limits::McpLimits;

/// One tool an MCP server offers, as the model will see it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceTool {
    /// The name the model calls (valid for OpenAI: `^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// The server's own name for it (sent in `tools/call`).
    pub original: String,
    /// Its description.
    pub description: String,
    /// Its argument schema, with `$ref`s inlined.
    pub parameters: Value,
}

/// One server's offered tools, for [`merge`].
pub struct ServerTools<'a> {
    /// The server's name.
    pub server: &'a str,
    /// Its tools in listing order (already through its `tool_filter`).
    pub tools: &'a [SourceTool],
    /// The tools it listed whose input schema cannot be used: (name, why).
    pub unusable: &'a [(String, String)],
}

/// Where a name is dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The n-th local tool (built-ins first, then the bot's own).
    Local(usize),
    /// A server's tool.
    Mcp {
        /// Index of the server in the list given to [`merge`].
        server: usize,
        /// The server's own name for the tool.
        original: String,
    },
}

/// Why a tool was left out.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Its name is a reserved built-in name.
    Reserved,
    /// Its name already belongs to a tool of this source.
    TakenBy(String),
    /// Its server already gave `per_server` tools.
    PerServerCap(usize),
    /// All servers together already gave `total` tools.
    TotalCap(usize),
    /// Its input schema cannot be used (a `$ref` to another document, a cycle, too deep…):
    /// why.
    UnusableSchema(String),
}

/// A tool left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Skip {
    /// The tool's name.
    pub tool: String,
    /// Its source (`builtin`, `rust` or a server name).
    pub source: String,
    /// Why.
    pub reason: SkipReason,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Skip {
            tool,
            source,
            reason,
        } = self;
        match reason {
            SkipReason::Reserved => write!(
                f,
                "tool `{tool}` of {source} skipped: `{tool}` is a reserved built-in name; rename it on the server or leave it out with tool_filter"
            ),
            // tool_filter can leave a server's tool out, not a built-in: say what frees the name.
            SkipReason::TakenBy(owner) if owner == "builtin" => write!(
                f,
                "tool `{tool}` of {source} skipped: the name is taken by the built-in `{tool}`; [bot] builtin_tools = false leaves the built-ins out, or rename it on the server"
            ),
            SkipReason::TakenBy(owner) => write!(
                f,
                "tool `{tool}` of {source} skipped: the name is taken by {owner}; use tool_filter to choose, or rename it on the server"
            ),
            SkipReason::PerServerCap(cap) => write!(
                f,
                "tool `{tool}` of {source} skipped: {source} already gives {cap} tools (MCP_MAX_TOOLS_PER_SERVER); narrow it with tool_filter"
            ),
            SkipReason::TotalCap(cap) => write!(
                f,
                "tool `{tool}` of {source} skipped: MCP servers already give {cap} tools together (MCP_MAX_TOOLS_TOTAL); narrow them with tool_filter"
            ),
            SkipReason::UnusableSchema(why) => write!(
                f,
                "tool `{tool}` of {source} skipped: its input schema cannot be used: {why} (or leave the tool out with tool_filter)"
            ),
        }
    }
}

/// The merged tool set.
#[derive(Debug, Clone, Default)]
pub struct Merged {
    /// Every tool, in precedence order.
    pub specs: Vec<ToolSpec>,
    /// Name → where it is dispatched.
    pub routes: HashMap<String, Route>,
    /// What was left out.
    pub skipped: Vec<Skip>,
}

/// Merges `local` tools (built-ins first, then the bot's own) and `servers` (config order).
///
/// Precedence is built-in, then the bot's own (Rust) tools, then MCP servers in config order.
/// A later tool whose name is taken is skipped, never shadows the winner. Reserved names
/// (session-control built-ins such as `end_session`) can never be claimed by a server, even
/// when that built-in is turned off. Each server gives at most `per_server` tools (the first
/// in its listing order); all servers together at most `total`, consumed in config order.
pub fn merge(
    local: &[ToolSpec],
    reserved: &[&str],
    servers: &[ServerTools<'_>],
    limits: &McpLimits,
) -> Merged {
    let mut out = Merged::default();
    let mut owner: HashMap<String, String> = HashMap::new();
    for (i, spec) in local.iter().enumerate() {
        if let Some(taken) = owner.get(&spec.name) {
            out.skipped.push(Skip {
                tool: spec.name.clone(),
                source: spec.source.clone(),
                reason: SkipReason::TakenBy(taken.clone()),
            });
            continue;
        }
        owner.insert(spec.name.clone(), spec.source.clone());
        out.routes.insert(spec.name.clone(), Route::Local(i));
        out.specs.push(spec.clone());
    }
    let mut from_servers = 0usize;
    for (s, server) in servers.iter().enumerate() {
        for (k, tool) in server.tools.iter().enumerate() {
            let reason = if k >= limits.per_server {
                Some(SkipReason::PerServerCap(limits.per_server))
            } else if reserved.contains(&tool.name.as_str()) {
                Some(SkipReason::Reserved)
            } else if let Some(taken) = owner.get(&tool.name) {
                Some(SkipReason::TakenBy(taken.clone()))
            } else if from_servers >= limits.total {
                Some(SkipReason::TotalCap(limits.total))
            } else {
                None
            };
            if let Some(reason) = reason {
                out.skipped.push(Skip {
                    tool: tool.name.clone(),
                    source: server.server.to_string(),
                    reason,
                });
                continue;
            }
            from_servers += 1;
            owner.insert(tool.name.clone(), server.server.to_string());
            out.routes.insert(
                tool.name.clone(),
                Route::Mcp {
                    server: s,
                    original: tool.original.clone(),
                },
            );
            out.specs.push(ToolSpec {
                name: tool.name.clone(),
                description: tool.description.clone(),
                input_schema: tool.parameters.clone(),
                source: server.server.to_string(),
            });
        }
        out.skipped
            .extend(server.unusable.iter().map(|(tool, why)| Skip {
                tool: tool.clone(),
                source: server.server.to_string(),
                reason: SkipReason::UnusableSchema(why.clone()),
            }));
    }
    out
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;

//! Named `[[mcp_servers]]` (one or several) as a bridge's upstream: the tools those servers
//! give the bot, served as one MCP server.
//!
//! The bot's tool registry already holds the connections, the policy, the caps and the
//! reconnects of every configured server; a bridge naming some of them relays exactly the
//! registry's tools whose source is one of those names. Like `@bot`, the set is served by an
//! rmcp server over an in-process pipe, so the socket loop sees an ordinary MCP upstream.
//! Only tools are relayed this way (no resources or prompts). When the registry's tool list
//! moves (a server refreshed its list) and the relayed tools differ from what was offered,
//! the server says `notifications/tools/list_changed`, which the bridge passes on to the
//! endpoint.

use std::collections::BTreeSet;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use super::mcp_upstream::{McpUpstream, Opened, Opener, RelayClient, UpstreamSettings};
use crate::mcp::connect::ConnectError;
use crate::tools::Tools;

/// Buffer of the in-process pipe between the bridge and the tool set's MCP handler.
const PIPE_BYTES: usize = 256 * 1024;

/// An MCP server whose tools are those of `tools` that come from `sources`.
#[derive(Clone)]
pub struct ToolsMcp {
    tools: Arc<dyn Tools>,
    sources: Arc<BTreeSet<String>>,
}

impl ToolsMcp {
    /// The tools of `tools` whose source is in `sources`.
    pub fn new(tools: Arc<dyn Tools>, sources: BTreeSet<String>) -> Self {
        Self {
            tools,
            sources: Arc::new(sources),
        }
    }

    /// The relayed tools now, as MCP `Tool`s.
    fn listing(&self) -> Vec<Tool> {
        self.tools
            .specs()
            .iter()
            .filter(|s| self.sources.contains(&s.source))
            .map(|s| {
                let schema = match &s.input_schema {
                    Value::Object(map) => map.clone(),
                    _ => JsonObject::new(),
                };
                Tool::new(s.name.clone(), s.description.clone(), Arc::new(schema))
            })
            .collect()
    }

    /// Tells `peer` `notifications/tools/list_changed` each time the relayed tools differ
    /// from the last ones seen, until the tool set stops signalling or the peer goes.
    async fn push_changes(self, peer: Peer<RoleServer>) {
        let Some(mut changes) = self.tools.changes() else {
            return;
        };
        let mut offered = self.listing();
        while changes.changed().await.is_ok() {
            let now = self.listing();
            if now != offered {
                offered = now;
                if peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        }
    }

    fn offers(&self, name: &str) -> bool {
        self.tools
            .specs()
            .iter()
            .any(|s| s.name == name && self.sources.contains(&s.source))
    }
}

impl ServerHandler for ToolsMcp {
    fn get_info(&self) -> ServerConfig {
        let names: Vec<&str> = self.sources.iter().map(String::as_str).collect();
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            format!("turnscope:{}", names.join("+")),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.listing()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.offers(&request.name) {
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "tool `{}` is not offered by this bridge (servers: {}); call tools/list for the tools it has",
                request.name,
                self.sources.iter().cloned().collect::<Vec<_>>().join(", ")
            ))])
            .into());
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        let outcome = self.tools.call(&request.name, args).await;
        let content = vec![ContentBlock::text(outcome.text)];
        Ok(if outcome.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }
}

/// An upstream relaying the tools of `sources` from `tools`, for the bridge called `bridge`.
pub fn tools_upstream(
    tools: Arc<dyn Tools>,
    sources: BTreeSet<String>,
    bridge: &str,
    mut settings: UpstreamSettings,
) -> McpUpstream {
    settings.client_name = format!("xiaozhi:{bridge}");
    let label = format!(
        "servers: {}",
        sources.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    let handler = ToolsMcp::new(tools, sources);
    let opener: Opener = Arc::new(move |client: RelayClient| {
        let handler = handler.clone();
        Box::pin(async move {
            let (client_io, server_io) = tokio::io::duplex(PIPE_BYTES);
            tokio::spawn(async move {
                match handler.clone().serve(server_io).await {
                    Ok(running) => {
                        let pushing = tokio::spawn(handler.push_changes(running.peer().clone()));
                        let _ = running.waiting().await;
                        pushing.abort();
                    }
                    Err(e) => tracing::warn!("tool-set MCP handler did not start: {e}"),
                }
            });
            let service = client.serve(client_io).await.map_err(|e| {
                ConnectError::Other(format!(
                    "in-process MCP handshake with the tool set failed: {e}"
                ))
            })?;
            Ok(Opened { service, pid: None })
        })
    });
    McpUpstream::start(label, opener, settings)
}

//! Named `[[mcp_servers]]` (one or several) as a bridge's upstream: those servers' tools from
//! the bot's registry, merged among themselves ([`Tools::of_sources`]: a built-in takes no name
//! from them), relayed straight from [`Tools`] (the registry already holds the connections,
//! policy, caps and reconnects). Only tools are relayed (no resources
//! or prompts). When the registry's change signal moves and the relayed tools differ from
//! the last ones offered, the endpoint is told `tools/list_changed`. It never restarts.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::local::{Local, LocalTools};
use super::progress::ProgressSink;
use super::upstream::{ServerFacts, UpstreamChange};
use crate::tools::Tools;

/// The tools of a [`Tools`] that come from some sources.
pub(crate) struct SourceTools {
    tools: Arc<dyn Tools>,
    sources: Arc<BTreeSet<String>>,
    watcher: Mutex<Option<JoinHandle<()>>>,
}

/// The upstream of a bridge relaying named servers.
pub(crate) type ToolsUpstream = Local<SourceTools>;

/// The set relayed now: `sources`' tools merged among themselves when `tools` can say (a
/// built-in then takes no name from a server's tool: tour M), else `tools` itself, filtered
/// by source where it is read.
fn relayed(tools: &Arc<dyn Tools>, sources: &BTreeSet<String>) -> Arc<dyn Tools> {
    tools.of_sources(sources).unwrap_or_else(|| tools.clone())
}

/// The relayed tools of `tools` now, as MCP `Tool`s.
fn listing(tools: &Arc<dyn Tools>, sources: &BTreeSet<String>) -> Vec<Tool> {
    relayed(tools, sources)
        .specs()
        .iter()
        .filter(|s| sources.contains(&s.source))
        .map(|s| {
            let schema = match &s.input_schema {
                Value::Object(map) => map.clone(),
                _ => JsonObject::new(),
            };
            Tool::new(s.name.clone(), s.description.clone(), Arc::new(schema))
        })
        .collect()
}

/// An upstream relaying the tools of `sources` from `tools`.
pub(crate) fn tools_upstream(tools: Arc<dyn Tools>, sources: BTreeSet<String>) -> ToolsUpstream {
    // 16: a receiver only needs to learn that the list changed; a lagging one relists once.
    let (changes, _) = broadcast::channel(16);
    let sources = Arc::new(sources);
    let watcher = tools.changes().map(|mut moved| {
        let (tools, sources, changes) = (tools.clone(), sources.clone(), changes.clone());
        tokio::spawn(async move {
            let mut offered = listing(&tools, &sources);
            while moved.changed().await.is_ok() {
                let now = listing(&tools, &sources);
                if now != offered {
                    offered = now;
                    let _ = changes.send(UpstreamChange::ToolsChanged);
                }
            }
        })
    });
    let tools = SourceTools {
        tools,
        sources,
        watcher: Mutex::new(watcher),
    };
    Local::new(tools, changes)
}

impl SourceTools {
    fn offers(&self, name: &str) -> bool {
        relayed(&self.tools, &self.sources)
            .specs()
            .iter()
            .any(|s| s.name == name && self.sources.contains(&s.source))
    }

    fn names(&self) -> String {
        self.sources.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

#[async_trait]
impl LocalTools for SourceTools {
    fn label(&self) -> String {
        format!("servers: {}", self.names())
    }

    fn facts(&self) -> ServerFacts {
        let names: Vec<&str> = self.sources.iter().map(String::as_str).collect();
        ServerFacts {
            server_info: json!({
                "name": format!("turnscope:{}", names.join("+")),
                "version": env!("CARGO_PKG_VERSION"),
            }),
            capabilities: json!({"tools": {"listChanged": true}}),
            instructions: None,
        }
    }

    fn tools(&self) -> Vec<Tool> {
        listing(&self.tools, &self.sources)
    }

    async fn call(
        &self,
        name: &str,
        args: JsonObject,
        _cancel: &CancellationToken,
        _progress: Option<ProgressSink>,
    ) -> CallToolResult {
        if !self.offers(name) {
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "tool `{name}` is not offered by this bridge (servers: {}); call tools/list for the tools it has",
                self.names()
            ))]);
        }
        let outcome = relayed(&self.tools, &self.sources)
            .call(name, Value::Object(args))
            .await;
        let content = vec![ContentBlock::text(outcome.text)];
        if outcome.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
    }

    fn stop(&self) {
        let watcher = self
            .watcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(watcher) = watcher {
            watcher.abort();
        }
    }
}

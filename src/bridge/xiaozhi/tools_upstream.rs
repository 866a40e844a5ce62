//! Named `[[mcp_servers]]` (one or several) as a bridge's upstream: the bot's registry tools
//! whose source is one of those names, relayed straight from [`Tools`] (the registry already
//! holds the connections, policy, caps and reconnects). Only tools are relayed (no resources
//! or prompts). When the registry's change signal moves and the relayed tools differ from
//! the last ones offered, the endpoint is told `tools/list_changed`. It never restarts.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::bot::{call_params, not_found};
use super::progress::ProgressSink;
use super::upstream::{ServerFacts, Upstream, UpstreamChange, UpstreamError, UpstreamStatus};
use crate::tools::Tools;

/// The tools of `tools` that come from `sources`, as an upstream.
pub struct ToolsUpstream {
    tools: Arc<dyn Tools>,
    sources: Arc<BTreeSet<String>>,
    changes: broadcast::Sender<UpstreamChange>,
    watcher: std::sync::Mutex<Option<JoinHandle<()>>>,
    stopped: AtomicBool,
}

/// The relayed tools of `tools` now, as MCP `Tool`s.
fn listing(tools: &dyn Tools, sources: &BTreeSet<String>) -> Vec<Tool> {
    tools
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
pub fn tools_upstream(tools: Arc<dyn Tools>, sources: BTreeSet<String>) -> ToolsUpstream {
    // 16: a receiver only needs to learn that the list changed; a lagging one relists once.
    let (changes, _) = broadcast::channel(16);
    let sources = Arc::new(sources);
    let watcher = tools.changes().map(|mut moved| {
        let (tools, sources, changes) = (tools.clone(), sources.clone(), changes.clone());
        tokio::spawn(async move {
            let mut offered = listing(&*tools, &sources);
            while moved.changed().await.is_ok() {
                let now = listing(&*tools, &sources);
                if now != offered {
                    offered = now;
                    let _ = changes.send(UpstreamChange::ToolsChanged);
                }
            }
        })
    });
    ToolsUpstream {
        tools,
        sources,
        changes,
        watcher: std::sync::Mutex::new(watcher),
        stopped: AtomicBool::new(false),
    }
}

impl ToolsUpstream {
    fn offers(&self, name: &str) -> bool {
        self.tools
            .specs()
            .iter()
            .any(|s| s.name == name && self.sources.contains(&s.source))
    }

    fn names(&self) -> String {
        self.sources.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

#[async_trait]
impl Upstream for ToolsUpstream {
    fn label(&self) -> String {
        format!("servers: {}", self.names())
    }

    fn status(&self) -> UpstreamStatus {
        if self.stopped.load(Ordering::Acquire) {
            UpstreamStatus::Stopped
        } else {
            UpstreamStatus::Up { pid: None }
        }
    }

    fn facts(&self) -> Option<ServerFacts> {
        let names: Vec<&str> = self.sources.iter().map(String::as_str).collect();
        Some(ServerFacts {
            server_info: json!({
                "name": format!("turnscope:{}", names.join("+")),
                "version": env!("CARGO_PKG_VERSION"),
            }),
            capabilities: json!({"tools": {"listChanged": true}}),
            instructions: None,
        })
    }

    async fn ready(&self, _limit: Duration) -> bool {
        self.status().is_up()
    }

    async fn list_tools(&self) -> Result<Vec<Value>, UpstreamError> {
        Ok(listing(&*self.tools, &self.sources)
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect())
    }

    async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        cancel: &CancellationToken,
        _progress: Option<ProgressSink>,
    ) -> Result<Value, UpstreamError> {
        match method {
            "tools/call" => {
                let (name, args) = call_params(params.as_ref())?;
                let result = if self.offers(&name) {
                    let call = self.tools.call(&name, Value::Object(args));
                    let outcome = tokio::select! {
                        outcome = call => outcome,
                        () = cancel.cancelled() => return Err(UpstreamError::Cancelled),
                    };
                    let content = vec![ContentBlock::text(outcome.text)];
                    if outcome.is_error {
                        CallToolResult::error(content)
                    } else {
                        CallToolResult::success(content)
                    }
                } else {
                    CallToolResult::error(vec![ContentBlock::text(format!(
                        "tool `{name}` is not offered by this bridge (servers: {}); call tools/list for the tools it has",
                        self.names()
                    ))])
                };
                Ok(serde_json::to_value(result).unwrap_or(Value::Null))
            }
            "tools/list" => Ok(json!({"tools": self.list_tools().await?})),
            "ping" => Ok(json!({})),
            other => Err(not_found(other)),
        }
    }

    fn changes(&self) -> broadcast::Receiver<UpstreamChange> {
        self.changes.subscribe()
    }

    async fn shutdown(&self) {
        self.stopped.store(true, Ordering::Release);
        let watcher = self
            .watcher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(watcher) = watcher {
            watcher.abort();
        }
    }
}

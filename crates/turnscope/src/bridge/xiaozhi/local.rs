//! An upstream served inside this process, with no MCP session in between: a `LocalTools`
//! (the bot's `start`/`chat`, or registry tools) wrapped as an [`Upstream`]. It is always up
//! until shut down, never restarts, answers `tools/list`, `tools/call` and `ping`, and
//! refuses every other method with `-32601`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::jsonrpc;
use super::progress::ProgressSink;
use super::upstream::{ServerFacts, Upstream, UpstreamChange, UpstreamError, UpstreamStatus};

/// Tools answered in this process.
#[async_trait]
pub(crate) trait LocalTools: Send + Sync + 'static {
    /// A short description for logs and `/healthz`.
    fn label(&self) -> String;
    /// What the endpoint's `initialize` is told about the server.
    fn facts(&self) -> ServerFacts;
    /// The tools now.
    fn tools(&self) -> Vec<Tool>;
    /// Runs tool `name`; `cancel` withdraws the call, `progress` gets its reports.
    async fn call(
        &self,
        name: &str,
        args: JsonObject,
        cancel: &CancellationToken,
        progress: Option<ProgressSink>,
    ) -> CallToolResult;
    /// Stops whatever it runs in the background.
    fn stop(&self) {}
}

/// A [`LocalTools`] as an [`Upstream`].
pub(crate) struct Local<T> {
    tools: T,
    changes: broadcast::Sender<UpstreamChange>,
    stopped: AtomicBool,
}

impl<T: LocalTools> Local<T> {
    /// `tools`, telling the endpoint about list changes sent on `changes`.
    pub fn new(tools: T, changes: broadcast::Sender<UpstreamChange>) -> Self {
        Self {
            tools,
            changes,
            stopped: AtomicBool::new(false),
        }
    }
}

/// `params` of a `tools/call`: the tool name and its arguments object.
fn call_params(params: Option<&Value>) -> Result<(String, JsonObject), UpstreamError> {
    let invalid = |message: String| UpstreamError::Rpc {
        code: jsonrpc::INVALID_PARAMS,
        message,
        data: None,
    };
    let params = params.and_then(Value::as_object);
    let name = params
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("tools/call: params.name must be the tool's name".into()))?;
    let args = match params.and_then(|p| p.get("arguments")) {
        None | Some(Value::Null) => JsonObject::new(),
        Some(Value::Object(args)) => args.clone(),
        Some(other) => {
            return Err(invalid(format!(
                "tools/call: params.arguments must be an object, got {}",
                crate::json::json_kind(other)
            )));
        }
    };
    Ok((name.to_string(), args))
}

#[async_trait]
impl<T: LocalTools> Upstream for Local<T> {
    fn label(&self) -> String {
        self.tools.label()
    }

    fn status(&self) -> UpstreamStatus {
        if self.stopped.load(Ordering::Acquire) {
            UpstreamStatus::Stopped
        } else {
            UpstreamStatus::Up { pid: None }
        }
    }

    fn facts(&self) -> Option<ServerFacts> {
        Some(self.tools.facts())
    }

    async fn ready(&self, _limit: Duration) -> bool {
        self.status().is_up()
    }

    async fn list_tools(&self) -> Result<Vec<Value>, UpstreamError> {
        Ok(self
            .tools
            .tools()
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect())
    }

    async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        cancel: &CancellationToken,
        progress: Option<ProgressSink>,
    ) -> Result<Value, UpstreamError> {
        match method {
            "tools/call" => {
                let (name, args) = call_params(params.as_ref())?;
                let result = tokio::select! {
                    result = self.tools.call(&name, args, cancel, progress) => result,
                    () = cancel.cancelled() => return Err(UpstreamError::Cancelled),
                };
                Ok(serde_json::to_value(result).unwrap_or(Value::Null))
            }
            "tools/list" => Ok(json!({"tools": self.list_tools().await?})),
            "ping" => Ok(json!({})),
            other => Err(UpstreamError::Rpc {
                code: jsonrpc::METHOD_NOT_FOUND,
                message: other.to_string(),
                data: None,
            }),
        }
    }

    fn changes(&self) -> broadcast::Receiver<UpstreamChange> {
        self.changes.subscribe()
    }

    async fn shutdown(&self) {
        self.stopped.store(true, Ordering::Release);
        self.tools.stop();
    }
}

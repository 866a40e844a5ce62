//! `servers = ["@bot"]`: the bot itself as the upstream, so a Xiaozhi device can talk to it.
//! Requests go straight to the bot's MCP tools (`start`, `chat`: [`BotMcp::call`]) over the
//! [`Sessions`] table, with no MCP session in between: sessions opened this way are ordinary
//! entries (opener `xiaozhi:<bridge>`) under the same cap and idle sweep. It never restarts:
//! the bot lives as long as the process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use rmcp::ServerHandler;
use rmcp::model::JsonObject;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::jsonrpc;
use super::progress::ProgressSink;
use super::upstream::{ServerFacts, Upstream, UpstreamChange, UpstreamError, UpstreamStatus};
use crate::server::BotMcp;
use crate::sessions::Sessions;

/// The name that selects the bot in a bridge's `servers`.
pub const BOT: &str = "@bot";

/// The bot's `start`/`chat` tools as an upstream.
pub struct BotUpstream {
    bot: BotMcp,
    client: String,
    changes: broadcast::Sender<UpstreamChange>,
    stopped: AtomicBool,
}

/// An upstream serving the bot's `start`/`chat` tools from `sessions`, for the bridge
/// called `bridge`.
pub fn bot_upstream(sessions: Sessions, bridge: &str) -> BotUpstream {
    BotUpstream {
        bot: BotMcp::new(sessions),
        client: format!("xiaozhi:{bridge}"),
        // Never sent on: the bot's tools do not change (the socket needs a receiver).
        changes: broadcast::channel(1).0,
        stopped: AtomicBool::new(false),
    }
}

/// One report per reply piece, as `notifications/progress` params for the socket.
struct Progress(ProgressSink);

#[async_trait]
impl crate::sessions::ProgressSink for Progress {
    async fn notify(&mut self, progress: u64, message: String) -> bool {
        // A full queue drops the report (progress is advisory); a closed one ends them.
        let report = json!({"progress": progress as f64, "message": message});
        !matches!(
            self.0.try_send(report),
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_))
        )
    }
}

/// A JSON-RPC error naming what was wrong with the request.
fn invalid(message: String) -> UpstreamError {
    UpstreamError::Rpc {
        code: jsonrpc::INVALID_PARAMS,
        message,
        data: None,
    }
}

/// `params` of a `tools/call`: the tool name and its arguments object.
pub(crate) fn call_params(params: Option<&Value>) -> Result<(String, JsonObject), UpstreamError> {
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
                crate::tools::json_kind(other)
            )));
        }
    };
    Ok((name.to_string(), args))
}

/// The answer to a method the upstream does not serve (only tools here).
pub(crate) fn not_found(method: &str) -> UpstreamError {
    UpstreamError::Rpc {
        code: jsonrpc::METHOD_NOT_FOUND,
        message: method.to_string(),
        data: None,
    }
}

#[async_trait]
impl Upstream for BotUpstream {
    fn label(&self) -> String {
        "bot: start/chat".into()
    }

    fn status(&self) -> UpstreamStatus {
        if self.stopped.load(Ordering::Acquire) {
            UpstreamStatus::Stopped
        } else {
            UpstreamStatus::Up { pid: None }
        }
    }

    fn facts(&self) -> Option<ServerFacts> {
        let info = self.bot.get_info();
        Some(ServerFacts {
            server_info: serde_json::to_value(&info.server_info).unwrap_or(Value::Null),
            capabilities: serde_json::to_value(&info.capabilities).unwrap_or(Value::Null),
            instructions: info.instructions,
        })
    }

    async fn ready(&self, _limit: Duration) -> bool {
        self.status().is_up()
    }

    async fn list_tools(&self) -> Result<Vec<Value>, UpstreamError> {
        Ok(self
            .bot
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
                let mut sink = progress.map(Progress);
                let progress = sink
                    .as_mut()
                    .map(|s| s as &mut dyn crate::sessions::ProgressSink);
                let call = self
                    .bot
                    .call(&name, &args, self.client.clone(), cancel, progress);
                let result = tokio::select! {
                    result = call => result,
                    () = cancel.cancelled() => return Err(UpstreamError::Cancelled),
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
    }
}

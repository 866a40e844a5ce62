//! `servers = ["@bot"]`: the bot itself as the upstream, so a Xiaozhi device can talk to it.
//! Calls go straight to the bot's MCP tools (`start`, `chat`: `BotMcp::call`) over the
//! [`Sessions`] table, with no MCP session in between: sessions opened this way are ordinary
//! entries (opener `xiaozhi:<bridge>`) under the same cap and idle sweep.

use async_trait::async_trait;
use rmcp::ServerHandler;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::local::{Local, LocalTools};
use super::progress::ProgressSink;
use super::upstream::ServerFacts;
use crate::server::BotMcp;
use crate::sessions::Sessions;

pub use crate::config::xiaozhi::BOT;

/// The bot's `start`/`chat` tools, for one bridge.
pub(crate) struct BotTools {
    bot: BotMcp,
    client: String,
}

/// The upstream of a bridge relaying the bot.
pub(crate) type BotUpstream = Local<BotTools>;

/// An upstream serving the bot's `start`/`chat` tools from `sessions`, for the bridge
/// called `bridge`.
pub(crate) fn bot_upstream(sessions: Sessions, bridge: &str) -> BotUpstream {
    let tools = BotTools {
        bot: BotMcp::new(sessions),
        client: format!("xiaozhi:{bridge}"),
    };
    // Never sent on: the bot's tools do not change (the socket needs a receiver).
    Local::new(tools, broadcast::channel(1).0)
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

#[async_trait]
impl LocalTools for BotTools {
    fn label(&self) -> String {
        "bot: start/chat".into()
    }

    fn facts(&self) -> ServerFacts {
        let info = self.bot.get_info();
        ServerFacts {
            server_info: serde_json::to_value(&info.server_info).unwrap_or(Value::Null),
            capabilities: serde_json::to_value(&info.capabilities).unwrap_or(Value::Null),
            instructions: info.instructions,
        }
    }

    fn tools(&self) -> Vec<Tool> {
        self.bot.tools().to_vec()
    }

    async fn call(
        &self,
        name: &str,
        args: JsonObject,
        cancel: &CancellationToken,
        progress: Option<ProgressSink>,
    ) -> CallToolResult {
        let mut sink = progress.map(Progress);
        let progress = sink
            .as_mut()
            .map(|s| s as &mut dyn crate::sessions::ProgressSink);
        self.bot
            .call(
                name,
                &args,
                self.client.clone(),
                None,
                crate::sessions::CallerWatch::cancel_only(cancel),
                progress,
                None,
                false,
            )
            .await
    }
}

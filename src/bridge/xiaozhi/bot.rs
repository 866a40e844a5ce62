//! `servers = ["@bot"]`: the bot itself as the upstream, so a Xiaozhi device can talk to it.
//!
//! The bot's MCP face ([`BotMcp`], tools `start` and `chat`) is served over an in-process
//! duplex pipe to an rmcp client, so the endpoint sees exactly what an HTTP MCP client sees,
//! and sessions opened this way are ordinary entries of the [`Sessions`] table (opener
//! `xiaozhi:<bridge>`), subject to the same cap and idle sweep.

use std::sync::Arc;

use rmcp::ServiceExt;

use super::mcp_upstream::{McpUpstream, Opened, Opener, RelayClient, UpstreamSettings};
use crate::mcp::connect::ConnectError;
use crate::server::BotMcp;
use crate::sessions::Sessions;

/// The name that selects the bot in a bridge's `servers`.
pub const BOT: &str = "@bot";

/// Buffer of the in-process pipe between the bridge and the bot's MCP handler.
const PIPE_BYTES: usize = 256 * 1024;

/// An upstream serving the bot's `start`/`chat` tools from `sessions`, for the bridge
/// called `bridge`.
pub fn bot_upstream(
    sessions: Sessions,
    bridge: &str,
    mut settings: UpstreamSettings,
) -> McpUpstream {
    settings.client_name = format!("xiaozhi:{bridge}");
    let opener: Opener = Arc::new(move |handler: RelayClient| {
        let sessions = sessions.clone();
        Box::pin(async move {
            let (client_io, server_io) = tokio::io::duplex(PIPE_BYTES);
            tokio::spawn(async move {
                match BotMcp::new(sessions).serve(server_io).await {
                    Ok(running) => {
                        let _ = running.waiting().await;
                    }
                    Err(e) => tracing::warn!("bot MCP handler did not start: {e}"),
                }
            });
            let service = handler.serve(client_io).await.map_err(|e| {
                ConnectError::Other(format!("in-process MCP handshake with the bot failed: {e}"))
            })?;
            Ok(Opened { service, pid: None })
        })
    });
    McpUpstream::start("bot: start/chat".into(), opener, settings)
}

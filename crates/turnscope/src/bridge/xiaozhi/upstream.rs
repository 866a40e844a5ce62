//! The seam between a bridge and what it relays to: the [`Upstream`] trait. An *upstream*
//! lists tools and answers requests; the bridge answers the handshake and pings itself. Three
//! kinds: one MCP server ([`McpUpstream`](super::mcp_upstream::McpUpstream), restarted when it
//! dies), the bot (`BotUpstream`, `@bot`) and named
//! `[[mcp_servers]]` (`ToolsUpstream`).

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::progress::ProgressSink;

/// Where an upstream stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum UpstreamStatus {
    /// Its first session is being opened.
    Starting,
    /// A session is open.
    Up {
        /// The child's process id, for stdio servers.
        pid: Option<u32>,
    },
    /// The last session died or could not open; another attempt is scheduled.
    Restarting {
        /// Why (secrets redacted).
        error: String,
    },
    /// Shut down for good.
    Stopped,
}

impl UpstreamStatus {
    /// Whether calls can be made now.
    pub(crate) fn is_up(&self) -> bool {
        matches!(self, Self::Up { .. })
    }

    /// A short label: `starting`, `up`, `restarting` or `stopped`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Up { .. } => "up",
            Self::Restarting { .. } => "restarting",
            Self::Stopped => "stopped",
        }
    }
}

/// What the upstream said about itself in its handshake, as JSON for the endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerFacts {
    /// `serverInfo` (`name`, `version`, …).
    pub server_info: Value,
    /// `capabilities`.
    pub capabilities: Value,
    /// `instructions`, when given.
    pub(crate) instructions: Option<String>,
}

/// Something the endpoint should hear about without asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamChange {
    /// The tool list changed (the server said so, or a new session started).
    ToolsChanged,
}

/// Why a request to the upstream produced no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UpstreamError {
    /// Occurs when the server answers with a JSON-RPC error; relayed to the endpoint as is.
    #[error("MCP error {code}: {message}")]
    Rpc {
        /// Error code.
        code: i64,
        /// Error message.
        message: String,
        /// Error data.
        data: Option<Value>,
    },
    /// Occurs when the server dies (or its connection breaks) while the request is in flight.
    #[error("{0}")]
    Died(String),
    /// Occurs when the server is not running now: starting, restarting, or unable to start.
    #[error("{0}")]
    Unavailable(String),
    /// Occurs when the endpoint or shutdown cancels the request.
    #[error("cancelled")]
    Cancelled,
}

/// What a bridge relays to.
#[async_trait]
pub trait Upstream: Send + Sync + 'static {
    /// A short description for logs and `/healthz`, e.g. `stdio: npx server-files` (no secrets).
    fn label(&self) -> String;

    /// Where it stands now.
    fn status(&self) -> UpstreamStatus;

    /// The facts of the current (or last) session, once one has opened.
    fn facts(&self) -> Option<ServerFacts>;

    /// Waits until the first start attempt has finished (up or failed), for at most `limit`.
    /// Returns whether it is up.
    async fn ready(&self, limit: Duration) -> bool;

    /// Every tool (all pages), as MCP `Tool` JSON objects. While the server restarts this is
    /// the last list it gave.
    ///
    /// # Errors
    ///
    /// The server failed, or is down with no list known yet.
    async fn list_tools(&self) -> Result<Vec<Value>, UpstreamError>;

    /// Sends one request (`tools/call`, `resources/list`, …) with `params` handed on
    /// untouched, and returns the result. Cancelling `cancel` withdraws the request (the
    /// server is told with `notifications/cancelled`). With a `progress` sink, the server's
    /// `notifications/progress` for this request go there until it ends.
    ///
    /// # Errors
    ///
    /// See [`UpstreamError`]; a server that dies mid-request fails it at once with
    /// [`UpstreamError::Died`].
    async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        cancel: &CancellationToken,
        progress: Option<ProgressSink>,
    ) -> Result<Value, UpstreamError>;

    /// Changes the endpoint should be told about.
    fn changes(&self) -> broadcast::Receiver<UpstreamChange>;

    /// Stops for good: closes the session and ends a child process (killed if it has not
    /// exited within the grace the implementation documents).
    async fn shutdown(&self);
}

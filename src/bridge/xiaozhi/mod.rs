//! MCP ↔ Xiaozhi WebSocket bridge.
//!
//! A Xiaozhi endpoint (`wss://…/mcp/?token=…`) is an MCP *client* reached by dialling out:
//! the bridge opens the socket and then acts as an MCP server over it, one JSON-RPC message
//! per text frame, relaying to one [`Upstream`] — an MCP server (stdio, streamable HTTP or
//! legacy SSE) or the bot itself (`@bot`). Every frame is parsed; the handshake, pings and
//! filtered calls are answered here, so the endpoint never waits on a restarting server.
//!
//! Modules, one job each:
//! - [`bridge`]: one bridge's dial/serve/back-off loop; [`set`]: all bridges of a process
//!   and the [`UpstreamCatalog`] seam;
//! - [`socket`]: one open socket (dispatch, local answers, in-flight requests);
//! - [`jsonrpc`]: frame parsing with byte-exact ids; [`listing`]: `tools/list` pages with
//!   inlined schemas; [`filter`]: allow/deny;
//! - [`endpoint`]: dialling and close codes (reconnects: [`crate::mcp::backoff`] on a
//!   [`clock`]); [`redact`]: token masking for logs and events;
//! - [`upstream`]: the trait; [`mcp_upstream`]: one MCP server (the view over
//!   [`crate::mcp`]); [`local`]: in-process upstreams, [`bot`] (`@bot`) and
//!   [`tools_upstream`] (named servers);
//! - [`config`]: `[[bridges.xiaozhi]]`, `mcp_config.json`, endpoint resolution;
//!   [`state`]: counters and the published [`BridgeEvent`](crate::observe::BridgeEvent);
//!   [`command`]: what `turnscope bridge xiaozhi` runs.

pub mod bot;
pub mod bridge;
pub mod command;
pub mod config;
pub mod endpoint;
pub mod filter;
pub mod jsonrpc;
pub mod listing;
pub mod local;
pub mod mcp_upstream;
pub mod progress;
pub mod set;
pub mod socket;
pub mod state;
pub mod tools_upstream;
pub mod upstream;

pub use crate::mcp::clock;
pub use crate::mcp::spec::ServerSpec;
pub use crate::observe::redact;
pub use bridge::{BridgeSettings, RunningBridge, XiaozhiBridge};
pub use config::XiaozhiEntry;
pub use filter::{ToolFilter, ToolRules};
pub use set::{BridgeStatuses, Catalog, UpstreamCatalog, XiaozhiBridges};
pub use upstream::{Upstream, UpstreamStatus};

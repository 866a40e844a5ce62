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
//!   inlined schemas;
//! - [`endpoint`]: dialling and close codes; [`backoff`]: the reconnect policy;
//!   [`clock`]: real and manual time; [`redact`]: token masking for logs and events;
//! - [`upstream`]: the trait; [`mcp_upstream`], [`connect`] and [`spec`]: one MCP server,
//!   restarted when it dies; [`bot`]: the bot as an upstream;
//! - [`placement`]: each bridge's endpoint, from its entry or the environment;
//!   [`state`]: counters and the published [`BridgeEvent`](crate::observe::BridgeEvent);
//!   [`command`]: what `turnscope bridge xiaozhi` runs.

pub mod backoff;
pub mod bot;
pub mod bridge;
pub mod clock;
pub mod command;
pub mod connect;
pub mod endpoint;
pub mod jsonrpc;
pub mod listing;
pub mod mcp_upstream;
pub mod placement;
pub mod progress;
pub mod redact;
pub mod set;
pub mod socket;
pub mod spec;
pub mod state;
pub mod tools_upstream;
pub mod upstream;

pub use bridge::{BridgeSettings, RunningBridge, XiaozhiBridge};
pub use set::{BridgeStatuses, Catalog, UpstreamCatalog, XiaozhiBridges};
pub use spec::ServerSpec;
pub use upstream::{Upstream, UpstreamStatus};

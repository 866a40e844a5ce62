//! MCP ↔ Xiaozhi WebSocket bridge: the bridge dials a Xiaozhi endpoint (an MCP client) and
//! serves it MCP over the socket, one JSON-RPC message per text frame, relaying to one
//! [`Upstream`]: an MCP server through [`crate::mcp`], the bot (`@bot`) or a named
//! `[[mcp_servers]]` entry in process ([`local`]). Handshake, pings and filtered calls are
//! answered here, so the endpoint never waits on a restarting server.

pub mod bot;
pub mod bridge;
pub mod command;
pub mod endpoint;
pub mod jsonrpc;
pub mod listing;
pub mod local;
pub mod mcp_upstream;
pub(crate) mod placement;
pub mod progress;
pub mod set;
pub mod socket;
pub mod state;
pub(crate) mod tools_upstream;
pub mod upstream;

pub use crate::mcp::clock;
pub use crate::mcp::spec::ServerSpec;
pub use crate::observe::redact;
pub use bridge::{BridgeSettings, RunningBridge, XiaozhiBridge};
pub use set::{BridgeStatuses, Catalog, CatalogError, UpstreamCatalog, XiaozhiBridges};
pub use upstream::{Upstream, UpstreamStatus};

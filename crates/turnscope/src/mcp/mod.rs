//! The one MCP client stack: how to reach a server ([`spec`]), opening a session
//! ([`connect`], with the legacy [`sse_client`] and a stdio server's bounded `stdio_child`), and keeping it open (`supervisor` with the
//! one `backoff` policy on a [`clock`]). It knows no tools, bots or bridges: the *views*
//! over it (`tools::McpSource` for the model, the Xiaozhi MCP upstream for relaying) decide
//! what callers see.

pub(crate) mod backoff;
pub mod clock;
pub mod connect;
pub mod spec;
pub mod sse_client;
pub(crate) mod stdio_child;
pub(crate) mod supervisor;

pub use spec::ServerSpec;

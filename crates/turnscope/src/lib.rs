//! turnscope: run conversational bots, serve them over MCP, bridge tools, and watch it live.
//! The binary (`turnscope`) and the console (crate `turnscope-console`) are front ends built on
//! this crate; nothing here depends on them. ARCHITECTURE.md maps the modules and the data flow.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod app;
pub mod attach;
pub mod bot;
pub mod bridge;
pub mod config;
pub mod conversation_test;
pub mod json;
pub mod mcp;
pub mod model;
pub mod net;
pub mod observe;
pub mod pipeline;
pub mod private_files;
pub mod server;
pub mod sessions;
pub mod store;
pub mod tools;

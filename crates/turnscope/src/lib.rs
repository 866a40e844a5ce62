//! turnscope: run conversational bots, serve them over MCP, bridge tools, and watch it live.
//!
//! The library API is what the binary is built from:
//! - [`pipeline`]: frames, the [`Processor`](pipeline::Processor) trait and the
//!   [`Pipeline`](pipeline::Pipeline) runner;
//! - [`bot`]: the standard bot pipeline around a model and tools, and sessions on it;
//! - [`model`]: the OpenAI-compatible streaming client and the embedded scripted model;
//! - [`mcp`]: the MCP client stack (connect, supervise, legacy SSE) under tools and bridges;
//! - [`tools`]: the [`Tools`](tools::Tools) trait, Rust function tools and built-ins;
//! - [`sessions`]: handles, the per-handle chat semantics, the idle sweep and the cap;
//! - [`server`]: the HTTP server with MCP `start`/`chat` and the Host/Origin guard;
//! - [`app`]: the [`App`](app::App) that owns all of the above for the front ends;
//! - [`observe`]: the event bus, statistics and the JSONL recorder.
//!
//! The console (crate `turnscope-console`) and the command line (the `turnscope` binary) are
//! front ends built on this crate; nothing here depends on them.

#![forbid(unsafe_code)]

pub mod app;
pub mod bot;
pub mod bridge;
pub mod config;
pub mod json;
pub mod mcp;
pub mod model;
pub mod observe;
pub mod pipeline;
pub mod server;
pub mod sessions;
pub mod tools;

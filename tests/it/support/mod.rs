//! Helpers shared by the integration tests.

pub mod app;
pub mod binary;
pub mod bot_client;
pub mod curl;
pub mod endpoint;
pub mod fixture;
pub mod fixture_child;
pub mod headless_bin;
pub mod llama_like;
pub mod mcp;
pub mod openai;
pub mod process;
pub mod raw_mcp;
pub mod scratch;
pub mod servers;
pub mod upstream;

//! Bridges: MCP tools as OpenAI function calling ([`openai`], built on the shape conversion
//! in [`crate::tools::openai_shape`]) and MCP ↔ Xiaozhi WebSocket endpoints ([`xiaozhi`]).

pub mod openai;
pub mod xiaozhi;

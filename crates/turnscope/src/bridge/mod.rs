//! Bridges: MCP tools as OpenAI function calling ([`openai`], built on the schema conversion
//! in [`schema`] and the name mapping in [`names`]) and MCP ↔ Xiaozhi WebSocket endpoints
//! ([`xiaozhi`]).

pub mod names;
pub mod openai;
pub mod schema;
pub mod xiaozhi;

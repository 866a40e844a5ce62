//! Bridges: MCP tools as OpenAI function calling (schema conversion and name mapping here;
//! HTTP endpoints to come) and MCP ↔ Xiaozhi WebSocket endpoints.

pub mod names;
pub mod schema;
pub mod xiaozhi;

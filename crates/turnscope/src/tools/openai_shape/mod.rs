//! The OpenAI shape of MCP tools: [`schema`] turns an MCP `inputSchema` into self-contained
//! OpenAI function `parameters`, [`names`] gives tools OpenAI-valid names and maps them back,
//! [`strict`] makes the strict-mode version where one exists. Pure conversions (no I/O); the
//! model path, both bridges and the console use them.

pub mod names;
pub mod schema;
pub mod strict;

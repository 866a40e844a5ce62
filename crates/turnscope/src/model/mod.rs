//! Models: the OpenAI-compatible streaming client every bot uses, and the embedded scripted
//! model that speaks the same wire format from a loopback server.

mod assemble;
pub mod client;
mod completion;
mod connection;
pub mod probe;
pub mod resend;
pub mod scripted;
mod scripted_calls;
pub mod server;

pub use client::{Completion, ModelClient, ModelConfig, ModelError};
pub use scripted::ScriptSettings;
pub use server::EmbeddedModel;

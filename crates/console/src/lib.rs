//! The console: a terminal UI over the live server ([`run::live`]) or over a `--events` file
//! ([`run::replay`]). It reads the server only through the bus and the
//! [`Sessions`](turnscope::sessions::Sessions) table and chats through `Sessions::chat_on` like
//! any caller; the server never depends on it. It is built in layers, each using only those below
//! it: [`state`] ← [`view`] ← [`draw`] ← [`input`] ← [`run`] (with [`text`], [`theme`] and
//! [`error`] under all); ARCHITECTURE.md's Console section maps the modules.

#![warn(missing_docs)]

pub mod draw;
pub mod error;
pub mod input;
pub mod run;
pub mod state;
pub mod text;
pub mod theme;
pub mod view;

#[cfg(test)]
mod tests;

pub use error::ConsoleError;
pub use run::live::{listen_early, run, run_with};
pub use theme::{Theme, no_color};

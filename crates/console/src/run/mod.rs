//! The loop layer: the terminal, the live feed from the bus and the session table, the
//! event loop's pacing, and replay. The only layer that touches the terminal, the server or the
//! clock.

pub mod attach;
pub mod claims;
pub mod clipboard;
pub mod feed;
pub mod kept_handles;
pub mod live;
pub mod output;
pub mod replay;
pub mod signals;
pub mod stored;
pub mod terminal;
pub mod workbench;

//! The console: a terminal UI over the live server ([`live`]) or over a `--events` file
//! ([`replay`]). It reads the server only through the bus and the
//! [`Sessions`](turnscope::sessions::Sessions) table and chats through `Sessions::chat_on` like
//! any caller; the server never depends on it. ARCHITECTURE.md's Console section maps the modules.

#![warn(missing_docs)]

pub mod app;
pub mod clipboard;
pub mod draw;
pub mod error;
pub mod export;
pub mod feed;
pub mod filter;
pub mod frames_view;
pub mod help;
pub mod input_line;
pub mod journal;
pub mod keys;
pub mod layout;
pub mod line_edit;
pub mod live;
pub mod mouse;
pub mod overlays;
pub mod panes;
pub mod pipeline;
pub mod replay;
pub mod session_list;
pub mod state;
pub mod terminal;
pub mod text;
pub mod theme;
pub mod timeline;
pub mod views;

#[cfg(test)]
mod app_tests;
#[cfg(test)]
mod sessions_tests;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod state_tests;
#[cfg(test)]
mod test_fixture;

pub use error::ConsoleError;
pub use live::{listen_early, run, run_with};
pub use theme::Theme;

/// Whether `NO_COLOR` asks for no colour (set and not empty).
pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Waits for SIGTERM or SIGHUP (Ctrl-C reaches the console as a key, not a signal).
pub async fn wait_for_termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) {
            (Ok(mut term), Ok(mut hup)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
            }
            _ => std::future::pending::<()>().await,
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

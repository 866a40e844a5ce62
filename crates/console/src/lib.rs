//! The console: a terminal UI over the live server (or over an events file).
//!
//! The pieces, each in its own file:
//! - [`state`]: [`ConsoleState`](state::ConsoleState), what the server did, folded from bus
//!   events and live snapshots; bounded, pure data;
//! - [`feed`]: the console's own lossy bus subscription and the session-table snapshots;
//! - [`app`]: [`Console`](app::Console), focus, selection, scrolls and the input line, and
//!   how keys and the mouse change them into [`Action`](app::Action)s; [`input_line`] and
//!   [`overlays`] hold the input line's keys and those of the turn view, searches and questions;
//! - [`journal`] (the Log pane's failures and counts), [`timeline`] (each turn's waterfall)
//!   and [`pipeline`] (each session's links: frames/s, queue depth), folded by the state;
//!   [`session_list`] (the Sessions pane's sort and filter); [`export`] (a session's report)
//!   and [`clipboard`] (OSC 52);
//! - [`line_edit`]: readline keys wherever text is edited;
//! - [`live`]: the event loop (input, chat results, events, a 30 fps tick) and [`run`];
//! - [`replay`]: the same console over a `--events` file, read-only;
//! - [`draw`], [`panes`], [`help`], [`layout`]: drawing; [`theme`], [`keys`], [`filter`],
//!   [`text`]: styles, bindings, the frame filter and text helpers;
//! - [`terminal`]: entering and always restoring the terminal.
//!
//! The console only reads the server through the bus and the [`Sessions`](turnscope::sessions::Sessions)
//! table and chats through `Sessions::chat_on` like any caller; the server never depends on it.

pub mod app;
pub mod clipboard;
pub mod draw;
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

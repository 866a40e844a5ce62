//! The console: a terminal UI over the live server ([`run::live`]) or over a `--events` file
//! ([`run::replay`]). It reads the server only through the bus and the
//! [`Sessions`](turnscope::sessions::Sessions) table and chats through `Sessions::chat_on` like
//! any caller; the server never depends on it. ARCHITECTURE.md's Console section maps the modules.

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

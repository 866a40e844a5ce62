//! The signals the commands without a console act on (Ctrl-C, SIGTERM, SIGHUP), and `note`,
//! the stderr line that survives a terminal that hung up.

use anyhow::Context as _;

/// Writes one line to stderr. A stderr that is gone (the terminal hung up) loses the line
/// rather than panicking, as `eprintln!` would.
pub(crate) fn note(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// What a signal asks of a headless server.
pub(crate) enum Signal {
    /// Ctrl-C or SIGTERM: drain and stop.
    Stop,
    /// SIGHUP: reload the config, unless the terminal hung up.
    Hangup,
}

/// The signals a headless server acts on: Ctrl-C, SIGTERM and SIGHUP, caught from the moment
/// this is made. Made before a ready line, so a signal that follows the line at once is a clean
/// stop, not the default action (which kills the process before it drains; a test that stopped
/// the server right after start saw that).
pub(crate) struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers.
    pub(crate) fn new() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                term: signal(SignalKind::terminate()).context("install the SIGTERM handler")?,
                interrupt: signal(SignalKind::interrupt()).context("install the SIGINT handler")?,
                hup: signal(SignalKind::hangup()).context("install the SIGHUP handler")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Waits for the next signal and says what it asks for.
    pub(crate) async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => Signal::Stop,
                _ = self.term.recv() => Signal::Stop,
                _ = self.hup.recv() => Signal::Hangup,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Stop
        }
    }
}

/// Waits for Ctrl-C, SIGTERM or SIGHUP (nothing a caller of this reloads).
pub(crate) async fn wait_for_signal() {
    match Signals::new() {
        Ok(mut signals) => {
            signals.next().await;
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

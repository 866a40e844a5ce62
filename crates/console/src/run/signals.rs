//! The signals the console acts on (Ctrl-C reaches it as a key, not a signal): SIGTERM drains
//! the server as `--headless` does (a replica behind a balancer is stopped this way), then
//! ends it, a second SIGTERM at once; SIGHUP reloads the config, unless the console's
//! terminal hung up (its window closed, the SSH connection dropped), which ends it at once: a
//! console with no terminal has no one to show anything to, and must not keep the server
//! running unseen.

use turnscope::app::hangup::Terminals;

/// What a signal asks of the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleSignal {
    /// SIGTERM: drain (turns in flight finish, nothing new starts), then quit.
    Drain,
    /// SIGHUP from a terminal that hung up: quit and end every session.
    Quit,
    /// SIGHUP with the terminal still there: read the config file again.
    Reload,
}

/// The console's signal handlers, installed once.
pub struct Signals {
    terminals: Terminals,
    #[cfg(unix)]
    handlers: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    /// Installs the handlers; call it while the terminal is there (it notes which standard
    /// streams are terminals, to tell a hang-up later).
    pub fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let handlers = match (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) {
                (Ok(term), Ok(hup)) => Some((term, hup)),
                _ => None,
            };
            Self {
                terminals: Terminals::now(),
                handlers,
            }
        }
        #[cfg(not(unix))]
        Self {
            terminals: Terminals::now(),
        }
    }

    /// Waits for the next signal and says what it asks for.
    pub async fn next(&mut self) -> ConsoleSignal {
        #[cfg(unix)]
        {
            let Some((term, hup)) = self.handlers.as_mut() else {
                return std::future::pending().await;
            };
            tokio::select! {
                _ = term.recv() => ConsoleSignal::Drain,
                _ = hup.recv() => {
                    if self.terminals.hung_up() {
                        ConsoleSignal::Quit
                    } else {
                        ConsoleSignal::Reload
                    }
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            ConsoleSignal::Quit
        }
    }
}

impl Default for Signals {
    fn default() -> Self {
        Self::new()
    }
}

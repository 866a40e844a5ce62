//! Why the console could not start or had to stop: one [`ConsoleError`] for the terminal, the
//! event loop and replay files, each message whole (what happened, what to do next), so the
//! variants carry their causes as text and not as error sources.

use std::io;

/// Why the console could not run.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// Occurs when stdin or stdout is not a terminal.
    #[error(
        "the console needs a terminal, and stdin or stdout is not one; for CI and scripts run `turnscope --headless` (a server), or read a running turnscope's event stream with `curl -N http://HOST:PORT/events` (`turnscope replay` opens what it wrote)"
    )]
    NotATerminal,
    /// Occurs when the terminal refuses raw mode.
    #[error("cannot put the terminal in raw mode: {0}; try --headless")]
    RawMode(io::Error),
    /// Occurs when the alternate screen, mouse capture or bracketed paste cannot be set up.
    #[error("cannot set up the terminal: {0}; try --headless")]
    Setup(io::Error),
    /// Occurs when `turnscope attach` cannot reach what it was given.
    #[error("{0}")]
    Attach(String),
    /// Occurs when reading keys from the terminal fails.
    #[error("cannot read the terminal: {0}")]
    ReadInput(io::Error),
    /// Occurs when drawing a frame fails.
    #[error("cannot draw on the terminal: {0}")]
    Draw(String),
    /// Occurs when the console's task panicked (the terminal is restored and sessions ended).
    #[error(
        "the console stopped on a panic ({0}); the terminal was restored and every session ended"
    )]
    Panicked(String),
    /// Occurs when a replay's events file cannot be read.
    #[error(
        "cannot read events file {file}: {reason}; give the file that `turnscope --events FILE` wrote"
    )]
    ReadEvents {
        /// The file.
        file: String,
        /// Why it could not be read.
        reason: io::Error,
    },
    /// Occurs when no line of a replay's events file is an event.
    #[error(
        "{file}: no event could be read ({bad} bad line{}; first: {first}); give a file written by `turnscope --events FILE`",
        if *bad == 1 { "" } else { "s" }
    )]
    NoEvents {
        /// The file.
        file: String,
        /// Lines that could not be read.
        bad: usize,
        /// The first of them, with its reason.
        first: String,
    },
    /// Occurs when a replay's events file is empty.
    #[error(
        "{file}: the file holds no events; give a file written by `turnscope --events FILE` after a run"
    )]
    Empty {
        /// The file.
        file: String,
    },
}

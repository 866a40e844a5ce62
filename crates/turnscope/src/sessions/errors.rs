//! Errors of `start` and `chat`, each worded the same way: the field first, then what was
//! expected or why, then the next call to make.

use std::fmt;

/// Why a `start` or `chat` call could not be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatError {
    /// The handle has the wrong length.
    HandleLength {
        /// Characters received.
        received: usize,
    },
    /// No live session has this handle (never existed, idle too long, or its bot stopped).
    NoSession {
        /// The idle lifetime in force.
        handle_seconds: u64,
    },
    /// The session cap is reached.
    Cap {
        /// The cap.
        cap: usize,
        /// The idle lifetime in force.
        handle_seconds: u64,
    },
    /// The caller cancelled; the turn runs on.
    Cancelled,
}

impl fmt::Display for ChatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChatError::HandleLength { received } => write!(
                f,
                "handle: no live session. Expected the handle one start call gives, 36 characters; received {received}."
            ),
            ChatError::NoSession { handle_seconds } => write!(
                f,
                "handle: no live session. A session ends after {handle_seconds} seconds with no chat call, \
                 or when its bot stops. Call start for a new handle."
            ),
            ChatError::Cap { cap, handle_seconds } => write!(
                f,
                "sessions: no free session. This server holds {cap} open sessions, its cap. \
                 A session with no chat call for {handle_seconds} seconds ends."
            ),
            ChatError::Cancelled => f.write_str(
                "chat: the caller cancelled. The turn runs on; call chat with an empty line to read its reply.",
            ),
        }
    }
}

impl std::error::Error for ChatError {}

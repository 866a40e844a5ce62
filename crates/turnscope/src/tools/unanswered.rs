//! Why a tool call was answered on the tool's behalf: the text the model reads was written by
//! turnscope, not the tool (a time limit passed, the answer was over the response cap, the
//! server could not be reached or refused the request). Kept beside the
//! outcome so a person calling by hand (the console's workbench, `turnscope tools call`) can
//! tell "the tool said isError" from "the path to it failed", in words meant for them.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The way a call went unanswered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Unanswered {
    /// No answer within the limit; the call was cancelled.
    TimedOut {
        /// The limit, ms.
        limit_ms: u64,
        /// The setting that set it (`timeout_seconds of [[mcp_servers]] fx`).
        setting: String,
    },
    /// An answer came, larger than the response cap; the model reads a preview only. Or, with
    /// `dropped`, a stdio server's message over the 16 MiB one message may have, dropped
    /// unread (no preview; the limit is fixed).
    TooLarge {
        /// The answer's text, bytes (with `dropped`, the whole message's).
        size_bytes: usize,
        /// The cap, bytes.
        limit_bytes: usize,
        /// Whether it was a stdio message over the fixed limit, dropped unread.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        dropped: bool,
    },
    /// The request never reached the tool: its server is down, not connected yet, or the
    /// connection dropped during the call.
    Unreachable {
        /// The MCP server.
        server: String,
        /// What failed, as the transport said it.
        detail: String,
    },
    /// The request was sent, and the connection ended before the answer (a stdio server's
    /// process exited, an HTTP server closed the stream): the tool may have run.
    Lost {
        /// The MCP server.
        server: String,
        /// What ended, as the transport said it.
        detail: String,
    },
    /// The server answered the request with a protocol error (not a result with `isError`).
    Refused {
        /// The MCP server.
        server: String,
        /// The JSON-RPC error's message and code.
        detail: String,
    },
}

impl Unanswered {
    /// A time limit of `limit`, set by `setting`.
    pub fn timed_out(limit: Duration, setting: impl Into<String>) -> Self {
        Unanswered::TimedOut {
            limit_ms: limit.as_millis() as u64,
            setting: setting.into(),
        }
    }

    /// What happened to a call of `tool`, as a headline: it did not answer, or (over the
    /// cap) it did, too much.
    pub fn headline(&self, tool: &str) -> String {
        match self {
            Unanswered::TooLarge {
                size_bytes,
                dropped: true,
                ..
            } => format!("{tool} answered {size_bytes} B, over a stdio message's bound"),
            Unanswered::TooLarge { size_bytes, .. } => {
                format!("{tool} answered {size_bytes} B, over the cap")
            }
            _ => format!("{tool} did not answer"),
        }
    }

    /// A short label for lists: `timed out`, `over the cap`, `too large` (over a stdio
    /// message's bound), `unreachable`, `lost mid-call`, `refused`.
    pub fn label(&self) -> &'static str {
        match self {
            Unanswered::TimedOut { .. } => "timed out",
            Unanswered::TooLarge { dropped: true, .. } => "too large",
            Unanswered::TooLarge { .. } => "over the cap",
            Unanswered::Unreachable { .. } => "unreachable",
            Unanswered::Lost { .. } => "lost mid-call",
            Unanswered::Refused { .. } => "refused",
        }
    }
}

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unanswered::TimedOut { limit_ms, setting } => write!(
                f,
                "no answer within {:.1} s ({setting}); the call was cancelled. Raise it or make \
                 the tool faster",
                *limit_ms as f64 / 1000.0
            ),
            Unanswered::TooLarge {
                size_bytes,
                limit_bytes,
                dropped: true,
            } => write!(
                f,
                "the answer was a message of {size_bytes} B, over the {limit_bytes} B a stdio \
                 MCP server may send in one message (a fixed limit); it was dropped unread. Ask \
                 the tool for less (a narrower query, one page)"
            ),
            Unanswered::TooLarge {
                size_bytes,
                limit_bytes,
                dropped: false,
            } => write!(
                f,
                "the answer was {size_bytes} B, over the response cap of {limit_bytes} B \
                 (MCP_MAX_RESPONSE_BYTES); the model reads only a preview. Ask for less, or \
                 raise the cap"
            ),
            Unanswered::Unreachable { server, detail } => write!(
                f,
                "not delivered: MCP server `{server}` could not be reached ({detail}). Check that \
                 it runs and its url in the config"
            ),
            Unanswered::Lost { server, detail } => write!(
                f,
                "MCP server `{server}` went away before answering ({detail}): the tool may have \
                 run, its result is unknown. It is being reconnected; check its side before \
                 calling again if the call changes anything"
            ),
            Unanswered::Refused { server, detail } => write!(
                f,
                "MCP server `{server}` refused the request itself ({detail}), before the tool \
                 answered"
            ),
        }
    }
}

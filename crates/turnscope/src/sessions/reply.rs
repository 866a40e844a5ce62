//! What a `chat` call answers: the turn's reply with its record ([`ChatReply`]: end reason,
//! tool calls, times, usage, the unread reply a new line replaced), or, for a client that
//! declared the tasks extension, the task the turn became ([`ChatOutcome`]).

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::task_store::TaskRecord;
use crate::bot::{Turn, TurnEnd};
use crate::observe::TokenUsage;

/// What a `chat` call that may become a task is answered with.
#[derive(Debug)]
pub enum ChatOutcome {
    /// The turn ended within the grace period (or the call asked for no task).
    Reply(ChatReply),
    /// The turn ran past the grace period: it is a task now, with this record (stored).
    Task(TaskRecord),
}

/// A `chat` call from a client that declared the tasks extension: its name, for the task.
#[derive(Debug, Clone)]
pub struct TaskAsk {
    /// The client's name.
    pub client: String,
}

/// One tool call of a turn, for callers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolCallSummary {
    /// Tool name.
    pub name: String,
    /// Arguments as the model sent them: the JSON value when they are JSON (an object, as
    /// a program reading the record expects), else the text as sent.
    pub arguments: serde_json::Value,
    /// Whether it failed.
    pub is_error: bool,
    /// Result size in bytes.
    pub result_bytes: usize,
    /// Duration in milliseconds.
    pub ms: f64,
}

/// A turn that ended with no call reading it, replaced by a newer line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UnreadTurn {
    /// Its reply (partial if it was interrupted).
    pub reply: String,
    /// Why it ended.
    pub end_reason: String,
    /// Its line, given when the reply cannot say it (a turn lost to a restart).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

/// What a `chat` call returns.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ChatReply {
    /// The whole reply (trimmed), or "" when there was no turn to read.
    pub reply: String,
    /// Turn number within the session, when there was a turn.
    pub turn: Option<u64>,
    /// `completed`, `length` (cut by the token limit), `interrupted`, `error` or
    /// `session_ended`.
    pub end_reason: Option<String>,
    /// The error message, when the turn ended in error.
    pub error: Option<String>,
    /// Rounds of function calls.
    pub rounds: u32,
    /// The tool calls made.
    pub tool_calls: Vec<ToolCallSummary>,
    /// Milliseconds from the line to the first piece.
    pub first_piece_ms: Option<f64>,
    /// Milliseconds from the line to the end.
    pub total_ms: Option<f64>,
    /// An earlier turn's reply that no call read, when this line replaced it.
    pub unread: Option<UnreadTurn>,
    /// Tokens of the turn's model requests together, when the server counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// The finish reason of the turn's last model response (`stop`, `length`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The config version the turn ran on (see `app::reload`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_version: Option<u64>,
    /// The turn's line, given when the reply cannot say it: a turn turnscope lost to a
    /// restart (`restarted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// With an empty line that found nothing to read: how many turns the conversation has
    /// had, so a client that takes up a kept handle numbers its next turn as the server will.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u64>,
    /// The caller's stream broke before this reply was ready (see [`CallerWatch`]): the turn
    /// is kept unread, so an empty line or a resumed stream still reads it.
    #[serde(skip)]
    pub kept_unread: bool,
}

/// The turn a `chat` call's reply read, which the store now holds as read: for the server to
/// hand back ([`Sessions::reply_not_delivered`](super::Sessions::reply_not_delivered)) when
/// that reply never reached its caller.
pub(crate) struct ReadMark {
    pub(super) session: std::sync::Arc<super::Session>,
    pub(super) turn: u64,
}

impl ReadMark {
    /// The mark of `reply`, read on `session`: none when it read no turn (an empty line
    /// with nothing to read) or kept its turn unread (a broken stream's).
    pub(super) fn of(session: &std::sync::Arc<super::Session>, reply: &ChatReply) -> Option<Self> {
        let turn = reply.turn.filter(|_| !reply.kept_unread)?;
        Some(Self {
            session: session.clone(),
            turn,
        })
    }
}

/// How a `chat` call learns that its caller left.
#[derive(Clone, Copy)]
pub struct CallerWatch<'a> {
    /// Withdraws the call (`notifications/cancelled`, or a closed stream where that is the
    /// cancel): the turn keeps running and its reply is kept unread.
    pub cancel: &'a CancellationToken,
    /// Cancelled when the caller's response stream broke where that is *not* a cancel (MCP
    /// before 2026-07-28: the client may resume the stream with `Last-Event-ID`). The call
    /// then lets the handle go, and goes on forwarding progress and answers on the stream
    /// for a resume; the reply stays unread until a resume or another call reads it.
    pub stream_lost: Option<&'a CancellationToken>,
}

impl<'a> CallerWatch<'a> {
    /// A caller that leaves only by cancelling (the console, a test).
    pub fn cancel_only(cancel: &'a CancellationToken) -> Self {
        Self {
            cancel,
            stream_lost: None,
        }
    }
}

/// The line of a turn lost to a restart (what the caller must send again).
pub(super) fn lost_line(r: &crate::bot::TurnRecord) -> Option<String> {
    matches!(r.end, Some(TurnEnd::Restarted)).then(|| r.line.clone())
}

impl ChatReply {
    pub(super) fn empty(unread: Option<UnreadTurn>, turns: u64) -> Self {
        Self {
            reply: String::new(),
            turn: None,
            end_reason: None,
            error: None,
            rounds: 0,
            tool_calls: Vec::new(),
            first_piece_ms: None,
            total_ms: None,
            unread,
            usage: None,
            finish_reason: None,
            config_version: None,
            line: None,
            turns: Some(turns),
            kept_unread: false,
        }
    }

    pub(super) fn of(turn: &Turn, unread: Option<UnreadTurn>) -> Self {
        let r = turn.snapshot();
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
        Self {
            reply: r.reply.trim().to_string(),
            turn: Some(r.id),
            end_reason: r.end.as_ref().map(|e| e.label().to_string()),
            error: match &r.end {
                Some(TurnEnd::Error(m)) => Some(m.clone()),
                _ => None,
            },
            rounds: r.rounds,
            tool_calls: r
                .tool_calls
                .iter()
                .map(|c| ToolCallSummary {
                    name: c.call.name.clone(),
                    arguments: serde_json::from_str(&c.call.arguments)
                        .unwrap_or_else(|_| serde_json::Value::String(c.call.arguments.clone())),
                    is_error: c.outcome.is_error,
                    result_bytes: c.outcome.text.len(),
                    ms: ms(c.duration),
                })
                .collect(),
            first_piece_ms: r.first_piece.map(ms),
            total_ms: r.total.map(ms),
            unread,
            usage: r.usage,
            finish_reason: r.finish_reason.clone(),
            config_version: r.config_version,
            line: lost_line(&r),
            turns: None,
            kept_unread: false,
        }
    }

    /// Whether the turn ended in error (the reply then holds any partial text).
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }
}

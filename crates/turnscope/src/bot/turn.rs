//! Turns: what one user line started, as it streams and once it ends.
//!
//! The output collector writes a [`Turn`]; readers (an MCP `chat` call, the console) wait on
//! its signal, which carries the piece count and whether the turn is done. The pipeline never
//! waits for a reader: the signal is a `watch`, so a slow reader simply sees several new
//! pieces at once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::observe::{TokenUsage, TurnEndEvent};
use crate::pipeline::TurnId;
use crate::tools::{ToolCall, ToolCallRecord};

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEnd {
    /// The model gave a response that started no round.
    Completed,
    /// The model's last response was cut by the token limit (`finish_reason: "length"`): the
    /// reply may stop mid-sentence.
    Length,
    /// A new line (or the person) interrupted it.
    Interrupted,
    /// The model or the round cap failed it; the message says why.
    Error(String),
    /// The session ended while it ran.
    SessionEnded,
    /// turnscope stopped (a restart, a crash) while it ran; the conversation is kept in the
    /// store, this line got no reply (or only a part of one).
    Restarted,
}

impl TurnEnd {
    /// `completed`, `length`, `interrupted`, `error`, `session_ended` or `restarted`.
    pub fn label(&self) -> &'static str {
        match self {
            TurnEnd::Completed => "completed",
            TurnEnd::Length => "length",
            TurnEnd::Interrupted => "interrupted",
            TurnEnd::Error(_) => "error",
            TurnEnd::SessionEnded => "session_ended",
            TurnEnd::Restarted => "restarted",
        }
    }
}

impl std::fmt::Display for TurnEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TurnEnd::Error(m) => write!(f, "error: {m}"),
            other => f.write_str(other.label()),
        }
    }
}

/// Everything a turn recorded.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TurnRecord {
    /// Turn id within its pipeline.
    pub id: TurnId,
    /// The user's line.
    pub line: String,
    /// The reply so far: pieces joined as they arrived.
    pub reply: String,
    /// End offset of each piece in `reply`.
    pub piece_ends: Vec<u32>,
    /// Rounds of function calls.
    pub rounds: u32,
    /// Finished calls.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Calls started and not yet finished.
    pub pending_calls: Vec<ToolCall>,
    /// When the calls still pending started (a round's calls start together): a turn ended
    /// under them records how long they ran.
    #[serde(skip)]
    pub pending_since: Option<std::time::Instant>,
    /// Time from the line to the first piece.
    pub first_piece: Option<Duration>,
    /// Time from the line to the end.
    pub total: Option<Duration>,
    /// Why it ended, once it has.
    pub end: Option<TurnEnd>,
    /// Model requests the turn made.
    #[serde(default)]
    pub model_requests: u32,
    /// The finish reason of its latest model response.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Tokens of all its model requests together, when the server counted them.
    #[serde(default)]
    pub usage: Option<TokenUsage>,
    /// Reasoning text its responses streamed, kept apart from the reply (never sent back to
    /// the model, nor to a caller as reply).
    #[serde(default)]
    pub reasoning: String,
    /// The config version the turn ran on (its settings are read once, when the line is
    /// said); none for a bot that has no config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<u64>,
    /// The id of the request whose line started it (its `X-Request-ID`, which the replicas
    /// recipe's HAProxy sets), when it had one: a request sent again with the same id and line
    /// is answered from this record instead of running the line twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// Whether its line was typed at the console of the process that ran it, not said by the
    /// MCP client that opened the session: kept with the turn, so a console started later
    /// still tells the person's lines from the client's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub typed_at_console: bool,
}

impl TurnRecord {
    /// Whether request `request` started this turn with `line`.
    fn said_by(&self, request: &str, line: &str) -> bool {
        self.line == line && self.request.as_deref() == Some(request)
    }

    /// The `turn_ended` event of this record in session `session` (live, in a viewer's
    /// catch-up, in an export: one shape everywhere).
    pub fn end_event(&self, session: u64) -> TurnEndEvent {
        TurnEndEvent {
            session,
            turn: self.id,
            reason: self
                .end
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            reply_bytes: self.reply.len(),
            rounds: self.rounds,
            tool_calls: self.tool_calls.len() as u32,
            first_piece_us: self.first_piece.map(|d| d.as_micros() as u64),
            total_us: self.total.map_or(0, |d| d.as_micros() as u64),
            config_version: self.config_version,
            retold: false,
            clock: None,
            usage: None,
        }
    }

    /// Piece `i` of the reply.
    pub fn piece(&self, i: usize) -> &str {
        let start = if i == 0 {
            0
        } else {
            self.piece_ends[i - 1] as usize
        };
        &self.reply[start..self.piece_ends[i] as usize]
    }

    /// Where the first `pieces` pieces end in `reply` (0 for none).
    pub fn end_of(&self, pieces: usize) -> usize {
        match pieces {
            0 => 0,
            n => self.piece_ends[n - 1] as usize,
        }
    }
}

/// What readers wait on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnSignal {
    /// Pieces so far.
    pub pieces: usize,
    /// Whether the turn has ended.
    pub done: bool,
}

/// One live turn.
pub struct Turn {
    /// Turn id within its pipeline.
    pub id: TurnId,
    started: Instant,
    record: Mutex<TurnRecord>,
    signal: watch::Sender<TurnSignal>,
}

impl Turn {
    /// A turn for `line`, started now.
    pub fn new(id: TurnId, line: &str) -> Arc<Self> {
        Self::on_version(id, line, None)
    }

    /// A turn for `line`, started now on config version `config_version`.
    pub fn on_version(id: TurnId, line: &str, config_version: Option<u64>) -> Arc<Self> {
        Arc::new(Self {
            id,
            started: Instant::now(),
            record: Mutex::new(TurnRecord {
                id,
                line: line.to_string(),
                config_version,
                ..TurnRecord::default()
            }),
            signal: watch::Sender::new(TurnSignal::default()),
        })
    }

    /// A turn that ended before this process started, from its stored record (a reopened
    /// session's transcript and unread turn).
    pub fn restored(record: TurnRecord) -> Arc<Self> {
        let signal = TurnSignal {
            pieces: record.piece_ends.len(),
            done: true,
        };
        Arc::new(Self {
            id: record.id,
            started: Instant::now(),
            record: Mutex::new(record),
            signal: watch::Sender::new(signal),
        })
    }

    /// When the turn started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Whether it has ended.
    pub fn is_done(&self) -> bool {
        self.signal.borrow().done
    }

    /// Notes that its line was typed at this process's console (see
    /// [`TurnRecord::typed_at_console`]).
    pub fn mark_typed_at_console(&self) {
        self.lock().typed_at_console = true;
    }

    /// Notes the id of the request whose line started the turn (see [`TurnRecord::request`]).
    pub fn set_request(&self, request: &str) {
        self.lock().request = Some(request.to_string());
    }

    /// Whether the turn has ended, started with `line` by the request `request`: the turn a
    /// resent request already got. A turn a crash lost (`restarted`) answered nothing: the
    /// request sent again runs its line (another call may have been told of the loss first).
    pub fn answers(&self, request: &str, line: &str) -> bool {
        self.is_done()
            && self.with_record(|r| r.end != Some(TurnEnd::Restarted) && r.said_by(request, line))
    }

    /// Whether this is a turn a restart lost (`restarted`) that request `request` started
    /// with `line`: the same request sent again is its answer.
    pub fn was_lost_by(&self, request: &str, line: &str) -> bool {
        self.with_record(|r| r.end == Some(TurnEnd::Restarted) && r.said_by(request, line))
    }

    /// A copy of the record.
    pub fn snapshot(&self) -> TurnRecord {
        self.lock().clone()
    }

    /// Runs `f` on the record under its lock (keep it short).
    pub fn with_record<R>(&self, f: impl FnOnce(&TurnRecord) -> R) -> R {
        f(&self.lock())
    }

    /// A receiver of the turn's signal.
    pub fn subscribe(&self) -> watch::Receiver<TurnSignal> {
        self.signal.subscribe()
    }

    /// Waits until the turn has ended.
    pub async fn done(&self) {
        let mut rx = self.subscribe();
        let _ = rx.wait_for(|s| s.done).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TurnRecord> {
        self.record.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends a piece (no-op once ended). Returns false when the turn had ended.
    pub(crate) fn add_piece(&self, piece: &str) -> bool {
        let count = {
            let mut r = self.lock();
            if r.end.is_some() {
                return false;
            }
            if r.first_piece.is_none() {
                r.first_piece = Some(self.started.elapsed());
            }
            r.reply.push_str(piece);
            let end = r.reply.len() as u32;
            r.piece_ends.push(end);
            r.piece_ends.len()
        };
        self.signal.send_modify(|s| s.pieces = count);
        true
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut TurnRecord)) {
        let mut r = self.lock();
        if r.end.is_none() {
            f(&mut r);
        }
    }

    /// Ends the turn with `end` unless it already ended. Returns whether this call ended it.
    pub(crate) fn finish(&self, end: TurnEnd) -> bool {
        {
            let mut r = self.lock();
            if r.end.is_some() {
                return false;
            }
            r.total = Some(self.started.elapsed());
            if !matches!(end, TurnEnd::Completed | TurnEnd::Length) {
                let ran = r
                    .pending_since
                    .take()
                    .map_or(Duration::ZERO, |t| t.elapsed());
                for call in std::mem::take(&mut r.pending_calls) {
                    r.tool_calls.push(ToolCallRecord {
                        call,
                        outcome: crate::tools::ToolOutcome::error(format!("cancelled: turn {end}")),
                        duration: ran,
                    });
                }
            }
            r.end = Some(end);
        }
        self.signal.send_modify(|s| s.done = true);
        true
    }
}

//! The events every part of turnscope publishes on the [`Bus`](super::Bus).
//!
//! Events are summaries, cheap to build and to clone: names are `Cow<'static, str>` so the
//! hot paths publish static strings, and a recorded file (`--events`) reads back into the same
//! types for `turnscope replay`.

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use super::wire::{McpExchange, ToolSetEvent, WireAnswer, WireRequest};

/// A static or owned string.
pub type Name = Cow<'static, str>;

/// Microseconds since the UNIX epoch, the clock every event carries.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// One thing that happened, as the console, the recorder and the stats see it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A frame crossed a link between two processors.
    Frame(FrameEvent),
    /// A frame's crossings, all at once, as the pipeline publishes them on the bus
    /// ([`FrameJourney`]); listeners are handed them as [`Event::Frame`]s, and lines are
    /// written one per crossing, so nothing outside the bus ever holds one.
    #[serde(skip)]
    Journey(FrameJourney),
    /// A session opened or closed.
    Session(SessionEvent),
    /// A user line opened a turn.
    TurnStarted {
        /// Session number.
        session: u64,
        /// Turn id within the pipeline.
        turn: u64,
        /// The user's line.
        line: String,
        /// When, in µs since the epoch.
        at_us: u64,
    },
    /// A turn ended, with its figures.
    TurnEnded(TurnEndEvent),
    /// A tool call finished (or failed, or timed out).
    ToolCall(ToolCallEvent),
    /// One model request finished.
    ModelRequest {
        /// Session number.
        session: u64,
        /// Turn id.
        turn: u64,
        /// Time to the first streamed byte of content, when any came.
        first_piece_us: Option<u64>,
        /// Total request time.
        total_us: u64,
        /// The error, when the request failed.
        error: Option<String>,
        /// When it started, in µs since the epoch (0 in files recorded before it was kept).
        #[serde(default)]
        at_us: u64,
        /// Finish reason, usage, the server's model and response id, status, first byte
        /// (flattened into the event; absent in files recorded before they were kept).
        #[serde(flatten, default)]
        response: super::ModelResponseInfo,
        /// The request as sent (what is new since the session's previous one), unless
        /// recording is off (`[wire] max_kib = 0`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request: Option<Box<WireRequest>>,
        /// What the model answered (content, reasoning, calls), unless recording is off.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<Box<WireAnswer>>,
    },
    /// A tool set offered to the model for the first time (model requests name it by id).
    ToolSet(ToolSetEvent),
    /// One HTTP exchange on `/mcp`, with the JSON-RPC messages it carried both ways.
    Mcp(Box<McpExchange>),
    /// A progress notification was sent (or coalesced) to an MCP caller.
    Progress {
        /// Session number.
        session: u64,
        /// Pieces so far (the `progress` value sent).
        progress: u64,
        /// The message sent: the reply so far as a person reads it (its last 200 characters,
        /// `sessions::progress_text`), also when several pieces coalesced for a lagging caller.
        message: String,
        /// How many pieces this notification carried (more than 1 = coalesced).
        pieces: u32,
        /// When, in µs since the epoch.
        at_us: u64,
    },
    /// An MCP method (or other HTTP route) was served.
    Served {
        /// The surface and method, e.g. `mcp tools/call chat` or `GET /v1/tools`.
        route: Name,
        /// How long it took.
        duration_us: u64,
        /// Whether it succeeded.
        ok: bool,
        /// What the caller was told when it failed (a `start` over the session cap, a `chat`
        /// on an unknown handle, a turn that ended in error), when known.
        #[serde(default)]
        error: Option<String>,
        /// The session the call was for, when known.
        #[serde(default)]
        session: Option<u64>,
        /// When it failed, in µs since the epoch (0 when it succeeded or is unknown).
        #[serde(default)]
        at_us: u64,
        /// The call was a probe its client marked as such (`_meta["turnscope/probe"]`: an
        /// attached console asking whether a handle it kept is still known): a refusal is
        /// its expected answer, not an error. Absent (false) in older files.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        probe: bool,
    },
    /// The MCP client that held a session (opened it, or chatted on it last) let go of it:
    /// its MCP session was deleted (`DELETE /mcp`) or closed by the server after its idle
    /// timeout. The bot session stays open until its handle expires or someone closes it; no
    /// client holds it any more.
    ClientGone {
        /// Session number.
        session: u64,
        /// The client's name from `initialize`.
        client: String,
        /// What happened, in a few words.
        reason: Name,
        /// When, in µs since the epoch.
        at_us: u64,
    },
    /// An MCP client withdrew its `chat` call before the reply: `notifications/cancelled`,
    /// or under 2026-07-28 its response stream closed (Claude Code's Esc). The client's
    /// choice, not an error: the turn runs on, and an empty line reads its reply. The call's
    /// `Served` is `ok`.
    CallCancelled {
        /// Session number.
        session: u64,
        /// The client's name.
        client: String,
        /// When, in µs since the epoch.
        at_us: u64,
    },
    /// A `chat` call became an MCP task, or a task of one changed: polled, ended, collected
    /// by a poll, handed over to an empty line, cancelled, removed; see [`TaskEvent`].
    Task(TaskEvent),
    /// A bridge's state changed (connection, counters, errors); see [`BridgeEvent`].
    Bridge(BridgeEvent),
    /// A tool source (an MCP server) connected, failed, was skipped, refreshed its tools...
    ToolSource(ToolSourceEvent),
    /// The replica this process is (published as it starts serving) and when it drains.
    Replica(ReplicaEvent),
    /// The config file was read again (it changed, SIGHUP, the console's key): applied from
    /// the next turn, nothing to apply, or refused with the running config kept.
    ConfigReload(ConfigReloadEvent),
    /// The sessions an attached console (`turnscope attach`) started on its target: the
    /// person's, whose lines its transcript says as `you` (the watched server tells them as
    /// any MCP client's). Published on the attached console's own bus, whole, each time they
    /// change (one started or taken up, renumbered by the target's restart, let go), so its
    /// `--events` file replays them as the live console showed them. No server publishes it;
    /// a file recorded before it was (2026-12-07) has none, and replays those sessions as a
    /// client's.
    OwnSessions {
        /// Each session, with its handle's first 8 characters (a number alone could be
        /// another session's after the target restarted).
        sessions: Vec<OwnSession>,
        /// When, in µs since the epoch.
        at_us: u64,
    },
    /// A log line meant for the person watching.
    Log {
        /// When, in ms since the epoch.
        at_ms: u64,
        /// `info`, `warn` or `error`.
        level: Name,
        /// The message.
        message: String,
    },
}

impl Event {
    /// The (session, turn) an event belongs to, for the events that belong to one turn: its
    /// start, frames, model requests, tool calls and end (`None` for the rest, and for frames
    /// outside any turn, whose turn is 0).
    pub fn turn_of(&self) -> Option<(u64, u64)> {
        let key = match self {
            Event::Frame(f) => (f.session, f.turn),
            Event::Journey(j) => (j.session, j.turn),
            Event::TurnStarted { session, turn, .. } => (*session, *turn),
            Event::TurnEnded(t) => (t.session, t.turn),
            Event::ToolCall(c) => (c.session, c.turn),
            Event::ModelRequest { session, turn, .. } => (*session, *turn),
            _ => return None,
        };
        (key.1 != 0).then_some(key)
    }
}

/// A frame crossing the link `from → to`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FrameEvent {
    /// The frame's unique sequence id.
    pub id: u64,
    /// Session number of the pipeline.
    pub session: u64,
    /// Turn the frame belongs to (0 = none).
    pub turn: u64,
    /// `system`, `data` or `control`.
    pub kind: Name,
    /// Frame name, e.g. `TextPiece`.
    pub name: Name,
    /// Sending processor.
    pub from: Name,
    /// Receiving processor (`sink` / `source` past the ends).
    pub to: Name,
    /// `down` or `up`.
    pub direction: Name,
    /// When, in µs since the epoch.
    pub at_us: u64,
    /// A short rendering of the payload.
    pub detail: String,
    /// Frames queued at `to` when this one joined them, itself included (0 past the ends,
    /// and in files written before it was recorded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub depth: u32,
}

impl FrameEvent {
    /// A reply's text reaching the output as one data `TextPiece` frame from `from` (`model`,
    /// or `mcp result` for a reply as an MCP client saw it): what stands for the pipeline's own
    /// frames where they were not seen (a turn retold, an export, a client's view).
    pub fn reply_piece(
        id: u64,
        session: u64,
        turn: u64,
        from: &'static str,
        at_us: u64,
        detail: String,
    ) -> Self {
        Self {
            id,
            session,
            turn,
            kind: "data".into(),
            name: "TextPiece".into(),
            from: from.into(),
            to: "output".into(),
            direction: "down".into(),
            at_us,
            detail,
            depth: 0,
        }
    }
}

/// The links one frame crossed, in order, published as one event when its way ended (see
/// `pipeline::journey`): what would otherwise be a [`FrameEvent`] per crossing.
#[derive(Debug, Clone)]
pub struct FrameJourney {
    /// The frame's unique sequence id.
    pub id: u64,
    /// Session number of the pipeline.
    pub session: u64,
    /// Turn the frame belongs to (0 = none).
    pub turn: u64,
    /// `system`, `data` or `control`.
    pub kind: &'static str,
    /// Frame name, e.g. `TextPiece`.
    pub name: &'static str,
    /// `down` or `up`.
    pub direction: &'static str,
    /// A short rendering of the payload.
    pub detail: String,
    /// The crossings, first first.
    pub hops: Vec<Hop>,
}

/// One crossing of a [`FrameJourney`].
#[derive(Debug, Clone, Copy)]
pub struct Hop {
    /// Sending processor.
    pub from: &'static str,
    /// Receiving processor (`sink` / `source` past the ends).
    pub to: &'static str,
    /// When, in µs since the epoch.
    pub at_us: u64,
    /// Frames queued at `to` when this one joined them, itself included (0 past the ends).
    pub depth: u32,
}

impl FrameJourney {
    /// Crossing `i` as the event it stands for.
    pub fn crossing(&self, i: usize) -> Option<FrameEvent> {
        let hop = self.hops.get(i)?;
        Some(FrameEvent {
            id: self.id,
            session: self.session,
            turn: self.turn,
            kind: Cow::Borrowed(self.kind),
            name: Cow::Borrowed(self.name),
            from: Cow::Borrowed(hop.from),
            to: Cow::Borrowed(hop.to),
            direction: Cow::Borrowed(self.direction),
            at_us: hop.at_us,
            detail: self.detail.clone(),
            depth: hop.depth,
        })
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Who opened a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionOpener {
    /// The person at the console.
    Console,
    /// An MCP client, with the name it gave in `initialize` when known.
    Mcp(String),
    /// A library caller or a benchmark.
    Api,
}

/// One session of [`Event::OwnSessions`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnSession {
    /// Session number, as the target numbers it.
    pub session: u64,
    /// First 8 characters of its handle.
    pub handle_prefix: String,
}

/// A session opened or closed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionEvent {
    /// Session number.
    pub session: u64,
    /// First 8 characters of the handle (handles are secrets, never published whole).
    pub handle_prefix: String,
    /// Who opened it.
    pub opener: SessionOpener,
    /// `None` when opened; the reason when closed.
    pub closed: Option<String>,
    /// When, in µs since the epoch.
    pub at_us: u64,
    /// Whether it was opened again from the store (its conversation began before this
    /// process, or before its bot stopped).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restored: bool,
    /// When its conversation began, µs since the epoch, when that was before this opening
    /// (a session reopened from the store): what its age counts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub began_us: Option<u64>,
    /// The replica this one took the conversation over from (a store the replicas share):
    /// the id of the replica that wrote it last, or `tag TAG` when only the handle's tag
    /// names it. `None` when it was born here or is continued by the same replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_from: Option<String>,
    /// The greeting its bot opened it with (what `start` returned), on the opening: a viewer
    /// and a replay show it atop the transcript as the local console does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub greeting: Option<String>,
}

/// What happened to a task (a `chat` call's turn served as an MCP task).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskChange {
    /// The `chat` call answered with the task (its turn ran past the grace period).
    Created,
    /// A `tasks/get` read it (`status` is what it answered).
    Polled,
    /// Its turn ended (or a new line interrupted it): its result is ready.
    Ended,
    /// A `tasks/get` handed its client the result for the first time.
    Collected,
    /// A `chat` with an empty line read the turn instead; the task completes with a note.
    HandedOver,
    /// `tasks/cancel`: the turn was interrupted, the task is `cancelled`.
    Cancelled,
    /// Its conversation ended (or it was the oldest of too many): its id is unknown now.
    Removed,
}

/// A task's change, with where it stands.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskEvent {
    /// Session number.
    pub session: u64,
    /// The turn it reads.
    pub turn: u64,
    /// The first 8 characters of the task id (task ids are bearer secrets, never published
    /// whole).
    pub task: String,
    /// The client that called `chat`.
    pub client: String,
    /// What happened.
    pub change: TaskChange,
    /// What a `tasks/get` answers now: `working`, `completed` or `cancelled`.
    pub status: Name,
    /// How the turn ended, once it has (`completed`, `interrupted`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    /// `tasks/get` requests answered so far.
    pub polls: u32,
    /// When, in µs since the epoch.
    pub at_us: u64,
}

/// Which replica published these events, and its state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReplicaEvent {
    /// The replica id (`server.replica_id`, or `host:port`).
    pub id: String,
    /// The 4 hex digits its handles end in.
    pub tag: String,
    /// `serving`, or `draining` after SIGTERM.
    pub state: Name,
    /// When, in µs since the epoch.
    pub at_us: u64,
    /// In the first line a viewer of `/events` is sent: the numbers of the sessions open
    /// then, so a viewer that reconnects closes those it knew that ended while it was away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_sessions: Option<Vec<u64>>,
    /// In that first line too: when the server process started, in µs since the epoch. A
    /// viewer that sees it change knows the server restarted, so the session numbers it knew
    /// name other sessions now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_us: Option<u64>,
    /// In that first line too: the idle lifetime of a handle, in seconds, so a viewer can say
    /// how long a session has left since the last activity it saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle_seconds: Option<u64>,
    /// In that first line too: whether the sessions the server's own console opened are
    /// held while that console runs (they do not idle out): false for a server without one
    /// (`--headless`, `serve`) that reopened such a session from its store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console_holds: Option<bool>,
}

/// A config reload and what came of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigReloadEvent {
    /// The config version in force after it: 1 as the server started, one more per reload
    /// that changed something (turn records name the version they ran on).
    pub version: u64,
    /// `applied` (from the next turn), `unchanged` (nothing to apply) or `refused` (the file
    /// did not load; the running config stays).
    pub outcome: Name,
    /// What asked for it: `file` (the file changed), `signal` (SIGHUP), `console` (its key),
    /// `api` (a program).
    pub cause: Name,
    /// The file read, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The changed keys now in force (values are never carried: a key may hold a secret).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<String>,
    /// Changed keys that cannot change while the server runs: their running value stays
    /// until a restart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restart: Vec<String>,
    /// Why it was refused, on one line: `FILE:LINE: KEY: what is wrong`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What applying did beyond the keys: tool sources added, reconnected, closed, refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The model as the console's header shows it, after the reload: `NAME at URL`, or the
    /// embedded model's description (files recorded before `model_short` was kept carry the
    /// request parameters at its end too).
    #[serde(default)]
    pub model: String,
    /// The model in a few words, for a narrow header: `scripted`, or its name (empty in
    /// files recorded before it was kept).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model_short: String,
    /// The request parameters `[model]` sets, as `max_tokens=64 temperature=0.2`; empty
    /// when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model_params: String,
    /// When, in µs since the epoch.
    pub at_us: u64,
}

/// What a reload with no config file to read says: the server started from the defaults and
/// its flags (no `--config`, no `./turnscope.toml`), so there was nothing to read again.
pub const NO_CONFIG_FILE: &str = "no config file to read (none was given and there is no \
     ./turnscope.toml): nothing to apply; give one with --config FILE, or put a turnscope.toml \
     in the working directory";

impl ConfigReloadEvent {
    /// Whether a reload asked for by a person (`R`, SIGHUP) found no config file to read: the
    /// server runs on the defaults and its flags. (A program's `apply` names no file either,
    /// but it gave the config itself.)
    fn without_file(&self) -> bool {
        self.outcome == "unchanged" && self.file.is_none() && self.cause != "api"
    }

    /// Whether the file was refused (the running config stays).
    pub fn is_refused(&self) -> bool {
        self.outcome == "refused"
    }

    /// The reload in one line, as the console's notice, its Log and a headless server's
    /// stderr say it.
    pub fn summary(&self) -> String {
        let v = self.version;
        let mut out = match &*self.outcome {
            "refused" => format!(
                "config not reloaded ({}), still version {v}: {}",
                self.cause,
                self.error
                    .as_deref()
                    .unwrap_or("the file could not be read")
            ),
            "applied" => format!(
                "config reloaded ({}): version {v} from the next turn: {}",
                self.cause,
                self.applied.join(", ")
            ),
            _ if self.without_file() => format!(
                "config reread ({}): {NO_CONFIG_FILE}, still version {v}",
                self.cause
            ),
            _ => format!(
                "config reread ({}): nothing to apply, still version {v}",
                self.cause
            ),
        };
        for note in &self.notes {
            out.push_str("; ");
            out.push_str(note);
        }
        if !self.restart.is_empty() {
            out.push_str(&format!(
                "; needs a restart, running value kept: {}",
                self.restart.join(", ")
            ));
        }
        out
    }

    /// The reload in a few words, most telling first (a console's notice is narrow): the
    /// version, what changed or why the file was refused, the keys waiting for a restart.
    pub fn notice(&self) -> String {
        let v = self.version;
        let mut out = match &*self.outcome {
            "refused" => format!(
                "config refused: {}",
                self.error
                    .as_deref()
                    .unwrap_or("the file could not be read")
            ),
            "applied" => format!("config v{v}: {}", self.applied.join(", ")),
            _ if self.without_file() => NO_CONFIG_FILE.to_string(),
            _ => format!("config v{v}: nothing to apply"),
        };
        if !self.restart.is_empty() {
            out.push_str(&format!("; restart for {}", self.restart.join(", ")));
        }
        out
    }
}

/// A turn's end and its figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TurnEndEvent {
    /// Session number.
    pub session: u64,
    /// Turn id.
    pub turn: u64,
    /// `completed`, `interrupted`, `error: ...` or `session ended`.
    pub reason: String,
    /// Bytes of reply.
    pub reply_bytes: usize,
    /// Rounds of function calls.
    pub rounds: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Time to first piece, µs.
    pub first_piece_us: Option<u64>,
    /// Total time, µs.
    pub total_us: u64,
    /// The config version the turn ran on (absent in files recorded before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<u64>,
    /// Told again, not seen running: a turn an `/events` viewer is told on connect, or when
    /// the session is reopened from the store. Transcripts take it; figures (Stats) do not,
    /// so a turn is not counted twice by a viewer that saw it run before a restart.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retold: bool,
    /// Whose clock timed the turn when it was not the server that ran it (an attached
    /// console's): absent for a turn the server timed itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<TurnClock>,
    /// Tokens of all its model requests, given only when those requests are not told: a turn
    /// told again (`retold`), or one a client saw (`turnscope test --url`'s record); a turn
    /// seen running has them in its model requests' events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::observe::TokenUsage>,
}

/// Whose clock timed a turn an attached console saw, when not the server that ran it: the
/// figures are then not comparable with a server's own (a client's include the network and
/// the MCP call; whisker's are the bot's frames as its sink stamped them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnClock {
    /// The attached console, around its `chat` call (the target gave no turn record).
    Client,
    /// The bot's whisker frames (pipecat's sink stamps each frame as it emits it).
    Whisker,
}

impl TurnClock {
    /// The words a turn's footer says after its figures.
    pub fn label(self) -> &'static str {
        match self {
            TurnClock::Client => "timed by client",
            TurnClock::Whisker => "timed by bot",
        }
    }
}

/// Most bytes of a tool's result an event carries; the rest is counted in `result_bytes`.
pub(crate) const RESULT_CARRIED: usize = 16 * 1024;

/// A finished tool call.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolCallEvent {
    /// Session number (0 when called through a bridge).
    pub session: u64,
    /// Turn id (0 when called through a bridge).
    pub turn: u64,
    /// Tool name.
    pub name: String,
    /// Duration, µs.
    pub duration_us: u64,
    /// Size of the result in bytes.
    pub result_bytes: usize,
    /// The error when the call failed.
    pub error: Option<String>,
    /// The arguments as the model sent them (JSON text).
    #[serde(default)]
    pub arguments: String,
    /// The result text, cut at `RESULT_CARRIED` bytes (empty when the call failed).
    #[serde(default)]
    pub result: String,
    /// When the call started, in µs since the epoch (0 when unknown).
    #[serde(default)]
    pub started_us: u64,
    /// Told again with its turn ([`TurnEndEvent::retold`]): not counted in figures.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retold: bool,
    /// Called by a person (the console's workbench, `turnscope tools call`), not by a bot:
    /// an experiment, kept out of the bot's error counts and tool figures.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_hand: bool,
}

/// `text` cut at `RESULT_CARRIED` bytes, on a character boundary.
pub fn carried(text: &str) -> String {
    if text.len() <= RESULT_CARRIED {
        return text.to_string();
    }
    let mut end = RESULT_CARRIED;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// The state of one bridge (a Xiaozhi endpoint relay), published when it changes and shown
/// in `/healthz`. Never carries a secret: the endpoint's token is masked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BridgeEvent {
    /// The kind of bridge, e.g. `xiaozhi`.
    pub kind: Name,
    /// The bridge's configured name.
    pub name: String,
    /// The endpoint URL with its token masked.
    pub endpoint: String,
    /// What it relays to, e.g. `stdio: npx server` or `bot: start/chat`.
    pub upstream: String,
    /// The upstream's state: `starting`, `up`, `restarting` or `stopped`.
    pub upstream_state: Name,
    /// Whether the endpoint socket is open.
    pub connected: bool,
    /// How many times the endpoint was dialled again after the first time.
    pub reconnects: u64,
    /// Data frames received from the endpoint.
    pub frames_in: u64,
    /// Data frames sent to the endpoint.
    pub frames_out: u64,
    /// Frames dropped because they were not JSON-RPC.
    pub malformed: u64,
    /// Tool calls refused by the tool filter.
    pub blocked: u64,
    /// The last error (token masked), if any.
    pub last_error: Option<String>,
    /// Whether the endpoint refused the token last time (close 1008, HTTP 401/403).
    pub token_rejected: bool,
    /// When, in µs since the epoch.
    pub at_us: u64,
}

/// What happened to a tool source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSourceState {
    /// Connected and listed its tools.
    Connected,
    /// Its tool list changed (`notifications/tools/list_changed`) and was read again.
    Refreshed,
    /// A connection attempt failed; it is retried in the background.
    Failed,
    /// It had not connected when the start-up budget ran out; the bot started without its
    /// tools, which join when it comes up.
    MissedBudget,
    /// An open connection ended (a stdio server exited); it is reconnected (respawned).
    Disconnected,
    /// Refused by policy or by its configuration; never retried.
    Skipped,
    /// Closed on purpose (session end, shutdown).
    Closed,
}

/// A tool source changed state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolSourceEvent {
    /// The server's name from the config.
    pub server: String,
    /// `stdio`, `http` or `sse`.
    pub transport: Name,
    /// The session owning the connection (`scope = "session"`), else none.
    pub session: Option<u64>,
    /// What happened.
    pub state: ToolSourceState,
    /// Tools it offers now.
    pub tools: usize,
    /// The error, the reason, or a short note.
    pub detail: String,
    /// When, in µs since the epoch.
    pub at_us: u64,
}

#[cfg(test)]
mod reload_tests {
    use super::*;

    fn unchanged(cause: &'static str, file: Option<&str>) -> ConfigReloadEvent {
        ConfigReloadEvent {
            version: 1,
            outcome: "unchanged".into(),
            cause: cause.into(),
            file: file.map(str::to_string),
            ..ConfigReloadEvent::default()
        }
    }

    /// `R` on a console started with no config file says there is none and how to give one,
    /// not "nothing to apply" as if a file had been read (tour F3).
    #[test]
    fn a_reload_with_no_config_file_says_so_and_how_to_give_one() {
        let none = unchanged("console", None);
        for said in [none.notice(), none.summary()] {
            assert!(said.contains("no config file to read"), "{said}");
            assert!(said.contains("--config FILE"), "{said}");
            assert!(said.contains("turnscope.toml"), "{said}");
        }
        let read = unchanged("console", Some("turnscope.toml"));
        assert_eq!(read.notice(), "config v1: nothing to apply");
        // A program's apply gave the config itself: no file is missing.
        assert_eq!(
            unchanged("api", None).notice(),
            "config v1: nothing to apply"
        );
    }
}

//! The rows and views the console state holds: one type per thing a pane lists.
//!
//! Plain data, built by [`ConsoleState`](crate::state::ConsoleState) from events and
//! snapshots; nothing here reads the clock or the server.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use turnscope::observe::stats::Summary;
use turnscope::observe::{Event, FrameEvent, SessionOpener, TokenUsage};

use crate::state::SESSION_SAMPLES;

/// What the header shows about the server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    /// Whether the MCP endpoint wants a bearer token (the connect line says how to give it).
    pub wants_token: bool,
    /// The MCP URL, when a server runs.
    pub mcp_url: Option<String>,
    /// The MCP URL of the bot an attached console chats with (`None`: not attached, or
    /// watching whisker alone).
    pub bot_url: Option<String>,
    /// The model in use, as `ModelInfo::describe` says it; attached, the model the target's
    /// model requests name (as their server answered), once one was seen.
    pub model: String,
    /// The model in a few words for a narrow screen (`ModelInfo::short`).
    pub model_short: Option<String>,
    /// The request parameters `[model]` sets (`max_tokens=64 temperature=0.2`), or empty.
    pub params: String,
    /// The bot's name (`[bot] name`), when it has one.
    pub bot: Option<String>,
    /// The bridges' state in a few words.
    pub bridges: String,
    /// Attached: the target's name and version from its `initialize` answer (`serverInfo`).
    pub server: Option<String>,
    /// Where the events come from.
    pub source: Source,
    /// The replica id and its state (`serving`, `draining`), when known.
    pub replica: Option<(String, String)>,
    /// Where sessions are kept (`memory`, `sqlite:/path`), when a server runs here.
    pub store: Option<String>,
    /// Whether that store is degraded now (writes stopped or failing: the Log says why).
    pub store_degraded: bool,
    /// A watched server's idle lifetime of a handle (its event stream's first line), so the
    /// Sessions pane says how long each session has at least, from the activity seen.
    pub watched_handle_seconds: Option<u64>,
    /// Whether a watched server holds the sessions its own console opened (they do not idle
    /// out while that console runs): set with `watched_handle_seconds`, true unless its
    /// stream says otherwise (a server before it said).
    pub watched_console_holds: bool,
    /// The config version in force and how its last reload went, when known.
    pub config: Option<ConfigMark>,
}

/// The header's config mark: the version in force and the last reload's outcome.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigMark {
    /// The config version (1 as the server started).
    pub version: u64,
    /// The last reload's outcome (`applied`, `unchanged`, `refused`); empty before any.
    pub outcome: String,
    /// Keys the last reload changed that wait for a restart.
    pub restart: usize,
}

/// Where the console's events come from.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Source {
    /// The running server's bus.
    #[default]
    Live,
    /// `turnscope attach`: another bot, as this console's feeds see it.
    Attached {
        /// What it is attached to (the MCP URL, the whisker URL).
        target: String,
        /// What the console sees of it now, in a few words (updated as the feeds change).
        view: AttachedView,
    },
    /// A file written by `--events`, read-only.
    Replay {
        /// The file as given.
        file: String,
        /// Lines that could not be read, and the first of them with its number.
        unreadable: Unreadable,
    },
}

impl Source {
    /// Whether the console is attached to a bot it does not run (`turnscope attach`).
    pub fn is_attached(&self) -> bool {
        matches!(self, Source::Attached { .. })
    }
}

/// What an attached console sees of its bot now, piece by piece (the event stream, whisker,
/// what a line does): the header shortens a piece, then leaves it out, in the order of their
/// priorities when its line is narrow, so what matters most (whisker refused, say) still
/// shows at 80 columns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttachedView {
    /// The pieces, in the order shown.
    pub pieces: Vec<ViewPiece>,
}

/// One piece of an [`AttachedView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewPiece {
    /// The piece in full.
    pub long: String,
    /// A shorter form, when it has one.
    pub short: Option<String>,
    /// When it is shortened as the header is too narrow (lower first; `u8::MAX` never).
    pub shorten_at: u8,
    /// When it is left out (lower first; `u8::MAX` never: cut with `…` last of all).
    pub drop_at: u8,
}

impl ViewPiece {
    /// A piece never shortened nor left out.
    pub fn kept(long: impl Into<String>) -> Self {
        Self {
            long: long.into(),
            short: None,
            shorten_at: u8::MAX,
            drop_at: u8::MAX,
        }
    }

    /// `short` instead when the header is narrow (at priority `at`).
    pub fn or_short(mut self, short: impl Into<String>, at: u8) -> Self {
        self.short = Some(short.into());
        self.shorten_at = at;
        self
    }

    /// Left out (at priority `at`) when even its short form does not fit.
    pub fn or_gone(mut self, at: u8) -> Self {
        self.drop_at = at;
        self
    }
}

impl From<&str> for AttachedView {
    fn from(text: &str) -> Self {
        Self {
            pieces: vec![ViewPiece::kept(text)],
        }
    }
}

/// The lines of an events file that could not be read: how many, and the first (only it is
/// kept, so a file of garbage costs no more than a good one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unreadable {
    /// How many.
    pub count: usize,
    /// The first, `line N: why`.
    pub first: Option<String>,
}

impl Unreadable {
    /// Counts one more, `line` (from 1) and why.
    pub fn add(&mut self, line: usize, why: &dyn std::fmt::Display) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(format!("line {line}: {why}"));
        }
    }
}

/// What a session is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    /// No turn in flight.
    Idle,
    /// A turn is streaming.
    InTurn,
    /// Its last turn was interrupted.
    Interrupted,
    /// Closed, with the reason.
    Closed(String),
    /// Kept in the store, not open in this process (its client's next `chat` reopens it):
    /// `idle_s` since it was last used.
    Stored {
        /// Seconds since a call last used it.
        idle_s: u64,
        /// When a call last used it (µs since the epoch): what "latest active first" sorts
        /// it by, as `idle_s` says it.
        used_us: u64,
        /// Its turns that ended in an error, as the store counts them (the Log of the
        /// process that ran them is gone).
        errors: u64,
    },
}

impl Activity {
    /// A short label for the Sessions pane.
    pub fn label(&self) -> String {
        match self {
            Activity::Idle => "idle".into(),
            Activity::InTurn => "in turn".into(),
            Activity::Interrupted => "interrupted".into(),
            // A reason that says "closed" already ("closed from the console") is not
            // prefixed again: "closed: closed from th…" was what a narrow title kept.
            Activity::Closed(reason) if reason.starts_with("closed") => reason.clone(),
            Activity::Closed(reason) => format!("closed: {reason}"),
            Activity::Stored { .. } => "stored".into(),
        }
    }
}

/// One row of the Sessions pane.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    /// Session number.
    pub number: u64,
    /// First 8 characters of the handle.
    pub handle_prefix: String,
    /// Who opened it.
    pub opener: SessionOpener,
    /// Whether the console opened it for the person.
    pub mine: bool,
    /// Turns started.
    pub turns: u64,
    /// What it is doing.
    pub activity: Activity,
    /// When it opened (µs since the epoch): what its frames' times count from.
    pub opened_us: u64,
    /// When its conversation began, if before it opened (reopened from the store).
    pub began_us: Option<u64>,
    /// Seconds since its conversation began.
    pub age_s: u64,
    /// Seconds until the idle sweep may close it (live only).
    pub idle_left_s: Option<u64>,
    /// The replica this one took it over from (a store the replicas share), if any.
    pub taken_from: Option<String>,
    /// The greeting its bot opened it with, as far as the console knows.
    pub greeting: Greeting,
}

/// The greeting a session opened with, as far as the console knows: an opening (a live one,
/// a watched server's, a replay's) and a stored conversation's head say it, with "none" a
/// real answer; a live snapshot does not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Greeting {
    /// Nothing said it (a snapshot of a session whose opening was not seen): this console's
    /// bot's greeting stands in.
    #[default]
    Unknown,
    /// It opened with none: its transcript shows none, whatever the bot's greeting is now.
    None,
    /// It opened with this one.
    Said(String),
}

impl Greeting {
    /// What an opening or a stored head says: `None` is "it had none", not "unknown".
    pub fn known(greeting: Option<&str>) -> Self {
        match greeting {
            Some(text) => Greeting::Said(text.to_string()),
            None => Greeting::None,
        }
    }

    /// The greeting to show atop its transcript: its own, none, or when unknown `standing_in`
    /// (this console's bot's).
    pub fn shown<'a>(&'a self, standing_in: Option<&'a str>) -> Option<&'a str> {
        match self {
            Greeting::Said(text) => Some(text),
            Greeting::None => None,
            Greeting::Unknown => standing_in,
        }
    }
}

impl SessionRow {
    /// What its age counts from: its conversation's start.
    pub fn age_from_us(&self) -> u64 {
        self.began_us.unwrap_or(self.opened_us).min(self.opened_us)
    }

    /// `console (you)`, `attach (you)` (an attached console's own session on its target),
    /// `mcp: NAME` or `api`.
    pub fn opener_label(&self) -> String {
        match &self.opener {
            SessionOpener::Console if self.mine => "console (you)".into(),
            SessionOpener::Console => "console".into(),
            SessionOpener::Mcp(_) if self.mine => "attach (you)".into(),
            // A pipecat worker whisker's feed showed (no MCP client of ours opened it): said
            // as such, not as an MCP client named `pipecat …`.
            SessionOpener::Mcp(name)
                if turnscope::attach::whisker::fold::is_worker(
                    &self.opener,
                    &self.handle_prefix,
                ) =>
            {
                // `PipelineTask#3` → `task#3`: the number tells workers apart in a narrow
                // column (both read `whisker: Pipeli…`).
                let id = name.trim_start_matches("pipecat ");
                format!("whisker: {}", id.replacen("PipelineTask", "task", 1))
            }
            SessionOpener::Mcp(name) => format!("mcp: {name}"),
            SessionOpener::Api => "api".into(),
        }
    }

    /// `taken over from r1` when this replica took the conversation over from another.
    pub fn takeover_label(&self) -> Option<String> {
        self.taken_from
            .as_ref()
            .map(|from| format!("taken over from {from}"))
    }

    /// Whether it is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self.activity, Activity::Closed(_))
    }

    /// Whether it is kept in the store and not open in this process.
    pub fn is_stored(&self) -> bool {
        matches!(self.activity, Activity::Stored { .. })
    }
}

/// One tool call of a turn: built the same from a live record and from a replayed event.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolLine {
    /// Tool name.
    pub name: String,
    /// The arguments as the model sent them (JSON text).
    pub arguments: String,
    /// The result text, or the error.
    pub result: String,
    /// The result's full size in bytes (the text may be cut in a replay).
    pub result_bytes: usize,
    /// How long it ran, once finished.
    pub duration_us: Option<u64>,
    /// Whether it failed.
    pub error: bool,
    /// Whether it is still running.
    pub running: bool,
}

impl ToolLine {
    /// The line heading a call: `clock({}) → 23 B · 0.6 ms`, `echo(…) → error · 1.0 ms`.
    pub fn head(&self, args_room: usize) -> String {
        let args = crate::text::one_line(&self.arguments);
        let args = if args.is_empty() {
            "{}".to_string()
        } else {
            crate::text::truncate(&args, args_room.max(3))
        };
        let outcome = match (self.running, self.error) {
            (true, _) => "running…".to_string(),
            (false, true) => "error".to_string(),
            (false, false) => format!("{} B", self.result_bytes),
        };
        match self.duration_us {
            Some(us) => format!(
                "{}({args}) → {outcome} · {}",
                self.name,
                crate::text::micros(us)
            ),
            None => format!("{}({args}) → {outcome}", self.name),
        }
    }
}

/// One turn as the Transcript pane shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TurnView {
    /// Turn id within the session.
    pub id: u64,
    /// The user's line.
    pub line: String,
    /// The reply so far.
    pub reply: String,
    /// Why it ended, once it has.
    pub end: Option<String>,
    /// Rounds of function calls.
    pub rounds: u32,
    /// Tool calls made (and running).
    pub tools: Vec<ToolLine>,
    /// Time to the first piece, µs.
    pub first_piece_us: Option<u64>,
    /// Total time, µs.
    pub total_us: Option<u64>,
    /// Tokens of the turn's model requests together, when the server counted them.
    pub usage: Option<TokenUsage>,
    /// Bytes of reasoning its responses streamed apart from the reply.
    pub reasoning_bytes: u64,
    /// The config version it ran on, when known.
    pub config_version: Option<u64>,
    /// Bytes of the whole reply, as the turn's end told them. A frame's crossings are told
    /// when its way ends, so a reply's last pieces may reach a console that folds events
    /// (attached, replay) after the turn's end: they are taken until the reply is whole.
    pub reply_bytes: Option<usize>,
    /// Whose clock timed it, when not the server's that ran it (an attached console's).
    pub clock: Option<turnscope::observe::TurnClock>,
    /// Its line was typed at this console (into a session another client opened, its
    /// transcript tells the person's lines from the client's).
    pub typed_here: bool,
}

impl TurnView {
    /// Whether a reply piece of `len` bytes belongs in the reply: while the turn runs, or
    /// after its end until the reply has the bytes the end told.
    pub fn takes_piece(&self, len: usize) -> bool {
        match (&self.end, self.reply_bytes) {
            (None, _) => true,
            (Some(_), Some(whole)) => self.reply.len() + len <= whole,
            (Some(_), None) => false,
        }
    }

    /// The view of a live turn's record.
    pub fn of_record(r: &turnscope::bot::TurnRecord) -> TurnView {
        let mut tools: Vec<ToolLine> = r
            .tool_calls
            .iter()
            .map(|c| ToolLine {
                name: c.call.name.clone(),
                arguments: c.call.arguments.clone(),
                result: c.outcome.text.clone(),
                result_bytes: c.outcome.text.len(),
                duration_us: Some(c.duration.as_micros() as u64),
                error: c.outcome.is_error,
                running: false,
            })
            .collect();
        tools.extend(r.pending_calls.iter().map(|c| ToolLine {
            name: c.name.clone(),
            arguments: c.arguments.clone(),
            running: true,
            ..ToolLine::default()
        }));
        TurnView {
            id: r.id,
            line: r.line.clone(),
            reply: r.reply.clone(),
            end: r.end.as_ref().map(ToString::to_string),
            rounds: r.rounds,
            tools,
            first_piece_us: r.first_piece.map(|d| d.as_micros() as u64),
            total_us: r.total.map(|d| d.as_micros() as u64),
            usage: r.usage,
            reasoning_bytes: r.reasoning.len() as u64,
            config_version: r.config_version,
            reply_bytes: r.end.is_some().then_some(r.reply.len()),
            clock: None,
            // Kept with the turn when this process's console typed it; a console attached
            // elsewhere knows its own from the events' transcript (`sync_turns` carries it).
            typed_here: r.typed_at_console,
        }
    }
}

/// One frame kept for the Frames pane, numbered in arrival order. It shares the bus's event
/// instead of copying it, so keeping a frame costs no allocation.
#[derive(Debug, Clone)]
pub struct FrameRow {
    /// Arrival number in this console (unique, increasing).
    pub seq: u64,
    event: Arc<Event>,
}

impl FrameRow {
    /// A row for a frame event; `None` for any other event.
    pub fn new(seq: u64, event: Arc<Event>) -> Option<FrameRow> {
        matches!(*event, Event::Frame(_)).then_some(FrameRow { seq, event })
    }

    /// The frame crossing.
    pub fn frame(&self) -> &FrameEvent {
        match &*self.event {
            Event::Frame(f) => f,
            // `new` admits frame events only.
            _ => &NO_FRAME,
        }
    }
}

static NO_FRAME: std::sync::LazyLock<FrameEvent> = std::sync::LazyLock::new(|| FrameEvent {
    id: 0,
    session: 0,
    turn: 0,
    kind: "".into(),
    name: "".into(),
    from: "".into(),
    to: "".into(),
    direction: "".into(),
    at_us: 0,
    detail: String::new(),
    depth: 0,
});

/// One progress notification as sent to a caller.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressRow {
    /// Session number.
    pub session: u64,
    /// The `progress` value sent.
    pub progress: u64,
    /// Pieces this notification carried (more than 1 = coalesced).
    pub pieces: u32,
    /// The message sent.
    pub message: String,
    /// When (µs since the epoch).
    pub at_us: u64,
}

/// Progress totals of one session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgressTotals {
    /// Notifications sent.
    pub notes: u64,
    /// Pieces they carried.
    pub pieces: u64,
    /// Notifications that carried more than one piece.
    pub coalesced: u64,
    /// First notification (µs since the epoch).
    pub first_us: u64,
    /// Last notification (µs since the epoch).
    pub last_us: u64,
}

impl ProgressTotals {
    /// Notifications per second between the first and the last.
    pub fn rate(&self) -> Option<f64> {
        let span = self.last_us.saturating_sub(self.first_us);
        (self.notes > 1 && span > 0).then(|| (self.notes - 1) as f64 * 1e6 / span as f64)
    }
}

/// A tool as the Tools pane shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolView {
    /// Tool name.
    pub name: String,
    /// Where it comes from.
    pub source: String,
    /// Its description.
    pub description: String,
    /// The input schema, pretty-printed.
    pub schema: String,
    /// The OpenAI `parameters` the bridge would send, pretty-printed, or why it cannot.
    pub openai: Result<String, String>,
    /// Collisions, renames and dropped fragments, explained.
    pub notes: Vec<String>,
    /// Why the bot does not offer it, when it was skipped (a name taken, a cap).
    pub skipped: Option<String>,
    /// The input schema itself, for the hand-call form.
    pub input: serde_json::Value,
    /// What OpenAI strict mode, Gemini or Claude would refuse or change in the schema.
    pub portability: Vec<String>,
    /// Some provider refuses the schema as it is and no mended version of it is served (the
    /// list marks it `~`).
    pub unserved: bool,
    /// A watched turnscope's own tool, as its model is offered it (its schema is the OpenAI
    /// `parameters`; the MCP schema is not on the stream): listed, not called from here.
    pub elsewhere: bool,
    /// An attached bot's own MCP tool (its `tools/list`), which this console calls over MCP
    /// only: what a provider would refuse is said in its detail, not marked in the list.
    pub over_mcp: bool,
}

/// A log line.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    /// `info`, `warn` or `error`.
    pub level: String,
    /// The message.
    pub message: String,
}

/// Recent samples of each metric of one session.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    metrics: BTreeMap<String, VecDeque<u64>>,
}

impl Samples {
    pub(crate) fn record(&mut self, metric: &str, us: u64) {
        let window = self.metrics.entry(metric.to_string()).or_default();
        if window.len() == SESSION_SAMPLES {
            window.pop_front();
        }
        window.push_back(us);
    }

    /// Summaries and recent samples of each metric, by name.
    pub fn summaries(&self) -> Vec<(String, Summary, Vec<u64>)> {
        self.metrics
            .iter()
            .map(|(name, w)| {
                let recent: Vec<u64> = w.iter().copied().collect();
                let mut sorted = recent.clone();
                sorted.sort_unstable();
                // Nearest rank: the smallest sample with at least q of them at or below it.
                let at = |q: f64| {
                    let rank = (q * sorted.len() as f64).ceil() as usize;
                    sorted[rank.clamp(1, sorted.len()) - 1]
                };
                (
                    name.clone(),
                    Summary {
                        count: sorted.len() as u64,
                        p50_us: at(0.5),
                        p95_us: at(0.95),
                        p99_us: at(0.99),
                        max_us: *sorted.last().unwrap_or(&0),
                    },
                    recent,
                )
            })
            .collect()
    }
}

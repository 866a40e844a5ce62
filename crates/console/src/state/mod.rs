//! The console's picture of the server: everything the panes draw, folded from bus events and,
//! live, from snapshots of the session table. [`ConsoleState`] is plain data (no terminal, clock
//! or server): `apply` folds one [`Event`], `sync_*` lay snapshots over it, and every collection
//! is bounded by a named const, the records that grow with use also by their share of the
//! byte budget ([`Budget`], `[console] max_mib`), so a long session or a flood of events costs
//! memory only up to a fixed size.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use turnscope::observe::Event;
use turnscope::observe::event::BridgeEvent;
use turnscope::observe::stats::Stats;

/// Frames kept for the Frames pane; older ones are evicted (and counted).
pub const FRAMES_KEPT: usize = 5_000;
/// Progress notifications kept for the Progress pane.
pub const PROGRESS_KEPT: usize = 1_000;
/// Turns kept per session transcript.
pub const TURNS_KEPT: usize = 200;
/// Closed sessions still listed (the oldest closed one is forgotten first).
pub const CLOSED_KEPT: usize = 64;
/// Sessions that closed within this many µs of each other closed together (a server that
/// stopped closes them all at once, in no order): listed by number, not by the µs between.
pub const CLOSED_TOGETHER: u64 = 1_000_000;
/// Log lines kept.
pub const LOGS_KEPT: usize = 200;
/// Samples kept per metric per session for the per-session statistics.
pub const SESSION_SAMPLES: usize = 128;
/// Metrics kept per session for the per-session statistics (further tool names are not).
pub const SESSION_METRICS: usize = 16;
/// Sessions whose per-session figures (samples, pipelines, progress totals, activity) are
/// kept beyond the listed rows: events may name sessions never seen opening (a replay, a
/// console that missed events); the lowest-numbered is forgotten first.
pub const SESSIONS_TRACKED: usize = 4_096;

pub mod budget;
mod frames;
mod health;
pub mod journal;
pub mod kept;
pub mod pipelines;
pub mod records;
mod rows;
pub mod tape;
pub mod tasks;
mod test_case;
pub mod timeline;
mod times;
mod tools;
mod turns;
mod typed;
pub mod variants;
pub mod wire;

pub use times::fixed_offset;

use budget::{Budget, Part};
use journal::Journal;
use kept::Kept;
use pipelines::Pipelines;
use timeline::Timelines;

pub use records::{
    Activity, AttachedView, ConfigMark, FrameRow, Greeting, Header, LogLine, ProgressRow,
    ProgressTotals, Samples, SessionRow, Source, ToolLine, ToolView, TurnView, Unreadable,
    ViewPiece,
};

/// Everything the console knows, folded from events and live snapshots. A clone shares the
/// events it keeps (frames, exchanges, model requests) with the original.
#[derive(Clone)]
pub struct ConsoleState {
    /// The byte budget the records are kept within.
    budget: Budget,
    /// The header's facts.
    pub header: Header,
    /// The bot's greeting, shown at the top of each transcript.
    pub greeting: Option<String>,
    /// What the person's new session says of their conversations from before that the store
    /// no longer holds (expired or deleted since), when there were some.
    pub gone_of_yours: Option<String>,
    sessions: BTreeMap<u64, SessionRow>,
    /// Closed rows in the order they closed: (number, when).
    closed_order: VecDeque<(u64, u64)>,
    transcripts: BTreeMap<u64, Vec<TurnView>>,
    /// Bytes of the turns in `transcripts`.
    transcript_bytes: usize,
    /// Every turn in `transcripts`, oldest first, to drop the oldest when over the share.
    transcript_order: VecDeque<(u64, u64)>,
    /// Turns dropped from each session's transcript to keep within the budget.
    transcript_dropped: BTreeMap<u64, u64>,
    live_turns: BTreeMap<u64, Vec<TurnView>>,
    /// Sessions the store keeps that are not open here, most recently used first (at most
    /// what the feed lists), and how many more the store holds that are not listed.
    stored: Vec<SessionRow>,
    stored_unlisted: u64,
    /// The stored session whose turns the store failed to give, and its error.
    stored_failure: Option<(u64, String)>,
    /// Refusals this console expected and handled (`health::Expected`): not errors.
    expected: Vec<health::Expected>,
    frames: Kept<FrameRow>,
    /// How many times the frames kept were let go all at once (a watched server restarted),
    /// so what lists them starts afresh.
    frames_cleared: u64,
    /// Frames seen in all.
    pub frames_seen: u64,
    progress: Kept<ProgressRow>,
    progress_totals: BTreeMap<u64, ProgressTotals>,
    /// Latency statistics over every session.
    pub stats: Stats,
    session_samples: BTreeMap<u64, Samples>,
    /// The bot's tools.
    pub tools: Vec<ToolView>,
    /// Counts the tool lists set ([`ConsoleState::tools_generation`]).
    tools_generation: u64,
    /// Why the tool list is empty, when it is for a reason.
    pub tools_note: Option<String>,
    /// Each tool source's latest state, by name: `files (stdio): connected, 3 tools`.
    tool_sources: BTreeMap<String, String>,
    /// Each bridge's latest state, by kind and name.
    bridges: BTreeMap<String, BridgeEvent>,
    logs: VecDeque<LogLine>,
    /// Every failure and log line, with the error counts.
    pub journal: Journal,
    /// Each turn's timeline, for the waterfall.
    pub timelines: Timelines,
    /// Each session's pipeline as its frames crossed it: links, rates, queue depths.
    pub pipelines: Pipelines,
    /// What crossed the wire: model requests and answers, tokens, MCP exchanges.
    pub wire: wire::Wire,
    /// Turns that became MCP tasks: status, polls, end and collection.
    pub tasks: tasks::Tasks,
    /// Sessions whose MCP client let go of them, with what happened.
    clients_gone: BTreeMap<u64, String>,
    /// Lines this console sent whose turns have not started yet.
    typed: typed::Typed,
    /// The sessions an attached console last said it started (`Event::OwnSessions`, as its
    /// recording tells them to a replay): the person's.
    own_told: Vec<turnscope::observe::OwnSession>,
    /// Each session's latest turn start, turn end, tool call or failure (µs since the epoch).
    last_activity: BTreeMap<u64, u64>,
    /// Events folded in.
    pub events_seen: u64,
    /// Events the console's subscription missed because it fell behind.
    pub events_missed: u64,
    /// Times a watched server dropped this console's event stream (it fell behind, or read
    /// nothing): what happened meanwhile is missing from the figures.
    pub stream_drops: u64,
    /// Sessions opened since the console started.
    pub sessions_opened: u64,
    /// Open sessions in the latest live snapshot (all listed, however many).
    live_open: usize,
    /// The first event's time (µs since the epoch); relative times count from here.
    pub base_us: Option<u64>,
    /// The console's "now" (µs since the epoch): the clock when live, the last event in replay.
    pub now_us: u64,
    /// Config reloads folded in, and the latest (for the notice that tells it).
    pub reloads_seen: u64,
    /// The latest config reload.
    pub last_reload: Option<turnscope::observe::ConfigReloadEvent>,
}

impl Default for ConsoleState {
    fn default() -> Self {
        Self::with_budget(Header::default(), Budget::default())
    }
}

impl ConsoleState {
    /// A state with this header, within the default budget.
    pub fn new(header: Header) -> Self {
        Self::with_budget(header, Budget::default())
    }

    /// A state with this header, keeping its records within `budget`.
    pub fn with_budget(header: Header, budget: Budget) -> Self {
        Self {
            budget,
            header,
            greeting: None,
            gone_of_yours: None,
            sessions: BTreeMap::new(),
            closed_order: VecDeque::new(),
            transcripts: BTreeMap::new(),
            transcript_bytes: 0,
            transcript_order: VecDeque::new(),
            transcript_dropped: BTreeMap::new(),
            live_turns: BTreeMap::new(),
            stored: Vec::new(),
            stored_unlisted: 0,
            stored_failure: None,
            expected: Vec::new(),
            frames: Kept::new(FRAMES_KEPT, budget.share(Part::Frames)),
            frames_cleared: 0,
            frames_seen: 0,
            progress: Kept::new(PROGRESS_KEPT, budget.share(Part::Progress)),
            progress_totals: BTreeMap::new(),
            stats: Stats::default(),
            session_samples: BTreeMap::new(),
            tools: Vec::new(),
            tools_generation: 0,
            tools_note: None,
            tool_sources: BTreeMap::new(),
            bridges: BTreeMap::new(),
            logs: VecDeque::new(),
            journal: Journal::default(),
            timelines: Timelines::new(budget.share(Part::Timelines)),
            pipelines: Pipelines::default(),
            wire: wire::Wire::new(budget),
            tasks: tasks::Tasks::default(),
            clients_gone: BTreeMap::new(),
            typed: typed::Typed::default(),
            own_told: Vec::new(),
            last_activity: BTreeMap::new(),
            events_seen: 0,
            events_missed: 0,
            stream_drops: 0,
            reloads_seen: 0,
            last_reload: None,
            sessions_opened: 0,
            live_open: 0,
            base_us: None,
            now_us: 0,
        }
    }

    /// The byte budget the records are kept within.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Keeps the records within `budget` from now on (dropping the oldest when it shrank).
    pub fn set_budget(&mut self, budget: Budget) {
        self.budget = budget;
        self.frames.set_max_bytes(budget.share(Part::Frames));
        self.progress.set_max_bytes(budget.share(Part::Progress));
        self.timelines.set_max_bytes(budget.share(Part::Timelines));
        self.wire.set_budget(budget);
        self.trim_transcripts();
    }

    /// What each part of the budget keeps now: (part, bytes kept, records dropped so far).
    pub fn budget_use(&self) -> Vec<(Part, usize, u64)> {
        Part::SHARES
            .iter()
            .map(|(part, _)| match part {
                Part::Exchanges => (
                    *part,
                    self.wire.exchanges().bytes(),
                    self.wire.exchanges().dropped(),
                ),
                Part::Requests => (*part, self.wire.calls_bytes(), self.wire.calls_dropped()),
                Part::Messages => (*part, self.wire.book.bytes(), self.wire.book.forgotten),
                Part::Frames => (*part, self.frames.bytes(), self.frames.dropped()),
                Part::Transcripts => (
                    *part,
                    self.transcript_bytes,
                    self.transcript_dropped.values().sum(),
                ),
                Part::Timelines => (*part, self.timelines.bytes(), self.timelines.dropped),
                Part::Progress => (*part, self.progress.bytes(), self.progress.dropped()),
            })
            .collect()
    }

    /// The most sessions any per-session figure is kept for (for the tests of its bound).
    pub fn sessions_tracked(&self) -> usize {
        [
            self.sessions.len(),
            self.transcripts.len(),
            self.session_samples.len(),
            self.progress_totals.len(),
            self.last_activity.len(),
            self.clients_gone.len(),
            self.transcript_dropped.len(),
            self.journal.sessions(),
            self.timelines.open_sessions(),
            self.wire.sessions_tallied(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }

    /// Frames dropped from the kept window (by count or bytes).
    pub fn frames_evicted(&self) -> u64 {
        self.frames.dropped()
    }

    /// Progress notifications dropped from the Progress pane's list.
    pub fn progress_dropped(&self) -> u64 {
        self.progress.dropped()
    }

    /// Turns dropped from `session`'s transcript, as shown, to keep within the budget: none
    /// while a live snapshot of the session's own turns is shown instead (the budget did not
    /// trim those: it said "1 earlier turn let go" over the session's only turn).
    pub fn transcript_dropped(&self, session: u64) -> u64 {
        if self.live_turns.contains_key(&session) {
            return 0;
        }
        self.transcript_dropped.get(&session).copied().unwrap_or(0)
    }

    /// Turns of `session` before those shown (turn ids count from 1): before those its live
    /// snapshot holds (a live session keeps only its latest turns in view), or before the
    /// [`TURNS_KEPT`] its events left (an attached console, a replay; a console that began
    /// watching late), less those said let go for the memory budget.
    pub fn transcript_unshown(&self, session: u64) -> u64 {
        if let Some(turns) = self.live_turns.get(&session) {
            return turns.first().map_or(0, |first| first.id.saturating_sub(1));
        }
        self.transcripts
            .get(&session)
            .and_then(|turns| turns.first())
            .map_or(0, |first| first.id.saturating_sub(1))
            .saturating_sub(self.transcript_dropped(session))
    }

    fn saw_time(&mut self, at_us: u64) {
        if at_us == 0 {
            return;
        }
        self.base_us.get_or_insert(at_us);
        self.now_us = self.now_us.max(at_us);
    }

    /// Folds one event in.
    pub fn apply(&mut self, event: &Event) {
        self.fold(event, None);
    }

    /// Folds one event shared from the bus: a frame is kept without a copy.
    pub fn apply_shared(&mut self, event: &Arc<Event>) {
        self.fold(event, Some(event));
    }

    fn fold(&mut self, event: &Event, shared: Option<&Arc<Event>>) {
        // The bus hands listeners a journey's crossings one by one; one given whole is
        // folded the same way.
        if let Event::Journey(journey) = event {
            for i in 0..journey.hops.len() {
                if let Some(crossing) = journey.crossing(i) {
                    self.fold(&Event::Frame(crossing), None);
                }
            }
            return;
        }
        self.events_seen += 1;
        self.stats.observe(event);
        match event {
            Event::Frame(f) => self.on_frame(f, shared),
            // Folded as its crossings above.
            Event::Journey(_) => {}
            Event::Session(s) => self.on_session(s),
            Event::TurnStarted {
                session,
                turn,
                line,
                at_us,
            } => self.on_turn_started(session, turn, line, at_us),
            Event::TurnEnded(t) => self.on_turn_ended(t),
            Event::ToolCall(c) => self.on_tool_call(c),
            Event::ModelRequest {
                session,
                turn,
                response,
                ..
            } => {
                self.on_model_response(*session, *turn, response);
                self.on_model_request(event);
                self.wire.on_model_request(shared_or_copy(event, shared));
            }
            Event::Progress {
                session,
                progress,
                message,
                pieces,
                at_us,
            } => self.on_progress(session, progress, message, pieces, at_us),
            Event::Served {
                route,
                ok: false,
                error,
                session,
                at_us,
                probe,
                ..
            } => self.on_refused(route, error, session, at_us, *probe),
            Event::Served { .. } => {}
            Event::ClientGone {
                session,
                client,
                reason,
                at_us,
            } => self.on_client_gone(*session, client, reason, *at_us),
            Event::CallCancelled {
                session,
                client,
                at_us,
            } => self.on_cancelled(*session, client, *at_us),
            Event::Task(t) => self.on_task(t),
            Event::Bridge(b) => self.on_bridge(b),
            Event::ToolSource(t) => self.on_tool_source(t),
            Event::Replica(r) => {
                self.saw_time(r.at_us);
                self.header.replica = Some((r.id.clone(), r.state.to_string()));
                if r.handle_seconds.is_some() {
                    self.header.watched_handle_seconds = r.handle_seconds;
                    self.header.watched_console_holds = r.console_holds.unwrap_or(true);
                }
            }
            Event::Log {
                at_ms,
                level,
                message,
            } => self.on_log(at_ms, level, message),
            Event::ToolSet(set) => {
                self.fold_watched_tool_set(set);
                self.wire.book.apply(event);
            }
            Event::Mcp(x) => {
                self.saw_time(x.at_us);
                self.wire.on_mcp(shared_or_copy(event, shared));
            }
            Event::ConfigReload(r) => self.on_config_reload(r),
            Event::OwnSessions { sessions, at_us } => {
                self.saw_time(*at_us);
                self.on_own_sessions(sessions);
            }
        }
        self.bound_sessions();
    }

    /// A task changed: its view, its turn's timeline, the session's activity.
    fn on_task(&mut self, e: &turnscope::observe::TaskEvent) {
        use turnscope::observe::TaskChange;
        self.saw_time(e.at_us);
        self.tasks.on_task(e);
        self.timelines.task((e.session, e.turn), e);
        if !matches!(e.change, TaskChange::Polled | TaskChange::Removed) {
            self.touch(e.session, e.at_us);
        }
        if e.change == TaskChange::Cancelled {
            self.journal.push(journal::Entry {
                at_us: e.at_us,
                level: journal::Level::Info,
                session: Some(e.session),
                source: format!("mcp client {}", e.client),
                message: format!(
                    "cancelled task {} (tasks/cancel): the turn was interrupted; an empty line reads what it said",
                    e.task
                ),
                repeats: 1,
            });
        }
    }

    /// What happened to the MCP client of a session it let go of, if it did.
    pub fn client_gone(&self, session: u64) -> Option<&str> {
        self.clients_gone.get(&session).map(String::as_str)
    }

    /// When the session last started or ended a turn, ran a tool or failed (µs since the
    /// epoch; its opening when nothing happened since).
    pub fn last_activity(&self, row: &SessionRow) -> u64 {
        // A stored session's last use is the store's (its row shows it, `stored 2m`); when it
        // was created says nothing of it.
        if let Activity::Stored { used_us, .. } = row.activity {
            return used_us;
        }
        self.last_activity
            .get(&row.number)
            .copied()
            .unwrap_or(row.opened_us)
    }

    fn touch(&mut self, session: u64, at_us: u64) {
        if session != 0 && at_us != 0 {
            let last = self.last_activity.entry(session).or_default();
            *last = (*last).max(at_us);
        }
    }

    /// This console sent `line` into `session`: the turn it starts is marked typed here.
    pub fn sent_line(&mut self, session: u64, line: &str) {
        self.typed.sent(session, line);
    }

    /// The turns of a session: the live snapshot when there is one, else built from events.
    pub fn transcript(&self, session: u64) -> &[TurnView] {
        self.live_turns
            .get(&session)
            .or_else(|| self.transcripts.get(&session))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The frames kept, oldest first.
    pub fn frames(&self) -> &VecDeque<FrameRow> {
        self.frames.items()
    }

    /// How many times the frames kept were let go all at once: a view of them lists them
    /// anew when this changed (the frames that come next may reuse the old ones' ids).
    pub fn frames_cleared(&self) -> u64 {
        self.frames_cleared
    }

    /// The progress notifications kept, oldest first.
    pub fn progress(&self) -> &VecDeque<ProgressRow> {
        self.progress.items()
    }

    /// Progress totals per session.
    pub fn progress_totals(&self) -> &BTreeMap<u64, ProgressTotals> {
        &self.progress_totals
    }

    /// Recent samples of one session.
    pub fn session_samples(&self, session: u64) -> Option<&Samples> {
        self.session_samples.get(&session)
    }

    /// The log lines kept, oldest first.
    pub fn logs(&self) -> &VecDeque<LogLine> {
        &self.logs
    }
}

/// The bus's event when it was shared, else a copy of it (a replay's events).
fn shared_or_copy(event: &Event, shared: Option<&Arc<Event>>) -> Arc<Event> {
    shared.cloned().unwrap_or_else(|| Arc::new(event.clone()))
}

/// JSON pretty-printed with two-space indents.
pub fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

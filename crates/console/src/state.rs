//! The console's picture of the server: everything the panes draw, folded from bus events
//! and, in live mode, from snapshots of the session table.
//!
//! [`ConsoleState`] is plain data with no terminal, clock or server inside: `apply` folds one
//! [`Event`], the `sync_*` methods lay live snapshots over it. Every collection is bounded (the
//! consts below say how), so a flood of events costs memory only up to a fixed size. It never
//! draws and never waits.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use turnscope::observe::event::{BridgeEvent, ToolSourceState};
use turnscope::observe::stats::Stats;
use turnscope::observe::{Event, FrameEvent};
use turnscope::tools::ToolSpec;
use turnscope::tools::merge::Skip;
use turnscope::tools::openai_shape::names::{NameMap, is_valid_openai_name};
use turnscope::tools::openai_shape::schema::{Limits, convert};

/// Frames kept for the Frames pane; older ones are evicted (and counted).
pub const FRAMES_KEPT: usize = 5_000;
/// Progress notifications kept for the Progress pane.
pub const PROGRESS_KEPT: usize = 1_000;
/// Turns kept per session transcript.
pub const TURNS_KEPT: usize = 200;
/// Closed sessions still listed (the oldest closed one is forgotten first).
pub const CLOSED_KEPT: usize = 64;
/// Log lines kept.
pub const LOGS_KEPT: usize = 200;
/// Samples kept per metric per session for the per-session statistics.
pub const SESSION_SAMPLES: usize = 256;

use super::journal::{Entry, Journal, Level};
use super::timeline::Timelines;

pub use super::views::{
    Activity, FrameRow, Header, LogLine, ProgressRow, ProgressTotals, Samples, SessionRow, Source,
    ToolLine, ToolView, TurnView,
};

/// Everything the console knows, folded from events and live snapshots.
#[derive(Default)]
pub struct ConsoleState {
    /// The header's facts.
    pub header: Header,
    /// The bot's greeting, shown at the top of each transcript.
    pub greeting: Option<String>,
    sessions: BTreeMap<u64, SessionRow>,
    closed_order: VecDeque<u64>,
    transcripts: BTreeMap<u64, Vec<TurnView>>,
    live_turns: BTreeMap<u64, Vec<TurnView>>,
    frames: VecDeque<FrameRow>,
    /// Frames seen in all.
    pub frames_seen: u64,
    /// Frames evicted from the kept window.
    pub frames_evicted: u64,
    progress: VecDeque<ProgressRow>,
    progress_totals: BTreeMap<u64, ProgressTotals>,
    /// Latency statistics over every session.
    pub stats: Stats,
    session_samples: BTreeMap<u64, Samples>,
    /// The bot's tools.
    pub tools: Vec<ToolView>,
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
    /// Events folded in.
    pub events_seen: u64,
    /// Events the console's subscription missed because it fell behind.
    pub events_missed: u64,
    /// Sessions opened since the console started.
    pub sessions_opened: u64,
    /// The first event's time (µs since the epoch); relative times count from here.
    pub base_us: Option<u64>,
    /// The console's "now" (µs since the epoch): the clock when live, the last event in replay.
    pub now_us: u64,
}

impl ConsoleState {
    /// A state with this header.
    pub fn new(header: Header) -> Self {
        Self {
            header,
            ..Self::default()
        }
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
        self.events_seen += 1;
        self.stats.observe(event);
        match event {
            Event::Frame(f) => self.on_frame(f, shared),
            Event::Session(s) => {
                self.saw_time(s.at_us);
                match &s.closed {
                    None => {
                        self.sessions_opened += 1;
                        self.sessions.entry(s.session).or_insert(SessionRow {
                            number: s.session,
                            handle_prefix: s.handle_prefix.clone(),
                            opener: s.opener.clone(),
                            mine: false,
                            turns: 0,
                            activity: Activity::Idle,
                            opened_us: s.at_us,
                            age_s: 0,
                            idle_left_s: None,
                        });
                    }
                    Some(reason) => self.close_row(s.session, reason.clone(), s.at_us),
                }
            }
            Event::TurnStarted {
                session,
                turn,
                line,
                at_us,
            } => {
                self.saw_time(*at_us);
                let turns = self.transcripts.entry(*session).or_default();
                if turns.len() == TURNS_KEPT {
                    turns.remove(0);
                }
                turns.push(TurnView {
                    id: *turn,
                    line: line.clone(),
                    ..TurnView::default()
                });
                self.timelines.started(*session, *turn, *at_us);
                if let Some(row) = self.sessions.get_mut(session) {
                    row.turns += 1;
                    if !row.is_closed() {
                        row.activity = Activity::InTurn;
                    }
                }
            }
            Event::TurnEnded(t) => {
                self.timelines
                    .ended((t.session, t.turn), &t.reason, t.total_us);
                if let Some(view) = self.turn_mut(t.session, t.turn) {
                    view.end = Some(t.reason.clone());
                    view.rounds = t.rounds;
                    view.first_piece_us = t.first_piece_us;
                    view.total_us = Some(t.total_us);
                }
                if let Some(row) = self.sessions.get_mut(&t.session)
                    && !row.is_closed()
                {
                    row.activity = if t.reason.starts_with("interrupted") {
                        Activity::Interrupted
                    } else {
                        Activity::Idle
                    };
                }
                let samples = self.session_samples.entry(t.session).or_default();
                samples.record("turn total", t.total_us);
                if let Some(first) = t.first_piece_us {
                    samples.record("turn first piece", first);
                }
            }
            Event::ToolCall(c) => {
                self.timelines.call(
                    (c.session, c.turn),
                    &c.name,
                    c.started_us,
                    c.duration_us,
                    c.error.is_some(),
                );
                if let Some(e) = &c.error {
                    let at = if c.started_us == 0 {
                        self.now_us
                    } else {
                        c.started_us + c.duration_us
                    };
                    self.journal.push(Entry {
                        at_us: at,
                        level: Level::Error,
                        session: (c.session != 0).then_some(c.session),
                        source: format!("tool {}", c.name),
                        message: e.clone(),
                        repeats: 1,
                    });
                }
                if let Some(view) = self.turn_mut(c.session, c.turn) {
                    view.tools.push(ToolLine {
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                        result: c.error.clone().unwrap_or_else(|| c.result.clone()),
                        result_bytes: c.result_bytes,
                        duration_us: Some(c.duration_us),
                        error: c.error.is_some(),
                        running: false,
                    });
                }
                if c.session != 0 {
                    self.session_samples
                        .entry(c.session)
                        .or_default()
                        .record(&format!("tool {}", c.name), c.duration_us);
                }
            }
            Event::ModelRequest {
                session,
                turn,
                first_piece_us,
                total_us,
                error,
                at_us,
            } => {
                self.timelines.request(
                    (*session, *turn),
                    *at_us,
                    *first_piece_us,
                    *total_us,
                    error.as_deref(),
                );
                if let Some(e) = error {
                    self.journal.push(Entry {
                        at_us: if *at_us == 0 {
                            self.now_us
                        } else {
                            at_us + total_us
                        },
                        level: Level::Error,
                        session: (*session != 0).then_some(*session),
                        source: "model".into(),
                        message: e.clone(),
                        repeats: 1,
                    });
                }
                self.session_samples
                    .entry(*session)
                    .or_default()
                    .record("model request", *total_us);
            }
            Event::Progress {
                session,
                progress,
                message,
                pieces,
                at_us,
            } => {
                self.saw_time(*at_us);
                self.timelines.progress(*session, *at_us);
                if self.progress.len() == PROGRESS_KEPT {
                    self.progress.pop_front();
                }
                self.progress.push_back(ProgressRow {
                    session: *session,
                    progress: *progress,
                    pieces: *pieces,
                    message: message.clone(),
                    at_us: *at_us,
                });
                let totals = self.progress_totals.entry(*session).or_default();
                if totals.notes == 0 {
                    totals.first_us = *at_us;
                }
                totals.notes += 1;
                totals.pieces += u64::from(*pieces);
                totals.coalesced += u64::from(*pieces > 1);
                totals.last_us = *at_us;
            }
            Event::Served {
                route,
                ok: false,
                error,
                session,
                at_us,
                ..
            } => {
                self.saw_time(*at_us);
                let at = if *at_us == 0 { self.now_us } else { *at_us };
                let source = match route.strip_prefix("mcp tools/call ") {
                    Some(method) => (method, " refused"),
                    None => (route.as_ref(), " failed"),
                };
                self.journal.note(
                    at,
                    Level::Error,
                    *session,
                    source,
                    error.as_deref().unwrap_or(""),
                );
            }
            Event::Served { .. } => {}
            Event::Bridge(b) => {
                self.saw_time(b.at_us);
                let key = format!("{} {}", b.kind, b.name);
                let before = self.bridges.get(&key).and_then(|o| o.last_error.clone());
                if let Some(e) = &b.last_error
                    && before.as_ref() != Some(e)
                {
                    self.journal.push(Entry {
                        at_us: b.at_us,
                        level: Level::Warn,
                        session: None,
                        source: format!("bridge {key}"),
                        message: e.clone(),
                        repeats: 1,
                    });
                }
                self.bridges.insert(key, b.clone());
            }
            Event::ToolSource(t) => {
                self.saw_time(t.at_us);
                let key = match t.session {
                    Some(n) => format!("{} #{n}", t.server),
                    None => t.server.clone(),
                };
                let state = match t.state {
                    ToolSourceState::Connected => "connected",
                    ToolSourceState::Refreshed => "refreshed",
                    ToolSourceState::Failed => "failed, retrying",
                    ToolSourceState::MissedBudget => "missed the start-up budget",
                    ToolSourceState::Disconnected => "disconnected, reconnecting",
                    ToolSourceState::Skipped => "skipped",
                    ToolSourceState::Closed => "closed",
                };
                let mut line = format!("{key} ({}): {state}, {} tools", t.transport, t.tools);
                if !t.detail.is_empty() {
                    line.push_str(&format!(": {}", t.detail));
                }
                if matches!(
                    t.state,
                    ToolSourceState::Failed
                        | ToolSourceState::MissedBudget
                        | ToolSourceState::Disconnected
                        | ToolSourceState::Skipped
                ) {
                    self.journal.push(Entry {
                        at_us: t.at_us,
                        level: Level::Warn,
                        session: t.session,
                        source: format!("tools {}", t.server),
                        message: format!("{state}: {}", t.detail),
                        repeats: 1,
                    });
                }
                self.tool_sources.insert(key, line);
            }
            Event::Replica(r) => {
                self.saw_time(r.at_us);
                self.header.replica = Some((r.id.clone(), r.state.to_string()));
            }
            Event::Log {
                at_ms,
                level,
                message,
            } => {
                self.saw_time(at_ms * 1000);
                if self.logs.len() == LOGS_KEPT {
                    self.logs.pop_front();
                }
                self.logs.push_back(LogLine {
                    level: level.to_string(),
                    message: message.clone(),
                });
                self.journal.push(Entry {
                    at_us: at_ms * 1000,
                    level: Level::parse(level),
                    session: None,
                    source: "log".into(),
                    message: message.clone(),
                    repeats: 1,
                });
            }
        }
    }

    fn on_frame(&mut self, f: &FrameEvent, shared: Option<&Arc<Event>>) {
        self.saw_time(f.at_us);
        self.frames_seen += 1;
        if self.frames.len() == FRAMES_KEPT {
            self.frames.pop_front();
            self.frames_evicted += 1;
        }
        // The reply is what reaches the output stage; counting that one crossing keeps each
        // piece once however many processors pass it on.
        if f.name == "TextPiece" && f.to == "output" {
            self.timelines.piece((f.session, f.turn), f.at_us);
            if let Some(view) = self.turn_mut(f.session, f.turn)
                && view.end.is_none()
            {
                view.reply.push_str(&f.detail);
            }
        }
        let event = shared
            .cloned()
            .unwrap_or_else(|| Arc::new(Event::Frame(f.clone())));
        if let Some(row) = FrameRow::new(self.frames_seen, event) {
            self.frames.push_back(row);
        }
    }

    fn turn_mut(&mut self, session: u64, turn: u64) -> Option<&mut TurnView> {
        self.transcripts
            .get_mut(&session)?
            .iter_mut()
            .rev()
            .find(|t| t.id == turn)
    }

    fn close_row(&mut self, number: u64, reason: String, at_us: u64) {
        let Some(row) = self.sessions.get_mut(&number) else {
            return;
        };
        if row.is_closed() {
            return;
        }
        row.activity = Activity::Closed(reason);
        row.age_s = at_us.saturating_sub(row.opened_us) / 1_000_000;
        row.idle_left_s = None;
        // A closed session has no turn in flight: the last live snapshot may have caught
        // one streaming, so the turns built from events (ended by their events) take over,
        // and a turn whose end was never seen is marked as ended with the session.
        if let Some(live) = self.live_turns.remove(&number) {
            let built = self.transcripts.entry(number).or_default();
            for turn in live {
                match built.iter_mut().find(|t| t.id == turn.id) {
                    Some(known) if known.end.is_none() && turn.end.is_some() => *known = turn,
                    Some(known) if known.end.is_none() => {
                        if turn.reply.len() > known.reply.len() {
                            known.reply = turn.reply;
                        }
                        if known.tools.len() < turn.tools.len() {
                            known.tools = turn.tools;
                        }
                    }
                    Some(_) => {}
                    None => built.push(turn),
                }
            }
            built.sort_by_key(|t| t.id);
        }
        if let Some(turns) = self.transcripts.get_mut(&number) {
            for turn in turns.iter_mut().filter(|t| t.end.is_none()) {
                turn.end = Some("session ended".into());
            }
        }
        self.closed_order.push_back(number);
        if self.closed_order.len() > CLOSED_KEPT
            && let Some(old) = self.closed_order.pop_front()
        {
            self.sessions.remove(&old);
            self.transcripts.remove(&old);
            self.live_turns.remove(&old);
            self.session_samples.remove(&old);
            self.progress_totals.remove(&old);
            self.journal.forget(old);
        }
    }

    /// Lays a snapshot of the open sessions over the rows: their figures replace the
    /// event-built ones, and an open row missing from the snapshot is marked closed.
    pub fn sync_sessions(&mut self, open: Vec<SessionRow>) {
        let numbers: std::collections::BTreeSet<u64> = open.iter().map(|r| r.number).collect();
        let gone: Vec<u64> = self
            .sessions
            .values()
            .filter(|r| !r.is_closed() && !numbers.contains(&r.number))
            .map(|r| r.number)
            .collect();
        let now = self.now_us;
        for number in gone {
            self.close_row(number, "gone".into(), now);
        }
        for row in open {
            self.sessions.insert(row.number, row);
        }
    }

    /// Sets each open row's age from the latest event's time (a replay has no live
    /// snapshot); a closed row keeps the age it closed at.
    pub fn age_rows(&mut self) {
        let now = self.now_us;
        for row in self.sessions.values_mut().filter(|r| !r.is_closed()) {
            row.age_s = now.saturating_sub(row.opened_us) / 1_000_000;
        }
    }

    /// Lays a live snapshot of one session's turns over its event-built transcript.
    pub fn sync_turns(&mut self, session: u64, turns: Vec<TurnView>) {
        self.live_turns.insert(session, turns);
    }

    /// Forgets live turn snapshots of every session but `keep`.
    pub fn keep_live_turns_of(&mut self, keep: Option<u64>) {
        self.live_turns.retain(|n, _| Some(*n) == keep);
    }

    /// Sets every bridge's state (a live snapshot; events update it between snapshots).
    pub fn set_bridges(&mut self, states: Vec<BridgeEvent>) {
        self.bridges = states
            .into_iter()
            .map(|b| (format!("{} {}", b.kind, b.name), b))
            .collect();
    }

    /// The bridges' states in a few words, or the header's fallback when there is none.
    pub fn bridges_summary(&self) -> String {
        if self.bridges.is_empty() {
            return self.header.bridges.clone();
        }
        self.bridges
            .values()
            .map(|b| {
                let link = if b.connected {
                    "connected"
                } else {
                    "not connected"
                };
                format!(
                    "{} {}: {link}, upstream {}",
                    b.kind, b.name, b.upstream_state
                )
            })
            .collect::<Vec<_>>()
            .join(" · ")
    }

    /// Sets the tool sources' states (a live snapshot, one line each).
    pub fn set_tool_sources(&mut self, lines: Vec<String>) {
        self.tool_sources = lines
            .into_iter()
            .map(|l| (l.split(' ').next().unwrap_or("").to_string(), l))
            .collect();
    }

    /// The tool sources' latest states.
    pub fn tool_sources(&self) -> impl Iterator<Item = &String> {
        self.tool_sources.values()
    }

    /// Sets the tool list from the bot's specs: schemas pretty-printed, the OpenAI conversion
    /// done, collisions and renames explained; then the tools that were skipped, with why.
    pub fn set_tools_and_skips(&mut self, specs: &[ToolSpec], skips: &[Skip]) {
        self.set_tools(specs);
        self.tools.extend(skips.iter().map(|skip| ToolView {
            name: skip.tool.clone(),
            source: skip.source.clone(),
            description: String::new(),
            schema: String::new(),
            openai: Ok(String::new()),
            notes: Vec::new(),
            skipped: Some(skip.to_string()),
        }));
    }

    /// Sets the tool list from the bot's specs: schemas pretty-printed, the OpenAI conversion
    /// done, collisions and renames explained.
    pub fn set_tools(&mut self, specs: &[ToolSpec]) {
        let names = NameMap::new(specs.iter().map(|s| s.name.as_str()));
        let mut seen = std::collections::BTreeMap::<&str, &str>::new();
        self.tools = specs
            .iter()
            .map(|spec| {
                let mut notes = Vec::new();
                if let Some(first) = seen.insert(&spec.name, &spec.source) {
                    notes.push(format!(
                        "collision: `{}` from {first} is listed first; this one is never called",
                        spec.name
                    ));
                }
                if !is_valid_openai_name(&spec.name)
                    && let Some(renamed) = names.openai_name(&spec.name)
                {
                    notes.push(format!(
                        "OpenAI name: `{renamed}` (OpenAI names allow only A-Z a-z 0-9 _ -, at most 64)"
                    ));
                }
                let openai = match convert(Some(&spec.input_schema), &Limits::default()) {
                    Ok(done) => {
                        for pointer in &done.dropped {
                            notes.push(format!(
                                "dropped for OpenAI: #{pointer} is not a schema"
                            ));
                        }
                        Ok(pretty(&done.parameters))
                    }
                    Err(e) => Err(e.to_string()),
                };
                ToolView {
                    name: spec.name.clone(),
                    source: spec.source.clone(),
                    description: spec.description.clone(),
                    schema: pretty(&spec.input_schema),
                    openai,
                    notes,
                    skipped: None,
                }
            })
            .collect();
    }

    /// Session rows: open ones by number, then closed ones, latest closed first.
    pub fn session_rows(&self) -> Vec<&SessionRow> {
        let mut rows: Vec<&SessionRow> =
            self.sessions.values().filter(|r| !r.is_closed()).collect();
        rows.extend(
            self.closed_order
                .iter()
                .rev()
                .filter_map(|n| self.sessions.get(n)),
        );
        rows
    }

    /// One session's row.
    pub fn session(&self, number: u64) -> Option<&SessionRow> {
        self.sessions.get(&number)
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
        &self.frames
    }

    /// The progress notifications kept, oldest first.
    pub fn progress(&self) -> &VecDeque<ProgressRow> {
        &self.progress
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

    /// A wall-clock time of day (UTC) for the Log pane: `14:03:07.250`.
    pub fn clock(&self, at_us: u64) -> String {
        if at_us == 0 {
            return "-".into();
        }
        let ms = (at_us / 1_000) % 86_400_000;
        format!(
            "{:02}:{:02}:{:02}.{:03}",
            ms / 3_600_000,
            (ms / 60_000) % 60,
            (ms / 1_000) % 60,
            ms % 1_000
        )
    }

    /// A frame's time relative to its session's opening (or to the first event), in a fixed
    /// 9 cells: `   12.345`, ` 1234.567`, `  123m04s`.
    pub fn session_relative(&self, session: u64, at_us: u64) -> String {
        let base = self
            .sessions
            .get(&session)
            .map(|r| r.opened_us)
            .filter(|b| *b > 0 && *b <= at_us)
            .or(self.base_us)
            .unwrap_or(at_us);
        fixed_offset(at_us.saturating_sub(base))
    }

    /// A time as seconds since the first event: `+12.345s`.
    pub fn relative(&self, at_us: u64) -> String {
        let base = self.base_us.unwrap_or(at_us);
        let d = at_us.saturating_sub(base);
        format!("+{}.{:03}s", d / 1_000_000, (d / 1_000) % 1_000)
    }
}

/// An offset in a fixed 9 cells: seconds with milliseconds below 10,000 s, else minutes.
pub fn fixed_offset(us: u64) -> String {
    let s = us / 1_000_000;
    if s < 10_000 {
        format!("{s:>4}.{:03}s", (us / 1_000) % 1_000)
    } else {
        format!("{:>5}m{:02}s", (s / 60).min(99_999), s % 60)
    }
}

/// JSON pretty-printed with two-space indents.
pub fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

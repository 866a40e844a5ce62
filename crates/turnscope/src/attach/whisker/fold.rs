//! Whisker records as turnscope events: each worker a session (numbered in order of
//! appearance, or the number of the console's session it was paired with), each push a frame
//! crossing `from → to` (the destination from the worker's topology: whisker names only the
//! source), and, for a text bot, its turns derived from the frames the way
//! pipecat-mcp-transport ends them: the line an `LLMMessagesAppendFrame` appends starts one,
//! the first `LLMTextFrame` reaching the output transport is its first piece, each
//! `FunctionCallsStartedFrame` opens a round that the next `LLMFullResponseEndFrame` closes, and
//! an end with no round open ends the turn; `InterruptionFrame` interrupts it, `EndFrame` and
//! `CancelFrame` end the session. Each frame counts once (whisker reports it at every hop).
//! Everything kept per worker is bounded.

use std::collections::{HashMap, VecDeque};

use super::decode::{FrameRecord, Record, Worker};
use crate::observe::event::{
    FrameEvent, SessionEvent, SessionOpener, ToolCallEvent, TurnClock, TurnEndEvent, carried,
};
use crate::observe::{Event, Name};

/// Frame names remembered per worker for counting each frame once.
const SEEN_KEPT: usize = 4096;
/// Workers followed at once; past it the oldest is forgotten.
pub const WORKERS_KEPT: usize = 256;
/// Tool calls waiting for their result per worker.
const CALLS_KEPT: usize = 64;

/// How the session of a worker names its opener: `pipecat WORKER-ID`.
const WORKER_OPENER: &str = "pipecat ";

/// Whether a session was opened by this fold: a pipecat worker seen on whisker's feed (whose
/// turns are known only from what passed while the feed was read). Such a session has no
/// handle (`handle_prefix` empty), which tells it from an MCP client's session whose client
/// happens to name itself `pipecat …`.
pub fn is_worker(opener: &SessionOpener, handle_prefix: &str) -> bool {
    handle_prefix.is_empty()
        && matches!(opener, SessionOpener::Mcp(name) if name.starts_with(WORKER_OPENER))
}

/// The fold's state: workers by id.
#[derive(Default)]
pub struct Fold {
    workers: HashMap<String, WorkerState>,
    order: VecDeque<String>,
}

/// One worker as followed.
struct WorkerState {
    session: u64,
    down: HashMap<String, String>,
    up: HashMap<String, String>,
    /// Frame names seen, with the id their crossings share.
    seen: HashMap<String, u64>,
    seen_order: VecDeque<String>,
    turn: Option<TurnState>,
    turns: u64,
    ended: bool,
}

/// The turn in flight.
struct TurnState {
    id: u64,
    started_us: u64,
    first_piece_us: Option<u64>,
    open_rounds: u32,
    rounds: u32,
    calls: Vec<(String, String, String, u64)>,
    done_calls: u32,
    reply_bytes: usize,
}

impl Fold {
    /// Whether the worker `id` is followed.
    pub fn knows(&self, id: &str) -> bool {
        self.workers.contains_key(id)
    }

    /// Forgets every worker (the bot restarted: its new workers take the same ids) and
    /// closes their sessions, `why`; a turn in flight ends with them.
    pub fn forget_workers(&mut self, why: &str, at_us: u64) -> Vec<Event> {
        let mut out = Vec::new();
        for id in std::mem::take(&mut self.order) {
            let Some(mut state) = self.workers.remove(&id) else {
                continue;
            };
            if state.ended {
                continue;
            }
            if let Some(end) = state.end_turn(why, at_us) {
                out.push(end);
            }
            out.push(Event::Session(SessionEvent {
                session: state.session,
                handle_prefix: String::new(),
                opener: SessionOpener::Mcp(format!("{WORKER_OPENER}{id}")),
                closed: Some(why.to_string()),
                at_us,
                restored: false,
                began_us: None,
                taken_from: None,
                greeting: None,
            }));
        }
        self.workers.clear();
        out
    }

    /// Starts following `worker` as session `session`; the session's opening when this feed
    /// opened it (`announce`).
    pub fn add_worker(
        &mut self,
        worker: &Worker,
        session: u64,
        at_us: u64,
        announce: bool,
    ) -> Vec<Event> {
        let mut out = Vec::new();
        if let Some(state) = self.workers.get_mut(&worker.id) {
            state.set_topology(worker);
            return out;
        }
        if self.order.len() >= WORKERS_KEPT
            && let Some(old) = self.order.pop_front()
        {
            self.workers.remove(&old);
        }
        let mut state = WorkerState {
            session,
            down: HashMap::new(),
            up: HashMap::new(),
            seen: HashMap::new(),
            seen_order: VecDeque::new(),
            turn: None,
            turns: 0,
            ended: false,
        };
        state.set_topology(worker);
        self.workers.insert(worker.id.clone(), state);
        self.order.push_back(worker.id.clone());
        if announce {
            out.push(Event::Session(SessionEvent {
                session,
                handle_prefix: String::new(),
                opener: SessionOpener::Mcp(format!("{WORKER_OPENER}{}", worker.id)),
                closed: None,
                at_us,
                restored: false,
                // Its age counts from when the bot added it, not from when this feed learnt
                // of it (a console that connects late: the snapshot lists workers of earlier).
                began_us: (worker.added_us > 0 && worker.added_us < at_us)
                    .then_some(worker.added_us),
                taken_from: None,
                greeting: None,
            }));
        }
        out
    }

    /// Numbers the next turn of the worker `id` after `turns` (a worker paired late with a
    /// session whose client showed that many turns meanwhile).
    pub fn continue_after(&mut self, id: &str, turns: u64) {
        if let Some(w) = self.workers.get_mut(id) {
            w.turns = w.turns.max(turns);
        }
    }

    /// The events one frame record makes (none for a worker not followed).
    pub fn frame(&mut self, f: &FrameRecord) -> Vec<Event> {
        let mut out = Vec::new();
        let Some(w) = self.workers.get_mut(&f.worker) else {
            return out;
        };
        if !f.push {
            return out;
        }
        let class = class_of(&f.name);
        let to = w.next(&f.from, f.downstream);
        // One pipecat frame (`Class#n`) is one frame with a crossing per link, as a local
        // frame's journey is: its crossings share the id of its first record, so the Frames
        // pane lists it once with its hops (x: per link) and its detail shows its path.
        let (first, id) = w.first_sight(&f.name, f.seq);
        let turn_id = w.turn.as_ref().map_or(0, |t| t.id);
        out.push(Event::Frame(FrameEvent {
            id,
            session: w.session,
            turn: turn_id,
            kind: kind_of(class).into(),
            name: Name::Owned(class.to_string()),
            from: Name::Owned(f.from.clone()),
            to: Name::Owned(to.clone()),
            direction: if f.downstream { "down" } else { "up" }.into(),
            at_us: f.at_us,
            detail: detail(f),
            depth: 0,
        }));
        if w.ended {
            return out;
        }
        let p = &f.payload;
        match class {
            "LLMTextFrame" if to.contains("OutputTransport") => {
                if let Some(t) = w.turn.as_mut() {
                    t.first_piece_us.get_or_insert(f.at_us);
                    t.reply_bytes += p.text.as_deref().map_or(0, str::len);
                }
            }
            _ if !first => {}
            "LLMMessagesAppendFrame" if f.downstream => {
                if let Some(line) = &p.user_line {
                    if let Some(ended) = w.end_turn("interrupted", f.at_us) {
                        out.push(ended);
                    }
                    w.turns += 1;
                    w.turn = Some(TurnState {
                        id: w.turns,
                        started_us: f.at_us,
                        first_piece_us: None,
                        open_rounds: 0,
                        rounds: 0,
                        calls: Vec::new(),
                        done_calls: 0,
                        reply_bytes: 0,
                    });
                    // The frame itself belongs to the turn it opens.
                    if let Some(Event::Frame(frame)) = out.first_mut() {
                        frame.turn = w.turns;
                    }
                    out.push(Event::TurnStarted {
                        session: w.session,
                        turn: w.turns,
                        line: line.clone(),
                        at_us: f.at_us,
                    });
                }
            }
            "FunctionCallsStartedFrame" if f.downstream => {
                if let Some(t) = w.turn.as_mut() {
                    t.open_rounds += 1;
                    t.rounds += 1;
                }
            }
            "FunctionCallInProgressFrame" if f.downstream => {
                if let Some(t) = w.turn.as_mut()
                    && t.calls.len() < CALLS_KEPT
                {
                    t.calls.push((
                        p.tool_call_id.clone().unwrap_or_default(),
                        p.function_name.clone().unwrap_or_default(),
                        p.arguments.clone().unwrap_or_default(),
                        f.at_us,
                    ));
                }
            }
            "FunctionCallResultFrame" if f.downstream => {
                let session = w.session;
                if let Some(t) = w.turn.as_mut() {
                    let id = p.tool_call_id.clone().unwrap_or_default();
                    let started = t
                        .calls
                        .iter()
                        .position(|c| c.0 == id)
                        .map(|i| t.calls.remove(i));
                    let (name, arguments, started_us) = match started {
                        Some((_, name, args, at)) => (name, args, at),
                        None => (
                            p.function_name.clone().unwrap_or_default(),
                            p.arguments.clone().unwrap_or_default(),
                            f.at_us,
                        ),
                    };
                    let result = p.result.clone().unwrap_or_default();
                    t.done_calls += 1;
                    out.push(Event::ToolCall(ToolCallEvent {
                        session,
                        turn: t.id,
                        name,
                        duration_us: f.at_us.saturating_sub(started_us),
                        result_bytes: result.len(),
                        error: None,
                        arguments,
                        result: carried(&result),
                        started_us,
                        retold: false,
                        by_hand: false,
                    }));
                }
            }
            "LLMFullResponseEndFrame" if f.downstream => {
                let done = w.turn.as_mut().is_some_and(|t| {
                    if t.open_rounds > 0 {
                        t.open_rounds -= 1;
                        false
                    } else {
                        true
                    }
                });
                if done && let Some(ended) = w.end_turn("completed", f.at_us) {
                    out.push(ended);
                }
            }
            "ErrorFrame" => {
                let reason = format!(
                    "error: {}",
                    p.error
                        .as_deref()
                        .unwrap_or("the pipeline reported an error")
                );
                if let Some(ended) = w.end_turn(&reason, f.at_us) {
                    out.push(ended);
                }
            }
            "InterruptionFrame" => {
                if let Some(ended) = w.end_turn("interrupted", f.at_us) {
                    out.push(ended);
                }
            }
            "EndFrame" | "CancelFrame" if f.downstream => {
                if let Some(ended) = w.end_turn("session_ended", f.at_us) {
                    out.push(ended);
                }
                w.ended = true;
                out.push(Event::Session(SessionEvent {
                    session: w.session,
                    handle_prefix: String::new(),
                    opener: SessionOpener::Api,
                    closed: Some(format!("pipeline ended ({class})")),
                    at_us: f.at_us,
                    restored: false,
                    began_us: None,
                    taken_from: None,
                    greeting: None,
                }));
            }
            _ => {}
        }
        out
    }

    /// The events for one decoded record other than a frame or a worker (none).
    pub fn other(&mut self, _record: &Record) -> Vec<Event> {
        Vec::new()
    }
}

impl WorkerState {
    fn set_topology(&mut self, worker: &Worker) {
        self.down.clear();
        self.up.clear();
        for (from, to) in &worker.connections {
            self.down.insert(from.clone(), to.clone());
            self.up.insert(to.clone(), from.clone());
        }
    }

    /// Where a frame `from` pushes goes: the next processor that way, through a pipeline's
    /// own source or sink when `from` is a pipeline (whisker lists its inner processors).
    fn next(&self, from: &str, downstream: bool) -> String {
        let (links, inner, end) = if downstream {
            (&self.down, "::Sink", "sink")
        } else {
            (&self.up, "::Source", "source")
        };
        links
            .get(from)
            .or_else(|| links.get(&format!("{from}{inner}")))
            .cloned()
            .unwrap_or_else(|| end.to_string())
    }

    /// Whether the frame `name` is seen for the first time, and its id: the sequence number
    /// `seq` of its first record (the newest [`SEEN_KEPT`] names are remembered).
    fn first_sight(&mut self, name: &str, seq: u64) -> (bool, u64) {
        if let Some(id) = self.seen.get(name) {
            return (false, *id);
        }
        if self.seen_order.len() == SEEN_KEPT
            && let Some(old) = self.seen_order.pop_front()
        {
            self.seen.remove(&old);
        }
        self.seen.insert(name.to_string(), seq);
        self.seen_order.push_back(name.to_string());
        (true, seq)
    }

    fn end_turn(&mut self, reason: &str, at_us: u64) -> Option<Event> {
        let t = self.turn.take()?;
        Some(Event::TurnEnded(TurnEndEvent {
            session: self.session,
            turn: t.id,
            reason: reason.to_string(),
            reply_bytes: t.reply_bytes,
            rounds: t.rounds,
            tool_calls: t.done_calls,
            first_piece_us: t.first_piece_us.map(|f| f.saturating_sub(t.started_us)),
            total_us: at_us.saturating_sub(t.started_us),
            clock: Some(TurnClock::Whisker),
            ..TurnEndEvent::default()
        }))
    }
}

/// `LLMTextFrame#3` → `LLMTextFrame`.
pub fn class_of(name: &str) -> &str {
    match name.rsplit_once('#') {
        Some((class, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => class,
        _ => name,
    }
}

/// pipecat's kind of a frame class, as far as its name tells (`data` when unknown).
fn kind_of(class: &str) -> &'static str {
    const SYSTEM: &[&str] = &[
        "StartFrame",
        "CancelFrame",
        "ErrorFrame",
        "FatalErrorFrame",
        "InterruptionFrame",
        "MetricsFrame",
        "FunctionCallsStartedFrame",
        "FunctionCallCancelFrame",
        "UserStartedSpeakingFrame",
        "UserStoppedSpeakingFrame",
        "BotStartedSpeakingFrame",
        "BotStoppedSpeakingFrame",
        "OutputTransportMessageUrgentFrame",
        "OutputTransportReadyFrame",
        "SpeechControlParamsFrame",
        "LLMServiceMetadataFrame",
        "UserTurnInferenceCompletedFrame",
    ];
    const CONTROL: &[&str] = &[
        "EndFrame",
        "StopFrame",
        "LLMFullResponseStartFrame",
        "LLMFullResponseEndFrame",
        "FunctionCallInProgressFrame",
        "TTSStartedFrame",
        "TTSStoppedFrame",
        "HeartbeatFrame",
        "PipelineFlushFrame",
        "LLMConfigureOutputFrame",
        "LLMContextAssistantTimestampFrame",
    ];
    if SYSTEM.contains(&class) {
        "system"
    } else if CONTROL.contains(&class) {
        "control"
    } else {
        "data"
    }
}

/// A short rendering of a frame for the Frames pane: its text, its call, its line, its name.
fn detail(f: &FrameRecord) -> String {
    let p = &f.payload;
    let mut out = if let Some(text) = &p.text {
        text.clone()
    } else if let Some(name) = &p.function_name {
        match &p.result {
            Some(r) => format!("{name}({}) → {r}", p.arguments.as_deref().unwrap_or("")),
            None => format!("{name}({})", p.arguments.as_deref().unwrap_or("")),
        }
    } else if let Some(line) = &p.user_line {
        format!("user: {line}")
    } else if p.calls > 0 {
        format!("{} call(s)", p.calls)
    } else if let Some(e) = &p.error {
        e.clone()
    } else {
        f.name.clone()
    };
    if out.len() > 512 {
        let mut end = 512;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out.push('…');
    }
    out
}

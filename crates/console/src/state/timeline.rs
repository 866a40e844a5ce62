//! Each turn's timeline, for the turn waterfall: model requests (start, first piece,
//! duration), tool calls (start, duration; parallel ones overlap), reply pieces, progress
//! notifications, the end reason and, for a turn that became an MCP task, the task's life
//! (created, its polls, its result ready, collected), all as µs offsets from the turn's start.
//!
//! Folded from events only, so a live console and a replay draw the same waterfall. Bounded:
//! [`TIMELINES_KEPT`] turns and the console budget's share for timelines (the oldest turn is
//! forgotten first), [`MARKS_KEPT`] piece and progress marks each per turn (beyond, every
//! other mark is let go and they are placed more sparsely, so the marks still span the turn),
//! [`ROWS_KEPT`] requests and calls per turn. Never reads a clock.

use std::collections::{BTreeMap, VecDeque};

/// Turns whose timelines are kept (the oldest is forgotten first).
pub const TIMELINES_KEPT: usize = 500;
/// Piece and progress marks kept per turn.
pub const MARKS_KEPT: usize = 512;
/// Model requests and tool calls kept per turn (more are counted, not drawn).
pub const ROWS_KEPT: usize = 256;

/// One model request of a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Start, µs after the turn's start.
    pub start: u64,
    /// Time to the first piece, when any came.
    pub first_piece: Option<u64>,
    /// Duration.
    pub total: u64,
    /// The error, when it failed.
    pub error: Option<String>,
}

/// One tool call of a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// Tool name.
    pub name: String,
    /// Start, µs after the turn's start.
    pub start: u64,
    /// Duration.
    pub total: u64,
    /// Whether it failed.
    pub failed: bool,
}

/// The life of the task a turn became, as offsets from the turn's start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskLife {
    /// The first 8 characters of its id.
    pub id: String,
    /// When the `chat` call answered with the task.
    pub created: u64,
    /// `tasks/get` offsets (the first [`MARKS_KEPT`]).
    pub polls: Vec<u64>,
    /// Polls in all.
    pub poll_count: u64,
    /// When its result was ready (or it was cancelled).
    pub ended: Option<u64>,
    /// When a poll first handed the result over.
    pub collected: Option<u64>,
    /// `working`, `completed` or `cancelled`.
    pub status: String,
}

/// One turn's timeline.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// The turn's start, µs since the epoch.
    pub started_us: u64,
    /// Model requests in order.
    pub requests: Vec<Request>,
    /// Tool calls in order of completion.
    pub calls: Vec<Call>,
    /// Reply pieces' offsets (at most [`MARKS_KEPT`], spread over the turn).
    pub pieces: Marks,
    /// Pieces in all.
    pub piece_count: u64,
    /// Progress notifications' offsets (at most [`MARKS_KEPT`], spread over the turn).
    pub progress: Marks,
    /// Progress notifications in all.
    pub progress_count: u64,
    /// Requests and calls not kept beyond [`ROWS_KEPT`].
    pub rows_left_out: u64,
    /// Why it ended, once it has.
    pub end: Option<String>,
    /// Its total, once it ended.
    pub total: Option<u64>,
    /// The task it became, if it did.
    pub task: Option<TaskLife>,
}

/// Offsets of marks (µs after the turn's start), at most [`MARKS_KEPT`]: when full, every
/// other one is let go and only every second mark from then on is placed, so a long turn's
/// marks thin out evenly instead of stopping at its start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Marks {
    at: Vec<u64>,
    /// Place one mark in `stride` (a power of two).
    stride: u64,
    /// Marks seen.
    seen: u64,
}

impl Marks {
    fn push(&mut self, offset: u64) {
        let stride = self.stride.max(1);
        if self.seen.is_multiple_of(stride) {
            if self.at.len() == MARKS_KEPT {
                let mut i = 0;
                self.at.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride = stride * 2;
            }
            if self.seen.is_multiple_of(self.stride.max(1)) {
                self.at.push(offset);
            }
        }
        self.seen += 1;
    }

    /// The offsets placed, in order.
    pub fn offsets(&self) -> &[u64] {
        &self.at
    }

    /// The latest offset placed.
    pub fn last(&self) -> Option<u64> {
        self.at.last().copied()
    }

    fn bytes(&self) -> usize {
        self.at.capacity() * 8
    }
}

impl Timeline {
    /// About how many bytes it holds.
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.requests.capacity() * std::mem::size_of::<Request>()
            + self
                .requests
                .iter()
                .map(|r| r.error.as_ref().map_or(0, String::len))
                .sum::<usize>()
            + self.calls.capacity() * std::mem::size_of::<Call>()
            + self.calls.iter().map(|c| c.name.len()).sum::<usize>()
            + self.pieces.bytes()
            + self.progress.bytes()
            + self.end.as_ref().map_or(0, String::len)
            + self
                .task
                .as_ref()
                .map_or(0, |t| t.id.len() + t.status.len() + t.polls.capacity() * 8)
    }

    /// The span the waterfall covers: the total when ended, else the latest mark.
    pub fn span(&self) -> u64 {
        let latest = self
            .requests
            .iter()
            .map(|r| r.start.saturating_add(r.total))
            .chain(self.calls.iter().map(|c| c.start.saturating_add(c.total)))
            .chain(self.pieces.last())
            .chain(self.progress.last())
            .chain(self.task.iter().flat_map(|t| {
                t.polls
                    .last()
                    .copied()
                    .into_iter()
                    .chain(t.ended)
                    .chain(t.collected)
            }))
            .max()
            .unwrap_or(0);
        self.total.unwrap_or(0).max(latest).max(1)
    }

    /// The model request still running, drawn before its event arrives (a request's event
    /// comes when it ends): while the turn runs and the model is what it waits for, that is
    /// before any request ended, after the last tool calls ended, or while pieces stream after
    /// the last request ended. It runs from then to the latest mark; `first_piece` is the first
    /// piece after its start.
    pub fn in_flight(&self) -> Option<Request> {
        if self.end.is_some() {
            return None;
        }
        let last_request = self.requests.iter().map(|r| r.start + r.total).max();
        let last_call = self.calls.iter().map(|c| c.start + c.total).max();
        let start = last_request.max(last_call).unwrap_or(0);
        let first = self.pieces.offsets().iter().find(|p| **p >= start).copied();
        let waiting_on_model = match (last_request, last_call) {
            (None, _) => true,
            (Some(r), Some(c)) if c >= r => true,
            _ => first.is_some(),
        };
        waiting_on_model.then(|| Request {
            start,
            first_piece: first.map(|f| f - start),
            total: self.span().saturating_sub(start),
            error: None,
        })
    }

    fn offset(&self, at_us: u64) -> u64 {
        at_us.saturating_sub(self.started_us)
    }
}

/// Every kept turn's timeline, by (session, turn).
#[derive(Debug, Clone)]
pub struct Timelines {
    turns: BTreeMap<(u64, u64), Timeline>,
    order: VecDeque<(u64, u64)>,
    open: BTreeMap<u64, u64>,
    /// Bytes of the timelines kept (as [`Timeline::bytes`] counted them when they changed).
    bytes: usize,
    max_bytes: usize,
    /// Turns forgotten to stay within the bounds.
    pub dropped: u64,
}

impl Default for Timelines {
    fn default() -> Self {
        Self::new(usize::MAX)
    }
}

impl Timelines {
    /// No timelines yet, at most `max_bytes` of them.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            turns: BTreeMap::new(),
            order: VecDeque::new(),
            open: BTreeMap::new(),
            bytes: 0,
            max_bytes,
            dropped: 0,
        }
    }

    /// Changes the byte bound, forgetting the oldest turns while over it.
    pub fn set_max_bytes(&mut self, max_bytes: usize) {
        self.max_bytes = max_bytes;
        self.trim();
    }

    /// Bytes of the timelines kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn trim(&mut self) {
        while (self.order.len() > TIMELINES_KEPT || self.bytes > self.max_bytes)
            && self.order.len() > 1
        {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(t) = self.turns.remove(&old) {
                self.bytes -= t.bytes();
                self.dropped += 1;
            }
        }
    }

    /// Changes one turn's timeline, keeping the byte count and the bound.
    fn change(&mut self, key: (u64, u64), f: impl FnOnce(&mut Timeline)) {
        if let Some(t) = self.turns.get_mut(&key) {
            let before = t.bytes();
            f(t);
            self.bytes = self.bytes + t.bytes() - before;
            self.trim();
        }
    }

    /// A turn started.
    pub fn started(&mut self, session: u64, turn: u64, at_us: u64) {
        let timeline = Timeline {
            started_us: at_us,
            ..Timeline::default()
        };
        self.bytes += timeline.bytes();
        if let Some(old) = self.turns.insert((session, turn), timeline) {
            // The same turn again (a hand-edited file): the order already has it.
            self.bytes -= old.bytes();
        } else {
            self.order.push_back((session, turn));
        }
        self.open.insert(session, turn);
        self.trim();
    }

    /// Sessions with a turn open.
    pub fn open_sessions(&self) -> usize {
        self.open.len()
    }

    /// Forgets which turn of `session` is open (its row was forgotten).
    pub fn forget_open(&mut self, session: u64) {
        self.open.remove(&session);
    }

    /// Keeps the open turns of at most `n` sessions (the lowest-numbered go first).
    pub fn keep_open_at_most(&mut self, n: usize) {
        while self.open.len() > n {
            self.open.pop_first();
        }
    }

    /// A model request finished (`at_us` its start; 0 when the file did not keep it).
    pub fn request(
        &mut self,
        key: (u64, u64),
        at_us: u64,
        first: Option<u64>,
        total: u64,
        error: Option<&str>,
    ) {
        self.change(key, |t| {
            let start = if at_us == 0 {
                t.requests
                    .last()
                    .map_or(0, |r| r.start.saturating_add(r.total))
            } else {
                t.offset(at_us)
            };
            if t.requests.len() >= ROWS_KEPT {
                t.rows_left_out += 1;
                return;
            }
            t.requests.push(Request {
                start,
                first_piece: first,
                total,
                error: error.map(str::to_string),
            });
        });
    }

    /// A tool call finished (`started_us` 0 when unknown: placed after the last request).
    pub fn call(&mut self, key: (u64, u64), name: &str, started_us: u64, total: u64, failed: bool) {
        self.change(key, |t| {
            let start = if started_us == 0 {
                t.requests
                    .last()
                    .map_or(0, |r| r.start.saturating_add(r.total))
            } else {
                t.offset(started_us)
            };
            if t.calls.len() >= ROWS_KEPT {
                t.rows_left_out += 1;
                return;
            }
            t.calls.push(Call {
                name: name.to_string(),
                start,
                total,
                failed,
            });
        });
    }

    /// A reply piece reached the output.
    pub fn piece(&mut self, key: (u64, u64), at_us: u64) {
        self.change(key, |t| {
            t.piece_count += 1;
            let at = t.offset(at_us);
            t.pieces.push(at);
        });
    }

    /// A progress notification went to the session's caller (counted in its open turn).
    pub fn progress(&mut self, session: u64, at_us: u64) {
        let Some(turn) = self.open.get(&session).copied() else {
            return;
        };
        self.change((session, turn), |t| {
            t.progress_count += 1;
            let at = t.offset(at_us);
            t.progress.push(at);
        });
    }

    /// A turn ended.
    pub fn ended(&mut self, key: (u64, u64), reason: &str, total: u64) {
        self.change(key, |t| {
            t.end = Some(reason.to_string());
            t.total = Some(total);
        });
        if self.open.get(&key.0) == Some(&key.1) {
            self.open.remove(&key.0);
        }
    }

    /// A task of the turn changed (a poll, its end, its collection).
    pub fn task(&mut self, key: (u64, u64), e: &turnscope::observe::TaskEvent) {
        use turnscope::observe::TaskChange;
        self.change(key, |t| {
            let at = t.offset(e.at_us);
            let task = match &mut t.task {
                Some(task) if e.change != TaskChange::Created => task,
                task => task.insert(TaskLife {
                    id: e.task.clone(),
                    created: at,
                    ..TaskLife::default()
                }),
            };
            task.status.clear();
            task.status.push_str(&e.status);
            match e.change {
                TaskChange::Polled => {
                    task.poll_count += 1;
                    if task.polls.len() < MARKS_KEPT {
                        task.polls.push(at);
                    }
                }
                TaskChange::Ended | TaskChange::HandedOver | TaskChange::Cancelled => {
                    task.ended.get_or_insert(at);
                }
                TaskChange::Collected => {
                    task.collected.get_or_insert(at);
                }
                TaskChange::Created | TaskChange::Removed => {}
            }
        });
    }

    /// One turn's timeline.
    pub fn get(&self, session: u64, turn: u64) -> Option<&Timeline> {
        self.turns.get(&(session, turn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_offsets_from_the_turn_start() {
        let mut t = Timelines::default();
        t.started(1, 1, 1_000_000);
        t.request((1, 1), 1_000_100, Some(50), 400, None);
        t.call((1, 1), "clock", 1_000_600, 30, false);
        t.call((1, 1), "echo", 1_000_600, 10, true);
        t.piece((1, 1), 1_000_200);
        t.progress(1, 1_000_210);
        t.ended((1, 1), "completed", 900);
        let tl = t.get(1, 1).unwrap();
        assert_eq!(tl.requests[0].start, 100);
        assert_eq!(tl.calls[0].start, 600);
        assert_eq!(tl.calls[1].start, 600);
        assert_eq!(tl.pieces.offsets(), [200]);
        assert_eq!(tl.progress.offsets(), [210]);
        assert_eq!(tl.span(), 900);
        t.progress(1, 1_000_999);
        assert_eq!(t.get(1, 1).unwrap().progress_count, 1);
    }

    #[test]
    fn a_long_turns_marks_thin_out_evenly_and_timelines_stay_within_their_bytes() {
        let mut t = Timelines::new(64 * 1024);
        t.started(1, 1, 0);
        for n in 0..10_000u64 {
            t.piece((1, 1), n * 10);
        }
        let tl = t.get(1, 1).unwrap();
        assert_eq!(tl.piece_count, 10_000);
        let marks = tl.pieces.offsets();
        assert!(
            marks.len() <= MARKS_KEPT && marks.len() > MARKS_KEPT / 4,
            "{}",
            marks.len()
        );
        assert_eq!(marks[0], 0);
        assert!(
            *marks.last().unwrap() > 90_000,
            "the marks reach the turn's end"
        );
        assert!(marks.windows(2).all(|w| w[0] < w[1]));
        for turn in 2..1_000 {
            t.started(1, turn, 0);
            for n in 0..300 {
                t.piece((1, turn), n);
            }
        }
        assert!(t.bytes() <= 64 * 1024, "{}", t.bytes());
        assert!(t.dropped > 900);
        assert!(t.get(1, 999).is_some() && t.get(1, 1).is_none());
    }

    #[test]
    fn the_request_in_flight_is_the_one_the_turn_waits_on() {
        let mut t = Timelines::new(64 * 1024);
        t.started(1, 1, 1_000);
        let key = (1, 1);
        let waiting = t.get(1, 1).unwrap().in_flight().unwrap();
        assert_eq!((waiting.start, waiting.first_piece), (0, None));
        // The first request asked for a tool; the tool runs: nothing of the model in flight.
        t.request(key, 1_000, None, 50, None);
        assert_eq!(t.get(1, 1).unwrap().in_flight(), None);
        // The tool ended: the second request runs from there, streaming once pieces come.
        t.call(key, "clock", 1_050, 10, false);
        assert_eq!(t.get(1, 1).unwrap().in_flight().unwrap().start, 60);
        t.piece(key, 1_100);
        t.piece(key, 1_130);
        let streaming = t.get(1, 1).unwrap().in_flight().unwrap();
        assert_eq!(
            (streaming.start, streaming.first_piece, streaming.total),
            (60, Some(40), 70)
        );
        t.ended(key, "completed", 140);
        assert_eq!(t.get(1, 1).unwrap().in_flight(), None);
    }
}

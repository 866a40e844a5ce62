//! Each turn's timeline, for the turn waterfall: model requests (start, first piece,
//! duration), tool calls (start, duration; parallel ones overlap), reply pieces, progress
//! notifications, the end reason and, for a turn that became an MCP task, the task's life
//! (created, its polls, its result ready, collected), all as µs offsets from the turn's start.
//!
//! Folded from events only, so a live console and a replay draw the same waterfall. Bounded:
//! [`TIMELINES_KEPT`] turns, [`MARKS_KEPT`] piece and progress marks each. Never reads a clock.

use std::collections::{BTreeMap, VecDeque};

/// Turns whose timelines are kept (the oldest is forgotten first).
pub const TIMELINES_KEPT: usize = 500;
/// Piece and progress marks kept per turn (more are counted, not placed).
pub const MARKS_KEPT: usize = 1_024;

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
    /// Reply pieces' offsets (the first [`MARKS_KEPT`]).
    pub pieces: Vec<u64>,
    /// Pieces in all.
    pub piece_count: u64,
    /// Progress notifications' offsets (the first [`MARKS_KEPT`]).
    pub progress: Vec<u64>,
    /// Progress notifications in all.
    pub progress_count: u64,
    /// Why it ended, once it has.
    pub end: Option<String>,
    /// Its total, once it ended.
    pub total: Option<u64>,
    /// The task it became, if it did.
    pub task: Option<TaskLife>,
}

impl Timeline {
    /// The span the waterfall covers: the total when ended, else the latest mark.
    pub fn span(&self) -> u64 {
        let latest = self
            .requests
            .iter()
            .map(|r| r.start + r.total)
            .chain(self.calls.iter().map(|c| c.start + c.total))
            .chain(self.pieces.last().copied())
            .chain(self.progress.last().copied())
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

    fn offset(&self, at_us: u64) -> u64 {
        at_us.saturating_sub(self.started_us)
    }
}

/// Every kept turn's timeline, by (session, turn).
#[derive(Debug, Default)]
pub struct Timelines {
    turns: BTreeMap<(u64, u64), Timeline>,
    order: VecDeque<(u64, u64)>,
    open: BTreeMap<u64, u64>,
}

impl Timelines {
    /// A turn started.
    pub fn started(&mut self, session: u64, turn: u64, at_us: u64) {
        if self.order.len() == TIMELINES_KEPT
            && let Some(old) = self.order.pop_front()
        {
            self.turns.remove(&old);
        }
        self.order.push_back((session, turn));
        self.turns.insert(
            (session, turn),
            Timeline {
                started_us: at_us,
                ..Timeline::default()
            },
        );
        self.open.insert(session, turn);
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
        if let Some(t) = self.turns.get_mut(&key) {
            let start = if at_us == 0 {
                t.requests.last().map_or(0, |r| r.start + r.total)
            } else {
                t.offset(at_us)
            };
            t.requests.push(Request {
                start,
                first_piece: first,
                total,
                error: error.map(str::to_string),
            });
        }
    }

    /// A tool call finished (`started_us` 0 when unknown: placed after the last request).
    pub fn call(&mut self, key: (u64, u64), name: &str, started_us: u64, total: u64, failed: bool) {
        if let Some(t) = self.turns.get_mut(&key) {
            let start = if started_us == 0 {
                t.requests.last().map_or(0, |r| r.start + r.total)
            } else {
                t.offset(started_us)
            };
            t.calls.push(Call {
                name: name.to_string(),
                start,
                total,
                failed,
            });
        }
    }

    /// A reply piece reached the output.
    pub fn piece(&mut self, key: (u64, u64), at_us: u64) {
        if let Some(t) = self.turns.get_mut(&key) {
            t.piece_count += 1;
            if t.pieces.len() < MARKS_KEPT {
                let at = t.offset(at_us);
                t.pieces.push(at);
            }
        }
    }

    /// A progress notification went to the session's caller (counted in its open turn).
    pub fn progress(&mut self, session: u64, at_us: u64) {
        let Some(turn) = self.open.get(&session).copied() else {
            return;
        };
        if let Some(t) = self.turns.get_mut(&(session, turn)) {
            t.progress_count += 1;
            if t.progress.len() < MARKS_KEPT {
                let at = t.offset(at_us);
                t.progress.push(at);
            }
        }
    }

    /// A turn ended.
    pub fn ended(&mut self, key: (u64, u64), reason: &str, total: u64) {
        if let Some(t) = self.turns.get_mut(&key) {
            t.end = Some(reason.to_string());
            t.total = Some(total);
        }
        if self.open.get(&key.0) == Some(&key.1) {
            self.open.remove(&key.0);
        }
    }

    /// A task of the turn changed (a poll, its end, its collection).
    pub fn task(&mut self, key: (u64, u64), e: &turnscope::observe::TaskEvent) {
        use turnscope::observe::TaskChange;
        let Some(t) = self.turns.get_mut(&key) else {
            return;
        };
        let at = t.offset(e.at_us);
        if e.change == TaskChange::Created || t.task.is_none() {
            t.task = Some(TaskLife {
                id: e.task.clone(),
                created: at,
                ..TaskLife::default()
            });
        }
        let Some(task) = t.task.as_mut() else {
            return;
        };
        task.status = e.status.to_string();
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
        assert_eq!(tl.pieces, vec![200]);
        assert_eq!(tl.progress, vec![210]);
        assert_eq!(tl.span(), 900);
        t.progress(1, 1_000_999);
        assert_eq!(t.get(1, 1).unwrap().progress_count, 1);
    }
}

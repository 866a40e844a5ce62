//! A replay's tape: the events of an events file and where the console stands in them; `[`/`]`
//! step turn end by turn end and `,`/`.` step inside a turn.
//!
//! A step costs the events between the two places, never a fold from the file's start: on, the
//! events are folded into the state shown; back, the state is taken from the nearest earlier
//! checkpoint and folded on from there. Checkpoints are copies of the state (sharing the kept
//! events), bounded in number: [`SEGMENTS`] coarse ones split the file into segments, and
//! within the segment where the console stands [`NEAR_KEPT`] near ones, at least
//! [`CHECKPOINT_GAP`] events apart. A step back folds at most one near gap (plus the step);
//! entering another segment backwards folds that segment once. For files up to
//! `SEGMENTS × NEAR_KEPT × CHECKPOINT_GAP` events (about 262,000) a step back folds at most
//! [`CHECKPOINT_GAP`] events more than the step itself; beyond, the gaps grow with the file
//! (1/256 of it) so that memory stays bounded.

use std::collections::BTreeMap;

use turnscope::observe::Event;

use super::ConsoleState;

/// Events between the closest checkpoints.
pub const CHECKPOINT_GAP: usize = 1024;
/// Most coarse checkpoints (segments of the file).
pub const SEGMENTS: usize = 16;
/// Most near checkpoints, within one segment.
pub const NEAR_KEPT: usize = 16;

/// A replay's events and where the console stands in them.
pub struct Tape {
    events: Vec<Event>,
    /// Event counts at which a turn ended, and the file's end.
    turn_ends: Vec<usize>,
    /// Event counts after each step inside a turn (a turn started, a model request, a reply
    /// piece, a tool call, a turn ended), and the file's end.
    fine: Vec<usize>,
    /// How many events are folded into the state shown.
    pub pos: usize,
    /// Where the console stands, for the header.
    pub label: String,
    blank: ConsoleState,
    /// Events per segment.
    segment: usize,
    /// Events between near checkpoints.
    gap: usize,
    /// The state at the start of each segment but the first (which starts blank).
    coarse: Vec<ConsoleState>,
    /// The segment the near checkpoints belong to.
    near_segment: usize,
    /// States within that segment, by event count.
    near: BTreeMap<usize, ConsoleState>,
    /// Events folded since the tape was made (for the tests of a step's cost).
    pub folded: u64,
}

/// A few words on an event the tape can stop after, or `None` when it is not a stop.
fn stop_words(event: &Event) -> Option<String> {
    Some(match event {
        Event::TurnStarted { session, turn, .. } => format!("#{session} turn {turn} started"),
        Event::ModelRequest {
            session,
            turn,
            error,
            ..
        } => format!(
            "#{session} turn {turn}: model request {}",
            if error.is_some() { "failed" } else { "done" }
        ),
        Event::ToolCall(c) => format!("#{} turn {}: tool {} done", c.session, c.turn, c.name),
        Event::Frame(f) if f.name == "TextPiece" && f.to == "output" => {
            format!("#{} turn {}: a reply piece", f.session, f.turn)
        }
        Event::TurnEnded(t) => format!("#{} turn {} ended", t.session, t.turn),
        _ => return None,
    })
}

fn is_stop(event: &Event) -> bool {
    match event {
        Event::TurnStarted { .. }
        | Event::ModelRequest { .. }
        | Event::ToolCall(_)
        | Event::TurnEnded(_) => true,
        Event::Frame(f) => f.name == "TextPiece" && f.to == "output",
        _ => false,
    }
}

impl Tape {
    /// A tape over `events`, folded from `blank` (the header and notes a replay starts with),
    /// and the state at its end, where a replay opens.
    pub fn new(events: Vec<Event>, blank: ConsoleState) -> (Tape, ConsoleState) {
        let end = events.len();
        let mut turn_ends = Vec::new();
        let mut fine = Vec::new();
        for (i, e) in events.iter().enumerate() {
            if is_stop(e) {
                fine.push(i + 1);
            }
            if matches!(e, Event::TurnEnded(_)) {
                turn_ends.push(i + 1);
            }
        }
        for stops in [&mut turn_ends, &mut fine] {
            if stops.last() != Some(&end) {
                stops.push(end);
            }
        }
        let segment = end.div_ceil(SEGMENTS).max(NEAR_KEPT * CHECKPOINT_GAP);
        let mut tape = Tape {
            events,
            turn_ends,
            fine,
            pos: 0,
            label: String::new(),
            blank: blank.clone(),
            segment,
            gap: segment / NEAR_KEPT,
            coarse: Vec::new(),
            near_segment: 0,
            near: BTreeMap::new(),
            folded: 0,
        };
        let mut state = tape.fresh();
        tape.fold(&mut state, 0, end);
        tape.pos = end;
        state.age_rows();
        tape.relabel();
        (tape, state)
    }

    fn fresh(&self) -> ConsoleState {
        let mut state = ConsoleState::with_budget(self.blank.header.clone(), self.blank.budget());
        state.tools_note = self.blank.tools_note.clone();
        state
    }

    /// How many turn-end stops (the file's end included).
    pub fn stops(&self) -> usize {
        self.turn_ends.len()
    }

    /// Moves `delta` turn ends, folding `state` (the one shown, at `pos`) to there; `false`
    /// when it could not move.
    pub fn step(&mut self, delta: isize, state: &mut ConsoleState) -> bool {
        let to = next_stop(&self.turn_ends, self.pos, delta);
        self.go(to, state)
    }

    /// Moves `delta` steps inside turns (pieces, tool calls, requests); `false` when it
    /// could not move.
    pub fn scrub(&mut self, delta: isize, state: &mut ConsoleState) -> bool {
        let to = next_stop(&self.fine, self.pos, delta);
        self.go(to, state)
    }

    fn go(&mut self, to: Option<usize>, state: &mut ConsoleState) -> bool {
        let Some(to) = to.filter(|to| *to != self.pos) else {
            return false;
        };
        let k = to / self.segment;
        if self.near_segment != k {
            self.near.clear();
            self.near_segment = k;
        }
        // The latest checkpoint at or before `to`, unless the state shown is nearer.
        let start = k * self.segment;
        let (from, base) = match self.near.range(..=to).next_back() {
            Some((at, s)) => (*at, Some(s)),
            None => (start, k.checked_sub(1).and_then(|i| self.coarse.get(i))),
        };
        let from = if self.pos < to && self.pos >= from {
            self.pos
        } else {
            *state = match base {
                Some(s) => s.clone(),
                None if from == 0 => self.fresh(),
                // A segment's coarse checkpoint is always made by the first fold.
                None => return false,
            };
            from
        };
        self.fold(state, from, to);
        self.pos = to;
        state.age_rows();
        self.relabel();
        true
    }

    /// Folds events `from..to` into `state`, leaving a coarse checkpoint at each segment's
    /// start the first time, and near ones every gap within the segment of the near ones.
    fn fold(&mut self, state: &mut ConsoleState, from: usize, to: usize) {
        for at in from..to {
            state.apply(&self.events[at]);
            self.folded += 1;
            let done = at + 1;
            if done.is_multiple_of(self.segment) {
                let k = done / self.segment;
                if self.coarse.len() < k {
                    self.coarse.push(state.clone());
                }
                self.near.clear();
                self.near_segment = k;
            } else if done.is_multiple_of(self.gap)
                && done / self.segment == self.near_segment
                && !self.near.contains_key(&done)
            {
                self.near.insert(done, state.clone());
            }
        }
    }

    /// How many checkpoints are kept.
    pub fn checkpoints(&self) -> usize {
        self.coarse.len() + self.near.len()
    }

    /// Where the near checkpoints are (event counts), for a failing test to say.
    pub fn checkpoint_places(&self) -> Vec<usize> {
        self.near.keys().copied().collect()
    }

    fn relabel(&mut self) {
        let end = self.events.len();
        self.label = if self.pos == end {
            "the end ([ or , steps back)".to_string()
        } else if let Some(k) = self.turn_ends.iter().position(|p| *p == self.pos) {
            format!(
                "turn end {} of {} ([ ] step, , . scrub)",
                k + 1,
                self.turn_ends.len() - 1
            )
        } else {
            let what = self
                .pos
                .checked_sub(1)
                .and_then(|i| stop_words(&self.events[i]));
            // The position first: a narrow header cuts the end.
            format!(
                "event {}/{end}: {} (, . scrub)",
                self.pos,
                what.unwrap_or_default()
            )
        };
    }
}

/// The first stop after `pos` (`delta` > 0) or the last one before it; `None` past the ends.
fn next_stop(stops: &[usize], pos: usize, delta: isize) -> Option<usize> {
    let mut at = pos;
    for _ in 0..delta.unsigned_abs() {
        let i = stops.partition_point(|s| *s <= at);
        at = if delta > 0 {
            *stops.get(i)?
        } else {
            let before = stops.partition_point(|s| *s < at);
            *stops.get(before.checked_sub(1)?)?
        };
    }
    Some(at)
}

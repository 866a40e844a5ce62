//! A replay's tape: the events of an events file and where the console stands in them; `[`/`]`
//! step turn end by turn end and `,`/`.` step inside a turn, each step folding the events again
//! up to there into a fresh [`ConsoleState`].

use turnscope::observe::Event;

use super::ConsoleState;

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

impl Tape {
    /// A tape over `events`, folded from `blank` (the header and notes a replay starts with).
    pub fn new(events: Vec<Event>, blank: ConsoleState) -> Tape {
        let end = events.len();
        let mut turn_ends = Vec::new();
        let mut fine = Vec::new();
        for (i, e) in events.iter().enumerate() {
            if stop_words(e).is_some() {
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
        let mut tape = Tape {
            events,
            turn_ends,
            fine,
            pos: end,
            label: String::new(),
            blank,
        };
        tape.relabel();
        tape
    }

    /// How many turn-end stops (the file's end included).
    pub fn stops(&self) -> usize {
        self.turn_ends.len()
    }

    /// Moves `delta` turn ends; `false` when it could not move.
    pub fn step(&mut self, delta: isize) -> bool {
        let to = next_stop(&self.turn_ends, self.pos, delta);
        self.go(to)
    }

    /// Moves `delta` steps inside turns (pieces, tool calls, requests); `false` when it
    /// could not move.
    pub fn scrub(&mut self, delta: isize) -> bool {
        let to = next_stop(&self.fine, self.pos, delta);
        self.go(to)
    }

    fn go(&mut self, to: Option<usize>) -> bool {
        match to {
            Some(pos) if pos != self.pos => {
                self.pos = pos;
                self.relabel();
                true
            }
            _ => false,
        }
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

    /// The state folded up to where the tape stands.
    pub fn state(&self) -> ConsoleState {
        let mut state = ConsoleState::new(self.blank.header.clone());
        state.tools_note = self.blank.tools_note.clone();
        for event in &self.events[..self.pos] {
            state.apply(event);
        }
        state.age_rows();
        state
    }
}

/// The first stop after `pos` (`delta` > 0) or the last one before it; `None` past the ends.
fn next_stop(stops: &[usize], pos: usize, delta: isize) -> Option<usize> {
    let mut at = pos;
    for _ in 0..delta.unsigned_abs() {
        at = if delta > 0 {
            *stops.iter().find(|s| **s > at)?
        } else {
            *stops.iter().rev().find(|s| **s < at)?
        };
    }
    Some(at)
}

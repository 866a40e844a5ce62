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
//!
//! A file's events are not held: the [`Reel`] keeps where each one starts and reads it again
//! when a step folds it, so a replay's memory is the console's own bound, plus each
//! checkpoint's copy of the parts of the state it does not share (transcripts, timelines,
//! progress, the journal: up to 32 copies of those shares), plus eight bytes an event.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

use std::path::Path;

use turnscope::observe::Event;

use super::{ConsoleState, Unreadable};

/// Events between the closest checkpoints.
pub const CHECKPOINT_GAP: usize = 1024;
/// Most coarse checkpoints (segments of the file).
pub const SEGMENTS: usize = 16;
/// Most near checkpoints, within one segment.
pub const NEAR_KEPT: usize = 16;

/// Where a tape's events are.
pub enum Reel {
    /// Held (a text given whole: tests, the fuzzer).
    Held(Vec<Event>),
    /// In the events file, read again when folded: where each good line starts.
    File {
        /// The file, read from `at`.
        reader: BufReader<File>,
        /// The reader's place in the file.
        at: u64,
        /// Where each event's line starts.
        offsets: Vec<u64>,
        /// The line read last (its buffer reused).
        line: Vec<u8>,
    },
}

impl Reel {
    fn len(&self) -> usize {
        match self {
            Reel::Held(events) => events.len(),
            Reel::File { offsets, .. } => offsets.len(),
        }
    }

    /// Gives event `i` to `f`; read again from the file there (a line that no longer parses,
    /// the file changed underneath, is passed over).
    fn with<R>(&mut self, i: usize, f: impl FnOnce(&Event) -> R) -> Option<R> {
        match self {
            Reel::Held(events) => events.get(i).map(f),
            Reel::File {
                reader,
                at,
                offsets,
                line,
            } => {
                let start = *offsets.get(i)?;
                if *at != start {
                    reader.seek(SeekFrom::Start(start)).ok()?;
                }
                line.clear();
                let n = reader.read_until(b'\n', line).ok()?;
                *at = start + n as u64;
                serde_json::from_slice::<Event>(line).ok().as_ref().map(f)
            }
        }
    }
}

/// A replay's events and where the console stands in them.
pub struct Tape {
    events: Reel,
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
        let mut tape = Tape::empty(events.len(), blank);
        let mut state = tape.fresh();
        for e in &events {
            tape.take_in(&mut state, e);
        }
        tape.events = Reel::Held(events);
        tape.finish(state)
    }

    /// A tape over the events file at `path`, read once, line by line (each event folded as
    /// it is read, then let go: [`Reel::File`]), with the lines that could not be read.
    ///
    /// # Errors
    /// The file cannot be read.
    pub fn of_file(
        path: &Path,
        blank: ConsoleState,
    ) -> io::Result<(Tape, ConsoleState, Unreadable)> {
        // Checkpoints are spaced by the file's lines (an event's upper bound), counted first.
        let lines = count_lines(File::open(path)?)?;
        let mut tape = Tape::empty(lines, blank);
        let mut state = tape.fresh();
        let mut reader = BufReader::new(File::open(path)?);
        let (mut offsets, mut unreadable) = (Vec::new(), Unreadable::default());
        let (mut at, mut number, mut line) = (0u64, 0usize, Vec::new());
        loop {
            line.clear();
            // Bytes, not text: a line that is not UTF-8 is one unreadable line, not the end.
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 {
                break;
            }
            number += 1;
            if !line.iter().all(u8::is_ascii_whitespace) {
                match serde_json::from_slice::<Event>(&line) {
                    Ok(e) => {
                        offsets.push(at);
                        tape.take_in(&mut state, &e);
                    }
                    Err(e) => unreadable.add(number, &e),
                }
            }
            at += n as u64;
        }
        tape.events = Reel::File {
            reader,
            at,
            offsets,
            line: Vec::new(),
        };
        // Known only now: told in every state a step may come back to, not just this one.
        for kept in std::iter::once(&mut tape.blank)
            .chain(tape.coarse.iter_mut())
            .chain(tape.near.values_mut())
            .chain(std::iter::once(&mut state))
        {
            if let super::Source::Replay {
                unreadable: said, ..
            } = &mut kept.header.source
            {
                said.clone_from(&unreadable);
            }
        }
        let (tape, state) = tape.finish(state);
        Ok((tape, state, unreadable))
    }

    /// A tape about to take in about `hint` events (its checkpoints' spacing).
    fn empty(hint: usize, blank: ConsoleState) -> Tape {
        let segment = hint.div_ceil(SEGMENTS).max(NEAR_KEPT * CHECKPOINT_GAP);
        Tape {
            events: Reel::Held(Vec::new()),
            turn_ends: Vec::new(),
            fine: Vec::new(),
            pos: 0,
            label: String::new(),
            blank,
            segment,
            gap: segment / NEAR_KEPT,
            coarse: Vec::new(),
            near_segment: 0,
            near: BTreeMap::new(),
            folded: 0,
        }
    }

    /// Folds the next event of the first reading, noting the stops it makes.
    fn take_in(&mut self, state: &mut ConsoleState, e: &Event) {
        let done = self.pos + 1;
        if is_stop(e) {
            self.fine.push(done);
        }
        if matches!(e, Event::TurnEnded(_)) {
            self.turn_ends.push(done);
        }
        state.apply(e);
        self.folded += 1;
        self.checkpoint(state, done);
        self.pos = done;
    }

    /// The first reading done: the file's end is a stop, and the console stands there.
    fn finish(mut self, mut state: ConsoleState) -> (Tape, ConsoleState) {
        let end = self.events.len();
        for stops in [&mut self.turn_ends, &mut self.fine] {
            if stops.last() != Some(&end) {
                stops.push(end);
            }
        }
        self.pos = end;
        state.age_rows();
        self.relabel();
        (self, state)
    }

    fn fresh(&self) -> ConsoleState {
        let mut state = ConsoleState::with_budget(self.blank.header.clone(), self.blank.budget());
        state.tools_note = self.blank.tools_note.clone();
        state
    }

    /// Whether the console stands at the file's end (after its last event nothing happened:
    /// what flowed then has settled).
    pub fn at_end(&self) -> bool {
        self.pos == self.events.len()
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
            self.events.with(at, |e| state.apply(e));
            self.folded += 1;
            self.checkpoint(state, at + 1);
        }
    }

    /// Leaves a checkpoint of `state` (`done` events folded) where one belongs.
    fn checkpoint(&mut self, state: &ConsoleState, done: usize) {
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
                .and_then(|i| self.events.with(i, stop_words).flatten());
            // The position first: a narrow header cuts the end.
            format!(
                "event {}/{end}: {} (, . scrub)",
                self.pos,
                what.unwrap_or_default()
            )
        };
    }
}

/// The lines of a file (its newlines, and a last line without one).
fn count_lines(mut file: File) -> io::Result<usize> {
    let mut buf = vec![0u8; 64 * 1024];
    let (mut lines, mut last) = (0usize, b'\n');
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|b| **b == b'\n').count();
        last = buf[n - 1];
    }
    Ok(lines + usize::from(last != b'\n'))
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

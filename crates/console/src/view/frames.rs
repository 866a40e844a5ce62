//! The Frames pane's view state: which frames it lists (scope, filter, pause), the turn
//! boundaries between them, and the cursor that follows the newest frame or stays put.

use std::cell::Cell;

use crate::state::{ConsoleState, FrameRow};
use crate::view::filter::FrameFilter;

/// A line of the Frames pane: a turn boundary or a frame (an index into the frame source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameLine {
    /// A new turn of a session starts here.
    Boundary {
        /// Session number.
        session: u64,
        /// Turn id.
        turn: u64,
    },
    /// A frame.
    Frame(usize),
}

/// The Frames pane's own state.
#[derive(Debug, Default)]
pub struct FramesView {
    /// The frame under the cursor, by arrival number; `None` follows the newest.
    pub cursor: Option<u64>,
    /// The scroll position.
    pub offset: Cell<usize>,
    /// A frozen copy of the frames while paused.
    pub paused: Option<Vec<FrameRow>>,
    /// The filter in force.
    pub filter: FrameFilter,
    /// The filter line while it is being edited.
    pub editing: Option<crate::view::line_edit::LineEdit>,
    /// Whether every session's frames show (else only the selected one's).
    pub all: bool,
    /// Whether the detail popup is open.
    pub detail: bool,
    /// Whether every link crossing gets a row (else one row per frame, its path folded in).
    pub per_link: bool,
}

/// How far after a frame's first crossing its other crossings are looked for: a frame's
/// hops are published within a few events of each other.
pub const HOP_WINDOW: usize = 256;

/// Where the Frames pane's frames come from.
pub enum FrameSource<'a> {
    /// The live window.
    Live(&'a std::collections::VecDeque<FrameRow>),
    /// The copy taken when paused.
    Paused(&'a [FrameRow]),
}

impl<'a> FrameSource<'a> {
    /// How many frames.
    pub fn len(&self) -> usize {
        match self {
            FrameSource::Live(v) => v.len(),
            FrameSource::Paused(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frame `i` (`i < len()`).
    pub fn get(&self, i: usize) -> &'a FrameRow {
        match self {
            FrameSource::Live(v) => &v[i],
            FrameSource::Paused(v) => &v[i],
        }
    }
}

impl FramesView {
    /// `p`: freezes a copy of the frames, or lets them flow again.
    pub fn toggle_pause(&mut self, state: &ConsoleState) {
        self.paused = match self.paused.take() {
            Some(_) => None,
            None => Some(state.frames().iter().cloned().collect()),
        };
    }

    /// The frames the Frames pane lists: the paused copy or the live window.
    pub fn source<'a>(&'a self, state: &'a ConsoleState) -> FrameSource<'a> {
        match &self.paused {
            Some(frozen) => FrameSource::Paused(frozen),
            None => FrameSource::Live(state.frames()),
        }
    }

    /// The Frames pane's lines: frames passing the scope and the filter (one per frame, or
    /// one per link crossing when `per_link`), with a boundary line where a session's turn
    /// changes.
    pub fn lines(&self, state: &ConsoleState, selected: Option<u64>) -> Vec<FrameLine> {
        let source = self.source(state);
        let mut lines = Vec::new();
        // Frames already given a row, by (session, frame id).
        let mut seen = std::collections::HashSet::new();
        // (session, its last turn), newest first: few sessions, and the same ones repeat.
        let mut last_turn: Vec<(u64, u64)> = Vec::new();
        for i in 0..source.len() {
            let row = source.get(i);
            let f = row.frame();
            if !self.all && Some(f.session) != selected {
                continue;
            }
            if !self.filter.matches(f) {
                continue;
            }
            if !self.per_link && !seen.insert((f.session, f.id)) {
                continue;
            }
            // A boundary opens a turn newer than any seen for the session: frames of no turn
            // (0) or of an older turn (an interrupt's flush) never draw it again.
            let prev = match last_turn.iter().position(|(s, _)| *s == f.session) {
                Some(at) => {
                    let (_, turn) = last_turn.remove(at);
                    last_turn.insert(0, (f.session, turn.max(f.turn)));
                    Some(turn)
                }
                None => {
                    last_turn.insert(0, (f.session, f.turn));
                    None
                }
            };
            if f.turn != 0 && prev.is_none_or(|p| f.turn > p) {
                lines.push(FrameLine::Boundary {
                    session: f.session,
                    turn: f.turn,
                });
            }
            lines.push(FrameLine::Frame(i));
        }
        lines
    }

    /// The crossings of the frame whose first listed crossing is `first` (an index into the
    /// frame source), in order: `first` alone when every crossing has its own row.
    pub fn hops(&self, state: &ConsoleState, first: usize) -> Vec<usize> {
        let source = self.source(state);
        if self.per_link {
            return vec![first];
        }
        let head = source.get(first).frame();
        let end = (first + HOP_WINDOW).min(source.len());
        std::iter::once(first)
            .chain((first + 1..end).filter(|i| {
                let f = source.get(*i).frame();
                f.id == head.id && f.session == head.session && self.filter.matches(f)
            }))
            .collect()
    }

    /// The index in `lines` of the frame under the cursor (the last frame when following).
    pub fn cursor_index(&self, state: &ConsoleState, lines: &[FrameLine]) -> Option<usize> {
        let source = self.source(state);
        let last_frame = lines.iter().rposition(|l| matches!(l, FrameLine::Frame(_)));
        match self.cursor {
            None => last_frame,
            Some(seq) => lines
                .iter()
                .position(|l| matches!(l, FrameLine::Frame(i) if source.get(*i).seq >= seq))
                .or(last_frame),
        }
    }

    /// Moves the cursor `delta` frames (following the newest again at the last one).
    pub fn step(&mut self, state: &ConsoleState, selected: Option<u64>, delta: isize) {
        let lines = self.lines(state, selected);
        let Some(at) = self.cursor_index(state, &lines) else {
            return;
        };
        let frames: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| matches!(l, FrameLine::Frame(_)))
            .map(|(i, _)| i)
            .collect();
        let pos = frames.iter().position(|i| *i == at).unwrap_or(0) as isize;
        let next = (pos + delta).clamp(0, frames.len() as isize - 1) as usize;
        self.set_cursor(state, &lines, frames[next], next + 1 == frames.len());
    }

    /// Puts the cursor on line `line` of `lines` (`is_last`: following the newest).
    pub fn set_cursor(
        &mut self,
        state: &ConsoleState,
        lines: &[FrameLine],
        line: usize,
        is_last: bool,
    ) {
        if is_last && self.paused.is_none() {
            self.cursor = None;
            return;
        }
        if let Some(FrameLine::Frame(i)) = lines.get(line) {
            self.cursor = Some(self.source(state).get(*i).seq);
        }
    }

    /// The frame source index of the frame under the cursor.
    pub fn cursor_frame_index(&self, state: &ConsoleState, selected: Option<u64>) -> Option<usize> {
        let lines = self.lines(state, selected);
        match lines.get(self.cursor_index(state, &lines)?)? {
            FrameLine::Frame(i) => Some(*i),
            FrameLine::Boundary { .. } => None,
        }
    }

    /// The frame under the cursor, for the detail popup.
    pub fn cursor_frame<'a>(
        &'a self,
        state: &'a ConsoleState,
        selected: Option<u64>,
    ) -> Option<&'a FrameRow> {
        let lines = self.lines(state, selected);
        match lines.get(self.cursor_index(state, &lines)?)? {
            FrameLine::Frame(i) => Some(self.source(state).get(*i)),
            FrameLine::Boundary { .. } => None,
        }
    }
}

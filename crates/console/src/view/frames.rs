//! The Frames pane's view state: which frames it lists (scope, filter, pause), the turn
//! boundaries between them, and the cursor that follows the newest frame or stays put.

use std::cell::Cell;

use crate::state::FrameRow;
use crate::view::console::Console;
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

impl Console {
    pub(crate) fn toggle_pause(&mut self) {
        self.frames.paused = match self.frames.paused.take() {
            Some(_) => None,
            None => Some(self.state.frames().iter().cloned().collect()),
        };
    }

    /// The frames the Frames pane lists: the paused copy or the live window.
    pub fn frame_source(&self) -> FrameSource<'_> {
        match &self.frames.paused {
            Some(frozen) => FrameSource::Paused(frozen),
            None => FrameSource::Live(self.state.frames()),
        }
    }

    /// The Frames pane's lines: frames passing the scope and the filter (one per frame, or
    /// one per link crossing when `per_link`), with a boundary line where a session's turn
    /// changes.
    pub fn frame_lines(&self) -> Vec<FrameLine> {
        let source = self.frame_source();
        let mut lines = Vec::new();
        // Frames already given a row, by (session, frame id).
        let mut seen = std::collections::HashSet::new();
        // (session, its last turn), newest first: few sessions, and the same ones repeat.
        let mut last_turn: Vec<(u64, u64)> = Vec::new();
        for i in 0..source.len() {
            let row = source.get(i);
            let f = row.frame();
            if !self.frames.all && Some(f.session) != self.selected {
                continue;
            }
            if !self.frames.filter.matches(f) {
                continue;
            }
            if !self.frames.per_link && !seen.insert((f.session, f.id)) {
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
    pub fn frame_hops(&self, first: usize) -> Vec<usize> {
        let source = self.frame_source();
        if self.frames.per_link {
            return vec![first];
        }
        let head = source.get(first).frame();
        let end = (first + HOP_WINDOW).min(source.len());
        std::iter::once(first)
            .chain((first + 1..end).filter(|i| {
                let f = source.get(*i).frame();
                f.id == head.id && f.session == head.session && self.frames.filter.matches(f)
            }))
            .collect()
    }

    /// The index in `lines` of the frame under the cursor (the last frame when following).
    pub fn frame_cursor_index(&self, lines: &[FrameLine]) -> Option<usize> {
        let source = self.frame_source();
        let last_frame = lines.iter().rposition(|l| matches!(l, FrameLine::Frame(_)));
        match self.frames.cursor {
            None => last_frame,
            Some(seq) => lines
                .iter()
                .position(|l| matches!(l, FrameLine::Frame(i) if source.get(*i).seq >= seq))
                .or(last_frame),
        }
    }

    pub(crate) fn frame_step(&mut self, delta: isize) {
        let lines = self.frame_lines();
        let Some(at) = self.frame_cursor_index(&lines) else {
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
        self.set_frame_cursor(&lines, frames[next], next + 1 == frames.len());
    }

    pub(crate) fn set_frame_cursor(&mut self, lines: &[FrameLine], line: usize, is_last: bool) {
        if is_last && self.frames.paused.is_none() {
            self.frames.cursor = None;
            return;
        }
        if let Some(FrameLine::Frame(i)) = lines.get(line) {
            self.frames.cursor = Some(self.frame_source().get(*i).seq);
        }
    }

    /// The frame source index of the frame under the cursor.
    pub fn cursor_frame_index(&self) -> Option<usize> {
        let lines = self.frame_lines();
        match lines.get(self.frame_cursor_index(&lines)?)? {
            FrameLine::Frame(i) => Some(*i),
            FrameLine::Boundary { .. } => None,
        }
    }

    /// The frame under the cursor, for the detail popup.
    pub fn cursor_frame(&self) -> Option<&FrameRow> {
        let lines = self.frame_lines();
        match lines.get(self.frame_cursor_index(&lines)?)? {
            FrameLine::Frame(i) => Some(self.frame_source().get(*i)),
            FrameLine::Boundary { .. } => None,
        }
    }
}

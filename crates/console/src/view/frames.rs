//! The Frames pane's view state: which frames it lists (scope, filter, pause), the turn
//! boundaries between them, and the cursor that follows the newest frame or stays put.
//!
//! The lines are kept between draws and extended as frames arrive (each frame is matched
//! once), shifted as the oldest leave, and built anew only when the scope or the filter
//! changes: an idle screen costs nothing to list.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;

use crate::state::{ConsoleState, FrameRow};
use crate::view::filter::FrameFilter;

/// A line of the Frames pane: a turn boundary or a frame (an index into the frame source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameLine {
    /// A new turn of a session starts here (turn 0: the session opened again after turns).
    Boundary {
        /// Session number.
        session: u64,
        /// Turn id (0: the session's pipeline started again).
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
    /// The lines as last listed, extended and shifted as frames come and go.
    cache: RefCell<LinesCache>,
}

/// What the lines were listed with, and how far.
#[derive(Debug, Default)]
struct LinesCache {
    /// Filter text, all sessions, the selected session, per link, paused, and how many times
    /// the state let go of its frames at once (the next ones may reuse their ids).
    key: (String, bool, Option<u64>, bool, bool, u64),
    lines: Vec<FrameLine>,
    /// The arrival number of the source's first frame when the indices in `lines` were set.
    first_seq: u64,
    /// The arrival number after the last frame looked at.
    next_seq: u64,
    /// Frames already given a row, by (session, frame id).
    seen: HashSet<(u64, u64)>,
    /// (session, its last turn), newest first: few sessions, and the same ones repeat.
    last_turn: Vec<(u64, u64)>,
    /// Frames matched against the scope and the filter, in all (for the tests of its cost).
    matched: u64,
}

/// How far after a frame's first crossing its other crossings are looked for: a frame's
/// hops are published within a few events of each other.
pub const HOP_WINDOW: usize = 256;

/// How many lines back a frame that came late may be put (see `in_time_order`).
const REORDER_LINES: usize = 64;

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

/// Where a frame's line goes among the last ones: after every line of its session's turn that
/// crossed earlier. A frame reaches the bus as one journey when its way ends
/// (`pipeline::journey`), so one a processor held a while (the line it answers) can come after
/// frames it caused; its row goes back up to where its first crossing was, within
/// [`REORDER_LINES`] lines and never above its turn's boundary.
fn in_time_order(
    cache: &LinesCache,
    source: &FrameSource<'_>,
    f: &turnscope::observe::FrameEvent,
) -> usize {
    let mut at = cache.lines.len();
    while at > 0 && cache.lines.len() - at < REORDER_LINES {
        let FrameLine::Frame(j) = cache.lines[at - 1] else {
            break;
        };
        let before = source.get(j).frame();
        if before.session != f.session || before.turn != f.turn || before.at_us <= f.at_us {
            break;
        }
        at -= 1;
    }
    at
}

impl LinesCache {
    /// The source lost its `gone` oldest frames: their lines go (a boundary stays with the
    /// first frame kept after it) and the other indices move down.
    fn shift(&mut self, gone: usize) {
        let keep_from = self
            .lines
            .iter()
            .position(|l| matches!(l, FrameLine::Frame(i) if *i >= gone))
            .unwrap_or(self.lines.len());
        let start = match keep_from.checked_sub(1).map(|p| self.lines[p]) {
            Some(FrameLine::Boundary { .. }) => keep_from - 1,
            _ => keep_from,
        };
        self.lines.drain(..start);
        // A frame put back in time order may sit after the first one kept.
        self.lines
            .retain(|l| !matches!(l, FrameLine::Frame(i) if *i < gone));
        for line in &mut self.lines {
            if let FrameLine::Frame(i) = line {
                *i -= gone;
            }
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
        let mut cache = self.cache.borrow_mut();
        let key = (
            self.filter.text().to_string(),
            self.all,
            if self.all { None } else { selected },
            self.per_link,
            self.paused.is_some(),
            state.frames_cleared(),
        );
        let (Some(first), Some(last)) = (
            (!source.is_empty()).then(|| source.get(0).seq),
            (!source.is_empty()).then(|| source.get(source.len() - 1).seq),
        ) else {
            *cache = LinesCache {
                key,
                ..LinesCache::default()
            };
            return Vec::new();
        };
        // Frames only come at the end and leave at the start; anything else (a replay stepped
        // back to an earlier state) lists them anew.
        let stale = cache.key != key
            || first < cache.first_seq
            || cache.next_seq < first
            || last + 1 < cache.next_seq
            || cache.seen.len() > 4 * crate::state::FRAMES_KEPT;
        if stale {
            let matched = cache.matched;
            *cache = LinesCache {
                key,
                first_seq: first,
                next_seq: first,
                matched,
                ..LinesCache::default()
            };
        } else if first > cache.first_seq {
            let gone = (first - cache.first_seq) as usize;
            cache.shift(gone);
            cache.first_seq = first;
        }
        for seq in cache.next_seq..=last {
            let i = (seq - first) as usize;
            self.list(&mut cache, &source, i, selected);
        }
        cache.next_seq = last + 1;
        cache.lines.clone()
    }

    /// Frames matched against the scope and the filter since the pane began (each once, unless
    /// the scope or the filter changed).
    pub fn matched(&self) -> u64 {
        self.cache.borrow().matched
    }

    /// Lists frame `i` of the source when it passes the scope and the filter.
    fn list(
        &self,
        cache: &mut LinesCache,
        source: &FrameSource<'_>,
        i: usize,
        selected: Option<u64>,
    ) {
        let f = source.get(i).frame();
        cache.matched += 1;
        if !self.all && Some(f.session) != selected {
            return;
        }
        if !self.filter.matches(f) {
            return;
        }
        // Frame id 0 is no frame of the pipeline but a whole reply retold (a viewer's
        // preamble): each is its own line, never a crossing of another turn's.
        if !self.per_link && f.id != 0 && !cache.seen.insert((f.session, f.id)) {
            return;
        }
        // A boundary opens a turn newer than any seen for the session: frames of no turn
        // (0) or of an older turn (an interrupt's flush) never draw it again.
        let prev = match cache.last_turn.iter().position(|(s, _)| *s == f.session) {
            Some(at) => {
                let (_, turn) = cache.last_turn.remove(at);
                cache.last_turn.insert(0, (f.session, turn.max(f.turn)));
                Some(turn)
            }
            None => {
                cache.last_turn.insert(0, (f.session, f.turn));
                None
            }
        };
        // A session reopened (its pipeline started again after turns, as when a stored
        // conversation is taken up) draws a boundary of turn 0, so its opening frames are not
        // read as the last turn's; its turns count afresh from there (once per Start, however
        // many of its crossings are listed).
        let reopening = f.turn == 0 && f.name == "Start" && prev.is_some_and(|p| p > 0);
        if reopening {
            cache.last_turn[0].1 = 0;
        }
        if reopening || (f.turn != 0 && prev.is_none_or(|p| f.turn > p)) {
            cache.lines.push(FrameLine::Boundary {
                session: f.session,
                turn: f.turn,
            });
        }
        // Right after a boundary just drawn this is the end: nothing is put above one.
        let at = in_time_order(cache, source, f);
        cache.lines.insert(at, FrameLine::Frame(i));
    }

    /// The crossings of the frame whose first listed crossing is `first` (an index into the
    /// frame source), in order: `first` alone when every crossing has its own row.
    pub fn hops(&self, state: &ConsoleState, first: usize) -> Vec<usize> {
        let source = self.source(state);
        let head = source.get(first).frame();
        if self.per_link || head.id == 0 {
            return vec![first];
        }
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
            // Its own line, else (gone) the first after it; lines are in time order, which
            // is arrival order but for a frame put back a few lines.
            Some(seq) => lines
                .iter()
                .position(|l| matches!(l, FrameLine::Frame(i) if source.get(*i).seq == seq))
                .or_else(|| {
                    lines
                        .iter()
                        .position(|l| matches!(l, FrameLine::Frame(i) if source.get(*i).seq >= seq))
                })
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

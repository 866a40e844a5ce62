//! Positions in lists and scrolled text, shared by the panes' view states: [`ListNav`] (a
//! cursor and its scroll), [`TurnPick`] (the turn view's turn), [`Follow`] (what a scrolled
//! view with a cursor keeps in sight), `scroll_back`, `PAGE`.

use std::cell::Cell;

/// Rows a page key moves before a pane was drawn (it then moves the rows the pane shows).
pub(crate) const PAGE: isize = 10;

/// The rows a page key moves in a list or text that showed `shown` rows at the last draw: one
/// fewer, so the row at the edge stays in view; [`PAGE`] before any draw.
pub(crate) fn page_of(shown: usize) -> isize {
    match shown {
        0 => PAGE,
        n => n.saturating_sub(1).max(1) as isize,
    }
}

/// A cursor and a scroll offset into a list. The offset is adjusted while drawing, so the
/// cursor stays visible whatever the pane's height.
#[derive(Debug, Default)]
pub struct ListNav {
    /// The selected row.
    pub cursor: usize,
    offset: Cell<usize>,
}

impl ListNav {
    /// The rows to show (`start..end`) for a list of `len` rows in `visible` lines.
    pub fn window(&self, len: usize, visible: usize) -> (usize, usize) {
        let cursor = self.cursor.min(len.saturating_sub(1));
        let mut off = self.offset.get();
        if cursor < off {
            off = cursor;
        }
        if visible > 0 && cursor >= off + visible {
            off = cursor + 1 - visible;
        }
        off = off.min(len.saturating_sub(visible));
        self.offset.set(off);
        (off, (off + visible).min(len))
    }

    /// The first row shown at the last draw.
    pub fn offset(&self) -> usize {
        self.offset.get()
    }

    /// Moves the cursor by `delta` within `len` rows.
    pub fn step(&mut self, delta: isize, len: usize) {
        let last = len.saturating_sub(1) as isize;
        self.cursor = (self.cursor as isize + delta).clamp(0, last.max(0)) as usize;
    }
}

/// What a scrolled view holding a cursor and an answer (the hand-call form, the list of hand
/// calls) keeps in sight as it is drawn. Set by the keys: the drawing clamps the scroll only
/// to what this names, so PgUp/PgDn and the wheel can take it anywhere, the answer's end
/// included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Follow {
    /// The cursor's row (the field edited, the call selected): after a key that moves between
    /// fields or calls, or edits a field.
    #[default]
    Cursor,
    /// The answer's first row, when it is below the screen: after a call is sent.
    Answer,
    /// Nothing: the scroll stays where PgUp/PgDn or the wheel put it.
    Free,
}

/// The turn the turn view (the waterfall) shows.
#[derive(Debug)]
pub struct TurnPick {
    /// Session number.
    pub session: u64,
    /// Turn id.
    pub turn: u64,
    /// Lines scrolled down.
    pub scroll: Cell<usize>,
    /// `m`: the model requests opened to their request and answer.
    pub requests_open: bool,
    /// `f`: long contents unfolded, tools' parameters whole.
    pub unfolded: bool,
    /// `Tab`: the model request `c` (curl) and `J` (JSON) copy, counted from 0.
    pub request: usize,
    /// The lines last drawn and what they were drawn from, so an idle view is not built
    /// again each frame (a turn's requests opened whole can be long).
    pub lines: std::cell::RefCell<TurnLines>,
}

/// What a turn view's lines were built from: the pick, the width, and the state's events and
/// the turn's size as last seen.
pub type TurnLinesKey = (u64, u64, bool, bool, usize, usize, u64, usize, bool, usize);

/// A turn view's lines as last built, with what they were built from.
pub type TurnLines = Option<(TurnLinesKey, Vec<ratatui::text::Line<'static>>)>;

impl TurnPick {
    /// The model request picked (`Tab`): what the workbench edits, resends and compares.
    pub fn request_key(&self) -> crate::state::variants::RequestKey {
        crate::state::variants::RequestKey {
            session: self.session,
            turn: self.turn,
            index: self.request,
        }
    }

    /// The view of `turn` of `session`, at its top, requests closed.
    pub fn new(session: u64, turn: u64) -> Self {
        Self {
            session,
            turn,
            scroll: Cell::new(0),
            requests_open: false,
            unfolded: false,
            request: 0,
            lines: std::cell::RefCell::new(None),
        }
    }
}

/// Moves a scroll position held in a cell by `delta` lines, never below 0.
pub(crate) fn scroll_back(cell: &Cell<usize>, delta: isize) {
    cell.set((cell.get() as isize).saturating_add(delta).max(0) as usize);
}

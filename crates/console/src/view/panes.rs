//! The view state each pane owns, beside the larger ones in their own files ([`FramesView`](super::frames::FramesView),
//! [`SessionList`](super::sessions::SessionList)): scroll positions (in cells, since drawing
//! keeps them in range), cursors, searches and scopes.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use super::line_edit::LineEdit;
use super::nav::ListNav;

/// The `?` overlay.
#[derive(Debug, Default)]
pub struct HelpView {
    /// Whether it is open.
    pub open: bool,
    /// Lines scrolled down.
    pub scroll: Cell<usize>,
}

impl HelpView {
    /// Opens the help at its top, wherever it was scrolled the last time.
    pub fn show(&mut self) {
        self.open = true;
        self.scroll.set(0);
    }
}

/// The Transcript pane.
#[derive(Debug, Default)]
pub struct TranscriptView {
    /// Lines scrolled back from the bottom (0 follows the newest).
    pub back: Cell<usize>,
    /// The search being typed.
    pub search_editing: Option<LineEdit>,
    /// The search in force (empty: none).
    pub search: String,
    /// Which match is shown, counted back from the newest.
    pub search_hit: Cell<usize>,
}

/// The Progress pane.
#[derive(Debug)]
pub struct ProgressView {
    /// Rows scrolled back from the bottom.
    pub back: Cell<usize>,
    /// Whether it shows every session (else the selected one).
    pub all: bool,
}

impl Default for ProgressView {
    fn default() -> Self {
        Self {
            back: Cell::new(0),
            all: true,
        }
    }
}

/// The Tools pane.
#[derive(Debug, Default)]
pub struct ToolsView {
    /// The tool under the cursor.
    pub nav: ListNav,
    /// The selected tool's detail scroll.
    pub scroll: Cell<usize>,
    /// Hand calls: the form, the list of calls, the saved ones.
    pub hand: super::hand_calls::HandCalls,
    /// The selected tool's detail wrapped as last drawn, kept while the tool list, the cursor
    /// and the width stay as they were (so a redraw costs the rows on screen).
    pub detail: RefCell<ToolDetailLines>,
    /// The tool list the cursor points into: its generation and each tool's (source, name),
    /// so a new list (`tools/list_changed`, a tool skipped) keeps the same tool selected
    /// rather than the same row ([`ToolsView::follow_list`]).
    listed: (u64, Vec<(String, String)>),
}

impl ToolsView {
    /// Keeps the cursor on the tool it was on when the list changed (`generation` counts the
    /// lists, `tools` is the new one): the same source and name, else the same name, else the
    /// same row.
    pub fn follow_list(&mut self, generation: u64, tools: &[crate::state::ToolView]) {
        if self.listed.0 == generation {
            return;
        }
        let picked = self.listed.1.get(self.nav.cursor).cloned();
        if let Some((source, name)) = picked {
            let at = tools
                .iter()
                .position(|t| t.source == source && t.name == name)
                .or_else(|| tools.iter().position(|t| t.name == name));
            if let Some(i) = at {
                if i != self.nav.cursor {
                    self.scroll.set(0);
                }
                self.nav.cursor = i;
            }
        }
        self.listed = (
            generation,
            tools
                .iter()
                .map(|t| (t.source.clone(), t.name.clone()))
                .collect(),
        );
    }
}

/// The Tools pane's detail lines, wrapped for (the tool list's generation, the cursor, the
/// width).
pub type ToolDetailLines = Option<((u64, usize, usize), Vec<ratatui::text::Line<'static>>)>;

/// The Stats pane.
#[derive(Debug)]
pub struct StatsView {
    /// Lines scrolled down.
    pub scroll: Cell<usize>,
    /// Whether it shows every session (else the selected one).
    pub all: bool,
}

impl Default for StatsView {
    fn default() -> Self {
        Self {
            scroll: Cell::new(0),
            all: true,
        }
    }
}

/// The Log pane.
#[derive(Debug, Default)]
pub struct LogView {
    /// Rows scrolled back from the bottom.
    pub back: Cell<usize>,
    /// Whether it shows errors and warnings only.
    pub problems_only: bool,
}

/// The Input pane's sends (the line itself is the console's `TextArea`).
#[derive(Debug, Default)]
pub struct InputLineView {
    /// Sessions with a chat call from the console in flight, each with the id of its last
    /// turn when the first of them was sent (0: none): a turn after it may have taken the line.
    pub waiting: BTreeMap<u64, u64>,
    /// Chats in flight in a conversation that went on under another number (an attached
    /// console's session, reopened by the restarted server it watches): the number each was
    /// sent to → the number now. Their ends come back under the first.
    pub moved: BTreeMap<u64, u64>,
    /// A session not opened here whose line waits for a second Enter.
    pub pending_send: Option<u64>,
    /// Sessions not the person's own they confirmed speaking into, and those opened for them
    /// with `n` (their lines go in unasked).
    pub confirmed: BTreeSet<u64>,
    /// The person's first session is being opened with their line (attached): a second line
    /// waits for it rather than opening another.
    pub starting: bool,
}

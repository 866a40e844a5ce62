//! The console's view state: [`Console`] owns the [`ConsoleState`] the panes draw and the
//! person's view of it (focus, selection, scroll positions, the input line, overlays). It never
//! touches the server, the terminal or the clock; the input layer changes it, the draw layer
//! reads it.

use std::cell::Cell;

use ratatui::style::{Modifier, Style};
use ratatui_textarea::{TextArea, WrapMode};

use super::frames::{FrameLine, FrameSource, FramesView};
use super::hand_calls::Mode;
use super::ids::PaneId;
use super::keys::KeyOwner;
use super::layout::Areas;
use super::mcp::McpView;
use super::nav::TurnPick;
use super::panes::{
    HelpView, InputLineView, LogView, ProgressView, StatsView, ToolsView, TranscriptView,
};
use super::resend::{RequestEditor, Sends, VariantsPick};
use super::sessions::SessionList;
use crate::state::tape::Tape;
use crate::state::variants::Variants;
use crate::state::{ConsoleState, FrameRow, SessionRow};
use crate::theme::Theme;

/// What the empty input line says: keys typed go here until Esc. Short enough for the
/// narrowest input pane (two columns at [`super::layout::WIDE`]), so it is never cut mid-word;
/// the pane's title names the session the line goes to.
pub const PLACEHOLDER: &str = "Type a line; Enter sends · Esc: panes' keys";

/// Most request edits kept unsent ([`Console::edits_kept`]); each is one recorded request's
/// body, itself bounded by `[wire] max_kib`.
pub const EDITS_KEPT: usize = 8;

/// A message for the person, shown over the bottom right of the screen for a few seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The text.
    pub text: String,
    /// Whether it reports a failure.
    pub error: bool,
}

/// The console: the state it draws plus everything about the person's view of it.
pub struct Console {
    /// What the server did, folded from events and snapshots.
    pub state: ConsoleState,
    /// The styles to draw with.
    pub theme: Theme,
    /// A replay: no input line, nothing is sent.
    pub read_only: bool,
    /// The focused pane.
    pub focus: PaneId,
    /// The inspector tab shown.
    pub inspector: PaneId,
    /// The selected session's number.
    pub selected: Option<u64>,
    /// The selected session's handle prefix, as last seen: a stored conversation that opens
    /// again (under a new number) stays selected.
    selected_handle: Option<String>,
    /// The session the console opened for the person.
    pub own: Option<u64>,
    /// Whether the person's first line opens their session (`turnscope attach`: none is
    /// opened before, so a console that only watches starts nothing on the bot).
    pub start_on_first_line: bool,
    /// The attached server is no bot (its tools include no `start` or `chat`): nothing here
    /// chats, and the panes say so instead of inviting a line.
    pub no_chat_here: bool,
    /// Attached to a bot that is not a turnscope (it keeps no conversation past its session):
    /// a line into the person's own session that closed starts a new one, and the Input pane
    /// says so.
    pub closed_own_starts_anew: bool,
    /// The input line.
    pub input: TextArea<'static>,
    /// The input line's sends: chats in flight, a line waiting for a second Enter.
    pub input_line: InputLineView,
    /// The latest message for the person.
    pub notice: Option<Notice>,
    /// The notice a failed chat call showed, which a later reply clears (any other notice
    /// stays until it times out or the next line is sent).
    pub chat_failure: Option<Notice>,
    /// The help overlay.
    pub help: HelpView,
    /// The Transcript pane: its scroll and search.
    pub transcript: TranscriptView,
    /// The Frames pane.
    pub frames: FramesView,
    /// The Progress pane.
    pub progress: ProgressView,
    /// The Tools pane.
    pub tools: ToolsView,
    /// The Stats pane.
    pub stats: StatsView,
    /// Where the panes were at the last draw (for the mouse).
    pub areas: Cell<Areas>,
    /// The rows of its list or text each pane showed at the last draw (by [`PaneId::number`]
    /// less one): what a page key moves there.
    rows_shown: Cell<[usize; 9]>,
    /// The turn view (waterfall) when open.
    pub turn_view: Option<TurnPick>,
    /// The Log pane.
    pub log: LogView,
    /// The MCP pane's filters and scroll.
    pub mcp: McpView,
    /// Whether the focused pane fills the screen.
    pub zoom: bool,
    /// Whether `q` was pressed once while MCP clients hold sessions (a second `q` quits).
    pub quit_asked: bool,
    /// The session `d` was pressed on once (a second `d` closes it).
    pub close_asked: Option<u64>,
    /// A replay's events, stepped through with `[` and `]`.
    pub tape: Option<Tape>,
    /// The Sessions pane's sort and filter.
    pub sessions_list: SessionList,
    /// A model request being edited to send again (over the turn view).
    pub editor: Option<RequestEditor>,
    /// Edits closed unsent (`Esc`), by request, oldest first: `e` on the request opens its
    /// edit as it was left. At most [`EDITS_KEPT`].
    pub edits_kept: Vec<RequestEditor>,
    /// A request's variants set beside its recorded answer (over the turn view).
    pub variants_view: Option<VariantsPick>,
    /// Every variant sent from here.
    pub variants: Variants,
    /// The resends still out (listed after their request's variants).
    pub sends: Sends,
    /// Config reloads already told in a notice.
    reloads_noticed: u64,
}

impl Console {
    /// A console over `state`, drawn with `theme`; `read_only` for a replay.
    pub fn new(state: ConsoleState, theme: Theme, read_only: bool) -> Self {
        let mut input = TextArea::default();
        input.set_wrap_mode(WrapMode::WordOrGlyph);
        input.set_cursor_line_style(Style::new());
        input.set_placeholder_text(PLACEHOLDER);
        Self {
            state,
            theme,
            read_only,
            focus: if read_only {
                PaneId::Sessions
            } else {
                PaneId::Input
            },
            inspector: PaneId::Frames,
            selected: None,
            selected_handle: None,
            own: None,
            start_on_first_line: false,
            closed_own_starts_anew: false,
            no_chat_here: false,
            input,
            input_line: InputLineView::default(),
            notice: None,
            chat_failure: None,
            help: HelpView::default(),
            transcript: TranscriptView::default(),
            frames: FramesView::default(),
            progress: ProgressView::default(),
            tools: ToolsView::default(),
            stats: StatsView::default(),
            areas: Cell::new(Areas::default()),
            rows_shown: Cell::new([0; 9]),
            turn_view: None,
            log: LogView::default(),
            mcp: McpView::default(),
            zoom: false,
            quit_asked: false,
            close_asked: None,
            tape: None,
            sessions_list: Default::default(),
            editor: None,
            edits_kept: Vec::new(),
            variants_view: None,
            variants: Variants::default(),
            sends: Sends::default(),
            reloads_noticed: 0,
        }
    }

    /// Whether this console watches pipecat's whisker feed alone (`attach --whisker WS` with
    /// no bot URL): nothing here chats.
    pub fn watching_only(&self) -> bool {
        self.state.header.source.is_attached()
            && self.state.header.bot_url.is_none()
            && !self.start_on_first_line
    }

    /// Tells the latest config reload in the notice, once, when one was folded in since the
    /// last call (a live console: whatever asked for it, the file, SIGHUP or `R`).
    pub fn notice_reloads(&mut self) {
        if self.state.reloads_seen == self.reloads_noticed {
            return;
        }
        self.reloads_noticed = self.state.reloads_seen;
        if let Some(r) = &self.state.last_reload {
            self.notice = Some(Notice {
                text: r.notice(),
                error: r.is_refused(),
            });
        }
    }

    /// Styles the input line for the next frame: its cursor shows only while it has focus.
    pub fn before_draw(&mut self) {
        let focused = self.focus == PaneId::Input
            && !self.read_only
            && !self.help.open
            && self.frames.editing.is_none()
            && self.mcp.editing.is_none();
        let cursor = if focused {
            Style::new().add_modifier(Modifier::REVERSED)
        } else {
            Style::new()
        };
        self.input.set_cursor_style(cursor);
        self.input.set_placeholder_style(self.theme.dim);
        self.input.set_style(self.theme.text);
    }

    /// Keeps the selection valid after the state changed: the selected session if still
    /// listed, else the person's own, else the first; and the cursor on it.
    pub fn settle(&mut self) {
        let listed = self.sessions_list.listed(&self.state);
        let rows: Vec<(u64, bool)> = listed.iter().map(|r| (r.number, r.is_closed())).collect();
        // The person's own session stays selected while its opening is on its way (an attached
        // console learns the number from `start` before the event stream brings the row).
        let valid = self.selected.is_some_and(|n| {
            rows.iter().any(|r| r.0 == n)
                || (Some(n) == self.own && self.state.session(n).is_none())
        });
        // A conversation that changed rows (a stored one opened again by its client) stays
        // selected under its new number.
        let moved = (!valid)
            .then(|| {
                let handle = self.selected_handle.as_deref()?;
                listed
                    .iter()
                    .find(|r| !r.is_closed() && r.handle_prefix == handle)
                    .map(|r| r.number)
            })
            .flatten();
        let selected_handle = match listed.iter().find(|r| Some(r.number) == self.selected) {
            Some(row) if self.selected_handle.as_deref() != Some(row.handle_prefix.as_str()) => {
                Some(Some(row.handle_prefix.clone()))
            }
            _ => None,
        };
        if let Some(handle) = selected_handle {
            self.selected_handle = handle;
        }
        if moved.is_some() {
            self.selected = moved;
        } else if !valid && !rows.is_empty() {
            // A filter that matches nothing keeps the selection it had.
            self.selected = self
                .own
                .filter(|n| rows.iter().any(|r| r.0 == *n && !r.1))
                .or_else(|| rows.first().map(|r| r.0));
        }
        if let Some(i) = rows.iter().position(|r| Some(r.0) == self.selected) {
            self.sessions_list.nav.cursor = i;
        }
        self.tools
            .follow_list(self.state.tools_generation(), &self.state.tools);
        let tools = self.state.tools.len();
        self.tools.nav.step(0, tools);
    }

    /// The send in flight the variants show, when they show one (past the request's
    /// variants: its sends still out, oldest first).
    pub fn shown_send(&self) -> Option<&super::resend::Sending> {
        let view = self.variants_view.as_ref()?;
        let i = view.shown.checked_sub(self.variants.count(view.key))?;
        self.sends.nth(view.key, i)
    }

    /// What has the keys now: an overlay, the filter, or the focused pane.
    pub fn key_owner(&self) -> KeyOwner {
        if self.help.open {
            KeyOwner::Help
        } else if self.editor.is_some() {
            KeyOwner::Editor
        } else if self.variants_view.is_some() {
            KeyOwner::Variants
        } else if self.turn_view.is_some() {
            KeyOwner::TurnView
        } else if self.mcp.detail.is_some() {
            KeyOwner::McpDetail
        } else if self.frames.detail {
            KeyOwner::FrameDetail
        } else if self.frames.editing.is_some()
            || self.mcp.editing.is_some()
            || self.transcript.search_editing.is_some()
            || self.sessions_list.editing.is_some()
        {
            KeyOwner::Filter
        } else if self.focus == PaneId::Tools && !self.read_only {
            match self.tools.hand.mode {
                Mode::Form(_) => KeyOwner::Form,
                Mode::Calls => KeyOwner::Calls,
                Mode::Detail => KeyOwner::Pane(self.focus),
            }
        } else {
            KeyOwner::Pane(self.focus)
        }
    }

    /// The frames the Frames pane lists: the paused copy or the live window.
    pub fn frame_source(&self) -> FrameSource<'_> {
        self.frames.source(&self.state)
    }

    /// The Frames pane's lines for the selected session or all ([`FramesView::lines`]).
    pub fn frame_lines(&self) -> Vec<FrameLine> {
        self.frames.lines(&self.state, self.selected)
    }

    /// The crossings of the frame whose first listed crossing is `first`.
    pub fn frame_hops(&self, first: usize) -> Vec<usize> {
        self.frames.hops(&self.state, first)
    }

    /// The index in `lines` of the frame under the cursor.
    pub fn frame_cursor_index(&self, lines: &[FrameLine]) -> Option<usize> {
        self.frames.cursor_index(&self.state, lines)
    }

    /// The frame source index of the frame under the cursor.
    pub fn cursor_frame_index(&self) -> Option<usize> {
        self.frames.cursor_frame_index(&self.state, self.selected)
    }

    /// The frame under the cursor, for the detail popup.
    pub fn cursor_frame(&self) -> Option<&FrameRow> {
        self.frames.cursor_frame(&self.state, self.selected)
    }

    /// Notes that `pane` showed `rows` rows of its list or text (drawing it).
    pub(crate) fn shown_rows(&self, pane: PaneId, rows: usize) {
        let mut shown = self.rows_shown.get();
        shown[pane.number() - 1] = rows;
        self.rows_shown.set(shown);
    }

    /// The rows a page key moves in `pane`: a page of what it shows (the Input's keys page
    /// the Transcript).
    pub(crate) fn page(&self, pane: PaneId) -> isize {
        let pane = if pane == PaneId::Input {
            PaneId::Transcript
        } else {
            pane
        };
        crate::view::nav::page_of(self.rows_shown.get()[pane.number() - 1])
    }

    /// The rows a page key moves in a view over the body (the turn view, an exchange).
    pub(crate) fn body_page(&self) -> isize {
        // Its borders and its title line.
        crate::view::nav::page_of(self.areas.get().body().height.saturating_sub(3) as usize)
    }

    pub(crate) fn frame_step(&mut self, delta: isize) {
        self.frames.step(&self.state, self.selected, delta);
    }

    pub(crate) fn toggle_pause(&mut self) {
        self.frames.toggle_pause(&self.state);
    }

    pub(crate) fn set_frame_cursor(&mut self, lines: &[FrameLine], line: usize, is_last: bool) {
        self.frames.set_cursor(&self.state, lines, line, is_last);
    }

    /// The sessions as the Sessions pane lists them ([`SessionList::listed`]).
    pub fn listed_sessions(&self) -> Vec<&SessionRow> {
        self.sessions_list.listed(&self.state)
    }

    /// Focuses a pane (an inspector pane also becomes the visible tab).
    pub fn focus_pane(&mut self, pane: PaneId) {
        if pane == PaneId::Input && self.read_only {
            return;
        }
        if pane.is_inspector() {
            self.inspector = pane;
        }
        self.focus = pane;
    }

    /// Selects the session on row `i` of the Sessions pane.
    pub fn select_row(&mut self, i: usize) {
        let number = self.listed_sessions().get(i).map(|r| r.number);
        if let Some(number) = number {
            if self.selected != Some(number) {
                self.transcript.back.set(0);
            }
            self.selected = Some(number);
            self.sessions_list.nav.cursor = i;
        }
    }
}

//! The console's app state: focus, selection, scroll positions, the input line and overlays, and
//! how keys and the mouse change them. [`Console`] owns the [`ConsoleState`] the panes draw and
//! turns terminal events into its own changes or an [`Action`] for the event loop; it never
//! touches the server, the terminal or the clock, so it is tested without a terminal.

use std::cell::Cell;
use std::collections::BTreeSet;

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyEventKind};
use ratatui::style::{Modifier, Style};
use ratatui_textarea::{TextArea, WrapMode};

use super::filter::FrameFilter;
use super::frames_view::{FrameLine, FramesView};
use super::keys::{self, Command};
use super::layout::Areas;
use super::line_edit::LineEdit;
use super::state::ConsoleState;
use super::theme::Theme;

/// The panes, in Tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PaneId {
    /// Open and closed sessions.
    Sessions,
    /// The selected session's turns.
    Transcript,
    /// The input line.
    Input,
    /// Live frames.
    Frames,
    /// Progress notifications.
    Progress,
    /// The bot's tools.
    Tools,
    /// Latency statistics and counters.
    Stats,
    /// Every failure and log line.
    Log,
}

/// Every pane in Tab order.
pub const ORDER: [PaneId; 8] = [
    PaneId::Sessions,
    PaneId::Transcript,
    PaneId::Input,
    PaneId::Frames,
    PaneId::Progress,
    PaneId::Tools,
    PaneId::Stats,
    PaneId::Log,
];

impl PaneId {
    /// The pane's title.
    pub fn title(self) -> &'static str {
        match self {
            PaneId::Sessions => "Sessions",
            PaneId::Transcript => "Transcript",
            PaneId::Input => "Input",
            PaneId::Frames => "Frames",
            PaneId::Progress => "Progress",
            PaneId::Tools => "Tools",
            PaneId::Stats => "Stats",
            PaneId::Log => "Log",
        }
    }

    /// Its number (the key that jumps to it).
    pub fn number(self) -> usize {
        ORDER.iter().position(|p| *p == self).unwrap_or(0) + 1
    }

    /// Whether it lives in the inspector's tabs.
    pub fn is_inspector(self) -> bool {
        matches!(
            self,
            PaneId::Frames | PaneId::Progress | PaneId::Tools | PaneId::Stats | PaneId::Log
        )
    }
}

/// What the event loop must do after an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Quit: restore the terminal and end every session.
    Quit,
    /// Chat on a session (an empty line reads the turn in flight).
    Chat {
        /// Session number.
        session: u64,
        /// The line.
        line: String,
    },
    /// Interrupt the session's turn in flight.
    Interrupt {
        /// Session number.
        session: u64,
    },
    /// Copy the session's full handle to the clipboard (OSC 52).
    Yank {
        /// Session number.
        session: u64,
    },
    /// Open a new session for the person and select it.
    NewSession,
    /// Close a session (asked for twice).
    Close {
        /// Session number.
        session: u64,
    },
    /// Write this report of a session to a file.
    Export {
        /// Session number.
        session: u64,
        /// The report ([`export::session_report`](super::export::session_report)).
        text: String,
    },
}

/// A message for the person, shown above the input line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The text.
    pub text: String,
    /// Whether it reports a failure.
    pub error: bool,
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

/// The turn the turn view (the waterfall) shows.
#[derive(Debug)]
pub struct TurnPick {
    /// Session number.
    pub session: u64,
    /// Turn id.
    pub turn: u64,
    /// Lines scrolled down.
    pub scroll: Cell<usize>,
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
    /// The session the console opened for the person.
    pub own: Option<u64>,
    /// The input line.
    pub input: TextArea<'static>,
    /// The latest message for the person.
    pub notice: Option<Notice>,
    /// Whether the help overlay is open.
    pub help: bool,
    /// The help overlay's scroll.
    pub help_scroll: Cell<usize>,
    /// The Sessions pane's cursor.
    pub sessions_nav: ListNav,
    /// Transcript lines scrolled back from the bottom (0 follows the newest).
    pub transcript_back: Cell<usize>,
    /// The Frames pane.
    pub frames: FramesView,
    /// Progress rows scrolled back from the bottom.
    pub progress_back: Cell<usize>,
    /// Whether Progress shows every session.
    pub progress_all: bool,
    /// The Tools pane's cursor.
    pub tools_nav: ListNav,
    /// The selected tool's detail scroll.
    pub tool_scroll: Cell<usize>,
    /// The Stats pane's scroll.
    pub stats_scroll: Cell<usize>,
    /// Whether Stats shows every session (else the selected one).
    pub stats_all: bool,
    /// Sessions with a chat call from the console in flight.
    pub waiting: BTreeSet<u64>,
    /// Where the panes were at the last draw (for the mouse).
    pub areas: Cell<Areas>,
    /// The turn view (waterfall) when open.
    pub turn_view: Option<TurnPick>,
    /// A session not opened here whose line waits for a second Enter.
    pub pending_send: Option<u64>,
    /// Sessions not opened here the person confirmed speaking into.
    pub confirmed: BTreeSet<u64>,
    /// The Log pane's rows scrolled back from the bottom.
    pub log_back: Cell<usize>,
    /// Whether the Log pane shows errors and warnings only.
    pub log_problems_only: bool,
    /// Whether the focused pane fills the screen.
    pub zoom: bool,
    /// The transcript search being typed.
    pub search_editing: Option<LineEdit>,
    /// The transcript search in force (empty: none).
    pub search: String,
    /// Which match is shown, counted back from the newest.
    pub search_hit: Cell<usize>,
    /// Whether `q` was pressed once while MCP clients hold sessions (a second `q` quits).
    pub quit_asked: bool,
    /// The session `d` was pressed on once (a second `d` closes it).
    pub close_asked: Option<u64>,
    /// A replay's events, stepped through with `[` and `]`.
    pub tape: Option<super::replay::Tape>,
    /// The Sessions pane's sort and filter.
    pub sessions_list: super::session_list::SessionList,
}

pub(crate) const PAGE: isize = 10;

impl Console {
    /// A console over `state`, drawn with `theme`; `read_only` for a replay.
    pub fn new(state: ConsoleState, theme: Theme, read_only: bool) -> Self {
        let mut input = TextArea::default();
        input.set_wrap_mode(WrapMode::WordOrGlyph);
        input.set_cursor_line_style(Style::new());
        input.set_placeholder_text("Type a line for the selected session; Enter sends");
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
            own: None,
            input,
            notice: None,
            help: false,
            help_scroll: Cell::new(0),
            sessions_nav: ListNav::default(),
            transcript_back: Cell::new(0),
            frames: FramesView::default(),
            progress_back: Cell::new(0),
            progress_all: true,
            tools_nav: ListNav::default(),
            tool_scroll: Cell::new(0),
            stats_scroll: Cell::new(0),
            stats_all: true,
            waiting: BTreeSet::new(),
            areas: Cell::new(Areas::default()),
            turn_view: None,
            pending_send: None,
            confirmed: BTreeSet::new(),
            log_back: Cell::new(0),
            log_problems_only: false,
            zoom: false,
            search_editing: None,
            search: String::new(),
            search_hit: Cell::new(0),
            quit_asked: false,
            close_asked: None,
            tape: None,
            sessions_list: Default::default(),
        }
    }

    /// Styles the input line for the next frame: its cursor shows only while it has focus.
    pub fn before_draw(&mut self) {
        let focused = self.focus == PaneId::Input
            && !self.read_only
            && !self.help
            && self.frames.editing.is_none();
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
        let rows: Vec<(u64, bool)> = self
            .listed_sessions()
            .iter()
            .map(|r| (r.number, r.is_closed()))
            .collect();
        let valid = self.selected.is_some_and(|n| rows.iter().any(|r| r.0 == n));
        // A filter that matches nothing keeps the selection it had.
        if !valid && !rows.is_empty() {
            self.selected = self
                .own
                .filter(|n| rows.iter().any(|r| r.0 == *n && !r.1))
                .or_else(|| rows.first().map(|r| r.0));
        }
        if let Some(i) = rows.iter().position(|r| Some(r.0) == self.selected) {
            self.sessions_nav.cursor = i;
        }
        let tools = self.state.tools.len();
        self.tools_nav.step(0, tools);
    }

    /// What has the keys now: an overlay, the filter, or the focused pane.
    pub fn key_owner(&self) -> keys::KeyOwner {
        if self.help {
            keys::KeyOwner::Help
        } else if self.turn_view.is_some() {
            keys::KeyOwner::TurnView
        } else if self.frames.detail {
            keys::KeyOwner::FrameDetail
        } else if self.frames.editing.is_some()
            || self.search_editing.is_some()
            || self.sessions_list.editing.is_some()
        {
            keys::KeyOwner::Filter
        } else {
            keys::KeyOwner::Pane(self.focus)
        }
    }

    /// Handles one terminal event; returns what the event loop must do, if anything.
    pub fn handle(&mut self, event: &TermEvent) -> Option<Action> {
        match event {
            TermEvent::Key(key) if key.kind != KeyEventKind::Release => self.key(key),
            TermEvent::Mouse(mouse) => {
                self.mouse(mouse);
                None
            }
            TermEvent::Paste(text) if self.focus == PaneId::Input && !self.read_only => {
                self.input.insert_str(text);
                None
            }
            _ => None,
        }
    }

    /// Handles one key press.
    pub fn key(&mut self, key: &KeyEvent) -> Option<Action> {
        if keys::is_ctrl_c(key) {
            return Some(Action::Quit);
        }
        if self.help {
            self.help_key(key);
            return None;
        }
        if self.turn_view.is_some() {
            self.turn_view_key(key);
            return None;
        }
        if self.frames.detail {
            self.detail_key(key);
            return None;
        }
        if self.frames.editing.is_some() {
            self.filter_key(key);
            return None;
        }
        if self.search_editing.is_some() {
            self.search_key(key);
            return None;
        }
        if self.sessions_list.editing.is_some() {
            self.session_filter_key(key);
            return None;
        }
        if self.focus == PaneId::Transcript && !self.search.is_empty() {
            match key.code {
                KeyCode::Char('n') => {
                    self.search_hit.set(self.search_hit.get() + 1);
                    return None;
                }
                KeyCode::Char('N') => {
                    self.search_hit.set(self.search_hit.get().saturating_sub(1));
                    return None;
                }
                _ => {}
            }
        }
        if let Some(n) = keys::alt_jump(key) {
            return self.command(Command::Jump(n));
        }
        if self.focus == PaneId::Input && !self.read_only {
            return self.input_key(key);
        }
        let command = keys::command(key)?;
        self.command(command)
    }

    fn help_key(&mut self, key: &KeyEvent) {
        match keys::command(key) {
            Some(Command::Up) => self
                .help_scroll
                .set(self.help_scroll.get().saturating_sub(1)),
            Some(Command::Down) => self.help_scroll.set(self.help_scroll.get() + 1),
            Some(Command::PageUp) => self
                .help_scroll
                .set(self.help_scroll.get().saturating_sub(10)),
            Some(Command::PageDown) => self.help_scroll.set(self.help_scroll.get() + 10),
            Some(Command::Help | Command::Back | Command::Quit | Command::Enter) => {
                self.help = false;
            }
            _ => {}
        }
    }

    fn detail_key(&mut self, key: &KeyEvent) {
        match keys::command(key) {
            Some(Command::Up) => self.frame_step(-1),
            Some(Command::Down) => self.frame_step(1),
            Some(Command::Back | Command::Enter | Command::Quit) => self.frames.detail = false,
            Some(Command::Help) => self.help = true,
            _ => {}
        }
    }

    fn command(&mut self, command: Command) -> Option<Action> {
        match command {
            Command::Quit => return self.quit(),
            Command::Zoom => self.zoom = !self.zoom,
            Command::Yank => {
                if let Some(session) = self.selected
                    && !self.read_only
                {
                    return Some(Action::Yank { session });
                }
            }
            Command::New if !self.read_only => return Some(Action::NewSession),
            Command::Close => {
                let session = self.selected.filter(|_| !self.read_only)?;
                if self.state.session(session).is_some_and(|r| r.is_closed()) {
                    return None;
                }
                if self.close_asked == Some(session) {
                    self.close_asked = None;
                    self.notice = None;
                    return Some(Action::Close { session });
                }
                let who = self
                    .state
                    .session(session)
                    .map(|r| r.opener_label())
                    .unwrap_or_default();
                self.close_asked = Some(session);
                self.notice = Some(Notice {
                    text: format!("d again closes #{session} ({who}); Esc keeps it"),
                    error: true,
                });
            }
            Command::New => {}
            Command::Step(delta) | Command::Scrub(delta) => {
                let fine = matches!(command, Command::Scrub(_));
                if let Some(tape) = self.tape.as_mut()
                    && (if fine {
                        tape.scrub(delta)
                    } else {
                        tape.step(delta)
                    })
                {
                    self.state = tape.state();
                    self.frames.paused = None;
                    self.settle();
                }
            }
            Command::Export => {
                if let Some(session) = self.selected {
                    let text = super::export::session_report(self, session);
                    return Some(Action::Export { session, text });
                }
            }
            Command::NextPane => self.cycle(1),
            Command::PrevPane => self.cycle(-1),
            Command::Jump(n) => {
                if let Some(pane) = ORDER.get(n.wrapping_sub(1)) {
                    self.focus_pane(*pane);
                }
            }
            Command::Help => self.help = true,
            // Back closes or clears what is open; it never moves focus to the input line.
            Command::Back => {
                if self.quit_asked || self.close_asked.is_some() {
                    self.quit_asked = false;
                    self.close_asked = None;
                    self.notice = None;
                } else if self.zoom {
                    self.zoom = false;
                } else if self.focus == PaneId::Transcript && !self.search.is_empty() {
                    self.search.clear();
                    self.transcript_back.set(0);
                } else if self.focus == PaneId::Sessions && !self.sessions_list.filter.is_empty() {
                    self.sessions_list.filter.clear();
                    self.settle();
                } else if self.focus == PaneId::Frames && !self.frames.filter.is_empty() {
                    self.frames.filter = FrameFilter::default();
                } else if self.notice.is_some() {
                    self.notice = None;
                }
            }
            Command::Turn => self.open_turn_view(),
            Command::Expand => {
                if self.focus == PaneId::Frames {
                    self.frames.per_link = !self.frames.per_link;
                }
            }
            Command::Interrupt => {
                if let Some(session) = self.selected
                    && !self.read_only
                {
                    return Some(Action::Interrupt { session });
                }
            }
            Command::Filter if self.focus == PaneId::Sessions => self.edit_session_filter(),
            Command::Sort if self.focus == PaneId::Sessions => self.cycle_sort(),
            Command::Sort => {}
            Command::Filter if self.focus == PaneId::Transcript => {
                self.search_editing = Some(LineEdit::new(&self.search));
            }
            Command::Filter => {
                self.focus_pane(PaneId::Frames);
                self.frames.editing = Some(LineEdit::new(self.frames.filter.text()));
            }
            Command::Up => self.move_by(-1),
            Command::Down => self.move_by(1),
            Command::PageUp => self.move_by(-PAGE),
            Command::PageDown => self.move_by(PAGE),
            Command::Home => self.move_by(isize::MIN / 2),
            Command::End => self.end(),
            Command::Enter => match self.focus {
                PaneId::Sessions if !self.read_only => self.focus = PaneId::Input,
                PaneId::Transcript => self.open_turn_view(),
                PaneId::Frames => {
                    self.frames.detail = self
                        .frame_lines()
                        .iter()
                        .any(|l| matches!(l, FrameLine::Frame(_)))
                }
                _ => {}
            },
            Command::Pause => {
                if self.focus == PaneId::Frames {
                    self.toggle_pause();
                }
            }
            Command::Scope => match self.focus {
                PaneId::Frames => self.frames.all = !self.frames.all,
                PaneId::Progress => self.progress_all = !self.progress_all,
                PaneId::Stats => self.stats_all = !self.stats_all,
                PaneId::Log => self.log_problems_only = !self.log_problems_only,
                _ => {}
            },
        }
        None
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

    pub(crate) fn cycle(&mut self, delta: isize) {
        let panes: Vec<PaneId> = ORDER
            .into_iter()
            .filter(|p| !(self.read_only && *p == PaneId::Input))
            .collect();
        let at = panes.iter().position(|p| *p == self.focus).unwrap_or(0) as isize;
        let next = (at + delta).rem_euclid(panes.len() as isize) as usize;
        self.focus_pane(panes[next]);
    }

    pub(crate) fn move_by(&mut self, delta: isize) {
        match self.focus {
            PaneId::Sessions => self.select_row_by(delta),
            PaneId::Transcript | PaneId::Input => self.scroll_transcript(-delta),
            PaneId::Frames => self.frame_step(delta),
            PaneId::Progress => scroll_back(&self.progress_back, -delta),
            PaneId::Tools if delta.abs() == PAGE => scroll_fwd(&self.tool_scroll, delta),
            PaneId::Tools => {
                self.tools_nav.step(delta, self.state.tools.len());
                self.tool_scroll.set(0);
            }
            PaneId::Stats => scroll_fwd(&self.stats_scroll, delta),
            PaneId::Log => scroll_back(&self.log_back, -delta),
        }
    }

    fn end(&mut self) {
        match self.focus {
            PaneId::Transcript | PaneId::Input => self.transcript_back.set(0),
            PaneId::Frames => self.frames.cursor = None,
            PaneId::Progress => self.progress_back.set(0),
            PaneId::Log => self.log_back.set(0),
            _ => self.move_by(isize::MAX / 2),
        }
    }

    pub(crate) fn scroll_transcript(&mut self, lines_back: isize) {
        scroll_back(&self.transcript_back, lines_back);
    }

    fn select_row_by(&mut self, delta: isize) {
        let len = self.listed_sessions().len();
        self.sessions_nav.step(delta, len);
        self.select_row(self.sessions_nav.cursor);
    }

    /// Selects the session on row `i` of the Sessions pane.
    pub fn select_row(&mut self, i: usize) {
        let number = self.listed_sessions().get(i).map(|r| r.number);
        if let Some(number) = number {
            if self.selected != Some(number) {
                self.transcript_back.set(0);
            }
            self.selected = Some(number);
            self.sessions_nav.cursor = i;
        }
    }
}

pub(crate) fn scroll_back(cell: &Cell<usize>, delta: isize) {
    cell.set((cell.get() as isize).saturating_add(delta).max(0) as usize);
}

fn scroll_fwd(cell: &Cell<usize>, delta: isize) {
    scroll_back(cell, delta);
}

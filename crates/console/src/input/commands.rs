//! Keys to changes of the view state or an [`Action`]: the dispatch to whatever has the keys
//! (an overlay, a filter being typed, the input line, the focused pane) and the pane commands.

use std::cell::Cell;

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::actions::Action;
use crate::state::Source;
use crate::view::console::{Console, Notice};
use crate::view::filter::FrameFilter;
use crate::view::frames::FrameLine;
use crate::view::hand_calls::Mode;
use crate::view::ids::{ORDER, PaneId};
use crate::view::keys::{self, Command};
use crate::view::line_edit::LineEdit;
use crate::view::nav::scroll_back;
use turnscope::observe::event::SessionOpener;

impl Console {
    /// Why an attached console does not close `session` (another's), and what ends it, by who
    /// opened it: the watched server's own console keeps its session while it runs (it does
    /// not idle out), an MCP or API client's idles out on the bot, a whisker worker ends with
    /// its pipeline.
    pub(crate) fn not_yours_to_close(&self, session: u64) -> String {
        let row = self.state.session(session);
        let (who, ends) = match row.map(|r| &r.opener) {
            Some(SessionOpener::Console) => (
                "the watched server's own console".to_string(),
                "it lives while that console runs",
            ),
            Some(SessionOpener::Mcp(_))
                if row.is_some_and(|r| {
                    turnscope::attach::whisker::fold::is_worker(&r.opener, &r.handle_prefix)
                }) =>
            {
                (
                    "the bot's pipeline (a whisker worker)".to_string(),
                    "it ends with its pipeline",
                )
            }
            Some(_) => (
                format!(
                    "another client ({})",
                    row.map(|r| r.opener_label()).unwrap_or_default()
                ),
                "its client closes it, or the bot ends it when it is idle",
            ),
            None => (
                "another client".to_string(),
                "its client closes it, or the bot ends it when it is idle",
            ),
        };
        format!(
            "#{session} was opened by {who}: an attached console closes only sessions it started \
             ({ends})"
        )
    }
}

impl Console {
    /// Handles one terminal event; returns what the event loop must do, if anything.
    pub fn handle(&mut self, event: &TermEvent) -> Option<Action> {
        match event {
            TermEvent::Key(key) if key.kind != KeyEventKind::Release => self.key(key),
            TermEvent::Mouse(mouse) => {
                self.mouse(mouse);
                None
            }
            TermEvent::Paste(text) => {
                self.paste(text);
                None
            }
            _ => None,
        }
    }

    /// A paste goes where typed text would go, by the same precedence as [`Self::key`]: the
    /// request editor (body or URL), a filter or search being typed, the input line, the
    /// hand-call form's field. Elsewhere (no text being edited) it is dropped.
    fn paste(&mut self, text: &str) {
        if self.help.open {
            return;
        }
        if let Some(editor) = self.editor.as_mut() {
            if editor.on_url {
                editor.url.paste(text);
            } else {
                editor.body.insert_str(text);
            }
            return;
        }
        if self.variants_view.is_some() || self.turn_view.is_some() || self.mcp.detail.is_some() {
            return;
        }
        let one_line_editing = self.mcp.editing.is_some()
            || (!self.frames.detail
                && (self.frames.editing.is_some()
                    || self.transcript.search_editing.is_some()
                    || self.sessions_list.editing.is_some()));
        if self.frames.detail && !one_line_editing {
            // The frame detail has the keys (as in `key`): no letter of the paste reaches it.
            return;
        }
        if one_line_editing {
            // Typed in, character by character: each filter and search updates as it does
            // for keys, and Enter or Esc (which a paste never holds) still end the editing.
            for c in crate::view::line_edit::one_line(text) {
                self.key(&KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
            }
            return;
        }
        if self.read_only {
            return;
        }
        match self.focus {
            PaneId::Input => {
                self.input.insert_str(text);
            }
            PaneId::Tools => {
                if let crate::view::hand_calls::Mode::Form(form) = &mut self.tools.hand.mode {
                    form.paste(text);
                }
            }
            _ => {}
        }
    }

    /// Handles one key press.
    pub fn key(&mut self, key: &KeyEvent) -> Option<Action> {
        // In the request editor Ctrl+Z undoes; Ctrl+C over an unsent edit keeps it and closes
        // the editor first (the next Ctrl+C quits).
        if self.editor.is_some() && (keys::is_ctrl_z(key) || keys::is_ctrl_c(key)) {
            // Under Help, Ctrl+Z would undo in the body unseen: nothing.
            if self.help.open && keys::is_ctrl_z(key) {
                return None;
            }
            return self.editor_key(key);
        }
        if keys::is_ctrl_c(key) {
            return Some(Action::Quit);
        }
        if keys::is_ctrl_z(key) {
            return Some(Action::Suspend);
        }
        if self.help.open {
            self.help_key(key);
            return None;
        }
        if self.editor.is_some() {
            return self.editor_key(key);
        }
        if self.variants_view.is_some() {
            return self.variants_key(key);
        }
        if self.turn_view.is_some() {
            return self.turn_view_key(key);
        }
        if self.mcp.detail.is_some() {
            return self.mcp_detail_key(key);
        }
        if self.mcp.editing.is_some() {
            self.mcp_filter_key(key);
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
        if self.transcript.search_editing.is_some() {
            self.search_key(key);
            return None;
        }
        if self.sessions_list.editing.is_some() {
            self.session_filter_key(key);
            return None;
        }
        if self.focus == PaneId::Transcript && !self.transcript.search.is_empty() {
            match key.code {
                KeyCode::Char('n') => {
                    self.transcript
                        .search_hit
                        .set(self.transcript.search_hit.get() + 1);
                    return None;
                }
                KeyCode::Char('N') => {
                    self.transcript
                        .search_hit
                        .set(self.transcript.search_hit.get().saturating_sub(1));
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
        if self.focus == PaneId::Tools && !self.read_only {
            use crate::view::hand_calls::Mode;
            match self.tools.hand.mode {
                Mode::Form(_) => return self.form_key(key),
                Mode::Calls => return self.calls_key(key),
                Mode::Detail => {
                    if let Some(action) = self.tools_detail_key(key) {
                        return action;
                    }
                }
            }
        }
        let command = keys::command(key)?;
        self.command(command)
    }

    fn help_key(&mut self, key: &KeyEvent) {
        match keys::command(key) {
            Some(Command::Up) => self
                .help
                .scroll
                .set(self.help.scroll.get().saturating_sub(1)),
            Some(Command::Down) => self.help.scroll.set(self.help.scroll.get() + 1),
            Some(Command::PageUp) => self
                .help
                .scroll
                .set(self.help.scroll.get().saturating_sub(10)),
            Some(Command::PageDown) => self.help.scroll.set(self.help.scroll.get() + 10),
            Some(Command::Help | Command::Back | Command::Quit | Command::Enter) => {
                self.help.open = false;
            }
            _ => {}
        }
    }

    fn detail_key(&mut self, key: &KeyEvent) {
        match keys::command(key) {
            Some(Command::Up) => self.frame_step(-1),
            Some(Command::Down) => self.frame_step(1),
            Some(Command::Back | Command::Enter | Command::Quit) => self.frames.detail = false,
            Some(Command::Help) => self.help.show(),
            _ => {}
        }
    }

    /// A replay: steps the whole console `delta` turn ends (`fine`: events inside a turn). An
    /// open turn view stays on its turn while that turn is there, and follows the newest turn
    /// when it showed the newest.
    pub(crate) fn move_tape(&mut self, delta: isize, fine: bool) {
        let newest = |c: &Console, session: u64| c.state.transcript(session).last().map(|t| t.id);
        let followed = self
            .turn_view
            .as_ref()
            .map(|p| newest(self, p.session) == Some(p.turn));
        let Some(tape) = self.tape.as_mut() else {
            return;
        };
        let moved = if fine {
            tape.scrub(delta, &mut self.state)
        } else {
            tape.step(delta, &mut self.state)
        };
        if !moved {
            return;
        }
        self.frames.paused = None;
        self.settle();
        if let Some(pick) = self.turn_view.as_ref() {
            let session = pick.session;
            let kept = self
                .state
                .transcript(session)
                .iter()
                .any(|t| t.id == pick.turn);
            match newest(self, session) {
                Some(latest) if followed == Some(true) || !kept => {
                    if let Some(pick) = self.turn_view.as_mut() {
                        pick.turn = latest;
                    }
                }
                Some(_) => {}
                None => self.turn_view = None,
            }
        }
    }

    fn command(&mut self, command: Command) -> Option<Action> {
        match command {
            Command::Quit => return self.quit(),
            Command::Zoom => self.zoom = !self.zoom,
            Command::Yank if self.focus == PaneId::Mcp => return self.copy_mcp(false),
            Command::Expand if self.focus == PaneId::Mcp => {
                self.mcp.method = self.next_mcp_filter(false);
            }
            Command::Yank => {
                if let Some(session) = self.selected
                    && !self.read_only
                {
                    return Some(Action::Yank { session });
                }
            }
            // `n` and `d` act on sessions in the Sessions pane only, as the help lists them:
            // from the Transcript, `n` after a search was cleared opened a session, and `d`
            // in Stats asked to close the selected one.
            Command::New | Command::Close if self.focus != PaneId::Sessions => {
                self.elsewhere(command);
            }
            Command::New if !self.read_only => {
                // The session is opened to be typed into: the next keys are its line, not
                // pane keys (each `n` of "banana" opened another session).
                self.focus = PaneId::Input;
                return Some(Action::NewSession);
            }
            Command::Reload if !self.read_only => {
                self.notice = Some(Notice {
                    text: "reading the config file again…".into(),
                    error: false,
                });
                return Some(Action::ReloadConfig);
            }
            Command::Reload => {}
            Command::Close => {
                let session = self.selected.filter(|_| !self.read_only)?;
                if self.state.session(session).is_some_and(|r| r.is_closed()) {
                    return None;
                }
                if let Some(row) = self.state.session(session).filter(|r| r.is_stored()) {
                    self.notice = Some(Notice {
                        text: format!(
                            "stored {} is not open here; the idle sweep deletes it when its handle expires, `turnscope sessions delete {}` (server stopped) at once",
                            row.handle_prefix, row.handle_prefix
                        ),
                        error: true,
                    });
                    return None;
                }
                // Attached, only the sessions this console started are its to let go of: said at
                // the first d (it asked "d again closes", then refused).
                if self.is_another_clients(session) {
                    self.notice = Some(Notice {
                        text: self.not_yours_to_close(session),
                        error: true,
                    });
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
                // Attached, MCP has no call that closes a session: d lets go of its handle
                // (tour L: the question promised a close the server never saw).
                let text = if matches!(self.state.header.source, Source::Attached { .. }) {
                    format!(
                        "d again lets go of #{session}'s handle here ({who}); the bot keeps it \
                         open until it idles out · Esc keeps it"
                    )
                } else {
                    format!("d again closes #{session} ({who}); Esc keeps it")
                };
                self.notice = Some(Notice { text, error: true });
            }
            Command::New => {}
            Command::Step(delta) => self.move_tape(delta, false),
            Command::Scrub(delta) => self.move_tape(delta, true),
            Command::Export => {
                if let Some(session) = self.selected {
                    let text = crate::draw::export::session_report(self, session);
                    return Some(Action::Export { session, text });
                }
            }
            Command::ExportTest => {
                let session = self.selected?;
                match self.state.test_case(session) {
                    Ok(text) => return Some(Action::ExportTest { session, text }),
                    Err(e) => {
                        self.notice = Some(Notice {
                            text: e,
                            error: true,
                        })
                    }
                }
            }
            Command::NextPane => self.cycle(1),
            Command::PrevPane => self.cycle(-1),
            Command::Jump(n) => {
                if let Some(pane) = ORDER.get(n.wrapping_sub(1)) {
                    self.focus_pane(*pane);
                }
            }
            Command::Help => self.help.show(),
            // Back closes or clears what is open; it never moves focus to the input line.
            Command::Back => {
                if self.quit_asked || self.close_asked.is_some() {
                    self.quit_asked = false;
                    self.close_asked = None;
                    self.notice = None;
                } else if self.zoom {
                    self.zoom = false;
                } else if self.focus == PaneId::Transcript && !self.transcript.search.is_empty() {
                    self.transcript.search.clear();
                    self.transcript.back.set(0);
                } else if self.focus == PaneId::Sessions && !self.sessions_list.filter.is_empty() {
                    self.sessions_list.filter.clear();
                    self.settle();
                } else if self.focus == PaneId::Frames && !self.frames.filter.is_empty() {
                    self.frames.filter = FrameFilter::default();
                } else if self.focus == PaneId::Mcp && !self.mcp.filter.is_empty() {
                    self.mcp.filter = crate::view::mcp::McpFilter::default();
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
            Command::Filter if self.focus == PaneId::Mcp => self.edit_mcp_filter(),
            Command::Filter if self.focus == PaneId::Transcript => {
                self.transcript.search_editing = Some(LineEdit::new(&self.transcript.search));
            }
            Command::Filter => {
                self.focus_pane(PaneId::Frames);
                self.frames.editing = Some(LineEdit::new(self.frames.filter.text()));
            }
            Command::Up => self.move_by(-1),
            Command::Down => self.move_by(1),
            Command::PageUp => self.page_by(-1),
            Command::PageDown => self.page_by(1),
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
                PaneId::Mcp => self.open_mcp_detail(),
                _ => {}
            },
            Command::Pause => {
                if self.focus == PaneId::Frames {
                    self.toggle_pause();
                }
            }
            Command::Scope => match self.focus {
                PaneId::Frames => self.frames.all = !self.frames.all,
                PaneId::Progress => self.progress.all = !self.progress.all,
                PaneId::Stats => self.stats.all = !self.stats.all,
                PaneId::Log => self.log.problems_only = !self.log.problems_only,
                PaneId::Mcp => self.mcp.client = self.next_mcp_filter(true),
                _ => {}
            },
        }
        None
    }

    /// `n` or `d` outside the Sessions pane: nothing is opened or closed; the notice says
    /// where they act (in the Transcript, `n` steps through a search's matches).
    fn elsewhere(&mut self, command: Command) {
        let text = match command {
            Command::New if self.focus == PaneId::Transcript => {
                "n steps through the search's matches here (/ searches); n in Sessions (1) \
                 opens a session"
            }
            Command::New => "n opens a session in Sessions (1)",
            _ => "d closes the selected session in Sessions (1)",
        };
        if !self.read_only {
            self.notice = Some(Notice {
                text: text.into(),
                error: false,
            });
        }
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
            PaneId::Progress => scroll_back(&self.progress.back, -delta),
            // The wheel over a form or the list of calls scrolls it (and its answer), not the
            // tool list under it.
            PaneId::Tools if matches!(self.tools.hand.mode, Mode::Form(_)) => {
                self.scroll_form(delta)
            }
            PaneId::Tools if matches!(self.tools.hand.mode, Mode::Calls) => {
                self.scroll_calls(delta)
            }
            PaneId::Tools => {
                self.tools.nav.step(delta, self.state.tools.len());
                self.tools.scroll.set(0);
            }
            PaneId::Stats => scroll_fwd(&self.stats.scroll, delta),
            PaneId::Log => scroll_back(&self.log.back, -delta),
            PaneId::Mcp => self.mcp_step(delta),
        }
    }

    /// PgUp/PgDn (`pages` -1 or 1): a page of what the focused pane shows (in Tools, of the
    /// tool's detail, as before).
    pub(crate) fn page_by(&mut self, pages: isize) {
        let page = self.page(self.focus);
        match self.focus {
            PaneId::Tools => scroll_fwd(&self.tools.scroll, pages * page),
            _ => self.move_by(pages * page),
        }
    }

    fn end(&mut self) {
        match self.focus {
            PaneId::Transcript | PaneId::Input => self.transcript.back.set(0),
            PaneId::Frames => self.frames.cursor = None,
            PaneId::Progress => self.progress.back.set(0),
            PaneId::Log => self.log.back.set(0),
            PaneId::Mcp => self.mcp.cursor = None,
            _ => self.move_by(isize::MAX / 2),
        }
    }

    pub(crate) fn scroll_transcript(&mut self, lines_back: isize) {
        scroll_back(&self.transcript.back, lines_back);
    }

    fn select_row_by(&mut self, delta: isize) {
        let len = self.listed_sessions().len();
        self.sessions_list.nav.step(delta, len);
        self.select_row(self.sessions_list.nav.cursor);
    }
}

fn scroll_fwd(cell: &Cell<usize>, delta: isize) {
    scroll_back(cell, delta);
}

//! The keys of what sits over the panes: the turn view (stepping turns, scrolling), the
//! transcript search and the frame filter being typed, and the question `q` asks while MCP
//! clients hold sessions.
//!
//! Methods of [`Console`]: they change its fields only, never the server or the terminal.

use crossterm::event::{KeyCode, KeyEvent};

use crate::input::actions::Action;

use crate::view::console::{Console, Notice};
use crate::view::filter::FrameFilter;
use crate::view::keys::{self, Command};
use crate::view::line_edit::{Edit, LineEdit};
use crate::view::nav::{TurnPick, scroll_back};
use turnscope::observe::SessionOpener;

impl Console {
    pub(crate) fn turn_view_key(&mut self, key: &KeyEvent) -> Option<Action> {
        let pick = self.turn_view.as_mut()?;
        let requests = self.state.wire.calls_of(pick.session, pick.turn).len();
        match key.code {
            KeyCode::Char('m') => {
                pick.requests_open = !pick.requests_open;
                return None;
            }
            KeyCode::Char('f') => {
                pick.unfolded = !pick.unfolded;
                return None;
            }
            KeyCode::Tab if requests > 0 => {
                pick.request = (pick.request + 1) % requests;
                return None;
            }
            KeyCode::BackTab if requests > 0 => {
                pick.request = (pick.request + requests - 1) % requests;
                return None;
            }
            KeyCode::Char('c' | 'J') => return self.copy_request(key.code == KeyCode::Char('J')),
            KeyCode::Char('e' | 'E') => return self.edit_request(key.code == KeyCode::Char('E')),
            KeyCode::Char('v') => {
                self.open_variants();
                return None;
            }
            // A replay steps inside the turn while the view shows it.
            KeyCode::Char(',') if self.tape.is_some() => {
                self.move_tape(-1, true);
                return None;
            }
            KeyCode::Char('.') if self.tape.is_some() => {
                self.move_tape(1, true);
                return None;
            }
            _ => {}
        }
        let page = self.body_page();
        let pick = self.turn_view.as_ref()?;
        let scroll = |d: isize| scroll_back(&pick.scroll, d);
        match key.code {
            KeyCode::Left | KeyCode::Char('h' | '[') => self.step_turn(-1),
            KeyCode::Right | KeyCode::Char('l' | ']') => self.step_turn(1),
            _ => match keys::command(key) {
                Some(Command::Up) => scroll(-1),
                Some(Command::Down) => scroll(1),
                Some(Command::PageUp) => scroll(-page),
                Some(Command::PageDown) => scroll(page),
                Some(Command::Home) => pick.scroll.set(0),
                Some(Command::Back | Command::Enter | Command::Quit | Command::Turn) => {
                    self.turn_view = None
                }
                Some(Command::Help) => self.help.show(),
                _ => {}
            },
        }
        None
    }

    /// `c` / `J` in the turn view: the selected model request as a curl command or as JSON.
    fn copy_request(&mut self, json: bool) -> Option<Action> {
        let pick = self.turn_view.as_ref()?;
        let calls = self.state.wire.calls_of(pick.session, pick.turn);
        let call = calls.get(pick.request);
        let text = call.and_then(|call| {
            if json {
                crate::draw::panes::model_request::request_json(self, call)
            } else {
                crate::draw::panes::model_request::request_curl(self, call)
            }
        });
        let mut what = format!(
            "model request {} of turn {} as {}",
            pick.request + 1,
            pick.turn,
            if json { "JSON" } else { "curl" }
        );
        if let Some(why) = call.and_then(|c| crate::draw::panes::model_request::incomplete(self, c))
        {
            what.push_str(&format!(" ({why})"));
        }
        match text {
            Some(text) => Some(Action::Copy { what, text }),
            None => {
                self.notice = Some(Notice {
                    text: format!("{what}: not recorded (no request, or [wire] max_kib = 0)"),
                    error: true,
                });
                None
            }
        }
    }

    /// Opens the turn view on the selected session's latest turn.
    pub fn open_turn_view(&mut self) {
        let Some(session) = self.selected else {
            self.notice = Some(Notice {
                text: "no session selected; select one in Sessions (1) first".into(),
                error: true,
            });
            return;
        };
        match self.state.transcript(session).last() {
            Some(turn) => self.turn_view = Some(TurnPick::new(session, turn.id)),
            None => {
                self.notice = Some(Notice {
                    text: format!("{} has no turn yet", self.state.session_name(session)),
                    error: false,
                })
            }
        }
    }

    /// Moves the turn view to the previous (-1) or next (+1) turn of its session.
    pub(crate) fn step_turn(&mut self, delta: isize) {
        if let Some(pick) = self.turn_view.as_mut() {
            pick.request = 0;
        }
        let Some(pick) = self.turn_view.as_mut() else {
            return;
        };
        let turns = self.state.transcript(pick.session);
        let Some(at) = turns.iter().position(|t| t.id == pick.turn) else {
            return;
        };
        let next = (at as isize + delta).clamp(0, turns.len() as isize - 1) as usize;
        pick.turn = turns[next].id;
        pick.scroll.set(0);
    }

    pub(crate) fn search_key(&mut self, key: &KeyEvent) {
        let Some(line) = self.transcript.search_editing.as_mut() else {
            return;
        };
        match line.key(key) {
            Edit::Accept => self.transcript.search_editing = None,
            Edit::Cancel => {
                self.transcript.search_editing = None;
                self.transcript.search.clear();
                self.transcript.back.set(0);
            }
            Edit::Changed => {
                self.transcript.search = line.text();
                self.transcript.search_hit.set(0);
            }
            Edit::Same => {}
        }
    }

    pub(crate) fn filter_key(&mut self, key: &KeyEvent) {
        let Some(line) = self.frames.editing.as_mut() else {
            return;
        };
        match line.key(key) {
            Edit::Accept => self.frames.editing = None,
            Edit::Cancel => {
                self.frames.editing = None;
                self.frames.filter = FrameFilter::default();
            }
            Edit::Changed => self.frames.filter = FrameFilter::parse(&line.text()),
            Edit::Same => {}
        }
    }

    /// `q`: quits, but asks first while MCP clients hold sessions (quitting ends them).
    pub(crate) fn quit(&mut self) -> Option<Action> {
        let held = self
            .state
            .session_rows()
            .iter()
            .filter(|r| {
                !r.is_closed()
                    && !r.is_stored()
                    && matches!(r.opener, SessionOpener::Mcp(_))
                    && self.state.client_gone(r.number).is_none()
            })
            .count();
        // Attached, quitting ends nothing: the server and its sessions go on.
        if held == 0 || self.read_only || self.quit_asked || self.state.header.source.is_attached()
        {
            return Some(Action::Quit);
        }
        self.quit_asked = true;
        let sessions = crate::text::plural(held as u64, "MCP client session");
        // With a store that outlives the process, quitting stops the sessions here but their
        // conversations go on after a restart (the same handles): said, not "ends".
        let h = &self.state.header;
        self.notice = Some(Notice {
            text: match h.store.as_deref() {
                Some(store) if store != "memory" && !h.store_degraded => format!(
                    "q again quits ({sessions} {}; the store keeps {} for the next run); Esc stays",
                    if held == 1 { "stops" } else { "stop" },
                    if held == 1 {
                        "its conversation"
                    } else {
                        "their conversations"
                    }
                ),
                Some(_) => format!(
                    "q again quits and ends {sessions} (the store keeps nothing); Esc stays"
                ),
                None => format!("q again quits and ends {sessions}; Esc stays"),
            },
            error: true,
        });
        None
    }

    /// `s` in the Sessions pane: the next sort, the selection kept.
    pub(crate) fn cycle_sort(&mut self) {
        self.sessions_list.sort = self.sessions_list.sort.next();
        self.settle();
    }

    /// `/` in the Sessions pane: type a filter.
    pub(crate) fn edit_session_filter(&mut self) {
        self.sessions_list.editing = Some(LineEdit::new(&self.sessions_list.filter));
    }

    /// A key while the sessions filter is typed: Enter keeps it, Esc clears it.
    pub(crate) fn session_filter_key(&mut self, key: &KeyEvent) {
        let Some(line) = self.sessions_list.editing.as_mut() else {
            return;
        };
        match line.key(key) {
            Edit::Accept => self.sessions_list.editing = None,
            Edit::Cancel => {
                self.sessions_list.editing = None;
                self.sessions_list.filter.clear();
            }
            Edit::Changed => self.sessions_list.filter = line.text(),
            Edit::Same => return,
        }
        self.sessions_list.nav.cursor = 0;
        self.settle();
    }
}

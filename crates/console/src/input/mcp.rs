//! The MCP pane's keys: picking an exchange, opening it whole and moving through it, the
//! typed filter, the client and method cycles, and the copies (`y` curl, `J` JSON).
//!
//! Methods of [`Console`]: they change its fields only, never the server or the terminal.

use crossterm::event::{KeyCode, KeyEvent};

use crate::input::actions::Action;
use crate::view::console::{Console, Notice};
use crate::view::keys::{self, Command};
use crate::view::line_edit::{Edit, LineEdit};
use crate::view::mcp::{McpDetail, McpFilter};
use crate::view::nav::scroll_back;

impl Console {
    /// Moves the MCP pane's cursor `delta` exchanges.
    pub(crate) fn mcp_step(&mut self, delta: isize) {
        let listed = self.mcp.listed(self.state.wire.exchanges()).clone();
        self.mcp.step(&listed, delta);
    }

    /// Enter in the MCP pane: opens the picked exchange whole.
    pub(crate) fn open_mcp_detail(&mut self) {
        match crate::draw::panes::mcp::picked(self) {
            Some((number, _)) => self.mcp.detail = Some(McpDetail::new(number)),
            None => {
                self.notice = Some(Notice {
                    text: "no MCP exchange listed to open".into(),
                    error: false,
                })
            }
        }
    }

    /// `/` in the MCP pane: edits its filter.
    pub(crate) fn edit_mcp_filter(&mut self) {
        self.mcp.editing = Some(LineEdit::new(self.mcp.filter.text()));
    }

    pub(crate) fn mcp_filter_key(&mut self, key: &KeyEvent) {
        let Some(line) = self.mcp.editing.as_mut() else {
            return;
        };
        match line.key(key) {
            Edit::Accept => self.mcp.editing = None,
            Edit::Cancel => {
                self.mcp.editing = None;
                self.mcp.filter = McpFilter::default();
            }
            Edit::Changed => self.mcp.filter = McpFilter::parse(&line.text()),
            Edit::Same => {}
        }
    }

    pub(crate) fn mcp_detail_key(&mut self, key: &KeyEvent) -> Option<Action> {
        let page = self.body_page();
        let detail = self.mcp.detail.as_mut()?;
        match key.code {
            KeyCode::Char('f') => {
                detail.unfolded = !detail.unfolded;
                return None;
            }
            KeyCode::Char('y') => return self.copy_mcp(false),
            KeyCode::Char('J') => return self.copy_mcp(true),
            KeyCode::Left | KeyCode::Char('h' | '[') => {
                self.step_mcp_detail(-1);
                return None;
            }
            KeyCode::Right | KeyCode::Char('l' | ']') => {
                self.step_mcp_detail(1);
                return None;
            }
            _ => {}
        }
        let scroll = |d: isize| scroll_back(&detail.scroll, d);
        match keys::command(key) {
            Some(Command::Up) => scroll(-1),
            Some(Command::Down) => scroll(1),
            Some(Command::PageUp) => scroll(-page),
            Some(Command::PageDown) => scroll(page),
            Some(Command::Home) => detail.scroll.set(0),
            Some(Command::End) => detail.scroll.set(usize::MAX / 2),
            Some(Command::Back | Command::Enter | Command::Quit) => self.mcp.detail = None,
            Some(Command::Help) => self.help.open = true,
            _ => {}
        }
        None
    }

    /// Opens the previous (-1) or next (+1) exchange listed, and puts the cursor on it.
    fn step_mcp_detail(&mut self, delta: isize) {
        let Some(number) = self.mcp.detail.as_ref().map(|d| d.number) else {
            return;
        };
        let listed = self.mcp.listed(self.state.wire.exchanges()).clone();
        if listed.is_empty() {
            return;
        }
        let at = listed.partition_point(|n| *n < number);
        let to = (at as isize + delta).clamp(0, listed.len() as isize - 1) as usize;
        self.mcp.cursor = Some(listed[to]);
        self.mcp.detail = Some(McpDetail::new(listed[to]));
    }

    /// The next client (`clients`) or method filter of the MCP pane: none, then each one seen
    /// in turn, then none again.
    pub(crate) fn next_mcp_filter(&self, clients: bool) -> Option<String> {
        let mut seen: Vec<String> = Vec::new();
        for row in self.state.wire.exchanges().items() {
            let x = row.exchange();
            let v = if clients { &x.client } else { &x.method };
            if let Some(v) = v
                && !seen.contains(v)
            {
                seen.push(v.clone());
            }
        }
        let now = if clients {
            &self.mcp.client
        } else {
            &self.mcp.method
        };
        match now {
            None => seen.into_iter().next(),
            Some(cur) => {
                let at = seen.iter().position(|s| s == cur);
                at.and_then(|i| seen.get(i + 1).cloned())
            }
        }
    }

    /// `y` (curl) or `J` (JSON) on the MCP pane or an opened exchange: the opened one, else the
    /// picked one (the newest listed when following).
    pub(crate) fn copy_mcp(&mut self, json: bool) -> Option<Action> {
        let kept = self.state.wire.exchanges();
        let x = match &self.mcp.detail {
            Some(d) => kept.by_number(d.number).map(|r| r.exchange()),
            None => crate::draw::panes::mcp::picked(self).map(|(_, x)| x),
        };
        match x {
            Some(x) => Some(Action::Copy {
                what: format!(
                    "MCP {} {} as {}",
                    x.http_method,
                    x.method.as_deref().unwrap_or("exchange"),
                    if json { "JSON" } else { "curl" }
                ),
                text: if json {
                    serde_json::to_string_pretty(x).unwrap_or_default()
                } else {
                    turnscope::observe::rebuild::mcp_curl(x)
                },
            }),
            None => {
                self.notice = Some(Notice {
                    text: "no MCP exchange listed to copy".into(),
                    error: true,
                });
                None
            }
        }
    }
}

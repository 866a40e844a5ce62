//! The mouse: a click focuses the pane under it and selects the row or tab it hits; the
//! wheel scrolls the pane under the pointer without moving the focus.

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};

use crate::view::console::Console;

use crate::view::frames::FrameLine;
use crate::view::ids::PaneId;
use crate::view::layout::Areas;

impl Console {
    pub(crate) fn mouse(&mut self, mouse: &MouseEvent) {
        let areas = self.areas.get();
        let Some(pane) = areas.pane_at(mouse.column, mouse.row, self.inspector) else {
            if matches!(mouse.kind, MouseEventKind::Down(_)) {
                self.help.open = false;
            }
            return;
        };
        match mouse.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if self.help.open || self.frames.detail {
                    self.help.open = false;
                    self.frames.detail = false;
                    return;
                }
                self.focus_pane(pane);
                self.click_row(pane, mouse.column, mouse.row, &areas);
            }
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let delta = if mouse.kind == MouseEventKind::ScrollUp {
                    -3
                } else {
                    3
                };
                let focus = self.focus;
                self.focus = pane;
                self.move_by(delta);
                self.focus = focus;
            }
            _ => {}
        }
    }

    fn click_row(&mut self, pane: PaneId, x: u16, y: u16, areas: &Areas) {
        match pane {
            PaneId::Sessions => {
                let first = areas.sessions.y + 2;
                if y >= first {
                    let i = self.sessions_list.nav.offset() + (y - first) as usize;
                    self.select_row(i);
                }
            }
            PaneId::Frames => {
                let first = areas.inspector.y + 2;
                if y >= first {
                    let lines = self.frame_lines();
                    let i = self.frames.offset.get() + (y - first) as usize;
                    if matches!(lines.get(i), Some(FrameLine::Frame(_))) {
                        let last = lines.iter().rposition(|l| matches!(l, FrameLine::Frame(_)));
                        self.set_frame_cursor(&lines, i, Some(i) == last);
                    }
                }
            }
            PaneId::Tools => {
                let (list, _) = crate::draw::panes::tools::split(
                    crate::draw::panes::inner(areas.inspector),
                    &self.state.tools,
                );
                let first = list.y + 1;
                if x < list.right() && y >= first {
                    let i = self.tools.nav.offset() + (y - first) as usize;
                    if i < self.state.tools.len() {
                        self.tools.nav.cursor = i;
                        self.tools.scroll.set(0);
                    }
                }
            }
            _ => {}
        }
    }
}

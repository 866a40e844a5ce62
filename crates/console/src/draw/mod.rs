//! Draws the whole screen from a [`Console`]: header, panes, footer, overlays. It reads the
//! console and writes back only layout and scroll positions (cells), never state.

pub mod export;
pub mod help;
pub mod panes;

use ratatui::Frame;

use crate::view::console::Console;
use crate::view::layout::Areas;

/// Draws one frame of the console.
pub fn draw(f: &mut Frame, c: &Console) {
    let screen = f.area();
    let areas = Areas::compute(
        screen,
        c.listed_sessions().len(),
        if c.read_only {
            2
        } else {
            c.input.lines().len()
        },
    );
    let areas = if c.zoom { areas.zoomed(c.focus) } else { areas };
    c.areas.set(areas);
    panes::bars::header(f, areas.header, c);
    // A zoomed screen leaves the other panes' areas empty: they are not drawn.
    let shown = |r: ratatui::layout::Rect| r.width > 0 && r.height > 0;
    if shown(areas.sessions) {
        panes::sessions::draw(f, areas.sessions, c);
    }
    if shown(areas.transcript) {
        panes::transcript::draw(f, areas.transcript, c);
    }
    if shown(areas.input) {
        panes::input::draw(f, areas.input, c);
    }
    if shown(areas.inspector) {
        panes::inspector::draw(f, areas.inspector, c);
    }
    panes::bars::footer(f, areas.footer, c);
    if c.turn_view.is_some() {
        panes::turn_view::draw(f, areas, c);
    }
    if c.mcp.detail.is_some() {
        panes::mcp_detail::draw(f, areas, c);
    }
    if c.help.open {
        crate::draw::help::draw(f, screen, c);
    }
}

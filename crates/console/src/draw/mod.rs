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
        c.focus,
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
    panes::resend::draw_variants(f, areas, c);
    panes::resend::draw_editor(f, areas, c);
    if c.help.open {
        crate::draw::help::draw(f, screen, c);
    }
    notice(f, areas, c);
}

/// Lines a notice may take before it is cut.
const NOTICE_LINES: usize = 3;

/// The latest notice, in a box over everything at the bottom right of the body (so an open turn
/// view or help never hides what a key just did), wrapped to at most [`NOTICE_LINES`] lines.
fn notice(f: &mut Frame, areas: Areas, c: &Console) {
    use ratatui::layout::Rect;
    use ratatui::text::Line;
    use ratatui::widgets::{Block, BorderType, Clear, Paragraph};
    let Some(notice) = &c.notice else {
        return;
    };
    let body = areas.body();
    let room = (body.width as usize).saturating_sub(6);
    if room < 10 || body.height < 4 {
        return;
    }
    let mut lines = crate::text::wrap(&notice.text, room);
    if lines.len() > NOTICE_LINES {
        lines.truncate(NOTICE_LINES);
        let last = lines.pop().unwrap_or_default();
        lines.push(crate::text::truncate(&format!("{last}…"), room));
    }
    let w = lines
        .iter()
        .map(|l| crate::text::width(l))
        .max()
        .unwrap_or(0) as u16
        + 4;
    let h = (lines.len() as u16 + 2).min(body.height.saturating_sub(1));
    // Inside the bottom-right pane's border, so its own border meets none of the pane's (on
    // the pane's bottom row the two corners stood side by side: `╯╯`).
    let area = Rect::new(
        body.right().saturating_sub(w + 1),
        body.bottom().saturating_sub(h + 1),
        w,
        h,
    );
    let t = &c.theme;
    let style = if notice.error { t.error } else { t.ok };
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(
            lines
                .into_iter()
                .map(|l| Line::styled(format!(" {l}"), style))
                .collect::<Vec<_>>(),
        )
        .block(
            Block::bordered()
                .border_type(BorderType::Rounded)
                .border_style(style),
        )
        .style(t.overlay),
        area,
    );
}

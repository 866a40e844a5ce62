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
    match unseen(c, areas) {
        // What has the keys cannot be drawn: said, rather than taking keys unseen.
        Some(what) if !c.help.open => too_small(f, screen, c, what),
        _ => {
            if c.turn_view.is_some() {
                panes::turn_view::draw(f, areas, c);
            }
            if c.mcp.detail.is_some() {
                panes::mcp_detail::draw(f, areas, c);
            }
            panes::resend::draw_variants(f, areas, c);
            panes::resend::draw_editor(f, areas, c);
        }
    }
    if c.help.open {
        crate::draw::help::draw(f, screen, c);
    }
    notice(f, areas, c);
}

/// The least body a view over it (the turn view, an MCP exchange, the request editor, the
/// variants) is drawn in: its borders and a line, at least 20 cells wide.
const VIEW_MIN: (u16, u16) = (20, 3);

/// What has the keys but cannot be drawn in `areas` (the screen is too small), by name: a
/// view over the body, the Tools pane's hand-call form or list of calls, the frame detail.
fn unseen(c: &Console, areas: Areas) -> Option<&'static str> {
    use crate::view::keys::KeyOwner;
    let body = areas.body();
    let body_fits = body.width >= VIEW_MIN.0 && body.height >= VIEW_MIN.1;
    let inspector = panes::inner(areas.inspector);
    let (_, detail) = panes::tools::split(inspector, &c.state.tools);
    // The form and the calls are drawn right of the tool list, under the sources line.
    let form_fits = detail.width > 16 && detail.height >= 2;
    let frames_fit = inspector.width >= 20 && inspector.height >= 3;
    match c.key_owner() {
        KeyOwner::Editor if !body_fits => Some("the request editor"),
        KeyOwner::Variants if !body_fits => Some("the variants"),
        KeyOwner::TurnView if !body_fits => Some("the turn view"),
        KeyOwner::McpDetail if !body_fits => Some("the exchange"),
        KeyOwner::Form if !form_fits => Some("the hand-call form"),
        KeyOwner::Calls if !form_fits => Some("the hand calls"),
        KeyOwner::FrameDetail if !frames_fit => Some("the frame detail"),
        _ => None,
    }
}

/// Says on one line over the middle of `screen` that `what` (which has the keys) does not fit
/// and how to leave it, as much of it as fits: an overlay drawn nowhere took keys unseen.
pub fn too_small(f: &mut Frame, screen: ratatui::layout::Rect, c: &Console, what: &str) {
    use ratatui::layout::Rect;
    use ratatui::widgets::{Clear, Paragraph};
    if screen.width == 0 || screen.height == 0 {
        return;
    }
    let room = screen.width as usize;
    let said = [
        format!("{what} does not fit: make the terminal larger · Esc closes"),
        format!("{what}: make the terminal larger · Esc"),
        "make the terminal larger · Esc".to_string(),
        "make the terminal larger".to_string(),
        "enlarge the terminal".to_string(),
        "too small".to_string(),
    ]
    .into_iter()
    .find(|s| crate::text::width(s) <= room)
    .unwrap_or_else(|| crate::text::truncate("too small", room));
    let area = Rect::new(screen.x, screen.y + screen.height / 2, screen.width, 1);
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(said)
            .style(c.theme.warn)
            .alignment(ratatui::layout::Alignment::Center),
        area,
    );
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
    let mut area = Rect::new(
        body.right().saturating_sub(w + 1),
        body.bottom().saturating_sub(h + 1),
        w,
        h,
    );
    // Never over the input line: a notice that the person's line is back in it hid the line
    // (tour T). Above the Input pane instead, where there is room.
    let input = areas.input;
    let over_body = c.turn_view.is_some()
        || c.mcp.detail.is_some()
        || c.editor.is_some()
        || c.variants_view.is_some();
    if !over_body && input.width > 0 && area.intersects(input) && input.y >= body.y + h {
        area.y = input.y - h;
    }
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

//! The help overlay: every key binding of [`keys::BINDINGS`](super::keys::BINDINGS), grouped
//! by where it applies, over the middle of the screen.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph};

use super::app::Console;
use super::keys::{BINDINGS, Scope};
use super::text::{pad, wrap};

/// Every line of the help, for a popup `width` cells wide inside.
pub fn lines(c: &Console, width: usize) -> Vec<Line<'static>> {
    let t = &c.theme;
    let keys_w = BINDINGS
        .iter()
        .map(|b| super::text::width(b.keys))
        .max()
        .unwrap_or(10)
        + 2;
    let what_w = width.saturating_sub(keys_w + 2).max(10);
    let mut out = Vec::new();
    let mut scope: Option<Scope> = None;
    for b in BINDINGS {
        if scope != Some(b.scope) {
            if scope.is_some() {
                out.push(Line::default());
            }
            out.push(Line::styled(b.scope.heading().to_string(), t.title));
            scope = Some(b.scope);
        }
        for (i, piece) in wrap(b.what, what_w).into_iter().enumerate() {
            let keys = if i == 0 { b.keys } else { "" };
            out.push(Line::from(vec![
                Span::raw("  "),
                Span::styled(pad(keys, keys_w), t.key),
                Span::styled(piece, t.overlay),
            ]));
        }
    }
    out
}

/// Draws the overlay.
pub fn draw(f: &mut Frame, screen: Rect, c: &Console) {
    let w = screen.width.saturating_sub(6).min(96);
    let h = screen.height.saturating_sub(4);
    if w < 20 || h < 5 {
        return;
    }
    let area = Rect::new(
        screen.x + (screen.width - w) / 2,
        screen.y + (screen.height - h) / 2,
        w,
        h,
    );
    let t = &c.theme;
    let all = lines(c, w.saturating_sub(2) as usize);
    let inner_h = h.saturating_sub(2) as usize;
    let max = all.len().saturating_sub(inner_h);
    let scroll = c.help_scroll.get().min(max);
    c.help_scroll.set(scroll);
    let more = if max > 0 { " ↑↓ scroll ·" } else { "" };
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .border_style(t.border_focused)
        .style(t.overlay)
        .title(Line::styled(" Keys ", t.title))
        .title_bottom(Line::styled(format!("{more} Esc or ? closes "), t.dim));
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(all.into_iter().skip(scroll).collect::<Vec<_>>()).block(block),
        area,
    );
}

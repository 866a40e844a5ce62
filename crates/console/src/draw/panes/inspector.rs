//! The inspector: one bordered area whose top border is a tab bar (Frames, Progress, Tools,
//! Stats) and whose inside is the pane of the visible tab.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType};

use super::inner;
use crate::view::console::Console;
use crate::view::ids::PaneId;
use crate::view::layout::{TABS, tab_label};

/// Draws the inspector with its visible tab.
pub fn draw(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let focused = c.focus.is_inspector();
    let mut tabs = Vec::new();
    for (i, pane) in TABS.into_iter().enumerate() {
        if i > 0 {
            tabs.push(Span::styled("│", t.border));
        }
        let style = if pane == c.inspector {
            t.tab_active
        } else {
            t.tab
        };
        tabs.push(Span::styled(tab_label(pane), style));
        if pane == PaneId::Log && c.state.journal.errors > 0 {
            tabs.push(Span::styled(
                format!("{} ", crate::text::count(c.state.journal.errors)),
                t.error,
            ));
        }
    }
    let block = Block::bordered()
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Rounded
        })
        .border_style(if focused { t.border_focused } else { t.border })
        .title(Line::from(tabs));
    f.render_widget(block, area);
    let body = inner(area);
    if body.height == 0 || body.width == 0 {
        return;
    }
    match c.inspector {
        PaneId::Progress => super::progress::draw(f, body, c),
        PaneId::Tools => super::tools::draw(f, body, c),
        PaneId::Stats => super::stats::draw(f, body, c),
        PaneId::Log => super::log::draw(f, body, c),
        PaneId::Mcp => super::mcp::draw(f, body, c),
        _ => super::frames::draw(f, body, c),
    }
}

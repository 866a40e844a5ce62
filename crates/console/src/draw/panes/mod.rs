//! The panes: each file draws one pane from the [`Console`] into an
//! area, and never changes anything but scroll positions kept in cells.
//!
//! Sessions, Transcript and Input sit on the left; Frames, Progress, Tools and Stats share
//! the inspector on the right as tabs ([`inspector`]); the header and footer are [`bars`].

pub mod bars;
pub mod frames;
pub mod hand_call;
pub mod input;
pub mod inspector;
pub mod json_view;
pub mod log;
pub mod mcp;
pub mod mcp_detail;
pub mod mcp_tasks;
pub mod model_request;
pub mod pipeline;
pub mod progress;
pub mod resend;
pub mod sessions;
pub mod stats;
pub mod tool_call;
pub mod tools;
pub mod transcript;
pub mod turn_view;

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType};

use crate::text::fit;
use crate::view::console::Console;
use crate::view::ids::PaneId;

/// The bordered block of a pane, its border highlighted when focused, titled
/// ` N Title ` plus `extra`, the title cut with `…` to the pane's `width`.
pub fn pane_block<'a>(c: &Console, pane: PaneId, extra: Vec<Span<'a>>, width: u16) -> Block<'a> {
    let focused = c.focus == pane;
    let t = &c.theme;
    let mut title = vec![
        Span::styled(format!(" {} ", pane.number()), t.key),
        Span::styled(format!("{} ", pane.title()), t.title),
    ];
    title.extend(extra);
    Block::bordered()
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Rounded
        })
        .border_style(if focused { t.border_focused } else { t.border })
        .title(fit(Line::from(title), (width as usize).saturating_sub(2)))
}

/// A dim `· text ` title piece.
pub fn dim_piece<'a>(c: &Console, text: impl Into<String>) -> Span<'a> {
    Span::styled(format!("· {} ", text.into()), c.theme.dim)
}

/// The visible part of `lines` when scrolled `back` lines up from the bottom; `back` is
/// clamped (and written back) so scrolling never runs past the top.
pub fn bottom_window<T>(
    lines: &[T],
    height: usize,
    back: &std::cell::Cell<usize>,
) -> (usize, usize) {
    let max_back = lines.len().saturating_sub(height);
    let b = back.get().min(max_back);
    back.set(b);
    let end = lines.len() - b;
    (end.saturating_sub(height), end)
}

/// The inner area of a bordered block.
pub fn inner(area: Rect) -> Rect {
    area.inner(ratatui::layout::Margin::new(1, 1))
}

/// A line of one styled text.
pub fn line<'a>(text: impl Into<String>, style: Style) -> Line<'a> {
    Line::from(Span::styled(text.into(), style))
}

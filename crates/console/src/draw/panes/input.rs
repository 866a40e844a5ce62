//! The Input pane: a multi-line text area whose line goes to the selected session. In a replay
//! it says so instead.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{dim_piece, inner, pane_block};
use crate::state::Source;
use crate::view::console::Console;
use crate::view::ids::PaneId;

/// Draws the pane.
pub fn draw(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    if let Source::Replay { file, unreadable } = &c.state.header.source {
        // Lines skipped come first, and on the border too: at the README's 120x35 the pane is
        // two rows, and the note under the file's name was cut away (tour M).
        let mut title = vec![dim_piece(c, "read-only")];
        if unreadable.count > 0 {
            title.push(Span::styled(
                format!(
                    "· {} unreadable line{} skipped ",
                    unreadable.count,
                    if unreadable.count == 1 { "" } else { "s" }
                ),
                t.warn,
            ));
        }
        let block = pane_block(c, PaneId::Input, title, area.width);
        let mut text = Vec::new();
        if let Some(first) = &unreadable.first {
            // The count is on the border.
            text.push(Line::styled(format!("first skipped: {first}"), t.warn));
        }
        text.push(Line::from(vec![
            Span::styled("Replay of ", t.dim),
            Span::styled(file.clone(), t.accent),
            Span::styled(
                format!(
                    ": {} events; nothing can be sent.",
                    crate::text::count(c.state.events_seen)
                ),
                t.dim,
            ),
        ]));
        // Wrapped: a long file name pushed the end off a narrow pane.
        f.render_widget(
            Paragraph::new(text)
                .block(block)
                .wrap(ratatui::widgets::Wrap { trim: true }),
            area,
        );
        return;
    }
    let mut extra = Vec::new();
    match c.selected {
        // Watching whisker alone: nothing here chats, selected or not.
        _ if c.watching_only() => {
            extra.push(dim_piece(c, "watching only: nothing here chats"));
        }
        _ if c.no_chat_here => {
            extra.push(dim_piece(
                c,
                "no start/chat on this server: nothing here chats",
            ));
        }
        // Attached, before the person has a session: their line opens one, whatever is
        // selected.
        _ if c.start_on_first_line && c.own.is_none() => {
            extra.push(dim_piece(c, "to a new session of yours"));
        }
        // Attached to a bot that keeps no conversation past its session: a line into the
        // person's own session that closed starts a new one (it said `to #4` still).
        Some(n)
            if c.closed_own_starts_anew
                && c.own == Some(n)
                && c.state.session(n).is_some_and(|row| row.is_closed()) =>
        {
            extra.push(dim_piece(
                c,
                format!("to a new session of yours (#{n} closed)"),
            ));
        }
        Some(n) => {
            extra.push(dim_piece(c, format!("to {}", c.state.session_name(n))));
            if let Some(refused) = c.refused() {
                extra.push(Span::styled(format!("· {} ", refused.title()), t.warn));
            }
        }
        None => extra.push(dim_piece(c, "no session selected")),
    }
    if c.selected
        .is_some_and(|n| c.input_line.waiting.contains_key(&n))
    {
        extra.push(Span::styled("· waiting for the reply… ", t.accent));
    }
    // Notices are drawn over the whole screen (`draw::notice`), not on this border.
    let block = pane_block(c, PaneId::Input, extra, area.width);
    let body = inner(area);
    f.render_widget(block, area);
    let empty = c.input.lines().iter().all(String::is_empty);
    match c.refused() {
        // Said before anything is typed, in place of "Type a line; Enter sends".
        Some(refused) if empty => f.render_widget(
            // A cell in, where the empty line's cursor and placeholder start.
            Paragraph::new(Line::styled(format!(" {}", refused.placeholder()), t.warn))
                .wrap(ratatui::widgets::Wrap { trim: false }),
            body,
        ),
        _ => f.render_widget(&c.input, body),
    }
}

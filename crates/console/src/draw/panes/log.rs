//! The Log pane: every refused MCP call, tool error, model fault, bridge or tool-source
//! warning and log line, newest at the bottom, each with its time and session; `a` keeps
//! only the errors and warnings.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::bottom_window;
use crate::state::journal::Level;
use crate::text::{count, one_line, pad, plural, wrap};
use crate::view::console::Console;
use crate::view::ids::PaneId;

/// The window `start..end` of the rows, following the newest, moved to the start of the
/// entry it is in when no entry begins in it (a low pane showed only the newest entry's last
/// wrapped row, without its time or level); as it is otherwise. `heads` marks the rows that
/// begin one (empty: the rows are a note, not entries).
fn whole_entries(heads: &[bool], start: usize, end: usize, visible: usize) -> (usize, usize) {
    if heads.is_empty() || (start..end).any(|row| heads[row]) {
        return (start, end);
    }
    let head = (0..start).rev().find(|&row| heads[row]).unwrap_or(0);
    (head, (head + visible).min(heads.len()))
}

/// Draws the pane into the inspector's inside.
pub fn draw(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let j = &c.state.journal;
    let mut out = vec![Line::from(vec![
        Span::styled(
            if c.log.problems_only {
                "errors and warnings"
            } else {
                "everything"
            },
            t.accent,
        ),
        Span::styled(" · ", t.dim),
        Span::styled(
            plural(j.errors, "error"),
            if j.errors > 0 { t.error } else { t.dim },
        ),
        Span::styled(" · ", t.dim),
        Span::styled(
            plural(j.warnings, "warning"),
            if j.warnings > 0 { t.warn } else { t.dim },
        ),
        Span::styled(" · times UTC", t.dim),
    ])];
    let width = area.width as usize;
    // time(13) level(6) session(5) source(..) then the message, wrapped under itself.
    let head_w = 13 + 6 + 5;
    let mut rows: Vec<Line<'static>> = Vec::new();
    // Which rows begin an entry (its time, level and session).
    let mut heads: Vec<bool> = Vec::new();
    for e in j
        .entries()
        .iter()
        .filter(|e| !c.log.problems_only || e.level > Level::Info)
    {
        let style = match e.level {
            Level::Error => t.error,
            Level::Warn => t.warn,
            Level::Info => t.text,
        };
        let mut text = format!("{}: {}", e.source, one_line(&e.message));
        if e.repeats > 1 {
            text.push_str(&format!(" (×{})", count(e.repeats)));
        }
        let body_w = width.saturating_sub(head_w).max(10);
        for (i, piece) in wrap(&text, body_w).into_iter().enumerate() {
            let head = if i == 0 {
                vec![
                    Span::styled(pad(&c.state.clock(e.at_us), 13), t.dim),
                    Span::styled(pad(e.level.label(), 6), style),
                    Span::styled(
                        pad(&e.session.map(|n| format!("#{n}")).unwrap_or_default(), 5),
                        t.dim,
                    ),
                ]
            } else {
                vec![Span::raw(" ".repeat(head_w))]
            };
            let mut spans = head;
            spans.push(Span::styled(piece, if i == 0 { style } else { t.text }));
            rows.push(Line::from(spans));
            heads.push(i == 0);
        }
    }
    if rows.is_empty() {
        heads.clear();
        let empty = if c.log.problems_only && !j.entries().is_empty() {
            "No error or warning: a shows everything."
        } else {
            "Nothing went wrong yet: refused calls, tool errors, model faults and bridge warnings land here."
        };
        rows.extend(
            wrap(empty, width.max(10))
                .into_iter()
                .map(|l| Line::styled(l, t.dim)),
        );
    }
    let visible = area.height.saturating_sub(1) as usize;
    c.shown_rows(PaneId::Log, visible);
    let (start, end) = bottom_window(&rows, visible, &c.log.back);
    // Scrolled back, the rows are as they come: a tall entry's every row is reachable.
    let (start, end) = if c.log.back.get() == 0 {
        whole_entries(&heads, start, end, visible)
    } else {
        (start, end)
    };
    out.extend(rows[start..end].iter().cloned());
    f.render_widget(Paragraph::new(out), area);
}

#[cfg(test)]
mod tests {
    use super::whole_entries;

    #[test]
    fn a_window_with_no_entry_beginning_in_it_shows_the_entrys_start() {
        // Entries of 3, 2 and 2 rows.
        let heads = [true, false, false, true, false, true, false];
        // An entry begins in it: as it is.
        assert_eq!(whole_entries(&heads, 3, 7, 4), (3, 7));
        assert_eq!(whole_entries(&heads, 2, 7, 5), (2, 7));
        // One row of room at the bottom: the newest entry's first row, not its last.
        assert_eq!(whole_entries(&heads, 6, 7, 1), (5, 6));
        // No rows of entries (a note): as it is.
        assert_eq!(whole_entries(&[], 0, 2, 2), (0, 2));
    }
}

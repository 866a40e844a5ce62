//! The Progress pane: progress notifications as they were sent to each MCP caller, with each
//! session's totals, rate, and the notifications that coalesced several pieces marked.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::bottom_window;
use crate::text::{count, one_line, pad, truncate_start};
use crate::view::console::Console;
use crate::view::ids::PaneId;

/// Draws the pane into the inspector's inside.
pub fn draw(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let scope = if c.progress.all { None } else { c.selected };
    // Cut at a word where the pane is narrow (it was cut mid-word: "gets its bac").
    let mut out = vec![crate::text::fit_words(
        Line::from(vec![
            Span::styled(
                match scope {
                    None => "all sessions".to_string(),
                    Some(n) => format!("session {}", c.state.session_name(n)),
                },
                t.accent,
            ),
            Span::styled(
                " · one per reply piece; a lagging caller gets its backlog in one",
                t.dim,
            ),
        ]),
        area.width as usize,
    )];
    let totals: Vec<_> = c
        .state
        .progress_totals()
        .iter()
        .filter(|(n, _)| scope.is_none_or(|s| s == **n))
        .collect();
    for (n, tot) in &totals {
        let rate = tot
            .rate()
            .map(|r| format!("{r:.1}/s"))
            .unwrap_or_else(|| "-".into());
        out.push(Line::from(vec![
            Span::styled(pad(&format!("#{n}"), 5), t.text),
            Span::styled(
                format!(
                    "{} notifications · {} pieces · ",
                    count(tot.notes),
                    count(tot.pieces)
                ),
                t.text,
            ),
            Span::styled(
                format!("{} coalesced", count(tot.coalesced)),
                if tot.coalesced > 0 { t.warn } else { t.text },
            ),
            Span::styled(format!(" · {rate}"), t.accent),
        ]));
    }
    let rows: Vec<_> = c
        .state
        .progress()
        .iter()
        .filter(|r| scope.is_none_or(|s| s == r.session))
        .collect();
    if rows.is_empty() {
        out.extend(
            crate::text::wrap(
                "No progress notifications yet: they go to MCP callers whose chat call carries a progressToken.",
                area.width as usize,
            )
            .into_iter()
            .map(|l| Line::styled(l, t.dim)),
        );
        f.render_widget(Paragraph::new(out), area);
        return;
    }
    out.push(Line::styled(
        format!(
            "{}{}{}{}message",
            pad("since open", 11),
            pad("ses", 5),
            pad("progress", 10),
            pad("pieces", 14)
        ),
        t.dim,
    ));
    let height = (area.height as usize).saturating_sub(out.len());
    c.shown_rows(PaneId::Progress, height);
    let (start, end) = bottom_window(&rows, height, &c.progress.back);
    let msg_w = (area.width as usize).saturating_sub(40);
    for r in &rows[start..end] {
        let coalesced = r.pieces > 1;
        out.push(Line::from(vec![
            // The same time base as the Frames pane: since the session opened.
            Span::styled(
                pad(&c.state.session_relative(r.session, r.at_us), 11),
                t.dim,
            ),
            Span::styled(pad(&format!("#{}", r.session), 5), t.dim),
            Span::styled(pad(&r.progress.to_string(), 10), t.text),
            Span::styled(
                pad(
                    &if coalesced {
                        format!("×{} coalesced", r.pieces)
                    } else {
                        "×1".to_string()
                    },
                    14,
                ),
                if coalesced { t.warn } else { t.dim },
            ),
            // The message is the reply so far: its end is the news.
            Span::styled(truncate_start(&one_line(&r.message), msg_w), t.bot),
        ]));
    }
    f.render_widget(Paragraph::new(out), area);
}

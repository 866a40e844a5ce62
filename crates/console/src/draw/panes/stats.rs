//! The Stats pane: latency distributions (p50, p95, p99, max and a sparkline of recent
//! samples) for turn total, time to first piece, model requests, each tool and each MCP
//! method served, overall or for the selected session; then the counters and recent logs.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::text::{count, micros, pad, sparkline};
use crate::view::console::Console;
use crate::view::ids::PaneId;
use turnscope::observe::stats::Summary;

/// Draws the pane into the inspector's inside.
pub fn draw(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let s = &c.state;
    let scope = if c.stats.all { None } else { c.selected };
    let mut out = Vec::new();
    out.push(Line::from(vec![
        Span::styled(
            match scope {
                None => "all sessions".to_string(),
                Some(n) => format!(
                    "session {} (its last {} samples per metric)",
                    c.state.session_name(n),
                    crate::state::SESSION_SAMPLES
                ),
            },
            t.accent,
        ),
        Span::styled(" · a switches", t.dim),
    ]));
    let rows: Vec<(String, Summary, Vec<u64>)> = match scope {
        None => s
            .stats
            .summaries()
            .into_iter()
            .map(|(name, sum)| {
                let recent = s.stats.recent(&name).to_vec();
                (name, sum, recent)
            })
            .collect(),
        Some(n) => s
            .session_samples(n)
            .map(|samples| samples.summaries())
            .unwrap_or_default(),
    };
    let name_w = rows
        .iter()
        .map(|(n, _, _)| crate::text::width(n))
        .max()
        .unwrap_or(6)
        .clamp(16, 30);
    let spark_w = (area.width as usize)
        .saturating_sub(name_w + 6 + 9 * 4 + 1)
        .min(40);
    out.push(Line::styled(
        format!(
            "{}{:>6}{:>9}{:>9}{:>9}{:>9} {}",
            pad("metric", name_w),
            "count",
            "p50",
            "p95",
            "p99",
            "max",
            // Headed only where the word fits (it read `rece` at 120 columns: tour T).
            if spark_w >= "recent".len() {
                "recent"
            } else {
                ""
            }
        ),
        t.dim,
    ));
    if rows.is_empty() {
        out.push(Line::styled("No samples yet: run a turn.", t.dim));
    }
    for (name, sum, recent) in &rows {
        out.push(Line::from(vec![
            Span::styled(pad(name, name_w), t.text),
            Span::styled(format!("{:>6}", count(sum.count)), t.dim),
            Span::styled(format!("{:>9}", micros(sum.p50_us)), t.text),
            Span::styled(format!("{:>9}", micros(sum.p95_us)), t.text),
            Span::styled(format!("{:>9}", micros(sum.p99_us)), t.warn),
            Span::styled(format!("{:>9}", micros(sum.max_us)), t.dim),
            Span::raw(" "),
            Span::styled(sparkline(recent, spark_w), t.spark),
        ]));
    }
    out.push(Line::default());
    let tokens = match scope {
        None => Some(s.wire.total),
        Some(n) => s.wire.session_tokens(n).copied(),
    };
    if let Some(u) = tokens.filter(|u| u.prompt_tokens > 0 || u.completion_tokens > 0) {
        let mut spans = vec![
            Span::styled("tokens ", t.dim),
            Span::styled(crate::state::wire::tokens_label(&u), t.text),
        ];
        if let Some(rate) = s.wire.completion_rate() {
            spans.push(Span::styled(" · completion ", t.dim));
            spans.push(Span::styled(format!("{rate:.0} tokens/s"), t.text));
            spans.push(Span::styled(" while streaming (all sessions)", t.dim));
        }
        // Cut at a word where the pane is narrow (it was cut at "streaming (").
        out.push(crate::text::fit_words(
            Line::from(spans),
            area.width as usize,
        ));
    }
    let open = s
        .session_rows()
        .iter()
        .filter(|r| !r.is_closed() && !r.is_stored())
        .count();
    let turns: u64 = s.stats.turns.values().sum();
    let by_reason = s
        .stats
        .turns
        .iter()
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect::<Vec<_>>()
        .join(", ");
    out.push(Line::from(vec![
        Span::styled("sessions ", t.dim),
        Span::styled(
            format!("{open} open, {} opened", count(s.sessions_opened)),
            t.text,
        ),
        Span::styled(" · turns ", t.dim),
        Span::styled(
            if by_reason.is_empty() {
                count(turns)
            } else {
                format!("{} ({by_reason})", count(turns))
            },
            t.text,
        ),
        Span::styled(" · errors ", t.dim),
        Span::styled(
            count(s.stats.errors),
            if s.stats.errors > 0 { t.error } else { t.text },
        ),
    ]));
    out.push(Line::from(vec![
        Span::styled("events ", t.dim),
        Span::styled(count(s.events_seen), t.text),
        Span::styled(" · missed ", t.dim),
        Span::styled(
            count(s.events_missed),
            if s.events_missed > 0 { t.warn } else { t.text },
        ),
        Span::styled(" · frames ", t.dim),
        Span::styled(count(s.frames_seen), t.text),
        Span::styled(" · evicted ", t.dim),
        Span::styled(count(s.frames_evicted()), t.text),
    ]));
    if s.stream_drops > 0 {
        // Counted from what this viewer saw: turns run while it was dropped are not here.
        out.push(Line::styled(
            format!(
                "the watched server dropped this viewer's stream {}: the figures miss what ran \
                 meanwhile (see Log)",
                crate::text::times(s.stream_drops)
            ),
            t.warn,
        ));
    }
    let logs = s.logs();
    if !logs.is_empty() {
        out.push(Line::default());
        out.push(Line::styled("log", t.dim));
        for l in logs.iter().rev().take(5).rev() {
            let style = match l.level.as_str() {
                "error" => t.error,
                "warn" => t.warn,
                _ => t.text,
            };
            out.push(Line::from(vec![
                Span::styled(pad(&l.level, 6), style),
                Span::styled(l.message.clone(), t.text),
            ]));
        }
    }
    c.shown_rows(PaneId::Stats, area.height as usize);
    let max = out.len().saturating_sub(area.height as usize);
    let scroll = c.stats.scroll.get().min(max);
    c.stats.scroll.set(scroll);
    f.render_widget(
        Paragraph::new(out.into_iter().skip(scroll).collect::<Vec<_>>()),
        area,
    );
}

//! The header (product, source, MCP URL, model, the `claude mcp add` line, bridges, counts)
//! and the footer (key hints for the focused pane).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::state::Source;
use crate::text::count;
use crate::view::console::Console;
use crate::view::keys::owner_hints;

/// The line to paste into a shell to connect Claude Code.
pub fn claude_line(url: &str) -> String {
    format!("claude mcp add --transport http turnscope {url}")
}

/// Draws the two header lines.
pub fn header(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let h = &c.state.header;
    let mut first = vec![Span::styled(" turnscope ", t.brand)];
    match &h.source {
        Source::Live => first.push(Span::styled(" ● live ", t.ok)),
        Source::Attached { target, .. } => {
            first.push(Span::styled(" ◆ attached ", t.ok));
            first.push(Span::styled(target.clone(), t.accent));
        }
        Source::Replay { file, .. } => {
            first.push(Span::styled(format!(" ◼ replay {file} "), t.warn));
            if let Some(tape) = &c.tape {
                first.push(Span::styled(format!(" {} ", tape.label), t.accent));
            }
        }
    }
    // Failures come right after the source: a narrow screen cuts the end of the line.
    let j = &c.state.journal;
    if j.errors > 0 {
        first.push(Span::styled(
            format!(" {} (8 Log) ", crate::text::plural(j.errors, "error")),
            t.error,
        ));
    }
    if j.warnings > 0 {
        first.push(Span::styled(
            format!(" {} ", crate::text::plural(j.warnings, "warning")),
            t.warn,
        ));
    }
    if let Some(url) = &h.mcp_url {
        first.push(Span::styled(" MCP ", t.dim));
        first.push(Span::styled(url.clone(), t.accent));
    }
    if let Some((id, state)) = &h.replica {
        first.push(Span::styled("  replica ", t.dim));
        first.push(Span::styled(id.clone(), t.text));
        if state != "serving" {
            first.push(Span::styled(format!(" {state}"), t.warn));
        }
    }
    if let Some(store) = &h.store {
        // The file's name only: its whole path is in the ready line and `/healthz`.
        let short = store
            .strip_prefix("sqlite:")
            .and_then(|path| std::path::Path::new(path).file_name())
            .map_or(store.clone(), |name| name.to_string_lossy().into_owned());
        first.push(Span::styled("  store ", t.dim));
        first.push(Span::styled(short, t.text));
    }
    if !h.model.is_empty() {
        first.push(Span::styled("  model ", t.dim));
        first.push(Span::styled(h.model.clone(), t.text));
    }
    let mut second = Vec::new();
    if let Source::Attached { view, .. } = &h.source {
        second.push(Span::styled(format!(" {view}  "), t.dim));
    } else if let Some(url) = &h.mcp_url {
        second.push(Span::styled(" connect: ", t.dim));
        second.push(Span::styled(claude_line(url), t.key));
        // Claude Code's default scope is `local`: the folder the command runs in.
        second.push(Span::styled(" (this folder; --scope user: all)  ", t.dim));
    } else {
        second.push(Span::styled(" ", t.dim));
    }
    let s = &c.state;
    let open = s.session_rows().iter().filter(|r| !r.is_closed()).count();
    second.push(Span::styled(
        format!("bridges: {} · ", s.bridges_summary()),
        t.dim,
    ));
    let plural = if open == 1 { "" } else { "s" };
    second.push(Span::styled(
        format!("{open} session{plural} open · "),
        t.dim,
    ));
    let tokens = &s.wire.total;
    if tokens.prompt_tokens + tokens.completion_tokens > 0 {
        second.push(Span::styled(
            format!("{} · ", crate::state::wire::tokens_label(tokens)),
            t.text,
        ));
    }
    second.push(Span::styled(
        format!("{} events", count(s.events_seen)),
        t.dim,
    ));
    if s.events_missed > 0 {
        second.push(Span::styled(
            format!(" · {} missed", count(s.events_missed)),
            t.warn,
        ));
    }
    let w = area.width as usize;
    f.render_widget(
        Paragraph::new(vec![
            crate::text::fit(Line::from(first), w),
            crate::text::fit(Line::from(second), w),
        ])
        .style(t.header),
        area,
    );
}

/// Draws the footer: the focused pane's key hints.
pub fn footer(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let mut spans = vec![Span::raw(" ")];
    for (i, (key, what)) in owner_hints(c.key_owner(), c.read_only)
        .into_iter()
        .enumerate()
    {
        if i > 0 {
            spans.push(Span::styled("  ", t.footer));
        }
        spans.push(Span::styled(key, t.key));
        spans.push(Span::styled(format!(" {what}"), t.footer));
    }
    f.render_widget(
        Paragraph::new(crate::text::fit(Line::from(spans), area.width as usize)).style(t.footer),
        area,
    );
}

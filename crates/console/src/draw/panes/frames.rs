//! The Frames pane: frames crossing the pipeline's links, of the selected session or of all,
//! filtered, pausable, with turn boundaries drawn and a detail popup for the selected frame.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Wrap};

use crate::text::{count, one_line, pad, truncate, width};
use crate::view::console::Console;
use crate::view::frames::{FrameLine, FrameSource};
use crate::view::ids::PaneId;
use turnscope::observe::FrameEvent;

/// Draws the pane into the inspector's inside.
pub fn draw(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let lines = c.frame_lines();
    let shown = lines
        .iter()
        .filter(|l| matches!(l, FrameLine::Frame(_)))
        .count();
    let source = c.frame_source();
    let mut info = Vec::new();
    // The filter being edited comes first, so a narrow pane never hides what is typed.
    if let Some(editing) = &c.frames.editing {
        let (before, after) = editing.split();
        info.push(Span::styled("filter: ", t.dim));
        info.push(Span::styled(format!("{before}▏{after}"), t.key));
        info.push(Span::styled(" · ", t.dim));
    }
    info.extend([
        Span::styled(
            if c.frames.all {
                "all sessions".to_string()
            } else {
                match c.selected {
                    Some(n) => format!("session {}", c.state.session_name(n)),
                    None => "no session".to_string(),
                }
            },
            t.accent,
        ),
        Span::styled(
            format!(
                " · {} shown · {} kept",
                count(shown as u64),
                count(source.len() as u64)
            ),
            t.dim,
        ),
    ]);
    // The filter as typed before the pane's state: on a narrow pane the end is cut, and
    // what the person typed outranks "following" (it read `filter: …`: tour O).
    if c.frames.editing.is_none() && !c.frames.filter.is_empty() {
        info.push(Span::styled(" · filter: ", t.dim));
        info.push(Span::styled(c.frames.filter.text().to_string(), t.key));
    }
    info.push(if c.frames.paused.is_some() {
        Span::styled(" · ❚❚ paused", t.warn)
    } else if c.frames.cursor.is_none() {
        Span::styled(" · following", t.ok)
    } else {
        Span::styled(" · browsing (End follows)", t.dim)
    });
    // Older ones went (the console keeps 5,000 at most, within console.max_mib): said, as
    // the MCP pane says its own (the list started mid-turn with no word of it), after the
    // pane's state and where it fits whole (at 140 columns it pushed "following" out).
    let evicted = c.state.frames_evicted();
    if evicted > 0 {
        let dropped = format!(" · {} older dropped, all sessions", count(evicted));
        if Line::from(info.clone()).width() + width(&dropped) <= area.width as usize {
            info.push(Span::styled(dropped, t.dim));
        }
    }
    // Said only where it fits whole.
    const TIMES: &str = " · times since the session opened";
    if Line::from(info.clone()).width() + width(TIMES) <= area.width as usize {
        info.push(Span::styled(TIMES, t.dim));
    }
    // One row is the list's: the info line gives way to it, unless a filter is being typed.
    let mut out = if area.height >= 2 || c.frames.editing.is_some() {
        vec![crate::text::fit_words(
            Line::from(info),
            area.width as usize,
        )]
    } else {
        Vec::new()
    };
    // The pipeline diagram takes up to 3 lines when the pane has room for rows below it.
    let diagram_lines = match area.height {
        h if h >= 16 => 3,
        h if h >= 9 => 2,
        h if h >= 5 => 1,
        _ => 0,
    };
    out.extend(super::pipeline::lines(
        c,
        area.width as usize,
        diagram_lines,
    ));
    let visible = (area.height as usize).saturating_sub(out.len());
    c.shown_rows(PaneId::Frames, visible);
    let cursor = c.frame_cursor_index(&lines);
    let (start, end) = window(c, lines.len(), cursor, visible);
    if lines.is_empty() {
        let selected_row = c.selected.and_then(|n| c.state.session(n));
        let selected_stored = selected_row.is_some_and(|row| row.is_stored());
        // Its turns ran, and frames were dropped: its own were among the oldest.
        let dropped = selected_row.is_some_and(|row| row.turns > 0) && c.state.frames_evicted() > 0;
        let dropped_text;
        let filter_text;
        let said = if source.is_empty() {
            "No frames yet: they appear as soon as a session runs a turn."
        } else if let Some(problem) = c.frames.filter.problem() {
            filter_text = format!("No frame can match {problem}; Esc clears the filter.");
            &filter_text
        } else if !c.frames.filter.is_empty() && c.frames.all {
            "No frame matches the filter; Esc clears it."
        } else if !c.frames.filter.is_empty() {
            "No frame matches the filter; Esc clears it, a shows all sessions."
        } else if selected_stored {
            "A stored session's frames are not kept, only its turns; a shows all sessions."
        } else if dropped {
            dropped_text = format!(
                "No frame of this session is among those kept: frames are dropped, the oldest \
                 first, to keep memory bounded ({} dropped so far, see Stats); its turns are \
                 kept (2 Transcript); a shows all sessions.",
                crate::text::count(c.state.frames_evicted())
            );
            &dropped_text
        } else {
            "No frames of this session yet; a shows all sessions."
        };
        // Wrapped whole: a narrow pane cut it mid-word.
        for piece in crate::text::wrap(said, (area.width as usize).max(8)) {
            out.push(Line::styled(piece, t.dim));
        }
    }
    let name_w = name_width(c, &lines[start..end], &source, area.width as usize);
    for (i, l) in lines.iter().enumerate().take(end).skip(start) {
        let line = match l {
            FrameLine::Boundary { session, turn } => {
                let head = if *turn == 0 {
                    format!("──── #{session} opened again ")
                } else {
                    format!("──── #{session} turn {turn} ")
                };
                let rule = "─".repeat((area.width as usize).saturating_sub(width(&head)));
                Line::styled(format!("{head}{rule}"), t.boundary)
            }
            FrameLine::Frame(idx) => {
                let hops = c.frame_hops(*idx);
                let last = source.get(*hops.last().unwrap_or(idx)).frame();
                frame_line(
                    c,
                    source.get(*idx).frame(),
                    (last, hops.len()),
                    (area.width as usize, name_w),
                )
            }
        };
        let marked = c.frames.cursor.is_some()
            || c.frames.paused.is_some()
            || c.focus == crate::view::ids::PaneId::Frames;
        out.push(if Some(i) == cursor && marked {
            line.patch_style(t.selected)
        } else {
            line
        });
    }
    f.render_widget(Paragraph::new(out), area);
    if c.frames.detail {
        detail(f, area, c);
    }
}

fn window(c: &Console, len: usize, cursor: Option<usize>, visible: usize) -> (usize, usize) {
    let mut off = c.frames.offset.get();
    match (c.frames.cursor, cursor) {
        (None, _) if c.frames.paused.is_none() => off = len.saturating_sub(visible),
        (_, Some(cur)) => {
            if cur < off {
                off = cur;
            }
            if visible > 0 && cur >= off + visible {
                off = cur + 1 - visible;
            }
        }
        _ => {}
    }
    off = off.min(len.saturating_sub(visible));
    c.frames.offset.set(off);
    (off, (off + visible).min(len))
}

/// The style of a frame kind.
pub fn kind_style(c: &Console, kind: &str) -> Style {
    match kind {
        "system" => c.theme.system,
        "control" => c.theme.control,
        _ => c.theme.data,
    }
}

/// Cells of the name column: 21 (a name and a space), wider where the rows on screen have
/// longer names (pipecat's run to 33 characters: `OutputTransportMessageUrgentFrame`) and the
/// row has room for them beside a full route and some detail; at most [`NAME_MAX`].
fn name_width(c: &Console, on_screen: &[FrameLine], source: &FrameSource<'_>, w: usize) -> usize {
    let session_w = if c.frames.all { 4 } else { 0 };
    let spare = w.saturating_sub(NAME_MIN + ROW_FIXED + session_w + ROUTE_MAX + 24);
    if spare == 0 {
        return NAME_MIN;
    }
    let longest = on_screen
        .iter()
        .filter_map(|l| match l {
            FrameLine::Frame(idx) => Some(width(&source.get(*idx).frame().name) + 1),
            FrameLine::Boundary { .. } => None,
        })
        .max()
        .unwrap_or(0);
    longest.clamp(NAME_MIN, (NAME_MIN + spare).min(NAME_MAX))
}

/// The name column's usual cells, and its most.
const NAME_MIN: usize = 21;
const NAME_MAX: usize = 41;
/// A row's cells but the name, route and detail: time, kind letter, arrow.
const ROW_FIXED: usize = 14;
/// Most cells of the route column.
const ROUTE_MAX: usize = 44;

/// One frame's row: `fr` its first crossing, `last` its last one of `hops`; `w` cells wide,
/// its name column `name_w`.
fn frame_line(
    c: &Console,
    fr: &FrameEvent,
    (last, hops): (&FrameEvent, usize),
    (w, name_w): (usize, usize),
) -> Line<'static> {
    let t = &c.theme;
    let kind = kind_style(c, &fr.kind);
    let letter = fr.kind.chars().next().unwrap_or('?').to_ascii_uppercase();
    let route = if hops > 1 {
        format!(
            "{}→{} {hops} hops {}",
            fr.from,
            last.to,
            crate::text::micros(last.at_us.saturating_sub(fr.at_us))
        )
    } else {
        format!("{}→{}", fr.from, fr.to)
    };
    let arrow = if fr.direction == "up" { "↑" } else { "↓" };
    let session_w = if c.frames.all { 4 } else { 0 };
    let fixed = ROW_FIXED + session_w + name_w;
    let route_w = w.saturating_sub(fixed + 12).clamp(12, ROUTE_MAX);
    let detail_w = w.saturating_sub(fixed + route_w);
    let mut spans = vec![Span::styled(
        format!("{} ", c.state.session_relative(fr.session, fr.at_us)),
        t.dim,
    )];
    if c.frames.all {
        spans.push(Span::styled(pad(&format!("#{}", fr.session), 4), t.dim));
    }
    spans.extend([
        Span::styled(format!("{letter} "), kind),
        // A name cut short keeps its gap: `OutputTransportMessa… McpInputTransport#0→…`.
        Span::styled(pad(&fr.name, name_w.saturating_sub(1)) + " ", kind),
        Span::styled(pad(&route, route_w.saturating_sub(1)) + " ", t.text),
        Span::styled(format!("{arrow} "), t.dim),
    ]);
    if detail_w > 0 && !fr.detail.is_empty() {
        spans.push(Span::styled(
            truncate(&one_line(&fr.detail), detail_w),
            t.text,
        ));
    }
    Line::from(spans)
}

fn detail(f: &mut Frame, area: Rect, c: &Console) {
    let Some(row) = c.cursor_frame() else {
        return;
    };
    let t = &c.theme;
    let fr = row.frame();
    let w = (area.width.saturating_sub(4)).max(20).min(area.width);
    let h = (area.height.saturating_sub(2)).max(8).min(area.height);
    let popup = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    let field = |name: &str, value: String, style: Style| {
        Line::from(vec![
            Span::styled(format!("{name:<10}"), t.dim),
            Span::styled(value, style),
        ])
    };
    let mut text = vec![
        field("frame", format!("{} (arrival {})", fr.id, row.seq), t.text),
        field(
            "session",
            if fr.turn == 0 {
                // A frame no turn was running for (a bot's frames after its turn ended).
                format!("#{} · between turns", fr.session)
            } else {
                format!("#{} · turn {}", fr.session, fr.turn)
            },
            t.text,
        ),
        field(
            "kind",
            format!("{} · {}", fr.kind, fr.name),
            kind_style(c, &fr.kind),
        ),
        field(
            "link",
            format!("{} → {} ({})", fr.from, fr.to, fr.direction),
            t.text,
        ),
        field(
            "at",
            format!(
                "{} after #{} opened",
                c.state.session_relative(fr.session, fr.at_us).trim(),
                fr.session
            ),
            t.text,
        ),
    ];
    let hops = c.frame_hops(c.cursor_frame_index().unwrap_or(0));
    if hops.len() > 1 {
        let source = c.frame_source();
        text.push(Line::styled(format!("path, {} hops", hops.len()), t.dim));
        for i in &hops {
            let h = source.get(*i).frame();
            text.push(Line::from(vec![
                Span::styled(
                    format!(
                        "  {:>10}  ",
                        format!("+{}", crate::text::micros(h.at_us.saturating_sub(fr.at_us)))
                    ),
                    t.dim,
                ),
                Span::styled(format!("{} → {}", h.from, h.to), t.text),
                // The queue it joined at the next processor, when others waited there too.
                Span::styled(
                    if h.depth > 1 {
                        format!("  queued behind {}", h.depth - 1)
                    } else {
                        String::new()
                    },
                    t.dim,
                ),
            ]));
        }
    }
    text.push(Line::default());
    text.push(Line::styled("detail", t.dim));
    if fr.detail.is_empty() {
        text.push(Line::styled("(none)", t.dim));
    } else {
        text.extend(
            fr.detail
                .lines()
                .map(|l| Line::styled(l.to_string(), t.overlay)),
        );
    }
    if fr.name.starts_with("FunctionCall")
        && let Some(turn) = c
            .state
            .transcript(fr.session)
            .iter()
            .find(|t| t.id == fr.turn)
    {
        text.push(Line::default());
        text.push(Line::styled("tool calls of this turn, whole", t.dim));
        let w = popup.width.saturating_sub(2) as usize;
        for call in &turn.tools {
            let style = if call.error { t.error } else { t.tool };
            text.push(Line::styled(super::tool_call::head(call, w), style));
            text.extend(super::tool_call::lines(
                call,
                w,
                2,
                false,
                (t.error, t.text, t.dim),
            ));
        }
    }
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .border_style(t.border_focused)
        .style(t.overlay)
        .title(Line::styled(" Frame detail ", t.title))
        .title_bottom(Line::styled(" ↑↓ previous/next · Esc closes ", t.dim));
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(text).wrap(Wrap { trim: false }).block(block),
        popup,
    );
}

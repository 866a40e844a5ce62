//! The turn view: one turn of a session over the whole body of the screen. On top its
//! waterfall: each model request (waiting for the first piece, then streaming), each tool
//! call as a bar (parallel calls overlap on the same columns), the reply pieces and the
//! progress notifications as marks, and the end reason; below, every tool call whole
//! (arguments and result) and the reply. Drawn from events alone, so a replay shows the same.

use ratatui::Frame;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph};

use crate::state::TurnView;
use crate::state::timeline::Timeline;
use crate::text::{micros, pad, truncate, width, wrap};
use crate::view::console::Console;
use crate::view::layout::Areas;

/// Width of the row labels (`model 1`, `tool clock`).
const LABEL: usize = 16;
/// Width of the figures after the bars.
const FIGURES: usize = 26;

/// Draws the turn view over the panes (between the header and the footer).
pub fn draw(f: &mut Frame, areas: Areas, c: &Console) {
    let Some(pick) = &c.turn_view else {
        return;
    };
    let t = &c.theme;
    let area = areas.body();
    let turns = c.state.transcript(pick.session);
    let at = turns.iter().position(|v| v.id == pick.turn);
    let turn = at.map(|i| &turns[i]);
    let timeline = c.state.timelines.get(pick.session, pick.turn);
    let inner_w = area.width.saturating_sub(2) as usize;
    let key = (
        pick.session,
        pick.turn,
        pick.requests_open,
        pick.unfolded,
        pick.request,
        inner_w,
        c.state.events_seen,
        turn.map_or(0, |t| t.reply.len()),
        turn.is_some_and(|t| t.end.is_some()),
        turn.map_or(0, |t| t.tools.len()),
    );
    let mut cache = pick.lines.borrow_mut();
    if cache.as_ref().is_none_or(|(k, _)| *k != key) {
        *cache = Some((key, build(c, pick, turn, timeline, inner_w)));
    }
    let lines = cache.as_ref().map(|(_, l)| l.as_slice()).unwrap_or(&[]);
    let visible = area.height.saturating_sub(2) as usize;
    let max = lines.len().saturating_sub(visible);
    let scroll = pick.scroll.get().min(max);
    pick.scroll.set(scroll);
    let end = turn
        .and_then(|v| v.end.clone())
        .unwrap_or_else(|| "in flight".into());
    let who = c
        .state
        .session(pick.session)
        .map(|r| r.opener_label())
        .unwrap_or_default();
    let config = turn
        .and_then(|v| v.config_version)
        .map(|v| format!(" · config v{v}"))
        .unwrap_or_default();
    let title = format!(
        " Turn {} of {} {who} · {end}{config} · {} of {} ",
        pick.turn,
        c.state.session_name(pick.session),
        at.map_or(0, |i| i + 1),
        turns.len()
    );
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .border_style(t.border_focused)
        .style(t.overlay)
        .title(Line::styled(
            truncate(&title, area.width.saturating_sub(4) as usize),
            t.title,
        ))
        .title_bottom(Line::styled(
            crate::text::key_hints(
                // Attached, the model is called where the bot runs, and a replay sends
                // nothing: their requests are copied (c), not edited and sent from here.
                if c.state.header.source.is_attached() || c.read_only {
                    &[
                        "← → turns",
                        "↑↓ scroll",
                        "m model requests",
                        "c copy as curl",
                    ]
                } else {
                    &[
                        "← → turns",
                        "↑↓ scroll",
                        "m model requests",
                        "e/E edit and resend",
                        "v variants",
                    ]
                },
                "Esc closes",
                area.width.saturating_sub(4) as usize,
            ),
            t.dim,
        ));
    f.render_widget(Clear, area);
    let shown: Vec<Line<'static>> = lines.iter().skip(scroll).take(visible).cloned().collect();
    f.render_widget(Paragraph::new(shown).block(block), area);
}

/// The view's lines: the turn (waterfall, tool calls, reply) and its model requests.
fn build(
    c: &Console,
    pick: &crate::view::nav::TurnPick,
    turn: Option<&TurnView>,
    timeline: Option<&Timeline>,
    w: usize,
) -> Vec<Line<'static>> {
    let Some(turn) = turn else {
        return vec![Line::styled("This turn is no longer kept.", c.theme.dim)];
    };
    let mut out = lines(c, pick.session, turn, timeline, w);
    out.push(Line::default());
    let shown = super::model_request::Shown {
        open: pick.requests_open,
        whole: pick.unfolded,
        selected: Some(pick.request),
    };
    out.extend(super::model_request::lines(
        c,
        pick.session,
        pick.turn,
        w,
        shown,
    ));
    out
}

/// Every line of the view, `w` cells wide.
pub fn lines(
    c: &Console,
    session: u64,
    turn: &TurnView,
    tl: Option<&Timeline>,
    w: usize,
) -> Vec<Line<'static>> {
    let t = &c.theme;
    let who = super::transcript::speaker_of(c, session, turn);
    let mut out = Vec::new();
    let said = if turn.line.is_empty() {
        "(empty line: read the turn in flight)".to_string()
    } else {
        turn.line.clone()
    };
    for (i, piece) in wrap(&said, w.saturating_sub(6).max(8))
        .into_iter()
        .enumerate()
    {
        out.push(Line::from(vec![
            Span::styled(
                if i == 0 {
                    format!("{who:<6}")
                } else {
                    " ".repeat(6)
                },
                t.user,
            ),
            Span::styled(piece, t.text),
        ]));
    }
    out.push(Line::default());
    match tl {
        Some(tl) => {
            out.extend(waterfall(c, tl, w));
            if let Some(u) = &turn.usage {
                out.push(Line::from(vec![
                    Span::styled(pad("tokens", LABEL), t.text),
                    Span::styled(" ", t.dim),
                    Span::styled(crate::state::wire::tokens_label(u), t.text),
                ]));
            }
        }
        None => {
            // Two short lines: the view does not wrap, and both fit 80 columns whole.
            out.push(Line::styled(
                "No timeline: the console did not see this turn's events",
                t.dim,
            ));
            let stored = c
                .selected
                .and_then(|n| c.state.session(n))
                .is_some_and(|r| r.is_stored());
            let why = if stored {
                "(read from the store: it ran before this process started)."
            } else {
                "(it ran before the console started, or the events were missed)."
            };
            out.push(Line::styled(why, t.dim));
        }
    }
    out.push(Line::default());
    out.push(Line::styled(
        format!("Tool calls ({})", turn.tools.len()),
        t.accent,
    ));
    if turn.tools.is_empty() {
        out.push(Line::styled("  none", t.dim));
    }
    for call in &turn.tools {
        let style = if call.error { t.error } else { t.tool };
        out.push(Line::styled(
            format!("  {}", super::tool_call::head(call, w.saturating_sub(2))),
            style,
        ));
        out.extend(super::tool_call::lines(
            call,
            w,
            4,
            false,
            (t.error, t.text, t.dim),
        ));
    }
    out.push(Line::default());
    out.push(Line::styled("Reply", t.accent));
    let reply = turn.reply.trim();
    if reply.is_empty() {
        out.push(Line::styled("  (none)", t.dim));
    }
    for piece in wrap(reply, w.saturating_sub(2).max(8)) {
        out.push(Line::styled(format!("  {piece}"), t.bot));
    }
    out
}

/// A cell range of a bar: `[from, to)` within `cells`.
fn cells_of(start: u64, len: u64, span: u64, cells: usize) -> (usize, usize) {
    let at = |us: u64| ((us as u128 * cells as u128) / span as u128) as usize;
    let from = at(start).min(cells.saturating_sub(1));
    let to = at(start.saturating_add(len)).clamp(from + 1, cells);
    (from, to)
}

fn bar_line(
    label: String,
    segments: &[(usize, usize, char, Style)],
    figures: String,
    cells: usize,
    c: &Console,
    label_style: Style,
) -> Line<'static> {
    let t = &c.theme;
    let mut spans = vec![
        Span::styled(pad(&label, LABEL), label_style),
        Span::styled("▕", t.dim),
    ];
    let mut at = 0;
    for (from, to, ch, style) in segments {
        if *from > at {
            spans.push(Span::raw(" ".repeat(from - at)));
        }
        let from = (*from).max(at);
        if *to > from {
            spans.push(Span::styled(ch.to_string().repeat(to - from), *style));
            at = *to;
        }
    }
    if cells > at {
        spans.push(Span::raw(" ".repeat(cells - at)));
    }
    spans.push(Span::styled("▏", t.dim));
    spans.push(Span::styled(format!(" {figures}"), t.dim));
    Line::from(spans)
}

fn marks(offsets: &[u64], span: u64, cells: usize) -> Vec<(usize, usize, char, Style)> {
    let mut seen = vec![false; cells];
    for off in offsets {
        let (from, _) = cells_of(*off, 0, span, cells);
        seen[from] = true;
    }
    seen.iter()
        .enumerate()
        .filter(|(_, s)| **s)
        .map(|(i, _)| (i, i + 1, '╷', Style::new()))
        .collect()
}

/// The rows of the task a turn became: its life (working from the `chat` call's answer to
/// its result, then waiting for the poll that collects it) and its polls as marks.
fn task_rows(
    c: &Console,
    task: &crate::state::timeline::TaskLife,
    span: u64,
    cells: usize,
) -> Vec<Line<'static>> {
    let t = &c.theme;
    let style = match task.status.as_str() {
        "cancelled" => t.warn,
        _ => t.accent,
    };
    let end = task.ended.unwrap_or(span).max(task.created);
    let (from, to) = cells_of(task.created, end - task.created, span, cells);
    let mut segs = vec![(from, to, '█', style)];
    if let Some(ended) = task.ended {
        let waited = task.collected.unwrap_or(span).max(ended);
        if waited > ended {
            let (wfrom, wto) = cells_of(ended, waited - ended, span, cells);
            segs.push((wfrom.max(to), wto, '░', t.dim));
        }
    }
    let figures = match (task.ended, task.collected) {
        (Some(ended), Some(collected)) => {
            format!("collected +{}", micros(collected.saturating_sub(ended)))
        }
        (Some(_), None) if task.status == "completed" => "completed · not collected".into(),
        _ => task.status.clone(),
    };
    let mut poll_marks = marks(&task.polls, span, cells);
    for m in &mut poll_marks {
        m.3 = style;
    }
    vec![
        bar_line(
            format!("task {}", task.id),
            &segs,
            truncate(&figures, FIGURES.saturating_sub(1)),
            cells,
            c,
            style,
        ),
        bar_line(
            "  polls".into(),
            &poll_marks,
            format!("{} tasks/get", task.poll_count),
            cells,
            c,
            t.text,
        ),
    ]
}

/// The waterfall rows: a scale, then requests and calls in start order, pieces, progress,
/// the task the turn became (if it did), and the end.
pub fn waterfall(c: &Console, tl: &Timeline, w: usize) -> Vec<Line<'static>> {
    let t = &c.theme;
    let cells = w.saturating_sub(LABEL + 2 + FIGURES).max(10);
    let span = tl.span();
    let mut out = Vec::new();
    let right = micros(span);
    let scale = format!(
        "0{}{right}",
        "─".repeat(cells.saturating_sub(1 + width(&right)))
    );
    out.push(Line::from(vec![
        Span::styled(pad("waterfall", LABEL), t.accent),
        Span::styled(" ", t.dim),
        Span::styled(scale, t.dim),
    ]));
    enum Row<'a> {
        Request(usize, &'a crate::state::timeline::Request),
        Call(&'a crate::state::timeline::Call),
    }
    let in_flight = tl.in_flight();
    let mut rows: Vec<(u64, u8, Row)> = tl
        .requests
        .iter()
        .enumerate()
        .map(|(i, r)| (r.start, 0, Row::Request(i + 1, r)))
        .chain(tl.calls.iter().map(|call| (call.start, 1, Row::Call(call))))
        .chain(
            in_flight
                .as_ref()
                .map(|r| (r.start, 2, Row::Request(tl.requests.len() + 1, r))),
        )
        .collect();
    rows.sort_by_key(|(start, kind, _)| (*start, *kind));
    for (_, _, row) in rows {
        match row {
            Row::Request(n, r) => {
                let style = if r.error.is_some() { t.error } else { t.bot };
                let (from, to) = cells_of(r.start, r.total, span, cells);
                let mut segs = Vec::new();
                match r.first_piece {
                    Some(first) if first < r.total => {
                        let (_, wait_to) = cells_of(r.start, first, span, cells);
                        let wait_to = wait_to.min(to);
                        segs.push((from, wait_to, '░', style));
                        if to > wait_to {
                            segs.push((wait_to, to, '█', style));
                        }
                    }
                    _ => segs.push((from, to, '░', style)),
                }
                let running = in_flight.as_ref() == Some(r);
                let figures = match (&r.error, r.first_piece) {
                    (None, Some(first)) if running => {
                        format!("first {} · streaming…", micros(first))
                    }
                    (None, None) if running => "waiting for the first piece…".to_string(),
                    (Some(e), _) => format!("{} · {}", micros(r.total), e),
                    (None, Some(first)) => {
                        format!("first {} · {}", micros(first), micros(r.total))
                    }
                    (None, None)
                        if tl
                            .calls
                            .iter()
                            .any(|c| c.start >= r.start.saturating_add(r.total)) =>
                    {
                        format!("asked for tools · {}", micros(r.total))
                    }
                    (None, None) => format!("no text · {}", micros(r.total)),
                };
                out.push(bar_line(
                    format!("model {n}"),
                    &segs,
                    truncate(&figures, FIGURES.saturating_sub(1)),
                    cells,
                    c,
                    style,
                ));
            }
            Row::Call(call) => {
                let style = if call.failed { t.error } else { t.tool };
                let (from, to) = cells_of(call.start, call.total, span, cells);
                let figures = format!(
                    "{}{}",
                    micros(call.total),
                    if call.failed { " · failed" } else { "" }
                );
                out.push(bar_line(
                    truncate(&format!("  tool {}", call.name), LABEL - 1),
                    &[(from, to, '█', style)],
                    figures,
                    cells,
                    c,
                    style,
                ));
            }
        }
    }
    let mut piece_marks = marks(tl.pieces.offsets(), span, cells);
    for m in &mut piece_marks {
        m.3 = t.bot;
    }
    out.push(bar_line(
        "pieces".into(),
        &piece_marks,
        crate::text::plural(tl.piece_count, "piece"),
        cells,
        c,
        t.text,
    ));
    let mut progress_marks = marks(tl.progress.offsets(), span, cells);
    for m in &mut progress_marks {
        m.3 = t.accent;
    }
    out.push(bar_line(
        "progress".into(),
        &progress_marks,
        format!("{} sent", tl.progress_count),
        cells,
        c,
        t.text,
    ));
    if let Some(task) = &tl.task {
        out.extend(task_rows(c, task, span, cells));
    }
    let (end, style) = match &tl.end {
        Some(reason) if reason == "completed" => (reason.clone(), t.ok),
        Some(reason) if reason.starts_with("error") => (reason.clone(), t.error),
        Some(reason) => (reason.clone(), t.warn),
        None => ("in flight".into(), t.accent),
    };
    let mut spans = vec![
        Span::styled(pad("end", LABEL), t.text),
        Span::styled(" ", t.dim),
        Span::styled(end, style),
    ];
    // A total of 0 is one nobody measured (a turn a stop cut off, told from the store), not
    // a turn that took no time.
    if let Some(total) = tl.total.filter(|total| *total > 0) {
        spans.push(Span::styled(format!(" after {}", micros(total)), t.dim));
    }
    out.push(Line::from(spans));
    out
}

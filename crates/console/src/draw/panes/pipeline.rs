//! The pipeline diagram over the Frames list: the processors in order and, on each link,
//! downstream frames/s while frames flow (else `×N`, how many crossed in all), the deepest queue a
//! frame joined at the next processor (`q3`) and upstream frames/s (`↑2/s`), for the Frames
//! pane's scope; wrapped at whole stages.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::state::pipelines::{LinkFigures, SessionPipeline};
use crate::text::width;
use crate::view::console::Console;

/// A queue at least this deep is drawn as a warning.
const DEEP: u32 = 8;

/// How long after the last frame a link shows its total, not its rate (past the last whole
/// second and the two seconds a queue's depth is kept).
const SETTLED_US: u64 = 3_000_000;

/// The diagram's lines for `width` cells, at most `max_lines` (none when `max_lines` is 0).
pub fn lines(c: &Console, width_cells: usize, max_lines: usize) -> Vec<Line<'static>> {
    if max_lines == 0 {
        return Vec::new();
    }
    let t = &c.theme;
    // At a replay's end the recording stopped: nothing flows after its last event, so the
    // links settle to their totals as the live console did (they showed rates as if frames
    // still flowed, "now" being the last event's time).
    let now = match &c.tape {
        Some(tape) if tape.at_end() => c.state.now_us.saturating_add(SETTLED_US),
        _ => c.state.now_us,
    };
    let all;
    let (label, pipeline) = if c.frames.all {
        all = c.state.pipelines.all(now);
        ("pipeline, all sessions: ".to_string(), Some(&all))
    } else {
        match c.selected {
            Some(n) => (
                format!("pipeline {}: ", c.state.session_name(n)),
                c.state.pipelines.of(n),
            ),
            None => ("pipeline: ".to_string(), None),
        }
    };
    let links = pipeline.map(SessionPipeline::links).unwrap_or(&[]);
    if links.is_empty() {
        return vec![Line::from(vec![
            Span::styled(label, t.dim),
            Span::styled("no frames yet", t.dim),
        ])];
    }
    // Full names first; short ones when the full diagram needs more lines than it may have.
    for short in [false, true] {
        let pieces = pieces(c, links, now, short);
        let wrapped = wrap(label.clone(), t.dim, pieces, width_cells);
        if wrapped.len() <= max_lines || short {
            let mut out = wrapped;
            if out.len() > max_lines {
                out.truncate(max_lines);
                // More stages follow than fit: say so rather than cut silently.
                if let Some(last) = out.last_mut() {
                    last.spans.push(Span::styled(" …", t.dim));
                }
            }
            return out
                .into_iter()
                .map(|l| crate::text::fit(l, width_cells))
                .collect();
        }
    }
    Vec::new()
}

/// Stage names and link figures, in order, each an unbreakable piece.
fn pieces(c: &Console, links: &[LinkFigures], now: u64, short: bool) -> Vec<Vec<Span<'static>>> {
    let t = &c.theme;
    let mut out = Vec::new();
    let name = |n: &str| Span::styled(if short { abbreviate(n) } else { n.to_string() }, t.accent);
    if let Some(first) = links.first() {
        out.push(vec![name(&first.from)]);
    }
    for (i, l) in links.iter().enumerate() {
        if i > 0 && links[i - 1].to != l.from {
            // Off the chain (a link seen before the chain was whole): start a new run.
            out.push(vec![Span::styled(" · ", t.dim), name(&l.from)]);
        }
        let depth = l.down.depth(now);
        // Flowing: frames per second; quiet: frames in all.
        let rate = l.down.per_second(now);
        let figure = if rate > 0 {
            format!(" ─{rate}/s")
        } else {
            format!(" ─×{}", crate::text::count(l.down_total))
        };
        let mut link = vec![Span::styled(figure, if rate > 0 { t.text } else { t.dim })];
        if depth > 1 {
            link.push(Span::styled(
                format!(" q{depth}"),
                if depth >= DEEP { t.warn } else { t.dim },
            ));
        }
        let up = l.up.per_second(now);
        if up > 0 {
            link.push(Span::styled(format!(" ↑{up}/s"), t.dim));
        }
        link.push(Span::styled("→ ", t.dim));
        link.push(name(&l.to));
        out.push(link);
    }
    out
}

/// Pieces laid into lines of `room` cells after a leading label; a piece never splits
/// (one longer than a line is cut by the caller).
fn wrap(
    label: String,
    label_style: Style,
    pieces: Vec<Vec<Span<'static>>>,
    room: usize,
) -> Vec<Line<'static>> {
    let indent = "  ";
    let mut lines = Vec::new();
    let mut used = width(&label);
    let mut current = vec![Span::styled(label, label_style)];
    for piece in pieces {
        let w: usize = piece.iter().map(|s| width(&s.content)).sum();
        if used + w > room && used > indent.len() {
            lines.push(Line::from(std::mem::take(&mut current)));
            current.push(Span::raw(indent));
            used = indent.len();
        }
        used += w;
        current.extend(piece);
    }
    lines.push(Line::from(current));
    lines
}

/// A shorter name for a narrow screen: `user-aggregator` → `user-agg`.
fn abbreviate(name: &str) -> String {
    match name {
        "user-aggregator" => "user-agg".into(),
        "assistant-aggregator" => "asst-agg".into(),
        other => other.to_string(),
    }
}

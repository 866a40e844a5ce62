//! How a tool call reads in the Transcript and the turn view: a head line (name, arguments,
//! outcome, time), then the arguments and the result as pretty JSON (or text), folded to a
//! few lines in the transcript and whole in the turn view.
//!
//! Built from [`ToolLine`] only, so a live turn and a replayed one read the same.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::state::ToolLine;
use crate::text::{truncate, width, wrap};

/// Lines of arguments or result the transcript shows before folding the rest.
pub const FOLDED_LINES: usize = 4;
/// Arguments up to this many cells read whole on the head line (when it has the room).
const ARGS_IN_HEAD: usize = 40;

/// `text` pretty-printed when it is JSON, else as it is.
pub fn pretty_text(text: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v @ (serde_json::Value::Object(_) | serde_json::Value::Array(_))) => {
            crate::state::pretty(&v)
        }
        _ => text.to_string(),
    }
}

/// The lines of one call, each starting with `indent` cells; `folded` keeps at most
/// [`FOLDED_LINES`] of the arguments and of the result.
pub fn lines(
    call: &ToolLine,
    width_cells: usize,
    indent: usize,
    folded: bool,
    styles: (Style, Style, Style),
) -> Vec<Line<'static>> {
    let (label, text, dim) = styles;
    let pad = " ".repeat(indent);
    let body_w = width_cells.saturating_sub(indent + 7).max(8);
    let mut out = Vec::new();
    let block = |name: &str, content: &str, style: Style, out: &mut Vec<Line<'static>>| {
        let pretty = pretty_text(content);
        let mut rows: Vec<String> = pretty
            .lines()
            .flat_map(|l| {
                let expanded = l.replace('\t', "  ");
                if expanded.is_empty() {
                    vec![String::new()]
                } else {
                    wrap(&expanded, body_w)
                }
            })
            .collect();
        if rows.is_empty() {
            rows.push(String::new());
        }
        let hidden = if folded && rows.len() > FOLDED_LINES {
            let hidden = rows.len() - FOLDED_LINES + 1;
            rows.truncate(FOLDED_LINES - 1);
            hidden
        } else {
            0
        };
        for (i, row) in rows.into_iter().enumerate() {
            let tag = if i == 0 {
                format!("{name:<7}")
            } else {
                " ".repeat(7)
            };
            out.push(Line::from(vec![
                Span::raw(pad.clone()),
                Span::styled(tag, dim),
                Span::styled(row, style),
            ]));
        }
        if hidden > 0 {
            // Cut at a word, never mid-word, where the column is narrow.
            let hint = crate::text::fit_words(
                Line::from(Span::styled(
                    format!("… {hidden} more lines (Enter on the transcript: whole turn)"),
                    dim,
                )),
                body_w,
            );
            let mut spans = vec![Span::raw(pad.clone()), Span::raw(" ".repeat(7))];
            spans.extend(hint.spans);
            out.push(Line::from(spans));
        }
    };
    // Folded, arguments that fit on the head line are not repeated under it.
    let args_whole_in_head = folded && width(&call.arguments) <= ARGS_IN_HEAD;
    if call.arguments.trim().len() > 2 && !args_whole_in_head {
        block("args", &call.arguments, text, &mut out);
    }
    if call.running {
        return out;
    }
    let (name, style) = if call.error {
        ("error", label)
    } else {
        ("result", text)
    };
    if call.result.is_empty() && call.result_bytes > 0 {
        out.push(Line::from(vec![
            Span::raw(pad.clone()),
            Span::styled(format!("{name:<7}"), dim),
            Span::styled("(not recorded)", dim),
        ]));
    } else {
        block(name, &call.result, style, &mut out);
        if call.result.len() < call.result_bytes {
            out.push(Line::from(vec![
                Span::raw(pad),
                Span::raw(" ".repeat(7)),
                Span::styled(
                    format!("… cut at {} of {} B", call.result.len(), call.result_bytes),
                    dim,
                ),
            ]));
        }
    }
    out
}

/// The head of a call fitted to `room` cells (the arguments give way first).
pub fn head(call: &ToolLine, room: usize) -> String {
    let bare = call.head(0);
    let args_room = room.saturating_sub(width(&bare) - 1).max(3);
    truncate(&call.head(args_room), room)
}

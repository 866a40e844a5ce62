//! The Tools pane's workbench, drawn in its detail area: a tool's hand-call form (each field
//! with its kind, required mark, value, hint, default and what is wrong with it now; the
//! arguments as they would be sent; the answer of the last call) and the list of hand calls
//! (saved ones marked `★`) with the selected call's answer.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::text::{micros, one_line, truncate, truncate_start, width, wrap};
use crate::view::console::Console;
use crate::view::form::{FieldKind, Form};
use crate::view::hand_calls::{HandCall, Outcome, Shown};
use turnscope::tools::Unanswered;

/// Lines the arguments as they would be sent may take under the form.
const ARGS_LINES: usize = 4;

/// A workbench view's lines, with the rows its scroll may be asked to keep in sight
/// ([`Follow`](crate::view::nav::Follow)).
pub struct Scrolled {
    /// Every line, `w` cells wide.
    pub lines: Vec<Line<'static>>,
    /// The row of the field edited or the call selected (`▶`).
    pub cursor: Option<usize>,
    /// The first row of the answer shown (or of the wait for it).
    pub answer: Option<usize>,
}

/// The form's lines, `w` cells wide.
pub fn form_lines(c: &Console, form: &Form, w: usize) -> Scrolled {
    let t = &c.theme;
    let title = format!("call {}", form.tool);
    let keys = "↑↓ field · ← → choose · Enter calls · PgUp/PgDn answer · Esc closes";
    let mut out = title_and_keys(c, title, keys, w);
    if let Some(why) = &form.unchecked {
        for l in wrap(why, w) {
            out.push(Line::styled(l, t.warn));
        }
    }
    if form.fields.is_empty() {
        out.push(Line::styled("  (no arguments)", t.dim));
    }
    let name_w = form
        .fields
        .iter()
        .map(|f| f.name.chars().count() + 2)
        .max()
        .unwrap_or(4)
        .min(w / 3);
    let mut cursor = None;
    for (i, f) in form.fields.iter().enumerate() {
        let here = i == form.cursor;
        if here {
            cursor = Some(out.len());
        }
        let problems = form.problems_of(&f.name);
        let mark = if f.required { "*" } else { " " };
        let label = format!(
            "{}{mark}{:<width$}",
            if here { "▶" } else { " " },
            f.name,
            width = name_w
        );
        let kind = match &f.kind {
            FieldKind::Choice(values) => format!(
                "one of {}",
                values
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            ),
            other => other.label().to_string(),
        };
        let value = if here && f.empty_text && f.text.text().is_empty() {
            format!("▏{}", crate::view::form::EMPTY_TEXT)
        } else if here && !matches!(f.kind, FieldKind::Bool | FieldKind::Choice(_)) {
            let (before, after) = f.text.split();
            around_cursor(&before, &after, w.saturating_sub(label.chars().count() + 1))
        } else {
            f.shown()
        };
        let value_style = if !problems.is_empty() {
            t.error
        } else if here {
            t.selected
        } else {
            t.text
        };
        let room = w.saturating_sub(label.chars().count() + 1);
        out.push(Line::from(vec![
            Span::styled(label, if f.required { t.accent } else { t.text }),
            Span::raw(" "),
            Span::styled(truncate(&value, room), value_style),
        ]));
        let pad = " ".repeat(name_w + 3);
        let mut hint = kind;
        if let Some(d) = &f.default {
            hint.push_str(&format!(" · default {d}"));
        }
        if !f.hint.is_empty() {
            hint.push_str(&format!(" · {}", f.hint));
        }
        for l in wrap(&hint, w.saturating_sub(pad.len()).max(8)) {
            out.push(Line::styled(format!("{pad}{l}"), t.dim));
        }
        for p in problems {
            for l in wrap(&format!("✗ {p}"), w.saturating_sub(pad.len()).max(8)) {
                out.push(Line::styled(format!("{pad}{l}"), t.error));
            }
        }
    }
    out.push(Line::default());
    let args = form.arguments().to_string();
    let ready = form.problems().is_empty();
    // The arguments whole, wrapped (a few lines at most), so a long one can be read.
    let label = if ready { "ready: " } else { "not ready: " };
    let room = w.saturating_sub(label.len()).max(8);
    let mut pieces = wrap(&args, room);
    if pieces.len() > ARGS_LINES {
        pieces.truncate(ARGS_LINES);
        if let Some(last) = pieces.last_mut() {
            *last = format!("{}…", truncate(last, room.saturating_sub(1)));
        }
    }
    for (i, piece) in pieces.into_iter().enumerate() {
        out.push(Line::from(vec![
            if i == 0 {
                Span::styled(label, if ready { t.ok } else { t.error })
            } else {
                Span::raw(" ".repeat(label.len()))
            },
            Span::styled(piece, t.dim),
        ]));
    }
    // Problems the schema names outside any field (the arguments as a whole).
    for (field, message) in form.problems() {
        if !form.fields.iter().any(|f| {
            field == &f.name
                || field.starts_with(&format!("{}.", f.name))
                || field.starts_with(&format!("{}[", f.name))
        }) {
            for l in wrap(&format!("✗ {field}: {message}"), w) {
                out.push(Line::styled(l, t.error));
            }
        }
    }
    let mut answer = None;
    if let Some(call) = c.tools.hand.last_sent.and_then(|id| c.tools.hand.get(id)) {
        out.push(Line::default());
        answer = Some(out.len());
        if call.arguments == form.arguments() {
            out.extend(outcome_lines(c, call, w, "Esc"));
        } else {
            // The form has changed since: the answer is of other arguments, said and dimmed.
            let sent = format!(
                "the answer below is of the arguments sent: {}",
                call.arguments
            );
            for l in wrap(&sent, w) {
                out.push(Line::styled(l, t.warn));
            }
            out.extend(
                outcome_lines(c, call, w, "Esc")
                    .into_iter()
                    .map(|l| l.patch_style(t.dim)),
            );
        }
    }
    Scrolled {
        lines: out,
        cursor,
        answer,
    }
}

/// The list of hand calls and the selected one's answer.
pub fn calls_lines(c: &Console, w: usize) -> Scrolled {
    let t = &c.theme;
    let hand = &c.tools.hand;
    let saved = hand.calls.iter().filter(|c| c.saved).count();
    let title = format!("hand calls ({}, {saved} saved)", hand.calls.len());
    let keys = "Enter runs again · e edits · s saves · x cancels · PgUp/PgDn answer · Esc back";
    let mut out = title_and_keys(c, title, keys, w);
    if hand.calls.is_empty() {
        out.push(Line::styled(
            "  none yet: Enter on a tool opens its form",
            t.dim,
        ));
        return Scrolled {
            lines: out,
            cursor: None,
            answer: None,
        };
    }
    let mut cursor = None;
    for (i, call) in hand.calls.iter().enumerate() {
        let state = match &call.outcome {
            // Listed from the file, not run here: `saved`, or once forgotten, not that.
            None if call.saved => "saved".to_string(),
            None => "not run".to_string(),
            Some(Outcome::InFlight(at)) => format!("… {}", secs(at.elapsed())),
            Some(Outcome::Cancelled(_)) => "cancelled".to_string(),
            Some(Outcome::Refused(_)) => "not sent".to_string(),
            // The size is the tool's answer's: none when it never came, the whole of one over
            // the cap (not the note written in its place).
            Some(Outcome::Done(s)) => match &s.unanswered {
                Some(why @ Unanswered::TooLarge { size_bytes, .. }) => format!(
                    "{} {size_bytes} B {}",
                    why.label(),
                    micros(s.duration.as_micros() as u64)
                ),
                Some(why) => format!("{} {}", why.label(), micros(s.duration.as_micros() as u64)),
                None => format!(
                    "{} {} B {}",
                    if s.is_error { "isError" } else { "ok" },
                    s.bytes,
                    micros(s.duration.as_micros() as u64)
                ),
            },
        };
        let head = format!(
            "{}{} {}({})",
            if i == hand.nav.cursor { "▶" } else { " " },
            if call.saved { "★" } else { " " },
            call.tool,
            call.arguments
        );
        let room = w.saturating_sub(state.chars().count() + 1);
        let style = match &call.outcome {
            Some(Outcome::Refused(_)) => t.error,
            Some(Outcome::Done(s)) if s.is_error => t.error,
            _ => t.text,
        };
        let line = Line::from(vec![
            Span::styled(crate::text::pad(&truncate(&head, room), room), style),
            Span::raw(" "),
            Span::styled(state, t.dim),
        ]);
        out.push(if i == hand.nav.cursor {
            cursor = Some(out.len());
            line.patch_style(t.selected)
        } else {
            line
        });
    }
    let mut answer = None;
    if let Some(call) = hand.selected() {
        out.push(Line::default());
        answer = Some(out.len());
        out.extend(outcome_lines(c, call, w, "x"));
    }
    Scrolled {
        lines: out,
        cursor,
        answer,
    }
}

/// A title with its keys: after it when both fit in `w` cells, else wrapped under it (a
/// narrow pane, the console at 100 or 80 columns, cut them off).
fn title_and_keys(c: &Console, title: String, keys: &str, w: usize) -> Vec<Line<'static>> {
    let t = &c.theme;
    if title.chars().count() + 2 + keys.chars().count() <= w {
        return vec![Line::from(vec![
            Span::styled(title, t.title),
            Span::styled(format!("  {keys}"), t.dim),
        ])];
    }
    // Under it, each key with its word kept whole (`Esc back`, not `Esc` / `back`).
    let room = w.saturating_sub(2).max(8);
    let mut rows: Vec<String> = Vec::new();
    for hint in keys.split(" · ") {
        match rows.last_mut() {
            Some(row) if width(row) + 3 + width(hint) <= room => {
                row.push_str(" · ");
                row.push_str(hint);
            }
            _ => rows.push(hint.to_string()),
        }
    }
    let mut lines = vec![Line::styled(title, t.title)];
    for row in rows {
        for l in wrap(&row, room) {
            lines.push(Line::styled(format!("  {l}"), t.dim));
        }
    }
    lines
}

/// A time waited, to a tenth of a second.
fn secs(d: std::time::Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// A call's answer: `isError`, size and time, each content block, `structuredContent`.
fn outcome_lines(c: &Console, call: &HandCall, w: usize, cancel_key: &str) -> Vec<Line<'static>> {
    let t = &c.theme;
    let mut out = Vec::new();
    match &call.outcome {
        // Wrapped at words, as the other outcomes: a narrow pane cut them mid-word (tour N).
        None => {
            let said = if call.saved {
                "saved call, not run since the console started (Enter runs it)"
            } else {
                "forgotten: no longer saved, and not run since the console started (s saves it \
                 again, Enter runs it)"
            };
            for l in wrap(said, w) {
                out.push(Line::styled(l, t.dim));
            }
        }
        Some(Outcome::InFlight(at)) => {
            let said = format!(
                "{}: waiting for the answer… {} ({cancel_key} cancels it)",
                call.tool,
                secs(at.elapsed())
            );
            for l in wrap(&said, w) {
                out.push(Line::styled(l, t.accent));
            }
        }
        Some(Outcome::Cancelled(ran)) => {
            let said = format!(
                "cancelled by you after {}: the request was dropped (an MCP server is told to \
                 stop); no answer is shown",
                secs(*ran)
            );
            for l in wrap(&said, w) {
                out.push(Line::styled(l, t.warn));
            }
        }
        Some(Outcome::Refused(why)) => {
            for l in wrap(&format!("not sent: {why}"), w) {
                out.push(Line::styled(l, t.error));
            }
        }
        Some(Outcome::Done(shown)) => out.extend(shown_lines(c, &call.tool, shown, w)),
    }
    out
}

fn shown_lines(c: &Console, tool: &str, shown: &Shown, w: usize) -> Vec<Line<'static>> {
    let t = &c.theme;
    if let Some(why) = &shown.unanswered {
        // The path failed, not the tool: said for a person, then what the model would read.
        let mut out = vec![Line::from(vec![
            Span::styled(why.headline(tool), t.error),
            Span::styled(
                match why {
                    // Its headline says which bound already.
                    Unanswered::TooLarge { .. } => {
                        format!(" · {}", micros(shown.duration.as_micros() as u64))
                    }
                    _ => format!(
                        " · {} · {}",
                        why.label(),
                        micros(shown.duration.as_micros() as u64)
                    ),
                },
                t.error,
            ),
        ])];
        for l in wrap(&why.to_string(), w) {
            out.push(Line::styled(l, t.error));
        }
        out.push(Line::styled(
            "what the model would have read instead:",
            t.dim,
        ));
        for block in &shown.content {
            let body = block["text"].as_str().unwrap_or_default();
            push_block(&mut out, body, w, t.dim);
        }
        return out;
    }
    let head_style = if shown.is_error { t.error } else { t.ok };
    let mut out = vec![Line::from(vec![
        Span::styled(format!("result of {tool}"), t.accent),
        Span::styled(
            format!(
                " · isError {} · {} B · {}",
                shown.is_error,
                shown.bytes,
                micros(shown.duration.as_micros() as u64)
            ),
            head_style,
        ),
    ])];
    for (i, block) in shown.content.iter().enumerate() {
        let kind = block["type"].as_str().unwrap_or("?");
        out.push(Line::styled(format!("content[{i}] {kind}"), t.dim));
        let body = match kind {
            // Only whitespace (or nothing) would show as a blank line: quoted, it shows.
            "text" => match block["text"].as_str().unwrap_or_default() {
                "" => "\"\" (empty)".to_string(),
                t if t.trim().is_empty() => format!("{} (only whitespace)", Value::from(t)),
                t => t.to_string(),
            },
            _ => one_line(&block.to_string()),
        };
        push_block(
            &mut out,
            &body,
            w,
            if shown.is_error { t.error } else { t.text },
        );
    }
    if let Some(s) = &shown.structured {
        out.push(Line::styled("structuredContent", t.dim));
        push_block(&mut out, &crate::state::pretty(s), w, t.text);
    }
    out
}

fn push_block(out: &mut Vec<Line<'static>>, text: &str, w: usize, style: Style) {
    for l in text.lines() {
        for piece in wrap(l, w.saturating_sub(2).max(8)) {
            out.push(Line::styled(format!("  {piece}"), style));
        }
    }
}

/// The field being edited in `room` cells with its cursor (`▏`) in sight: what precedes the
/// cursor keeps the room that what follows does not need (at least three quarters when both
/// are long), each cut with `…` where it does not fit, as a line editor scrolls.
fn around_cursor(before: &str, after: &str, room: usize) -> String {
    let avail = room.saturating_sub(1);
    let (before_need, after_need) = (width(before), width(after));
    if before_need + after_need <= avail {
        return format!("{before}▏{after}");
    }
    let after_room = avail
        .saturating_sub(before_need)
        .max(after_need.min(avail / 4));
    let before_room = avail - after_room;
    format!(
        "{}▏{}",
        truncate_start(before, before_room),
        truncate(after, after_room)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_stays_in_sight_in_a_long_field() {
        assert_eq!(around_cursor("ab", "cd", 10), "ab▏cd");
        let end = around_cursor(&"x".repeat(300), "", 20);
        assert!(end.ends_with("x▏") && end.starts_with('…'), "{end}");
        assert_eq!(width(&end), 20);
        let start = around_cursor("", &"y".repeat(300), 20);
        assert!(start.starts_with("▏y") && start.ends_with('…'), "{start}");
        let middle = around_cursor(&"x".repeat(100), &"y".repeat(100), 21);
        assert_eq!(middle, format!("…{}▏{}…", "x".repeat(14), "y".repeat(4)));
    }
}

//! Edit-and-resend over the turn view: the request editor (the URL it goes to, the body as
//! JSON in a text area), and a request's variants beside its recorded answer: what was edited,
//! the answer text as a word diff (`[-gone-]{+new+}`, as `git diff --word-diff=plain` writes
//! it, and coloured), the tool calls side by side, usage, finish reason, status and times.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph};
use similar::{ChangeTag, TextDiff};

use crate::state::variants::{Variant, changed_paths};
use crate::state::wire::{ModelCall, tokens_label};
use crate::text::{micros, pad, truncate, width, wrap};
use crate::theme::Theme;
use crate::view::console::Console;
use crate::view::layout::Areas;

/// Width of the row labels of the comparison.
const LABEL: usize = 12;

/// The double-bordered overlay both views draw in; `hints` and `last` are its bottom border's
/// keys ([`crate::text::key_hints`]).
fn overlay(c: &Console, title: String, hints: &[&str], last: &str, w: u16) -> Block<'static> {
    let t = &c.theme;
    Block::bordered()
        .border_type(BorderType::Double)
        .border_style(t.border_focused)
        .style(t.overlay)
        // Cut between words (a narrow one read "beside the recorded answe…").
        .title(crate::text::fit_words(
            Line::styled(title, t.title),
            w.saturating_sub(4) as usize,
        ))
        .title_bottom(Line::styled(
            crate::text::key_hints(hints, last, w.saturating_sub(4) as usize),
            t.dim,
        ))
}

/// Draws the editor when it is open.
pub fn draw_editor(f: &mut Frame, areas: Areas, c: &Console) {
    let Some(editor) = &c.editor else {
        return;
    };
    let t = &c.theme;
    let area = areas.body();
    let key = editor.key;
    let title = format!(
        " Edit model request {} of turn {} of #{} · send it again beside the recorded one ",
        key.index + 1,
        key.turn,
        key.session
    );
    let block = overlay(
        c,
        title,
        &["Ctrl+S or F5 sends", "Tab body/URL"],
        if editor.sending() {
            "Esc cancels the send"
        } else {
            "Esc closes (kept unsent; e opens it again)"
        },
        area.width,
    );
    let inside = block.inner(area);
    f.render_widget(Clear, area);
    f.render_widget(block, area);
    let url_style = if editor.on_url { t.selected } else { t.text };
    let url = if editor.on_url {
        let (a, b) = editor.url.split();
        format!("{a}▏{b}")
    } else {
        editor.url.text()
    };
    let status = if let Some(sent_at) = editor.sent_at {
        let waited = sent_at.elapsed().as_secs_f64();
        // The key before the explanation: a narrow screen cut "Esc cancels it" off.
        Line::styled(
            whole_pieces(
                &[
                    &format!("sending… {waited:.1} s"),
                    "Esc cancels it",
                    "the answer comes as a variant beside the recorded one",
                ],
                inside.width as usize,
            ),
            t.accent,
        )
    } else if let Some(e) = &editor.error {
        Line::styled(truncate(e, inside.width as usize), t.error)
    } else {
        // The keys first: they are what a narrow screen must still show; each piece whole
        // or left out (a narrow one showed "the body as sent (system prompt, me…").
        Line::styled(
            whole_pieces(
                &[
                    "Ctrl+Z/Y undo/redo",
                    "Ctrl+R starts over",
                    "Tab: the URL",
                    "the body as sent (system prompt, messages, tools, [model] parameters): \
                     change anything",
                ],
                inside.width as usize,
            ),
            t.dim,
        )
    };
    let head = vec![
        Line::from(vec![
            Span::styled("URL  ", t.accent),
            Span::styled(
                truncate(&url, inside.width.saturating_sub(5) as usize),
                url_style,
            ),
        ]),
        status,
    ];
    f.render_widget(
        Paragraph::new(head),
        Rect {
            height: 2.min(inside.height),
            ..inside
        },
    );
    let body = Rect {
        y: inside.y + 2,
        height: inside.height.saturating_sub(2),
        ..inside
    };
    f.render_widget(&editor.body, body);
}

/// As many of `pieces`, from the first, as fit in `max` cells joined by ` · `, each whole
/// (the first cut only when it alone is wider).
fn whole_pieces(pieces: &[&str], max: usize) -> String {
    let mut out = String::new();
    for piece in pieces {
        let joined = if out.is_empty() {
            (*piece).to_string()
        } else {
            format!("{out} · {piece}")
        };
        if width(&joined) > max {
            break;
        }
        out = joined;
    }
    if out.is_empty() {
        truncate(pieces.first().copied().unwrap_or_default(), max)
    } else {
        out
    }
}

/// Draws the variants when they are shown.
pub fn draw_variants(f: &mut Frame, areas: Areas, c: &Console) {
    let Some(view) = &c.variants_view else {
        return;
    };
    let area = areas.body();
    let key = view.key;
    let done = c.variants.count(key);
    // The sends still in flight come after the variants, oldest first.
    let n = done + c.sends.of(key).count();
    let sending = c.shown_send();
    let w = area.width.saturating_sub(2) as usize;
    let calls = c.state.wire.calls_of(key.session, key.turn);
    let lines = match (
        calls.get(key.index),
        c.variants.get(key, view.shown),
        sending,
    ) {
        (call, _, Some(send)) => in_flight(c, call.copied(), send, w),
        (Some(call), Some(variant), _) => comparison(c, call, variant, view.shown, w),
        _ => vec![Line::styled(
            "The recorded request is no longer kept.",
            c.theme.dim,
        )],
    };
    let visible = area.height.saturating_sub(2) as usize;
    let scroll = view.scroll.get().min(lines.len().saturating_sub(visible));
    view.scroll.set(scroll);
    let head = format!(
        " Model request {} of turn {} of #{} · variant {} of {n}",
        key.index + 1,
        key.turn,
        key.session,
        view.shown + 1
    );
    let title = match sending {
        Some(send) => format!(
            "{head} · in flight, {:.1} s ",
            send.at.elapsed().as_secs_f64()
        ),
        None if n > done => format!(
            "{head} beside the recorded answer ({} in flight) ",
            n - done
        ),
        None => format!("{head} beside the recorded answer "),
    };
    let block = if sending.is_some() {
        overlay(
            c,
            title,
            &["← → variants", "↑↓ scroll"],
            "Esc cancels the send",
            area.width,
        )
    } else {
        overlay(
            c,
            title,
            &[
                "← → variants",
                "↑↓ scroll",
                "e edit again",
                "c/J copy curl/JSON",
                "t save as test case",
            ],
            "Esc back",
            area.width,
        )
    };
    f.render_widget(Clear, area);
    f.render_widget(Paragraph::new(lines[scroll..].to_vec()).block(block), area);
}

/// A send still in flight: where it went, what was edited, how long it has waited and how to
/// cancel it, then the body sent.
fn in_flight(
    c: &Console,
    call: Option<&ModelCall>,
    send: &crate::view::resend::Sending,
    w: usize,
) -> Vec<Line<'static>> {
    let t = &c.theme;
    let body: Option<serde_json::Value> = serde_json::from_str(&send.body).ok();
    let mut edited = match (call.and_then(|c| c.request().map(|q| (c, q))), &body) {
        (Some((call, q)), Some(body)) => {
            changed_paths(&c.state.wire.book.whole(call.session, q).body(q), body, 6)
        }
        _ => Vec::new(),
    };
    if call
        .and_then(ModelCall::request)
        .is_some_and(|q| q.url != send.url)
    {
        edited.insert(0, "the URL".into());
    }
    let mut out = vec![
        Line::from(vec![
            Span::styled(pad("sent to", LABEL), t.accent),
            Span::styled(send.url.clone(), t.text),
        ]),
        edited_line(t, &edited),
        Line::default(),
        Line::from(vec![
            Span::styled(pad("in flight", LABEL), t.accent),
            Span::styled(
                format!(
                    "sent {:.1} s ago; waiting for the answer…",
                    send.at.elapsed().as_secs_f64()
                ),
                t.accent,
            ),
        ]),
    ];
    for l in wrap(
        "Esc cancels it: the request is dropped (its connection closed) and no variant comes; \
         your edit is kept for e. Its answer, when it comes, is set here beside the recorded one.",
        w.saturating_sub(LABEL).max(12),
    ) {
        out.push(Line::styled(format!("{}{l}", " ".repeat(LABEL)), t.dim));
    }
    out.push(Line::default());
    out.push(Line::styled("body sent", t.accent));
    let text = body
        .as_ref()
        .and_then(|b| serde_json::to_string_pretty(b).ok())
        .unwrap_or_else(|| send.body.clone());
    // A long string wraps under where its line starts, so the JSON's shape stays readable.
    for line in text.lines() {
        let rest = line.trim_start();
        let indent = " ".repeat(2 + line.len() - rest.len());
        for l in wrap(rest, w.saturating_sub(indent.len()).max(12)) {
            out.push(Line::styled(format!("{indent}{l}"), t.text));
        }
    }
    out
}

/// The `edited` line of a send: what the edit changed in the recorded request (paths in its
/// body, the URL), or that it is the same request again.
fn edited_line(t: &Theme, edited: &[String]) -> Line<'static> {
    Line::from(vec![
        Span::styled(pad("edited", LABEL), t.accent),
        Span::styled(
            if edited.is_empty() {
                "nothing (the same request again)".to_string()
            } else {
                edited.join(", ")
            },
            t.text,
        ),
    ])
}

/// The comparison's lines.
pub fn comparison(
    c: &Console,
    call: &ModelCall,
    v: &Variant,
    shown: usize,
    w: usize,
) -> Vec<Line<'static>> {
    let t = &c.theme;
    let mut out = Vec::new();
    let recorded_body = call
        .request()
        .map(|q| c.state.wire.book.whole(call.session, q).body(q));
    let mut edited = recorded_body
        .as_ref()
        .map(|b| changed_paths(b, &v.body, 6))
        .unwrap_or_default();
    if call.request().is_some_and(|q| q.url != v.answer.url) {
        edited.insert(0, "the URL".into());
    }
    // Refused before sending (a URL that is not http), nothing went out and nothing came back.
    let never_sent = v.answer.error.is_some() && v.answer.total_us == 0;
    out.push(Line::from(vec![
        Span::styled(
            pad(if never_sent { "not sent to" } else { "sent to" }, LABEL),
            t.accent,
        ),
        Span::styled(v.answer.url.clone(), t.text),
    ]));
    out.push(edited_line(t, &edited));
    if let Some(e) = &v.answer.error {
        for l in wrap(&format!("failed: {e}"), w) {
            out.push(Line::styled(l, t.error));
        }
    }
    out.push(Line::default());
    let col = w.saturating_sub(LABEL) / 2;
    out.push(Line::from(vec![
        Span::raw(" ".repeat(LABEL)),
        Span::styled(pad("recorded", col), t.title),
        Span::styled(format!("variant {}", shown + 1), t.title),
    ]));
    let recorded = call.answer();
    let old_text = recorded.map(|a| a.content.clone()).unwrap_or_default();
    let new_text = v.answer.text.clone();
    let side = |label: &str, left: String, right: String, style: Style| {
        side_by_side(label, &left, &right, col, style, t.text)
    };
    let calls_of = |list: Vec<String>| {
        if list.is_empty() {
            "(none)".to_string()
        } else {
            list.join("; ")
        }
    };
    out.extend(side(
        "tool calls",
        calls_of(
            recorded
                .map(|a| {
                    a.tool_calls
                        .iter()
                        .map(|x| format!("{}({})", x.name, x.arguments))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        calls_of(
            v.answer
                .tool_calls
                .iter()
                .map(|x| format!("{}({})", x.name, x.arguments))
                .collect(),
        ),
        t.tool,
    ));
    let usage = |u: &Option<turnscope::observe::TokenUsage>| {
        u.as_ref()
            .map_or("(not reported)".to_string(), tokens_label)
    };
    out.extend(side(
        "usage",
        usage(&call.info().usage),
        usage(&v.answer.info.usage),
        t.dim,
    ));
    let or_none = |s: &Option<String>| s.clone().unwrap_or_else(|| "(none)".into());
    out.extend(side(
        "finish",
        or_none(&call.info().finish_reason),
        or_none(&v.answer.info.finish_reason),
        t.dim,
    ));
    let status = |s: Option<u16>| s.map_or("(no answer)".to_string(), |s| format!("HTTP {s}"));
    out.extend(side(
        "status",
        status(call.info().status),
        status(v.answer.info.status),
        t.dim,
    ));
    let time = |us: Option<u64>| us.map_or("-".to_string(), micros);
    out.extend(side(
        "headers",
        time(call.info().headers_us),
        time(v.answer.info.headers_us),
        t.dim,
    ));
    out.extend(side(
        "first text",
        time(call.first_piece_us()),
        time(v.answer.first_piece_us),
        t.dim,
    ));
    out.extend(side(
        "total",
        micros(call.total_us()),
        micros(v.answer.total_us),
        t.dim,
    ));
    out.push(Line::default());
    out.push(Line::from(vec![
        Span::styled(pad("text diff", LABEL), t.accent),
        Span::styled(
            if v.answer.error.is_some() && new_text.is_empty() {
                "(no answer to compare)".to_string()
            } else if old_text == new_text {
                "the same text".to_string()
            } else {
                "[-recorded only-] {+variant only+}".to_string()
            },
            t.dim,
        ),
    ]));
    // A failed variant has no text: the recorded one all marked gone would say nothing.
    if !(v.answer.error.is_some() && new_text.is_empty()) {
        out.extend(word_diff(
            &c.theme,
            &old_text,
            &new_text,
            w.saturating_sub(2),
        ));
    }
    if !v.answer.reasoning.is_empty() {
        out.push(Line::default());
        out.push(Line::styled("variant's reasoning", t.accent));
        for l in wrap(&v.answer.reasoning, w.saturating_sub(2)) {
            out.push(Line::styled(format!("  {l}"), t.dim));
        }
    }
    out
}

/// Two columns under a label, each wrapped to `col` cells.
fn side_by_side(
    label: &str,
    left: &str,
    right: &str,
    col: usize,
    style: Style,
    changed: Style,
) -> Vec<Line<'static>> {
    let l = wrap(left, col.saturating_sub(1).max(4));
    let r = wrap(right, col.saturating_sub(1).max(4));
    let differs = left != right;
    (0..l.len().max(r.len()).max(1))
        .map(|i| {
            Line::from(vec![
                Span::styled(pad(if i == 0 { label } else { "" }, LABEL), style),
                Span::styled(pad(l.get(i).map_or("", String::as_str), col), style),
                Span::styled(
                    r.get(i).cloned().unwrap_or_default(),
                    if differs { changed } else { style },
                ),
            ])
        })
        .collect()
}

/// The word diff of two texts as styled pieces: what both have as it is, each run of changes
/// as one `[-gone words-]{+new words+}` (a space between changed words belongs to the run, so
/// a changed sentence reads as one mark, not word by word), the spaces around a run kept
/// outside its marks so words never glue to it.
fn word_marks(t: &Theme, old: &str, new: &str) -> Vec<(String, Style)> {
    let diff = TextDiff::from_words(old, new);
    let changes: Vec<(ChangeTag, &str)> = diff
        .iter_all_changes()
        .map(|c| (c.tag(), c.value()))
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < changes.len() {
        let (tag, value) = changes[i];
        if tag == ChangeTag::Equal {
            out.push((value.to_string(), t.text));
            i += 1;
            continue;
        }
        let (mut gone, mut added) = (String::new(), String::new());
        while let Some(&(tag, value)) = changes.get(i) {
            match tag {
                ChangeTag::Delete => gone.push_str(value),
                ChangeTag::Insert => added.push_str(value),
                // Only spaces between two changes: inside the run, on both sides.
                ChangeTag::Equal
                    if value.trim().is_empty()
                        && changes
                            .get(i + 1)
                            .is_some_and(|(next, _)| *next != ChangeTag::Equal) =>
                {
                    gone.push_str(value);
                    added.push_str(value);
                }
                ChangeTag::Equal => break,
            }
            i += 1;
        }
        let (gone_word, added_word) = (gone.trim(), added.trim());
        if gone_word.is_empty() && added_word.is_empty() {
            // Only spacing changed: the variant's, unmarked.
            out.push((added, t.text));
            continue;
        }
        // The spaces at the run's edges, outside its marks (the variant's, when it has words).
        let side = if added_word.is_empty() { &gone } else { &added };
        let lead = side[..side.len() - side.trim_start().len()].to_string();
        let tail = side[side.trim_end().len()..].to_string();
        if !lead.is_empty() {
            out.push((lead, t.text));
        }
        if !gone_word.is_empty() {
            out.push((format!("[-{gone_word}-]"), t.error));
        }
        if !added_word.is_empty() {
            out.push((format!("{{+{added_word}+}}"), t.ok));
        }
        if !tail.is_empty() {
            out.push((tail, t.text));
        }
    }
    out
}

/// The word diff of two texts, wrapped to `w` cells under a two-cell indent.
fn word_diff(t: &Theme, old: &str, new: &str, w: usize) -> Vec<Line<'static>> {
    let mut lines: Vec<Line<'static>> = Vec::new();
    let mut current: Vec<Span<'static>> = vec![Span::raw("  ")];
    let mut used = 2;
    let w = w.max(12);
    for (text, style) in word_marks(t, old, new) {
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                lines.push(Line::from(std::mem::replace(
                    &mut current,
                    vec![Span::raw("  ")],
                )));
                used = 2;
            }
            let cells = width(part);
            if used + cells > w && used > 2 {
                lines.push(Line::from(std::mem::replace(
                    &mut current,
                    vec![Span::raw("  ")],
                )));
                used = 2;
            }
            if cells > w - 2 {
                // One mark wider than a line: wrapped onto lines of its own, never cut.
                let pieces = wrap(part, w - 2);
                let last = pieces.len().saturating_sub(1);
                for (j, piece) in pieces.into_iter().enumerate() {
                    used = 2 + width(&piece);
                    current.push(Span::styled(piece, style));
                    if j < last {
                        lines.push(Line::from(std::mem::replace(
                            &mut current,
                            vec![Span::raw("  ")],
                        )));
                    }
                }
            } else if !part.is_empty() {
                current.push(Span::styled(part.to_string(), style));
                used += cells;
            }
        }
    }
    lines.push(Line::from(current));
    lines
}

#[cfg(test)]
mod tests {
    use super::{Theme, word_diff};
    use crate::text::width;

    fn diff_text(old: &str, new: &str) -> String {
        word_diff(&Theme::default(), old, new, 200)
            .iter()
            .map(|l| {
                l.spans
                    .iter()
                    .map(|s| s.content.as_ref())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A run of changed words reads as one mark, the spaces around it kept (tour S M6: marks
    /// alternated word by word, and `{+au Français,+}je` glued the next word on).
    #[test]
    fn a_run_of_changed_words_is_one_mark_and_keeps_its_spaces() {
        assert_eq!(
            diff_text("C'est la vie, les mots clés.", "La fin de la France"),
            "  [-C'est la vie, les mots clés.-]{+La fin de la France+}"
        );
        assert_eq!(
            diff_text(
                "Bonjour, je ne sais pas.",
                "Bonjour, au Français, je ne suis pas."
            ),
            "  Bonjour, {+au Français,+} je ne [-sais-]{+suis+} pas."
        );
        assert_eq!(
            diff_text("I'm sorry for that", "2 + 3 = 5 for that"),
            "  [-I'm sorry-]{+2 + 3 = 5+} for that"
        );
        assert_eq!(diff_text("a b", "a  b"), "  a  b", "spacing only: unmarked");
    }

    #[test]
    fn a_mark_wider_than_the_pane_wraps_and_loses_no_word() {
        let new = "La femme de France, ".repeat(8);
        let lines = word_diff(
            &Theme::default(),
            "The capital of France is Paris.",
            &new,
            40,
        );
        let text: Vec<String> = lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert!(text.iter().all(|l| width(l) <= 40), "{text:#?}");
        let joined = text.join(" ");
        assert_eq!(joined.matches("femme").count(), 8, "{text:#?}");
        assert!(joined.contains("Paris.-]"), "{text:#?}");
    }
}

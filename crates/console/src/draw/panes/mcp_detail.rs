//! One MCP exchange opened whole over the panes, as an MCP Inspector user reads a message: its
//! facts (client, session, protocol, status, timings), the request, and each message written
//! back — the text a tool result carries first, as text, then the message pretty-printed with
//! what it says before its `_meta`. Long texts and messages fold to a few lines until `f`;
//! `↑↓ PgUp PgDn` scroll, `← →` step through the exchanges listed, `y` copies it as curl and
//! `J` as JSON.
//!
//! The lines are built once per exchange, width and folding (kept in the view), so an idle
//! screen costs the lines it shows.

use ratatui::Frame;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph};
use serde_json::Value;
use turnscope::observe::wire::McpExchange;

use super::json_view::pretty;
use crate::text::{count, micros, truncate, wrap};
use crate::view::console::Console;
use crate::view::layout::Areas;

/// Lines a message's JSON keeps folded.
pub const MESSAGE_FOLDED: usize = 24;
/// Lines a text content keeps folded.
pub const TEXT_FOLDED: usize = 8;

/// Draws the opened exchange over the body of the screen.
pub fn draw(f: &mut Frame, areas: Areas, c: &Console) {
    let Some(detail) = &c.mcp.detail else {
        return;
    };
    let t = &c.theme;
    let area = areas.body();
    let inner_w = area.width.saturating_sub(2) as usize;
    let kept = c.state.wire.exchanges();
    let exchange = kept.by_number(detail.number).map(|r| r.exchange());
    let key = (detail.number, detail.unfolded, inner_w);
    let mut cache = detail.lines.borrow_mut();
    if cache.as_ref().is_none_or(|(k, _)| *k != key) {
        let lines = match exchange {
            Some(x) => lines(c, x, inner_w, detail.unfolded),
            None => vec![Line::styled(
                "This exchange is no longer kept (console.max_mib: the oldest go first).",
                t.dim,
            )],
        };
        *cache = Some((key, lines));
    }
    let all = cache.as_ref().map(|(_, l)| l.as_slice()).unwrap_or(&[]);
    let visible = area.height.saturating_sub(2) as usize;
    let scroll = detail.scroll.get().min(all.len().saturating_sub(visible));
    detail.scroll.set(scroll);
    let shown: Vec<Line<'static>> = all.iter().skip(scroll).take(visible).cloned().collect();
    let listed = c.mcp.listed(kept);
    let at = listed.partition_point(|n| *n < detail.number);
    let title = match exchange {
        Some(x) => format!(
            " MCP exchange {} of {} · {} · {} ",
            count(at as u64 + 1),
            count(listed.len() as u64),
            super::mcp::what(x),
            x.status
        ),
        None => " MCP exchange ".to_string(),
    };
    let more = if all.len() > scroll + visible {
        format!(
            " · {} more lines",
            count((all.len() - scroll - visible) as u64)
        )
    } else {
        String::new()
    };
    let room = area.width.saturating_sub(4) as usize;
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .border_style(t.border_focused)
        .style(t.overlay)
        .title(Line::styled(truncate(&title, room), t.title))
        .title_bottom(Line::styled(
            crate::text::key_hints(
                &[
                    "↑↓ PgUp PgDn scroll",
                    "← → exchanges",
                    if detail.unfolded {
                        "f folds"
                    } else {
                        "f unfolds"
                    },
                    "y curl",
                    "J JSON",
                ],
                &format!("Esc closes{more}"),
                room,
            ),
            t.dim,
        ));
    f.render_widget(Clear, area);
    f.render_widget(Paragraph::new(shown).block(block), area);
}

/// Every line of an exchange opened whole, `w` cells wide.
pub fn lines(c: &Console, x: &McpExchange, w: usize, unfolded: bool) -> Vec<Line<'static>> {
    let t = &c.theme;
    let mut out = Vec::new();
    let mut fact = |name: &str, value: String, style: Style| {
        push_wrapped(&mut out, &format!("{name:<9}  "), &value, w, style);
    };
    let mut who = vec![x.client.clone().unwrap_or_else(|| "client unknown".into())];
    if let Some(s) = &x.mcp_session {
        who.push(format!("MCP session {s}…"));
    }
    if let Some(p) = &x.protocol {
        who.push(format!("protocol {p}"));
    }
    fact("client", who.join(" · "), t.text);
    let mut asked = vec![format!("{} {}", x.http_method, x.path)];
    if let Some(m) = &x.mcp_method {
        asked.push(format!("Mcp-Method {m}"));
    }
    if let Some(n) = &x.mcp_name {
        asked.push(format!("Mcp-Name {n}"));
    }
    if x.authorized {
        asked.push("with a bearer token (never recorded)".into());
    }
    fact("request", asked.join(" · "), t.text);
    let mut answered = vec![format!(
        "{} {}",
        x.status,
        x.content_type.as_deref().unwrap_or("(no content type)")
    )];
    if let Some(fb) = x.first_byte_us {
        answered.push(format!("first byte of the body after {}", micros(fb)));
    }
    answered.push(format!("{} in all", micros(x.total_us)));
    answered.push(if x.complete {
        "written to its end".into()
    } else {
        "the client left before the end".into()
    });
    fact("answer", answered.join(" · "), t.text);
    fact("at", c.state.clock(x.at_us), t.dim);
    out.push(Line::default());
    if let Some(body) = &x.request {
        out.push(Line::styled("→ request", t.user));
        message(&mut out, &body.value(), w, unfolded, t.user, c);
        out.push(Line::default());
    }
    let mut progress_seen = 0;
    for m in &x.messages {
        let parsed = m.message.value();
        let what = if let Some(method) = parsed["method"].as_str() {
            method.to_string()
        } else if let Some(e) = parsed.get("error") {
            format!("error {}", e["code"])
        } else if parsed["result"]["isError"] == true {
            "result (isError)".into()
        } else if parsed.get("turnscope/cut").is_some() {
            "cut by the wire limit".into()
        } else {
            "result".into()
        };
        let style = if what.starts_with("error") || what.contains("isError") {
            t.error
        } else if parsed.get("method").is_some() {
            t.dim
        } else {
            t.bot
        };
        out.push(Line::styled(
            format!("← +{} {what}", micros(m.after_us)),
            style,
        ));
        message(&mut out, &parsed, w, unfolded, style, c);
        if parsed["method"] == "notifications/progress" {
            progress_seen += 1;
            if progress_seen == 1
                && let Some(p) = x.progress.filter(|p| p.left_out > 0)
            {
                out.push(Line::styled(
                    format!(
                        "← … {} more progress notifications ({} in all): the result holds the whole reply, the Progress pane each one",
                        count(p.left_out),
                        crate::text::bytes(p.bytes)
                    ),
                    t.dim,
                ));
            }
        }
        out.push(Line::default());
    }
    if let Some(text) = &x.text {
        out.push(Line::styled("← body (not JSON-RPC)", t.error));
        block(&mut out, "  ", text, w, unfolded, TEXT_FOLDED, t.error);
    }
    out
}

/// One message: the texts of a tool result's content first, then the JSON.
fn message(
    out: &mut Vec<Line<'static>>,
    v: &Value,
    w: usize,
    unfolded: bool,
    style: Style,
    c: &Console,
) {
    let t = &c.theme;
    for item in v["result"]["content"].as_array().into_iter().flatten() {
        if let Some(text) = item["text"].as_str() {
            out.push(Line::styled(
                "  text content (what the client's model reads)",
                t.dim,
            ));
            block(out, "    ", text, w, unfolded, TEXT_FOLDED, t.text);
        }
    }
    block(out, "  ", &pretty(v), w, unfolded, MESSAGE_FOLDED, style);
}

/// `text` indented by `lead`, wrapped, folded to `folded` lines unless `unfolded`.
fn block(
    out: &mut Vec<Line<'static>>,
    lead: &str,
    text: &str,
    w: usize,
    unfolded: bool,
    folded: usize,
    style: Style,
) {
    let room = w.saturating_sub(lead.len()).max(8);
    let mut rows = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            rows.push(String::new());
        } else {
            rows.extend(wrap(&line.replace('\t', "  "), room));
        }
    }
    let hidden = if !unfolded && rows.len() > folded {
        let n = rows.len() - folded;
        rows.truncate(folded);
        Some(n)
    } else {
        None
    };
    for row in rows {
        out.push(Line::from(vec![
            Span::raw(lead.to_string()),
            Span::styled(row, style),
        ]));
    }
    if let Some(n) = hidden {
        out.push(Line::styled(
            format!("{lead}… {} more lines (f unfolds)", count(n as u64)),
            Style::new().add_modifier(ratatui::style::Modifier::DIM),
        ));
    }
}

fn push_wrapped(out: &mut Vec<Line<'static>>, lead: &str, text: &str, w: usize, style: Style) {
    let room = w.saturating_sub(lead.chars().count()).max(8);
    for (i, row) in wrap(text, room).into_iter().enumerate() {
        out.push(Line::from(vec![
            Span::styled(
                if i == 0 {
                    lead.to_string()
                } else {
                    " ".repeat(lead.chars().count())
                },
                style,
            ),
            Span::styled(row, style),
        ]));
    }
}

//! A turn's model requests in the turn view (and the export): one head line each (what the
//! request added to the context, messages, tools, tokens, finish reason, status, time) and,
//! opened, the request whole (URL, model, fields, the tools offered, every message with the
//! new ones marked `+`) and the answer (content, reasoning apart, tool calls). Long contents
//! fold to [`FOLDED`] lines until unfolded; JSON is pretty.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use serde_json::Value;
use turnscope::observe::model_request::TokenUsage;

use super::tool_call::pretty_text;
use crate::state::wire::{ModelCall, tokens_label};
use crate::text::{micros, one_line, wrap};
use crate::view::console::Console;

/// Lines a folded content keeps.
pub const FOLDED: usize = 3;

/// How the requests are drawn.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shown {
    /// Requests opened to their request and answer.
    pub open: bool,
    /// Contents unfolded, tools' parameters whole.
    pub whole: bool,
    /// The request `c` and `J` copy (index into the turn's requests).
    pub selected: Option<usize>,
}

/// The lines of `session`'s turn `turn`'s model requests, `w` cells wide.
pub fn lines(c: &Console, session: u64, turn: u64, w: usize, shown: Shown) -> Vec<Line<'static>> {
    let t = &c.theme;
    let calls = c.state.wire.calls_of(session, turn);
    let mut head = format!("Model requests ({})", calls.len());
    if let Some(u) = c.state.wire.turn_tokens(session, turn) {
        head.push_str(&format!(" · {}", tokens_label(&u)));
    }
    let mut out = vec![Line::styled(head, t.accent)];
    // A request is recorded when it ends (with what it was sent and what it answered): one
    // still out is said, with how long it has run, rather than "none".
    // (Its time counts to now: the timeline's marks stop at the last piece.)
    let in_flight = c.state.timelines.get(session, turn).and_then(|timeline| {
        let running = timeline.in_flight()?;
        let since = c
            .state
            .now_us
            .saturating_sub(timeline.started_us.saturating_add(running.start));
        let ran = since.max(running.total);
        Some((running, ran))
    });
    if calls.is_empty() && in_flight.is_none() {
        out.push(Line::styled("  none recorded", t.dim));
    }
    for (i, call) in calls.iter().enumerate() {
        let mark = if shown.selected == Some(i) {
            "▶ "
        } else {
            "  "
        };
        let style = if call.error().is_some() {
            t.error
        } else {
            t.bot
        };
        let lead = format!("{mark}model {} ", i + 1);
        let variants = c.variants.count(crate::state::variants::RequestKey {
            session,
            turn,
            index: i,
        });
        let room = w.saturating_sub(lead.chars().count()).max(8);
        let mut figures = head_figures(c, call);
        if variants > 0 {
            figures.push_str(&format!(
                " · {} (v)",
                crate::text::plural(variants as u64, "variant")
            ));
        }
        for (n, row) in wrap(&figures, room).into_iter().enumerate() {
            let first = if n == 0 {
                lead.clone()
            } else {
                " ".repeat(lead.chars().count())
            };
            out.push(Line::from(vec![
                Span::styled(first, style),
                Span::styled(row, t.text),
            ]));
        }
        if shown.open {
            out.extend(body(c, call, w, shown.whole));
        }
    }
    if let Some((running, ran)) = in_flight {
        let so_far = match running.first_piece {
            Some(first) => format!("first piece after {}, streaming", micros(first)),
            None => "no piece yet".into(),
        };
        let text = format!(
            "  model {} · in flight for {} ({so_far}): recorded when it ends, with what it was \
             sent and what it answered (copy and edit it then)",
            calls.len() + 1,
            micros(ran)
        );
        for row in wrap(&text, w.max(8)) {
            out.push(Line::styled(row, t.dim));
        }
    }
    out
}

/// `+1 user · 3 messages · 3 tools · 40→7 tok · stop · HTTP 200 · 12 ms`.
fn head_figures(c: &Console, call: &ModelCall) -> String {
    let mut parts = Vec::new();
    let whole = call
        .request()
        .map(|q| (q, c.state.wire.book.whole(call.session, q)));
    match &whole {
        Some((q, whole)) => {
            parts.push(whole.growth());
            parts.push(crate::text::plural(whole.messages.len() as u64, "message"));
            parts.push(crate::text::plural(q.tool_count as u64, "tool"));
        }
        None => parts.push("not recorded (recording off, or an older file)".into()),
    }
    if let Some(u) = &call.info().usage {
        parts.push(tokens_label(u));
        if whole.as_ref().is_some_and(|(_, whole)| {
            whole.tools_left_out(prompt_with_cached(u), called_a_tool(call))
        }) {
            parts.push("tools not in the prompt?".into());
        }
    }
    if let Some(f) = &call.info().finish_reason {
        parts.push(f.clone());
    }
    if call.info().stopped {
        parts.push("stopped with its turn".into());
    }
    if let Some(s) = call.info().status {
        parts.push(format!("HTTP {s}"));
    }
    parts.push(micros(call.total_us()));
    if let Some(e) = call.error() {
        parts.push(one_line(e));
    }
    parts.join(" · ")
}

/// A response's prompt tokens with those served from cache (a server that counts them apart
/// is not taken for a short prompt).
fn prompt_with_cached(u: &TokenUsage) -> u64 {
    u.prompt_tokens.saturating_add(u.cached_tokens)
}

/// Whether the request's answer called a tool: its model saw the tools offered, so it is
/// never marked as having had them left out.
fn called_a_tool(call: &ModelCall) -> bool {
    // Some servers end an answer with calls as `stop`: its recorded calls say it too.
    call.info().finish_reason.as_deref() == Some("tool_calls")
        || call.answer().is_some_and(|a| !a.tool_calls.is_empty())
}

/// The request whole and the answer.
fn body(c: &Console, call: &ModelCall, w: usize, whole: bool) -> Vec<Line<'static>> {
    let t = &c.theme;
    let mut out = Vec::new();
    let Some(q) = call.request() else {
        return out;
    };
    let full = c.state.wire.book.whole(call.session, q);
    let fields: Vec<String> = q
        .params
        .iter()
        .map(|(k, v)| format!("{k} {}", one_line(&v.to_string())))
        .collect();
    push_wrapped(
        &mut out,
        "    request  ",
        &format!("POST {} · model {} · {}", q.url, q.model, fields.join(", ")),
        w,
        t.dim,
    );
    match &full.tools {
        Some(tools) => {
            let names: Vec<&str> = tools
                .iter()
                .filter_map(|x| x["function"]["name"].as_str())
                .collect();
            push_wrapped(&mut out, "    tools    ", &names.join(", "), w, t.tool);
            if whole {
                for tool in tools.iter() {
                    let text = crate::state::pretty(tool);
                    push_content(&mut out, "             ", &text, w, true, t.dim);
                }
            }
        }
        None if q.tool_count > 0 => out.push(Line::styled(
            format!("    tools    {} (their set was not recorded)", q.tool_count),
            t.dim,
        )),
        None => {}
    }
    if let Some(u) = &call.info().usage
        && full.tools_left_out(prompt_with_cached(u), called_a_tool(call))
    {
        let text = format!(
            "the prompt was {} tokens, but the {} offered are ~{} tokens as JSON: the server's \
             chat template likely left them out, and the model cannot call them (llama.cpp needs \
             --jinja and a model whose chat template takes tools; see docs/models.md)",
            crate::text::count(prompt_with_cached(u)),
            crate::text::plural(q.tool_count as u64, "tool"),
            crate::text::count((full.tools_bytes / 4) as u64),
        );
        push_wrapped(&mut out, "    ⚠        ", &text, w, t.warn);
    }
    if full.missing > 0 {
        out.push(Line::styled(
            format!(
                "    ({} earlier messages not recorded: the console started late or missed them)",
                full.missing
            ),
            t.warn,
        ));
    }
    for (i, m) in full.messages.iter().enumerate() {
        let new = i >= full.new_from;
        let role = m["role"].as_str().unwrap_or("?");
        let lead = format!("  {} {:<9}  ", if new { "+" } else { " " }, role);
        let style = match role {
            "user" => t.user,
            "assistant" => t.bot,
            "tool" => t.tool,
            _ => t.text,
        };
        let mut text = String::new();
        if let Some(id) = m["tool_call_id"].as_str() {
            text.push_str(&format!("({id}) "));
        }
        if let Some(s) = m["content"].as_str() {
            text.push_str(&pretty_text(s));
        }
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            if !text.is_empty() {
                text.push('\n');
            }
            let args = call["function"]["arguments"].as_str().unwrap_or("");
            text.push_str(&format!(
                "→ {}({}) [{}]",
                call["function"]["name"].as_str().unwrap_or("?"),
                arguments(args, whole),
                call["id"].as_str().unwrap_or("")
            ));
        }
        push_content(&mut out, &lead, &text, w, whole, style);
    }
    if let Some(a) = call.answer() {
        if !a.reasoning.is_empty() {
            push_content(&mut out, "    thought  ", &a.reasoning, w, whole, t.dim);
        }
        let mut said = a.content.clone();
        for call in &a.tool_calls {
            if !said.is_empty() {
                said.push('\n');
            }
            said.push_str(&format!(
                "→ {}({}) [{}]",
                call.name,
                arguments(&call.arguments, whole),
                call.id
            ));
        }
        if said.is_empty() {
            said = "(nothing)".into();
        }
        push_content(&mut out, "    answer   ", &said, w, whole, t.bot);
    }
    let info = call.info();
    let mut facts = Vec::new();
    if let Some(m) = &info.model {
        facts.push(format!("model {m}"));
    }
    if let Some(id) = &info.response_id {
        facts.push(format!("id {id}"));
    }
    if let Some(u) = &info.usage {
        facts.push(format!(
            "prompt {} · completion {} · cached {} · reasoning {}",
            u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.reasoning_tokens
        ));
    }
    if let Some(us) = info.headers_us {
        facts.push(format!("headers after {}", micros(us)));
    }
    if !facts.is_empty() {
        push_wrapped(&mut out, "    server   ", &facts.join(" · "), w, t.dim);
    }
    out
}

/// A call's arguments as streamed: on one line when folded, pretty JSON when unfolded.
fn arguments(args: &str, whole: bool) -> String {
    if whole {
        pretty_text(args)
    } else {
        one_line(args)
    }
}

/// `text` after `lead`, wrapped under itself.
fn push_wrapped(out: &mut Vec<Line<'static>>, lead: &str, text: &str, w: usize, style: Style) {
    push_content(out, lead, text, w, true, style);
}

/// `text` (several lines) after `lead`, wrapped; folded to [`FOLDED`] lines unless `whole`.
fn push_content(
    out: &mut Vec<Line<'static>>,
    lead: &str,
    text: &str,
    w: usize,
    whole: bool,
    style: Style,
) {
    let room = w.saturating_sub(lead.chars().count()).max(8);
    let mut rows: Vec<String> = text.lines().flat_map(|l| wrap(l, room)).collect();
    if rows.is_empty() {
        rows.push(String::new());
    }
    let hidden = if !whole && rows.len() > FOLDED {
        let n = rows.len() - FOLDED;
        rows.truncate(FOLDED);
        n
    } else {
        0
    };
    let blank = " ".repeat(lead.chars().count());
    for (i, row) in rows.into_iter().enumerate() {
        out.push(Line::from(vec![
            Span::styled(
                if i == 0 {
                    lead.to_string()
                } else {
                    blank.clone()
                },
                style,
            ),
            Span::styled(row, style),
        ]));
    }
    if hidden > 0 {
        out.push(Line::styled(
            format!("{blank}… {hidden} more lines (f unfolds)"),
            Style::new().add_modifier(ratatui::style::Modifier::DIM),
        ));
    }
}

/// The JSON body of a request, for `J`.
pub fn request_json(c: &Console, call: &ModelCall) -> Option<String> {
    let q = call.request()?;
    let whole = c.state.wire.book.whole(call.session, q);
    serde_json::to_string_pretty(&whole.body(q)).ok()
}

/// What the request lacks to be copied whole, when it lacks anything (for the copy's notice).
pub fn incomplete(c: &Console, call: &ModelCall) -> Option<String> {
    let q = call.request()?;
    c.state.wire.book.whole(call.session, q).incomplete(q)
}

/// The curl command of a request, for `c`.
pub fn request_curl(c: &Console, call: &ModelCall) -> Option<String> {
    let q = call.request()?;
    Some(c.state.wire.book.whole(call.session, q).curl(q))
}

/// A value as one line of JSON, for the MCP view.
pub fn compact(v: &Value) -> String {
    v.to_string()
}

//! The MCP pane: every `/mcp` exchange, newest at the bottom, as the client saw it: one head
//! line (time, client, HTTP method, JSON-RPC method and tool, status, time to the first byte
//! of the body and to the end), the request it sent (`→`), and each message written back (`←`,
//! with its time; a chat's progress as its first and latest notification and how many more),
//! each on one line with what it says before its `_meta`. A `chat` answered with a task
//! gathers that task's polls under it ([`super::mcp_tasks`]) unless a method is kept. `↑↓`
//! pick an exchange, Enter opens it whole ([`super::mcp_detail`]); `a` keeps one client, `x`
//! one method, `/` filters by typed text; the head says how many of how many are listed. `y`
//! copies the picked one as `curl`.
//!
//! Only the exchanges on screen are drawn (their rows, a task's polls under its call too, are
//! counted, not built, to place them).

use std::collections::{BTreeMap, VecDeque};

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use turnscope::observe::wire::McpExchange;

use super::json_view::head;
use crate::text::{count, micros, truncate};
use crate::view::console::Console;
use crate::view::ids::PaneId;
use crate::view::task_polls::TaskPolls;

/// The exchanges the pane lists under its filters, oldest first.
pub fn listed(c: &Console) -> Vec<&McpExchange> {
    let kept = c.state.wire.exchanges();
    c.mcp
        .listed(kept)
        .iter()
        .filter_map(|n| kept.by_number(*n).map(|r| r.exchange()))
        .collect()
}

/// The exchange under the cursor (the newest listed when following).
pub fn picked(c: &Console) -> Option<(u64, &McpExchange)> {
    let kept = c.state.wire.exchanges();
    let listed = c.mcp.listed(kept);
    let n = *listed.get(c.mcp.cursor_index(&listed)?)?;
    Some((n, kept.by_number(n)?.exchange()))
}

/// Rows an exchange takes in the list (without the polls of a task it created).
fn rows_of(x: &McpExchange) -> usize {
    1 + usize::from(x.request.is_some())
        + x.messages.len()
        + usize::from(x.progress.is_some_and(|p| p.left_out > 0))
        + usize::from(x.text.is_some())
}

/// Whether the exchange failed (an HTTP error, a JSON-RPC error, a tool's `isError`).
pub fn failed(x: &McpExchange) -> bool {
    x.status >= 400
        || x.messages.last().is_some_and(|m| {
            let message = m.message.value();
            message.get("error").is_some() || message["result"]["isError"] == true
        })
}

/// `initialize`, `tools/call chat`, or the path when the body named no method.
pub fn what(x: &McpExchange) -> String {
    match (&x.method, &x.tool) {
        (Some(m), Some(tool)) => format!("{m} {tool}"),
        (Some(m), None) => m.clone(),
        (None, _) => x.path.clone(),
    }
}

/// Draws the pane into the inspector's inside.
pub fn draw(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let w = area.width as usize;
    let kept = c.state.wire.exchanges();
    let listed = c.mcp.listed(kept);
    let mut info = Vec::new();
    if let Some(editing) = &c.mcp.editing {
        let (before, after) = editing.split();
        info.push(Span::styled("filter: ", t.dim));
        info.push(Span::styled(format!("{before}▏{after}"), t.key));
        info.push(Span::styled(" · ", t.dim));
    }
    info.push(Span::styled(
        format!(
            "{} of {} exchanges",
            count((listed.len() + c.mcp.grouped()) as u64),
            count(kept.len() as u64)
        ),
        t.accent,
    ));
    let mut tail = format!(
        " · client {} · method {}",
        c.mcp.client.as_deref().unwrap_or("all"),
        c.mcp.method.as_deref().unwrap_or("all")
    );
    if c.mcp.editing.is_none() && !c.mcp.filter.is_empty() {
        tail.push_str(&format!(" · filter: {}", c.mcp.filter.text()));
    }
    if kept.dropped() > 0 {
        tail.push_str(&format!(
            " · {} older dropped (console.max_mib)",
            count(kept.dropped())
        ));
    }
    info.push(Span::styled(tail, t.dim));
    let mut out = vec![crate::text::fit(Line::from(info), w)];
    let room = (area.height as usize).saturating_sub(1);
    c.shown_rows(PaneId::Mcp, room);
    if listed.is_empty() {
        let hint = if kept.is_empty() {
            "No MCP exchange yet: connect a client (the header's claude line) and its initialize, tools/list and calls land here."
        } else {
            "No exchange matches: Esc clears the filter, a and x cycle back to all."
        };
        out.extend(
            crate::text::wrap(hint, w.max(10))
                .into_iter()
                .map(|l| Line::styled(l, t.dim)),
        );
        f.render_widget(Paragraph::new(out), area);
        return;
    }
    let cursor = c.mcp.cursor_index(&listed);
    let polls = c.mcp.task_polls();
    let (from, skip) = window(c, &listed, kept, &polls, cursor, room);
    let marked = c.mcp.cursor.is_some() || c.focus == PaneId::Mcp;
    let mut rows: Vec<Line<'static>> = Vec::with_capacity(room + 8);
    for (i, n) in listed.iter().enumerate().skip(from) {
        if rows.len() >= room + skip {
            break;
        }
        let Some(row) = kept.by_number(*n) else {
            continue;
        };
        let picked = marked && Some(i) == cursor;
        let x = row.exchange();
        exchange_rows(c, x, w, picked, &mut rows);
        if let Some(group) = polls.get(n)
            && let Some(task) = crate::view::task_polls::created_task(x)
        {
            let group: Vec<&McpExchange> = group
                .numbers
                .iter()
                .filter_map(|p| kept.by_number(*p).map(|r| r.exchange()))
                .collect();
            rows.extend(super::mcp_tasks::lines(c, &task, &group, w));
        }
    }
    out.extend(rows.into_iter().skip(skip).take(room));
    f.render_widget(Paragraph::new(out), area);
}

/// Where drawing starts: the index in `listed` of the first exchange and how many of its rows
/// are above the pane. Following, the newest exchange ends at the bottom; with a cursor, the
/// first exchange drawn stays put while the picked one is in view. Walks only the exchanges
/// that fit.
fn window(
    c: &Console,
    listed: &VecDeque<u64>,
    kept: &crate::state::kept::Kept<crate::state::wire::ExchangeRow>,
    polls: &BTreeMap<u64, TaskPolls>,
    cursor: Option<usize>,
    room: usize,
) -> (usize, usize) {
    let rows = |i: usize| {
        listed.get(i).map_or(0, |n| {
            kept.by_number(*n).map_or(0, |r| rows_of(r.exchange()))
                + polls.get(n).map_or(0, TaskPolls::rows)
        })
    };
    let Some(cur) = cursor else {
        return (0, 0);
    };
    if c.mcp.cursor.is_none() {
        // Following: fill upwards from the newest.
        let mut used = 0;
        let mut i = listed.len();
        while i > 0 && used < room {
            i -= 1;
            used += rows(i);
        }
        c.mcp.top.set(listed.get(i).copied());
        return (i, used.saturating_sub(room));
    }
    let mut top = c
        .mcp
        .top
        .get()
        .map_or(cur, |n| listed.partition_point(|x| *x < n))
        .min(cur);
    // Move the top down until the picked exchange ends within the pane.
    let mut used: usize = (top..=cur).map(rows).sum();
    while used > room && top < cur {
        used -= rows(top);
        top += 1;
    }
    c.mcp.top.set(listed.get(top).copied());
    (top, 0)
}

/// The rows of one exchange, `w` cells wide.
fn exchange_rows(
    c: &Console,
    x: &McpExchange,
    w: usize,
    picked: bool,
    rows: &mut Vec<Line<'static>>,
) {
    let t = &c.theme;
    let mut head_line = format!(
        "{} {} {} {} · {}",
        c.state.clock(x.at_us),
        x.client.as_deref().unwrap_or("?"),
        x.http_method,
        what(x),
        x.status
    );
    if let Some(fb) = x.first_byte_us {
        head_line.push_str(&format!(" · body {}", micros(fb)));
    }
    head_line.push_str(&format!(" · {}", micros(x.total_us)));
    if !x.complete {
        head_line.push_str(" · client left");
    }
    if let Some(p) = &x.protocol {
        head_line.push_str(&format!(" · {p}"));
    }
    let style = if failed(x) { t.error } else { t.text };
    let line = Line::styled(truncate(&head_line, w), style);
    rows.push(if picked {
        line.patch_style(t.selected)
    } else {
        line
    });
    // What a line can show: a few more bytes than cells (escapes, wide characters).
    let room = w + 16;
    if let Some(body) = &x.request {
        rows.push(Line::styled(
            truncate(&format!("  → {}", head(&body.value(), room)), w),
            t.user,
        ));
    }
    let progress = x.progress.filter(|p| p.left_out > 0);
    let mut progress_seen = 0;
    for m in &x.messages {
        // Parsed here, for the rows on screen only (the record keeps the text).
        let message = m.message.value();
        // What matters first, since a long message is cut at the pane's edge.
        let is_progress = message["method"] == "notifications/progress";
        let (style, tag) = if let Some(e) = message.get("error") {
            (t.error, format!("error {} · ", e["code"]))
        } else if message["result"]["isError"] == true {
            (t.error, "isError · ".to_string())
        } else if message.get("method").is_some() {
            (t.dim, String::new())
        } else {
            (t.bot, String::new())
        };
        rows.push(Line::styled(
            truncate(
                &format!("  ← +{} {tag}{}", micros(m.after_us), head(&message, room)),
                w,
            ),
            style,
        ));
        if is_progress {
            progress_seen += 1;
            if progress_seen == 1
                && let Some(p) = progress
            {
                rows.push(Line::styled(
                    truncate(
                        &format!(
                            "  ← … {} more progress notifications ({} in all): the Progress pane shows each",
                            count(p.left_out),
                            crate::text::bytes(p.bytes)
                        ),
                        w,
                    ),
                    t.dim,
                ));
            }
        }
    }
    if let Some(text) = &x.text {
        rows.push(Line::styled(
            truncate(
                &format!("  ← {}", crate::text::one_line(&truncate(text, room))),
                w,
            ),
            t.error,
        ));
    }
}

//! The MCP pane: every `/mcp` exchange, newest at the bottom, as the client saw it: one head
//! line (time, client, HTTP method, JSON-RPC method and tool, status, time to the first byte
//! and to the end), the request it sent (`→`), and each message written back (`←`, with its
//! time: progress notifications, then the result or error exactly as sent). A `chat` answered
//! with a task gathers that task's polls under it (`mcp_tasks`) unless a method is kept. `a`
//! keeps one client, `x` one method; `y` copies the newest one listed as `curl`.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use turnscope::observe::wire::McpExchange;

use super::bottom_window;
use crate::text::{micros, truncate};
use crate::view::console::Console;

/// The exchanges the pane lists under its filters, oldest first.
pub fn listed(c: &Console) -> Vec<&McpExchange> {
    c.state
        .wire
        .exchanges()
        .filter(|x| c.mcp.client.is_none() || x.client == c.mcp.client)
        .filter(|x| c.mcp.method.is_none() || x.method == c.mcp.method)
        .collect()
}

/// Draws the pane into the inspector's inside.
pub fn draw(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let w = area.width as usize;
    let shown = listed(c);
    let mut out = vec![Line::from(vec![
        Span::styled(
            format!(
                "client {} · method {}",
                c.mcp.client.as_deref().unwrap_or("all"),
                c.mcp.method.as_deref().unwrap_or("all")
            ),
            t.accent,
        ),
        Span::styled(
            format!(" · {} exchanges", crate::text::count(shown.len() as u64)),
            t.dim,
        ),
    ])];
    let mut rows: Vec<Line<'static>> = Vec::new();
    let (own, polls) = if c.mcp.method.is_none() {
        super::mcp_tasks::grouped(&shown)
    } else {
        (shown.clone(), Default::default())
    };
    for x in &own {
        let ok = x.status < 400
            && x.messages
                .last()
                .is_none_or(|m| m.message.get("error").is_none());
        let what = match (&x.method, &x.tool) {
            (Some(m), Some(tool)) => format!("{m} {tool}"),
            (Some(m), None) => m.clone(),
            (None, _) => x.path.clone(),
        };
        let mut head = format!(
            "{} {} {} {} · {}",
            c.state.clock(x.at_us),
            x.client.as_deref().unwrap_or("?"),
            x.http_method,
            what,
            x.status
        );
        if let Some(fb) = x.first_byte_us {
            head.push_str(&format!(" · first {}", micros(fb)));
        }
        head.push_str(&format!(" · {}", micros(x.total_us)));
        if !x.complete {
            head.push_str(" · client left");
        }
        if let Some(p) = &x.protocol {
            head.push_str(&format!(" · {p}"));
        }
        rows.push(Line::styled(
            truncate(&head, w),
            if ok { t.text } else { t.error },
        ));
        if let Some(body) = &x.request {
            rows.push(Line::styled(truncate(&format!("  → {body}"), w), t.user));
        }
        for m in &x.messages {
            // What matters first, since a long message is cut at the pane's edge.
            let (style, tag) = if let Some(e) = m.message.get("error") {
                (t.error, format!("error {} · ", e["code"]))
            } else if m.message["result"]["isError"] == serde_json::Value::Bool(true) {
                (t.error, "isError · ".to_string())
            } else if m.message.get("method").is_some() {
                (t.dim, String::new())
            } else {
                (t.bot, String::new())
            };
            rows.push(Line::styled(
                truncate(
                    &format!("  ← +{} {tag}{}", micros(m.after_us), m.message),
                    w,
                ),
                style,
            ));
        }
        if let Some(text) = &x.text {
            rows.push(Line::styled(
                truncate(&format!("  ← {}", crate::text::one_line(text)), w),
                t.error,
            ));
        }
        if let Some(task) = super::mcp_tasks::created_task(x)
            && let Some(group) = polls.get(&task)
        {
            rows.extend(super::mcp_tasks::lines(c, &task, group, w));
        }
    }
    if rows.is_empty() {
        rows.push(Line::styled(
            "No MCP exchange yet: connect a client (the header's claude line) and its initialize, tools/list and calls land here.",
            t.dim,
        ));
    }
    let room = (area.height as usize).saturating_sub(1);
    let (from, to) = bottom_window(&rows, room, &c.mcp.back);
    out.extend(rows[from..to].iter().cloned());
    f.render_widget(Paragraph::new(out), area);
}

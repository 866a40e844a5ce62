//! The MCP pane's tasks: a `chat` call answered with a task (`resultType: "task"`) gathers the
//! `tasks/*` exchanges of that task under it, instead of one head per poll: a line per run
//! of polls with the same status (how many, over how long, the latest status message), then
//! the poll that answered otherwise (the result handed over, a cancel) as the client got it.
//! Exchanges name a task by its id's first 8 characters (the recording masks the rest).

use std::collections::HashMap;

use ratatui::text::Line;
use turnscope::observe::wire::McpExchange;

use crate::text::{micros, one_line, truncate};
use crate::view::console::Console;

/// The first 8 characters of a masked task id (`0f1e2d3c…`).
fn prefix(masked: &str) -> Option<String> {
    let head: String = masked.chars().take(8).collect();
    (head.len() == 8 && head.chars().all(|c| c.is_ascii_hexdigit())).then_some(head)
}

/// The task a `tasks/*` exchange is about.
pub fn polled_task(x: &McpExchange) -> Option<String> {
    if !x.method.as_deref().is_some_and(|m| m.starts_with("tasks/")) {
        return None;
    }
    let from_body = x
        .request
        .as_ref()
        .and_then(|r| r["params"]["taskId"].as_str());
    prefix(from_body.or(x.mcp_name.as_deref())?)
}

/// The task a `tools/call` was answered with, if it was.
pub fn created_task(x: &McpExchange) -> Option<String> {
    let result = &x.messages.last()?.message["result"];
    if result["resultType"] != "task" {
        return None;
    }
    prefix(result["taskId"].as_str()?)
}

/// The exchanges listed on their own (oldest first), and each task's `tasks/*` exchanges by
/// the task's id prefix, for the tasks whose creating call is listed too.
pub fn grouped<'a>(
    shown: &[&'a McpExchange],
) -> (Vec<&'a McpExchange>, HashMap<String, Vec<&'a McpExchange>>) {
    let created: std::collections::HashSet<String> =
        shown.iter().filter_map(|x| created_task(x)).collect();
    let mut own = Vec::with_capacity(shown.len());
    let mut polls: HashMap<String, Vec<&McpExchange>> = HashMap::new();
    for x in shown {
        match polled_task(x) {
            Some(task) if created.contains(&task) => polls.entry(task).or_default().push(x),
            _ => own.push(*x),
        }
    }
    (own, polls)
}

/// What a poll answered, in a few words: its status, or its error.
fn answered(x: &McpExchange) -> String {
    let Some(last) = x.messages.last() else {
        return format!("HTTP {}", x.status);
    };
    let m = &last.message;
    if let Some(e) = m.get("error") {
        return format!("error {}", e["code"]);
    }
    match x.method.as_deref() {
        Some("tasks/get") => m["result"]["status"].as_str().unwrap_or("?").to_string(),
        Some(_) => "acknowledged".into(),
        None => "?".into(),
    }
}

/// The lines under a task's creating call: its polls folded by status.
pub fn lines(c: &Console, task: &str, polls: &[&McpExchange], w: usize) -> Vec<Line<'static>> {
    let t = &c.theme;
    let mut out = Vec::new();
    let mut i = 0;
    while i < polls.len() {
        let status = answered(polls[i]);
        let run = polls[i..]
            .iter()
            .take_while(|x| answered(x) == status && x.method.as_deref() == Some("tasks/get"))
            .count()
            .max(1);
        let first = polls[i];
        let last = polls[i + run - 1];
        let working = status == "working";
        if working || run > 1 {
            let mut line = format!(
                "  ↻ task {task} · tasks/get ×{run} {status} · {} … {}",
                c.state.clock(first.at_us),
                c.state.clock(last.at_us)
            );
            if let Some(message) = last.messages.last().and_then(|m| {
                m.message["result"]["statusMessage"]
                    .as_str()
                    .map(str::to_string)
            }) {
                line.push_str(&format!(" · {}", one_line(&message)));
            }
            out.push(Line::styled(truncate(&line, w), t.dim));
        }
        if !working {
            // The answer that ended the run, as the client got it.
            let x = last;
            let ok = x
                .messages
                .last()
                .is_none_or(|m| m.message.get("error").is_none());
            out.push(Line::styled(
                truncate(
                    &format!(
                        "  ↻ task {task} · {} {} {status} · {} · {}",
                        c.state.clock(x.at_us),
                        x.method.as_deref().unwrap_or("?"),
                        x.status,
                        micros(x.total_us)
                    ),
                    w,
                ),
                if ok { t.text } else { t.error },
            ));
            if let Some(m) = x.messages.last() {
                let style = if ok { t.bot } else { t.error };
                out.push(Line::styled(
                    truncate(&format!("    ← +{} {}", micros(m.after_us), m.message), w),
                    style,
                ));
            }
        }
        i += run;
    }
    out
}

/// The status a poll's result carries (for tests).
#[cfg(test)]
fn status_of(x: &McpExchange) -> Option<&str> {
    x.messages.last()?.message["result"]["status"].as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use turnscope::observe::wire::McpMessage;

    fn exchange(method: &str, request: Value, answer: Value) -> McpExchange {
        McpExchange {
            http_method: "POST".into(),
            path: "/mcp".into(),
            method: Some(method.into()),
            request: Some(request),
            status: 200,
            messages: vec![McpMessage {
                after_us: 10,
                message: answer,
            }],
            complete: true,
            ..McpExchange::default()
        }
    }

    #[test]
    fn a_tasks_polls_go_under_the_call_that_created_it() {
        let chat = exchange(
            "tools/call",
            serde_json::json!({"params": {"name": "chat"}}),
            serde_json::json!({"result": {"resultType": "task", "taskId": "0f1e2d3c…", "status": "working"}}),
        );
        let poll = |status: &str| {
            exchange(
                "tasks/get",
                serde_json::json!({"params": {"taskId": "0f1e2d3c…"}}),
                serde_json::json!({"result": {"status": status}}),
            )
        };
        let (p1, p2) = (poll("working"), poll("completed"));
        let other = exchange(
            "tasks/get",
            serde_json::json!({"params": {"taskId": "99999999…"}}),
            serde_json::json!({"error": {"code": -32602}}),
        );
        let shown = vec![&chat, &p1, &other, &p2];
        let (own, polls) = grouped(&shown);
        assert_eq!(
            own.len(),
            2,
            "the call and the poll of a task it did not create"
        );
        assert_eq!(polls["0f1e2d3c"].len(), 2);
        assert_eq!(status_of(polls["0f1e2d3c"][1]), Some("completed"));
        assert_eq!(created_task(&chat).as_deref(), Some("0f1e2d3c"));
    }
}

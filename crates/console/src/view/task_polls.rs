//! The `tasks/*` polls of an MCP task, as the MCP pane's listing keeps them: which task a
//! poll is about and which task a `chat` call was answered with (by the id's first 8
//! characters: the recording masks the rest), and [`TaskPolls`], a task's polls hidden under
//! the call that created it, with the lines they take counted as they arrive, so placing the
//! exchanges on screen never walks a task's polls.

use turnscope::observe::wire::{JsonText, McpExchange};

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
    let request = x.request.as_ref().map(JsonText::value);
    let from_body = request
        .as_ref()
        .and_then(|r| r["params"]["taskId"].as_str());
    prefix(from_body.or(x.mcp_name.as_deref())?)
}

/// The task a `tools/call` was answered with, if it was.
pub fn created_task(x: &McpExchange) -> Option<String> {
    if x.method.as_deref() != Some("tools/call") {
        return None;
    }
    let last = x.messages.last()?.message.value();
    let result = &last["result"];
    if result["resultType"] != "task" {
        return None;
    }
    prefix(result["taskId"].as_str()?)
}

/// A task's polls hidden under its creating call: their numbers, oldest first, and the lines
/// `mcp_tasks::lines` (the pane) draws for them, counted as they arrive.
#[derive(Debug, Clone, Default)]
pub struct TaskPolls {
    /// The polls' exchange numbers, oldest first.
    pub numbers: Vec<u64>,
    /// Lines of the runs before the latest.
    rows_before: usize,
    /// The latest run of polls: its status, whether it is of `tasks/get`, how many, and
    /// whether its last poll was answered with a message.
    run: Option<(String, bool, usize, bool)>,
}

impl TaskPolls {
    /// Poll `number` (`x`) arrived.
    pub fn push(&mut self, number: u64, x: &McpExchange) {
        self.numbers.push(number);
        let status = answered(x);
        let get = x.method.as_deref() == Some("tasks/get");
        let has_message = !x.messages.is_empty();
        match &mut self.run {
            Some((s, true, n, m)) if get && *s == status => {
                *n += 1;
                *m = has_message;
            }
            run => {
                if let Some(old) = run.take() {
                    self.rows_before += run_rows(&old.0, old.2, old.3);
                }
                *run = Some((status, get, 1, has_message));
            }
        }
    }

    /// The lines `mcp_tasks::lines` (the pane) draws for these polls.
    pub fn rows(&self) -> usize {
        self.rows_before
            + self
                .run
                .as_ref()
                .map_or(0, |(s, _, n, m)| run_rows(s, *n, *m))
    }
}

/// Lines of a run of `n` polls answered `status`, in the shape
/// `mcp_tasks::lines` (the pane) draws: a summary when working or more than one,
/// then, unless working, the answer's head and its message.
fn run_rows(status: &str, n: usize, has_message: bool) -> usize {
    let working = status == "working";
    usize::from(working || n > 1)
        + if working {
            0
        } else {
            1 + usize::from(has_message)
        }
}

/// What a poll answered, in a few words: its status, or its error.
pub fn answered(x: &McpExchange) -> String {
    let Some(last) = x.messages.last() else {
        return format!("HTTP {}", x.status);
    };
    let m = last.message.value();
    if let Some(e) = m.get("error") {
        return format!("error {}", e["code"]);
    }
    match x.method.as_deref() {
        Some("tasks/get") => m["result"]["status"].as_str().unwrap_or("?").to_string(),
        Some(_) => "acknowledged".into(),
        None => "?".into(),
    }
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
            request: Some(JsonText::from_value(&request)),
            status: 200,
            messages: vec![McpMessage {
                after_us: 10,
                message: JsonText::from_value(&answer),
            }],
            complete: true,
            ..McpExchange::default()
        }
    }

    #[test]
    fn a_poll_names_its_task_and_a_call_the_task_it_created() {
        let chat = exchange(
            "tools/call",
            serde_json::json!({"params": {"name": "chat"}}),
            serde_json::json!({"result": {"resultType": "task", "taskId": "0f1e2d3c…", "status": "working"}}),
        );
        let poll = exchange(
            "tasks/get",
            serde_json::json!({"params": {"taskId": "0f1e2d3c…"}}),
            serde_json::json!({"result": {"status": "completed"}}),
        );
        assert_eq!(created_task(&chat).as_deref(), Some("0f1e2d3c"));
        assert_eq!(polled_task(&poll).as_deref(), Some("0f1e2d3c"));
        assert_eq!(answered(&poll), "completed");
        assert_eq!((polled_task(&chat), created_task(&poll)), (None, None));
    }
}

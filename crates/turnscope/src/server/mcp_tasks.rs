//! The MCP face of tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663): which
//! `chat` calls may become one, and a task record as the wire wants it: the `CreateTaskResult`
//! a `chat` call is answered with, and the `DetailedTask` of `tasks/get`. The task itself (a
//! view of a session's turn, and its record) is `sessions::tasks`.
//!
//! rmcp does the rest as the spec says: it offers the extension in `server/discover` (from
//! `get_info`; not in `initialize`'s answer, whose sessions never get a task: `BotMcp`),
//! answers `tasks/*` from a client that did not declare it with `-32021` (worded by
//! `tasks_refusals`), and refuses to send a task to such a client.

use chrono::{DateTime, SecondsFormat, Utc};
use rmcp::model::{
    CallToolResult, ContentBlock, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, Task,
    TaskPayload, TaskStatus as WireStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::mcp_text;
use crate::sessions::{TaskAsk, TaskError, TaskOutcome, TaskRecord, TaskSettings, TaskStatus};

/// A `chat` request that may become a task: tasks are on, the request speaks a revision
/// without `initialize` (2026-07-28 on) and declares the extension in its own `_meta`.
/// Everything else (2025-11-25 sessions, requests without the extension) is answered
/// synchronously with progress notifications, as before.
pub(crate) fn task_ask(
    context: &RequestContext<RoleServer>,
    settings: &TaskSettings,
    client: &str,
) -> Option<TaskAsk> {
    let sessionless = without_initialize(context);
    let declared = context
        .meta
        .client_capabilities()
        .is_some_and(|caps| caps.supports_tasks());
    (settings.enabled && sessionless && declared).then(|| TaskAsk {
        client: client.to_string(),
    })
}

/// Whether the request names a revision without `initialize` (2026-07-28 on) in its own
/// `_meta`, rather than coming in an MCP session.
pub(crate) fn without_initialize(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|version| !version.has_initialize())
}

/// Milliseconds since the epoch as RFC 3339 (UTC, milliseconds).
fn iso(ms: u64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms.min(i64::MAX as u64) as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn task_of(record: &TaskRecord) -> Task {
    let status = match record.status {
        TaskStatus::Working => WireStatus::Working,
        TaskStatus::Completed => WireStatus::Completed,
        TaskStatus::Cancelled => WireStatus::Cancelled,
    };
    let mut task = Task::new(
        record.id.clone(),
        status,
        iso(record.created_ms),
        iso(record.updated_ms),
    )
    .with_ttl_ms(record.ttl_ms)
    .with_poll_interval_ms(record.poll_ms);
    if let Some(message) = &record.status_message {
        task = task.with_status_message(message.clone());
    }
    task
}

/// What a `chat` call that became a task answers.
pub(crate) fn created(record: &TaskRecord) -> CreateTaskResult {
    CreateTaskResult::new(task_of(record))
}

/// The result a completed task hands over: exactly what the `chat` call would have
/// returned, or, when an empty line read the turn instead, a note saying so.
pub(crate) fn result_of(outcome: &TaskOutcome) -> CallToolResult {
    match outcome {
        TaskOutcome::Reply(reply) => mcp_text::chat_result(reply),
        TaskOutcome::HandedOver => CallToolResult::success(vec![ContentBlock::text(
            // Said when the empty line arrives: that call (or the task it becomes) gets the
            // reply, which it may not have read yet.
            "[A later chat call with an empty line took this turn over: its reply goes to that \
             call (or the task it became), not here.]",
        )]),
        TaskOutcome::Overtaken { message } => {
            CallToolResult::error(vec![ContentBlock::text(message.clone())])
        }
        TaskOutcome::Lost { replica } => CallToolResult::error(vec![ContentBlock::text(format!(
            "[This task's turn ran on replica {replica}, which stopped before the turn ended \
             (it was killed, crashed, or lost the conversation's lease). Call chat with an empty \
             line on this handle to read the turn as the conversation kept it: a replica that \
             died kept its line but none of its reply (send the line again then); one that lost \
             its lease writes the reply when the turn ends.]"
        ))]),
    }
}

/// What `tasks/get` answers for `record`: `failed` (with a `-32603` error) only when a
/// completed task's result cannot be written as JSON, what would have been a protocol error;
/// every way a turn ends is a result (`isError` for a failed turn).
pub(crate) fn detailed(record: &TaskRecord) -> GetTaskResult {
    let payload = match (&record.status, &record.outcome) {
        (TaskStatus::Working, _) => TaskPayload::Working,
        (TaskStatus::Cancelled, _) => TaskPayload::Cancelled,
        (TaskStatus::Completed, outcome) => {
            let result = outcome.as_ref().map(result_of);
            match result.map(serde_json::to_value) {
                Some(Ok(Value::Object(result))) => TaskPayload::Completed { result },
                // What would have been a protocol error: the result could not be written.
                other => TaskPayload::Failed {
                    error: failure(match other {
                        Some(Err(e)) => {
                            format!("the task's result could not be written as JSON: {e}")
                        }
                        _ => "the task completed without a result".to_string(),
                    }),
                },
            }
        }
    };
    GetTaskResult::new(DetailedTask::new(task_of(record), payload))
}

fn failure(message: String) -> JsonObject {
    let mut error = JsonObject::new();
    error.insert("code".into(), Value::from(-32603));
    error.insert("message".into(), Value::from(message));
    error
}

/// `-32602` for an unknown or expired task, as the extension requires.
pub(crate) fn unknown(e: TaskError) -> ErrorData {
    ErrorData::invalid_params(e.to_string(), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::ChatReply;

    fn record(status: TaskStatus, outcome: Option<TaskOutcome>) -> TaskRecord {
        TaskRecord {
            id: "0b6f3c52-9a3e-4d0e-8f65-6c1d2e3fa1b2".into(),
            session: 1,
            turn: 2,
            client: "c".into(),
            status,
            status_message: (status == TaskStatus::Working).then(|| "You said".into()),
            created_ms: 1_764_547_200_000,
            updated_ms: 1_764_547_201_500,
            ttl_ms: 300_000,
            poll_ms: 1000,
            outcome,
            ended_ms: None,
            collected_ms: None,
            replica: None,
            conversation: None,
            holder: None,
        }
    }

    #[test]
    fn a_created_task_has_the_extension_wire_shape() {
        let value = serde_json::to_value(created(&record(TaskStatus::Working, None))).unwrap();
        assert_eq!(value["resultType"], "task");
        assert_eq!(value["taskId"], "0b6f3c52-9a3e-4d0e-8f65-6c1d2e3fa1b2");
        assert_eq!(value["status"], "working");
        assert_eq!(value["statusMessage"], "You said");
        assert_eq!(value["createdAt"], "2025-12-01T00:00:00.000Z");
        assert_eq!(value["lastUpdatedAt"], "2025-12-01T00:00:01.500Z");
        assert_eq!(value["ttlMs"], 300_000);
        assert_eq!(value["pollIntervalMs"], 1000);
    }

    #[test]
    fn a_completed_task_carries_what_chat_would_have_returned() {
        let reply = ChatReply {
            reply: "We open at nine.".into(),
            turn: Some(2),
            end_reason: Some("completed".into()),
            error: None,
            rounds: 0,
            tool_calls: Vec::new(),
            first_piece_ms: Some(1.0),
            total_ms: Some(2.0),
            unread: None,
            usage: None,
            finish_reason: None,
            config_version: Some(1),
            line: None,
            turns: None,
            kept_unread: false,
        };
        let done = record(
            TaskStatus::Completed,
            Some(TaskOutcome::Reply(Box::new(reply.clone()))),
        );
        let value = serde_json::to_value(detailed(&done)).unwrap();
        assert_eq!(value["resultType"], "complete");
        assert_eq!(value["status"], "completed");
        assert_eq!(
            value["result"],
            serde_json::to_value(mcp_text::chat_result(&reply)).unwrap()
        );
        let handed = record(TaskStatus::Completed, Some(TaskOutcome::HandedOver));
        let value = serde_json::to_value(detailed(&handed)).unwrap();
        assert!(
            value["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("empty line took this turn over")
        );
        let cancelled =
            serde_json::to_value(detailed(&record(TaskStatus::Cancelled, None))).unwrap();
        assert_eq!(cancelled["status"], "cancelled");
        assert!(cancelled.get("result").is_none());
        let missing = serde_json::to_value(detailed(&record(TaskStatus::Completed, None))).unwrap();
        assert_eq!(missing["status"], "failed");
        assert_eq!(missing["error"]["code"], -32603);
    }

    #[test]
    fn a_lost_task_does_not_promise_the_reply_a_dead_replica_never_wrote() {
        let lost = result_of(&TaskOutcome::Lost {
            replica: "r2".into(),
        });
        let value = serde_json::to_value(lost).unwrap();
        assert_eq!(value["isError"], true);
        let text = value["content"][0]["text"].as_str().unwrap();
        // Before: "to read how far it got", and the empty line said "it got no reply".
        assert!(!text.contains("how far it got"), "{text}");
        assert!(
            text.contains("replica r2")
                && text.contains("empty line")
                && text.contains("none of its reply")
                && text.contains("send the line again"),
            "{text}"
        );
    }
}

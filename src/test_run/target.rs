//! The target of `turnscope test`: an MCP server offering `start` and `chat`, reached with
//! rmcp's streamable HTTP client, and what one `chat` call tells about its turn.
//!
//! The turn record is read from the result's `_meta["turnscope/turn"]`, else from its
//! `structuredContent` (older turnscope), else the target reports only text (a pipecat bot
//! served by pipecat-mcp-transport): the reply is the text, and tool calls and end reasons are
//! unknown, so an expectation on them cannot be checked. Times come from the record when the
//! target reports them; otherwise they are measured here: the whole turn as the call's
//! duration, the first piece as the first progress notification of the call.
//!
//! The client speaks as Claude Code does where it can: MCP 2026-07-28 first (falling back to
//! 2025-11-25 with `initialize` for an older target), declaring the tasks extension, so a
//! target that serves long turns as tasks answers with one; the client then polls `tasks/get`
//! at the interval the target asks for until the result, all within the call's timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use turnscope::mcp::connect::{chain, initialize_failed};
use turnscope::server::mcp_text::text_of;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    CreateTaskResult, GetTaskParams, Implementation, ProgressNotificationParam, ProtocolVersion,
    TaskPayload,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};
use serde::Serialize;
use serde_json::{Value, json};

/// Where a turn's facts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reported {
    /// `_meta["turnscope/turn"]`.
    Meta,
    /// `structuredContent`.
    Structured,
    /// Only the text content: no tool calls, no end reason.
    TextOnly,
}

/// Who measured a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    /// The target, in its turn record.
    Target,
    /// This client: the call's duration, or its first progress notification.
    Client,
}

impl Clock {
    /// How a message says it.
    pub fn label(self) -> &'static str {
        match self {
            Clock::Target => "as the target measured it",
            Clock::Client => "measured by this client",
        }
    }
}

/// One tool call of a turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Call {
    /// The tool's name.
    pub name: String,
    /// The arguments (JSON; a string when the model sent text that is not JSON).
    pub args: Value,
    /// How long it ran, in ms, when the target reported it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ms: Option<f64>,
    /// Its result's size, when the target reported it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_bytes: Option<usize>,
    /// Whether it failed, when the target reported it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

/// What one `chat` call said about its turn.
#[derive(Debug, Clone, Serialize)]
pub struct TurnRecord {
    /// The reply (the text when the target reports nothing else).
    pub reply: String,
    /// The turn number within the session, when reported.
    pub turn: Option<u64>,
    /// The call's result was a tool error.
    pub call_failed: bool,
    /// The error, when the turn (or the call) ended in one.
    pub error: Option<String>,
    /// How the turn ended, when reported.
    pub end_reason: Option<String>,
    /// The tool calls, when reported.
    pub tool_calls: Option<Vec<Call>>,
    /// Rounds of tool calls, when reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
    /// The tokens of the turn's model requests, when reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<turnscope::observe::TokenUsage>,
    /// Milliseconds to the first piece, and who measured them.
    pub first_piece_ms: Option<(f64, Clock)>,
    /// Milliseconds to the whole reply, and who measured them.
    pub total_ms: (f64, Clock),
    /// Where the facts came from.
    pub reported: Reported,
    /// The task the target answered the call with, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<Followed>,
}

/// A task a call was answered with, followed to its result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Followed {
    /// The first 8 characters of its id (task ids are secrets).
    pub id: String,
    /// Milliseconds from the call to the task's creation (the target's grace period).
    pub created_ms: f64,
    /// Milliseconds from the call to the poll that handed the result over.
    pub collected_ms: f64,
    /// `tasks/get` requests it took.
    pub polls: u32,
}

/// Notes the first progress notification after [`Timer::arm`], lock-free: one client serves
/// one call at a time, so one slot is enough.
#[derive(Clone)]
struct Timer {
    epoch: Instant,
    /// Nanoseconds since `epoch` of the first notification; 0 = none yet.
    first: Arc<AtomicU64>,
}

impl Timer {
    fn arm(&self) {
        self.first.store(0, Ordering::Relaxed);
    }

    fn first_since(&self, start: Instant) -> Option<Duration> {
        let nanos = self.first.load(Ordering::Relaxed);
        (nanos != 0)
            .then(|| (self.epoch + Duration::from_nanos(nanos)).saturating_duration_since(start))
    }
}

impl ClientHandler for Timer {
    /// Declares the tasks extension, as Claude Code run interactively does.
    fn get_info(&self) -> ClientConfig {
        // Named, so the target's console and logs tell its sessions from other clients'.
        ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("turnscope-test", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(
        &self,
        _params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let now = self.epoch.elapsed().as_nanos().max(1) as u64;
        let _ = self
            .first
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// One MCP connection to the target; serves one call at a time.
pub struct Client {
    service: RunningService<RoleClient, Timer>,
    timer: Timer,
    url: String,
}

impl Client {
    /// Connects to `url`, sending `token` as the bearer token when given.
    ///
    /// # Errors
    /// The server cannot be reached or does not speak MCP; the message says which URL.
    pub async fn connect(url: &str, token: Option<&str>) -> anyhow::Result<Self> {
        let timer = Timer {
            epoch: Instant::now(),
            first: Arc::new(AtomicU64::new(0)),
        };
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
        // A reply stream broken by the server's death fails the case after a few tries to
        // resume it, rather than waiting for the server to come back (rmcp's default).
        config.retry_config = turnscope::mcp::connect::stream_resume_policy();
        if let Some(t) = token {
            config = config.auth_header(t.to_string());
        }
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let service = match timer
            .clone()
            .serve_with_lifecycle(
                StreamableHttpClientTransport::from_config(config),
                lifecycle,
            )
            .await
        {
            Ok(service) => service,
            Err(e) => anyhow::bail!(initialize_failed(url, token.is_some(), &e).await),
        };
        Ok(Self {
            service,
            timer,
            url: url.to_string(),
        })
    }

    /// Checks that the target offers `start` and `chat`.
    ///
    /// # Errors
    /// Listing fails, or a tool is missing.
    pub async fn check_tools(&self) -> anyhow::Result<()> {
        let tools = self
            .service
            .list_all_tools()
            .await
            .map_err(|e| anyhow::anyhow!("{}: tools/list failed: {}", self.url, chain(&e)))?;
        for needed in ["start", "chat"] {
            anyhow::ensure!(
                tools.iter().any(|t| t.name == needed),
                "{} offers no `{needed}` tool (it has: {}); `turnscope test` needs a bot server with start and chat",
                self.url,
                tools
                    .iter()
                    .map(|t| t.name.as_ref())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(())
    }

    /// Calls `name`; a task the target answers with is followed to its result, which comes
    /// with what the task was.
    async fn call(
        &self,
        name: &str,
        args: Value,
        timeout: Duration,
    ) -> Result<(CallToolResult, Option<Followed>), String> {
        let started = Instant::now();
        let mut params = CallToolRequestParams::new(name.to_string());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        let answered = async {
            match self.service.call_tool_once(params).await {
                Ok(CallToolResponse::Complete(result)) => Ok((result, None)),
                Ok(CallToolResponse::Task(task)) => {
                    let id = task.task.task_id.chars().take(8).collect();
                    let created_ms = started.elapsed().as_secs_f64() * 1000.0;
                    self.follow(name, task).await.map(|(result, polls)| {
                        let followed = Followed {
                            id,
                            created_ms,
                            collected_ms: started.elapsed().as_secs_f64() * 1000.0,
                            polls,
                        };
                        (result, Some(followed))
                    })
                }
                Ok(_) => Err(format!(
                    "the `{name}` call to {} asked for input mid-call, which `turnscope test` cannot give",
                    self.url
                )),
                Err(e) => Err(format!(
                    "the `{name}` call to {} failed: {}",
                    self.url,
                    chain(&e)
                )),
            }
        };
        match tokio::time::timeout(timeout, answered).await {
            Ok(answer) => answer,
            Err(_) => Err(format!(
                "the `{name}` call to {} gave no answer within {} (raise --timeout if the bot is that slow)",
                self.url,
                budget(timeout)
            )),
        }
    }

    /// Polls the task a `name` call was answered with until it ends, at the interval it asks
    /// for: its result and the polls it took.
    async fn follow(
        &self,
        name: &str,
        created: CreateTaskResult,
    ) -> Result<(CallToolResult, u32), String> {
        let id = created.task.task_id;
        let mut interval = created.task.poll_interval_ms.unwrap_or(1000);
        let mut polls = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(interval.clamp(10, 60_000))).await;
            polls += 1;
            let got = self
                .service
                .get_task(GetTaskParams::new(id.clone()))
                .await
                .map_err(|e| {
                    format!(
                        "polling the task of the `{name}` call to {} failed: {e}",
                        self.url
                    )
                })?;
            interval = got.task.task.poll_interval_ms.unwrap_or(interval);
            match got.task.payload {
                TaskPayload::Completed { result } => {
                    return serde_json::from_value(Value::Object(result))
                        .map(|r| (r, polls))
                        .map_err(|e| {
                            format!("the task of the `{name}` call to {} completed with a result that is not a tool result: {e}", self.url)
                        });
                }
                TaskPayload::Failed { error } => {
                    return Err(format!(
                        "the task of the `{name}` call to {} failed: {}",
                        self.url,
                        Value::Object(error)
                    ));
                }
                TaskPayload::Cancelled => {
                    return Err(format!(
                        "the task of the `{name}` call to {} was cancelled by the target",
                        self.url
                    ));
                }
                _ => {}
            }
        }
    }

    /// `start` → the new conversation's handle and the bot's greeting, when its record has one.
    ///
    /// # Errors
    /// The call failed or the result holds no handle.
    pub async fn start(&self, timeout: Duration) -> Result<(String, Option<String>), String> {
        let (result, _) = self.call("start", json!({}), timeout).await?;
        let text = text_of(&result);
        if result.is_error == Some(true) {
            // The run's own earlier cases may be what fills the target: each one's conversation
            // stays open there until the target's idle sweep ends it.
            let hint = if text.contains("no free session") {
                " (each case of a --url run keeps its conversation open on the target until the \
                 target's idle sweep ends it: run fewer cases at a time, or start the target \
                 with a higher cap, --sessions)"
            } else {
                ""
            };
            return Err(format!("`start` was refused: {text}{hint}"));
        }
        let record = record_of(&result, "turnscope/start").map(|(v, _)| v);
        let field = |name: &str| {
            record.and_then(|r| r.get(name).and_then(Value::as_str).map(str::to_string))
        };
        let handle = field("handle").unwrap_or(text);
        if handle.trim().is_empty() {
            return Err("`start` returned no handle".into());
        }
        Ok((handle.trim().to_string(), field("greeting")))
    }

    /// `chat` with `line` on `handle`, and the turn's record.
    ///
    /// # Errors
    /// The call itself failed (transport, protocol, timeout); a turn that ended in error is
    /// a record, not an error.
    pub async fn chat(
        &self,
        handle: &str,
        line: &str,
        timeout: Duration,
    ) -> Result<TurnRecord, String> {
        self.timer.arm();
        let started = Instant::now();
        let (result, task) = self
            .call("chat", json!({"handle": handle, "line": line}), timeout)
            .await?;
        let elapsed = started.elapsed();
        let first = self.timer.first_since(started);
        Ok(TurnRecord {
            task,
            ..turn_record(&result, elapsed, first)
        })
    }

    /// Ends the MCP session.
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// The machine-readable record under `_meta[key]`, else `structuredContent`.
fn record_of<'a>(result: &'a CallToolResult, key: &str) -> Option<(&'a Value, Reported)> {
    if let Some(v) = result.meta.as_ref().and_then(|m| m.0.get(key))
        && v.is_object()
    {
        return Some((v, Reported::Meta));
    }
    result
        .structured_content
        .as_ref()
        .filter(|v| v.is_object())
        .map(|v| (v, Reported::Structured))
}

fn ms(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn turn_record(result: &CallToolResult, elapsed: Duration, first: Option<Duration>) -> TurnRecord {
    let call_failed = result.is_error == Some(true);
    let client_total = (elapsed.as_secs_f64() * 1000.0, Clock::Client);
    let client_first = first.map(|d| (d.as_secs_f64() * 1000.0, Clock::Client));
    let Some((r, reported)) = record_of(result, "turnscope/turn") else {
        let text = text_of(result);
        return TurnRecord {
            reply: if call_failed {
                String::new()
            } else {
                text.clone()
            },
            turn: None,
            call_failed,
            error: call_failed.then_some(text),
            end_reason: None,
            tool_calls: None,
            rounds: None,
            usage: None,
            first_piece_ms: client_first,
            total_ms: client_total,
            reported: Reported::TextOnly,
            task: None,
        };
    };
    let tool_calls = r.get("tool_calls").and_then(Value::as_array).map(|calls| {
        calls
            .iter()
            .map(|c| {
                let args = match c.get("arguments") {
                    Some(Value::String(s)) => {
                        serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                    }
                    Some(other) => other.clone(),
                    None => Value::Object(Default::default()),
                };
                Call {
                    name: c
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    args,
                    ms: ms(c, "ms"),
                    result_bytes: c
                        .get("result_bytes")
                        .and_then(Value::as_u64)
                        .map(|n| n as usize),
                    is_error: c.get("is_error").and_then(Value::as_bool),
                }
            })
            .collect()
    });
    let error = r
        .get("error")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| call_failed.then(|| text_of(result)));
    TurnRecord {
        // Past 64 KiB the record leaves the reply to the text (`reply_bytes` instead).
        reply: match r.get("reply").and_then(Value::as_str) {
            Some(reply) => reply.to_string(),
            None => turnscope::server::mcp_text::reply_left_to_text(r, &text_of(result))
                .unwrap_or_default(),
        },
        turn: r.get("turn").and_then(Value::as_u64),
        call_failed,
        error,
        end_reason: r
            .get("end_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        tool_calls,
        rounds: r
            .get("rounds")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok()),
        usage: r
            .get("usage")
            .and_then(|u| serde_json::from_value(u.clone()).ok()),
        first_piece_ms: ms(r, "first_piece_ms")
            .map(|m| (m, Clock::Target))
            .or(client_first),
        total_ms: ms(r, "total_ms")
            .map(|m| (m, Clock::Target))
            .unwrap_or(client_total),
        reported,
        task: None,
    }
}

/// A call's time budget as a person reads it: whole seconds, or milliseconds under one
/// (`--timeout 0.05` read "within 0 s").
fn budget(timeout: Duration) -> String {
    if timeout < Duration::from_secs(1) {
        format!("{} ms", timeout.as_millis())
    } else {
        format!("{:.0} s", timeout.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ContentBlock, MetaObject};

    fn result(text: &str) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(text.to_string())])
    }

    #[test]
    fn the_meta_record_wins_over_structured_content_and_text() {
        let mut r = result("model-facing text");
        r.structured_content = Some(json!({"reply": "old", "tool_calls": []}));
        let mut meta = serde_json::Map::new();
        meta.insert(
            "turnscope/turn".into(),
            json!({"reply": "new", "end_reason": "length", "total_ms": 12.5,
                   "tool_calls": [{"name": "echo", "arguments": "{\"text\":\"hi\"}"}]}),
        );
        r.meta = Some(MetaObject(meta));
        let rec = turn_record(&r, Duration::from_millis(40), None);
        assert_eq!((rec.reply.as_str(), rec.reported), ("new", Reported::Meta));
        assert_eq!(rec.end_reason.as_deref(), Some("length"));
        assert_eq!(rec.total_ms, (12.5, Clock::Target));
        assert_eq!(rec.tool_calls.unwrap()[0].args, json!({"text": "hi"}));
    }

    #[test]
    fn a_text_only_result_reports_no_tool_calls_and_client_times() {
        let rec = turn_record(
            &result("hello there"),
            Duration::from_millis(40),
            Some(Duration::from_millis(10)),
        );
        assert_eq!(rec.reported, Reported::TextOnly);
        assert!(rec.tool_calls.is_none() && rec.end_reason.is_none());
        assert_eq!(rec.reply, "hello there");
        assert_eq!(rec.total_ms.1, Clock::Client);
        assert_eq!(rec.first_piece_ms.map(|f| f.1), Some(Clock::Client));
    }

    #[test]
    fn a_budget_under_a_second_reads_in_milliseconds() {
        assert_eq!(super::budget(Duration::from_millis(50)), "50 ms");
        assert_eq!(super::budget(Duration::from_secs(30)), "30 s");
    }
}

//! The MCP face of a bot: tools `start` and `chat` (rmcp server handler).
//!
//! Arguments are parsed by hand rather than by rmcp's typed `Parameters`, so that a wrong
//! type is answered as a tool error naming the field (as every other mistake is) instead of
//! a protocol error.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::caller::CallerGone;
use super::held::Held;
use crate::observe::{Event, SessionOpener};
use crate::sessions::{ChatError, ChatReply, ProgressSink, Sessions};

/// The rmcp handler serving one bot's sessions.
#[derive(Clone)]
pub struct BotMcp {
    sessions: Sessions,
    tools: Arc<Vec<Tool>>,
    held: Arc<Held>,
}

impl BotMcp {
    /// A handler for `sessions`.
    pub fn new(sessions: Sessions) -> Self {
        let tools = Arc::new(tool_list(sessions.limits().handle_seconds));
        let held = Arc::new(Held::new(sessions.clone()));
        Self {
            sessions,
            tools,
            held,
        }
    }
}

fn object(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas below are object literals"),
    }
}

/// The `start` and `chat` tools, with descriptions that tell a model how to use them.
fn tool_list(handle_seconds: u64) -> Vec<Tool> {
    let start = Tool::new(
        "start",
        format!(
            "Opens one conversation with the bot and returns its handle. Call it once per conversation and pass \
             the handle to every chat call. The handle is a secret: do not print or share it. A conversation with \
             no chat call for {handle_seconds} seconds ends; then call start again."
        ),
        object(json!({"type": "object", "properties": {}})),
    )
    .with_raw_output_schema(object(json!({
        "type": "object",
        "properties": {
            "handle": {"type": "string", "description": "The conversation's handle (36 characters)."},
            "greeting": {"type": ["string", "null"], "description": "What the bot says first, if anything."},
            "replica": {"type": "string", "description": "The replica holding the conversation (behind a load balancer)."}
        },
        "required": ["handle"]
    })));
    let chat = Tool::new(
        "chat",
        format!(
            "Sends one line to the bot and returns its whole reply when the turn ends. The bot keeps the history, \
             so send only the new line. Calls on one handle run in order. If you stop waiting, call chat with an \
             empty line to read the reply of the turn in flight, or send a new line to interrupt it. A conversation \
             with no chat call for {handle_seconds} seconds ends."
        ),
        object(json!({
            "type": "object",
            "properties": {
                "handle": {"type": "string", "description": "The handle start returned."},
                "line": {"type": "string", "default": "", "description": "What to say. Empty: read the turn in flight."}
            },
            "required": ["handle"]
        })),
    )
    .with_raw_output_schema(object(json!({
        "type": "object",
        "properties": {
            "reply": {"type": "string"},
            "turn": {"type": ["integer", "null"]},
            "end_reason": {"type": ["string", "null"], "enum": ["completed", "length", "interrupted", "error", "session_ended", null]},
            "error": {"type": ["string", "null"]},
            "rounds": {"type": "integer"},
            "tool_calls": {"type": "array", "items": {"type": "object"}},
            "first_piece_ms": {"type": ["number", "null"]},
            "total_ms": {"type": ["number", "null"]},
            "unread": {"type": ["object", "null"], "properties": {"reply": {"type": "string"}, "end_reason": {"type": "string"}}}
        },
        "required": ["reply", "rounds", "tool_calls"]
    })));
    vec![start, chat]
}

fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}

/// A string argument: absent → `default`, wrong type → an error naming the field.
fn string_arg<'a>(
    args: &'a JsonObject,
    field: &str,
    default: Option<&'a str>,
    expect: &str,
) -> Result<&'a str, String> {
    match args.get(field) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => {
            default.ok_or_else(|| format!("{field}: missing. Expected {expect}."))
        }
        Some(other) => Err(format!(
            "{field}: expected a string ({expect}); received {}.",
            crate::json::json_kind(other)
        )),
    }
}

/// Sends progress to the calling MCP client.
struct McpProgress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
}

#[async_trait]
impl ProgressSink for McpProgress {
    async fn notify(&mut self, progress: u64, message: String) -> bool {
        let param = ProgressNotificationParam::new(self.token.clone(), progress as f64)
            .with_message(message);
        self.peer.notify_progress(param).await.is_ok()
    }
}

/// One token cancelled when either `a` or `b` is; the watcher stops with the returned guard.
fn either(
    a: CancellationToken,
    b: Option<CancellationToken>,
) -> (CancellationToken, tokio_util::sync::DropGuard) {
    let both = CancellationToken::new();
    let out = both.clone();
    let stop = CancellationToken::new();
    let stop_watch = stop.clone();
    tokio::spawn(async move {
        let b_gone = async {
            match b {
                Some(b) => b.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = a.cancelled() => both.cancel(),
            _ = b_gone => both.cancel(),
            _ = stop_watch.cancelled() => {}
        }
    });
    (out, stop.drop_guard())
}

impl BotMcp {
    /// The `start` and `chat` tools.
    pub(crate) fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Runs tool `name` for the MCP client called `client`, whatever carries the call (HTTP
    /// here, a Xiaozhi socket for `@bot`); publishes `Event::Served`. `cancel` withdraws a
    /// `chat` (the turn keeps running); `progress` gets one report per reply piece.
    pub(crate) async fn call(
        &self,
        name: &str,
        args: &JsonObject,
        client: String,
        cancel: &CancellationToken,
        progress: Option<&mut dyn ProgressSink>,
    ) -> CallToolResult {
        let started = Instant::now();
        let result = match name {
            "start" => self.start(client),
            "chat" => self.chat(args, &client, cancel, progress).await,
            other => tool_error(format!(
                "tool `{other}` does not exist here. This server has two tools: start (opens a conversation) and \
                 chat (handle, line)."
            )),
        };
        let ok = result.is_error != Some(true);
        self.sessions.bus().publish_with(|| Event::Served {
            route: format!("mcp tools/call {name}").into(),
            duration_us: started.elapsed().as_micros() as u64,
            ok,
            // Failures carry what the caller was told; nothing more is built for a success.
            error: (!ok).then(|| {
                result
                    .content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                    .collect::<Vec<_>>()
                    .join(" ")
            }),
            session: if ok {
                None
            } else {
                session_of(&self.sessions, args)
            },
            at_us: if ok {
                0
            } else {
                crate::observe::event::now_us()
            },
        });
        result
    }

    fn start(&self, client: String) -> CallToolResult {
        match self.sessions.open(SessionOpener::Mcp(client.clone())) {
            Ok(session) => {
                let handle = session.handle();
                self.held.hold(&handle, &client);
                let mut result = CallToolResult::success(vec![ContentBlock::text(handle.clone())]);
                result.structured_content = Some(json!({
                    "handle": handle,
                    "greeting": self.sessions.bot().greeting(),
                    "replica": self.sessions.replica().id(),
                }));
                result
            }
            Err(e) => tool_error(e.to_string()),
        }
    }

    async fn chat(
        &self,
        args: &JsonObject,
        client: &str,
        cancel: &CancellationToken,
        progress: Option<&mut dyn ProgressSink>,
    ) -> CallToolResult {
        let handle = match string_arg(
            args,
            "handle",
            None,
            "the 36-character handle start gives; call start first",
        ) {
            Ok(h) => h,
            Err(e) => return tool_error(e),
        };
        let line = match string_arg(
            args,
            "line",
            Some(""),
            "the line to say, or \"\" to read the turn in flight",
        ) {
            Ok(l) => l,
            Err(e) => return tool_error(e),
        };
        match self.sessions.chat(handle, line, progress, cancel).await {
            Ok(reply) => {
                // A client chatting on a handle holds it, whoever opened it.
                self.held.hold(handle, client);
                reply_result(reply)
            }
            Err(ChatError::Cancelled) => tool_error(ChatError::Cancelled.to_string()),
            Err(e) => tool_error(e.to_string()),
        }
    }
}

/// Whether the call runs under a revision where closing its response stream cancels it:
/// one without the `initialize` handshake (2026-07-28 on), which names itself in each
/// request's `_meta`. Sessions opened with `initialize` negotiate 2025-11-25 or older.
fn closing_the_stream_cancels(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|version| !version.has_initialize())
}

/// The session a failed call's `handle` names, when it looks like a live one. The table is
/// scanned only for a well-formed handle, so a flood of calls on bad handles costs nothing.
fn session_of(sessions: &Sessions, args: &JsonObject) -> Option<u64> {
    let handle = args.get("handle").and_then(Value::as_str)?;
    if handle.len() != 36 {
        return None;
    }
    sessions
        .list()
        .into_iter()
        .find(|s| s.handle() == handle)
        .map(|s| s.number)
}

fn reply_result(reply: ChatReply) -> CallToolResult {
    let structured = serde_json::to_value(&reply).unwrap_or(Value::Null);
    let mut result = match &reply.error {
        Some(error) => tool_error(format!(
            "chat: the turn ended in error: {error}. The session is still usable: send another line, \
             or start a new conversation. Partial reply: {:?}",
            reply.reply
        )),
        None => CallToolResult::success(vec![ContentBlock::text(reply.reply.clone())]),
    };
    result.structured_content = Some(structured);
    result
}

impl ServerHandler for BotMcp {
    /// Every revision rmcp knows but 2025-03-26, the one that requires JSON-RPC batches,
    /// which this server does not take (see `server::jsonrpc`).
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(&[
            ProtocolVersion::V_2024_11_05,
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_11_25,
            ProtocolVersion::V_2026_07_28,
        ])
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("turnscope", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "A conversational bot. Call start once for a handle, then chat with that handle and one line at a time.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items((*self.tools).clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let empty = JsonObject::new();
        let args = request.arguments.as_ref().unwrap_or(&empty);
        let client = context
            .peer
            .peer_info()
            .map(|info| info.client_info.name.clone())
            .unwrap_or_else(|| "mcp client".to_string());
        // Which end of the call is a cancel depends on the revision: before 2026-07-28 only
        // `notifications/cancelled` is (rmcp cancels `context.ct`), and a broken stream is
        // resumed with `Last-Event-ID`; from 2026-07-28 closing the response stream is the
        // cancel.
        let gone = closing_the_stream_cancels(&context)
            .then(|| {
                context
                    .extensions
                    .get::<axum::http::request::Parts>()
                    .and_then(|parts| parts.extensions.get::<CallerGone>())
                    .map(|g| g.0.clone())
            })
            .flatten();
        let stream = gone.clone();
        let (cancel, _watch) = either(context.ct.clone(), gone);
        let in_mcp_session = context
            .extensions
            .get::<axum::http::request::Parts>()
            .is_some_and(|parts| parts.headers.contains_key("mcp-session-id"));
        if in_mcp_session {
            self.held.in_mcp_session();
        }
        let mut sink = context.meta.get_progress_token().map(|token| McpProgress {
            peer: context.peer.clone(),
            token,
        });
        let progress = sink.as_mut().map(|s| s as &mut dyn ProgressSink);
        let result = self
            .call(&request.name, args, client.clone(), &cancel, progress)
            .await;
        // Under 2026-07-28 a chat whose response stream closed before the reply is a caller that
        // went away (or cancelled): said once for its session, looked up only then.
        if request.name == "chat"
            && stream.as_ref().is_some_and(|g| g.is_cancelled())
            && let Some(number) = session_of(&self.sessions, args)
        {
            super::held::stream_closed(&self.sessions, number, &client);
        }
        Ok(result.into())
    }
}

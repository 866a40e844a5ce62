//! The MCP face of a bot: tools `start` and `chat` (rmcp server handler). How the tools
//! present themselves is `mcp_tools`; what their results say, `mcp_text`. Each call's client
//! is named by what it sends: the per-request `_meta` `io.modelcontextprotocol/clientInfo`
//! (2026-07-28), else the `initialize` `clientInfo` of its MCP session (2025-11-25 and older).
//!
//! Arguments are parsed by hand rather than by rmcp's typed `Parameters`, so that a wrong
//! type is answered as a tool error naming the field (as every other mistake is) instead of
//! a protocol error.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    CompleteRequestParams, CompleteResult, ContentBlock, CustomRequest, CustomResult,
    GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, TASKS_EXTENSION_ID, Tool,
    UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::caller::{CallerGone, Delivery};
use super::held::Held;
use super::mcp_text;
use crate::observe::{Event, SessionOpener};
use crate::sessions::{
    CallerWatch, ChatError, ChatOutcome, ChatReply, ProgressSink, ReadMark, Sessions, TaskAsk,
};

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
        let tools = Arc::new(super::mcp_tools::tool_list(
            sessions.bot(),
            sessions.limits().handle_seconds,
        ));
        let held = Arc::new(Held::new(sessions.clone()));
        Self {
            sessions,
            tools,
            held,
        }
    }
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

/// The HTTP exchange a `chat` call's answer goes out on: whether that answer reaches its
/// connection whole ([`Delivery`]), and whether its stream is one a client resumes (an MCP
/// session's, before 2026-07-28). A reply read by the call is handed back to its session
/// when the answer does not get out ([`Sessions::reply_not_delivered`]).
#[derive(Clone, Copy)]
pub(crate) struct Carrier<'a> {
    delivery: &'a Delivery,
    resumable: bool,
}

impl Carrier<'_> {
    /// Hands `mark`'s turn back to its session if this answer does not reach its connection.
    fn watch(&self, sessions: &Sessions, mark: Option<ReadMark>) {
        let Some(mark) = mark else {
            return;
        };
        let (sessions, resumable) = (sessions.clone(), self.resumable);
        self.delivery
            .on_lost(move || sessions.reply_not_delivered(mark, resumable));
    }
}

/// One token cancelled when either `a` or `b` is; the watcher stops with the returned guard.
/// Without `b` (every revision before 2026-07-28) that is `a` itself: no watcher task.
fn either(
    a: CancellationToken,
    b: Option<CancellationToken>,
) -> (CancellationToken, Option<tokio_util::sync::DropGuard>) {
    let Some(b) = b else {
        return (a, None);
    };
    let both = CancellationToken::new();
    let out = both.clone();
    let stop = CancellationToken::new();
    let stop_watch = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = a.cancelled() => both.cancel(),
            _ = b.cancelled() => both.cancel(),
            _ = stop_watch.cancelled() => {}
        }
    });
    (out, Some(stop.drop_guard()))
}

impl BotMcp {
    /// The `start` and `chat` tools.
    pub(crate) fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Runs tool `name` for the MCP client called `client`, whatever carries the call (HTTP
    /// here, a Xiaozhi socket for `@bot`); publishes `Event::Served`. `watch.cancel` withdraws
    /// a `chat` (the turn keeps running), `watch.stream_lost` lets it go on for a resumed
    /// stream (see [`CallerWatch`]); `progress` gets one report per reply piece; `carrier`:
    /// the HTTP exchange the answer goes out on, when there is one; `probe`: the client marked
    /// the call as a probe (`mcp_text::PROBE_META`), so a refusal is no error.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn call(
        &self,
        name: &str,
        args: &JsonObject,
        client: String,
        request: Option<&str>,
        watch: CallerWatch<'_>,
        progress: Option<&mut dyn ProgressSink>,
        carrier: Option<Carrier<'_>>,
        probe: bool,
    ) -> CallToolResult {
        let started = Instant::now();
        let mut cancelled = false;
        let result = match name {
            "start" => self.start(client.clone()).await,
            "chat" => {
                let call = ChatCall {
                    client: &client,
                    request,
                    watch,
                    carrier,
                };
                self.chat(args, call, progress, &mut cancelled).await
            }
            other => tool_error(format!(
                "tool `{other}` does not exist here. This server has two tools: start (opens a conversation) and \
                 chat (handle, line)."
            )),
        };
        let call = Served {
            name,
            client: &client,
            started,
            cancelled,
            probe,
        };
        self.served(args, call, Some(&result));
        result
    }

    /// Publishes `Event::Served` for a call (and `Event::CallCancelled` when its client
    /// withdrew it); `result` is `None` for a call answered with a task.
    fn served(&self, args: &JsonObject, call: Served<'_>, result: Option<&CallToolResult>) {
        let Served {
            name,
            client,
            started,
            cancelled,
            probe,
        } = call;
        // A call its client withdrew is the client's choice, not a failure.
        if cancelled && let Some(session) = session_of(&self.sessions, args) {
            self.sessions.bus().publish_with(|| Event::CallCancelled {
                session,
                client: client.to_string(),
                at_us: crate::observe::event::now_us(),
            });
        }
        // A chat answered with a turn that failed was served: the turn's failure is told
        // once, by the turn (its error and end); the call is not a second one.
        let failed_turn = |r: &CallToolResult| {
            r.meta
                .as_ref()
                .and_then(|m| m.get(super::mcp_text::TURN_META))
                .and_then(|record| record.get("end_reason"))
                .is_some_and(|end| end == "error")
        };
        let ok = cancelled || result.is_none_or(|r| r.is_error != Some(true) || failed_turn(r));
        self.sessions.bus().publish_with(|| Event::Served {
            route: format!("mcp tools/call {name}").into(),
            duration_us: started.elapsed().as_micros() as u64,
            ok,
            // Failures carry what the caller was told; nothing more is built for a success.
            error: (!ok).then(|| {
                result
                    .map(|r| {
                        r.content
                            .iter()
                            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default()
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
            probe,
        });
    }

    /// `chat` for a client that declared the tasks extension: a result when the turn ends
    /// within the grace period, else a task (see `sessions::tasks`).
    async fn chat_or_task(
        &self,
        args: &JsonObject,
        call: ChatCall<'_>,
        progress: Option<&mut dyn ProgressSink>,
        ask: &TaskAsk,
    ) -> CallToolResponse {
        let started = Instant::now();
        let (handle, line) = match chat_args(args) {
            Ok(both) => both,
            Err(e) => {
                let result = tool_error(e);
                let call = Served::chat(&ask.client, started, false);
                self.served(args, call, Some(&result));
                return result.into();
            }
        };
        // A client chatting on a handle holds it from its call on, whoever opened it: the
        // opener leaving while this chat runs is no client gone.
        self.held.hold(handle, &ask.client);
        let (answer, cancelled) = match self
            .sessions
            .chat_or_task_marked(handle, line, call.request, progress, call.watch, ask)
            .await
        {
            Ok((ChatOutcome::Reply(reply), mark)) => {
                if let Some(carrier) = call.carrier {
                    carrier.watch(&self.sessions, mark);
                }
                (
                    CallToolResponse::from(self.chat_result(handle, &reply)),
                    false,
                )
            }
            Ok((ChatOutcome::Task(record), _)) => (
                CallToolResponse::Task(super::mcp_tasks::created(&record)),
                false,
            ),
            Err(e) => (tool_error(e.to_string()).into(), e == ChatError::Cancelled),
        };
        let result = match &answer {
            CallToolResponse::Complete(r) => Some(r),
            _ => None,
        };
        self.served(args, Served::chat(&ask.client, started, cancelled), result);
        answer
    }

    async fn start(&self, client: String) -> CallToolResult {
        match self.sessions.open(SessionOpener::Mcp(client.clone())).await {
            Ok(session) => {
                let handle = session.handle();
                self.held.hold(&handle, &client);
                let bot = self.sessions.bot();
                mcp_text::start_result(
                    &super::mcp_tools::who(bot),
                    &handle,
                    session.bot().greeting(),
                    self.sessions.replica().id(),
                )
            }
            Err(e) => tool_error(e.to_string()),
        }
    }

    async fn chat(
        &self,
        args: &JsonObject,
        call: ChatCall<'_>,
        progress: Option<&mut dyn ProgressSink>,
        cancelled: &mut bool,
    ) -> CallToolResult {
        let (handle, line) = match chat_args(args) {
            Ok(both) => both,
            Err(e) => return tool_error(e),
        };
        // A client chatting on a handle holds it from its call on, whoever opened it.
        self.held.hold(handle, call.client);
        match self
            .sessions
            .chat_keyed_marked(handle, line, call.request, progress, call.watch)
            .await
        {
            Ok((reply, mark)) => {
                if let Some(carrier) = call.carrier {
                    carrier.watch(&self.sessions, mark);
                }
                self.chat_result(handle, &reply)
            }
            Err(ChatError::Cancelled) => {
                *cancelled = true;
                tool_error(ChatError::Cancelled.to_string())
            }
            Err(e) => tool_error(e.to_string()),
        }
    }

    /// `chat`'s result for `reply`; one kept unread for a resumed stream carries which turn
    /// it is, for the replay store (`resume::KEPT_FOR_RESUME`, taken out before any client
    /// sees it).
    fn chat_result(&self, handle: &str, reply: &ChatReply) -> CallToolResult {
        let mut result = mcp_text::chat_result(reply);
        if reply.kept_unread
            && let (Some(session), Some(turn)) = (self.sessions.number_of(handle), reply.turn)
            && let Some(meta) = result.meta.as_mut()
        {
            meta.insert(
                super::resume::KEPT_FOR_RESUME.to_string(),
                json!({"session": session, "turn": turn}),
            );
        }
        result
    }
}

/// A call [`BotMcp::served`] tells of: the tool, its client, when it started, whether its
/// client withdrew it, and whether the client marked it as a probe.
struct Served<'a> {
    name: &'a str,
    client: &'a str,
    started: Instant,
    cancelled: bool,
    probe: bool,
}

impl<'a> Served<'a> {
    /// A `chat` that is not a probe (one answered through the tasks extension).
    fn chat(client: &'a str, started: Instant, cancelled: bool) -> Self {
        Self {
            name: "chat",
            client,
            started,
            cancelled,
            probe: false,
        }
    }
}

/// Who makes a `chat` call and how: the client's name, the request's id (`X-Request-ID`),
/// how the call learns its caller left, and the exchange its answer goes out on.
#[derive(Clone, Copy)]
struct ChatCall<'a> {
    client: &'a str,
    request: Option<&'a str>,
    watch: CallerWatch<'a>,
    carrier: Option<Carrier<'a>>,
}

/// `chat`'s arguments: the handle, and the line ("" when absent).
fn chat_args(args: &JsonObject) -> Result<(&str, &str), String> {
    let handle = string_arg(
        args,
        "handle",
        None,
        "the 36-character handle start gives; call start first",
    )?;
    let line = string_arg(
        args,
        "line",
        Some(""),
        "the line to say, or \"\" to read the turn in flight",
    )?;
    // No line, but an argument chat does not take (`text`, `message`…): what the caller meant
    // to say would be dropped and the call read as a poll, so it is refused instead. Extra
    // arguments beside a line are left alone.
    if line.is_empty()
        && let Some(other) = args
            .keys()
            .find(|k| !matches!(k.as_str(), "handle" | "line"))
    {
        return Err(format!(
            "{other}: not an argument of chat, which takes handle and line. Put what to say \
             in line (\"\" reads the turn in flight); nothing was said."
        ));
    }
    Ok((handle, line))
}

/// Longest `X-Request-ID` taken as a request's id; a longer one is ignored.
const REQUEST_ID_BYTES: usize = 128;

/// The request's id from its `X-Request-ID` header (set by the replicas recipe's HAProxy, the
/// same on a request it resends), when it has a usable one: visible ASCII, at most
/// [`REQUEST_ID_BYTES`].
fn request_id(parts: &axum::http::request::Parts) -> Option<&str> {
    let id = parts.headers.get("x-request-id")?.to_str().ok()?;
    (!id.is_empty() && id.len() <= REQUEST_ID_BYTES && id.bytes().all(|b| b.is_ascii_graphic()))
        .then_some(id)
}

/// Whether the call runs under a revision where closing its response stream cancels it:
/// one without the `initialize` handshake (2026-07-28 on), which names itself in each
/// request's `_meta`. Sessions opened with `initialize` negotiate 2025-11-25 or older.
fn closing_the_stream_cancels(context: &RequestContext<RoleServer>) -> bool {
    super::mcp_tasks::without_initialize(context)
}

/// The calling client's name: from the request's own `_meta` (2026-07-28 clients name
/// themselves in every request, and rmcp then fills the peer info with its own default),
/// else from the MCP session's `initialize`.
fn client_name(context: &RequestContext<RoleServer>) -> String {
    if let Some(info) = context.meta.client_info() {
        return info.name;
    }
    context
        .peer
        .peer_info()
        .map(|info| info.client_info.name.clone())
        .unwrap_or_else(|| "mcp client".to_string())
}

impl BotMcp {
    /// `-32601` for `method`, naming the methods this server offers (rmcp's names only the
    /// method).
    fn not_offered(&self, method: &str) -> ErrorData {
        super::mcp_errors::method_not_found(method, self.sessions.task_settings().enabled)
    }
}

/// The session a call's `handle` names, when it is an open one or one that ended here a while
/// ago (a refused `chat` on it names its session in the Log): one keyed-hash lookup, a
/// constant-time comparison and a look through the ended ones' keyed hashes
/// (`Sessions::number_known`), so a flood of calls on bad handles costs little and their
/// timing says nothing of a handle.
fn session_of(sessions: &Sessions, args: &JsonObject) -> Option<u64> {
    let handle = args.get("handle").and_then(Value::as_str)?;
    if handle.len() != 36 {
        return None;
    }
    sessions.number_known(handle)
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
        let capabilities = if self.sessions.task_settings().enabled {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        let mut info = ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("turnscope", env!("CARGO_PKG_VERSION")))
            .with_instructions(super::mcp_tools::instructions(
                self.sessions.bot(),
                self.sessions.limits().handle_seconds,
            ));
        // Which replica this MCP session lives on: an attached console behind a balancer
        // tells from it whether the event stream it reads comes from the same one.
        let replica = self.sessions.replica();
        info.meta = Some(mcp_text::replica_meta(replica.id(), &replica.tag()));
        info
    }

    /// rmcp's `initialize` answer, without the tasks extension among its capabilities: only
    /// requests of a revision without `initialize` (2026-07-28) may become tasks
    /// (`mcp_tasks::task_ask`), so an MCP session is never offered what it cannot use. The
    /// extension stays in `server/discover` (from [`Self::get_info`]), and rmcp's check of
    /// `tasks/*` reads that, not this answer.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if let Some(extensions) = result.capabilities.extensions.as_mut() {
            extensions.remove(TASKS_EXTENSION_ID);
            if extensions.is_empty() {
                result.capabilities.extensions = None;
            }
        }
        Ok(result)
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
        let client = client_name(&context);
        // Which end of the call is a cancel depends on the revision: before 2026-07-28 only
        // `notifications/cancelled` is (rmcp cancels `context.ct`), and a broken stream is
        // resumed with `Last-Event-ID` (the call lets the handle go and keeps its reply
        // unread until read); from 2026-07-28 closing the response stream is the cancel.
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let caller_gone = parts
            .and_then(|parts| parts.extensions.get::<CallerGone>())
            .map(|g| g.0.clone());
        let in_mcp_session =
            parts.is_some_and(|parts| parts.headers.contains_key("mcp-session-id"));
        let stream_cancels = closing_the_stream_cancels(&context);
        let (gone, stream_lost) = if stream_cancels {
            (caller_gone, None)
        } else {
            // Only a session's streams are kept for a resume.
            (None, caller_gone.filter(|_| in_mcp_session))
        };
        let (cancel, _watch) = either(context.ct.clone(), gone);
        let watch = CallerWatch {
            cancel: &cancel,
            stream_lost: stream_lost.as_ref(),
        };
        let request_id = parts.and_then(request_id);
        if in_mcp_session {
            self.held.in_mcp_session();
        }
        let carrier = parts
            .and_then(|parts| parts.extensions.get::<Delivery>())
            .map(|delivery| Carrier {
                delivery,
                resumable: in_mcp_session && !stream_cancels,
            });
        let mut sink = context.meta.get_progress_token().map(|token| McpProgress {
            peer: context.peer.clone(),
            token,
        });
        let progress = sink.as_mut().map(|s| s as &mut dyn ProgressSink);
        if request.name == "chat"
            && let Some(ask) =
                super::mcp_tasks::task_ask(&context, &self.sessions.task_settings(), &client)
        {
            let call = ChatCall {
                client: &client,
                request: request_id,
                watch,
                carrier,
            };
            return Ok(self.chat_or_task(args, call, progress, &ask).await);
        }
        // Under 2026-07-28 a chat whose response stream closed before the reply is cancelled
        // (`Event::CallCancelled`, from `call`), as `notifications/cancelled` is before it.
        let probe = context
            .meta
            .get(super::mcp_text::PROBE_META)
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        let result = self
            .call(
                &request.name,
                args,
                client,
                request_id,
                watch,
                progress,
                carrier,
                probe,
            )
            .await;
        Ok(result.into())
    }

    /// A method rmcp does not know: `-32601` naming the methods this server offers; or a
    /// `tasks/*` method of the extension whose params rmcp could not read (which is how it
    /// arrives here): `-32602` naming the field, after the capability check rmcp makes of a
    /// readable one (`-32021` for a client that did not declare the extension).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let tasks = self.sessions.task_settings().enabled;
        let params = request.params.as_ref();
        match super::mcp_errors::task_params_invalid(&request.method, params) {
            Some(invalid) if tasks => {
                let declared = context
                    .client_capabilities()
                    .is_some_and(|caps| caps.supports_tasks());
                Err(if declared {
                    invalid
                } else {
                    super::mcp_errors::tasks_undeclared(
                        &request.method,
                        super::mcp_tasks::without_initialize(&context),
                        ErrorData::missing_required_client_capability(
                            ClientCapabilities::builder().enable_tasks().build(),
                        ),
                    )
                })
            }
            Some(_) => Err(super::mcp_errors::tasks_off(&request.method)),
            None => Err(self.not_offered(&request.method)),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Err(self.not_offered("prompts/list"))
    }

    async fn get_prompt(
        &self,
        _request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Err(self.not_offered("prompts/get"))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Err(self.not_offered("resources/list"))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Err(self.not_offered("resources/templates/list"))
    }

    async fn read_resource(
        &self,
        _request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Err(self.not_offered("resources/read"))
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Err(self.not_offered("completion/complete"))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let record = self
            .sessions
            .poll_task(&request.task_id)
            .await
            .map_err(super::mcp_tasks::unknown)?;
        Ok(super::mcp_tasks::detailed(&record))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.sessions
            .cancel_task(&request.task_id)
            .await
            .map_err(super::mcp_tasks::unknown)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // This server never asks for input mid-task: responses are acknowledged and ignored,
        // as the extension says of keys it did not ask for.
        self.sessions
            .known_task(&request.task_id)
            .await
            .map_err(super::mcp_tasks::unknown)
    }
}

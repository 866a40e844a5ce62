//! turnscope's own fixture MCP server, for tests and the interop suite.
//!
//! One handler, [`FixtureServer`], with small deterministic tools that exercise the parts of
//! MCP the console depends on: plain results, tool-level errors (`isError`), progress
//! notifications, large and non-text content, and a tool list that changes at run time.
//!
//! | tool | arguments | result |
//! | --- | --- | --- |
//! | `echo` | `text` | the text |
//! | `add` | `a`, `b` (numbers) | the sum, as text |
//! | `fail` | `message` | a result with `isError: true` carrying the message |
//! | `slow` | `ms` | `slept N ms` after N ms; a progress notification every 100 ms (*) |
//! | `big` | `bytes` | a text of exactly that many bytes (`x` repeated) |
//! | `image` | none | a 1×1 PNG image block plus a text block |
//! | `add_tool` | `name` | adds an echo-like tool, sends `notifications/tools/list_changed` |
//!
//! (*) only when the request carries a progress token (rmcp clients always send one).
//!
//! Tools added with `add_tool` belong to one MCP session (one connection, or one
//! `Mcp-Session-Id` on streamable HTTP) and vanish with it.
//!
//! The same handler is served three ways: [`serve_stdio`], [`serve_http`] (rmcp streamable
//! HTTP under `/mcp`) and [`serve_sse`] (the legacy 2024-11-05 HTTP+SSE transport: `GET /sse`
//! plus `POST /messages?session=ID`, implemented here because rmcp 3.x no longer ships it).

use std::{
    collections::HashMap,
    convert::Infallible,
    sync::{Arc, Mutex, PoisonError, RwLock},
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::{Query, State},
    http::StatusCode,
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
    routing::{get, post},
};
use futures::{SinkExt, Stream, StreamExt, channel::mpsc, future::BoxFuture};
use rmcp::{
    ErrorData, Peer, RoleServer, ServerHandler, ServiceExt,
    handler::server::{
        router::tool::{ToolRoute, ToolRouter},
        tool::ToolCallContext,
        wrapper::Parameters,
    },
    model::{
        CallToolResponse, CallToolResult, ClientJsonRpcMessage, ContentBlock, Implementation,
        ProgressNotificationParam, ServerCapabilities, ServerConfig, ServerJsonRpcMessage, Tool,
    },
    service::RequestContext,
    tool, tool_handler, tool_router,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The server name reported in `initialize`.
pub const SERVER_NAME: &str = "turnscope-fixture";

/// Largest text `big` will produce (64 MiB), so a typo cannot exhaust memory.
pub const MAX_BIG_BYTES: u64 = 64 * 1024 * 1024;

/// Longest sleep `slow` accepts (10 minutes).
pub const MAX_SLOW_MS: u64 = 600_000;

/// A 1×1 PNG (one teal pixel), base64-encoded, returned by the `image` tool.
pub const TINY_PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mPQ6w4HAAH7ARFK28dFAAAAAElFTkSuQmCC";

#[derive(Debug, Deserialize, JsonSchema)]
struct EchoArgs {
    /// Text to send back unchanged.
    text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct AddArgs {
    /// First addend.
    a: f64,
    /// Second addend.
    b: f64,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct FailArgs {
    /// Error message to return in the failed result.
    message: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct SlowArgs {
    /// How long to sleep, in milliseconds.
    ms: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct BigArgs {
    /// Exact size of the returned text, in bytes.
    bytes: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct AddToolArgs {
    /// Name of the tool to add: 1-64 characters from `A-Z a-z 0-9 _ -`.
    name: String,
}

/// The fixture MCP handler. Clones share the tools added at run time, so create one per
/// session with [`FixtureServer::new`].
#[derive(Clone)]
pub struct FixtureServer {
    tool_router: ToolRouter<Self>,
    added: Arc<RwLock<ToolRouter<Self>>>,
}

impl Default for FixtureServer {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for FixtureServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let added: Vec<String> = self
            .added
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .list_all()
            .into_iter()
            .map(|tool| tool.name.into_owned())
            .collect();
        f.debug_struct("FixtureServer")
            .field("added_tools", &added)
            .finish_non_exhaustive()
    }
}

#[tool_router]
impl FixtureServer {
    /// A fresh handler with the built-in tools and no added ones.
    #[must_use]
    pub fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
            added: Arc::new(RwLock::new(ToolRouter::new())),
        }
    }

    /// Built-in tools plus the ones added with `add_tool` in this session.
    fn router(&self) -> ToolRouter<Self> {
        let added = self
            .added
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.tool_router.clone() + added
    }

    #[tool(description = "Return `text` unchanged.")]
    async fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(args.text)])
    }

    #[tool(description = "Add two numbers and return the sum as text.")]
    async fn add(&self, Parameters(args): Parameters<AddArgs>) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text((args.a + args.b).to_string())])
    }

    #[tool(description = "Always fail: return a tool result with isError true carrying `message`.")]
    async fn fail(&self, Parameters(args): Parameters<FailArgs>) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(args.message)])
    }

    #[tool(
        description = "Sleep `ms` milliseconds, then answer \"slept N ms\". Sends one progress \
                       notification per 100 ms when the request carries a progress token."
    )]
    async fn slow(
        &self,
        Parameters(args): Parameters<SlowArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let ms = args.ms;
        if ms > MAX_SLOW_MS {
            return Err(ErrorData::invalid_params(
                format!("ms must be at most {MAX_SLOW_MS}"),
                None,
            ));
        }
        let token = context.meta.get_progress_token();
        let peer = context.peer.clone();
        let work = async {
            for tick in 1..=ms / 100 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if let Some(token) = &token {
                    let done = tick * 100;
                    let progress = ProgressNotificationParam::new(token.clone(), done as f64)
                        .with_total(ms as f64)
                        .with_message(format!("{done} of {ms} ms"));
                    if let Err(error) = peer.notify_progress(progress).await {
                        tracing::debug!(%error, "fixture: progress notification not sent");
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(ms % 100)).await;
        };
        tokio::select! {
            () = work => {
                let text = format!("slept {ms} ms");
                Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
            }
            () = context.ct.cancelled() => {
                Err(ErrorData::internal_error("cancelled by the client", None))
            }
        }
    }

    #[tool(description = "Return a text of exactly `bytes` bytes (the letter x repeated).")]
    async fn big(
        &self,
        Parameters(args): Parameters<BigArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if args.bytes > MAX_BIG_BYTES {
            return Err(ErrorData::invalid_params(
                format!("bytes must be at most {MAX_BIG_BYTES}"),
                None,
            ));
        }
        let size = usize::try_from(args.bytes)
            .map_err(|_| ErrorData::invalid_params("bytes is too large", None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(
            "x".repeat(size),
        )]))
    }

    #[tool(description = "Return a tiny PNG image block followed by a text block.")]
    async fn image(&self) -> CallToolResult {
        CallToolResult::success(vec![
            ContentBlock::image(TINY_PNG_BASE64, "image/png"),
            ContentBlock::text("a 1x1 PNG image"),
        ])
    }

    #[tool(
        description = "Register an extra tool called `name` that echoes its `text` argument, \
                       then send notifications/tools/list_changed."
    )]
    async fn add_tool(
        &self,
        Parameters(args): Parameters<AddToolArgs>,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        let name = args.name;
        if !is_valid_tool_name(&name) {
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "invalid tool name {name:?}: use 1-64 characters from A-Z a-z 0-9 _ -"
            ))]);
        }
        let Some(echo) = self.tool_router.get("echo").cloned() else {
            return CallToolResult::error(vec![ContentBlock::text("echo tool missing")]);
        };
        {
            let mut added = self.added.write().unwrap_or_else(PoisonError::into_inner);
            if self.tool_router.has_route(&name) || added.has_route(&name) {
                return CallToolResult::error(vec![ContentBlock::text(format!(
                    "a tool named {name:?} already exists"
                ))]);
            }
            let tool = Tool::new(
                name.clone(),
                "Echo `text` back (added at run time by add_tool).",
                echo.input_schema,
            );
            added.add_route(ToolRoute::new_dyn(tool, added_echo));
        }
        if let Err(error) = peer.notify_tool_list_changed().await {
            tracing::warn!(%error, "fixture: tools/list_changed not sent");
        }
        CallToolResult::success(vec![ContentBlock::text(format!("added tool {name}"))])
    }
}

#[tool_handler(router = self.router())]
impl ServerHandler for FixtureServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
        .with_instructions("turnscope fixture server: deterministic tools for tests.")
    }
}

/// The handler behind every tool registered with `add_tool`: echo the `text` argument.
fn added_echo(
    context: ToolCallContext<'_, FixtureServer>,
) -> BoxFuture<'_, Result<CallToolResponse, ErrorData>> {
    let text = context
        .arguments
        .as_ref()
        .and_then(|arguments| arguments.get("text"))
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned);
    Box::pin(async move {
        match text {
            Some(text) => Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into()),
            None => Err(ErrorData::invalid_params(
                "missing string argument `text`",
                None,
            )),
        }
    })
}

fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Serves one [`FixtureServer`] session on stdin/stdout until the client closes stdin.
///
/// Nothing else may write to stdout in this process; log to stderr.
///
/// # Errors
///
/// The MCP handshake failed or the session task panicked.
pub async fn serve_stdio() -> anyhow::Result<()> {
    let running = FixtureServer::new().serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

/// Serves the fixture over rmcp streamable HTTP at `/mcp` on `listener` until `shutdown`
/// is cancelled.
///
/// Runs in rmcp's default stateful mode (each `Mcp-Session-Id` gets its own
/// [`FixtureServer`], so tools added with `add_tool` stay for the session). rmcp's Host
/// allowlist is turned off: the fixture holds nothing worth protecting and may be reached
/// through container host names in the interop suite.
///
/// # Errors
///
/// Accepting connections failed.
pub async fn serve_http(listener: TcpListener, shutdown: CancellationToken) -> std::io::Result<()> {
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_sse_keep_alive(Some(Duration::from_secs(5)))
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        || Ok(FixtureServer::new()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = Router::new().nest_service("/mcp", service);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

/// Serves the fixture over the legacy (2024-11-05) HTTP+SSE transport on `listener` until
/// `shutdown` is cancelled.
///
/// `GET /sse` opens a session: the first event is `endpoint` with data
/// `/messages?session=ID`; every server message follows as a `message` event.
/// `POST /messages?session=ID` takes one JSON-RPC message and answers 202 (400 for a body
/// that is not JSON-RPC, 404 for an unknown session). Each session runs its own
/// [`FixtureServer`] and ends when the SSE connection closes.
///
/// # Errors
///
/// Accepting connections failed.
pub async fn serve_sse(listener: TcpListener, shutdown: CancellationToken) -> std::io::Result<()> {
    let state = SseState {
        sessions: Arc::default(),
        shutdown: shutdown.clone(),
    };
    let app = Router::new()
        .route("/sse", get(sse_open))
        .route("/messages", post(sse_post))
        .with_state(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

type SessionMap = Arc<Mutex<HashMap<String, mpsc::Sender<ClientJsonRpcMessage>>>>;

#[derive(Clone)]
struct SseState {
    sessions: SessionMap,
    shutdown: CancellationToken,
}

/// Lives as long as a session's SSE response; dropping it ends the session.
struct SessionGuard {
    id: String,
    sessions: SessionMap,
    ct: CancellationToken,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        self.ct.cancel();
        tracing::debug!(session = %self.id, "fixture: SSE session closed");
    }
}

async fn sse_open(
    State(state): State<SseState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (to_server, from_client) = mpsc::channel::<ClientJsonRpcMessage>(64);
    let (to_client, from_server) = mpsc::channel::<ServerJsonRpcMessage>(64);
    state
        .sessions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id.clone(), to_server);
    let ct = state.shutdown.child_token();
    tokio::spawn(run_sse_session(
        id.clone(),
        to_client,
        from_client,
        ct.clone(),
    ));

    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("/messages?session={id}"));
    let guard = SessionGuard {
        id,
        sessions: state.sessions.clone(),
        ct,
    };
    let messages = from_server.filter_map(move |message| {
        let _session = &guard;
        let event = match serde_json::to_string(&message) {
            Ok(json) => Some(Ok(Event::default().event("message").data(json))),
            Err(error) => {
                tracing::warn!(%error, "fixture: could not encode a server message");
                None
            }
        };
        futures::future::ready(event)
    });
    let stream = futures::stream::once(futures::future::ready(Ok(endpoint)))
        .chain(messages)
        .take_until(state.shutdown.cancelled_owned());
    Sse::new(stream).keep_alive(KeepAlive::default())
}

async fn run_sse_session(
    id: String,
    to_client: mpsc::Sender<ServerJsonRpcMessage>,
    from_client: mpsc::Receiver<ClientJsonRpcMessage>,
    ct: CancellationToken,
) {
    match FixtureServer::new()
        .serve_with_ct((to_client, from_client), ct)
        .await
    {
        Ok(running) => {
            if let Err(error) = running.waiting().await {
                tracing::warn!(session = %id, %error, "fixture: SSE session task failed");
            }
        }
        Err(error) => {
            tracing::debug!(session = %id, %error, "fixture: SSE session not initialized")
        }
    }
}

#[derive(Debug, Deserialize)]
struct SessionQuery {
    session: String,
}

async fn sse_post(
    State(state): State<SseState>,
    Query(query): Query<SessionQuery>,
    body: Bytes,
) -> Response {
    let sender = state
        .sessions
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&query.session)
        .cloned();
    let Some(mut sender) = sender else {
        return (
            StatusCode::NOT_FOUND,
            "unknown or closed session; open GET /sse and use the endpoint it announces",
        )
            .into_response();
    };
    let message: ClientJsonRpcMessage = match serde_json::from_slice(&body) {
        Ok(message) => message,
        Err(error) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("body is not a JSON-RPC message: {error}"),
            )
                .into_response();
        }
    };
    if sender.send(message).await.is_err() {
        return (StatusCode::GONE, "session closed").into_response();
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}

//! Small servers for the tool-source tests: an MCP server with a chosen list of tool names
//! (and a `hang` tool that reports its cancellation), a TCP listener that accepts and never
//! answers, and an HTTP endpoint that redirects elsewhere.

use std::{
    future::Future,
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{Router, http::StatusCode, response::IntoResponse, routing::any};
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::mpsc};
use tokio_util::sync::CancellationToken;

use super::fixture::WAIT;

/// An MCP server whose tools are the given names; each answers `<server>:<tool>`, except
/// `hang`, which waits until cancelled and reports the cancellation on `cancelled`, and
/// `broken`, which answers with a JSON-RPC error, `whoami`, which answers with the
/// request's `Authorization` header, and `chat`, which refuses every handle as a
/// pipecat-mcp-transport bot that restarted does (an error result: `handle: no live session`).
#[derive(Clone)]
pub struct NamedServer {
    label: Arc<str>,
    tools: Arc<Vec<Tool>>,
    cancelled: mpsc::UnboundedSender<String>,
}

impl ServerHandler for NamedServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(self.label.to_string(), "0.0.1"))
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
        if request.name == "hang" {
            context.ct.cancelled().await;
            let _ = self.cancelled.send(format!("{}:hang", self.label));
            return Err(ErrorData::internal_error("cancelled", None));
        }
        if request.name == "whoami" {
            let auth = context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.headers.get("authorization"))
                .and_then(|v| v.to_str().ok())
                .unwrap_or("no authorization header")
                .to_string();
            return Ok(CallToolResult::success(vec![ContentBlock::text(auth)]).into());
        }
        if request.name == "chat" {
            return Ok(CallToolResult::error(vec![ContentBlock::text(
                "Error executing tool chat: handle: no live session",
            )])
            .into());
        }
        if request.name == "broken" {
            return Err(ErrorData::invalid_params("broken on purpose", None));
        }
        let text = format!("{}:{}", self.label, request.name);
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// A running [`NamedServer`] on streamable HTTP.
pub struct Named {
    pub url: String,
    pub cancelled: mpsc::UnboundedReceiver<String>,
    stop: CancellationToken,
}

impl Drop for Named {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A tool with an object `schema` (panics on anything else: a test's own mistake).
pub fn tool(name: &str, description: &str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else {
        panic!("a tool schema is a JSON object, got {schema}")
    };
    Tool::new(name.to_string(), description.to_string(), Arc::new(schema))
}

/// Serves `handler` over streamable HTTP on 127.0.0.1 at `/mcp` (a fresh clone per
/// session, no Host check); returns its URL and the token that stops it.
pub async fn serve_mcp<H>(handler: H) -> (String, CancellationToken)
where
    H: ServerHandler + Clone + Send + Sync + 'static,
{
    let stop = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop.child_token())
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = Router::new().nest_service("/mcp", service);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let token = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(token.cancelled_owned())
            .await;
    });
    (format!("http://{addr}/mcp"), stop)
}

/// Serves a [`NamedServer`] with `tools` on 127.0.0.1 at `/mcp`.
pub async fn named(label: &str, tools: &[&str]) -> Named {
    let tools: Vec<Tool> = tools
        .iter()
        .map(|name| {
            tool(
                name,
                &format!("{name} of {label}"),
                json!({"type": "object", "properties": {}}),
            )
        })
        .collect();
    // Unbounded: one message per cancelled call the test makes, a handful.
    let (tx, rx) = mpsc::unbounded_channel();
    let handler = NamedServer {
        label: label.into(),
        tools: Arc::new(tools),
        cancelled: tx,
    };
    let (url, stop) = serve_mcp(handler).await;
    Named {
        url,
        cancelled: rx,
        stop,
    }
}

/// A TCP listener that accepts connections and never says a word.
pub struct Silent {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn silent() -> Silent {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    Silent { addr, task }
}

/// An HTTP server answering every request with `307` to `target`; returns its base URL.
pub async fn redirector(target: String) -> (String, CancellationToken) {
    let app = Router::new().fallback(any(move || {
        let target = target.clone();
        async move { (StatusCode::TEMPORARY_REDIRECT, [("location", target)]).into_response() }
    }));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(token.cancelled_owned())
            .await;
    });
    (format!("http://{addr}"), stop)
}

/// Polls `check` every 20 ms until it is true; panics after [`WAIT`] with `what`.
pub async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < WAIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

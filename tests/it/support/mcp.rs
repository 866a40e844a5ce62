//! An rmcp client for tests of turnscope's MCP server, collecting progress notifications.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ProgressNotificationParam, Request,
    ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestHandle, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use turnscope::server::mcp_text::{START_META, TURN_META, text_of};

/// Collects every progress notification (token, progress, message).
#[derive(Clone, Default)]
pub struct Progress {
    pub seen: Arc<Mutex<Vec<(String, f64, String)>>>,
}

impl ClientHandler for Progress {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.seen.lock().unwrap().push((
            format!("{:?}", params.progress_token),
            params.progress,
            params.message.unwrap_or_default(),
        ));
    }
}

/// A connected client.
pub struct Client {
    pub service: RunningService<RoleClient, Progress>,
    pub progress: Progress,
}

/// What a tool call gave back: the text the model reads, and the record programs read
/// (`_meta["turnscope/turn"]` of `chat`, `_meta["turnscope/start"]` of `start`).
#[derive(Debug)]
pub struct Outcome {
    pub text: String,
    pub is_error: bool,
    pub record: Value,
    /// Whether the result carried `structuredContent` (it never should).
    pub structured_content: bool,
}

/// The turnscope record in a result's `_meta`, if any.
pub fn record_of(r: &CallToolResult) -> Value {
    r.meta
        .as_ref()
        .and_then(|m| m.get(TURN_META).or_else(|| m.get(START_META)))
        .cloned()
        .unwrap_or(Value::Null)
}

impl From<CallToolResult> for Outcome {
    fn from(r: CallToolResult) -> Self {
        Outcome {
            text: text_of(&r),
            is_error: r.is_error == Some(true),
            record: record_of(&r),
            structured_content: r.structured_content.is_some(),
        }
    }
}

pub fn params(name: &str, args: Value) -> CallToolRequestParams {
    let mut p = CallToolRequestParams::new(name.to_string());
    if let Value::Object(map) = args {
        p = p.with_arguments(map);
    }
    p
}

impl Client {
    pub async fn connect(url: &str) -> Client {
        let progress = Progress::default();
        let service = progress
            .clone()
            .serve(StreamableHttpClientTransport::from_uri(url.to_string()))
            .await
            .expect("MCP client connects");
        Client { service, progress }
    }

    pub async fn call(&self, name: &str, args: Value) -> Outcome {
        self.service
            .call_tool(params(name, args))
            .await
            .expect("tools/call answers")
            .into()
    }

    pub async fn start(&self) -> String {
        let o = self.call("start", json!({})).await;
        assert!(!o.is_error, "start failed: {}", o.text);
        handle_of(&o)
    }

    pub async fn chat(&self, handle: &str, line: &str) -> Outcome {
        self.call("chat", json!({"handle": handle, "line": line}))
            .await
    }

    /// Sends a chat call that can be cancelled with `notifications/cancelled`.
    pub async fn chat_cancellable(&self, handle: &str, line: &str) -> RequestHandle<RoleClient> {
        let request = ClientRequest::CallToolRequest(Request::new(params(
            "chat",
            json!({"handle": handle, "line": line}),
        )));
        self.service
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .expect("request sent")
    }

    pub fn progress_messages(&self) -> Vec<(f64, String)> {
        self.progress
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|(_, p, m)| (*p, m.clone()))
            .collect()
    }
}

/// The handle of a `start` outcome (its record's `handle`).
pub fn handle_of(start: &Outcome) -> String {
    start.record["handle"]
        .as_str()
        .unwrap_or_else(|| panic!("start gave no handle: {start:?}"))
        .to_string()
}

/// The tool result inside a response to a cancellable request.
pub fn outcome_of(result: ServerResult) -> Outcome {
    match result {
        ServerResult::CallToolResult(r) => r.into(),
        other => panic!("expected a CallToolResult, got {other:?}"),
    }
}

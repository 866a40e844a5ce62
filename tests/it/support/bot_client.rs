//! A real rmcp client for a turnscope bot's `start`/`chat` tools.

use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult},
    service::RunningService,
    transport::StreamableHttpClientTransport,
};
use serde_json::{Value, json};

use super::fixture::WAIT;

pub type BotClient = RunningService<RoleClient, ()>;

/// Connects to a bot's MCP endpoint.
pub async fn connect(url: &str) -> BotClient {
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    tokio::time::timeout(WAIT, ().serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed")
}

async fn call(client: &BotClient, name: &'static str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    tokio::time::timeout(
        WAIT,
        client.call_tool(CallToolRequestParams::new(name).with_arguments(args)),
    )
    .await
    .unwrap_or_else(|_| panic!("{name} timed out"))
    .unwrap_or_else(|e| panic!("{name} failed: {e}"))
}

/// The text of a result's first block.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|b| b.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// Calls `start` and returns the handle.
pub async fn start(client: &BotClient) -> String {
    let result = call(client, "start", json!({})).await;
    assert_ne!(result.is_error, Some(true), "start failed: {result:?}");
    crate::support::mcp::record_of(&result)["handle"]
        .as_str()
        .expect("start's _meta carries the handle")
        .to_string()
}

/// Calls `chat`; returns the whole result (text reply, the turn record in `_meta`).
pub async fn chat(client: &BotClient, handle: &str, line: &str) -> CallToolResult {
    call(client, "chat", json!({"handle": handle, "line": line})).await
}

//! Every MCP client is named by what it sends, under every revision: the `initialize`
//! `clientInfo` of its MCP session (2025-11-25), the per-request `_meta`
//! `io.modelcontextprotocol/clientInfo` (2026-07-28, where rmcp's own peer info would say
//! `rmcp`). The name is the session's opener in events and the console.

use crate::support::app::app;
use serde_json::{Value, json};
use turnscope::observe::SessionOpener;

const ACCEPT: &str = "application/json, text/event-stream";

/// The JSON-RPC answer in a response (plain JSON, or the SSE event that carries it).
async fn answer_of(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    if let Ok(v) = serde_json::from_str::<Value>(&text) {
        return v;
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("result").is_some() || v.get("error").is_some())
        .unwrap_or_else(|| panic!("no answer in {text}"))
}

fn openers(app: &turnscope::app::App) -> Vec<SessionOpener> {
    let mut sessions = app.sessions.list();
    sessions.sort_by_key(|s| s.number);
    sessions.iter().map(|s| s.opener.clone()).collect()
}

#[tokio::test]
async fn a_2025_11_25_client_is_named_by_its_initialize() {
    let app = app(|_| {}).await;
    let http = reqwest::Client::new();
    let url = app.server.mcp_url();
    let init = http
        .post(&url)
        .header("accept", ACCEPT)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "legacy-client", "version": "1.0"}}}),
        )
        .send()
        .await
        .unwrap();
    let sid = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    drop(init);
    let post = |body: Value| {
        http.post(&url)
            .header("accept", ACCEPT)
            .header("mcp-session-id", &sid)
            .json(&body)
            .send()
    };
    let ack = post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await
        .unwrap();
    assert_eq!(ack.status(), 202);
    let started = answer_of(
        post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "start", "arguments": {}}}))
        .await
        .unwrap(),
    )
    .await;
    assert!(started["result"]["_meta"]["turnscope/start"]["handle"].is_string());
    assert_eq!(openers(&app), [SessionOpener::Mcp("legacy-client".into())]);
    app.shutdown().await;
}

#[tokio::test]
async fn a_2026_07_28_client_is_named_by_its_request_meta_not_rmcp() {
    let app = app(|_| {}).await;
    let http = reqwest::Client::new();
    let url = app.server.mcp_url();
    // What Claude Code sends: no initialize, no session, its name in each request's `_meta`.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo":
            {"name": "claude-code", "title": "Claude Code", "version": "2.1.332"}});
    let call = |id: u64, name: &str, arguments: Value| {
        http.post(&url)
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": name, "arguments": arguments, "_meta": meta}}))
            .send()
    };
    let started = answer_of(call(1, "start", json!({})).await.unwrap()).await;
    let handle = started["result"]["_meta"]["turnscope/start"]["handle"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_string();
    assert_eq!(openers(&app), [SessionOpener::Mcp("claude-code".into())]);
    let said = answer_of(
        call(2, "chat", json!({"handle": handle, "line": "hello"}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(said["result"]["content"][0]["text"], "You said: hello");
    assert!(said["result"].get("structuredContent").is_none(), "{said}");
    assert_eq!(
        said["result"]["_meta"]["turnscope/turn"]["end_reason"],
        "completed"
    );
    app.shutdown().await;
}

//! turnscope as an MCP client: `initialize` names 2025-11-25, the newest revision
//! with that handshake, not rmcp's default 2026-07-28 (which has none). Driven through
//! `turnscope dev mcp-client`, which connects with the tool sources' client code, against a
//! recording server on a real socket.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

async fn recording_server() -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let app = axum::Router::new().route(
        "/mcp",
        post(move |Json(message): Json<Value>| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(message.clone());
                let id = message["id"].clone();
                let result = match message["method"].as_str() {
                    Some("initialize") => json!({
                        "protocolVersion": message["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "recorder", "version": "1"}}),
                    Some("tools/list") => json!({"tools": [{"name": "echo",
                        "inputSchema": {"type": "object", "properties": {}}}]}),
                    Some("tools/call") => json!({"content": [{"type": "text", "text": "echoed"}]}),
                    _ => return StatusCode::ACCEPTED.into_response(),
                };
                let response: Response =
                    Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response();
                response
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

#[tokio::test]
async fn the_client_initializes_with_2025_11_25_and_calls_a_tool() {
    let (url, seen) = recording_server().await;
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .args(["dev", "mcp-client", "--call", "echo", &url])
            .output(),
    )
    .await
    .expect("dev mcp-client ends")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("tools: echo"), "{stdout}");
    assert!(stdout.contains("echo: echoed"), "{stdout}");
    let seen = seen.lock().unwrap();
    let init = seen
        .iter()
        .find(|m| m["method"] == "initialize")
        .expect("an initialize request");
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25", "{init}");
    // Named apart from the bot's tool sources (`turnscope`), so a turnscope server it reaches
    // does not list its sessions as the bot's.
    assert_eq!(
        init["params"]["clientInfo"]["name"],
        "turnscope-dev-mcp-client"
    );
    assert!(
        seen.iter()
            .any(|m| m["method"] == "notifications/initialized"),
        "{seen:?}"
    );
}

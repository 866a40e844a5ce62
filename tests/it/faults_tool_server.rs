//! Faults of a tool server, over real sockets and processes: an HTTP server killed mid-call
//! and restarted on its port, a server that answers a call with garbage, and one that
//! returns 5 MiB. Each call ends with an error saying what happened, none hangs, and the
//! source serves again afterwards.

use std::sync::Arc;
use std::time::Duration;

use crate::support::fixture_child::fixture_http_child;
use crate::support::servers::wait_until;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use turnscope::config::McpServerConfig;
use turnscope::observe::Bus;
use turnscope::tools::mcp_source::SourceStatus;
use turnscope::tools::registry::ToolRegistry;
use turnscope::tools::{Tools, Unanswered};

/// A hang guard only.
const WAIT: Duration = Duration::from_secs(20);

async fn registry(servers: &[McpServerConfig]) -> Arc<ToolRegistry> {
    tokio::time::timeout(
        WAIT,
        ToolRegistry::builder(Bus::default())
            .servers(servers)
            .start(),
    )
    .await
    .expect("the registry starts within the wait")
}

/// A server killed (SIGKILL) while a call is in flight: the call ends with an error well
/// before its timeout; while it is down calls fail with an error; started again on the same
/// port, it is picked up and calls work.
#[tokio::test]
async fn an_http_server_killed_mid_call_fails_the_call_and_is_picked_up_again() {
    let (mut child, url) = fixture_http_child(0).await;
    let port: u16 = url
        .trim_end_matches("/mcp")
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let mut config = McpServerConfig::http("fx", &url);
    // Far beyond the hang guard: an error inside the guard is the lost connection's.
    config.timeout_seconds = 600.0;
    let registry = registry(&[config]).await;
    assert_eq!(
        registry.call("echo", json!({"text": "up"})).await.text,
        "up"
    );

    let in_flight = tokio::spawn({
        let registry = registry.clone();
        async move { registry.call("slow", json!({"ms": 600_000})).await }
    });
    // The call is in flight once the server holds it; give it a moment to get there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let outcome = tokio::time::timeout(WAIT, in_flight)
        .await
        .expect("the call in flight ends when its server dies")
        .unwrap();
    assert!(outcome.is_error, "{outcome:?}");
    assert!(
        outcome
            .text
            .contains("closed the connection during the call to `slow`"),
        "{}",
        outcome.text
    );

    // Sent, then lost: the tool may have run (not "not delivered").
    let lost = outcome.unanswered.as_deref();
    assert!(matches!(lost, Some(Unanswered::Lost { .. })), "{outcome:?}");
    let said = lost.unwrap().to_string();
    assert!(
        said.contains("the tool may have run") && !said.contains("not delivered"),
        "{said}"
    );
    // The lost connection is let go at once, not kept as "connected" to nothing: the source
    // says it is down, and so does the next call.
    let source = registry.source("fx").expect("the source");
    wait_until("the source to be reported down", || {
        let up = matches!(source.status(), SourceStatus::Up { .. });
        async move { !up }
    })
    .await;
    let down = tokio::time::timeout(WAIT, registry.call("echo", json!({"text": "x"})))
        .await
        .expect("a call to a dead server answers");
    assert!(down.is_error, "{down:?}");
    assert!(
        matches!(down.unanswered.as_deref(), Some(Unanswered::Unreachable { server, .. }) if server == "fx"),
        "{down:?}"
    );

    let (_again, again_url) = fixture_http_child(port).await;
    assert_eq!(again_url, url);
    wait_until("the restarted server to be used", || {
        let registry = registry.clone();
        async move {
            let o = registry.call("echo", json!({"text": "back"})).await;
            !o.is_error && o.text == "back"
        }
    })
    .await;
    registry.shutdown().await;
}

/// What the garbage server answers a `tools/call` of each tool with.
fn garbage_answer(id: &Value, tool: &str) -> Response {
    match tool {
        "not_json" => (
            [(header::CONTENT_TYPE, "application/json")],
            "\u{0}<<garbage>> {{{",
        )
            .into_response(),
        "wrong_shape" => {
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": 42})).into_response()
        }
        "wrong_id" => axum::Json(json!({"jsonrpc": "2.0", "id": "nobody", "result": {
            "content": [{"type": "text", "text": "lost"}]}}))
        .into_response(),
        _ => axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": "fine"}]}}))
        .into_response(),
    }
}

/// A stateless streamable HTTP MCP server (JSON answers, no session) whose tools answer
/// with garbage, except `fine`.
async fn garbage_server() -> (String, CancellationToken) {
    async fn mcp(body: axum::body::Bytes) -> Response {
        let Ok(message) = serde_json::from_slice::<Value>(&body) else {
            return StatusCode::BAD_REQUEST.into_response();
        };
        let id = message["id"].clone();
        match message["method"].as_str().unwrap_or_default() {
            "initialize" => axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "garbage", "version": "0"}}}))
            .into_response(),
            "tools/list" => {
                let tools: Vec<Value> = ["not_json", "wrong_shape", "wrong_id", "fine"]
                    .iter()
                    .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
                    .collect();
                axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}}))
                    .into_response()
            }
            "tools/call" => garbage_answer(&id, message["params"]["name"].as_str().unwrap_or("")),
            _ if message.get("id").is_none() => StatusCode::ACCEPTED.into_response(),
            _ => axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {}})).into_response(),
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let app = Router::new().route(
        "/mcp",
        post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(token.cancelled_owned())
            .await;
    });
    (format!("http://{addr}/mcp"), stop)
}

/// Garbage answers (not JSON, a result of the wrong shape, an answer to nobody) end their
/// call with an error within the call's timeout, and the server's good tool still works
/// after each.
#[tokio::test]
async fn a_server_answering_garbage_gives_errors_and_the_source_serves_on() {
    let (url, stop) = garbage_server().await;
    let mut config = McpServerConfig::http("junk", &url);
    config.timeout_seconds = 2.0;
    let registry = registry(&[config]).await;
    let mut names: Vec<String> = registry.specs().iter().map(|s| s.name.clone()).collect();
    names.sort();
    assert!(names.contains(&"not_json".to_string()), "{names:?}");
    for tool in ["not_json", "wrong_shape", "wrong_id"] {
        let outcome = tokio::time::timeout(WAIT, registry.call(tool, json!({})))
            .await
            .unwrap_or_else(|_| panic!("{tool}: the call answers"));
        assert!(outcome.is_error, "{tool}: {outcome:?}");
        assert!(!outcome.text.is_empty(), "{tool}: the error says something");
        wait_until("the good tool to answer again", || {
            let registry = registry.clone();
            async move {
                let o = registry.call("fine", json!({})).await;
                !o.is_error && o.text == "fine"
            }
        })
        .await;
    }
    registry.shutdown().await;
    stop.cancel();
}

/// A 5 MiB answer is refused with the `response_too_large` error (small, JSON, with a
/// preview) instead of reaching the model, and the next call is served.
#[tokio::test]
async fn a_five_mib_answer_is_refused_small_and_the_next_call_works() {
    let (_child, url) = fixture_http_child(0).await;
    let registry = registry(&[McpServerConfig::http("fx", &url)]).await;
    let outcome = registry
        .call("big", json!({"bytes": 5 * 1024 * 1024}))
        .await;
    assert!(outcome.is_error);
    assert!(outcome.text.len() < 2048, "{} bytes", outcome.text.len());
    let v: Value = serde_json::from_str(&outcome.text).expect("the error is JSON");
    assert_eq!(v["error"], "response_too_large");
    assert_eq!(v["size_bytes"], 5 * 1024 * 1024);
    assert_eq!(
        outcome.unanswered.as_deref(),
        Some(&Unanswered::TooLarge {
            size_bytes: 5 * 1024 * 1024,
            limit_bytes: 1024 * 1024,
            dropped: false,
        })
    );
    assert_eq!(
        registry.call("echo", json!({"text": "next"})).await.text,
        "next"
    );
    registry.shutdown().await;
}

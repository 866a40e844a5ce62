//! What crossed the wire, in the console of the real binary with a real MCP client alongside:
//! a tool turn's second model request opened whole (system prompt, user line, both tool
//! results, the tools offered, tokens), its copied curl command sent again to the embedded
//! model for the same reply, the MCP pane's exchanges (initialize, tools/list, a chat with its
//! progress and result, a refused call's error) — and the same from `turnscope replay`.

use super::{Screen, mcp_url, replay_on_session_2};
use crate::support::curl::streamed_reply_of;
use crate::support::mcp::Client;

const PAGE_DOWN: &[u8] = b"\x1b[6~";
const PAGE_UP: &[u8] = b"\x1b[5~";

/// The MCP pane zoomed, and every screen seen while paging back through it, joined.
async fn mcp_pane(s: &mut Screen) -> String {
    s.send(b"9").await;
    s.wait_text("client all").await;
    s.send(b"z").await;
    let mut seen = s.text();
    for _ in 0..4 {
        s.send(PAGE_UP).await;
        seen.push_str(&s.text());
    }
    seen
}

/// Every screen seen while paging down the turn view `pages` times, joined.
async fn page_through(s: &mut Screen, pages: usize) -> String {
    let mut seen = s.text();
    for _ in 0..pages {
        s.send(PAGE_DOWN).await;
        seen.push_str(&s.text());
    }
    seen
}

fn assert_second_request_whole(seen: &str) {
    for want in [
        "model 2 +1 tool call round, +2 tool results",
        "system     You are a helpful assistant",
        "user       ask the clock and echo this",
        "+ tool",
        "tools    clock, echo",
        "answer   The clock tool says",
        "tok",
        "HTTP 200",
    ] {
        assert!(seen.contains(want), "{want:?} missing from:\n{seen}");
    }
}

fn assert_mcp_pane(screen: &str) {
    for want in [
        "initialize",
        "tools/list",
        "tools/call chat",
        "notifications/progress",
        "isError · ",
        "client all",
    ] {
        assert!(screen.contains(want), "{want:?} missing from:\n{screen}");
    }
}

/// The text of the last OSC 52 clipboard sequence written.
fn clipboard(raw: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(raw);
    let at = text.rfind("\x1b]52;c;")? + 7;
    let end = text[at..].find('\x07')? + at;
    let coded = text[at..end].as_bytes();
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let mut out = Vec::new();
    for chunk in coded.chunks(4) {
        let n = chunk
            .iter()
            .filter(|c| **c != b'=')
            .enumerate()
            .fold(0u32, |n, (i, c)| n | (u32::from(value(*c)) << (18 - 6 * i)));
        let keep = chunk.iter().filter(|c| **c != b'=').count() - 1;
        out.extend_from_slice(&n.to_be_bytes()[1..1 + keep]);
    }
    String::from_utf8(out).ok()
}

#[tokio::test]
async fn a_tool_turns_second_request_opens_whole_and_its_curl_gets_the_same_reply() {
    let dir = std::env::temp_dir().join(format!("turnscope-wire-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let events = dir.join("run.jsonl");
    let events_arg = events.to_str().unwrap().to_string();
    let mut s = Screen::start(&["--port", "0", "--pace", "0.002", "--events", &events_arg]).await;
    let first = s.wait_text("Type a line; Enter sends").await;
    let client = Client::connect(&mcp_url(&first)).await;
    client.service.list_all_tools().await.unwrap();
    let handle = client.start().await;
    client.chat(&handle, "hello").await;
    let reply = client.chat(&handle, "ask the clock and echo this").await;
    let refused = client
        .chat("00000000-0000-4000-8000-000000000000", "hello")
        .await;
    assert!(refused.is_error);
    s.send(b"\x1b").await;
    s.send(b"j").await;
    let listed = s.wait_text("turn 2 · completed").await;
    assert!(listed.contains("tok"), "tokens in the header:\n{listed}");
    s.send(b"w").await;
    s.wait_text("Model requests (2)").await;
    s.send(b"m").await;
    s.wait_text("system     You are").await;
    let seen = page_through(&mut s, 4).await;
    assert_second_request_whole(&seen);

    // Tab picks the second request; c copies it as curl, which a shell sends again.
    s.send(b"\t").await;
    s.send(b"c").await;
    let started = std::time::Instant::now();
    let curl = loop {
        if let Some(text) = clipboard(&s.raw.lock().unwrap()) {
            break text;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "no OSC 52 sequence was written"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(curl.starts_with("curl -sN 'http://127.0.0.1:"), "{curl}");
    assert_eq!(streamed_reply_of(curl).await, reply.text);

    // The MCP pane: what the client sent and was answered.
    s.send(b"\x1b").await;
    let pane = mcp_pane(&mut s).await;
    assert_mcp_pane(&pane);
    s.send(b"q").await;
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
    drop(client);

    // The same from the events file.
    let mut r = replay_on_session_2(&events_arg).await;
    r.wait_text("turn 2 · completed").await;
    r.send(b"w").await;
    r.wait_text("Model requests (2)").await;
    r.send(b"m").await;
    r.wait_text("system     You are").await;
    let replayed = page_through(&mut r, 4).await;
    assert_second_request_whole(&replayed);
    r.send(b"\x1b").await;
    let pane = mcp_pane(&mut r).await;
    assert_mcp_pane(&pane);
    r.send(b"q").await;
    assert!(r.wait_exit().await.success());
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn no_secret_reaches_a_screen_or_an_export() {
    const TOKEN: &str = "tok-5ecret-0f-the-console";
    const HEADER: &str = "hdr-5ecret-of-the-model";
    let config = format!("[model]\nheaders = {{ X-Upstream-Key = \"{HEADER}\" }}\n");
    let mut s = Screen::start_with(
        &["--port", "0", "--pace", "0.002", "--auth-token", TOKEN],
        &[("turnscope.toml", &config)],
    )
    .await;
    let first = s.wait_text("Type a line; Enter sends").await;
    // An MCP client with the token: its initialize is recorded, its Authorization is not.
    let init = reqwest::Client::new()
        .post(mcp_url(&first))
        .bearer_auth(TOKEN)
        .header("accept", "application/json, text/event-stream")
        .json(
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "secret-client", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert!(init.status().is_success());
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    init.text().await.unwrap();
    s.send(b"ask the clock").await;
    s.send(b"\r").await;
    s.wait_text("turn 1 · completed").await;
    s.send(b"\x1b").await;
    s.send(b"w").await;
    s.send(b"m").await;
    s.send(b"f").await;
    let mut screens = page_through(&mut s, 3).await;
    assert!(screens.contains("request  POST"), "{screens}");
    s.send(b"c").await;
    s.send(b"\x1b").await;
    s.send(b"e").await;
    let report = s.exported_report().await;
    assert!(report.contains("Model requests (2)"), "{report}");
    screens.push_str(&mcp_pane(&mut s).await);
    assert!(screens.contains("secret-client"), "{screens}");
    let copied = clipboard(&s.raw.lock().unwrap()).unwrap_or_default();
    assert!(
        // The header's name quoted as one shell word, its value the variable's.
        copied.contains(r#"-H 'X-Upstream-Key: '"${X_UPSTREAM_KEY}""#),
        "{copied}"
    );
    for secret in [TOKEN, HEADER, session.as_str()] {
        assert!(!screens.contains(secret), "{secret} on a screen");
        assert!(!report.contains(secret), "{secret} in the export");
        assert!(!copied.contains(secret), "{secret} in the copied curl");
    }
    s.send(b"q").await;
    assert!(s.wait_exit().await.success());
}

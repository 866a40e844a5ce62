//! Faults of the MCP client side, over real loopback HTTP: a client that comes back with a
//! stale `Mcp-Session-Id` (its MCP session deleted, or the server restarted), and a client
//! that floods one handle with calls. Handles are bot sessions, independent of MCP sessions.

use std::time::Duration;

use crate::support::mcp::Client;
use serde_json::{Value, json};
use turnscope::app::App;
use turnscope::config::Config;
use turnscope::observe::Bus;

/// A hang guard only: every step here answers in milliseconds.
const WAIT: Duration = Duration::from_secs(20);

const PROTOCOL: &str = "2025-06-18";

async fn app(port: u16, tweak: impl FnOnce(&mut Config)) -> App {
    let mut c = Config::default();
    c.server.port = port;
    c.model.pace = 0.0;
    tweak(&mut c);
    App::start(&c, Bus::default()).await.expect("app starts")
}

/// An MCP session driven by hand with reqwest, so the test holds its `Mcp-Session-Id`.
struct RawSession {
    http: reqwest::Client,
    url: String,
    id: String,
}

/// The JSON-RPC message answering `id` in a response body (SSE or plain JSON).
fn answer_in(body: &str, id: u64) -> Value {
    let candidates: Vec<Value> = if body.trim_start().starts_with('{') {
        vec![serde_json::from_str(body).expect("a JSON body")]
    } else {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    };
    candidates
        .into_iter()
        .find(|m: &Value| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to request {id} in {body:?}"))
}

impl RawSession {
    /// `initialize` + `notifications/initialized`.
    async fn open(url: &str) -> Self {
        let http = reqwest::Client::new();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "raw-test-client", "version": "0"}}});
        let resp = http
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "initialize is answered");
        let id = resp
            .headers()
            .get("mcp-session-id")
            .expect("a stateful server names the session")
            .to_str()
            .unwrap()
            .to_string();
        let body = resp.text().await.unwrap();
        assert!(answer_in(&body, 0)["result"]["serverInfo"].is_object());
        let session = Self {
            http,
            url: url.to_string(),
            id,
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let status = session.post(&note).await.status().as_u16();
        assert_eq!(status, 202, "the initialized notification is accepted");
        session
    }

    async fn post(&self, message: &Value) -> reqwest::Response {
        self.post_as(&self.id, message).await
    }

    /// Posts `message` under any session id (a stale one, say).
    async fn post_as(&self, session_id: &str, message: &Value) -> reqwest::Response {
        tokio::time::timeout(
            WAIT,
            self.http
                .post(&self.url)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-session-id", session_id)
                .header("mcp-protocol-version", PROTOCOL)
                .json(message)
                .send(),
        )
        .await
        .expect("the server answers")
        .unwrap()
    }

    /// `tools/call`; the result object.
    async fn call(&self, id: u64, name: &str, arguments: Value) -> Value {
        let resp = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": name, "arguments": arguments}}))
            .await;
        assert_eq!(resp.status().as_u16(), 200);
        let body = resp.text().await.unwrap();
        answer_in(&body, id)["result"].clone()
    }

    /// `DELETE` with the session id: the client ends its MCP session.
    async fn delete(&self) -> u16 {
        self.http
            .delete(&self.url)
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", PROTOCOL)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

fn ping(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn health(app: &App) -> Value {
    reqwest::get(format!("http://{}/healthz", app.server.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A deleted MCP session's id gets 404 "Session not found" on POST and GET; a fresh
/// `initialize` works, and the handle opened under the old MCP session is still the same
/// conversation (history kept), because handles do not belong to MCP sessions.
#[tokio::test]
async fn a_deleted_mcp_session_id_gets_404_and_its_handles_live_on() {
    let app = app(0, |_| {}).await;
    let url = app.server.mcp_url();
    let raw = RawSession::open(&url).await;
    let started = raw.call(1, "start", json!({})).await;
    let handle = started["_meta"]["turnscope/start"]["handle"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(handle.len(), 36, "{started}");
    let said = raw
        .call(
            2,
            "chat",
            json!({"handle": handle, "line": "the blue door"}),
        )
        .await;
    assert_eq!(text_of(&said), "You said: the blue door");

    assert_eq!(
        raw.delete().await,
        204,
        "DELETE ends the MCP session (204: no body)"
    );
    let stale = raw.post(&ping(3)).await;
    assert_eq!(stale.status().as_u16(), 404);
    let why = stale.text().await.unwrap();
    assert!(
        why.starts_with("Not Found: Session not found: this server keeps no MCP session ")
            && why.contains(&raw.id[..8])
            && !why.contains(&raw.id[..]),
        "the 404 says why, naming the session by its prefix only: {why}"
    );
    assert!(why.contains("Send initialize"), "and what to do: {why}");
    let stale_get = raw
        .http
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &raw.id)
        .send()
        .await
        .unwrap();
    assert_eq!(stale_get.status().as_u16(), 404);
    let why = stale_get.text().await.unwrap();
    assert!(why.contains("Send initialize"), "{why}");
    // An id the server never gave is refused the same way.
    let made_up = raw
        .post_as("00000000-0000-4000-8000-000000000000", &ping(4))
        .await;
    assert_eq!(made_up.status().as_u16(), 404);

    // The bot session outlived its MCP session: a fresh one (rmcp) reaches it, history kept.
    assert_eq!(app.sessions.len(), 1);
    let fresh = Client::connect(&url).await;
    let recalled = fresh.chat(&handle, "what did I say?").await;
    assert!(!recalled.is_error, "{}", recalled.text);
    assert_eq!(recalled.text, "Earlier you said: the blue door");
    assert_eq!(recalled.record["turn"], 2);
    // And a second raw session too, with a new id.
    let again = RawSession::open(&url).await;
    assert_ne!(again.id, raw.id);
    let reply = again
        .call(1, "chat", json!({"handle": handle, "line": "still here"}))
        .await;
    assert_eq!(text_of(&reply), "You said: still here");
    assert_eq!(health(&app).await["status"], "ok");
    app.shutdown().await;
}

/// After a restart on the same port, an id of the old server gets 404, the rmcp client
/// re-initializes on its own and its next call works, and a handle of the old server is
/// refused with the error that says to call `start`.
#[tokio::test]
async fn after_a_restart_old_session_ids_get_404_and_a_client_reinitializes() {
    let first = app(0, |_| {}).await;
    let port = first.server.addr.port();
    let url = first.server.mcp_url();
    let raw = RawSession::open(&url).await;
    let client = Client::connect(&url).await;
    let old_handle = client.start().await;
    assert_eq!(
        client.chat(&old_handle, "before").await.text,
        "You said: before"
    );
    first.shutdown().await;

    let second = app(port, |_| {}).await;
    assert_eq!(second.server.mcp_url(), url);
    let stale = raw.post(&ping(5)).await;
    assert_eq!(stale.status().as_u16(), 404, "the old id is unknown here");

    // The rmcp client's session id is stale too; it starts a new MCP session by itself.
    let handle = tokio::time::timeout(WAIT, client.start())
        .await
        .expect("start answers after re-initialization");
    assert_ne!(handle, old_handle);
    assert_eq!(client.chat(&handle, "after").await.text, "You said: after");
    let gone = client.chat(&old_handle, "anyone?").await;
    assert!(gone.is_error);
    assert!(
        gone.text.contains("no live session") && gone.text.contains("Call start"),
        "{}",
        gone.text
    );
    assert_eq!(second.sessions.len(), 1);
    second.shutdown().await;
}

/// 50 concurrent `chat` calls on one handle, from five MCP sessions: the handle runs one turn
/// at a time, each call gets the whole reply to its own line (none interrupted, none read by
/// another call), the turns are numbered 1..=50 in the order they ran, and the context saw
/// them in that order. Meanwhile another handle is served, and the server stays healthy.
#[tokio::test]
async fn a_flood_of_calls_on_one_handle_is_served_one_turn_at_a_time() {
    const CALLS: usize = 50;
    let app = app(0, |c| {
        c.model.pace = 0.002;
        c.model.words = Some(8);
    })
    .await;
    let url = app.server.mcp_url();
    let mut clients = Vec::new();
    for _ in 0..5 {
        clients.push(std::sync::Arc::new(Client::connect(&url).await));
    }
    let handle = clients[0].start().await;
    let flood: Vec<_> = (0..CALLS)
        .map(|i| {
            let client = clients[i % clients.len()].clone();
            let handle = handle.clone();
            tokio::spawn(async move {
                let line = format!("line {i}");
                let reply = client.chat(&handle, &line).await;
                (line, reply)
            })
        })
        .collect();

    // Another handle, on its own MCP session, is served while the flood runs.
    let other = Client::connect(&url).await;
    let quiet = other.start().await;
    for n in 1..=3u64 {
        let r = other.chat(&quiet, &format!("quiet {n}")).await;
        assert_eq!(r.text, format!("You said: quiet {n} and that is all"));
        assert_eq!(r.record["turn"], n);
        assert_eq!(health(&app).await["status"], "ok");
    }

    let mut by_turn = vec![String::new(); CALLS];
    for task in flood {
        let (line, reply) = tokio::time::timeout(WAIT, task)
            .await
            .expect("no call of the flood hangs")
            .unwrap();
        assert!(!reply.is_error, "{line}: {}", reply.text);
        let s = &reply.record;
        assert_eq!(s["end_reason"], "completed", "{line}: {s}");
        assert!(
            reply.text.starts_with(&format!("You said: {line} ")),
            "each call reads its own line's reply: {line} got {}",
            reply.text
        );
        assert!(s["unread"].is_null(), "no turn was left unread: {s}");
        let turn = s["turn"].as_u64().unwrap() as usize;
        assert!((1..=CALLS).contains(&turn), "{s}");
        assert!(by_turn[turn - 1].is_empty(), "turn {turn} given twice");
        by_turn[turn - 1] = line;
    }
    // The last line the context saw is the one of turn 50.
    let recalled = clients[0].chat(&handle, "what did I say?").await;
    let expected = format!("Earlier you said: {} ", by_turn[CALLS - 1]);
    assert!(recalled.text.starts_with(&expected), "{}", recalled.text);
    assert_eq!(recalled.record["turn"], CALLS as u64 + 1);
    let h = health(&app).await;
    assert_eq!(
        (h["status"].as_str(), h["sessions"].as_u64()),
        (Some("ok"), Some(2))
    );
    app.shutdown().await;
}

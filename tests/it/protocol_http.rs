//! The MCP endpoint on the wire, with raw HTTP on loopback: a dropped
//! `chat` response stream is resumed with `Last-Event-ID` and still delivers the reply; the
//! cancel per protocol revision; JSON-RPC errors with the spec's codes and statuses; DELETE.

use std::sync::Arc;
use std::time::Duration;

use crate::support::app::{app, eventually};
use serde_json::{Value, json};
use turnscope::app::App;

const WAIT: Duration = Duration::from_secs(10);
const ACCEPT: &str = "application/json, text/event-stream";

/// A slow 25-word answer: about half a second of progress notifications.
async fn slow_app() -> App {
    app(|c| {
        c.model.pace = 0.02;
        c.model.words = Some(25);
    })
    .await
}

/// One SSE event.
#[derive(Debug, Default, Clone)]
struct Event {
    id: Option<String>,
    retry: Option<u64>,
    data: Option<Value>,
}

/// Reads SSE events off a response as they arrive.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event, or `None` when the stream ended.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = Event::default();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        event.id = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("retry:") {
                        event.retry = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if !data.is_empty() {
                    event.data = serde_json::from_str(&data).ok();
                }
                if event.id.is_none() && event.data.is_none() && event.retry.is_none() {
                    continue; // keep-alive comment
                }
                return Some(event);
            }
            let chunk = tokio::time::timeout(WAIT, self.response.chunk())
                .await
                .expect("the stream moves within 10 s")
                .expect("the stream reads");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk?));
        }
    }
}

fn is_progress(e: &Event) -> bool {
    e.data
        .as_ref()
        .is_some_and(|d| d["method"] == "notifications/progress")
}

/// A raw MCP session on its own `Mcp-Session-Id`.
struct Raw {
    http: reqwest::Client,
    url: String,
    sid: String,
}

impl Raw {
    async fn open(url: &str, version: &str) -> Raw {
        let http = reqwest::Client::new();
        let init = http
            .post(url)
            .header("accept", ACCEPT)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}))
            .send()
            .await
            .unwrap();
        let sid = init.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        drop(init);
        let raw = Raw {
            http,
            url: url.to_string(),
            sid,
        };
        let ack = raw
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(ack.status(), 202);
        raw
    }

    async fn post(&self, body: Value) -> reqwest::Response {
        self.post_raw(body.to_string()).await
    }

    async fn post_raw(&self, body: String) -> reqwest::Response {
        self.http
            .post(&self.url)
            .header("accept", ACCEPT)
            .header("content-type", "application/json")
            .header("mcp-session-id", &self.sid)
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// The final JSON-RPC message of a request's stream.
    async fn answer(&self, body: Value) -> Value {
        let mut sse = Sse::new(self.post(body).await);
        while let Some(event) = sse.next().await {
            if let Some(data) = event.data
                && (data.get("result").is_some() || data.get("error").is_some())
            {
                return data;
            }
        }
        panic!("the stream ended without an answer");
    }

    async fn start(&self) -> String {
        let answer = self
            .answer(json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call",
                "params": {"name": "start", "arguments": {}}}))
            .await;
        answer["result"]["_meta"]["turnscope/start"]["handle"]
            .as_str()
            .expect("a handle")
            .to_string()
    }

    fn chat(id: u64, handle: &str, line: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "chat", "arguments": {"handle": handle, "line": line}, "_meta": {"progressToken": id}}})
    }

    /// Every event of the stream resumed after `last_event_id`, to its end.
    async fn resumed(&self, last_event_id: &str) -> Vec<Event> {
        let mut sse = Sse::new(self.resume(last_event_id).await);
        let mut rest = Vec::new();
        while let Some(event) = sse.next().await {
            rest.push(event);
        }
        rest
    }

    async fn resume(&self, last_event_id: &str) -> reqwest::Response {
        self.http
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.sid)
            .header("last-event-id", last_event_id)
            .send()
            .await
            .unwrap()
    }
}

/// Posts a chat and reads its stream up to and including the first progress event; returns
/// the id of the last event read, and the events.
async fn chat_until_first_progress(raw: &Raw, handle: &str, id: u64) -> (String, Vec<Event>) {
    let mut sse = Sse::new(
        raw.post(Raw::chat(id, handle, "a long answer please"))
            .await,
    );
    let mut seen = Vec::new();
    loop {
        let event = sse.next().await.expect("the stream is open");
        seen.push(event.clone());
        if is_progress(&event) {
            let last = seen.iter().rev().find_map(|e| e.id.clone());
            return (last.expect("the events carry ids"), seen);
        }
    }
    // `sse` (the response) is dropped here: the client's stream is cut.
}

fn final_reply(events: &[Event], id: u64) -> Option<String> {
    events.iter().find_map(|e| {
        let data = e.data.as_ref()?;
        (data["id"] == id && data.get("result").is_some()).then(|| {
            data["result"]["_meta"]["turnscope/turn"]["reply"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
    })
}

#[tokio::test]
async fn a_cut_chat_stream_is_resumed_after_the_turn_ended_and_delivers_the_reply() {
    let app = slow_app().await;
    let raw = Raw::open(&app.server.mcp_url(), "2025-11-25").await;
    let handle = raw.start().await;
    let (last, seen) = chat_until_first_progress(&raw, &handle, 2).await;
    assert!(
        seen[0].retry.is_some(),
        "the stream starts with a priming event that tells the client to come back: {seen:?}"
    );
    let session = app.sessions.list().pop().unwrap();
    // The stream is gone, yet under 2025-11-25 that is no cancel: the turn runs to its end
    // and the handler answers into the kept stream.
    eventually("the turn ran to its end", || {
        session.turns().pop().is_some_and(|t| t.is_done())
    })
    .await;
    let resumed = raw.resume(&last).await;
    assert_eq!(resumed.status(), 200);
    let mut sse = Sse::new(resumed);
    let mut rest = Vec::new();
    while let Some(event) = sse.next().await {
        rest.push(event);
    }
    let reply = final_reply(&rest, 2).expect("the resumed stream carries the final result");
    assert!(
        reply.starts_with("You said: a long answer please"),
        "{reply}"
    );
    let answer = rest.iter().rev().find_map(|e| e.data.as_ref()).unwrap();
    assert!(
        answer["result"]["_meta"]
            .get("turnscope/kept-for-resume")
            .is_none(),
        "the server's own mark is taken out: {answer}"
    );
    assert_eq!(reply.split_whitespace().count(), 25);
    assert!(
        rest.iter().any(is_progress),
        "the progress the client missed is replayed: {rest:?}"
    );
    assert!(
        rest.iter().all(|e| e.id.as_deref() != Some(last.as_str())),
        "nothing up to Last-Event-ID is sent again"
    );
    // The reply was delivered: the next empty line has nothing unread.
    let read = raw
        .answer(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "chat", "arguments": {"handle": handle, "line": ""}}}),
        )
        .await;
    assert_eq!(read["result"]["_meta"]["turnscope/turn"]["reply"], "");
    app.shutdown().await;
}

/// `chat` with an empty line on `handle`: the reply it reads, and the unread turn it names.
async fn read_empty_line(raw: &Raw, id: u64, handle: &str) -> (String, Value) {
    let read = raw
        .answer(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "chat", "arguments": {"handle": handle, "line": ""}}}),
        )
        .await;
    let turn = &read["result"]["_meta"]["turnscope/turn"];
    (
        turn["reply"].as_str().unwrap_or_default().to_string(),
        turn["unread"].clone(),
    )
}

#[tokio::test]
async fn a_cut_chat_stream_nobody_resumes_keeps_its_reply_for_an_empty_line() {
    let app = slow_app().await;
    let raw = Raw::open(&app.server.mcp_url(), "2025-11-25").await;
    let handle = raw.start().await;
    chat_until_first_progress(&raw, &handle, 2).await;
    let session = app.sessions.list().pop().unwrap();
    eventually("the turn ended", || {
        session.turns().pop().is_some_and(|t| t.is_done())
    })
    .await;
    // The client never resumes: its reply went into a stream nobody reads, so it is not
    // counted read; an empty line reads it, once.
    let (reply, _) = read_empty_line(&raw, 3, &handle).await;
    assert!(
        reply.starts_with("You said: a long answer please"),
        "the empty line reads the reply the cut stream did not deliver: {reply:?}"
    );
    assert_eq!(reply.split_whitespace().count(), 25);
    let (again, _) = read_empty_line(&raw, 4, &handle).await;
    assert_eq!(again, "", "read once");
    app.shutdown().await;
}

#[tokio::test]
async fn a_reply_a_resumed_stream_delivered_is_not_repeated_as_unread_by_the_next_line() {
    let app = slow_app().await;
    let raw = Raw::open(&app.server.mcp_url(), "2025-11-25").await;
    let handle = raw.start().await;
    let (last, _) = chat_until_first_progress(&raw, &handle, 2).await;
    let rest = raw.resumed(&last).await;
    assert!(final_reply(&rest, 2).is_some(), "resumed: {rest:?}");
    let next = raw.answer(Raw::chat(3, &handle, "and then?")).await;
    let turn = &next["result"]["_meta"]["turnscope/turn"];
    assert!(
        turn["unread"].is_null(),
        "the resumed stream delivered the earlier reply: {turn}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_resume_is_not_held_up_by_another_lines_turn_on_the_handle() {
    let app = app(|c| {
        c.model.pace = 0.06;
        c.model.words = Some(25);
    })
    .await;
    let raw = Arc::new(Raw::open(&app.server.mcp_url(), "2025-11-25").await);
    let handle = raw.start().await;
    let (last, _) = chat_until_first_progress(&raw, &handle, 2).await;
    let session = app.sessions.list().pop().unwrap();
    eventually("the first turn ended", || {
        session.turns().pop().is_some_and(|t| t.is_done())
    })
    .await;
    // A new line: its call holds the handle for its whole turn (1.5 s).
    let next = tokio::spawn({
        let (raw, handle) = (raw.clone(), handle.clone());
        async move { raw.answer(Raw::chat(3, &handle, "and then?")).await }
    });
    eventually("the new line's call holds the handle", || session.in_call()).await;
    let rest = raw.resumed(&last).await;
    assert!(final_reply(&rest, 2).is_some(), "resumed: {rest:?}");
    assert!(
        !next.is_finished(),
        "the resume got its result while the other line's turn still ran"
    );
    next.await.unwrap();
    app.shutdown().await;
}

#[tokio::test]
async fn a_stream_resumes_only_in_the_mcp_session_that_opened_it() {
    let app = slow_app().await;
    let url = app.server.mcp_url();
    let owner = Raw::open(&url, "2025-11-25").await;
    let other = Raw::open(&url, "2025-11-25").await;
    let handle = owner.start().await;
    let (last, _) = chat_until_first_progress(&owner, &handle, 2).await;
    let refused = other.resume(&last).await;
    assert_eq!(
        refused.status(),
        404,
        "another session's stream is not replayed"
    );
    let text = refused.text().await.unwrap();
    assert!(
        text.contains("another MCP session opened") && !text.contains(&last),
        "says why, without echoing the event id: {text}"
    );
    let rest = owner.resumed(&last).await;
    assert!(
        final_reply(&rest, 2).is_some(),
        "its own session resumes it"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_stream_resumed_mid_turn_follows_it_live_to_the_final_result() {
    let app = slow_app().await;
    let raw = Raw::open(&app.server.mcp_url(), "2025-06-18").await;
    let handle = raw.start().await;
    let (last, _) = chat_until_first_progress(&raw, &handle, 2).await;
    let session = app.sessions.list().pop().unwrap();
    assert!(session.in_call(), "resumed while the turn is in flight");
    let rest = raw.resumed(&last).await;
    let reply = final_reply(&rest, 2).expect("the followed stream ends with the final result");
    assert_eq!(reply.split_whitespace().count(), 25);
    app.shutdown().await;
}

#[tokio::test]
async fn resuming_an_unknown_event_id_gets_an_empty_stream_not_another_streams_events() {
    let app = app(|_| {}).await;
    let raw = Raw::open(&app.server.mcp_url(), "2025-11-25").await;
    let mut sse = Sse::new(raw.resume("no-such-stream/3").await);
    assert!(sse.next().await.is_none());
    app.shutdown().await;
}

#[tokio::test]
async fn under_2026_07_28_closing_the_response_stream_is_the_cancel() {
    let app = slow_app().await;
    let mut events = app.sessions.bus().subscribe();
    let url = app.server.mcp_url();
    let raw = Raw::open(&url, "2025-11-25").await;
    let handle = raw.start().await;
    // A 2026-07-28 request: no session, the revision and capabilities in its `_meta`.
    let mut response = reqwest::Client::new()
        .post(&url)
        .header("accept", ACCEPT)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "chat")
        .json(
            &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "chat", "arguments": {"handle": handle, "line": "a long answer please"},
            "_meta": {"progressToken": 5,
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{:?}", response.text().await);
    let mut seen = String::new();
    while !seen.contains("notifications/progress") {
        let chunk = tokio::time::timeout(WAIT, response.chunk())
            .await
            .unwrap()
            .unwrap()
            .expect("stream open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let session = app.sessions.list().pop().unwrap();
    assert!(session.in_call());
    drop(response);
    eventually("the handler noticed the closed stream", || {
        !session.in_call()
    })
    .await;
    assert!(
        !session.turns().pop().unwrap().is_done(),
        "the handler ended before the turn did"
    );
    // A cancel, the client's choice: a CallCancelled event, and the call is no failure.
    cancelled_not_failed(&mut events, session.number, "raw").await;
    app.shutdown().await;
}

/// Waits for the `CallCancelled` of `session` by `client`, and checks that the cancelled
/// chat's `Served` is ok (the console counts no error for it).
async fn cancelled_not_failed(
    events: &mut turnscope::observe::Subscription,
    session: u64,
    client: &str,
) {
    use turnscope::observe::Event as E;
    let (mut cancelled, mut served) = (None, None);
    eventually("CallCancelled and the chat's Served", || {
        while let Some(event) = events.try_recv() {
            match &*event {
                E::CallCancelled {
                    session: n,
                    client: c,
                    ..
                } => cancelled = Some((*n, c.clone())),
                E::Served { route, ok, .. } if route.as_ref() == "mcp tools/call chat" => {
                    served = Some(*ok)
                }
                E::ClientGone { .. } => panic!("a cancel is not a client gone"),
                _ => {}
            }
        }
        cancelled.is_some() && served.is_some()
    })
    .await;
    assert_eq!(cancelled, Some((session, client.to_string())));
    assert_eq!(served, Some(true), "a cancelled call is not a failure");
}

#[tokio::test]
async fn under_2025_11_25_notifications_cancelled_ends_the_handler() {
    let app = slow_app().await;
    let mut events = app.sessions.bus().subscribe();
    let raw = Raw::open(&app.server.mcp_url(), "2025-11-25").await;
    let handle = raw.start().await;
    let sse = raw
        .post(Raw::chat(2, &handle, "a long answer please"))
        .await;
    let session = app.sessions.list().pop().unwrap();
    eventually("the call holds the handle", || session.in_call()).await;
    let ack = raw
        .post(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 2, "reason": "the user gave up"}}),
        )
        .await;
    assert_eq!(ack.status(), 202);
    eventually("the handler ended", || !session.in_call()).await;
    assert!(!session.turns().pop().unwrap().is_done());
    cancelled_not_failed(&mut events, session.number, "raw").await;
    drop(sse);
    app.shutdown().await;
}

// ---- C: JSON-RPC errors ----

async fn error_of(response: reqwest::Response) -> (u16, String, Value) {
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body: Value = response.json().await.expect("a JSON body");
    (status, kind, body)
}

#[tokio::test]
async fn malformed_messages_get_400_with_json_rpc_errors() {
    let app = app(|_| {}).await;
    let raw = Raw::open(&app.server.mcp_url(), "2025-11-25").await;
    let cases: [(&str, i64); 6] = [
        ("{not json", -32700),
        // JSON-RPC in shape, but no message rmcp can read (judged from rmcp's own answer).
        (r#"{"jsonrpc": "2.0", "id": 1, "method": 5}"#, -32600),
        (
            r#"{"jsonrpc": "2.0", "id": null, "method": "ping"}"#,
            -32600,
        ),
        (r#"{"jsonrpc": "1.0", "id": 1, "method": "ping"}"#, -32600),
        (r#"[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]"#, -32600),
        ("42", -32600),
    ];
    for (body, code) in cases {
        let (status, kind, answer) = error_of(raw.post_raw(body.to_string()).await).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(kind.starts_with("application/json"), "{body}: {kind}");
        assert_eq!(answer["jsonrpc"], "2.0");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap().len() > 20,
            "{answer}"
        );
    }
    // A sound request still works on the same session.
    let pong = raw
        .answer(json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}))
        .await;
    assert_eq!(pong["result"], json!({}));
    app.shutdown().await;
}

#[tokio::test]
async fn tools_call_without_a_name_or_with_non_object_arguments_is_invalid_params() {
    let app = app(|_| {}).await;
    let raw = Raw::open(&app.server.mcp_url(), "2025-11-25").await;
    for params in [
        json!({}),
        json!({"arguments": {}}),
        json!({"name": 3}),
        json!({"name": "chat", "arguments": "x"}),
        json!({"name": "chat", "arguments": [1]}),
    ] {
        let response = raw
            .post(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}))
            .await;
        let (status, _, answer) = error_of(response).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["error"]["code"], -32602, "{params}: {answer}");
    }
    app.shutdown().await;
}

#[tokio::test]
async fn a_sessionless_2026_07_28_tools_call_with_bad_arguments_is_invalid_params() {
    let app = app(|_| {}).await;
    let response = reqwest::Client::new()
        .post(app.server.mcp_url())
        .header("accept", ACCEPT)
        .header("mcp-protocol-version", "2026-07-28")
        .json(
            &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "chat", "arguments": "x",
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}}),
        )
        .send()
        .await
        .unwrap();
    let (status, _, answer) = error_of(response).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    app.shutdown().await;
}

/// An `initialize` whose params rmcp cannot read was answered "Session ID is required"; it
/// is a -32602 naming the field at fault and what a valid one carries.
#[tokio::test]
async fn an_initialize_with_malformed_params_is_invalid_params_naming_the_field() {
    let app = app(|_| {}).await;
    let http = reqwest::Client::new();
    let cases = [
        (
            json!({"capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}),
            "params.protocolVersion is missing",
        ),
        (json!("x"), "params must be an object; received a string"),
        (
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}}),
            "params.clientInfo.version is missing",
        ),
    ];
    for (params, fault) in cases {
        let response = http
            .post(app.server.mcp_url())
            .header("accept", ACCEPT)
            .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": params}))
            .send()
            .await
            .unwrap();
        let (status, kind, answer) = error_of(response).await;
        assert_eq!(status, 400, "{params}: {answer}");
        assert!(kind.starts_with("application/json"), "{kind}");
        assert_eq!(answer["id"], 3);
        assert_eq!(answer["error"]["code"], -32602, "{params}: {answer}");
        let text = answer["error"]["message"].as_str().unwrap();
        assert!(
            text.contains(fault) && text.contains("\"clientInfo\""),
            "{params}: {text}"
        );
    }
    // Without params at all.
    let response = http
        .post(app.server.mcp_url())
        .header("accept", ACCEPT)
        .json(&json!({"jsonrpc": "2.0", "id": 4, "method": "initialize"}))
        .send()
        .await
        .unwrap();
    let (_, _, answer) = error_of(response).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    app.shutdown().await;
}

/// "Method not found" named only the method; it names the methods this server offers too.
#[tokio::test]
async fn method_not_found_names_the_methods_offered() {
    let app = app(|_| {}).await;
    let raw = Raw::open(&app.server.mcp_url(), "2025-11-25").await;
    for method in ["no/such", "prompts/list", "resources/list"] {
        let answer = raw
            .answer(json!({"jsonrpc": "2.0", "id": 5, "method": method}))
            .await;
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
        let text = answer["error"]["message"].as_str().unwrap();
        assert!(
            text.contains(method) && text.contains("tools/list") && text.contains("tools/call"),
            "{method}: {text}"
        );
    }
    app.shutdown().await;
}

/// An `Mcp-Param-Handle` header that is not the call's handle was served (from the body); it
/// is refused with 400, naming both by their first 8 characters only.
#[tokio::test]
async fn a_param_handle_header_that_is_not_the_handle_is_refused() {
    use crate::support::raw_mcp::RawMcp;
    let app = app(|_| {}).await;
    let url = app.server.mcp_url();
    let handle = RawMcp::new(&url, "raw", false).start().await;
    let other = RawMcp::new(&url, "raw", false).start().await;
    let wrong = RawMcp::new(&url, "raw", false).with_header("mcp-param-handle", &other);
    let answer = wrong.chat(&handle, "hello").await;
    assert_eq!(answer.status, 400, "{}", answer.message);
    assert_eq!(answer.error_code(), Some(-32020), "{}", answer.message);
    let text = answer.message["error"]["message"].as_str().unwrap();
    assert!(
        text.contains("Mcp-Param-Handle")
            && text.contains(&format!("{}…", &handle[..8]))
            && text.contains(&format!("{}…", &other[..8])),
        "{text}"
    );
    assert!(!text.contains(&handle) && !text.contains(&other), "{text}");
    // The same header with the right handle is served.
    let right = RawMcp::new(&url, "raw", false).with_header("mcp-param-handle", &handle);
    let served = right.chat(&handle, "hello").await;
    assert_eq!(served.status, 200, "{}", served.message);
    assert!(served.message.get("result").is_some(), "{}", served.message);
    app.shutdown().await;
}

#[tokio::test]
async fn the_2025_03_26_revision_with_its_batches_is_no_longer_offered() {
    let app = app(|_| {}).await;
    let response = reqwest::Client::new()
        .post(app.server.mcp_url())
        .header("accept", ACCEPT)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}}}))
        .send()
        .await
        .unwrap();
    let mut sse = Sse::new(response);
    let answer = loop {
        let event = sse.next().await.expect("an answer");
        if let Some(data) = event.data {
            break data;
        }
    };
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-11-25",
        "{answer}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn delete_answers_204_once_then_404() {
    let app = app(|_| {}).await;
    let url = app.server.mcp_url();
    let raw = Raw::open(&url, "2025-11-25").await;
    let delete = || {
        raw.http
            .delete(&url)
            .header("mcp-session-id", &raw.sid)
            .send()
    };
    assert_eq!(delete().await.unwrap().status(), 204);
    let again = delete().await.unwrap();
    assert_eq!(again.status(), 404);
    assert!(again.text().await.unwrap().contains("does not exist"));
    let unknown = raw
        .http
        .delete(&url)
        .header("mcp-session-id", "never-was")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    app.shutdown().await;
}

/// The 404s for an unknown MCP session or event id show only the id's first 8 characters, as
/// every other place does (the rest of a session id is a secret of the client's).
#[tokio::test]
async fn not_found_texts_mask_the_session_and_event_ids() {
    let app = app(|_| {}).await;
    let url = app.server.mcp_url();
    let http = reqwest::Client::new();
    let secret = "0a1b2c3d-secret-rest-of-a-session-id";
    let delete = http
        .delete(&url)
        .header("mcp-session-id", secret)
        .send()
        .await
        .unwrap();
    let resume_session = http
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", secret)
        .header("last-event-id", "0/0/1")
        .send()
        .await
        .unwrap();
    let resume_event = http
        .get(&url)
        .header("accept", "text/event-stream")
        .header("last-event-id", format!("{secret}/0/1"))
        .send()
        .await
        .unwrap();
    for answer in [delete, resume_session, resume_event] {
        assert_eq!(answer.status(), 404);
        let text = answer.text().await.unwrap();
        assert!(!text.contains("secret-rest"), "{text}");
        assert!(text.contains("0a1b2c3d…"), "{text}");
    }
    app.shutdown().await;
}

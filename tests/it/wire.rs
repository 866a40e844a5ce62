//! What crossed the wire, as events record it, over real sockets: an rmcp client's every
//! `/mcp` exchange (initialize, tools/list, a chat with its progress and its result as sent,
//! a refused call, a body that is not JSON), a tool turn's model requests put together again
//! from their deltas, the copied curl command sent again to the embedded model, the bound,
//! and secrets kept out.

use std::sync::Arc;

use serde_json::{Value, json};
use turnscope::observe::ModelResponseInfo;
use turnscope::observe::rebuild::RequestBook;
use turnscope::observe::wire::{McpExchange, WireAnswer, WireRequest};
use turnscope::observe::{Event, Subscription};

use crate::support::app::{app, eventually};
use crate::support::curl::streamed_reply_of;
use crate::support::mcp::Client;

/// Every event published so far.
fn drain(sub: &mut Subscription, into: &mut Vec<Arc<Event>>) {
    while let Some(e) = sub.try_recv() {
        into.push(e);
    }
}

fn exchanges(events: &[Arc<Event>]) -> Vec<&McpExchange> {
    events
        .iter()
        .filter_map(|e| match &**e {
            Event::Mcp(x) => Some(&**x),
            _ => None,
        })
        .collect()
}

type Sent<'a> = (u64, &'a ModelResponseInfo, &'a WireRequest, &'a WireAnswer);

fn model_requests(events: &[Arc<Event>]) -> Vec<Sent<'_>> {
    events
        .iter()
        .filter_map(|e| match &**e {
            Event::ModelRequest {
                session,
                response,
                request: Some(q),
                answer: Some(a),
                ..
            } => Some((*session, response, &**q, &**a)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn every_mcp_exchange_is_recorded_as_the_client_saw_it() {
    let app = app(|_| {}).await;
    let mut sub = app.bus.subscribe();
    let client = Client::connect(&app.server.mcp_url()).await;
    client.service.list_all_tools().await.unwrap();
    let handle = client.start().await;
    let reply = client.chat(&handle, "ask the clock and echo this").await;
    assert!(!reply.is_error, "{}", reply.text);
    let refused = client
        .chat("00000000-0000-4000-8000-000000000000", "hello")
        .await;
    assert!(refused.is_error);
    let not_json = reqwest::Client::new()
        .post(app.server.mcp_url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), 400);
    let mut events = Vec::new();
    eventually("the exchanges are recorded", || {
        drain(&mut sub, &mut events);
        exchanges(&events).iter().any(|x| x.status == 400)
            && exchanges(&events)
                .iter()
                .filter(|x| x.tool.as_deref() == Some("chat"))
                .count()
                == 2
    })
    .await;
    let all = exchanges(&events);
    let init = all
        .iter()
        .find(|x| x.method.as_deref() == Some("initialize"))
        .expect("initialize recorded");
    let name = init.request.as_ref().unwrap().value()["params"]["clientInfo"]["name"].clone();
    assert_eq!(init.client.as_deref(), name.as_str());
    assert_eq!(init.mcp_session.as_ref().map(String::len), Some(8));
    assert!(init.messages[0].message.value()["result"]["protocolVersion"].is_string());
    assert!(init.complete && init.first_byte_us.is_some());

    let list = all
        .iter()
        .find(|x| x.method.as_deref() == Some("tools/list"))
        .expect("tools/list recorded");
    assert_eq!(list.client, init.client, "known by its MCP session");
    assert_eq!(list.mcp_session, init.mcp_session);
    assert!(list.protocol.is_some(), "MCP-Protocol-Version is kept");
    let answer = list.messages.last().unwrap().message.value();
    let listed: Vec<&str> = answer["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["start", "chat"]);

    let chat = all
        .iter()
        .find(|x| x.tool.as_deref() == Some("chat") && x.messages.len() > 1)
        .expect("the chat call with its progress");
    let sent = chat.request.as_ref().unwrap().value();
    assert_eq!(
        sent["params"]["arguments"]["line"],
        "ask the clock and echo this"
    );
    let masked = sent["params"]["arguments"]["handle"].as_str().unwrap();
    assert_eq!(masked, format!("{}…", &handle[..8]), "handles never whole");
    let (progress, rest) = chat.messages.split_at(chat.messages.len() - 1);
    assert!(!progress.is_empty());
    assert!(
        progress
            .iter()
            .all(|m| m.message.value()["method"] == "notifications/progress")
    );
    // The first and the latest whole, every one counted (each is also an Event::Progress).
    let sent = client.progress_messages();
    let tally = chat.progress.expect("the progress tally");
    assert_eq!(tally.count as usize, sent.len());
    assert_eq!(progress.len(), sent.len().min(2));
    assert_eq!(tally.left_out as usize, sent.len().saturating_sub(2));
    assert_eq!(
        progress.last().unwrap().message.value()["params"]["message"],
        sent.last().unwrap().1.as_str()
    );
    let answer = rest[0].message.value();
    let result = &answer["result"];
    let text: String = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect();
    assert_eq!(text, reply.text, "the result exactly as sent");
    assert!(rest[0].after_us >= progress[0].after_us);
    assert!(chat.total_us >= rest[0].after_us && chat.complete);

    let refused_x = all
        .iter()
        .find(|x| x.tool.as_deref() == Some("chat") && x.messages.len() == 1)
        .expect("the refused call");
    assert_eq!(
        refused_x.messages[0].message.value()["result"]["isError"],
        true
    );
    let bad = all.iter().find(|x| x.status == 400).unwrap();
    assert_eq!(bad.messages[0].message.value()["error"]["code"], -32700);
    assert!(
        bad.request.as_ref().unwrap().value()["turnscope/cut"].is_object(),
        "not JSON: kept as text"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_tool_turns_second_request_is_whole_again_and_its_curl_gets_the_same_reply() {
    let app = app(|_| {}).await;
    let mut sub = app.bus.subscribe();
    let client = Client::connect(&app.server.mcp_url()).await;
    let handle = client.start().await;
    client.chat(&handle, "hello").await;
    let reply = client.chat(&handle, "ask the clock and echo this").await;
    let mut events = Vec::new();
    eventually("three model requests", || {
        drain(&mut sub, &mut events);
        model_requests(&events).len() == 3
    })
    .await;
    let mut book = RequestBook::default();
    events.iter().for_each(|e| book.apply(e));
    let requests = model_requests(&events);
    let (session, _, first, _) = requests[0];
    assert_eq!(
        first.from, 0,
        "the session's first request carries the system prompt"
    );
    let (_, _, second_q, second_r) = requests[2];
    // The second request of the tool turn carries only its new messages...
    assert_eq!(second_q.appended.len(), 3);
    // ...and is whole again from the book.
    let whole = book.whole(session, second_q);
    assert_eq!(whole.missing, 0);
    let roles: Vec<&str> = whole
        .messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "tool"
        ]
    );
    assert_eq!(whole.messages[3]["content"], "ask the clock and echo this");
    assert_eq!(whole.growth(), "+1 tool call round, +2 tool results");
    let tools = whole.tools.as_ref().expect("the tool set was published");
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"clock") && names.contains(&"echo"),
        "{names:?}"
    );
    assert!(
        tools
            .iter()
            .all(|t| t["function"]["parameters"].is_object())
    );
    let (_, info, _, _) = requests[2];
    assert_eq!(second_r.content, reply.text);
    assert_eq!(info.finish_reason.as_deref(), Some("stop"));
    assert_eq!(info.status, Some(200));
    assert!(info.headers_us.is_some());
    let usage = info.usage.expect("the embedded model counts tokens");
    assert!(usage.prompt_tokens > 0 && usage.completion_tokens > 0);
    let (_, info, _, calls) = requests[1];
    assert_eq!(calls.tool_calls.len(), 2);
    assert_eq!(info.finish_reason.as_deref(), Some("tool_calls"));
    // The copied command, run by a shell, gets the same reply from the embedded model.
    let curl = whole.curl(second_q);
    assert!(
        !curl.contains("OPENAI_API_KEY"),
        "the embedded model takes no key"
    );
    assert_eq!(streamed_reply_of(curl).await, reply.text);
    app.shutdown().await;
}

/// A request its turn was stopped under (a newer line interrupted it mid-stream) is recorded,
/// stopped, with what it streamed, and the next request of the session is whole again from
/// the book: it was never recorded, and every later request lacked its messages (tour M).
#[tokio::test]
async fn a_request_stopped_with_its_turn_is_recorded_and_the_next_is_whole() {
    let app = app(|c| c.model.pace = 0.4).await;
    let mut sub = app.bus.subscribe();
    let client = Client::connect(&app.server.mcp_url()).await;
    let handle = client.start().await;
    let story = client
        .chat_cancellable(&handle, "tell me a long story")
        .await;
    let mut events = Vec::new();
    eventually("the story streams", || {
        drain(&mut sub, &mut events);
        events
            .iter()
            .any(|e| matches!(&**e, Event::Frame(f) if f.name == "TextPiece" && f.turn == 1))
    })
    .await;
    // The person interrupts it (`i` in the console), then says another line.
    let session = app.sessions.list().pop().expect("the session");
    assert!(session.bot().interrupt().await);
    let _ = story.await_response().await;
    client.chat(&handle, "hello").await;
    eventually("two model requests", || {
        drain(&mut sub, &mut events);
        model_requests(&events).len() == 2
    })
    .await;
    let requests = model_requests(&events);
    let (session, stopped, _, partial) = requests[0];
    assert!(
        stopped.stopped && stopped.finish_reason.is_none(),
        "{stopped:?}"
    );
    assert!(
        !partial.content.is_empty(),
        "what it streamed is its answer"
    );
    let mut book = RequestBook::default();
    events.iter().for_each(|e| book.apply(e));
    let (_, _, next, _) = requests[1];
    let whole = book.whole(session, next);
    assert_eq!(whole.missing, 0, "{whole:?}");
    let roles: Vec<&str> = whole
        .messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(whole.messages[1]["content"], "tell me a long story");
    app.shutdown().await;
}

#[tokio::test]
async fn the_bound_cuts_long_messages_and_zero_records_no_bodies() {
    let bounded = app(|c| c.wire.max_kib = 1).await;
    let mut sub = bounded.bus.subscribe();
    let client = Client::connect(&bounded.server.mcp_url()).await;
    let handle = client.start().await;
    client.chat(&handle, &"long ".repeat(400)).await;
    let mut events = Vec::new();
    eventually("a model request", || {
        drain(&mut sub, &mut events);
        !model_requests(&events).is_empty()
    })
    .await;
    let (_, _, q, _) = model_requests(&events)[0];
    assert_eq!(q.cut, 1);
    let user = q.appended[1]["content"].as_str().unwrap();
    assert!(
        user.len() < 1200 && user.contains("2000 bytes in all"),
        "{user}"
    );
    bounded.shutdown().await;

    let app = app(|c| c.wire.max_kib = 0).await;
    let mut sub = app.bus.subscribe();
    let client = Client::connect(&app.server.mcp_url()).await;
    let handle = client.start().await;
    client.chat(&handle, "hello").await;
    let mut events = Vec::new();
    eventually("the turn's model request", || {
        drain(&mut sub, &mut events);
        events
            .iter()
            .any(|e| matches!(&**e, Event::ModelRequest { .. }))
    })
    .await;
    assert!(model_requests(&events).is_empty(), "timings only");
    assert!(exchanges(&events).is_empty());
    app.shutdown().await;
}

#[tokio::test]
async fn no_secret_reaches_an_event() {
    const TOKEN: &str = "tok-5ecret-0f-the-server";
    const HEADER: &str = "hdr-5ecret-value";
    let app = app(|c| {
        c.server.auth_token = Some(TOKEN.into());
        c.model
            .headers
            .insert("X-Upstream-Key".into(), HEADER.into());
    })
    .await;
    let mut sub = app.bus.subscribe();
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<String>| {
        let mut r = http
            .post(app.server.mcp_url())
            .bearer_auth(TOKEN)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body);
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r.send()
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "secret-test", "version": "1"}}}),
        None,
    )
    .await
    .unwrap();
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    init.text().await.unwrap();
    post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(session.clone()),
    )
    .await
    .unwrap();
    let start = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "start", "arguments": {}}}),
        Some(session.clone()),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    // The handle is in the result's data line (the SSE event ids are UUIDs too).
    let handle = start
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .flat_map(uuids)
        .next()
        .expect("start's answer names the handle");
    let chat = post(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "chat",
            "arguments": {"handle": handle, "line": "ask the clock"}}}),
        Some(session.clone()),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert!(chat.contains("clock tool says"), "{chat}");
    let mut events = Vec::new();
    eventually("the chat exchange and its model requests", || {
        drain(&mut sub, &mut events);
        exchanges(&events)
            .iter()
            .any(|x| x.tool.as_deref() == Some("chat"))
            && model_requests(&events).len() == 2
    })
    .await;
    let text: String = events
        .iter()
        .map(|e| serde_json::to_string(&**e).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    for secret in [TOKEN, HEADER, session.as_str(), handle.as_str()] {
        assert!(!text.contains(secret), "{secret} reached an event");
    }
    assert!(exchanges(&events).iter().all(|x| x.authorized));
    let (_, _, q, _) = model_requests(&events)[0];
    assert_eq!(
        q.headers,
        ["X-Upstream-Key"],
        "the header's name, never its value"
    );
    app.shutdown().await;
}

/// Every UUID in `text`.
fn uuids(text: &str) -> Vec<String> {
    (0..text.len().saturating_sub(35))
        .filter_map(|i| {
            let s = text.get(i..i + 36)?;
            uuid::Uuid::parse_str(s).ok().map(|_| s.to_string())
        })
        .collect()
}

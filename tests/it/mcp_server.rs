//! The MCP surface (`start`/`chat`) over real streamable HTTP on loopback, driven by the rmcp
//! client: every `start`/`chat` semantic (handles, interrupts, progress, errors, the cap).

use std::time::Duration;

use crate::support::app::{app, eventually};
use crate::support::mcp::{Client, Outcome, handle_of, outcome_of};
use crate::support::upstream::{Reply, Upstream, content};
use serde_json::json;
use turnscope::app::App;

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn start_gives_a_uuid_handle_and_the_greeting_and_chat_gives_the_whole_reply() {
    let app = app(|c| c.bot.greeting = Some("Hello, I am the test bot.".into())).await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let tools = client.service.list_all_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, ["start", "chat"]);
    assert!(
        tools[1]
            .description
            .as_deref()
            .unwrap()
            .contains("empty line")
    );
    // Text tools: no output schema, so no client expects structured content.
    assert!(tools.iter().all(|t| t.output_schema.is_none()));
    assert!(
        tools
            .iter()
            .all(|t| t.annotations.is_some() && t.title.is_some())
    );

    let start = client.call("start", json!({})).await;
    let handle = handle_of(&start);
    assert_eq!(handle.len(), 36);
    assert!(uuid::Uuid::parse_str(&handle).is_ok_and(|u| u.get_version_num() == 4));
    assert_eq!(start.record["greeting"], "Hello, I am the test bot.");
    // The model reads the handle, how to use it and the greeting; never the server's address.
    assert!(
        start.text.contains(&format!("Handle: {handle}"))
            && start
                .text
                .ends_with("The bot greets you: Hello, I am the test bot.")
            && !start.text.contains("127.0.0.1"),
        "{}",
        start.text
    );
    assert!(!start.structured_content);

    let reply = client.chat(&handle, "we open at nine").await;
    assert!(!reply.is_error, "{}", reply.text);
    assert_eq!(reply.text, "You said: we open at nine");
    assert!(!reply.structured_content);
    let s = &reply.record;
    assert_eq!(s["reply"], "You said: we open at nine");
    assert_eq!(s["end_reason"], "completed");
    assert_eq!(s["turn"], 1);
    assert_eq!(s["rounds"], 0);
    assert!(s["total_ms"].as_f64().unwrap() > 0.0 && s["first_piece_ms"].is_number());
    // History is kept per handle.
    assert_eq!(
        client.chat(&handle, "what did I say?").await.text,
        "Earlier you said: we open at nine"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_tool_round_gives_the_whole_reply_after_the_round() {
    let app = app(|_| {}).await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let reply = client.chat(&h, "echo good morning").await;
    assert_eq!(reply.text, "The echo tool says: good morning.");
    assert_eq!(reply.record["rounds"], 1);
    assert_eq!(reply.record["tool_calls"][0]["name"], "echo");
    app.shutdown().await;
}

#[tokio::test]
async fn one_progress_notification_per_reply_piece() {
    let app = app(|c| c.model.words = Some(7)).await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let reply = client.chat(&h, "hello").await;
    let seen = client.progress_messages();
    assert_eq!(seen.len(), 7, "{seen:?}");
    let progress: Vec<f64> = seen.iter().map(|(p, _)| *p).collect();
    assert_eq!(progress, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    // Each message is the reply so far, as a person watching reads it.
    let words: Vec<&str> = reply.text.split(' ').collect();
    for (i, (_, message)) in seen.iter().enumerate() {
        assert_eq!(*message, words[..=i].join(" "), "notification {}", i + 1);
    }
    app.shutdown().await;
}

#[tokio::test]
async fn progress_of_a_long_reply_is_its_last_200_characters_on_a_word_boundary() {
    let app = app(|c| {
        c.model.words = Some(120);
        c.model.pace = 0.0;
    })
    .await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let reply = client.chat(&h, "tell me everything").await;
    assert!(reply.text.len() > 400, "{}", reply.text);
    let seen = client.progress_messages();
    assert_eq!(seen.last().unwrap().0, 120.0, "{seen:?}");
    for (_, message) in &seen {
        assert!(message.chars().count() <= 200, "{message}");
    }
    let last = &seen.last().unwrap().1;
    let tail = last
        .strip_prefix('…')
        .expect("a cut message starts with an ellipsis");
    assert!(reply.text.ends_with(tail), "{last}");
    assert!(
        reply.text.contains(&format!(" {tail}")),
        "starts on a word: {last}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn two_concurrent_calls_on_one_handle_run_in_order_and_keep_replies_apart() {
    let app = app(|c| c.model.pace = 0.01).await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let (a, b) = tokio::join!(
        client.chat(&h, "first line"),
        client.chat(&h, "second line")
    );
    let mut replies = [a.text, b.text];
    replies.sort();
    assert_eq!(replies, ["You said: first line", "You said: second line"]);
    let turns = [
        a.record["turn"].as_u64().unwrap(),
        b.record["turn"].as_u64().unwrap(),
    ];
    assert!(turns.contains(&1) && turns.contains(&2));
    assert_eq!(a.record["end_reason"], "completed");
    assert_eq!(b.record["end_reason"], "completed");
    app.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_call_ends_at_once_and_the_next_empty_line_reads_the_whole_reply() {
    let app = app(|c| {
        c.model.pace = 0.02;
        c.model.words = Some(25);
    })
    .await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let call = client.chat_cancellable(&h, "tell me a story").await;
    let session = app.sessions.list().pop().unwrap();
    eventually("the call holds the handle", || session.in_call()).await;
    call.cancel(Some("caller gave up".into())).await.unwrap();
    eventually("the handler ended", || !session.in_call()).await;
    let turn = session.turns().pop().unwrap();
    assert!(!turn.is_done(), "the turn runs on after the caller cancels");
    let read = client.chat(&h, "").await;
    assert_eq!(read.record["end_reason"], "completed");
    assert_eq!(read.text.split_whitespace().count(), 25);
    assert!(read.text.starts_with("You said: tell me a story"));
    // A read turn is gone: the model is told there is nothing to read.
    let again = client.chat(&h, "").await;
    assert!(again.record["turn"].is_null(), "{again:?}");
    assert!(again.text.starts_with("[Nothing to read"), "{}", again.text);
    app.shutdown().await;
}

// Closing the response stream: tests/protocol_http.rs (a cancel only from 2026-07-28 on;
// before that the stream is resumed with Last-Event-ID).

/// Says `line` on `h` and cancels the call once three pieces of the reply streamed (the turn
/// goes on without its caller); the session it runs in.
async fn cancel_after_three_pieces(
    app: &App,
    client: &Client,
    h: &str,
    line: &str,
) -> std::sync::Arc<turnscope::sessions::Session> {
    let call = client.chat_cancellable(h, line).await;
    let session = app.sessions.list().pop().unwrap();
    eventually("some pieces streamed", || {
        session
            .turns()
            .last()
            .is_some_and(|t| t.snapshot().piece_ends.len() >= 3)
    })
    .await;
    call.cancel(None).await.unwrap();
    session
}

#[tokio::test]
async fn a_new_line_interrupts_a_turn_whose_caller_left_and_reports_it_unread() {
    let app = app(|c| {
        c.model.pace = 0.02;
        c.model.words = Some(40);
    })
    .await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let session = cancel_after_three_pieces(&app, &client, &h, "alpha").await;
    eventually("handler ended", || !session.in_call()).await;
    let next = client.chat(&h, "bravo").await;
    assert_eq!(
        next.record["reply"].as_str().unwrap().split(' ').nth(2),
        Some("bravo")
    );
    // The model reads the unread reply first, then this line's.
    let (note, reply) = next.text.split_once("\n\n").unwrap();
    assert!(
        note.starts_with("[Your previous line's reply was never read: this line replaced it. The bot had said: \"You said: alpha")
            && note.ends_with("(interrupted before it finished).]"),
        "{note}"
    );
    assert!(reply.starts_with("You said: bravo"), "{reply}");
    let unread = &next.record["unread"];
    assert_eq!(unread["end_reason"], "interrupted");
    assert!(
        unread["reply"]
            .as_str()
            .unwrap()
            .starts_with("You said: alpha")
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_done_turn_no_call_read_is_kept_as_unread() {
    let app = app(|c| c.model.pace = 0.02).await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let call = client.chat_cancellable(&h, "first").await;
    let session = app.sessions.list().pop().unwrap();
    eventually("the turn started", || !session.turns().is_empty()).await;
    call.cancel(None).await.unwrap();
    eventually("turn done", || {
        session.turns().last().is_some_and(|t| t.is_done())
    })
    .await;
    eventually("handler ended", || !session.in_call()).await;
    let next = client.chat(&h, "second").await;
    assert_eq!(
        next.text,
        "[Your previous line's reply was never read: this line replaced it. The bot had said: \"You said: first\".]\n\nYou said: second"
    );
    assert_eq!(next.record["reply"], "You said: second");
    assert_eq!(next.record["unread"]["reply"], "You said: first");
    assert_eq!(next.record["unread"]["end_reason"], "completed");
    app.shutdown().await;
}

#[tokio::test]
async fn empty_lines_read_nothing_when_no_turn_is_pending() {
    let app = app(|_| {}).await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let empty = client.chat(&h, "").await;
    assert!(!empty.is_error);
    assert!(empty.text.starts_with("[Nothing to read"), "{}", empty.text);
    assert_eq!(empty.record["reply"], "");
    assert!(empty.record["turn"].is_null());
    client.chat(&h, "hi").await;
    assert!(client.chat(&h, "").await.record["turn"].is_null());
    app.shutdown().await;
}

#[tokio::test]
async fn handle_errors_name_the_field_the_expectation_and_the_next_call() {
    let app = app(|_| {}).await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let short = client.chat("abc", "hi").await;
    assert!(short.is_error);
    assert!(
        short.text.starts_with("handle:")
            && short.text.contains("36 characters")
            && short.text.contains("received 3"),
        "{}",
        short.text
    );
    let unknown = client.chat(&uuid::Uuid::new_v4().to_string(), "hi").await;
    assert!(unknown.is_error);
    assert!(
        unknown.text.contains("handle")
            && unknown.text.contains("300 seconds")
            && unknown.text.contains("Call start"),
        "{}",
        unknown.text
    );
    let wrong_type = client
        .call("chat", json!({"handle": 42, "line": "hi"}))
        .await;
    assert!(wrong_type.is_error);
    assert!(
        wrong_type.text.contains("handle: expected a string")
            && wrong_type.text.contains("a number"),
        "{}",
        wrong_type.text
    );
    let h = client.start().await;
    let bad_line = client
        .call("chat", json!({"handle": h, "line": ["x"]}))
        .await;
    assert!(
        bad_line.is_error && bad_line.text.starts_with("line: expected a string"),
        "{}",
        bad_line.text
    );
    // A line under another name is refused, not read as a poll that drops it; an extra
    // argument beside a line is left alone.
    let misnamed = client
        .call("chat", json!({"handle": h, "text": "use the clock"}))
        .await;
    assert!(
        misnamed.is_error
            && misnamed.text.starts_with("text: not an argument of chat")
            && misnamed.text.contains("nothing was said"),
        "{}",
        misnamed.text
    );
    let extra = client
        .call(
            "chat",
            json!({"handle": h, "line": "hello", "mood": "fine"}),
        )
        .await;
    assert!(!extra.is_error, "{}", extra.text);
    let missing = client.call("chat", json!({})).await;
    assert!(
        missing.is_error && missing.text.starts_with("handle: missing"),
        "{}",
        missing.text
    );
    let unknown_tool = client.call("nope", json!({})).await;
    assert!(
        unknown_tool.is_error
            && unknown_tool.text.contains("start")
            && unknown_tool.text.contains("chat")
    );
    // The server is still healthy.
    assert_eq!(
        client.chat(&h, "still there?").await.text,
        "You said: still there?"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn the_cap_refuses_start_and_a_stopped_bot_frees_its_slot() {
    let app = app(|c| c.server.sessions = 1).await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let over = client.call("start", json!({})).await;
    assert!(over.is_error);
    assert!(
        over.text.starts_with("sessions:") && over.text.contains("1 open session,"),
        "{}",
        over.text
    );
    // The bot of that session stops (as a bot that returns or raises would).
    app.sessions.list()[0].bot().end().await;
    let gone = client.chat(&h, "hi").await;
    assert!(
        gone.is_error
            && gone
                .text
                .contains("this conversation has ended (bot stopped")
            && gone.text.contains("Call start"),
        "{}",
        gone.text
    );
    let again = client.call("start", json!({})).await;
    assert!(!again.is_error, "{}", again.text);
    app.shutdown().await;
}

#[tokio::test]
async fn an_idle_handle_is_refused_on_access_and_freed_by_the_sweep() {
    let app = app(|c| {
        c.server.handle_seconds = 1;
        c.server.sweep_seconds = 0.05;
    })
    .await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let swept = client.start().await;
    eventually("the sweep drops the idle handle", || {
        app.sessions.is_empty()
    })
    .await;
    assert_ended_idle(&client.chat(&swept, "hi").await);
    app.shutdown().await;

    // With the sweep far away, access alone refuses an expired handle.
    let app2 = app_with_slow_sweep().await;
    let client = Client::connect(&app2.server.mcp_url()).await;
    let h = client.start().await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(app2.sessions.len(), 1);
    assert_ended_idle(&client.chat(&h, "hi").await);
    assert_eq!(app2.sessions.len(), 0);
    app2.shutdown().await;
}

/// `answer` is the error a chat on a handle that idled out gets.
#[track_caller]
fn assert_ended_idle(answer: &Outcome) {
    assert!(
        answer.is_error
            && answer
                .text
                .contains("this conversation has ended (idle too long"),
        "{}",
        answer.text
    );
}

/// A turn still streaming after its caller left (a cancel) is activity, not idleness: the
/// sweep keeps its session past the idle lifetime while it runs and for the lifetime after it
/// ends, so an empty line then reads the whole reply.
#[tokio::test]
async fn a_turn_running_after_its_caller_left_is_not_swept_with_its_session() {
    let app = app(|c| {
        c.server.handle_seconds = 1;
        c.server.sweep_seconds = 0.05;
        c.model.pace = 0.05;
        c.model.words = Some(40);
    })
    .await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    cancel_after_three_pieces(&app, &client, &h, "alpha").await;
    // Past the idle lifetime since the last call, with the turn still running (~2 s).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(app.sessions.len(), 1, "swept while its turn ran");
    let read = client.chat(&h, "").await;
    assert!(!read.is_error, "{}", read.text);
    assert!(read.text.starts_with("You said: alpha"), "{}", read.text);
    assert_eq!(read.record["end_reason"], "completed");
    app.shutdown().await;
}

/// A line of a megabyte or two (within the MCP body limit) does not leave the conversation
/// unable to go on: the embedded model takes the history that carries it.
#[tokio::test]
async fn a_conversation_with_megabyte_lines_goes_on() {
    let app = app(|c| c.model.pace = 0.0).await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let big = "a".repeat(1024 * 1024);
    for _ in 0..3 {
        let said = client.chat(&h, &big).await;
        assert!(!said.is_error, "{}", &said.text[..said.text.len().min(300)]);
    }
    let next = client.chat(&h, "hi").await;
    assert!(!next.is_error, "{}", &next.text[..next.text.len().min(600)]);
    assert!(
        next.text.starts_with("You said: hi"),
        "{}",
        &next.text[..next.text.len().min(300)]
    );
    app.shutdown().await;
}

/// A lone server (no replica id configured) talks of a restart, never of replicas, for a
/// handle it does not know, whichever port issued it.
#[tokio::test]
async fn a_handle_from_before_a_restart_says_so_without_replicas() {
    let before = app(|_| {}).await;
    let old = Client::connect(&before.server.mcp_url())
        .await
        .start()
        .await;
    before.shutdown().await;
    let after = app(|_| {}).await;
    let client = Client::connect(&after.server.mcp_url()).await;
    let e = client.chat(&old, "hello again").await;
    assert!(
        e.is_error
            && e.text.contains("no live session")
            && e.text.contains("this server restarted")
            && e.text.contains("Call start")
            && !e.text.contains("replica")
            && !e.text.contains("HAProxy"),
        "{}",
        e.text
    );
    after.shutdown().await;
}

async fn app_with_slow_sweep() -> App {
    app(|c| {
        c.server.handle_seconds = 1;
        c.server.sweep_seconds = 1000.0;
    })
    .await
}

#[tokio::test]
async fn a_turn_that_fails_is_a_tool_error_naming_the_cause_with_the_partial_reply() {
    let up = Upstream::start(vec![
        Reply::Cut(vec![content("We open")]),
        Reply::Status(
            503,
            r#"{"error":{"message":"overloaded, retry later"}}"#.into(),
        ),
        Reply::text(&["Back", " again"]),
    ])
    .await;
    let app = app(|c| c.model.url = Some(up.base_url())).await;
    let mut events = app.bus.subscribe();
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let cut = client.chat(&h, "hours?").await;
    assert!(cut.is_error);
    assert!(cut.text.contains("broke before its end"), "{}", cut.text);
    assert_eq!(cut.record["reply"], "We open");
    assert_eq!(cut.record["end_reason"], "error");
    let status = client.chat(&h, "hours?").await;
    assert!(
        status.is_error && status.text.contains("HTTP 503") && status.text.contains("overloaded"),
        "{}",
        status.text
    );
    assert_eq!(client.chat(&h, "hours?").await.text, "Back again");
    // The failed turns are told once, by the turns: their chats were served (tour J: each
    // failed turn counted as two errors, the second a "chat refused" carrying the reply). A
    // chat that reached no turn is a refusal.
    assert!(client.chat("no-such-handle", "hi").await.is_error);
    let mut chats = Vec::new();
    while let Some(event) = events.try_recv() {
        if let turnscope::observe::Event::Served { route, ok, .. } = &*event
            && route.as_ref() == "mcp tools/call chat"
        {
            chats.push(*ok);
        }
    }
    assert_eq!(chats, [true, true, true, false]);
    app.shutdown().await;
}

#[tokio::test]
async fn host_and_origin_are_checked_on_every_route() {
    let app = app(|_| {}).await;
    let base = format!("http://{}", app.server.addr);
    let http = reqwest::Client::new();
    let status = |host: Option<&str>, origin: Option<&str>, path: &str| {
        let mut r = http.get(format!("{base}{path}"));
        if let Some(h) = host {
            r = r.header("host", h);
        }
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        async move { r.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status(None, None, "/healthz").await, 200);
    assert_eq!(
        status(
            Some("localhost:7870"),
            Some("http://localhost:3000"),
            "/healthz"
        )
        .await,
        200
    );
    assert_eq!(status(Some("evil.example"), None, "/healthz").await, 421);
    assert_eq!(status(Some("evil.example"), None, "/mcp").await, 421);
    assert_eq!(
        status(None, Some("http://evil.example"), "/healthz").await,
        403
    );
    assert_eq!(status(None, Some("http://evil.example"), "/mcp").await, 403);
    app.shutdown().await;

    // A setting naming one host answers it and still refuses a foreign origin.
    let named = self::app(|c| {
        c.server.host = "0.0.0.0".into();
        c.server.allow_open_bind = true;
        c.server.allowed_hosts = vec!["bot.example.com:*".into()];
    })
    .await;
    let base = format!("http://127.0.0.1:{}", named.server.addr.port());
    let get = |host: &str, origin: Option<&str>| {
        let mut r = http.get(format!("{base}/healthz")).header("host", host);
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        async move { r.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(get("bot.example.com:8080", None).await, 200);
    assert_eq!(
        get("127.0.0.1", None).await,
        200,
        "an open bind keeps the loopback setting"
    );
    assert_eq!(get("other.example.com", None).await, 421);
    assert_eq!(
        get("bot.example.com", Some("https://app.evil.com")).await,
        403
    );
    named.shutdown().await;

    let off = self::app(|c| c.server.host_check = false).await;
    let r = http
        .get(format!("http://{}/healthz", off.server.addr))
        .header("host", "evil.example");
    assert_eq!(r.send().await.unwrap().status().as_u16(), 200);
    off.shutdown().await;
}

#[tokio::test]
async fn cancelling_while_waiting_for_the_handle_lock_leaves_the_other_call_alone() {
    let app = app(|c| {
        c.model.pace = 0.02;
        c.model.words = Some(15);
    })
    .await;
    let client = Client::connect(&app.server.mcp_url()).await;
    let h = client.start().await;
    let first = client.chat_cancellable(&h, "one").await;
    let session = app.sessions.list().pop().unwrap();
    eventually("first holds the lock", || session.in_call()).await;
    let second = client.chat_cancellable(&h, "two").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    second.cancel(None).await.unwrap();
    let one = outcome_of(
        tokio::time::timeout(WAIT, first.await_response())
            .await
            .unwrap()
            .unwrap(),
    );
    assert!(one.text.starts_with("You said: one"), "{}", one.text);
    assert_eq!(one.record["end_reason"], "completed");
    app.shutdown().await;
}

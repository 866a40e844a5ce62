//! The live event stream at `/events` (`server::viewers`): several viewers at once see the same
//! lines, each gets the open sessions and their turns on connect, a viewer that stops reading
//! is dropped while the turns go on, viewers that all stopped reading let the server rest, and
//! nobody watching leaves the bus free.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turnscope::observe::Event;

use crate::support::app::{app, eventually};
use crate::support::bot_client;

const TOKEN: &str = "watch-token";

async fn health(addr: std::net::SocketAddr) -> Value {
    reqwest::Client::new()
        .get(format!("http://{addr}/healthz"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// `/healthz` polled until `holds` of its `viewers`, at most 5 s; that answer.
async fn until_viewers(
    addr: std::net::SocketAddr,
    what: &str,
    holds: impl Fn(&Value) -> bool,
) -> Value {
    let started = std::time::Instant::now();
    loop {
        let h = health(addr).await;
        if holds(&h["viewers"]) {
            return h;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "not {what} within 5 s: {h}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `GET /events` with the token, answered 200.
async fn open_events(addr: std::net::SocketAddr) -> reqwest::Response {
    let response = reqwest::Client::new()
        .get(format!("http://{addr}/events"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response
}

/// A viewer reading `/events` into lines, on its own task.
fn viewer(addr: std::net::SocketAddr) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let response = open_events(addr).await;
        assert_eq!(response.headers()["content-type"], "application/x-ndjson");
        let mut body = response.bytes_stream();
        let mut buffer = Vec::new();
        while let Some(Ok(chunk)) = body.next().await {
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                if tx.send(String::from_utf8(line).unwrap()).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// The id the stalled viewer names itself by ([`turnscope::server::viewers::VIEWER_HEADER`]).
const STALLED_ID: &str = "stalled-viewer-1";

/// A viewer with a small receive window that asks for `/events` over HTTP/`version` (naming
/// itself [`STALLED_ID`]), reads the answer's head (200) and then nothing more until the test
/// reads again.
async fn stalled_viewer(addr: std::net::SocketAddr, version: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(addr).await.unwrap();
    stalled
        .write_all(
            format!(
                "GET /events HTTP/{version}\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
                 x-turnscope-viewer: {STALLED_ID}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut head = [0u8; 64];
    let n = stalled.read(&mut head).await.unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with(&format!("HTTP/{version} 200")));
    stalled
}

/// An SDK client of `url` sending the token.
async fn client_with_token(url: String) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url)
            .auth_header(TOKEN.to_string());
    rmcp::ServiceExt::serve(
        (),
        rmcp::transport::StreamableHttpClientTransport::from_config(config),
    )
    .await
    .unwrap()
}

/// Lines until one ends turn `turn` (of any session), at most 10 s.
async fn until_turn_end(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    turn: u64,
) -> Vec<String> {
    let mut lines = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let line = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("the viewer saw the turn end within 10 s")
            .expect("the stream is open");
        let ended = matches!(serde_json::from_str::<Event>(&line),
            Ok(Event::TurnEnded(t)) if t.turn == turn);
        lines.push(line);
        if ended {
            return lines;
        }
    }
}

#[tokio::test]
async fn three_viewers_see_the_same_lines_after_the_sessions_they_joined() {
    let app = app(|c| {
        c.server.auth_token = Some(TOKEN.into());
        c.bot.greeting = Some("Hello, I am the watched bot.".into());
    })
    .await;
    let addr = app.server.addr;
    let url = app.server.mcp_url();
    // A conversation nobody watches: the bus is not even listened to.
    assert_eq!(health(addr).await["viewers"]["listening"], false);
    let client = client_with_token(url.clone()).await;
    let handle = bot_client::start(&client).await;
    bot_client::chat(&client, &handle, "before anyone watched").await;

    let mut viewers: Vec<_> = (0..3).map(|_| viewer(addr)).collect();
    eventually("three viewers connected", || true).await;
    let mut firsts = Vec::new();
    for v in &mut viewers {
        // On connect: the replica, the open session, and its finished turn whole.
        let lines = until_turn_end(v, 1).await;
        let events: Vec<Event> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(matches!(events[0], Event::Replica(_)), "{lines:?}");
        // With its greeting, which a viewer's transcript shows atop (it had none: tour H).
        assert!(events.iter().any(|e| matches!(e,
            Event::Session(s) if s.session == 1 && s.closed.is_none()
                && s.greeting.as_deref() == Some("Hello, I am the watched bot."))));
        assert!(events.iter().any(|e| matches!(e,
            Event::TurnStarted { line, .. } if line == "before anyone watched")));
        assert!(events.iter().any(|e| matches!(e,
            Event::Frame(f) if f.name == "TextPiece" && f.detail.contains("before anyone watched"))));
        // Told, not seen running: a viewer's figures leave it out; its tokens come with it
        // (its model requests are not told again).
        assert!(
            events.iter().any(|e| matches!(e,
                Event::TurnEnded(t) if t.turn == 1 && t.retold
                    && t.usage.is_some_and(|u| u.prompt_tokens > 0))),
            "{lines:?}"
        );
        firsts.push(lines.len());
    }
    let h = health(addr).await;
    assert_eq!(
        (
            h["viewers"]["connected"].as_u64(),
            h["viewers"]["listening"].as_bool()
        ),
        (Some(3), Some(true)),
        "{h}"
    );

    bot_client::chat(&client, &handle, "use the clock").await;
    let mut seen = Vec::new();
    for v in &mut viewers {
        seen.push(until_turn_end(v, 2).await);
    }
    assert!(
        seen[0].len() > 10,
        "a tool turn is many events: {:?}",
        seen[0]
    );
    assert_eq!(seen[0], seen[1], "every viewer gets the same lines");
    assert_eq!(seen[1], seen[2], "every viewer gets the same lines");
    let events: Vec<Event> = seen[0]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::ToolCall(c) if c.name == "clock"))
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::ModelRequest { .. }))
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::TurnEnded(t) if !t.retold))
            && !events
                .iter()
                .any(|e| matches!(e, Event::TurnEnded(t) if t.retold)),
        "a turn seen running is not marked told again"
    );
    // A session opened while they watch: its opening line carries the greeting too.
    let _second = bot_client::start(&client).await;
    let opened = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let line = viewers[0].recv().await.expect("the stream is open");
            if let Ok(Event::Session(s)) = serde_json::from_str::<Event>(&line)
                && s.session == 2
            {
                return s;
            }
        }
    })
    .await
    .expect("told within 10 s of the second session");
    assert_eq!(
        opened.greeting.as_deref(),
        Some("Hello, I am the watched bot.")
    );
    drop(viewers);
    eventually("the viewers are gone", || true).await;
    let _ = client.cancel().await;
    app.shutdown().await;
}

/// A viewer of a server where no turn has run yet is told, after the replica, the tool set
/// the bot offers its model: the one its first request then names.
#[tokio::test]
async fn a_viewer_of_an_idle_server_is_told_the_tools_its_bot_offers() {
    let app = app(|c| c.server.auth_token = Some(TOKEN.into())).await;
    let addr = app.server.addr;
    let mut v = viewer(addr);
    let next = |v: &mut tokio::sync::mpsc::UnboundedReceiver<String>| {
        let line = v.try_recv().expect("a line is there");
        serde_json::from_str::<Event>(&line).unwrap()
    };
    eventually("the viewer's first lines", || !v.is_empty()).await;
    eventually("the viewer's tool set", || v.len() >= 2).await;
    assert!(matches!(next(&mut v), Event::Replica(_)));
    let Event::ToolSet(offered) = next(&mut v) else {
        panic!("the tool set follows the replica");
    };
    let names: Vec<&str> = offered
        .tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"clock"), "{names:?}");

    let client = client_with_token(app.server.mcp_url()).await;
    let handle = bot_client::start(&client).await;
    bot_client::chat(&client, &handle, "use the clock").await;
    let named: Vec<String> = until_turn_end(&mut v, 1)
        .await
        .iter()
        .filter_map(|l| match serde_json::from_str::<Event>(l) {
            Ok(Event::ModelRequest {
                request: Some(r), ..
            }) => r.tools.clone(),
            _ => None,
        })
        .collect();
    assert!(!named.is_empty(), "the turn's requests offered tools");
    assert!(
        named.iter().all(|id| *id == offered.id),
        "{named:?} vs {}",
        offered.id
    );
    drop(v);
    let _ = client.cancel().await;
    app.shutdown().await;
}

/// A client that let go of its MCP session while nobody watched: a viewer that connects later
/// is told so with the session (before, it showed the session idle, as if a client held it,
/// while a viewer that watched throughout showed it "client gone").
#[tokio::test]
async fn a_viewer_that_connects_later_is_told_a_session_whose_client_is_gone() {
    let app = app(|c| c.server.auth_token = Some(TOKEN.into())).await;
    let client = client_with_token(app.server.mcp_url()).await;
    let handle = bot_client::start(&client).await;
    bot_client::chat(&client, &handle, "hello").await;
    client.cancel().await.unwrap();
    let session = app.sessions.list().pop().expect("the session stays open");
    eventually("the server saw the client go", || {
        session.client_gone().is_some()
    })
    .await;
    let mut v = viewer(app.server.addr);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut turn_told = false;
    loop {
        let line = tokio::time::timeout_at(deadline, v.recv())
            .await
            .expect("told within 10 s that the session's client is gone")
            .expect("the stream is open");
        match serde_json::from_str::<Event>(&line) {
            Ok(Event::TurnStarted { session: n, .. }) if n == session.number => turn_told = true,
            Ok(Event::ClientGone { session: n, .. }) => {
                assert_eq!(n, session.number);
                // After its turns: a turn's start tells a viewer someone speaks into it again,
                // which undid the news (a late viewer showed it idle).
                assert!(
                    turn_told,
                    "the client's going is told after the session's turns"
                );
                break;
            }
            _ => {}
        }
    }
    // A call on it again: a viewer connecting now is not told so.
    let other = client_with_token(app.server.mcp_url()).await;
    bot_client::chat(&other, &handle, "back again").await;
    assert_eq!(session.client_gone(), None);
    app.shutdown().await;
}

/// A 2025-11-25 MCP session that chatted once on a conversation another client (a sessionless
/// 2026-07-28 one) opened and chatted on after it ends: that conversation keeps its client (it
/// was marked "client gone", its Log saying it stayed open with nobody holding it, while its
/// opener chatted on). One that session chatted on last is marked, as before.
#[tokio::test]
async fn only_the_client_that_opened_or_last_chatted_on_a_session_marks_it_gone() {
    let app = app(|c| c.server.auth_token = Some(TOKEN.into())).await;
    let sessionless = crate::support::raw_mcp::RawMcp::new(&app.server.mcp_url(), "opener", false)
        .with_header("authorization", &format!("Bearer {TOKEN}"));
    let legacy = client_with_token(app.server.mcp_url()).await;
    let (kept, left) = (sessionless.start().await, sessionless.start().await);
    // The legacy session chats on both, on `kept` first (its news, had it any, comes first).
    bot_client::chat(&legacy, &kept, "once").await;
    bot_client::chat(&legacy, &left, "once").await;
    let said = sessionless.chat(&kept, "still here").await;
    assert!(
        crate::support::raw_mcp::text_of(said.result()).starts_with("You said: still here"),
        "{}",
        said.message
    );
    let number = |handle: &str| app.sessions.number_of(handle).expect("open");
    let (kept_number, left_number) = (number(&kept), number(&left));
    let session = |n: u64| {
        app.sessions
            .list()
            .into_iter()
            .find(|s| s.number == n)
            .expect("open")
    };
    let mut v = viewer(app.server.addr);
    until_viewers(app.server.addr, "one viewer", |v| v["connected"] == 1).await;
    legacy.cancel().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let line = tokio::time::timeout_at(deadline, v.recv())
            .await
            .expect("told within 10 s that the legacy session's client is gone")
            .expect("the stream is open");
        if let Ok(Event::ClientGone {
            session: n, client, ..
        }) = serde_json::from_str::<Event>(&line)
        {
            assert_ne!(n, kept_number, "{client} never held it last: {line}");
            if n == left_number {
                break;
            }
        }
    }
    assert_eq!(session(kept_number).client_gone(), None);
    assert!(session(left_number).client_gone().is_some());
    drop(v);
    app.shutdown().await;
}

/// The opener ending its MCP session while another client's chat on the session runs: that
/// client holds it from its call on, so nobody left it (the mark followed a chatter only once
/// its reply came: review).
#[tokio::test]
async fn the_opener_leaving_while_another_clients_chat_runs_is_no_client_gone() {
    let app = app(|c| {
        c.server.auth_token = Some(TOKEN.into());
        c.model.pace = 0.05;
        c.model.words = Some(40);
    })
    .await;
    let opener = client_with_token(app.server.mcp_url()).await;
    let handle = bot_client::start(&opener).await;
    let number = app.sessions.number_of(&handle).expect("open");
    let chatter = crate::support::raw_mcp::RawMcp::new(&app.server.mcp_url(), "chatter", false)
        .with_header("authorization", &format!("Bearer {TOKEN}"));
    let chat = tokio::spawn({
        let handle = handle.clone();
        async move { chatter.chat(&handle, "a long one").await }
    });
    // The turn runs (two seconds of words); the opener leaves meanwhile.
    eventually("the chat's turn runs", || {
        app.sessions
            .list()
            .into_iter()
            .any(|s| s.number == number && s.in_call())
    })
    .await;
    opener.cancel().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let session = app
        .sessions
        .list()
        .into_iter()
        .find(|s| s.number == number)
        .expect("open");
    assert!(!chat.is_finished(), "the chat still runs");
    assert_eq!(session.client_gone(), None, "its chatter is there");
    chat.await.unwrap();
    app.shutdown().await;
}

/// A client that opened its MCP session while nobody watched: a viewer that connects later
/// sees its name on the session's exchanges (the server remembered it at `initialize` though
/// it recorded nothing then; they showed as "?").
#[tokio::test]
async fn a_viewer_that_connects_later_sees_who_sends_an_earlier_sessions_requests() {
    let app = app(|c| c.server.auth_token = Some(TOKEN.into())).await;
    let client = client_with_token(app.server.mcp_url()).await;
    let handle = bot_client::start(&client).await;
    let mut v = viewer(app.server.addr);
    until_viewers(app.server.addr, "one viewer", |v| v["connected"] == 1).await;
    bot_client::chat(&client, &handle, "hello").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let chat = loop {
        let line = tokio::time::timeout_at(deadline, v.recv())
            .await
            .expect("the chat's exchange reached the viewer within 10 s")
            .expect("the stream is open");
        if let Ok(Event::Mcp(x)) = serde_json::from_str::<Event>(&line)
            && x.tool.as_deref() == Some("chat")
        {
            break x;
        }
    };
    assert_eq!(chat.client.as_deref(), Some("rmcp"), "{chat:?}");
    drop(v);
    let _ = client.cancel().await;
    app.shutdown().await;
}

#[tokio::test]
async fn a_viewer_that_stops_reading_is_dropped_and_the_turns_go_on() {
    let app = app(|c| {
        c.server.auth_token = Some(TOKEN.into());
        // A small queue, so the stalled viewer falls past it within a few hundred turns.
        c.server.events_queue_kib = 256;
    })
    .await;
    let addr = app.server.addr;
    let mut stalled = stalled_viewer(addr, "1.1").await;
    // A viewer that keeps up.
    let mut keeping_up = viewer(addr);

    let sessions = app.sessions.clone();
    let session = sessions
        .open(turnscope::observe::SessionOpener::Api)
        .await
        .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut turns = 0u64;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while health(addr).await["viewers"]["dropped"].as_u64() == Some(0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stalled viewer was never dropped"
        );
        for _ in 0..20 {
            let reply = sessions
                .chat_on(&session, "use the clock", None, &cancel)
                .await
                .unwrap();
            assert_eq!(reply.end_reason.as_deref(), Some("completed"));
            turns += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The stalled one's stream ends (what it reads is what was queued before the cut, then
    // its last line says it was dropped, or the connection closes).
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stalled.read_to_end(&mut rest))
        .await
        .expect("the stalled viewer's connection ends")
        .ok();
    // The other viewer was never dropped: it saw every turn end.
    let mut ends = 0u64;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while ends < turns {
        let line = tokio::time::timeout_at(deadline, keeping_up.recv())
            .await
            .expect("the reading viewer keeps getting lines")
            .expect("its stream stays open");
        assert!(
            !line.contains(turnscope::server::viewers::DROPPED_MARK),
            "{line}"
        );
        if line.contains("\"type\":\"turn_ended\"") {
            ends += 1;
        }
    }
    let h = health(addr).await;
    assert_eq!(h["viewers"]["connected"].as_u64(), Some(1), "{h}");
    // Connecting again under its id, the stalled viewer is told first that it was cut off
    // (its full socket could not be told then: before, it only saw its stream break).
    let again = reqwest::Client::new()
        .get(format!("http://{addr}/events"))
        .bearer_auth(TOKEN)
        .header(turnscope::server::viewers::VIEWER_HEADER, STALLED_ID)
        .send()
        .await
        .unwrap();
    let mut body = again.bytes_stream();
    let first = tokio::time::timeout(Duration::from_secs(10), body.next())
        .await
        .expect("the reconnect's first lines")
        .expect("a chunk")
        .unwrap();
    let first = String::from_utf8_lossy(&first);
    let line = first.lines().next().unwrap_or_default();
    assert!(
        line.contains(turnscope::server::viewers::CUT_OFF_MARK) && line.contains("\"warn\""),
        "{line}"
    );
    drop(body);
    app.shutdown().await;
}

/// A viewer alone that stops reading lets the server rest: once its socket is full and it read
/// nothing for `REST_AFTER`, the hub lets go of the bus and the turns build no events; when
/// it reads again it gets what was waiting and is dropped with a line saying why, and its
/// reconnect gets the live lines.
#[tokio::test]
async fn a_lone_viewer_that_stops_reading_lets_the_server_rest_until_it_reads_again() {
    let app = app(|c| c.server.auth_token = Some(TOKEN.into())).await;
    let addr = app.server.addr;
    // HTTP/1.0: the body comes as plain lines (no chunked framing) until the connection ends.
    let mut stalled = stalled_viewer(addr, "1.0").await;

    let sessions = app.sessions.clone();
    let session = sessions
        .open(turnscope::observe::SessionOpener::Api)
        .await
        .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let turns = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let chat = |n: usize| {
        let (sessions, session, cancel) = (sessions.clone(), session.clone(), cancel.clone());
        let turns = turns.clone();
        async move {
            for _ in 0..n {
                let reply = sessions
                    .chat_on(&session, "use the clock", None, &cancel)
                    .await
                    .unwrap();
                assert_eq!(reply.end_reason.as_deref(), Some("completed"));
                turns.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while health(addr).await["viewers"]["resting"] != true {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never rested: {}",
            health(addr).await
        );
        chat(20).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let h = health(addr).await;
    assert_eq!(h["viewers"]["listening"], false, "{h}");
    assert_eq!(h["viewers"]["connected"], 1, "{h}");
    // Resting, the turns build no events at all.
    let published = sessions.bus().published();
    chat(10).await;
    assert_eq!(
        sessions.bus().published(),
        published,
        "events were built while resting"
    );

    // It reads again: what waited in its socket, then (the kept lines let go when the rest
    // ended: what they began may have ended unseen) the line dropping it, which says why.
    let mut text = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stalled.read_to_end(&mut text))
        .await
        .expect("the woken stream ends")
        .unwrap();
    let text = String::from_utf8_lossy(&text);
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.contains(turnscope::server::viewers::DROPPED_MARK) && last.contains("rested"),
        "{last}"
    );
    let h = health(addr).await;
    assert_eq!(h["viewers"]["resting"], false, "{h}");
    assert_eq!(h["viewers"]["listening"], true, "{h}");
    // Reconnected, it is sent the sessions as they are now, then live lines.
    let mut again = viewer(addr);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while health(addr).await["viewers"]["connected"] != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "it never reconnected"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its first line lists the sessions open now (a viewer closes the others it knew).
    let first = tokio::time::timeout(Duration::from_secs(10), again.recv())
        .await
        .unwrap()
        .unwrap();
    match serde_json::from_str::<Event>(&first) {
        Ok(Event::Replica(r)) => {
            assert_eq!(r.open_sessions, Some(vec![session.number]));
            // A server without a console holds no console session from idling out.
            assert_eq!(r.console_holds, Some(false));
        }
        other => panic!("the first line is the replica: {other:?}"),
    }
    chat(1).await;
    let last = turns.load(std::sync::atomic::Ordering::Relaxed);
    let lines = until_turn_end(&mut again, last).await;
    let crossings = lines
        .iter()
        .filter(
            |l| matches!(serde_json::from_str::<Event>(l), Ok(Event::Frame(f)) if f.turn == last),
        )
        .count();
    assert!(crossings > 5, "the turn's frames came live: {crossings}");
    app.shutdown().await;
}

/// `[server] events_linger_seconds = 0`: once the last viewer left, the server lets go of the
/// bus within a tick (the default keeps listening 30 s for a viewer that comes back).
#[tokio::test]
async fn with_no_linger_the_bus_is_let_go_once_the_last_viewer_left() {
    let app = app(|c| {
        c.server.auth_token = Some(TOKEN.into());
        c.server.events_linger_seconds = 0.0;
    })
    .await;
    let addr = app.server.addr;
    let watching = open_events(addr).await;
    let mut listening = false;
    for _ in 0..100 {
        let h = health(addr).await;
        if h["viewers"]["connected"] == 1 {
            listening = h["viewers"]["listening"] == true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(listening, "a connected viewer makes the hub listen");
    drop(watching);
    let h = until_viewers(
        addr,
        "let go of the bus after the viewer left, with no linger",
        |v| v["listening"] == false,
    )
    .await;
    assert_eq!(h["viewers"]["connected"], 0, "{h}");
    app.shutdown().await;
}

/// A TCP relay to `target` that the test can cut (every connection through it closed) and
/// hold shut (connections accepted and closed at once), to break a viewer's stream the way a
/// network does.
struct Relay {
    addr: std::net::SocketAddr,
    shut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
}

impl Relay {
    async fn start(target: std::net::SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (cut, cuts) = tokio::sync::watch::channel(0u64);
        let held = shut.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if held.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let mut cuts = cuts.clone();
                cuts.mark_unchanged();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        Self { addr, shut, cut }
    }

    /// Closes every connection through the relay and refuses new ones until [`Relay::open`].
    fn cut_and_hold(&self) {
        self.shut.store(true, std::sync::atomic::Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    fn open(&self) {
        self.shut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The attached console's reader (`attach::stream`) loses its stream and reconnects after the
/// server let go of its history: the server then tells each open session and its kept turns
/// anew (written afresh, so not the bytes read before). The console is given each session
/// opening, each turn's start, tool calls and end once, and the turns after the reconnect live.
#[tokio::test]
async fn a_reconnecting_viewer_is_given_each_session_and_turn_once() {
    use tokio_util::sync::CancellationToken;
    use turnscope::observe::{Bus, SessionOpener};
    let app = app(|c| {
        c.server.auth_token = Some(TOKEN.into());
        c.server.events_linger_seconds = 0.0;
    })
    .await;
    let addr = app.server.addr;
    let relay = Relay::start(addr).await;
    let local = Bus::default();
    let mut seen = local.subscribe();
    let collected = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Event>::new()));
    let into = collected.clone();
    tokio::spawn(async move {
        while let Some(event) = seen.recv().await {
            into.lock().unwrap().push((*event).clone());
        }
    });
    let stop = CancellationToken::new();
    let reader = turnscope::attach::stream::spawn(
        format!("http://{}/events", relay.addr),
        Some(TOKEN.into()),
        local.clone(),
        None,
        stop.clone(),
    );
    eventually("the viewer is connected", || {
        reader.lock().unwrap().connected
    })
    .await;

    let session = app.sessions.open(SessionOpener::Api).await.unwrap();
    for line in ["use the clock", "hello"] {
        app.sessions
            .chat_on(&session, line, None, &CancellationToken::new())
            .await
            .unwrap();
    }
    let number = session.number;
    let ended =
        |turn: u64| {
            let collected = collected.clone();
            move || {
                collected.lock().unwrap().iter().any(
                    |e| matches!(e, Event::TurnEnded(t) if t.session == number && t.turn == turn),
                )
            }
        };
    eventually("the viewer saw turn 2 end", ended(2)).await;

    relay.cut_and_hold();
    // With no linger, the server lets go of its history once its last viewer is gone.
    until_viewers(addr, "let go of the bus once the stream was cut", |v| {
        v["listening"] == false
    })
    .await;
    relay.open();
    eventually("the viewer reconnected", || {
        let r = reader.lock().unwrap();
        r.connected && r.connects >= 2
    })
    .await;
    app.sessions
        .chat_on(&session, "hello again", None, &CancellationToken::new())
        .await
        .unwrap();
    eventually("the viewer saw turn 3 end", ended(3)).await;
    stop.cancel();

    let events = collected.lock().unwrap().clone();
    let of_session = |pick: &dyn Fn(&Event) -> bool| events.iter().filter(|e| pick(e)).count();
    assert_eq!(
        of_session(
            &|e| matches!(e, Event::Session(s) if s.session == session.number && s.closed.is_none())
        ),
        1,
        "the session is opened once"
    );
    for turn in 1..=3 {
        assert_eq!(
            of_session(
                &|e| matches!(e, Event::TurnStarted { session: s, turn: t, .. } if *s == session.number && *t == turn)
            ),
            1,
            "turn {turn} starts once"
        );
        assert_eq!(
            of_session(
                &|e| matches!(e, Event::TurnEnded(t) if t.session == session.number && t.turn == turn)
            ),
            1,
            "turn {turn} ends once"
        );
    }
    assert_eq!(
        of_session(&|e| matches!(e, Event::ToolCall(c) if c.session == session.number)),
        1,
        "the one tool call (turn 1's clock) is given once"
    );
    assert_eq!(
        of_session(&|e| matches!(e, Event::Frame(f) if f.session == session.number && f.id == 0)),
        0,
        "no finished turn's reply is told again"
    );
    app.shutdown().await;
}

/// When the server shuts down, a viewer is told its sessions closing and then its stream
/// ends cleanly (the last chunk of the response), so the shutdown does not wait out its
/// grace for a stream that would never end and then cut it (a broken body, and a restart on
/// the same store refused meanwhile as the old process still held it).
#[tokio::test]
async fn a_viewer_is_told_the_shutdown_and_its_stream_ends_cleanly() {
    let app = app(|c| c.server.auth_token = Some(TOKEN.into())).await;
    let addr = app.server.addr;
    let client = client_with_token(app.server.mcp_url()).await;
    let handle = bot_client::start(&client).await;
    bot_client::chat(&client, &handle, "watch me go").await;
    let response = open_events(addr).await;
    until_viewers(addr, "connected", |v| v["connected"] == 1).await;
    let _ = client.cancel().await;
    let shutdown = tokio::spawn(app.shutdown());
    let mut body = response.bytes_stream();
    let mut text = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(chunk) => text.extend_from_slice(&chunk),
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    })
    .await
    .expect("the stream ends");
    let text = String::from_utf8_lossy(&text);
    assert_eq!(ended, Ok(()), "a clean end, after: {text}");
    assert!(
        text.contains("\"closed\":\"server shut down\""),
        "the session's closing is told before the end: {text}"
    );
    shutdown.await.unwrap();
}

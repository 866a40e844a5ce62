//! Long turns as MCP tasks, on the wire: a raw 2026-07-28 client declaring the tasks extension
//! (`support::raw_mcp`, as Claude Code speaks it) against the real server on loopback. A turn
//! past the grace period becomes a task polled to the result a synchronous call returns;
//! cancel; unknown ids; a client without the extension; a task and `chat` reading one turn
//! once; polls keeping the conversation alive.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use turnscope::app::App;

use crate::support::app::{app, eventually};
use crate::support::raw_mcp::{RawMcp, text_of};

/// The turn record of a `chat` result without the figures that differ between two runs of
/// the same turn (its times).
fn record_without_times(result: &Value) -> Value {
    let mut record = result["_meta"]["turnscope/turn"].clone();
    let map = record.as_object_mut().expect("a turn record");
    map.remove("first_piece_ms");
    map.remove("total_ms");
    record
}

async fn tasks_app(pace: f64, words: usize, after: f64) -> App {
    app(|c| {
        c.model.pace = pace;
        c.model.words = Some(words);
        c.server.task_after_seconds = after;
    })
    .await
}

#[tokio::test]
async fn server_discover_offers_the_extension_unless_tasks_are_off() {
    for (enabled, offered) in [(true, true), (false, false)] {
        let app = app(|c| c.server.tasks = enabled).await;
        let client = RawMcp::new(&app.server.mcp_url(), "raw", true);
        let found = client.request("server/discover", json!({}), None).await;
        let extensions = &found.result()["capabilities"]["extensions"];
        assert_eq!(
            extensions.get("io.modelcontextprotocol/tasks").is_some(),
            offered,
            "{}",
            found.message
        );
        app.shutdown().await;
    }
}

#[tokio::test]
async fn a_20_second_turn_becomes_a_task_whose_result_is_what_a_synchronous_call_returns() {
    // 50 words 0.4 s apart: a 20 s turn; the default grace period is 10 s.
    let app = tasks_app(0.4, 50, 10.0).await;
    let url = app.server.mcp_url();
    let line = "tell me everything about your opening hours";
    let with_tasks = RawMcp::new(&url, "raw-tasks", true);
    let without = RawMcp::new(&url, "raw-sync", false);
    let (h1, h2) = (with_tasks.start().await, without.start().await);
    let began = Instant::now();
    let (tasked, synchronous) = tokio::join!(
        async {
            let created = with_tasks.chat(&h1, line).await;
            let answered_after = began.elapsed();
            let polls = with_tasks
                .follow(
                    created.result()["taskId"].as_str().expect("a task id"),
                    Duration::from_secs(40),
                )
                .await;
            (created, answered_after, polls)
        },
        without.chat(&h2, line)
    );
    let (created, answered_after, polls) = tasked;
    let task = created.result();
    assert_eq!(task["resultType"], "task", "{task}");
    assert_eq!(task["status"], "working");
    assert!(
        (Duration::from_secs(10)..Duration::from_secs(15)).contains(&answered_after),
        "answered with the task after the grace period: {answered_after:?}"
    );
    // The progress of the grace period came first, on the call's own stream.
    assert!(!created.progress.is_empty());
    assert_eq!(task["pollIntervalMs"], 1000);
    let ttl = task["ttlMs"].as_u64().unwrap();
    // (A millisecond over when the session's last use is stamped just after the task's
    // creation: its age and what is left of the lifetime are read apart.)
    assert!(
        (299_000..=300_050).contains(&ttl),
        "the handle's lifetime: {ttl}"
    );
    let id = task["taskId"].as_str().unwrap();
    assert_eq!(id.len(), 36);
    assert!(
        id.ends_with(&app.sessions.replica().tag()),
        "task ids carry the replica's tag: {id}"
    );
    // Polled at its interval while working: the reply so far as the status message.
    let working: Vec<&Value> = polls.iter().filter(|p| p["status"] == "working").collect();
    assert!(working.len() >= 5, "{} polls while working", working.len());
    let done = polls.last().unwrap();
    let reply = text_of(&done["result"]);
    for poll in &working {
        // As a progress message: the reply so far, its last 200 characters at most.
        let message = poll["statusMessage"].as_str().unwrap();
        assert!(message.chars().count() <= 200, "{message}");
        assert!(reply.contains(message.trim_start_matches('…')), "{message}");
    }
    let first = working[0]["statusMessage"].as_str().unwrap();
    assert!(first.starts_with("You said: tell me"), "{first}");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["resultType"], "complete");
    // Exactly what the synchronous call returned: the same text for the model, the same
    // record but for its times.
    let sync = synchronous.result();
    assert_eq!(text_of(&done["result"]), text_of(sync));
    assert_eq!(done["result"]["isError"], sync["isError"]);
    assert_eq!(
        record_without_times(&done["result"]),
        record_without_times(sync)
    );
    assert!(text_of(sync).split_whitespace().count() == 50);
    // A polled result stays the task's: polling again answers the same.
    let again = with_tasks.get_task(id).await;
    assert_eq!(again.result()["result"], done["result"]);
    app.shutdown().await;
}

/// Starts a conversation and says `line` as a client declaring the extension, with tasks
/// created at once (`task_after_seconds = 0`): the task's id.
async fn task_now(client: &RawMcp, line: &str) -> (String, String) {
    let handle = client.start().await;
    let created = client.chat(&handle, line).await;
    let id = created.result()["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {}", created.message))
        .to_string();
    (handle, id)
}

/// A task's `lastUpdatedAt` is when its status last changed: polls of a completed task do not
/// move it (each poll moved it to the poll's time).
#[tokio::test]
async fn polling_a_completed_task_leaves_its_last_updated_at_alone() {
    let app = tasks_app(0.01, 5, 0.0).await;
    let client = RawMcp::new(&app.server.mcp_url(), "raw-tasks", true);
    let (_, id) = task_now(&client, "short one").await;
    let seen = client.follow(&id, Duration::from_secs(10)).await;
    let done = seen.last().unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    let mut stamps = vec![done["lastUpdatedAt"].clone()];
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(30)).await;
        stamps.push(client.get_task(&id).await.result()["lastUpdatedAt"].clone());
    }
    assert!(stamps[0].is_string(), "{done}");
    assert!(stamps.iter().all(|s| *s == stamps[0]), "{stamps:?}");
    assert!(
        done["createdAt"].as_str() <= done["lastUpdatedAt"].as_str(),
        "{done}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn cancel_interrupts_the_turn_and_an_empty_line_still_reads_what_it_said() {
    let app = tasks_app(0.05, 200, 0.0).await;
    let url = app.server.mcp_url();
    let client = RawMcp::new(&url, "raw-tasks", true);
    let (handle, id) = task_now(&client, "talk for a while").await;
    let session = app.sessions.list().pop().unwrap();
    eventually("the bot has said something", || {
        session
            .turns()
            .last()
            .is_some_and(|t| t.with_record(|r| r.reply.contains("a while")))
    })
    .await;
    let ack = client.cancel_task(&id).await;
    assert_eq!(ack.result()["resultType"], "complete", "{}", ack.message);
    let after = client.get_task(&id).await;
    assert_eq!(after.result()["status"], "cancelled", "{}", after.message);
    assert!(after.result().get("result").is_none());
    let turn = session.turns().pop().unwrap();
    assert!(turn.is_done());
    assert_eq!(turn.snapshot().end.unwrap().label(), "interrupted");
    // A second cancel of a cancelled task is acknowledged and changes nothing.
    assert!(
        client
            .cancel_task(&id)
            .await
            .message
            .get("result")
            .is_some()
    );
    // The person stopped the task, not the conversation: the turn is unread.
    let read = RawMcp::new(&url, "raw-sync", false).chat(&handle, "").await;
    let text = text_of(read.result());
    assert!(
        text.starts_with("You said: talk for a while") && text.contains("[The bot was interrupted"),
        "{text}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn an_unknown_or_malformed_task_id_is_invalid_params() {
    let app = app(|_| {}).await;
    let client = RawMcp::new(&app.server.mcp_url(), "raw-tasks", true);
    for (id, said) in [
        (
            "00000000-0000-4000-8000-000000000000",
            "taskId: no task has this id",
        ),
        (
            "not-a-task",
            "taskId: \"not-a-ta\" is not a task id: expected the 36-character id (a UUID) that \
             chat's CreateTaskResult gave, received 10 characters",
        ),
    ] {
        for answer in [client.get_task(id).await, client.cancel_task(id).await] {
            assert_eq!(answer.error_code(), Some(-32602), "{}", answer.message);
            let message = answer.message["error"]["message"].as_str().unwrap();
            assert!(message.starts_with(said), "{message}");
        }
    }
    // The extension makes clients name the task in `Mcp-Name`, so balancers can route on it.
    let bare = client
        .request(
            "tasks/get",
            json!({"taskId": "00000000-0000-4000-8000-000000000000"}),
            None,
        )
        .await;
    assert_eq!(bare.error_code(), Some(-32020), "{}", bare.message);
    app.shutdown().await;
}

/// A `tasks/*` request whose params rmcp cannot read was answered -32601 (method not found)
/// with the method's name; it is -32602 naming the field at fault and what the method takes.
#[tokio::test]
async fn tasks_requests_with_bad_params_are_invalid_params_naming_the_field() {
    let app = app(|_| {}).await;
    let client = RawMcp::new(&app.server.mcp_url(), "raw-tasks", true);
    let cases = [
        ("tasks/get", json!({}), "params.taskId is missing"),
        (
            "tasks/cancel",
            json!({"taskId": 5}),
            "params.taskId must be a string; received a number",
        ),
        (
            "tasks/update",
            json!({"taskId": "00000000-0000-4000-8000-000000000000"}),
            "params.inputResponses is missing",
        ),
    ];
    for (method, params, fault) in cases {
        let name = params["taskId"].as_str().map(str::to_string);
        let answer = client.request(method, params, name.as_deref()).await;
        assert_eq!(
            answer.error_code(),
            Some(-32602),
            "{method}: {}",
            answer.message
        );
        let message = answer.message["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(fault) && message.contains("taskId"),
            "{method}: {message}"
        );
    }
    // The 2025-11-25 draft's methods are not offered, and the answer says where the result is.
    let listed = client.request("tasks/list", json!({}), None).await;
    assert_eq!(listed.error_code(), Some(-32601), "{}", listed.message);
    let message = listed.message["error"]["message"].as_str().unwrap();
    assert!(message.contains("tasks/get"), "{message}");
    app.shutdown().await;
}

#[tokio::test]
async fn a_client_without_the_extension_gets_the_synchronous_call_and_no_tasks_methods() {
    let app = tasks_app(0.01, 20, 0.0).await;
    let client = RawMcp::new(&app.server.mcp_url(), "raw-sync", false);
    let handle = client.start().await;
    let answer = client.chat(&handle, "hello").await;
    let result = answer.result();
    assert!(result.get("taskId").is_none(), "{result}");
    assert!(text_of(result).starts_with("You said: hello"));
    assert!(
        !answer.progress.is_empty(),
        "progress notifications as before"
    );
    let refused = client
        .get_task("00000000-0000-4000-8000-000000000000")
        .await;
    assert_eq!(refused.error_code(), Some(-32021), "{}", refused.message);
    assert!(
        refused.message["error"]["data"]["requiredCapabilities"]["extensions"]
            ["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{}",
        refused.message
    );
    // The message says where a request declares it (it said only "Missing required client
    // capability").
    let message = refused.message["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("tasks/get")
            && message.contains(
                "params._meta[\"io.modelcontextprotocol/clientCapabilities\"]\
                 .extensions[\"io.modelcontextprotocol/tasks\"]"
            ),
        "{message}"
    );
    app.shutdown().await;
}

/// With `[server] tasks = false`, `tasks/get` and `tasks/cancel` were answered with rmcp's bare
/// `{"code":-32601,"message":"tasks/get"}`, and `tasks/list` spoke of "the extension this
/// server offers": each says the config turns tasks off and chat answers synchronously.
#[tokio::test]
async fn with_tasks_off_the_tasks_methods_say_the_config_turns_them_off() {
    let app = app(|c| c.server.tasks = false).await;
    let client = RawMcp::new(&app.server.mcp_url(), "raw-tasks", true);
    let id = "00000000-0000-4000-8000-000000000000";
    for answer in [client.get_task(id).await, client.cancel_task(id).await] {
        assert_eq!(answer.error_code(), Some(-32601), "{}", answer.message);
        assert_eq!(answer.status, 404, "{}", answer.message);
        let message = answer.message["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Method not found: tasks/")
                && message.contains("[server] tasks = false")
                && message.contains("chat answers synchronously"),
            "{message}"
        );
    }
    let listed = client.request("tasks/list", json!({}), None).await;
    assert_eq!(listed.error_code(), Some(-32601), "{}", listed.message);
    let message = listed.message["error"]["message"].as_str().unwrap();
    assert!(
        !message.contains("the extension this server offers")
            && message.contains("[server] tasks = false"),
        "{message}"
    );
    app.shutdown().await;
}

/// A 2025-11-25 session was told in `initialize`'s answer that the tasks extension is offered,
/// though its chat calls never become tasks: only `server/discover` offers it now.
#[tokio::test]
async fn an_mcp_session_is_not_offered_the_tasks_extension() {
    let app = tasks_app(0.01, 5, 0.0).await;
    let session = crate::support::bot_client::connect(&app.server.mcp_url()).await;
    let info = session.peer_info().expect("initialize answered");
    assert!(
        info.protocol_version.as_str() < "2026-07-28",
        "a session: {}",
        info.protocol_version
    );
    assert!(
        !info.capabilities.supports_tasks(),
        "{:?}",
        info.capabilities
    );
    assert!(info.capabilities.tools.is_some());
    // Its chat is synchronous even with every chat of a declaring client a task at once.
    let handle = crate::support::bot_client::start(&session).await;
    let reply = crate::support::bot_client::chat(&session, &handle, "hello").await;
    assert!(crate::support::bot_client::text(&reply).starts_with("You said: hello"));
    let _ = session.cancel().await;
    // server/discover still offers it.
    let discovered = RawMcp::new(&app.server.mcp_url(), "raw", true)
        .request("server/discover", json!({}), None)
        .await;
    assert!(
        discovered.result()["capabilities"]["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some()
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_task_and_chat_read_a_turn_once_whichever_reads_first() {
    let app = tasks_app(0.02, 60, 0.0).await;
    let url = app.server.mcp_url();
    let tasks = RawMcp::new(&url, "raw-tasks", true);
    let sync = RawMcp::new(&url, "raw-sync", false);

    // An empty line while the task works reads the turn itself; the task says so.
    let (handle, id) = task_now(&tasks, "first").await;
    let read = sync.chat(&handle, "").await;
    assert!(text_of(read.result()).starts_with("You said: first"));
    let polled = tasks.get_task(&id).await;
    assert_eq!(polled.result()["status"], "completed");
    let note = text_of(&polled.result()["result"]);
    assert!(note.contains("empty line took this turn over"), "{note}");
    assert!(!note.contains("You said"), "not delivered twice: {note}");

    // A new line interrupts the task's turn: the task completes with it (the text so far and
    // the note a model reads); the new reply does not repeat it as unread.
    let created = tasks.chat(&handle, "second").await;
    let second = created.result()["taskId"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let third = sync.chat(&handle, "third").await;
    let third_text = text_of(third.result());
    assert!(third_text.starts_with("You said: third"), "{third_text}");
    assert!(third.result()["_meta"]["turnscope/turn"]["unread"].is_null());
    let interrupted = tasks.follow(&second, Duration::from_secs(10)).await;
    let done = &interrupted.last().unwrap()["result"];
    let text = text_of(done);
    assert!(
        text.starts_with("You said: second") && text.contains("[The bot was interrupted"),
        "{text}"
    );
    assert_eq!(done["_meta"]["turnscope/turn"]["end_reason"], "interrupted");

    // A task polled to its end is gone for chat: an empty line has nothing to read.
    let created = tasks.chat(&handle, "fourth").await;
    let fourth = created.result()["taskId"].as_str().unwrap().to_string();
    let polls = tasks.follow(&fourth, Duration::from_secs(10)).await;
    assert!(text_of(&polls.last().unwrap()["result"]).starts_with("You said: fourth"));
    let nothing = sync.chat(&handle, "").await;
    assert!(
        text_of(nothing.result()).starts_with("[Nothing to read"),
        "{}",
        nothing.message
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_finished_task_not_yet_collected_is_read_by_an_empty_line_once() {
    let app = tasks_app(0.01, 10, 0.0).await;
    let url = app.server.mcp_url();
    let tasks = RawMcp::new(&url, "raw-tasks", true);
    let (handle, id) = task_now(&tasks, "quick").await;
    let session = app.sessions.list().pop().unwrap();
    eventually("the turn ended", || {
        session.turns().last().is_some_and(|t| t.is_done())
    })
    .await;
    let read = RawMcp::new(&url, "raw-sync", false).chat(&handle, "").await;
    assert!(text_of(read.result()).starts_with("You said: quick"));
    let polled = tasks.get_task(&id).await;
    assert!(text_of(&polled.result()["result"]).contains("empty line took this turn over"));
    app.shutdown().await;
}

#[tokio::test]
async fn polls_keep_the_conversation_alive_and_its_lifetime_is_the_tasks() {
    let app = app(|c| {
        c.model.pace = 0.1;
        c.model.words = Some(30);
        c.server.task_after_seconds = 0.0;
        c.server.handle_seconds = 1;
        c.server.sweep_seconds = 0.1;
        c.server.task_poll_seconds = 0.2;
    })
    .await;
    let tasks = RawMcp::new(&app.server.mcp_url(), "raw-tasks", true);
    let (_, id) = task_now(&tasks, "a three second turn").await;
    // Polled every 200 ms for 3 s: three times the idle lifetime, and the session lives.
    let polls = tasks.follow(&id, Duration::from_secs(10)).await;
    assert!(polls.len() > 10, "{} polls", polls.len());
    assert_eq!(polls.last().unwrap()["status"], "completed");
    assert_eq!(app.sessions.len(), 1, "the polls kept the session");
    let first_ttl = polls[0]["ttlMs"].as_u64().unwrap();
    let last_ttl = polls.last().unwrap()["ttlMs"].as_u64().unwrap();
    assert!(
        last_ttl > first_ttl + 2000,
        "ttl grows with each poll: {first_ttl} → {last_ttl}"
    );
    // Left alone, the conversation ends after its lifetime, and its task with it.
    eventually("the idle session is swept", || app.sessions.is_empty()).await;
    let gone = tasks.get_task(&id).await;
    assert_eq!(gone.error_code(), Some(-32602), "{}", gone.message);
    app.shutdown().await;
}

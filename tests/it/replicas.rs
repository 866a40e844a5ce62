//! A replica on its own, on the real binary (the HAProxy side is `interop/tests/test_replicas.py`):
//! its id in the ready line, `/healthz` and `start`; a handle another replica issued refused
//! with a text naming it; SIGTERM draining (`/healthz` 404 at once, `start` and new lines
//! refused, the turn in flight finished and read, exit), and the drain bound.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::headless_bin::{Headless, WAIT};
use crate::support::mcp::{Client, outcome_of};

async fn health(url: &str) -> (u16, Value) {
    let response = reqwest::get(url).await.expect("/healthz answers");
    let status = response.status().as_u16();
    (status, response.json().await.expect("/healthz is JSON"))
}

/// Polls `/healthz` until it is not 200 (hang guard only).
async fn until_not_ok(url: &str) -> (u16, Value) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, body) = health(url).await;
        if status != 200 {
            return (status, body);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/healthz never left 200: {body}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until the events show `n` turns started (hang guard only).
async fn until_turns_started(bin: &Headless, n: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while bin
        .events_text()
        .matches(r#""type":"turn_started""#)
        .count()
        < n
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_replica_id_is_in_the_ready_line_healthz_initialize_start_and_events() {
    let bin = Headless::start("replica-id", "[server]\nreplica_id = \"it-a\"\n", &[]).await;
    let (status, body) = health(&bin.health_url()).await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "ok");
    assert_eq!(body["replica"]["id"], "it-a");
    let tag = body["replica"]["tag"].as_str().unwrap().to_string();
    assert!(
        bin.ready
            .contains(&format!("replica it-a (handles end in {tag})")),
        "{}",
        bin.ready
    );
    let client = Client::connect(&bin.url).await;
    // `initialize` names the replica the MCP session lives on (an attached console behind a
    // balancer compares it with the one its event stream comes from).
    let info = client.service.peer_info().expect("initialize answered");
    let said = &info.meta.as_ref().expect("initialize's _meta")["turnscope/replica"];
    assert_eq!(said["id"], "it-a", "{said}");
    assert_eq!(said["tag"], tag.as_str(), "{said}");
    let start = client.call("start", json!({})).await;
    assert_eq!(start.record["replica"], "it-a");
    let handle = crate::support::mcp::handle_of(&start);
    assert_eq!(handle.len(), 36, "handles stay 36-character UUIDs");
    assert!(handle.ends_with(&tag), "{handle} ends in {tag}");
    let events = bin.events_text();
    assert!(
        events.contains(r#""type":"replica""#) && events.contains(r#""id":"it-a""#),
        "{events}"
    );
}

#[tokio::test]
async fn a_handle_of_another_replica_is_refused_naming_it_and_start() {
    let a = Headless::start("replica-a", "[server]\nreplica_id = \"it-a\"\n", &[]).await;
    let b = Headless::start("replica-b", "[server]\nreplica_id = \"it-b\"\n", &[]).await;
    let on_a = Client::connect(&a.url).await;
    let handle = on_a.start().await;
    let a_tag = &handle[32..];
    let on_b = Client::connect(&b.url).await;
    let refused = on_b.chat(&handle, "hello").await;
    assert!(refused.is_error);
    assert!(
        refused.text.contains("belongs to another replica")
            && refused.text.contains(&format!("end in {a_tag};"))
            && refused.text.contains("this is replica it-b")
            && refused.text.contains("or that replica is gone")
            && refused.text.contains("Call start for a new handle"),
        "{}",
        refused.text
    );
    // A handle of this replica that no session has: the plain "no live session".
    let own = on_b.start().await;
    let stale = format!("00000000-0000-4000-8000-0000000{}", &own[31..]);
    let gone = on_b.chat(&stale, "hello").await;
    assert!(
        gone.is_error
            && gone.text.contains("no live session")
            && !gone.text.contains("another replica"),
        "{}",
        gone.text
    );
    // And the handle still works where it belongs.
    let fine = on_a.chat(&handle, "hello").await;
    assert!(!fine.is_error, "{}", fine.text);
}

#[tokio::test]
async fn sigterm_drains_health_404_start_refused_the_turn_in_flight_finishes_and_is_read() {
    // A turn of 40 words at 50 ms a word (2 s) is in flight when the signal comes.
    let mut bin = Headless::start(
        "replica-drain",
        "[server]\nreplica_id = \"it-d\"\ndrain_seconds = 60\n[model]\npace = 0.05\nwords = 40\n",
        &[],
    )
    .await;
    let client = Client::connect(&bin.url).await;
    let handle = client.start().await;
    let other = client.start().await;
    let in_flight = client.chat_cancellable(&handle, "a long story").await;
    until_turns_started(&bin, 1).await;

    bin.terminate();
    let (status, body) = until_not_ok(&bin.health_url()).await;
    assert_eq!(
        status, 404,
        "draining answers 404 (HAProxy's soft stop): {body}"
    );
    assert_eq!(body["status"], "draining");
    assert_eq!(body["replica"]["id"], "it-d");

    let late = Client::connect(&bin.url).await;
    let refused = late.call("start", json!({})).await;
    assert!(refused.is_error);
    assert!(
        refused.text.contains("replica it-d is draining") && refused.text.contains("call start"),
        "{}",
        refused.text
    );
    let no_new_line = client.chat(&other, "one more thing").await;
    assert!(
        no_new_line.is_error && no_new_line.text.contains("is draining"),
        "{}",
        no_new_line.text
    );

    let reply = outcome_of(
        tokio::time::timeout(WAIT, in_flight.await_response())
            .await
            .expect("the turn in flight is answered")
            .expect("a JSON-RPC answer"),
    );
    assert!(!reply.is_error, "{}", reply.text);
    assert_eq!(reply.record["end_reason"], "completed");
    assert!(reply.text.starts_with("You said: a long story"));
    assert_eq!(reply.text.split_whitespace().count(), 40);

    let exit = bin.exit().await;
    assert!(exit.success(), "{exit:?}");
}

#[tokio::test]
async fn the_drain_is_bounded_by_drain_seconds() {
    // A turn of 3000 words at 10 ms a word (30 s) cannot finish within a 0.2 s bound: the
    // replica exits anyway and the caller is answered with the turn ended by the shutdown.
    let mut bin = Headless::start(
        "replica-bound",
        "[server]\ndrain_seconds = 0.2\n[model]\npace = 0.01\nwords = 3000\n",
        &[],
    )
    .await;
    let client = Client::connect(&bin.url).await;
    let handle = client.start().await;
    let in_flight = client.chat_cancellable(&handle, "a very long story").await;
    until_turns_started(&bin, 1).await;
    bin.terminate();
    let exit = bin.exit().await;
    assert!(exit.success(), "{exit:?}");
    let reply = outcome_of(
        tokio::time::timeout(WAIT, in_flight.await_response())
            .await
            .expect("the caller is answered")
            .expect("a JSON-RPC answer"),
    );
    assert_eq!(reply.record["end_reason"], "session_ended", "{reply:?}");
}

/// What the Python SDK does right after it reads a `chat` answer from a drained server: it
/// asks again (a `Client` that has not listed the tools lists them to check the result; an MCP
/// session ends with a `DELETE`). The server exited as soon as the answer was handed back, so
/// that request met a closed port and the SDK failed the whole call, reply and all (tour U,
/// finding 1). The port stays open a moment after the last answer.
#[tokio::test]
async fn a_drained_server_stays_open_a_moment_after_its_last_answer_for_the_clients_next_request() {
    use crate::support::raw_mcp::RawMcp;
    // A turn of 20 words at 50 ms a word (1 s) is in flight when the signal comes.
    let mut bin = Headless::start(
        "drain-grace",
        "[server]\ndrain_seconds = 30\n[model]\npace = 0.05\nwords = 20\n",
        &[],
    )
    .await;
    let handle = RawMcp::new(&bin.url, "sdk-like", false).start().await;
    let in_flight = {
        let (url, handle) = (bin.url.clone(), handle.clone());
        tokio::spawn(async move {
            RawMcp::new(&url, "sdk-like", false)
                .chat(&handle, "a story")
                .await
        })
    };
    until_turns_started(&bin, 1).await;
    bin.terminate();
    let answer = tokio::time::timeout(WAIT, in_flight)
        .await
        .expect("the turn in flight is answered")
        .unwrap();
    let turn = &answer.result()["_meta"]["turnscope/turn"];
    assert_eq!(turn["end_reason"], "completed", "{turn}");

    tokio::time::sleep(Duration::from_millis(300)).await;
    let listed = reqwest::Client::new()
        .post(&bin.url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/list")
        .json(
            &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "sdk-like", "version": "0"},
            }}}),
        )
        .send()
        .await;
    let listed = match listed {
        Ok(response) => response.text().await.unwrap_or_default(),
        Err(e) => panic!("the drained server closed its port right after the answer: {e}"),
    };
    assert!(listed.contains("\"chat\""), "{listed}");
    let exit = bin.exit().await;
    assert!(exit.success(), "{exit:?}");
}

/// Calls on one handle run in order, but a new line during a drain is refused whatever it
/// would wait for: it used to queue behind the turn in flight (seconds) before it was
/// refused (tour U, finding 10).
#[tokio::test]
async fn during_a_drain_a_new_line_on_a_handle_whose_turn_runs_is_refused_at_once() {
    use crate::support::raw_mcp::{RawMcp, text_of};
    // A turn of 40 words at 100 ms a word (4 s).
    let mut bin = Headless::start(
        "drain-refuse",
        "[server]\ndrain_seconds = 30\n[model]\npace = 0.1\nwords = 40\n",
        &[],
    )
    .await;
    let handle = RawMcp::new(&bin.url, "first", false).start().await;
    let in_flight = {
        let (url, handle) = (bin.url.clone(), handle.clone());
        tokio::spawn(async move {
            RawMcp::new(&url, "first", false)
                .chat(&handle, "a long story")
                .await
        })
    };
    until_turns_started(&bin, 1).await;
    bin.terminate();
    until_not_ok(&bin.health_url()).await;
    let asked = tokio::time::Instant::now();
    let refused = RawMcp::new(&bin.url, "second", false)
        .chat(&handle, "another thing")
        .await;
    let took = asked.elapsed();
    let text = text_of(refused.result());
    assert_eq!(refused.result()["isError"], true, "{text}");
    assert!(text.contains("this server is shutting down"), "{text}");
    assert!(
        took < Duration::from_millis(1500),
        "refused after {took:?}: it waited for the turn in flight"
    );
    let answer = tokio::time::timeout(WAIT, in_flight)
        .await
        .expect("the turn in flight is answered")
        .unwrap();
    assert_eq!(
        answer.result()["_meta"]["turnscope/turn"]["end_reason"],
        "completed"
    );
    assert!(bin.exit().await.success());
}

#[tokio::test]
async fn resuming_a_stream_or_session_this_replica_never_served_is_404_not_an_empty_stream() {
    // What a client whose replica died sends to the replica the balancer picked instead.
    let bin = Headless::start("replica-resume", "", &[]).await;
    let http = reqwest::Client::new();
    let get = |session: Option<&str>| {
        let mut request = http
            .get(&bin.url)
            .header("accept", "text/event-stream")
            .header("last-event-id", "0/0/3");
        if let Some(id) = session {
            request = request.header("mcp-session-id", id);
        }
        request.send()
    };
    for session in [None, Some("a-session-another-replica-made")] {
        let response = tokio::time::timeout(WAIT, get(session))
            .await
            .expect("answered at once")
            .expect("an HTTP answer");
        assert_eq!(response.status(), 404, "{session:?}");
        let text = response.text().await.unwrap();
        assert!(
            text.contains("another replica served it") && text.contains("new MCP session"),
            "{text}"
        );
    }
}

/// The `turnscope-store` header of the answer to an `initialize` (2025-06-18, as an SDK client
/// in an MCP session sends it) and of a `tools/list` on the session it opened.
async fn store_headers(url: &str) -> (Option<String>, Option<String>) {
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<&str>| {
        let mut request = http
            .post(url)
            .header("Accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(session) = session {
            request = request
                .header("Mcp-Session-Id", session)
                .header("MCP-Protocol-Version", "2025-06-18");
        }
        request.send()
    };
    let header = |r: &reqwest::Response, name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "it", "version": "1"}}}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(init.status(), 200);
    let session = header(&init, "mcp-session-id").expect("an MCP session");
    let list = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        Some(&session),
    )
    .await
    .unwrap();
    assert_eq!(list.status(), 200);
    (
        header(&init, "turnscope-store"),
        header(&list, "turnscope-store"),
    )
}

#[tokio::test]
async fn a_replica_with_a_store_of_its_own_never_says_it_is_shared() {
    // Its handles live only here, so the recipe must go on routing them by their tag.
    let bin = Headless::start("store-own", "[server]\nreplica_id = \"it-a\"\n", &[]).await;
    assert_eq!(store_headers(&bin.url).await, (None, None));
}

/// A `redis-server` on a free loopback port, nothing kept on disk; killed on drop.
struct Redis {
    child: std::process::Child,
    port: u16,
}

impl Redis {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_on(port)
    }

    /// On `port` (again, after [`Redis::stop`]).
    fn start_on(port: u16) -> Self {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (Debian: apt-get install redis-server)");
        let deadline = std::time::Instant::now() + WAIT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server never listened"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, port }
    }
}

impl Redis {
    /// Kills it (a Redis lost while the replica runs).
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_replica_on_a_shared_store_says_so_on_every_mcp_answer() {
    // examples/haproxy.cfg learns from it that any replica serves any handle, and keeps a
    // request of an MCP session on that session's replica (interop: test_replicas_redis.py).
    let redis = Redis::start();
    let config = format!(
        "[server]\nreplica_id = \"it-a\"\n[store]\nurl = \"redis://127.0.0.1:{}/0\"\n",
        redis.port
    );
    let bin = Headless::start("store-shared", &config, &[]).await;
    let shared = Some("shared".to_string());
    assert_eq!(store_headers(&bin.url).await, (shared.clone(), shared));
}

/// Polls `/healthz` until its `status` is `want`, for at most `within`.
async fn until_status(url: &str, want: &str, within: Duration) -> Value {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let (_, body) = health(url).await;
        if body["status"] == want {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/healthz never said {want}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn an_idle_replica_says_degraded_when_redis_is_lost_and_ok_when_it_is_back() {
    // No call writes on an idle replica: before, its /healthz said ok with Redis down until a
    // call failed, so a balancer or a monitor could not tell.
    let mut redis = Redis::start();
    let port = redis.port;
    let config =
        format!("[server]\nreplica_id = \"it-a\"\n[store]\nurl = \"redis://127.0.0.1:{port}/0\"\n");
    let bin = Headless::start("store-probe", &config, &[]).await;
    let url = bin.health_url();
    let ok = health(&url).await.1;
    assert_eq!(ok["status"], "ok");
    // This Redis keeps nothing on disk: /healthz says what a restart of it would lose.
    let caveat = ok["store"]["caveat"].as_str().unwrap_or_default();
    assert!(caveat.contains("keeps nothing on disk"), "{ok}");
    redis.stop();
    // Probed on the lease renewal's tick (0.5 s); before, only the sweep (every 30 s) or a
    // failing call noticed. 10 s: far from both, on a loaded CI machine.
    let down = until_status(&url, "degraded", Duration::from_secs(10)).await;
    assert_eq!(down["store"]["status"], "degraded", "{down}");
    let said = down["store"]["error"].as_str().unwrap_or_default();
    assert!(
        said.contains(&format!("store redis://127.0.0.1:{port}/0")),
        "{down}"
    );
    let _back = Redis::start_on(port);
    let up = until_status(&url, "ok", WAIT).await;
    assert_eq!(up["store"]["status"], "ok", "{up}");
}

/// `turnscope replicas haproxy` refuses what HAProxy would refuse (a URL for an address) and a
/// replica named twice, each with exit 2 as the other argument errors.
#[test]
fn replicas_haproxy_refuses_a_url_and_a_repeated_id_with_exit_2() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .args(["replicas", "haproxy"])
            .args(args)
            .output()
            .expect("turnscope runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, said) = run(&["r1=http://127.0.0.1:7871"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("without http://"), "{said}");
    let (code, said) = run(&["r1=127.0.0.1:7871", "r1=127.0.0.1:7872"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("named twice"), "{said}");
}

/// A task's record lives in the shared store: the other replica answers its polls (working
/// while the turn runs there), and once the replica running it is killed, the poll is told
/// the turn was lost and to read it with an empty line, which then reads it `restarted`.
/// Before, every poll reaching another replica answered -32602 "no task has this id", which
/// Claude Code asks again for ever, its model never told.
#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_tasks_poll_is_answered_by_any_replica_and_a_dead_replicas_task_is_said_lost() {
    use crate::support::raw_mcp::{RawMcp, text_of};
    let redis = Redis::start();
    let config = |id: &str| {
        format!(
            "[server]\nreplica_id = \"{id}\"\ntask_after_seconds = 0.5\n[model]\npace = 0.2\nwords = 60\n\
             [store]\nurl = \"redis://127.0.0.1:{}/0\"\n",
            redis.port
        )
    };
    let mut a = Headless::start("task-a", &config("it-a"), &[]).await;
    let b = Headless::start("task-b", &config("it-b"), &[]).await;
    let on_a = RawMcp::new(&a.url, "raw-tasks", true);
    let on_b = RawMcp::new(&b.url, "raw-tasks", true);
    let handle = on_a.start().await;
    let created = on_a.chat(&handle, "tell me about the weather").await;
    let id = created.result()["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {}", created.message))
        .to_string();
    let working = on_b.get_task(&id).await;
    assert_eq!(working.result()["status"], "working", "{}", working.message);
    let _ = a.child.start_kill();
    let _ = a.child.wait().await;
    // The lease lapses 2 s after the kill; the poll watches a second more.
    let polls = on_b.follow(&id, Duration::from_secs(20)).await;
    let done = polls.last().unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], true, "{done}");
    let said = text_of(&done["result"]);
    assert!(
        said.contains("replica it-a, which stopped") && said.contains("empty line"),
        "{said}"
    );
    // As the result says: an empty line reads the turn, cut off, once.
    let read = on_b.chat(&handle, "").await;
    let text = text_of(read.result());
    assert!(text.contains("turnscope stopped"), "{}", read.message);
    let again = on_b.get_task(&id).await;
    assert_eq!(again.result()["status"], "completed", "the same verdict");
}

/// A replica restarted under its id (its tag, where the recipe sends the polls) is another
/// process: it says its predecessor's task lost rather than `working` until the record expires.
#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_replica_restarted_under_its_id_says_its_predecessors_task_lost() {
    use crate::support::raw_mcp::{RawMcp, text_of};
    let redis = Redis::start();
    let config = format!(
        "[server]\nreplica_id = \"it-a\"\ntask_after_seconds = 0.5\n[model]\npace = 0.2\nwords = 60\n\
         [store]\nurl = \"redis://127.0.0.1:{}/0\"\n",
        redis.port
    );
    let mut first = Headless::start("task-first", &config, &[]).await;
    let client = RawMcp::new(&first.url, "raw-tasks", true);
    let handle = client.start().await;
    let created = client.chat(&handle, "tell me about the weather").await;
    let id = created.result()["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {}", created.message))
        .to_string();
    let _ = first.child.start_kill();
    let _ = first.child.wait().await;
    let again = Headless::start("task-again", &config, &[]).await;
    let polls = RawMcp::new(&again.url, "raw-tasks", true)
        .follow(&id, Duration::from_secs(20))
        .await;
    let done = polls.last().unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        text_of(&done["result"]).contains("replica it-a, which stopped"),
        "{done}"
    );
}

/// A turn longer than the idle lifetime whose replica dies mid-turn: the other replica goes
/// on with the conversation (the running replica kept it alive in Redis) and reports the turn
/// cut off. Before, it found the head's last write older than the lifetime and deleted the
/// conversation as idle ("no session has this handle").
#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn a_turn_longer_than_the_lifetime_whose_replica_died_goes_on_elsewhere() {
    use crate::support::raw_mcp::{RawMcp, text_of};
    let redis = Redis::start();
    let config = |id: &str| {
        format!(
            "[server]\nreplica_id = \"{id}\"\nhandle_seconds = 4\ntasks = false\n[model]\npace = 0.1\nwords = 80\n\
             [store]\nurl = \"redis://127.0.0.1:{}/0\"\n",
            redis.port
        )
    };
    let mut a = Headless::start("long-a", &config("it-a"), &[]).await;
    let b = Headless::start("long-b", &config("it-b"), &[]).await;
    let on_a = RawMcp::new(&a.url, "raw", false);
    let handle = on_a.start().await;
    let turn = {
        let handle = handle.clone();
        // Its answer never comes (its replica is killed): the client's panic on the cut
        // stream is caught, not printed over the test's output.
        tokio::spawn(async move {
            let chat = on_a.chat(&handle, "tell me a long story");
            let _ = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(chat)).await;
        })
    };
    // An 8 s turn: killed 5 s in, past the 4 s lifetime its mark was written with.
    tokio::time::sleep(Duration::from_millis(5000)).await;
    let _ = a.child.start_kill();
    let _ = a.child.wait().await;
    turn.abort();
    let read = RawMcp::new(&b.url, "raw", false).chat(&handle, "").await;
    let text = text_of(read.result());
    assert!(text.contains("turnscope stopped"), "{}", read.message);
}

/// `sessions list` on a shared store tells a turn running on a replica from one its replica's
/// death cut off (the conversation's lease). Before, both read "in flight (running, or cut off
/// by a stop)".
#[tokio::test]
#[ignore = "needs redis-server (interop/run installs it)"]
async fn sessions_list_on_redis_tells_a_running_turn_from_one_cut_off() {
    use crate::support::raw_mcp::RawMcp;
    let redis = Redis::start();
    let url = format!("redis://127.0.0.1:{}/0", redis.port);
    let config = format!(
        "[server]\nreplica_id = \"it-a\"\ntasks = false\n[model]\npace = 0.1\nwords = 80\n\
         [store]\nurl = \"{url}\"\n"
    );
    let mut a = Headless::start("list-a", &config, &[]).await;
    let client = RawMcp::new(&a.url, "raw", false);
    let handle = client.start().await;
    tokio::spawn(async move {
        let chat = client.chat(&handle, "tell me a long story");
        let _ = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(chat)).await;
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let list = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .args(["sessions", "--store", &url, "list"])
            .output()
            .expect("turnscope runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let running = list();
    assert!(
        running.contains("turn 1 running on replica it-a"),
        "{running}"
    );
    let _ = a.child.start_kill();
    let _ = a.child.wait().await;
    // Its lease lapses 2 s after the kill.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let cut = list();
    assert!(cut.contains("turn 1 cut off (its replica stopped"), "{cut}");
}

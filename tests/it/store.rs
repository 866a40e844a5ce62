//! The session store on the real binary: a conversation through a restart (an rmcp client,
//! the same handle, the model request after the restart carrying the old history, the
//! `--events` recording after the restart holding the whole conversation), the idle
//! sweep deleting an expired stored handle, the default file per address under
//! `$XDG_STATE_HOME`, and `turnscope sessions` (list, export as events and as a test case
//! that `turnscope replay`/`turnscope test` read, delete). Crashes and bad files:
//! `store_faults.rs`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Child;

use crate::support::binary::{WAIT, ready_line, serving, terminate, url_in};
use crate::support::mcp::Client;
use crate::support::raw_mcp::RawMcp;
use crate::support::upstream::{Reply, Upstream};

/// A fresh folder for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "turnscope-store-{name}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `sqlite:PATH` for a file in `dir`.
pub fn store_url(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("sessions.sqlite3").display())
}

/// The binary, headless on a free port, keeping sessions in `store`, with `extra` flags;
/// returns the child and its ready line.
pub async fn start(store: &str, extra: &[&str]) -> (Child, String) {
    let mut args = vec!["--headless", "--port", "0", "--store", store];
    args.extend_from_slice(extra);
    let mut child = serving(&args).stderr(Stdio::piped()).spawn().unwrap();
    let ready = ready_line(&mut child).await;
    (child, ready)
}

/// `turnscope ARGS` run to its end: (exit code, stdout, stderr).
pub async fn turnscope(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn contents(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test]
async fn a_conversation_goes_on_through_a_restart_with_its_history_in_the_model_request() {
    let model = Upstream::start(vec![
        Reply::text(&["Hello", " Ada."]),
        Reply::text(&["Your name", " is Ada."]),
    ])
    .await;
    let dir = scratch("restart");
    let store = store_url(&dir);
    let url_flag = model.base_url();
    let (mut first, ready) = start(&store, &["--model-url", &url_flag]).await;
    assert!(ready.contains(&format!("store: {store}")), "{ready}");
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let handle = client.start().await;
    let said = client.chat(&handle, "My name is Ada.").await;
    assert_eq!(said.text, "Hello Ada.");
    assert!(terminate(&mut first).await.success());

    // Another process, another port, another MCP connection; the same handle; recording.
    let events = dir.join("second.jsonl");
    let events_flag = events.display().to_string();
    let (mut second, ready) = start(
        &store,
        &["--model-url", &url_flag, "--events", &events_flag],
    )
    .await;
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let answer = client.chat(&handle, "What is my name?").await;
    assert!(!answer.is_error, "{}", answer.text);
    assert_eq!(answer.text, "Your name is Ada.");
    assert_eq!(answer.record["turn"], 2, "{:?}", answer.record);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let sent = contents(&requests[1]);
    let history: Vec<&str> = sent.iter().skip(1).map(String::as_str).collect();
    assert_eq!(
        history,
        [
            "user: My name is Ada.",
            "assistant: Hello Ada.",
            "user: What is my name?"
        ],
        "the model request after the restart carries the old history: {sent:?}"
    );
    assert!(sent[0].starts_with("system: "), "{sent:?}");
    let health: Value = reqwest::get(url_in(&ready, "/mcp").replace("/mcp", "/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["store"]["url"], store.as_str());
    assert_eq!(health["store"]["status"], "ok");
    assert!(
        health["store"]["stats"]["syncs"].as_u64().unwrap() >= 2,
        "{health}"
    );
    assert!(terminate(&mut second).await.success());
    // The recording holds the conversation whole: after the reopened session's opening, its
    // turn from before the restart, then the one it went on with (before, only turn 2).
    let text = std::fs::read_to_string(&events).unwrap();
    let told: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| match e["type"].as_str() {
            Some("session") if e["restored"] == true && e["closed"].is_null() => {
                Some("reopened".to_string())
            }
            Some("turn_started") => Some(format!("turn {}: {}", e["turn"], e["line"])),
            Some("turn_ended") => Some(format!("turn {} ended", e["turn"])),
            _ => None,
        })
        .collect();
    assert_eq!(
        told,
        [
            "reopened",
            "turn 1: \"My name is Ada.\"",
            "turn 1 ended",
            "turn 2: \"What is my name?\"",
            "turn 2 ended"
        ],
        "{text}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A request sent again with the same `X-Request-ID` and line (the replicas recipe's HAProxy
/// retrying a call whose server stored the turn and died before answering) is answered from
/// the stored turn: the model is not asked again and the history holds the line once.
#[tokio::test]
async fn a_request_resent_after_a_crash_with_its_request_id_is_answered_from_the_stored_turn() {
    let model = Upstream::start(vec![
        Reply::text(&["Hello", " Ada."]),
        Reply::text(&["Bye", " Ada."]),
        Reply::text(&["Bye", " again."]),
    ])
    .await;
    let dir = scratch("resent");
    let store = store_url(&dir);
    let url_flag = model.base_url();
    let (mut first, ready) = start(&store, &["--model-url", &url_flag]).await;
    let url = url_in(&ready, "/mcp");
    let handle = RawMcp::new(&url, "lb", false).start().await;
    let sent = RawMcp::new(&url, "lb", false).with_header("x-request-id", "lb-1");
    let answered = sent.chat(&handle, "My name is Ada.").await;
    let turn = &answered.result()["_meta"]["turnscope/turn"];
    assert_eq!(
        (turn["turn"].as_u64(), turn["reply"].as_str()),
        (Some(1), Some("Hello Ada."))
    );
    first.kill().await.unwrap();

    let (mut second, ready) = start(&store, &["--model-url", &url_flag]).await;
    let url = url_in(&ready, "/mcp");
    let resent = RawMcp::new(&url, "lb", false).with_header("x-request-id", "lb-1");
    let again = resent.chat(&handle, "My name is Ada.").await;
    assert_eq!(
        again.result()["_meta"]["turnscope/turn"],
        *turn,
        "the resend gets the stored turn's record"
    );
    assert!(
        again.progress.is_empty(),
        "nothing ran: {:?}",
        again.progress
    );
    assert_eq!(model.requests().len(), 1, "the model was not asked again");
    // The same id with another line, and the same line with no id, are new turns.
    let other = resent.chat(&handle, "Goodbye.").await;
    assert_eq!(other.result()["_meta"]["turnscope/turn"]["turn"], 2);
    let plain = RawMcp::new(&url, "plain", false)
        .chat(&handle, "Goodbye.")
        .await;
    assert_eq!(plain.result()["_meta"]["turnscope/turn"]["turn"], 3);
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let history = contents(&requests[2]);
    let lines: Vec<&str> = history
        .iter()
        .filter(|m| m.starts_with("user: "))
        .map(String::as_str)
        .collect();
    assert_eq!(
        lines,
        ["user: My name is Ada.", "user: Goodbye.", "user: Goodbye."]
    );

    // Killed in the middle of a turn: the same request sent again is that turn's answer,
    // not also reported as a line that got no reply.
    model.push(Reply::Hang);
    model.push(Reply::text(&["More", " now."]));
    killed_mid_turn(&model, &url, &handle, "lb-9", "Tell me more.", &mut second).await;
    let (mut third, ready) = start(&store, &["--model-url", &url_flag]).await;
    let url = url_in(&ready, "/mcp");
    let resent = RawMcp::new(&url, "lb", false).with_header("x-request-id", "lb-9");
    let answer = resent.chat(&handle, "Tell me more.").await;
    let turn = &answer.result()["_meta"]["turnscope/turn"];
    assert_eq!(turn["reply"], "More now.", "{turn}");
    assert_eq!(turn["unread"], Value::Null, "not reported as lost: {turn}");
    assert_eq!(
        turn["turn"], 4,
        "the resend runs the turn it began, under its number (not a turn 4 logged `restarted` \
         and the line again as turn 5): {turn}"
    );
    let lines = contents(&model.requests()[4]);
    assert_eq!(
        lines.iter().filter(|m| *m == "user: Tell me more.").count(),
        1,
        "{lines:?}"
    );

    // Killed in the middle of a turn again, and another call reads the loss before the
    // balancer's resend arrives: the loss is reported to that call, once, and the resend runs
    // its line (before, it was answered with the lost turn: the loss told twice, and the
    // line never answered).
    model.push(Reply::Hang);
    model.push(Reply::text(&["Once", " more."]));
    killed_mid_turn(&model, &url, &handle, "lb-10", "And again.", &mut third).await;
    let (mut fourth, ready) = start(&store, &["--model-url", &url_flag]).await;
    let url = url_in(&ready, "/mcp");
    let read = RawMcp::new(&url, "reader", false).chat(&handle, "").await;
    let lost = &read.result()["_meta"]["turnscope/turn"];
    assert_eq!(
        (lost["end_reason"].as_str(), lost["line"].as_str()),
        (Some("restarted"), Some("And again.")),
        "{lost}"
    );
    let resent = RawMcp::new(&url, "lb", false).with_header("x-request-id", "lb-10");
    let answer = resent.chat(&handle, "And again.").await;
    let turn = &answer.result()["_meta"]["turnscope/turn"];
    assert_eq!(
        (turn["end_reason"].as_str(), turn["reply"].as_str()),
        (Some("completed"), Some("Once more.")),
        "{turn}"
    );
    assert_eq!(
        turn["unread"],
        Value::Null,
        "the loss was told once: {turn}"
    );
    assert_eq!(model.requests().len(), 7, "the line ran again");
    assert!(terminate(&mut fourth).await.success());
    let _ = std::fs::remove_dir_all(dir);
}

/// Says `line` on `handle` at `url` with the request id `request` (the balancer's), the model
/// hanging on it (its next reply a `Reply::Hang`), and kills `server` once the turn asked the
/// model: a turn lost in flight.
async fn killed_mid_turn(
    model: &Upstream,
    url: &str,
    handle: &str,
    request: &str,
    line: &str,
    server: &mut Child,
) {
    let asked = model.requests().len();
    let hanging = RawMcp::new(url, "lb", false).with_header("x-request-id", request);
    let (handle, line) = (handle.to_string(), line.to_string());
    let in_flight = tokio::spawn(async move { hanging.chat(&handle, &line).await });
    let deadline = tokio::time::Instant::now() + WAIT;
    while model.requests().len() <= asked {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn never asked the model"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.kill().await.unwrap();
    let _ = in_flight.await;
}

/// A turn the drain bound cuts (SIGTERM, `--drain-seconds`) is reported as a crash's is: once,
/// on its handle's next `chat` after the restart. It was stored ended `restarted` but read, so
/// the next line went on as if nothing happened while a `kill -9` would have told it (tour U,
/// finding 2). Stderr says how many turns the bound cut, on a line of its own; the exit status
/// stays 0.
#[tokio::test]
async fn a_turn_the_drain_bound_cuts_is_told_once_on_its_handles_next_chat_after_the_restart() {
    use crate::support::raw_mcp::text_of;
    let dir = scratch("cut");
    let store = store_url(&dir);
    let config = dir.join("turnscope.toml");
    // 400 words at 50 ms a word (20 s): far past the 0.5 s bound.
    std::fs::write(&config, "[model]\npace = 0.05\nwords = 400\n").unwrap();
    let events = dir.join("events.jsonl");
    let config = config.display().to_string();
    let flags = [
        "--config",
        &config,
        "--drain-seconds",
        "0.5",
        "--events",
        events.to_str().unwrap(),
    ];
    let (mut first, ready) = start(&store, &flags).await;
    let url = url_in(&ready, "/mcp");
    let handle = RawMcp::new(&url, "cli", false).start().await;
    let in_flight = {
        let (url, handle) = (url.clone(), handle.clone());
        tokio::spawn(async move {
            RawMcp::new(&url, "cli", false)
                .chat(&handle, "a very long story")
                .await
        })
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    while !std::fs::read_to_string(&events)
        .unwrap_or_default()
        .contains(r#""type":"turn_started""#)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let exit = terminate(&mut first).await;
    assert!(exit.success(), "{exit:?}");
    let mut said = String::new();
    tokio::io::AsyncReadExt::read_to_string(first.stderr.as_mut().unwrap(), &mut said)
        .await
        .unwrap();
    let cut: Vec<&str> = said
        .lines()
        .filter(|l| l.starts_with("turnscope: cut "))
        .collect();
    assert_eq!(cut.len(), 1, "{said}");
    assert!(
        cut[0].starts_with(
            "turnscope: cut 1 turn in flight at the drain bound (0.5 s): its line got no reply"
        ) && cut[0].contains("Raise --drain-seconds"),
        "{}",
        cut[0]
    );
    let answered = in_flight.await.unwrap();
    assert_eq!(
        answered.result()["_meta"]["turnscope/turn"]["end_reason"],
        "restarted",
        "its caller, still connected, is answered too"
    );

    let (mut second, ready) = start(&store, &["--pace", "0"]).await;
    let url = url_in(&ready, "/mcp");
    let client = RawMcp::new(&url, "cli", false);
    let told = client.chat(&handle, "hello again").await;
    let text = text_of(told.result());
    assert!(
        text.starts_with(
            "[turnscope stopped (a restart, a crash, or a replica that went down) while the bot \
             answered your previous line \"a very long story\": that line got no reply"
        ),
        "{text}"
    );
    let turn = &told.result()["_meta"]["turnscope/turn"];
    assert_eq!(turn["unread"]["end_reason"], "restarted", "{turn}");
    assert_eq!(turn["end_reason"], "completed", "{turn}");
    let after = client.chat(&handle, "").await;
    let text = text_of(after.result());
    assert!(text.contains("Nothing to read"), "told once: {text}");
    assert!(terminate(&mut second).await.success());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn the_idle_sweep_deletes_an_expired_stored_handle() {
    let dir = scratch("sweep");
    let store = store_url(&dir);
    let flags = [
        "--pace",
        "0",
        "--handle-seconds",
        "1",
        "--sweep-seconds",
        "0.2",
    ];
    let (mut first, ready) = start(&store, &flags).await;
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let handle = client.start().await;
    client.chat(&handle, "remember me").await;
    assert!(terminate(&mut first).await.success());
    let list = ["sessions", "list", "--store", &store];
    assert!(
        turnscope(&list, &[])
            .await
            .1
            .starts_with("1 stored session")
    );

    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (mut second, ready) = start(&store, &flags).await;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let (code, out, err) = turnscope(&list, &[]).await;
        assert_eq!(code, 0, "{err}");
        if out.starts_with("0 stored sessions") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never swept: {out}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let gone = client.chat(&handle, "still there?").await;
    assert!(
        gone.is_error && gone.text.contains("no session has this handle"),
        "{}",
        gone.text
    );
    assert!(terminate(&mut second).await.success());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn the_default_store_is_a_file_per_address_under_the_state_directory() {
    let state = scratch("xdg");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }
    .to_string();
    let mut child = serving(&["--headless", "--port", &port, "--pace", "0"])
        .env("XDG_STATE_HOME", &state)
        .spawn()
        .unwrap();
    let ready = ready_line(&mut child).await;
    let file = state
        .join("turnscope")
        .join(format!("sessions-127.0.0.1-{port}.sqlite3"));
    assert!(
        ready.contains(&format!("store: sqlite:{}", file.display())),
        "{ready}"
    );
    assert!(file.exists());
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let handle = client.start().await;
    #[cfg(unix)]
    {
        // It holds conversations: its user's alone, the folder turnscope made and its files.
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state.join("turnscope")), 0o700);
        assert_eq!(mode(&file), 0o600);
        let wal = file.with_extension("sqlite3-wal");
        if wal.exists() {
            assert_eq!(mode(&wal), 0o600, "SQLite's own files take the store's");
        }
    }
    // `turnscope sessions` finds the same file from the port alone.
    let state_env = state.to_str().unwrap();
    let (code, out, err) = turnscope(
        &["sessions", "list", "--port", &port],
        &[("XDG_STATE_HOME", state_env)],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&handle[..8]), "{out}");
    // A second server on the same address's file stops at once, exit 2, naming the file.
    let (code, _, err) = turnscope(
        &[
            "--headless",
            "--port",
            "0",
            "--store",
            &format!("sqlite:{}", file.display()),
        ],
        &[],
    )
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&file.display().to_string()) && err.contains("another turnscope process"),
        "{err}"
    );
    assert!(terminate(&mut child).await.success());
    let _ = std::fs::remove_dir_all(state);
}

/// `turnscope sessions` looking for the default file of an address no server used (the one it
/// ran on had another port) lists the store files the state directory holds, each with its
/// address, size, last write and sessions (counted while its server holds it), and the flags
/// that pick it; with none there, it says so and where they would be.
#[tokio::test]
async fn sessions_without_the_default_file_lists_the_store_files_there_are() {
    let state = scratch("others");
    let state_env = state.to_str().unwrap();
    let env = [("XDG_STATE_HOME", state_env)];
    let folder = state.join("turnscope");
    let (code, out, err) = turnscope(&["sessions", "list"], &env).await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("no store file for 127.0.0.1:7870")
            && err.contains(&format!(
                "{} is not there",
                folder.join("sessions-127.0.0.1-7870.sqlite3").display()
            ))
            && err.contains(&format!("nor any other: {}", folder.display()))
            && err.contains("--store sqlite:PATH"),
        "{err}"
    );

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }
    .to_string();
    let mut child = serving(&["--headless", "--port", &port, "--pace", "0"])
        .env("XDG_STATE_HOME", &state)
        .spawn()
        .unwrap();
    let ready = ready_line(&mut child).await;
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let handle = client.start().await;
    client.chat(&handle, "keep this").await;
    // The server holds its file's lock: the file is counted all the same.
    for action in [&["list"][..], &["show", &handle[..8]]] {
        let mut args = vec!["sessions"];
        args.extend_from_slice(action);
        let (code, _, err) = turnscope(&args, &env).await;
        assert_eq!(code, 2, "{err}");
        let row = err
            .lines()
            .find(|l| l.contains(&format!("127.0.0.1:{port}")))
            .unwrap_or_else(|| panic!("the file is listed: {err}"));
        assert!(
            row.contains("KiB")
                && row.contains("UTC")
                && row.contains("1 session ")
                && row.ends_with(&format!("--port {port}")),
            "{row}"
        );
        assert!(
            err.contains("holds 1 store file of other addresses"),
            "{err}"
        );
    }
    // Asked for another host, the flags name the file's.
    let (_, _, err) = turnscope(&["sessions", "list", "--host", "0.0.0.0"], &env).await;
    assert!(
        err.contains(&format!("--host 127.0.0.1 --port {port}")),
        "{err}"
    );
    // And the flags it gave find it.
    let (code, out, err) = turnscope(&["sessions", "list", "--port", &port], &env).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&handle[..8]), "{out}");
    assert!(terminate(&mut child).await.success());
    let _ = std::fs::remove_dir_all(state);
}

#[tokio::test]
async fn stored_sessions_are_listed_exported_for_replay_and_test_and_deleted() {
    let dir = scratch("cli");
    let store = store_url(&dir);
    let (mut server, ready) = start(&store, &["--pace", "0"]).await;
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let handle = client.start().await;
    client.chat(&handle, "please echo remember this").await;
    client.chat(&handle, "thank you").await;
    let other = client.start().await;
    let prefix = &handle[..8];

    // Listing and exporting read the file while the server uses it.
    let (code, out, err) = turnscope(&["sessions", "list", "--store", &store, "--json"], &[]).await;
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    let row = rows.iter().find(|r| r["prefix"] == prefix).unwrap();
    assert_eq!(row["turns"], 2);
    assert!(
        !out.contains(&handle) && !out.contains(&other),
        "no handle is shown whole"
    );
    let events = dir.join("s.events.jsonl");
    let (code, _, err) = turnscope(
        &[
            "sessions",
            "export",
            prefix,
            "--store",
            &store,
            "-o",
            events.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("turnscope replay"), "{err}");
    let text = std::fs::read_to_string(&events).unwrap();
    #[cfg(unix)]
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&events).unwrap().permissions())
            & 0o777,
        0o600,
        "an exported conversation is its owner's alone"
    );
    let (read, problems) = turnscope::observe::recorder::read_events(&text);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(text.contains("\"name\":\"echo\""), "the tool call is in it");
    assert!(text.contains("thank you"));
    assert!(read.len() > 6);
    // Without --output, a redirected stdout (here a pipe) gets the same events, and no default
    // file is left in the working directory.
    let (code, out, err) = turnscope(&["sessions", "export", prefix, "--store", &store], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, text, "the piped export is the file's text");
    assert!(
        !std::path::Path::new(&format!("turnscope-session-{prefix}.events.jsonl")).exists(),
        "no default file when stdout is redirected"
    );
    let case = dir.join("s.test.toml");
    let (code, _, err) = turnscope(
        &[
            "sessions",
            "export",
            prefix,
            "--as",
            "test",
            "--store",
            &store,
            "-o",
            case.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    // The case runs green against the same bot.
    let (code, out, err) = turnscope(&["test", "--pace", "0", case.to_str().unwrap()], &[]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    // Exported again (by the whole handle, as a client prints it) over the case the person
    // edited: refused, the edits kept (before, written over unsaid); --force writes over it.
    let edited = format!(
        "{}\n# my own expectations\n",
        std::fs::read_to_string(&case).unwrap()
    );
    std::fs::write(&case, &edited).unwrap();
    let again = [
        "sessions",
        "export",
        &handle,
        "--as",
        "test",
        "--store",
        &store,
        "-o",
        case.to_str().unwrap(),
    ];
    let (code, _, err) = turnscope(&again, &[]).await;
    assert_ne!(code, 0);
    assert!(
        err.contains("is there already") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&case).unwrap(), edited);
    let (code, _, err) = turnscope(&[&again[..], &["--force"]].concat(), &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(!std::fs::read_to_string(&case).unwrap().contains("# my own"));

    // Deleting needs the file to itself: refused while the server runs.
    let delete = ["sessions", "delete", prefix, "--store", &store];
    let (code, _, err) = turnscope(&delete, &[]).await;
    assert_ne!(code, 0);
    assert!(err.contains("a running turnscope server uses it"), "{err}");
    assert!(terminate(&mut server).await.success());
    let (code, out, err) = turnscope(&delete, &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("deleted session {prefix}")),
        "{out}"
    );
    let (_, out, _) = turnscope(&["sessions", "list", "--store", &store], &[]).await;
    assert!(
        out.starts_with("1 stored session") && !out.contains(prefix),
        "{out}"
    );
    // Gone: the hint names the store it looked in, so the listing it suggests reads the same
    // one (it read the default port's file: tour O).
    let (code, _, err) = turnscope(&["sessions", "export", prefix, "--store", &store], &[]).await;
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("`turnscope sessions list --store {store}")),
        "{err}"
    );
    let (code, out, _) = turnscope(
        &[
            "sessions",
            "delete",
            "--expired",
            "--handle-seconds",
            "0",
            "--store",
            &store,
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0);
    assert!(out.starts_with("deleted 1 session"), "{out}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A restart with the same `--events FILE` keeps the earlier run's recording, moved aside
/// under a dated name (before, the file was emptied: the run before the restart was lost
/// unsaid); the server says where, and each file is one run, read back whole.
#[tokio::test]
async fn an_events_file_from_an_earlier_run_is_kept_beside_the_new_one() {
    use tokio::io::AsyncReadExt;
    let dir = scratch("events-aside");
    let store = store_url(&dir);
    let events = dir.join("events.jsonl");
    let events_flag = events.display().to_string();
    let mut said = String::new();
    for line in ["a line before the restart", "a line after it"] {
        let (mut child, ready) = start(&store, &["--events", &events_flag]).await;
        let client = Client::connect(&url_in(&ready, "/mcp")).await;
        let handle = client.start().await;
        client.chat(&handle, line).await;
        assert!(terminate(&mut child).await.success());
        said.clear();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut said)
            .await
            .unwrap();
    }
    let kept: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("events.") && name.ends_with(".jsonl") && name != "events.jsonl"
        })
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        said.contains(&format!(
            "--events {events_flag}: the earlier recording there is kept as {}",
            kept[0].display()
        )),
        "{said}"
    );
    let lines_in = |path: &Path| -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        let (read, problems) = turnscope::observe::recorder::read_events(&text);
        assert!(problems.is_empty(), "{problems:?}");
        read.iter()
            .filter_map(|e| match e {
                turnscope::observe::Event::TurnStarted { line, .. } => Some(line.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(lines_in(&kept[0]), ["a line before the restart"]);
    assert_eq!(lines_in(&events), ["a line after it"]);
    let _ = std::fs::remove_dir_all(dir);
}

/// `--events-max-mib` cuts the recording into pieces: past the size the file is moved aside
/// (dated), the run's piece before that one deleted (two pieces kept), and the new piece
/// opens with the session open then and its kept turns, so `turnscope replay` reads each
/// piece whole. Without `--events FILE` (or with `-`) the flag exits 2, saying why.
#[tokio::test]
async fn an_events_file_past_its_size_goes_on_in_a_new_piece_that_opens_whole() {
    use tokio::io::AsyncReadExt;
    let dir = scratch("events-pieces");
    let store = store_url(&dir);
    let events = dir.join("events.jsonl");
    let events_flag = events.display().to_string();
    let (mut child, ready) = start(
        &store,
        &[
            "--events",
            &events_flag,
            "--events-max-mib",
            "1",
            "--pace",
            "0",
        ],
    )
    .await;
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let handle = client.start().await;
    // The embedded model says a line back: a 150 kB line puts ~600 kB in the file (the line,
    // and the reply at each hop of its frames), in long words: few frames, none lost.
    let lines: Vec<String> = (0..5)
        .map(|n| format!("line {n} {}", format!("{} ", "w".repeat(500)).repeat(300)))
        .collect();
    for line in &lines {
        client.chat(&handle, line).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(terminate(&mut child).await.success());
    let mut said = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .await
        .unwrap();
    let pieces: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("events.") && name.ends_with(".jsonl") && name != "events.jsonl"
        })
        .collect();
    assert_eq!(
        pieces.len(),
        1,
        "one piece kept before the current one: {pieces:?}\n{said}"
    );
    let cuts = said.matches("the file reached 1 MiB").count();
    assert!(cuts >= 2, "{cuts} cuts: {said}");
    assert!(said.contains("was deleted"), "{said}");
    let mut with_the_last_line = Vec::new();
    for piece in [&pieces[0], &events] {
        let size = std::fs::metadata(piece).unwrap().len();
        // A cut comes after a burst: at most one turn's lines past the size.
        assert!(size < 2 << 20, "{} is {size} bytes", piece.display());
        let text = std::fs::read_to_string(piece).unwrap();
        let (read, problems) = turnscope::observe::recorder::read_events(&text);
        assert!(problems.is_empty(), "{problems:?}");
        // Each piece begins with the note; a piece that holds turns opens their session
        // before the first of them.
        let turnscope::observe::Event::Log { message, .. } = &read[0] else {
            panic!("{} begins with {:?}", piece.display(), read[0]);
        };
        assert!(message.contains("goes on in a new piece"), "{message}");
        let started: Vec<(usize, u64)> = read
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e {
                turnscope::observe::Event::TurnStarted { turn, .. } => Some((i, *turn)),
                _ => None,
            })
            .collect();
        if let Some((first_turn, _)) = started.first() {
            let opened = read
                .iter()
                .position(|e| matches!(e, turnscope::observe::Event::Session(s) if s.session == 1))
                .expect("the session's opening");
            assert!(opened < *first_turn, "{}", piece.display());
        }
        if started.iter().any(|(_, turn)| *turn == 5) {
            with_the_last_line = started.iter().map(|(_, turn)| *turn).collect();
        }
    }
    // The piece with the last line opened with the conversation's turns before it, told again.
    assert_eq!(
        with_the_last_line.last(),
        Some(&5),
        "{with_the_last_line:?}"
    );
    assert_eq!(
        with_the_last_line.first(),
        Some(&1),
        "the opening tells the kept turns: {with_the_last_line:?}"
    );
    for (flags, says) in [
        (
            vec!["--headless", "--events-max-mib", "1"],
            "no --events FILE",
        ),
        (
            vec!["--headless", "--events", "-", "--events-max-mib", "1"],
            "split -C 1M",
        ),
    ] {
        let (code, _, err) = turnscope(&flags, &[]).await;
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says), "{err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A store URL that is none (a setting it does not take, a database that is no number) exits
/// 2 as a bad argument does, and so does `sessions list` against a Redis nothing answers, as
/// the main mode does for it (both exited 1).
#[tokio::test]
async fn a_store_url_that_is_none_or_a_redis_nobody_answers_exits_2() {
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let unreachable = format!("redis://127.0.0.1:{closed}/0");
    let cases: [(Vec<String>, &str); 5] = [
        (
            vec![
                "--store".into(),
                format!("redis://127.0.0.1:{closed}/0?prefix=a&foo=b"),
            ],
            "foo",
        ),
        (
            vec!["--store".into(), format!("redis://127.0.0.1:{closed}/abc")],
            "abc",
        ),
        (
            vec![
                "sessions".into(),
                "list".into(),
                "--store".into(),
                format!("redis://127.0.0.1:{closed}/abc"),
            ],
            "abc",
        ),
        (
            vec![
                "sessions".into(),
                "list".into(),
                "--store".into(),
                unreachable.clone(),
            ],
            &unreachable,
        ),
        (
            vec![
                "--headless".into(),
                "--port".into(),
                "0".into(),
                "--store".into(),
                unreachable.clone(),
            ],
            &unreachable,
        ),
    ];
    for (args, named) in cases {
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        if args[0] == "--store" {
            args.splice(0..0, ["--headless", "--port", "0"]);
        }
        let run = tokio::time::timeout(WAIT, turnscope(&args, &[]))
            .await
            .unwrap_or_else(|_| panic!("{args:?} kept running"));
        let (code, _, err) = run;
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("turnscope: ") && err.contains(named) && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}

/// `sessions export --as test` of a conversation with a turn a kill cut off says what it
/// wrote: the answered turns, and the one left out with why, on stderr and in the file's
/// heading (it said "3 turns" of a file holding 2: tour U #7).
#[tokio::test]
async fn an_exported_test_case_counts_the_turns_it_holds_and_says_which_it_left_out() {
    let model = Upstream::start(vec![
        Reply::text(&["One."]),
        Reply::Hang,
        Reply::text(&["Three."]),
    ])
    .await;
    let dir = scratch("export-left-out");
    let store = store_url(&dir);
    let url_flag = model.base_url();
    let (mut first, ready) = start(&store, &["--model-url", &url_flag]).await;
    let url = url_in(&ready, "/mcp");
    let handle = RawMcp::new(&url, "lb", false).start().await;
    RawMcp::new(&url, "lb", false).chat(&handle, "first").await;
    killed_mid_turn(&model, &url, &handle, "lb-2", "second", &mut first).await;
    let (mut second, ready) = start(&store, &["--model-url", &url_flag]).await;
    let url = url_in(&ready, "/mcp");
    let answer = RawMcp::new(&url, "lb", false).chat(&handle, "third").await;
    assert_eq!(
        answer.result()["_meta"]["turnscope/turn"]["turn"],
        3,
        "{answer:?}"
    );
    assert!(terminate(&mut second).await.success());

    let case = dir.join("s.test.toml");
    let (code, _, err) = turnscope(
        &[
            "sessions",
            "export",
            &handle[..8],
            "--as",
            "test",
            "--store",
            &store,
            "-o",
            case.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&case).unwrap();
    assert_eq!(text.matches("[[case.turn]]").count(), 2, "{text}");
    assert!(
        err.contains("(2 of its 3 turns) written to")
            && err.contains(
                "left out: turn 2: turnscope stopped while it ran, so it got no reply to expect"
            ),
        "{err}"
    );
    assert!(
        text.contains("# Left out: turn 2: turnscope stopped while it ran"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A turn a kill cut off is reported with the config version it ran on, as every other turn
/// is: it was `null` (tour U #12). It ran on version 2 (a reload before it), and is reported
/// after the restart, whose config is version 1 again.
#[tokio::test]
async fn a_turn_cut_off_by_a_kill_is_reported_with_the_config_version_it_ran_on() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let model = Upstream::start(vec![Reply::Hang]).await;
    let dir = scratch("lost-version");
    let store = store_url(&dir);
    let config = dir.join("turnscope.toml");
    std::fs::write(&config, "[bot]\nsystem_prompt = \"one\"\n").unwrap();
    let config_flag = config.to_str().unwrap();
    let url_flag = model.base_url();
    let flags = ["--model-url", &url_flag, "--config", config_flag];
    let (mut first, ready) = start(&store, &flags).await;
    std::fs::write(&config, "[bot]\nsystem_prompt = \"two\"\n").unwrap();
    crate::support::binary::signal(&first, "HUP");
    let mut stderr = BufReader::new(first.stderr.take().unwrap()).lines();
    tokio::time::timeout(WAIT, async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            if line.contains("config reloaded") {
                return;
            }
        }
        panic!("stderr ended before the reload");
    })
    .await
    .expect("the reload is said");
    let url = url_in(&ready, "/mcp");
    let handle = RawMcp::new(&url, "lb", false).start().await;
    killed_mid_turn(&model, &url, &handle, "lb-1", "hello", &mut first).await;

    let (mut second, ready) = start(&store, &flags).await;
    let url = url_in(&ready, "/mcp");
    let read = RawMcp::new(&url, "reader", false).chat(&handle, "").await;
    let lost = &read.result()["_meta"]["turnscope/turn"];
    assert_eq!(lost["end_reason"], "restarted", "{lost}");
    assert_eq!(lost["config_version"], 2, "{lost}");
    assert!(terminate(&mut second).await.success());
    let _ = std::fs::remove_dir_all(dir);
}

/// `sessions show PREFIX` prints a stored conversation as plain text, as the console's `e`
/// exports it: the greeting it opened with, each line and reply with its end, and the turn a
/// kill cut off (tour U #11: there was no way to read one in a terminal but as event JSON or
/// the replay's screen). A `--store` path without its `sqlite:` is refused with the URL it
/// most likely meant.
#[tokio::test]
async fn sessions_show_prints_a_stored_conversation_as_text() {
    let model = Upstream::start(vec![
        Reply::text(&["The shop opens", " at nine."]),
        Reply::Hang,
    ])
    .await;
    let dir = scratch("show");
    let store = store_url(&dir);
    let config = dir.join("turnscope.toml");
    std::fs::write(&config, "[bot]\ngreeting = \"Hello, I am Hours.\"\n").unwrap();
    let url_flag = model.base_url();
    let flags = [
        "--model-url",
        &url_flag,
        "--config",
        config.to_str().unwrap(),
    ];
    let (mut server, ready) = start(&store, &flags).await;
    let url = url_in(&ready, "/mcp");
    let handle = RawMcp::new(&url, "lb", false).start().await;
    RawMcp::new(&url, "lb", false)
        .chat(&handle, "when do you open?")
        .await;
    killed_mid_turn(&model, &url, &handle, "lb-2", "and on sunday?", &mut server).await;

    let prefix = &handle[..8];
    let (code, out, err) = turnscope(&["sessions", "show", prefix, "--store", &store], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!(
            "turnscope session {prefix} ({store}) · mcp: lb · 2 turns"
        )),
        "{out}"
    );
    // In the order said: the greeting, each line, its end and reply, the line cut off.
    let mut rest = out.as_str();
    for said in [
        "bot   Hello, I am Hours.",
        "user  when do you open?",
        "end              completed after",
        "Reply\n  The shop opens at nine.",
        "user  and on sunday?",
        "end              cut off: in flight when its server stopped; its client is told at its \
         next call\n",
    ] {
        let at = rest
            .find(said)
            .unwrap_or_else(|| panic!("{said:?} after what came before:\n{out}"));
        rest = &rest[at + said.len()..];
    }
    let path = dir.join("sessions.sqlite3");
    let bare = path.to_str().unwrap();
    let (code, _, err) = turnscope(&["sessions", "show", prefix, "--store", bare], &[]).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("did you mean sqlite:{bare}?")),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

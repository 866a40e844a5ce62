//! The real binary in `--headless` mode: ready line, health, MCP, `--events`, and a clean
//! exit on SIGTERM with every turn ended.

use std::process::Stdio;
use std::time::Duration;

use crate::support::binary::{ready_line, serving, terminate, url_in};
use crate::support::mcp::Client;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(10);

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("turnscope-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn headless_serves_mcp_records_events_and_exits_cleanly_on_sigterm() {
    let dir = scratch("headless");
    let config = dir.join("turnscope.toml");
    // No drain: the signal ends the turn in flight (draining: tests/it/replicas.rs).
    std::fs::write(
        &config,
        "[server]\ndrain_seconds = 0\n[model]\npace = 0.05\nwords = 200\n",
    )
    .unwrap();
    let events = dir.join("events.jsonl");
    let mut child = serving(&["--headless", "--port", "0", "--config"])
        .arg(&config)
        .arg("--events")
        .arg(&events)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = ready_line(&mut child).await;
    assert!(ready.contains("embedded scripted model"), "{ready}");
    let url = url_in(&ready, "/mcp");
    let health: Value = reqwest::get(url.replace("/mcp", "/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");

    let client = Client::connect(&url).await;
    let h = client.start().await;
    // A long turn is in flight when the signal comes.
    let handle = h.clone();
    let long = tokio::spawn(async move { client.chat(&handle, "talk for a while").await });
    tokio::time::sleep(Duration::from_millis(300)).await;

    let status = terminate(&mut child).await;
    assert!(status.success(), "exit status {status:?}");
    // The caller waiting on that turn got its answer before the server went.
    let answer = tokio::time::timeout(WAIT, long)
        .await
        .expect("the caller is answered")
        .unwrap();
    assert_eq!(answer.record["end_reason"], "session_ended", "{answer:?}");
    assert!(answer.text.starts_with("You said:"), "{}", answer.text);

    let text = std::fs::read_to_string(&events).unwrap();
    let parsed: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSONL line {l:?}: {e}")))
        .collect();
    let of = |ty: &str| {
        parsed
            .iter()
            .filter(|e| e["type"] == ty)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(of("turn_started").len(), 1);
    let ended = of("turn_ended");
    assert_eq!(ended.len(), 1, "every turn ends with a reason");
    assert_eq!(ended[0]["reason"], "session_ended");
    let sessions = of("session");
    assert_eq!(sessions.len(), 2, "opened and closed: {sessions:?}");
    assert_eq!(sessions[1]["closed"], "server shut down");
    assert!(
        !text.contains(&h),
        "the full handle never appears in events"
    );
    assert!(!of("frame").is_empty());
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn a_bad_config_file_fails_at_start_naming_file_and_key() {
    let dir = scratch("badconfig");
    let config = dir.join("bad.toml");
    std::fs::write(&config, "[server]\nprot = 1\n").unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(["--headless", "--config"])
        .arg(&config)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml") && err.contains("prot"), "{err}");
    std::fs::remove_dir_all(dir).ok();
}

/// A value of the wrong type stops the start with what a reload says of it (the file, its
/// line and column, the key's whole path, what was expected), then the line quoted with a
/// caret: the start's message named no key (tour U #8).
#[tokio::test]
async fn a_wrong_type_at_start_names_the_key_path_as_a_reload_does() {
    let dir = scratch("wrongtype");
    let config = dir.join("type.toml");
    std::fs::write(&config, "[bot]\nround_cap = \"many\"\n").unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(["--headless", "--port", "0", "--config"])
        .arg(&config)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!(
            "turnscope: config file {}:2:13: bot.round_cap: invalid type: string \"many\", \
             expected a whole number, 0 or more",
            config.display()
        ),
        "{err}"
    );
    assert!(
        err.contains("2 | round_cap = \"many\"") && err.contains("^^^^^^"),
        "the line quoted with its caret: {err}"
    );
    std::fs::remove_dir_all(dir).ok();
}

/// Flags obey the rules of the keys they set, and the error names the flag: before, `--pace inf`
/// panicked the model's task on every answer, `--sweep-seconds 1e20` panicked at start, and
/// `--sessions 0` was taken although `server.sessions = 0` is refused.
#[tokio::test]
async fn flags_are_validated_like_the_config_file() {
    let dir = scratch("badflags");
    for (flags, named) in [
        (
            &["--headless", "--port", "0", "--pace", "inf"][..],
            "--pace",
        ),
        (&["--headless", "--port", "0", "--pace", "1e300"], "--pace"),
        (
            &["--headless", "--port", "0", "--sweep-seconds", "1e20"],
            "--sweep-seconds",
        ),
        (
            &["--headless", "--port", "0", "--sessions", "0"],
            "--sessions",
        ),
        (
            &["--headless", "--port", "0", "--handle-seconds", "0"],
            "--handle-seconds",
        ),
        (
            &["model", "serve", "--port", "0", "--pace", "inf"],
            "--pace",
        ),
    ] {
        let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .args(flags)
            .current_dir(&dir)
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(std::time::Duration::from_secs(10), run)
            .await
            .unwrap_or_else(|_| panic!("{flags:?} was accepted: the process kept running"))
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} was accepted");
        let says_why = err.contains("expected") || err.contains("at least 1");
        assert!(err.contains(named) && says_why, "{flags:?}: {err}");
        assert!(!err.contains("panicked"), "{flags:?}: {err}");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test]
async fn model_serve_speaks_the_openai_wire_format() {
    let mut child = serving(&[
        "model", "serve", "--port", "0", "--pace", "0", "--words", "5",
    ])
    .spawn()
    .unwrap();
    let base = url_in(&ready_line(&mut child).await, "/v1");
    let models: Value = reqwest::get(format!("{base}/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "turnscope-scripted");
    let whole: Value = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(&serde_json::json!({"model": "x", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        whole["choices"][0]["message"]["content"],
        "You said: hi and that"
    );
    assert_eq!(whole["object"], "chat.completion");
    let bad = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 400);
    let msg: Value = bad.json().await.unwrap();
    assert!(
        msg["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON")
    );
    // A role no real server takes is refused as they refuse it (it was answered).
    let typo = reqwest::Client::new()
        .post(format!("{base}/chat/completions"))
        .json(&serde_json::json!({"model": "x", "messages": [{"role": "syste", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(typo.status().as_u16(), 400);
    let msg: Value = typo.json().await.unwrap();
    let said = msg["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("messages[0].role `syste` is not a role") && said.contains("system, "),
        "{said}"
    );
    child.kill().await.ok();
}

/// `--events -`: stdout carries the events only, one JSON object a line (so `| jq` works), and
/// the ready line goes to stderr; where stdout is a terminal the console draws on, or `--json`
/// writes, the flag is refused instead of mixing them.
#[tokio::test]
async fn events_to_stdout_are_pure_json_lines_and_the_ready_line_goes_to_stderr() {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
    let mut child = serving(&["--headless", "--port", "0", "--pace", "0", "--events", "-"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = tokio::time::timeout(WAIT, async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            if line.starts_with("turnscope ready: ") {
                return line;
            }
        }
        panic!("no ready line on stderr");
    })
    .await
    .expect("the ready line in time");
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
    let mut stdout = child.stdout.take().unwrap();
    let reading = tokio::spawn(async move {
        let mut all = String::new();
        stdout.read_to_string(&mut all).await.unwrap();
        all
    });
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let h = client.start().await;
    let answer = client.chat(&h, "echo hi").await;
    assert_eq!(answer.record["end_reason"], "completed", "{answer:?}");
    assert!(terminate(&mut child).await.success());
    let all = tokio::time::timeout(WAIT, reading).await.unwrap().unwrap();
    let mut types = std::collections::BTreeSet::new();
    for line in all.lines() {
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout line is not one JSON event: {line:?}: {e}"));
        types.insert(
            event["type"]
                .as_str()
                .expect("every event has a type")
                .to_string(),
        );
    }
    for expected in ["turn_started", "turn_ended", "tool_call", "mcp"] {
        assert!(types.contains(expected), "no {expected} event in {types:?}");
    }

    for (flags, says) in [
        (&["--events", "-", "--port", "0"][..], "--headless"),
        (
            &["test", "--json", "--events", "-", "examples/bot.test.toml"],
            "both write to stdout",
        ),
    ] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope"))
            .args(flags)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(WAIT, out).await.unwrap().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{flags:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{flags:?} wrote to stdout");
    }
}

/// The start-up check of the model server warns when it cannot be reached, without holding
/// the ready line back: against a server that accepts and never answers, the ready line says
/// it was ready before the check's 2 s could have passed, and the warning follows on stderr.
#[tokio::test]
async fn an_unreachable_model_server_is_named_at_start_and_the_ready_line_does_not_wait() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", silent.local_addr().unwrap());
    // Accepts connections and holds them, answering nothing.
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let mut child = serving(&[
        "--headless",
        "--port",
        "0",
        "--model-url",
        &url,
        "--model",
        "m",
    ])
    .env_remove("OPENAI_API_KEY")
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let ready = ready_line(&mut child).await;
    let ms: f64 = ready
        .rsplit("ready in ")
        .next()
        .and_then(|t| t.trim_end_matches(" ms").parse().ok())
        .unwrap_or_else(|| panic!("no time in {ready:?}"));
    assert!(
        ms < 2000.0,
        "the ready line waited for the model check: {ready}"
    );
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let warning = tokio::time::timeout(WAIT, async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            if line.contains("GET /models") {
                return line;
            }
        }
        panic!("no model check warning on stderr");
    })
    .await
    .expect("the warning in time");
    assert!(
        warning.contains(&url) && warning.contains("did not answer GET /models within 2 s"),
        "{warning}"
    );
    child.kill().await.ok();
    holder.abort();
}

/// At `TURNSCOPE_LOG=info` the log is turnscope's: the MCP SDK's three lines per MCP session
/// ("Service initialized as server", naming the SDK rather than the client) and its warning
/// for each error turnscope answers on purpose are left out unless the filter names rmcp.
#[tokio::test]
async fn at_info_the_log_is_turnscopes_own_not_the_sdks_per_request_lines() {
    let mut child = serving(&["--headless", "--port", "0"])
        .env("TURNSCOPE_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = url_in(&ready_line(&mut child).await, "/mcp");
    let client = Client::connect(&url).await;
    let handle = client.start().await;
    client.chat(&handle, "hello").await;
    // An error answered on purpose: a poll of a task nobody has.
    let unknown = reqwest::Client::new()
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&serde_json::json!({
            "jsonrpc": "2.0", "id": 9, "method": "tasks/get",
            "params": {"taskId": "0b6f3c52-9a3e-4d0e-8f65-6c1d2e3fa1b2"}
        }))
        .send()
        .await
        .unwrap();
    let _ = unknown.text().await;
    let mut stderr = child.stderr.take().unwrap();
    assert!(terminate(&mut child).await.success());
    let mut logged = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut logged)
        .await
        .unwrap();
    assert!(logged.contains("session opened"), "{logged}");
    for sdk in [
        "Service initialized as server",
        "serve finished",
        "response error",
    ] {
        assert!(!logged.contains(sdk), "{sdk:?} in:\n{logged}");
    }
}

/// A theme that does not exist is warned about by a headless server (it draws none, so it
/// still serves): the typo showed only when someone next opened a console (tour O).
#[tokio::test]
async fn a_headless_server_warns_of_a_theme_that_does_not_exist() {
    use tokio::io::AsyncReadExt;
    let mut child = serving(&["--headless", "--port", "0", "--theme", "purple"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    ready_line(&mut child).await;
    assert!(terminate(&mut child).await.success());
    let mut said = String::new();
    stderr.read_to_string(&mut said).await.unwrap();
    assert!(
        said.contains("warning: theme `purple`: no such theme"),
        "{said}"
    );
}

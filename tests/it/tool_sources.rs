//! MCP servers as a bot's tool source, over stdio, legacy SSE and streamable HTTP: the same
//! tools and results over each, typed content, the response-size cap, per-call timeouts with
//! cancellation upstream, `tools/list_changed` refresh and respawn of a dead stdio server.

use std::sync::Arc;
use std::time::Duration;

use crate::support::fixture::{BUILT_IN_TOOLS, Kind, RunningFixture, WAIT};
use crate::support::process::runs;
use crate::support::servers::{named, wait_until};
use serde_json::{Value, json};
use turnscope::config::McpServerConfig;
use turnscope::observe::{Bus, Event, ToolSourceState};
use turnscope::tools::Tools;
use turnscope::tools::mcp_source::SourceStatus;
use turnscope::tools::registry::ToolRegistry;

fn stdio_fixture(name: &str) -> McpServerConfig {
    McpServerConfig::stdio(
        name,
        env!("CARGO_BIN_EXE_turnscope-dev"),
        &["fixture-server", "--stdio"],
    )
}

async fn registry(servers: &[McpServerConfig], bus: &Bus) -> Arc<ToolRegistry> {
    tokio::time::timeout(
        WAIT,
        ToolRegistry::builder(bus.clone()).servers(servers).start(),
    )
    .await
    .expect("the registry starts within the wait")
}

fn names(tools: &dyn Tools) -> Vec<String> {
    let mut names: Vec<String> = tools.specs().iter().map(|s| s.name.clone()).collect();
    names.sort();
    names
}

/// Bridges.md case 74: the same fixture over each transport gives the same tools, one
/// good call and one `isError` call.
#[tokio::test]
async fn every_transport_gives_the_same_tools_and_results() {
    let http = RunningFixture::start(Kind::Http).await;
    let sse = RunningFixture::start(Kind::Sse).await;
    let configs = [
        stdio_fixture("over-stdio"),
        McpServerConfig::http("over-http", &http.url("/mcp")),
        McpServerConfig::sse("over-sse", &sse.url("/sse")),
    ];
    let bus = Bus::default();
    let mut events = bus.subscribe();
    for config in &configs {
        let registry = registry(std::slice::from_ref(config), &bus).await;
        let source = registry.source(&config.name).unwrap();
        assert!(
            matches!(source.status(), SourceStatus::Up { tools: 8, .. }),
            "{}: {:?}",
            config.name,
            source.status()
        );
        assert_eq!(names(&*registry), BUILT_IN_TOOLS, "{}", config.name);
        assert!(
            registry
                .specs()
                .iter()
                .all(|s| s.source == config.name && s.input_schema["type"] == "object")
        );

        let echo = registry.call("echo", json!({"text": "héllo"})).await;
        assert!(!echo.is_error, "{}: {echo:?}", config.name);
        assert_eq!(echo.text, "héllo");
        let sum = registry.call("add", json!({"a": 2, "b": 3.5})).await;
        assert_eq!(sum.text, "5.5");
        let failed = registry.call("fail", json!({"message": "boom"})).await;
        assert!(failed.is_error, "{}: {failed:?}", config.name);
        assert_eq!(failed.text, "boom");
        let bad_args = registry.call("add", json!({"a": "two"})).await;
        assert!(bad_args.is_error, "{}: {bad_args:?}", config.name);
        assert!(bad_args.text.contains("two"), "{}", bad_args.text);

        registry.shutdown().await;
        assert_eq!(source.status(), SourceStatus::Closed);
    }
    let mut connected = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::ToolSource(e) = &*event
            && e.state == ToolSourceState::Connected
        {
            assert_eq!(e.tools, 8);
            connected.push((e.server.clone(), e.transport.to_string()));
        }
    }
    assert_eq!(
        connected,
        [
            ("over-stdio".to_string(), "stdio".to_string()),
            ("over-http".to_string(), "http".to_string()),
            ("over-sse".to_string(), "sse".to_string())
        ]
    );
    http.stop().await;
    sse.stop().await;
}

#[tokio::test]
async fn images_are_described_never_dropped() {
    let bus = Bus::default();
    let registry = registry(&[stdio_fixture("fx")], &bus).await;
    let image = registry.call("image", json!({})).await;
    assert!(!image.is_error, "{image:?}");
    let lines: Vec<&str> = image.text.lines().collect();
    assert!(
        lines[0].starts_with("[image: image/png, "),
        "{}",
        image.text
    );
    assert_eq!(lines[1], "a 1x1 PNG image");
    registry.shutdown().await;
}

/// Bridges.md case 68, over a real server: exactly 1 MiB passes, one byte more does not.
#[tokio::test]
async fn the_response_size_boundary() {
    let http = RunningFixture::start(Kind::Http).await;
    let bus = Bus::default();
    let registry = registry(&[McpServerConfig::http("fx", &http.url("/mcp"))], &bus).await;
    let fits = registry.call("big", json!({"bytes": 1_048_576})).await;
    assert!(!fits.is_error);
    assert_eq!(fits.text.len(), 1_048_576);
    let over = registry.call("big", json!({"bytes": 1_048_577})).await;
    assert!(over.is_error);
    let v: Value = serde_json::from_str(&over.text).expect("the error is JSON");
    assert_eq!(v["error"], "response_too_large");
    assert_eq!(v["limit_bytes"], 1_048_576);
    assert_eq!(v["size_bytes"], 1_048_577);
    assert_eq!(v["preview"].as_str().unwrap(), "x".repeat(200));
    registry.shutdown().await;
    http.stop().await;
}

/// A stdio server's reply over the 16 MiB one message may have is dropped and answered at
/// once with the response-size error (not left to wait for the call's timeout and be blamed on
/// slowness); the connection carries the next call.
#[tokio::test]
async fn a_stdio_reply_over_one_message_limit_is_an_error_at_once() {
    let mut config = stdio_fixture("fx");
    config.timeout_seconds = 120.0;
    let bus = Bus::default();
    let registry = registry(&[config], &bus).await;
    let size = 17 * 1024 * 1024;
    let over = registry.call("big", json!({"bytes": size})).await;
    assert!(over.is_error, "{}", &over.text[..over.text.len().min(300)]);
    let v: Value = serde_json::from_str(&over.text).expect("the error is JSON");
    assert_eq!(v["error"], "response_too_large", "{v}");
    assert_eq!(v["limit_bytes"], 16 * 1024 * 1024);
    assert!(v["size_bytes"].as_u64().unwrap() > size, "{v}");
    assert!(v.get("preview").is_none(), "dropped unread: {v}");
    // What a person calling by hand is told names the fixed limit, not the response cap.
    let said = over
        .unanswered
        .as_ref()
        .expect("answered for the tool")
        .to_string();
    assert!(
        said.contains("a stdio MCP server may send in one message")
            && !said.contains("MCP_MAX_RESPONSE_BYTES"),
        "{said}"
    );
    assert_eq!(
        registry.call("echo", json!({"text": "after"})).await.text,
        "after"
    );
    registry.shutdown().await;
}

/// A call past `timeout_seconds` is an error result, and the server sees the cancellation.
#[tokio::test]
async fn a_slow_call_times_out_and_is_cancelled_upstream() {
    let mut server = named("slowpoke", &["hang", "quick"]).await;
    let mut config = McpServerConfig::http("slowpoke", &server.url);
    config.timeout_seconds = 0.3;
    let bus = Bus::default();
    let registry = registry(&[config], &bus).await;
    let outcome = registry.call("hang", json!({})).await;
    assert!(outcome.is_error);
    assert!(
        outcome.text.contains("took longer than 0.3 s") && outcome.text.contains("cancelled"),
        "{}",
        outcome.text
    );
    let seen = tokio::time::timeout(WAIT, server.cancelled.recv())
        .await
        .expect("the server saw notifications/cancelled");
    assert_eq!(seen.as_deref(), Some("slowpoke:hang"));
    // The connection is still good.
    assert_eq!(
        registry.call("quick", json!({})).await.text,
        "slowpoke:quick"
    );
    registry.shutdown().await;
}

/// `notifications/tools/list_changed` makes the registry list the server's tools again.
#[tokio::test]
async fn a_changed_tool_list_is_read_again() {
    let http = RunningFixture::start(Kind::Http).await;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let registry = registry(&[McpServerConfig::http("fx", &http.url("/mcp"))], &bus).await;
    assert!(!names(&*registry).contains(&"shout".to_string()));
    let added = registry.call("add_tool", json!({"name": "shout"})).await;
    assert!(!added.is_error, "{added:?}");
    wait_until("the new tool to be offered", || {
        let registry = registry.clone();
        async move { names(&*registry).contains(&"shout".to_string()) }
    })
    .await;
    assert_eq!(
        registry.call("shout", json!({"text": "hi"})).await.text,
        "hi"
    );
    let mut refreshed = false;
    while let Some(event) = events.try_recv() {
        if let Event::ToolSource(e) = &*event {
            refreshed |= e.state == ToolSourceState::Refreshed && e.tools == 9;
        }
    }
    assert!(refreshed, "a refreshed event with 9 tools");
    registry.shutdown().await;
    http.stop().await;
}

/// Closing a stdio server ends what it started too: a wrapper that does not `exec` (here
/// `sh -c`, waiting on a helper it started) gets SIGTERM as a process group once it does not
/// exit on its stdin's end, so neither it nor its helper is left running (tour I: both were
/// orphaned after every shutdown).
#[tokio::test]
async fn closing_a_stdio_server_ends_its_process_group() {
    let dir = crate::support::scratch::Scratch::new("stdio-group");
    let helper_pid = dir.join("helper.pid");
    // The wrapper waits on its helper (it does not exit at its stdin's end), or exits at once
    // and leaves the helper behind in its group.
    for then in ["wait", "exit 0"] {
        let script = format!(
            "sleep 300 & echo $! > '{}'; '{}' fixture-server --stdio; {then}",
            helper_pid.display(),
            env!("CARGO_BIN_EXE_turnscope-dev")
        );
        let config = McpServerConfig::stdio("wrapped", "sh", &["-c", &script]);
        let bus = Bus::default();
        let registry = registry(&[config], &bus).await;
        assert_eq!(
            registry.call("echo", json!({"text": "hi"})).await.text,
            "hi"
        );
        let helper: u32 = std::fs::read_to_string(&helper_pid)
            .expect("the helper started")
            .trim()
            .parse()
            .unwrap();
        assert!(runs(helper), "{then}");
        registry.shutdown().await;
        wait_until("the helper ends with its server", || async move {
            !runs(helper)
        })
        .await;
    }
}

/// A server that stopped reading its stdin, with a large request stuck in the full pipe, is
/// still ended when it is closed: closing its stdin waits for that write, so it is bounded and
/// SIGTERM follows (tour I: the close waited forever and the server ran on).
#[tokio::test]
async fn a_server_that_stopped_reading_is_still_ended_when_closed() {
    let dir = crate::support::scratch::Scratch::new("stdio-frozen");
    let pid_file = dir.join("server.pid");
    // Answers `initialize` and `tools/list`, then stops reading.
    let script = format!(
        r#"echo $$ > '{}'
answer() {{ id=$(printf '%s' "$1" | sed -n 's/.*"id":\([0-9]*\).*/\1/p'); printf '{{"jsonrpc":"2.0","id":%s,"result":%s}}\n' "$id" "$2"; }}
read line; answer "$line" '{{"protocolVersion":"2025-11-25","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"frozen","version":"1"}}}}'
read line; read line; answer "$line" '{{"tools":[{{"name":"take","inputSchema":{{"type":"object"}}}}]}}'
exec sleep 300"#,
        pid_file.display()
    );
    let config = McpServerConfig::stdio("frozen", "sh", &["-c", &script]);
    let bus = Bus::default();
    let registry = registry(&[config], &bus).await;
    let stuck = tokio::spawn({
        let registry = registry.clone();
        async move {
            registry
                .call("take", json!({"blob": "x".repeat(2_000_000)}))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(runs(pid));
    registry.shutdown().await;
    wait_until("the frozen server ends", || async move { !runs(pid) }).await;
    stuck.abort();
}

/// A stdio server that dies after it came up is reported down with its last stderr lines,
/// which usually say why (tour I: its reason was nowhere, headless or in the console).
#[tokio::test]
async fn a_stdio_server_that_dies_is_reported_with_its_last_words() {
    let dir = crate::support::scratch::Scratch::new("stdio-last-words");
    let pid_file = dir.join("server.pid");
    // The server runs under a shell that says why once it is gone, as a wrapper's log would,
    // and exits at once: its last line may still be in the pipe when its end is seen.
    let script = format!(
        "exec 3<&0; '{}' fixture-server --stdio 0<&3 3<&- & echo $! > '{}'; wait; echo 'fatal: the database is gone' >&2",
        env!("CARGO_BIN_EXE_turnscope-dev"),
        pid_file.display()
    );
    let config = McpServerConfig::stdio("dying", "sh", &["-c", &script]);
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let registry = registry(&[config], &bus).await;
    assert_eq!(
        registry.call("echo", json!({"text": "hi"})).await.text,
        "hi"
    );
    // It dies under a call, which sees the end first.
    let in_flight = tokio::spawn({
        let registry = registry.clone();
        async move { registry.call("slow", json!({"ms": 8000})).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(
        std::process::Command::new("kill")
            .args(["-9", pid.trim()])
            .status()
            .unwrap()
            .success()
    );
    let detail = loop {
        let event = tokio::time::timeout(WAIT, events.recv())
            .await
            .expect("the server is reported down")
            .expect("the bus is open");
        if let Event::ToolSource(s) = &*event
            && s.state == ToolSourceState::Disconnected
        {
            break s.detail.clone();
        }
    };
    assert!(
        detail.contains("its stderr ended with: fatal: the database is gone"),
        "{detail}"
    );
    assert!(in_flight.await.unwrap().is_error);
    registry.shutdown().await;
}

/// A stdio server that dies is respawned; the call in flight gets an error result, the
/// next call works.
#[tokio::test]
async fn a_dead_stdio_server_is_respawned() {
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let registry = registry(&[stdio_fixture("fx")], &bus).await;
    let source = registry.source("fx").unwrap();
    let SourceStatus::Up { pid: Some(pid), .. } = source.status() else {
        panic!("up with a pid: {:?}", source.status())
    };
    let in_flight = tokio::spawn({
        let registry = registry.clone();
        async move { registry.call("slow", json!({"ms": 8000})).await }
    });
    // Let the call reach the server before the kill.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let outcome = tokio::time::timeout(WAIT, in_flight)
        .await
        .expect("the call in flight ends at once")
        .unwrap();
    assert!(outcome.is_error, "{outcome:?}");
    assert!(
        outcome.text.contains("went away") || outcome.text.contains("closed the connection"),
        "{}",
        outcome.text
    );
    wait_until("a new process", || {
        let source = source.clone();
        async move { matches!(source.status(), SourceStatus::Up { pid: Some(p), .. } if p != pid) }
    })
    .await;
    assert_eq!(
        registry.call("echo", json!({"text": "back"})).await.text,
        "back"
    );
    let mut disconnected = false;
    while let Some(event) = events.try_recv() {
        if let Event::ToolSource(e) = &*event {
            disconnected |=
                e.state == ToolSourceState::Disconnected && e.detail.contains("respawning");
        }
    }
    assert!(disconnected, "a disconnected event saying it respawns");
    registry.shutdown().await;
}

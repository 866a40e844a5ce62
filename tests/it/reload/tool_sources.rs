//! Tool sources across a reload: added and changed ones connected, removed ones closed once
//! no turn uses them, unchanged ones kept with their child process (pids in `--events`).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Served;
use crate::support::binary::WAIT;
use crate::support::mcp::Client;

/// The fixture MCP server's binary.
const DEV: &str = env!("CARGO_BIN_EXE_turnscope-dev");

/// A stdio fixture server offering only `tools`.
fn fixture(name: &str, tools: &[&str], scope: &str) -> String {
    format!(
        "[[mcp_servers]]\nname = \"{name}\"\ncommand = \"{DEV}\"\nargs = [\"fixture-server\", \"--stdio\"]\ntool_filter = {tools:?}\nscope = \"{scope}\"\n\n"
    )
}

/// The pid in a `connected` tool-source event.
fn pid_of(event: &Value) -> u32 {
    let detail = event["detail"].as_str().unwrap();
    detail
        .rsplit("pid ")
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {detail:?}"))
}

/// Whether process `pid` still runs (a zombie has exited).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit(')').next().map(|r| r.trim().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z'))
}

fn states(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["state"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn tool_sources_added_changed_and_removed_by_a_reload_and_unchanged_ones_untouched() {
    let before = format!(
        "[bot]\nbuiltin_tools = false\n\n{}{}{}",
        fixture("keep", &["add"], "shared"),
        fixture("gone", &["big"], "shared"),
        fixture("change", &["echo"], "shared"),
    );
    let s = Served::start("sources", &before).await;
    let client = Client::connect(&s.url).await;
    let handle = client.start().await;
    let kept_pid = pid_of(&s.sources_at_least("keep", 1).await[0]);
    let gone_pid = pid_of(&s.sources_at_least("gone", 1).await[0]);
    let changed_pid = pid_of(&s.sources_at_least("change", 1).await[0]);

    let after = format!(
        "[bot]\nbuiltin_tools = false\n\n{}{}{}{}",
        fixture("keep", &["add"], "shared"),
        fixture("change", &["fail"], "shared"),
        fixture("new", &["image"], "shared"),
        fixture("mine", &["echo"], "session"),
    );
    s.save(&after);
    let reload = s.reload(1).await;
    assert_eq!(reload["outcome"], "applied", "{reload}");
    assert_eq!(
        reload["applied"],
        json!([
            "mcp_servers.change",
            "mcp_servers.gone",
            "mcp_servers.mine",
            "mcp_servers.new"
        ])
    );
    assert_eq!(
        reload["notes"],
        json!([
            "tool sources added: new, mine",
            "reconnected: change",
            "closed: gone"
        ])
    );
    // The removed server's process ends; the changed one is a new process; the unchanged one
    // is the same process, connected once.
    let started = Instant::now();
    while running(gone_pid) || running(changed_pid) {
        assert!(started.elapsed() < WAIT, "the old servers still run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(running(kept_pid));
    assert_eq!(states(&s.tool_source_events("keep")), ["connected"]);
    assert_eq!(
        states(&s.sources_at_least("gone", 2).await),
        ["connected", "closed"]
    );
    // The new connection came up before the old one was let go.
    let change = s.sources_at_least("change", 3).await;
    assert_eq!(states(&change), ["connected", "connected", "closed"]);
    assert_ne!(pid_of(&change[1]), changed_pid);
    assert!(running(pid_of(&change[1])));
    // The session open before the reload got its own connection to the session-scope server.
    let mine = s.sources_at_least("mine", 1).await;
    assert_eq!(states(&mine), ["connected"]);
    assert_eq!(mine[0]["session"], 1);

    let reply = client
        .chat(&handle, "please add 2 and 3, show the image and echo done")
        .await;
    assert!(!reply.is_error, "{reply:?}");
    let called: Vec<&str> = reply.record["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(called, ["add", "image", "echo"]);
    assert_eq!(reply.record["config_version"], 2);
    assert!(
        reply.record["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["is_error"] == false),
        "{reply:?}"
    );
    client.service.cancel().await.unwrap();
    s.stop().await;
    assert!(!running(kept_pid), "shutdown closes the kept server");
}

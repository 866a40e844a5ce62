//! The issue's "done when": `turnscope --headless --config FILE` with one MCP server per
//! transport answers a line that needs a tool from each with the whole reply after the tool
//! round, driven through the real binary by an rmcp client.

use std::process::Stdio;

use crate::support::binary::{ready_line, serving, terminate, url_in};
use crate::support::bot_client::{chat, connect, start, text};
use crate::support::fixture::{Kind, RunningFixture};
use crate::support::scratch::Scratch;
use tokio::process::Child;

/// The repository's tool binary, which serves the fixture MCP server.
const DEV: &str = env!("CARGO_BIN_EXE_turnscope-dev");

/// Starts the binary on `config` and returns it with its MCP URL from the ready line.
async fn headless(config: &std::path::Path) -> (Child, String) {
    headless_with(config, &[]).await
}

async fn headless_with(config: &std::path::Path, env: &[(&str, &str)]) -> (Child, String) {
    let mut command = serving(&["--headless", "--port", "0", "--pace", "0", "--config"]);
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command
        .arg(config)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn turnscope --headless");
    let url = url_in(&ready_line(&mut child).await, "/mcp");
    (child, url)
}

/// Ends the binary with SIGTERM and checks it exits cleanly.
async fn stop(mut child: Child) {
    let status = terminate(&mut child).await;
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn a_line_needing_a_tool_from_each_transport_gets_the_whole_reply() {
    let http = RunningFixture::start(Kind::Http).await;
    let sse = RunningFixture::start(Kind::Sse).await;
    let scratch = Scratch::new("headless-three-transports");
    let config = scratch.file(
        "three.toml",
        &format!(
            r#"
[bot]
builtin_tools = false

[[mcp_servers]]
name = "local"
command = "{DEV}"
args = ["fixture-server", "--stdio"]
tool_filter = ["add"]

[[mcp_servers]]
name = "web"
url = "{}"
tool_filter = ["echo"]

[[mcp_servers]]
name = "legacy"
transport = "sse"
url = "{}"
tool_filter = ["image"]
"#,
            http.url("/mcp"),
            sse.url("/sse")
        ),
    );
    let (child, url) = headless(&config).await;
    let client = connect(&url).await;
    let handle = start(&client).await;
    let result = chat(
        &client,
        &handle,
        "please add 2 and 3, show the image and echo done",
    )
    .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let reply = text(&result);
    assert!(
        reply.starts_with("The add tool says: 5. The image tool says: [image: image/png, "),
        "{reply}"
    );
    assert!(
        reply.ends_with("a 1x1 PNG image. The echo tool says: done."),
        "{reply}"
    );
    let turn = crate::support::mcp::record_of(&result);
    assert_eq!(turn["end_reason"], "completed");
    assert_eq!(turn["rounds"], 1);
    let called: Vec<&str> = turn["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(called, ["add", "image", "echo"]);
    assert!(
        turn["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["is_error"] == false)
    );
    client.cancel().await.unwrap();
    stop(child).await;
    http.stop().await;
    sse.stop().await;
}

/// The same with a Claude-Desktop style JSON config.
#[tokio::test]
async fn a_claude_desktop_json_config_works_too() {
    let http = RunningFixture::start(Kind::Http).await;
    let sse = RunningFixture::start(Kind::Sse).await;
    let servers = serde_json::json!({
        "mcpServers": {
            "local": {"command": DEV, "args": ["fixture-server", "--stdio"], "tool_filter": ["add"]},
            "web": {"type": "streamable-http", "url": http.url("/mcp"), "tool_filter": ["big"]},
            "legacy": {"type": "sse", "url": sse.url("/sse"), "tool_filter": ["fail"]}
        }
    });
    let scratch = Scratch::new("headless-claude-json");
    let config = scratch.file("claude.json", &servers.to_string());
    let (child, url) = headless(&config).await;
    let client = connect(&url).await;
    let handle = start(&client).await;
    let result = chat(&client, &handle, "add 2 and 3, then big, then fail").await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let reply = text(&result);
    // Each tool takes the numbers of its own words (docs/models.md): add 2 and 3; big none, so
    // 1 byte; fail echoes its message as an error.
    assert!(
        reply
            .starts_with("The add tool says: 5. The big tool says: x. The fail tool says: ERROR: "),
        "{reply}"
    );
    let turn = crate::support::mcp::record_of(&result);
    let errors: Vec<bool> = turn["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["is_error"].as_bool().unwrap())
        .collect();
    assert_eq!(errors, [false, false, true]);
    client.cancel().await.unwrap();
    stop(child).await;
    http.stop().await;
    sse.stop().await;
}

/// `${VAR}` in a header is filled from the environment turnscope runs in.
#[tokio::test]
async fn header_placeholders_are_expanded_from_the_environment() {
    let server = crate::support::servers::named("secure", &["whoami"]).await;
    let scratch = Scratch::new("headless-header-placeholders");
    let config = scratch.file(
        "headers.toml",
        &format!(
            r#"
[[mcp_servers]]
name = "secure"
url = "{}"
headers = {{ Authorization = "Bearer ${{TURNSCOPE_PROBE_TOKEN}}" }}
"#,
            server.url
        ),
    );
    let (child, url) = headless_with(&config, &[("TURNSCOPE_PROBE_TOKEN", "s3cret")]).await;
    let client = connect(&url).await;
    let handle = start(&client).await;
    let result = chat(&client, &handle, "whoami").await;
    assert_eq!(text(&result), "The whoami tool says: Bearer s3cret.");
    client.cancel().await.unwrap();
    stop(child).await;
}

/// A stdio server that fails at start says why: the last lines of its stderr reach the error
/// on headless stderr and in the `tool_source` event (the console's Log). Relative paths mean
/// the config file's folder, wherever turnscope is started: `./failing.sh` and `sh
/// failing.sh` both find the script there.
#[tokio::test]
async fn a_failing_stdio_servers_stderr_reaches_the_error_and_relative_paths_mean_the_config_folder()
 {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let dir = std::env::temp_dir().join(format!("turnscope-stdio-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
    let script = dir.join("failing.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'starting up' >&2\necho 'failing.sh: cannot reach the database at db.invalid' >&2\nexit 3\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let config = dir.join("turnscope.toml");
    std::fs::write(
        &config,
        "[[mcp_servers]]\nname = \"direct\"\ncommand = \"./failing.sh\"\n\n\
         [[mcp_servers]]\nname = \"by-shell\"\ncommand = \"sh\"\nargs = [\"failing.sh\"]\n",
    )
    .unwrap();
    let events = dir.join("events.jsonl");
    let mut child = serving(&["--headless", "--port", "0", "--pace", "0", "--config"])
        .arg(&config)
        .arg("--events")
        .arg(&events)
        .current_dir(dir.join("elsewhere"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _url = url_in(&ready_line(&mut child).await, "/mcp");
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = Vec::new();
    while said.len() < 2 {
        let line = tokio::time::timeout(crate::support::binary::WAIT, stderr.next_line())
            .await
            .expect("the tool source lines in time")
            .unwrap()
            .expect("stderr open");
        if line.starts_with("tool source ") {
            said.push(line);
        }
    }
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
    for line in &said {
        assert!(
            line.contains("Its stderr ended with: starting up | failing.sh: cannot reach the database at db.invalid"),
            "{line}"
        );
        assert!(
            line.contains(&dir.display().to_string()),
            "names the folder: {line}"
        );
        assert!(
            line.contains(
                "started but the MCP handshake failed: it exited before answering `initialize`"
            ),
            "{line}"
        );
    }
    stop(child).await;
    let text = std::fs::read_to_string(&events).unwrap();
    let failed: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "tool_source" && e["state"] == "failed")
        .collect();
    assert!(
        failed.iter().any(|e| e["detail"]
            .as_str()
            .unwrap()
            .contains("cannot reach the database")),
        "{failed:?}"
    );
    std::fs::remove_dir_all(dir).ok();
}

//! MCP servers from other SDKs as tool sources: the Python `mcp` SDK (2.x) server in
//! `interop/servers/python_server.py` over stdio, legacy SSE and streamable HTTP, and the
//! Node reference server `@modelcontextprotocol/server-everything` over stdio, SSE and
//! streamable HTTP.
//!
//! They need software this repository does not install, so they are ignored by default and
//! run by the interop suite with:
//!
//! ```sh
//! TURNSCOPE_INTEROP_PYTHON=/path/to/venv/bin/python \
//! TURNSCOPE_INTEROP_EVERYTHING=/path/to/node_modules/@modelcontextprotocol/server-everything/dist/index.js \
//!   cargo test --test interop_servers -- --ignored
//! ```

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::support::fixture::WAIT;
use crate::support::servers::wait_until;
use serde_json::json;
use tokio::process::{Child, Command};
use turnscope::config::McpServerConfig;
use turnscope::observe::Bus;
use turnscope::tools::Tools;
use turnscope::tools::limits::McpLimits;
use turnscope::tools::registry::ToolRegistry;

fn required(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set; see the top of tests/interop_servers.rs for what it must point to"
        )
    })
}

fn python() -> String {
    required("TURNSCOPE_INTEROP_PYTHON")
}

fn python_script() -> String {
    format!(
        "{}/interop/servers/python_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn everything() -> String {
    required("TURNSCOPE_INTEROP_EVERYTHING")
}

async fn free_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// Starts a server process that listens on a port (killed when dropped).
fn spawn(program: &str, args: &[&str], env: &[(&str, String)]) -> Child {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"))
}

/// A registry on one server, waiting until its tools are there (HTTP servers may still be
/// starting: the background retry picks them up).
async fn registry_on(config: McpServerConfig, tools: usize) -> Arc<ToolRegistry> {
    let registry = ToolRegistry::builder(Bus::default())
        .limits(McpLimits {
            connect_budget: Duration::from_secs(5),
            ..McpLimits::default()
        })
        .servers(&[config])
        .start()
        .await;
    let probe = registry.clone();
    tokio::time::timeout(
        WAIT * 3,
        wait_until("the server's tools", || {
            let probe = probe.clone();
            async move { probe.specs().len() >= tools }
        }),
    )
    .await
    .expect("tools within the wait");
    registry
}

async fn check_python(registry: &ToolRegistry) {
    let mut names: Vec<String> = registry.specs().iter().map(|s| s.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["py_add", "py_echo", "py_fail", "py_image"]);
    let echo = registry.call("py_echo", json!({"text": "héllo"})).await;
    assert!(!echo.is_error, "{echo:?}");
    assert_eq!(echo.text, "héllo");
    assert_eq!(
        registry
            .call("py_add", json!({"a": 2, "b": 3.5}))
            .await
            .text,
        "5.5"
    );
    let failed = registry.call("py_fail", json!({"message": "boom"})).await;
    assert!(
        failed.is_error && failed.text.contains("boom"),
        "{failed:?}"
    );
    let image = registry.call("py_image", json!({})).await;
    assert!(image.text.starts_with("[image: image/png"), "{image:?}");
    registry.shutdown().await;
}

#[tokio::test]
#[ignore = "needs TURNSCOPE_INTEROP_PYTHON (a Python with mcp 2.x)"]
async fn python_sdk_server_over_stdio() {
    let script = python_script();
    let config = McpServerConfig::stdio("py", &python(), &[&script, "stdio"]);
    check_python(&*registry_on(config, 4).await).await;
}

#[tokio::test]
#[ignore = "needs TURNSCOPE_INTEROP_PYTHON (a Python with mcp 2.x)"]
async fn python_sdk_server_over_sse() {
    let port = free_port().await.to_string();
    let _server = spawn(&python(), &[&python_script(), "sse", &port], &[]);
    let config = McpServerConfig::sse("py", &format!("http://127.0.0.1:{port}/sse"));
    check_python(&*registry_on(config, 4).await).await;
}

#[tokio::test]
#[ignore = "needs TURNSCOPE_INTEROP_PYTHON (a Python with mcp 2.x)"]
async fn python_sdk_server_over_streamable_http() {
    let port = free_port().await.to_string();
    let _server = spawn(
        &python(),
        &[&python_script(), "streamable-http", &port],
        &[],
    );
    let config = McpServerConfig::http("py", &format!("http://127.0.0.1:{port}/mcp"));
    check_python(&*registry_on(config, 4).await).await;
}

async fn check_everything(registry: &ToolRegistry) {
    let names: Vec<String> = registry.specs().iter().map(|s| s.name.clone()).collect();
    for expected in ["echo", "get-sum", "get-tiny-image"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing: {names:?}"
        );
    }
    let echo = registry.call("echo", json!({"message": "hi"})).await;
    assert!(!echo.is_error, "{echo:?}");
    assert_eq!(echo.text, "Echo: hi");
    let sum = registry.call("get-sum", json!({"a": 2, "b": 3})).await;
    assert!(!sum.is_error && sum.text.contains('5'), "{sum:?}");
    let bad = registry.call("get-sum", json!({"a": "two"})).await;
    assert!(bad.is_error, "{bad:?}");
    let image = registry.call("get-tiny-image", json!({})).await;
    assert!(image.text.contains("[image: image/png"), "{image:?}");
    registry.shutdown().await;
}

#[tokio::test]
#[ignore = "needs TURNSCOPE_INTEROP_EVERYTHING (server-everything's dist/index.js) and node"]
async fn node_everything_over_stdio() {
    let config = McpServerConfig::stdio("everything", "node", &[&everything(), "stdio"]);
    check_everything(&*registry_on(config, 3).await).await;
}

#[tokio::test]
#[ignore = "needs TURNSCOPE_INTEROP_EVERYTHING (server-everything's dist/index.js) and node"]
async fn node_everything_over_sse() {
    let port = free_port().await.to_string();
    let _server = spawn("node", &[&everything(), "sse"], &[("PORT", port.clone())]);
    let config = McpServerConfig::sse("everything", &format!("http://127.0.0.1:{port}/sse"));
    check_everything(&*registry_on(config, 3).await).await;
}

#[tokio::test]
#[ignore = "needs TURNSCOPE_INTEROP_EVERYTHING (server-everything's dist/index.js) and node"]
async fn node_everything_over_streamable_http() {
    let port = free_port().await.to_string();
    let _server = spawn(
        "node",
        &[&everything(), "streamableHttp"],
        &[("PORT", port.clone())],
    );
    let config = McpServerConfig::http("everything", &format!("http://127.0.0.1:{port}/mcp"));
    check_everything(&*registry_on(config, 3).await).await;
}

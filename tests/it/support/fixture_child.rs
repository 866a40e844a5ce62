//! The project's fixture MCP server as a child process on streamable HTTP
//! (`turnscope-dev fixture-server --http PORT`), for tests that kill it mid-call.

#![allow(dead_code)]

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// A hang guard for its start-up.
const WAIT: Duration = Duration::from_secs(20);

/// Starts the fixture server on `port` (0: any); returns the child (killed on drop) and its
/// MCP URL from the ready line.
pub async fn fixture_http_child(port: u16) -> (Child, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope-dev"))
        .args(["fixture-server", "--http", &port.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("the fixture prints its ready line")
        .unwrap()
        .unwrap();
    let url = ready.split_whitespace().last().unwrap().to_string();
    (child, url)
}

//! `turnscope-dev`, the repository's tool binary, as the benches use it: `pty` runs the real
//! console in a pseudo-terminal of its own (the console draws, the server answers), and ends
//! it when asked to stop, leaving no process behind. (`fixture-server` is exercised by every
//! test that starts the fixture as a child: `fixture_transports.rs`, `tool_sources.rs`, …)

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::binary::{WAIT, signal};

/// A free loopback port (the console binds it a moment later).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn pty_runs_the_console_and_ends_it_on_sigterm() {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("turnscope-dev-pty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut driver = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnscope-dev"))
        .args(["pty", "--rows", "24", "--cols", "80", "--"])
        .arg(env!("CARGO_BIN_EXE_turnscope"))
        .args(["--port", &port.to_string(), "--pace", "0"])
        .current_dir(&dir)
        .env("TERM", "xterm-256color")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("turnscope-dev starts");
    let health = format!("http://127.0.0.1:{port}/healthz");
    let http = reqwest::Client::new();
    let started = Instant::now();
    let answer = loop {
        if let Ok(answer) = http.get(&health).send().await {
            break answer;
        }
        assert!(
            driver.try_wait().unwrap().is_none(),
            "turnscope-dev exited before the console served"
        );
        assert!(
            started.elapsed() < WAIT,
            "the console never served {health}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(answer.status().is_success(), "{}", answer.status());
    signal(&driver, "TERM");
    let status = tokio::time::timeout(WAIT, driver.wait())
        .await
        .expect("turnscope-dev exits after SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
    // The console in the terminal is gone with it: its port answers no more.
    let gone = Instant::now();
    while http.get(&health).send().await.is_ok() {
        assert!(gone.elapsed() < WAIT, "the console outlived its terminal");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut out = String::new();
    use tokio::io::AsyncReadExt;
    driver
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    assert!(
        out.is_empty(),
        "what the console drew stays in the terminal: {out:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

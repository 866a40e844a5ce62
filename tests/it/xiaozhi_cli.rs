//! `turnscope bridge xiaozhi` as a real process: the token never reaches its output (logs at
//! trace level, events file), and SIGTERM closes the socket with 1000 and ends the child.

#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::endpoint::{FakeEndpoint, WAIT};
use crate::support::process::runs;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

const TOKEN: &str = "eyJhbGciOiJFUzI1NiJ9.eyJ1c2VySWQiOjd9.dG9wLXNlY3JldC1zaWc";

/// Everything the process wrote, collected as it arrives.
#[derive(Clone, Default)]
struct Output(
    Arc<Mutex<String>>,
    Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
);

impl Output {
    fn collect(&self, stream: impl AsyncRead + Unpin + Send + 'static) {
        let out = self.clone();
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut all = out.0.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        self.1.lock().unwrap().push(reader);
    }

    /// Waits until both streams are read to their end (the process has exited).
    async fn drained(&self) {
        let readers: Vec<_> = self.1.lock().unwrap().drain(..).collect();
        for r in readers {
            let _ = tokio::time::timeout(WAIT, r).await;
        }
    }

    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }

    async fn wait_for(&self, needle: &str) {
        tokio::time::timeout(WAIT, async {
            while !self.text().contains(needle) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{needle:?} never appeared in:\n{}", self.text()));
    }
}

struct Bridge {
    child: Child,
    output: Output,
    events: PathBuf,
}

fn start(endpoint: &FakeEndpoint) -> Bridge {
    start_in(endpoint, false)
}

/// [`start`], the bridge in a process group of its own when `own_group` (as a shell starts
/// a foreground job, so a signal to the group is what Ctrl-C does).
fn start_in(endpoint: &FakeEndpoint, own_group: bool) -> Bridge {
    let bin = env!("CARGO_BIN_EXE_turnscope");
    let events = std::env::temp_dir().join(format!(
        "turnscope-xz-events-{}.jsonl",
        uuid::Uuid::new_v4()
    ));
    let mut command = Command::new(bin);
    if own_group {
        command.process_group(0);
    }
    let mut child = command
        .arg("--events")
        .arg(&events)
        .args([
            "bridge",
            "xiaozhi",
            "--name",
            "cli",
            "--endpoint",
            &endpoint.url(TOKEN),
            "--stdio",
        ])
        .arg(format!(
            "{} fixture-server --stdio",
            env!("CARGO_BIN_EXE_turnscope-dev")
        ))
        .env("TURNSCOPE_LOG", "trace")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run turnscope bridge xiaozhi");
    let output = Output::default();
    output.collect(child.stdout.take().unwrap());
    output.collect(child.stderr.take().unwrap());
    Bridge {
        child,
        output,
        events,
    }
}

impl Bridge {
    fn signal(&self, name: &str) {
        crate::support::binary::signal(&self.child, name);
    }

    /// SIGTERM, then [`Bridge::finish`].
    async fn terminate(self) -> std::process::ExitStatus {
        self.signal("TERM");
        self.finish().await
    }

    /// Waits for the exit; checks that nothing the process wrote holds the token, that the
    /// endpoint was shown masked and that bridge state reached the events file.
    async fn finish(mut self) -> std::process::ExitStatus {
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the bridge did not exit after SIGTERM")
            .unwrap();
        self.output.drained().await;
        let output = self.output.text();
        let events = std::fs::read_to_string(&self.events).unwrap_or_default();
        let _ = std::fs::remove_file(&self.events);
        assert!(!output.contains(TOKEN), "token in output:\n{output}");
        assert!(!events.contains(TOKEN), "token in events:\n{events}");
        assert!(
            events.contains("\"type\":\"bridge\""),
            "bridge state in events:\n{events}"
        );
        assert!(output.contains("token=***"), "{output}");
        status
    }
}

/// Processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) {
            // pid (comm) state ppid ...; comm may hold spaces, so split after the last ')'.
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            let ppid: u32 = after.split(' ').nth(1).unwrap().parse().unwrap();
            if ppid == pid {
                found.push(child);
            }
        }
    }
    found
}

/// The process group of `pid`.
fn group_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // pid (comm) state ppid pgrp ...
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(2).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_refused_token_is_reported_without_the_token() {
    let endpoint = FakeEndpoint::start().await;
    endpoint.refuse_with(Some(401));
    let bridge = start(&endpoint);
    bridge.output.wait_for("bad token").await;
    assert!(bridge.output.text().contains("token=***"));
    let status = bridge.terminate().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn sigterm_closes_the_socket_with_1000_and_ends_the_child() {
    let mut endpoint = FakeEndpoint::start().await;
    let bridge = start(&endpoint);
    let mut conn = endpoint.next().await;
    let (_, names) = conn.broker_handshake().await;
    assert!(names.contains(&"echo".to_string()));
    let reply = conn
        .call(json!("x_n_1"), "echo", json!({"text": "hi"}))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi");
    conn.send("not json").await;

    let pid = bridge.child.id().unwrap();
    let children = children_of(pid);
    assert_eq!(children.len(), 1, "one fixture child: {children:?}");
    let child = children[0];
    assert!(runs(child));

    bridge.signal("TERM");
    let frame = conn.closed_by_bridge().await.expect("a close frame");
    assert_eq!(u16::from(frame.code), 1000);
    let status = bridge.finish().await;
    assert!(status.success(), "{status:?}");
    assert!(!runs(child), "the fixture child is gone");
}

/// Ctrl-C at a terminal signals the whole foreground process group. The upstream child runs
/// in a group of its own, so only the bridge gets the SIGINT: it closes the socket with 1000
/// and then ends the child itself, instead of seeing it die and respawning it mid-shutdown.
#[tokio::test]
async fn sigint_to_the_bridges_group_leaves_the_child_to_the_bridge() {
    let mut endpoint = FakeEndpoint::start().await;
    let bridge = start_in(&endpoint, true);
    let mut conn = endpoint.next().await;
    conn.broker_handshake().await;
    let pid = bridge.child.id().unwrap();
    let children = children_of(pid);
    assert_eq!(children.len(), 1, "one fixture child: {children:?}");
    let child = children[0];
    assert_eq!(group_of(pid), pid, "the bridge leads its group");
    assert_eq!(group_of(child), child, "the child leads a group of its own");

    let sent = std::process::Command::new("kill")
        .args(["-s", "INT", "--", &format!("-{pid}")])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let frame = conn.closed_by_bridge().await.expect("a close frame");
    assert_eq!(u16::from(frame.code), 1000);
    let output = bridge.output.clone();
    let status = bridge.finish().await;
    assert!(status.success(), "{status:?}");
    assert!(!runs(child), "the fixture child is gone");
    let text = output.text();
    assert!(
        !text.contains("restarting in") && !text.contains("exited ("),
        "the child died before the bridge closed it:\n{text}"
    );
}

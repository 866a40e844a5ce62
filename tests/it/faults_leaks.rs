//! No socket or task leaks after model faults, on the real binary: its open file descriptors
//! and live tokio tasks (read from its `/healthz`) after a warm-up, then after many faulted
//! turns (each followed by a good one), come back within a small margin. A leak of one
//! descriptor or one task per faulted turn would exceed it several times over.
//!
//! Tasks end a little after a turn's answer (a connection task, an aborted model task), so
//! the check waits for the count to come back under the bound, polling, with a hang guard:
//! a leak never comes back and fails at the guard with the figures.

use std::time::Duration;

use crate::support::headless_bin::Headless;
use crate::support::mcp::Client;
use crate::support::upstream::{Reply, Upstream, content};

/// Descriptors the child may hold beyond the baseline (an extra pooled connection or two).
const MARGIN: usize = 3;
/// Live tasks the child may hold beyond the baseline (a connection task or two).
const TASK_MARGIN: u64 = 3;
const ROUNDS: usize = 3;
/// How long the tasks may take to come back under the bound before it counts as a leak.
const SETTLE: Duration = Duration::from_secs(20);
/// Time between two readings of `/healthz`.
const POLL: Duration = Duration::from_millis(50);

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the child's fd table is readable")
        .count()
}

/// The child's `/healthz`, read on one kept-alive connection (so the reading itself holds
/// the same single connection task every time).
async fn health(http: &reqwest::Client, url: &str) -> serde_json::Value {
    http.get(url)
        .send()
        .await
        .expect("/healthz answers")
        .json()
        .await
        .expect("/healthz is JSON")
}

/// The child's live tokio tasks, from its `/healthz`.
async fn live_tasks(http: &reqwest::Client, url: &str) -> u64 {
    let health = health(http, url).await;
    health["process"]["tasks"]
        .as_u64()
        .unwrap_or_else(|| panic!("no process.tasks in /healthz: {health}"))
}

/// The task count once it has stopped moving: three equal readings in a row (a settled
/// baseline, not one caught while a connection task is winding down).
async fn settled_tasks(http: &reqwest::Client, url: &str) -> u64 {
    let settle = async {
        let mut last = live_tasks(http, url).await;
        let mut same = 0;
        while same < 2 {
            tokio::time::sleep(POLL).await;
            let now = live_tasks(http, url).await;
            same = if now == last { same + 1 } else { 0 };
            last = now;
        }
        last
    };
    tokio::time::timeout(SETTLE, settle)
        .await
        .expect("the task count settles after the warm-up")
}

/// Polls until the child's live tasks are at most `bound`; `Err(last reading)` after
/// [`SETTLE`].
async fn tasks_back_under(http: &reqwest::Client, url: &str, bound: u64) -> Result<u64, u64> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let now = live_tasks(http, url).await;
        if now <= bound {
            return Ok(now);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(now);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Each fault the model server can show, with a piece of the error it must give.
fn faults() -> Vec<(Reply, &'static str)> {
    let zero = Duration::ZERO;
    vec![
        (
            Reply::Status(500, r#"{"error":{"message":"the GPU caught fire"}}"#.into()),
            "the GPU caught fire",
        ),
        (
            Reply::Status(429, r#"{"error":{"message":"Rate limit reached"}}"#.into()),
            "HTTP 429",
        ),
        (
            Reply::Events {
                data: vec![content("Hi"), "{not json".into()],
                done: true,
                gap: zero,
            },
            "not an OpenAI chat.completion.chunk",
        ),
        (Reply::Cut(vec![content("We op")]), "broke before its end"),
        (
            Reply::Events {
                data: vec![content("We op")],
                done: false,
                gap: zero,
            },
            "no [DONE]",
        ),
        (Reply::Hang, "sent nothing within"),
        (Reply::StallAfter(vec![content("Hi")]), "went silent for"),
    ]
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn model_faults_leave_no_open_sockets_or_tasks_behind() {
    let upstream = Upstream::start(vec![]).await;
    let config = format!(
        "[model]\nurl = \"{}\"\nname = \"fake\"\nfirst_byte_timeout_seconds = 0.3\nidle_timeout_seconds = 0.3\n",
        upstream.base_url()
    );
    let bin = Headless::start("leaks", &config, &[]).await;
    let pid = bin.pid();
    let client = Client::connect(&bin.url).await;
    let handle = client.start().await;

    // Warm-up: the connections a healthy server keeps (model pool, MCP client) are open.
    for i in 0..3 {
        upstream.push(Reply::text(&["fine ", "thanks"]));
        let ok = client.chat(&handle, &format!("warm {i}")).await;
        assert_eq!(ok.text, "fine thanks", "{ok:?}");
    }
    let baseline = open_fds(pid);
    let http = reqwest::Client::new();
    let health_url = bin.health_url();
    let baseline_tasks = settled_tasks(&http, &health_url).await;

    let mut faulted = 0;
    for _ in 0..ROUNDS {
        for (reply, cause) in faults() {
            upstream.push(reply);
            upstream.push(Reply::text(&["recovered"]));
            let failed = client.chat(&handle, "try").await;
            assert!(failed.is_error, "{cause}: {failed:?}");
            assert!(failed.text.contains(cause), "{cause}: {}", failed.text);
            faulted += 1;
            let next = client.chat(&handle, "again").await;
            assert_eq!(next.text, "recovered", "the session answers the next line");
        }
    }
    let after = open_fds(pid);
    assert!(
        after <= baseline + MARGIN,
        "{after} descriptors open after {faulted} faulted turns, {baseline} before"
    );
    match tasks_back_under(&http, &health_url, baseline_tasks + TASK_MARGIN).await {
        Ok(_) => {}
        Err(last) => panic!(
            "{last} tasks alive {} s after {faulted} faulted turns, {baseline_tasks} before",
            SETTLE.as_secs()
        ),
    }
    assert_eq!(health(&http, &health_url).await["status"], "ok");
}

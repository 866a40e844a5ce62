//! No socket leaks after model faults, on the real binary: its open file descriptors after a
//! warm-up, then after many faulted turns (each followed by a good one), stay within a small
//! margin. A leak of one descriptor per faulted turn would exceed it several times over.

mod common;

use std::time::Duration;

use common::headless_bin::Headless;
use common::mcp::Client;
use common::upstream::{Reply, Upstream, content};

/// Descriptors the child may hold beyond the baseline (an extra pooled connection or two).
const MARGIN: usize = 3;
const ROUNDS: usize = 3;

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the child's fd table is readable")
        .count()
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
async fn model_faults_leave_no_open_sockets_behind() {
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
    let health: serde_json::Value = reqwest::get(bin.health_url())
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
}

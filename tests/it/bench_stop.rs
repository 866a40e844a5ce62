//! `turnscope bench` stopped by a signal: the servers it started go with it. A bench runs
//! servers (and for `replicas`, Redis and HAProxy) as child processes; a SIGTERM once ended
//! the bench at once and left them all running.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::Command;

use crate::support::binary::{WAIT, signal};
use crate::support::process::runs;

/// The pids of `pid`'s children, from each of its threads' `children` list.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// The bench's scratch directories (`turnscope-bench-<its pid>-…`) still in the temp dir.
fn scratch_dirs_of(pid: u32) -> Vec<String> {
    let prefix = format!("turnscope-bench-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn sigterm_to_a_bench_stops_the_servers_it_started_and_removes_their_scratch() {
    // The soak runs for ten minutes against a headless server child: long enough to be
    // stopped in the middle.
    let bench = Command::new(env!("CARGO_BIN_EXE_turnscope"))
        .args(["bench", "soak", "--sessions", "2", "--seconds", "600"])
        .args(["--sample-seconds", "1", "--warmup-seconds", "1"])
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start turnscope bench soak");
    let pid = bench.id().expect("the bench runs");
    let started = Instant::now();
    let server = loop {
        let server = children_of(pid).into_iter().find(|child| {
            std::fs::read(format!("/proc/{child}/cmdline"))
                .is_ok_and(|cmd| cmd.split(|b| *b == 0).any(|arg| arg == b"--headless"))
        });
        if let Some(server) = server {
            break server;
        }
        assert!(
            started.elapsed() < WAIT,
            "the bench started no headless server child within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        !scratch_dirs_of(pid).is_empty(),
        "the server child runs in a scratch directory named after the bench"
    );

    signal(&bench, "TERM");
    let output = tokio::time::timeout(WAIT, bench.wait_with_output())
        .await
        .expect("the bench exits after SIGTERM")
        .expect("wait for the bench");
    assert!(
        !output.status.success(),
        "a bench cut short does not report success"
    );

    let gone_by = Instant::now() + Duration::from_secs(5);
    while runs(server) && Instant::now() < gone_by {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let still_running = runs(server);
    if still_running {
        // Do not leave it behind for the next test either.
        let _ = std::process::Command::new("kill")
            .args(["-9", &server.to_string()])
            .status();
    }
    assert!(
        !still_running,
        "the bench's server child {server} outlived the bench"
    );
    let left = scratch_dirs_of(pid);
    for name in &left {
        let _ = std::fs::remove_dir_all(std::env::temp_dir().join(name));
    }
    assert!(
        left.is_empty(),
        "the bench's scratch directories are removed: {left:?}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bench stopped by a signal"),
        "the bench says why it ended: {stderr}"
    );
}

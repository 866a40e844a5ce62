//! `turnscope bench store`: what keeping sessions in the file store costs beside memory.
//!
//! - `store_load`: N sessions × K turns at zero pace on an in-process server, the memory store
//!   and a SQLite file measured alternately, which goes first swapping run by run; turns/s,
//!   p50/p99 and the store's own counts (syncs per turn: each sync is one fsync of the file's
//!   WAL);
//! - `store_ready`: a headless child on a file holding `--idle-sessions` stored sessions vs an
//!   empty file, alternately: the time to its ready line and its resident memory once ready
//!   (what the stored sessions cost a server that has not reopened them);
//! - `store_first_chat`: on that server, the first `chat` on each of 50 stored sessions (it
//!   reopens the session from the file) and the next `chat` on it (live), alternately.
//!
//! The stored sessions are made as a server makes them: 50 through a child server over MCP
//! (three turns each, so a reopen reads turns back), the rest as heads written straight into
//! the file with the store's own API (a server's `start` writes exactly a head).

use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

use turnscope::observe::SessionOpener;
use turnscope::store::sqlite::SqliteStore;
use turnscope::store::{Head, SessionStore, now_ms};

use super::{
    BenchClient, Connections, LoadClient, bench_config, load_run, median, round, row, stats,
};

/// Sessions reopened by the first-chat measurement.
const REOPENED: usize = 50;

/// Heads written in one go (the store's writer commits them together).
const WRITE_BATCH: usize = 500;

/// Runs every row of the store bench.
pub async fn store(
    sessions: usize,
    turns: usize,
    runs: usize,
    stored: usize,
) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!(
        "turnscope-bench-store-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let outcome = async {
        load_rows(&dir, sessions, turns, runs).await?;
        stored_rows(&dir, runs, stored.max(REOPENED)).await
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

async fn load_rows(dir: &Path, sessions: usize, turns: usize, runs: usize) -> anyhow::Result<()> {
    let mut figures: [Vec<super::LoadRun>; 2] = [Vec::new(), Vec::new()];
    for run in 0..runs.max(1) {
        // Which store goes first swaps run by run (memory, SQLite; SQLite, memory; …), so
        // whatever the run before leaves behind in the process (its freed memory, its
        // threads) weighs on both alike.
        let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let kind = ["memory", "sqlite"][i];
            let mut config = bench_config(0.0, Some(7), sessions + 8);
            config.store.url = Some(match kind {
                "memory" => "memory".into(),
                _ => format!(
                    "sqlite:{}",
                    dir.join(format!("load-{run}.sqlite3")).display()
                ),
            });
            figures[i].push(
                load_run(
                    &config,
                    sessions,
                    turns,
                    Connections::KeptAlive,
                    LoadClient::Rmcp,
                )
                .await?,
            );
        }
    }
    let medians: Vec<f64> = figures
        .iter()
        .map(|runs| {
            median(
                &runs
                    .iter()
                    .map(|r| r.turns_per_second())
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    for (i, kind) in ["memory", "sqlite"].into_iter().enumerate() {
        let runs = &figures[i];
        let answered: usize = runs.iter().map(|r| r.latencies_ms.len()).sum();
        let syncs: u64 = runs.iter().map(|r| r.store.syncs).sum();
        let writes: u64 = runs.iter().map(|r| r.store.writes).sum();
        row(json!({
            "bench": "store_load",
            "store": kind,
            "sessions": sessions,
            "turns_per_session": turns,
            "pace_seconds": 0.0,
            "runs": runs.len(),
            "errors": runs.iter().map(|r| r.errors).sum::<usize>(),
            "turns_per_second": stats(runs.iter().map(|r| r.turns_per_second()).collect()),
            "p50_ms": stats(runs.iter().map(|r| r.latency(0.5)).collect()),
            "p99_ms": stats(runs.iter().map(|r| r.latency(0.99)).collect()),
            "store_writes_per_turn": round(writes as f64 / answered.max(1) as f64, 3),
            "syncs_per_turn": round(syncs as f64 / answered.max(1) as f64, 3),
            "largest_batch": runs.iter().map(|r| r.store.largest_batch).max(),
            "cores_busy": stats(runs.iter().filter_map(|r| r.cores_busy()).collect()),
            "cpu_ms_per_turn": stats(runs.iter().filter_map(|r| r.cpu_ms_per_turn()).collect()),
            "store_thread_cpu_ms_per_turn": runs
                .iter()
                .map(|r| r.store_thread_cpu_seconds)
                .sum::<Option<f64>>()
                .map(|cpu| round(cpu * 1000.0 / answered.max(1) as f64, 3)),
            "vs_memory": round(medians[i] / medians[0], 3),
        }));
    }
    Ok(())
}

async fn stored_rows(dir: &Path, runs: usize, stored: usize) -> anyhow::Result<()> {
    let full = dir.join("stored.sqlite3");
    let handles = fill(&full, stored).await?;
    let empty = dir.join("empty.sqlite3");
    // The empty file made as a server makes it: started once and stopped.
    Child::start(&empty).await?.stop().await;
    let mut ready = [Vec::new(), Vec::new()];
    let mut rss = [Vec::new(), Vec::new()];
    let mut first = Vec::new();
    let mut live = Vec::new();
    for run in 0..runs.max(1) {
        for (i, file) in [&empty, &full].into_iter().enumerate() {
            let child = Child::start(file).await?;
            ready[i].push(child.ready_seconds);
            rss[i].push(child.rss_bytes().unwrap_or(0) as f64);
            if i == 1 && run + 1 == runs.max(1) {
                // The last run on the full file reopens the sessions made over MCP.
                let client = BenchClient::connect(&child.mcp_url).await?;
                for handle in &handles {
                    let at = Instant::now();
                    client.chat(handle, "and again").await?;
                    first.push(at.elapsed().as_secs_f64() * 1000.0);
                    let at = Instant::now();
                    client.chat(handle, "once more").await?;
                    live.push(at.elapsed().as_secs_f64() * 1000.0);
                }
                client.close().await;
            }
            child.stop().await;
        }
    }
    row(json!({
        "bench": "store_ready",
        "stored_sessions": stored,
        "runs": ready[0].len(),
        "ready_seconds_empty": stats(ready[0].clone()),
        "ready_seconds_stored": stats(ready[1].clone()),
        "rss_mib_empty": round(median(&rss[0]) / 1048576.0, 1),
        "rss_mib_stored": round(median(&rss[1]) / 1048576.0, 1),
        "rss_bytes_per_stored_session": round((median(&rss[1]) - median(&rss[0])) / stored as f64, 1),
    }));
    row(json!({
        "bench": "store_first_chat",
        "stored_sessions": stored,
        "reopened": first.len(),
        "turns_before": 3,
        "first_chat_stored_ms": stats(first.clone()),
        "next_chat_live_ms": stats(live.clone()),
        "median_extra_ms": round(median(&first) - median(&live), 3),
    }));
    Ok(())
}

/// Makes `path` hold `stored` sessions: [`REOPENED`] through a server over MCP (three turns
/// each), the rest as heads written with the store's API. Returns the MCP ones' handles.
async fn fill(path: &Path, stored: usize) -> anyhow::Result<Vec<String>> {
    let child = Child::start(path).await?;
    let client = BenchClient::connect(&child.mcp_url).await?;
    let mut handles = Vec::with_capacity(REOPENED);
    for _ in 0..REOPENED {
        let handle = client.start().await?;
        for line in ["hello", "my name is Ada", "what did I say"] {
            client.chat(&handle, line).await?;
        }
        handles.push(handle);
    }
    client.close().await;
    child.stop().await;
    let store = std::sync::Arc::new(SqliteStore::open(path)?);
    let now = now_ms();
    let mut left = stored - REOPENED;
    while left > 0 {
        let batch = left.min(WRITE_BATCH);
        let mut writes = tokio::task::JoinSet::new();
        for _ in 0..batch {
            let store = store.clone();
            let handle = uuid::Uuid::new_v4();
            writes.spawn(async move {
                let head = Head {
                    id: store.key().id_of(&handle),
                    prefix: turnscope::store::handle::shown_prefix(&handle),
                    bot: "bot".into(),
                    opener: SessionOpener::Mcp("bench".into()),
                    greeting: None,
                    created_ms: now,
                    last_used_ms: now,
                    kept_alive_ms: 0,
                    turns: 0,
                    messages: 0,
                    forgotten: 0,
                    history_from_turn: 1,
                    in_flight: None,
                    unread: None,
                    errors: 0,
                    version: 0,
                };
                store.create(&head).await
            });
        }
        while let Some(done) = writes.join_next().await {
            done.context("a head write panicked")??;
        }
        left -= batch;
    }
    store.close().await;
    Ok(handles)
}

/// A headless server child on a store file, timed to its ready line.
struct Child {
    child: tokio::process::Child,
    mcp_url: String,
    ready_seconds: f64,
}

impl Child {
    async fn start(store: &Path) -> anyhow::Result<Child> {
        let exe = std::env::current_exe().context("finding the turnscope binary")?;
        let started = Instant::now();
        let mut child = tokio::process::Command::new(exe)
            .args(["--headless", "--port", "0", "--pace", "0"])
            .args(["--sessions", "1000", "--handle-seconds", "86400"])
            .arg("--store")
            .arg(format!("sqlite:{}", store.display()))
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting a turnscope child")?;
        let stdout = child.stdout.take().context("the child's stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Some(line) = lines.next_line().await? {
            if let Some(url) = line
                .split_whitespace()
                .find(|w| w.starts_with("http://") && w.ends_with("/mcp"))
            {
                let ready_seconds = started.elapsed().as_secs_f64();
                return Ok(Child {
                    child,
                    mcp_url: url.to_string(),
                    ready_seconds,
                });
            }
        }
        anyhow::bail!(
            "the turnscope child on {} ended before its ready line",
            store.display()
        )
    }

    /// Its resident memory (Linux: `/proc/PID/status`).
    fn rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()?)).ok()?;
        let kib: u64 = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kib * 1024)
    }

    /// SIGTERM (the server keeps its sessions in the file), SIGKILL after 5 s.
    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
            if tokio::time::timeout(std::time::Duration::from_secs(5), self.child.wait())
                .await
                .is_ok()
            {
                return;
            }
        }
        let _ = self.child.kill().await;
    }
}

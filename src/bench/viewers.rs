//! `turnscope bench viewers`: what watching costs a `--headless` server (`/events`,
//! `server::viewers`). The server runs in a child process; each run puts the same load on it
//! (`bench load`'s shape: N sessions × K turns at zero pace over MCP) with nobody watching,
//! with three viewers reading the stream, with three viewers of a server that records no
//! message bodies (`[wire] max_kib = 0`: what the MCP and model recordings cost apart from the
//! frames and turns), or with one viewer that stopped reading (a small receive window, nothing
//! read after the head). Modes alternate run by run so drift hits all
//! alike; a row per run, then the medians and each mode's turns/s as a share of none's.
//! Each run has a server of its own, so nothing one run leaves (open sessions a viewer is sent
//! on connect, the event stream lingering for a viewer that might come back) weighs on the next.
//!
//! The viewers read in this process, beside the load's clients, so on a small machine their
//! reading competes with the server for the same cores. Each row therefore also gives the
//! server's own CPU time per turn (its `/proc` figures), which is what watching costs the server
//! wherever the viewers run, and which a busy machine disturbs far less than turns/s.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::Context as _;
use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

use crate::bench::child::{ChildOptions, ServerChild};
use crate::bench::client::sessions_chatting;
use crate::bench::cpu::cpu_seconds_of;
use crate::bench::{BenchClient, median, round, row};

/// Who watches the server in a run.
#[derive(Clone, Copy)]
enum Watch {
    /// Nobody on `/events`.
    Nobody,
    /// Three viewers reading the stream as fast as it comes.
    Three,
    /// One viewer that reads the response's head and nothing more.
    Stalled,
}

/// One way of running the load: who watches, and whether the server records the messages'
/// bodies (`[wire] max_kib`, default 64; 0 records none, so events carry frames, turns and
/// the model requests' figures but no MCP or model message).
struct Mode {
    name: &'static str,
    watch: Watch,
    wire_kib: Option<u64>,
}

/// The modes, in the order each round runs them; the first is what the others are compared to.
const MODES: [Mode; 4] = [
    Mode {
        name: "none",
        watch: Watch::Nobody,
        wire_kib: None,
    },
    Mode {
        name: "three viewers",
        watch: Watch::Three,
        wire_kib: None,
    },
    Mode {
        name: "three viewers, wire off",
        watch: Watch::Three,
        wire_kib: Some(0),
    },
    Mode {
        name: "one stalled viewer",
        watch: Watch::Stalled,
        wire_kib: None,
    },
];

/// Runs `runs` rounds of the modes, each a load of `sessions` × `turns`.
pub async fn viewers(sessions: usize, turns: usize, runs: usize) -> anyhow::Result<()> {
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let mut cpu_per_turn: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let mut own_cpu_per_turn: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let own = std::process::id();
    for run in 0..runs {
        for (m, mode) in MODES.iter().enumerate() {
            // A fresh server per run: what one run leaves (its open sessions, which a viewer
            // is sent on connect; a hub lingering for a viewer that might come back) never
            // weighs on the next.
            let options = ChildOptions {
                wire_kib: mode.wire_kib,
                ..ChildOptions::default()
            };
            let server = ServerChild::start_with(sessions, false, &options).await?;
            let base = server
                .mcp_url
                .strip_suffix("/mcp")
                .context("the MCP URL ends in /mcp")?
                .to_string();
            let pid = server.pid().context("the server child's process id")?;
            let watchers = start_watchers(&base, mode.watch).await?;
            let cpu_before = cpu_seconds_of(pid).context("reading the server's CPU time")?;
            let own_before = cpu_seconds_of(own).context("reading this process's CPU time")?;
            let (turns_done, seconds, errors) = load(&server.mcp_url, sessions, turns).await?;
            let cpu = cpu_seconds_of(pid).context("reading the server's CPU time")? - cpu_before;
            let own_cpu =
                cpu_seconds_of(own).context("reading this process's CPU time")? - own_before;
            let (lines, dropped, resting) = watchers.stop().await;
            let rate = turns_done as f64 / seconds;
            rates[m].push(rate);
            let cpu_ms = cpu * 1000.0 / turns_done.max(1) as f64;
            cpu_per_turn[m].push(cpu_ms);
            let own_cpu_ms = own_cpu * 1000.0 / turns_done.max(1) as f64;
            own_cpu_per_turn[m].push(own_cpu_ms);
            row(json!({
                "bench": "viewers",
                "run": run + 1,
                "mode": mode.name,
                "sessions": sessions,
                "turns": turns_done,
                "errors": errors,
                "seconds": round(seconds, 3),
                "turns_per_second": round(rate, 1),
                "server_cpu_ms_per_turn": round(cpu_ms, 3),
                "clients_and_viewers_cpu_ms_per_turn": round(own_cpu_ms, 3),
                "lines_read_per_viewer": lines,
                "viewers_dropped": dropped,
                "resting_at_end": resting,
            }));
            server.stop().await;
        }
    }
    let medians: Vec<f64> = rates.iter().map(|r| median(r)).collect();
    let cpu_medians: Vec<f64> = cpu_per_turn.iter().map(|c| median(c)).collect();
    let own_cpu_medians: Vec<f64> = own_cpu_per_turn.iter().map(|c| median(c)).collect();
    for (m, mode) in MODES.iter().enumerate() {
        row(json!({
            "bench": "viewers",
            "summary": mode.name,
            "runs": runs,
            "median_turns_per_second": round(medians[m], 1),
            "share_of_none": round(medians[m] / medians[0], 3),
            "median_server_cpu_ms_per_turn": round(cpu_medians[m], 3),
            "server_cpu_over_none": round(cpu_medians[m] / cpu_medians[0], 3),
            "median_clients_and_viewers_cpu_ms_per_turn": round(own_cpu_medians[m], 3),
        }));
    }
    Ok(())
}

/// The load: `sessions` sessions of `turns` turns each at once; (turns, seconds, errors).
async fn load(url: &str, sessions: usize, turns: usize) -> anyhow::Result<(usize, f64, usize)> {
    let mut clients = Vec::new();
    for _ in 0..sessions.div_ceil(25).clamp(1, 16) {
        clients.push(Arc::new(BenchClient::connect(url).await?));
    }
    let started = Instant::now();
    let (latencies, errors) = sessions_chatting(&clients, sessions, turns).await?;
    let done = latencies.len();
    let seconds = started.elapsed().as_secs_f64();
    BenchClient::close_all(clients).await;
    Ok((done, seconds, errors))
}

/// The viewers of one run.
struct Watchers {
    tasks: Vec<JoinHandle<()>>,
    lines: Arc<AtomicU64>,
    readers: u64,
    stalled: Option<tokio::net::TcpStream>,
    base: String,
}

async fn start_watchers(base: &str, watch: Watch) -> anyhow::Result<Watchers> {
    let lines = Arc::new(AtomicU64::new(0));
    let mut w = Watchers {
        tasks: Vec::new(),
        lines: lines.clone(),
        readers: 0,
        stalled: None,
        base: base.to_string(),
    };
    match watch {
        Watch::Three => {
            for _ in 0..3 {
                let response = reqwest::get(format!("{base}/events")).await?;
                anyhow::ensure!(
                    response.status().is_success(),
                    "/events answered {}",
                    response.status()
                );
                let lines = lines.clone();
                w.readers += 1;
                w.tasks.push(tokio::spawn(async move {
                    let mut body = response.bytes_stream();
                    while let Some(Ok(chunk)) = body.next().await {
                        let n = chunk.iter().filter(|b| **b == b'\n').count() as u64;
                        lines.fetch_add(n, Ordering::Relaxed);
                    }
                }));
            }
        }
        Watch::Stalled => {
            let addr: std::net::SocketAddr = base
                .trim_start_matches("http://")
                .parse()
                .context("the server's address")?;
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.set_recv_buffer_size(4096)?;
            let mut stream = socket.connect(addr).await?;
            stream
                .write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
                .await?;
            let mut head = [0u8; 256];
            let _ = stream.read(&mut head).await?;
            w.stalled = Some(stream);
        }
        Watch::Nobody => {}
    }
    Ok(w)
}

impl Watchers {
    /// Stops the viewers; (lines each reader read on average, viewers the server dropped,
    /// whether the server rested at the load's end: no viewer read, so it recorded nothing).
    async fn stop(self) -> (u64, u64, bool) {
        // Read while the viewers are still connected: whether the server rests with them.
        let health = async {
            reqwest::get(format!("{}/healthz", self.base))
                .await
                .ok()?
                .json::<serde_json::Value>()
                .await
                .ok()
        }
        .await
        .unwrap_or_default();
        for t in &self.tasks {
            t.abort();
        }
        drop(self.stalled);
        let dropped = health["viewers"]["dropped"].as_u64().unwrap_or(0);
        let resting = health["viewers"]["resting"].as_bool().unwrap_or(false);
        let lines = self.lines.load(Ordering::Relaxed) / self.readers.max(1);
        (lines, dropped, resting)
    }
}

//! `turnscope bench console-memory`: what the console itself keeps and spends over a long
//! session. A server child (see [`super::child`]) answers N turns of W-word replies to an MCP
//! client that asks for progress (one notification per reply piece, as Claude Code and the
//! Python SDK do), once headless and once with the real console drawn into a 160×48
//! pseudo-terminal; each row gives the resident memory before and after the turns. With the
//! console, the MCP exchanges are then topped up to `--exchanges` (cheap `tools/list` calls)
//! and each pane is shown in turn, idle, while the child's CPU time is read from `/proc`.
//!
//! `--against PATH` runs another turnscope binary (an older build) the same way, alternating
//! with this one run by run, so a before/after comparison is made in one run under the same
//! machine load.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{Value, json};

use super::child::{ChildOptions, ServerChild};
use super::cpu::cpu_seconds_of;
use super::{BenchClient, median, round, row};

/// How the bench runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Turns the client chats.
    pub turns: usize,
    /// Words of each reply.
    pub words: usize,
    /// Rounds (each measures every binary headless and with the console).
    pub runs: usize,
    /// MCP exchanges the console has seen before the idle panes are measured.
    pub exchanges: usize,
    /// Seconds each pane is measured idle (0: no idle measurement).
    pub idle_seconds: f64,
    /// Another binary measured alternately with this one.
    pub against: Option<PathBuf>,
}

/// The screens measured idle: a name and the keys that bring it up from any pane (Alt+N jumps
/// to pane N also from the input line; Esc closes what the previous screen opened).
const SCREENS: &[(&str, &[u8])] = &[
    ("1 sessions", b"\x1b\x1b1"),
    ("2 transcript", b"\x1b\x1b2"),
    ("3 input", b"\x1b\x1b3"),
    ("4 frames", b"\x1b\x1b4"),
    ("5 progress", b"\x1b\x1b5"),
    ("6 tools", b"\x1b\x1b6"),
    ("7 stats", b"\x1b\x1b7"),
    ("8 log", b"\x1b\x1b8"),
    ("9 mcp", b"\x1b\x1b9"),
    // The MCP client's session (the second row), its latest turn, its model requests opened.
    ("turn view", b"\x1b\x1b1jw"),
    ("model requests", b"m"),
];

/// Runs the bench and prints its rows.
pub async fn run(plan: Plan) -> anyhow::Result<()> {
    let this = std::env::current_exe().context("finding the turnscope binary")?;
    let mut binaries = vec![("this", this)];
    if let Some(other) = &plan.against {
        anyhow::ensure!(
            other.is_file(),
            "bench console-memory --against {}: no such file (give the path of another turnscope binary)",
            other.display()
        );
        binaries.push(("against", other.clone()));
    }
    // growth[binary][console] over the runs, MiB.
    let mut growth: Vec<[Vec<f64>; 2]> = vec![Default::default(); binaries.len()];
    let mut idle: Vec<Vec<(String, f64)>> = vec![Vec::new(); binaries.len()];
    for run in 0..plan.runs.max(1) {
        for k in 0..binaries.len() {
            // Alternate which binary goes first, and within one which mode.
            let b = (k + run) % binaries.len();
            for m in 0..2 {
                let console = (m + run) % 2 == 1;
                let (label, exe) = &binaries[b];
                let measured = measure(&plan, exe, console).await?;
                growth[b][usize::from(console)].push(measured.growth_mib);
                idle[b].extend(measured.idle.iter().cloned());
                row(json!({
                    "bench": "console-memory",
                    "run": run + 1,
                    "binary": label,
                    "path": exe.display().to_string(),
                    "console": console,
                    "turns": plan.turns,
                    "words": plan.words,
                    "seconds": round(measured.seconds, 1),
                    "rss_before_mib": round(measured.before_mib, 2),
                    "rss_after_mib": round(measured.after_mib, 2),
                    "growth_mib": round(measured.growth_mib, 2),
                    "idle_cpu_percent": measured
                        .idle
                        .iter()
                        .map(|(pane, pct)| (pane.clone(), json!(round(*pct, 2))))
                        .collect::<serde_json::Map<String, Value>>(),
                }));
            }
        }
    }
    for (b, (label, exe)) in binaries.iter().enumerate() {
        let headless = median(&growth[b][0]);
        let console = median(&growth[b][1]);
        let mut worst = serde_json::Map::new();
        for (pane, pct) in &idle[b] {
            let entry = worst.entry(pane.clone()).or_insert(json!(0.0));
            if *pct > entry.as_f64().unwrap_or(0.0) {
                *entry = json!(round(*pct, 2));
            }
        }
        row(json!({
            "bench": "console-memory",
            "summary": true,
            "binary": label,
            "path": exe.display().to_string(),
            "runs": plan.runs.max(1),
            "turns": plan.turns,
            "words": plan.words,
            "exchanges": plan.exchanges,
            "median_growth_mib": {"headless": round(headless, 2), "console": round(console, 2)},
            "console_minus_headless_mib": round(console - headless, 2),
            "idle_cpu_percent_worst_run": worst,
        }));
    }
    Ok(())
}

/// One measurement of one binary, headless or with the console.
struct Measured {
    seconds: f64,
    before_mib: f64,
    after_mib: f64,
    growth_mib: f64,
    /// Each screen's CPU use while idle, percent of one core.
    idle: Vec<(String, f64)>,
}

const MIB: f64 = 1024.0 * 1024.0;

async fn measure(plan: &Plan, exe: &std::path::Path, console: bool) -> anyhow::Result<Measured> {
    let options = ChildOptions {
        exe: Some(exe.to_path_buf()),
        words: Some(plan.words),
        ..ChildOptions::default()
    };
    let mut server = ServerChild::start_with(8, console, &options).await?;
    let client = BenchClient::connect(&server.mcp_url).await?;
    let handle = client.start().await?;
    // Warm the allocator, the runtime and (with the console) the first screens.
    for i in 0..3 {
        client
            .chat_with_progress(&handle, &format!("warm up {i}"))
            .await?;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = rss(&server).await?;
    let started = Instant::now();
    for i in 0..plan.turns {
        client
            .chat_with_progress(&handle, &format!("line {i}"))
            .await
            .with_context(|| format!("turn {} of {}", i + 1, plan.turns))?;
    }
    let seconds = started.elapsed().as_secs_f64();
    // The console folds what the bus still holds and draws at least once more.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let after = rss(&server).await?;
    let mut idle = Vec::new();
    if console && plan.idle_seconds > 0.0 {
        // Exchanges so far: initialize, its notification, start, the warm-up and the turns.
        let mut seen = 3 + 3 + plan.turns;
        while seen < plan.exchanges {
            client.list_tools().await?;
            seen += 1;
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let pid = server.pid().context("the server child has no pid")?;
        for (name, keys) in SCREENS {
            server.type_keys(keys).await?;
            // Let the screen draw and the console settle before measuring.
            tokio::time::sleep(Duration::from_millis(1000)).await;
            let cpu_before =
                cpu_seconds_of(pid).context("reading the child's CPU time from /proc")?;
            let at = Instant::now();
            tokio::time::sleep(Duration::from_secs_f64(plan.idle_seconds)).await;
            let cpu_after =
                cpu_seconds_of(pid).context("reading the child's CPU time from /proc")?;
            let pct = (cpu_after - cpu_before) * 100.0 / at.elapsed().as_secs_f64();
            idle.push((name.to_string(), pct));
        }
    }
    client.close().await;
    server.stop().await;
    Ok(Measured {
        seconds,
        before_mib: before / MIB,
        after_mib: after / MIB,
        growth_mib: (after - before) / MIB,
        idle,
    })
}

/// The child's resident memory in bytes, from its `/healthz`.
async fn rss(server: &ServerChild) -> anyhow::Result<f64> {
    let (_, stats) = server.sample().await?;
    stats
        .rss_bytes
        .map(|b| b as f64)
        .context("the server child does not report rss_bytes (Linux only)")
}

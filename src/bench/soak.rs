//! `bench soak` and `bench memory`: a server child (see [`super::child`]) watched from outside
//! while this process's MCP clients load it, headless or with the real console (`--console`).
//! [`soak`] and [`memory`] say what each row holds.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hdrhistogram::Histogram;
use serde_json::{Value, json};

use super::child::ServerChild;
use super::{BenchClient, round, row};
use turnscope::observe::process::ProcessStats;

/// Sessions per MCP client, as many agents would share a server.
const SESSIONS_PER_CLIENT: usize = 25;
/// Most MCP clients.
const MAX_CLIENTS: usize = 64;

/// How the soak runs.
#[derive(Debug, Clone, Copy)]
pub struct SoakPlan {
    /// Sessions chatting at once.
    pub sessions: usize,
    /// How long they chat.
    pub duration: Duration,
    /// Time between samples.
    pub sample_every: Duration,
    /// Samples before this are warm-up and not judged for flatness.
    pub warmup: Duration,
    /// Whether the real console is attached.
    pub console: bool,
}

/// Turn latencies and counts of one sample window.
struct Window {
    turns: AtomicU64,
    errors: AtomicU64,
    latency_us: Mutex<Histogram<u64>>,
    first_error: Mutex<Option<String>>,
}

impl Window {
    fn new() -> Self {
        Self {
            turns: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latency_us: Mutex::new(histogram()),
            first_error: Mutex::new(None),
        }
    }

    fn turn(&self, took: Duration) {
        self.turns.fetch_add(1, Ordering::Relaxed);
        let us = (took.as_micros() as u64).clamp(1, MAX_LATENCY_US);
        if let Ok(mut h) = self.latency_us.lock() {
            let _ = h.record(us);
        }
    }

    fn error(&self, err: &anyhow::Error) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut first) = self.first_error.lock() {
            first.get_or_insert_with(|| format!("{err:#}"));
        }
    }

    /// Takes this window's figures and starts a new window.
    fn take(&self) -> (u64, u64, Histogram<u64>) {
        let turns = self.turns.swap(0, Ordering::Relaxed);
        let errors = self.errors.swap(0, Ordering::Relaxed);
        let h = self
            .latency_us
            .lock()
            .map(|mut h| std::mem::replace(&mut *h, histogram()))
            .unwrap_or_else(|_| histogram());
        (turns, errors, h)
    }
}

const MAX_LATENCY_US: u64 = 600_000_000;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        round(h.value_at_quantile(q) as f64 / 1000.0, 3)
    }
}

async fn connect_clients(url: &str, sessions: usize) -> anyhow::Result<Vec<Arc<BenchClient>>> {
    let mut clients = Vec::new();
    for _ in 0..sessions.div_ceil(SESSIONS_PER_CLIENT).clamp(1, MAX_CLIENTS) {
        clients.push(Arc::new(BenchClient::connect(url).await?));
    }
    Ok(clients)
}

/// Runs the soak and prints its rows.
///
/// N sessions each chat back to back on the zero-pace model for a set time; one row per
/// sample window (turns/s, p50/p99, errors, and the server's memory, descriptors, threads and
/// tasks), then a summary row saying whether memory stayed flat within 5 % after warm-up, how
/// far each figure drifted (last third against first third), and the server at rest before
/// and after the load: once the clients are gone and the model connections the load opened
/// have idled out, descriptors should be back where they started and tasks up only by the idle
/// sessions' own.
pub async fn soak(plan: SoakPlan) -> anyhow::Result<()> {
    let server = ServerChild::start(plan.sessions, plan.console).await?;
    let (_, at_rest_before) = server.sample().await?;
    let clients = connect_clients(&server.mcp_url, plan.sessions).await?;
    let window = Arc::new(Window::new());
    let started = Instant::now();
    let deadline = started + plan.duration;
    let mut tasks = Vec::with_capacity(plan.sessions);
    for i in 0..plan.sessions {
        let client = clients[i % clients.len()].clone();
        let window = window.clone();
        tasks.push(tokio::spawn(async move {
            let handle = match client.start().await {
                Ok(h) => h,
                Err(err) => {
                    window.error(&err);
                    return;
                }
            };
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                let at = Instant::now();
                match client.chat(&handle, &format!("line {n}")).await {
                    Ok(_) => window.turn(at.elapsed()),
                    Err(err) => window.error(&err),
                }
            }
        }));
    }

    let mut total = histogram();
    let (mut turns, mut errors) = (0u64, 0u64);
    let mut judged: Vec<ProcessStats> = Vec::new();
    let mut last = Instant::now();
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + plan.sample_every,
        plan.sample_every,
    );
    while Instant::now() < deadline {
        ticker.tick().await;
        let (n, e, h) = window.take();
        let secs = last.elapsed().as_secs_f64();
        last = Instant::now();
        turns += n;
        errors += e;
        let _ = total.add(&h);
        let (sessions, stats) = server
            .sample()
            .await
            .context("sampling the server's /healthz")?;
        let t = started.elapsed();
        let warm = t >= plan.warmup;
        if warm {
            judged.push(stats);
        }
        row(json!({
            "bench": "soak-sample",
            "console": plan.console,
            "t_seconds": round(t.as_secs_f64(), 1),
            "warm": warm,
            "turns_per_second": round(n as f64 / secs, 1),
            "p50_ms": ms(&h, 0.5),
            "p99_ms": ms(&h, 0.99),
            "errors": e,
            "sessions": sessions,
            "process": stats,
        }));
    }
    for task in tasks {
        task.await.context("a soak session task panicked")?;
    }
    let (n, e, h) = window.take();
    turns += n;
    errors += e;
    let _ = total.add(&h);
    let secs = started.elapsed().as_secs_f64();
    let first_error = window.first_error.lock().ok().and_then(|f| f.clone());
    let rss = spread(judged.iter().filter_map(|s| s.rss_bytes));
    let rss_flat = rss["spread_pct"].as_f64().is_some_and(|p| p <= 5.0);
    BenchClient::close_all(clients).await;
    let (open_after, at_rest_after, settle_seconds) = settled(&server, &at_rest_before).await?;
    row(json!({
        "bench": "soak",
        "console": plan.console,
        "sessions": plan.sessions,
        "seconds": round(secs, 1),
        "pace_seconds": 0.0,
        "turns": turns,
        "errors": errors,
        "first_error": first_error,
        "turns_per_second": round(turns as f64 / secs, 1),
        "p50_ms": ms(&total, 0.5),
        "p99_ms": ms(&total, 0.99),
        "after_warmup": {
            "samples": judged.len(),
            "rss_bytes": rss,
            "open_fds": spread(judged.iter().filter_map(|s| s.open_fds)),
            "threads": spread(judged.iter().filter_map(|s| s.threads)),
            "tasks": spread(judged.iter().filter_map(|s| s.tasks)),
        },
        "rss_flat_within_5pct": rss_flat,
        "at_rest": {
            "before": at_rest_before,
            "after": at_rest_after,
            "open_sessions_after": open_after,
            "settle_seconds": settle_seconds,
        },
    }));
    server.stop().await;
    Ok(())
}

/// Longest wait for the server to come to rest after the load: past the model client's pool
/// idle timeout (reqwest's 90 s), which is when the connections the load opened to the model
/// close.
const SETTLE_LIMIT: Duration = Duration::from_secs(180);
/// Descriptors above the before-load reading that still count as back at rest.
const SETTLE_MARGIN_FDS: u64 = 16;

/// The server's figures once the clients are gone and the connections the load opened have
/// closed: sampled every 5 s until descriptors are back within a small margin of `before`
/// (or [`SETTLE_LIMIT`] passes). Returns the open sessions, the figures and the seconds it
/// took.
async fn settled(
    server: &ServerChild,
    before: &ProcessStats,
) -> anyhow::Result<(u64, ProcessStats, f64)> {
    let started = Instant::now();
    let baseline = before.open_fds.unwrap_or(0) + SETTLE_MARGIN_FDS;
    loop {
        let (sessions, now) = server.sample().await?;
        if now.open_fds.is_none_or(|fds| fds <= baseline) || started.elapsed() >= SETTLE_LIMIT {
            return Ok((sessions, now, round(started.elapsed().as_secs_f64(), 1)));
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// First, last, least and most of a series; the spread (most − least) as a percentage of the
/// least; and the drift: the mean of the last third against the mean of the first third, in
/// percent (a leak drifts; load that merely varies does not).
fn spread(values: impl Iterator<Item = u64>) -> Value {
    let values: Vec<u64> = values.collect();
    let (Some(&first), Some(&last)) = (values.first(), values.last()) else {
        return Value::Null;
    };
    let min = values.iter().copied().min().unwrap_or(first);
    let max = values.iter().copied().max().unwrap_or(first);
    let third = (values.len() / 3).max(1);
    let mean = |xs: &[u64]| xs.iter().sum::<u64>() as f64 / xs.len().max(1) as f64;
    let (early, late) = (
        mean(&values[..third]),
        mean(&values[values.len() - third..]),
    );
    json!({
        "first": first,
        "last": last,
        "min": min,
        "max": max,
        "spread_pct": round((max - min) as f64 * 100.0 / min.max(1) as f64, 2),
        "drift_pct": round((late - early) * 100.0 / early.max(1.0), 2),
    })
}

/// Opens `idle` sessions over MCP and reports the server's memory per session.
///
/// N sessions are opened over MCP and left idle; the row gives the server's memory per session.
pub async fn memory(idle: usize, console: bool) -> anyhow::Result<()> {
    let server = ServerChild::start(idle + 64, console).await?;
    let clients = connect_clients(&server.mcp_url, idle).await?;
    // Warm allocator and runtime with a few sessions and turns first.
    for client in &clients {
        let handle = client.start().await?;
        client.chat(&handle, "warm up").await?;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, before) = server.sample().await?;
    let mut opening = Vec::with_capacity(idle);
    for i in 0..idle {
        let client = clients[i % clients.len()].clone();
        opening.push(tokio::spawn(async move { client.start().await }));
    }
    for task in opening {
        task.await.context("an opening task panicked")??;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (sessions, after) = server.sample().await?;
    let (before_rss, after_rss) = (before.rss_bytes.unwrap_or(0), after.rss_bytes.unwrap_or(0));
    row(json!({
        "bench": "memory",
        "console": console,
        "idle_sessions": idle,
        "open_sessions": sessions,
        "rss_before_bytes": before_rss,
        "rss_after_bytes": after_rss,
        "bytes_per_session": after_rss.saturating_sub(before_rss) / idle.max(1) as u64,
        "tasks_before": before.tasks,
        "tasks_after": after.tasks,
        "open_fds_after": after.open_fds,
    }));
    BenchClient::close_all(clients).await;
    server.stop().await;
    Ok(())
}

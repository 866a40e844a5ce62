//! `bench load`: N sessions × K turns at once at zero pace against an in-process server, with
//! kept-alive connections and with one per request, alternately; [`load_run`] is also the
//! shape `bench store` measures each store with.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::client::{BenchClient, Connections, sessions_chatting};
use super::{bench_config, cpu, hours_tools, median, round, row};
use turnscope::app::App;
use turnscope::config::Config;
use turnscope::observe::Bus;

/// One run of N sessions × K turns at once against an in-process server.
pub(crate) struct LoadRun {
    /// Each answered turn's latency in ms, sorted.
    pub latencies_ms: Vec<f64>,
    /// Turns that failed.
    pub errors: usize,
    /// Wall time of the run.
    pub seconds: f64,
    /// What the server's store counted (writes, syncs).
    pub store: turnscope::store::StoreStats,
    /// CPU seconds the whole process (server and clients) used in the run (Linux).
    pub cpu_seconds: Option<f64>,
    /// CPU seconds of the file store's writer thread, when the run had one (Linux).
    pub store_thread_cpu_seconds: Option<f64>,
}

impl LoadRun {
    /// Answered turns per second.
    pub fn turns_per_second(&self) -> f64 {
        self.latencies_ms.len() as f64 / self.seconds
    }

    /// Cores busy on average over the run (process CPU ÷ wall time): near the machine's
    /// core count, the run was bound by CPU; well under it, by waiting.
    pub fn cores_busy(&self) -> Option<f64> {
        self.cpu_seconds.map(|cpu| round(cpu / self.seconds, 2))
    }

    /// Process CPU per answered turn, in ms.
    pub fn cpu_ms_per_turn(&self) -> Option<f64> {
        self.cpu_seconds
            .map(|cpu| round(cpu * 1000.0 / self.latencies_ms.len().max(1) as f64, 3))
    }

    /// The `q` quantile of the latencies, in ms.
    pub fn latency(&self, q: f64) -> f64 {
        let all = &self.latencies_ms;
        all.get(((all.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0.0)
    }
}

/// N sessions × K turns at once at zero pace on a server made from `config`.
pub(crate) async fn load_run(
    config: &Config,
    sessions: usize,
    turns: usize,
    connections: Connections,
) -> anyhow::Result<LoadRun> {
    let app = App::start_with_tools(config, Bus::default(), hours_tools()).await?;
    let url = app.server.mcp_url();
    // Several MCP clients share the sessions (one per 25 sessions), as many agents would.
    let clients: Vec<Arc<BenchClient>> = {
        let mut v = Vec::new();
        for _ in 0..sessions.div_ceil(25).clamp(1, 64) {
            v.push(Arc::new(
                BenchClient::connect_with(&url, connections).await?,
            ));
        }
        v
    };
    let started = Instant::now();
    let cpu_before = cpu::cpu_seconds();
    let store_before = cpu::thread_cpu_seconds(turnscope::store::sqlite::WRITER_THREAD);
    let (mut all, errors) = sessions_chatting(&clients, sessions, turns).await?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = cpu_before.zip(cpu::cpu_seconds()).map(|(a, b)| b - a);
    let store_thread_cpu_seconds = store_before
        .zip(cpu::thread_cpu_seconds(
            turnscope::store::sqlite::WRITER_THREAD,
        ))
        .map(|(a, b)| b - a);
    all.sort_by(f64::total_cmp);
    let store = app.sessions.store().stats();
    BenchClient::close_all(clients).await;
    app.shutdown().await;
    Ok(LoadRun {
        latencies_ms: all,
        errors,
        seconds,
        store,
        cpu_seconds,
        store_thread_cpu_seconds,
    })
}

/// `runs` rounds of N sessions × K turns, each round with kept-alive connections and then with
/// a connection per request (what every bench client did before): a row per run, then a
/// summary row per mode with its medians and its turns/s as a share of kept-alive's.
pub(crate) async fn run(sessions: usize, turns: usize, runs: usize) -> anyhow::Result<()> {
    let modes = [Connections::KeptAlive, Connections::PerRequest];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for run in 0..runs.max(1) {
        for (m, connections) in modes.into_iter().enumerate() {
            let config = bench_config(0.0, Some(7), sessions + 8);
            let done = load_run(&config, sessions, turns, connections).await?;
            rates[m].push(done.turns_per_second());
            row(json!({
                "bench": "load",
                "run": run + 1,
                "connections": connections.label(),
                "sessions": sessions,
                "turns_per_session": turns,
                "pace_seconds": 0.0,
                "turns": done.latencies_ms.len(),
                "errors": done.errors,
                "seconds": round(done.seconds, 3),
                "turns_per_second": round(done.turns_per_second(), 1),
                "p50_ms": round(done.latency(0.5), 3),
                "p99_ms": round(done.latency(0.99), 3),
                "cores_busy": done.cores_busy(),
                "cpu_ms_per_turn": done.cpu_ms_per_turn(),
            }));
        }
    }
    let medians: Vec<f64> = rates.iter().map(|r| median(r)).collect();
    for (m, connections) in modes.into_iter().enumerate() {
        row(json!({
            "bench": "load",
            "summary": connections.label(),
            "runs": runs.max(1),
            "median_turns_per_second": round(medians[m], 1),
            "share_of_kept_alive": round(medians[m] / medians[0].max(f64::MIN_POSITIVE), 3),
        }));
    }
    Ok(())
}

//! `bench load`: N sessions × K turns at once at zero pace against an in-process server, with
//! kept-alive connections and with one per request, by the lean client (`bench::lean`) and by
//! rmcp's, alternately; [`load_run`] is also the shape `bench store` measures each store with.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use serde_json::json;

use super::client::{BenchClient, Connections, TurnClient, sessions_chatting};
use super::lean::{self, LeanClient};
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
    /// CPU seconds of the clients' threads in the run (Linux); the rest of `cpu_seconds` is
    /// the server's.
    pub clients_cpu_seconds: Option<f64>,
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

    /// CPU per answered turn of the server (the process less the clients' threads), in ms.
    pub fn server_cpu_ms_per_turn(&self) -> Option<f64> {
        self.cpu_seconds
            .zip(self.clients_cpu_seconds)
            .map(|(all, clients)| {
                round(
                    (all - clients) * 1000.0 / self.latencies_ms.len().max(1) as f64,
                    3,
                )
            })
    }

    /// The `q` quantile of the latencies, in ms.
    pub fn latency(&self, q: f64) -> f64 {
        let all = &self.latencies_ms;
        all.get(((all.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0.0)
    }
}

/// Which MCP client a load run drives the server with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoadClient {
    /// `bench::lean`: the exchange spoken directly, a small share of the run's CPU.
    Lean,
    /// rmcp's client (`bench::client`), as the other benches and most agents use.
    Rmcp,
}

impl LoadClient {
    /// The name a row gives it.
    fn label(self) -> &'static str {
        match self {
            LoadClient::Lean => "lean",
            LoadClient::Rmcp => "rmcp",
        }
    }
}

/// The name of the threads the load's clients run on (a runtime of their own), so a run's CPU
/// splits into the clients' and the server's.
const CLIENT_THREADS: &str = "bench-clients";

/// N sessions × K turns at once at zero pace on a server made from `config`. The server runs on
/// the caller's runtime; the clients on one of their own (two threads named
/// [`CLIENT_THREADS`]), as clients in other processes would.
pub(crate) async fn load_run(
    config: &Config,
    sessions: usize,
    turns: usize,
    connections: Connections,
    client: LoadClient,
) -> anyhow::Result<LoadRun> {
    let app = App::start_with_tools(config, Bus::default(), hours_tools()).await?;
    let url = app.server.mcp_url();
    let clients_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(CLIENT_THREADS)
        .enable_all()
        .build()
        .context("starting the bench clients' runtime")?;
    let measured = clients_runtime
        .spawn(clients_chatting(url, sessions, turns, connections, client))
        .await
        .context("the bench clients' task panicked")?;
    clients_runtime.shutdown_background();
    let store = app.sessions.store().stats();
    app.shutdown().await;
    Ok(LoadRun { store, ..measured? })
}

/// Connects the clients of a run, measures their sessions chatting, closes them.
async fn clients_chatting(
    url: String,
    sessions: usize,
    turns: usize,
    connections: Connections,
    client: LoadClient,
) -> anyhow::Result<LoadRun> {
    // Several MCP clients share the sessions (one per 25 sessions), as many agents would.
    let count = sessions.div_ceil(25).clamp(1, 64);
    match client {
        LoadClient::Rmcp => {
            let mut clients = Vec::with_capacity(count);
            for _ in 0..count {
                clients.push(Arc::new(
                    BenchClient::connect_with(&url, connections).await?,
                ));
            }
            let measured = measure(&clients, sessions, turns).await;
            BenchClient::close_all(clients).await;
            measured
        }
        LoadClient::Lean => {
            let http = lean::http_client(connections == Connections::KeptAlive)?;
            let mut clients = Vec::with_capacity(count);
            for _ in 0..count {
                clients.push(Arc::new(LeanClient::connect(&http, &url).await?));
            }
            let measured = measure(&clients, sessions, turns).await;
            for client in clients {
                if let Ok(client) = Arc::try_unwrap(client) {
                    client.close().await;
                }
            }
            measured
        }
    }
}

/// The timed part of a load run: the sessions chatting, and the CPU they took.
async fn measure<C: TurnClient>(
    clients: &[Arc<C>],
    sessions: usize,
    turns: usize,
) -> anyhow::Result<LoadRun> {
    let started = Instant::now();
    let cpu_before = cpu::cpu_seconds();
    let clients_before = cpu::thread_cpu_seconds(CLIENT_THREADS);
    let store_before = cpu::thread_cpu_seconds(turnscope::store::sqlite::WRITER_THREAD);
    let (mut all, errors) = sessions_chatting(clients, sessions, turns).await?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = cpu_before.zip(cpu::cpu_seconds()).map(|(a, b)| b - a);
    let clients_cpu_seconds = clients_before
        .zip(cpu::thread_cpu_seconds(CLIENT_THREADS))
        .map(|(a, b)| b - a);
    let store_thread_cpu_seconds = store_before
        .zip(cpu::thread_cpu_seconds(
            turnscope::store::sqlite::WRITER_THREAD,
        ))
        .map(|(a, b)| b - a);
    all.sort_by(f64::total_cmp);
    Ok(LoadRun {
        latencies_ms: all,
        errors,
        seconds,
        store: Default::default(),
        cpu_seconds,
        clients_cpu_seconds,
        store_thread_cpu_seconds,
    })
}

/// The modes of `bench load`, in the order each round runs them; the first is what the
/// summary compares the others to.
const MODES: [(LoadClient, Connections); 4] = [
    (LoadClient::Lean, Connections::KeptAlive),
    (LoadClient::Rmcp, Connections::KeptAlive),
    (LoadClient::Lean, Connections::PerRequest),
    (LoadClient::Rmcp, Connections::PerRequest),
];

/// `runs` rounds of N sessions × K turns, each round in every mode (the lean client and rmcp's,
/// with kept-alive connections and with a connection per request): a row per run, then a
/// summary row per mode with its medians and its turns/s as a share of the first mode's.
pub(crate) async fn run(sessions: usize, turns: usize, runs: usize) -> anyhow::Result<()> {
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    for run in 0..runs.max(1) {
        for (m, (client, connections)) in MODES.into_iter().enumerate() {
            let config = bench_config(0.0, Some(7), sessions + 8);
            let done = load_run(&config, sessions, turns, connections, client).await?;
            rates[m].push(done.turns_per_second());
            row(json!({
                "bench": "load",
                "run": run + 1,
                "client": client.label(),
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
                "server_cpu_ms_per_turn": done.server_cpu_ms_per_turn(),
            }));
        }
    }
    let medians: Vec<f64> = rates.iter().map(|r| median(r)).collect();
    for (m, (client, connections)) in MODES.into_iter().enumerate() {
        row(json!({
            "bench": "load",
            "summary": format!("{}, {}", client.label(), connections.label()),
            "runs": runs.max(1),
            "median_turns_per_second": round(medians[m], 1),
            "share_of_first": round(medians[m] / medians[0].max(f64::MIN_POSITIVE), 3),
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_mode_answers_every_turn_of_a_small_load() {
        for (client, connections) in MODES {
            let config = bench_config(0.0, Some(7), 8);
            let done = load_run(&config, 3, 2, connections, client).await.unwrap();
            let mode = (client.label(), connections.label());
            assert_eq!(done.errors, 0, "{mode:?}");
            assert_eq!(done.latencies_ms.len(), 6, "{mode:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_lean_client_counts_a_refused_chat_as_failed() {
        let config = bench_config(0.0, Some(7), 8);
        let app = App::start_with_tools(&config, Bus::default(), hours_tools())
            .await
            .unwrap();
        let http = lean::http_client(true).unwrap();
        let client = LeanClient::connect(&http, &app.server.mcp_url())
            .await
            .unwrap();
        let handle = client.start().await.unwrap();
        assert!(
            client
                .chat(&handle, "hello")
                .await
                .unwrap()
                .contains("hello")
        );
        let refused = client.chat("no-such-handle", "hello").await.unwrap_err();
        assert!(refused.to_string().contains("chat failed"), "{refused}");
        client.close().await;
        app.shutdown().await;
    }
}
